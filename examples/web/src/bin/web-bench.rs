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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgpipe_web::bench::{
    bar_chart_svg, children_cpu_seconds, clock_ticks, host_jiffies, parse_wrk, process_jiffies,
    Bar, BarChart, Series, WrkReport, PALETTE,
};
use pgpipe_web::server::Variant;
use serde::Serialize;

const USAGE: &str = "usage: web-bench [--quick] [--rounds N] [--warmup S] [--duration S] \
[--connections C] [--wrk-threads T] [--variants a,b,..] [--endpoints db,queries,fortunes,updates] \
[--queries Q] [--max-connections K] [--pgpipe-options k=v&..] [--out-dir DIR] [--svg-dir DIR] [--update-docs] [--url URL]
       web-bench --replot target/web-bench/web-bench-N.json [--svg-dir DIR]  (charts of a saved run)
  variants: pgpipe-glommio, pgpipe-tokio-axum, axum-deadpool, axum-tokio-postgres, each with
  options NAME[:cN][:mK][:wM][:unpinned] (connections, pgpipe max_connections, max_in_flight,
  glommio executors not pinned) and a #tag to enter one again (the A/A control).
  Default: all four plus pgpipe-glommio#2. Results and charts go to --out-dir (target/web-bench);
  --update-docs writes the charts to docs/bench/ instead (the committed report).
  web-bench serve ... runs one server (what the benchmark starts as its child).";

struct Args {
    quick: bool,
    rounds: usize,
    warmup: u64,
    duration: u64,
    connections: usize,
    wrk_threads: usize,
    entries: Vec<String>,
    endpoints: Vec<String>,
    queries: usize,
    max_connections: Option<usize>,
    pgpipe_options: Option<String>,
    out_dir: PathBuf,
    svg_dir: PathBuf,
    update_docs: bool,
    url: Option<String>,
    replot: Option<PathBuf>,
}

fn parse_args(raw: &[String]) -> Result<Args, String> {
    let mut a = Args {
        quick: false,
        rounds: 3,
        warmup: 2,
        duration: 8,
        connections: 256,
        wrk_threads: 2,
        entries: vec![
            "pgpipe-glommio".into(),
            "pgpipe-glommio#2".into(),
            "pgpipe-tokio-axum".into(),
            "axum-deadpool".into(),
            "axum-tokio-postgres".into(),
        ],
        endpoints: ["db", "queries", "fortunes", "updates"]
            .map(String::from)
            .to_vec(),
        queries: 20,
        max_connections: None,
        pgpipe_options: None,
        out_dir: PathBuf::from("target/web-bench"),
        svg_dir: PathBuf::from("target/web-bench"),
        update_docs: false,
        url: std::env::var("DATABASE_URL").ok(),
        replot: None,
    };
    let (mut out_set, mut svg_set) = (false, false);
    let mut it = raw.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let num = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag} needs a number, not {v:?}"))
        };
        match flag.as_str() {
            "--quick" => a.quick = true,
            "--rounds" => a.rounds = num(value()?)?.max(1),
            "--warmup" => a.warmup = num(value()?)? as u64,
            "--duration" => a.duration = num(value()?)?.max(1) as u64,
            "--connections" => a.connections = num(value()?)?.max(1),
            "--wrk-threads" => a.wrk_threads = num(value()?)?.max(1),
            "--variants" => a.entries = value()?.split(',').map(String::from).collect(),
            "--endpoints" => a.endpoints = value()?.split(',').map(String::from).collect(),
            "--queries" => a.queries = num(value()?)?.clamp(1, 500),
            "--max-connections" => a.max_connections = Some(num(value()?)?),
            "--pgpipe-options" => a.pgpipe_options = Some(value()?),
            "--out-dir" => {
                a.out_dir = value()?.into();
                out_set = true
            }
            "--svg-dir" => {
                a.svg_dir = value()?.into();
                svg_set = true
            }
            "--update-docs" => a.update_docs = true,
            "--url" => a.url = Some(value()?),
            "--replot" => a.replot = Some(value()?.into()),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if !svg_set {
        // Charts land beside the run's JSON, never in the tree, unless asked for.
        a.svg_dir = if a.update_docs {
            PathBuf::from("docs/bench")
        } else {
            a.out_dir.clone()
        };
    }
    if a.quick {
        // Every variant and endpoint, windows too short for figures; nothing in the tree.
        a.rounds = 1;
        a.warmup = 1;
        a.duration = 1;
        a.connections = a.connections.min(64);
        if !out_set {
            a.out_dir = PathBuf::from("target/web-bench-quick");
        }
        if !svg_set {
            a.svg_dir = PathBuf::from("target/web-bench-quick");
        }
    }
    for e in &a.entries {
        variant_of(e)?;
        entry_flags(e)?;
    }
    for e in &a.endpoints {
        if !["db", "queries", "fortunes", "updates"].contains(&e.as_str()) {
            return Err(format!("unknown endpoint {e:?}"));
        }
    }
    Ok(a)
}

