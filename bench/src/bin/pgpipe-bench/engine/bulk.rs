//! The bulk workloads: `COPY ... FROM STDIN` and `COPY ... TO STDOUT` in the binary format, and a
//! streamed `SELECT`, each moving `copy_rows` rows of (int8, text, float8) on one connection the
//! caller has to itself (pgpipe: a session; tokio-postgres: its connection).
//!
//! A run measures rows per second, client CPU per row and the client's peak heap while the rows
//! move: the process's live heap bytes (`pgpipe_bench::alloc::TrackingAlloc`, switched on for
//! the whole run by `engine::run`) minus those its runtime held before the client connected
//! ([`runtime_ready`]), reported apart. Every row really moves and is checked: the rows written are generated
//! one at a time (nothing is materialised up front, which would count as client memory), the
//! server's count after a COPY in must match `finish()`'s and the generated rows' sums, and
//! every row read is decoded and summed, the sums compared with what the source table holds.

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use pgpipe::types::Type;
use pgpipe_bench::alloc;
use pgpipe_bench::sys::{self, MachineCpu};

use crate::engine::{Db, Job, Measurement};
use crate::plan::Workload;

/// The rows read by COPY out and the stream: loaded once by the benchmark (`tables.rs`).
pub const SOURCE_TABLE: &str = "pgpipe_bench_copy_src";
/// Where COPY in writes; emptied before each COPY in run.
pub const TARGET_TABLE: &str = "pgpipe_bench_copy_in";
/// The COPY in of the `copy-in` workload.
pub const COPY_IN_SQL: &str =
    "COPY pgpipe_bench_copy_in (id, name, score) FROM STDIN (FORMAT binary)";
/// The COPY out of the `copy-out` workload.
pub const COPY_OUT_SQL: &str =
    "COPY pgpipe_bench_copy_src (id, name, score) TO STDOUT (FORMAT binary)";
/// The streamed read of the `stream` workload.
pub const STREAM_SQL: &str = "SELECT id, name, score FROM pgpipe_bench_copy_src";
/// The columns' types, in order (the binary COPY format carries none).
pub const TYPES: [Type; 3] = [Type::INT8, Type::TEXT, Type::FLOAT8];
/// The most rows a run may have: names are `customer-` and eight digits.
pub const MAX_ROWS: u64 = 99_999_999;

/// The SQL that (re)creates both tables with `rows` rows in the source, the same rows
/// [`row`] generates.
pub fn load_sql(rows: u64) -> String {
    format!(
        "DROP TABLE IF EXISTS {SOURCE_TABLE}, {TARGET_TABLE};
         CREATE TABLE {SOURCE_TABLE} (id int8 NOT NULL, name text NOT NULL, score float8 NOT NULL);
         INSERT INTO {SOURCE_TABLE}
             SELECT g, 'customer-' || lpad(g::text, 8, '0'), g * 0.25 FROM generate_series(1, {rows}) g;
         CREATE TABLE {TARGET_TABLE} (LIKE {SOURCE_TABLE});"
    )
}

/// Row `i` (from 1): id `i`, name `customer-` and `i` in eight digits (written into `name`,
/// reused across rows), score `i / 4` (exact in binary, so sums compare exactly).
pub fn row(i: u64, name: &mut String) -> (i64, f64) {
    name.clear();
    let _ = write!(name, "customer-{i:08}");
    (i as i64, i as f64 * 0.25)
}

/// What a run's rows add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Sums {
    pub rows: u64,
    /// Sum of ids (wrapping).
    pub id: i64,
    /// Sum of the names' lengths in bytes.
    pub name_bytes: u64,
    /// Sum of scores (every partial sum is exact for the rows [`row`] makes).
    pub score: f64,
}

impl Sums {
    /// The sums of rows 1..=`rows` as [`row`] makes them (and `load_sql` loads them).
    pub fn expected(rows: u64) -> Sums {
        let ids = rows * (rows + 1) / 2;
        Sums {
            rows,
            id: ids as i64,
            name_bytes: 17 * rows,
            score: ids as f64 * 0.25,
        }
    }

    fn add(&mut self, id: i64, name: &str, score: f64) {
        self.rows += 1;
        self.id = self.id.wrapping_add(id);
        self.name_bytes += name.len() as u64;
        self.score += score;
    }

    /// The same sums as the server computes them, from `SELECT` of [`Sums::server_sql`].
    fn parse(s: &str) -> Option<Sums> {
        let mut it = s.split('|');
        Some(Sums {
            rows: it.next()?.parse().ok()?,
            id: it.next()?.parse().ok()?,
            name_bytes: it.next()?.parse().ok()?,
            score: it.next()?.parse().ok()?,
        })
    }

    fn server_sql(table: &str) -> String {
        format!(
            "SELECT count(*) || '|' || coalesce(sum(id), 0) || '|' || \
             coalesce(sum(length(name)), 0) || '|' || coalesce(sum(score), 0) FROM {table}"
        )
    }
}

