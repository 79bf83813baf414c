//! What runs beside the socket: the one timer (armed for the earliest deadline of the
//! connection, its health check and its opening or backoff), and the short side connections the
//! connection's rules ask for (a health check, a CancelRequest), driven to their end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use super::ConnTask;
use crate::driver::cancel::Cancel;
use crate::driver::conn::{earliest, Due};
use crate::driver::health::Probe;
use crate::error::Fault;
use crate::rt::Runtime;

impl<R: Runtime> ConnTask<R> {
    /// Arms the one timer for the earliest deadline and acts on what is due. `Ok(true)`: the
    /// connection retired and should close.
    pub(super) fn poll_timer(&mut self, cx: &mut Context<'_>) -> Result<bool, Fault> {
        loop {
            let probe = self.probe.as_ref().map(|p| p.deadline());
            let next = earliest(self.conn.poll_timeout(), probe);
            if !self.arm(cx, next) {
                return Ok(false);
            }
            // A check past its own bound ends with its verdict.
            self.drive_probe(cx)?;
            match self.conn.handle_timeout(self.rt.now())? {
                None => {}
                Some(Due::Retire) => return Ok(true),
                Some(Due::Probe { pid, settled }) => {
                    let probe = Probe::start(&self.rt, &self.cfg, self.conn.server(), pid, settled);
                    self.probe = Some(Box::new(probe));
                    self.drive_probe(cx)?;
                }
            }
        }
    }

    /// Keeps the timer armed for `next` (a timer armed for later is moved earlier; one armed
    /// for earlier is kept, and re-armed when it fires early). `true`: it fired.
    pub(super) fn arm(&mut self, cx: &mut Context<'_>, next: Option<Instant>) -> bool {
        match (&self.timer, next) {
            // Nothing is due: a timer still armed is kept but not polled (it may wake the
            // task once, for nothing; re-arming it per busy spell would cost more).
            (_, None) => return false,
            (Some((at, _)), Some(next)) if next < *at => self.timer = None,
            _ => {}
        }
        if let (None, Some(next)) = (&self.timer, next) {
            self.timer = Some((next, self.rt.sleep_until(next)));
        }
        let Some((_, sleep)) = &mut self.timer else {
            return false;
        };
        if Pin::new(sleep).poll(cx).is_pending() {
            return false;
        }
        self.timer = None;
        true
    }

    /// Drives the health check in progress to its verdict.
    pub(super) fn drive_probe(&mut self, cx: &mut Context<'_>) -> Result<(), Fault> {
        let Some(probe) = self.probe.as_mut() else {
            return Ok(());
        };
        let Poll::Ready(verdict) = probe.poll(cx, &self.rt, &self.cfg) else {
            return Ok(());
        };
        self.probe = None;
        self.conn.verdict(verdict, self.rt.now())
    }

    /// Exclusive connections: sends the cancel the connection asks for, and drives it to the
    /// server's acknowledgement (see `driver/cancel.rs`).
    pub(super) fn drive_cancel(&mut self, cx: &mut Context<'_>) {
        let rt = &self.rt;
        // One request at a time: a later one waits until this one is acknowledged (replacing
        // it would drop its acknowledgement, and the held queue with it).
        let due = match self.cancel {
            None => self.conn.cancel_due(|| rt.now()),
            Some(_) => None,
        };
        if let Some(key) = due {
            let target = &self.cfg.servers[self.conn.server()].target;
            self.cancel = Cancel::start(&self.rt, target, key, &self.cfg.cancels);
            match self.cancel {
                Some(_) => {
                    self.conn.cancel_sent();
                    crate::observe::cancel_sent();
                }
                // The client's cancels are all in flight: this one is not sent, so nothing
                // holds the work to its bound.
                None => self.conn.cancel_not_sent(),
            }
        }
        // Finished before the request went out: no need to send it. Once sent, it is driven
        // to the server's acknowledgement whatever the work does (the pump holds the queue
        // meanwhile).
        let over = match &mut self.cancel {
            None => return,
            Some(c) if self.conn.cancel_moot() && !c.sent() => true,
            Some(c) => c.poll(cx).is_ready(),
        };
        if over {
            self.cancel = None;
            self.conn.cancel_over();
        }
    }
}
