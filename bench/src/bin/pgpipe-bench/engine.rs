//! One measured run: a candidate client on its own runtime thread, a load model driving it, and
//! the figures of the measured window.
//!
//! Every run gets a fresh thread and a fresh single-threaded runtime (smol, tokio or glommio),
//! so all candidates get the same thread budget — one client thread next to the server on this
//! 2-core machine — and nothing carries over between runs. The benchmark's own tasks and the
//! client's tasks share that thread, as they would in an application.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use pgpipe_bench::sys::{self, MachineCpu, ThreadCpuClock};

use crate::monitor::{ConnStats, Monitor};
use crate::plan::{Adapter, Candidate, Kind, Load, Workload};

/// What a runner thread needs to know (all `Send`).
#[derive(Clone)]
pub struct Job {
    /// The client configuration under test.
    pub cand: Candidate,
    /// What each operation does.
    pub workload: Workload,
    /// How load is offered.
    pub load: Load,
    /// Time between connecting and the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
    /// Where the candidate connects (the server, or a delay proxy in front of it).
    pub host: String,
    pub port: u16,
    /// Credentials and database of the server.
    pub base: pgpipe::Config,
    /// Rows of the accounts table (keys are drawn from 1..=rows).
    pub rows: i32,
    /// The side connection that counts server backends.
    pub monitor: Monitor,
    /// The delay proxy's thread CPU clock, whose time is not the client's.
    pub proxy_cpu: Option<ThreadCpuClock>,
    /// The root certificate (PEM) TLS candidates verify the server against; plaintext
    /// candidates ignore it. A TLS candidate without one fails.
    pub root_cert: Option<PathBuf>,
    /// Behind a transaction-mode pooler: no named statements. pgpipe runs with
    /// `named_statements = false`; tokio-postgres and deadpool use `query_typed` (Parse of the
    /// unnamed statement, Bind, Execute, Sync in one round trip) instead of prepared statements.
    pub unnamed: bool,
    /// Closed loop: when the measured window starts (wall clock), instead of `warmup` after
    /// connecting; the processes of a many-process run share it.
    pub start_at: Option<SystemTime>,
    /// Counts the candidate's client connections at the end of the window, where the server's
    /// count does not tell (behind PgBouncer: its `SHOW CLIENTS`).
    pub client_count: Option<ClientCount>,
    /// Reads the CPU time of the pooler the candidate goes through (another process).
    pub pooler_cpu: Option<PoolerCpu>,
}

/// See [`Job::pooler_cpu`].
pub type PoolerCpu = Arc<dyn Fn() -> Option<Duration> + Send + Sync>;

/// See [`Job::client_count`].
pub type ClientCount = Arc<dyn Fn() -> Option<i64> + Send + Sync>;

