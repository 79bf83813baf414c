//! The connection's timed rules, each a deadline in [`Conn::poll_timeout`] and a decision in
//! [`Conn::handle_timeout`]: the half-open check after `health_check` of silence with work in
//! flight (`driver/health.rs` runs it), idle retirement after `idle_timeout`, and the bound on
//! work a released session abandoned (`driver/cancel.rs` sends its CancelRequest).

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};

use super::Conn;
use crate::driver::cancel::CANCEL_BOUND;
use crate::driver::health::Verdict;
use crate::driver::shared::Status;
use crate::error::Fault;
use crate::sched::lock;

/// The half-open check of a connection with work in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Health {
    /// Measuring the silence (its due time is a deadline while work is in flight).
    Watching,
    /// A check is out; the silence's due time when it began (a byte heard since makes the check
    /// moot).
    Probing(Instant),
    /// A pooler stands between this connection and the server: its checks would judge the
    /// wrong backend (`Verdict::Pooled`).
    Off,
}

impl Health {
    /// After a connection loss: watching again, unless a pooler was found (it stays in between).
    pub(super) fn reset(&mut self) {
        if *self != Health::Off {
            *self = Health::Watching;
        }
    }
}

/// The cancel of work a released holder abandoned (exclusive connections).
#[derive(Debug, Default)]
pub(super) struct Cancelling {
    /// A CancelRequest is out (the task runs it): only units before `end` are sent.
    pub(super) out: bool,
    pub(super) end: u64,
    /// The ReadyForQuery count that means the abandoned units are done, and its deadline.
    pub(super) bound: Option<(u64, Instant)>,
}

/// What a deadline asks the task to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Check backend `pid` from a second connection; an idle state counts once it held for
    /// `settled`.
    Probe {
        /// The backend to ask about.
        pid: i32,
        /// How long an idle state must have held to condemn the connection.
        settled: Duration,
    },
    /// The connection was idle for `idle_timeout` and stopped accepting work: close it.
    Retire,
}

