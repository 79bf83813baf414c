//! The connection's life around the ticks: opening and the first connect's outcome, backoff
//! and reconnects, graceful close, and death (every unit failed with the error that says
//! whether it was sent).

use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{ConnTask, Phase};
use crate::driver::open::{Opened, Opening};
use crate::driver::shared::Status;
use crate::error::Fault;
use crate::proto::SessionInfo;
use crate::rt::Runtime;
use crate::sched::{lock, TickGuard};
use crate::{Error, Reason};

impl<R: Runtime> ConnTask<R> {
    /// Drives the connection through its phases: opening, serving (one tick per poll),
    /// backing off, done.
    pub(super) fn step(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.phase {
                Phase::Done => return Poll::Ready(()),
                Phase::Running => {
                    let r = {
                        let _guard = TickGuard::enter();
                        self.tick(cx)
                    };
                    if r.is_ready() || matches!(self.phase, Phase::Running) {
                        return r;
                    }
                    // The connection died and is backing off: poll its timer so it fires.
                }
                Phase::Backoff(until, mark) => {
                    let (until, mark) = (*until, *mark);
                    if self.closing(cx) {
                        return self.finish(Status::Closed);
                    }
                    let reached = &self.cfg.reached;
                    let now = self.rt.now();
                    if reached.poll_since(mark, cx).is_ready() {
                        // The server takes connections: this one tries now, from the start.
                        self.backoff.reset();
                        reached.trying(now);
                    } else if now >= until {
                        reached.trying(now);
                    } else if self.backoff.refused_credentials() || !reached.scout(now) {
                        // Refused credentials are not scouted: they do not fix themselves in
                        // milliseconds. A timer armed earlier that fires only re-arms it.
                        let at = match self.backoff.refused_credentials() {
                            true => until,
                            false => reached.look_again(until),
                        };
                        if !self.arm(cx, Some(at)) {
                            return Poll::Pending;
                        }
                        continue;
                    }
                    self.phase = Phase::Opening(Box::new(Opening::new(
                        &self.rt,
                        &self.cfg,
                        self.conn.exclusive(),
                    )));
                }
                Phase::Opening(_) => {
                    if self.opened.is_none() && self.closing(cx) {
                        return self.finish(Status::Closed);
                    }
                    match self.poll_open(cx) {
                        Poll::Ready(Ok(())) => self.opened_ok(),
                        Poll::Ready(Err(e)) => {
                            if self.open_failed(e).is_ready() {
                                return Poll::Ready(());
                            }
                        }
                        Poll::Pending => {
                            let deadline = match &self.phase {
                                Phase::Opening(o) => Some(o.deadline()),
                                _ => None,
                            };
                            if self.arm(cx, deadline) {
                                // The attempt's time is up: poll it to say so.
                                continue;
                            }
                            return Poll::Pending;
                        }
                    }
                }
            }
        }
    }

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
        // What the server sent after its ReadyForQuery, read with it: the first drain's.
        self.conn.opened(info, &rest, server, self.rt.now());
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
            opened.unblock(Err(e), &mut self.conn.wakes);
            return self.finish(Status::Dead(Reason::from(Fault::OpenFailed)));
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
        self.lock_status(Status::Dead(Reason::from(Fault::Reconnecting(e))));
        self.back_off(delay)
    }

    pub(super) fn back_off(&mut self, delay: Duration) -> Poll<()> {
        self.phase = Phase::Backoff(self.rt.now() + delay, self.cfg.reached.mark());
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
        self.cfg.reached.opened();
        // The opening's deadline is moot: a serving connection's come from its rules.
        self.timer = None;
        match self.opened.take() {
            Some(w) => w.unblock(Ok(()), &mut self.conn.wakes),
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

    /// Graceful end: everything accepted has completed; say Terminate and close the socket.
    pub(super) fn close(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.conn.terminate();
        if self.write(cx).is_err() {
            return self.finish(self.closed_status());
        }
        if !self.conn.transmit().is_empty() {
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

    /// Fails every unit: sent ones as `Indeterminate`, never-sent ones as `NotDispatched`.
    /// A shared connection then reconnects with backoff unless the service is closing.
    pub(super) fn die(&mut self, fault: Fault) -> Poll<()> {
        let reason = Reason::from(fault);
        crate::observe::connection_lost(self.shared.role_name(), &reason);
        let c = &self.shared.counters;
        c.inc(&c.errors_connection);
        // Read before `fail_all` marks the connection dead: a close that arrived in the same
        // tick as the failure must still end the task, not be forgotten by a reconnect.
        let closing = matches!(
            lock(&self.shared.state).status,
            Status::Closing | Status::Closed
        );
        self.conn.fail_all(&reason);
        self.socket = None;
        self.probe = None;
        self.cancel = None;
        if closing {
            return self.finish(Status::Closed);
        }
        // On-demand connections are not reconnected: the service opens one again when needed.
        let stopping =
            self.shared.abort_flag.load(Relaxed) || self.conn.exclusive() || self.conn.on_demand();
        if stopping {
            return self.finish(Status::Dead(reason));
        }
        let delay = self.backoff.after_failure(false);
        self.back_off(delay)
    }

    pub(super) fn finish(&mut self, status: Status) -> Poll<()> {
        self.phase = Phase::Done;
        self.socket = None;
        let mut st = lock(&self.shared.state);
        self.shared.set_status(&mut st, status);
        // The backend is gone: its statements with it (an on-demand slot is opened again later).
        st.forget_statements();
        // Callers waiting for room must see the new status.
        self.shared.wake_waiters(&mut st, &mut self.conn.wakes);
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