/// The figures of one run's measured window.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Measurement {
    /// Operations completed in the window (rw: one op = UPDATE + SELECT).
    pub ops: u64,
    /// Window length.
    pub seconds: f64,
    /// ops / seconds.
    pub throughput: f64,
    /// Errors over the whole run, warm-up and drain included: must be 0.
    pub errors: u64,
    /// The first error's message, if any.
    pub first_error: Option<String>,
    /// Process CPU (getrusage) minus the proxy's and the arrival generator's threads, per op.
    pub client_cpu_us: f64,
    /// Busy CPU of the whole machine (/proc/stat, server and proxy included), per op.
    pub machine_cpu_us: f64,
    /// The delay proxy's thread, per op (0 when connecting directly).
    pub proxy_cpu_us: f64,
    /// Through PgBouncer: its process's CPU (user + system, 10 ms resolution) per op.
    pub pooler_cpu_us: Option<f64>,
    /// Latency in µs: from the op's start (closed loop), from its scheduled time (open loop),
    /// from the common start (pool ceiling).
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
    /// Latency samples behind the percentiles.
    pub samples: u64,
    /// Client backends of the server at the end of the window (pg_stat_activity).
    pub server_connections: i64,
    /// The candidate's client connections at the end of the window where they are not its
    /// server backends (through PgBouncer: its `SHOW CLIENTS`); None where not counted.
    pub client_connections: Option<i64>,
    /// Mean of the candidate's server backends, sampled every `CONN_SAMPLE_EVERY` over the
    /// window by a thread of its own (None if no sample succeeded).
    pub conns_avg: Option<f64>,
    /// Most of the candidate's server backends in any of those samples.
    pub conns_max: Option<i64>,
    /// Samples behind `conns_avg` and `conns_max`.
    pub conns_samples: u64,
    /// hol only: latency of the fast ops (point selects) alone, in µs, on the same clock as
    /// the all-ops figures above.
    pub fast_p50_us: Option<f64>,
    /// hol only: fast ops' p99, µs.
    pub fast_p99_us: Option<f64>,
    /// hol only: fast ops' p99.9, µs.
    pub fast_p999_us: Option<f64>,
    /// hol only: fast ops' p99.99, µs.
    pub fast_p9999_us: Option<f64>,
    /// hol only: fast ops' maximum, µs.
    pub fast_max_us: Option<f64>,
    /// hol only: latency samples of fast ops.
    pub fast_samples: Option<u64>,
    /// hol only: latency of the slow ops (`SELECT pg_sleep(0.02)`), p50 in µs.
    pub slow_p50_us: Option<f64>,
    /// hol only: slow ops' p99, µs.
    pub slow_p99_us: Option<f64>,
    /// hol only: latency samples of slow ops.
    pub slow_samples: Option<u64>,
    /// pgpipe only: units completed per readable tick, over the window.
    pub units_per_readable: Option<f64>,
    /// pgpipe only: socket write calls per unit, over the window (over TLS: writes of
    /// plaintext into the TLS session, each sealed and sent at once).
    pub writes_per_unit: Option<f64>,
    /// pgpipe only: plaintext bytes written per write call, over the window.
    pub bytes_per_write: Option<f64>,
    /// pgpipe over TLS only: plaintext bytes per TLS record written, over the window
    /// (`ConnStats::bytes_per_tls_record` of the window's deltas).
    pub bytes_per_tls_record: Option<f64>,
    /// pgpipe over TLS only: TLS records written per unit, over the window.
    pub tls_records_per_unit: Option<f64>,
    /// pgpipe only: TLS handshakes of the client's connections so far (at the window's end).
    pub tls_handshakes: Option<u64>,
    /// The candidate's server backends after the window (and drain) that use TLS
    /// (pg_stat_ssl); None if the monitor could not tell.
    pub tls_backends: Option<i64>,
    /// All of the candidate's server backends in that same query.
    pub backends_checked: Option<i64>,
    /// The TLS versions and ciphers of those backends, as pg_stat_ssl names them.
    pub tls_cipher: Option<String>,
    /// Open loop: the arrival rate asked for.
    pub offered_rate: Option<f64>,
    /// Requests still unfinished when the drain limit ran out (counted in `errors` too).
    pub unfinished: u64,
    /// Requests that did not complete successfully: ops that returned an error (whole run)
    /// plus `unfinished`. Unlike `errors`, an unfinished drain is not counted as at least one.
    pub dropped: u64,
    /// Through the delay proxy: the most any chunk went out after its due time during the
    /// run, in µs (the proxy's own scheduling error).
    pub proxy_late_max_us: Option<f64>,
    /// Bulk workloads: the client's peak heap while the rows moved: the most live heap bytes
    /// of the process, less the runtime's (`runtime_heap_bytes`); `bulk.rs`.
    pub peak_heap_bytes: Option<f64>,
    /// Bulk workloads: the client's live heap bytes when the rows started to move (its
    /// connections, buffers, caches).
    pub heap_at_start_bytes: Option<f64>,
    /// Bulk workloads: live heap bytes of the run's thread and runtime before the client
    /// connected (not in the two figures above).
    pub runtime_heap_bytes: Option<f64>,
    /// Bulk workloads: what the rows add up to (COPY in: what the server holds afterwards).
    pub sums: Option<crate::bulk::Sums>,
    /// Transactions: the fewest in-window transactions any task completed, against the median
    /// task's (1.0 = every task served alike; None when the median is 0).
    pub fairness: Option<f64>,
    /// Transactions: the slowest-served task's and the median task's in-window counts.
    pub slowest_task: Option<u64>,
    pub median_task: Option<u64>,
    /// Transactions: how many committed over the whole run (warm-up and drain included), and
    /// how much the balances grew meanwhile (each adds 1): equal, or the run has an error.
    pub committed: Option<u64>,
    pub balance_growth: Option<i64>,
}

/// One database operation with its arguments.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// `POINT_SQL` with this aid.
    Point(i32),
    /// `POINT_ID_SQL` with this aid; the aid that comes back must be this one.
    PointId(i32),
    /// `SELECT1_SQL`.
    Select1,
    /// `UPDATE_SQL`, then `POINT_SQL` of the same row.
    ReadWrite { aid: i32, delta: i32 },
    /// `SLEEP_SQL` with this many seconds.
    Sleep(f64),
    /// The slow op of the hol workload: `HOL_SLOW_SQL`.
    Slow,
    /// A transaction: `UPDATE_SQL` adding 1 to this aid's balance, then `POINT_SQL` of it.
    Tx(i32),
}

pub const POINT_SQL: &str = "SELECT abalance FROM pgpipe_bench_accounts WHERE aid = $1";
/// The checked point select: the key comes back with the balance and is compared with the key
/// asked for.
pub const POINT_ID_SQL: &str = "SELECT aid, abalance FROM pgpipe_bench_accounts WHERE aid = $1";
pub const SELECT1_SQL: &str = "SELECT 1";
pub const UPDATE_SQL: &str =
    "UPDATE pgpipe_bench_accounts SET abalance = abalance + $1 WHERE aid = $2";
pub const SLEEP_SQL: &str = "SELECT pg_sleep($1)";
/// The slow statement of the hol workload: a literal without parameters, so that it is one
/// statement text (one cache entry, one cost estimate) for every client.
pub const HOL_SLOW_SQL: &str = "SELECT pg_sleep(0.02)";
/// hol: slow ops per 100 ops.
pub const HOL_SLOW_PER_100: u64 = 1;
/// How often a run's connection sampler counts the candidate's server backends.
pub const CONN_SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Server-side wait of the pool-ceiling experiment (seeds/003: 600 × 5 ms).
pub const SLEEP_SECONDS: f64 = 0.005;

/// Small, fast PRNG (xorshift64*) for keys; one per task, so no shared state.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn key(&mut self, rows: i32) -> i32 {
        1 + (self.next() % rows as u64) as i32
    }
}

