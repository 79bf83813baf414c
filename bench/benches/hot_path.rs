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
use std::time::Duration;

use criterion::{Criterion, Throughput};
use pgpipe_bench::alloc;
use pgpipe_bench::hot::{decode, sample_row, DrainFixture, EncodeFixture, BATCH, TEXT};

#[global_allocator]
static ALLOC: alloc::CountingAlloc = alloc::CountingAlloc;

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
