//! Reconnecting under load: a server restart, every backend terminated. Units in flight
//! resolve with typed errors that say they were sent; units that had not left the client
//! wait for a live connection (`dispatch_timeout`) and succeed, so neither a query nor a
//! transaction's checkout fails with an error for work never sent. The service comes back by
//! itself.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use pgpipe::{Config, Error};
use pgpipe_tests::{Cluster, HaProxy};

use crate::{off_thread, psql, psql_async, wait_until, Db, Harness, Local};

/// The ids psql printed, one per line.
fn ids(out: &str) -> Vec<i64> {
    out.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// A client whose connections all wait to open again tries at least every 250 ms
/// (`driver/open/reached.rs`), so a restarted server is served again within that and a
/// connect after it accepts connections; the bound leaves room for a loaded machine.
const RECOVERY_BOUND: Duration = Duration::from_secs(8);

/// How each unit of the load resolved.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Ok,
    /// Sent, and its connection died under it: `Indeterminate`, or the server's own
    /// termination error (57P01) as the answer to it.
    Sent,
    /// An error for work that never reached the server.
    NeverSent,
}

/// What the load saw, in the order the units resolved.
#[derive(Default)]
struct Log {
    units: Vec<(Instant, Outcome)>,
    /// The never-sent errors themselves, for the failure message.
    never_sent: Vec<String>,
    /// A table one task inserts into (instead of selecting), and the ids it inserted: those
    /// that succeeded and those whose outcome is unknown (sent, then the connection died).
    table: Option<String>,
    inserted: Vec<i64>,
    maybe: Vec<i64>,
}

impl Log {
    /// What the table holds agrees with what the callers were told: every insert that
    /// succeeded is stored, and nothing is stored that was not sent.
    fn check_table(&self, stored: &[i64]) {
        for id in &self.inserted {
            assert!(stored.contains(id), "{id} succeeded but is not stored");
        }
        for id in stored {
            assert!(
                self.inserted.contains(id) || self.maybe.contains(id),
                "{id} is stored but its insert failed as never sent"
            );
        }
    }
}

fn sent(e: &Error) -> bool {
    matches!(
        e,
        Error::Indeterminate { .. } | Error::IndeterminateCommit { .. }
    ) || e.code().is_some_and(|c| c.as_str() == "57P01")
}

