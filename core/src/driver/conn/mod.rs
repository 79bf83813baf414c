//! The connection's rules without I/O: a [`Conn`] takes the bytes the server sent and the time,
//! and gives the bytes to write, completions (delivered to the callers' waiters, their wakeups
//! deferred) and one deadline ([`Conn::poll_timeout`]). No socket, no timer, no clock read:
//! every instant comes in as an argument, so each rule is tested with made-up ones
//! (`conn/tests/`). The connection task (`driver/task/`) only moves bytes, runs the short
//! side connections the rules ask for (a health check, a CancelRequest) and sleeps until the
//! deadline.
//!
//! What lives where: reading answers and failing units (`deliver.rs`), moving queued units to
//! the write buffer (`pump.rs`), the timed rules (health check, idle retirement, the cancel of
//! abandoned work and its bound: `watch.rs`), whether a pooler is in between and the bound on
//! bytes in flight through one (`path.rs`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::driver::open::Endpoint;
use crate::driver::shared::{ConnShared, Role, Statement, Status, Token};
use crate::driver::spare::SpareCpu;
use crate::error::Fault;
use crate::proto::role::Role as ServerRole;
use crate::proto::timing::{Estimator, Silence};
use crate::proto::{Pipeline, SessionInfo, UnitKind};
use crate::rt::CpuSample;
use crate::sched::{lock, DeferredWakes};
use crate::{DbError, Reason};

use deliver::{fail, Completer};
use path::Path;
pub(crate) use watch::{earliest, Due};
use watch::{Cancelling, Health};

mod deliver;
mod path;
mod pump;
#[cfg(test)]
mod tests;
mod watch;

/// A unit on the wire, with the position of its first byte in the output stream: on a
/// connection failure, a unit none of whose bytes were written is `NotDispatched`.
pub(crate) struct Sent {
    token: Token,
    start: u64,
    /// The estimate counted in the connection's pending cost, and the statement to update.
    cost: u64,
    stmt: Option<Arc<Statement>>,
    /// When the unit was handed to the write buffer (the runtime's clock).
    sent_at: Instant,
    /// Bytes of this unit (without its Sync) kept in the replay buffer, so it can be sent again
    /// if an earlier unit of its segment fails (0: not in a segment).
    replay: usize,
    /// Its Sync was dropped: it shares the next unit's.
    joined: bool,
    /// The connection's own unit (the path probe): no caller's, so kept out of the counters
    /// callers read (in flight, completed, errors).
    internal: bool,
}

/// What the pump left for the task to do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pumped {
    /// The connection is closing and has nothing left to do: close it.
    pub(crate) idle_closing: bool,
    /// Poll again without waiting for an event: a cancel became due.
    pub(crate) again: bool,
}

/// How often a connection asks its spare-CPU gauge while answers come (the gauge reads the
/// counters at most once a second; a spell ends after a second without a question).
const SPARE_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// One connection's protocol state and every decision about it.
pub(crate) struct Conn {
    cfg: Arc<Endpoint>,
    shared: Arc<ConnShared>,
    /// Exclusive (session/transaction) connections may sit in a transaction between units,
    /// and are replaced by the pool rather than reconnected.
    exclusive: bool,
    /// What the server sent and the task has not drained yet.
    rbuf: BytesMut,
    /// What to write; the task writes from its front ([`Conn::transmit`], [`Conn::wrote`]).
    wbuf: BytesMut,
    /// Total bytes handed to the write buffer / actually written.
    pumped: u64,
    written: u64,
    pipeline: Pipeline<Sent>,
    /// Callers to wake once the task's tick is over.
    pub(crate) wakes: DeferredWakes,
    session: SessionInfo,
    fatal: Option<Box<DbError>>,
    /// Server-time estimates, the in-flight work gauge and the trip floor (`proto::timing`).
    est: Estimator<Arc<Statement>>,
    /// Whether the machine had CPU to spare lately (on a machine without any, samples far
    /// above their estimates are discounted): the gauge, its last verdict, and when to ask it
    /// again (a tenth of a second on: answers come every few microseconds).
    spare: SpareCpu,
    spare_now: Option<bool>,
    spare_next: Instant,
    /// When this connection last had work (idle retirement counts from here).
    last_active: Instant,
    /// The last pump stopped at the write high-water mark with units still queued.
    queue_left: bool,
    /// Exclusive connections: the cancel of work a released holder abandoned, and its bound.
    cancel: Cancelling,
    /// How long the server has been silent with work in flight, and the check it leads to.
    silence: Silence,
    health: Health,
    /// The server of the host list this connection is on (cancels and health checks go there).
    server: usize,
    /// The server's role no longer matches `target_session_attrs` (a standby promoted, ...):
    /// nothing more is sent, and once the units in flight are answered the connection
    /// reconnects to a server that matches.
    stale: Option<Fault>,
    /// The bytes (without Sync) of the units in flight that share a Sync, in FIFO order:
    /// those an earlier unit's failure makes the server skip are sent again from here.
    replay: BytesMut,
    /// Units skipped in the last drain and written again (where in the write buffer), to
    /// re-enter the FIFO.
    resent: Vec<(Sent, UnitKind, std::ops::Range<usize>)>,
    /// An exclusive connection parked idle in its pool, as the last pump saw it.
    pooled: bool,
    /// Terminate is in the write buffer.
    terminating: bool,
    /// A pooler in between or not, as the probe found (`path.rs`).
    path: Path,
}

