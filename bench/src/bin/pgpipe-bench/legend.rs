//! The legend printed with the results (and written into the Markdown report): what each part
//! of a candidate's name and of a scenario's id means, every column of the tables with its
//! unit, and how to read a cell and a goal line. Built from the results, so it explains what
//! this run's tables show and nothing else.

use std::fmt::Write as _;

use crate::plan::{Adapter, Candidate, Delay, Kind, Load, Via, Workload};
use crate::report::{self, ScenarioResult};

/// Whether a candidate has an option.
type Has = fn(&Candidate) -> bool;

/// The heading the legend is printed under (the report's first lines point to it).
pub const TITLE: &str = "How to read these results";

/// What a column of a results table means, with its unit; `None` for a name no table uses.
/// Columns that share a meaning share the text, and the legend lists them together.
pub fn column(name: &str) -> Option<&'static str> {
    Some(match name {
        "candidate" => "the client configuration; its name is its setup (see \"Setup names\").",
        "conns" => {
            "the candidate's server connections at the end of the measured window \
             (pg_stat_activity)."
        }
        "ops/s" => {
            "operations completed per second of the measured window; an op is one query \
             (rw: an UPDATE and a SELECT). In the open loop it is the offered rate when the \
             client keeps up."
        }
        "client CPU µs/op" => {
            "CPU time of the benchmark process (user + system, getrusage) over the window, \
             less the delay proxy's and the arrival generator's threads, per op: what the \
             client library costs, plus the benchmark's own small per-op work (a random key, \
             two clock reads, a histogram record), the same for every candidate."
        }
        "machine CPU µs/op" => {
            "busy CPU of the whole machine (/proc/stat: server, client, proxy, PgBouncer, \
             kernel) over the window, per op. Sampled at timer ticks, so it undercounts a \
             mostly idle machine (open loop)."
        }
        "p50" | "p90" | "p99" | "p99.9" | "p99.99" | "max" => {
            "latency percentiles in ms: p99 = 99% of the ops finished within this time; max = \
             the slowest op. Closed loop: from the op's start; open loop: from the request's \
             scheduled time (a client that falls behind pays for it); pool ceiling: from the \
             batch's start."
        }
        "errors" => {
            "ops that failed or whose answer was wrong, over the whole run (warm-up and drain \
             included), all rounds; must be 0."
        }
        "units/readable" => {
            "fill ratio, pgpipe only: queries completed per read of the socket that returned \
             data (units_per_readable). 1.0 = no batching; higher = fuller pipelines."
        }
        "writes/unit" => {
            "fill ratio, pgpipe only: socket write calls per query (writes_per_unit, the flush \
             ratio). 1.0 = a write per query; well under 1 = many queries per write."
        }
        "bytes/write" => "pgpipe only: plaintext bytes per socket write call.",
        "bytes/TLS record" => {
            "pgpipe over TLS only: plaintext bytes per TLS record written (a record holds at \
             most 16 KiB); fuller records cost less."
        }
        "TLS records/unit" => "pgpipe over TLS only: TLS records written per query.",
        "time to finish ms" => "pool ceiling: ms from starting the whole batch to its last answer.",
        "ideal ms" => {
            "pool ceiling: the batch's queries × 5 ms / connections, the least possible when \
             each connection runs one statement at a time."
        }
        "vs ideal" => "pool ceiling: time to finish / ideal; 1.00x = ideal.",
        "fast p50" | "fast p99" | "fast p99.9" | "fast p99.99" | "fast max" => {
            "hol: latency percentiles in ms of the fast ops alone (the point selects), on the \
             same clock as p50...max."
        }
        "fast samples" => {
            "hol: fast ops measured per round (a p99.99 needs about 10,000 to mean anything)."
        }
        "slow p50" | "slow p99" => {
            "hol: latency percentiles in ms of the slow ops alone (SELECT pg_sleep(0.02))."
        }
        "dropped" => {
            "requests that failed, or were still unfinished 20 s after the window, all rounds."
        }
        "conns avg" | "conns max" => {
            "the candidate's server connections, sampled every 50 ms over the window: their \
             mean and their most."
        }
        "client conns" => {
            "connections the client opened: to PgBouncer (its SHOW CLIENTS), or, straight to \
             the server, the candidate's server connections; many processes: all of them."
        }
        "server conns avg" | "server conns max" => {
            "server connections (every client backend but the benchmark's monitor), sampled \
             every 50 ms over the window: their mean and their most."
        }
        "PgBouncer CPU µs/op" => "PgBouncer's process CPU (user + system) per op.",
        "rows/s" => "rows moved per second.",
        "time s" => "seconds the rows took to move.",
        "client CPU µs/row" | "machine CPU µs/row" => {
            "as client CPU and machine CPU per op, per row moved."
        }
        "peak client heap MiB" => {
            "the most live heap of the benchmark process while the rows moved, less the \
             runtime heap (heap only: not stacks, io_uring rings or socket buffers)."
        }
        "client heap at start MiB" => {
            "the client's part of the heap already live when the rows started to move \
             (connections, buffers, caches)."
        }
        "runtime heap MiB" => "heap live when the run's runtime was ready, before connecting.",
        "tx/s" => {
            "transactions committed per second of the measured window (each: BEGIN, an UPDATE \
             and a SELECT of one account, COMMIT)."
        }
        "client CPU µs/tx" => {
            "as client CPU µs/op, per transaction (pgbench: its own process's CPU)."
        }
        "machine CPU µs/tx" => "as machine CPU µs/op, per transaction.",
        "fairness" => {
            "transactions of the slowest-served task in the window against the median task's \
             (1.00 = every task served alike; the lowest over the rounds). pgbench: per client."
        }
        "slowest/median" => {
            "the in-window transactions of the slowest-served task and of the median task \
             (last round)."
        }
        _ => return None,
    })
}