/// Four tasks of point selects and one of transactions on `db` until `stop`: every unit's
/// outcome goes to the log; a wrong row or an untyped error fails the test at once.
fn load<H: Harness>(db: &Db<H>, stop: &Rc<Cell<bool>>, log: &Rc<RefCell<Log>>) -> Vec<Local<()>> {
    let record = |log: &Rc<RefCell<Log>>, r: Result<(), Error>| {
        let mut log = log.borrow_mut();
        let outcome = match r {
            Ok(()) => Outcome::Ok,
            Err(e) if sent(&e) => Outcome::Sent,
            Err(e @ (Error::NotDispatched { .. } | Error::NoConnection { .. })) => {
                log.never_sent.push(e.to_string());
                Outcome::NeverSent
            }
            Err(e) => panic!("an untyped or wrong failure: {e:?}"),
        };
        log.units.push((Instant::now(), outcome));
        outcome
    };
    let mut tasks: Vec<_> = (0..4i64)
        .map(|t| {
            let (db, stop, log) = (db.clone(), stop.clone(), log.clone());
            H::spawn(async move {
                let mut n = t * 1_000_000;
                let table = log.borrow().table.clone().filter(|_| t == 3);
                let insert = table.map(|t| format!("INSERT INTO {t} VALUES ($1) RETURNING id"));
                while !stop.get() {
                    n += 1;
                    let sql = insert.as_deref().unwrap_or("SELECT $1::int8");
                    let r = db.query_one(sql, &[&n]).await.map(|row| {
                        assert_eq!(row.get::<_, i64>(0), n, "a unit got another's row");
                    });
                    if insert.is_some() {
                        let mut l = log.borrow_mut();
                        match &r {
                            Ok(()) => l.inserted.push(n),
                            Err(e) if sent(e) => l.maybe.push(n),
                            Err(_) => {}
                        }
                    }
                    if record(&log, r) != Outcome::Ok {
                        // Do not spin on a failure.
                        H::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        })
        .collect();
    let (db, stop, log) = (db.clone(), stop.clone(), log.clone());
    tasks.push(H::spawn(async move {
        let mut n = 0i64;
        while !stop.get() {
            n += 1;
            // The checkout sends nothing: its failure is one for work never sent. Inside the
            // transaction the held connection may die under a statement: the caller's to retry.
            let tx = match db.transaction().await {
                Ok(tx) => tx,
                Err(e) => {
                    let e = match e {
                        e @ (Error::NotDispatched { .. } | Error::NoConnection { .. }) => e,
                        other => Error::NoConnection {
                            reason: format!("checkout failed: {other}").into(),
                        },
                    };
                    record(&log, Err(e));
                    H::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            };
            let r = async {
                let row = tx.query_one("SELECT $1::int8", &[&n]).await?;
                assert_eq!(row.get::<_, i64>(0), n, "a transaction got another's row");
                tx.commit().await
            }
            .await;
            let r = match r {
                Err(e @ Error::NotDispatched { .. }) => Err(Error::Indeterminate {
                    reason: format!("the held connection died: {e}").into(),
                }),
                other => other,
            };
            if record(&log, r) != Outcome::Ok {
                H::sleep(Duration::from_millis(5)).await;
            }
        }
    }));
    tasks
}

/// Ends the load and checks what it saw after `ready` (the fault is over): the service came
/// back, and nothing failed that was never sent. Returns (units, sent failures, recovery).
async fn finish<H: Harness, F: std::future::Future<Output = Vec<i64>>>(
    stop: &Rc<Cell<bool>>,
    log: &Rc<RefCell<Log>>,
    tasks: Vec<Local<()>>,
    ready: Instant,
    stored: impl FnOnce(String) -> F,
) -> (usize, usize, Duration) {
    wait_until::<H>(|| {
        log.borrow()
            .units
            .iter()
            .any(|&(at, o)| o == Outcome::Ok && at > ready)
    })
    .await;
    stop.set(true);
    for t in tasks {
        t.await;
    }
    let log = std::mem::take(&mut *log.borrow_mut());
    if let Some(table) = &log.table {
        let stored: Vec<i64> = stored(table.clone()).await;
        assert!(!log.inserted.is_empty(), "no insert succeeded");
        log.check_table(&stored);
        eprintln!(
            "{}: inserts: {} succeeded, {} unknown (sent, connection lost), {} stored: the \
             table agrees",
            H::name(),
            log.inserted.len(),
            log.maybe.len(),
            stored.len()
        );
    }
    assert!(
        log.never_sent.is_empty(),
        "{} units failed that were never sent, first: {}",
        log.never_sent.len(),
        log.never_sent[0]
    );
    let back = log
        .units
        .iter()
        .find(|&&(at, o)| o == Outcome::Ok && at > ready)
        .map(|&(at, _)| at - ready)
        .expect("served again");
    let failed = log.units.iter().filter(|u| u.1 == Outcome::Sent).count();
    (log.units.len(), failed, back)
}

pub async fn a_server_restart_fails_only_sent_units_and_service_resumes<H: Harness>() {
    let cluster = off_thread::<H, _>(|| Cluster::start().expect("a cluster to restart")).await;
    let mut cfg = Config::parse(&cluster.url()).expect("cluster URL");
    cfg.pipeline_size = 2;
    cfg.max_connections = 4;
    cfg.pinned_size = 1;
    let table = format!("restart_inserts_{}", H::name());
    cluster
        .psql(&format!("CREATE TABLE {table} (id int8 PRIMARY KEY)"))
        .expect("table");
    let db = H::connect(cfg).await.expect("connect");
    let stop = Rc::new(Cell::new(false));
    let log = Rc::new(RefCell::new(Log {
        table: Some(table),
        ..Log::default()
    }));
    let tasks = load::<H>(&db, &stop, &log);
    wait_until::<H>(|| log.borrow().units.len() >= 200).await;
    let cluster = off_thread::<H, _>(move || {
        let mut cluster = cluster;
        cluster.restart().expect("restart");
        cluster
    })
    .await;
    let ready = Instant::now();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let stored = |table: String| {
        off_thread::<H, _>(move || ids(&c.psql(&format!("SELECT id FROM {table}")).expect("ids")))
    };
    let (units, failed, back) = finish::<H, _>(&stop, &log, tasks, ready, stored).await;
    eprintln!(
        "{}: {units} units, {failed} sent ones failed with typed errors, none never sent; \
         served again {back:?} after the server was ready",
        H::name()
    );
    assert!(back < RECOVERY_BOUND, "service resumed only after {back:?}");
    assert!(db.stats().total.reconnects >= 1, "{:?}", db.stats().total);
    db.close().await;
    drop(cluster);
}

pub async fn terminated_backends_fail_only_sent_units<H: Harness>() {
    let mut cfg = crate::config(|c| {
        c.pipeline_size = 2;
        c.max_connections = 4;
        c.pinned_size = 1;
    });
    let app = cfg.application_name.clone().expect("the test's name");
    cfg.application_name = Some(app.clone());
    let table = format!("terminated_inserts_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int8 PRIMARY KEY)"
    ));
    let db = H::connect(cfg).await.expect("connect");
    let stop = Rc::new(Cell::new(false));
    let log = Rc::new(RefCell::new(Log {
        table: Some(table),
        ..Log::default()
    }));
    let tasks = load::<H>(&db, &stop, &log);
    let kill = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = '{app}'"
    );
    let mut killed = 0;
    for round in 0..5 {
        let seen = log.borrow().units.len();
        // Both shared connections are back and serving: the round terminates them both.
        wait_until::<H>(|| db.live_connections() == 2 && log.borrow().units.len() >= seen + 100)
            .await;
        let n: usize = psql_async::<H>(&kill)
            .await
            .trim()
            .parse()
            .expect("a count");
        assert!(n >= 2, "round {round}: {n} backends to terminate");
        killed += n;
    }
    let ready = Instant::now();
    let stored = |table: String| async move {
        ids(&psql_async::<H>(&format!("SELECT id FROM {table}")).await)
    };
    let (units, failed, back) = finish::<H, _>(&stop, &log, tasks, ready, stored).await;
    eprintln!(
        "{}: {killed} backends terminated in 5 rounds; {units} units, {failed} sent ones failed \
         with typed errors, none never sent; served again {back:?} after the last round",
        H::name()
    );
    assert!(db.stats().total.reconnects >= 5, "{:?}", db.stats().total);
    db.close().await;
}

/// While the server is down, a unit waits out `dispatch_timeout` (or its own deadline, the
/// shorter) and then fails saying why no connection came back; one waiting when the server
/// returns runs.
pub async fn units_wait_for_a_server_within_their_bounds<H: Harness>() {
    let mut cluster = off_thread::<H, _>(|| Cluster::start().expect("a cluster to stop")).await;
    let connect = |f: fn(&mut Config)| {
        let mut cfg = Config::parse(&cluster.url()).expect("cluster URL");
        cfg.pipeline_size = 1;
        cfg.pinned_size = 1;
        cfg.max_connections = 2;
        f(&mut cfg);
        H::connect(cfg)
    };
    let bounded = connect(|c| c.dispatch_timeout = Duration::from_millis(400))
        .await
        .expect("connect");
    let deadline = connect(|c| c.query_timeout = Some(Duration::from_millis(150)))
        .await
        .expect("connect");
    let patient = connect(|_| {}).await.expect("connect");
    for db in [&bounded, &deadline, &patient] {
        db.query_one("SELECT 1", &[]).await.expect("served");
    }
    cluster = off_thread::<H, _>(move || {
        cluster.halt();
        cluster
    })
    .await;
    wait_until::<H>(|| bounded.live_connections() == 0 && patient.live_connections() == 0).await;

    let t = Instant::now();
    match bounded.query_one("SELECT 1", &[]).await {
        Err(Error::NoConnection { reason }) => {
            assert!(reason.contains("none came back within"), "{reason}");
            assert!(reason.contains("reconnecting"), "the last error: {reason}");
        }
        other => panic!("a down server past dispatch_timeout: {other:?}"),
    }
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
    // A checkout opens again within the same bound (its last pause cut to end at it, for a
    // last try), then fails as the shared path does, the last attempt's error in the reason.
    let t = Instant::now();
    match bounded.transaction().await.map(|_| ()) {
        Err(Error::NoConnection { reason }) => assert!(reason.io_error().is_some(), "{reason}"),
        other => panic!("a checkout on a down server: {other:?}"),
    }
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "the checkout waited {waited:?}"
    );
    let t = Instant::now();
    match deadline.query_one("SELECT 1", &[]).await {
        Err(Error::Timeout) => assert!(t.elapsed() < Duration::from_secs(3)),
        other => panic!("a down server past the deadline: {other:?}"),
    }

    // Waiting when the server comes back: the unit runs.
    let waiting = {
        let db = patient.clone();
        H::spawn(async move { db.query_one("SELECT 41 + 1", &[]).await })
    };
    H::sleep(Duration::from_millis(200)).await;
    let cluster = off_thread::<H, _>(move || {
        cluster.resume().expect("resume");
        cluster
    })
    .await;
    let row = waiting.await.expect("the waiting unit ran");
    assert_eq!(row.get::<_, i32>(0), 42);
    for db in [bounded, deadline, patient] {
        db.close().await;
    }
    drop(cluster);
}

/// A connection of the client that opens calls the others back from their backoff: a server
/// that accepts one connection accepts the rest. After 7 s down, the shared connections' next
/// attempts are 5 s apart (50 ms doubling: 6.35 s, then 11.35 s after the fault); once the
/// server is back, a session's checkout opens within its own pause (at most 1 s), and a
/// shared statement then finds a connection well within a `dispatch_timeout` of 1.5 s, where
/// without the call back it waits for the shared connections' next attempt, seconds away.
pub async fn a_connection_that_opens_calls_the_others_back_from_their_backoff<H: Harness>() {
    let (db, cluster, _) = called_back::<H>(false).await;
    // With the server down, a checkout tries until its bound (the last pause cut to end at
    // it, for a last try) and then fails as the shared path does, with the cause.
    let cluster = off_thread::<H, _>(move || {
        let mut cluster = cluster;
        cluster.halt();
        cluster
    })
    .await;
    let started = Instant::now();
    let e = db.session().await.err().expect("no server, no session");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "gave up after {waited:?}: {e}"
    );
    let Error::NoConnection { reason } = &e else {
        panic!("{e:?}")
    };
    let io = reason.io_error().map(std::io::Error::kind);
    assert_eq!(io, Some(std::io::ErrorKind::ConnectionRefused), "{e}");
    db.close().await;
    drop(cluster);
}

/// [`a_connection_that_opens_calls_the_others_back_from_their_backoff`] through HAProxy, as
/// deployments reach PostgreSQL: while the server is down HAProxy accepts every connection and
/// closes it, so each attempt fails as a server that closed the connection during startup.
pub async fn behind_haproxy_a_connection_that_opens_calls_the_others_back<H: Harness>() {
    let test = "behind_haproxy_a_connection_that_opens_calls_the_others_back";
    if !pgpipe_tests::haproxy::available_or_skip(test) {
        return;
    }
    let (db, cluster, proxy) = called_back::<H>(true).await;
    db.close().await;
    off_thread::<H, _>(move || drop((proxy, cluster))).await;
}

/// The server (its own cluster, through HAProxy with `haproxy`) down 7 s and back: a checkout
/// opens, then the shared path must serve within `dispatch_timeout`. Returns the client, the
/// cluster, up, and the proxy.
async fn called_back<H: Harness>(haproxy: bool) -> (Db<H>, Cluster, Option<HaProxy>) {
    let cluster = off_thread::<H, _>(|| Cluster::start().expect("a cluster to stop")).await;
    let port = cluster.port();
    let proxy = match haproxy {
        true => Some(off_thread::<H, _>(move || HaProxy::start(port).expect("haproxy")).await),
        false => None,
    };
    let url = proxy.as_ref().map_or_else(|| cluster.url(), HaProxy::url);
    let mut cfg = Config::parse(&url).expect("URL");
    cfg.pipeline_size = 2;
    cfg.max_connections = 4;
    cfg.pinned_size = 1;
    cfg.dispatch_timeout = Duration::from_millis(1500);
    cfg.checkout_timeout = Some(Duration::from_secs(30));
    let db = H::connect(cfg).await.expect("connect");
    db.query("SELECT 1", &[]).await.expect("served");
    let mut cluster = off_thread::<H, _>(move || {
        let mut cluster = cluster;
        cluster.halt();
        cluster
    })
    .await;
    H::sleep(Duration::from_secs(7)).await;
    cluster = off_thread::<H, _>(move || {
        cluster.resume().expect("resume");
        cluster
    })
    .await;
    let resumed = Instant::now();
    let s = db
        .session()
        .await
        .expect("a checkout once the server is back");
    s.query("SELECT 1", &[]).await.expect("the session serves");
    drop(s);
    let opened = resumed.elapsed();
    let r = db.query("SELECT 1", &[]).await;
    let served = resumed.elapsed();
    eprintln!(
        "{}{}: checkout {opened:?} and shared path {served:?} after the server was back: {:?}",
        H::name(),
        if proxy.is_some() {
            " through HAProxy"
        } else {
            ""
        },
        r.as_ref().map(|_| "ok")
    );
    r.expect("the shared path, called back by the checkout's connection");
    (db, cluster, proxy)
}

/// A transaction or session whose connection dies before its first statement goes out (a
/// server shutting down, as in a switchover, terminates it between the checkout and the
/// statement): nothing of it ran, so it moves to another connection and the statement runs
/// there. A statement after one that went out is not moved: its transaction died with the
/// connection, and it fails as never sent.
pub async fn a_holder_whose_connection_died_before_its_first_statement_moves_on<H: Harness>() {
    // One exclusive connection: the holder gives the dead one back before it checks out.
    let mut cfg = crate::config(|c| {
        c.pipeline_size = 1;
        c.max_connections = 2;
        c.pinned_size = 1;
    });
    let app = cfg.application_name.clone().expect("the test's name");
    cfg.application_name = Some(app.clone());
    let db = H::connect(cfg).await.expect("connect");
    let kill = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = '{app}'"
    );
    let gone = format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'");
    // Once its backend has exited, the FATAL and the end of the stream wait in the socket:
    // the connection reads them before it writes the next unit.
    let terminate = || async {
        psql_async::<H>(&kill).await;
        while psql_async::<H>(&gone).await.trim() != "0" {
            H::sleep(Duration::from_millis(10)).await;
        }
    };

    let tx = db.transaction().await.expect("checkout");
    terminate().await;
    let row = tx
        .query_one(
            "SELECT pg_backend_pid(), now() = statement_timestamp()",
            &[],
        )
        .await
        .expect("the first statement, moved to another connection");
    assert!(
        !row.get::<_, bool>(1),
        "its BEGIN went with it: a transaction"
    );
    tx.commit().await.expect("commit");

    let s = db.session().await.expect("checkout");
    terminate().await;
    s.batch_execute("SELECT 1")
        .await
        .expect("a session's first statement (simple protocol), moved too");
    drop(s);

    let tx = db.transaction().await.expect("checkout");
    tx.query_one("SELECT 1", &[])
        .await
        .expect("first statement");
    terminate().await;
    let e = tx
        .query_one("SELECT 2", &[])
        .await
        .expect_err("its transaction is gone");
    assert!(matches!(e, Error::NotDispatched { .. }), "{e:?}");
    drop(tx);
    db.close().await;
}
