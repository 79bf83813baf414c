//! Many application processes: a run of a many-process scenario starts `procs` child processes
//! of the benchmark binary itself (the hidden subcommand [`CHILD_COMMAND`]), each running the
//! candidate with its share of the closed loop's tasks on its own thread and runtime, as one
//! application process would; all of them share one measured window (a wall-clock instant
//! handed to each). Each child prints its window's figures as one JSON line; the parent counts
//! the server's backends during the window and adds the children's figures up.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgpipe_bench::sys::MachineCpu;
use serde::{Deserialize, Serialize};

use crate::engine::{self, ClientCount, Job, Measurement};
use crate::monitor::Monitor;
use crate::plan::{Candidate, Load, Workload};

/// The hidden subcommand: `pgpipe-bench __child`, its [`ChildSpec`] as one JSON line on stdin.
pub const CHILD_COMMAND: &str = "__child";

/// Time from spawning the children to the window: process start, connecting, warm-up.
pub const LEAD: Duration = Duration::from_millis(1500);

/// How long after the window the children may take to drain, close and report.
const REPORT_LIMIT: Duration = Duration::from_secs(40);

/// What one child runs (JSON on its stdin, so the URL's password is not on a command line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildSpec {
    /// The candidate's name (`pgpipe-tokio-2`, `deadpool-16`, ...).
    pub candidate: String,
    /// The workload's label (`point-id`, ...).
    pub workload: String,
    /// This process's closed-loop tasks.
    pub tasks: usize,
    /// The server's URL (credentials, database); `host` and `port` say where to connect.
    pub url: String,
    pub host: String,
    pub port: u16,
    pub rows: i32,
    /// No named statements (behind a transaction-mode pooler).
    pub unnamed: bool,
    /// The window's start, ms since the Unix epoch.
    pub start_at_ms: u64,
    /// The window's length in seconds.
    pub window_s: f64,
}

/// What a child reports: the part of its [`Measurement`] the parent adds up (the JSON line is
/// the whole measurement; other fields are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChildReport {
    pub ops: u64,
    pub seconds: f64,
    pub throughput: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub client_cpu_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
    pub samples: u64,
    pub dropped: u64,
    pub unfinished: u64,
    pub units_per_readable: Option<f64>,
    pub writes_per_unit: Option<f64>,
}

impl ChildReport {
    /// The child's report in its stdout: the last line that parses as one.
    pub fn parse(stdout: &str) -> Result<ChildReport, String> {
        stdout
            .lines()
            .rev()
            .filter(|l| l.trim_start().starts_with('{'))
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| {
                let tail: String = stdout.chars().rev().take(200).collect();
                let tail: String = tail.chars().rev().collect();
                format!("no report in the child's output: {tail:?}")
            })
    }
}

/// The child side: reads its spec from stdin, runs it, prints the measurement as one JSON
/// line. Returns the exit status.
pub fn child_main() -> i32 {
    match child_run() {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(e) => {
            eprintln!("pgpipe-bench child: {e}");
            1
        }
    }
}

fn child_run() -> Result<String, String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("reading the spec: {e}"))?;
    let spec: ChildSpec = serde_json::from_str(input.trim()).map_err(|e| format!("spec: {e}"))?;
    let base = pgpipe::Config::parse(&spec.url).map_err(|e| format!("bad URL: {e}"))?;
    let window = Duration::try_from_secs_f64(spec.window_s).map_err(|e| e.to_string())?;
    let job = Job {
        cand: Candidate::parse(&spec.candidate)?,
        workload: Workload::parse(&spec.workload)?,
        load: Load::Closed {
            tasks: spec.tasks.max(1),
        },
        warmup: Duration::ZERO,
        window,
        host: spec.host,
        port: spec.port,
        base,
        rows: spec.rows,
        monitor: Monitor::none(),
        proxy_cpu: None,
        root_cert: None,
        unnamed: spec.unnamed,
        start_at: Some(UNIX_EPOCH + Duration::from_millis(spec.start_at_ms)),
        client_count: None,
        pooler_cpu: None,
    };
    let m = engine::run(job)?;
    serde_json::to_string(&m).map_err(|e| e.to_string())
}

