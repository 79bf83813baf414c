//! High availability as deployments run it: two PostgreSQL nodes under Patroni (etcd as its
//! store, synchronous replication on), reached through HAProxy routing by Patroni's health check
//! or through a libpq host list with `target_session_attrs=read-write`. A workload of shared
//! inserts, transfers in transactions and point selects runs across a switchover, a crash of the
//! leader (Patroni and postmaster killed) and a postmaster kill; afterwards every outcome is
//! checked against the tables, and the time from each new primary accepting writes (seen by psql,
//! independently of the client) to the client's first success on each path is reported and
//! bounded.
//!
//! These run on smol, tokio and glommio (the `connecting` suite).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::thread;
use std::time::{Duration, Instant};

use pgpipe::{Config, Error};
use pgpipe_tests::{psql_with, HaProxy, Patroni};

use crate::{off_thread, Db, Harness};

/// Tasks of each kind, and the pause each takes between its statements.
const WRITERS: usize = 40;
const MOVERS: usize = 20;
const READERS: usize = 20;
const PAUSE: Duration = Duration::from_millis(5);
const ACCOUNTS: i32 = 10;

/// What the statement of each kind must reach within, once the new primary accepts writes.
const RECOVERY_BOUND: Duration = Duration::from_secs(1);

/// Which kind of work an outcome belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Work {
    /// A shared-path insert of one id.
    Insert,
    /// A transaction moving 1 between two accounts and recording the move under its id.
    Transfer,
    /// A shared-path point select.
    Read,
}

/// What an outcome says about whether the write is in the table.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Said {
    /// Acknowledged: it must be there.
    Done,
    /// Sent and definitely failed (the server's error, or a transaction not committed): it must
    /// not be there.
    Failed,
    /// Never sent (the client waited for a server past its bound): must not be there, and there
    /// must be none of these.
    NeverSent,
    /// Sent, outcome unknown: either.
    Unknown,
    /// The caller's deadline passed: a hang, of which there must be none.
    TimedOut,
}

#[derive(Debug)]
struct Outcome {
    work: Work,
    id: i32,
    src: i32,
    dst: i32,
    done: Instant,
    said: Said,
    error: Option<String>,
}

fn classify(e: &Error) -> Said {
    match e {
        Error::Db(_) | Error::BeginFailed(_) | Error::CommitFailed(_) | Error::RolledBack => {
            Said::Failed
        }
        Error::NotDispatched { .. }
        | Error::NoConnection { .. }
        | Error::NoServer { .. }
        | Error::WrongRole { .. }
        | Error::CheckoutTimeout { .. } => Said::NeverSent,
        Error::IndeterminateCommit { .. } => Said::Unknown,
        // Sent before COMMIT: the server rolls the transaction back when its connection dies.
        Error::Indeterminate { .. } => Said::Unknown,
        Error::Timeout => Said::TimedOut,
        other => panic!("unexpected error: {other:?}"),
    }
}

/// How the client reaches the primary.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    HaProxy,
    HostList,
}

/// Through HAProxy, which routes to the node whose Patroni answers `/primary`.
pub async fn patroni_failovers_through_haproxy_keep_every_outcome_truthful<H: Harness>() {
    ride_through::<H>(
        "patroni_failovers_through_haproxy_keep_every_outcome_truthful",
        Path::HaProxy,
    )
    .await;
}

/// Through a libpq host list of both nodes with `target_session_attrs=read-write`.
pub async fn patroni_failovers_through_a_host_list_keep_every_outcome_truthful<H: Harness>() {
    ride_through::<H>(
        "patroni_failovers_through_a_host_list_keep_every_outcome_truthful",
        Path::HostList,
    )
    .await;
}

/// A fault and when the server side of it ended.
struct Fault {
    name: &'static str,
    began: Instant,
    /// When psql first found the node that now leads accepting writes.
    ready: Instant,
    /// Through HAProxy: when psql first reached a primary through it.
    routed: Option<Instant>,
}

