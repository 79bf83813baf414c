//! `pgpipe-bench`: pgpipe side by side with tokio-postgres and deadpool-postgres, with simulated
//! round trips, latency tails and pipeline fill ratios.
//!
//! ```text
//! cargo run --release -p pgpipe-bench                 # the default set (a few minutes)
//! cargo run --release -p pgpipe-bench -- --quick      # smoke run of the whole pipeline (CI)
//! cargo run --release -p pgpipe-bench -- --help
//! ```
//!
//! With no database URL (`--url`, else `DATABASE_URL`) it starts a throwaway PostgreSQL cluster
//! (the tests' harness, with TLS on, so that plaintext and `-tls` candidates meet the same
//! server), loads a pgbench-like accounts table once, runs every scenario's
//! candidates interleaved over several rounds, prints Markdown tables (median and min–max over
//! rounds) with a legend, and writes them, the JSON document and SVG charts to a directory of the
//! run's own under `target/` (git-ignored), or with `--update-docs` to the committed report
//! (`docs/bench/`, `bench/results/`). Method and figures: docs/BENCHMARKS.md.

mod args;
mod engine;
mod legend;
mod monitor;
mod outputs;
mod plan;
mod pooler;
mod procs;
mod progress;
mod report;
mod svg;
mod tables;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgpipe_bench::proxy::DelayProxy;
use pgpipe_tests::autogroup;

use crate::args::{build_plan, parse_args, settings, Args, USAGE};
use crate::engine::{bulk, pgbench, Job};
use crate::monitor::Monitor;
use crate::outputs::{shown, write_file, Outputs};
use crate::plan::{Delay, Kind, Via};
use crate::report::{Machine, Report, ScenarioResult};
use crate::tables::{load_accounts, load_copy_source};

/// Counts live heap bytes while a bulk run (COPY, streaming) measures them; otherwise one
/// relaxed load per allocation.
#[global_allocator]
static ALLOC: pgpipe_bench::alloc::TrackingAlloc = pgpipe_bench::alloc::TrackingAlloc;

/// The goal line of the server's log.
const SERVER_LOG_GOAL: &str = "server log: no WARNING from the candidates";

