//! Through PgBouncer (Debian's 1.18, started by the harness): transaction pool mode, where
//! every unit may reach another backend, and session mode. Every answer is checked.
//!
//! In transaction mode named prepared statements do not survive from one unit to the next, so
//! the client runs with `named_statements=off` (every execution carries its own unnamed Parse
//! and still pipelines), or finds out by itself on the first vanished statement.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgpipe::{Config, Error, ErrorKind};
use pgpipe_tests::{pgbouncer, shared, PgBouncer, PoolMode};
use postgres_types::Type;

use crate::{off_thread, psql, Db, Harness};

/// The shared PgBouncer of `mode` in front of the test server (16 server connections).
fn bouncer(mode: PoolMode) -> &'static PgBouncer {
    static SESSION: OnceLock<PgBouncer> = OnceLock::new();
    static TRANSACTION: OnceLock<PgBouncer> = OnceLock::new();
    let cell = match mode {
        PoolMode::Session => &SESSION,
        PoolMode::Transaction => &TRANSACTION,
    };
    cell.get_or_init(|| PgBouncer::start(server_port(), mode, 16).expect("pgbouncer"))
}

/// The last lines of the shared PgBouncer's log, for a failure's message.
fn log_tail(mode: PoolMode) -> String {
    let log = std::fs::read_to_string(bouncer(mode).log_path()).unwrap_or_default();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains("login attempt") && !l.contains("new connection to server"))
        .collect();
    let pg = std::fs::read_to_string(shared().server_log().unwrap()).unwrap_or_default();
    let pgl: Vec<&str> = pg
        .lines()
        .filter(|l| {
            l.contains("FATAL")
                || l.contains("terminat")
                || l.contains("unexpected")
                || l.contains("could not")
        })
        .collect();
    format!(
        "{}\nPG:\n{}",
        lines[lines.len().saturating_sub(30)..].join("\n"),
        pgl[pgl.len().saturating_sub(30)..].join("\n")
    )
}

fn server_port() -> u16 {
    Config::parse(&shared().url()).expect("url").port
}

fn config_for(url: &str, f: impl FnOnce(&mut Config)) -> Config {
    let mut cfg = Config::parse_with_env(url, |_| None).expect("url");
    f(&mut cfg);
    cfg
}

async fn through<H: Harness>(mode: PoolMode, f: impl FnOnce(&mut Config)) -> Db<H> {
    H::connect(config_for(&bouncer(mode).url(), |c| {
        // A unit cut by PgBouncer 1.18 may never be answered (see `or_logs`): the deadline
        // turns that stall into a failure instead of a hang.
        c.query_timeout = Some(STALL);
        f(c)
    }))
    .await
    .expect("connect through pgbouncer")
}

/// The value, or a panic with the error and the logs of PgBouncer and the server.
///
/// PgBouncer 1.18 in transaction mode releases its server connection on the ReadyForQuery of
/// the last Sync it forwarded, even when the start of the client's next unit went out with it
/// (its issue 759): the rest of that unit reaches another backend, which ends with `invalid
/// frontend message type`, stops answering (a stall, which [`STALL`] turns into a timeout),
/// or answers with another statement's rows. Before pgpipe bounded its bytes in flight
/// through a pooler (`driver/conn/path.rs`), about one run of these tests in five lost units
/// that way; with the bound none may, so any error here fails the test.
fn or_logs<T>(r: Result<T, pgpipe::Error>) -> T {
    r.unwrap_or_else(|e| panic!("query: {e:?}\n{}", log_tail(PoolMode::Transaction)))
}

/// The query deadline through the transaction-mode PgBouncer: far above any unit's time
/// there, so a stalled connection fails the test instead of hanging it.
const STALL: Duration = Duration::from_secs(5);