async fn ride_through<H: Harness>(test: &str, path: Path) {
    if !pgpipe_tests::patroni::available_or_skip(test)
        || (path == Path::HaProxy && !pgpipe_tests::haproxy::available_or_skip(test))
    {
        return;
    }
    let (patroni, proxy) = off_thread::<H, _>(move || {
        let patroni = Patroni::start(2, true).expect("Patroni cluster");
        let sql = format!(
            "CREATE TABLE ha_writes (id int PRIMARY KEY); \
             CREATE TABLE ha_accounts (id int PRIMARY KEY, balance int NOT NULL); \
             INSERT INTO ha_accounts SELECT g, 0 FROM generate_series(0, {}) g; \
             CREATE TABLE ha_transfers (id int PRIMARY KEY, src int NOT NULL, dst int NOT NULL)",
            ACCOUNTS - 1
        );
        psql_with(&patroni.conninfo(0), &sql).expect("tables");
        let proxy = match path {
            Path::HaProxy => Some(HaProxy::start_for_patroni(&patroni.ports()).expect("haproxy")),
            Path::HostList => None,
        };
        (patroni, proxy)
    })
    .await;
    let url = match &proxy {
        Some(p) => format!(
            "{}?target_session_attrs=read-write&connect_timeout=2",
            p.url()
        ),
        None => format!("{}&connect_timeout=2", patroni.host_list_url()),
    };
    let mut cfg = Config::parse_with_env(&url, |_| None).expect("URL");
    cfg.max_connections = 8;
    // Longer than the leader key's ttl (6 s) and Patroni's loop: work that finds no primary
    // waits out a failover instead of failing.
    cfg.dispatch_timeout = Duration::from_secs(20);
    cfg.checkout_timeout = Some(Duration::from_secs(20));
    cfg.query_timeout = Some(Duration::from_secs(30));
    let db = H::connect(cfg).await.expect("connect");

    let outcomes = Rc::new(RefCell::new(Vec::<Outcome>::new()));
    let stop = Rc::new(RefCell::new(false));
    let mut tasks = Vec::new();
    for t in 0..WRITERS + MOVERS + READERS {
        let (db, outcomes, stop) = (db.clone(), outcomes.clone(), stop.clone());
        tasks.push(H::spawn(async move {
            let work = match t {
                t if t < WRITERS => Work::Insert,
                t if t < WRITERS + MOVERS => Work::Transfer,
                _ => Work::Read,
            };
            let mut seq = 0;
            while !*stop.borrow() {
                let id = (t * 100_000 + seq) as i32;
                seq += 1;
                let (src, dst) = (id % ACCOUNTS, (id / 7 + 1 + id) % ACCOUNTS);
                let result = match work {
                    Work::Insert => db
                        .execute("INSERT INTO ha_writes VALUES ($1)", &[&id])
                        .await
                        .map(drop)
                        .map_err(|e| (classify(&e), Some(e.to_string()))),
                    Work::Transfer => transfer::<H>(&db, id, src, dst)
                        .await
                        .map_err(|(said, e)| (said, Some(e))),
                    Work::Read => db
                        .query_one("SELECT balance FROM ha_accounts WHERE id = $1", &[&src])
                        .await
                        .map(drop)
                        .map_err(|e| (classify(&e), Some(e.to_string()))),
                };
                let (said, error) = result.err().unwrap_or((Said::Done, None));
                outcomes.borrow_mut().push(Outcome {
                    work,
                    id,
                    src,
                    dst,
                    done: Instant::now(),
                    said,
                    error,
                });
                H::sleep(PAUSE).await;
            }
        }));
    }

    H::sleep(Duration::from_secs(1)).await;
    let through = proxy.as_ref().map(|p| {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=1 \
             target_session_attrs=read-write",
            p.port()
        )
    });
    let (patroni, faults) = off_thread::<H, _>(move || {
        let mut patroni = patroni;
        let routed = |ready: Instant| through.as_deref().map(|ci| ready.max(primary_at(ci)));
        let mut faults = Vec::new();
        // A planned switchover to node 1.
        let began = Instant::now();
        let ready = thread::scope(|s| {
            let p = &patroni;
            let switch = s.spawn(move || p.switchover(1));
            let ready = accepts_writes(&patroni, 1, false);
            switch
                .join()
                .expect("switchover thread")
                .expect("switchover");
            ready
        });
        faults.push(Fault {
            name: "switchover",
            began,
            ready,
            routed: routed(ready),
        });
        patroni
            .wait_for_sync_standby(Duration::from_secs(60))
            .expect("node 0 synchronous again");
        thread::sleep(Duration::from_secs(2));
        // The leader's machine dies: Patroni promotes node 0 once the leader key expires.
        let began = Instant::now();
        patroni.crash(1);
        let ready = accepts_writes(&patroni, 0, false);
        faults.push(Fault {
            name: "leader crash",
            began,
            ready,
            routed: routed(ready),
        });
        thread::sleep(Duration::from_secs(2));
        // The postmaster alone dies: Patroni starts it again, still the leader.
        let began = Instant::now();
        patroni.kill_postmaster(0);
        let ready = accepts_writes(&patroni, 0, true);
        faults.push(Fault {
            name: "postmaster kill",
            began,
            ready,
            routed: routed(ready),
        });
        thread::sleep(Duration::from_secs(2));
        (patroni, faults)
    })
    .await;
    *stop.borrow_mut() = true;
    for t in tasks {
        t.await;
    }
    db.close().await;
    let outcomes = outcomes.take();
    let stored = off_thread::<H, _>(move || {
        let stored = Stored::read(&patroni, 0);
        drop((proxy, patroni));
        stored
    })
    .await;
    check(test, path, &outcomes, &stored, &faults);
}

