//! Summaries over rounds (median and min–max of every figure), the A/A spread, the benchmark's
//! goals, the printed tables (Markdown, readable in a terminal too) and the JSON document.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::engine::Measurement;
use crate::plan::{Candidate, Delay, Kind, Load, Scenario, Settings, Via, Workload};

mod tx;

/// Median and range of one figure over the rounds.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Figure {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Figure {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Figure> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Figure {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Every figure of a candidate in a scenario, over its successful rounds.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub rounds_ok: usize,
    pub rounds_failed: usize,
    /// Errors over all rounds (must be 0).
    pub errors: u64,
    pub throughput: Figure,
    pub client_cpu_us: Figure,
    pub machine_cpu_us: Figure,
    pub proxy_cpu_us: Figure,
    /// Through PgBouncer: its CPU per op.
    pub pooler_cpu_us: Option<Figure>,
    pub p50_us: Figure,
    pub p90_us: Figure,
    pub p99_us: Figure,
    pub p999_us: Figure,
    pub p9999_us: Figure,
    pub max_us: Figure,
    pub server_connections: Figure,
    /// Client connections at the end of each window, where counted apart from the server's
    /// (through PgBouncer).
    pub client_connections: Option<Figure>,
    /// Mean of the server connections sampled over each window.
    pub conns_avg: Option<Figure>,
    /// The most server connections in any sample of each window.
    pub conns_max: Option<Figure>,
    /// Requests dropped (ops that failed + unfinished) over all rounds.
    pub dropped: u64,
    /// hol: the fast ops' p50, µs.
    pub fast_p50_us: Option<Figure>,
    /// hol: the fast ops' p99, µs.
    pub fast_p99_us: Option<Figure>,
    /// hol: the fast ops' p99.9, µs.
    pub fast_p999_us: Option<Figure>,
    /// hol: the fast ops' p99.99, µs.
    pub fast_p9999_us: Option<Figure>,
    /// hol: the fast ops' maximum, µs.
    pub fast_max_us: Option<Figure>,
    /// hol: latency samples of fast ops per round.
    pub fast_samples: Option<Figure>,
    /// hol: the slow ops' p50, µs.
    pub slow_p50_us: Option<Figure>,
    /// hol: the slow ops' p99, µs.
    pub slow_p99_us: Option<Figure>,
    /// hol: latency samples of slow ops per round.
    pub slow_samples: Option<Figure>,
    pub units_per_readable: Option<Figure>,
    pub writes_per_unit: Option<Figure>,
    /// pgpipe: plaintext bytes per write call.
    pub bytes_per_write: Option<Figure>,
    /// pgpipe over TLS: plaintext bytes per TLS record.
    pub bytes_per_tls_record: Option<Figure>,
    /// pgpipe over TLS: TLS records per unit.
    pub tls_records_per_unit: Option<Figure>,
    /// The candidate's server backends using TLS at the end of each window (pg_stat_ssl).
    pub tls_backends: Option<Figure>,
    /// Pool ceiling: time to finish the batch, in ms.
    pub wall_ms: Figure,
    /// Through the delay proxy: the proxy's worst lateness per run, in µs.
    pub proxy_late_max_us: Option<Figure>,
    /// Bulk workloads: the client's peak heap while the rows moved.
    pub peak_heap_bytes: Option<Figure>,
    /// Bulk workloads: the client's heap when the rows started to move.
    pub heap_at_start_bytes: Option<Figure>,
    /// Bulk workloads: the runtime's heap before the client connected.
    pub runtime_heap_bytes: Option<Figure>,
    /// Transactions: the slowest-served task's share of the median task's (see
    /// `Measurement::fairness`); its `min` is the worst round.
    pub fairness: Option<Figure>,
    /// Transactions: the slowest-served and the median task's in-window counts.
    pub slowest_task: Option<Figure>,
    pub median_task: Option<Figure>,
}

