//! The head-of-line scenarios' columns, table and goals: the fast point selects' tail beside the
//! slow `pg_sleep` ops, dropped requests and connections used, pgpipe against deadpool.

use std::fmt::Write as _;

use super::cells::{failed_row, ms, range, thousands};
use super::goals::is_deadpool;
use super::{CandidateResult, Figure, Goal, ScenarioResult};
use crate::plan::{Candidate, Load};

/// Columns of the head-of-line table.
pub(super) const HOL_COLUMNS: &[&str] = &[
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

/// The goals of a hol scenario, from the medians. Open loop: the best pgpipe candidate by fast
/// p99.99 (A/A duplicate not eligible) and pgpipe-tokio-4 against the deadpool candidate with
/// the lowest fast p99.99: tail no worse, nothing dropped, fewer connections on average. Closed
/// loop: the pgpipe candidate with the highest throughput and pgpipe-tokio-4 against the best
/// deadpool's throughput.
pub(super) fn hol_goals(s: &ScenarioResult) -> Vec<Goal> {
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

/// The hol scenario's rows: throughput, CPU per op, the fast ops' tail, the slow ops, dropped
/// requests, connections used; then the A/A spread and the goals.
pub(super) fn hol_table(t: &mut String, s: &ScenarioResult) {
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