impl Workload {
    fn op(self, rng: &mut Rng, rows: i32) -> Op {
        match self {
            Workload::Point => Op::Point(rng.key(rows)),
            Workload::PointId => Op::PointId(rng.key(rows)),
            Workload::Select1 => Op::Select1,
            Workload::ReadWrite => Op::ReadWrite {
                aid: rng.key(rows),
                delta: (rng.next() % 2001) as i32 - 1000,
            },
            Workload::Sleep => Op::Sleep(SLEEP_SECONDS),
            Workload::Hol => {
                if rng.next() % 100 < HOL_SLOW_PER_100 {
                    Op::Slow
                } else {
                    Op::Point(rng.key(rows))
                }
            }
            Workload::Tx => Op::Tx(rng.key(rows)),
            // Their runs are `Load::Rows`, which `bulk.rs` drives without ops.
            Workload::CopyIn | Workload::CopyOut | Workload::Stream => {
                unreachable!("bulk workloads move rows, not ops")
            }
        }
    }
}

impl Op {
    /// The slow op of the hol workload (recorded in the slow histogram, not the fast one).
    fn is_slow(self) -> bool {
        matches!(self, Op::Slow)
    }
}

/// A candidate client seen by the load models.
pub trait Db: Clone + 'static {
    /// The handle task `i` uses (tokio-postgres with N connections spreads tasks over them).
    fn for_task(&self, _i: usize) -> Self {
        self.clone()
    }
    /// Runs one operation and checks its result.
    async fn op(&self, op: Op) -> Result<(), String>;
    /// pgpipe's counters (summed over its connections).
    fn fill(&self) -> Option<pgpipe::ConnStats> {
        None
    }
    /// Runs a bulk workload of `rows` rows on a connection of its own (`bulk.rs`), calling
    /// `marks.start()` once that connection is ready and `marks.end()` after the last row.
    async fn bulk(
        &self,
        w: Workload,
        rows: u64,
        marks: &crate::bulk::Marks,
    ) -> Result<crate::bulk::Sums, String> {
        let _ = (rows, marks);
        Err(format!("this candidate does not run {}", w.label()))
    }
}

/// Spawning and sleeping on the runner thread's runtime; futures need not be `Send`.
pub trait LocalRt: Clone + 'static {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F);
    async fn sleep(&self, d: Duration);
}

// ---------------------------------------------------------------------------------------------
// The recorder: thread-local, because every task of a run lives on the runner thread.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Completions in the window count, latency from the op's start.
    Closed,
    /// Latency of every request *scheduled* in the window, from its scheduled time.
    Open,
}

struct Rec {
    mode: Cell<Mode>,
    t0: Cell<Option<Instant>>,
    t1: Cell<Option<Instant>>,
    stop: Cell<bool>,
    hist: RefCell<Histogram<u64>>,
    /// hol: fast and slow ops are also recorded apart (`fast`, `slow`).
    split: Cell<bool>,
    fast: RefCell<Histogram<u64>>,
    slow: RefCell<Histogram<u64>>,
    done: Cell<u64>,
    errors: Cell<u64>,
    first_error: RefCell<Option<String>>,
    finished: Cell<u64>,
}

/// ns, up to 10 minutes, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_max(600_000_000_000, 3).expect("histogram bounds")
}

thread_local! {
    static REC: Rec = Rec {
        mode: Cell::new(Mode::Closed),
        t0: Cell::new(None),
        t1: Cell::new(None),
        stop: Cell::new(false),
        hist: RefCell::new(histogram()),
        split: Cell::new(false),
        fast: RefCell::new(histogram()),
        slow: RefCell::new(histogram()),
        done: Cell::new(0),
        errors: Cell::new(0),
        first_error: RefCell::new(None),
        finished: Cell::new(0),
    };
}

fn stopping() -> bool {
    REC.with(|r| r.stop.get())
}

/// Records one finished op. `from` is its start (closed) or scheduled time (open); `slow`
/// says which of the hol histograms it also goes to. Returns whether it succeeded within the
/// measured window.
fn record(from: Instant, end: Instant, slow: bool, result: Result<(), String>) -> bool {
    REC.with(|r| {
        r.finished.set(r.finished.get() + 1);
        let ok = result.is_ok();
        if let Err(e) = result {
            r.errors.set(r.errors.get() + 1);
            r.first_error.borrow_mut().get_or_insert(e);
        }
        let Some(t0) = r.t0.get() else { return false };
        let end_in_window = end >= t0 && r.t1.get().is_none_or(|t1| end < t1);
        if end_in_window {
            r.done.set(r.done.get() + 1);
        }
        let sample = match r.mode.get() {
            Mode::Closed => end_in_window,
            Mode::Open => from >= t0 && r.t1.get().is_none_or(|t1| from < t1),
        };
        if sample {
            let ns = (end.saturating_duration_since(from).as_nanos() as u64).max(1);
            r.hist.borrow_mut().saturating_record(ns);
            if r.split.get() {
                let h = if slow { &r.slow } else { &r.fast };
                h.borrow_mut().saturating_record(ns);
            }
        }
        ok && end_in_window
    })
}

struct Snapshot {
    at: Instant,
    process: Duration,
    helpers: Duration,
    proxy: Duration,
    pooler: Option<Duration>,
    machine: MachineCpu,
    fill: Option<pgpipe::ConnStats>,
}