/// Moves 1 from `src` to `dst` and records the move as `id`, in one transaction. An error
/// says what it means for the transaction: up to its first statement, the error's own word;
/// after a statement went out and before COMMIT did, the transaction died uncommitted
/// (`Failed`), whatever the statement's own error.
async fn transfer<H: Harness>(
    db: &Db<H>,
    id: i32,
    src: i32,
    dst: i32,
) -> Result<(), (Said, String)> {
    let own = |e: Error| (classify(&e), e.to_string());
    let tx = db
        .transaction()
        .await
        .map_err(|e| (classify(&e), format!("checkout: {e}")))?;
    tx.execute(
        "UPDATE ha_accounts SET balance = balance - 1 WHERE id = $1",
        &[&src],
    )
    .await
    .map_err(own)?;
    let after_first = |e: Error| match classify(&e) {
        Said::TimedOut => (Said::TimedOut, e.to_string()),
        _ => (Said::Failed, e.to_string()),
    };
    tx.execute(
        "UPDATE ha_accounts SET balance = balance + 1 WHERE id = $1",
        &[&dst],
    )
    .await
    .map_err(after_first)?;
    tx.execute(
        "INSERT INTO ha_transfers VALUES ($1, $2, $3)",
        &[&id, &src, &dst],
    )
    .await
    .map_err(after_first)?;
    // A COMMIT that never went out, or that the server refused, leaves the transaction
    // uncommitted; only one whose answer was lost leaves it unknown.
    tx.commit().await.map_err(|e| match classify(&e) {
        Said::Unknown | Said::TimedOut => own(e),
        _ => (Said::Failed, e.to_string()),
    })
}

