//! The connection task: the one owner of a socket.
//!
//! Each poll is one tick: read everything available, drain every complete message (completing
//! units in FIFO order), pump queued units into the write buffer up to `max_in_flight`, write
//! the batch, and only then wake the callers whose units completed. Read, drain, pump and write
//! are plain synchronous functions: nothing inside a tick awaits, and no waiting task can run
//! until the tick is over (see [`crate::sched`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::driver::cancel::Cancel;
use crate::driver::health::Probe;
use crate::driver::open::{Endpoint, Opening};
use crate::driver::shared::{nanos, ConnShared, Role, Statement, Status, Token};
use crate::driver::transport::{Transport, MAX_RECORD};
use crate::proto::coalesce::{self, SYNC};
use crate::proto::timing::{Backoff, Estimator, Silence, HEAVY_WINDOW};
use crate::proto::{Pipeline, SessionInfo, UnitKind};
use crate::rt::Runtime;
use crate::sched::{lock, DeferredWakes, TickGuard, Waiter};
use crate::{DbError, Error, Reason};

use deliver::{fail, Completer};

mod deliver;
mod lifecycle;

/// Bytes read per tick before yielding to the executor, so one busy connection cannot starve it.
const READ_BUDGET: usize = 1 << 20;
/// The pump stops adding units while this much is still unwritten (the socket pushes back).
const WRITE_HIGH_WATER: usize = 256 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// A unit on the wire, with the position of its first byte in the output stream: on a
/// connection failure, a unit none of whose bytes were written is `NotDispatched`.
struct Sent {
    token: Token,
    start: u64,
    /// The estimate counted in the connection's pending cost, and the statement to update.
    cost: u64,
    stmt: Option<Arc<Statement>>,
    /// When the unit was handed to the write buffer (the runtime's clock).
    sent_at: Instant,
    /// Bytes of this unit (without its Sync) kept in the task's replay buffer, so it can be
    /// sent again if an earlier unit of its segment fails (0: not in a segment).
    replay: usize,
    /// Its Sync was dropped: it shares the next unit's.
    joined: bool,
}

/// The half-open check of a connection with work in flight (`driver/health.rs`).
enum Health<R: Runtime> {
    /// No timer armed.
    Idle,
    /// A timer for the check (it may fire early: the silence may have restarted since).
    Waiting(R::Sleep),
    /// Asking the server; the silence's due time when the check began (a byte heard since
    /// makes the check moot).
    Probing(Box<Probe<R>>, Instant),
    /// A pooler stands between this task and the server: its checks would judge the wrong
    /// backend (`Verdict::Pooled`).
    Off,
}

/// Where the task is in a connection's life.
enum Phase<R: Runtime> {
    /// Connecting, TLS and authentication, bounded by `connect_timeout` (boxed: large, and
    /// alive only while connecting).
    Opening(Box<Opening<R>>),
    /// Serving units: every poll is one tick.
    Running,
    /// Waiting before reconnecting a shared connection that died.
    Backoff(R::Sleep),
    /// Closed or dead for good.
    Done,
}

