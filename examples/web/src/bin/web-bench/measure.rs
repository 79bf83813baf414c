//! One measured run: the server under test as a child process of this binary, wrk (installed
//! when missing), and the connections sampled and the CPU counters read around its window.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use pgpipe_web::bench::{
    children_cpu_seconds, clock_ticks, host_jiffies, parse_perf_csv, parse_wrk,
    process_context_switches, process_jiffies, WrkReport,
};

use crate::args::{entry_flags, variant_of, Args};
use crate::monitor::Monitor;

/// The server under test: a child process of this binary.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
}

impl Server {
    /// Starts `entry` as `web-bench serve ...` and waits for the address it listens on.
    pub(crate) fn start(
        entry: &str,
        url: &str,
        app_name: &str,
        a: &Args,
    ) -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "serve",
            "--variant",
            variant_of(entry)?.name(),
            "--url",
            url,
        ])
        .args(["--addr", "127.0.0.1:0", "--application-name", app_name])
        // The server holds the read end of a pipe whose write end is `child.stdin`: when this
        // process dies, even by a signal, the server sees end of file and exits too.
        .arg("--exit-on-stdin-eof");
        if let Some(k) = a.max_connections {
            cmd.args(["--max-connections", &k.to_string()]);
        }
        if let Some(o) = &a.pgpipe_options {
            cmd.args(["--pgpipe-options", o]);
        }
        // The entry's own options come last and win.
        cmd.args(entry_flags(entry)?);
        let mut child = cmd
            .stdin(Stdio::piped())
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

/// Runs wrk against `url` for `seconds`: its parsed report and its output.
pub(crate) fn run_wrk(a: &Args, url: &str, seconds: u64) -> Result<(WrkReport, String), String> {
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
pub(crate) fn ensure_wrk() -> Result<(), String> {
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

/// The tracepoints `--syscalls` counts: every system call, and io_uring's submit-and-wait.
const SYSCALL_EVENTS: &str = "raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter";

/// Whether `perf stat` can count the system-call tracepoints here (`--syscalls` needs it).
pub(crate) fn check_perf() -> Result<(), String> {
    let out = Command::new("perf")
        .args(["stat", "-x", ",", "-e", SYSCALL_EVENTS, "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("--syscalls needs perf (Debian's linux-perf): {e}"))?;
    let counted = parse_perf_csv(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() && counted.len() == 2 {
        Ok(())
    } else {
        Err(format!(
            "--syscalls: perf cannot count {SYSCALL_EVENTS} here (root, or \
             kernel.perf_event_paranoid <= -1, and tracefs are needed): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `perf stat` counting a process's system calls for a number of seconds, beside wrk.
struct SyscallCount(Child);

impl SyscallCount {
    fn start(pid: u32, seconds: u64) -> Result<SyscallCount, String> {
        Command::new("perf")
            .args([
                "stat",
                "-x",
                ",",
                "-e",
                SYSCALL_EVENTS,
                "-p",
                &pid.to_string(),
            ])
            .args(["--", "sleep", &seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map(SyscallCount)
            .map_err(|e| format!("perf stat: {e}"))
    }

    /// All system calls and io_uring_enter calls over the window.
    fn finish(self) -> Result<[u64; 2], String> {
        let out = self.0.wait_with_output().map_err(|e| e.to_string())?;
        let counts = parse_perf_csv(&String::from_utf8_lossy(&out.stderr));
        let get = |name: &str| counts.iter().find(|(e, _)| e == name).map(|(_, n)| *n);
        match (
            get("raw_syscalls:sys_enter"),
            get("syscalls:sys_enter_io_uring_enter"),
        ) {
            (Some(all), Some(uring)) => Ok([all, uring]),
            _ => Err(format!(
                "perf stat counted nothing: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
}

/// One measured wrk run with the counters around it.
pub(crate) fn measure(
    a: &Args,
    monitor: &Monitor,
    server: &Server,
    app_name: &str,
    url: &str,
) -> Result<Measured, String> {
    let ticks = clock_ticks();
    let backend_cpu = |pids: &mut dyn Iterator<Item = i32>| -> HashMap<i32, u64> {
        pids.filter_map(|p| process_jiffies(p as u32).map(|j| (p, j)))
            .collect()
    };
    let db_before = backend_cpu(&mut monitor.backends(app_name).into_iter());
    let host0 = host_jiffies().unwrap_or_default();
    let app0 = process_jiffies(server.pid()).unwrap_or(0);
    let switches0 = process_context_switches(server.pid());
    let wrk0 = children_cpu_seconds();
    let perf = match a.syscalls {
        true => Some(SyscallCount::start(server.pid(), a.duration)?),
        false => None,
    };
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
    // wrk's CPU before perf is reaped: reaped children's CPU is all `getrusage` can tell.
    let wrk_cpu = children_cpu_seconds() - wrk0;
    let syscalls = perf.map(SyscallCount::finish).transpose()?;
    let switches = switches0
        .zip(process_context_switches(server.pid()))
        .map(|(s0, s1)| s1.saturating_sub(s0));
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
    let host_busy = (host1.busy - host0.busy) as f64 / ticks;
    let host_frac = if host1.total > host0.total {
        (host1.busy - host0.busy) as f64 / (host1.total - host0.total) as f64
    } else {
        0.0
    };
    Ok(Measured {
        wrk: report.0,
        samples,
        cpu: [host_busy, app_cpu, db_cpu, wrk_cpu],
        host_busy: host_frac,
        steal_pct: host1.steal_pct_since(&host0),
        switches,
        syscalls,
    })
}

/// One measured run: wrk's report, the samples taken meanwhile, CPU seconds (machine, server,
/// its backends, wrk), the machine's busy fraction, the share the hypervisor stole, the
/// server's context switches and (`--syscalls`) its system calls and io_uring_enter calls over
/// the window (perf counts for the window's length, started just before wrk).
pub(crate) struct Measured {
    pub(crate) wrk: WrkReport,
    pub(crate) samples: Samples,
    pub(crate) cpu: [f64; 4],
    pub(crate) host_busy: f64,
    pub(crate) steal_pct: f64,
    pub(crate) switches: Option<u64>,
    pub(crate) syscalls: Option<[u64; 2]>,
}

/// Sampled while wrk runs: connection counts and the pids seen.
#[derive(Default)]
pub(crate) struct Samples {
    pub(crate) counts: Vec<usize>,
    pids: HashSet<i32>,
}
