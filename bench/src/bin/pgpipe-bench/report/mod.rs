//! Summaries over rounds (median and min–max of every figure), the A/A spread, the benchmark's
//! goals, the printed tables (Markdown, readable in a terminal too) and the JSON document.
//!
//! This file owns the results themselves: each scenario's candidates and their rounds
//! ([`ScenarioResult`]), the A/A spread, a goal's shape, the machine's facts and the whole
//! document ([`Report`]). Beside it: `summary.rs` (median and min–max of every figure),
//! `goals.rs` (the headline goals and their table), `table.rs` (one scenario's printed table),
//! `cells.rs` (the figures as text and a failed candidate's row, for every kind's table),
//! `ratio.rs` (a ratio of medians judged against the A/A noise), and a file per kind of scenario
//! with its own table, comparisons and goals: `hol.rs`, `pooler.rs`, `tls.rs`, `bulk.rs`, `tx.rs`.

use serde::Serialize;

use crate::engine::Measurement;
use crate::plan::{Candidate, Delay, Load, Scenario, Settings, Via, Workload};

mod bulk;
mod cells;
mod goals;
mod hol;
mod pooler;
mod ratio;
mod summary;
mod table;
mod tls;
mod tx;

pub use goals::{goals, goals_table};
pub use summary::{Figure, Summary};
pub use table::{columns, scenario_table};

use bulk::{bulk_report, BulkReport};
use hol::hol_goals;
use pooler::pooler_goals;
use tls::{tls_report, TlsReport};

/// One candidate's rounds in one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateResult {
    pub candidate: Candidate,
    pub family: String,
    pub runs: Vec<Measurement>,
    /// Rounds that could not run at all (connect failure, io_uring missing, ...).
    pub failures: Vec<String>,
    pub summary: Summary,
}

/// The A/A control: the same configuration measured as two candidates.
#[derive(Debug, Clone, Serialize)]
pub struct AaSpread {
    pub a: String,
    pub b: String,
    /// |median(a) − median(b)| / mean of the two, in percent.
    pub throughput_pct: f64,
    pub client_cpu_pct: f64,
    pub p99_pct: f64,
    pub p999_pct: f64,
    /// hol: the same for the fast ops' p99.99.
    pub fast_p9999_pct: Option<f64>,
    /// Bulk workloads: the same for the peak heap.
    pub peak_heap_pct: Option<f64>,
}

/// All candidates of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub id: String,
    /// The default set's name for a scenario that repeats another's workload, load and delay
    /// (`tls`).
    pub tag: Option<String>,
    pub workload: Workload,
    pub load: Load,
    pub delay: String,
    /// To the server, or through PgBouncer.
    pub via: Via,
    /// Client processes per run (1: a thread of the benchmark).
    pub procs: usize,
    pub statements_per_op: u32,
    pub candidates: Vec<CandidateResult>,
    pub aa: Option<AaSpread>,
    /// hol: the goals of the head-of-line scenario, from the medians (empty otherwise).
    pub hol_goals: Vec<Goal>,
    /// Through PgBouncer and with many processes: the pooler goals (see [`pooler_goals`]).
    pub pooler_goals: Vec<Goal>,
    /// With `-tls` candidates: TLS against plaintext and against tokio-postgres over TLS.
    pub tls: Option<TlsReport>,
    /// Bulk workloads: pgpipe against tokio-postgres, the memory goal, the rows' sums.
    pub bulk: Option<BulkReport>,
    /// Transactions: pgpipe's interactive transactions and batches against deadpool and
    /// pgbench (see `report/tx.rs`).
    pub tx_goals: Vec<Goal>,
    #[serde(skip)]
    pub delay_kind: Delay,
}

/// A candidate's successful measurements and the errors of the rounds that failed.
pub type Rounds = (Candidate, Vec<Measurement>, Vec<String>);

