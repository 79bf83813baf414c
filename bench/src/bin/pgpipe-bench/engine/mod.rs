//! One measured run: a candidate client on its own runtime thread, a load model driving it, and
//! the figures of the measured window.
//!
//! Every run gets a fresh thread and a fresh single-threaded runtime (smol, tokio or glommio),
//! so all candidates get the same thread budget — one client thread next to the server on this
//! 2-core machine — and nothing carries over between runs. The benchmark's own tasks and the
//! client's tasks share that thread, as they would in an application.
//!
//! This file owns what a run is made of: the job, the measurement, the operations and their
//! statements, the traits the load models see (a candidate client, the runner thread's runtime)
//! and the thread-local recorder every finished op goes to. Beside it: `window.rs` (the figures
//! of the measured window), `load.rs` (the closed, open and pool-ceiling load models),
//! `candidates.rs` (pgpipe, tokio-postgres and deadpool as candidates) and `runner.rs` (the
//! runner thread and its runtime).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use pgpipe_bench::sys::ThreadCpuClock;

use crate::monitor::Monitor;
use crate::plan::{Candidate, Load, Workload};

pub(crate) mod bulk;
mod candidates;
mod load;
pub(crate) mod pgbench;
mod runner;
mod window;

pub use load::{balance_sum, transactions_done};
pub use runner::run;
pub use window::check_transport;

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
    /// The share of the machine's CPU time the hypervisor gave to other guests during the
    /// window, in percent (`/proc/stat` steal): a round with more has less CPU for everything.
    pub steal_pct: f64,
    /// The host's speed just before the run, while the server idled
    /// (`pgpipe_tests::host_speed::measure`): its register loop, ms (more is slower).
    pub host_core_ms: Option<f64>,
    /// The same probe's 64 MiB pointer chase, ms.
    pub host_memory_ms: Option<f64>,
    /// With `--sample-host-memory`: the median of the sampler's short chases over the run
    /// (warm-up, window and drain), ns per load.
    pub host_memory_during_ns: Option<f64>,
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
    /// Units completed per ReadyForQuery received (pgpipe): how many units shared a Sync on
    /// average (1.0: none did; Sync coalescing, `docs/ROUTING.md`).
    pub units_per_sync: Option<f64>,
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
    pub sums: Option<crate::engine::bulk::Sums>,
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
        marks: &crate::engine::bulk::Marks,
    ) -> Result<crate::engine::bulk::Sums, String> {
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

/// An error as the text a run reports.
fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
