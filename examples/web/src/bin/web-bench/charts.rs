//! The charts: four SVG bar charts per endpoint (throughput, latency, CPU per request, server
//! connections), from a run's summaries or, with `--replot`, a saved run's JSON.

use std::collections::BTreeMap;
use std::path::Path;

use pgpipe_web::bench::{bar_chart_svg, Bar, BarChart, Series, PALETTE};

use crate::results::{Stat, Summary};

/// The request path of an endpoint label (`queries-20` is `/queries?q=20`).
fn path_of_label(label: &str) -> String {
    match label.split_once('-') {
        Some((name, q)) => format!("/{name}?q={q}"),
        None => format!("/{label}"),
    }
}

/// The charts' subtitle, from a run's metadata.
pub(crate) fn subtitle(meta: &BTreeMap<String, String>) -> String {
    let get = |k: &str| meta.get(k).cloned().unwrap_or_default();
    // Older runs did not record it; the long "off for this run (...)" reads as plain "off".
    let autogroup = match meta.get("sched_autogroup") {
        Some(v) if v.starts_with("off") => " · kernel autogroup off",
        Some(v) if v == "on" => " · kernel autogroup on",
        _ => "",
    };
    format!(
        "wrk {} · {} rounds of {} · {} cores shared by wrk, server and PostgreSQL {}{autogroup}",
        get("wrk"),
        get("rounds"),
        get("window"),
        get("cores"),
        get("postgres")
    )
}

/// Writes the four charts of every endpoint of `summaries` into `svg_dir`: throughput,
/// latency, CPU per request, server connections.
pub(crate) fn write_charts(summaries: &[Summary], svg_dir: &Path, sub: &str) -> Result<(), String> {
    std::fs::create_dir_all(svg_dir).map_err(|e| format!("{}: {e}", svg_dir.display()))?;
    let mut labels: Vec<&str> = Vec::new();
    for s in summaries {
        if !labels.contains(&s.endpoint.as_str()) {
            labels.push(&s.endpoint);
        }
    }
    for label in labels {
        let endpoint = path_of_label(label);
        let rows: Vec<&Summary> = summaries.iter().filter(|s| s.endpoint == label).collect();
        let cats: Vec<String> = rows.iter().map(|s| s.entry.clone()).collect();
        let bar = |s: &Stat| {
            Some(Bar {
                value: s.median,
                range: Some((s.min, s.max)),
            })
        };
        let charts = [
            (
                format!("web-throughput-{label}.svg"),
                BarChart {
                    title: format!("GET {endpoint}: requests per second"),
                    subtitle: format!("median, min–max whiskers · {sub}"),
                    y_label: "requests/s".into(),
                    categories: cats.clone(),
                    series: vec![Series {
                        name: "req/s".into(),
                        color: PALETTE[0],
                        bars: rows.iter().map(|s| bar(&s.rps)).collect(),
                    }],
                },
            ),
            (
                format!("web-latency-{label}.svg"),
                BarChart {
                    title: format!("GET {endpoint}: latency (wrk, closed loop)"),
                    subtitle: format!("median over rounds, min–max whiskers · {sub}"),
                    y_label: "ms".into(),
                    categories: cats.clone(),
                    series: vec![
                        Series {
                            name: "p50".into(),
                            color: PALETTE[0],
                            bars: rows.iter().map(|s| bar(&s.p50_ms)).collect(),
                        },
                        Series {
                            name: "p90".into(),
                            color: PALETTE[1],
                            bars: rows.iter().map(|s| bar(&s.p90_ms)).collect(),
                        },
                        Series {
                            name: "p99".into(),
                            color: PALETTE[3],
                            bars: rows.iter().map(|s| bar(&s.p99_ms)).collect(),
                        },
                    ],
                },
            ),
            (
                format!("web-cpu-{label}.svg"),
                BarChart {
                    title: format!("GET {endpoint}: CPU per request"),
                    subtitle: format!(
                        "machine (/proc/stat), server process, its PostgreSQL backends, wrk · {sub}"
                    ),
                    y_label: "CPU µs per request".into(),
                    categories: cats.clone(),
                    series: vec![
                        Series {
                            name: "machine".into(),
                            color: PALETTE[4],
                            bars: rows.iter().map(|s| bar(&s.host_cpu_us)).collect(),
                        },
                        Series {
                            name: "server process".into(),
                            color: PALETTE[0],
                            bars: rows.iter().map(|s| bar(&s.app_cpu_us)).collect(),
                        },
                        Series {
                            name: "PostgreSQL backends".into(),
                            color: PALETTE[2],
                            bars: rows
                                .iter()
                                .map(|s| s.db_cpu_us.as_ref().and_then(bar))
                                .collect(),
                        },
                        Series {
                            name: "wrk".into(),
                            color: PALETTE[5],
                            bars: rows.iter().map(|s| bar(&s.wrk_cpu_us)).collect(),
                        },
                    ],
                },
            ),
            (
                format!("web-connections-{label}.svg"),
                BarChart {
                    title: format!("GET {endpoint}: server connections in use"),
                    subtitle: format!(
                        "pg_stat_activity every 100 ms during the window; mean, min–max over rounds · {sub}"
                    ),
                    y_label: "connections".into(),
                    categories: cats,
                    series: vec![Series {
                        name: "connections".into(),
                        color: PALETTE[2],
                        bars: rows.iter().map(|s| bar(&s.conns_avg)).collect(),
                    }],
                },
            ),
        ];
        for (name, chart) in charts {
            let path = svg_dir.join(name);
            std::fs::write(&path, bar_chart_svg(&chart))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// `--replot FILE.json`: the charts of a saved run, again (into `--svg-dir`).
pub(crate) fn replot(file: &Path, svg_dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    #[derive(serde::Deserialize)]
    struct Saved {
        meta: BTreeMap<String, String>,
        summaries: Vec<Summary>,
    }
    let saved: Saved =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    write_charts(&saved.summaries, svg_dir, &subtitle(&saved.meta))?;
    println!(
        "wrote the charts of {} to {}",
        file.display(),
        svg_dir.display()
    );
    Ok(())
}
