//! Hand-written SVG charts: lines with min–max whiskers over categories (linear or log y) and
//! bars with whiskers. Plain SVG 1.1 with inline styles, so GitHub and browsers render it as is.
//!
//! This file owns which charts a scenario gets and what they show (its figures by family,
//! size, delay or candidate); `draw.rs` draws them (axes, lines, bars, legend).

use crate::plan::{Delay, Load};
use crate::report::{Figure, ScenarioResult};

mod draw;

use draw::{bar_chart, color, line_chart, Series};

/// Whether a family is a tuned pgpipe variant (`-wN`, `-mN`): drawn dashed.
/// A tuned variant (`-wN`, `-mN`) or a TLS one (`-tls`): drawn dashed in its family's colour.
fn tuned(family: &str) -> bool {
    family.contains("-w") || family.contains("-m") || family.contains("-tls")
}

fn delay_text(s: &ScenarioResult) -> String {
    let d = match s.delay_kind {
        Delay::Direct => "direct".into(),
        Delay::Proxy(d) => format!("{} ms one-way delay", d.as_secs_f64() * 1e3),
    };
    if s.tls.is_some() {
        format!("{d}, plaintext and TLS")
    } else {
        d
    }
}

/// The charts of one scenario: `(file name, svg)`.
pub fn charts(s: &ScenarioResult) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let ok: Vec<_> = s.candidates.iter().filter(|c| !c.runs.is_empty()).collect();
    if ok.is_empty() {
        return out;
    }
    // Families in first-seen order, A/A copies left out of the lines.
    let mut families: Vec<String> = Vec::new();
    for c in &ok {
        if c.candidate.copy == 1 && !families.contains(&c.family) {
            families.push(c.family.clone());
        }
    }
    let mut sizes: Vec<usize> = ok.iter().map(|c| c.candidate.conns).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let labels: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    let by_size =
        |fam: &str, pick: &dyn Fn(&crate::report::Summary) -> Figure| -> Vec<Option<Figure>> {
            sizes
                .iter()
                .map(|&n| {
                    ok.iter()
                        .find(|c| c.family == fam && c.candidate.conns == n)
                        .map(|c| pick(&c.summary))
                })
                .collect()
        };
    let subtitle = format!("{} · median of rounds, whiskers min–max", s.describe());
    if s.workload.is_bulk() {
        return bulk_charts(s, &ok, &subtitle);
    }
    if s.workload == crate::plan::Workload::Tx {
        return tx_charts(s, &ok, &subtitle);
    }

    if let Load::Ceiling { queries } = s.load {
        let mut series: Vec<Series> = families
            .iter()
            .map(|f| Series {
                name: f.clone(),
                color: color(f),
                dashed: false,
                points: by_size(f, &|m| m.wall_ms),
            })
            .collect();
        series.push(Series {
            name: "ideal: N × 5 ms / size".into(),
            color: "#888888",
            dashed: true,
            points: sizes
                .iter()
                .map(|&n| {
                    let v = queries as f64 * crate::engine::SLEEP_SECONDS * 1e3 / n as f64;
                    Some(Figure {
                        median: v,
                        min: v,
                        max: v,
                    })
                })
                .collect(),
        });
        out.push((
            format!("{}.svg", s.id),
            line_chart(
                &format!("Pool ceiling: {queries} × pg_sleep(5 ms), time to finish"),
                &subtitle,
                "connections (pool size / pipeline_size / tokio-postgres connections)",
                &labels,
                "ms (log scale)",
                &series,
                true,
            ),
        ));
        return out;
    }

    let series: Vec<Series> = families
        .iter()
        .map(|f| Series {
            name: f.clone(),
            color: color(f),
            // A tuned variant (-wN, -mN) or a TLS one in its family's colour, dashed.
            dashed: tuned(f),
            points: by_size(f, &|m| m.throughput),
        })
        .collect();
    let unit = if s.statements_per_op == 2 {
        "ops/s (1 op = UPDATE + SELECT)"
    } else {
        "ops/s (1 op = 1 query)"
    };
    out.push((
        format!("throughput-{}.svg", s.id),
        line_chart(
            &format!(
                "Throughput vs connections: {} ({})",
                s.workload_label(),
                delay_text(s)
            ),
            &subtitle,
            "server connections per client (pipeline_size / connections / pool size)",
            &labels,
            unit,
            &series,
            false,
        ),
    ));

    // Latency: the best candidate of each family, and deadpool-32 when present.
    let mut picks: Vec<&crate::report::CandidateResult> = Vec::new();
    for f in &families {
        if let Some(best) = s.best(|c| &c.family() == f) {
            picks.push(best);
        }
    }
    if let Some(d) = s.get("deadpool-32") {
        if !picks.iter().any(|p| p.candidate.name == d.candidate.name) {
            picks.push(d);
        }
    }
    let pct_labels: Vec<String> = ["p50", "p90", "p99", "p99.9", "p99.99", "max"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let lat: Vec<Series> = picks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let m = &c.summary;
            let ms = |f: Figure| {
                Some(Figure {
                    median: f.median / 1e3,
                    min: f.min / 1e3,
                    max: f.max / 1e3,
                })
            };
            Series {
                name: c.candidate.name.clone(),
                color: color(&c.family),
                // A tuned variant (-wN, -mN), or a second line of the same family (deadpool-32 next
                // to the best deadpool): dashed.
                dashed: tuned(&c.family) || picks[..i].iter().any(|p| p.family == c.family),
                points: vec![
                    ms(m.p50_us),
                    ms(m.p90_us),
                    ms(m.p99_us),
                    ms(m.p999_us),
                    ms(m.p9999_us),
                    ms(m.max_us),
                ],
            }
        })
        .collect();
    let from = match s.load {
        Load::Open { .. } => "from each request's scheduled time",
        _ => "from each op's start",
    };
    out.push((
        format!("latency-{}.svg", s.id),
        line_chart(
            &format!(
                "Latency percentiles: {} ({})",
                s.workload_label(),
                delay_text(s)
            ),
            &format!("{} · {from} · best of each family", s.describe()),
            "percentile",
            &pct_labels,
            "ms (log scale)",
            &lat,
            true,
        ),
    ));

    let bars: Vec<(String, &'static str, Figure)> = ok
        .iter()
        .map(|c| {
            (
                c.candidate.name.clone(),
                color(&c.family),
                c.summary.client_cpu_us,
            )
        })
        .collect();
    if s.workload == crate::plan::Workload::Hol {
        let bars: Vec<(String, &'static str, Figure)> = ok
            .iter()
            .filter_map(|c| {
                let f = c.summary.fast_p9999_us?;
                Some((
                    c.candidate.name.clone(),
                    color(&c.family),
                    Figure {
                        median: f.median / 1e3,
                        min: f.min / 1e3,
                        max: f.max / 1e3,
                    },
                ))
            })
            .collect();
        if !bars.is_empty() {
            out.push((
                format!("fast-p9999-{}.svg", s.id),
                bar_chart(
                    &format!(
                        "Fast-query p99.99: {} ({})",
                        s.workload_label(),
                        delay_text(s)
                    ),
                    &format!("{} · point selects only, {from}", s.describe()),
                    "ms",
                    &bars,
                ),
            ));
        }
    }
    out.push((
        format!("cpu-{}.svg", s.id),
        bar_chart(
            &format!(
                "Client CPU per op: {} ({})",
                s.workload_label(),
                delay_text(s)
            ),
            &format!(
                "{} · getrusage of the client process, proxy and generator threads excluded",
                s.describe()
            ),
            "client CPU µs/op",
            &bars,
        ),
    ));
    out
}

/// A bulk scenario's charts: rows per second and peak heap, one bar per candidate.
fn bulk_charts(
    s: &ScenarioResult,
    ok: &[&crate::report::CandidateResult],
    subtitle: &str,
) -> Vec<(String, String)> {
    let bars = |pick: &dyn Fn(&crate::report::Summary) -> Option<Figure>| {
        ok.iter()
            .filter_map(|c| {
                Some((
                    c.candidate.name.clone(),
                    color(&c.family),
                    pick(&c.summary)?,
                ))
            })
            .collect::<Vec<_>>()
    };
    let scale = |f: Figure, by: f64| Figure {
        median: f.median / by,
        min: f.min / by,
        max: f.max / by,
    };
    vec![
        (
            format!("rows-{}.svg", s.id),
            bar_chart(
                &format!("Rows per second: {}", s.workload_label()),
                subtitle,
                "rows/s (thousands)",
                &bars(&|m| Some(scale(m.throughput, 1e3))),
            ),
        ),
        (
            format!("heap-{}.svg", s.id),
            bar_chart(
                &format!("Peak client heap: {}", s.workload_label()),
                subtitle,
                "MiB",
                &bars(&|m| m.peak_heap_bytes.map(|f| scale(f, 1024.0 * 1024.0))),
            ),
        ),
    ]
}

/// A transactions scenario's charts, one bar per candidate: transactions per second, p99
/// latency, and fairness (the worst round).
fn tx_charts(
    s: &ScenarioResult,
    ok: &[&crate::report::CandidateResult],
    subtitle: &str,
) -> Vec<(String, String)> {
    let bars = |pick: &dyn Fn(&crate::report::Summary) -> Option<Figure>| {
        ok.iter()
            .filter_map(|c| {
                Some((
                    c.candidate.name.clone(),
                    color(&c.family),
                    pick(&c.summary)?,
                ))
            })
            .collect::<Vec<_>>()
    };
    let ms = |f: Figure| Figure {
        median: f.median / 1e3,
        min: f.min / 1e3,
        max: f.max / 1e3,
    };
    let title = |what: &str| format!("{what}: {} ({})", s.workload_label(), delay_text(s));
    vec![
        (
            format!("tx-{}.svg", s.id),
            bar_chart(
                &title("Transactions per second"),
                subtitle,
                "tx/s",
                &bars(&|m| Some(m.throughput)),
            ),
        ),
        (
            format!("tx-p99-{}.svg", s.id),
            bar_chart(
                &title("Transaction latency p99"),
                subtitle,
                "ms",
                &bars(&|m| Some(ms(m.p99_us))),
            ),
        ),
        (
            format!("tx-fairness-{}.svg", s.id),
            bar_chart(
                &title("Fairness (slowest-served task / median task)"),
                subtitle,
                "ratio (1 = every task served alike)",
                &bars(&|m| m.fairness),
            ),
        ),
    ]
}

impl ScenarioResult {
    fn workload_label(&self) -> String {
        let w = match self.workload {
            crate::plan::Workload::Point => "point select",
            crate::plan::Workload::PointId => "checked point select",
            crate::plan::Workload::Select1 => "SELECT 1",
            crate::plan::Workload::ReadWrite => "UPDATE + SELECT",
            crate::plan::Workload::Sleep => "pg_sleep",
            crate::plan::Workload::Hol => "hol (99% point, 1% 20 ms sleep)",
            crate::plan::Workload::CopyIn => "binary COPY in",
            crate::plan::Workload::CopyOut => "binary COPY out",
            crate::plan::Workload::Stream => "streamed read",
            crate::plan::Workload::Tx => "transaction (UPDATE + SELECT)",
        };
        let w = match (self.via, self.procs) {
            (crate::plan::Via::PgBouncer, 1) => format!("{w} through PgBouncer"),
            (crate::plan::Via::PgBouncer, n) => format!("{w} through PgBouncer, {n} processes"),
            (_, 1) => w.to_string(),
            (_, n) => format!("{w}, {n} processes"),
        };
        match self.load {
            Load::Closed { tasks } => format!("{w}, {tasks} tasks"),
            Load::Open { rate } => format!("{w}, open loop {rate} arrivals/s"),
            Load::Ceiling { .. } => w.to_string(),
            Load::Rows { rows } => format!("{w}, {rows} rows"),
        }
    }
}