/// The variant of an entry name: `NAME[:option...][#tag]` (`pgpipe-glommio#2` and
/// `pgpipe-glommio:c1:unpinned` are `pgpipe-glommio`).
fn variant_of(entry: &str) -> Result<Variant, String> {
    let base = entry.split('#').next().unwrap_or(entry);
    base.split(':').next().unwrap_or(base).parse()
}

/// The `serve` flags of an entry's options: `cN` connections (pgpipe: `pipeline_size`, per
/// core on glommio; deadpool: pool size; tokio-postgres: clients), `mK` pgpipe's
/// `max_connections`, `wM` pgpipe's `max_in_flight`, `unpinned` (glommio executors not pinned).
fn entry_flags(entry: &str) -> Result<Vec<String>, String> {
    let base = entry.split('#').next().unwrap_or(entry);
    let mut flags = Vec::new();
    for opt in base.split(':').skip(1) {
        let num = |rest: &str| {
            rest.parse::<usize>()
                .map(|n| n.to_string())
                .map_err(|_| format!("bad option {opt:?} in {entry:?}"))
        };
        if opt == "unpinned" {
            flags.push("--unpinned".to_string());
        } else if let Some(n) = opt.strip_prefix('c') {
            flags.extend(["--connections".to_string(), num(n)?]);
        } else if let Some(n) = opt.strip_prefix('m') {
            flags.extend(["--max-connections".to_string(), num(n)?]);
        } else if let Some(n) = opt.strip_prefix('w') {
            flags.extend([
                "--pgpipe-options".to_string(),
                format!("max_in_flight={}", num(n)?),
            ]);
        } else {
            return Err(format!("bad option {opt:?} in {entry:?}"));
        }
    }
    Ok(flags)
}

/// An endpoint's request path and its name in files.
fn endpoint_path(name: &str, q: usize) -> (String, String) {
    match name {
        "queries" | "updates" => (format!("/{name}?q={q}"), format!("{name}-{q}")),
        other => (format!("/{other}"), other.to_string()),
    }
}

/// Server connections and their CPU, read through a tokio-postgres connection of its own.
struct Monitor {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Monitor {
    fn connect(url: &str) -> Result<Monitor, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let client = rt.block_on(async {
            let mut cfg: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
            cfg.application_name("pgpipe-web-monitor");
            let (client, conn) = cfg
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("monitor connect: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<_, String>(client)
        })?;
        Ok(Monitor { rt, client })
    }

    /// Backend pids with this application_name.
    fn backends(&self, app: &str) -> Vec<i32> {
        self.rt
            .block_on(self.client.query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            ))
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default()
    }

    fn scalar(&self, sql: &str) -> Option<String> {
        self.rt
            .block_on(self.client.query_one(sql, &[]))
            .ok()
            .and_then(|r| r.try_get::<_, String>(0).ok())
    }