fn snapshot<D: Db>(db: &D, job: &Job, generator: Option<ThreadCpuClock>) -> Snapshot {
    let proxy = job.proxy_cpu.and_then(|c| c.read()).unwrap_or_default();
    let gen = generator.and_then(|c| c.read()).unwrap_or_default();
    Snapshot {
        at: Instant::now(),
        process: sys::process_cpu(),
        helpers: proxy + gen,
        proxy,
        pooler: job.pooler_cpu.as_ref().and_then(|f| f()),
        machine: MachineCpu::read(),
        fill: db.fill(),
    }
}

fn measurement(a: &Snapshot, b: &Snapshot, conns: i64, job: &Job) -> Measurement {
    REC.with(|r| {
        let ops = r.done.get();
        let per_op = |d: Duration| {
            if ops == 0 {
                0.0
            } else {
                d.as_secs_f64() * 1e6 / ops as f64
            }
        };
        let client = (b.process.saturating_sub(a.process))
            .saturating_sub(b.helpers.saturating_sub(a.helpers));
        let h = r.hist.borrow();
        let q = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let split = r.split.get();
        let fast = r.fast.borrow();
        let slow = r.slow.borrow();
        // A percentile of the fast or slow ops, µs; None outside hol or without samples.
        let part = |h: &Histogram<u64>, q: f64| {
            (split && !h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
        };
        let seconds = (b.at - a.at).as_secs_f64();
        let fill = match (&a.fill, &b.fill) {
            (Some(x), Some(y)) => Some(Fill::between(x, y)),
            _ => None,
        };
        Measurement {
            ops,
            seconds,
            throughput: ops as f64 / seconds,
            errors: r.errors.get(),
            first_error: r.first_error.borrow().clone(),
            client_cpu_us: per_op(client),
            machine_cpu_us: per_op(b.machine.busy_since(&a.machine)),
            proxy_cpu_us: per_op(b.proxy.saturating_sub(a.proxy)),
            pooler_cpu_us: a
                .pooler
                .zip(b.pooler)
                .map(|(x, y)| per_op(y.saturating_sub(x))),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: h.max() as f64 / 1e3,
            samples: h.len(),
            server_connections: conns,
            client_connections: None,
            conns_avg: None,
            conns_max: None,
            conns_samples: 0,
            fast_p50_us: part(&fast, 0.5),
            fast_p99_us: part(&fast, 0.99),
            fast_p999_us: part(&fast, 0.999),
            fast_p9999_us: part(&fast, 0.9999),
            fast_max_us: (split && !fast.is_empty()).then(|| fast.max() as f64 / 1e3),
            fast_samples: split.then(|| fast.len()),
            slow_p50_us: part(&slow, 0.5),
            slow_p99_us: part(&slow, 0.99),
            slow_samples: split.then(|| slow.len()),
            units_per_readable: fill.as_ref().map(|f| f.units_per_readable),
            writes_per_unit: fill.as_ref().map(|f| f.writes_per_unit),
            bytes_per_write: fill.as_ref().map(|f| f.bytes_per_write),
            bytes_per_tls_record: fill.as_ref().and_then(|f| f.bytes_per_tls_record),
            tls_records_per_unit: fill.as_ref().and_then(|f| f.tls_records_per_unit),
            tls_handshakes: b.fill.as_ref().map(|s| s.tls_handshakes),
            tls_backends: None,
            backends_checked: None,
            tls_cipher: None,
            offered_rate: match job.load {
                Load::Open { rate } => Some(rate),
                _ => None,
            },
            unfinished: 0,
            dropped: 0,
            proxy_late_max_us: None,
            peak_heap_bytes: None,
            heap_at_start_bytes: None,
            runtime_heap_bytes: None,
            sums: None,
            fairness: None,
            slowest_task: None,
            median_task: None,
            committed: None,
            balance_growth: None,
        }
    })
}

/// pgpipe's ratios over a window, from the counters at its start and end.
struct Fill {
    units_per_readable: f64,
    writes_per_unit: f64,
    bytes_per_write: f64,
    bytes_per_tls_record: Option<f64>,
    tls_records_per_unit: Option<f64>,
}

impl Fill {
    fn between(a: &pgpipe::ConnStats, b: &pgpipe::ConnStats) -> Fill {
        let mut d = pgpipe::ConnStats::default();
        d.units_completed = b.units_completed - a.units_completed;
        d.readable_events = b.readable_events - a.readable_events;
        d.write_calls = b.write_calls - a.write_calls;
        d.bytes_out = b.bytes_out - a.bytes_out;
        d.tls_records_out = b.tls_records_out - a.tls_records_out;
        let per = |x: u64, y: u64| if y == 0 { 0.0 } else { x as f64 / y as f64 };
        let tls = d.tls_records_out > 0;
        Fill {
            units_per_readable: d.units_per_readable(),
            writes_per_unit: d.writes_per_unit(),
            bytes_per_write: per(d.bytes_out, d.write_calls),
            bytes_per_tls_record: tls.then(|| d.bytes_per_tls_record()),
            tls_records_per_unit: tls.then(|| per(d.tls_records_out, d.units_completed)),
        }
    }
}

/// After the window: how many of the candidate's backends use TLS, with which versions and
/// ciphers; a candidate whose backends are not what its name says (TLS or plaintext) gets an
/// error, so that a run never reports the wrong transport.
pub fn check_transport(m: &mut Measurement, job: &Job) {
    let sql = format!(
        "SELECT count(*) FILTER (WHERE s.ssl) || '|' || count(*) || '|' || \
         coalesce(string_agg(DISTINCT s.version || ' ' || s.cipher, ', '), '') \
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name = '{}' AND a.backend_type = 'client backend'",
        crate::monitor::APP_NAME
    );
    let Ok(rows) = job.monitor.query(&sql) else {
        return;
    };
    let Some(row) = rows.first() else { return };
    let mut it = row.splitn(3, '|');
    let (Some(Ok(tls)), Some(Ok(all)), Some(cipher)) = (
        it.next().map(str::parse::<i64>),
        it.next().map(str::parse::<i64>),
        it.next(),
    ) else {
        return;
    };
    m.tls_backends = Some(tls);
    m.backends_checked = Some(all);
    m.tls_cipher = (!cipher.is_empty()).then(|| cipher.to_string());
    let wrong = if job.cand.tls { all - tls } else { tls };
    if wrong > 0 {
        m.errors += 1;
        m.first_error.get_or_insert_with(|| {
            format!(
                "{wrong} of the candidate's {all} server connections are {}",
                if job.cand.tls {
                    "plaintext"
                } else {
                    "over TLS"
                }
            )
        });
    }
}

/// After the drain: the errors of the whole run (drain included), the requests left
/// unfinished (`None` when everything finished; `what` says why otherwise), the dropped count,
/// and the connection samples of the window.
fn settle(
    m: &mut Measurement,
    unfinished: Option<u64>,
    what: impl FnOnce(u64) -> String,
    conns: ConnStats,
) {
    let op_errors = REC.with(|r| {
        if m.first_error.is_none() {
            m.first_error = r.first_error.borrow().clone();
        }
        r.errors.get()
    });
    m.errors = op_errors;
    if let Some(u) = unfinished {
        m.unfinished = u;
        m.errors += u.max(1);
        m.first_error.get_or_insert_with(|| what(u));
    }
    m.dropped = op_errors + m.unfinished;
    m.conns_avg = conns.avg;
    m.conns_max = conns.max;
    m.conns_samples = conns.samples;
}

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
        Load::Rows { rows } => crate::bulk::drive(db, job, rows).await,
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

// ---------------------------------------------------------------------------------------------
// Runtimes.

#[derive(Clone)]
struct TokioLocal;

impl LocalRt for TokioLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        drop(tokio::task::spawn_local(f));
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await
    }
}

