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

mod bulk;
mod engine;
mod legend;
mod monitor;
mod pgbench;
mod plan;
mod pooler;
mod procs;
mod progress;
mod report;
mod svg;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgpipe_bench::proxy::DelayProxy;

use crate::engine::Job;
use crate::monitor::Monitor;
use crate::plan::{Candidate, Delay, Kind, Load, Scenario, Settings, Via, Workload};
use crate::report::{Machine, Report, ScenarioResult};

/// Counts live heap bytes while a bulk run (COPY, streaming) measures them; otherwise one
/// relaxed load per allocation.
#[global_allocator]
static ALLOC: pgpipe_bench::alloc::TrackingAlloc = pgpipe_bench::alloc::TrackingAlloc;

const USAGE: &str = "\
pgpipe-bench: pgpipe side by side with tokio-postgres and deadpool-postgres

usage: cargo run --release -p pgpipe-bench -- [options]

  --quick                 smoke run of the whole pipeline, every candidate kind, for CI (not for figures)
  --url URL               server to use (default: $DATABASE_URL, else a throwaway cluster with TLS)
  --sslrootcert PATH      CA certificate (PEM) that -tls candidates verify the server against
                          (default: the throwaway cluster's CA, else the URL's sslrootcert;
                          with none, -tls candidates are skipped with a note)
  --candidates LIST       comma-separated, e.g. pgpipe-smol-4,pgpipe-tokio-4-w256,tokio-postgres-1,deadpool-16
                          pgpipe options: -wM max_in_flight M, -mK max_connections K (elastic
                          connections up to K; K <= N: none), -nofair fair_lanes off,
                          -nocoalesce sync_coalescing off; in any order: pgpipe-tokio-4-w256-m32
                          any candidate: -tls over TLS, certificate and host name verified (pgpipe
                          sslmode=verify-full; tokio-postgres and deadpool via tokio-postgres-rustls),
                          e.g. pgpipe-tokio-4-tls, tokio-postgres-4-tls; without it, plaintext
                          (a #2 suffix enters a configuration twice: an A/A control)
  --scenarios LIST        only these scenarios of the default set, by id or tag (see --list), e.g. tls;
                          copy = the COPY in, COPY out and streamed-read scenarios;
                          pgbouncer = through PgBouncer (transaction mode, pool 16) and the
                          many-process ones; procs = the many-process ones
  --workloads LIST        point,point-id,select1,rw,ceiling,hol,copy-in,copy-out,stream
                          (point-id: the point select returning its key, checked)
                          (hol: 99% point selects, 1% SELECT pg_sleep(0.02); copy-in/copy-out:
                          binary COPY of --copy-rows rows; stream: the same rows streamed)
  --loads LIST            closed,open
  --delays LIST           direct (no proxy) and/or one-way delays in ms through the delay proxy: 0,1,5
  --rounds N              rounds over all candidates (default 3; quick 1)
  --duration SECS         measured window per run (default 1.0; quick 0.3)
  --warmup SECS           warm-up per run, connect excluded (default 0.4; quick 0.2)
  --hol-duration SECS     measured window of hol runs, instead of --duration (default 5; quick 1)
  --hol-warmup SECS       warm-up of hol runs, instead of --warmup (default 1; quick 0.3)
  --tasks N               closed-loop concurrency (default 1000; quick 200)
  --rate N                open-loop arrivals per second (default 10000; quick 1000)
  --rows N                accounts rows (default 1000000; quick 10000)
  --ceiling-queries N     queries of the pool-ceiling batch (default 600; quick 60)
  --copy-rows N           rows of each COPY and streaming run (default 1000000; quick 100000)
  --out FILE              JSON result, with the Markdown report beside it (FILE with .md)
                          (default: results.json in the run's directory, see below)
  --svg-dir DIR           charts (default: charts/ in the run's directory)
  --no-svg                no charts
  --update-docs           refresh the committed report instead: charts to docs/bench/, JSON and
                          Markdown to bench/results/pgpipe-bench-<unix time>.json/.md (not with --quick)
  --list                  print the plan and exit
  -h, --help              this text

Results go to a directory of the run's own, target/pgpipe-bench/<UTC time>/ (with -quick appended
for --quick): results.md (the printed tables, goals and legend), results.json (every round of
every candidate) and charts/. git ignores target/, so a run leaves the working tree as it was;
the last lines printed say where everything went.

Without --workloads/--loads/--delays the curated default set runs (see docs/BENCHMARKS.md);
with any of them, their cross product (unspecified: point, closed, direct). --candidates
replaces the candidate list of every scenario.

The PgBouncer scenarios start Debian's pgbouncer in front of the throwaway cluster; against a
given server they run only if PGPIPE_BENCH_PGBOUNCER_URL names a PgBouncer (transaction mode)
in front of it, and are skipped with a note otherwise.";

struct Args {
    quick: bool,
    url: Option<String>,
    sslrootcert: Option<PathBuf>,
    scenarios: Option<Vec<String>>,
    candidates: Option<Vec<Candidate>>,
    workloads: Option<Vec<Workload>>,
    loads: Option<Vec<String>>,
    delays: Option<Vec<Delay>>,
    rounds: Option<usize>,
    duration: Option<f64>,
    warmup: Option<f64>,
    hol_duration: Option<f64>,
    hol_warmup: Option<f64>,
    tasks: Option<usize>,
    rate: Option<f64>,
    rows: Option<i32>,
    ceiling_queries: Option<usize>,
    copy_rows: Option<u64>,
    out: Option<PathBuf>,
    svg_dir: Option<PathBuf>,
    no_svg: bool,
    update_docs: bool,
    list: bool,
}

fn list<T>(v: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(f)
        .collect()
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        quick: false,
        url: None,
        sslrootcert: None,
        scenarios: None,
        candidates: None,
        workloads: None,
        loads: None,
        delays: None,
        rounds: None,
        duration: None,
        warmup: None,
        hol_duration: None,
        hol_warmup: None,
        tasks: None,
        rate: None,
        rows: None,
        ceiling_queries: None,
        copy_rows: None,
        out: None,
        svg_dir: None,
        no_svg: false,
        update_docs: false,
        list: false,
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (flag.as_str(), None),
        };
        let mut val = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{flag}: {v:?} is not a valid number"))
        }
        match flag {
            "--quick" => a.quick = true,
            "--url" => a.url = Some(val()?),
            "--sslrootcert" => a.sslrootcert = Some(val()?.into()),
            "--scenarios" => a.scenarios = Some(list(&val()?, |s| Ok(s.to_string()))?),
            "--candidates" => a.candidates = Some(list(&val()?, Candidate::parse)?),
            "--workloads" => a.workloads = Some(list(&val()?, Workload::parse)?),
            "--loads" => {
                a.loads = Some(list(&val()?, |s| match s {
                    "closed" | "open" => Ok(s.to_string()),
                    _ => Err(format!("unknown load {s:?} (closed, open)")),
                })?)
            }
            "--delays" => a.delays = Some(list(&val()?, Delay::parse)?),
            "--rounds" => a.rounds = Some(num(flag, val()?)?),
            "--duration" => a.duration = Some(num(flag, val()?)?),
            "--warmup" => a.warmup = Some(num(flag, val()?)?),
            "--hol-duration" => a.hol_duration = Some(num(flag, val()?)?),
            "--hol-warmup" => a.hol_warmup = Some(num(flag, val()?)?),
            "--tasks" => a.tasks = Some(num(flag, val()?)?),
            "--rate" => a.rate = Some(num(flag, val()?)?),
            "--rows" => a.rows = Some(num(flag, val()?)?),
            "--ceiling-queries" => a.ceiling_queries = Some(num(flag, val()?)?),
            "--copy-rows" => a.copy_rows = Some(num(flag, val()?)?),
            "--out" => a.out = Some(val()?.into()),
            "--svg-dir" => a.svg_dir = Some(val()?.into()),
            "--no-svg" => a.no_svg = true,
            "--update-docs" => a.update_docs = true,
            "--list" => a.list = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let custom = a.workloads.is_some() || a.loads.is_some() || a.delays.is_some();
    if a.scenarios.is_some() && custom {
        return Err(
            "--scenarios picks from the default set; it does not combine with --workloads, \
             --loads or --delays"
                .into(),
        );
    }
    if a.update_docs && a.quick {
        return Err(
            "--update-docs refreshes the committed figures; --quick's windows are too short for \
             figures"
                .into(),
        );
    }
    if a.rounds == Some(0) || a.tasks == Some(0) || a.rows.is_some_and(|r| r < 1) {
        return Err("--rounds, --tasks and --rows must be at least 1".into());
    }
    if a.copy_rows
        .is_some_and(|r| !(1..=bulk::MAX_ROWS).contains(&r))
    {
        return Err(format!("--copy-rows must be 1 to {}", bulk::MAX_ROWS));
    }
    let positive = |x: Option<f64>| x.is_none_or(|x| x > 0.0 && x.is_finite());
    // Also bounded: Duration::from_secs_f64 panics on huge values.
    let seconds = |x: Option<f64>| x.is_none_or(|x| (0.0..=1e6).contains(&x));
    if !positive(a.rate)
        || !positive(a.duration)
        || !positive(a.hol_duration)
        || !seconds(a.duration)
        || !seconds(a.hol_duration)
        || !seconds(a.warmup)
        || !seconds(a.hol_warmup)
    {
        return Err(
            "--rate, --duration and --hol-duration must be positive, the warm-ups not negative \
             (durations at most 1e6 s)"
                .into(),
        );
    }
    Ok(a)
}

fn settings(a: &Args) -> Settings {
    let q = a.quick;
    Settings {
        rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }),
        warmup: Duration::from_secs_f64(a.warmup.unwrap_or(if q { 0.2 } else { 0.4 })),
        window: Duration::from_secs_f64(a.duration.unwrap_or(if q { 0.3 } else { 1.0 })),
        hol_warmup: Duration::from_secs_f64(a.hol_warmup.unwrap_or(if q { 0.3 } else { 1.0 })),
        hol_window: Duration::from_secs_f64(a.hol_duration.unwrap_or(if q { 1.0 } else { 5.0 })),
        tx_warmup: Duration::from_secs_f64(if q { 0.3 } else { 1.0 }),
        tx_window: Duration::from_secs_f64(if q { 0.5 } else { 3.0 }),
        tx_delayed_window: Duration::from_secs_f64(if q { 0.5 } else { 8.0 }),
        tasks: a.tasks.unwrap_or(if q { 200 } else { 1000 }),
        rate: a.rate.unwrap_or(if q { 1000.0 } else { 10_000.0 }),
        rows: a.rows.unwrap_or(if q { 10_000 } else { 1_000_000 }),
        ceiling_queries: a.ceiling_queries.unwrap_or(if q { 60 } else { 600 }),
        copy_rows: a.copy_rows.unwrap_or(if q { 100_000 } else { 1_000_000 }),
    }
}