thread_local! {
    /// Live heap bytes when the run's runtime was ready, before its client connected.
    static RUNTIME_HEAP: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Called by every runner first thing inside its runtime: what the heap holds now is the
/// runtime's (and the thread's), not the client's.
pub fn runtime_ready() {
    RUNTIME_HEAP.with(|h| h.set(Some(alloc::live())));
}

/// One side of the measured part.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    process: Duration,
    proxy: Duration,
    machine: MachineCpu,
    heap: i64,
}

/// The boundaries of a bulk run's measured part, set by the candidate: `start` once its
/// connection is ready (before the COPY or query is sent), `end` when the last row is through
/// (before the connection is released).
pub struct Marks {
    proxy_cpu: Option<sys::ThreadCpuClock>,
    start: Cell<Option<Mark>>,
    end: Cell<Option<(Mark, i64)>>,
}

impl Marks {
    fn new(job: &Job) -> Marks {
        Marks {
            proxy_cpu: job.proxy_cpu,
            start: Cell::new(None),
            end: Cell::new(None),
        }
    }

    fn mark(&self, heap: i64) -> Mark {
        Mark {
            at: Instant::now(),
            process: sys::process_cpu(),
            proxy: self.proxy_cpu.and_then(|c| c.read()).unwrap_or_default(),
            machine: MachineCpu::read(),
            heap,
        }
    }

    /// The measured part starts: the heap's peak restarts at its current level.
    pub fn start(&self) {
        let heap = alloc::reset_peak();
        self.start.set(Some(self.mark(heap)));
    }

