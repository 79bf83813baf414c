//! `pgpipe-icount`: the instruction-count gate of pgpipe's hot path.
//!
//! ```text
//! cargo run --release -p pgpipe-bench --bin pgpipe-icount              # measure, compare, fail on growth
//! cargo run --release -p pgpipe-bench --bin pgpipe-icount -- --update   # measure, rewrite the baseline
//! cargo run --release -p pgpipe-bench --bin pgpipe-icount -- --compare  # also tokio-postgres (reported)
//! ```
//!
//! It runs each workload (see `workload.rs`) twice under valgrind's callgrind, at two sizes, and
//! reports per stage the instructions and allocations of the extra units divided by their
//! number: constant costs cancel out, and the counts are the same from run to run. It compares
//! them with `bench/baselines/hot_path.json` and exits with status 1 when a gated stage grew
//! (instructions by more than the tolerance, allocations at all); it names stages that dropped,
//! so that the baseline can be lowered. Method and figures: docs/BENCHMARKS.md.

mod gate;
mod grind;
mod meter;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use pgpipe_bench::alloc;

use crate::gate::{compare, Baseline, PerUnit, Stage, Toolchain, Verdict, STAGES};
use crate::grind::Sample;
use crate::workload::Workload;

/// Counts every allocation; the markers attribute them (`meter.rs`).
#[global_allocator]
static ALLOC: alloc::CountingAlloc = alloc::CountingAlloc;

/// The workload thread's stack.
const WORKLOAD_STACK: usize = 8 << 20;

const USAGE: &str = "\
pgpipe-icount: instructions and allocations per unit of pgpipe's hot path, under callgrind

usage: cargo run --release -p pgpipe-bench --bin pgpipe-icount -- [options]

  (no option)        measure the gated stages, compare with the baseline; exit 1 if one grew
  --update           measure and rewrite the baseline with the figures (stages not measured
                     this time keep their entries)
  --compare          also measure tokio-postgres on the same workload (reported, never gated)
  --stages LIST      only these stages (comma-separated; see the report for names)
  --repeat N         measure everything N times and print the spread (determinism check);
                     the gate then uses the highest figure, --update the median
  --baseline PATH    another baseline file (default: bench/baselines/hot_path.json)
  run WORKLOAD UNITS run one workload natively, printing its allocations (what callgrind runs);
                     workloads: encode, drain, decode, pgpipe, tokio-postgres

exit status: 0 passed (or baseline written), 1 a gated stage grew, 2 usage or measuring failed
";