impl Summary {
    fn of(runs: &[Measurement], failed: usize) -> Summary {
        let f = |g: fn(&Measurement) -> f64| Figure::of(runs.iter().map(g)).unwrap_or_default();
        let o = |g: fn(&Measurement) -> Option<f64>| Figure::of(runs.iter().filter_map(g));
        Summary {
            rounds_ok: runs.len(),
            rounds_failed: failed,
            errors: runs.iter().map(|m| m.errors).sum(),
            throughput: f(|m| m.throughput),
            client_cpu_us: f(|m| m.client_cpu_us),
            machine_cpu_us: f(|m| m.machine_cpu_us),
            proxy_cpu_us: f(|m| m.proxy_cpu_us),
            pooler_cpu_us: o(|m| m.pooler_cpu_us),
            p50_us: f(|m| m.p50_us),
            p90_us: f(|m| m.p90_us),
            p99_us: f(|m| m.p99_us),
            p999_us: f(|m| m.p999_us),
            p9999_us: f(|m| m.p9999_us),
            max_us: f(|m| m.max_us),
            server_connections: f(|m| m.server_connections as f64),
            client_connections: o(|m| m.client_connections.map(|n| n as f64)),
            conns_avg: o(|m| m.conns_avg),
            conns_max: o(|m| m.conns_max.map(|n| n as f64)),
            dropped: runs.iter().map(|m| m.dropped).sum(),
            fast_p50_us: o(|m| m.fast_p50_us),
            fast_p99_us: o(|m| m.fast_p99_us),
            fast_p999_us: o(|m| m.fast_p999_us),
            fast_p9999_us: o(|m| m.fast_p9999_us),
            fast_max_us: o(|m| m.fast_max_us),
            fast_samples: o(|m| m.fast_samples.map(|n| n as f64)),
            slow_p50_us: o(|m| m.slow_p50_us),
            slow_p99_us: o(|m| m.slow_p99_us),
            slow_samples: o(|m| m.slow_samples.map(|n| n as f64)),
            units_per_readable: o(|m| m.units_per_readable),
            writes_per_unit: o(|m| m.writes_per_unit),
            bytes_per_write: o(|m| m.bytes_per_write),
            bytes_per_tls_record: o(|m| m.bytes_per_tls_record),
            tls_records_per_unit: o(|m| m.tls_records_per_unit),
            tls_backends: o(|m| m.tls_backends.map(|n| n as f64)),
            wall_ms: f(|m| m.seconds * 1e3),
            proxy_late_max_us: o(|m| m.proxy_late_max_us),
            peak_heap_bytes: o(|m| m.peak_heap_bytes),
            heap_at_start_bytes: o(|m| m.heap_at_start_bytes),
            runtime_heap_bytes: o(|m| m.runtime_heap_bytes),
            fairness: o(|m| m.fairness),
            slowest_task: o(|m| m.slowest_task.map(|n| n as f64)),
            median_task: o(|m| m.median_task.map(|n| n as f64)),
        }
    }
}

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
        if s.is_pooled() {
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

fn is_tpg(c: &Candidate) -> bool {
    c.kind == Kind::TokioPostgres
}
fn is_deadpool(c: &Candidate) -> bool {
    c.kind == Kind::Deadpool
}

fn headline(scenarios: &[ScenarioResult], delay: Delay) -> Option<&ScenarioResult> {
    scenarios.iter().find(|s| {
        s.tag.is_none()
            && s.workload == Workload::Point
            && matches!(s.load, Load::Closed { .. })
            && s.delay_kind == delay
    })
}

/// Checks the headline goals (throughput, client CPU, fill ratios, tail, long round trips)
/// on the point-select, closed-loop scenarios.
pub fn goals(scenarios: &[ScenarioResult]) -> Vec<Goal> {
    let mut out = Vec::new();
    let mut goal = |goal: &str, measured: String, met: Option<bool>| {
        out.push(Goal {
            goal: goal.into(),
            measured,
            met,
        })
    };
    let na = || "not measured in this run".to_string();
    if let Some(s) = headline(scenarios, Delay::Direct) {
        // The A/A duplicate is left out so that noise cannot pick the winner.
        let p = s.best(|c| c.is_pgpipe() && c.copy == 1);
        let t = s.best(is_tpg);
        let d = s.best(is_deadpool);
        match (p, t) {
            (Some(p), Some(t)) => {
                let r = p.summary.throughput.median / t.summary.throughput.median;
                goal(
                    "throughput >= 1.2x best tokio-postgres",
                    format!(
                        "{:.2}x ({} {:.0} ops/s vs {} {:.0} ops/s)",
                        r,
                        p.candidate.name,
                        p.summary.throughput.median,
                        t.candidate.name,
                        t.summary.throughput.median
                    ),
                    Some(r >= 1.2),
                );
                let cp = p.summary.client_cpu_us.median;
                let ct = t.summary.client_cpu_us.median;
                goal(
                    "client CPU <= 5 µs/op",
                    format!("{cp:.2} µs/op ({})", p.candidate.name),
                    Some(cp <= 5.0),
                );
                goal(
                    "client CPU per op <= 0.75x best tokio-postgres",
                    format!(
                        "{:.2}x ({cp:.2} µs/op vs {ct:.2} µs/op of {})",
                        cp / ct,
                        t.candidate.name
                    ),
                    Some(cp <= 0.75 * ct),
                );
            }
            _ => goal("throughput >= 1.2x best tokio-postgres", na(), None),
        }
        if let (Some(p), Some(d)) = (p, d) {
            let r = p.summary.throughput.median / d.summary.throughput.median;
            goal(
                "throughput >= 4x best deadpool",
                format!(
                    "{:.2}x ({} {:.0} ops/s vs {} {:.0} ops/s)",
                    r,
                    p.candidate.name,
                    p.summary.throughput.median,
                    d.candidate.name,
                    d.summary.throughput.median
                ),
                Some(r >= 4.0),
            );
        }
        if let Some(p) = p {
            let upr = p
                .summary
                .units_per_readable
                .map(|f| f.median)
                .unwrap_or(0.0);
            let wpu = p
                .summary
                .writes_per_unit
                .map(|f| f.median)
                .unwrap_or(f64::MAX);
            goal(
                "units/readable >= 8 at 1000 tasks",
                format!("{upr:.2} ({})", p.candidate.name),
                Some(upr >= 8.0),
            );
            goal(
                "writes/unit <= 0.2 at 1000 tasks",
                format!("{wpu:.3} ({})", p.candidate.name),
                Some(wpu <= 0.2),
            );
            if let Some(d32) = s.get("deadpool-32") {
                let (a, b) = (p.summary.p999_us.median, d32.summary.p999_us.median);
                goal(
                    "p99.9 no worse than deadpool-32",
                    format!(
                        "{:.2} ms vs {:.2} ms (p99.99 {:.2} vs {:.2} ms, max {:.2} vs {:.2} ms)",
                        a / 1e3,
                        b / 1e3,
                        p.summary.p9999_us.median / 1e3,
                        d32.summary.p9999_us.median / 1e3,
                        p.summary.max_us.median / 1e3,
                        d32.summary.max_us.median / 1e3
                    ),
                    Some(a <= b),
                );
            }
        }
    } else {
        goal("point select, 1000 tasks, direct", na(), None);
    }
    let five = headline(scenarios, Delay::Proxy(Duration::from_millis(5)));
    let d32 = five.and_then(|s| s.get("deadpool-32"));
    let four = |tuned: bool| {
        five.and_then(|s| {
            s.best(|c| {
                c.is_pgpipe() && c.conns == 4 && c.copy == 1 && c.max_in_flight.is_some() == tuned
            })
        })
    };
    for (tuned, label) in [
        (
            false,
            "at 5 ms one-way: pgpipe with 4 connections >= 15x deadpool-32 (default config)",
        ),
        (true, "same, with max_in_flight raised (-wN candidates)"),
    ] {
        match (four(tuned), d32) {
            (Some(p), Some(d)) => {
                let r = p.summary.throughput.median / d.summary.throughput.median;
                goal(
                    label,
                    format!(
                        "{:.1}x ({} {:.0} ops/s vs deadpool-32 {:.0} ops/s)",
                        r,
                        p.candidate.name,
                        p.summary.throughput.median,
                        d.summary.throughput.median
                    ),
                    Some(r >= 15.0),
                );
            }
            _ if tuned => {}
            _ => goal(label, na(), None),
        }
    }
    let errors: u64 = scenarios
        .iter()
        .flat_map(|s| &s.candidates)
        .map(|c| c.summary.errors + c.failures.len() as u64)
        .sum();
    goal(
        "errors = 0 (all runs)",
        format!("{errors}"),
        Some(errors == 0),
    );
    out
}

/// The goals of a hol scenario, from the medians. Open loop: the best pgpipe candidate by fast
/// p99.99 (A/A duplicate not eligible) and pgpipe-tokio-4 against the deadpool candidate with
/// the lowest fast p99.99: tail no worse, nothing dropped, fewer connections on average. Closed
/// loop: the pgpipe candidate with the highest throughput and pgpipe-tokio-4 against the best
/// deadpool's throughput.
fn hol_goals(s: &ScenarioResult) -> Vec<Goal> {
    let mut out = Vec::new();
    let na = |goal: String| Goal {
        goal,
        measured: "not measured in this run".into(),
        met: None,
    };
    let pgpipe = |c: &Candidate| c.is_pgpipe() && c.copy == 1;
    // The best pgpipe, then pgpipe-tokio-4 if it is another one.
    fn named<'a>(
        s: &'a ScenarioResult,
        best: Option<&'a CandidateResult>,
    ) -> Vec<&'a CandidateResult> {
        let mut v: Vec<&CandidateResult> = best.into_iter().collect();
        if let Some(t4) = s.get("pgpipe-tokio-4") {
            if !v.iter().any(|c| c.candidate.name == t4.candidate.name) {
                v.push(t4);
            }
        }
        v
    }
    match s.load {
        Load::Open { .. } => {
            let d = s.best_fast_tail(is_deadpool);
            let ps = named(s, s.best_fast_tail(pgpipe));
            let (Some(d), false) = (d, ps.is_empty()) else {
                out.push(na(
                    "fast p99.99 of pgpipe no worse than the best deadpool's".into(),
                ));
                return out;
            };
            let dm = &d.summary;
            let d_tail = dm.fast_p9999_us.map_or(f64::NAN, |f| f.median);
            let d_conns = dm.conns_avg.map_or(f64::NAN, |f| f.median);
            for p in ps {
                let (name, pm) = (&p.candidate.name, &p.summary);
                let tail = pm.fast_p9999_us.map_or(f64::NAN, |f| f.median);
                out.push(Goal {
                    goal: format!(
                        "{name}: fast p99.99 <= best deadpool's ({})",
                        d.candidate.name
                    ),
                    measured: format!(
                        "{:.2} ms vs {:.2} ms ({:.2}x)",
                        tail / 1e3,
                        d_tail / 1e3,
                        tail / d_tail
                    ),
                    met: Some(tail <= d_tail),
                });
                out.push(Goal {
                    goal: format!("{name}: dropped = 0 (all rounds)"),
                    measured: format!("{}", pm.dropped),
                    met: Some(pm.dropped == 0 && pm.rounds_failed == 0),
                });
                let conns = pm.conns_avg.map_or(f64::NAN, |f| f.median);
                out.push(Goal {
                    goal: format!(
                        "{name}: fewer connections on average than {}",
                        d.candidate.name
                    ),
                    measured: format!("{conns:.1} vs {d_conns:.1}"),
                    met: Some(conns < d_conns),
                });
            }
        }
        Load::Closed { .. } => {
            let d = s.best(is_deadpool);
            let ps = named(s, s.best(pgpipe));
            let (Some(d), false) = (d, ps.is_empty()) else {
                out.push(na("throughput of pgpipe >= the best deadpool's".into()));
                return out;
            };
            let dt = d.summary.throughput.median;
            for p in ps {
                let t = p.summary.throughput.median;
                out.push(Goal {
                    goal: format!(
                        "{}: throughput >= best deadpool's ({})",
                        p.candidate.name, d.candidate.name
                    ),
                    measured: format!("{t:.0} ops/s vs {dt:.0} ops/s ({:.2}x)", t / dt),
                    met: Some(t >= dt),
                });
            }
        }
        Load::Ceiling { .. } | Load::Rows { .. } => {}
    }
    out
}

