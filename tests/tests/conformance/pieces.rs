//! Writes that reach the server in pieces, as on a real network (a late segment, a write cut
//! between the messages of a unit or inside one, writes put together): through PgBouncer in
//! transaction mode (pools of 4 and of 1 server connection) and, as the control, straight to
//! PostgreSQL. A proxy of the harness (`pgpipe_tests::chunk_proxy`) does the cutting.
//!
//! 1,000 tasks run checkable work: point selects whose rows name their keys and carry the
//! caller's own tag (one in five a simple-protocol text of two statements), inserts that return what they inserted, transactions and atomic batches
//! of two inserts, and a division by zero that fails its unit alone. Every answer is checked
//! against its question, and afterwards every write against the table: an acknowledged one is
//! there, with its own values; one reported failed with a server error, or never sent, is
//! not; one whose outcome was unknown is allowed either way (all of a transaction or none).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use pgpipe::{Config, Error, ErrorKind, Pooler};
use pgpipe_tests::chunk_proxy::{ChunkProxy, Chunking};
use pgpipe_tests::{pgbouncer, shared, Cluster, PgBouncer, PoolMode};

use crate::{off_thread, psql_async, Db, Harness};

/// Rows of the select table.
const ROWS: i32 = 1000;
/// How much work a run does, and the deadline of each statement.
#[derive(Clone, Copy)]
struct Size {
    tasks: i32,
    stall: Duration,
}

/// 1,000 tasks; a deadline far above any unit's time, so a stall fails the check instead of
/// hanging the test. A statement's deadline counts its wait in the queue: on a loaded machine
/// (the whole suite on 2 cores, or busy loops beside it) one PgBouncer server connection took
/// 1,000 tasks' queue past 10 s with no pause in the answers over 4 s, so the bound is a
/// minute: only a connection that stops answering reaches it.
const CLEAN: Size = Size {
    tasks: 1000,
    stall: Duration::from_secs(60),
};

/// Where the proxy forwards to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// PgBouncer in transaction mode with this many server connections.
    PgBouncer(usize),
    /// PostgreSQL itself.
    Direct,
}

/// What a caller was told of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Told {
    /// Done.
    Acked,
    /// Failed with a server error, or never sent: not done.
    Failed,
    /// Sent, outcome unknown.
    Unknown,
}

#[derive(Default)]
struct Tally {
    /// When the last answer (or error) came back, and the longest time with none.
    last: Option<std::time::Instant>,
    longest_silence: Duration,
    /// Answers so far, and how many had come when the longest silence began.
    answers: u64,
    silence_after: u64,
    selects: u64,
    wrong: Vec<String>,
    unexpected: Vec<String>,
    timeouts: u64,
    /// Every write's id, with the ids written together (a transaction, a batch), what its
    /// caller was told and the payload it carried.
    writes: Vec<(Vec<i64>, Told)>,
}

fn payload(id: i64) -> String {
    format!("p{id}-{}", id.wrapping_mul(2_654_435_761) % 1_000_003)
}

fn told(e: &Error) -> Told {
    match e.kind() {
        ErrorKind::Db | ErrorKind::NotDispatched => Told::Failed,
        _ => Told::Unknown,
    }
}

pub async fn answers_stay_with_their_callers_through_transaction_mode_pool_4<H: Harness>() {
    if !pgbouncer::available_or_skip(
        "answers_stay_with_their_callers_through_transaction_mode_pool_4",
    ) {
        return;
    }
    checked_work::<H>(Target::PgBouncer(4), Pooler::Auto, &Server::Shared, CLEAN)
        .await
        .assert_clean();
}

pub async fn answers_stay_with_their_callers_through_transaction_mode_pool_1<H: Harness>() {
    if !pgbouncer::available_or_skip(
        "answers_stay_with_their_callers_through_transaction_mode_pool_1",
    ) {
        return;
    }
    checked_work::<H>(Target::PgBouncer(1), Pooler::Auto, &Server::Shared, CLEAN)
        .await
        .assert_clean();
}