/// 1,000 tasks, 10 statements each over three texts, every answer checked.
async fn thousand_tasks<H: Harness>(db: &Db<H>) {
    let mut tasks = Vec::new();
    for t in 0..1000i32 {
        let db = db.clone();
        tasks.push(H::spawn(async move {
            for q in 0..10i32 {
                let v = t * 100 + q;
                match q % 3 {
                    0 => {
                        let row = or_logs(db.query_one("SELECT $1::int4 + 1", &[&v]).await);
                        assert_eq!(row.get::<_, i32>(0), v + 1);
                    }
                    1 => {
                        let text = v.to_string();
                        let row = or_logs(
                            db.query_one("SELECT length($1::text), $2::int4", &[&text, &v])
                                .await,
                        );
                        assert_eq!(row.get::<_, i32>(0) as usize, text.len());
                        assert_eq!(row.get::<_, i32>(1), v);
                    }
                    _ => {
                        let rows = or_logs(
                            db.query(
                                "SELECT g FROM generate_series(1, $1::int4 % 5 + 1) g",
                                &[&v],
                            )
                            .await,
                        );
                        assert_eq!(rows.len() as i32, v % 5 + 1);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    service_resumes::<H>(db).await;
}

/// After the load the client serves a new statement.
async fn service_resumes<H: Harness>(db: &Db<H>) {
    let row = or_logs(db.query_one("SELECT 41 + 1", &[]).await);
    assert_eq!(row.get::<_, i32>(0), 42);
}

pub async fn typed_queries_pipeline_through_transaction_mode<H: Harness>() {
    if !pgbouncer::available_or_skip("typed_queries_pipeline_through_transaction_mode") {
        return;
    }
    let db = through::<H>(PoolMode::Transaction, |c| {
        c.pipeline_size = 2;
        c.max_connections = 2;
    })
    .await;
    let mut tasks = Vec::new();
    for t in 0..1000i32 {
        let db = db.clone();
        tasks.push(H::spawn(async move {
            for q in 0..10i32 {
                let v = t * 100 + q;
                let rows = or_logs(
                    db.query_typed("SELECT $1::int4 + 1", &[(&v, Type::INT4)])
                        .await,
                );
                assert_eq!(rows[0].get::<_, i32>(0), v + 1);
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    service_resumes::<H>(&db).await;
    // Bounded: a connection PgBouncer stopped answering would never drain.
    db.close_within(STALL).await;
}

pub async fn unnamed_statements_pipeline_through_transaction_mode<H: Harness>() {
    if !pgbouncer::available_or_skip("unnamed_statements_pipeline_through_transaction_mode") {
        return;
    }
    let db = through::<H>(PoolMode::Transaction, |c| {
        c.named_statements = false;
        c.pipeline_size = 4;
    })
    .await;
    thousand_tasks::<H>(&db).await;
    let s = db.stats();
    // Still pipelined: several units per read on the pipelined connections; no lanes or
    // overflow connections behind a pooler (its queueing looked like slow statements before).
    assert_eq!(s.total.opened_on_demand, 0, "{s:?}");
    let base = &s.connections[..4];
    let units: u64 = base.iter().map(|c| c.units_completed).sum();
    let reads: u64 = base.iter().map(|c| c.readable_events).sum();
    assert!(
        units as f64 > 1.5 * reads as f64,
        "{units} units in {reads} reads: {s:?}"
    );
    // Cheap reads share Syncs here too: PgBouncer forwards a segment's answers in one go.
    assert!(s.total.units_coalesced > 0, "{s:?}");
    assert!(s.total.ready_accounts_for_every_unit(), "{s:?}");
    // Bounded: a connection PgBouncer stopped answering would never drain.
    db.close_within(STALL).await;
}

pub async fn default_settings_find_the_pooler_by_themselves<H: Harness>() {
    if !pgbouncer::available_or_skip("default_settings_find_the_pooler_by_themselves") {
        return;
    }
    // Named statements (the default) vanish between units here; the first Bind that misses
    // turns them off for the client and its unit is prepared again and run (it had not run).
    let db = through::<H>(PoolMode::Transaction, |c| c.pipeline_size = 4).await;
    thousand_tasks::<H>(&db).await;
    // Bounded: a connection PgBouncer stopped answering would never drain.
    db.close_within(STALL).await;
}

pub async fn errors_mid_pipeline_fail_only_their_own_units_through_transaction_mode<H: Harness>() {
    if !pgbouncer::available_or_skip(
        "errors_mid_pipeline_fail_only_their_own_units_through_transaction_mode",
    ) {
        return;
    }
    let db = through::<H>(PoolMode::Transaction, |c| {
        c.named_statements = false;
        c.pipeline_size = 2;
    })
    .await;
    let mut tasks = Vec::new();
    for t in 0..200i32 {
        let db = db.clone();
        tasks.push(H::spawn(async move {
            let mut failed = 0;
            for q in 0..10i32 {
                let v = t * 10 + q;
                // Every seventh divides by zero.
                let d = if v % 7 == 0 { 0 } else { 1 };
                match db.query_one("SELECT $1::int4 / $2::int4", &[&v, &d]).await {
                    Ok(row) => {
                        assert_ne!(d, 0);
                        assert_eq!(row.get::<_, i32>(0), v);
                    }
                    Err(e) => {
                        assert_eq!(d, 0, "{e}");
                        assert_eq!(e.code().map(|c| c.as_str()), Some("22012"), "{e}");
                        failed += 1;
                    }
                }
            }
            failed
        }));
    }
    let mut failed = 0;
    for t in tasks {
        failed += t.await;
    }
    assert_eq!(failed, (0..2000).filter(|v| v % 7 == 0).count());
    db.close().await;
}

pub async fn transactions_keep_the_total_through_transaction_mode<H: Harness>() {
    if !pgbouncer::available_or_skip("transactions_keep_the_total_through_transaction_mode") {
        return;
    }
    let table = format!("pooler_accounts_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, balance int);
         INSERT INTO {table} SELECT g, 1000 FROM generate_series(1, 10) g"
    ));
    let db = through::<H>(PoolMode::Transaction, |c| {
        c.named_statements = false;
        c.pinned_size = 4;
    })
    .await;
    let mut tasks = Vec::new();
    for t in 0..40i32 {
        let (db, table) = (db.clone(), table.clone());
        tasks.push(H::spawn(async move {
            for q in 0..10i32 {
                let (from, to) = ((t + q) % 10 + 1, (t * 3 + q) % 10 + 1);
                let tx = db.transaction().await.expect("transaction");
                let update = format!("UPDATE {table} SET balance = balance + $2 WHERE id = $1");
                // Rows locked in id order: transfers never deadlock each other.
                let mut legs = [(from, -1i32), (to, 1i32)];
                legs.sort();
                for (id, delta) in legs {
                    tx.execute(&update, &[&id, &delta]).await.expect("transfer");
                }
                if q % 4 == 0 {
                    drop(tx); // rolled back
                } else {
                    tx.commit().await.expect("commit");
                }
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    let total: i64 = db
        .query_one(&format!("SELECT sum(balance)::int8 FROM {table}"), &[])
        .await
        .expect("sum")
        .get(0);
    assert_eq!(total, 10_000);
    db.close().await;
}

pub async fn sessions_keep_their_state_through_session_mode<H: Harness>() {
    if !pgbouncer::available_or_skip("sessions_keep_their_state_through_session_mode") {
        return;
    }
    let db = through::<H>(PoolMode::Session, |c| c.pinned_size = 2).await;
    let s = db.session().await.expect("session");
    s.batch_execute("SET application_name = 'pooled_session'; CREATE TEMP TABLE t (x int)")
        .await
        .expect("session state");
    s.execute("INSERT INTO t VALUES (1)", &[])
        .await
        .expect("temp table");
    let row = s
        .query_one(
            "SELECT current_setting('application_name'), count(*)::int8 FROM t",
            &[],
        )
        .await
        .expect("state kept");
    assert_eq!(row.get::<_, &str>(0), "pooled_session");
    assert_eq!(row.get::<_, i64>(1), 1);
    drop(s);
    // The shared path meanwhile, and after.
    thousand_tasks::<H>(&db).await;
    db.close().await;
}

/// A transaction's cancel token through PgBouncer, in both modes: the pooler passes the
/// CancelRequest on to the backend running the transaction's statement, whose caller gets the
/// server's 57014, and the pooler's connection goes on.
pub async fn a_cancel_token_reaches_the_statement_through_pgbouncer<H: Harness>() {
    if !pgbouncer::available_or_skip("a_cancel_token_reaches_the_statement_through_pgbouncer") {
        return;
    }
    for mode in [PoolMode::Session, PoolMode::Transaction] {
        let db = through::<H>(mode, |c| {
            c.named_statements = false;
            c.pinned_size = 1;
        })
        .await;
        let tx = db.transaction().await.expect("transaction");
        let backend: i32 = tx
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .expect("pid")
            .get(0);
        let token = tx.cancel_token();
        let started = Instant::now();
        let (slept, asked) =
            futures_lite::future::zip(tx.execute("SELECT pg_sleep(30)", &[]), async {
                crate::wait_running::<H>(backend, "pg_sleep(30)").await;
                token.cancel()
            })
            .await;
        assert!(asked, "{mode:?}");
        let e = slept.expect_err("cancelled");
        assert_eq!(
            e.code(),
            Some(&pgpipe::SqlState::QUERY_CANCELED),
            "{mode:?}: {e:?}\n{}",
            log_tail(mode)
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{mode:?}");
        assert!(
            matches!(tx.commit().await, Err(Error::RolledBack)),
            "{mode:?}"
        );
        let one: i32 = db.query_one("SELECT 1", &[]).await.expect("after").get(0);
        assert_eq!(one, 1);
        db.close().await;
    }
}

/// `prepare` through a transaction pooler (unnamed statements): the types come back, and the
/// statement runs by reference, many times, on whichever server connection the pooler gives.
pub async fn prepared_statements_run_through_transaction_mode<H: Harness>() {
    if !pgbouncer::available_or_skip("prepared_statements_run_through_transaction_mode") {
        return;
    }
    let db = through::<H>(PoolMode::Transaction, |c| c.named_statements = false).await;
    let st = db
        .prepare("SELECT $1::int4 * 2, $2::text")
        .await
        .expect("prepare");
    assert_eq!(st.params(), &[Type::INT4, Type::TEXT]);
    for i in 0..200i32 {
        let row = db.query_one(&st, &[&i, &"x"]).await.expect("run");
        assert_eq!(row.get::<_, i32>(0), i * 2);
    }
    db.close().await;
}

/// Slow statements among fast ones on `db`, whose one pipelined connection has answered a
/// statement first (so its probe of the path had its answer): every answer checked; the
/// client's statistics afterwards.
async fn slow_among_fast<H: Harness>(db: Db<H>) -> pgpipe::Stats {
    db.query_one("SELECT 1", &[])
        .await
        .expect("first statement");
    // The first run teaches the client that the statement is slow.
    db.query("SELECT pg_sleep(0.02)", &[]).await.expect("slow");
    let mut tasks = Vec::new();
    for t in 0..40i32 {
        let db = db.clone();
        tasks.push(H::spawn(async move {
            for q in 0..5i32 {
                if (t + q) % 8 == 0 {
                    db.query("SELECT pg_sleep(0.02)", &[]).await.expect("slow");
                } else {
                    let v = t * 10 + q;
                    let row = db.query_one("SELECT $1::int4 + 1", &[&v]).await;
                    assert_eq!(row.expect("fast").get::<_, i32>(0), v + 1);
                }
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    let s = db.stats();
    db.close().await;
    s
}

pub async fn no_lanes_or_overflow_open_behind_a_pooler<H: Harness>() {
    if !pgbouncer::available_or_skip("no_lanes_or_overflow_open_behind_a_pooler") {
        return;
    }
    let elastic = |c: &mut Config| {
        c.pipeline_size = 1;
        c.max_connections = 4;
        c.pinned_size = 1;
        // The run lasts about a second, while a connection still measures whether the machine
        // has CPU to spare and discounts slow samples (tests/spare_cpu.rs): not this test's
        // subject.
        c.spare_cpu_pct = 0;
    };
    // The control: straight to the server, slow statements get lanes of their own.
    let direct = H::connect(config_for(&shared().url(), elastic))
        .await
        .expect("connect");
    let s = slow_among_fast::<H>(direct).await;
    assert!(
        s.total.opened_on_demand > 0,
        "no lane opened directly: {s:?}"
    );
    // Through PgBouncer, in session mode, where statements keep their names: the connection's
    // probe alone tells the client that a pooler is in between, and no lane opens beside it.
    // The probe cannot tell the pool mode, so the connection keeps one Sync at a time, and
    // units queued behind a slow one may go to an overflow connection (another client of the
    // pooler) instead.
    let s = slow_among_fast::<H>(through::<H>(PoolMode::Session, elastic).await).await;
    assert_eq!(s.total.lane_units, 0, "{s:?}");
    // Declared a session pooler, the connection pipelines as to the server, and nothing
    // opens beside it at all.
    let session = |c: &mut Config| {
        elastic(c);
        c.pooler = pgpipe::Pooler::Session;
    };
    let s = slow_among_fast::<H>(through::<H>(PoolMode::Session, session).await).await;
    assert_eq!(s.total.opened_on_demand, 0, "{s:?}");
    assert_eq!(s.total.lane_units, 0, "{s:?}");
}

pub async fn units_behind_the_one_sync_open_more_clients_of_a_transaction_pooler<H: Harness>() {
    if !pgbouncer::available_or_skip(
        "units_behind_the_one_sync_open_more_clients_of_a_transaction_pooler",
    ) {
        return;
    }
    // One pipelined connection with one Sync at a time, and writes that cannot share it: units
    // wait behind it, and overflow connections to the pooler carry them (within
    // max_connections, minus what exclusive connections keep).
    let db = through::<H>(PoolMode::Transaction, |c| {
        c.named_statements = false;
        c.pipeline_size = 1;
        c.max_connections = 6;
        c.pinned_size = 1;
        // Not this test's subject (tests/spare_cpu.rs): open as soon as units wait.
        c.spare_cpu_pct = 0;
    })
    .await;
    let table = format!("pooler_sync_bound_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, n int NOT NULL);
         INSERT INTO {table} SELECT g, 0 FROM generate_series(1, 100) g"
    ));
    let sql = format!("UPDATE {table} SET n = n + 1 WHERE id = $1");
    let mut tasks = Vec::new();
    for t in 0..200i32 {
        let (db, sql) = (db.clone(), sql.clone());
        tasks.push(H::spawn(async move {
            for q in 0..10i32 {
                let id = (t * 10 + q) % 100 + 1;
                assert_eq!(or_logs(db.execute(&sql, &[&id]).await), 1);
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    let s = db.stats();
    db.close_within(STALL).await;
    assert!(s.total.opened_on_demand > 0, "{s:?}");
    assert_eq!(s.total.lane_units, 0, "{s:?}");
    // Every update counted once.
    let sum = psql(&format!("SELECT sum(n) FROM {table}"));
    assert_eq!(sum.trim(), "2000");
}

pub async fn the_health_check_stands_down_behind_a_pooler<H: Harness>() {
    if !pgbouncer::available_or_skip("the_health_check_stands_down_behind_a_pooler") {
        return;
    }
    // Behind PgBouncer the backend named at startup is not a server backend: a check would
    // find it "gone". A statement four times the check interval must still succeed.
    let db = through::<H>(PoolMode::Session, |c| {
        c.health_check = Some(Duration::from_millis(100));
        c.pipeline_size = 1;
        c.max_connections = 1;
    })
    .await;
    let started = Instant::now();
    let row = db
        .query_one("SELECT pg_sleep(0.4), 7::int4", &[])
        .await
        .expect("a slow statement behind a pooler");
    assert_eq!(row.get::<_, i32>(1), 7);
    assert!(started.elapsed() >= Duration::from_millis(400));
    // And again: the check stays off for the connection.
    db.query_one("SELECT pg_sleep(0.3)", &[])
        .await
        .expect("again");
    assert_eq!(db.stats().total.reconnects, 0);
    db.close().await;
}

pub async fn a_cancel_storm_through_pgbouncer_fails_only_the_cancelled<H: Harness>() {
    if !pgbouncer::available_or_skip("a_cancel_storm_through_pgbouncer_fails_only_the_cancelled") {
        return;
    }
    let cfg = config_for(&bouncer(PoolMode::Transaction).url(), |c| {
        c.named_statements = false;
    });
    crate::faults::cancel_storm::<H>(cfg, |_| {}).await;
}

pub async fn a_pgbouncer_restart_resolves_every_unit_and_service_resumes<H: Harness>() {
    if !pgbouncer::available_or_skip("a_pgbouncer_restart_resolves_every_unit_and_service_resumes")
    {
        return;
    }
    let bouncer = off_thread::<H, _>(|| {
        PgBouncer::start(server_port(), PoolMode::Transaction, 4).expect("pgbouncer")
    })
    .await;
    let db = H::connect(config_for(&bouncer.url(), |c| {
        c.named_statements = false;
        c.pipeline_size = 2;
        c.connect_timeout = Duration::from_secs(2);
    }))
    .await
    .expect("connect");
    // Statements in flight while PgBouncer goes away.
    let mut tasks = Vec::new();
    for t in 0..50i32 {
        let db = db.clone();
        tasks.push(H::spawn(async move {
            db.query_one("SELECT pg_sleep(0.3), $1::int4", &[&t])
                .await
                .map(|row| assert_eq!(row.get::<_, i32>(1), t))
        }));
    }
    H::sleep(Duration::from_millis(100)).await;
    let mut bouncer = off_thread::<H, _>(move || {
        let mut b = bouncer;
        b.restart().expect("restart pgbouncer");
        b
    })
    .await;
    let restarted = Instant::now();
    for t in tasks {
        match t.await {
            Ok(()) => {}
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Indeterminate | ErrorKind::NotDispatched
                ) || matches!(e, Error::NoConnection { .. }),
                "{e:?}"
            ),
        }
    }
    // Served again within the reconnect backoff.
    let back = loop {
        match db.query_one("SELECT 1::int4", &[]).await {
            Ok(_) => break restarted.elapsed(),
            Err(e) => {
                assert!(
                    restarted.elapsed() < Duration::from_secs(10),
                    "not back: {e}"
                );
                H::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    eprintln!("{}: served again {back:?} after the restart", H::name());
    thousand_tasks::<H>(&db).await;
    db.close().await;
    off_thread::<H, _>(move || bouncer.restart().map(drop))
        .await
        .ok();
}

pub async fn startup_settings_pgbouncer_does_not_track_are_refused_with_its_reason<H: Harness>() {
    if !pgbouncer::available_or_skip(
        "startup_settings_pgbouncer_does_not_track_are_refused_with_its_reason",
    ) {
        return;
    }
    // PgBouncer 1.18 passes only the parameters it tracks; `shared_statement_timeout` is a
    // startup parameter, so behind it the timeout belongs on the role or the server.
    let cfg = config_for(&bouncer(PoolMode::Transaction).url(), |c| {
        c.shared_statement_timeout = Some(Duration::from_secs(5));
    });
    match H::connect(cfg).await {
        Ok(_) => panic!("pgbouncer accepted statement_timeout as a startup parameter"),
        Err(e) => assert!(e.to_string().contains("statement_timeout"), "{e}"),
    }
}
