//! The web benchmark: every variant of `pgpipe-web` as a server process, loaded with wrk.
//!
//! ```text
//! cargo run --release -p pgpipe-web --bin web-bench              # about 12 min
//! cargo run --release -p pgpipe-web --bin web-bench -- --quick   # smoke run, under a minute
//! cargo run --release -p pgpipe-web --bin web-bench -- --help
//! ```
//!
//! It starts a throwaway PostgreSQL (or uses `DATABASE_URL`'s server), creates the database
//! `pgpipe_web` with the `world` and `fortune` tables, and runs, for a number of rounds, each
//! variant in turn (the order rotated per round) as a child process of this binary (`serve`),
//! every endpoint against it: a wrk warm-up, then a measured wrk run. During the measured run it
//! counts the variant's server connections in `pg_stat_activity` every 100 ms and reads CPU
//! counters (`/proc/stat`, the server's `/proc/PID/stat`, the backends', wrk's rusage). It
//! prints a table per endpoint, the A/A spread and the goals, and writes JSON and SVG charts.
//!
//! This file owns the benchmark's course (the rounds, the tables, the A/A spread, the goals,
//! the JSON). Beside it: `args.rs` (the command line and the entries' names), `monitor.rs`
//! (the server's connections, read from PostgreSQL), `measure.rs` (the server under test, wrk
//! and one measured run), `results.rs` (a run's figures and their summary over rounds) and
//! `charts.rs` (the SVG charts, and `--replot`).

mod args;
mod charts;
mod measure;
mod monitor;
mod results;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgpipe_tests::{autogroup, host_speed};
use pgpipe_web::bench::host_jiffies;

