//! The host's own speed, probed between benchmark runs: one probe of the core, one of memory.
//!
//! A virtual machine's host can slow every process of the guest for minutes without the
//! guest's `/proc/stat` showing any steal, and that drift, not the client, then separates two
//! rounds of the same candidate. Two probes tell two kinds of drift apart: a register-only loop
//! (the core's clock and its share of the physical core) and a pointer chase through a table
//! far larger than any cache (memory latency: what a backend's index lookup mostly waits on).
//! Both run single-threaded on an idle machine and take a fixed amount of work, so their times
//! compare across runs; [`pearson`] says how much a benchmark's rounds went with them.
//!
//! Memory latency drifts faster than a run lasts (on an idle test machine a 170 ms chase moves
//! 138–186 ns per load within seconds), so a probe before a run can miss the run's own state.
//! [`MemorySampler`] watches during the run instead: a separate process (its CPU is not the
//! benchmark's) makes a short chase every [`SAMPLE_EVERY`], about 1.5% of one core.

use std::io::{self, BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Steps of [`core_loop`]: about 40 ms on this project's test machines.
pub const CORE_STEPS: u64 = 20_000_000;
/// Entries of the chase's table (`u32` each: 64 MiB, beyond any cache of these machines).
pub const CHASE_ENTRIES: usize = 16 << 20;
/// Dependent loads of one [`memory_chase`]: about 100 ms on this project's test machines.
pub const CHASE_STEPS: u32 = 1 << 20;

/// Loads of one chase of [`MemorySampler`]: about 0.7 ms on this project's test machines.
pub const SAMPLE_STEPS: u32 = 1 << 12;
/// The pause between two chases of [`MemorySampler`].
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Times of both probes, ms (more is slower), and what a sampler saw during the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostSpeed {
    /// The median of 3 [`core_loop`]s.
    pub core_ms: f64,
    /// The median of 3 [`memory_chase`]s.
    pub memory_ms: f64,
    /// The median of a [`MemorySampler`]'s chases during the run, ns per load; `None` when no
    /// sampler ran.
    pub during_ns: Option<f64>,
}

/// Both probes, each the median of three, so that one preemption does not count. Takes about
/// half a second; the first call also builds the chase's table (about a second, once per
/// process; the table stays allocated).
pub fn measure() -> HostSpeed {
    let median3 = |f: &dyn Fn() -> f64| {
        let mut v = [f(), f(), f()];
        v.sort_by(f64::total_cmp);
        v[1]
    };
    HostSpeed {
        core_ms: median3(&|| core_loop().1),
        memory_ms: median3(&|| memory_chase().1),
        during_ns: None,
    }
}

/// Times a fixed single-thread loop of xorshift steps, each depending on the last, and returns
/// its result (which depends only on the steps) with the time it took, ms. No memory access:
/// it measures the core alone.
pub fn core_loop() -> (u64, f64) {
    let t = Instant::now();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..CORE_STEPS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = std::hint::black_box(x);
    }
    (x, t.elapsed().as_secs_f64() * 1e3)
}

/// Times [`CHASE_STEPS`] dependent loads at random places of a 64 MiB table and returns where
/// the chase ended with the time it took, ms. Each load's address is the last load's value, so
/// neither the core nor the prefetcher can run ahead: the time is memory latency (and the TLB
/// misses that come with it).
pub fn memory_chase() -> (u32, f64) {
    let t = Instant::now();
    let end = chase(table(), CHASE_STEPS);
    (end, t.elapsed().as_secs_f64() * 1e3)
}

/// The chase's table, built on first use.
fn table() -> &'static [u32] {
    static TABLE: OnceLock<Vec<u32>> = OnceLock::new();
    TABLE.get_or_init(|| cycle(CHASE_ENTRIES, 0x2545_F491_4F6C_DD1D))
}

