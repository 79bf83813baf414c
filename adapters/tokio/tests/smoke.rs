//! Smoke tests of pgpipe on tokio against a real PostgreSQL server: multi-thread and
//! current-thread runtimes, a LocalSet, an explicitly injected runtime, and timeouts through
//! tokio's clock (including a paused one). Every test runs on a watchdog thread with a limit.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use pgpipe::{Config, Error};
use pgpipe_tokio::{Client, TokioRuntime};
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

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

fn config(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::from_url(&pgpipe_tests::shared().url()).expect("test URL parses");
    f(&mut c);
    c
}

fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("multi-thread runtime")
}

fn current_thread() -> Runtime {
    Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime")
}

/// One task's work: `QUERIES` queries, each checked against its own parameters.
async fn task_body(db: Client, t: i64) -> ThreadId {
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
    thread::current().id()
}

type Work = Pin<Box<dyn Future<Output = ThreadId> + Send>>;

/// `TASKS` concurrent tasks started with `spawn`; returns the threads they finished on.
async fn many_tasks(
    db: &Client,
    spawn: impl Fn(Work) -> JoinHandle<ThreadId>,
) -> HashSet<ThreadId> {
    let handles: Vec<_> = (0..TASKS)
        .map(|t| spawn(Box::pin(task_body(db.clone(), t))))
        .collect();
    let mut threads = HashSet::new();
    for h in handles {
        threads.insert(h.await.expect("task"));
    }
    threads
}

fn assert_clean(db: &Client, units: u64) {
    let s = db.stats();
    assert!(s.total.ready_accounts_for_every_unit(), "{s:?}");
    assert!(s.total.units_completed >= units, "{s:?}");
}

#[test]
fn client_and_its_futures_are_send_sync_clone() {
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    fn send<T: Send>(_: &T) {}
    send_sync_clone::<Client>();
    send_sync_clone::<TokioRuntime>();
    send(&pgpipe_tokio::connect("postgres://localhost/postgres"));
    // Compile-time only: the futures a caller awaits are Send, so tokio::spawn accepts them.
    #[allow(dead_code)]
    fn query_future_is_send(db: &Client) {
        let n = 1i64;
        send(&db.query_one("SELECT $1::int8", &[&n]));
        send(&db.close());
    }
}

#[test]
fn multi_thread_runtime_one_client_on_many_workers() {
    bounded(120, || {
        multi_thread().block_on(async {
            let db = pgpipe_tokio::connect_with(config(|c| c.pipeline_size = 2))
                .await
                .expect("connect");
            let threads = many_tasks(&db, |w| tokio::spawn(w)).await;
            eprintln!(
                "{TASKS} tasks x {QUERIES} queries finished on {} worker threads",
                threads.len()
            );
            assert!(
                threads.len() >= 2,
                "tasks ran on {} thread(s)",
                threads.len()
            );
            assert_clean(&db, (TASKS * QUERIES) as u64);
            db.close().await;
            let e = db.query_one("SELECT 1", &[]).await.expect_err("closed");
            assert!(matches!(e, Error::Closed), "{e:?}");
        })
    });
}

#[test]
fn current_thread_runtime_and_local_set() {
    bounded(120, || {
        let rt = current_thread();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let db = pgpipe_tokio::connect_with(config(|c| c.pipeline_size = 2))
                .await
                .expect("connect");
            let spawned = many_tasks(&db, |w| tokio::spawn(w)).await;
            let locals = many_tasks(&db, |w| tokio::task::spawn_local(w)).await;
            assert_eq!(spawned, locals);
            assert_eq!(spawned.len(), 1, "a current-thread runtime has one thread");
            assert_clean(&db, (2 * TASKS * QUERIES) as u64);
            db.close().await;
        })
    });
}

#[test]
fn explicit_handle_serves_callers_on_another_runtime() {
    bounded(60, || {
        let owner = multi_thread();
        let rt = TokioRuntime::new(owner.handle().clone());
        // The caller's runtime is not the one the sockets, timers and tasks belong to.
        current_thread().block_on(async {
            let db = pgpipe::Client::connect(
                rt,
                config(|c| {
                    c.query_timeout = Some(Duration::from_secs(10));
                }),
            )
            .await
            .expect("connect");
            let threads = many_tasks(&db, |w| tokio::spawn(w)).await;
            assert_eq!(threads.len(), 1);
            assert_clean(&db, (TASKS * QUERIES) as u64);
            db.close().await;
        });
    });
}

#[test]
fn query_timeout_through_the_tokio_clock() {
    bounded(60, || {
        multi_thread().block_on(async {
            let db = pgpipe_tokio::connect_with(config(|c| {
                c.pipeline_size = 1;
                c.query_timeout = Some(Duration::from_millis(50));
            }))
            .await
            .expect("connect");
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
            tokio::time::sleep(Duration::from_millis(400)).await;
            let row = db
                .query_one("SELECT $1::text", &[&"after"])
                .await
                .expect("next query");
            assert_eq!(row.get::<_, String>(0), "after");
            assert_eq!(db.stats().total.errors_timeout, 1);
            db.close().await;
        })
    });
}

#[test]
fn paused_clock_drives_query_timeout() {
    bounded(60, || {
        current_thread().block_on(async {
            let db = pgpipe_tokio::connect_with(config(|c| {
                c.pipeline_size = 1;
                c.query_timeout = Some(Duration::from_secs(3600));
                // Paused, the clock would also run the health check's interval and its
                // connect timeout at once, before the hour-long deadline.
                c.health_check = None;
            }))
            .await
            .expect("connect");
            // With tokio's clock paused, an idle runtime jumps to the next timer: the hour-long
            // deadline (taken from the adapter's now()) passes at once, in virtual time.
            tokio::time::pause();
            let started = Instant::now();
            let e = db
                .query("SELECT pg_sleep(0.3)", &[])
                .await
                .expect_err("times out");
            tokio::time::resume();
            assert!(matches!(e, Error::Timeout), "{e:?}");
            assert!(
                started.elapsed() < Duration::from_millis(250),
                "{:?}",
                started.elapsed()
            );
            db.close().await;
        })
    });
}

#[test]
fn outside_a_runtime_is_a_clear_error() {
    let e = TokioRuntime::try_current().expect_err("no runtime here");
    assert!(e.to_string().contains("no tokio runtime"), "{e}");
    let panic = std::panic::catch_unwind(TokioRuntime::current).expect_err("panics");
    let msg = panic.downcast_ref::<String>().expect("message");
    assert!(msg.contains("TokioRuntime::new(handle)"), "{msg}");
}
