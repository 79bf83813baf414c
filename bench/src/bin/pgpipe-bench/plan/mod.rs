//! What runs: candidates, workloads, load models, delays, and the default and quick plans.
//!
//! This file owns the vocabulary of a plan: workloads, load models, delays, where the
//! candidates connect, a scenario and the plan's knobs. Beside it: `candidate.rs` (a client
//! configuration and its name) and `plans.rs` (the curated default set, `--quick`'s, the cross
//! product of explicit selections and the candidate lists they are made of).

use std::fmt;
use std::time::Duration;

mod candidate;
mod plans;

pub use candidate::{Adapter, Candidate, Kind};
pub use plans::{all_candidates, custom_plan, default_plan};

/// What each operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `SELECT abalance FROM accounts WHERE aid = $1`, random aid.
    Point,
    /// `SELECT aid, abalance FROM accounts WHERE aid = $1`, random aid, the returned aid
    /// checked against the one asked for (a wrong answer is an error): the point select of the
    /// PgBouncer scenarios, where a result handed to the wrong caller must not go unnoticed.
    PointId,
    /// `SELECT 1`.
    Select1,
    /// `UPDATE ... SET abalance = abalance + $1 WHERE aid = $2`, then the point select of it.
    ReadWrite,
    /// `SELECT pg_sleep(0.005)` (pool ceiling).
    Sleep,
    /// Head-of-line: 99% point selects, 1% `SELECT pg_sleep(0.02)`, drawn from each op's
    /// seeded generator; fast and slow ops' latencies are also recorded apart.
    Hol,
    /// `COPY ... FROM STDIN (FORMAT binary)` of generated (int8, text, float8) rows.
    CopyIn,
    /// `COPY ... TO STDOUT (FORMAT binary)` of such rows, every row decoded.
    CopyOut,
    /// The same rows as a streamed `SELECT` on an exclusive connection, every row decoded.
    Stream,
    /// A transaction per op: `BEGIN; UPDATE ... SET abalance = abalance + 1 WHERE aid = $1;
    /// SELECT abalance ... WHERE aid = $1; COMMIT`, random aid; every balance checked at the
    /// end against the transactions committed.
    Tx,
}

impl Workload {
    /// Parses a `--workloads` item.
    pub fn parse(s: &str) -> Result<Workload, String> {
        match s {
            "point" => Ok(Workload::Point),
            "point-id" => Ok(Workload::PointId),
            "select1" => Ok(Workload::Select1),
            "rw" => Ok(Workload::ReadWrite),
            "ceiling" | "sleep" => Ok(Workload::Sleep),
            "hol" => Ok(Workload::Hol),
            "copy-in" => Ok(Workload::CopyIn),
            "copy-out" => Ok(Workload::CopyOut),
            "stream" => Ok(Workload::Stream),
            "tx" => Ok(Workload::Tx),
            _ => Err(format!(
                "unknown workload {s:?} (point, point-id, select1, rw, ceiling, hol, copy-in, copy-out, stream, tx)"
            )),
        }
    }
    /// The name in scenario ids and `--workloads`.
    pub fn label(self) -> &'static str {
        match self {
            Workload::Point => "point",
            Workload::PointId => "point-id",
            Workload::Select1 => "select1",
            Workload::ReadWrite => "rw",
            Workload::Sleep => "ceiling",
            Workload::Hol => "hol",
            Workload::CopyIn => "copy-in",
            Workload::CopyOut => "copy-out",
            Workload::Stream => "stream",
            Workload::Tx => "tx",
        }
    }
    /// The bulk workloads (COPY and streaming): one run moves a fixed number of rows
    /// ([`Load::Rows`]) on one exclusive connection.
    pub fn is_bulk(self) -> bool {
        matches!(
            self,
            Workload::CopyIn | Workload::CopyOut | Workload::Stream
        )
    }
    /// Statements per op (a transaction's BEGIN and COMMIT not counted).
    pub fn statements(self) -> u32 {
        if matches!(self, Workload::ReadWrite | Workload::Tx) {
            2
        } else {
            1
        }
    }

    /// Whether candidate `c` runs this workload: the bulk ones need a client of their own
    /// connection (not deadpool), transactions need one that can hold a transaction
    /// (not the shared tokio-postgres connections), pgbench runs only transactions, and
    /// `-batch` means something only for them.
    pub fn runs(self, c: &Candidate) -> bool {
        match self {
            w if w.is_bulk() => c.kind != Kind::Deadpool && c.kind != Kind::Pgbench,
            Workload::Tx => c.kind != Kind::TokioPostgres,
            _ => c.kind != Kind::Pgbench && !c.batch,
        }
    }
}

