//! Pieces of `web-bench` kept in the library so they can be unit-tested: reading wrk's report,
//! CPU counters from `/proc`, and a small SVG bar chart.

use std::fmt::Write as _;

use serde::Serialize;

/// What one wrk run reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WrkReport {
    /// Completed requests.
    pub requests: u64,
    /// The run's length as wrk measured it, seconds.
    pub seconds: f64,
    /// `Requests/sec`.
    pub rps: f64,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Latency percentiles (`--latency`), ms.
    pub p50_ms: f64,
    /// 75th percentile, ms.
    pub p75_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest request, ms.
    pub max_ms: f64,
    /// Responses whose status was not 2xx or 3xx.
    pub non_2xx: u64,
    /// Socket errors: connect + read + write + timeout.
    pub socket_errors: u64,
    /// Of those, timeouts (no response within wrk's `--timeout`).
    pub timeouts: u64,
}

impl WrkReport {
    /// Every failed request: non-2xx/3xx responses and socket errors.
    pub fn errors(&self) -> u64 {
        self.non_2xx + self.socket_errors
    }
}

/// A wrk duration (`812.00us`, `1.23ms`, `2.50s`, `1.00m`) in milliseconds.
pub fn parse_wrk_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(n * factor)
}

/// Reads wrk's text report (run with `--latency`). `None` if a required line is missing.
pub fn parse_wrk(out: &str) -> Option<WrkReport> {
    let mut r = WrkReport::default();
    let (mut have_rps, mut have_total) = (false, false);
    for line in out.lines() {
        let t = line.trim();
        let words: Vec<&str> = t.split_whitespace().collect();
        match words.as_slice() {
            ["Latency", avg, _stdev, max, ..] => {
                r.avg_ms = parse_wrk_duration(avg)?;
                r.max_ms = parse_wrk_duration(max)?;
            }
            [pct, value] if pct.ends_with('%') => {
                let v = parse_wrk_duration(value)?;
                match *pct {
                    "50%" => r.p50_ms = v,
                    "75%" => r.p75_ms = v,
                    "90%" => r.p90_ms = v,
                    "99%" => r.p99_ms = v,
                    _ => {}
                }
            }
            [n, "requests", "in", secs, ..] => {
                r.requests = n.parse().ok()?;
                r.seconds = parse_wrk_duration(secs.trim_end_matches(','))? / 1000.0;
                have_total = true;
            }
            ["Requests/sec:", v] => {
                r.rps = v.parse().ok()?;
                have_rps = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => r.non_2xx = n.parse().ok()?,
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 0, write 0, timeout 12"
                let nums: Vec<u64> = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse().ok())
                    .collect();
                r.socket_errors = nums.iter().sum();
                r.timeouts = nums.get(3).copied().unwrap_or(0);
            }
            _ => {}
        }
    }
    (have_rps && have_total).then_some(r)
}

/// The whole machine's CPU jiffies (`/proc/stat`'s first line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// Everything but idle, iowait and steal: time this machine's CPUs ran something.
    pub busy: u64,
    /// Time a virtual machine's CPUs were runnable while the hypervisor ran other guests.
    pub steal: u64,
    /// All of it.
    pub total: u64,
}

impl Host {
    /// The share of the machine's time stolen since `earlier`, in percent.
    pub fn steal_pct_since(&self, earlier: &Host) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        self.steal.saturating_sub(earlier.steal) as f64 * 100.0 / total as f64
    }
}

/// The machine's jiffies now.
pub fn host_jiffies() -> Option<Host> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let steal = v.get(7).copied().unwrap_or(0);
    Some(Host {
        busy: total - v[3] - v[4] - steal,
        steal,
        total,
    })
}

/// User + system jiffies of a process, all its threads (`/proc/PID/stat` fields 14 and 15).
pub fn process_jiffies(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = stat.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace().skip(14 - 3);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Context switches of a process so far, all its threads (`voluntary_ctxt_switches` plus
/// `nonvoluntary_ctxt_switches` of every `/proc/PID/task/*/status`): how often its threads left
/// the CPU, which for an event loop is mostly how often it went to sleep waiting for I/O.
pub fn process_context_switches(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        // A thread that ended meanwhile is simply not counted.
        if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
            total += context_switches_of(&status);
        }
    }
    Some(total)
}

/// The sum of the two context-switch counters of a `/proc/.../status` text.
pub fn context_switches_of(status: &str) -> u64 {
    status
        .lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            matches!(
                key,
                "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches"
            )
            .then(|| value.trim().parse::<u64>().ok())?
        })
        .sum()
}

