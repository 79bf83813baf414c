//! The load models that drive a candidate and measure the window: the closed loop (tasks that
//! each run one op after another), the open loop (arrivals on a schedule of their own thread)
//! and the pool ceiling (one batch of slow queries); the drain after the window and the
//! transactions' end check.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use pgpipe_bench::sys::{self, ThreadCpuClock};

use super::window::{check_transport, measurement, settle, snapshot};
use super::{
    record, stopping, Db, Job, LocalRt, Measurement, Mode, Op, Rng, CONN_SAMPLE_EVERY, REC,
    SLEEP_SECONDS,
};
use crate::plan::{Load, Workload};

/// Longest wait for in-flight work after the window before the run is cut short.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// A wait group: every task holds a sender; `wait` returns when all are dropped.
fn wait_group() -> (async_channel::Sender<()>, async_channel::Receiver<()>) {
    async_channel::bounded(1)
}

async fn drained<S: LocalRt>(rt: &S, wg: async_channel::Receiver<()>) -> bool {
    futures_lite::future::or(
        async {
            let _ = wg.recv().await;
            true
        },
        async {
            rt.sleep(DRAIN_LIMIT).await;
            false
        },
    )
    .await
}

/// Runs the job's load model against `db` and measures the window.
pub async fn drive<D: Db, S: LocalRt>(db: D, rt: S, job: &Job) -> Measurement {
    REC.with(|r| r.split.set(job.workload == Workload::Hol));
    match job.load {
        Load::Closed { tasks } => closed(db, rt, job, tasks).await,
        Load::Open { rate } => open(db, rt, job, rate).await,
        Load::Ceiling { queries } => ceiling(db, rt, job, queries).await,
        Load::Rows { rows } => crate::engine::bulk::drive(db, job, rows).await,
    }
}

async fn closed<D: Db, S: LocalRt>(db: D, rt: S, job: &Job, tasks: usize) -> Measurement {
    let sampler = job.monitor.sampler(CONN_SAMPLE_EVERY);
    let (wg, wg_wait) = wait_group();
    // Tasks still running: each one left after the drain limit has one op unfinished.
    let live = Rc::new(Cell::new(tasks as u64));
    // Ops each task completed in the window (the fairness figure of transactions).
    let served = Rc::new(RefCell::new(vec![0u64; tasks]));
    let balances = (job.workload == Workload::Tx).then(|| balance_sum(job));
    for i in 0..tasks {
        let db = db.for_task(i);
        let wg = wg.clone();
        let (live, served) = (live.clone(), served.clone());
        let (workload, rows) = (job.workload, job.rows);
        rt.spawn(async move {
            let mut rng = Rng::new(i as u64 + 1);
            while !stopping() {
                let op = workload.op(&mut rng, rows);
                let start = Instant::now();
                let r = db.op(op).await;
                if record(start, Instant::now(), op.is_slow(), r) {
                    served.borrow_mut()[i] += 1;
                }
            }
            live.set(live.get() - 1);
            drop(wg);
        });
    }
    drop(wg);
    let warmup = match job.start_at {
        Some(at) => at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
        None => job.warmup,
    };
    rt.sleep(warmup).await;
    let a = snapshot(&db, job, None);
    REC.with(|r| r.t0.set(Some(a.at)));
    sampler.start();
    rt.sleep(job.window).await;
    let b = snapshot(&db, job, None);
    REC.with(|r| {
        r.t1.set(Some(b.at));
        r.stop.set(true);
    });
    sampler.stop();
    let conns = job.monitor.connections();
    let mut m = measurement(&a, &b, conns, job);
    m.client_connections = job.client_count.as_ref().and_then(|f| f());
    let unfinished = (!drained(&rt, wg_wait).await).then(|| live.get());
    settle(
        &mut m,
        unfinished,
        |u| {
            format!(
                "closed loop: {u} tasks did not finish {} s after the window",
                DRAIN_LIMIT.as_secs()
            )
        },
        sampler.finish(),
    );
    check_transport(&mut m, job);
    if let Some(before) = balances {
        let committed = REC.with(|r| r.finished.get() - r.errors.get());
        transactions_done(&mut m, &served.borrow(), committed, before, job);
    }
    m
}

