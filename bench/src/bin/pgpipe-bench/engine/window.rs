//! The figures of a measured window: the clocks and counters read at its start and end, the
//! measurement made of them and of the recorder, pgpipe's fill ratios, the transport check
//! and what the drain after the window adds (errors, unfinished requests, connection samples).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use pgpipe_bench::sys::{self, MachineCpu, ThreadCpuClock};

use super::{Db, Job, Measurement, REC};
use crate::monitor::ConnStats;
use crate::plan::Load;

/// The clocks and counters of a run at one instant: the start or the end of its window.
pub(super) struct Snapshot {
    /// When they were read.
    pub(super) at: Instant,
    process: Duration,
    helpers: Duration,
    proxy: Duration,
    pooler: Option<Duration>,
    machine: MachineCpu,
    fill: Option<pgpipe::ConnStats>,
}

/// Reads the clocks and counters now; `generator` is the open loop's arrival thread, whose CPU
/// is not the client's.
pub(super) fn snapshot<D: Db>(db: &D, job: &Job, generator: Option<ThreadCpuClock>) -> Snapshot {
    let proxy = job.proxy_cpu.and_then(|c| c.read()).unwrap_or_default();
    let gen = generator.and_then(|c| c.read()).unwrap_or_default();
    Snapshot {
        at: Instant::now(),
        process: sys::process_cpu(),
        helpers: proxy + gen,
        proxy,
        pooler: job.pooler_cpu.as_ref().and_then(|f| f()),
        machine: MachineCpu::read(),
        fill: db.fill(),
    }
}

