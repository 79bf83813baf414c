//! The connection's life around the ticks: opening and the first connect's outcome, backoff
//! and reconnects, idle retirement, the bounded cancel of abandoned work, graceful close, and
//! death (every unit failed with the error that says whether it was sent).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use super::{fail, ConnTask, Health, Phase, Sent};
use crate::driver::cancel::{Cancel, CANCEL_BOUND};
use crate::driver::health::{Probe, Verdict};
use crate::driver::open::Opened;
use crate::driver::shared::Status;
use crate::proto::role::Role;
use crate::proto::SessionInfo;
use crate::rt::Runtime;
use crate::sched::lock;
use crate::{Error, Reason};

impl<R: Runtime> ConnTask<R> {
    /// Polls the opening phase. `Ready(Ok)` once the connection is serving.
    pub(super) fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let Phase::Opening(opening) = &mut self.phase else {
            return Poll::Ready(Ok(()));
        };
        let Opened {
            transport,
            info,
            rest,
            server,
        } = match opening.poll(cx, &self.rt, &self.cfg) {
            Poll::Ready(Ok(done)) => done,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        check_session(&info)?;
        if transport.is_tls() {
            let c = &self.shared.counters;
            c.inc(&c.tls_handshakes);
        }
        self.socket = Some(transport);
        self.rbuf.clear();
        // What the server sent after its ReadyForQuery, read with it: the first drain's.
        self.rbuf.extend_from_slice(&rest);
        self.session = info;
        self.server = server;
        #[cfg(feature = "tracing")]
        {
            let end = &self.cfg.servers[server];
            let host = std::sync::Arc::from(end.host.as_str());
            lock(&self.shared.state).server = Some((host, end.port));
        }
        self.phase = Phase::Running;
        Poll::Ready(Ok(()))
    }

    /// The connect or handshake failed: tell the opener (first connect), or back off and retry.
    pub(super) fn open_failed(&mut self, e: Error) -> Poll<()> {
        self.socket = None;
        if let Some(opened) = self.opened.take() {
            opened.unblock(Err(e), &mut self.wakes);
            return self.finish(Status::Dead("connection could not be opened".into()));
        }
        let c = &self.shared.counters;
        c.inc(&c.errors_connection);
        let delay = if wrong_role(&e) {
            // Servers that answer but have the wrong role: a failover may be under way, and
            // asking again is cheap.
            self.backoff.after_wrong_role()
        } else {
            self.backoff.after_failure(e.is_auth())
        };
        self.lock_status(Status::Dead(format!("reconnecting: {e}").into()));
        self.back_off(delay)
    }

    pub(super) fn back_off(&mut self, delay: Duration) -> Poll<()> {
        self.phase = Phase::Backoff(self.rt.sleep_until(self.rt.now() + delay));
        Poll::Pending
    }

    pub(super) fn lock_status(&self, status: Status) {
        self.shared
            .set_status(&mut lock(&self.shared.state), status);
    }