/// The sum of every balance, for the transactions' end check.
pub fn balance_sum(job: &Job) -> Result<i64, String> {
    let rows = job
        .monitor
        .query("SELECT coalesce(sum(abalance), 0)::int8 FROM pgpipe_bench_accounts")?;
    rows.first()
        .and_then(|r| r.trim().parse().ok())
        .ok_or_else(|| format!("the sum of balances read as {rows:?}"))
}

/// A transactions run's end: the fairness of the window's per-task counts, and the balances
/// checked against the transactions that committed (each adds 1 to one balance; an op that
/// failed may or may not have committed).
pub fn transactions_done(
    m: &mut Measurement,
    served: &[u64],
    committed: u64,
    before: Result<i64, String>,
    job: &Job,
) {
    let mut counts = served.to_vec();
    counts.sort_unstable();
    if let (Some(&slowest), Some(&median)) = (counts.first(), counts.get(counts.len() / 2)) {
        m.slowest_task = Some(slowest);
        m.median_task = Some(median);
        m.fairness = (median > 0).then(|| slowest as f64 / median as f64);
    }
    m.committed = Some(committed);
    let growth = before.and_then(|b| Ok(balance_sum(job)? - b));
    let failed = m.errors;
    let wrong = match &growth {
        Ok(g) => {
            m.balance_growth = Some(*g);
            let g = u64::try_from(*g).unwrap_or(u64::MAX);
            (g < committed || g > committed + failed).then(|| {
                format!("wrong answer: balances grew by {g}, but {committed} transactions committed ({failed} failed)")
            })
        }
        Err(e) => Some(format!("the balances could not be checked: {e}")),
    };
    if let Some(w) = wrong {
        m.errors += 1;
        m.first_error.get_or_insert(w);
    }
}

/// The arrival generator: a thread that wakes at each scheduled time (batching whatever is due)
/// and hands the scheduled instants to the runner. It is a thread of its own so that every
/// runtime gets the same schedule, whatever its timer granularity (tokio's is 1 ms).
struct Generator {
    stop: Arc<AtomicBool>,
    clock: ThreadCpuClock,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Generator {
    fn start(rate: f64, tx: async_channel::Sender<Vec<Instant>>) -> Generator {
        let stop = Arc::new(AtomicBool::new(false));
        let (ctx, crx) = mpsc::channel();
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("arrivals".into())
                .spawn(move || {
                    sys::set_timer_slack(1);
                    let _ = ctx.send(ThreadCpuClock::current());
                    let period = Duration::from_secs_f64(1.0 / rate);
                    let start = Instant::now();
                    let mut i: u64 = 0;
                    let mut next = start;
                    while !stop.load(Relaxed) {
                        let now = Instant::now();
                        let mut batch = Vec::new();
                        while next <= now {
                            batch.push(next);
                            i += 1;
                            next = start + period.mul_f64(i as f64);
                        }
                        if !batch.is_empty() && tx.send_blocking(batch).is_err() {
                            break;
                        }
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                    }
                    i
                })
                .expect("spawning the arrival generator")
        };
        let clock = crx.recv().expect("arrival generator started");
        Generator {
            stop,
            clock,
            thread: Some(thread),
        }
    }

