//! The `pgbench-N` candidate: PostgreSQL's own pgbench running the transactions workload's
//! script with N clients (one connection each, `-M prepared`), as a separate process. Its
//! per-transaction log gives the window's count, latencies and per-client counts, measured
//! like the other candidates' (the same window, the same balance check).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use pgpipe_bench::sys::{self, MachineCpu};

use crate::engine::{transactions_done, Job, Measurement, CONN_SAMPLE_EVERY};

/// The workload's transaction in pgbench's script language (`Workload::Tx`).
fn script(rows: i32) -> String {
    format!(
        "\\set aid random(1, {rows})\n\
         BEGIN;\n\
         UPDATE pgpipe_bench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n\
         SELECT abalance FROM pgpipe_bench_accounts WHERE aid = :aid;\n\
         END;\n"
    )
}

/// pgbench beside the server's other programs.
pub fn binary() -> Option<PathBuf> {
    let bin = pgpipe_tests::find_bin_dir().ok()?.join("pgbench");
    bin.is_file().then_some(bin)
}

/// Kills the child (and removes the log directory) however the run ends.
struct Run {
    child: Child,
    dir: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One run: pgbench for warm-up plus window (and a second of slack), the window measured from
/// outside (CPU, connections) and from its log (transactions, latency, fairness).
pub fn run(job: &Job) -> Result<Measurement, String> {
    let bin = binary().ok_or("pgbench is not installed beside the server's programs")?;
    let dir = std::env::temp_dir().join(format!(
        "pgpipe-bench-pgbench-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join("tx.sql");
    std::fs::write(&file, script(job.rows)).map_err(|e| format!("{}: {e}", file.display()))?;
    let before = crate::engine::balance_sum(job);
    let clients = job.cand.conns;
    let seconds = (job.warmup + job.window).as_secs_f64().ceil() as u64 + 1;
    let mut cmd = Command::new(&bin);
    cmd.args(["-n", "-M", "prepared", "-l"])
        .arg(format!("--log-prefix={}", dir.join("log").display()))
        .arg("-f")
        .arg(&file)
        .args(["-c", &clients.to_string()])
        .args(["-j", &clients.min(2).to_string()])
        .args(["-T", &seconds.to_string()])
        .args(["-h", &job.host, "-p", &job.port.to_string()])
        .args(["-U", &job.base.user])
        .arg(job.base.database())
        .env("PGAPPNAME", crate::monitor::APP_NAME)
        .env("PGSSLMODE", "disable")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(pw) = &job.base.password_for(&job.base.servers()[0]) {
        cmd.env("PGPASSWORD", pw);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))?;
    let pid = child.id();
    let mut run = Run { child, dir };
    let sampler = job.monitor.sampler(CONN_SAMPLE_EVERY);
    std::thread::sleep(job.warmup);
    let (t0, cpu0, machine0, at0) = (
        SystemTime::now(),
        sys::pid_cpu(pid),
        MachineCpu::read(),
        Instant::now(),
    );
    sampler.start();
    std::thread::sleep(job.window);
    let (t1, cpu1, machine1, at1) = (
        SystemTime::now(),
        sys::pid_cpu(pid),
        MachineCpu::read(),
        Instant::now(),
    );
    sampler.stop();
    let conns = job.monitor.connections();
    let status = wait(&mut run.child, Duration::from_secs(seconds + 30))?;
    let mut out = String::new();
    if let Some(mut e) = run.child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut out);
    }
    let log = read_log(&run.dir, epoch_us(t0), epoch_us(t1))?;
    let seconds = (at1 - at0).as_secs_f64();
    let ops = log.in_window;
    let per_op = |d: Duration| {
        if ops == 0 {
            0.0
        } else {
            d.as_secs_f64() * 1e6 / ops as f64
        }
    };
    let q = |x: f64| log.latency.value_at_quantile(x) as f64;
    let mut m = Measurement {
        ops,
        seconds,
        throughput: ops as f64 / seconds,
        client_cpu_us: cpu0
            .zip(cpu1)
            .map_or(0.0, |(a, b)| per_op(b.saturating_sub(a))),
        machine_cpu_us: per_op(machine1.busy_since(&machine0)),
        steal_pct: machine1.steal_pct_since(&machine0),
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        p9999_us: q(0.9999),
        max_us: log.latency.max() as f64,
        samples: log.latency.len(),
        server_connections: conns,
        ..Measurement::default()
    };
    let c = sampler.finish();
    (m.conns_avg, m.conns_max, m.conns_samples) = (c.avg, c.max, c.samples);
    if !status.success() {
        m.errors += 1;
        m.first_error = Some(format!("pgbench exited with {status}: {}", out.trim()));
    }
    let mut served: Vec<u64> = log.per_client.values().copied().collect();
    // Clients that completed nothing in the window are in the fairness figure too.
    served.resize(clients.max(served.len()), 0);
    transactions_done(&mut m, &served, log.all, before, job);
    Ok(m)
}

fn epoch_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn wait(child: &mut Child, limit: Duration) -> Result<std::process::ExitStatus, String> {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| format!("waiting for pgbench: {e}"))?
        {
            return Ok(s);
        }
        if Instant::now() > until {
            return Err(format!("pgbench did not finish within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What pgbench's per-transaction log says.
struct Log {
    /// Transactions logged over the whole run.
    all: u64,
    /// Of those, the ones that ended within the window, their latencies (µs) and per-client
    /// counts.
    in_window: u64,
    latency: Histogram<u64>,
    per_client: HashMap<u64, u64>,
}

/// Reads every log file of the run (`log.<pid>[.<thread>]`): each line is `client_id
/// transaction_no latency_us script_no epoch_s epoch_us`, the last two the transaction's end.
fn read_log(dir: &Path, t0: u64, t1: u64) -> Result<Log, String> {
    let mut log = Log {
        all: 0,
        in_window: 0,
        latency: Histogram::new_with_max(600_000_000, 3).map_err(|e| e.to_string())?,
        per_client: HashMap::new(),
    };
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("log.") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).map_err(|e| e.to_string())?;
        for line in text.lines() {
            let f: Vec<u64> = line
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let [client, _, latency, _, s, us, ..] = f[..] else {
                continue;
            };
            log.all += 1;
            let end = s * 1_000_000 + us;
            if (t0..t1).contains(&end) {
                log.in_window += 1;
                log.latency.saturating_record(latency.max(1));
                *log.per_client.entry(client).or_default() += 1;
            }
        }
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_read_by_the_window() {
        let dir = std::env::temp_dir().join(format!("pgpipe-pgbench-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("log.1"),
            "0 1 500 0 100 000010\n1 1 700 0 100 500000\n0 2 900 0 101 000000\n",
        )
        .unwrap();
        std::fs::write(dir.join("log.1.1"), "2 1 300 0 100 900000\nnot a line\n").unwrap();
        let log = read_log(&dir, 100_000_000, 101_000_000).unwrap();
        assert_eq!((log.all, log.in_window), (4, 3));
        assert_eq!(log.per_client[&0], 1);
        assert_eq!(log.latency.max(), 700);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(script(10).contains("random(1, 10)"));
    }
}