/// The future that owns one connection: it connects, authenticates, serves units and, for a
/// shared connection that dies, reconnects with backoff. Spawn it on the runtime; it ends when
/// the connection is closed (or, for an exclusive connection, dies).
pub struct ConnTask<R: Runtime> {
    rt: R,
    cfg: Arc<Endpoint>,
    shared: Arc<ConnShared>,
    phase: Phase<R>,
    socket: Option<Transport<R::Socket>>,
    rbuf: BytesMut,
    chunk: Box<[u8]>,
    wbuf: BytesMut,
    /// Total bytes handed to the write buffer / actually written.
    pumped: u64,
    written: u64,
    pipeline: Pipeline<Sent>,
    wakes: DeferredWakes,
    session: SessionInfo,
    fatal: Option<DbError>,
    /// Exclusive (session/transaction) connections may sit in a transaction between units,
    /// and are replaced by the pool rather than reconnected.
    exclusive: bool,
    /// Told the outcome of the first connect; reconnects report to nobody.
    opened: Option<Arc<Waiter<Result<(), Error>>>>,
    backoff: Backoff,
    terminating: bool,
    /// Server-time estimates, the in-flight work gauge and the trip floor (`proto::timing`).
    est: Estimator<Arc<Statement>>,
    /// On-demand connections only: when this connection last had work, and the timer that
    /// retires it after `idle_timeout` without any.
    last_active: Instant,
    idle_timer: Option<(Instant, R::Sleep)>,
    /// The last pump stopped at the write high-water mark with units still queued.
    queue_left: bool,
    /// Exclusive connections: a CancelRequest for abandoned work, and the bound on it (the
    /// ReadyForQuery count that means the abandoned units are done, and its deadline); while
    /// the request is out, only units before `cancel_end` are sent.
    cancel: Option<Cancel<R>>,
    cancel_end: u64,
    cancel_bound: Option<(u64, R::Sleep)>,
    /// How long the server has been silent with work in flight, and the check it leads to.
    silence: Silence,
    health: Health<R>,
    /// The last read got bytes (a partial message left in the buffer is not news).
    heard: bool,
    /// The server of the host list this connection is on (cancels and health checks go there).
    server: usize,
    /// The server's role no longer matches `target_session_attrs` (a standby promoted, ...):
    /// nothing more is sent, and once the units in flight are answered the connection
    /// reconnects to a server that matches.
    stale: Option<String>,
    /// The bytes (without Sync) of the units in flight that share a Sync, in FIFO order:
    /// those an earlier unit's failure makes the server skip are sent again from here.
    replay: BytesMut,
    /// Units skipped in the last drain and written again, to re-enter the FIFO.
    resent: Vec<(Sent, UnitKind)>,
    /// An exclusive connection parked idle in its pool, as the last pump saw it.
    pooled: bool,
}

impl<R: Runtime> ConnTask<R> {
    pub(crate) fn new(
        rt: R,
        cfg: Arc<Endpoint>,
        shared: Arc<ConnShared>,
        exclusive: bool,
        opened: Arc<Waiter<Result<(), Error>>>,
    ) -> Self {
        let phase = Phase::Opening(Box::new(Opening::new(&rt, &cfg, exclusive)));
        let max_message = cfg.max_message_size;
        let rt_now = rt.now();
        ConnTask {
            rt,
            cfg,
            shared,
            phase,
            socket: None,
            rbuf: BytesMut::with_capacity(8 * 1024),
            chunk: vec![0u8; READ_CHUNK].into_boxed_slice(),
            wbuf: BytesMut::with_capacity(16 * 1024),
            pumped: 0,
            written: 0,
            pipeline: Pipeline::new().with_max_message(max_message),
            wakes: DeferredWakes::default(),
            session: SessionInfo::default(),
            fatal: None,
            exclusive,
            opened: Some(opened),
            backoff: Backoff::new(),
            terminating: false,
            est: Estimator::new(rt_now),
            last_active: rt_now,
            idle_timer: None,
            queue_left: false,
            cancel: None,
            cancel_end: 0,
            cancel_bound: None,
            silence: Silence::default(),
            health: Health::Idle,
            heard: false,
            server: 0,
            stale: None,
            replay: BytesMut::new(),
            resent: Vec::new(),
            pooled: false,
        }
    }

    /// Opened on demand: closed when idle, and not reconnected when it dies.
    fn on_demand(&self) -> bool {
        !self.exclusive && self.shared.role() != Role::Base
    }

