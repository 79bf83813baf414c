//! Memory stays flat under faults: on each adapter, rounds of concurrent queries during which
//! the client's backends are terminated (`pg_terminate_backend`) and callers drop their
//! futures at random points; after each round, once the connections are back, the process's
//! live heap is read from a counting allocator. It must not grow round over round.
//!
//! One test per process: the allocator's count is global.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::task::Poll;
use std::time::{Duration, Instant};

use pgpipe::rt::Runtime;
use pgpipe::{Client, Config, Error};

/// Live heap bytes of the whole process (allocated minus freed).
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the count is a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        // SAFETY: as `dealloc` and `alloc`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const ROUNDS: usize = 12;
const TASKS: i64 = 200;
const PER_TASK: i64 = 10;

type Boxed<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Polls every future to completion on the current task.
async fn join_all(mut futs: Vec<Boxed<'_>>) {
    futures_lite::future::poll_fn(|cx| {
        futs.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if futs.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Runs psql on a thread (blocking the runtime would freeze the client under test).
async fn psql_off_thread(sql: String) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(pgpipe_tests::shared().psql(&sql));
    });
    loop {
        match rx.try_recv() {
            Ok(r) => {
                r.expect("psql");
                return;
            }
            Err(mpsc::TryRecvError::Empty) => {
                async_io::Timer::after(Duration::from_millis(2)).await;
            }
            Err(e) => panic!("psql thread: {e}"),
        }
    }
}

/// Live heap after each round.
async fn rounds<R: Runtime>(db: Client<R>, app: &str) -> Vec<isize> {
    let mut live = Vec::new();
    for round in 0..ROUNDS as i64 {
        let mut futs: Vec<Boxed<'_>> = (0..TASKS)
            .map(|t| {
                let db = &db;
                Box::pin(async move {
                    for q in 0..PER_TASK {
                        let n = (round * TASKS + t) * PER_TASK + q;
                        let params: [&(dyn pgpipe::types::ToSql + Sync); 1] = [&n];
                        let query = db.query_one("SELECT $1::int8 * 2", &params);
                        if (n * 7919) % 10 == 0 {
                            // A caller that gives up at a random point.
                            let wait = Duration::from_micros((n as u64 * 131) % 3000);
                            let _ = futures_lite::future::or(async { Some(query.await) }, async {
                                async_io::Timer::after(wait).await;
                                None
                            })
                            .await;
                            continue;
                        }
                        match query.await {
                            Ok(row) => assert_eq!(row.get::<_, i64>(0), n * 2),
                            Err(
                                Error::NotDispatched { .. }
                                | Error::Indeterminate { .. }
                                | Error::NoConnection { .. },
                            ) => {}
                            Err(e) if e.code().is_some_and(|c| c.as_str() == "57P01") => {}
                            Err(e) => panic!("unit {n}: {e}"),
                        }
                    }
                }) as Boxed<'_>
            })
            .collect();
        let kill = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{app}'"
        );
        futs.push(Box::pin(async move {
            async_io::Timer::after(Duration::from_millis(5)).await;
            psql_off_thread(kill).await;
        }));
        join_all(futs).await;
        // Service back: every base connection reconnected and answering.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = db.stats();
            if s.open_base == 2 && db.query_one("SELECT 1::int8", &[]).await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "service not back: {s:?}");
            async_io::Timer::after(Duration::from_millis(10)).await;
        }
        live.push(LIVE.load(Relaxed));
    }
    // Not vacuous: the kills reached the connections (two per round).
    let s = db.stats();
    assert!(s.total.reconnects >= ROUNDS as u64, "{s:?}");
    eprintln!(
        "{app}: {} reconnects, {} units completed",
        s.total.reconnects, s.total.units_completed
    );
    db.close().await;
    live
}

fn config(app: &str) -> Config {
    let mut c = Config::parse(&pgpipe_tests::shared().url()).expect("test URL");
    c.pipeline_size = 2;
    c.application_name = Some(app.into());
    c
}

/// The heap after the last round may exceed the heap after the third (buffers and caches
/// grown to their working size by then) by at most this: a leak of one small allocation per
/// unit would be 2,000 units a round, several rounds over.
const SLACK: isize = 256 * 1024;

fn check(adapter: &str, live: &[isize]) {
    eprintln!("{adapter}: live heap after each round (KiB): {:?}", {
        live.iter().map(|b| b / 1024).collect::<Vec<_>>()
    });
    let settled = live[2];
    let last = live[live.len() - 1];
    assert!(
        last <= settled + SLACK,
        "{adapter}: live heap grew from {settled} to {last} bytes over {} rounds",
        live.len() - 3
    );
}

#[test]
fn memory_stays_flat_under_backend_kills_and_dropped_callers() {
    pgpipe_tests::shared();

    let app = "pgpipe_memory_smol";
    let live = smol::block_on(async {
        let db = pgpipe_smol::connect_with(config(app))
            .await
            .expect("connect");
        rounds(db, app).await
    });
    check("smol", &live);

    let app = "pgpipe_memory_tokio";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let live = rt.block_on(async {
        let db = pgpipe_tokio::connect_with(config(app))
            .await
            .expect("connect");
        rounds(db, app).await
    });
    drop(rt);
    check("tokio", &live);

    pgpipe_glommio::check_io_uring().expect("glommio needs io_uring here");
    let app = "pgpipe_memory_glommio";
    let live = glommio::LocalExecutorBuilder::default()
        .name("memory")
        .spawn(move || async move {
            let db = pgpipe_glommio::connect_with(config(app))
                .await
                .expect("connect");
            rounds(db, app).await
        })
        .expect("glommio executor")
        .join()
        .expect("glommio run");
    check("glommio", &live);
}