/// How a ratio of medians stands against its goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// At or above the goal by more than the A/A spread (or no A/A control to judge by).
    Met,
    /// Below the goal by more than the A/A spread.
    NotMet,
    /// Closer to the goal than the A/A spread, on either side: the run cannot tell.
    ParityWithinNoise,
    /// No goal: a figure for context.
    Info,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::NotMet => "NOT met",
            Status::ParityWithinNoise => "parity within noise",
            Status::Info => "for context",
        }
    }
}

/// One throughput ratio of medians (TLS and bulk scenarios).
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// `pgpipe-tokio-4-tls / pgpipe-tokio-4`.
    pub what: String,
    /// The goal (`ratio >= goal`), None for a figure given for context.
    pub goal: Option<f64>,
    pub ratio: f64,
    /// The two medians, ops/s.
    pub numerator: f64,
    pub denominator: f64,
    /// Whether the medians alone meet the goal.
    pub met_by_medians: Option<bool>,
    /// Judged with the scenario's A/A throughput spread as the noise.
    pub status: Status,
}

/// The TLS comparisons of a scenario with `-tls` candidates, from the medians.
#[derive(Debug, Clone, Serialize)]
pub struct TlsReport {
    pub ratios: Vec<Ratio>,
    /// The A/A control's throughput spread in percent (the noise the statuses use).
    pub aa_throughput_pct: Option<f64>,
    /// Each candidate's TLS backends (pg_stat_ssl) against its connections, and what it
    /// negotiated, as `name: versions and ciphers` (from its last round).
    pub negotiated: Vec<String>,
}

/// `a`'s median throughput over `b`'s against `goal` (None: for context), judged with the A/A
/// throughput spread `noise` (percent).
fn judge(
    a: &CandidateResult,
    b: &CandidateResult,
    what: String,
    goal: Option<f64>,
    noise: Option<f64>,
) -> Ratio {
    let (x, y) = (a.summary.throughput.median, b.summary.throughput.median);
    let r = x / y;
    let status = match (goal, noise) {
        (None, _) => Status::Info,
        (Some(g), Some(n)) if ((r - g) / g).abs() * 100.0 <= n => Status::ParityWithinNoise,
        (Some(g), _) if r >= g => Status::Met,
        _ => Status::NotMet,
    };
    Ratio {
        what,
        goal,
        ratio: r,
        numerator: x,
        denominator: y,
        met_by_medians: goal.map(|g| r >= g),
        status,
    }
}

/// The memory goal of a streamed read: a client's peak heap at most this.
pub const STREAM_PEAK_HEAP_GOAL: f64 = 16.0 * 1024.0 * 1024.0;
/// The throughput goal of COPY in and out: pgpipe at least this times tokio-postgres.
pub const COPY_RATIO_GOAL: f64 = 0.9;

/// The comparisons of a bulk scenario, from the medians.
#[derive(Debug, Clone, Serialize)]
pub struct BulkReport {
    /// Each pgpipe runtime's rows/s against tokio-postgres': goal >= 0.9 for COPY in and out,
    /// for context for the stream.
    pub ratios: Vec<Ratio>,
    /// The A/A control's throughput spread in percent (the noise the statuses use).
    pub aa_throughput_pct: Option<f64>,
    /// Stream: each pgpipe runtime's peak heap against 16 MiB (medians and worst round).
    pub memory: Vec<Goal>,
    /// The sums of every successful run (rows, ids, name bytes, scores), if all runs agree.
    pub sums_agree: Option<crate::bulk::Sums>,
    /// Successful runs whose sums were compared.
    pub runs_checked: usize,
}

