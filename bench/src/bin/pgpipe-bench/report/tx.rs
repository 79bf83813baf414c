//! The transactions scenarios' table and goals: pgpipe's interactive `transaction()` and its
//! atomic batch against deadpool (a transaction holds a pooled connection from BEGIN to
//! COMMIT) and pgbench running the same script.

use std::fmt::Write as _;

use super::cells::{failed_row, ms, range, thousands};
use super::{CandidateResult, Goal, ScenarioResult};
use crate::plan::{Delay, Kind};

/// Columns of the transactions table.
pub(super) const COLUMNS: &[&str] = &[
    "candidate",
    "tx/s",
    "client CPU µs/tx",
    "machine CPU µs/tx",
    "p50",
    "p99",
    "p99.9",
    "max",
    "conns avg",
    "conns max",
    "fairness",
    "slowest/median",
    "errors",
];

/// The least share of the median task's transactions the slowest-served task must get.
const FAIRNESS_GOAL: f64 = 0.5;

pub(super) fn table(t: &mut String, s: &ScenarioResult) {
    let opt = |f: &Option<super::Figure>, p: usize| {
        f.map_or_else(|| "–".into(), |f| range(&f, |v| format!("{v:.p$}")))
    };
    for c in &s.candidates {
        let m = &c.summary;
        if failed_row(t, c, "") {
            continue;
        }
        let last = c.runs.last();
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.candidate.name,
            range(&m.throughput, thousands),
            range(&m.client_cpu_us, |v| format!("{v:.1}")),
            m.machine_cpu_us.median,
            ms(m.p50_us.median),
            ms(m.p99_us.median),
            ms(m.p999_us.median),
            ms(m.max_us.median),
            opt(&m.conns_avg, 1),
            opt(&m.conns_max, 0),
            m.fairness
                .map_or_else(|| "–".into(), |f| format!("{:.2}", f.min)),
            last.and_then(|r| r.slowest_task.zip(r.median_task))
                .map_or_else(|| "–".into(), |(a, b)| format!("{a}/{b}")),
            m.errors,
        );
    }
    let _ = writeln!(
        t,
        "\nconns = the candidate's server backends sampled every {} ms over the window; fairness \
         = the worst round's slowest-served task against the median task; every run's balances \
         were checked against the transactions it committed (a mismatch is an error).",
        crate::engine::CONN_SAMPLE_EVERY.as_millis()
    );
    if let Some(aa) = &s.aa {
        let _ = writeln!(
            t,
            "\nA/A control ({} vs {}): tx/s differs by {:.1}%, p99 by {:.1}%.",
            aa.a, aa.b, aa.throughput_pct, aa.p99_pct
        );
    }
    if !s.tx_goals.is_empty() {
        let _ = writeln!(t, "\nGoals (from the medians):\n");
        for g in &s.tx_goals {
            let st = match g.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(t, "- {}: {} — **{st}**", g.goal, g.measured);
        }
    }
}

/// The goals of a transactions scenario, from the medians: directly, interactive transactions
/// at least deadpool-16's rate and tail on at most its connections, batches twice its rate on a
/// quarter of its connections and 0.8x pgbench's; at a long round trip 1.5x and 10x deadpool-32;
/// every pgpipe candidate fair in every round.
pub(super) fn goals(s: &ScenarioResult) -> Vec<Goal> {
    let mut out = Vec::new();
    let interactive = s.best(|c| c.is_pgpipe() && !c.batch && c.copy == 1);
    let batch = s.best(|c| c.is_pgpipe() && c.batch && c.copy == 1);
    let pgbench = s.best(|c| c.kind == Kind::Pgbench);
    let tx = |c: &CandidateResult| c.summary.throughput.median;
    let conns = |c: &CandidateResult| c.summary.conns_max.map_or(f64::NAN, |f| f.median);
    let mut ratio =
        |what: String, p: Option<&CandidateResult>, q: Option<&CandidateResult>, at_least: f64| {
            out.push(match (p, q) {
                (Some(p), Some(q)) => Goal {
                    goal: format!(
                        "{what}: {} >= {at_least}x {}",
                        p.candidate.name, q.candidate.name
                    ),
                    measured: format!(
                        "{} vs {} tx/s ({:.2}x)",
                        thousands(tx(p)),
                        thousands(tx(q)),
                        tx(p) / tx(q)
                    ),
                    met: Some(tx(p) >= at_least * tx(q)),
                },
                _ => Goal {
                    goal: format!("{what}: >= {at_least}x"),
                    measured: "not measured in this run".into(),
                    met: None,
                },
            });
        };
    match s.delay_kind {
        Delay::Direct => {
            let d16 = s.get("deadpool-16");
            ratio("transaction() tx/s".into(), interactive, d16, 1.0);
            ratio("batch tx/s".into(), batch, d16, 2.0);
            ratio(
                "batch against the server's own rate".into(),
                batch,
                pgbench,
                0.8,
            );
            if let (Some(p), Some(d)) = (interactive, d16) {
                let (pp, dp) = (p.summary.p99_us.median, d.summary.p99_us.median);
                out.push(Goal {
                    goal: format!("transaction() p99 <= {}'s", d.candidate.name),
                    measured: format!("{} vs {} ms", ms(pp), ms(dp)),
                    met: Some(pp <= dp),
                });
                out.push(Goal {
                    goal: format!("transaction() connections <= {}'s", d.candidate.name),
                    measured: format!("{:.0} vs {:.0} (most sampled)", conns(p), conns(d)),
                    met: Some(conns(p) <= conns(d)),
                });
            }
            if let (Some(b), Some(d)) = (batch, d16) {
                out.push(Goal {
                    goal: format!("batch connections <= 1/4 of {}'s", d.candidate.name),
                    measured: format!("{:.0} vs {:.0} (most sampled)", conns(b), conns(d)),
                    met: Some(conns(b) * 4.0 <= conns(d)),
                });
            }
        }
        Delay::Proxy(_) => {
            let d32 = s.get("deadpool-32");
            ratio("transaction() tx/s".into(), interactive, d32, 1.5);
            ratio("batch tx/s".into(), batch, d32, 10.0);
        }
    }
    for c in s.candidates.iter().filter(|c| c.candidate.is_pgpipe()) {
        let f = c.summary.fairness;
        out.push(Goal {
            goal: format!(
                "{}: the slowest-served task gets >= {FAIRNESS_GOAL} of the median's, every round",
                c.candidate.name
            ),
            measured: f.map_or_else(
                || "not measured".into(),
                |f| format!("{:.2} at worst", f.min),
            ),
            met: f.map(|f| f.min >= FAIRNESS_GOAL),
        });
    }
    out
}