/// How load is offered.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// `tasks` concurrent tasks, each issuing its next op when the last completes.
    Closed { tasks: usize },
    /// Arrivals at a fixed rate per second, latency from each scheduled time.
    Open { rate: f64 },
    /// A fixed batch of `queries` concurrent ops; the figure is the time to finish them all.
    Ceiling { queries: usize },
    /// Bulk workloads: `rows` rows moved by one caller; the figure is rows per second.
    Rows { rows: u64 },
}

impl Load {
    pub fn label(&self) -> String {
        match self {
            Load::Closed { tasks } => format!("closed-{tasks}"),
            Load::Open { rate } => format!("open-{}", *rate as u64),
            Load::Ceiling { queries } => format!("batch-{queries}"),
            Load::Rows { rows } => format!("rows-{rows}"),
        }
    }
}

/// Simulated one-way delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Delay {
    /// Straight to the server, no proxy.
    Direct,
    /// Through the delay proxy with this one-way delay (0 = the proxy's own cost).
    Proxy(Duration),
}

impl Delay {
    pub fn parse(s: &str) -> Result<Delay, String> {
        if s == "direct" {
            return Ok(Delay::Direct);
        }
        let ms: f64 = s
            .trim_end_matches("ms")
            .parse()
            .map_err(|_| format!("bad delay {s:?}: `direct` or milliseconds such as 0, 1, 5"))?;
        if !(0.0..=10_000.0).contains(&ms) {
            return Err(format!("bad delay {s:?}"));
        }
        Ok(Delay::Proxy(Duration::from_secs_f64(ms / 1000.0)))
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delay::Direct => f.write_str("direct"),
            Delay::Proxy(d) => {
                let ms = d.as_secs_f64() * 1000.0;
                if ms.fract() == 0.0 {
                    write!(f, "{}ms", ms as u64)
                } else {
                    write!(f, "{ms}ms")
                }
            }
        }
    }
}

/// Where the candidates connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// To the server (straight, or through the delay proxy).
    Server,
    /// Through PgBouncer in transaction mode with [`PGBOUNCER_POOL`] server connections
    /// (`default_pool_size`). Every candidate runs its statements without names there.
    PgBouncer,
}

/// PgBouncer's `default_pool_size` in the PgBouncer scenarios.
pub const PGBOUNCER_POOL: usize = 16;

/// A workload under a load model at a delay, with the candidates that run it.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Names a scenario of the default set that repeats another's workload, load and delay
    /// with other candidates (`tls`, `pgbouncer`, ...); it prefixes the id.
    pub tag: Option<&'static str>,
    pub workload: Workload,
    pub load: Load,
    pub delay: Delay,
    /// To the server, or through PgBouncer.
    pub via: Via,
    /// Client processes per run: 1 runs the candidate on a thread of the benchmark itself;
    /// more start that many child processes of the benchmark binary, each running the
    /// candidate with its share of the closed loop's tasks, at once, and add up their counts.
    pub procs: usize,
    pub candidates: Vec<Candidate>,
}

impl Scenario {
    /// `point-closed-1000-direct`, or with a tag `tls-point-closed-1000-direct`.
    pub fn id(&self) -> String {
        let base = format!(
            "{}-{}-{}",
            self.workload.label(),
            self.load.label(),
            self.delay
        );
        match self.tag {
            Some(t) => format!("{t}-{base}"),
            None => base,
        }
    }

