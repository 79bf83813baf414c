//! The command line: its usage text, the flags parsed and checked, the settings they give and
//! the plan they pick (the default set, or the cross product of explicit selections).

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::bulk;
use crate::plan::{self, Candidate, Delay, Load, Scenario, Settings, Workload};

/// The `--help` text.
pub(crate) const USAGE: &str = "\
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
  --sched-autogroup off|keep  off: switch the kernel's autogroup scheduling off for the run and
                          back on after it (needs root); keep (default): the machine as it is.
                          Either way the report's machine line says which (docs/BENCHMARKS.md,
                          Autogroup)
  --sample-host-memory    beside every run, a sampler process times a short pointer chase every
                          50 ms (about 1.5% of one core); the report relates each run's
                          throughput to the median (docs/BENCHMARKS.md, Host speed)
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

/// The command line, parsed: a field per flag (see [`USAGE`]); `None` where not given.
pub(crate) struct Args {
    pub(crate) quick: bool,
    pub(crate) url: Option<String>,
    pub(crate) sslrootcert: Option<PathBuf>,
    pub(crate) scenarios: Option<Vec<String>>,
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
    pub(crate) out: Option<PathBuf>,
    pub(crate) svg_dir: Option<PathBuf>,
    pub(crate) no_svg: bool,
    pub(crate) autogroup_off: bool,
    /// `--sample-host-memory`: a sampler process beside every run.
    pub(crate) sample_memory: bool,
    pub(crate) update_docs: bool,
    pub(crate) list: bool,
}

fn list<T>(v: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(f)
        .collect()
}

/// Parses the arguments after the program's name; `Err` with an empty message for `--help`.
pub(crate) fn parse_args(argv: &[String]) -> Result<Args, String> {
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
        autogroup_off: false,
        sample_memory: false,
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
            "--sched-autogroup" => a.autogroup_off = pgpipe_tests::autogroup::parse_flag(&val()?)?,
            "--sample-host-memory" => a.sample_memory = true,
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

/// The plan's knobs: the flags given, the defaults (or `--quick`'s) for the rest.
pub(crate) fn settings(a: &Args) -> Settings {
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

/// The scenarios to run: the default set or the cross product of the selections, with
/// `--candidates` and `--scenarios` applied.
pub(crate) fn build_plan(a: &Args, s: &Settings) -> Vec<Scenario> {
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

/// The arguments of a command line written as one string (`"--quick --no-svg"`), for tests.
#[cfg(test)]
pub(crate) fn args(s: &str) -> Args {
    let v: Vec<String> = s.split_whitespace().map(String::from).collect();
    parse_args(&v).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
    fn outputs_and_memory_flags_are_checked() {
        assert!(parse_args(&["--quick".into(), "--update-docs".into()]).is_err());
        assert!(!args("").sample_memory);
        assert!(args("--sample-host-memory").sample_memory);
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