/// The legend for `scenarios` as Markdown; `goals`: the run printed goal lines.
pub fn legend(scenarios: &[ScenarioResult], goals: bool) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "### {TITLE}\n");
    let cands = || {
        scenarios
            .iter()
            .flat_map(|s| &s.candidates)
            .map(|c| &c.candidate)
    };
    let has = |f: &dyn Fn(&Candidate) -> bool| cands().any(f);

    let _ = writeln!(
        t,
        "**Setup names.** A candidate's name is its configuration: the library (and runtime), \
         its connections N, then options.\n"
    );
    let libraries: [(Kind, &str); 6] = [
        (
            Kind::Pgpipe(Adapter::Smol),
            "`pgpipe-smol-N`: pgpipe on smol with N pipelined connections (`pipeline_size`); \
             each carries many queries in flight at once, and more open on demand up to \
             `max_connections` (16 by default) for slow statements and load.",
        ),
        (
            Kind::Pgpipe(Adapter::Tokio),
            "`pgpipe-tokio-N`: the same on tokio (`pgpipe-tokio`).",
        ),
        (
            Kind::Pgpipe(Adapter::Glommio),
            "`pgpipe-glommio-N`: the same on glommio (io_uring, thread-per-core).",
        ),
        (
            Kind::TokioPostgres,
            "`tokio-postgres-N`: tokio-postgres on N connections, task i always on connection \
             i mod N (open loop: request k on k mod N); it pipelines the concurrent queries \
             of a connection; statements prepared once per connection.",
        ),
        (
            Kind::Deadpool,
            "`deadpool-N`: deadpool-postgres, a classic pool of at most N connections, one \
             query per checked-out connection at a time (`prepare_cached`); a transaction \
             holds its connection from BEGIN to COMMIT, each statement waiting for its answer.",
        ),
        (
            Kind::Pgbench,
            "`pgbench-N`: PostgreSQL's pgbench running the same transaction as a script, N \
             clients on a connection each (`-M prepared`, 2 threads): the server's own rate \
             with a classic client per connection.",
        ),
    ];
    for (kind, text) in libraries {
        if has(&|c| c.kind == kind) {
            let _ = writeln!(t, "- {text}");
        }
    }
    let options: [(Has, &str); 7] = [
        (
            |c| c.max_in_flight.is_some(),
            "`-wM`: pgpipe's `max_in_flight` = M, the most queries in flight on one connection \
             (default 64): at a long round trip it caps a connection's throughput.",
        ),
        (
            |c| c.max_connections.is_some(),
            "`-mK`: pgpipe's `max_connections` = K, the most pipelined connections it may open \
             on demand (default 16); K <= N means exactly N, no elasticity (`pgpipe-tokio-4-m4`).",
        ),
        (
            |c| c.no_fair,
            "`-nofair`: pgpipe with `fair_lanes` off (on by default: while every lane has slow \
             work queued, fast queries wait up to 20 ms for a lane to drain).",
        ),
        (
            |c| c.no_coalesce,
            "`-nocoalesce`: pgpipe with `sync_coalescing` off (on by default: cheap read-only \
             queries share one Sync, up to 16 per Sync, so the server ends one transaction and \
             flushes once for all of them).",
        ),
        (
            |c| c.batch,
            "`-batch`: pgpipe runs each transaction as an atomic batch (`Client::batch`): \
             both statements in one unit on a shared connection, one implicit transaction, \
             one round trip, no exclusive connection. Without it, `transaction()`: an \
             exclusive connection, BEGIN riding with the UPDATE and COMMIT with the SELECT \
             (`query_and_commit`), two round trips.",
        ),
        (
            |c| c.tls,
            "`-tls`: over TLS, the server's certificate chain and host name verified (pgpipe \
             `sslmode=verify-full`; tokio-postgres and deadpool through \
             tokio-postgres-rustls). Without it, plaintext.",
        ),
        (
            |c| c.copy > 1,
            "`#2`: the same configuration entered again as a separate candidate, the A/A \
             control. The two should measure alike, so their difference (\"A/A control\" \
             under a table) is this run's noise: a difference between other candidates \
             smaller than that is not a result.",
        ),
    ];
    for (present, text) in options {
        if has(&present) {
            let _ = writeln!(t, "- {text}");
        }
    }
    if let Some(p) = scenarios.iter().map(|s| s.procs).find(|&p| p > 1) {
        let _ = writeln!(
            t,
            "- `{p} × name` (many-process tables): {p} client processes at once, each running \
             `name` with 1/{p} of the tasks."
        );
    }
    let _ = writeln!(
        t,
        "- Charts name a family without its N (`pgpipe-tokio` stands for `pgpipe-tokio-1`, \
         `-2`, `-4`, ...): its line runs over the sizes; a variant with options (`-w`, `-m`, \
         `-tls`) is drawn dashed in its family's colour.\n"
    );

    let _ = writeln!(
        t,
        "**Scenario ids.** `[tag-]workload-load-delay`, e.g. `point-closed-1000-direct`; the \
         line under each heading says it in words.\n"
    );
    let mut seen: Vec<String> = Vec::new();
    let mut once = |t: &mut String, key: String, text: String| {
        if !seen.contains(&key) {
            let _ = writeln!(t, "- {text}");
            seen.push(key);
        }
    };
    for s in scenarios {
        if let Some(tag) = &s.tag {
            once(&mut t, format!("tag {tag}"), tag_text(tag, s));
        }
    }
    for s in scenarios {
        let w = s.workload.label();
        once(
            &mut t,
            format!("w {w}"),
            format!("`{w}`: {}", workload_text(s.workload)),
        );
    }
    for s in scenarios {
        let (key, text) = load_text(s.load);
        once(&mut t, key, text);
    }
    for s in scenarios {
        let text = match s.delay_kind {
            Delay::Direct => "`direct`: straight to the server, no proxy.".to_string(),
            Delay::Proxy(d) if d.is_zero() => format!(
                "`{}`: through the delay proxy with no delay added: the proxy's own cost.",
                s.delay
            ),
            Delay::Proxy(d) => {
                let ms = d.as_secs_f64() * 1e3;
                format!(
                    "`{}`: through the delay proxy, {ms} ms added each way ({} ms more per \
                     round trip).",
                    s.delay,
                    2.0 * ms
                )
            }
        };
        once(&mut t, format!("d {}", s.delay), text);
    }
    t.push('\n');

    let _ = writeln!(
        t,
        "**Cells.** Each figure is the median over the rounds, followed by (min–max) where \
         the rounds differ. – = not measured for this candidate (the fill ratios are pgpipe's \
         own counters); `failed: ...` = no round of it completed.\n"
    );
    let _ = writeln!(t, "**Columns**, in the order the tables use them:\n");
    // Every column of every table shown, each meaning once, its columns named together.
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for s in scenarios {
        for col in report::columns(s) {
            let Some(text) = column(col) else { continue };
            match groups.iter_mut().find(|(m, _)| *m == text) {
                Some((_, cols)) if cols.contains(&col) => {}
                Some((_, cols)) => cols.push(col),
                None => groups.push((text, vec![col])),
            }
        }
    }
    for (text, cols) in &groups {
        let names: Vec<String> = cols.iter().map(|c| format!("`{c}`")).collect();
        let _ = writeln!(t, "- {}: {text}", names.join(", "));
    }
    let _ = writeln!(
        t,
        "\n**Units.** ops/s, rows/s: per second; µs/op, µs/row: microseconds of CPU per \
         operation or row; ms: milliseconds; s: seconds; MiB: 2^20 bytes; 1.80x: a ratio; \
         %: percent.\n"
    );
    if goals {
        let _ = writeln!(
            t,
            "**Goals.** Each goal line compares medians and says **met**, **NOT met**, **n/a** \
             (not measured in this run), **parity within noise** (the ratio is closer to its \
             goal than the A/A spread: the run cannot tell) or **for context** (no goal). \
             \"best\" = the candidate of that family with the highest median throughput; A/A \
             duplicates are never picked.\n"
        );
    }
    t
}

