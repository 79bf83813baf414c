//! One scenario's printed table (Markdown, readable in a terminal too): the figures' formats,
//! the columns of each kind of scenario, the closed-, open-loop and pool-ceiling rows and their
//! notes; the other kinds' rows come from their own files.

use std::fmt::Write as _;

use super::bulk::{bulk_table, BULK_COLUMNS};
use super::cells::{failed_row, ms, range, thousands};
use super::hol::{hol_table, HOL_COLUMNS};
use super::pooler::{pooler_table, POOLER_COLUMNS};
use super::tls::tls_notes;
use super::tx;
use super::{Figure, ScenarioResult};
use crate::plan::{Delay, Load, Workload};
use pgpipe_tests::host_speed::{self, HostSpeed};

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
pub fn scenario_table(s: &ScenarioResult, rounds: usize) -> String {
    let mut t = body(s, rounds);
    steal_line(&mut t, s);
    host_speed_line(&mut t, s);
    t
}

/// The host's speed before each run and how the runs' throughput went with it: what separates
/// rounds of one candidate when steal does not.
fn host_speed_line(t: &mut String, s: &ScenarioResult) {
    let runs: Vec<(&str, f64, HostSpeed)> = s
        .candidates
        .iter()
        .flat_map(|c| {
            c.runs.iter().filter_map(|m| {
                let speed = HostSpeed {
                    core_ms: m.host_core_ms?,
                    memory_ms: m.host_memory_ms?,
                    during_ns: m.host_memory_during_ns,
                };
                Some((c.candidate.name.as_str(), m.throughput, speed))
            })
        })
        .collect();
    if let Some(rel) = host_speed::relate(&runs) {
        let _ = writeln!(t, "\nHost speed before each run: {rel}.");
    }
}

/// How much CPU the hypervisor took from the machine during the scenario's windows: a round
/// that lost more had less CPU for client, server and proxy alike, and measures lower.
fn steal_line(t: &mut String, s: &ScenarioResult) {
    let mut runs: Vec<(f64, &str)> = s
        .candidates
        .iter()
        .flat_map(|c| {
            c.runs
                .iter()
                .map(|m| (m.steal_pct, c.candidate.name.as_str()))
        })
        .collect();
    if runs.is_empty() || runs.iter().all(|(p, _)| *p == 0.0) {
        return;
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (max, who) = runs[runs.len() - 1];
    let _ = writeln!(
        t,
        "\nCPU stolen by the hypervisor (`/proc/stat` steal, share of the machine's time) per \
         window: median {:.1}%, max {max:.1}% ({who}).",
        runs[runs.len() / 2].0
    );
}

fn body(s: &ScenarioResult, rounds: usize) -> String {
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

#[cfg(test)]
mod tests {
    use super::super::ratio::Status;
    use super::*;
    use crate::engine::Measurement;
    use crate::plan::{Candidate, Scenario, Via};
    use crate::report::Rounds;

    #[test]
    fn tls_scenarios_show_their_ratios_and_the_noise() {
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
        let text = scenario_table(&s, 1);
        assert!(text.contains("bytes/TLS record"));
        assert!(text.contains("**parity within noise**"));
        // Plain scenarios keep their columns.
        let plain = ScenarioResult::new(
            &Scenario { tag: None, ..sc },
            vec![run("pgpipe-tokio-4", 100.0)],
        );
        assert!(plain.tls.is_none() && !scenario_table(&plain, 1).contains("TLS"));
    }
}