impl Conn {
    /// The state of a connection not opened yet.
    pub(crate) fn new(
        cfg: Arc<Endpoint>,
        shared: Arc<ConnShared>,
        exclusive: bool,
        now: Instant,
    ) -> Conn {
        let max_message = cfg.max_message_size;
        let spare = SpareCpu::new(cfg.spare_cpu_pct);
        Conn {
            cfg,
            shared,
            exclusive,
            rbuf: BytesMut::with_capacity(8 * 1024),
            wbuf: BytesMut::with_capacity(16 * 1024),
            pumped: 0,
            written: 0,
            pipeline: Pipeline::new().with_max_message(max_message),
            wakes: DeferredWakes::default(),
            session: SessionInfo::default(),
            fatal: None,
            est: Estimator::new(now),
            spare,
            spare_now: None,
            spare_next: now,
            last_active: now,
            queue_left: false,
            cancel: Cancelling::default(),
            silence: Silence::default(),
            health: Health::Watching,
            server: 0,
            stale: None,
            replay: BytesMut::new(),
            resent: Vec::new(),
            pooled: false,
            terminating: false,
            path: Path::Pooler,
        }
    }

    /// The connection opened to `server` of the host list at `now`: `info` is what its
    /// startup reported, `rest` what the server sent after its ReadyForQuery (the first
    /// drain's). A shared connection's probe of its path goes out first (`path.rs`).
    pub(crate) fn opened(&mut self, info: SessionInfo, rest: &[u8], server: usize, now: Instant) {
        self.rbuf.clear();
        self.rbuf.extend_from_slice(rest);
        self.session = info;
        self.server = server;
        self.fatal = None;
        self.pumped = 0;
        self.written = 0;
        self.wbuf.clear();
        self.terminating = false;
        // Opening checked the new server's role.
        self.stale = None;
        self.probe_path(now);
    }

    /// A session's or transaction's connection (not reconnected; may sit in a transaction).
    pub(crate) fn exclusive(&self) -> bool {
        self.exclusive
    }

    /// The server of the host list the connection is open to.
    pub(crate) fn server(&self) -> usize {
        self.server
    }

    /// Opened on demand: closed when idle, and not reconnected when it dies.
    pub(crate) fn on_demand(&self) -> bool {
        !self.exclusive && self.shared.role() != Role::Base
    }

    /// The buffer the task reads the server's bytes into (then calls [`Conn::received`]).
    pub(crate) fn read_buf(&mut self) -> &mut BytesMut {
        &mut self.rbuf
    }

    /// Whether a streaming consumer has no room: nothing more should be read until it has.
    pub(crate) fn is_paused(&self) -> bool {
        self.pipeline.is_paused()
    }

    /// The bytes to write next.
    pub(crate) fn transmit(&self) -> &[u8] {
        &self.wbuf
    }

    /// `n` bytes of [`Conn::transmit`] were written.
    pub(crate) fn wrote(&mut self, n: usize) {
        self.wbuf.advance(n);
        self.written += n as u64;
    }

    /// Says Terminate, once: the graceful end of the connection.
    pub(crate) fn terminate(&mut self) {
        if !self.terminating {
            self.terminating = true;
            postgres_protocol::message::frontend::terminate(&mut self.wbuf);
        }
    }