    /// Whether `--scenarios` item `sel` names this scenario: its id, its tag, `copy` for
    /// every bulk scenario (COPY in and out, streaming), `pgbouncer` for every scenario
    /// through PgBouncer and every many-process one (the direct one is their baseline),
    /// `procs` for the many-process ones.
    pub fn selected_by(&self, sel: &str) -> bool {
        self.id() == sel
            || self.tag == Some(sel)
            || (sel == "copy" && self.workload.is_bulk())
            || (sel == "pgbouncer" && (self.via == Via::PgBouncer || self.procs > 1))
            || (sel == "procs" && self.procs > 1)
            || (sel == "transactions" && self.workload == Workload::Tx)
    }
}

/// Knobs of a plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settings {
    /// Rounds over all candidates.
    pub rounds: usize,
    /// Warm-up per run (connect excluded), all workloads but hol.
    pub warmup: Duration,
    /// Measured window per run, all workloads but hol.
    pub window: Duration,
    /// Warm-up of hol runs.
    pub hol_warmup: Duration,
    /// Measured window of hol runs: longer, because p99.99 of the fast queries needs samples.
    pub hol_window: Duration,
    /// Warm-up of transaction runs (every task's first checkout queues).
    pub tx_warmup: Duration,
    /// Measured window of transaction runs directly, and through the delay proxy: long enough
    /// that every one of 1,000 tasks completes several transactions (the fairness figure).
    pub tx_window: Duration,
    pub tx_delayed_window: Duration,
    /// Closed-loop concurrency.
    pub tasks: usize,
    /// Open-loop arrivals per second.
    pub rate: f64,
    /// Rows of the accounts table.
    pub rows: i32,
    /// Queries of the pool-ceiling batch.
    pub ceiling_queries: usize,
    /// Rows of each COPY and streaming run.
    pub copy_rows: u64,
}

#[cfg(test)]
impl Settings {
    /// The plan's shape with nothing to wait for: zero windows, one round, tiny tables.
    pub(crate) fn tiny() -> Settings {
        Settings {
            rounds: 1,
            warmup: Duration::ZERO,
            window: Duration::ZERO,
            hol_warmup: Duration::ZERO,
            hol_window: Duration::ZERO,
            tx_warmup: Duration::ZERO,
            tx_window: Duration::ZERO,
            tx_delayed_window: Duration::ZERO,
            tasks: 1000,
            rate: 100.0,
            rows: 10,
            ceiling_queries: 6,
            copy_rows: 100,
        }
    }
}

impl Settings {
    /// Warm-up and measured window of a run of `w` at `delay`.
    pub fn timing(&self, w: Workload, delay: Delay) -> (Duration, Duration) {
        match (w, delay) {
            (Workload::Hol, _) => (self.hol_warmup, self.hol_window),
            (Workload::Tx, Delay::Direct) => (self.tx_warmup, self.tx_window),
            (Workload::Tx, Delay::Proxy(_)) => (self.tx_warmup, self.tx_delayed_window),
            _ => (self.warmup, self.window),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plans::HOL_CANDIDATES;
    use super::*;

    #[test]
    fn hol_workload() {
        assert_eq!(Workload::parse("hol").unwrap(), Workload::Hol);
        assert_eq!(Workload::Hol.label(), "hol");
        assert_eq!(Workload::Hol.statements(), 1);
        for n in HOL_CANDIDATES {
            Candidate::parse(n).unwrap();
        }
    }

    #[test]
    fn delays() {
        assert_eq!(Delay::parse("direct").unwrap(), Delay::Direct);
        assert_eq!(Delay::parse("5").unwrap().to_string(), "5ms");
        assert_eq!(Delay::parse("0.5ms").unwrap().to_string(), "0.5ms");
        assert!(Delay::parse("fast").is_err());
    }
}