impl ScenarioResult {
    pub fn new(sc: &Scenario, runs: Vec<Rounds>) -> Self {
        let candidates: Vec<CandidateResult> = runs
            .into_iter()
            .map(|(candidate, runs, failures)| CandidateResult {
                family: candidate.family(),
                summary: Summary::of(&runs, failures.len()),
                candidate,
                runs,
                failures,
            })
            .collect();
        let aa = candidates.iter().find_map(|b| {
            if b.candidate.copy < 2 || b.runs.is_empty() {
                return None;
            }
            // The same configuration as copy 1, however its options were ordered.
            let config = |c: &Candidate| {
                (
                    (c.kind, c.conns, c.max_in_flight, c.max_connections),
                    (c.tls, c.no_fair, c.no_coalesce, c.batch),
                )
            };
            let a = candidates.iter().find(|a| {
                a.candidate.copy == 1
                    && !a.runs.is_empty()
                    && config(&a.candidate) == config(&b.candidate)
            })?;
            let pct = |x: f64, y: f64| {
                if x + y == 0.0 {
                    0.0
                } else {
                    (x - y).abs() / ((x + y) / 2.0) * 100.0
                }
            };
            let (sa, sb) = (&a.summary, &b.summary);
            Some(AaSpread {
                a: a.candidate.name.clone(),
                b: b.candidate.name.clone(),
                throughput_pct: pct(sa.throughput.median, sb.throughput.median),
                client_cpu_pct: pct(sa.client_cpu_us.median, sb.client_cpu_us.median),
                p99_pct: pct(sa.p99_us.median, sb.p99_us.median),
                p999_pct: pct(sa.p999_us.median, sb.p999_us.median),
                fast_p9999_pct: sa
                    .fast_p9999_us
                    .zip(sb.fast_p9999_us)
                    .map(|(x, y)| pct(x.median, y.median)),
                peak_heap_pct: sa
                    .peak_heap_bytes
                    .zip(sb.peak_heap_bytes)
                    .map(|(x, y)| pct(x.median, y.median)),
            })
        });
        let mut s = ScenarioResult {
            id: sc.id(),
            tag: sc.tag.map(str::to_string),
            workload: sc.workload,
            load: sc.load,
            delay: sc.delay.to_string(),
            via: sc.via,
            procs: sc.procs,
            statements_per_op: sc.workload.statements(),
            candidates,
            aa,
            hol_goals: Vec::new(),
            pooler_goals: Vec::new(),
            tls: None,
            bulk: None,
            tx_goals: Vec::new(),
            delay_kind: sc.delay,
        };
        if s.workload == Workload::Hol {
            s.hol_goals = hol_goals(&s);
        }
        // The pooler goals are about point selects; the read/write mix and transactions
        // through PgBouncer are measured beside them (transactions with their own goals).
        if s.is_pooled() && s.workload == Workload::PointId {
            s.pooler_goals = pooler_goals(&s);
        }
        if s.candidates.iter().any(|c| c.candidate.tls) {
            s.tls = Some(tls_report(&s));
        }
        if s.workload.is_bulk() {
            s.bulk = Some(bulk_report(&s));
        }
        if s.workload == Workload::Tx {
            s.tx_goals = tx::goals(&s);
        }
        s
    }