/// Polls node `i` with psql until it is a primary; with `down_first`, only after it was seen
/// down. Returns when the successful attempt began: the earliest it could have been ready.
fn accepts_writes(patroni: &Patroni, i: usize, down_first: bool) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen_down = !down_first;
    loop {
        let tried = Instant::now();
        match psql_with(&patroni.conninfo(i), "SELECT pg_is_in_recovery()") {
            Ok(out) if seen_down && out.trim() == "f" => return tried,
            Ok(_) => {}
            Err(_) => seen_down = true,
        }
        assert!(Instant::now() < deadline, "node {i} never accepted writes");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `conninfo` (through HAProxy, `target_session_attrs=read-write`) with psql until it
/// reaches a primary; returns when the successful attempt began.
fn primary_at(conninfo: &str) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let tried = Instant::now();
        if psql_with(conninfo, "SELECT 1").is_ok() {
            return tried;
        }
        assert!(Instant::now() < deadline, "HAProxy never reached a primary");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The tables as the last primary has them.
struct Stored {
    writes: BTreeSet<i32>,
    transfers: BTreeMap<i32, (i32, i32)>,
    balances: BTreeMap<i32, i64>,
}

impl Stored {
    fn read(patroni: &Patroni, i: usize) -> Stored {
        let ci = patroni.conninfo(i);
        let rows = |sql: &str| -> Vec<Vec<i64>> {
            psql_with(&ci, sql)
                .expect("read back")
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| l.split('|').map(|v| v.parse().expect("number")).collect())
                .collect()
        };
        Stored {
            writes: rows("SELECT id FROM ha_writes")
                .iter()
                .map(|r| r[0] as i32)
                .collect(),
            transfers: rows("SELECT id, src, dst FROM ha_transfers")
                .iter()
                .map(|r| (r[0] as i32, (r[1] as i32, r[2] as i32)))
                .collect(),
            balances: rows("SELECT id, balance FROM ha_accounts")
                .iter()
                .map(|r| (r[0] as i32, r[1]))
                .collect(),
        }
    }
}

fn check(test: &str, path: Path, outcomes: &[Outcome], stored: &Stored, faults: &[Fault]) {
    let mut problems = Vec::new();
    let mut count = BTreeMap::<(&str, Said), usize>::new();
    for o in outcomes {
        let name = match o.work {
            Work::Insert => "insert",
            Work::Transfer => "transfer",
            Work::Read => "read",
        };
        *count.entry((name, o.said)).or_default() += 1;
        let there = match o.work {
            Work::Insert => stored.writes.contains(&o.id),
            Work::Transfer => stored.transfers.get(&o.id) == Some(&(o.src, o.dst)),
            Work::Read => continue,
        };
        match o.said {
            Said::Done if !there => problems.push(format!("{name} {} acknowledged, lost", o.id)),
            Said::Failed | Said::NeverSent if there => problems.push(format!(
                "{name} {} reported failed ({:?}), but stored",
                o.id, o.error
            )),
            _ => {}
        }
        if matches!(o.said, Said::NeverSent | Said::TimedOut) {
            problems.push(format!("{name} {} {:?}: {:?}", o.id, o.said, o.error));
        }
    }
    // Each transfer is all or nothing: the balances are what the recorded moves made them.
    let mut expected = BTreeMap::<i32, i64>::new();
    for &(src, dst) in stored.transfers.values() {
        *expected.entry(src).or_default() -= 1;
        *expected.entry(dst).or_default() += 1;
    }
    for (acc, balance) in &stored.balances {
        let want = expected.get(acc).copied().unwrap_or(0);
        if *balance != want {
            problems.push(format!(
                "account {acc}: balance {balance}, moves say {want}"
            ));
        }
    }
    let mut lags = Vec::new();
    for f in faults {
        let first = |work: Work| {
            outcomes
                .iter()
                .filter(|o| o.work == work && o.said == Said::Done && o.done >= f.ready)
                .map(|o| o.done - f.ready)
                .min()
        };
        let (shared, tx) = (first(Work::Insert), first(Work::Transfer));
        let routed = f
            .routed
            .map(|r| {
                format!(
                    ", psql through HAProxy reached it {:?} after that",
                    r - f.ready
                )
            })
            .unwrap_or_default();
        eprintln!(
            "{test} ({path:?}): {}: new primary accepted writes {:?} after the fault{routed}; \
             first shared insert {shared:?} and first transaction {tx:?} after it accepted",
            f.name,
            f.ready - f.began
        );
        lags.push((f.name, shared, tx));
    }
    eprintln!("{test} ({path:?}): outcomes {count:?}");
    for (name, shared, tx) in lags {
        for (what, lag) in [("shared insert", shared), ("transaction", tx)] {
            match lag {
                Some(lag) if lag <= RECOVERY_BOUND => {}
                other => problems.push(format!(
                    "after the {name}, first {what} {other:?} after the new primary accepted writes"
                )),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems: {:#?}",
        problems.len(),
        &problems[..problems.len().min(30)]
    );
}
