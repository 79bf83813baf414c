//! Overflow connections open only while the machine has CPU to spare (`spare_cpu_pct`): the
//! same work-bound load against the real server, on a smol runtime whose CPU counters say the
//! machine is saturated, then idle. The counters are scripted, so the verdict does not depend
//! on how busy the machine running the tests is.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgpipe::rt::{CpuSample, Runtime, Spawn, Target};
use pgpipe::{Client, Config};
use pgpipe_smol::SmolRuntime;
use pgpipe_tests::shared;

/// smol's runtime, with the machine's CPU counters made up: `idle_pct` of every 100 ticks
/// that pass between two samples were idle.
#[derive(Clone)]
struct Scripted {
    inner: SmolRuntime,
    idle_pct: u64,
    ticks: Arc<AtomicU64>,
}

impl Runtime for Scripted {
    type Socket = <SmolRuntime as Runtime>::Socket;
    type Sleep = <SmolRuntime as Runtime>::Sleep;
    type Connect = <SmolRuntime as Runtime>::Connect;

    fn connect(&self, target: &Target) -> Self::Connect {
        self.inner.connect(target)
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
            idle: t * self.idle_pct,
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
    let rt = Scripted {
        inner: SmolRuntime::global(),
        idle_pct,
        ticks: Arc::default(),
    };
    let db = Client::connect(rt, config).await.expect("connect");
    let estimate = |db: &Client<Scripted>| {
        db.statement_estimates()
            .into_iter()
            .filter(|(_, s, _)| s == SLEEP)
            .filter_map(|(_, _, e)| e)
            .max()
            .unwrap_or_default()
    };
    while estimate(&db) < Duration::from_millis(6) {
        db.query(SLEEP, &[&0.03f64])
            .await
            .expect("learning the cost");
    }
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
