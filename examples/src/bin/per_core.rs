//! Thread-per-core on glommio: one executor per core, one pgpipe service per executor, nothing
//! shared between them. 10,000 tasks are spread over the cores; each core reports its
//! throughput and the fill ratios of its own connections.
//!
//! ```text
//! cargo run --release -p pgpipe-examples --bin per_core -- [--tasks N] [--queries Q] [--pipeline-size P]
//! ```
//! With `DATABASE_URL` (a `postgres://` URL) it uses that server; otherwise it starts a
//! throwaway PostgreSQL cluster and removes it afterwards. Needs io_uring (see
//! `pgpipe_glommio::check_io_uring`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use glommio::{CpuSet, LocalExecutorBuilder, LocalExecutorPoolBuilder, PoolPlacement};
use pgpipe::{Config, Error};

struct Args {
    tasks: usize,
    queries: usize,
    pipeline_size: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        tasks: 10_000,
        queries: 10,
        pipeline_size: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match flag.as_str() {
            "--tasks" => a.tasks = val("--tasks")?,
            "--queries" => a.queries = val("--queries")?,
            "--pipeline-size" => a.pipeline_size = val("--pipeline-size")?,
            "-h" | "--help" => {
                return Err("usage: per_core [--tasks N] [--queries Q] [--pipeline-size P]".into())
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

const ACCOUNTS: i32 = 100_000;

/// What one core reports.
struct CoreReport {
    shard: usize,
    executor: usize,
    cpu: Option<usize>,
    tasks: usize,
    queries: u64,
    errors: u64,
    seconds: f64,
    units_per_readable: f64,
    writes_per_unit: f64,
    ready_per_unit: f64,
    /// Every unit had a ReadyForQuery of its own or shared one (Sync coalescing).
    accounted: bool,
    connections: usize,
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    if let Err(e) = pgpipe_glommio::check_io_uring() {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let (_cluster, url) = pgpipe_examples::database();
    let mut cfg = Config::parse(&url).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    cfg.pipeline_size = args.pipeline_size;
    if let Err(e) = setup(cfg.clone()) {
        eprintln!("setup failed: {e}");
        std::process::exit(1);
    }

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "pgpipe per_core: {} tasks x {} queries over {cores} cores, one service of {} connections per core",
        args.tasks, args.queries, args.pipeline_size
    );
    let (tasks, queries) = (args.tasks, args.queries);
    let next_rank = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    // MaxSpread: one executor per core, each bound to its own CPU.
    let results =
        LocalExecutorPoolBuilder::new(PoolPlacement::MaxSpread(cores, CpuSet::online().ok()))
            .on_all_shards(move || {
                // Each shard claims a rank once, at start; after that nothing is shared across cores.
                let rank = next_rank.fetch_add(1, Ordering::Relaxed);
                async move { run_shard(cfg, rank, cores, tasks, queries).await }
            })
            .unwrap_or_else(|e| {
                eprintln!("cannot build the executor pool: {e}");
                std::process::exit(1)
            })
            .join_all();
    let elapsed = started.elapsed().as_secs_f64();

    let (mut total, mut failed) = (0u64, false);
    let mut reports: Vec<CoreReport> = Vec::new();
    for r in results {
        match r {
            Ok(Ok(rep)) => reports.push(rep),
            Ok(Err(e)) => {
                eprintln!("a shard failed: {e}");
                failed = true;
            }
            Err(e) => {
                eprintln!("an executor failed: {e}");
                failed = true;
            }
        }
    }
    reports.sort_by_key(|r| r.shard);
    println!(
        "{:>5} {:>8} {:>4} {:>6} {:>5} {:>8} {:>6} {:>10} {:>18} {:>15} {:>14}",
        "shard",
        "executor",
        "cpu",
        "tasks",
        "conns",
        "queries",
        "errors",
        "queries/s",
        "units_per_readable",
        "writes_per_unit",
        "ready_per_unit"
    );
    for r in &reports {
        total += r.queries;
        failed |= r.errors > 0 || !r.accounted;
        println!(
            "{:>5} {:>8} {:>4} {:>6} {:>5} {:>8} {:>6} {:>10.0} {:>18.2} {:>15.3} {:>14.3}",
            r.shard,
            r.executor,
            r.cpu.map_or("?".into(), |c| c.to_string()),
            r.tasks,
            r.connections,
            r.queries,
            r.errors,
            r.queries as f64 / r.seconds,
            r.units_per_readable,
            r.writes_per_unit,
            r.ready_per_unit
        );
    }
    println!(
        "total {total} queries in {elapsed:.2} s: {:.0} queries/s over {} executors",
        total as f64 / elapsed,
        reports.len()
    );
    let mut cpus: Vec<_> = reports.iter().filter_map(|r| r.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() == reports.len() {
        println!("one executor per core: CPUs {cpus:?}");
    }
    if failed || reports.len() != cores {
        std::process::exit(1);
    }
}

/// Creates and fills the accounts table once, before the shards start (so they do not race on
/// DDL), on a throwaway executor.
fn setup(cfg: Config) -> Result<(), Error> {
    let joined = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let db = pgpipe_glommio::connect_with(cfg).await?;
            let s = db.session().await?;
            s.batch_execute(
                "CREATE TABLE IF NOT EXISTS pgpipe_accounts (aid int4 PRIMARY KEY, abalance int4 NOT NULL)",
            )
            .await?;
            s.execute(
                "INSERT INTO pgpipe_accounts SELECT g, g % 1000 FROM generate_series(1, $1::int4) g \
                 ON CONFLICT DO NOTHING",
                &[&ACCOUNTS],
            )
            .await?;
            drop(s);
            db.close().await;
            Ok::<(), Error>(())
        })
        .and_then(|h| h.join());
    joined.map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?
}

/// One core: its own client, its share of the tasks (every `shards`-th one from `rank`), its
/// own stats.
async fn run_shard(
    cfg: Config,
    rank: usize,
    shards: usize,
    tasks: usize,
    queries: usize,
) -> Result<CoreReport, Error> {
    let db = pgpipe_glommio::connect_with(cfg).await?;
    let mine: Vec<usize> = (rank..tasks).step_by(shards).collect();
    let started = Instant::now();
    let handles: Vec<_> = mine
        .iter()
        .map(|&t| {
            let db = db.clone();
            glommio::spawn_local(async move {
                let (mut ok, mut errors) = (0u64, 0u64);
                let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9);
                for _ in 0..queries {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let aid = (x % ACCOUNTS as u64) as i32 + 1;
                    match db
                        .query_one(
                            "SELECT abalance FROM pgpipe_accounts WHERE aid = $1",
                            &[&aid],
                        )
                        .await
                    {
                        Ok(row) if row.get::<_, i32>(0) == aid % 1000 => ok += 1,
                        _ => errors += 1,
                    }
                }
                (ok, errors)
            })
        })
        .collect();
    let (mut ok, mut errors) = (0, 0);
    for h in handles {
        let (o, e) = h.await;
        ok += o;
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    let s = db.stats();
    db.close().await;
    Ok(CoreReport {
        shard: rank,
        executor: glommio::executor().id(),
        cpu: current_cpu(),
        tasks: mine.len(),
        queries: ok,
        errors,
        seconds,
        units_per_readable: s.total.units_per_readable(),
        writes_per_unit: s.total.writes_per_unit(),
        ready_per_unit: s.total.ready_per_unit(),
        accounted: s.total.ready_accounts_for_every_unit(),
        connections: s.open_base + s.open_lanes + s.open_overflow,
    })
}

/// The CPU this thread last ran on (field 39 of `/proc/thread-self/stat`).
fn current_cpu() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}