pub async fn answers_stay_with_their_callers_straight_to_the_server<H: Harness>() {
    checked_work::<H>(Target::Direct, Pooler::Auto, &Server::Shared, CLEAN)
        .await
        .assert_clean();
}

/// The opt-in `pooler=transaction-pipelined` through the same pieces: the hazard its
/// documentation states, measured (and proof that this check sees a crossing when one
/// happens). On a server of its own: crossed units make the server log warnings (a COMMIT
/// with no transaction) that would fail the tests sharing the suite's server.
pub async fn pipelining_through_pgbouncer_in_pieces_crosses_answers<H: Harness>() {
    if !pgbouncer::available_or_skip("pipelining_through_pgbouncer_in_pieces_crosses_answers") {
        return;
    }
    let cluster = off_thread::<H, _>(|| Arc::new(Cluster::start().expect("a cluster"))).await;
    // Fewer tasks, and a short deadline: units cut between backends may never be answered.
    let size = Size {
        tasks: 300,
        stall: Duration::from_secs(2),
    };
    let run = checked_work::<H>(
        Target::PgBouncer(4),
        Pooler::TransactionPipelined,
        &Server::Own(cluster.clone()),
        size,
    )
    .await;
    let crossed = run.tally.wrong.len()
        + run.verdict.lost.len()
        + run.verdict.failed_but_present.len()
        + run.verdict.torn.len()
        + run.verdict.foreign_values.len()
        + run.tally.unexpected.len();
    assert!(crossed > 0, "no crossing seen: {}", run.summary);
    off_thread::<H, _>(move || drop(cluster)).await;
}

/// The server the work runs on: the suite's, or one of the test's own.
enum Server {
    Shared,
    Own(Arc<Cluster>),
}

impl Server {
    fn url(&self) -> String {
        match self {
            Server::Shared => shared().url(),
            Server::Own(c) => c.url(),
        }
    }

    async fn psql<H: Harness>(&self, sql: &str) -> String {
        match self {
            Server::Shared => psql_async::<H>(sql).await,
            Server::Own(c) => {
                let (c, sql) = (c.clone(), sql.to_owned());
                off_thread::<H, _>(move || c.psql(&sql).expect("psql")).await
            }
        }
    }
}

/// What one run saw.
struct Run {
    tally: Tally,
    verdict: Verdict,
    summary: String,
    inside_units: u64,
    ready_per_unit: bool,
}

impl Run {
    fn assert_clean(&self) {
        let summary = &self.summary;
        // The cutting happened: pieces inside units reached the other side.
        assert!(
            self.inside_units >= 50,
            "too few cuts inside units: {summary}"
        );
        assert!(
            self.tally.wrong.is_empty(),
            "answers to other questions: {summary}"
        );
        assert!(
            self.verdict.is_clean(),
            "the table disagrees with the callers: {summary}"
        );
        assert_eq!(self.tally.timeouts, 0, "stalls: {summary}");
        assert!(self.tally.unexpected.is_empty(), "errors: {summary}");
        assert!(self.ready_per_unit, "{summary}");
    }
}