    /// Waits until no backend of `app` is left (the previous server's, after it was killed).
    fn wait_gone(&self, app: &str) {
        let until = Instant::now() + Duration::from_secs(10);
        while !self.backends(app).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sampled while wrk runs: connection counts and the pids seen.
#[derive(Default)]
struct Samples {
    counts: Vec<usize>,
    pids: HashSet<i32>,
}

/// One measured run.
#[derive(Clone, Debug, Serialize)]
struct Run {
    round: usize,
    entry: String,
    endpoint: String,
    connections: usize,
    wrk: WrkReport,
    errors: u64,
    conns_avg: f64,
    conns_max: usize,
    /// Whole machine, busy CPU µs per request (/proc/stat).
    host_cpu_us: f64,
    /// The server process (all threads), µs per request.
    app_cpu_us: f64,
    /// The variant's PostgreSQL backends, µs per request (None if not on this host).
    db_cpu_us: Option<f64>,
    /// wrk itself, µs per request.
    wrk_cpu_us: f64,
    /// Machine busy fraction over the window (0..1).
    host_busy: f64,
}

/// Median, min and max of some runs' figure.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

fn stat(mut v: Vec<f64>) -> Option<Stat> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Stat {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Summary {
    entry: String,
    endpoint: String,
    rounds: usize,
    rps: Stat,
    p50_ms: Stat,
    p90_ms: Stat,
    p99_ms: Stat,
    max_ms: Stat,
    errors: u64,
    conns_avg: Stat,
    conns_max: usize,
    host_cpu_us: Stat,
    app_cpu_us: Stat,
    db_cpu_us: Option<Stat>,
    wrk_cpu_us: Stat,
}

fn summarize(runs: &[Run], entry: &str, endpoint: &str) -> Option<Summary> {
    let mine: Vec<&Run> = runs
        .iter()
        .filter(|r| r.entry == entry && r.endpoint == endpoint)
        .collect();
    let f = |g: &dyn Fn(&Run) -> f64| stat(mine.iter().map(|r| g(r)).collect());
    let db: Vec<f64> = mine.iter().filter_map(|r| r.db_cpu_us).collect();
    Some(Summary {
        entry: entry.into(),
        endpoint: endpoint.into(),
        rounds: mine.len(),
        rps: f(&|r| r.wrk.rps)?,
        p50_ms: f(&|r| r.wrk.p50_ms)?,
        p90_ms: f(&|r| r.wrk.p90_ms)?,
        p99_ms: f(&|r| r.wrk.p99_ms)?,
        max_ms: f(&|r| r.wrk.max_ms)?,
        errors: mine.iter().map(|r| r.errors).sum(),
        conns_avg: f(&|r| r.conns_avg)?,
        conns_max: mine.iter().map(|r| r.conns_max).max().unwrap_or(0),
        host_cpu_us: f(&|r| r.host_cpu_us)?,
        app_cpu_us: f(&|r| r.app_cpu_us)?,
        db_cpu_us: if db.len() == mine.len() {
            stat(db)
        } else {
            None
        },
        wrk_cpu_us: f(&|r| r.wrk_cpu_us)?,
    })
}

/// The server under test: a child process of this binary.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(entry: &str, url: &str, app_name: &str, a: &Args) -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "serve",
            "--variant",
            variant_of(entry)?.name(),
            "--url",
            url,
        ])
        .args(["--addr", "127.0.0.1:0", "--application-name", app_name]);
        if let Some(k) = a.max_connections {
            cmd.args(["--max-connections", &k.to_string()]);
        }
        if let Some(o) = &a.pgpipe_options {
            cmd.args(["--pgpipe-options", o]);
        }
        // The entry's own options come last and win.
        cmd.args(entry_flags(entry)?);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the server: {e}"))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        match line.trim().strip_prefix("listening on ") {
            Some(addr) => Ok(Server {
                child,
                addr: addr.to_string(),
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{entry} did not start (said {line:?})"))
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_wrk(a: &Args, url: &str, seconds: u64) -> Result<(WrkReport, String), String> {
    let out = Command::new("wrk")
        .arg(format!("-t{}", a.wrk_threads.min(a.connections)))
        .arg(format!("-c{}", a.connections))
        .arg(format!("-d{seconds}s"))
        .args(["--timeout", "5s", "--latency", url])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match parse_wrk(&text) {
        Some(r) if out.status.success() => Ok((r, text)),
        _ => Err(format!(
            "wrk failed ({}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// wrk from the Debian package, installed when missing (we run as root).
fn ensure_wrk() -> Result<(), String> {
    let present = || {
        Command::new("wrk")
            .arg("-v")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    if present() {
        return Ok(());
    }
    eprintln!("wrk missing: apt-get install -y wrk");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !apt(&["install", "-y", "-q", "wrk"]) {
        apt(&["update", "-q"]);
        apt(&["install", "-y", "-q", "wrk"]);
    }
    if present() {
        Ok(())
    } else {
        Err("wrk is not installed and apt-get could not install it".into())
    }
}

/// One measured wrk run with the counters around it.
fn measure(
    a: &Args,
    monitor: &Monitor,
    server: &Server,
    app_name: &str,
    url: &str,
) -> Result<(WrkReport, Samples, [f64; 4], f64), String> {
    let ticks = clock_ticks();
    let backend_cpu = |pids: &mut dyn Iterator<Item = i32>| -> HashMap<i32, u64> {
        pids.filter_map(|p| process_jiffies(p as u32).map(|j| (p, j)))
            .collect()
    };
    let db_before = backend_cpu(&mut monitor.backends(app_name).into_iter());
    let host0 = host_jiffies().unwrap_or((0, 0));
    let app0 = process_jiffies(server.pid()).unwrap_or(0);
    let wrk0 = children_cpu_seconds();
    let done = AtomicBool::new(false);
    let samples = Mutex::new(Samples::default());
    let report = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let pids = monitor.backends(app_name);
                if let Ok(mut smp) = samples.lock() {
                    smp.counts.push(pids.len());
                    smp.pids.extend(pids);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = run_wrk(a, url, a.duration);
        done.store(true, Ordering::Relaxed);
        r
    })?;
    let wrk_cpu = children_cpu_seconds() - wrk0;
    let app_cpu = process_jiffies(server.pid())
        .unwrap_or(app0)
        .saturating_sub(app0) as f64
        / ticks;
    let host1 = host_jiffies().unwrap_or(host0);
    let samples = samples.into_inner().unwrap_or_default();
    let mut pids: HashSet<i32> = samples.pids.clone();
    pids.extend(monitor.backends(app_name));
    let db_after = backend_cpu(&mut pids.into_iter());
    let db_cpu = if db_after.is_empty() {
        f64::NAN
    } else {
        db_after
            .iter()
            .map(|(p, j)| j.saturating_sub(*db_before.get(p).unwrap_or(&0)))
            .sum::<u64>() as f64
            / ticks
    };
    let host_busy = (host1.0 - host0.0) as f64 / ticks;
    let host_frac = if host1.1 > host0.1 {
        (host1.0 - host0.0) as f64 / (host1.1 - host0.1) as f64
    } else {
        0.0
    };
    Ok((
        report.0,
        samples,
        [host_busy, app_cpu, db_cpu, wrk_cpu],
        host_frac,
    ))
}

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
        let h0 = host_jiffies().unwrap_or((0, 0));
        std::thread::sleep(Duration::from_secs(1));
        let h1 = host_jiffies().unwrap_or(h0);
        if h1.1 > h0.1 {
            (h1.0 - h0.0) as f64 / (h1.1 - h0.1) as f64
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
                if a.warmup > 0 {
                    if let Err(e) = run_wrk(a, &target, a.warmup) {
                        failures.push(format!("{entry} {endpoint} warm-up: {e}"));
                        continue;
                    }
                }
                match measure(a, &monitor, &server, &app_name, &target) {
                    Ok((wrk, samples, cpu, host_busy)) => {
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
                            wrk,
                        };
                        println!(
                            "round {} {:<20} {:<12} {:>9.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}  conns {:.1}/{}  cpu/req host {:.0} app {:.0} db {} wrk {:.0} µs",
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
                            run.wrk_cpu_us
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
                 | variant | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | server conns avg / max | host CPU µs/req | app µs/req | db µs/req | wrk µs/req |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|---|\n",
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
                    "| {} | {:.0} ({:.0}–{:.0}) | {:.2} | {:.2} | {:.2} | {:.1} | {} | {:.1} / {} | {:.0} | {:.0} | {} | {:.0} |\n",
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
                    s.wrk_cpu_us.median
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

/// The request path of an endpoint label (`queries-20` is `/queries?q=20`).
fn path_of_label(label: &str) -> String {
    match label.split_once('-') {
        Some((name, q)) => format!("/{name}?q={q}"),
        None => format!("/{label}"),
    }
}

/// The charts' subtitle, from a run's metadata.
fn subtitle(meta: &BTreeMap<String, String>) -> String {
    let get = |k: &str| meta.get(k).cloned().unwrap_or_default();
    format!(
        "wrk {} · {} rounds of {} · {} cores shared by wrk, server and PostgreSQL {}",
        get("wrk"),
        get("rounds"),
        get("window"),
        get("cores"),
        get("postgres")
    )
}

/// Writes the four charts of every endpoint of `summaries` into `svg_dir`: throughput,
/// latency, CPU per request, server connections.
fn write_charts(summaries: &[Summary], svg_dir: &Path, sub: &str) -> Result<(), String> {
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
fn replot(file: &Path, svg_dir: &Path) -> Result<(), String> {
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