/// The body of a sampler process: builds the table, writes `ready`, then makes a chase of
/// [`SAMPLE_STEPS`] loads every [`SAMPLE_EVERY`] and writes its ns per load, one line each,
/// until a write fails (the reader has gone) or the process is killed.
pub fn run_sampler(out: &mut impl Write) -> io::Result<()> {
    let table = table();
    out.write_all(b"ready\n")?;
    out.flush()?;
    let mut at = 0u32;
    // One write per line: a pipe write of a few bytes is atomic, so the reader sees whole lines.
    let mut line = String::new();
    loop {
        let t = Instant::now();
        for _ in 0..SAMPLE_STEPS {
            at = std::hint::black_box(table[at as usize]);
        }
        let ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(SAMPLE_STEPS);
        line.clear();
        use std::fmt::Write as _;
        let _ = writeln!(line, "{ns:.1}");
        out.write_all(line.as_bytes())?;
        out.flush()?;
        std::thread::sleep(SAMPLE_EVERY);
    }
}

/// A sampler process ([`run_sampler`]) running beside a benchmark's run, and the thread that
/// collects its lines (so that its pipe never fills, however long the run).
pub struct MemorySampler {
    child: Child,
    lines: Option<JoinHandle<Vec<f64>>>,
}

impl MemorySampler {
    /// Starts `command` (a program whose main calls [`run_sampler`]) and waits until its table
    /// is built, so that the run to be sampled starts with the sampler already chasing.
    pub fn start(mut command: Command) -> io::Result<MemorySampler> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(io::Error::other("the sampler has no stdout"));
        };
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader.read_line(&mut first)?;
        if first.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "the sampler said {first:?} instead of ready"
            )));
        }
        let lines = std::thread::spawn(move || {
            reader
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        });
        Ok(MemorySampler {
            child,
            lines: Some(lines),
        })
    }

    /// Stops the sampler and returns the median of its chases, ns per load, with their count;
    /// `None` when it made none.
    pub fn finish(mut self) -> Option<(f64, usize)> {
        self.stop();
        let mut v = self.lines.take()?.join().ok()?;
        v.sort_by(f64::total_cmp);
        Some((*v.get(v.len() / 2)?, v.len()))
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for MemorySampler {
    /// A sampler outlives no run: an early return or a panic stops it too.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Follows `table` from entry 0 for `steps` loads.
fn chase(table: &[u32], steps: u32) -> u32 {
    let mut at = 0u32;
    for _ in 0..steps {
        at = std::hint::black_box(table[at as usize]);
    }
    at
}

/// A table of `n` entries that is one cycle through all of them in a random order (Sattolo's
/// shuffle), so a chase never settles into a short loop that caches would hold.
fn cycle(n: usize, seed: u64) -> Vec<u32> {
    let mut table: Vec<u32> = (0..n as u32).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        table.swap(i, j);
    }
    table
}

/// Pearson's correlation of the points' two coordinates; `None` with fewer than 3 points or
/// when either coordinate does not vary. Near −1: the second falls as the first rises.
pub fn pearson(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in points {
        let (dx, dy) = (x - mx, y - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// `values` divided by their median (empty in, empty out), so that rounds of candidates of
/// different speeds can be pooled: 1.10 is a round 10% above its candidate's median.
pub fn relative_to_median(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let Some(&median) = sorted.get(sorted.len() / 2) else {
        return Vec::new();
    };
    values.iter().map(|v| v / median).collect()
}

/// Least, median and most of a probe's times over some runs, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The fastest.
    pub min: f64,
    /// The median (the upper one of an even count).
    pub median: f64,
    /// The slowest.
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Spread> {
        v.sort_by(f64::total_cmp);
        Some(Spread {
            min: *v.first()?,
            median: v[v.len() / 2],
            max: *v.last()?,
        })
    }
}

/// What the probes before a set of runs (and a sampler during them) showed, and how the runs'
/// throughput went with them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Relation {
    /// The core loop's times.
    pub core: Spread,
    /// The memory chase's times.
    pub memory: Spread,
    /// [`pearson`] of a run's throughput relative to its candidate's median against the core
    /// loop's time before it; `None` when there is too little to say.
    pub r_core: Option<f64>,
    /// The same against the memory chase's time.
    pub r_memory: Option<f64>,
    /// The sampler's medians during the runs, ns per load; `None` when none ran.
    pub during: Option<Spread>,
    /// The same correlation against the sampler's median during the run.
    pub r_during: Option<f64>,
    /// Runs behind the correlations (those of candidates with at least two runs).
    pub runs: usize,
}

/// Relates `runs` (candidate, throughput, the probes before the run) to the host's speed:
/// each run's throughput is taken relative to its own candidate's median, so that rounds of
/// fast and slow candidates pool into one correlation. `None` without runs.
pub fn relate(runs: &[(&str, f64, HostSpeed)]) -> Option<Relation> {
    let core = Spread::of(runs.iter().map(|r| r.2.core_ms).collect())?;
    let memory = Spread::of(runs.iter().map(|r| r.2.memory_ms).collect())?;
    let during = Spread::of(runs.iter().filter_map(|r| r.2.during_ns).collect());
    let (mut by_core, mut by_memory, mut by_during) = (Vec::new(), Vec::new(), Vec::new());
    let mut names: Vec<&str> = runs.iter().map(|r| r.0).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let mine: Vec<&(&str, f64, HostSpeed)> = runs.iter().filter(|r| r.0 == name).collect();
        if mine.len() < 2 {
            continue;
        }
        let rel = relative_to_median(&mine.iter().map(|r| r.1).collect::<Vec<_>>());
        for (r, y) in mine.iter().zip(rel) {
            by_core.push((r.2.core_ms, y));
            by_memory.push((r.2.memory_ms, y));
            if let Some(ns) = r.2.during_ns {
                by_during.push((ns, y));
            }
        }
    }
    Some(Relation {
        core,
        memory,
        r_core: pearson(&by_core),
        r_memory: pearson(&by_memory),
        during,
        r_during: pearson(&by_during),
        runs: by_core.len(),
    })
}

impl std::fmt::Display for Relation {
    /// One sentence for a benchmark's report, without a leading capital or final stop. The
    /// correlations are left out when no candidate ran twice (a run of one round).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let apart = |s: &Spread| (s.max / s.min - 1.0) * 100.0;
        let r = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:+.2}"));
        write!(
            f,
            "a register loop took median {:.1} ms ({:.1}–{:.1}, the slowest {:.0}% over the \
             fastest), a {} MiB pointer chase {:.1} ms ({:.1}–{:.1}, {:.0}%)",
            self.core.median,
            self.core.min,
            self.core.max,
            apart(&self.core),
            (CHASE_ENTRIES * 4) >> 20,
            self.memory.median,
            self.memory.min,
            self.memory.max,
            apart(&self.memory),
        )?;
        if let Some(d) = &self.during {
            write!(
                f,
                "; during the runs, short chases took median {:.0} ns per load ({:.0}–{:.0}, \
                 {:.0}%)",
                d.median,
                d.min,
                d.max,
                apart(d),
            )?;
        }
        if self.runs == 0 {
            return write!(f, "; no candidate ran twice, so no run is related to them");
        }
        write!(
            f,
            "; a run's throughput against its candidate's median went with the chase before it \
             by r = {} and with the loop by r = {}",
            r(self.r_memory),
            r(self.r_core),
        )?;
        if self.during.is_some() {
            write!(f, ", with the chases during it by r = {}", r(self.r_during))?;
        }
        write!(f, " ({} runs; near −1: slower host, slower run)", self.runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loop does all its steps (its result is theirs, not optimized away).
    #[test]
    fn the_core_loop_runs_its_fixed_work() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..CORE_STEPS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        let (got, ms) = core_loop();
        assert_eq!(got, x);
        assert!(ms > 0.0);
    }

    /// The table is one cycle: a chase visits every entry once before it is back at 0.
    #[test]
    fn the_chase_table_is_one_cycle_through_every_entry() {
        for n in [2usize, 3, 1000, 4096] {
            let table = cycle(n, 7);
            let mut seen = vec![false; n];
            let mut at = 0u32;
            for _ in 0..n {
                assert!(!seen[at as usize], "entry {at} of {n} visited twice");
                seen[at as usize] = true;
                at = table[at as usize];
            }
            assert_eq!(at, 0, "back at the start after {n} steps");
            assert_eq!(chase(&table, n as u32), 0);
        }
    }

    #[test]
    fn pearson_of_lines_and_of_too_little() {
        let up: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        let down: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 10.0 - i as f64)).collect();
        assert!((pearson(&up).unwrap() - 1.0).abs() < 1e-12);
        assert!((pearson(&down).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(pearson(&up[..2]), None);
        assert_eq!(pearson(&[(1.0, 2.0), (1.0, 3.0), (1.0, 4.0)]), None);
        let r = pearson(&[(1.0, 1.0), (2.0, 3.0), (3.0, 2.0), (4.0, 4.0)]).unwrap();
        assert!((r - 0.8).abs() < 1e-12, "{r}");
    }

    /// Throughput relative to each candidate's own median: a fast and a slow candidate whose
    /// rounds both fall as the chase slows pool into one clear relation.
    #[test]
    fn relate_pools_candidates_by_their_own_medians() {
        let at = |memory_ms: f64| HostSpeed {
            core_ms: 40.0,
            memory_ms,
            during_ns: Some(memory_ms),
        };
        let runs = [
            ("fast", 200.0, at(100.0)),
            ("fast", 180.0, at(110.0)),
            ("fast", 160.0, at(120.0)),
            ("slow", 50.0, at(100.0)),
            ("slow", 45.0, at(110.0)),
            ("slow", 40.0, at(120.0)),
            ("once", 1.0, at(200.0)),
        ];
        let rel = relate(&runs).unwrap();
        assert_eq!(
            rel.runs, 6,
            "a candidate with one run says nothing about rounds"
        );
        assert!((rel.r_memory.unwrap() + 1.0).abs() < 1e-9, "{rel:?}");
        assert_eq!(rel.r_core, None, "the loop did not vary");
        assert_eq!(rel.memory.min, 100.0);
        assert_eq!(rel.memory.max, 200.0);
        let text = rel.to_string();
        assert!(
            text.contains("64 MiB pointer chase 110.0 ms (100.0–200.0, 100%)"),
            "{text}"
        );
        assert!(
            text.contains("r = -1.00") && text.contains("(6 runs;"),
            "{text}"
        );
        assert!((rel.r_during.unwrap() + 1.0).abs() < 1e-9, "{rel:?}");
        assert!(
            text.contains("short chases took median 110 ns per load (100–200, 100%)"),
            "{text}"
        );
        assert_eq!(relate(&[]), None);
        let before_only: Vec<_> = runs
            .iter()
            .map(|&(n, t, h)| {
                (
                    n,
                    t,
                    HostSpeed {
                        during_ns: None,
                        ..h
                    },
                )
            })
            .collect();
        let rel = relate(&before_only).unwrap();
        assert_eq!((rel.during, rel.r_during), (None, None));
        assert!(!rel.to_string().contains("during"), "{rel}");
        // One round: every candidate ran once, so the spreads stand alone.
        let once = relate(&runs[..1]).unwrap();
        assert_eq!((once.runs, once.r_memory), (0, None));
        let text = once.to_string();
        assert!(
            text.ends_with("no candidate ran twice, so no run is related to them")
                && !text.contains("r ="),
            "{text}"
        );
    }

    /// A writer that takes `left` lines and then fails, as a pipe does once its reader is gone.
    struct Lines {
        got: Vec<String>,
        left: usize,
    }

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            self.left -= 1;
            self.got.push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The sampler says it is ready, then writes one positive ns-per-load figure per chase,
    /// and stops when its reader goes away.
    #[test]
    fn the_sampler_writes_ready_then_a_chase_per_line_until_the_pipe_breaks() {
        let mut out = Lines {
            got: Vec::new(),
            left: 4,
        };
        let err = run_sampler(&mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(out.got[0], "ready\n");
        for line in &out.got[1..] {
            let ns: f64 = line.trim().parse().unwrap();
            assert!(ns > 0.0 && line.ends_with('\n'), "{line:?}");
        }
        assert_eq!(out.got.len(), 4);
    }

    /// The parent's side against a real process that speaks the sampler's protocol: it waits
    /// for ready, collects every line while the process runs and takes their median; a process
    /// that does not say ready is refused.
    #[test]
    fn a_sampler_process_is_read_to_its_median_and_a_silent_one_refused() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo ready; echo 150.5; echo 170; echo 160; exec sleep 30",
        ]);
        let sampler = MemorySampler::start(cmd).unwrap();
        // The lines come after ready; give the shell time to write them.
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        assert_eq!(sampler.finish(), Some((160.0, 3)));
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "finish kills, not waits"
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo nope"]);
        assert!(MemorySampler::start(cmd).is_err());
    }

    #[test]
    fn relative_to_the_median() {
        assert_eq!(relative_to_median(&[2.0, 4.0, 8.0]), vec![0.5, 1.0, 2.0]);
        assert!(relative_to_median(&[]).is_empty());
    }
}
