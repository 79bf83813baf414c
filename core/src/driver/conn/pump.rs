//! The pump: queued units move from the mailbox into the write buffer, up to the in-flight
//! window, the work limit and, behind a pooler, the bytes in flight (`path.rs`), with the
//! Syncs of shared segments dropped (their replay copy kept) and, on an exclusive connection,
//! nothing past a cancel's bound.

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Instant;

use bytes::Buf;

use super::path::{Writes, POOLER_FLIGHT_BYTES, POOLER_REFILL_BYTES};
use super::{Conn, Pumped, Sent};
use crate::driver::shared::{nanos, State, Status};
use crate::proto::coalesce::{self, SYNC};
use crate::proto::timing::HEAVY_WINDOW;
use crate::proto::UnitKind;

/// The pump stops adding units while this much is still unwritten (the socket pushes back).
pub(crate) const WRITE_HIGH_WATER: usize = 256 * 1024;

impl Conn {
    /// Moves queued units from `st` (the mailbox, locked by the caller) into the write buffer.
    /// `clock` is read at most twice, and only when there is something to time.
    pub(crate) fn pump(&mut self, st: &mut State, clock: impl Fn() -> Instant) -> Pumped {
        let shared = &*self.shared;
        let c = &shared.counters;
        let mut again = false;
        // Nothing new goes out while a cancel may still signal the backend (see
        // `driver/cancel.rs`): from the release's flag (read under the lock its units were
        // queued under, so they are never ahead of it) to the server's acknowledgement.
        let requested = self.exclusive && shared.cancel_abandoned.load(Acquire);
        // Due once the units of earlier holders are answered (`cancel_abandoned`); until then
        // their answers wake the task.
        // Not while one is in flight or its work runs: the acknowledgement, or that work's
        // answer, wakes the task then.
        if requested
            && self.cancel_free()
            && self.pipeline.ready_seen() >= shared.cancel_after.load(Relaxed)
        {
            again = true;
        }
        // Units past the ones to cancel wait until the cancel is acknowledged.
        let hold = match (requested, self.cancel.out) {
            (true, _) => Some(shared.cancel_until.load(Relaxed)),
            (false, true) => Some(self.cancel.end),
            (false, false) => None,
        };
        let full = self.est.window(self.cfg.max_in_flight);
        let window = full.saturating_sub(self.pipeline.len());
        // A pass that adds to a pipeline waits until half the window is free: units then go
        // out (and their answers come back) in batches, not one for every unit answered.
        let window = if !self.pipeline.is_empty() && window < full / 2 {
            0
        } else {
            window
        };
        let room = match hold {
            _ if self.stale.is_some() => 0,
            Some(end) => {
                let sent = self.pipeline.ready_seen() + self.pipeline.len() as u64;
                window.min(end.saturating_sub(sent) as usize)
            }
            None => window,
        };
        // One clock read per pump, not per unit.
        let now = if st.queue.is_empty() {
            None
        } else {
            Some(clock())
        };
        let mut moved = 0usize;
        let mut data = 0usize;
        // Bytes taken from the mailbox; of those, `run_start..bytes` are not yet copied to the
        // write buffer (a dropped Sync splits the copy).
        let mut bytes = 0usize;
        let mut run_start = 0usize;
        let mut copied = 0usize;
        // How the path lets this connection write (`path.rs`): behind a transaction pooler,
        // nothing while a Sync is unanswered, then one unit or one segment; with
        // `pooler=transaction-pipelined`, the bytes in flight (from the first byte of the
        // oldest unit not yet answered) within a bound.
        let writes = self.writes();
        let one_sync = writes == Writes::OneSync;
        let sync_out = one_sync && !self.pipeline.is_empty();
        let mut flight_from = self.pipeline.oldest().map(|s| s.start);
        // Sync coalescing: the segment the last unit taken belongs to (`proto/coalesce.rs`).
        // A pass ends with its last unit's Sync, so every write ends at a segment's end.
        let coalesce = self.cfg.sync_coalescing && !self.exclusive;
        let mut segment = coalesce::Segment::default();
        let mut last_start = 0usize;
        let work_cap = nanos(self.cfg.max_queue_work);
        let mut work_bound = false;
        let heavy_window = (self.cfg.max_in_flight / 4).min(HEAVY_WINDOW);
        while moved < room && self.wbuf.len() + bytes - run_start < WRITE_HIGH_WATER {
            let Some(q) = st.queue.front() else { break };
            // COPY data belongs to the unit in flight, which was admitted.
            let is_data = matches!(q.kind, UnitKind::Data);
            if !is_data && sync_out {
                break;
            }
            if !is_data
                && !self
                    .est
                    .admits(self.pipeline.len(), heavy_window, q.cost, work_cap)
            {
                c.inc(&c.work_limited);
                work_bound = true;
                break;
            }
            if let (false, Writes::Bounded, Some(from)) = (is_data, writes, flight_from) {
                let end = self.pumped + (copied + bytes - run_start + q.len) as u64;
                // A pass starts only once a refill's worth of room is free, so writes (and
                // the answers they draw) come in batches, not a unit for every unit answered.
                let floor = if moved == 0 {
                    q.len.max(POOLER_REFILL_BYTES)
                } else {
                    q.len
                };
                if end - q.len as u64 - from + floor as u64 > POOLER_FLIGHT_BYTES as u64 {
                    break;
                }
            }
            // From the statement as it is now: its last execution may have failed meanwhile.
            let stmt = q.stmt.as_deref();
            let read_only = coalesce
                && matches!(q.kind, UnitKind::Execute(_))
                && !q.closes
                && stmt.is_some_and(|s| s.read_only && s.observed());
            let unit = coalesce::Unit {
                read_only,
                cost: q.cost,
                risky: stmt.is_some_and(|s| s.last_failed()),
                // Looked at only for units that could share a Sync at all.
                ends_in_sync: read_only
                    && q.len > SYNC.len()
                    && st.buf[bytes..bytes + q.len].ends_with(&SYNC),
            };
            // One Sync at a time: after the first unit, only units that share its Sync.
            if one_sync && !is_data && moved > 0 && !segment.joins(coalesce, unit) {
                break;
            }
            let Some(q) = st.queue.pop_front() else { break };
            let mut replay = 0;
            if segment.take(coalesce, unit) {
                // The previous unit's Sync is the last thing taken so far: leave it out, and
                // keep both units' bytes to send them again if the server skips them.
                self.wbuf
                    .extend_from_slice(&st.buf[run_start..bytes - SYNC.len()]);
                copied += bytes - SYNC.len() - run_start;
                run_start = bytes;
                if let Some(prev) = self.pipeline.join_last() {
                    if prev.replay == 0 {
                        prev.replay = bytes - SYNC.len() - last_start;
                        self.replay
                            .extend_from_slice(&st.buf[last_start..bytes - SYNC.len()]);
                    }
                    prev.joined = true;
                }
                replay = q.len - SYNC.len();
                self.replay
                    .extend_from_slice(&st.buf[bytes..bytes + replay]);
            }
            let start = self.pumped + (copied + bytes - run_start) as u64;
            flight_from.get_or_insert(start);
            last_start = bytes;
            bytes += q.len;
            if matches!(q.kind, UnitKind::Data) {
                // COPY data of the unit in flight: written, never answered.
                data += 1;
                continue;
            }
            self.est.sent(q.cost);
            moved += 1;
            if matches!(q.kind, UnitKind::Prepare | UnitKind::Typed) {
                c.inc(&c.parses_sent);
                c.inc(&c.describes_sent);
            }
            if q.closes {
                c.inc(&c.closes_sent);
            }
            let sent_at = now.unwrap_or(self.est.last_done());
            let sent = Sent {
                token: q.token,
                start,
                cost: q.cost,
                stmt: q.stmt,
                sent_at,
                replay,
                joined: false,
                internal: false,
            };
            // What its answers are checked against: as its encoder said, or as its bytes say.
            match q.script {
                Some(script) => self.pipeline.push_scripted(sent, q.kind, q.frame, script),
                None => {
                    let wire = &st.buf[last_start..bytes];
                    self.pipeline.push_framed(sent, q.kind, q.frame, wire)
                }
            }
        }
        if bytes > 0 {
            self.wbuf.extend_from_slice(&st.buf[run_start..bytes]);
            copied += bytes - run_start;
            st.buf.advance(bytes);
            st.committed -= bytes;
            self.pumped += copied as u64;
        }
        self.queue_left = self.wbuf.len() + bytes >= WRITE_HIGH_WATER && !st.queue.is_empty();
        if st.pooled && !self.pooled {
            // Parked idle just now: its idle time starts here, not at its holder's last unit.
            self.last_active = now.unwrap_or_else(&clock);
        }
        self.pooled = st.pooled;
        let idle_closing = matches!(st.status, Status::Closing | Status::Retiring)
            && st.queue.is_empty()
            && self.pipeline.is_empty()
            && self.wbuf.is_empty();
        if shared.work_bound.load(Relaxed) != work_bound {
            shared.work_bound.store(work_bound, Relaxed);
        }
        let sync_bound = one_sync && !self.pipeline.is_empty() && !st.queue.is_empty();
        if shared.sync_bound.load(Relaxed) != sync_bound {
            shared.sync_bound.store(sync_bound, Relaxed);
        }
        if data > 0 {
            c.queued.fetch_sub(data as u64, Relaxed);
            shared.grant_room(st, &mut self.wakes);
        }
        if moved > 0 {
            if let Some(now) = now {
                self.last_active = now;
                self.silence.busy(now);
            }
            // Under the lock, so the gauge never counts a unit as both queued and in flight.
            c.queued.fetch_sub(moved as u64, Relaxed);
            let now = c.in_flight.fetch_add(moved as u64, Relaxed) + moved as u64;
            c.in_flight_peak.fetch_max(now, Relaxed);
            // Room in the mailbox: granted to waiting callers in order, woken after the tick.
            shared.grant_room(st, &mut self.wakes);
        }
        Pumped {
            idle_closing,
            again,
        }
    }

    /// Units were left queued at the write high-water mark and the socket has taken
    /// everything since: nothing else would wake the task for them (COPY data, in particular,
    /// gets no answer until its end).
    pub(crate) fn queue_left(&self) -> bool {
        self.queue_left && self.wbuf.is_empty()
    }
}
