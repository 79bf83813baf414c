//! Smoke tests of pgpipe on glommio against a real PostgreSQL server: one executor with many
//! tasks, timeouts through glommio's timer, one client per executor on every core, and the
//! io_uring probe. Every test runs on a watchdog thread with a limit.
//!
//! Where io_uring is unavailable the executor tests print `SKIPPED: io_uring unavailable: <why>`
//! and pass, unless `PGPIPE_REQUIRE_IO_URING=1`, which turns the skip into a failure.

use std::future::Future;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use glommio::{CpuSet, LocalExecutorBuilder, LocalExecutorPoolBuilder, PoolPlacement};
use pgpipe::{Config, Error};
use pgpipe_glommio::Client;

const TASKS: i64 = 1000;
const QUERIES: i64 = 5;

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`.
fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test exceeded its {secs}s limit"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
    }
}

/// Whether io_uring works here; says so loudly when it does not.
fn io_uring_or_skip() -> bool {
    match pgpipe_glommio::check_io_uring() {
        Ok(()) => true,
        Err(e) if std::env::var_os("PGPIPE_REQUIRE_IO_URING").is_some() => panic!("{e}"),
        Err(e) => {
            // Past the test harness's capture: a passing test's eprintln! shows to nobody.
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "SKIPPED glommio smoke tests: {e}");
            false
        }
    }
}

/// Runs the future made by `make` on a fresh glommio executor, within `secs`.
fn on_executor<F, T>(secs: u64, make: impl FnOnce() -> F + Send + 'static) -> T
where
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    bounded(secs, move || {
        let ex = LocalExecutorBuilder::default()
            .make()
            .expect("glommio executor");
        ex.run(make())
    })
}

fn config(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::from_url(&pgpipe_tests::shared().url()).expect("test URL parses");
    f(&mut c);
    c
}

/// `tasks` concurrent local tasks × `QUERIES` checked queries; returns the queries done.
async fn many_tasks(db: &Client, tasks: i64) -> u64 {
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let db = db.clone();
            glommio::spawn_local(async move {
                for q in 0..QUERIES {
                    let n = t * 1000 + q;
                    let tag = format!("task-{t}-{q}");
                    let row = db
                        .query_one("SELECT $1::int8 * 2, $2::text", &[&n, &tag])
                        .await
                        .expect("query");
                    assert_eq!(row.get::<_, i64>(0), n * 2);
                    assert_eq!(row.get::<_, &str>(1), tag);
                }
                QUERIES as u64
            })
        })
        .collect();
    let mut done = 0;
    for h in handles {
        done += h.await;
    }
    done
}

#[test]
fn one_executor_many_tasks() {
    if !io_uring_or_skip() {
        return;
    }
    let cfg = config(|c| c.pipeline_size = 2);
    on_executor(120, move || async move {
        let db = pgpipe_glommio::connect_with(cfg).await.expect("connect");
        assert_eq!(many_tasks(&db, TASKS).await, (TASKS * QUERIES) as u64);
        let s = db.stats();
        assert!(s.total.ready_accounts_for_every_unit(), "{s:?}");
        assert!(s.total.units_completed >= (TASKS * QUERIES) as u64, "{s:?}");
        db.close().await;
        let e = db.query_one("SELECT 1", &[]).await.expect_err("closed");
        assert!(matches!(e, Error::Closed), "{e:?}");
    });
}

#[test]
fn query_timeout_through_the_glommio_timer() {
    if !io_uring_or_skip() {
        return;
    }
    let cfg = config(|c| {
        c.pipeline_size = 1;
        c.query_timeout = Some(Duration::from_millis(50));
    });
    on_executor(60, move || async move {
        let db = pgpipe_glommio::connect_with(cfg).await.expect("connect");
        let started = Instant::now();
        let e = db
            .query("SELECT pg_sleep(0.3)", &[])
            .await
            .expect_err("times out");
        assert!(matches!(e, Error::Timeout), "{e:?}");
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
        // The abandoned unit still heads the only connection; the next caller gets its own row.
        glommio::timer::sleep(Duration::from_millis(400)).await;
        let row = db
            .query_one("SELECT $1::text", &[&"after"])
            .await
            .expect("next query");
        assert_eq!(row.get::<_, String>(0), "after");
        assert_eq!(db.stats().total.errors_timeout, 1);
        db.close().await;
    });
}

#[test]
fn one_client_per_executor_on_every_core() {
    if !io_uring_or_skip() {
        return;
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let per_core = (2 * TASKS) / cores as i64;
    let cfg = config(|c| c.pipeline_size = 1);
    let results = bounded(120, move || {
        LocalExecutorPoolBuilder::new(PoolPlacement::MaxSpread(cores, CpuSet::online().ok()))
            .on_all_shards(move || async move {
                // Nothing crosses cores: each executor opens, uses and closes its own service.
                let rt = pgpipe_glommio::GlommioRuntime::current().expect("on an executor");
                let db = pgpipe::Client::connect(rt.clone(), cfg)
                    .await
                    .expect("connect");
                let done = many_tasks(&db, per_core).await;
                let s = db.stats();
                assert!(s.total.ready_accounts_for_every_unit(), "{s:?}");
                db.close().await;
                (rt.executor_id(), done, s.total.units_per_readable())
            })
            .expect("executor pool")
            .join_all()
    });
    assert_eq!(results.len(), cores);
    let mut ids = Vec::new();
    for r in results {
        let (id, done, fill) = r.expect("executor ran");
        eprintln!("executor {id}: {done} queries, {fill:.1} units per readable tick");
        assert_eq!(done, (per_core * QUERIES) as u64);
        ids.push(id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), cores, "one executor per core");
}

#[test]
fn connect_outside_an_executor_is_a_clear_error() {
    if !io_uring_or_skip() {
        return;
    }
    let url = pgpipe_tests::shared().url();
    let e = bounded(30, move || {
        futures_lite::future::block_on(pgpipe_glommio::connect(&url))
            .err()
            .expect("no executor")
    });
    assert!(
        e.to_string().contains("not inside a glommio LocalExecutor"),
        "{e}"
    );
}

/// Runs itself again in a child process under `ulimit -l 64` (KiB); there, the probe and
/// `connect` must name the memlock limit. The child is recognized by an environment variable.
#[test]
fn probe_names_a_too_low_memlock_limit() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return memlock_child();
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -l 64 && exec \"$0\" --exact probe_names_a_too_low_memlock_limit --nocapture")
        .arg(exe)
        .env(CHILD_ENV, "1")
        .output()
        .expect("run child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("probe under ulimit -l 64"), "{text}");
}

const CHILD_ENV: &str = "PGPIPE_GLOMMIO_MEMLOCK_CHILD";

fn memlock_child() {
    let e = pgpipe_glommio::check_io_uring().expect_err("memlock is too low");
    let Error::Io(io) = &e else { panic!("{e:?}") };
    assert_eq!(io.kind(), std::io::ErrorKind::Unsupported);
    assert!(
        io.to_string()
            .starts_with("io_uring unavailable: RLIMIT_MEMLOCK is 65536 bytes"),
        "{io}"
    );
    // connect says the same when no executor could be made.
    let e = futures_lite::future::block_on(pgpipe_glommio::connect("postgres://u@127.0.0.1/db"))
        .err()
        .expect("no io_uring");
    assert!(e.to_string().contains("RLIMIT_MEMLOCK"), "{e}");
    eprintln!("probe under ulimit -l 64: {e}");
}
