//! The client's statistics checked by a run: routing's limits while the client is open, and
//! quiescence, bounds and consistent counters after its close.

use pgpipe::{Client, Config};

use crate::executor::Sim;
use crate::server::Kind;

/// Routing's limits while the client is open (`docs/ROUTING.md`): at most `pipeline_size`
/// base connections, on-demand ones only up to `max_connections`, and no lane traffic when
/// there is no room for a lane.
pub(super) fn coalescing(client: &Client<Sim>) -> (u64, u64, u64) {
    let s = client.stats();
    let t = s.total;
    (
        t.units_coalesced,
        t.units_resent,
        s.exclusive.early_handovers,
    )
}

pub(super) fn open_stats(client: &Client<Sim>, cfg: &Config) -> Result<(), String> {
    let s = client.stats();
    let on_demand = cfg.connection_limit() - cfg.pipeline_size;
    if s.open_base > cfg.pipeline_size || s.open_lanes + s.open_overflow > on_demand {
        return Err(format!(
            "open connections: {} base, {} lanes, {} overflow (limits {}, {on_demand})",
            s.open_base, s.open_lanes, s.open_overflow, cfg.pipeline_size
        ));
    }
    if client.live_connections() > cfg.connection_limit() {
        return Err(format!("{} live connections", client.live_connections()));
    }
    // Exclusive connections share the budget beyond the base: lanes and overflow leave them
    // `pinned_size`, and all of them together stay within it (or within `pinned_size`).
    let (exclusive, _) = client.pinned_counts();
    let lanes = s.open_lanes + s.open_overflow;
    if lanes > on_demand.saturating_sub(cfg.pinned_size)
        || lanes + exclusive > on_demand.max(cfg.pinned_size)
    {
        return Err(format!(
            "{lanes} lanes and overflow with {exclusive} exclusive connections (budget {on_demand}, reserve {})",
            cfg.pinned_size
        ));
    }
    if on_demand == 0 && (s.total.lane_units > 0 || s.total.opened_on_demand > 0) {
        return Err("lane traffic without room for a lane".into());
    }
    Ok(())
}

/// Statistics after a graceful close: no connection live, nothing queued or in flight, one
/// ReadyForQuery per unit, the counters consistent with what callers saw, the in-flight and
/// mailbox bounds held.
pub(super) fn end_stats(
    client: &Client<Sim>,
    cfg: &Config,
    values: u64,
    db_errors: u64,
) -> Result<(), String> {
    let s = client.stats();
    let t = &s.total;
    if client.live_connections() != 0 {
        return Err(format!(
            "{} connections live after close",
            client.live_connections()
        ));
    }
    // Every shared-path answer a caller saw was a completed unit (and an error counted).
    if t.units_completed < values + db_errors || t.errors_db < db_errors {
        return Err(format!(
            "callers saw {values} values and {db_errors} server errors, but the counters say \
             {} units completed and {} server errors",
            t.units_completed, t.errors_db
        ));
    }
    if t.in_flight != 0 || t.queued != 0 {
        return Err(format!(
            "after close: {} in flight, {} queued",
            t.in_flight, t.queued
        ));
    }
    if !t.ready_accounts_for_every_unit() {
        return Err(format!(
            "{} ReadyForQuery and {} units sharing a Sync for {} units",
            t.ready_received, t.units_coalesced, t.units_completed
        ));
    }
    if t.in_flight_peak > cfg.max_in_flight as u64 {
        return Err(format!(
            "in flight peaked at {} (max {})",
            t.in_flight_peak, cfg.max_in_flight
        ));
    }
    // Prepare units bypass the mailbox's bound (one per SQL text in flight, single flight),
    // so the bound is the mailbox plus the distinct texts.
    let bound = (cfg.mailbox_size + Kind::ALL.len()) as u64;
    if t.queued_peak > bound {
        return Err(format!(
            "queued peaked at {} (bound {bound})",
            t.queued_peak
        ));
    }
    Ok(())
}
