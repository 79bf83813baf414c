//! Routing: which connection a shared-path unit goes to. Least-loaded by count, around a
//! connection with a known slow statement ahead; overflow connections when server work, not
//! round trips, saturates the base ones; lanes for statements estimated slow.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;
use std::time::Instant;

use super::Client;
use crate::driver::shared::{ConnShared, Role};
use crate::rt::Runtime;
use crate::Error;

/// Estimated extra work ahead (ns) on the least-loaded connection beyond which routing prefers
/// the connection with the least estimated work: roughly one statement known to be slow.
pub(super) const SLOW_AHEAD_NS: u64 = 5_000_000;

/// The longest a fast unit is held back for the lanes (see [`Client::hold_while_lanes_queue`]),
/// in case no lane completion comes to release it.
pub(super) const HOLD_MAX: std::time::Duration = std::time::Duration::from_millis(20);

/// The least-loaded open connection of `conns` (see [`Client::route`]), scanning from `start`.
pub(super) fn least_loaded(conns: &[Arc<ConnShared>], start: usize) -> Option<&Arc<ConnShared>> {
    let n = conns.len();
    let mut by_count: Option<((u64, u64), &Arc<ConnShared>)> = None;
    let mut by_cost: Option<((u64, u64), &Arc<ConnShared>)> = None;
    for i in 0..n {
        let c = &conns[(start + i) % n];
        if !c.is_open() {
            continue;
        }
        let load = c.load();
        if load == 0 {
            return Some(c);
        }
        let cost = c.pending_cost();
        if by_count.is_none_or(|(k, _)| (load, cost) < k) {
            by_count = Some(((load, cost), c));
        }
        if by_cost.is_none_or(|(k, _)| (cost, load) < k) {
            by_cost = Some(((cost, load), c));
        }
    }
    match (by_count, by_cost) {
        (Some(((_, count_cost), _)), Some(((min_cost, _), k)))
            if count_cost > min_cost + SLOW_AHEAD_NS =>
        {
            Some(k)
        }
        (Some((_, c)), _) => Some(c),
        _ => None,
    }
}

impl<R: Runtime> Client<R> {
    /// The connection for a fast-path unit. Among the `pipeline_size` base connections: the
    /// first idle one from a rotating start, else the least loaded by count (which keeps
    /// uniform work evenly spread) unless that one has far more estimated work ahead than the
    /// one with the least (a statement expected to be slow is queued there: go around it).
    /// When even the best base connection is work-bound (its in-flight limit stopped at
    /// `max_queue_work` of estimated server work with units still waiting), server work, not
    /// round trips, is what limits it: an overflow connection with less work is used, and one
    /// more is opened if the limit allows. Cheap units hit `max_in_flight` first and never
    /// trigger this: pipelining already serves them. Behind a transaction pooler, where a
    /// connection has one Sync outstanding at a time, units waiting behind it do (they are
    /// sync-bound): client connections to a pooler are cheap, its own pool is the capacity.
    pub(super) async fn route(&self, deadline: Option<Instant>) -> Result<&Arc<ConnShared>, Error> {
        let inner = &*self.inner;
        let base = inner.base();
        let start = inner.cursor.fetch_add(1, Relaxed) % base.len();
        let Some(best) = least_loaded(base, start) else {
            return self.wait_for_live(deadline).await;
        };
        // Behind a transaction pooler a connection has one Sync outstanding at a time: units
        // queued behind it are what another client connection to the pooler would carry.
        if inner.on_demand().is_empty()
            || !(best.is_sync_bound() || (inner.elastic() && best.is_work_bound()))
        {
            return Ok(best);
        }
        Ok(self.overflow(best, deadline).await)
    }