/// The parent side: runs `job` (a closed loop) in `procs` processes at once, `tasks / procs`
/// tasks each, and sums their figures. Server connections are counted by `job.monitor`
/// (sampled over the window, and at its end); client connections by `job.client_count`.
pub fn run(job: &Job, procs: usize, url: &str) -> Result<Measurement, String> {
    let Load::Closed { tasks } = job.load else {
        return Err("many-process runs are closed loops".into());
    };
    let exe = std::env::current_exe().map_err(|e| format!("the benchmark's own binary: {e}"))?;
    let start_at = SystemTime::now() + LEAD;
    let start_at_ms = start_at
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as u64;
    let spec = ChildSpec {
        candidate: job.cand.name.clone(),
        workload: job.workload.label().into(),
        tasks: (tasks / procs).max(1),
        url: url.into(),
        host: job.host.clone(),
        port: job.port,
        rows: job.rows,
        unnamed: job.unnamed,
        start_at_ms,
        window_s: job.window.as_secs_f64(),
    };
    let line = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
    let mut children: Vec<Child> = Vec::with_capacity(procs);
    let spawned = (|| -> Result<(), String> {
        for _ in 0..procs {
            let mut c = Command::new(&exe)
                .arg(CHILD_COMMAND)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("starting a child process: {e}"))?;
            let mut stdin = c.stdin.take().ok_or("no stdin")?;
            children.push(c);
            stdin
                .write_all(line.as_bytes())
                .map_err(|e| format!("writing a child's spec: {e}"))?;
        }
        Ok(())
    })();
    if let Err(e) = spawned {
        for mut c in children {
            let _ = c.kill();
            let _ = c.wait();
        }
        return Err(e);
    }

    // The window, as the parent sees it: machine CPU and the server's backends.
    let sampler = job.monitor.sampler(engine::CONN_SAMPLE_EVERY);
    std::thread::sleep(
        start_at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    );
    let pooler = || job.pooler_cpu.as_ref().and_then(|f| f());
    let pooler0 = pooler();
    let cpu0 = MachineCpu::read();
    sampler.start();
    // Client connections at mid-window: right after it the children close theirs, and on
    // saturated cores the console's answer can take a while.
    let before_end = job.window.mul_f64(0.5);
    std::thread::sleep(before_end);
    let clients = job.client_count.as_ref().and_then(|f: &ClientCount| f());
    std::thread::sleep(job.window.saturating_sub(before_end));
    sampler.stop();
    let cpu1 = MachineCpu::read();
    let pooler1 = pooler();
    let server_end = job.monitor.connections();
    let conns = sampler.finish();

    // The children's reports.
    let deadline = Instant::now() + REPORT_LIMIT;
    let mut reports = Vec::with_capacity(procs);
    let mut failure = None;
    for (i, mut c) in children.into_iter().enumerate() {
        let status = loop {
            match c.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break None;
                }
            }
        };
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        match (status, ChildReport::parse(&out)) {
            (Some(s), Ok(r)) if s.success() => reports.push(r),
            (None, _) => {
                failure.get_or_insert(format!("process {i} did not finish in time"));
            }
            (Some(s), r) => {
                failure.get_or_insert(format!(
                    "process {i} exited with {s}{}",
                    r.err().map(|e| format!(": {e}")).unwrap_or_default()
                ));
            }
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    let mut m = combine(&reports);
    if m.ops > 0 {
        let per_op = |d: Duration| d.as_secs_f64() * 1e6 / m.ops as f64;
        m.machine_cpu_us = per_op(cpu1.busy_since(&cpu0));
        m.steal_pct = cpu1.steal_pct_since(&cpu0);
        m.pooler_cpu_us = pooler0
            .zip(pooler1)
            .map(|(a, b)| per_op(b.saturating_sub(a)));
    }
    m.server_connections = server_end;
    m.client_connections = clients;
    m.conns_avg = conns.avg;
    m.conns_max = conns.max;
    m.conns_samples = conns.samples;
    Ok(m)
}

