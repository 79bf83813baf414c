//! The machine's spare CPU (`spare_cpu_pct`) against the real server, on a smol runtime whose
//! CPU counters say the machine is saturated, then idle: overflow connections open only while
//! it has CPU to spare, and lone answers read late on a saturated machine do not make a cheap
//! statement look slow enough for a lane. The counters are scripted, so the verdicts do not
//! depend on how busy the machine running the tests is.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pgpipe::rt::{CpuSample, Runtime, Socket, Spawn, Target};
use pgpipe::{Client, Config};
use pgpipe_smol::SmolRuntime;
use pgpipe_tests::{highest_estimate, shared};

/// smol's runtime, with the machine's CPU counters made up (`idle_pct` of every 100 ticks that
/// pass between two samples were idle) and, when `read_late` is set, a connection task that
/// loses its CPU for that long when every other answer arrives: what a client on a saturated
/// machine sees, some answers read late. (A delay every read shared would be taken for the
/// network's round trip.)
#[derive(Clone)]
struct Scripted {
    inner: SmolRuntime,
    idle_pct: Arc<AtomicU64>,
    ticks: Arc<AtomicU64>,
    read_late: Duration,
}

impl Scripted {
    fn new(idle_pct: u64, read_late: Duration) -> Scripted {
        Scripted {
            inner: SmolRuntime::global(),
            idle_pct: Arc::new(AtomicU64::new(idle_pct)),
            ticks: Arc::default(),
            read_late,
        }
    }
}

/// A socket whose every other read that brings bytes returns `late` after they came.
struct Late<S> {
    inner: S,
    late: Duration,
    reads: u64,
}

impl<S: Socket> Socket for Late<S> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let r = self.inner.poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.reads += 1;
            if self.reads.is_multiple_of(2) && !self.late.is_zero() {
                // The thread off its CPU: it blocks, as a descheduled one would.
                std::thread::sleep(self.late);
            }
        }
        r
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.inner.poll_write(cx, buf)
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_close(cx)
    }
}

type Inner = <SmolRuntime as Runtime>::Socket;

impl Runtime for Scripted {
    type Socket = Late<Inner>;
    type Sleep = <SmolRuntime as Runtime>::Sleep;
    type Connect = Pin<Box<dyn Future<Output = io::Result<Late<Inner>>> + Send>>;

    fn connect(&self, target: &Target) -> Self::Connect {
        let (connect, late) = (self.inner.connect(target), self.read_late);
        Box::pin(async move {
            let inner = connect.await?;
            Ok(Late {
                inner,
                late,
                reads: 0,
            })
        })
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        self.inner.sleep_until(deadline)
    }

    fn cpu_sample(&self) -> Option<CpuSample> {
        let t = self.ticks.fetch_add(1, Relaxed);
        Some(CpuSample {
            idle: t * self.idle_pct.load(Relaxed),
            total: t * 100,
        })
    }
}

impl<F: Future<Output = ()> + Send + 'static> Spawn<F> for Scripted {
    fn spawn(&self, fut: F) {
        self.inner.spawn(fut)
    }
}

const SLEEP: &str = "SELECT pg_sleep($1::float8)";

