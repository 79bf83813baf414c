//! The COPY and streaming scenarios' comparisons, memory goal, columns and table
//! ([`BulkReport`]): each pgpipe runtime's rows/s against tokio-postgres', the streamed read's
//! peak heap, the rows' sums.

use std::fmt::Write as _;

use serde::Serialize;

use super::cells::{failed_row, range, thousands};
use super::ratio::{judge, Ratio, Status};
use super::{CandidateResult, Goal, ScenarioResult};
use crate::plan::{Kind, Workload};

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
    pub sums_agree: Option<crate::engine::bulk::Sums>,
    /// Successful runs whose sums were compared.
    pub runs_checked: usize,
}

/// The comparisons of the bulk scenario `s`: ratios, the memory goal and the rows' sums.
pub(super) fn bulk_report(s: &ScenarioResult) -> BulkReport {
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
    let sums: Vec<crate::engine::bulk::Sums> = s
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

/// Columns of the COPY and streaming table.
pub(super) const BULK_COLUMNS: &[&str] = &[
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

/// A bulk scenario's rows: rows/s, CPU per row, the heap; then the A/A spread, the rows'
/// check, the ratios and the memory goal.
pub(super) fn bulk_table(t: &mut String, s: &ScenarioResult) {
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
