//! The command line: its usage text, the flags parsed and checked, and what an entry's name
//! (`NAME[:option...][#tag]`) and an endpoint's name stand for.

use std::path::PathBuf;

use pgpipe_web::server::Variant;

/// The `--help` text.
const USAGE: &str = "usage: web-bench [--quick] [--rounds N] [--warmup S] [--duration S] \
[--connections C] [--wrk-threads T] [--variants a,b,..] [--endpoints db,queries,fortunes,updates] \
[--queries Q] [--max-connections K] [--pgpipe-options k=v&..] [--syscalls] [--sched-autogroup off|keep] \
[--out-dir DIR] [--svg-dir DIR] [--update-docs] [--url URL]
       web-bench --replot target/web-bench/web-bench-N.json [--svg-dir DIR]  (charts of a saved run)
  variants: pgpipe-glommio, pgpipe-tokio-axum, axum-deadpool, axum-tokio-postgres, each with
  options NAME[:cN][:mK][:wM][:sU][:unpinned] (connections, pgpipe max_connections, max_in_flight,
  µs a glommio executor spins before it sleeps, glommio executors not pinned) and a #tag to
  enter one again (the A/A control).
  Default: all four plus pgpipe-glommio#2. Results and charts go to --out-dir (target/web-bench);
  --update-docs writes the charts to docs/bench/ instead (the committed report).
  --syscalls counts the server's system calls (and io_uring_enter calls) per request with
  `perf stat` (needs perf and root; off by default, since counting costs each call a little).
  --sched-autogroup off switches the kernel's autogroup scheduling off for the run and back on
  after it (needs root); keep (the default) measures the machine as it is. With it on, every
  PostgreSQL backend is scheduled as a session of its own against the server and wrk (see
  docs/BENCHMARKS.md, \"Autogroup\"); the report says which way the run measured.
  web-bench serve ... runs one server (what the benchmark starts as its child).";

/// The command line, parsed: a field per flag (see `USAGE`), the defaults (or `--quick`'s)
/// where not given.
pub(crate) struct Args {
    quick: bool,
    pub(crate) rounds: usize,
    pub(crate) warmup: u64,
    pub(crate) duration: u64,
    pub(crate) connections: usize,
    pub(crate) wrk_threads: usize,
    pub(crate) entries: Vec<String>,
    pub(crate) endpoints: Vec<String>,
    pub(crate) queries: usize,
    pub(crate) max_connections: Option<usize>,
    pub(crate) pgpipe_options: Option<String>,
    pub(crate) syscalls: bool,
    pub(crate) autogroup_off: bool,
    pub(crate) out_dir: PathBuf,
    pub(crate) svg_dir: PathBuf,
    update_docs: bool,
    pub(crate) url: Option<String>,
    pub(crate) replot: Option<PathBuf>,
}

/// Parses the arguments after the program's name; `Err` with the usage text for `--help`.
pub(crate) fn parse_args(raw: &[String]) -> Result<Args, String> {
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
        syscalls: false,
        autogroup_off: false,
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
            "--syscalls" => a.syscalls = true,
            "--sched-autogroup" => {
                a.autogroup_off = pgpipe_tests::autogroup::parse_flag(&value()?)?
            }
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
pub(crate) fn variant_of(entry: &str) -> Result<Variant, String> {
    let base = entry.split('#').next().unwrap_or(entry);
    base.split(':').next().unwrap_or(base).parse()
}

/// The `serve` flags of an entry's options: `cN` connections (pgpipe: `pipeline_size`, per
/// core on glommio; deadpool: pool size; tokio-postgres: clients), `mK` pgpipe's
/// `max_connections`, `wM` pgpipe's `max_in_flight`, `sU` glommio's spin before park in µs,
/// `unpinned` (glommio executors not pinned).
pub(crate) fn entry_flags(entry: &str) -> Result<Vec<String>, String> {
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
        } else if let Some(n) = opt.strip_prefix('s') {
            flags.extend(["--spin-before-park".to_string(), num(n)?]);
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
pub(crate) fn endpoint_path(name: &str, q: usize) -> (String, String) {
    match name {
        "queries" | "updates" => (format!("/{name}?q={q}"), format!("{name}-{q}")),
        other => (format!("/{other}"), other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{entry_flags, USAGE};
    use std::time::Duration;

    #[test]
    fn entry_options_become_serve_flags() {
        let flags = entry_flags("pgpipe-glommio:c2:s50:unpinned#2").expect("valid options");
        let want = [
            "--connections",
            "2",
            "--spin-before-park",
            "50",
            "--unpinned",
        ];
        assert_eq!(flags, want);
        assert!(entry_flags("pgpipe-glommio:sx").is_err());
        assert!(entry_flags("pgpipe-glommio:q1").is_err());

        // The flags are ones `web serve` takes, with the meaning the usage gives them.
        let mut serve: Vec<String> = ["--variant", "pgpipe-glommio", "--url", "postgres://x/y"]
            .map(String::from)
            .into();
        serve.extend(flags);
        let opts = pgpipe_web::server::parse_serve_args(&serve).expect("serve takes them");
        assert_eq!(opts.connections, 2);
        assert_eq!(opts.spin_before_park, Some(Duration::from_micros(50)));
        assert!(!opts.pin);
    }

    #[test]
    fn the_benchmarks_doc_quotes_the_usage_s_entry_options() {
        let syntax = "NAME[:cN][:mK][:wM][:sU][:unpinned]";
        assert!(USAGE.contains(syntax));
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/BENCHMARKS.md"
        ))
        .expect("docs/BENCHMARKS.md");
        assert!(doc.contains(&format!("`{syntax}[#tag]`")));
    }
}