#[derive(Clone)]
struct SmolLocal(Rc<async_executor::LocalExecutor<'static>>);

impl LocalRt for SmolLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        self.0.spawn(f).detach();
    }
    async fn sleep(&self, d: Duration) {
        async_io::Timer::after(d).await;
    }
}

#[derive(Clone)]
struct GlommioLocal;

impl LocalRt for GlommioLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        glommio::spawn_local(f).detach();
    }
    async fn sleep(&self, d: Duration) {
        glommio::timer::sleep(d).await
    }
}

// ---------------------------------------------------------------------------------------------
// Candidates.

/// A pgpipe client; transactions run as interactive `transaction()`s, or (`batch`, the
/// candidate's `-batch`) as atomic batches on the shared path.
#[derive(Clone)]
struct PgpipeDb<R: pgpipe::rt::Runtime> {
    client: pgpipe::Client<R>,
    batch: bool,
}

impl<R: pgpipe::rt::Runtime> PgpipeDb<R> {
    fn new(client: &pgpipe::Client<R>, job: &Job) -> Self {
        PgpipeDb {
            client: client.clone(),
            batch: job.cand.batch,
        }
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl<R: pgpipe::Adapter> Db for PgpipeDb<R> {
    async fn op(&self, op: Op) -> Result<(), String> {
        let c = &self.client;
        match op {
            Op::Point(aid) => {
                let row = c.query_one(POINT_SQL, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
            }
            Op::PointId(aid) => {
                let row = c.query_one(POINT_ID_SQL, &[&aid]).await.map_err(err)?;
                check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
                row.try_get::<_, i32>(1).map_err(err)?;
            }
            Op::Select1 => {
                let row = c.query_one(SELECT1_SQL, &[]).await.map_err(err)?;
                check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
            }
            Op::ReadWrite { aid, delta } => {
                let n = c.execute(UPDATE_SQL, &[&delta, &aid]).await.map_err(err)?;
                check_updated(n)?;
                let row = c.query_one(POINT_SQL, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
            }
            Op::Sleep(s) => {
                c.query(SLEEP_SQL, &[&s]).await.map_err(err)?;
            }
            Op::Slow => check_rows(c.query(HOL_SLOW_SQL, &[]).await.map_err(err)?.len())?,
            Op::Tx(aid) if self.batch => {
                let r = c
                    .batch()
                    .add(UPDATE_SQL, &[&1i32, &aid])
                    .add(POINT_SQL, &[&aid])
                    .run()
                    .await
                    .map_err(err)?;
                check_updated(r[0].affected())?;
                check_rows(r[1].rows().len())?;
            }
            Op::Tx(aid) => {
                let tx = c.transaction().await.map_err(err)?;
                check_updated(tx.execute(UPDATE_SQL, &[&1i32, &aid]).await.map_err(err)?)?;
                let rows = tx.query_and_commit(POINT_SQL, &[&aid]).await.map_err(err)?;
                check_rows(rows.len())?;
            }
        }
        Ok(())
    }

    fn fill(&self) -> Option<pgpipe::ConnStats> {
        Some(self.client.stats().total)
    }

    async fn bulk(
        &self,
        w: Workload,
        rows: u64,
        marks: &crate::bulk::Marks,
    ) -> Result<crate::bulk::Sums, String> {
        crate::bulk::pgpipe(&self.client, w, rows, marks).await
    }
}

fn check_one(v: i32) -> Result<(), String> {
    if v == 1 {
        Ok(())
    } else {
        Err(format!("SELECT 1 returned {v}"))
    }
}

/// A point select's answer must be the row asked for.
fn check_key(asked: i32, got: i32) -> Result<(), String> {
    if asked == got {
        Ok(())
    } else {
        Err(format!(
            "wrong answer: asked for aid {asked}, got the row of aid {got}"
        ))
    }
}

fn check_rows(n: usize) -> Result<(), String> {
    if n == 1 {
        Ok(())
    } else {
        Err(format!("a statement returned {n} rows, expected 1"))
    }
}

fn check_updated(n: u64) -> Result<(), String> {
    if n == 1 {
        Ok(())
    } else {
        Err(format!("UPDATE affected {n} rows, expected 1"))
    }
}

/// One tokio-postgres connection with its statements prepared once, as a careful user would;
/// behind a transaction-mode pooler (`unnamed`) none, every op through `query_typed`.
struct TpgConn {
    client: tokio_postgres::Client,
    statements: Option<TpgStatements>,
}

/// The prepared statements of one tokio-postgres connection.
struct TpgStatements {
    point: tokio_postgres::Statement,
    point_id: tokio_postgres::Statement,
    select1: tokio_postgres::Statement,
    update: tokio_postgres::Statement,
    sleep: tokio_postgres::Statement,
    slow: tokio_postgres::Statement,
}

impl TpgConn {
    /// Connects in plaintext, or over TLS through `tls`; prepares the statements unless
    /// `unnamed`.
    async fn connect(
        cfg: &tokio_postgres::Config,
        tls: Option<&tokio_postgres_rustls::MakeRustlsConnect>,
        unnamed: bool,
    ) -> Result<TpgConn, String> {
        let client = match tls {
            None => {
                let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(err)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                client
            }
            Some(tls) => {
                let (client, conn) = cfg.connect(tls.clone()).await.map_err(err)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                client
            }
        };
        if unnamed {
            return Ok(TpgConn {
                client,
                statements: None,
            });
        }
        Ok(TpgConn {
            statements: Some(TpgStatements {
                point: client.prepare(POINT_SQL).await.map_err(err)?,
                point_id: client.prepare(POINT_ID_SQL).await.map_err(err)?,
                select1: client.prepare(SELECT1_SQL).await.map_err(err)?,
                update: client.prepare(UPDATE_SQL).await.map_err(err)?,
                sleep: client.prepare(SLEEP_SQL).await.map_err(err)?,
                slow: client.prepare(HOL_SLOW_SQL).await.map_err(err)?,
            }),
            client,
        })
    }
}

/// One op through `query_typed`: the unnamed statement parsed, bound and executed in one
/// round trip with the parameter types given, nothing prepared (what works behind a
/// transaction-mode pooler that cannot carry named statements).
async fn tpg_typed_op(c: &tokio_postgres::Client, op: Op) -> Result<(), String> {
    use tokio_postgres::types::Type;
    match op {
        Op::Point(aid) => {
            let row = c
                .query_typed_one(POINT_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::PointId(aid) => {
            let row = c
                .query_typed_one(POINT_ID_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
            row.try_get::<_, i32>(1).map_err(err)?;
        }
        Op::Select1 => {
            let row = c.query_typed_one(SELECT1_SQL, &[]).await.map_err(err)?;
            check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
        }
        Op::ReadWrite { aid, delta } => {
            let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
                [(&delta, Type::INT4), (&aid, Type::INT4)];
            let stream = c.query_typed_raw(UPDATE_SQL, params).await.map_err(err)?;
            let mut stream = std::pin::pin!(stream);
            while let Some(r) = futures_lite::StreamExt::next(&mut stream).await {
                r.map_err(err)?;
            }
            check_updated(stream.rows_affected().unwrap_or(0))?;
            let row = c
                .query_typed_one(POINT_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::Sleep(s) => {
            c.query_typed(SLEEP_SQL, &[(&s, Type::FLOAT8)])
                .await
                .map_err(err)?;
        }
        Op::Slow => check_rows(c.query_typed(HOL_SLOW_SQL, &[]).await.map_err(err)?.len())?,
        Op::Tx(_) => return Err(NO_TX.into()),
    }
    Ok(())
}

/// Shared tokio-postgres connections cannot hold a caller's transaction.
const NO_TX: &str = "tokio-postgres on shared connections does not run transactions";

async fn tpg_op(
    c: &tokio_postgres::Client,
    op: Op,
    st: [&tokio_postgres::Statement; 6],
) -> Result<(), String> {
    let [point, point_id, select1, update, sleep, slow] = st;
    match op {
        Op::Point(aid) => {
            let row = c.query_one(point, &[&aid]).await.map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::PointId(aid) => {
            let row = c.query_one(point_id, &[&aid]).await.map_err(err)?;
            check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
            row.try_get::<_, i32>(1).map_err(err)?;
        }
        Op::Select1 => {
            let row = c.query_one(select1, &[]).await.map_err(err)?;
            check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
        }
        Op::ReadWrite { aid, delta } => {
            check_updated(c.execute(update, &[&delta, &aid]).await.map_err(err)?)?;
            let row = c.query_one(point, &[&aid]).await.map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::Sleep(s) => {
            c.query(sleep, &[&s]).await.map_err(err)?;
        }
        Op::Slow => check_rows(c.query(slow, &[]).await.map_err(err)?.len())?,
        Op::Tx(_) => return Err(NO_TX.into()),
    }
    Ok(())
}

/// tokio-postgres on N connections; task `i` always uses connection `i % N`.
#[derive(Clone)]
struct TpgDb {
    conns: Rc<Vec<TpgConn>>,
    mine: usize,
}

impl Db for TpgDb {
    fn for_task(&self, i: usize) -> Self {
        TpgDb {
            conns: self.conns.clone(),
            mine: i % self.conns.len(),
        }
    }
    async fn op(&self, op: Op) -> Result<(), String> {
        let c = &self.conns[self.mine];
        match &c.statements {
            Some(s) => {
                tpg_op(
                    &c.client,
                    op,
                    [
                        &s.point,
                        &s.point_id,
                        &s.select1,
                        &s.update,
                        &s.sleep,
                        &s.slow,
                    ],
                )
                .await
            }
            None => tpg_typed_op(&c.client, op).await,
        }
    }

    async fn bulk(
        &self,
        w: Workload,
        rows: u64,
        marks: &crate::bulk::Marks,
    ) -> Result<crate::bulk::Sums, String> {
        crate::bulk::tokio_postgres(&self.conns[self.mine].client, w, rows, marks).await
    }
}

/// deadpool-postgres: check a connection out per op, statements from its per-connection cache;
/// behind a transaction-mode pooler (`unnamed`, the second field) no cache, every op through
/// its client's `query_typed`.
#[derive(Clone)]
struct DeadpoolDb(deadpool_postgres::Pool, bool);

impl Db for DeadpoolDb {
    async fn op(&self, op: Op) -> Result<(), String> {
        let mut c = self.0.get().await.map_err(err)?;
        if let Op::Tx(aid) = op {
            // BEGIN, the two statements (from the connection's statement cache), COMMIT: each
            // waits for its answer, as with any classic pool.
            let tx = c.transaction().await.map_err(err)?;
            let update = tx.prepare_cached(UPDATE_SQL).await.map_err(err)?;
            check_updated(tx.execute(&update, &[&1i32, &aid]).await.map_err(err)?)?;
            let point = tx.prepare_cached(POINT_SQL).await.map_err(err)?;
            check_rows(tx.query(&point, &[&aid]).await.map_err(err)?.len())?;
            return tx.commit().await.map_err(err);
        }
        if self.1 {
            return tpg_typed_op(&c, op).await;
        }
        let sql = match op {
            Op::Point(_) => POINT_SQL,
            Op::PointId(_) => POINT_ID_SQL,
            Op::Select1 => SELECT1_SQL,
            Op::ReadWrite { .. } | Op::Tx(_) => UPDATE_SQL,
            Op::Sleep(_) => SLEEP_SQL,
            Op::Slow => HOL_SLOW_SQL,
        };
        let st = c.prepare_cached(sql).await.map_err(err)?;
        match op {
            Op::ReadWrite { aid, delta } => {
                check_updated(c.execute(&st, &[&delta, &aid]).await.map_err(err)?)?;
                let point = c.prepare_cached(POINT_SQL).await.map_err(err)?;
                let row = c.query_one(&point, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
                Ok(())
            }
            op => tpg_op(&c, op, [&st, &st, &st, &st, &st, &st]).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runner threads.

impl Job {
    fn pgpipe_config(&self) -> pgpipe::Config {
        let mut c = self.base.clone();
        c.host = self.host.clone();
        c.port = self.port;
        // Explicit either way: the default (`prefer`) would use TLS wherever the server offers it.
        if self.cand.tls {
            c.tls.mode = pgpipe::SslMode::VerifyFull;
            c.tls.root_cert = self.root_cert.clone().map(pgpipe::RootCert::File);
        } else {
            c.tls.mode = pgpipe::SslMode::Disable;
        }
        c.pipeline_size = self.cand.conns;
        c.application_name = Some(crate::monitor::APP_NAME.into());
        if self.unnamed {
            // Set explicitly; pgpipe would also detect the pooler on the first vanished
            // statement and switch by itself.
            c.named_statements = false;
        }
        if let Some(w) = self.cand.max_in_flight {
            c.max_in_flight = w;
        }

        if let Some(m) = self.cand.max_connections {
            c.max_connections = m;
        }
        if self.cand.no_fair {
            c.fair_lanes = false;
        }
        if self.cand.no_coalesce {
            c.sync_coalescing = false;
        }
        c
    }

    fn tpg_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.host)
            .port(self.port)
            .user(&self.base.user)
            .dbname(self.base.database())
            .application_name(crate::monitor::APP_NAME)
            // TLS must happen (`require`); the rustls configuration verifies chain and name.
            .ssl_mode(if self.cand.tls {
                tokio_postgres::config::SslMode::Require
            } else {
                tokio_postgres::config::SslMode::Disable
            });
        if let Some(p) = &self.base.password_for(&self.base.servers()[0]) {
            c.password(p);
        }
        c
    }

    /// tokio-postgres' TLS connector for a `-tls` candidate: rustls with the ring provider,
    /// the root certificate as the only trusted root (chain and host name verified, as
    /// pgpipe's `verify-full`). None for a plaintext candidate.
    fn tpg_tls(&self) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>, String> {
        if !self.cand.tls {
            return Ok(None);
        }
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let path = self
            .root_cert
            .as_ref()
            .ok_or("a TLS candidate needs a root certificate (--sslrootcert)")?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in
            CertificateDer::pem_file_iter(path).map_err(|e| format!("{}: {e}", path.display()))?
        {
            roots
                .add(cert.map_err(|e| format!("{}: {e}", path.display()))?)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
    }
}

/// Runs `job` on a fresh thread and runtime; returns its measurement or why it failed.
pub fn run(job: Job) -> Result<Measurement, String> {
    // Bulk runs measure the heap: counted from before the runner thread exists, so that
    // everything its runtime and client allocate is in the figure.
    let bulk = job.workload.is_bulk();
    if bulk {
        pgpipe_bench::alloc::track(true);
    }
    let r = run_thread(job);
    if bulk {
        pgpipe_bench::alloc::track(false);
    }
    r
}

fn run_thread(job: Job) -> Result<Measurement, String> {
    let name = format!("run-{}", job.cand.name);
    let t = std::thread::Builder::new()
        .name(name)
        .spawn(move || match job.cand.kind {
            Kind::Pgpipe(Adapter::Smol) => run_smol(&job),
            Kind::Pgpipe(Adapter::Tokio) => run_tokio(&job, TokioClient::Pgpipe),
            Kind::Pgpipe(Adapter::Glommio) => run_glommio(&job),
            Kind::TokioPostgres => run_tokio(&job, TokioClient::TokioPostgres),
            Kind::Deadpool => run_tokio(&job, TokioClient::Deadpool),
            Kind::Pgbench => crate::pgbench::run(&job),
        })
        .map_err(err)?;
    match t.join() {
        Ok(r) => r,
        Err(p) => Err(format!(
            "runner panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// How long a client may take to close after the run.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

async fn close_within<S: LocalRt, R: pgpipe::rt::Runtime>(rt: &S, c: &pgpipe::Client<R>) {
    futures_lite::future::or(c.close(), rt.sleep(CLOSE_LIMIT)).await
}

fn run_smol(job: &Job) -> Result<Measurement, String> {
    // One LocalExecutor runs the connection tasks and the benchmark's tasks alike, driven by
    // this thread's block_on (which also polls async-io's reactor): smol's single-thread setup.
    let local = Rc::new(async_executor::LocalExecutor::new());
    let rt = SmolLocal(local.clone());
    async_io::block_on(local.run(async {
        crate::bulk::runtime_ready();
        let client = pgpipe::Client::connect(
            pgpipe_smol::SmolLocalRuntime::on(local.clone()),
            job.pgpipe_config(),
        )
        .await
        .map_err(err)?;
        let m = drive(PgpipeDb::new(&client, job), rt.clone(), job).await;
        close_within(&rt, &client).await;
        Ok(m)
    }))
}

fn run_glommio(job: &Job) -> Result<Measurement, String> {
    pgpipe_glommio::check_io_uring().map_err(err)?;
    let ex = glommio::LocalExecutorBuilder::default()
        .make()
        .map_err(err)?;
    ex.run(async {
        crate::bulk::runtime_ready();
        let client = pgpipe_glommio::connect_with(job.pgpipe_config())
            .await
            .map_err(err)?;
        let m = drive(PgpipeDb::new(&client, job), GlommioLocal, job).await;
        close_within(&GlommioLocal, &client).await;
        Ok(m)
    })
}

enum TokioClient {
    Pgpipe,
    TokioPostgres,
    Deadpool,
}

fn run_tokio(job: &Job, which: TokioClient) -> Result<Measurement, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(err)?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        crate::bulk::runtime_ready();
        match which {
            TokioClient::Pgpipe => {
                let client = pgpipe::Client::connect(
                    pgpipe_tokio::TokioRuntime::current(),
                    job.pgpipe_config(),
                )
                .await
                .map_err(err)?;
                let m = drive(PgpipeDb::new(&client, job), TokioLocal, job).await;
                close_within(&TokioLocal, &client).await;
                Ok(m)
            }
            TokioClient::TokioPostgres => {
                let cfg = job.tpg_config();
                let tls = job.tpg_tls()?;
                let mut conns = Vec::with_capacity(job.cand.conns);
                for _ in 0..job.cand.conns {
                    conns.push(TpgConn::connect(&cfg, tls.as_ref(), job.unnamed).await?);
                }
                let db = TpgDb {
                    conns: Rc::new(conns),
                    mine: 0,
                };
                Ok(drive(db, TokioLocal, job).await)
            }
            TokioClient::Deadpool => {
                let mgr_config = || deadpool_postgres::ManagerConfig {
                    recycling_method: deadpool_postgres::RecyclingMethod::Fast,
                };
                let mgr = match job.tpg_tls()? {
                    None => deadpool_postgres::Manager::from_config(
                        job.tpg_config(),
                        tokio_postgres::NoTls,
                        mgr_config(),
                    ),
                    Some(tls) => {
                        deadpool_postgres::Manager::from_config(job.tpg_config(), tls, mgr_config())
                    }
                };
                let pool = deadpool_postgres::Pool::builder(mgr)
                    .max_size(job.cand.conns)
                    .build()
                    .map_err(err)?;
                let m = drive(DeadpoolDb(pool.clone(), job.unnamed), TokioLocal, job).await;
                pool.close();
                Ok(m)
            }
        }
    })
}