fn workload_text(w: Workload) -> &'static str {
    match w {
        Workload::Point => "point select of one account by random key.",
        Workload::PointId => {
            "point select returning its key, checked against the key asked for (a wrong \
             answer counts as an error)."
        }
        Workload::Select1 => "`SELECT 1`.",
        Workload::ReadWrite => {
            "UPDATE of a random account, then the point select of it: 1 op = 2 statements."
        }
        Workload::Sleep => {
            "pool ceiling: a batch of concurrent `SELECT pg_sleep(0.005)` at each pool size; \
             the figure is the time to finish them all."
        }
        Workload::Hol => {
            "head-of-line mix: 99% point selects (the fast ops) and 1% `SELECT \
             pg_sleep(0.02)` (the slow ops) on the same client."
        }
        Workload::CopyIn => "binary COPY FROM STDIN of generated (int8, text, float8) rows.",
        Workload::CopyOut => "binary COPY TO STDOUT of such rows, each decoded.",
        Workload::Stream => "the same rows as a streamed SELECT, each decoded.",
        Workload::Tx => {
            "a transaction per op: BEGIN; UPDATE of a random account's balance (+1); SELECT \
             of that balance; COMMIT. After each run every balance is checked against the \
             transactions committed (a mismatch counts as an error)."
        }
    }
}

