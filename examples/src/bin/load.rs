//! The main job for now: 1,000 concurrent tasks of point selects through pgpipe, printing
//! throughput and the fill ratios that say whether pipelining is doing its work.
//!
//! ```text
//! cargo run --release -p pgpipe-examples --bin load -- [--tasks N] [--seconds S] [--pipeline-size P] [--burst N]
//! ```
//! `--burst N` then submits N queries at once (N tasks spawned together) and reports the
//! process's peak resident memory: the mailbox bound makes callers wait instead of growing
//! queues.
//! With `DATABASE_URL` (a `postgres://` URL) it uses that server; otherwise it starts a
//! throwaway PostgreSQL cluster and removes it afterwards.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgpipe::Config;

struct Args {
    tasks: usize,
    seconds: u64,
    pipeline_size: usize,
    burst: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        tasks: 1000,
        seconds: 10,
        pipeline_size: 4,
        burst: 0,
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
            "--seconds" => a.seconds = val("--seconds")? as u64,
            "--pipeline-size" => a.pipeline_size = val("--pipeline-size")?,
            "--burst" => a.burst = val("--burst")?,
            "-h" | "--help" => {
                return Err(
                    "usage: load [--tasks N] [--seconds S] [--pipeline-size P] [--burst N]".into(),
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

const ACCOUNTS: i32 = 100_000;

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let (_cluster, url) = pgpipe_examples::database();
    if let Err(e) = smol::block_on(run(&args, &url)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run(args: &Args, url: &str) -> Result<(), pgpipe::Error> {
    let mut cfg = Config::parse(url)?;
    cfg.pipeline_size = args.pipeline_size;
    let db = pgpipe_smol::connect_with(cfg).await?;
    // DDL is not a shared-path statement (the guard admits only DML): set up on a session.
    let setup = db.session().await?;
    setup
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS pgpipe_accounts (aid int4 PRIMARY KEY, abalance int4 NOT NULL)",
        )
        .await?;
    setup
        .execute(
            "INSERT INTO pgpipe_accounts SELECT g, g % 1000 FROM generate_series(1, $1::int4) g \
             ON CONFLICT DO NOTHING",
            &[&ACCOUNTS],
        )
        .await?;
    drop(setup);

    println!(
        "pgpipe load: {} tasks, {} pipelined connections, {} s of point selects",
        args.tasks, args.pipeline_size, args.seconds
    );
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let before = db.stats().total;
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.tasks)
        .map(|t| {
            let (db, stop, done, errors) = (db.clone(), stop.clone(), done.clone(), errors.clone());
            smol::spawn(async move {
                // A per-task xorshift keeps keys spread without a shared RNG.
                let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9);
                while !stop.load(Ordering::Relaxed) {
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
                        Ok(row) if row.get::<_, i32>(0) == aid % 1000 => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for s in 1..=args.seconds {
        async_io::Timer::after(Duration::from_secs(1)).await;
        let n = done.load(Ordering::Relaxed);
        eprint!(
            "\r{s:>3}s  {n:>10} queries  {:>8.0} q/s",
            n as f64 / started.elapsed().as_secs_f64()
        );
    }
    eprintln!();
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    for t in tasks {
        t.await;
    }
    let after = db.stats();
    let t = &after.total;
    let units = t.units_completed - before.units_completed;
    let readable = t.readable_events - before.readable_events;
    let writes = t.write_calls - before.write_calls;
    println!(
        "throughput          {:>10.0} queries/s ({n} in {elapsed:.1} s)",
        n as f64 / elapsed
    );
    println!("errors              {:>10}", errors.load(Ordering::Relaxed));
    println!(
        "units_per_readable  {:>10.2}",
        units as f64 / readable.max(1) as f64
    );
    println!(
        "writes_per_unit     {:>10.3}",
        writes as f64 / units.max(1) as f64
    );
    println!("ready_per_unit      {:>10.3}", t.ready_per_unit());
    println!("in_flight_peak      {:>10}", t.in_flight_peak);
    println!("queued_peak         {:>10}", t.queued_peak);
    println!(
        "connections         {:>10} (base {}, lanes {}, overflow {})",
        after.open_base + after.open_lanes + after.open_overflow,
        after.open_base,
        after.open_lanes,
        after.open_overflow
    );
    if args.burst > 0 {
        burst(&db, args.burst).await?;
    }
    db.close().await;
    Ok(())
}

/// Submits `n` queries at once and reports time and peak resident memory.
async fn burst(db: &pgpipe_smol::Client, n: usize) -> Result<(), pgpipe::Error> {
    let rss_before = peak_rss_kib();
    let started = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let db = db.clone();
            let aid = (i % ACCOUNTS as usize) as i32 + 1;
            smol::spawn(async move {
                db.query_one(
                    "SELECT abalance FROM pgpipe_accounts WHERE aid = $1",
                    &[&aid],
                )
                .await
                .map(|r| r.get::<_, i32>(0) == aid % 1000)
            })
        })
        .collect();
    let mut ok = 0usize;
    for t in tasks {
        if t.await? {
            ok += 1;
        }
    }
    let s = db.stats().total;
    println!(
        "burst               {n} queries submitted at once: {ok} correct in {:.2} s; peak RSS {} KiB (before the burst {} KiB); queued_peak {} per connection",
        started.elapsed().as_secs_f64(),
        peak_rss_kib(),
        rss_before,
        s.queued_peak
    );
    Ok(())
}

/// The process's peak resident set (VmHWM), in KiB; 0 where /proc is unavailable.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
