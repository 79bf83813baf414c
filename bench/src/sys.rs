//! The few operating-system calls the side-by-side benchmark needs, behind safe functions:
//! CPU time of the process and of single threads, the whole machine's CPU counters, a
//! nanosecond-timeout `ppoll`, and the timer slack of the calling thread.
//!
//! Linux only (the benchmark reads `/proc`). Every `unsafe` block here calls one libc function
//! with arguments that are valid for the whole call (owned or borrowed Rust values), which is all
//! those functions require.
#![allow(unsafe_code)]

use std::io;
use std::time::Duration;

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// User + system CPU time of the whole process so far (`getrusage(RUSAGE_SELF)`): every thread,
/// including the ones that ended.
pub fn process_cpu() -> Duration {
    // SAFETY: `getrusage` only writes into the `rusage` we own; all-zero is a valid `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is a valid `who` and `ru` is a valid, writable `rusage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) failed");
    timeval(ru.ru_utime) + timeval(ru.ru_stime)
}

/// The CPU-time clock of one thread, readable from any thread of the process while that thread
/// lives. The benchmark uses it to take its own helper threads (delay proxy, arrival generator)
/// out of the client's CPU figure.
#[derive(Debug, Clone, Copy)]
pub struct ThreadCpuClock(libc::clockid_t);

impl ThreadCpuClock {
    /// The clock of the calling thread.
    pub fn current() -> ThreadCpuClock {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `pthread_self()` is the live calling thread; `id` is a valid out-pointer.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        assert_eq!(rc, 0, "pthread_getcpuclockid failed");
        ThreadCpuClock(id)
    }

    /// CPU time the thread has used; `None` once the thread has exited.
    pub fn read(&self) -> Option<Duration> {
        // SAFETY: all-zero is a valid `timespec`; `clock_gettime` only writes into it.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `ts` is a valid, writable `timespec`; an invalid clock id yields EINVAL.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
}

/// User + system CPU time of another process so far (`/proc/PID/stat`, in clock ticks, so to
/// 10 ms here); `None` if it is gone or unreadable.
pub fn pid_cpu(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = stat_cpu_ticks(&text)?;
    // SAFETY: `sysconf` takes a constant and has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line, in clock ticks. The command
/// name (field 2) is in parentheses and may itself hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) is the 12th and stime the 13th.
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): the kernel may otherwise delay
/// a timed wake-up by its default 50 µs, which is 5% of a 1 ms simulated delay.
pub fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument; the call has no memory effects.
    // A failure only leaves the default slack, so the result is ignored.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// `ppoll(2)` with a nanosecond timeout (`None` waits indefinitely); returns how many entries
/// have events. An interrupted call reports zero events.
pub fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a valid slice of `pollfd` for its length; `ts_ptr` is null or points to
    // a `timespec` that outlives the call; a null signal mask leaves the mask unchanged.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}

/// The machine's CPU counters from the first line of `/proc/stat`, in clock ticks
/// (`USER_HZ`, 100 per second on Linux): busy (everything but idle, iowait and steal), steal
/// and total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// Ticks this machine's CPUs ran anything, over all CPUs.
    pub busy: u64,
    /// Ticks a virtual machine's CPUs were runnable but the hypervisor ran something else:
    /// time taken from every process here at once, which no one here spent.
    pub steal: u64,
    /// All ticks, over all CPUs.
    pub total: u64,
}

impl MachineCpu {
    /// Reads `/proc/stat` now; zeros where it is unreadable (not Linux).
    pub fn read() -> MachineCpu {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| Self::parse(&s))
            .unwrap_or_default()
    }

    /// Parses the aggregate `cpu` line of a `/proc/stat` text.
    pub fn parse(stat: &str) -> Option<MachineCpu> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
        // already counted in user, so only the first eight fields add up to the total.
        let total: u64 = v.iter().take(8).sum();
        let field = |i: usize| v.get(i).copied().unwrap_or(0);
        let (idle, steal) = (field(3) + field(4), field(7));
        Some(MachineCpu {
            busy: total - idle - steal,
            steal,
            total,
        })
    }

    /// Busy CPU time between `earlier` and `self`.
    pub fn busy_since(&self, earlier: &MachineCpu) -> Duration {
        Duration::from_millis(self.busy.saturating_sub(earlier.busy) * 1000 / ticks_per_second())
    }

    /// The share of the machine's CPU time stolen by the hypervisor between `earlier` and
    /// `self`, in percent (0 on bare metal, or where `/proc/stat` is unreadable).
    pub fn steal_pct_since(&self, earlier: &MachineCpu) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        self.steal.saturating_sub(earlier.steal) as f64 * 100.0 / total as f64
    }
}

/// `USER_HZ`: the unit of `/proc/stat`.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_line() {
        let s = "cpu  100 5 50 1000 20 1 2 3 7 0\ncpu0 1 2 3 4\n";
        let m = MachineCpu::parse(s).unwrap();
        assert_eq!(m.total, 100 + 5 + 50 + 1000 + 20 + 1 + 2 + 3);
        assert_eq!(m.steal, 3);
        assert_eq!(m.busy, m.total - 1020 - 3);
        let later = MachineCpu::parse("cpu  200 5 100 1000 20 1 2 53 7 0\n").unwrap();
        assert_eq!(later.steal_pct_since(&m), 25.0);
        assert_eq!(m.steal_pct_since(&m), 0.0);
    }

    #[test]
    fn pid_stat_cpu() {
        let line =
            "4242 (pg bouncer) (x)) S 1 4242 4242 0 -1 4194560 300 0 0 0 17 5 0 0 20 0 1 0 100";
        assert_eq!(stat_cpu_ticks(line), Some(22));
        assert_eq!(stat_cpu_ticks("4242 (x) S 1 2"), None);
        assert_eq!(stat_cpu_ticks("no parenthesis"), None);
        assert!(pid_cpu(std::process::id()).is_some());
    }

    #[test]
    fn thread_clock_advances_with_work() {
        // Work until this thread's clock shows 10 ms: on a loaded machine that takes longer
        // wall time, so only a clock that never advances fails (after a generous bound).
        let c = ThreadCpuClock::current();
        let a = c.read().unwrap();
        let mut x = 0u64;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let b = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let b = c.read().unwrap();
            if b - a >= Duration::from_millis(10) {
                break b;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the thread clock did not advance: {a:?} -> {b:?}"
            );
        };
        assert!(process_cpu() >= b - a);
    }
}
