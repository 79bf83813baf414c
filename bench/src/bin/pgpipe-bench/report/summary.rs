//! Median and min–max of every figure over a candidate's successful rounds: [`Figure`] and
//! [`Summary`].

use serde::Serialize;

use crate::engine::Measurement;

/// Median and range of one figure over the rounds.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Figure {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Figure {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Figure> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Figure {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Every figure of a candidate in a scenario, over its successful rounds.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub rounds_ok: usize,
    pub rounds_failed: usize,
    /// Errors over all rounds (must be 0).
    pub errors: u64,
    pub throughput: Figure,
    pub client_cpu_us: Figure,
    pub machine_cpu_us: Figure,
    pub proxy_cpu_us: Figure,
    /// Through PgBouncer: its CPU per op.
    pub pooler_cpu_us: Option<Figure>,
    pub p50_us: Figure,
    pub p90_us: Figure,
    pub p99_us: Figure,
    pub p999_us: Figure,
    pub p9999_us: Figure,
    pub max_us: Figure,
    pub server_connections: Figure,
    /// Client connections at the end of each window, where counted apart from the server's
    /// (through PgBouncer).
    pub client_connections: Option<Figure>,
    /// Mean of the server connections sampled over each window.
    pub conns_avg: Option<Figure>,
    /// The most server connections in any sample of each window.
    pub conns_max: Option<Figure>,
    /// Requests dropped (ops that failed + unfinished) over all rounds.
    pub dropped: u64,
    /// hol: the fast ops' p50, µs.
    pub fast_p50_us: Option<Figure>,
    /// hol: the fast ops' p99, µs.
    pub fast_p99_us: Option<Figure>,
    /// hol: the fast ops' p99.9, µs.
    pub fast_p999_us: Option<Figure>,
    /// hol: the fast ops' p99.99, µs.
    pub fast_p9999_us: Option<Figure>,
    /// hol: the fast ops' maximum, µs.
    pub fast_max_us: Option<Figure>,
    /// hol: latency samples of fast ops per round.
    pub fast_samples: Option<Figure>,
    /// hol: the slow ops' p50, µs.
    pub slow_p50_us: Option<Figure>,
    /// hol: the slow ops' p99, µs.
    pub slow_p99_us: Option<Figure>,
    /// hol: latency samples of slow ops per round.
    pub slow_samples: Option<Figure>,
    pub units_per_readable: Option<Figure>,
    pub writes_per_unit: Option<Figure>,
    /// pgpipe: plaintext bytes per write call.
    pub bytes_per_write: Option<Figure>,
    /// pgpipe over TLS: plaintext bytes per TLS record.
    pub bytes_per_tls_record: Option<Figure>,
    /// pgpipe over TLS: TLS records per unit.
    pub tls_records_per_unit: Option<Figure>,
    /// The candidate's server backends using TLS at the end of each window (pg_stat_ssl).
    pub tls_backends: Option<Figure>,
    /// Pool ceiling: time to finish the batch, in ms.
    pub wall_ms: Figure,
    /// Through the delay proxy: the proxy's worst lateness per run, in µs.
    pub proxy_late_max_us: Option<Figure>,
    /// Bulk workloads: the client's peak heap while the rows moved.
    pub peak_heap_bytes: Option<Figure>,
    /// Bulk workloads: the client's heap when the rows started to move.
    pub heap_at_start_bytes: Option<Figure>,
    /// Bulk workloads: the runtime's heap before the client connected.
    pub runtime_heap_bytes: Option<Figure>,
    /// Transactions: the slowest-served task's share of the median task's (see
    /// `Measurement::fairness`); its `min` is the worst round.
    pub fairness: Option<Figure>,
    /// Transactions: the slowest-served and the median task's in-window counts.
    pub slowest_task: Option<Figure>,
    pub median_task: Option<Figure>,
}

impl Summary {
    /// The summary of a candidate's successful `runs`, beside the `failed` rounds that could not
    /// run.
    pub(super) fn of(runs: &[Measurement], failed: usize) -> Summary {
        let f = |g: fn(&Measurement) -> f64| Figure::of(runs.iter().map(g)).unwrap_or_default();
        let o = |g: fn(&Measurement) -> Option<f64>| Figure::of(runs.iter().filter_map(g));
        Summary {
            rounds_ok: runs.len(),
            rounds_failed: failed,
            errors: runs.iter().map(|m| m.errors).sum(),
            throughput: f(|m| m.throughput),
            client_cpu_us: f(|m| m.client_cpu_us),
            machine_cpu_us: f(|m| m.machine_cpu_us),
            proxy_cpu_us: f(|m| m.proxy_cpu_us),
            pooler_cpu_us: o(|m| m.pooler_cpu_us),
            p50_us: f(|m| m.p50_us),
            p90_us: f(|m| m.p90_us),
            p99_us: f(|m| m.p99_us),
            p999_us: f(|m| m.p999_us),
            p9999_us: f(|m| m.p9999_us),
            max_us: f(|m| m.max_us),
            server_connections: f(|m| m.server_connections as f64),
            client_connections: o(|m| m.client_connections.map(|n| n as f64)),
            conns_avg: o(|m| m.conns_avg),
            conns_max: o(|m| m.conns_max.map(|n| n as f64)),
            dropped: runs.iter().map(|m| m.dropped).sum(),
            fast_p50_us: o(|m| m.fast_p50_us),
            fast_p99_us: o(|m| m.fast_p99_us),
            fast_p999_us: o(|m| m.fast_p999_us),
            fast_p9999_us: o(|m| m.fast_p9999_us),
            fast_max_us: o(|m| m.fast_max_us),
            fast_samples: o(|m| m.fast_samples.map(|n| n as f64)),
            slow_p50_us: o(|m| m.slow_p50_us),
            slow_p99_us: o(|m| m.slow_p99_us),
            slow_samples: o(|m| m.slow_samples.map(|n| n as f64)),
            units_per_readable: o(|m| m.units_per_readable),
            writes_per_unit: o(|m| m.writes_per_unit),
            bytes_per_write: o(|m| m.bytes_per_write),
            bytes_per_tls_record: o(|m| m.bytes_per_tls_record),
            tls_records_per_unit: o(|m| m.tls_records_per_unit),
            tls_backends: o(|m| m.tls_backends.map(|n| n as f64)),
            wall_ms: f(|m| m.seconds * 1e3),
            proxy_late_max_us: o(|m| m.proxy_late_max_us),
            peak_heap_bytes: o(|m| m.peak_heap_bytes),
            heap_at_start_bytes: o(|m| m.heap_at_start_bytes),
            runtime_heap_bytes: o(|m| m.runtime_heap_bytes),
            fairness: o(|m| m.fairness),
            slowest_task: o(|m| m.slowest_task.map(|n| n as f64)),
            median_task: o(|m| m.median_task.map(|n| n as f64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::cells::thousands;

    #[test]
    fn median_and_range() {
        let f = Figure::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((f.median, f.min, f.max), (2.0, 1.0, 3.0));
        assert_eq!(Figure::of([1.0, 2.0, 4.0, 10.0]).unwrap().median, 3.0);
        assert!(Figure::of([]).is_none());
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }
}
