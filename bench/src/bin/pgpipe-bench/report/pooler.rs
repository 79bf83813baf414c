//! The PgBouncer and many-process scenarios' columns, table and goals: client and server
//! connections, PgBouncer's CPU, and pgpipe against the best deadpool (throughput, server
//! connections used).

use std::fmt::Write as _;

use super::cells::{failed_row, ms, range, thousands};
use super::goals::is_deadpool;
use super::{CandidateResult, Goal, ScenarioResult};
use crate::plan::Via;

/// Columns of the PgBouncer and many-process table.
pub(super) const POOLER_COLUMNS: &[&str] = &[
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

/// What each candidate kind runs through PgBouncer (transaction mode: no named statements).
pub const POOLER_LEGEND: &str = "\
pgpipe: `named_statements = false` (each execution carries its own unnamed Parse, pipelined as \
ever); tokio-postgres: `query_typed` (unnamed Parse + Bind + Execute + Sync in one round trip, \
nothing prepared; concurrent calls pipeline on its connection); deadpool: a checkout per query, \
then `query_typed` on its tokio-postgres client (its statement cache unused)";

/// The PgBouncer and many-process scenarios: client and server connections, throughput, CPU
/// and latency; then the legend, the A/A spread and the goals.
pub(super) fn pooler_table(t: &mut String, s: &ScenarioResult) {
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
pub(super) fn pooler_goals(s: &ScenarioResult) -> Vec<Goal> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Measurement;
    use crate::plan::{Candidate, Delay, Load, Scenario, Workload};
    use crate::report::{scenario_table, Rounds};

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
        let t = scenario_table(&many, 1);
        assert!(t.contains("| 8 × pgpipe-tokio-2 |"), "{t}");
        assert!(t.contains("Goals (from the medians)"));
    }
}
