//! Micro-benchmarks of pgpipe's hot path, with no network: encoding an Execute unit, draining a
//! batch of server responses through the pipeline FIFO, and decoding a row.
//!
//! Before criterion runs, the binary prints allocations per operation, measured in steady state
//! (after a warm-up) with a counting global allocator, in two forms:
//!
//! ```text
//! allocations per unit: encode=0.00 drain=1.00 decode=0.00
//! BENCH_ALLOCS bench=encode_unit per_op=0.0000 allocs=0 ops=100000
//! ```
//!
//! Run: `cargo bench -p pgpipe-bench --bench hot_path` (a criterion filter may follow `--`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput};
use pgpipe::internals::{encode, Handler, Outcome, Pipeline, UnitKind};
use pgpipe::types::Type;
use pgpipe::{Column, Row};
use pgpipe_bench::{alloc, backend};

#[global_allocator]
static ALLOC: alloc::CountingAlloc = alloc::CountingAlloc;

/// Units per drained batch.
const BATCH: u32 = 64;
/// The prepared statement name the driver would use.
const STATEMENT: &str = "pgpipe_1";
/// The text parameter / result value.
const TEXT: &str = "hello, pgpipe";

/// One Execute unit encoded into a buffer reused (and cleared) per unit, as the driver does.
struct EncodeFixture {
    buf: BytesMut,
    n: i64,
    s: &'static str,
}

impl EncodeFixture {
    fn new() -> Self {
        EncodeFixture {
            buf: BytesMut::with_capacity(4096),
            n: 21,
            s: TEXT,
        }
    }

    fn run(&mut self) -> usize {
        self.buf.clear();
        let n = black_box(self.n);
        let s = black_box(self.s);
        encode::execute(
            STATEMENT,
            "",
            &[Type::INT8, Type::TEXT],
            &[&n, &s],
            &mut self.buf,
        )
        .expect("encode");
        self.buf.len()
    }
}

/// Counts completed units and folds cheap facts of each outcome into a checksum; the rows
/// themselves are dropped undecoded (decoding is `decode_row`'s job).
#[derive(Default)]
struct CountingHandler {
    done: u64,
    checksum: u64,
}

impl Handler<u32> for CountingHandler {
    fn unit_done(&mut self, token: u32, outcome: Outcome) {
        self.done += 1;
        match outcome {
            Outcome::Rows { rows, affected, .. } => {
                self.checksum = self
                    .checksum
                    .wrapping_add(u64::from(token) + rows.len() as u64 + affected);
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

/// A batch of `BATCH` Execute units answered in one read: the response stream is built once;
/// each run copies it into a reused read buffer, pushes the units into a reused pipeline and
/// drains it.
struct DrainFixture {
    stream: Bytes,
    buf: BytesMut,
    pipeline: Pipeline<u32>,
    columns: Arc<[Column]>,
    handler: CountingHandler,
}

impl DrainFixture {
    fn new() -> Self {
        let mut stream = BytesMut::new();
        for i in 0..BATCH {
            backend::select_unit_response(&mut stream, i64::from(i) * 2, TEXT);
        }
        DrainFixture {
            stream: stream.freeze(),
            buf: BytesMut::new(),
            pipeline: Pipeline::new(),
            columns: backend::select_int8_text_columns(),
            handler: CountingHandler::default(),
        }
    }

    fn run(&mut self) -> usize {
        self.buf.clear();
        self.buf.extend_from_slice(&self.stream);
        for token in 0..BATCH {
            self.pipeline
                .push(token, UnitKind::Execute(self.columns.clone()));
        }
        let done = self
            .pipeline
            .drain(&mut self.buf, &mut self.handler)
            .expect("drain");
        debug_assert!(self.buf.is_empty() && self.pipeline.is_empty());
        done
    }

    /// Checks once, outside any measurement, that the stream is consumed as intended.
    fn check(&mut self) {
        let (done0, sum0) = (self.handler.done, self.handler.checksum);
        assert_eq!(self.run(), BATCH as usize);
        assert!(self.buf.is_empty() && self.pipeline.is_empty());
        assert_eq!(self.handler.done - done0, u64::from(BATCH));
        // token + 1 row + affected 1, per unit.
        let want: u64 = (0..u64::from(BATCH)).map(|t| t + 2).sum();
        assert_eq!(self.handler.checksum.wrapping_sub(sum0), want);
    }
}

/// A row of `SELECT $1::int8 * 2, $2::text` as `drain` would build it.
fn sample_row() -> Row {
    let body = backend::data_row_body(&[Some(&42i64.to_be_bytes()), Some(TEXT.as_bytes())]);
    pgpipe::internals::row(backend::select_int8_text_columns(), body).expect("row")
}

fn decode(row: &Row) -> (i64, usize) {
    let n = row.get::<_, i64>(0);
    let s = row.get::<_, &str>(1);
    (n, s.len())
}

/// Allocations per operation of `op` in steady state: `warm_up` untimed calls, then `runs`
/// counted calls of `per_run` operations each.
fn allocs_per_op<R>(
    warm_up: u32,
    runs: u32,
    per_run: u32,
    mut op: impl FnMut() -> R,
) -> (f64, u64, u64) {
    for _ in 0..warm_up {
        black_box(op());
    }
    let (allocs, ()) = alloc::count(|| {
        for _ in 0..runs {
            black_box(op());
        }
    });
    let ops = u64::from(runs) * u64::from(per_run);
    (allocs as f64 / ops as f64, allocs, ops)
}

fn report_allocations() {
    let mut enc = EncodeFixture::new();
    let encode = allocs_per_op(100, 100_000, 1, || enc.run());

    let mut drain = DrainFixture::new();
    drain.check();
    let drain = allocs_per_op(10, 1_000, BATCH, || drain.run());

    let row = sample_row();
    assert_eq!(decode(&row), (42, TEXT.len()));
    let decode = allocs_per_op(100, 100_000, 1, || decode(black_box(&row)));

    println!(
        "allocations per unit: encode={:.2} drain={:.2} decode={:.2}",
        encode.0, drain.0, decode.0
    );
    for (name, (per_op, allocs, ops)) in [
        ("encode_unit", encode),
        ("drain_batch", drain),
        ("decode_row", decode),
    ] {
        println!("BENCH_ALLOCS bench={name} per_op={per_op:.4} allocs={allocs} ops={ops}");
    }
}

fn bench_encode_unit(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    group.throughput(Throughput::Elements(1));
    let mut fx = EncodeFixture::new();
    group.bench_function("encode_unit", |b| b.iter(|| fx.run()));
    group.finish();
}

fn bench_drain_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    group.throughput(Throughput::Elements(u64::from(BATCH)));
    let mut fx = DrainFixture::new();
    fx.check();
    group.bench_function("drain_batch", |b| b.iter(|| fx.run()));
    group.finish();
}

fn bench_decode_row(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    group.throughput(Throughput::Elements(1));
    let row = sample_row();
    group.bench_function("decode_row", |b| b.iter(|| decode(black_box(&row))));
    group.finish();
}

fn main() {
    report_allocations();

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench_encode_unit(&mut c);
    bench_drain_batch(&mut c);
    bench_decode_row(&mut c);
    c.final_summary();
}