use crate::args::{endpoint_path, parse_args, Args};
use crate::charts::{replot, subtitle, write_charts};
use crate::measure::{check_perf, ensure_wrk, measure, run_wrk, Measured, Server};
use crate::monitor::Monitor;
use crate::results::{calls_cell, host_speed_lines, per_request_calls, summarize, Run, Summary};

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("serve") {
        let r = pgpipe_web::server::parse_serve_args(&raw[1..])
            .and_then(pgpipe_web::server::serve_forever);
        if let Err(e) = r {
            eprintln!("{e}");
            std::process::exit(2);
        }
        return;
    }
    let args = match parse_args(&raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some(file) = &args.replot {
        if let Err(e) = replot(file, &args.svg_dir) {
            eprintln!("web-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    match run(&args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("web-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// The whole benchmark; `Ok(false)` when a run failed or had errors.
fn run(a: &Args) -> Result<bool, String> {
    let started = Instant::now();
    ensure_wrk()?;
    if a.syscalls {
        check_perf()?;
    }
    // Before the cluster starts, so every backend of the run is scheduled one way; put back
    // when this returns.
    let autogroup_run = autogroup::ForRun::start(a.autogroup_off)?;
    let autogroup = autogroup_run.state();
    // No URL: a throwaway cluster of the tests' harness, removed when this returns.
    let (_cluster, admin_url) = match &a.url {
        Some(u) => (None, u.clone()),
        None => {
            let c = pgpipe_tests::Cluster::start().map_err(|e| e.to_string())?;
            let u = c.url();
            (Some(c), u)
        }
    };
    let url = pgpipe_web::schema::recreate_database(&admin_url, "pgpipe_web")?;
    pgpipe_web::schema::load(&url)?;
    let monitor = Monitor::connect(&url)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pg_version = monitor
        .scalar("SELECT current_setting('server_version')")
        .unwrap_or_default();
    let pg_max_conn = monitor
        .scalar("SELECT current_setting('max_connections')")
        .unwrap_or_default();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let busy_before = {
        let h0 = host_jiffies().unwrap_or_default();
        std::thread::sleep(Duration::from_secs(1));
        let h1 = host_jiffies().unwrap_or(h0);
        if h1.total > h0.total {
            (h1.busy - h0.busy) as f64 / (h1.total - h0.total) as f64
        } else {
            0.0
        }
    };
    let endpoints: Vec<(String, String)> = a
        .endpoints
        .iter()
        .map(|e| endpoint_path(e, a.queries))
        .collect();
    let total_runs = a.rounds * a.entries.len() * endpoints.len();
    println!(
        "web-bench: {} entries x {} endpoints x {} rounds = {total_runs} runs of {} s (+{} s warm-up), \
         wrk -t{} -c{}, {cores} cores, PostgreSQL {pg_version}, commit {commit}{}, machine {:.0}% busy before",
        a.entries.len(),
        endpoints.len(),
        a.rounds,
        a.duration,
        a.warmup,
        a.wrk_threads,
        a.connections,
        if dirty { " (dirty)" } else { "" },
        busy_before * 100.0
    );
    println!("web-bench: kernel autogroup scheduling {autogroup}");
    if autogroup == autogroup::State::On {
        println!(
            "web-bench: note: with autogroup on, each PostgreSQL backend competes for CPU as a \
             session of its own; on a machine shared with the server this delays backends and \
             lengthens tails (docs/BENCHMARKS.md, \"Autogroup\"); --sched-autogroup off measures without it"
        );
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0..a.rounds {
        let n = a.entries.len();
        for k in 0..n {
            let entry = &a.entries[(k + round) % n];
            let app_name: String = format!("pgpipe-web-{entry}")
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .take(63)
                .collect();
            monitor.wait_gone(&app_name);
            let server = match Server::start(entry, &url, &app_name, a) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("round {}: {e}", round + 1);
                    failures.push(e);
                    continue;
                }
            };
            for (endpoint, label) in &endpoints {
                let target = format!("http://{}{}", server.addr, endpoint);
                // The host's speed now, while the server idles between runs.
                let speed = host_speed::measure();
                if a.warmup > 0 {
                    if let Err(e) = run_wrk(a, &target, a.warmup) {
                        failures.push(format!("{entry} {endpoint} warm-up: {e}"));
                        continue;
                    }
                }
                match measure(a, &monitor, &server, &app_name, &target) {
                    Ok(Measured {
                        wrk,
                        samples,
                        cpu,
                        host_busy,
                        steal_pct,
                        switches,
                        syscalls,
                    }) => {
                        let req = wrk.requests.max(1) as f64;
                        let per = |s: f64| s / req * 1e6;
                        let counts = &samples.counts;
                        let run = Run {
                            round: round + 1,
                            entry: entry.clone(),
                            endpoint: label.clone(),
                            connections: a.connections,
                            errors: wrk.errors(),
                            conns_avg: counts.iter().sum::<usize>() as f64
                                / counts.len().max(1) as f64,
                            conns_max: counts.iter().copied().max().unwrap_or(0),
                            host_cpu_us: per(cpu[0]),
                            app_cpu_us: per(cpu[1]),
                            db_cpu_us: (!cpu[2].is_nan()).then(|| per(cpu[2])),
                            wrk_cpu_us: per(cpu[3]),
                            host_busy,
                            steal_pct,
                            probe_ms: speed.core_ms,
                            memory_ms: speed.memory_ms,
                            app_switches: switches.map(|n| n as f64 / req),
                            app_syscalls: syscalls.map(|[all, _]| all as f64 / req),
                            app_uring_enters: syscalls.map(|[_, uring]| uring as f64 / req),
                            wrk,
                        };
                        println!(
                            "round {} {:<20} {:<12} {:>9.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}  conns {:.1}/{}  cpu/req host {:.0} app {:.0} db {} wrk {:.0} µs{}  probe {:.1}/{:.1} ms",
                            run.round,
                            run.entry,
                            run.endpoint,
                            run.wrk.rps,
                            run.wrk.p50_ms,
                            run.wrk.p99_ms,
                            run.errors,
                            run.conns_avg,
                            run.conns_max,
                            run.host_cpu_us,
                            run.app_cpu_us,
                            run.db_cpu_us.map_or("-".into(), |v| format!("{v:.0}")),
                            run.wrk_cpu_us,
                            per_request_calls(run.app_switches, run.app_syscalls, run.app_uring_enters),
                            run.probe_ms,
                            run.memory_ms
                        );
                        runs.push(run);
                    }
                    Err(e) => {
                        eprintln!("{entry} {endpoint}: {e}");
                        failures.push(format!("{entry} {endpoint}: {e}"));
                    }
                }
            }
            drop(server);
            // The next variant starts on a server without this one's backends.
            monitor.wait_gone(&app_name);
        }
    }

    // Summaries, in entry order per endpoint.
    let mut summaries: Vec<Summary> = Vec::new();
    let mut tables = String::new();
    for (_, label) in &endpoints {
        let _ = std::fmt::Write::write_fmt(
            &mut tables,
            format_args!(
                "\n### {label} (wrk -c{}, {} s, median of {} rounds, min–max)\n\n\
                 | variant | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | server conns avg / max | host CPU µs/req | app µs/req | db µs/req | wrk µs/req | app switches / syscalls / io_uring_enter per req |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                a.connections, a.duration, a.rounds
            ),
        );
        for entry in &a.entries {
            let Some(s) = summarize(&runs, entry, label) else {
                continue;
            };
            let _ = std::fmt::Write::write_fmt(
                &mut tables,
                format_args!(
                    "| {} | {:.0} ({:.0}–{:.0}) | {:.2} | {:.2} | {:.2} | {:.1} | {} | {:.1} / {} | {:.0} | {:.0} | {} | {:.0} | {} |\n",
                    s.entry,
                    s.rps.median,
                    s.rps.min,
                    s.rps.max,
                    s.p50_ms.median,
                    s.p90_ms.median,
                    s.p99_ms.median,
                    s.max_ms.median,
                    s.errors,
                    s.conns_avg.median,
                    s.conns_max,
                    s.host_cpu_us.median,
                    s.app_cpu_us.median,
                    s.db_cpu_us.map_or("-".into(), |d| format!("{:.0}", d.median)),
                    s.wrk_cpu_us.median,
                    calls_cell(&s)
                ),
            );
            summaries.push(s);
        }
    }
    let find = |entry: &str, ep: &str| {
        summaries
            .iter()
            .find(|s| s.entry == entry && s.endpoint == ep)
    };
    // A/A: every entry named twice (X and X#2).
    let mut aa = String::new();
    for entry in a.entries.iter().filter(|e| e.contains('#')) {
        let base = entry.split('#').next().unwrap_or(entry);
        for (_, label) in &endpoints {
            if let (Some(x), Some(y)) = (find(base, label), find(entry, label)) {
                let spread =
                    (x.rps.median - y.rps.median).abs() / ((x.rps.median + y.rps.median) / 2.0);
                let _ = std::fmt::Write::write_fmt(
                    &mut aa,
                    format_args!(
                        "A/A {base} vs {entry}, {label}: {:.0} vs {:.0} req/s, spread {:.1}%\n",
                        x.rps.median,
                        y.rps.median,
                        spread * 100.0
                    ),
                );
            }
        }
    }
    // What the hypervisor took, per endpoint: a run that lost more CPU measures lower.
    for (_, label) in &endpoints {
        let mut steal: Vec<(f64, String, usize)> = runs
            .iter()
            .filter(|r| &r.endpoint == label)
            .map(|r| (r.steal_pct, r.entry.clone(), r.round))
            .collect();
        steal.sort_by(|x, y| x.0.total_cmp(&y.0));
        if let Some((max, who, round)) = steal.last().filter(|s| s.0 > 0.0) {
            let _ = std::fmt::Write::write_fmt(
                &mut aa,
                format_args!(
                    "CPU stolen by the hypervisor (/proc/stat steal), {label}: median {:.1}% of \
                     the machine's time per run, max {max:.1}% ({who}, round {round})\n",
                    steal[steal.len() / 2].0
                ),
            );
        }
    }
    // The host's own speed: what separates rounds when nothing else does.
    for (_, label) in &endpoints {
        aa.push_str(&host_speed_lines(&runs, label));
    }
    // The goals of the issue.
    let mut goals = String::new();
    let q = format!("queries-{}", a.queries);
    let mut goal = |text: String, met: Option<bool>| {
        let mark = match met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let _ = std::fmt::Write::write_fmt(&mut goals, format_args!("- {text}: {mark}\n"));
    };
    let (g, d, t, p) = (
        "pgpipe-glommio",
        "axum-deadpool",
        "axum-tokio-postgres",
        "pgpipe-tokio-axum",
    );
    match (find(g, &q), find(d, &q)) {
        (Some(x), Some(y)) => goal(
            format!(
                "/{} : pgpipe-glommio ≥ 1.5x axum-deadpool ({:.2}x) with ≤ 1/4 of its server connections (max {} vs {})",
                q.replace('-', "?q="),
                x.rps.median / y.rps.median,
                x.conns_max,
                y.conns_max
            ),
            Some(x.rps.median >= 1.5 * y.rps.median && x.conns_max * 4 <= y.conns_max),
        ),
        _ => goal(format!("/{q}: glommio vs deadpool"), None),
    }
    for ep in ["db", "fortunes"] {
        match (find(g, ep), find(d, ep)) {
            (Some(x), Some(y)) => goal(
                format!(
                    "/{ep}: pgpipe-glommio ≥ axum-deadpool ({:.0} vs {:.0} req/s, {:.2}x)",
                    x.rps.median,
                    y.rps.median,
                    x.rps.median / y.rps.median
                ),
                Some(x.rps.median >= y.rps.median),
            ),
            _ => goal(format!("/{ep}: glommio vs deadpool"), None),
        }
    }
    for (_, label) in &endpoints {
        if let (Some(x), Some(y)) = (find(p, label), find(t, label)) {
            goal(
                format!(
                    "{label}: pgpipe-tokio-axum ≥ axum-tokio-postgres ({:.0} vs {:.0} req/s, {:.2}x)",
                    x.rps.median,
                    y.rps.median,
                    x.rps.median / y.rps.median
                ),
                Some(x.rps.median >= y.rps.median),
            );
        }
    }
    let errors: u64 = runs.iter().map(|r| r.errors).sum();
    goal(
        format!(
            "zero errors under load ({errors} over {} runs; non-2xx includes the server's own row-id check)",
            runs.len()
        ),
        Some(errors == 0 && failures.is_empty()),
    );

    println!("{tables}");
    println!("{aa}");
    println!("Goals:\n{goals}");
    for f in &failures {
        println!("failed: {f}");
    }

    // JSON and charts.
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::fs::create_dir_all(&a.out_dir).map_err(|e| e.to_string())?;
    let json_path = a.out_dir.join(format!("web-bench-{stamp}.json"));
    let mut meta = BTreeMap::new();
    meta.insert(
        "commit",
        format!("{commit}{}", if dirty { "-dirty" } else { "" }),
    );
    meta.insert("cores", cores.to_string());
    meta.insert("postgres", pg_version);
    meta.insert("postgres_max_connections", pg_max_conn);
    meta.insert("busy_before", format!("{busy_before:.3}"));
    meta.insert("wrk", format!("-t{} -c{}", a.wrk_threads, a.connections));
    meta.insert(
        "window",
        format!("{} s warm-up, {} s measured", a.warmup, a.duration),
    );
    meta.insert("rounds", a.rounds.to_string());
    meta.insert("sched_autogroup", autogroup.to_string());
    meta.insert(
        "elapsed_s",
        format!("{:.0}", started.elapsed().as_secs_f64()),
    );
    let doc = serde_json::json!({
        "meta": meta,
        "runs": runs,
        "summaries": summaries,
        "tables_md": tables,
        "aa": aa,
        "goals": goals,
        "failures": failures,
    });
    let body = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, body).map_err(|e| format!("{}: {e}", json_path.display()))?;
    std::fs::write(
        json_path.with_extension("md"),
        format!("{tables}\n{aa}\nGoals:\n{goals}"),
    )
    .map_err(|e| e.to_string())?;
    let meta: BTreeMap<String, String> =
        meta.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    write_charts(&summaries, &a.svg_dir, &subtitle(&meta))?;
    println!(
        "wrote {} and charts to {} in {:.0} s",
        json_path.display(),
        a.svg_dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(errors == 0 && failures.is_empty() && runs.len() == total_runs)
}