    /// The base connections are work-bound: the open overflow connection with the least
    /// estimated work if it has less than `best`; while the best choice is work-bound too, a new
    /// one is opened (one at a time) and this unit waits for it: the work queued ahead of it
    /// is worth more than a connect.
    pub(super) async fn overflow<'a>(
        &'a self,
        mut best: &'a Arc<ConnShared>,
        deadline: Option<Instant>,
    ) -> &'a Arc<ConnShared> {
        let inner = &*self.inner;
        let mut opening = false;
        for c in inner.on_demand() {
            if c.role() != Role::Overflow {
                continue;
            }
            if c.is_open() {
                if c.pending_cost() < best.pending_cost() {
                    best = c;
                }
            } else if !c.has_exited() {
                opening = true;
            }
        }
        let bound = best.is_work_bound() || best.is_sync_bound();
        if !opening && bound && self.spare_cpu() == Some(true) {
            if let Some(c) = self.open_and_wait(Role::Overflow, deadline).await {
                crate::sched::lock(&inner.spare).opened();
                return c;
            }
        }
        best
    }

    /// Whether the machine has CPU to spare for one more connection (`spare_cpu_pct`,
    /// `client/spare.rs`; `None`: still measuring); a refusal is counted.
    fn spare_cpu(&self) -> Option<bool> {
        let inner = &*self.inner;
        let spare =
            crate::sched::lock(&inner.spare).check(inner.rt.now(), || inner.rt.cpu_sample());
        if spare == Some(false) {
            inner.overflow_held.fetch_add(1, Relaxed);
            crate::observe::overflow_held();
        }
        spare
    }

    /// Where a unit estimated slow (`est` ns) runs: an idle lane (lowest slot first, so the
    /// rest go idle and retire), else a new one (awaited: a connect costs far less than the
    /// wait behind a slow unit), else the lane with the least estimated work, unless that lane
    /// already has work queued and a base connection without slow work would finish it sooner:
    /// then it **spills** there. With every lane busy, slow work would otherwise have only
    /// the lanes while the base connections' server time goes to fast work alone. Bounded, so
    /// fast work keeps its path: a base connection takes a spilled unit only while it has no
    /// slow work (so a fast unit waits behind at most one), and fast units route around it
    /// while another has less work ([`least_loaded`]). `None`: no lane can be had (every
    /// on-demand slot is an overflow connection, or opening failed and none is open).
    pub(super) async fn slow_home(
        &self,
        deadline: Option<Instant>,
        est: u64,
    ) -> Option<&Arc<ConnShared>> {
        let best = self.lane(deadline).await?;
        if best.load() == 0 || best.role() != Role::Lane {
            return Some(best);
        }
        let slow = self.inner.slow_ns;
        let clean = self
            .inner
            .base()
            .iter()
            .filter(|c| c.is_open() && c.pending_cost() < slow)
            .min_by_key(|c| c.pending_cost());
        match clean {
            Some(b) if b.pending_cost() + est < best.pending_cost() => Some(b),
            _ => Some(best),
        }
    }

    /// Whether every lane has slow work queued behind the one it runs, and no slot (or no
    /// budget, which exclusive connections share) is left to open another: slow work is then waiting for lanes while fast work keeps coming.
    pub(super) fn lanes_queue(&self) -> bool {
        let mut lanes = 0;
        let mut free_slot = false;
        for c in self.inner.on_demand() {
            if c.is_open() {
                match c.role() {
                    Role::Lane if c.load() < 2 => return false,
                    Role::Lane => lanes += 1,
                    _ => {}
                }
            } else if c.has_exited() {
                free_slot = true;
            }
        }
        // A free slot the budget allows: a lane can still be opened.
        lanes > 0 && !(free_slot && self.inner.pinned.on_demand_room())
    }

    /// Admission for fast units (`Config::fair_lanes`): while every lane has a queue, a fast
    /// unit waits until one of them has none. In a closed loop the callers' own pace is the
    /// only brake on how fast slow work arrives; fast work served without limit lets slow
    /// work pile up on the lanes until most callers wait there (Little's law). Held here,
    /// the excess waits in front of the fast path instead, where every unit is cheap. The
    /// wait is bounded by [`HOLD_MAX`] and the caller's deadline. `Ok(true)`: it was held.
    pub(super) async fn hold_while_lanes_queue(
        &self,
        deadline: Option<Instant>,
    ) -> Result<bool, Error> {
        if self.inner.on_demand().is_empty() || !self.lanes_queue() {
            return Ok(false);
        }
        let inner = &*self.inner;
        let held = inner.gate.hold();
        // Released meanwhile: the completion that would release it may have come before the
        // hold was registered.
        if !self.lanes_queue() {
            return Ok(false);
        }
        let rt = &inner.rt;
        let mut cap = rt.sleep_until(rt.now() + HOLD_MAX);
        let wait = futures_lite::future::poll_fn(|cx| {
            if held.poll_block(cx).is_ready() {
                return std::task::Poll::Ready(Ok(true));
            }
            std::pin::Pin::new(&mut cap).poll(cx).map(|_| Ok(true))
        });
        crate::rt::with_deadline(rt, deadline, wait).await
    }

    /// A lane: an idle one, else a new one, else the one with the least estimated work.
    async fn lane(&self, deadline: Option<Instant>) -> Option<&Arc<ConnShared>> {
        let inner = &*self.inner;
        let mut best: Option<&Arc<ConnShared>> = None;
        for c in inner.on_demand() {
            if c.role() != Role::Lane || !c.is_open() {
                continue;
            }
            if c.load() == 0 {
                return Some(c);
            }
            if best.is_none_or(|b| c.pending_cost() < b.pending_cost()) {
                best = Some(c);
            }
        }
        if let Some(c) = self.open_and_wait(Role::Lane, deadline).await {
            return Some(c);
        }
        best
    }

    /// No base connection is open (every one is reconnecting: a server restart, a failover, a
    /// terminated backend): the unit has not left the client, so it waits for one to open
    /// rather than fail while the client reconnects. Bounded by `dispatch_timeout` and the
    /// caller's deadline; then `NoConnection` with the last connection error (or `Timeout`
    /// for the deadline, as everywhere else).
    async fn wait_for_live(&self, deadline: Option<Instant>) -> Result<&Arc<ConnShared>, Error> {
        let inner = &*self.inner;
        let rt = &inner.rt;
        let started = rt.now();
        let until = started + inner.config.dispatch_timeout;
        loop {
            // Listen before looking: an open in between is not missed.
            let mut listeners: Vec<_> = inner.base().iter().map(|c| c.live.listen()).collect();
            if let Some(c) = least_loaded(inner.base(), 0) {
                return Ok(c);
            }
            let reason = match self.fallback() {
                Err(Error::NoConnection { reason }) => reason,
                other => return other,
            };
            let now = rt.now();
            if now >= until {
                let waited = now.saturating_duration_since(started);
                let reason = match inner.config.dispatch_timeout.is_zero() {
                    true => reason,
                    false => format!("none came back within {waited:?}; {reason}").into(),
                };
                return Err(Error::NoConnection { reason });
            }
            let opened = futures_lite::future::poll_fn(|cx| {
                let mut ready = listeners.iter_mut().map(|l| Pin::new(l).poll(cx));
                match ready.any(|p| p.is_ready()) {
                    true => std::task::Poll::Ready(Ok(())),
                    false => std::task::Poll::Pending,
                }
            });
            let bound = async {
                rt.sleep_until(until).await;
                Ok(())
            };
            let wait = futures_lite::future::or(opened, bound);
            crate::rt::with_deadline(rt, deadline, wait).await?;
        }
    }

    /// No base connection is open: an open overflow connection if there is one, else why not.
    pub(super) fn fallback(&self) -> Result<&Arc<ConnShared>, Error> {
        let inner = &*self.inner;
        if let Some(c) = inner
            .on_demand()
            .iter()
            .find(|c| c.is_open() && c.role() == Role::Overflow)
        {
            return Ok(c);
        }
        if inner.closing.load(Acquire) {
            return Err(Error::Closed);
        }
        // The reason one of them gives (a reconnect's error names the servers and why).
        let reason = inner
            .base()
            .iter()
            .find_map(|c| c.down_reason())
            .map_or_else(
                || "every pipelined connection has failed".into(),
                |r| format!("every pipelined connection has failed: {r}").into(),
            );
        Err(Error::NoConnection { reason })
    }
}