fn load_text(l: Load) -> (String, String) {
    match l {
        Load::Closed { tasks } => (
            "closed".into(),
            format!(
                "`closed-{tasks}`: closed loop, {tasks} tasks, each issuing its next op when \
                 its last one completes."
            ),
        ),
        Load::Open { rate } => (
            "open".into(),
            format!(
                "`open-{}`: open loop, {} arrivals/s on a fixed schedule, whether or not the \
                 client keeps up.",
                rate as u64, rate as u64
            ),
        ),
        Load::Ceiling { queries } => (
            "batch".into(),
            format!("`batch-{queries}`: {queries} queries started at once."),
        ),
        Load::Rows { rows } => (
            "rows".into(),
            format!("`rows-{rows}`: {rows} rows moved per run, by one caller on one connection."),
        ),
    }
}

fn tag_text(tag: &str, s: &ScenarioResult) -> String {
    let what = if tag == "tls" {
        "the headline's point selects with plaintext and `-tls` candidates side by side."
            .to_string()
    } else if s.via == Via::PgBouncer && s.procs > 1 {
        format!(
            "{} client processes at once through PgBouncer (transaction mode, pool {}).",
            s.procs,
            crate::plan::PGBOUNCER_POOL
        )
    } else if s.via == Via::PgBouncer {
        format!(
            "through PgBouncer in transaction mode (pool {}), statements unnamed.",
            crate::plan::PGBOUNCER_POOL
        )
    } else if s.procs > 1 {
        format!(
            "{} client processes at once, straight to the server.",
            s.procs
        )
    } else {
        format!("{}.", s.describe())
    };
    format!("`{tag}-` (tag): {what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Measurement;
    use crate::plan::{default_plan, Settings};
    use crate::report::Rounds;

    /// Results of the default plan (and `--quick`'s) with one made-up round per candidate.
    fn results(quick: bool) -> Vec<ScenarioResult> {
        let s = Settings {
            rate: 10_000.0,
            ceiling_queries: 600,
            ..Settings::tiny()
        };
        default_plan(&s, quick)
            .iter()
            .map(|sc| {
                let runs: Vec<Rounds> = sc
                    .candidates
                    .iter()
                    .map(|c: &Candidate| {
                        let m = Measurement {
                            throughput: 100.0,
                            ..Measurement::default()
                        };
                        (c.clone(), vec![m], Vec::new())
                    })
                    .collect();
                ScenarioResult::new(sc, runs)
            })
            .collect()
    }

    #[test]
    fn every_column_shown_is_explained() {
        for quick in [false, true] {
            let all = results(quick);
            let text = legend(&all, true);
            for s in &all {
                // The header line of the printed table is exactly the columns explained.
                let table = report::scenario_table(s, 1);
                let head = table
                    .lines()
                    .find(|l| l.starts_with("| candidate"))
                    .unwrap();
                let cols: Vec<&str> = head.trim_matches('|').split(" | ").map(str::trim).collect();
                assert_eq!(cols, report::columns(s), "{}", s.id);
                for c in cols {
                    assert!(column(c).is_some(), "column {c:?} of {} unexplained", s.id);
                    assert!(text.contains(&format!("`{c}`")), "{c:?} not in the legend");
                }
            }
        }
    }

    #[test]
    fn every_name_part_shown_is_explained() {
        let all = results(false);
        let text = legend(&all, true);
        for part in [
            "`pgpipe-smol-N`",
            "`pgpipe-tokio-N`",
            "`pgpipe-glommio-N`",
            "`tokio-postgres-N`",
            "`deadpool-N`",
            "`-wM`",
            "`-mK`",
            "`-tls`",
            "`#2`",
            "`8 × name`",
            "`tls-`",
            "`pgbouncer-`",
            "`procs8-`",
            "`pgbouncer-procs8-`",
            "`hol`",
            "`ceiling`",
            "`closed-1000`",
            "`open-10000`",
            "`batch-600`",
            "`rows-100`",
            "`direct`",
            "`5ms`",
            "`1ms`",
        ] {
            assert!(text.contains(part), "{part} missing from the legend");
        }
        // Only what the run shows: no -nofair candidate in the default set.
        assert!(!text.contains("`-nofair`"));
    }
}