    /// The candidate with the lowest median fast-query p99.99 among those `pick` accepts.
    pub fn best_fast_tail(&self, pick: impl Fn(&Candidate) -> bool) -> Option<&CandidateResult> {
        self.ok()
            .filter(|c| pick(&c.candidate))
            .filter_map(|c| Some((c, c.summary.fast_p9999_us?.median)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c)
    }

    fn ok(&self) -> impl Iterator<Item = &CandidateResult> {
        self.candidates.iter().filter(|c| !c.runs.is_empty())
    }

    /// The candidate with the highest median throughput among those `pick` accepts.
    pub fn best(&self, pick: impl Fn(&Candidate) -> bool) -> Option<&CandidateResult> {
        self.ok().filter(|c| pick(&c.candidate)).max_by(|a, b| {
            a.summary
                .throughput
                .median
                .total_cmp(&b.summary.throughput.median)
        })
    }

    pub fn get(&self, name: &str) -> Option<&CandidateResult> {
        self.ok().find(|c| c.candidate.name == name)
    }

    /// Through PgBouncer or in many processes: its own table and goals.
    pub fn is_pooled(&self) -> bool {
        self.via == Via::PgBouncer || self.procs > 1
    }

    pub fn describe(&self) -> String {
        let w = match self.workload {
            Workload::Point => "point select by random key",
            Workload::PointId => "point select by random key, the key returned and checked",
            Workload::Select1 => "SELECT 1",
            Workload::ReadWrite => "read/write mix (UPDATE then SELECT; 1 op = 2 statements)",
            Workload::Sleep => "pool ceiling: SELECT pg_sleep(0.005)",
            Workload::Hol => "head-of-line: 99% point selects, 1% SELECT pg_sleep(0.02)",
            Workload::CopyIn => "COPY FROM STDIN (FORMAT binary) of (int8, text, float8) rows",
            Workload::CopyOut => "COPY TO STDOUT (FORMAT binary) of (int8, text, float8) rows, each decoded",
            Workload::Stream => "streamed SELECT of (int8, text, float8) rows (pgpipe query_stream on a session, tokio-postgres query_raw), each decoded",
            Workload::Tx => "a transaction per op (BEGIN; UPDATE one account's balance; SELECT it; COMMIT), balances checked after each run",
        };
        let l = match self.load {
            Load::Closed { tasks } => format!("closed loop, {tasks} tasks"),
            Load::Open { rate } => {
                format!("open loop, {rate} arrivals/s, latency from each scheduled time")
            }
            Load::Ceiling { queries } => format!("{queries} concurrent queries, time to finish"),
            Load::Rows { rows } => format!("{rows} rows per run, one connection"),
        };
        let d = match self.delay_kind {
            Delay::Direct => "direct connection".to_string(),
            Delay::Proxy(x) => format!("delay proxy, {} ms one way", x.as_secs_f64() * 1e3),
        };
        let l = if self.procs > 1 {
            format!(
                "{} processes at once, each a {l} / {}",
                self.procs, self.procs
            )
        } else {
            l
        };
        let d = if self.via == Via::PgBouncer {
            format!(
                "through PgBouncer (transaction mode, pool {}), no named statements",
                crate::plan::PGBOUNCER_POOL
            )
        } else {
            d
        };
        if self.tls.is_some() {
            format!("{w}; {l}; {d}; -tls candidates over TLS (verify-full), the others plaintext")
        } else {
            format!("{w}; {l}; {d}")
        }
    }
}

/// One goal: what is aimed at, what the run measured, and whether that meets it.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub goal: String,
    pub measured: String,
    pub met: Option<bool>,
}

/// Facts about the machine and the server, for the record.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub mem_total_gib: f64,
    pub kernel: String,
    pub server_version: String,
    pub server: String,
    /// The kernel's autogroup scheduling during the run (on, off, off for the run, not
    /// present): with it on, every PostgreSQL backend is scheduled as a session of its own
    /// (docs/BENCHMARKS.md, "Autogroup").
    pub sched_autogroup: String,
}

impl Machine {
    pub fn collect(server_version: String, server: String, sched_autogroup: String) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib: f64 = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Machine {
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            mem_total_gib: (kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            server_version,
            server,
            sched_autogroup,
        }
    }
}

/// The whole JSON document.
#[derive(Debug, Serialize)]
pub struct Report {
    pub command: String,
    pub started_unix: u64,
    pub elapsed_seconds: f64,
    pub git_commit: Option<String>,
    /// Share of the machine's CPU busy in the second before the first run (other work).
    pub background_busy_pct: f64,
    pub machine: Machine,
    pub settings: Settings,
    pub quick: bool,
    pub goals: Vec<Goal>,
    pub scenarios: Vec<ScenarioResult>,
}