/// The processes' figures added up: operations, throughput, errors and CPU summed (CPU per op
/// over all of them); latency: the median of the processes' p50, the worst process's p90 and
/// beyond (each process has its own histogram).
pub fn combine(reports: &[ChildReport]) -> Measurement {
    let ops: u64 = reports.iter().map(|r| r.ops).sum();
    let cpu_us: f64 = reports.iter().map(|r| r.client_cpu_us * r.ops as f64).sum();
    let worst = |f: fn(&ChildReport) -> f64| reports.iter().map(f).fold(0.0, f64::max);
    let mean = |f: fn(&ChildReport) -> Option<f64>| {
        let v: Vec<f64> = reports.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let p50 = crate::report::Figure::of(reports.iter().map(|r| r.p50_us)).map_or(0.0, |f| f.median);
    Measurement {
        ops,
        seconds: reports.iter().map(|r| r.seconds).fold(0.0, f64::max),
        throughput: reports.iter().map(|r| r.throughput).sum(),
        errors: reports.iter().map(|r| r.errors).sum(),
        first_error: reports.iter().find_map(|r| r.first_error.clone()),
        client_cpu_us: if ops == 0 { 0.0 } else { cpu_us / ops as f64 },
        p50_us: p50,
        p90_us: worst(|r| r.p90_us),
        p99_us: worst(|r| r.p99_us),
        p999_us: worst(|r| r.p999_us),
        p9999_us: worst(|r| r.p9999_us),
        max_us: worst(|r| r.max_us),
        samples: reports.iter().map(|r| r.samples).sum(),
        dropped: reports.iter().map(|r| r.dropped).sum(),
        unfinished: reports.iter().map(|r| r.unfinished).sum(),
        units_per_readable: mean(|r| r.units_per_readable),
        writes_per_unit: mean(|r| r.writes_per_unit),
        ..Measurement::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ops: u64, cpu: f64, p50: f64, p99: f64) -> String {
        format!(
            r#"{{"ops":{ops},"seconds":1.0,"throughput":{ops}.0,"errors":0,"first_error":null,
            "client_cpu_us":{cpu},"machine_cpu_us":9.0,"p50_us":{p50},"p90_us":{p99},"p99_us":{p99},
            "p999_us":{p99},"p9999_us":{p99},"max_us":{p99},"samples":{ops},"dropped":0,
            "unfinished":0,"units_per_readable":2.0,"writes_per_unit":null,"server_connections":-1}}"#
        )
        .replace('\n', "")
    }

    #[test]
    fn reports_parse_and_add_up() {
        let out = format!("noise\n{}\n", report(1000, 10.0, 100.0, 900.0));
        let a = ChildReport::parse(&out).unwrap();
        assert_eq!((a.ops, a.units_per_readable), (1000, Some(2.0)));
        let b = ChildReport::parse(&report(3000, 20.0, 300.0, 500.0)).unwrap();
        let c = ChildReport::parse(&report(2000, 10.0, 200.0, 700.0)).unwrap();
        let m = combine(&[a, b, c]);
        assert_eq!(m.ops, 6000);
        assert_eq!(m.throughput, 6000.0);
        // CPU per op over all processes: (10 + 60 + 20) ms / 6000 ops.
        assert!((m.client_cpu_us - 15.0).abs() < 1e-9);
        assert_eq!((m.p50_us, m.p99_us), (200.0, 900.0));
        assert_eq!(m.units_per_readable, Some(2.0));
        assert_eq!(m.writes_per_unit, None);
        assert!(ChildReport::parse("").is_err());
        assert!(ChildReport::parse("{\"ops\": \"x\"}\n").is_err());
        assert!(ChildReport::parse("{not json").is_err());
        assert_eq!(combine(&[]).client_cpu_us, 0.0);
    }

    #[test]
    fn spec_round_trips() {
        let s = ChildSpec {
            candidate: "pgpipe-tokio-2".into(),
            workload: "point-id".into(),
            tasks: 125,
            url: "postgres://u@127.0.0.1:5432/db".into(),
            host: "127.0.0.1".into(),
            port: 6432,
            rows: 10,
            unnamed: true,
            start_at_ms: 1,
            window_s: 1.5,
        };
        let back: ChildSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(serde_json::from_str::<ChildSpec>("{}").is_err());
    }
}