/// The work-bound load of the backpressure test, kept up for a few seconds: one base
/// connection, units estimated over the 5 ms work limit, twelve callers each running six in
/// turn (a spell of work-bound routing is measured for a second before anything opens, so the
/// units must keep coming). Returns the client's stats at the end.
async fn work_bound(idle_pct: u64) -> pgpipe::Stats {
    let mut config = Config::parse(&shared().url()).expect("url");
    config.pipeline_size = 1;
    config.max_connections = 4; // 1 base, 1 overflow, 2 kept for exclusive connections
    config.slow_threshold = Duration::from_secs(3600);
    config.max_queue_work = Duration::from_millis(5);
    config.idle_timeout = Duration::from_millis(300);
    assert_eq!(config.spare_cpu_pct, 5, "the default");
    // The cost is learned on a machine with CPU to spare: on a saturated one, lone answers
    // (each unit runs alone here) would not be taken as server time.
    let rt = Scripted::new(50, Duration::ZERO);
    let idle = rt.idle_pct.clone();
    let db = Client::connect(rt, config).await.expect("connect");
    while highest_estimate(db.statement_estimates(), SLEEP) < Duration::from_millis(6) {
        db.query(SLEEP, &[&0.03f64])
            .await
            .expect("learning the cost");
    }
    idle.store(idle_pct, Relaxed);
    let tasks: Vec<_> = (0..12)
        .map(|_| {
            let db = db.clone();
            smol::spawn(async move {
                for _ in 0..6 {
                    let rows = db.query(SLEEP, &[&0.03f64]).await.expect("a row");
                    assert_eq!(rows.len(), 1);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    let s = db.stats();
    db.close().await;
    s
}

#[test]
fn no_overflow_connection_opens_while_the_machine_has_no_cpu_to_spare() {
    smol::block_on(async {
        // 1% idle, under the 5% the default asks for: the work waits on the base connection.
        let s = work_bound(1).await;
        assert!(s.total.work_limited > 0, "{s:?}");
        assert_eq!(s.total.opened_on_demand, 0, "{s:?}");
        assert!(s.overflow_held_busy_cpu > 0, "{s:?}");
        // Half idle: the same load opens its overflow connection.
        let s = work_bound(50).await;
        assert_eq!(s.total.opened_on_demand, 1, "{s:?}");
        assert_eq!(s.overflow_held_busy_cpu, 0, "{s:?}");
    });
}

/// One caller running a cheap statement alone, one unit at a time, for over a second, on a
/// machine whose counters say `idle_pct` idle and whose connection task reads every other
/// answer 8 ms late. Returns the client's stats and the statement's estimate at the end.
async fn lone_and_late(idle_pct: u64) -> (pgpipe::Stats, Duration) {
    const CHEAP: &str = "SELECT $1::int4 AS lone";
    let mut config = Config::parse(&shared().url()).expect("url");
    config.pipeline_size = 1;
    config.max_connections = 4; // 1 base, 1 lane, 2 kept for exclusive connections
    assert_eq!(
        config.slow_threshold,
        Duration::from_millis(2),
        "the default"
    );
    let rt = Scripted::new(idle_pct, Duration::from_millis(8));
    let db = Client::connect(rt, config).await.expect("connect");
    let started = Instant::now();
    let mut runs = 0;
    while runs < 100 || started.elapsed() < Duration::from_millis(1500) {
        let rows = db.query(CHEAP, &[&7i32]).await.expect("a row");
        assert_eq!(rows[0].get::<_, i32>(0), 7);
        runs += 1;
    }
    let (s, est) = (
        db.stats(),
        highest_estimate(db.statement_estimates(), CHEAP),
    );
    db.close().await;
    (s, est)
}

#[test]
fn answers_read_late_on_a_saturated_machine_do_not_open_lanes() {
    smol::block_on(async {
        // 1% idle: each answer's 8 ms wait for the client is not server time; the statement
        // stays cheap and on the pipelined connection.
        let (s, est) = lone_and_late(1).await;
        assert!(est < Duration::from_millis(1), "{est:?} {s:?}");
        assert_eq!(s.total.opened_on_demand, 0, "{s:?}");
        assert_eq!(s.total.lane_units, 0, "{s:?}");
        assert!(s.total.samples_discounted_busy_cpu >= 50, "{s:?}");
        // Half idle: the same late reads count (nothing tells them from server time), the
        // statement looks slow and its units take a lane.
        let (s, est) = lone_and_late(50).await;
        assert!(est >= Duration::from_millis(2), "{est:?} {s:?}");
        assert_eq!(s.total.opened_on_demand, 1, "{s:?}");
        assert!(s.total.lane_units > 0, "{s:?}");
    });
}
