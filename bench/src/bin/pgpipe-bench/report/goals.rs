//! The headline goals of a run (throughput, client CPU, fill ratios, tail, long round trips,
//! errors), checked on the point-select, closed-loop scenarios, and the goals' Markdown table.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Goal, ScenarioResult};
use crate::plan::{Candidate, Delay, Kind, Load, Workload};

fn is_tpg(c: &Candidate) -> bool {
    c.kind == Kind::TokioPostgres
}
/// A deadpool candidate (the pooled tokio-postgres side of the comparisons).
pub(super) fn is_deadpool(c: &Candidate) -> bool {
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