/// Whether the throwaway server logged a WARNING for a candidate's connection (a ROLLBACK or
/// COMMIT outside a transaction, ...): every candidate connects as `monitor::APP_NAME`.
fn server_log_goal(cluster: Option<&pgpipe_tests::Cluster>) -> report::Goal {
    let goal = format!("{SERVER_LOG_GOAL} (app={})", monitor::APP_NAME);
    let Some(c) = cluster else {
        return report::Goal {
            goal,
            measured: "not read (an external server)".into(),
            met: None,
        };
    };
    let tag = format!("app={}:", monitor::APP_NAME);
    let text = std::fs::read_to_string(c.log_path()).unwrap_or_default();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&tag) && pgpipe_tests::server_log::is_warning(l))
        .collect();
    report::Goal {
        goal,
        measured: match warnings.first() {
            None => "0".into(),
            Some(first) => format!("{}, the first: {first}", warnings.len()),
        },
        met: Some(warnings.is_empty()),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The first argument that makes this binary a memory sampler (`--sample-host-memory`).
const SAMPLER_COMMAND: &str = "__host-memory-sampler";

/// A sampler process of this same binary, chasing by the time this returns. A process of its
/// own, so that its CPU is neither the client's nor the proxy's.
fn start_sampler() -> Result<pgpipe_tests::host_speed::MemorySampler, String> {
    let exe = std::env::current_exe().map_err(|e| format!("the memory sampler: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(SAMPLER_COMMAND);
    pgpipe_tests::host_speed::MemorySampler::start(cmd)
        .map_err(|e| format!("the memory sampler did not start: {e}"))
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // A process of a many-process run (procs.rs): not a user command.
    if argv.first().map(String::as_str) == Some(procs::CHILD_COMMAND) {
        std::process::exit(procs::child_main());
    }
    // The memory sampler beside a run (`--sample-host-memory`): not a user command either.
    if argv.first().map(String::as_str) == Some(SAMPLER_COMMAND) {
        let _ = pgpipe_tests::host_speed::run_sampler(&mut std::io::stdout().lock());
        return;
    }
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("pgpipe-bench: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    match run(&args, &argv) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("pgpipe-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs everything; `Ok(false)` when some run failed or reported errors.
fn run(args: &Args, argv: &[String]) -> Result<bool, String> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let settings = settings(args);
    let root = workspace_root();
    let out = Outputs::new(args, &root, started_unix);
    let mut plan = build_plan(args, &settings);
    if plan.is_empty() && args.scenarios.is_some() {
        let all: Vec<String> = plan::default_plan(&settings, args.quick)
            .iter()
            .map(|s| s.id())
            .collect();
        return Err(format!(
            "--scenarios matched nothing; the default set's scenarios: {}, or the tags tls, copy",
            all.join(", ")
        ));
    }

    // glommio needs io_uring; where it is missing its candidates are left out loudly, unless
    // PGPIPE_REQUIRE_IO_URING says it must be there (CI).
    if let Err(e) = pgpipe_glommio::check_io_uring() {
        if std::env::var_os("PGPIPE_REQUIRE_IO_URING").is_some() {
            return Err(e.to_string());
        }
        eprintln!("pgpipe-bench: SKIPPING glommio candidates: {e}");
        for sc in &mut plan {
            sc.candidates
                .retain(|c| !matches!(c.kind, Kind::Pgpipe(plan::Adapter::Glommio)));
        }
        plan.retain(|s| !s.candidates.is_empty());
    }
    // pgbench comes with PostgreSQL's client programs; without it its candidates are left out.
    let pgbench_wanted = plan
        .iter()
        .any(|s| s.candidates.iter().any(|c| c.kind == Kind::Pgbench));
    if pgbench_wanted && pgbench::binary().is_none() {
        eprintln!(
            "pgpipe-bench: SKIPPING pgbench candidates: no pgbench beside the server's programs \
             (Debian: apt-get install -y postgresql)"
        );
        for sc in &mut plan {
            sc.candidates.retain(|c| c.kind != Kind::Pgbench);
        }
        plan.retain(|s| !s.candidates.is_empty());
    }
    let runs_total: usize =
        settings.rounds * plan.iter().map(|s| s.candidates.len()).sum::<usize>();
    if args.list {
        for s in &plan {
            let names: Vec<&str> = s.candidates.iter().map(|c| c.name.as_str()).collect();
            println!("{}: {}", s.id(), names.join(", "));
        }
        println!(
            "{runs_total} runs ({} round{}), planned to take about {} (start-up not included)",
            settings.rounds,
            if settings.rounds == 1 { "" } else { "s" },
            progress::human(progress::planned_total(&settings, &plan))
        );
        return Ok(true);
    }

    // Before the cluster starts, so every backend of the run is scheduled one way; put back
    // when this returns.
    let autogroup_run = autogroup::ForRun::start(args.autogroup_off)?;
    let autogroup = autogroup_run.state();
    eprintln!("pgpipe-bench: kernel autogroup scheduling {autogroup}");

    // The server: given, or a throwaway cluster kept alive until the end.
    let url = args
        .url
        .clone()
        .or_else(|| std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()));
    // The throwaway cluster offers TLS; its URL says sslmode=disable, and every candidate sets
    // its own sslmode anyway (plaintext: disable; -tls: verify-full against its CA).
    let (cluster, url, server) = match url {
        Some(u) => (None, u, "given by --url / DATABASE_URL".to_string()),
        None => {
            eprintln!("pgpipe-bench: starting a throwaway PostgreSQL cluster (TLS on)");
            let c = pgpipe_tests::Cluster::builder()
                .tls(true)
                .start()
                .map_err(|e| e.to_string())?;
            let u = c.url();
            (Some(c), u, "throwaway cluster (pgpipe-tests harness: fsync=off, synchronous_commit=off, shared_buffers=128MB, ssl=on)".to_string())
        }
    };
    let base = pgpipe::Config::parse(&url).map_err(|e| format!("bad database URL: {e}"))?;
    // The CA that -tls candidates verify the server against.
    let root_cert: Option<PathBuf> = args
        .sslrootcert
        .clone()
        .or_else(|| {
            cluster
                .as_ref()
                .and_then(|c| c.tls())
                .map(|t| t.ca_cert().to_path_buf())
        })
        .or_else(|| match &base.tls.root_cert {
            Some(pgpipe::RootCert::File(p)) => Some(p.clone()),
            _ => None,
        });
    if root_cert.is_none() && plan.iter().any(|s| s.candidates.iter().any(|c| c.tls)) {
        eprintln!(
            "pgpipe-bench: SKIPPING -tls candidates: no root certificate is known for this \
             server (give one with --sslrootcert PATH)"
        );
        for sc in &mut plan {
            sc.candidates.retain(|c| !c.tls);
        }
        plan.retain(|s| !s.candidates.is_empty());
    }
    // PgBouncer for the scenarios through it: our own in front of the throwaway cluster, or
    // the one PGPIPE_BENCH_PGBOUNCER_URL names in front of a given server.
    let mut bouncer = None;
    if plan.iter().any(|s| s.via == Via::PgBouncer) {
        let b = match (&cluster, std::env::var(pooler::URL_VAR).ok().filter(|u| !u.is_empty())) {
            (_, Some(u)) => pooler::Bouncer::external(u).map_err(|e| e.to_string()),
            (Some(c), None) => pooler::Bouncer::start(c.port()),
            (None, None) => Err(format!(
                "the server is given (--url / DATABASE_URL) and {} names no PgBouncer in front of it",
                pooler::URL_VAR
            )),
        };
        match b {
            Ok(b) => {
                eprintln!(
                    "pgpipe-bench: PgBouncer ({}) on port {}, transaction mode, pool {}",
                    if b.is_own() { "started here" } else { "given" },
                    b.base.port,
                    plan::PGBOUNCER_POOL
                );
                bouncer = Some(b);
            }
            Err(e) => {
                eprintln!("pgpipe-bench: SKIPPING the PgBouncer scenarios: {e}");
                plan.retain(|s| s.via != Via::PgBouncer);
            }
        }
    }
    let runs_total: usize =
        settings.rounds * plan.iter().map(|s| s.candidates.len()).sum::<usize>();
    let monitor = Monitor::start(&base)?;
    let server_version = monitor
        .query("SELECT version()")?
        .into_iter()
        .next()
        .unwrap_or_default();
    eprintln!("pgpipe-bench: {server_version}");
    let t = Instant::now();
    load_accounts(&base, settings.rows)?;
    eprintln!(
        "pgpipe-bench: accounts table ready ({} rows) in {}",
        settings.rows,
        progress::human(t.elapsed())
    );
    if plan.iter().any(|s| s.workload.is_bulk()) {
        let t = Instant::now();
        load_copy_source(&base, settings.copy_rows)?;
        // The source must hold exactly the rows the runs expect, or every run would fail.
        let have = bulk::source_sums(&monitor)?;
        if have != bulk::Sums::expected(settings.copy_rows) {
            return Err(format!(
                "{} holds {have:?}, expected {:?}",
                bulk::SOURCE_TABLE,
                bulk::Sums::expected(settings.copy_rows)
            ));
        }
        eprintln!(
            "pgpipe-bench: COPY source table ready ({} rows) in {}",
            settings.copy_rows,
            progress::human(t.elapsed())
        );
    }

    // Other work on the machine (a build, another benchmark) distorts every figure: measure
    // how busy the machine is before starting, and say so.
    let before = pgpipe_bench::sys::MachineCpu::read();
    std::thread::sleep(Duration::from_secs(1));
    let after = pgpipe_bench::sys::MachineCpu::read();
    let background_busy_pct = if after.total > before.total {
        (after.busy - before.busy) as f64 * 100.0 / (after.total - before.total) as f64
    } else {
        0.0
    };
    eprintln!("pgpipe-bench: machine {background_busy_pct:.0}% busy before the runs");
    if background_busy_pct > 15.0 {
        eprintln!("pgpipe-bench: WARNING: something else is using the CPUs; figures will be noisy");
    }

    // One proxy per delay, started once and shared by every run at that delay.
    let upstream: SocketAddr = (base.host.as_str(), base.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", base.host))?
        .next()
        .ok_or("the server address resolved to nothing")?;
    let mut proxies: Vec<(Delay, DelayProxy)> = Vec::new();
    for s in &plan {
        if let Delay::Proxy(d) = s.delay {
            if !proxies.iter().any(|(x, _)| *x == s.delay) {
                let p = DelayProxy::start(upstream, d).map_err(|e| format!("delay proxy: {e}"))?;
                proxies.push((s.delay, p));
            }
        }
    }

    // Rounds × scenarios × candidates; candidate order rotates each round so that no
    // configuration always runs first (or right after the same neighbour).
    let mut results: Vec<Vec<report::Rounds>> = plan
        .iter()
        .map(|s| {
            s.candidates
                .iter()
                .map(|c| (c.clone(), Vec::new(), Vec::new()))
                .collect()
        })
        .collect();
    let planned = progress::planned_total(&settings, &plan);
    eprintln!(
        "pgpipe-bench: {runs_total} runs in {} round{}, planned to take about {}",
        settings.rounds,
        if settings.rounds == 1 { "" } else { "s" },
        progress::human(planned)
    );
    eprintln!("pgpipe-bench: results will go to {}", out.places());
    let mut progress = progress::Progress::new(runs_total, planned);
    for round in 0..settings.rounds {
        for (si, sc) in plan.iter().enumerate() {
            let n = sc.candidates.len();
            for k in 0..n {
                let ci = (k + round * n.div_ceil(settings.rounds.max(1))) % n;
                let cand = &sc.candidates[ci];
                let proxy = proxies.iter().find(|(x, _)| *x == sc.delay).map(|p| &p.1);
                let via = match (sc.via, &bouncer) {
                    (Via::PgBouncer, Some(b)) => Some(b),
                    _ => None,
                };
                let (host, port, proxy_cpu) = match (proxy, via) {
                    (_, Some(b)) => (b.base.host.clone(), b.base.port, None),
                    (None, None) => (base.host.clone(), base.port, None),
                    (Some(p), None) => {
                        p.reset_late_max();
                        (
                            "127.0.0.1".to_string(),
                            p.addr().port(),
                            Some(p.cpu_clock()),
                        )
                    }
                };
                progress.show(&format!(
                    "round {}/{} · {} · {} · running",
                    round + 1,
                    settings.rounds,
                    sc.id(),
                    cand.name
                ));
                // The host's speed now, while the server idles between runs.
                let speed = pgpipe_tests::host_speed::measure();
                let sampler = if args.sample_memory {
                    Some(start_sampler()?)
                } else {
                    None
                };
                let (warmup, window) = settings.timing(sc.workload, sc.delay);
                // Through PgBouncer and with many processes, server connections are every
                // client backend but the monitor's (PgBouncer's carry other names).
                let run_monitor = if via.is_some() || sc.procs > 1 {
                    monitor.all_backends()
                } else {
                    monitor.clone()
                };
                let job = Job {
                    cand: cand.clone(),
                    workload: sc.workload,
                    load: sc.load,
                    warmup,
                    window,
                    host,
                    port,
                    base: via.map_or_else(|| base.clone(), |b| b.base.clone()),
                    rows: settings.rows,
                    monitor: run_monitor.clone(),
                    proxy_cpu,
                    root_cert: root_cert.clone(),
                    unnamed: via.is_some(),
                    start_at: None,
                    client_count: via.and_then(|b| b.client_count()),
                    pooler_cpu: via.and_then(|b| b.cpu_clock()),
                };
                let mut outcome = if sc.procs > 1 {
                    procs::run(&job, sc.procs, via.map_or(url.as_str(), |b| b.url.as_str()))
                } else {
                    engine::run(job)
                };
                if let Ok(m) = &mut outcome {
                    m.host_core_ms = Some(speed.core_ms);
                    m.host_memory_ms = Some(speed.memory_ms);
                }
                let during = sampler.and_then(|s| s.finish());
                if let (Ok(m), Some((ns, _))) = (&mut outcome, during) {
                    m.host_memory_during_ns = Some(ns);
                }
                if let (Ok(m), Some(p)) = (&mut outcome, proxy) {
                    m.proxy_late_max_us = Some(p.late_max().as_secs_f64() * 1e6);
                }
                if let Some(b) = via {
                    // The next run starts with an empty pool.
                    if let Err(e) = b.reset() {
                        eprintln!("\npgpipe-bench: restarting PgBouncer: {e}");
                    }
                }
                // A PgBouncer the benchmark did not start keeps its server connections.
                let own_backends = via.is_none_or(|b| b.is_own());
                if own_backends && !run_monitor.wait_idle(Duration::from_secs(10)) {
                    eprintln!("\npgpipe-bench: {} left server connections open", cand.name);
                }
                progress.run_done(progress::planned_run(&settings, sc, cand));
                let slot = &mut results[si][ci];
                let what = match outcome {
                    Ok(m) => {
                        let s = match m.fast_p9999_us {
                            Some(p) => format!(
                                "{:.0} ops/s, fast p99.99 {:.2} ms, {} dropped, {} errors",
                                m.throughput,
                                p / 1e3,
                                m.dropped,
                                m.errors
                            ),
                            None => format!(
                                "{:.0} {}/s, {} errors",
                                m.throughput,
                                if sc.workload.is_bulk() { "rows" } else { "ops" },
                                m.errors
                            ),
                        };
                        if m.errors > 0 {
                            eprintln!(
                                "\npgpipe-bench: {} / {}: {} errors, first: {}",
                                sc.id(),
                                cand.name,
                                m.errors,
                                m.first_error.as_deref().unwrap_or("?")
                            );
                        }
                        slot.1.push(m);
                        s
                    }
                    Err(e) => {
                        eprintln!("\npgpipe-bench: {} / {} failed: {e}", sc.id(), cand.name);
                        slot.2.push(e);
                        "FAILED".to_string()
                    }
                };
                progress.show(&format!(
                    "round {}/{} · {} · {} · {what}",
                    round + 1,
                    settings.rounds,
                    sc.id(),
                    cand.name
                ));
            }
        }
    }
    progress.finish();
    drop(proxies);
    drop(bouncer);

    let scenarios: Vec<ScenarioResult> = plan
        .iter()
        .zip(results)
        .map(|(sc, r)| ScenarioResult::new(sc, r))
        .collect();
    let mut goals = report::goals(&scenarios);
    goals.push(server_log_goal(cluster.as_ref()));

    let mut md = String::new();
    let machine = Machine::collect(server_version, server, autogroup.to_string());
    md.push_str(&format!(
        "## pgpipe-bench results\n\nCommand: `cargo run --release -p pgpipe-bench --{}{}`  \nMachine: {} CPUs ({}), {} GiB, Linux {}, kernel autogroup {}; {}; server: {}.  \nSetup names, scenario ids, columns and units are explained under \"{}\" at the end.\n\n",
        if argv.is_empty() { "" } else { " " },
        argv.join(" "),
        machine.nproc,
        machine.cpu_model,
        machine.mem_total_gib,
        machine.kernel,
        machine.sched_autogroup,
        machine.server_version,
        machine.server,
        legend::TITLE
    ));
    for s in &scenarios {
        md.push_str(&report::scenario_table(s, settings.rounds));
        md.push('\n');
    }
    md.push_str(
        "### Goals\n\nMeasured on the point-select, closed-loop scenarios (direct and at 5 ms one way); errors over all runs.\n\n",
    );
    md.push_str(&report::goals_table(&goals));
    md.push('\n');
    md.push_str(&legend::legend(&scenarios, true));
    println!("{md}");

    let ok = goals
        .iter()
        .filter(|g| g.goal.starts_with("errors") || g.goal.starts_with(SERVER_LOG_GOAL))
        .all(|g| g.met != Some(false));
    let report = Report {
        command: format!(
            "cargo run --release -p pgpipe-bench --{}{}",
            if argv.is_empty() { "" } else { " " },
            argv.join(" ")
        ),
        started_unix,
        elapsed_seconds: started.elapsed().as_secs_f64(),
        git_commit: git_commit(&root),
        background_busy_pct,
        machine,
        settings,
        quick: args.quick,
        goals,
        scenarios,
    };
    write_file(
        &out.json,
        &serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?,
    )?;
    write_file(&out.md, &md)?;
    let mut charts = 0;
    if let Some(dir) = &out.charts {
        for s in &report.scenarios {
            for (name, svg) in svg::charts(s) {
                write_file(&dir.join(name), &svg)?;
                charts += 1;
            }
        }
    }
    eprintln!("pgpipe-bench: {}", out.written(&root));
    eprintln!("  {}  the tables, goals and legend above", shown(&out.md));
    eprintln!("  {}  every round of every candidate", shown(&out.json));
    if let Some(dir) = &out.charts {
        eprintln!("  {}/  {charts} SVG charts", shown(dir));
    }
    if out.docs {
        eprintln!(
            "pgpipe-bench: docs/BENCHMARKS.md quotes its tables and figures by hand: copy what \
             changed from {}",
            shown(&out.md)
        );
    }
    eprintln!(
        "pgpipe-bench: done in {}",
        progress::human(started.elapsed())
    );
    Ok(ok)
}

fn git_commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    let head = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if head.is_empty() {
        return None;
    }
    let dirty = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