    /// One tick. Returns `Ready` when the task is finished.
    fn tick(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.abort_flag.load(Relaxed) {
            if let Some(sock) = self.socket.as_mut() {
                let _ = sock.poll_close(cx);
            }
            return self.die("aborted by the client".into());
        }
        if self.pipeline.is_paused() {
            // A streaming consumer made room: take what is buffered before reading more.
            if let Err(v) = self.drain() {
                return self.die(format!("protocol violation: {}", v.0));
            }
        }
        // While a stream's consumer has no room, nothing more is read: TCP holds the server.
        let more = match self.pipeline.is_paused() {
            true => false,
            false => match self.read(cx) {
                Ok(more) => more,
                Err(end) => return self.read_ended(end),
            },
        };
        if let Err(v) = self.drain() {
            return self.die(format!("protocol violation: {}", v.0));
        }
        if !matches!(self.phase, Phase::Running) {
            // The drain found a reason to stop (backstop); die() already ran.
            return self.stopped();
        }
        if self.stale.is_some() && self.pipeline.is_empty() {
            // Everything sent is answered; what is queued fails as never sent (retried on
            // another connection) and the reconnect looks for a server that matches.
            let reason = self.stale.take().unwrap_or_default();
            return self.die(reason);
        }
        if self.exclusive {
            if let Err(reason) = self.cancel_abandoned(cx) {
                return self.die(reason);
            }
        }
        let idle_closing = self.pump(cx);
        if let Err(reason) = self.write(cx) {
            return self.die(reason);
        }
        if let Err(reason) = self.check_health(cx) {
            return self.die(reason);
        }
        // Exclusive connections retire only while parked idle in their pool.
        let retirable = self.on_demand() || (self.exclusive && self.pooled);
        if !retirable {
            self.idle_timer = None;
        }
        if idle_closing || (retirable && self.retire_if_idle(cx)) {
            return self.close(cx);
        }
        // More to read (budget spent), or units left queued at the write high-water mark
        // while the socket took everything: nothing else would wake the task for them (COPY
        // data, in particular, gets no answer until its end).
        if more || (self.queue_left && self.wbuf.is_empty()) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }

    /// What a tick returns once the connection stopped serving: done, or backing off.
    fn stopped(&self) -> Poll<()> {
        match self.phase {
            Phase::Done => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }

    /// The socket reached its end (`None`: EOF) or failed. What was read before it still
    /// completes its units: a server that answers and then closes (a FATAL after the last
    /// ReadyForQuery) must not turn finished units into `Indeterminate` ones.
    fn read_ended(&mut self, end: Option<String>) -> Poll<()> {
        if let Err(v) = self.drain() {
            return self.die(format!("protocol violation: {}", v.0));
        }
        match self.phase {
            Phase::Running => {}
            // The drain found a reason to stop; die() already ran.
            Phase::Done => return Poll::Ready(()),
            _ => return Poll::Pending,
        }
        // After the drain, so a FATAL the server sent before closing names the reason.
        let reason = end.unwrap_or_else(|| self.eof_reason());
        self.die(reason)
    }

    /// Reads until the socket would block or the budget is spent. `Ok(true)`: budget spent;
    /// `Err(None)`: EOF; `Err(Some(reason))`: the read failed.
    fn read(&mut self, cx: &mut Context<'_>) -> Result<bool, Option<String>> {
        let mut total = 0usize;
        let Some(sock) = self.socket.as_mut() else {
            return Err(Some("no socket".into()));
        };
        let result = loop {
            match sock.poll_read(cx, &mut self.chunk) {
                Poll::Ready(Ok(0)) => break Err(None),
                Poll::Ready(Ok(n)) => {
                    self.rbuf.extend_from_slice(&self.chunk[..n]);
                    total += n;
                    if total >= READ_BUDGET {
                        break Ok(true);
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => break Err(Some(format!("read failed: {e}"))),
                Poll::Pending => break Ok(false),
            }
        };
        self.heard = total > 0;
        if total > 0 {
            let c = &self.shared.counters;
            c.inc(&c.readable_events);
            c.bytes_in.fetch_add(total as u64, Relaxed);
        }
        result
    }

    fn eof_reason(&self) -> String {
        match &self.fatal {
            Some(e) => format!("server closed the connection: {e}"),
            None => "server closed the connection".to_owned(),
        }
    }

    fn drain(&mut self) -> Result<(), crate::proto::ProtocolViolation> {
        if self.rbuf.is_empty() {
            return Ok(());
        }
        let mut h = Completer {
            shared: &self.shared,
            wakes: &mut self.wakes,
            fatal: &mut self.fatal,
            session: &mut self.session,
            exclusive: self.exclusive,
            leaked: None,
            role_changed: false,
            now: self.rt.now(),
            est: &mut self.est,
            replay: &mut self.replay,
            wbuf: &mut self.wbuf,
            pumped: &mut self.pumped,
            resent: &mut self.resent,
            resend: self.stale.is_none(),
        };
        let before = self.pipeline.len();
        let result = self.pipeline.drain(&mut self.rbuf, &mut h);
        let (leaked, now, role_changed) = (h.leaked.take(), h.now, h.role_changed);
        self.est.end_drain(now, self.pipeline.is_empty());
        if std::mem::take(&mut self.heard) {
            self.silence.heard(now);
        }
        // Counted from the FIFO, not the result: units completed before a protocol violation
        // in the same drain were delivered and must leave the in-flight gauge too.
        let done = before - self.pipeline.len();
        if done > 0 {
            self.shared
                .counters
                .in_flight
                .fetch_sub(done as u64, Relaxed);
        }
        if !self.resent.is_empty() {
            // Written again by the completer, in this order: back into the FIFO.
            let n = self.resent.len() as u64;
            for (sent, kind) in self.resent.drain(..) {
                self.pipeline.push(sent, kind);
            }
            self.shared.counters.in_flight.fetch_add(n, Relaxed);
        }
        result?;
        if let Some(reason) = leaked {
            let _ = self.die(reason);
        } else if role_changed && !self.exclusive {
            self.check_role();
        }
        Ok(())
    }

    /// Moves queued units into the write buffer, up to the in-flight limit, and re-arms the
    /// coalesced wakeup. Returns whether the connection is closing with nothing left to do.
    fn pump(&mut self, cx: &mut Context<'_>) -> bool {
        let shared = &self.shared;
        let c = &shared.counters;
        let mut st = lock(&shared.state);
        st.wake_pending = false;
        match &st.task_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.task_waker = Some(cx.waker().clone()),
        }
        // Nothing new goes out while a cancel may still signal the backend (see
        // `driver/cancel.rs`): from the release's flag (read under the lock its units were
        // queued under, so they are never ahead of it) to the server's acknowledgement.
        let requested = self.exclusive && shared.cancel_abandoned.load(Acquire);
        // Due once the units of earlier holders are answered (`cancel_abandoned`); until then
        // their answers wake the task.
        if requested && self.pipeline.ready_seen() >= shared.cancel_after.load(Relaxed) {
            cx.waker().wake_by_ref();
        }
        // Units past the ones to cancel wait until the cancel is acknowledged.
        let hold = match (requested, &self.cancel) {
            (true, _) => Some(shared.cancel_until.load(Relaxed)),
            (false, Some(_)) => Some(self.cancel_end),
            (false, None) => None,
        };
        let window = self
            .est
            .window(self.cfg.max_in_flight)
            .saturating_sub(self.pipeline.len());
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
            Some(self.rt.now())
        };
        let mut moved = 0usize;
        let mut data = 0usize;
        // Bytes taken from the mailbox; of those, `run_start..bytes` are not yet copied to the
        // write buffer (a dropped Sync splits the copy).
        let mut bytes = 0usize;
        let mut run_start = 0usize;
        let mut copied = 0usize;
        // Sync coalescing: the segment the last unit taken belongs to (`proto/coalesce.rs`).
        // Not behind a transaction-mode pooler: PgBouncer 1.18 was seen forwarding bytes of
        // pipelines whose units share Syncs to the wrong server connection (the server then
        // logs `invalid frontend message type` and PgBouncer drops the client).
        let coalesce = self.cfg.sync_coalescing && !self.exclusive && shared.named_statements();
        let mut segment = coalesce::Segment::default();
        let mut last_start = 0usize;
        let work_cap = nanos(self.cfg.max_queue_work);
        let mut work_bound = false;
        let heavy_window = (self.cfg.max_in_flight / 4).min(HEAVY_WINDOW);
        while moved < room && self.wbuf.len() + bytes - run_start < WRITE_HIGH_WATER {
            match st.queue.front() {
                None => break,
                Some(q)
                    if !self
                        .est
                        .admits(self.pipeline.len(), heavy_window, q.cost, work_cap) =>
                {
                    c.inc(&c.work_limited);
                    work_bound = true;
                    break;
                }
                Some(_) => {}
            }
            let Some(q) = st.queue.pop_front() else { break };
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
            last_start = bytes;
            bytes += q.len;
            if matches!(q.kind, UnitKind::Data) {
                // COPY data of the unit in flight: written, never answered.
                data += 1;
                continue;
            }
            self.est.sent(q.cost);
            moved += 1;
            match q.kind {
                UnitKind::Prepare => {
                    c.inc(&c.parses_sent);
                    c.inc(&c.describes_sent);
                }
                UnitKind::Typed => {
                    c.inc(&c.parses_sent);
                    c.inc(&c.describes_sent);
                }
                UnitKind::Execute(_)
                | UnitKind::Stream(_)
                | UnitKind::Simple
                | UnitKind::CopyOut
                | UnitKind::CopyIn
                | UnitKind::Data
                | UnitKind::Batch(_)
                | UnitKind::Status => {}
            }
            if q.closes {
                c.inc(&c.closes_sent);
            }
            let sent_at = now.unwrap_or(self.est.last_done());
            self.pipeline.push_framed(
                Sent {
                    token: q.token,
                    start,
                    cost: q.cost,
                    stmt: q.stmt,
                    sent_at,
                    replay,
                    joined: false,
                },
                q.kind,
                q.frame,
            );
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
            self.last_active = self.rt.now();
        }
        self.pooled = st.pooled;
        let idle_closing = matches!(st.status, Status::Closing | Status::Retiring)
            && st.queue.is_empty()
            && self.pipeline.is_empty()
            && self.wbuf.is_empty();
        if shared.work_bound.load(Relaxed) != work_bound {
            shared.work_bound.store(work_bound, Relaxed);
        }
        if data > 0 {
            c.queued.fetch_sub(data as u64, Relaxed);
            shared.grant_room(&mut st, &mut self.wakes);
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
            shared.grant_room(&mut st, &mut self.wakes);
        }
        drop(st);
        idle_closing
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Poll<()> {
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
                Phase::Backoff(_) => {
                    if self.closing(cx) {
                        return self.finish(Status::Closed);
                    }
                    let Phase::Backoff(sleep) = &mut self.phase else {
                        continue;
                    };
                    match Pin::new(sleep).poll(cx) {
                        Poll::Ready(_) => {
                            self.phase = Phase::Opening(Box::new(Opening::new(
                                &self.rt,
                                &self.cfg,
                                self.exclusive,
                            )))
                        }
                        Poll::Pending => return Poll::Pending,
                    }
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
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
        }
    }

    fn write(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        let c = &self.shared.counters;
        let Some(sock) = self.socket.as_mut() else {
            return Err("no socket".into());
        };
        while !self.wbuf.is_empty() {
            match sock.poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(0)) => return Err("socket accepted no bytes".into()),
                Poll::Ready(Ok(n)) => {
                    c.inc(&c.write_calls);
                    c.bytes_out.fetch_add(n as u64, Relaxed);
                    if sock.is_tls() {
                        c.tls_records_out
                            .fetch_add(n.div_ceil(MAX_RECORD) as u64, Relaxed);
                    }
                    self.wbuf.advance(n);
                    self.written += n as u64;
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => return Err(format!("write failed: {e}")),
                Poll::Pending => break,
            }
        }
        match sock.poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(format!("write failed: {e}")),
            _ => Ok(()),
        }
    }
}

impl<R: Runtime> Future for ConnTask<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let r = this.step(cx);
        // Every lock is released and the tick is over: now the callers may run.
        this.wakes.wake_all();

        if r.is_ready() {
            this.shared.mark_exited();
        }
        r
    }
}

impl<R: Runtime> Drop for ConnTask<R> {
    fn drop(&mut self) {
        // A runtime that drops the task without finishing it (shutdown) must not leave callers
        // waiting forever.
        if !matches!(self.phase, Phase::Done) {
            let reason = Reason::from("connection task was dropped by its runtime");
            self.fail_all(&reason);
            if let Some(w) = self.opened.take() {
                w.unblock(
                    Err(Error::NoConnection {
                        reason: reason.clone(),
                    }),
                    &mut self.wakes,
                );
            }
            self.wakes.wake_all();
            self.shared.mark_exited();
        }
    }
}