/// The figures of the window from `a` to `b`, from the recorder and the two snapshots.
pub(super) fn measurement(a: &Snapshot, b: &Snapshot, conns: i64, job: &Job) -> Measurement {
    REC.with(|r| {
        let ops = r.done.get();
        let per_op = |d: Duration| {
            if ops == 0 {
                0.0
            } else {
                d.as_secs_f64() * 1e6 / ops as f64
            }
        };
        let client = (b.process.saturating_sub(a.process))
            .saturating_sub(b.helpers.saturating_sub(a.helpers));
        let h = r.hist.borrow();
        let q = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let split = r.split.get();
        let fast = r.fast.borrow();
        let slow = r.slow.borrow();
        // A percentile of the fast or slow ops, µs; None outside hol or without samples.
        let part = |h: &Histogram<u64>, q: f64| {
            (split && !h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
        };
        let seconds = (b.at - a.at).as_secs_f64();
        let fill = match (&a.fill, &b.fill) {
            (Some(x), Some(y)) => Some(Fill::between(x, y)),
            _ => None,
        };
        Measurement {
            ops,
            seconds,
            throughput: ops as f64 / seconds,
            errors: r.errors.get(),
            first_error: r.first_error.borrow().clone(),
            client_cpu_us: per_op(client),
            machine_cpu_us: per_op(b.machine.busy_since(&a.machine)),
            steal_pct: b.machine.steal_pct_since(&a.machine),
            // Set by the caller, which probes the host before the run.
            host_core_ms: None,
            host_memory_ms: None,
            host_memory_during_ns: None,
            proxy_cpu_us: per_op(b.proxy.saturating_sub(a.proxy)),
            pooler_cpu_us: a
                .pooler
                .zip(b.pooler)
                .map(|(x, y)| per_op(y.saturating_sub(x))),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: h.max() as f64 / 1e3,
            samples: h.len(),
            server_connections: conns,
            client_connections: None,
            conns_avg: None,
            conns_max: None,
            conns_samples: 0,
            fast_p50_us: part(&fast, 0.5),
            fast_p99_us: part(&fast, 0.99),
            fast_p999_us: part(&fast, 0.999),
            fast_p9999_us: part(&fast, 0.9999),
            fast_max_us: (split && !fast.is_empty()).then(|| fast.max() as f64 / 1e3),
            fast_samples: split.then(|| fast.len()),
            slow_p50_us: part(&slow, 0.5),
            slow_p99_us: part(&slow, 0.99),
            slow_samples: split.then(|| slow.len()),
            units_per_readable: fill.as_ref().map(|f| f.units_per_readable),
            units_per_sync: fill.as_ref().map(|f| f.units_per_sync),
            writes_per_unit: fill.as_ref().map(|f| f.writes_per_unit),
            bytes_per_write: fill.as_ref().map(|f| f.bytes_per_write),
            bytes_per_tls_record: fill.as_ref().and_then(|f| f.bytes_per_tls_record),
            tls_records_per_unit: fill.as_ref().and_then(|f| f.tls_records_per_unit),
            tls_handshakes: b.fill.as_ref().map(|s| s.tls_handshakes),
            tls_backends: None,
            backends_checked: None,
            tls_cipher: None,
            offered_rate: match job.load {
                Load::Open { rate } => Some(rate),
                _ => None,
            },
            unfinished: 0,
            dropped: 0,
            proxy_late_max_us: None,
            peak_heap_bytes: None,
            heap_at_start_bytes: None,
            runtime_heap_bytes: None,
            sums: None,
            fairness: None,
            slowest_task: None,
            median_task: None,
            committed: None,
            balance_growth: None,
        }
    })
}

/// pgpipe's ratios over a window, from the counters at its start and end.
struct Fill {
    units_per_readable: f64,
    units_per_sync: f64,
    writes_per_unit: f64,
    bytes_per_write: f64,
    bytes_per_tls_record: Option<f64>,
    tls_records_per_unit: Option<f64>,
}

impl Fill {
    fn between(a: &pgpipe::ConnStats, b: &pgpipe::ConnStats) -> Fill {
        let mut d = pgpipe::ConnStats::default();
        d.units_completed = b.units_completed - a.units_completed;
        d.ready_received = b.ready_received - a.ready_received;
        d.readable_events = b.readable_events - a.readable_events;
        d.write_calls = b.write_calls - a.write_calls;
        d.bytes_out = b.bytes_out - a.bytes_out;
        d.tls_records_out = b.tls_records_out - a.tls_records_out;
        let per = |x: u64, y: u64| if y == 0 { 0.0 } else { x as f64 / y as f64 };
        let tls = d.tls_records_out > 0;
        Fill {
            units_per_readable: d.units_per_readable(),
            units_per_sync: per(d.units_completed, d.ready_received),
            writes_per_unit: d.writes_per_unit(),
            bytes_per_write: per(d.bytes_out, d.write_calls),
            bytes_per_tls_record: tls.then(|| d.bytes_per_tls_record()),
            tls_records_per_unit: tls.then(|| per(d.tls_records_out, d.units_completed)),
        }
    }
}

/// After the window: how many of the candidate's backends use TLS, with which versions and
/// ciphers; a candidate whose backends are not what its name says (TLS or plaintext) gets an
/// error, so that a run never reports the wrong transport.
pub fn check_transport(m: &mut Measurement, job: &Job) {
    let sql = format!(
        "SELECT count(*) FILTER (WHERE s.ssl) || '|' || count(*) || '|' || \
         coalesce(string_agg(DISTINCT s.version || ' ' || s.cipher, ', '), '') \
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name = '{}' AND a.backend_type = 'client backend'",
        crate::monitor::APP_NAME
    );
    let Ok(rows) = job.monitor.query(&sql) else {
        return;
    };
    let Some(row) = rows.first() else { return };
    let mut it = row.splitn(3, '|');
    let (Some(Ok(tls)), Some(Ok(all)), Some(cipher)) = (
        it.next().map(str::parse::<i64>),
        it.next().map(str::parse::<i64>),
        it.next(),
    ) else {
        return;
    };
    m.tls_backends = Some(tls);
    m.backends_checked = Some(all);
    m.tls_cipher = (!cipher.is_empty()).then(|| cipher.to_string());
    let wrong = if job.cand.tls { all - tls } else { tls };
    if wrong > 0 {
        m.errors += 1;
        m.first_error.get_or_insert_with(|| {
            format!(
                "{wrong} of the candidate's {all} server connections are {}",
                if job.cand.tls {
                    "plaintext"
                } else {
                    "over TLS"
                }
            )
        });
    }
}

/// After the drain: the errors of the whole run (drain included), the requests left
/// unfinished (`None` when everything finished; `what` says why otherwise), the dropped count,
/// and the connection samples of the window.
pub(super) fn settle(
    m: &mut Measurement,
    unfinished: Option<u64>,
    what: impl FnOnce(u64) -> String,
    conns: ConnStats,
) {
    let op_errors = REC.with(|r| {
        if m.first_error.is_none() {
            m.first_error = r.first_error.borrow().clone();
        }
        r.errors.get()
    });
    m.errors = op_errors;
    if let Some(u) = unfinished {
        m.unfinished = u;
        m.errors += u.max(1);
        m.first_error.get_or_insert_with(|| what(u));
    }
    m.dropped = op_errors + m.unfinished;
    m.conns_avg = conns.avg;
    m.conns_max = conns.max;
    m.conns_samples = conns.samples;
}
