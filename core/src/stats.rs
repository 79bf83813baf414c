//! Counters per connection and their sums. Counters are relaxed atomics written by the
//! connection's own task (and by callers for caller-side outcomes); reading them never blocks
//! the driver.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Live counters of one connection.
        #[derive(Default, Debug)]
        pub(crate) struct Counters { $(pub(crate) $name: AtomicU64,)* }

        /// A snapshot of one connection's counters (or their sum over connections).
        #[derive(Default, Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct ConnStats { $($(#[$doc])* pub $name: u64,)* }

        impl Counters {
            pub(crate) fn snapshot(&self) -> ConnStats {
                ConnStats { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl ConnStats {
            fn add(&mut self, o: &ConnStats) {
                $(self.$name += o.$name;)*
            }
        }
    };
}

counters! {
    /// Units completed (prepares included).
    units_completed,
    /// ReadyForQuery messages received: one per unit that did not share a Sync, so
    /// `ready_received = units_completed - units_coalesced` (Sync coalescing).
    ready_received,
    /// Units that shared a later unit's Sync and completed at their CommandComplete
    /// (`Config::sync_coalescing`).
    units_coalesced,
    /// Units the server skipped because an earlier unit sharing their Sync failed, and that
    /// were sent again (each with its own Sync).
    units_resent,
    /// Driver ticks that read at least one byte.
    readable_events,
    /// Successful socket write calls.
    write_calls,
    /// Bytes read from the server.
    bytes_in,
    /// Bytes written to the server (plaintext, before TLS).
    bytes_out,
    /// TLS records written (0 in plaintext). Each write of a pumped batch into TLS makes as
    /// few records as its size needs (16 KiB of plaintext each), so `bytes_out /
    /// tls_records_out` shows how full pipelining makes them.
    tls_records_out,
    /// Connections (and reconnects) established over TLS.
    tls_handshakes,

    /// Units sent and not yet complete (a gauge).
    in_flight,
    /// Highest `in_flight` seen.
    in_flight_peak,
    /// Units in the mailbox, not yet sent (a gauge).
    queued,
    /// Highest `queued` seen.
    queued_peak,
    /// Estimated server time of the units queued and in flight, in ns (a gauge; cost-aware
    /// routing sends each unit where this is lowest).
    est_pending_ns,
    /// Parse messages sent (statement-cache misses and typed queries).
    parses_sent,
    /// Describe messages sent.
    describes_sent,
    /// Close messages sent (statement-cache evictions).
    closes_sent,
    /// Units the server rejected (ErrorResponse).
    errors_db,
    /// Units failed as never sent.
    errors_not_dispatched,
    /// Units failed with an unknown outcome.
    errors_indeterminate,
    /// Callers whose deadline passed.
    errors_timeout,
    /// Connection failures (I/O, protocol violations, server termination).
    errors_connection,
    /// Units retried on another connection after `NotDispatched`.
    retries,
    /// Times this connection was re-established after dying.
    reconnects,
    /// Times this slot was opened on demand (a lane for slow statements, or an overflow
    /// connection for saturating server work).
    opened_on_demand,
    /// Times this on-demand connection was closed after `idle_timeout` unused.
    retired_idle,
    /// Units sent here because their statement was estimated slow (lane traffic).
    lane_units,
    /// Fast units routed here that were first held back while every lane had a queue
    /// (`Config::fair_lanes`).
    held_for_lanes,
    /// Server-time samples far above their statement's estimate (over 250 µs and twice it)
    /// while the machine had no CPU to spare (`Config::spare_cpu_pct`): a lone unit's not
    /// taken, a busy backend's taken as twice the estimate. Waits for a CPU, the client's or
    /// the backend's, would otherwise make cheap statements look slow.
    samples_discounted_busy_cpu,
    /// Pump passes that stopped because the estimated work in flight reached `max_queue_work`
    /// (the adaptive in-flight limit binding before `max_in_flight`).
    work_limited,
    /// Half-open checks started (`Config::health_check`): the connection had work in flight
    /// and heard nothing for the interval, so a second connection asked about its backend.
    health_checks,
    /// Checks that found the connection half-open (its backend gone, or idle while units were
    /// in flight), which closed it; `health_checks - half_open` found it alive or could not tell.
    half_open,
}

impl Counters {
    pub(crate) fn inc(&self, c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
}
/// A snapshot of the service: the sum over connections and each connection.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Counters summed over every pipelined connection.
    pub total: ConnStats,
    /// Per pipelined slot, in slot order: the `pipeline_size` kept open, then the on-demand ones.
    pub connections: Vec<ConnStats>,
    /// Open base connections (of `pipeline_size`).
    pub open_base: usize,
    /// Open lanes: on-demand connections for statements estimated slow.
    pub open_lanes: usize,
    /// Open overflow connections: on demand, while server work saturates the base ones.
    pub open_overflow: usize,
    /// Catalog queries run to look up types `postgres-types` does not know (enums, domains,
    /// composites, ranges, ...): paid by the first statement that meets a type, once per client.
    pub type_lookups: u64,
    /// Units that found the base connections work-bound but opened no overflow connection,
    /// because the machine had no CPU to spare (`Config::spare_cpu_pct`).
    pub overflow_held_busy_cpu: u64,
    /// Exclusive connections (sessions and transactions).
    pub exclusive: ExclusiveStats,
}

/// The exclusive connections of sessions and transactions (`docs/TRANSACTIONS.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExclusiveStats {
    /// Open (held, idle or being opened).
    pub open: usize,
    /// Held by a session or transaction.
    pub held: usize,
    /// Checkouts waiting for one (a gauge).
    pub waiting: usize,
    /// Checkouts served.
    pub checkouts: u64,
    /// Of those, checkouts that had to queue (every connection the budget allowed was held).
    pub queued: u64,
    /// Connections opened.
    pub opened: u64,
    /// Units the holders sent (each a round trip, for one statement after another): BEGIN
    /// and COMMIT ride in them and add none.
    pub units: u64,
    /// Releases that sent ROLLBACK (the server's status said a transaction was open).
    pub rollbacks: u64,
    /// Releases that reset the session (its holder may have changed session state).
    pub resets: u64,
    /// Releases with units still unanswered, which asked the server's status first.
    pub status_probes: u64,
    /// Transactions that handed their connection on with their COMMIT still unanswered.
    pub early_handovers: u64,
}