fn bulk_report(s: &ScenarioResult) -> BulkReport {
    let noise = s.aa.as_ref().map(|a| a.throughput_pct);
    let tpg = s.best(|c| c.kind == Kind::TokioPostgres && c.copy == 1);
    let pgpipe: Vec<&CandidateResult> = s
        .ok()
        .filter(|c| c.candidate.is_pgpipe() && c.candidate.copy == 1)
        .collect();
    let goal = (s.workload != Workload::Stream).then_some(COPY_RATIO_GOAL);
    let ratios = match tpg {
        Some(t) => pgpipe
            .iter()
            .map(|p| {
                let what = format!("{} / {}", p.candidate.name, t.candidate.name);
                judge(p, t, what, goal, noise)
            })
            .collect(),
        None => Vec::new(),
    };
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let memory = if s.workload == Workload::Stream {
        pgpipe
            .iter()
            .filter_map(|p| {
                let f = p.summary.peak_heap_bytes?;
                Some(Goal {
                    goal: format!(
                        "{}: peak client heap of the stream <= {:.0} MiB",
                        p.candidate.name,
                        mib(STREAM_PEAK_HEAP_GOAL)
                    ),
                    measured: format!(
                        "{:.2} MiB (worst round {:.2} MiB)",
                        mib(f.median),
                        mib(f.max)
                    ),
                    met: Some(f.median <= STREAM_PEAK_HEAP_GOAL),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let sums: Vec<crate::bulk::Sums> = s
        .candidates
        .iter()
        .flat_map(|c| &c.runs)
        .filter_map(|m| m.sums)
        .collect();
    let sums_agree = sums
        .first()
        .copied()
        .filter(|first| sums.iter().all(|x| x == first));
    BulkReport {
        ratios,
        aa_throughput_pct: noise,
        memory,
        sums_agree,
        runs_checked: sums.len(),
    }
}

/// pgpipe over TLS against its own plaintext (goal >= 0.9) and against the best
/// tokio-postgres over TLS (goal >= 1.0); tokio-postgres' and deadpool's TLS against their
/// plaintext for context. The A/A duplicates are never a side of a ratio.
fn tls_report(s: &ScenarioResult) -> TlsReport {
    let noise = s.aa.as_ref().map(|a| a.throughput_pct);
    let ok: Vec<&CandidateResult> = s.ok().filter(|c| c.candidate.copy == 1).collect();
    let twin = |c: &Candidate| {
        ok.iter().copied().find(|p| {
            !p.candidate.tls
                && (p.candidate.kind, p.candidate.conns) == (c.kind, c.conns)
                && (p.candidate.max_in_flight, p.candidate.max_connections)
                    == (c.max_in_flight, c.max_connections)
        })
    };
    let ratio = |a: &CandidateResult, b: &CandidateResult, what: String, goal: Option<f64>| {
        judge(a, b, what, goal, noise)
    };
    let mut ratios = Vec::new();
    let best_tpg = s.best(|c| c.tls && c.kind == Kind::TokioPostgres && c.copy == 1);
    for c in ok
        .iter()
        .filter(|c| c.candidate.tls && c.candidate.is_pgpipe())
    {
        if let Some(p) = twin(&c.candidate) {
            let what = format!("{} / {}", c.candidate.name, p.candidate.name);
            ratios.push(ratio(c, p, what, Some(0.9)));
        }
        if let Some(t) = best_tpg {
            let what = format!(
                "{} / {}, the best tokio-postgres over TLS",
                c.candidate.name, t.candidate.name
            );
            ratios.push(ratio(c, t, what, Some(1.0)));
        }
    }
    for c in ok
        .iter()
        .filter(|c| c.candidate.tls && !c.candidate.is_pgpipe())
    {
        if let Some(p) = twin(&c.candidate) {
            let what = format!("{} / {}", c.candidate.name, p.candidate.name);
            ratios.push(ratio(c, p, what, None));
        }
    }
    let negotiated = s
        .ok()
        .map(|c| {
            let last = c.runs.last();
            let tls = last.and_then(|m| m.tls_backends);
            let cipher = last.and_then(|m| m.tls_cipher.clone());
            format!(
                "{}: {} of {} server connections over TLS{}",
                c.candidate.name,
                tls.map_or_else(|| "?".into(), |n| n.to_string()),
                last.and_then(|m| m.backends_checked)
                    .map_or_else(|| "?".into(), |n| n.to_string()),
                cipher.map_or_else(String::new, |c| format!(" ({c})"))
            )
        })
        .collect();
    TlsReport {
        ratios,
        aa_throughput_pct: noise,
        negotiated,
    }
}

fn ms(us: f64) -> String {
    let v = us / 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn range(f: &Figure, fmt: impl Fn(f64) -> String) -> String {
    if f.min == f.max {
        fmt(f.median)
    } else {
        format!("{} ({}–{})", fmt(f.median), fmt(f.min), fmt(f.max))
    }
}

/// Columns of the closed- and open-loop tables (point, select1, rw).
const COLUMNS: &[&str] = &[
    "candidate",
    "conns",
    "ops/s",
    "client CPU µs/op",
    "machine CPU µs/op",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "p99.99",
    "max",
    "errors",
    "units/readable",
    "writes/unit",
];

/// Added to [`COLUMNS`] where the scenario has `-tls` candidates.
const TLS_COLUMNS: &[&str] = &["bytes/write", "bytes/TLS record", "TLS records/unit"];

/// Columns of the pool-ceiling table.
const CEILING_COLUMNS: &[&str] = &[
    "candidate",
    "conns",
    "time to finish ms",
    "ideal ms",
    "vs ideal",
    "ops/s",
    "client CPU µs/op",
    "machine CPU µs/op",
    "p50",
    "p99",
    "max",
    "errors",
];

/// Columns of the head-of-line table.
const HOL_COLUMNS: &[&str] = &[
    "candidate",
    "ops/s",
    "client CPU µs/op",
    "machine CPU µs/op",
    "fast p50",
    "fast p99",
    "fast p99.9",
    "fast p99.99",
    "fast max",
    "fast samples",
    "slow p50",
    "slow p99",
    "dropped",
    "conns avg",
    "conns max",
];

/// Columns of the PgBouncer and many-process table.
const POOLER_COLUMNS: &[&str] = &[
    "candidate",
    "client conns",
    "server conns avg",
    "server conns max",
    "ops/s",
    "client CPU µs/op",
    "PgBouncer CPU µs/op",
    "machine CPU µs/op",
    "p50",
    "p99",
    "p99.9",
    "max",
    "errors",
    "units/readable",
];

/// Columns of the COPY and streaming table.
const BULK_COLUMNS: &[&str] = &[
    "candidate",
    "rows/s",
    "time s",
    "client CPU µs/row",
    "machine CPU µs/row",
    "peak client heap MiB",
    "client heap at start MiB",
    "runtime heap MiB",
    "errors",
];

/// The columns of the table [`table`] prints for `s`, in order (the legend explains each).
pub fn columns(s: &ScenarioResult) -> Vec<&'static str> {
    if s.workload == Workload::Tx {
        tx::COLUMNS.to_vec()
    } else if s.workload == Workload::Hol {
        HOL_COLUMNS.to_vec()
    } else if s.workload.is_bulk() {
        BULK_COLUMNS.to_vec()
    } else if s.is_pooled() {
        POOLER_COLUMNS.to_vec()
    } else if matches!(s.load, Load::Ceiling { .. }) {
        CEILING_COLUMNS.to_vec()
    } else if s.tls.is_some() {
        COLUMNS.iter().chain(TLS_COLUMNS).copied().collect()
    } else {
        COLUMNS.to_vec()
    }
}

/// A Markdown table's header: the names, then the alignment row (the candidate left, every
/// figure right).
fn header(t: &mut String, cols: &[&str]) {
    let _ = writeln!(t, "| {} |", cols.join(" | "));
    let _ = writeln!(t, "|---|{}", "--:|".repeat(cols.len().saturating_sub(1)));
}

/// A Markdown table of one scenario (median over rounds, min–max in parentheses).
pub fn table(s: &ScenarioResult, rounds: usize) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "### {}\n", s.id);
    let _ = writeln!(
        t,
        "{} — {rounds} round(s), median (min–max){}.\n",
        s.describe(),
        if s.workload.is_bulk() {
            ""
        } else {
            "; latency in ms"
        }
    );
    header(&mut t, &columns(s));
    if s.workload == Workload::Tx {
        tx::table(&mut t, s);
        return t;
    }
    if s.workload == Workload::Hol {
        hol_table(&mut t, s);
        return t;
    }
    if s.workload.is_bulk() {
        bulk_table(&mut t, s);
        return t;
    }
    if s.is_pooled() {
        pooler_table(&mut t, s);
        return t;
    }
    let ceiling = matches!(s.load, Load::Ceiling { .. });
    let tls = s.tls.is_some();
    for c in &s.candidates {
        let m = &c.summary;
        if failed_row(&mut t, c, " – |") {
            continue;
        }
        let conns = format!("{:.0}", m.server_connections.median);
        if let Load::Ceiling { queries } = s.load {
            let ideal =
                queries as f64 * crate::engine::SLEEP_SECONDS * 1e3 / c.candidate.conns as f64;
            let _ = writeln!(
                t,
                "| {} | {} | {} | {:.0} | {:.2}x | {} | {:.1} | {:.1} | {} | {} | {} | {} |",
                c.candidate.name,
                conns,
                range(&m.wall_ms, |v| format!("{v:.0}")),
                ideal,
                m.wall_ms.median / ideal,
                thousands(m.throughput.median),
                m.client_cpu_us.median,
                m.machine_cpu_us.median,
                ms(m.p50_us.median),
                ms(m.p99_us.median),
                ms(m.max_us.median),
                m.errors
            );
            continue;
        }
        let opt = |f: &Option<Figure>, p: usize| {
            f.map(|f| format!("{:.*}", p, f.median))
                .unwrap_or_else(|| "–".into())
        };
        let _ = write!(
            t,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.candidate.name,
            conns,
            range(&m.throughput, thousands),
            range(&m.client_cpu_us, |v| format!("{v:.1}")),
            m.machine_cpu_us.median,
            ms(m.p50_us.median),
            ms(m.p90_us.median),
            ms(m.p99_us.median),
            ms(m.p999_us.median),
            ms(m.p9999_us.median),
            ms(m.max_us.median),
            m.errors,
            opt(&m.units_per_readable, 1),
            opt(&m.writes_per_unit, 3),
        );
        if tls {
            let _ = write!(
                t,
                " {} | {} | {} |",
                opt(&m.bytes_per_write, 0),
                opt(&m.bytes_per_tls_record, 0),
                opt(&m.tls_records_per_unit, 3),
            );
        }
        t.push('\n');
    }
    if let Some(aa) = &s.aa {
        let _ = writeln!(
            t,
            "\nA/A control ({} vs {}): throughput differs by {:.1}%, client CPU by {:.1}%, p99 by {:.1}%, p99.9 by {:.1}%.",
            aa.a, aa.b, aa.throughput_pct, aa.client_cpu_pct, aa.p99_pct, aa.p999_pct
        );
    }
    if let Some(r) = &s.tls {
        tls_notes(&mut t, r);
    }
    if s.delay_kind != Delay::Direct && !ceiling {
        let proxy: Vec<String> = s
            .candidates
            .iter()
            .filter(|c| !c.runs.is_empty())
            .map(|c| format!("{:.1}", c.summary.proxy_cpu_us.median))
            .collect();
        let late = s
            .candidates
            .iter()
            .filter_map(|c| c.summary.proxy_late_max_us)
            .map(|f| f.max)
            .fold(0.0, f64::max);
        let _ = writeln!(
            t,
            "\nDelay-proxy CPU µs/op (in machine CPU, not in client CPU), same order: {}. \
             Worst proxy lateness (a chunk released after its due time) in any run: {:.2} ms.",
            proxy.join(", "),
            late / 1e3
        );
    }
    t
}

/// Under a table with `-tls` candidates: what the fill columns mean for each library, which
/// transport each candidate's backends used, and the ratios against the goals.
fn tls_notes(t: &mut String, r: &TlsReport) {
    let _ = writeln!(
        t,
        "\nbytes/write = plaintext bytes per write call of pgpipe's connection task (over TLS each \
         such write is sealed into records and sent at once); bytes/TLS record = plaintext bytes per \
         TLS record (ConnStats::bytes_per_tls_record; the core counts the records each write makes, \
         one per 16 KiB of plaintext), TLS records/unit = records per query. \
         tokio-postgres and deadpool (–): their writes happen inside tokio-postgres and tokio-rustls \
         and are not observable from outside, so no figure is given for them."
    );
    let _ = writeln!(
        t,
        "\nTransport, checked on the server (pg_stat_ssl) after each window; last round: {}.",
        r.negotiated.join("; ")
    );
    if r.ratios.is_empty() {
        return;
    }
    let noise = r.aa_throughput_pct.map_or_else(
        || "no A/A control in this scenario".into(),
        |p| format!("A/A throughput spread {p:.1}%"),
    );
    let _ = writeln!(
        t,
        "\nTLS ratios (throughput medians; a ratio closer to its goal than the A/A spread is \
         parity within noise; {noise}):\n"
    );
    for x in &r.ratios {
        let goal = x
            .goal
            .map_or_else(String::new, |g| format!(" (goal >= {g:.1})"));
        let medians = match (x.status, x.met_by_medians) {
            (Status::ParityWithinNoise, Some(m)) => {
                format!(
                    "; by the medians alone {}",
                    if m { "met" } else { "not met" }
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            t,
            "- {}{goal}: {:.2}x ({:.0} ops/s vs {:.0} ops/s) — **{}**{medians}",
            x.what,
            x.ratio,
            x.numerator,
            x.denominator,
            x.status.label()
        );
    }
}

/// The hol scenario's rows: throughput, CPU per op, the fast ops' tail, the slow ops, dropped
/// requests, connections used; then the A/A spread and the goals.
fn hol_table(t: &mut String, s: &ScenarioResult) {
    let lat = |f: &Option<Figure>| f.map_or_else(|| "–".into(), |f| ms(f.median));
    for c in &s.candidates {
        let m = &c.summary;
        if failed_row(t, c, "") {
            continue;
        }
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.candidate.name,
            range(&m.throughput, thousands),
            range(&m.client_cpu_us, |v| format!("{v:.1}")),
            m.machine_cpu_us.median,
            lat(&m.fast_p50_us),
            lat(&m.fast_p99_us),
            lat(&m.fast_p999_us),
            m.fast_p9999_us
                .map_or_else(|| "–".into(), |f| range(&f, ms)),
            lat(&m.fast_max_us),
            m.fast_samples
                .map_or_else(|| "–".into(), |f| thousands(f.median)),
            lat(&m.slow_p50_us),
            lat(&m.slow_p99_us),
            m.dropped,
            m.conns_avg
                .map_or_else(|| "–".into(), |f| range(&f, |v| format!("{v:.1}"))),
            m.conns_max
                .map_or_else(|| "–".into(), |f| range(&f, |v| format!("{v:.0}"))),
        );
    }
    let _ = writeln!(
        t,
        "\nfast = the point selects only, slow = the pg_sleep(0.02) ops; dropped = failed + unfinished requests, all rounds; conns = the candidate's server backends sampled every {} ms over the window.",
        crate::engine::CONN_SAMPLE_EVERY.as_millis()
    );
    if let Some(aa) = &s.aa {
        let _ = writeln!(
            t,
            "\nA/A control ({} vs {}): throughput differs by {:.1}%, fast p99.99 by {}.",
            aa.a,
            aa.b,
            aa.throughput_pct,
            aa.fast_p9999_pct
                .map_or_else(|| "–".into(), |p| format!("{p:.1}%"))
        );
    }
    if !s.hol_goals.is_empty() {
        let _ = writeln!(t, "\nGoals (from the medians):\n");
        for g in &s.hol_goals {
            let st = match g.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(t, "- {}: {} — **{st}**", g.goal, g.measured);
        }
    }
}

/// What each candidate kind runs through PgBouncer (transaction mode: no named statements).
pub const POOLER_LEGEND: &str = "\
pgpipe: `named_statements = false` (each execution carries its own unnamed Parse, pipelined as \
ever); tokio-postgres: `query_typed` (unnamed Parse + Bind + Execute + Sync in one round trip, \
nothing prepared; concurrent calls pipeline on its connection); deadpool: a checkout per query, \
then `query_typed` on its tokio-postgres client (its statement cache unused)";

/// The PgBouncer and many-process scenarios: client and server connections, throughput, CPU
/// and latency; then the legend, the A/A spread and the goals.
fn pooler_table(t: &mut String, s: &ScenarioResult) {
    let procs = if s.procs > 1 {
        format!("{} × ", s.procs)
    } else {
        String::new()
    };
    for c in &s.candidates {
        let m = &c.summary;
        if failed_row(t, c, "") {
            continue;
        }
        // Straight to the server, a client connection is a server backend.
        let clients = m.client_connections.unwrap_or(m.server_connections);
        let _ = writeln!(
            t,
            "| {procs}{} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
            c.candidate.name,
            range(&clients, |v| format!("{v:.0}")),
            m.conns_avg
                .map_or_else(|| "–".into(), |f| range(&f, |v| format!("{v:.1}"))),
            m.conns_max
                .map_or_else(|| "–".into(), |f| range(&f, |v| format!("{v:.0}"))),
            range(&m.throughput, thousands),
            range(&m.client_cpu_us, |v| format!("{v:.1}")),
            m.pooler_cpu_us
                .map_or_else(|| "–".into(), |f| format!("{:.1}", f.median)),
            m.machine_cpu_us.median,
            ms(m.p50_us.median),
            ms(m.p99_us.median),
            ms(m.p999_us.median),
            ms(m.max_us.median),
            m.errors,
            m.units_per_readable
                .map_or_else(|| "–".into(), |f| format!("{:.1}", f.median)),
        );
    }
    let _ = writeln!(
        t,
        "\nclient conns = {}, {}; server conns = every client backend of the server but the monitor's, sampled every {} ms over the window (pg_stat_activity); errors include wrong answers (a point select answered with another key's row).",
        if s.via == Via::PgBouncer {
            "connections to PgBouncer, from its SHOW CLIENTS"
        } else {
            "the candidate's server backends"
        },
        if s.procs > 1 {
            "all processes, counted at mid-window"
        } else {
            "at the window's end, median over rounds"
        },
        crate::engine::CONN_SAMPLE_EVERY.as_millis()
    );
    if s.procs > 1 {
        let _ = writeln!(
            t,
            "Each of the {} processes runs the candidate as named, on 1/{} of the tasks; ops/s and CPU are their sum, p50 the median of the processes' p50, p99 and beyond the worst process's.",
            s.procs, s.procs
        );
    }
    if s.via == Via::PgBouncer {
        let _ = writeln!(t, "Through PgBouncer — {POOLER_LEGEND}.");
    }
    if let Some(aa) = &s.aa {
        let _ = writeln!(
            t,
            "\nA/A control ({} vs {}): throughput differs by {:.1}%, client CPU by {:.1}%, p99 by {:.1}%.",
            aa.a, aa.b, aa.throughput_pct, aa.client_cpu_pct, aa.p99_pct
        );
    }
    if !s.pooler_goals.is_empty() {
        let _ = writeln!(t, "\nGoals (from the medians):\n");
        for g in &s.pooler_goals {
            let st = match g.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(t, "- {}: {} — **{st}**", g.goal, g.measured);
        }
    }
}

/// The pooler goals, one line per pgpipe configuration (A/A copies left out), each against the
/// deadpool candidate with the highest throughput: through PgBouncer (one process), pgpipe's
/// throughput at least twice deadpool's with no wrong answer (no error) in the scenario; with
/// many processes, at most a quarter of deadpool's server connections (peak sampled) at no
/// less than 95% of its throughput.
fn pooler_goals(s: &ScenarioResult) -> Vec<Goal> {
    let mut out = Vec::new();
    let d = s.best(is_deadpool);
    let errors: u64 = s.candidates.iter().map(|c| c.summary.errors).sum();
    let pgpipes: Vec<&CandidateResult> = s
        .ok()
        .filter(|c| c.candidate.is_pgpipe() && c.candidate.copy == 1)
        .collect();
    let goal = if s.procs == 1 {
        format!(
            "through PgBouncer (pool {}): pgpipe throughput >= 2x deadpool's, 0 wrong answers",
            crate::plan::PGBOUNCER_POOL
        )
    } else {
        format!(
            "{} processes{}: pgpipe <= 1/4 of deadpool's server connections (peak) at >= 95% of its throughput",
            s.procs,
            if s.via == Via::PgBouncer {
                " through PgBouncer"
            } else {
                ", directly"
            }
        )
    };
    let (Some(d), false) = (d, pgpipes.is_empty()) else {
        out.push(Goal {
            goal,
            measured: "not measured in this run".into(),
            met: None,
        });
        return out;
    };
    let dt = d.summary.throughput.median;
    for p in pgpipes {
        let pt = p.summary.throughput.median;
        let r = pt / dt;
        let (measured, met) = if s.procs == 1 {
            (
                format!(
                    "{r:.2}x ({} {pt:.0} ops/s vs {} {dt:.0} ops/s); errors in the scenario: {errors}",
                    p.candidate.name, d.candidate.name
                ),
                Some(r >= 2.0 && errors == 0),
            )
        } else {
            let peak = |c: &CandidateResult| c.summary.conns_max.map(|f| f.median);
            match (peak(p), peak(d)) {
                (Some(cp), Some(cd)) if cd > 0.0 => (
                    format!(
                        "{} {cp:.0} vs {} {cd:.0} server connections ({:.2} of deadpool's) at {r:.2}x its throughput ({pt:.0} ops/s vs {dt:.0} ops/s); errors in the scenario: {errors}",
                        p.candidate.name,
                        d.candidate.name,
                        cp / cd,
                    ),
                    Some(cp <= cd / 4.0 && r >= 0.95 && errors == 0),
                ),
                _ => (
                    format!("{}: server connections not sampled", p.candidate.name),
                    None,
                ),
            }
        };
        out.push(Goal {
            goal: goal.clone(),
            measured,
            met,
        });
    }
    out
}

/// A bulk scenario's rows: rows/s, CPU per row, the heap; then the A/A spread, the rows'
/// check, the ratios and the memory goal.
fn bulk_table(t: &mut String, s: &ScenarioResult) {
    let mib = |b: f64| format!("{:.2}", b / (1024.0 * 1024.0));
    for c in &s.candidates {
        let m = &c.summary;
        if failed_row(t, c, "") {
            continue;
        }
        let _ = writeln!(
            t,
            "| {} | {} | {:.2} | {} | {:.2} | {} | {} | {} | {} |",
            c.candidate.name,
            range(&m.throughput, thousands),
            m.wall_ms.median / 1e3,
            range(&m.client_cpu_us, |v| format!("{v:.2}")),
            m.machine_cpu_us.median,
            m.peak_heap_bytes
                .map_or_else(|| "–".into(), |f| range(&f, mib)),
            m.heap_at_start_bytes
                .map_or_else(|| "–".into(), |f| mib(f.median)),
            m.runtime_heap_bytes
                .map_or_else(|| "–".into(), |f| mib(f.median)),
            m.errors,
        );
    }
    let _ = writeln!(
        t,
        "\npeak client heap = the most live heap bytes of the benchmark process while the rows moved, less the runtime heap (a counting global allocator, tracking from before the run's thread starts; heap only: not thread stacks, io_uring rings or socket buffers); client heap at start = the client's part already live when the rows started to move (connections, buffers, caches); runtime heap = live when the run's runtime was ready, before the client connected."
    );
    let Some(b) = &s.bulk else { return };
    match b.sums_agree {
        Some(x) => {
            let _ = writeln!(
                t,
                "\nRows checked: all {} runs agree — {} rows, Σid {}, Σ name bytes {}, Σ score {} (COPY in: counted by finish() and read back from the server; out and stream: every row decoded).",
                b.runs_checked, x.rows, x.id, x.name_bytes, x.score
            );
        }
        None if b.runs_checked > 0 => {
            let _ = writeln!(t, "\nRows checked: the runs' sums DIFFER (see the JSON).");
        }
        None => {}
    }
    if let Some(aa) = &s.aa {
        let _ = writeln!(
            t,
            "\nA/A control ({} vs {}): rows/s differ by {:.1}%, client CPU by {:.1}%, peak heap by {}.",
            aa.a,
            aa.b,
            aa.throughput_pct,
            aa.client_cpu_pct,
            aa.peak_heap_pct
                .map_or_else(|| "–".into(), |p| format!("{p:.1}%"))
        );
    }
    if !b.ratios.is_empty() {
        let noise = b.aa_throughput_pct.map_or_else(
            || "no A/A control in this scenario".into(),
            |p| format!("A/A rows/s spread {p:.1}%"),
        );
        let _ = writeln!(
            t,
            "\nRatios (rows/s medians; a ratio closer to its goal than the A/A spread is parity within noise; {noise}):\n"
        );
        for x in &b.ratios {
            let goal = x
                .goal
                .map_or_else(String::new, |g| format!(" (goal >= {g:.1})"));
            let medians = match (x.status, x.met_by_medians) {
                (Status::ParityWithinNoise, Some(m)) => format!(
                    "; by the medians alone {}",
                    if m { "met" } else { "not met" }
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                t,
                "- {}{goal}: {:.2}x ({:.0} vs {:.0} rows/s) — **{}**{medians}",
                x.what,
                x.ratio,
                x.numerator,
                x.denominator,
                x.status.label()
            );
        }
    }
    if !b.memory.is_empty() {
        let _ = writeln!(t, "\nMemory goal (medians over rounds):\n");
        for g in &b.memory {
            let st = if g.met == Some(true) {
                "met"
            } else {
                "NOT met"
            };
            let _ = writeln!(t, "- {}: {} — **{st}**", g.goal, g.measured);
        }
    }
}

/// Goals as a Markdown table.
pub fn goals_table(goals: &[Goal]) -> String {
    let mut t = String::from("| goal | measured | status |\n|---|---|---|\n");
    for g in goals {
        let st = match g.met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "n/a",
        };
        let _ = writeln!(t, "| {} | {} | {} |", g.goal, g.measured, st);
    }
    t
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
}

impl Machine {
    pub fn collect(server_version: String, server: String) -> Machine {
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

/// A table row for a candidate none of whose runs completed (`gap`: cells before the reason);
/// `false` when it has runs to show.
fn failed_row(t: &mut String, c: &CandidateResult, gap: &str) -> bool {
    if !c.runs.is_empty() {
        return false;
    }
    let _ = writeln!(
        t,
        "| {} |{gap} failed: {} |",
        c.candidate.name,
        c.failures.first().map(String::as_str).unwrap_or("?")
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        let f = Figure::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((f.median, f.min, f.max), (2.0, 1.0, 3.0));
        assert_eq!(Figure::of([1.0, 2.0, 4.0, 10.0]).unwrap().median, 3.0);
        assert!(Figure::of([]).is_none());
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }

    #[test]
    fn pooler_goals_from_medians() {
        let sc = |procs| Scenario {
            tag: Some("pgbouncer"),
            workload: Workload::PointId,
            load: Load::Closed { tasks: 10 },
            delay: Delay::Direct,
            via: Via::PgBouncer,
            procs,
            candidates: Vec::new(),
        };
        let run = |name: &str, throughput: f64, peak: i64, errors: u64| -> Rounds {
            let m = Measurement {
                throughput,
                errors,
                conns_max: Some(peak),
                ..Measurement::default()
            };
            (Candidate::parse(name).unwrap(), vec![m], Vec::new())
        };
        let one = ScenarioResult::new(
            &sc(1),
            vec![
                run("pgpipe-tokio-4", 300.0, 16, 0),
                run("deadpool-16", 100.0, 16, 0),
                run("deadpool-64", 140.0, 16, 0),
                run("pgpipe-tokio-4#2", 400.0, 16, 0),
            ],
        );
        assert!(one.is_pooled());
        let g = &one.pooler_goals;
        assert_eq!(g.len(), 1);
        // One line per pgpipe configuration, the A/A copy left out, against the best deadpool.
        assert!(g[0].measured.starts_with("2.14x"), "{}", g[0].measured);
        assert_eq!(g[0].met, Some(true));
        let wrong = ScenarioResult::new(
            &sc(1),
            vec![
                run("pgpipe-tokio-4", 300.0, 16, 1),
                run("deadpool-16", 100.0, 16, 0),
            ],
        );
        assert_eq!(wrong.pooler_goals[0].met, Some(false));
        let many = ScenarioResult::new(
            &sc(8),
            vec![
                run("pgpipe-tokio-2", 96.0, 40, 0),
                run("pgpipe-tokio-2-m2", 96.0, 16, 0),
                run("deadpool-16", 100.0, 128, 0),
            ],
        );
        let met: Vec<_> = many.pooler_goals.iter().map(|g| g.met).collect();
        assert_eq!(met, [Some(false), Some(true)]);
        let slower = ScenarioResult::new(
            &sc(8),
            vec![
                run("pgpipe-tokio-2", 90.0, 16, 0),
                run("deadpool-16", 100.0, 128, 0),
            ],
        );
        assert_eq!(slower.pooler_goals[0].met, Some(false));
        let t = table(&many, 1);
        assert!(t.contains("| 8 × pgpipe-tokio-2 |"), "{t}");
        assert!(t.contains("Goals (from the medians)"));
    }

    #[test]
    fn tls_ratios_and_noise() {
        let sc = Scenario {
            tag: Some("tls"),
            workload: Workload::Point,
            load: Load::Closed { tasks: 10 },
            delay: Delay::Direct,
            via: Via::Server,
            procs: 1,
            candidates: Vec::new(),
        };
        let run = |name: &str, throughput: f64| -> Rounds {
            let m = Measurement {
                throughput,
                ..Measurement::default()
            };
            (Candidate::parse(name).unwrap(), vec![m], Vec::new())
        };
        let s = ScenarioResult::new(
            &sc,
            vec![
                run("pgpipe-tokio-4", 100.0),
                run("pgpipe-tokio-4-tls", 95.0),
                run("tokio-postgres-1-tls", 50.0),
                run("tokio-postgres-4-tls", 96.0),
                run("tokio-postgres-4", 100.0),
                run("pgpipe-tokio-4-tls#2", 93.0),
            ],
        );
        assert_eq!(s.id, "tls-point-closed-10-direct");
        // The A/A pair is the TLS one, not plaintext against TLS.
        let aa = s.aa.as_ref().unwrap();
        assert_eq!(
            (aa.a.as_str(), aa.b.as_str()),
            ("pgpipe-tokio-4-tls", "pgpipe-tokio-4-tls#2")
        );
        let r = &s.tls.as_ref().unwrap().ratios;
        let find = |w: &str| r.iter().find(|x| x.what.starts_with(w)).unwrap();
        let own = find("pgpipe-tokio-4-tls / pgpipe-tokio-4");
        assert_eq!((own.goal, own.status), (Some(0.9), Status::Met));
        assert!((own.ratio - 0.95).abs() < 1e-9);
        // 95 vs 96 is 1% below parity, inside the 2.1% A/A spread.
        let tpg = find("pgpipe-tokio-4-tls / tokio-postgres-4-tls");
        assert_eq!(tpg.status, Status::ParityWithinNoise);
        assert_eq!(tpg.met_by_medians, Some(false));
        let ctx = find("tokio-postgres-4-tls / tokio-postgres-4");
        assert_eq!((ctx.goal, ctx.status), (None, Status::Info));
        // Only the copy-1 candidates are sides of a ratio.
        assert!(r.iter().all(|x| !x.what.contains('#')));
        assert_eq!(r.len(), 3);
        let text = table(&s, 1);
        assert!(text.contains("bytes/TLS record"));
        assert!(text.contains("**parity within noise**"));
        // Plain scenarios keep their columns.
        let plain = ScenarioResult::new(
            &Scenario { tag: None, ..sc },
            vec![run("pgpipe-tokio-4", 100.0)],
        );
        assert!(plain.tls.is_none() && !table(&plain, 1).contains("TLS"));
    }
}