/// The counts of `perf stat -x ,` output (its stderr): event name and count, for every line
/// that counted (`<not counted>` and `<not supported>` lines are left out).
pub fn parse_perf_csv(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(',');
            let count = f.next()?.trim().parse::<u64>().ok()?;
            let _unit = f.next()?;
            let event = f.next()?.trim();
            (!event.is_empty()).then(|| (event.to_string(), count))
        })
        .collect()
}

/// Jiffies per second.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU seconds of reaped children so far (user + system), from `getrusage(RUSAGE_CHILDREN)`.
pub fn children_cpu_seconds() -> f64 {
    // SAFETY: `usage` is a plain C struct that getrusage fills; zeroed is a valid value of it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage the call may write.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// One bar: a value with an optional min–max whisker.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    /// Height.
    pub value: f64,
    /// Whisker, when there is a spread to show.
    pub range: Option<(f64, f64)>,
}

/// A named series: one bar per category (`None`: no bar).
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Fill colour.
    pub color: &'static str,
    /// One entry per category.
    pub bars: Vec<Option<Bar>>,
}

/// A grouped bar chart.
pub struct BarChart {
    /// Title line.
    pub title: String,
    /// Smaller line under the title.
    pub subtitle: String,
    /// Y axis label.
    pub y_label: String,
    /// X categories.
    pub categories: Vec<String>,
    /// Bars per category, side by side.
    pub series: Vec<Series>,
}

/// Colours of the series, in order.
pub const PALETTE: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    let mut out = String::new();
    crate::app::escape_html(s, &mut out);
    out
}

