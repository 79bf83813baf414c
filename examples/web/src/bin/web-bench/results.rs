//! The results: one measured run's figures ([`Run`]) and an entry's summary over the rounds on
//! one endpoint ([`Summary`]: median, min and max of each figure).

use pgpipe_tests::host_speed::{self, HostSpeed};
use pgpipe_web::bench::WrkReport;
use serde::Serialize;

/// One measured run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Run {
    pub(crate) round: usize,
    pub(crate) entry: String,
    pub(crate) endpoint: String,
    pub(crate) connections: usize,
    pub(crate) wrk: WrkReport,
    pub(crate) errors: u64,
    pub(crate) conns_avg: f64,
    pub(crate) conns_max: usize,
    /// Whole machine, busy CPU µs per request (/proc/stat).
    pub(crate) host_cpu_us: f64,
    /// The server process (all threads), µs per request.
    pub(crate) app_cpu_us: f64,
    /// The variant's PostgreSQL backends, µs per request (None if not on this host).
    pub(crate) db_cpu_us: Option<f64>,
    /// wrk itself, µs per request.
    pub(crate) wrk_cpu_us: f64,
    /// Machine busy fraction over the window (0..1).
    pub(crate) host_busy: f64,
    /// The share of the machine's time the hypervisor gave to other guests, in percent.
    pub(crate) steal_pct: f64,
    /// The host's speed just before the run: the core loop of
    /// [`host_speed::measure`], ms (more is slower).
    pub(crate) probe_ms: f64,
    /// The same probe's memory chase, ms.
    pub(crate) memory_ms: f64,
    /// The server process's context switches per request (all threads).
    pub(crate) app_switches: Option<f64>,
    /// The server process's system calls per request (`--syscalls`).
    pub(crate) app_syscalls: Option<f64>,
    /// Of those, io_uring_enter calls per request (`--syscalls`).
    pub(crate) app_uring_enters: Option<f64>,
}

/// Median, min and max of some runs' figure.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
pub(crate) struct Stat {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
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

/// An entry's figures on one endpoint over its rounds.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub(crate) struct Summary {
    pub(crate) entry: String,
    pub(crate) endpoint: String,
    rounds: usize,
    pub(crate) rps: Stat,
    pub(crate) p50_ms: Stat,
    pub(crate) p90_ms: Stat,
    pub(crate) p99_ms: Stat,
    pub(crate) max_ms: Stat,
    pub(crate) errors: u64,
    pub(crate) conns_avg: Stat,
    pub(crate) conns_max: usize,
    pub(crate) host_cpu_us: Stat,
    pub(crate) app_cpu_us: Stat,
    pub(crate) db_cpu_us: Option<Stat>,
    pub(crate) wrk_cpu_us: Stat,
    /// Context switches, system calls and io_uring_enter calls of the server per request,
    /// where every round has them (runs saved before they were counted have none).
    #[serde(default)]
    pub(crate) app_switches: Option<Stat>,
    #[serde(default)]
    pub(crate) app_syscalls: Option<Stat>,
    #[serde(default)]
    pub(crate) app_uring_enters: Option<Stat>,
}

/// The summary of `entry`'s runs on `endpoint`; None without any.
pub(crate) fn summarize(runs: &[Run], entry: &str, endpoint: &str) -> Option<Summary> {
    let mine: Vec<&Run> = runs
        .iter()
        .filter(|r| r.entry == entry && r.endpoint == endpoint)
        .collect();
    let f = |g: &dyn Fn(&Run) -> f64| stat(mine.iter().map(|r| g(r)).collect());
    let db: Vec<f64> = mine.iter().filter_map(|r| r.db_cpu_us).collect();
    // A figure some rounds lack is left out rather than summarized over fewer rounds.
    let every = |g: &dyn Fn(&Run) -> Option<f64>| {
        let v: Vec<f64> = mine.iter().filter_map(|r| g(r)).collect();
        (v.len() == mine.len()).then(|| stat(v)).flatten()
    };
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
        app_switches: every(&|r| r.app_switches),
        app_syscalls: every(&|r| r.app_syscalls),
        app_uring_enters: every(&|r| r.app_uring_enters),
    })
}

/// The end of a round's line: the server's context switches per request, and with `--syscalls`
/// its system calls and io_uring_enter calls per request.
pub(crate) fn per_request_calls(
    switches: Option<f64>,
    syscalls: Option<f64>,
    uring: Option<f64>,
) -> String {
    let mut s = String::new();
    if let Some(n) = switches {
        s += &format!("  switches/req {n:.2}");
    }
    if let (Some(all), Some(u)) = (syscalls, uring) {
        s += &format!("  syscalls/req {all:.1} (io_uring_enter {u:.1})");
    }
    s
}

/// The table's last cell: switches / syscalls / io_uring_enter per request, medians, `-` where
/// not counted.
pub(crate) fn calls_cell(s: &Summary) -> String {
    let m = |v: Option<Stat>, digits: usize| {
        v.map_or("-".into(), |v| format!("{:.*}", digits, v.median))
    };
    format!(
        "{} / {} / {}",
        m(s.app_switches, 2),
        m(s.app_syscalls, 1),
        m(s.app_uring_enters, 1)
    )
}

/// The host's speed before the runs of one endpoint and how their throughput went with it,
/// as a line of the report (empty without runs).
pub(crate) fn host_speed_lines(runs: &[Run], endpoint: &str) -> String {
    let points: Vec<(&str, f64, HostSpeed)> = runs
        .iter()
        .filter(|r| r.endpoint == endpoint)
        .map(|r| {
            let speed = HostSpeed {
                core_ms: r.probe_ms,
                memory_ms: r.memory_ms,
                during_ns: None,
            };
            (r.entry.as_str(), r.wrk.rps, speed)
        })
        .collect();
    match host_speed::relate(&points) {
        Some(rel) => format!("Host speed before each run, {endpoint}: {rel}\n"),
        None => String::new(),
    }
}