/// The earlier of two deadlines (`None`: no deadline).
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl Conn {
    /// Retires after `idle_timeout` without work: on-demand connections, and exclusive ones
    /// while parked idle in their pool.
    fn retirable(&self) -> bool {
        self.on_demand() || (self.exclusive && self.pooled)
    }

    /// Whether the silence is being measured: work in flight, and no paused stream (a paused
    /// stream is silent by our choice, not the server's).
    fn waiting_for_server(&self) -> bool {
        !self.pipeline.is_empty() && !self.pipeline.is_paused()
    }

    /// The one instant by which [`Conn::handle_timeout`] must be called, if any.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let health = match (self.cfg.health_check, self.health) {
            (Some(after), Health::Watching) if self.waiting_for_server() => self.silence.due(after),
            _ => None,
        };
        let idle = (self.retirable() && self.pipeline.is_empty())
            .then(|| self.est.idle_due(self.last_active, self.cfg.idle_timeout));
        let bound = self.cancel.bound.map(|(_, at)| at);
        earliest(earliest(health, idle), bound)
    }

    /// Each tick, after the pump: keeps the silence in step with the pipeline. `true` when a
    /// check in progress became moot (the server spoke, or nothing waits for it): the task
    /// drops it.
    pub(crate) fn watch(&mut self, clock: impl Fn() -> Instant) -> bool {
        let Some(after) = self.cfg.health_check else {
            return false;
        };
        if self.health == Health::Off {
            return false;
        }
        if !self.waiting_for_server() {
            self.silence.quiet();
            let moot = matches!(self.health, Health::Probing(_));
            self.health = Health::Watching;
            return moot;
        }
        let due = match self.silence.due(after) {
            Some(due) => due,
            None => {
                // In flight since before the pump read the clock (a reconnect's backlog).
                let now = clock();
                self.silence.busy(now);
                now + after
            }
        };
        match self.health {
            Health::Probing(began) if began != due => {
                self.health = Health::Watching;
                true
            }
            _ => false,
        }
    }

    /// Acts on every rule due at `now`. `Err`: the connection must go.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Result<Option<Due>, Fault> {
        if let Some((until, deadline)) = self.cancel.bound {
            if self.pipeline.ready_seen() >= until {
                self.cancel.bound = None;
            } else if now >= deadline {
                return Err(Fault::CancelOutlived(CANCEL_BOUND));
            }
        }
        if let (Some(after), Health::Watching) = (self.cfg.health_check, self.health) {
            match self.silence.due(after) {
                Some(due) if now >= due && self.waiting_for_server() => {
                    let Some((pid, _)) = self.session.backend_key else {
                        // The server named no backend: there is nothing to ask about.
                        self.silence.heard(now);
                        return Ok(None);
                    };
                    let c = &self.shared.counters;
                    c.inc(&c.health_checks);
                    self.health = Health::Probing(due);
                    let settled = after / 2;
                    return Ok(Some(Due::Probe { pid, settled }));
                }
                _ => {}
            }
        }
        if self.retirable()
            && self.pipeline.is_empty()
            && now >= self.est.idle_due(self.last_active, self.cfg.idle_timeout)
        {
            if self.retire() {
                return Ok(Some(Due::Retire));
            }
            // Work is queued or promised (or the connection is going anyway): not idle, so
            // its idle time starts over.
            self.last_active = now;
        }
        Ok(None)
    }

    /// Stops accepting work if nothing is queued or promised: `true` when it did.
    fn retire(&mut self) -> bool {
        let mut st = lock(&self.shared.state);
        // Under the lock, so no caller can slip a unit in between the check and the status.
        let unused = st.queue.is_empty()
            && st.space_waiters.is_empty()
            && st.reserved == 0
            && (!self.exclusive || st.pooled);
        if !unused || !matches!(st.status, Status::Open) {
            return false;
        }
        self.shared.set_status(&mut st, Status::Retiring);
        let c = &self.shared.counters;
        c.inc(&c.retired_idle);
        crate::observe::retired(self.shared.role_name());
        true
    }

    /// The health check's verdict, at `now`. `Err`: the connection is half-open.
    pub(crate) fn verdict(&mut self, verdict: Verdict, now: Instant) -> Result<(), Fault> {
        match verdict {
            Verdict::HalfOpen(why) => {
                self.health = Health::Watching;
                let c = &self.shared.counters;
                c.inc(&c.half_open);
                Err(Fault::HalfOpen(why))
            }
            Verdict::Pooled => {
                self.health = Health::Off;
                Ok(())
            }
            Verdict::Alive | Verdict::Unknown => {
                self.silence.heard(now);
                self.health = Health::Watching;
                Ok(())
            }
        }
    }

    /// Exclusive connections, each tick: the backend key to cancel with when the work a
    /// released holder abandoned should be cancelled now (not before the units of earlier
    /// holders are answered: the cancel must reach only the releasing holder's statements).
    /// The task sends the request and says so ([`Conn::cancel_sent`]); from here on the work
    /// has [`CANCEL_BOUND`] to finish.
    pub(crate) fn cancel_due(&mut self, clock: impl Fn() -> Instant) -> Option<(i32, i32)> {
        let shared = &*self.shared;
        if let Some((until, _)) = self.cancel.bound {
            if self.pipeline.ready_seen() < until {
                return None;
            }
            // That work is done: a request waiting behind it is considered now, not at the
            // next wake (its held units may be all that would wake the task).
            self.cancel.bound = None;
        }
        let due = shared.cancel_abandoned.load(Acquire)
            && self.pipeline.ready_seen() >= shared.cancel_after.load(Relaxed);
        let until = shared.cancel_until.load(Relaxed);
        // A later holder's units already on the wire (a connection handed on with its last
        // unit) could be what the backend runs when the signal lands: the abandoned work is
        // left to finish instead.
        let sent = self.pipeline.ready_seen() + self.pipeline.len() as u64;
        if due
            && shared.cancel_abandoned.swap(false, Relaxed)
            && self.pipeline.ready_seen() < until
            && sent <= until
        {
            self.cancel.end = until;
            self.cancel.bound = Some((until, clock() + CANCEL_BOUND));
            return self.session.backend_key;
        }
        None
    }

    /// Whether a cancel request waiting in the shared flags can be taken now: none in flight,
    /// and the work of the last one ended.
    pub(crate) fn cancel_free(&self) -> bool {
        !self.cancel.out
            && self
                .cancel
                .bound
                .is_none_or(|(until, _)| self.pipeline.ready_seen() >= until)
    }

    /// The task could not send the CancelRequest [`Conn::cancel_due`] asked for (the client's
    /// cancels are all in flight): the work runs to its end, unbounded, as it would uncancelled.
    pub(crate) fn cancel_not_sent(&mut self) {
        self.cancel.bound = None;
    }

    /// The task sent (or is sending) a CancelRequest: nothing past the abandoned work goes out
    /// until [`Conn::cancel_over`].
    pub(crate) fn cancel_sent(&mut self) {
        self.cancel.out = true;
    }

    /// The abandoned work is done: a request not sent yet is not needed.
    pub(crate) fn cancel_moot(&self) -> bool {
        self.pipeline.ready_seen() >= self.cancel.bound.map_or(0, |(until, _)| until)
    }

    /// The server acknowledged the request (or it was dropped unsent, or could not be sent).
    pub(crate) fn cancel_over(&mut self) {
        self.cancel.out = false;
    }
}