struct Options {
    update: bool,
    compare: bool,
    stages: Option<Vec<String>>,
    repeat: usize,
    baseline: PathBuf,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("run") {
        return run_one(&args[1..]);
    }
    let mut o = Options {
        update: false,
        compare: false,
        stages: None,
        repeat: 1,
        baseline: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/baselines/hot_path.json"
        )),
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next().unwrap_or_else(|| {
                eprintln!("{name} needs a value\n\n{USAGE}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--update" => o.update = true,
            "--compare" => o.compare = true,
            "--stages" => {
                o.stages = Some(value("--stages").split(',').map(str::to_owned).collect())
            }
            "--repeat" => match value("--repeat").parse() {
                Ok(n) if n >= 1 => o.repeat = n,
                _ => return usage("--repeat takes a number of at least 1"),
            },
            "--baseline" => o.baseline = PathBuf::from(value("--baseline")),
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown option {other}")),
        }
    }
    match gate(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("pgpipe-icount: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("{msg}\n\n{USAGE}");
    ExitCode::from(2)
}

/// `run WORKLOAD UNITS`: one run, with the report line the gate reads.
fn run_one(args: &[String]) -> ExitCode {
    let (Some(w), Some(units)) = (
        args.first().and_then(|n| Workload::from_name(n)),
        args.get(1).and_then(|u| u.parse::<u32>().ok()),
    ) else {
        return usage("run takes a workload and a number of units");
    };
    if units == 0 || !w.valid_units(units) {
        return usage(&format!(
            "{units} is not a whole number of {} steps",
            w.name()
        ));
    }
    // On a thread of its own: its stack starts at the same offset in a fresh mapping whatever
    // the environment and the program's path (which the main thread's stack holds), and its
    // heap is a fresh arena. Both matter: `memcpy` of a moved future takes a path by alignment,
    // and a longer environment moved the caller's count by 0.3% on the main thread.
    std::thread::Builder::new()
        .name("workload".into())
        .stack_size(WORKLOAD_STACK)
        .spawn(move || w.run(units))
        .expect("spawn the workload thread")
        .join()
        .expect("the workload panicked");
    let m = &meter::UNIT;
    println!(
        "{}",
        grind::report_line(
            units,
            &[
                ("unit", m.get()),
                ("caller", meter::CALLER.get()),
                ("task", meter::TASK.get()),
                ("io", meter::IO.get()),
                ("all", alloc::allocations()),
            ],
        )
    );
    ExitCode::SUCCESS
}

/// Measures, prints the report and compares (or updates). `Ok(false)`: a gated stage grew.
fn gate(o: &Options) -> Result<bool, String> {
    let started = Instant::now();
    let env = Toolchain {
        valgrind: grind::valgrind_version().map_err(|e| e.to_string())?,
        rustc: command_line("rustc", &["-V"]),
        libc: command_line("getconf", &["GNU_LIBC_VERSION"]),
    };
    let stages: Vec<&Stage> = STAGES
        .iter()
        .filter(|s| match &o.stages {
            Some(names) => names.iter().any(|n| n == s.name),
            None => o.compare || s.workload != Workload::TokioPostgres,
        })
        .collect();
    if let Some(names) = &o.stages {
        if let Some(bad) = names.iter().find(|n| !STAGES.iter().any(|s| s.name == *n)) {
            return Err(format!("no stage named {bad}"));
        }
    }
    // Read before measuring: a missing or broken baseline fails at once, not after the runs
    // (`--update` writes one whatever is there).
    let old = Baseline::load(&o.baseline);
    if let (false, Err(e)) = (o.update, &old) {
        return Err(e.clone());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = std::env::temp_dir().join(format!("pgpipe-icount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    // Per stage, its figures from each repetition.
    let mut figures: Vec<Vec<PerUnit>> = vec![Vec::new(); stages.len()];
    let mut workloads: Vec<Workload> = stages.iter().map(|s| s.workload).collect();
    workloads.dedup();
    let mut measure_all = || -> Result<(), String> {
        for rep in 0..o.repeat {
            for &w in &workloads {
                let (small, large) = w.sizes();
                let a: Sample = grind::measure(&exe, &dir, w, small).map_err(|e| e.to_string())?;
                let b: Sample = grind::measure(&exe, &dir, w, large).map_err(|e| e.to_string())?;
                for (i, s) in stages.iter().enumerate().filter(|(_, s)| s.workload == w) {
                    figures[i].push(s.per_unit((small, &a), (large, &b)));
                }
            }
            if o.repeat > 1 {
                eprintln!("repetition {} of {} done", rep + 1, o.repeat);
            }
        }
        Ok(())
    };
    let measured = measure_all();
    // Callgrind's files are large; the directory goes whether or not a run failed.
    let _ = std::fs::remove_dir_all(&dir);
    measured?;

    let measured: Vec<(&Stage, PerUnit)> = stages
        .iter()
        .zip(&figures)
        .map(|(s, f)| (*s, pick(f, o.update)))
        .collect();
    print_report(o, &stages, &figures, old.as_ref().ok());

    if o.update {
        let b = Baseline::updated(old.ok(), &env, &measured);
        b.save(&o.baseline)?;
        println!("baseline written: {}", o.baseline.display());
        println!("took {:.1} s", started.elapsed().as_secs_f64());
        return Ok(true);
    }
    let base = old?;
    if !env.matches(&base) {
        println!(
            "note: the baseline was measured with {}, {}, {}; this is {}, {}, {}. Instruction \
             counts depend on these: if only they changed, re-baseline (--update).",
            base.rustc, base.valgrind, base.libc, env.rustc, env.valgrind, env.libc
        );
    }
    let mut ok = true;
    for (s, m) in &measured {
        let entry = base.stages.get(s.name);
        match compare(*m, entry, base.instructions_tolerance_pct) {
            Verdict::Same => {}
            Verdict::Grew(why) if s.gated => {
                ok = false;
                println!("FAIL {}: {why}", s.name);
            }
            Verdict::Grew(why) => println!("note {} (not gated): {why}", s.name),
            Verdict::Dropped(why) => println!(
                "lower the baseline: {} dropped ({why}); rerun with --update and commit it",
                s.name
            ),
            Verdict::New if s.gated => {
                ok = false;
                println!("FAIL {}: not in the baseline; add it with --update", s.name);
            }
            Verdict::New => println!("note {}: not in the baseline", s.name),
        }
    }
    println!(
        "{} (took {:.1} s)",
        if ok {
            "instruction-count gate passed"
        } else {
            "instruction-count gate FAILED: fix the growth, or if it is intended, rerun with --update and commit the baseline"
        },
        started.elapsed().as_secs_f64()
    );
    Ok(ok)
}

/// The figure a stage's repetitions stand for: the highest for the gate (any growth shows),
/// the median for a new baseline.
fn pick(f: &[PerUnit], update: bool) -> PerUnit {
    let mut by_instr = f.to_vec();
    by_instr.sort_by(|a, b| a.instructions.total_cmp(&b.instructions));
    let mut by_alloc = f.to_vec();
    by_alloc.sort_by(|a, b| a.allocations.total_cmp(&b.allocations));
    let i = if update { f.len() / 2 } else { f.len() - 1 };
    PerUnit {
        instructions: by_instr[i].instructions,
        allocations: by_alloc[i].allocations,
    }
}

fn print_report(o: &Options, stages: &[&Stage], figures: &[Vec<PerUnit>], base: Option<&Baseline>) {
    println!(
        "{:<22} {:>12} {:>12} {:>8} {:>10} {:>10}{}",
        "stage (per unit)",
        "instructions",
        "baseline",
        "change",
        "allocs",
        "baseline",
        if o.repeat > 1 {
            "   spread (instr, allocs)"
        } else {
            ""
        }
    );
    for (s, f) in stages.iter().zip(figures) {
        let m = pick(f, o.update);
        let entry = base.and_then(|b| b.stages.get(s.name));
        let (bi, change, ba) = match entry {
            Some(e) if e.instructions > 0.0 => (
                format!("{:.1}", e.instructions),
                format!(
                    "{:+.2}%",
                    (m.instructions - e.instructions) / e.instructions * 100.0
                ),
                format!("{:.3}", e.allocations),
            ),
            Some(e) => (
                format!("{:.1}", e.instructions),
                "-".into(),
                format!("{:.3}", e.allocations),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let spread = if o.repeat > 1 {
            let (lo, hi) = f.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (lo.min(p.instructions), hi.max(p.instructions))
            });
            let (alo, ahi) = f.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (lo.min(p.allocations), hi.max(p.allocations))
            });
            let runs: Vec<String> = f.iter().map(|p| format!("{:.1}", p.instructions)).collect();
            format!(
                "   {:.3}%, {:.3} [{}]",
                (hi - lo) / lo.max(1.0) * 100.0,
                ahi - alo,
                runs.join(" ")
            )
        } else {
            String::new()
        };
        println!(
            "{:<22} {:>12.1} {:>12} {:>8} {:>10.3} {:>10}{}{}",
            s.name,
            m.instructions,
            bi,
            change,
            m.allocations,
            ba,
            if s.gated { "" } else { "  (reported)" },
            spread
        );
    }
}

/// The first line a command prints (a version), or `<program> (unknown)`. `rustc` is the
/// one cargo uses (`$RUSTC`) when set.
fn command_line(program: &str, args: &[&str]) -> String {
    let program = match program {
        "rustc" => std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned()),
        p => p.to_owned(),
    };
    std::process::Command::new(&program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            let out = String::from_utf8_lossy(&o.stdout);
            out.lines().next().map(|l| l.trim().to_owned())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("{program} (unknown)"))
}