    /// Delivers every complete message in the read buffer (bytes read at `now`; `heard`: the
    /// last read got bytes, so the server is not silent). `cpu` reads the machine's CPU
    /// counters (`Runtime::cpu_sample`), at most once a second while answers keep coming.
    /// `Err`: the connection must go.
    pub(crate) fn received(
        &mut self,
        now: Instant,
        heard: bool,
        cpu: impl FnOnce() -> Option<CpuSample>,
    ) -> Result<(), Fault> {
        if self.rbuf.is_empty() {
            return Ok(());
        }
        let one_sync = self.writes() == path::Writes::OneSync;
        let mut h = Completer {
            shared: &self.shared,
            wakes: &mut self.wakes,
            fatal: &mut self.fatal,
            session: &mut self.session,
            exclusive: self.exclusive,
            leaked: None,
            role_changed: false,
            now,
            est: &mut self.est,
            replay: &mut self.replay,
            wbuf: &mut self.wbuf,
            pumped: &mut self.pumped,
            resent: &mut self.resent,
            resend: self.stale.is_none(),
            one_sync,
            resegment: 0,
            internal_done: 0,
            probed: None,
            probing: matches!(self.path, Path::Probing),
        };
        let before = self.pipeline.len();
        let result = self.pipeline.drain(&mut self.rbuf, &mut h);
        let (leaked, role_changed) = (h.leaked.take(), h.role_changed);
        let (internal_done, probed) = (h.internal_done, h.probed);
        if now >= self.spare_next {
            self.spare_now = self.spare.check(now, cpu);
            self.spare_next = now + SPARE_RECHECK;
        }
        let discounted = self
            .est
            .end_drain(now, self.pipeline.is_empty(), self.spare_now);
        if discounted > 0 {
            let c = &self.shared.counters;
            c.samples_discounted_busy_cpu.fetch_add(discounted, Relaxed);
            crate::observe::samples_discounted_busy_cpu(discounted);
        }
        if heard {
            self.silence.heard(now);
        }
        // Counted from the FIFO, not the result: units completed before a protocol violation
        // in the same drain were delivered and must leave the in-flight gauge too.
        let done = before - self.pipeline.len() - internal_done;
        if done > 0 {
            self.shared
                .counters
                .in_flight
                .fetch_sub(done as u64, Relaxed);
        }
        if !self.resent.is_empty() {
            // Written again by the completer, in this order: back into the FIFO.
            let n = self.resent.len() as u64;
            for (sent, kind, at) in self.resent.drain(..) {
                let joined = sent.joined;
                self.pipeline.push(sent, kind, &self.wbuf[at]);
                if joined {
                    self.pipeline.join_last();
                }
            }
            self.shared.counters.in_flight.fetch_add(n, Relaxed);
        }
        result.map_err(|v| Fault::Protocol(v.0))?;
        if let Some(direct) = probed {
            self.settle_path(direct);
        }
        if let Some(fault) = leaked {
            return Err(fault);
        }
        if role_changed && !self.exclusive {
            self.check_role();
        }
        Ok(())
    }

    /// The server reported a new role: if `target_session_attrs` no longer accepts it, the
    /// connection stops sending and goes stale.
    fn check_role(&mut self) {
        let attrs = self.cfg.target_session_attrs;
        // prefer-standby settles for a primary when connecting; a running one is kept.
        let Some(role) =
            ServerRole::reported(&self.session).and_then(|r| r.refused_by(attrs, true))
        else {
            return;
        };
        if self.stale.is_none() {
            let server = self.cfg.servers[self.server].name.clone();
            self.stale = Some(Fault::RoleChanged { server, role });
        }
    }

    /// A stale connection whose units are all answered: it must reconnect (what is queued
    /// fails as never sent, and is retried on another connection).
    pub(crate) fn stale_done(&mut self) -> Option<Fault> {
        match self.pipeline.is_empty() {
            true => self.stale.take(),
            false => None,
        }
    }

    /// Why the server ended the stream: what it said before closing, if anything.
    pub(crate) fn closed(&mut self) -> Fault {
        Fault::Closed(self.fatal.take())
    }

    /// Marks the connection dead and fails every unit it holds: sent ones as `Indeterminate`
    /// (unless none of their bytes were written), queued ones as `NotDispatched`. Nothing of
    /// the dead connection's bytes or timers is kept.
    pub(crate) fn fail_all(&mut self, reason: &Reason) {
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
        self.est.connection_lost();
        let written = self.written;
        // The probe dies with its connection unanswered; the next opening probes again.
        let sent: Vec<Sent> = self.pipeline.take_all().filter(|s| !s.internal).collect();
        c.in_flight.fetch_sub(sent.len() as u64, Relaxed);
        self.path = Path::Pooler;
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
        self.rbuf.clear();
        self.wbuf.clear();
        self.silence.quiet();
        self.cancel = Cancelling::default();
        // A pooler in between stays in between after a reconnect.
        self.health.reset();
    }
}