    fn finish(&mut self) -> u64 {
        self.stop.store(true, Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.finish();
    }
}

async fn open<D: Db, S: LocalRt>(db: D, rt: S, job: &Job, rate: f64) -> Measurement {
    REC.with(|r| r.mode.set(Mode::Open));
    let sampler = job.monitor.sampler(CONN_SAMPLE_EVERY);
    let (tx, rx) = async_channel::unbounded::<Vec<Instant>>();
    let (wg, wg_wait) = wait_group();
    let spawned = Rc::new(Cell::new(0u64));
    {
        let (db, rt2, wg, spawned) = (db.clone(), rt.clone(), wg.clone(), spawned.clone());
        let (workload, rows) = (job.workload, job.rows);
        rt.spawn(async move {
            let mut rng = Rng::new(7);
            while let Ok(batch) = rx.recv().await {
                for at in batch {
                    let op = workload.op(&mut rng, rows);
                    // Request k is task k: tokio-postgres with N connections spreads them
                    // round robin, as it spreads closed-loop tasks.
                    let db = db.for_task(spawned.get() as usize);
                    let wg = wg.clone();
                    spawned.set(spawned.get() + 1);
                    rt2.spawn(async move {
                        let r = db.op(op).await;
                        record(at, Instant::now(), op.is_slow(), r);
                        drop(wg);
                    });
                }
            }
            drop(wg);
        });
    }
    drop(wg);
    let mut gen = Generator::start(rate, tx);
    rt.sleep(job.warmup).await;
    let a = snapshot(&db, job, Some(gen.clock));
    REC.with(|r| r.t0.set(Some(a.at)));
    sampler.start();
    rt.sleep(job.window).await;
    let b = snapshot(&db, job, Some(gen.clock));
    REC.with(|r| r.t1.set(Some(b.at)));
    sampler.stop();
    let conns = job.monitor.connections();
    gen.finish();
    // Requests scheduled in the window but still running count in the latency: wait for them.
    let ok = drained(&rt, wg_wait).await;
    let mut m = measurement(&a, &b, conns, job);
    let unfinished =
        (!ok).then(|| spawned.get() - REC.with(|r| r.finished.get()).min(spawned.get()));
    settle(
        &mut m,
        unfinished,
        |u| {
            format!(
                "open loop: {u} requests unfinished {} s after the window",
                DRAIN_LIMIT.as_secs()
            )
        },
        sampler.finish(),
    );
    check_transport(&mut m, job);
    m
}

async fn ceiling<D: Db, S: LocalRt>(db: D, rt: S, job: &Job, queries: usize) -> Measurement {
    // Warm up: every connection opened and the statement prepared, without the 5 ms wait.
    let conns = job.cand.conns;
    let sampler = job.monitor.sampler(CONN_SAMPLE_EVERY);
    let (wg, wg_wait) = wait_group();
    for i in 0..conns * 4 {
        let db = db.for_task(i);
        let wg = wg.clone();
        rt.spawn(async move {
            let r = db.op(Op::Sleep(0.0)).await;
            if let Err(e) = r {
                record(Instant::now(), Instant::now(), false, Err(e));
            }
            drop(wg);
        });
    }
    drop(wg);
    drained(&rt, wg_wait).await;
    REC.with(|r| r.finished.set(0));

    let a = snapshot(&db, job, None);
    REC.with(|r| r.t0.set(Some(a.at)));
    sampler.start();
    let (wg, wg_wait) = wait_group();
    for i in 0..queries {
        let db = db.for_task(i);
        let wg = wg.clone();
        let start = a.at;
        rt.spawn(async move {
            let r = db.op(Op::Sleep(SLEEP_SECONDS)).await;
            record(start, Instant::now(), false, r);
            drop(wg);
        });
    }
    drop(wg);
    let ok = drained(&rt, wg_wait).await;
    let b = snapshot(&db, job, None);
    sampler.stop();
    let server = job.monitor.connections();
    let mut m = measurement(&a, &b, server, job);
    let unfinished =
        (!ok).then(|| queries as u64 - REC.with(|r| r.finished.get()).min(queries as u64));
    settle(
        &mut m,
        unfinished,
        |u| {
            format!(
                "pool ceiling: {u} queries unfinished {} s after the start",
                DRAIN_LIMIT.as_secs()
            )
        },
        sampler.finish(),
    );
    check_transport(&mut m, job);
    m
}