/// Live counters behind [`ExclusiveStats`].
#[derive(Default, Debug)]
pub(crate) struct ExclusiveCounters {
    pub(crate) checkouts: AtomicU64,
    pub(crate) queued: AtomicU64,
    pub(crate) opened: AtomicU64,
    pub(crate) units: AtomicU64,
    pub(crate) rollbacks: AtomicU64,
    pub(crate) resets: AtomicU64,
    pub(crate) status_probes: AtomicU64,
    pub(crate) early_handovers: AtomicU64,
}

impl ExclusiveCounters {
    pub(crate) fn inc(&self, c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }

    /// A snapshot, with the gauges given.
    pub(crate) fn snapshot(&self, open: usize, held: usize, waiting: usize) -> ExclusiveStats {
        ExclusiveStats {
            open,
            held,
            waiting,
            checkouts: self.checkouts.load(Relaxed),
            queued: self.queued.load(Relaxed),
            opened: self.opened.load(Relaxed),
            units: self.units.load(Relaxed),
            rollbacks: self.rollbacks.load(Relaxed),
            resets: self.resets.load(Relaxed),
            status_probes: self.status_probes.load(Relaxed),
            early_handovers: self.early_handovers.load(Relaxed),
        }
    }
}

impl Stats {
    pub(crate) fn from_connections(connections: Vec<ConnStats>) -> Stats {
        let mut total = ConnStats::default();
        for c in &connections {
            total.add(c);
        }
        // The peak of the sum is not the sum of peaks; report the largest single connection's.
        total.in_flight_peak = connections
            .iter()
            .map(|c| c.in_flight_peak)
            .max()
            .unwrap_or(0);
        total.queued_peak = connections.iter().map(|c| c.queued_peak).max().unwrap_or(0);
        Stats {
            total,
            connections,
            ..Stats::default()
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl ConnStats {
    /// Units completed per tick that read data: 1.0 means no batching; higher means pipelines fill.
    pub fn units_per_readable(&self) -> f64 {
        ratio(self.units_completed, self.readable_events)
    }
    /// Write calls per unit (the flush ratio): well under 1 under load.
    pub fn writes_per_unit(&self) -> f64 {
        ratio(self.write_calls, self.units_completed)
    }
    /// ReadyForQuery per unit: 1.0 without Sync coalescing; with it, lower as units share Syncs
    /// (`ready_received + units_coalesced = units_completed`).
    pub fn ready_per_unit(&self) -> f64 {
        ratio(self.ready_received, self.units_completed)
    }
    /// Whether every completed unit is accounted for by a ReadyForQuery of its own or by a
    /// Sync it shared: `ready_received + units_coalesced == units_completed`.
    pub fn ready_accounts_for_every_unit(&self) -> bool {
        self.ready_received + self.units_coalesced == self.units_completed
    }
    /// Plaintext bytes per TLS record written (0 without TLS): fuller records under load.
    pub fn bytes_per_tls_record(&self) -> f64 {
        ratio(self.bytes_out, self.tls_records_out)
    }
}