async fn checked_work<H: Harness>(
    target: Target,
    pooler: Pooler,
    server: &Server,
    size: Size,
) -> Run {
    let server_port = Config::parse(&server.url()).expect("url").port;
    let bouncer = match target {
        Target::PgBouncer(pool) => Some(
            off_thread::<H, _>(move || {
                PgBouncer::start(server_port, PoolMode::Transaction, pool).expect("pgbouncer")
            })
            .await,
        ),
        Target::Direct => None,
    };
    let upstream = SocketAddr::from((
        [127, 0, 0, 1],
        bouncer.as_ref().map_or(server_port, PgBouncer::port),
    ));
    let tag = match target {
        Target::PgBouncer(n) => format!("pb{n}"),
        Target::Direct => "direct".into(),
    };
    let sel = format!("pieces_sel_{}_{tag}", H::name());
    let log = format!("pieces_log_{}_{tag}", H::name());
    server
        .psql::<H>(&format!(
            "DROP TABLE IF EXISTS {sel}, {log};
             CREATE TABLE {sel} (id int PRIMARY KEY, v text NOT NULL);
             INSERT INTO {sel} SELECT g, 'r' || g || repeat('x', g % 40) FROM generate_series(1, {ROWS}) g;
             CREATE TABLE {log} (id int8 PRIMARY KEY, task int4 NOT NULL, payload text NOT NULL);"
        ))
        .await;
    let seed = 0x5eed ^ u64::from(server_port) ^ (H::name().len() as u64) << 20;
    let proxy = ChunkProxy::start(upstream, Chunking::Mix, seed).expect("chunk proxy");
    let url = match &bouncer {
        Some(b) => b.url(),
        None => server.url(),
    };
    let mut cfg = Config::parse_with_env(&url, |_| None).expect("url");
    cfg.host = "127.0.0.1".into();
    cfg.port = proxy.addr().port();
    cfg.query_timeout = Some(size.stall);
    cfg.checkout_timeout = Some(size.stall);
    cfg.pooler = pooler;
    if bouncer.is_some() {
        // As `docs/TOPOLOGY.md` advises behind PgBouncer in transaction mode.
        cfg.named_statements = false;
    }
    let db: Db<H> = H::connect(cfg).await.expect("connect through the proxy");
    let tally = Rc::new(RefCell::new(Tally::default()));
    let tasks: Vec<_> = (0..size.tasks)
        .map(|t| {
            let (db, tally, sel, log) = (db.clone(), tally.clone(), sel.clone(), log.clone());
            H::spawn(async move { task_work::<H>(&db, t, &sel, &log, &tally).await })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    let stats = db.stats();
    db.close_within(size.stall).await;
    let cut = proxy.stats();
    drop(proxy);
    let table = server
        .psql::<H>(&format!("SELECT id, task, payload FROM {log} ORDER BY id"))
        .await;
    let tally = std::mem::take(&mut *tally.borrow_mut());
    let verdict = check_table(&tally, &table);
    let summary = format!(
        "{}: {target:?}, {pooler:?}: {} selects, {} writes; proxy {cut:?}; {} timeouts\n\
         longest time without an answer: {:?}, after {} of {} answers\n\
         wrong answers ({}): {:?}\nunexpected errors ({}): {:?}\ntable: {verdict:?}\n{:?}",
        H::name(),
        tally.selects,
        tally.writes.len(),
        tally.timeouts,
        tally.longest_silence,
        tally.silence_after,
        tally.answers,
        tally.wrong.len(),
        &tally.wrong[..tally.wrong.len().min(10)],
        tally.unexpected.len(),
        &tally.unexpected[..tally.unexpected.len().min(10)],
        stats.total,
    );
    eprintln!("{summary}");
    // PgBouncer first: a unit cut between backends can leave one idle in a transaction,
    // holding locks on the tables, until its server connection closes.
    off_thread::<H, _>(move || drop(bouncer)).await;
    if matches!(server, Server::Shared) {
        server
            .psql::<H>(&format!("DROP TABLE IF EXISTS {sel}, {log}"))
            .await;
    }
    Run {
        tally,
        verdict,
        summary,
        inside_units: cut.inside_units,
        ready_per_unit: stats.total.ready_accounts_for_every_unit(),
    }
}

/// One task's work: ten operations of every kind, each checked as it returns.
async fn task_work<H: Harness>(
    db: &Db<H>,
    t: i32,
    sel: &str,
    log: &str,
    tally: &Rc<RefCell<Tally>>,
) {
    let select = format!("SELECT id, v, $2::int4 AS tag FROM {sel} WHERE id = $1");
    let insert =
        format!("INSERT INTO {log} (id, task, payload) VALUES ($1, $2, $3) RETURNING id, task");
    let plain = format!("INSERT INTO {log} (id, task, payload) VALUES ($1, $2, $3)");
    for q in 0..10i32 {
        let op = (t + q) % 10;
        let id = i64::from(t) * 100 + i64::from(q) * 4;
        match op {
            4 => {
                // A simple-protocol text of two statements, on the shared path: its rows are
                // text, and its Query has no Sync of its own.
                let key = (t * 7919 + q * 31).rem_euclid(ROWS) + 1;
                let text = format!("SELECT id, v FROM {sel} WHERE id = {key}; SELECT {t}");
                let r = db.simple_query(&text).await;
                let mut tl = answered(tally);
                tl.selects += 1;
                match r {
                    Ok(out) => {
                        use pgpipe::SimpleQueryMessage as M;
                        let want = format!("r{key}{}", "x".repeat((key % 40) as usize));
                        let (key, t) = (key.to_string(), t.to_string());
                        let ok = matches!(&out[..], [M::Row(a), M::CommandComplete(1), M::Row(b), M::CommandComplete(1)]
                            if a.get(0) == Some(key.as_str())
                                && a.get(1) == Some(want.as_str())
                                && b.get(0) == Some(t.as_str()));
                        if !ok {
                            tl.wrong
                                .push(format!("simple select {key} tag {t}: {out:?}"));
                        }
                    }
                    Err(e) => note_error(&mut tl, "simple select", &e),
                }
            }
            0..=3 => {
                let key = (t * 7919 + q * 31).rem_euclid(ROWS) + 1;
                let r = db.query(&select, &[&key, &t]).await;
                let mut tl = answered(tally);
                tl.selects += 1;
                match r {
                    Ok(rows) => {
                        let ok = rows.len() == 1 && {
                            let (id, v, tag): (i32, String, i32) =
                                (rows[0].get(0), rows[0].get(1), rows[0].get(2));
                            let want = format!("r{key}{}", "x".repeat((key % 40) as usize));
                            id == key && tag == t && v == want
                        };
                        if !ok {
                            tl.wrong.push(format!("select {key} tag {t}: {rows:?}"));
                        }
                    }
                    Err(e) => note_error(&mut tl, "select", &e),
                }
            }
            5 | 6 => {
                let task = t;
                let p = payload(id);
                let r = db.query(&insert, &[&id, &task, &p]).await;
                let mut tl = answered(tally);
                match r {
                    Ok(rows) => {
                        let ok = rows.len() == 1
                            && rows[0].get::<_, i64>(0) == id
                            && rows[0].get::<_, i32>(1) == task;
                        if !ok {
                            tl.wrong.push(format!("insert {id} task {task}: {rows:?}"));
                        }
                        tl.writes.push((vec![id], Told::Acked));
                    }
                    Err(e) => {
                        let told = told(&e);
                        note_error(&mut tl, "insert", &e);
                        tl.writes.push((vec![id], told));
                    }
                }
            }
            7 => {
                let ids = vec![id, id + 1];
                let outcome = async {
                    let tx = db.transaction().await.map_err(|e| (e, false))?;
                    for &i in &ids {
                        let p = payload(i);
                        tx.execute(&plain, &[&i, &t, &p])
                            .await
                            .map_err(|e| (e, false))?;
                    }
                    tx.commit().await.map_err(|e| (e, true))
                }
                .await;
                let mut tl = answered(tally);
                match outcome {
                    Ok(()) => tl.writes.push((ids, Told::Acked)),
                    // Before the COMMIT was sent, the transaction rolled back whatever the
                    // error: nothing of it is in the table.
                    Err((e, false)) => {
                        note_error(&mut tl, "transaction", &e);
                        tl.writes.push((ids, Told::Failed));
                    }
                    Err((e, true)) => {
                        let told = told(&e);
                        note_error(&mut tl, "commit", &e);
                        tl.writes.push((ids, told));
                    }
                }
            }
            8 => {
                let ids = vec![id, id + 1];
                let (p0, p1) = (payload(ids[0]), payload(ids[1]));
                let mut b = db.batch();
                b.add(&plain, &[&ids[0], &t, &p0])
                    .add(&plain, &[&ids[1], &t, &p1]);
                let r = b.run().await;
                let mut tl = answered(tally);
                match r {
                    Ok(results) => {
                        if results.iter().any(|r| r.affected() != 1) {
                            tl.wrong.push(format!("batch {ids:?}: {results:?}"));
                        }
                        tl.writes.push((ids, Told::Acked));
                    }
                    Err(e) => {
                        let told = match e.kind() {
                            ErrorKind::Db => Told::Failed,
                            _ => told(&e),
                        };
                        note_error(&mut tl, "batch", &e);
                        tl.writes.push((ids, told));
                    }
                }
            }
            _ => {
                // Fails its own unit alone (and the rest of a shared Sync, sent again).
                let r = db.query("SELECT 1 / ($1::int4 - $1::int4)", &[&t]).await;
                let mut tl = answered(tally);
                match r {
                    Ok(rows) => tl.wrong.push(format!("division by zero answered {rows:?}")),
                    Err(e) if e.code().map(|c| c.as_str()) == Some("22012") => {}
                    Err(e) => note_error(&mut tl, "division", &e),
                }
            }
        }
    }
}

/// The tally, with the time of this answer noted.
fn answered(tally: &RefCell<Tally>) -> std::cell::RefMut<'_, Tally> {
    let mut tl = tally.borrow_mut();
    let now = std::time::Instant::now();
    if let Some(last) = tl.last {
        if now - last > tl.longest_silence {
            tl.longest_silence = now - last;
            tl.silence_after = tl.answers;
        }
    }
    tl.last = Some(now);
    tl.answers += 1;
    tl
}

fn note_error(tl: &mut Tally, what: &str, e: &Error) {
    if e.kind() == ErrorKind::Timeout {
        tl.timeouts += 1;
    }
    tl.unexpected.push(format!("{what}: {e}"));
}

/// How the table compares with what callers were told.
#[derive(Debug, Default)]
struct Verdict {
    /// Acknowledged writes not in the table.
    lost: Vec<i64>,
    /// Writes reported failed that are in the table.
    failed_but_present: Vec<i64>,
    /// Rows whose values are not their own id's.
    foreign_values: Vec<String>,
    /// Rows no caller wrote.
    unknown_rows: Vec<i64>,
    /// Transactions or batches in the table in part.
    torn: Vec<Vec<i64>>,
    /// Writes of unknown outcome: in the table, and not.
    unknown_present: u64,
    unknown_absent: u64,
}

impl Verdict {
    fn is_clean(&self) -> bool {
        self.lost.is_empty()
            && self.failed_but_present.is_empty()
            && self.foreign_values.is_empty()
            && self.unknown_rows.is_empty()
            && self.torn.is_empty()
    }
}

fn check_table(tally: &Tally, table: &str) -> Verdict {
    let mut rows: HashMap<i64, (i32, String)> = HashMap::new();
    let mut v = Verdict::default();
    for line in table.lines().filter(|l| !l.is_empty()) {
        let mut f = line.splitn(3, '|');
        let (Some(id), Some(task), Some(p)) = (f.next(), f.next(), f.next()) else {
            v.foreign_values.push(line.to_owned());
            continue;
        };
        let (Ok(id), Ok(task)) = (id.parse::<i64>(), task.parse::<i32>()) else {
            v.foreign_values.push(line.to_owned());
            continue;
        };
        if p != payload(id) || i64::from(task) != id / 100 {
            v.foreign_values.push(line.to_owned());
        }
        rows.insert(id, (task, p.to_owned()));
    }
    let mut written = std::collections::HashSet::new();
    for (ids, told) in &tally.writes {
        let present: Vec<bool> = ids.iter().map(|i| rows.contains_key(i)).collect();
        written.extend(ids.iter().copied());
        if present.iter().any(|&p| p) && !present.iter().all(|&p| p) {
            v.torn.push(ids.clone());
        }
        match told {
            Told::Acked => v.lost.extend(
                ids.iter()
                    .zip(&present)
                    .filter(|(_, p)| !**p)
                    .map(|(i, _)| *i),
            ),
            Told::Failed => v.failed_but_present.extend(
                ids.iter()
                    .zip(&present)
                    .filter(|(_, p)| **p)
                    .map(|(i, _)| *i),
            ),
            Told::Unknown => {
                if present[0] {
                    v.unknown_present += 1;
                } else {
                    v.unknown_absent += 1;
                }
            }
        }
    }
    v.unknown_rows = rows
        .keys()
        .filter(|id| !written.contains(id))
        .copied()
        .collect();
    v
}