    /// The measured part ends; the heap's peak over it is kept.
    pub fn end(&self) {
        let peak = alloc::peak();
        self.end.set(Some((self.mark(alloc::live()), peak)));
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn check_count(what: &str, counted: Option<u64>, decoded: u64) -> Result<(), String> {
    match counted {
        Some(n) if n == decoded => Ok(()),
        other => Err(format!(
            "{what}: {decoded} rows decoded, the server's count says {other:?}"
        )),
    }
}

/// A bulk run on a pgpipe client: a session, then the workload on it.
pub async fn pgpipe<R: pgpipe::Adapter>(
    c: &pgpipe::Client<R>,
    w: Workload,
    rows: u64,
    marks: &Marks,
) -> Result<Sums, String> {
    let s = c.session().await.map_err(err)?;
    let mut sums = Sums::default();
    marks.start();
    match w {
        Workload::CopyIn => {
            let copy = s.copy_in(COPY_IN_SQL).await.map_err(err)?;
            let mut wr = pgpipe::binary_copy::BinaryCopyInWriter::new(copy, &TYPES);
            let mut name = String::with_capacity(32);
            for i in 1..=rows {
                let (id, score) = row(i, &mut name);
                wr.write(&[&id, &name, &score]).await.map_err(err)?;
            }
            sums.rows = wr.finish().await.map_err(err)?;
        }
        Workload::CopyOut => {
            let copy = s.copy_out(COPY_OUT_SQL).await.map_err(err)?;
            let mut rd = pgpipe::binary_copy::BinaryCopyOutStream::new(copy, &TYPES);
            while let Some(r) = rd.next().await {
                let r = r.map_err(err)?;
                let name: &str = r.try_get(1).map_err(err)?;
                sums.add(r.try_get(0).map_err(err)?, name, r.try_get(2).map_err(err)?);
            }
            check_count("COPY out", rd.rows_copied(), sums.rows)?;
        }
        Workload::Stream => {
            let mut st = s.query_stream(STREAM_SQL, &[]).await.map_err(err)?;
            while let Some(r) = st.next().await {
                let r = r.map_err(err)?;
                let name: &str = r.try_get(1).map_err(err)?;
                sums.add(r.try_get(0).map_err(err)?, name, r.try_get(2).map_err(err)?);
            }
            check_count("stream", st.rows_affected(), sums.rows)?;
        }
        other => return Err(format!("{} is not a bulk workload", other.label())),
    }
    marks.end();
    Ok(sums)
}

/// A bulk run on a tokio-postgres connection: `binary_copy` and `query_raw`, as its users would.
pub async fn tokio_postgres(
    c: &tokio_postgres::Client,
    w: Workload,
    rows: u64,
    marks: &Marks,
) -> Result<Sums, String> {
    use tokio_postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
    let mut sums = Sums::default();
    marks.start();
    match w {
        Workload::CopyIn => {
            let sink = c.copy_in(COPY_IN_SQL).await.map_err(err)?;
            let wr = BinaryCopyInWriter::new(sink, &TYPES);
            let mut wr = std::pin::pin!(wr);
            let mut name = String::with_capacity(32);
            for i in 1..=rows {
                let (id, score) = row(i, &mut name);
                wr.as_mut()
                    .write(&[&id, &name, &score])
                    .await
                    .map_err(err)?;
            }
            sums.rows = wr.finish().await.map_err(err)?;
        }
        Workload::CopyOut => {
            let stream = c.copy_out(COPY_OUT_SQL).await.map_err(err)?;
            let rd = BinaryCopyOutStream::new(stream, &TYPES);
            let mut rd = std::pin::pin!(rd);
            while let Some(r) = rd.next().await {
                let r = r.map_err(err)?;
                let name: &str = r.try_get(1).map_err(err)?;
                sums.add(r.try_get(0).map_err(err)?, name, r.try_get(2).map_err(err)?);
            }
        }
        Workload::Stream => {
            let none = std::iter::empty::<&(dyn tokio_postgres::types::ToSql + Sync)>();
            let st = c.query_raw(STREAM_SQL, none).await.map_err(err)?;
            let mut st = std::pin::pin!(st);
            while let Some(r) = st.next().await {
                let r = r.map_err(err)?;
                let name: &str = r.try_get(1).map_err(err)?;
                sums.add(r.try_get(0).map_err(err)?, name, r.try_get(2).map_err(err)?);
            }
            check_count("stream", st.rows_affected(), sums.rows)?;
        }
        other => return Err(format!("{} is not a bulk workload", other.label())),
    }
    marks.end();
    Ok(sums)
}

/// Runs one bulk run of `job` on `db` and checks it.
pub async fn drive<D: Db>(db: D, job: &Job, rows: u64) -> Measurement {
    let mut m = Measurement::default();
    let fail = |m: &mut Measurement, e: String| {
        m.errors += 1;
        m.first_error.get_or_insert(e);
    };
    if job.workload == Workload::CopyIn {
        if let Err(e) = job.monitor.query(&format!("TRUNCATE {TARGET_TABLE}")) {
            fail(&mut m, format!("emptying {TARGET_TABLE}: {e}"));
            return m;
        }
    }
    let marks = Marks::new(job);
    let result = db.bulk(job.workload, rows, &marks).await;
    let (Some(a), Some((b, peak))) = (marks.start.get(), marks.end.get()) else {
        fail(
            &mut m,
            result
                .err()
                .unwrap_or_else(|| "the run ended without its measured part".into()),
        );
        return m;
    };
    let seconds = (b.at - a.at).as_secs_f64();
    let per_row = |d: Duration| d.as_secs_f64() * 1e6 / rows.max(1) as f64;
    let client = b
        .process
        .saturating_sub(a.process)
        .saturating_sub(b.proxy.saturating_sub(a.proxy));
    m.ops = rows;
    m.seconds = seconds;
    m.throughput = rows as f64 / seconds;
    m.client_cpu_us = per_row(client);
    m.machine_cpu_us = per_row(b.machine.busy_since(&a.machine));
    m.steal_pct = b.machine.steal_pct_since(&a.machine);
    m.proxy_cpu_us = per_row(b.proxy.saturating_sub(a.proxy));
    let runtime = RUNTIME_HEAP.with(|h| h.get()).unwrap_or(0);
    m.runtime_heap_bytes = Some(runtime as f64);
    m.peak_heap_bytes = Some((peak - runtime) as f64);
    m.heap_at_start_bytes = Some((a.heap - runtime) as f64);
    let want = Sums::expected(rows);
    match result {
        Err(e) => fail(&mut m, e),
        Ok(got) if job.workload == Workload::CopyIn => {
            // finish()'s count, then what the server holds.
            if got.rows != rows {
                fail(
                    &mut m,
                    format!(
                        "COPY in: finish() counted {} rows, {rows} written",
                        got.rows
                    ),
                );
            }
            let held = job
                .monitor
                .query(&Sums::server_sql(TARGET_TABLE))
                .ok()
                .and_then(|v| v.first().and_then(|s| Sums::parse(s)));
            match held {
                Some(s) if s == want => m.sums = Some(s),
                other => fail(
                    &mut m,
                    format!("COPY in: the server holds {other:?}, expected {want:?}"),
                ),
            }
        }
        Ok(got) => {
            m.sums = Some(got);
            if got != want {
                fail(
                    &mut m,
                    format!("the rows read add up to {got:?}, expected {want:?}"),
                );
            }
        }
    }
    m.server_connections = job.monitor.connections();
    crate::engine::check_transport(&mut m, job);
    m
}

/// The sums the source table must give, from the server itself (run once after loading, so a
/// table that differs from what [`row`] generates is caught before any run).
pub fn source_sums(monitor: &crate::monitor::Monitor) -> Result<Sums, String> {
    let v = monitor.query(&Sums::server_sql(SOURCE_TABLE))?;
    v.first()
        .and_then(|s| Sums::parse(s))
        .ok_or_else(|| format!("unreadable sums of {SOURCE_TABLE}: {v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rows_add_up() {
        let mut name = String::new();
        let mut s = Sums::default();
        for i in 1..=1000 {
            let (id, score) = row(i, &mut name);
            s.add(id, &name, score);
        }
        assert_eq!(s, Sums::expected(1000));
        assert_eq!(row(7, &mut name), (7, 1.75));
        assert_eq!(name, "customer-00000007");
        let p = Sums::parse("1000|500500|17000|125125").unwrap();
        assert_eq!(p, Sums::expected(1000));
    }
}