    /// Whether the service asked this connection to close (or abort).
    pub(super) fn closing(&self, cx: &mut Context<'_>) -> bool {
        let mut st = lock(&self.shared.state);
        match &st.task_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.task_waker = Some(cx.waker().clone()),
        }
        matches!(st.status, Status::Closing | Status::Closed)
            || self.shared.abort_flag.load(Relaxed)
    }

    /// The connection is ready: serve.
    pub(super) fn opened_ok(&mut self) {
        self.backoff.reset();
        self.fatal = None;
        self.pumped = 0;
        self.written = 0;
        self.wbuf.clear();
        self.terminating = false;
        match self.opened.take() {
            Some(w) => w.unblock(Ok(()), &mut self.wakes),
            None => {
                let c = &self.shared.counters;
                c.inc(&c.reconnects);
                crate::observe::reconnected(self.shared.role_name());
            }
        }
        // A reconnect must not resurrect a connection the service is closing.
        let mut st = lock(&self.shared.state);
        if matches!(st.status, Status::Dead(_)) {
            self.shared.set_status(&mut st, Status::Open);
            drop(st);
            self.shared.live.notify(usize::MAX);
        }
    }

    /// Cancels the work its released holder left running (see `driver/cancel.rs`); `Err`
    /// when that work outlived the bound and the connection must go.
    pub(super) fn cancel_abandoned(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        // Not before the units of earlier holders are answered: the cancel must reach only
        // the releasing holder's statements.
        let due = self.shared.cancel_abandoned.load(Acquire)
            && self.pipeline.ready_seen() >= self.shared.cancel_after.load(Relaxed)
            && self.cancel_bound.is_none();
        let until = self.shared.cancel_until.load(Relaxed);
        // A later holder's units already on the wire (a connection handed on with its last
        // unit) could be what the backend runs when the signal lands: the abandoned work is
        // left to finish instead.
        let sent = self.pipeline.ready_seen() + self.pipeline.len() as u64;
        if due
            && self.shared.cancel_abandoned.swap(false, Relaxed)
            && self.pipeline.ready_seen() < until
            && sent <= until
        {
            self.cancel_end = until;
            let deadline = self.rt.sleep_until(self.rt.now() + CANCEL_BOUND);
            self.cancel_bound = Some((until, deadline));
            if let Some(key) = self.session.backend_key {
                self.cancel = Cancel::start(
                    &self.rt,
                    &self.cfg.servers[self.server].target,
                    key,
                    &self.cfg.cancels,
                );
                if self.cancel.is_some() {
                    crate::observe::cancel_sent();
                }
            }
        }
        // Finished before the request went out: no need to send it. Once sent, it is driven
        // to the server's acknowledgement whatever the work does (`pump` holds the queue
        // meanwhile).
        if self.pipeline.ready_seen() >= self.cancel_bound.as_ref().map_or(0, |b| b.0)
            && self.cancel.as_ref().is_some_and(|c| !c.sent())
        {
            self.cancel = None;
        }
        if let Some(cancel) = &mut self.cancel {
            if cancel.poll(cx).is_ready() {
                self.cancel = None;
            }
        }
        if let Some((until, deadline)) = &mut self.cancel_bound {
            if self.pipeline.ready_seen() >= *until {
                self.cancel_bound = None;
            } else if Pin::new(deadline).poll(cx).is_ready() {
                return Err(format!(
                    "statements abandoned by a released session still ran {CANCEL_BOUND:?} \
                     after their cancel; connection closed"
                ));
            }
        }
        Ok(())
    }

    /// The half-open check (`driver/health.rs`): after `health_check` of silence with work in
    /// flight, ask the server about the backend. `Err` when the connection is half-open.
    pub(super) fn check_health(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        let Some(after) = self.cfg.health_check else {
            return Ok(());
        };
        if matches!(self.health, Health::Off) {
            return Ok(());
        }
        // A paused stream is silent by our choice, not the server's.
        if self.pipeline.is_empty() || self.pipeline.is_paused() {
            self.silence.quiet();
            // An armed timer is kept: a connection that is busy and idle by turns (most are)
            // would otherwise arm one per busy spell. When it fires early it is re-armed for
            // the silence's due time, so there is at most one timer per interval.
            if matches!(self.health, Health::Probing(..)) {
                self.health = Health::Idle;
            }
            return Ok(());
        }
        loop {
            let Some(due) = self.silence.due(after) else {
                // In flight since before the pump read the clock (a reconnect's backlog).
                self.silence.busy(self.rt.now());
                continue;
            };
            match &mut self.health {
                Health::Off => return Ok(()),
                Health::Idle => self.health = Health::Waiting(self.rt.sleep_until(due)),
                Health::Waiting(sleep) => {
                    if Pin::new(sleep).poll(cx).is_pending() {
                        return Ok(());
                    }
                    if self.rt.now() < due {
                        // Heard from since the timer was armed: wait from the last sound.
                        self.health = Health::Waiting(self.rt.sleep_until(due));
                        continue;
                    }
                    let Some((pid, _)) = self.session.backend_key else {
                        // The server named no backend: there is nothing to ask about.
                        self.silence.heard(self.rt.now());
                        self.health = Health::Idle;
                        continue;
                    };
                    let probe = Probe::start(&self.rt, &self.cfg, self.server, pid, after / 2);
                    let c = &self.shared.counters;
                    c.inc(&c.health_checks);
                    self.health = Health::Probing(Box::new(probe), due);
                }
                Health::Probing(_, began) if *began != due => {
                    // A byte arrived during the check: the connection lives.
                    self.health = Health::Idle;
                }
                Health::Probing(probe, _) => match probe.poll(cx, &self.rt, &self.cfg) {
                    Poll::Pending => return Ok(()),
                    Poll::Ready(Verdict::HalfOpen(reason)) => {
                        self.health = Health::Idle;
                        let c = &self.shared.counters;
                        c.inc(&c.half_open);
                        return Err(reason);
                    }
                    Poll::Ready(Verdict::Pooled) => {
                        self.health = Health::Off;
                        return Ok(());
                    }
                    Poll::Ready(Verdict::Alive | Verdict::Unknown) => {
                        self.silence.heard(self.rt.now());
                        self.health = Health::Idle;
                    }
                },
            }
        }
    }

    /// The server reported a new role: if `target_session_attrs` no longer accepts it, the
    /// connection stops sending and goes stale (see [`ConnTask::stale`]).
    pub(super) fn check_role(&mut self) {
        let attrs = self.cfg.target_session_attrs;
        // prefer-standby settles for a primary when connecting; a running one is kept.
        let Some(why) = Role::reported(&self.session).and_then(|r| r.refused_by(attrs, true))
        else {
            return;
        };
        if self.stale.is_none() {
            let server = &self.cfg.servers[self.server].name;
            self.stale = Some(format!(
                "{server} became {why} (target_session_attrs); reconnecting"
            ));
        }
    }

    /// Graceful end: everything accepted has completed; say Terminate and close the socket.
    pub(super) fn close(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.terminating {
            self.terminating = true;
            postgres_protocol::message::frontend::terminate(&mut self.wbuf);
        }
        if self.write(cx).is_err() {
            return self.finish(self.closed_status());
        }
        if !self.wbuf.is_empty() {
            return Poll::Pending;
        }
        match self.socket.as_mut().map(|s| s.poll_close(cx)) {
            Some(Poll::Pending) => Poll::Pending,
            _ => self.finish(self.closed_status()),
        }
    }

    /// How a graceful close ends: a retired connection's slot stays available to the service
    /// (a caller that still reaches it is retried elsewhere); otherwise the service is closing.
    pub(super) fn closed_status(&self) -> Status {
        match lock(&self.shared.state).status {
            Status::Retiring => Status::Dead(Reason::retired()),
            _ => Status::Closed,
        }
    }

    /// Retires an on-demand connection (or an exclusive one parked in its pool) that has had
    /// nothing to do for `idle_timeout`; arms a timer for that moment otherwise. `true`: it
    /// stopped accepting work and should close.
    pub(super) fn retire_if_idle(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.pipeline.is_empty() {
            self.idle_timer = None;
            return false;
        }
        loop {
            let due = self.est.idle_due(self.last_active, self.cfg.idle_timeout);
            if self.rt.now() >= due {
                break;
            }
            let timer = match &mut self.idle_timer {
                Some((at, t)) if *at == due => t,
                slot => &mut slot.insert((due, self.rt.sleep_until(due))).1,
            };
            if Pin::new(timer).poll(cx).is_pending() {
                return false;
            }
        }
        self.idle_timer = None;
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

    /// Fails every unit: sent ones as `Indeterminate`, never-sent ones as `NotDispatched`.
    /// A shared connection then reconnects with backoff unless the service is closing.
    pub(super) fn die(&mut self, reason: String) -> Poll<()> {
        let reason = Reason::from(reason);
        crate::observe::connection_lost(self.shared.role_name(), &reason);
        let c = &self.shared.counters;
        c.inc(&c.errors_connection);
        // Read before `fail_all` marks the connection dead: a close that arrived in the same
        // tick as the failure must still end the task, not be forgotten by a reconnect.
        let closing = matches!(
            lock(&self.shared.state).status,
            Status::Closing | Status::Closed
        );
        self.fail_all(&reason);
        self.socket = None;
        self.rbuf.clear();
        self.wbuf.clear();
        self.silence.quiet();
        // A pooler in between stays in between after a reconnect.
        if !matches!(self.health, Health::Off) {
            self.health = Health::Idle;
        }
        if closing {
            return self.finish(Status::Closed);
        }
        // On-demand connections are not reconnected: the service opens one again when needed.
        let stopping = self.shared.abort_flag.load(Relaxed) || self.exclusive || self.on_demand();
        if stopping {
            return self.finish(Status::Dead(reason));
        }
        let delay = self.backoff.after_failure(false);
        self.back_off(delay)
    }

    /// Marks the connection dead and fails every unit it holds: sent ones as `Indeterminate`
    /// (unless none of their bytes were written), queued ones as `NotDispatched`.
    pub(super) fn fail_all(&mut self, reason: &Reason) {
        let queued = {
            let mut st = lock(&self.shared.state);
            self.shared
                .set_status(&mut st, Status::Dead(reason.clone()));
            st.buf.clear();
            st.committed = 0;
            // Statements die with their connection: a caller still holding one must prepare
            // again on the next backend. Pending prepares are failed below.
            st.forget_statements();
            // Callers waiting for room see the connection is gone (and go elsewhere).
            self.shared.wake_waiters(&mut st, &mut self.wakes);
            std::mem::take(&mut st.queue)
        };
        let c = &self.shared.counters;
        c.queued.fetch_sub(queued.len() as u64, Relaxed);
        c.in_flight.fetch_sub(self.pipeline.len() as u64, Relaxed);
        self.est.connection_lost();
        let written = self.written;
        let sent: Vec<Sent> = self.pipeline.take_all().collect();
        self.replay.clear();
        let units = sent
            .into_iter()
            .map(|s| (s.token, s.cost, s.start < written))
            .chain(queued.into_iter().map(|q| (q.token, q.cost, false)));
        for (token, cost, dispatched) in units {
            fail(
                &self.shared,
                token,
                cost,
                reason,
                dispatched,
                &mut self.wakes,
            );
        }
    }

    pub(super) fn finish(&mut self, status: Status) -> Poll<()> {
        self.phase = Phase::Done;
        self.socket = None;
        let mut st = lock(&self.shared.state);
        self.shared.set_status(&mut st, status);
        // The backend is gone: its statements with it (an on-demand slot is opened again later).
        st.forget_statements();
        // Callers waiting for room must see the new status.
        self.shared.wake_waiters(&mut st, &mut self.wakes);
        drop(st);
        Poll::Ready(())
    }
}

/// Some server answered but had the wrong role for `target_session_attrs`.
fn wrong_role(e: &Error) -> bool {
    match e {
        Error::WrongRole { .. } => true,
        Error::NoServer { attempts } => attempts.iter().any(|(_, e)| wrong_role(e)),
        _ => false,
    }
}

/// The shared path's guard relies on standard string literals; refuse a server without them.
fn check_session(info: &SessionInfo) -> Result<(), Error> {
    match info.parameter("standard_conforming_strings") {
        Some("on") => Ok(()),
        other => Err(Error::UnsupportedServer(format!(
            "standard_conforming_strings is {:?}; the shared path requires it to be on",
            other.unwrap_or("unreported")
        ))),
    }
}