/// A round step for about five ticks up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick label: whole numbers with thousands separators (`12,500`), fractions as they are.
fn fmt_tick(v: f64) -> String {
    if v.fract() != 0.0 {
        return format!("{v}");
    }
    let digits = format!("{v:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Splits a subtitle at its " · " separators into lines of at most ~110 characters.
fn wrap(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in text.split(" · ") {
        match lines.last_mut() {
            Some(l) if l.chars().count() + part.chars().count() + 3 <= 110 => {
                l.push_str(" · ");
                l.push_str(part);
            }
            _ => lines.push(part.to_string()),
        }
    }
    lines
}

/// The chart as a standalone SVG 1.1 document.
pub fn bar_chart_svg(c: &BarChart) -> String {
    let (w, h) = (820.0, 460.0);
    let (left, right, top, bottom) = (80.0, 20.0, 84.0, 90.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let top_value = c
        .series
        .iter()
        .flat_map(|s| s.bars.iter().flatten())
        .map(|b| b.range.map_or(b.value, |r| r.1.max(b.value)))
        .fold(0.0f64, f64::max);
    let step = nice_step(if top_value > 0.0 { top_value } else { 1.0 });
    let y_max = (top_value / step).ceil().max(1.0) * step;
    let y = |v: f64| top + ph - v / y_max * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"24\" font-size=\"17\" font-weight=\"bold\">{}</text>\n",
        esc(&c.title),
    );
    for (i, line) in wrap(&c.subtitle).iter().take(2).enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{left}\" y=\"{}\" font-size=\"12\" fill=\"#555\">{}</text>",
            42 + 15 * i,
            esc(line)
        );
    }
    // Grid and y ticks.
    let mut v = 0.0;
    while v <= y_max + step * 0.01 {
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        "<text transform=\"translate(18,{:.1}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0,
        esc(&c.y_label)
    );
    // Bars.
    let groups = c.categories.len().max(1) as f64;
    let gw = pw / groups;
    let n = c.series.len().max(1) as f64;
    let bw = (gw * 0.75) / n;
    for (ci, cat) in c.categories.iter().enumerate() {
        let gx = left + gw * ci as f64;
        for (si, ser) in c.series.iter().enumerate() {
            let Some(Some(b)) = ser.bars.get(ci) else {
                continue;
            };
            let x = gx + gw * 0.125 + bw * si as f64;
            let (y0, y1) = (y(b.value), y(0.0));
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {:.4}</title></rect>",
                bw * 0.92,
                (y1 - y0).max(0.0),
                ser.color,
                esc(cat),
                esc(&ser.name),
                b.value
            );
            if let Some((lo, hi)) = b.range {
                let cx = x + bw * 0.46;
                let _ = writeln!(
                    s,
                    "<path d=\"M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}h{:.1}M{:.1} {:.1}h{:.1}\" stroke=\"#222\" stroke-width=\"1.2\" fill=\"none\"/>",
                    y(lo),
                    y(hi),
                    cx - 4.0,
                    y(lo),
                    8.0,
                    cx - 4.0,
                    y(hi),
                    8.0
                );
            }
            let label = if b.value >= 100.0 {
                format!("{:.0}", b.value)
            } else if b.value >= 10.0 {
                format!("{:.1}", b.value)
            } else {
                format!("{:.2}", b.value)
            };
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\" fill=\"#333\">{label}</text>",
                x + bw * 0.46,
                y(b.range.map_or(b.value, |r| r.1.max(b.value))) - 4.0
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            gx + gw / 2.0,
            top + ph + 18.0,
            esc(cat)
        );
    }
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
        top + ph,
        left + pw,
        top + ph
    );
    // Legend, under the plot.
    if c.series.len() > 1 {
        let mut lx = left;
        for ser in &c.series {
            let _ = writeln!(
                s,
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>",
                h - 40.0,
                ser.color,
                lx + 16.0,
                h - 30.0,
                esc(&ser.name)
            );
            lx += 30.0 + 7.0 * ser.name.chars().count() as f64;
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_switches_add_both_counters() {
        let status = "Name:\tweb\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(context_switches_of(status), 127);
        assert_eq!(context_switches_of("Name:\tweb\n"), 0);
        // Other test threads may end between two reads and take their counts with them, so the
        // process's sum need not grow; this thread's own count must, and the sum includes it.
        let mine = || {
            context_switches_of(
                &std::fs::read_to_string("/proc/thread-self/status").expect("/proc"),
            )
        };
        let before = mine();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let after = mine();
        assert!(
            after > before,
            "a sleep is a voluntary switch: {before} -> {after}"
        );
        let all = process_context_switches(std::process::id()).expect("/proc on Linux");
        assert!(
            all >= after,
            "the process's sum {all} includes this thread's {after}"
        );
    }

    #[test]
    fn perf_csv_gives_the_counted_events() {
        let out =
            "# started on Sat Dec  5\n\n1003830,,raw_syscalls:sys_enter,6001234567,100.00,,\n\
                   760032,,syscalls:sys_enter_io_uring_enter,6001234567,100.00,,\n\
                   <not counted>,,syscalls:sys_enter_futex,0,0.00,,\n";
        assert_eq!(
            parse_perf_csv(out),
            vec![
                ("raw_syscalls:sys_enter".to_string(), 1_003_830),
                ("syscalls:sys_enter_io_uring_enter".to_string(), 760_032),
            ]
        );
    }

    const SAMPLE: &str = "Running 8s test @ http://127.0.0.1:40000/queries?q=20
  2 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.34ms    3.21ms   1.02s    91.00%
    Req/Sec    10.12k     1.00k   12.00k    70.00%
  Latency Distribution
     50%   11.50ms
     75%   13.00ms
     90%  800.00us
     99%    2.10s
  161234 requests in 8.00s, 120.00MB read
  Socket errors: connect 1, read 2, write 3, timeout 4
  Non-2xx or 3xx responses: 5
Requests/sec:  20154.25
Transfer/sec:     15.00MB
";

    #[test]
    fn wrk_report_is_read() {
        let r = parse_wrk(SAMPLE).expect("parsed");
        assert_eq!(r.requests, 161_234);
        assert_eq!(r.seconds, 8.0);
        assert_eq!(r.rps, 20154.25);
        assert_eq!(r.avg_ms, 12.34);
        assert_eq!(r.max_ms, 1020.0);
        assert_eq!(r.p50_ms, 11.5);
        assert_eq!(r.p90_ms, 0.8);
        assert_eq!(r.p99_ms, 2100.0);
        assert_eq!((r.socket_errors, r.timeouts, r.non_2xx), (10, 4, 5));
        assert_eq!(r.errors(), 15);
        assert!(parse_wrk("garbage").is_none());
    }

    #[test]
    fn cpu_counters_read() {
        let h = host_jiffies().expect("/proc/stat");
        assert!(h.busy + h.steal <= h.total);
        assert_eq!(h.steal_pct_since(&h), 0.0);
        assert!(process_jiffies(std::process::id()).is_some());
        assert!(clock_ticks() > 0.0);
    }

    #[test]
    fn chart_is_svg() {
        let svg = bar_chart_svg(&BarChart {
            title: "t <1>".into(),
            subtitle: "s".into(),
            y_label: "req/s".into(),
            categories: vec!["a".into(), "b".into()],
            series: vec![Series {
                name: "x".into(),
                color: PALETTE[0],
                bars: vec![
                    Some(Bar {
                        value: 1234.0,
                        range: Some((1000.0, 1500.0)),
                    }),
                    None,
                ],
            }],
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert_eq!(fmt_tick(12_500.0), "12,500");
        assert_eq!(fmt_tick(500.0), "500");
        assert_eq!(fmt_tick(0.5), "0.5");
        assert_eq!(wrap(&"x".repeat(100)).len(), 1);
        assert_eq!(
            wrap(&format!("{} · {}", "a".repeat(60), "b".repeat(60))).len(),
            2
        );
    }
}