fn build_plan(a: &Args, s: &Settings) -> Vec<Scenario> {
    let custom = a.workloads.is_some() || a.loads.is_some() || a.delays.is_some();
    let mut plan = if custom {
        let loads: Vec<Load> = a
            .loads
            .clone()
            .unwrap_or_else(|| vec!["closed".into()])
            .iter()
            .map(|l| match l.as_str() {
                "open" => Load::Open { rate: s.rate },
                _ => Load::Closed { tasks: s.tasks },
            })
            .collect();
        plan::custom_plan(
            s,
            a.workloads.as_deref().unwrap_or(&[Workload::Point]),
            &loads,
            a.delays.as_deref().unwrap_or(&[Delay::Direct]),
            a.candidates.as_deref().unwrap_or(&plan::all_candidates()),
        )
    } else {
        plan::default_plan(s, a.quick)
    };
    if let (Some(c), false) = (&a.candidates, custom) {
        for sc in &mut plan {
            if matches!(sc.load, Load::Ceiling { .. }) {
                let again = plan::custom_plan(s, &[Workload::Sleep], &[], &[sc.delay], c);
                sc.candidates = again
                    .into_iter()
                    .next()
                    .map(|x| x.candidates)
                    .unwrap_or_default();
            } else if sc.workload.is_bulk() {
                sc.candidates = c.iter().filter(|c| sc.workload.runs(c)).cloned().collect();
            } else {
                sc.candidates = c.iter().filter(|c| sc.workload.runs(c)).cloned().collect();
            }
        }
    }
    if let Some(sel) = &a.scenarios {
        plan.retain(|s| sel.iter().any(|x| s.selected_by(x)));
    }
    plan.retain(|s| !s.candidates.is_empty());
    plan
}

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

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // A process of a many-process run (procs.rs): not a user command.
    if argv.first().map(String::as_str) == Some(procs::CHILD_COMMAND) {
        std::process::exit(procs::child_main());
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
    let machine = Machine::collect(server_version, server);
    md.push_str(&format!(
        "## pgpipe-bench results\n\nCommand: `cargo run --release -p pgpipe-bench --{}{}`  \nMachine: {} CPUs ({}), {} GiB, Linux {}; {}; server: {}.  \nSetup names, scenario ids, columns and units are explained under \"{}\" at the end.\n\n",
        if argv.is_empty() { "" } else { " " },
        argv.join(" "),
        machine.nproc,
        machine.cpu_model,
        machine.mem_total_gib,
        machine.kernel,
        machine.server_version,
        machine.server,
        legend::TITLE
    ));
    for s in &scenarios {
        md.push_str(&report::table(s, settings.rounds));
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

/// Where a run's results go.
struct Outputs {
    /// The JSON document: every round of every candidate.
    json: PathBuf,
    /// The Markdown report: what the run printed (tables, goals, legend).
    md: PathBuf,
    /// The SVG charts' directory; None with `--no-svg`.
    charts: Option<PathBuf>,
    /// `--update-docs`: the committed report (charts in docs/bench, JSON and Markdown in
    /// bench/results) instead of a directory of this run's own.
    docs: bool,
}

impl Outputs {
    /// By default everything goes to `target/pgpipe-bench/<UTC time>[-quick]/` (`results.json`,
    /// `results.md`, `charts/`), which git ignores, so that running the benchmark leaves the
    /// working tree as it was; `--update-docs` writes the committed report instead. `--out`
    /// and `--svg-dir` override either.
    fn new(a: &Args, root: &Path, started_unix: u64) -> Outputs {
        let (json, charts) = if a.update_docs {
            (
                root.join("bench")
                    .join("results")
                    .join(format!("pgpipe-bench-{started_unix}.json")),
                root.join("docs").join("bench"),
            )
        } else {
            let dir = root.join("target").join("pgpipe-bench").join(format!(
                "{}{}",
                utc_stamp(started_unix),
                if a.quick { "-quick" } else { "" }
            ));
            (dir.join("results.json"), dir.join("charts"))
        };
        let json = a.out.clone().unwrap_or(json);
        Outputs {
            md: json.with_extension("md"),
            json,
            charts: (!a.no_svg).then(|| a.svg_dir.clone().unwrap_or(charts)),
            docs: a.update_docs,
        }
    }

    /// The directories written to, for the line before the runs.
    fn places(&self) -> String {
        let json_dir = self
            .json
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        match &self.charts {
            Some(c) if !c.starts_with(json_dir) => {
                format!("{} and {}", shown(json_dir), shown(c))
            }
            _ => shown(json_dir),
        }
    }

    /// The line that introduces the list of files written.
    fn written(&self, root: &Path) -> String {
        let ignored = root.join("target");
        let all = [Some(&self.json), self.charts.as_ref()];
        if self.docs {
            "refreshed the committed report:".into()
        } else if all.iter().flatten().all(|p| p.starts_with(&ignored)) {
            "results written under target/ (git ignores it; --update-docs refreshes the committed report):".into()
        } else {
            "results written:".into()
        }
    }
}

/// `path` relative to the current directory when it is under it (as a user would type it),
/// else as it is.
fn shown(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// `YYYYMMDD-HHMMSS` in UTC: a run directory's name, sorting in time order.
fn utc_stamp(unix: u64) -> String {
    let (days, secs) = ((unix / 86_400) as i64, unix % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
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

/// Creates and fills `pgpipe_bench_accounts` (pgbench_accounts' shape, its own name so a real
/// pgbench table is never touched) unless it already holds exactly `rows` rows. The DDL goes
/// through an exclusive pgpipe session: the shared path's guard refuses DDL.
fn load_accounts(base: &pgpipe::Config, rows: i32) -> Result<(), String> {
    let ex = Arc::new(async_executor::Executor::new());
    let e = |e: pgpipe::Error| format!("loading the accounts table: {e}");
    async_io::block_on(ex.run(async {
        let mut cfg = base.clone();
        cfg.pipeline_size = 1;
        cfg.application_name = Some("pgpipe-bench-setup".into());
        let db = pgpipe::Client::connect(pgpipe_smol::SmolRuntime::on(ex.clone()), cfg)
            .await
            .map_err(e)?;
        let s = db.session().await.map_err(e)?;
        let exists: bool = s
            .query_one(
                "SELECT to_regclass('pgpipe_bench_accounts') IS NOT NULL",
                &[],
            )
            .await
            .map_err(e)?
            .get(0);
        let have: i64 = if exists {
            s.query_one("SELECT count(*) FROM pgpipe_bench_accounts", &[])
                .await
                .map_err(e)?
                .get(0)
        } else {
            -1
        };
        if have != i64::from(rows) {
            eprintln!("pgpipe-bench: loading {rows} accounts");
            s.batch_execute(&format!(
                "DROP TABLE IF EXISTS pgpipe_bench_accounts;
                 CREATE TABLE pgpipe_bench_accounts (
                     aid int4 NOT NULL, bid int4 NOT NULL, abalance int4 NOT NULL, filler char(84)
                 ) WITH (fillfactor = 100);
                 INSERT INTO pgpipe_bench_accounts
                     SELECT g, (g - 1) / 100000 + 1, 0, '' FROM generate_series(1, {rows}) g;
                 ALTER TABLE pgpipe_bench_accounts ADD PRIMARY KEY (aid);"
            ))
            .await
            .map_err(e)?;
            s.batch_execute("VACUUM ANALYZE pgpipe_bench_accounts")
                .await
                .map_err(e)?;
        }
        drop(s);
        db.close().await;
        Ok(())
    }))
}

/// Creates `pgpipe_bench_copy_src` with `rows` generated rows (what COPY out and the stream
/// read) and an empty `pgpipe_bench_copy_in` (what COPY in fills), unless the source already
/// holds exactly `rows` rows.
fn load_copy_source(base: &pgpipe::Config, rows: u64) -> Result<(), String> {
    let ex = Arc::new(async_executor::Executor::new());
    let e = |e: pgpipe::Error| format!("loading the COPY source table: {e}");
    async_io::block_on(ex.run(async {
        let mut cfg = base.clone();
        cfg.pipeline_size = 1;
        cfg.application_name = Some("pgpipe-bench-setup".into());
        let db = pgpipe::Client::connect(pgpipe_smol::SmolRuntime::on(ex.clone()), cfg)
            .await
            .map_err(e)?;
        let s = db.session().await.map_err(e)?;
        let sql = format!(
            "SELECT to_regclass('{}') IS NOT NULL AND to_regclass('{}') IS NOT NULL",
            bulk::SOURCE_TABLE,
            bulk::TARGET_TABLE
        );
        let exists: bool = s.query_one(&sql, &[]).await.map_err(e)?.get(0);
        let have: i64 = if exists {
            let sql = format!("SELECT count(*) FROM {}", bulk::SOURCE_TABLE);
            s.query_one(&sql, &[]).await.map_err(e)?.get(0)
        } else {
            -1
        };
        if u64::try_from(have).ok() != Some(rows) {
            eprintln!("pgpipe-bench: loading {rows} rows to COPY out and stream");
            s.batch_execute(&bulk::load_sql(rows)).await.map_err(e)?;
            s.batch_execute(&format!("VACUUM ANALYZE {}", bulk::SOURCE_TABLE))
                .await
                .map_err(e)?;
        }
        drop(s);
        db.close().await;
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Args {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse_args(&v).unwrap()
    }

    #[test]
    fn candidates_flag_replaces_lists() {
        let a = args("--candidates pgpipe-smol-4,deadpool-16");
        let s = settings(&a);
        let p = build_plan(&a, &s);
        for sc in &p {
            if matches!(sc.load, Load::Ceiling { .. }) {
                assert!(sc.candidates.iter().any(|c| c.name == "deadpool-32"));
                assert!(sc.candidates.iter().any(|c| c.name == "pgpipe-smol-1-m1"));
            } else if sc.workload.is_bulk() {
                // deadpool does not run COPY or streaming (it is tokio-postgres underneath).
                let names: Vec<_> = sc.candidates.iter().map(|c| c.name.as_str()).collect();
                assert_eq!(names, ["pgpipe-smol-4"]);
            } else {
                let names: Vec<_> = sc.candidates.iter().map(|c| c.name.as_str()).collect();
                assert_eq!(names, ["pgpipe-smol-4", "deadpool-16"]);
            }
        }
    }

    #[test]
    fn selections_make_a_cross_product() {
        let a = args("--workloads point,select1 --loads closed,open --delays direct,5 --rate=200");
        let s = settings(&a);
        let p = build_plan(&a, &s);
        assert_eq!(p.len(), 8);
        assert!(p.iter().any(|s| s.id() == "select1-open-200-5ms"));
        assert!(parse_args(&["--bogus".to_string()]).is_err());
        assert!(parse_args(&["--rounds".to_string(), "0".to_string()]).is_err());
    }

    #[test]
    fn scenarios_flag_picks_from_the_default_set() {
        let a = args("--scenarios tls --rounds 5");
        let p = build_plan(&a, &settings(&a));
        let ids: Vec<String> = p.iter().map(|s| s.id()).collect();
        assert_eq!(ids, ["tls-point-closed-1000-direct"]);
        let a = args("--scenarios point-closed-1000-direct,tls");
        let p = build_plan(&a, &settings(&a));
        assert_eq!(p.len(), 2);
        let a = args("--scenarios nothing");
        assert!(build_plan(&a, &settings(&a)).is_empty());
        assert!(parse_args(&["--scenarios=tls".into(), "--workloads=point".into()]).is_err());
        let a =
            args("--sslrootcert /x/ca.crt --candidates pgpipe-tokio-4-tls,tokio-postgres-1-tls");
        assert_eq!(a.sslrootcert.as_deref(), Some(Path::new("/x/ca.crt")));
        assert!(a.candidates.unwrap().iter().all(|c| c.tls));
    }

    #[test]
    fn copy_scenarios_are_selectable_and_sized() {
        let a = args("--scenarios copy");
        let s = settings(&a);
        assert_eq!(s.copy_rows, 1_000_000);
        let ids: Vec<String> = build_plan(&a, &s).iter().map(|s| s.id()).collect();
        assert_eq!(
            ids,
            [
                "copy-in-rows-1000000-direct",
                "copy-out-rows-1000000-direct",
                "stream-rows-1000000-direct"
            ]
        );
        let q = args("--quick --scenarios copy");
        let p = build_plan(&q, &settings(&q));
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|s| s.load == Load::Rows { rows: 100_000 }));
        assert!(p.iter().all(|s| s.candidates.iter().any(|c| c.copy == 2)));
        let c = args(
            "--workloads stream,copy-in --copy-rows 500 --candidates pgpipe-tokio-1,deadpool-8",
        );
        let p = build_plan(&c, &settings(&c));
        assert_eq!(p.len(), 2);
        assert!(p
            .iter()
            .all(|s| s.load == Load::Rows { rows: 500 } && s.candidates.len() == 1));
        assert!(parse_args(&["--copy-rows".into(), "0".into()]).is_err());
        assert!(parse_args(&["--copy-rows=100000000".into()]).is_err());
    }

    #[test]
    fn results_stay_out_of_the_tree_unless_asked() {
        let root = Path::new("/repo");
        let o = Outputs::new(&args(""), root, 1_796_102_764);
        let dir = root.join("target/pgpipe-bench/20261201-052604");
        assert_eq!(o.json, dir.join("results.json"));
        assert_eq!(o.md, dir.join("results.md"));
        assert_eq!(o.charts, Some(dir.join("charts")));
        assert!(!o.docs);
        let q = Outputs::new(&args("--quick --no-svg"), root, 1_796_102_764);
        assert_eq!(
            q.json,
            root.join("target/pgpipe-bench/20261201-052604-quick/results.json")
        );
        assert_eq!(q.charts, None);
        let d = Outputs::new(&args("--update-docs"), root, 1_796_102_764);
        assert_eq!(
            d.json,
            root.join("bench/results/pgpipe-bench-1796102764.json")
        );
        assert_eq!(d.md, root.join("bench/results/pgpipe-bench-1796102764.md"));
        assert_eq!(d.charts, Some(root.join("docs/bench")));
        assert!(d.docs);
        let own = Outputs::new(&args("--out /tmp/x.json --svg-dir /tmp/c"), root, 0);
        assert_eq!(own.md, Path::new("/tmp/x.md"));
        assert_eq!(own.charts.as_deref(), Some(Path::new("/tmp/c")));
        assert!(parse_args(&["--quick".into(), "--update-docs".into()]).is_err());
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }

    #[test]
    fn hol_has_its_own_window() {
        let a = args("--workloads hol --loads open,closed --hol-duration 2 --duration 0.5");
        let s = settings(&a);
        assert_eq!(
            s.timing(Workload::Hol, Delay::Direct),
            (Duration::from_secs(1), Duration::from_secs(2))
        );
        assert_eq!(
            s.timing(Workload::Point, Delay::Direct).1,
            Duration::from_millis(500)
        );
        let p = build_plan(&a, &s);
        let ids: Vec<String> = p.iter().map(|s| s.id()).collect();
        assert_eq!(ids, ["hol-open-10000-direct", "hol-closed-1000-direct"]);
        let d = settings(&args(""));
        assert_eq!(
            d.timing(Workload::Hol, Delay::Direct),
            (Duration::from_secs(1), Duration::from_secs(5))
        );
        assert!(parse_args(&["--hol-duration".to_string(), "0".to_string()]).is_err());
        assert!(parse_args(&["--hol-warmup=-1".to_string()]).is_err());
        let c = args("--candidates pgpipe-tokio-4-m4,pgpipe-tokio-4-w256-m32");
        let names: Vec<_> = c
            .candidates
            .unwrap()
            .iter()
            .map(|c| (c.max_in_flight, c.max_connections))
            .collect();
        assert_eq!(names, [(None, Some(4)), (Some(256), Some(32))]);
    }
}
