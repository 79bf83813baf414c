//! The connection task: the one owner of a socket.
//!
//! Each poll is one tick: read everything available, drain every complete message (completing
//! units in FIFO order), pump queued units into the write buffer up to `max_in_flight`, write
//! the batch, and only then wake the callers whose units completed. Read, drain, pump and write
//! are plain synchronous functions: nothing inside a tick awaits, and no waiting task can run
//! until the tick is over (see [`crate::sched`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use postgres_types::Type;

use crate::driver::shared::{
    nanos, ConnShared, Notification, PrepareError, QueryResult, Role, Statement, Status, Token,
    DEFAULT_COST_NS, NOTIFICATION_BACKLOG, RETIRED,
};

use crate::driver::cancel::{Cancel, CANCEL_BOUND};
use crate::driver::open::{Endpoint, Opening};
use crate::driver::transport::{Transport, MAX_RECORD};
use crate::proto::{Handler, Outcome, Pipeline, SessionInfo};
use crate::row::Column;
use crate::rt::Runtime;
use crate::sched::{lock, DeferredWakes, TickGuard, Waiter};
use crate::{DbError, Error};

/// Bytes read per tick before yielding to the executor, so one busy connection cannot starve it.
const READ_BUDGET: usize = 1 << 20;
/// The pump stops adding units while this much is still unwritten (the socket pushes back).
const WRITE_HIGH_WATER: usize = 256 * 1024;
const READ_CHUNK: usize = 64 * 1024;
/// The in-flight work limit holds windows of fewer units than this (or than a quarter of
/// `max_in_flight`): units heavy enough for it average over `max_queue_work / 16` each.
const HEAVY_WINDOW: usize = 16;

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
    backoff: Duration,
    terminating: bool,
    /// When the last unit completed (for per-unit server time estimates).
    last_done: Instant,
    /// Estimated server work of the units in flight (the adaptive in-flight limit's gauge).
    in_flight_cost: u64,
    /// The shortest trip (send to ReadyForQuery) of a unit sent to an empty pipeline: the round
    /// trip with next to no server work, taken off such units' samples so that estimates are
    /// server time, not latency.
    trip_floor: u64,
    /// The statements completed by the current drain with their estimates, and the distinct
    /// statements already sampled in it (both reused).
    batch: Vec<(Option<Arc<Statement>>, u64)>,
    batch_seen: Vec<usize>,
    /// On-demand connections only: when this connection last had work, and the timer that
    /// retires it after `idle_timeout` without any.
    last_active: Instant,
    idle_timer: Option<(Instant, R::Sleep)>,
    /// The last pump stopped at the write high-water mark with units still queued.
    queue_left: bool,
    /// Exclusive connections: a CancelRequest for abandoned work, and the bound on it (the
    /// ReadyForQuery count that means the abandoned units are done, and its deadline).
    cancel: Option<Cancel<R>>,
    cancel_bound: Option<(u64, R::Sleep)>,
}

const BACKOFF_START: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The wait before a reconnect after the server refused the credentials.
const AUTH_RETRY: Duration = Duration::from_secs(30);

impl<R: Runtime> ConnTask<R> {
    pub(crate) fn new(
        rt: R,
        cfg: Arc<Endpoint>,
        shared: Arc<ConnShared>,
        exclusive: bool,
        opened: Arc<Waiter<Result<(), Error>>>,
    ) -> Self {
        let phase = Phase::Opening(Box::new(Opening::new(&rt, &cfg, exclusive)));
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
            pipeline: Pipeline::new(),
            wakes: DeferredWakes::default(),
            session: SessionInfo::default(),
            fatal: None,
            exclusive,
            opened: Some(opened),
            backoff: BACKOFF_START,
            terminating: false,
            last_done: rt_now,
            in_flight_cost: 0,
            trip_floor: u64::MAX,
            batch: Vec::new(),
            batch_seen: Vec::new(),
            last_active: rt_now,
            idle_timer: None,
            queue_left: false,
            cancel: None,
            cancel_bound: None,
        }
    }

    /// Opened on demand: closed when idle, and not reconnected when it dies.
    fn on_demand(&self) -> bool {
        !self.exclusive && self.shared.role() != Role::Base
    }

    /// Polls the opening phase. `Ready(Ok)` once the connection is serving.
    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let Phase::Opening(opening) = &mut self.phase else {
            return Poll::Ready(Ok(()));
        };
        let (transport, info) = match opening.poll(cx, &self.rt, &self.cfg) {
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
        self.session = info;
        self.phase = Phase::Running;
        Poll::Ready(Ok(()))
    }

    /// The connect or handshake failed: tell the opener (first connect), or back off and retry.
    fn open_failed(&mut self, e: Error) -> Poll<()> {
        self.socket = None;
        if let Some(opened) = self.opened.take() {
            opened.unblock(Err(e), &mut self.wakes);
            return self.finish(Status::Dead("connection could not be opened".into()));
        }
        let c = &self.shared.counters;
        c.inc(&c.errors_connection);
        if matches!(e, Error::Auth(_)) {
            // Credentials do not fix themselves in milliseconds: retrying fast would only lock
            // accounts and flood the server's log with failed logins.
            self.backoff = self.backoff.max(AUTH_RETRY);
        }
        self.lock_status(Status::Dead(format!("reconnecting: {e}").into()));
        self.back_off()
    }

    fn back_off(&mut self) -> Poll<()> {
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        self.phase = Phase::Backoff(self.rt.sleep_until(self.rt.now() + delay));
        Poll::Pending
    }

    fn lock_status(&self, status: Status) {
        self.shared
            .set_status(&mut lock(&self.shared.state), status);
    }

    /// Whether the service asked this connection to close (or abort).
    fn closing(&self, cx: &mut Context<'_>) -> bool {
        let mut st = lock(&self.shared.state);
        match &st.task_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.task_waker = Some(cx.waker().clone()),
        }
        matches!(st.status, Status::Closing | Status::Closed)
            || self.shared.abort_flag.load(Relaxed)
    }

    /// The connection is ready: serve.
    fn opened_ok(&mut self) {
        self.backoff = BACKOFF_START;
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
            }
        }
        // A reconnect must not resurrect a connection the service is closing.
        let mut st = lock(&self.shared.state);
        if matches!(st.status, Status::Dead(_)) {
            self.shared.set_status(&mut st, Status::Open);
        }
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
                Err(reason) => return self.die(reason),
            },
        };
        if let Err(v) = self.drain() {
            return self.die(format!("protocol violation: {}", v.0));
        }
        if !matches!(self.phase, Phase::Running) {
            // The drain found a reason to stop (backstop); die() already ran.
            return if matches!(self.phase, Phase::Done) {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
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
        if idle_closing || (self.on_demand() && self.retire_if_idle(cx)) {
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

    /// Cancels the work its released holder left running (see `driver/cancel.rs`); `Err`
    /// when that work outlived the bound and the connection must go.
    fn cancel_abandoned(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        if self.shared.cancel_abandoned.swap(false, Relaxed)
            && !self.pipeline.is_empty()
            && self.cancel_bound.is_none()
        {
            let until = self.pipeline.ready_seen() + self.pipeline.len() as u64;
            let deadline = self.rt.sleep_until(self.rt.now() + CANCEL_BOUND);
            self.cancel_bound = Some((until, deadline));
            if let Some(key) = self.session.backend_key {
                self.cancel = Cancel::start(&self.rt, &self.cfg.target, key, &self.cfg.cancels);
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

    /// Reads until the socket would block or the budget is spent. `Ok(true)`: budget spent.
    fn read(&mut self, cx: &mut Context<'_>) -> Result<bool, String> {
        let mut total = 0usize;
        let Some(sock) = self.socket.as_mut() else {
            return Err("no socket".into());
        };
        let result = loop {
            match sock.poll_read(cx, &mut self.chunk) {
                Poll::Ready(Ok(0)) => break Err(self.eof_reason()),
                Poll::Ready(Ok(n)) => {
                    self.rbuf.extend_from_slice(&self.chunk[..n]);
                    total += n;
                    if total >= READ_BUDGET {
                        break Ok(true);
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => break Err(format!("read failed: {e}")),
                Poll::Pending => break Ok(false),
            }
        };
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
            now: self.rt.now(),
            last_done: self.last_done,
            in_flight_cost: &mut self.in_flight_cost,
            trip_floor: &mut self.trip_floor,
            batch: &mut self.batch,
            batch_start: None,
        };
        let done = self.pipeline.drain(&mut self.rbuf, &mut h);
        let (leaked, now, batch_start) = (h.leaked.take(), h.now, h.batch_start);
        if let Some(start) = batch_start {
            self.last_done = now;
            // With units still in flight the backend was busy through the whole span, so the
            // span is server work. A drain that empties the pipeline ends with the backend idle
            // for however long the client took to read: several units sharing such a span would
            // all be charged the client's delay, so only a lone unit (its trip floor taken off)
            // is sampled then.
            if self.pipeline.is_empty() && self.batch.len() > 1 {
                self.batch.clear();
            } else {
                let span = now.saturating_duration_since(start);
                attribute(&mut self.batch, &mut self.batch_seen, span);
            }
        }
        let done = done?;
        if done > 0 {
            self.shared
                .counters
                .in_flight
                .fetch_sub(done as u64, Relaxed);
        }
        if let Some(reason) = leaked {
            let _ = self.die(reason);
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
        let cancel_pending = self.exclusive && shared.cancel_abandoned.load(Relaxed);
        if cancel_pending {
            cx.waker().wake_by_ref();
        }
        let room = if cancel_pending || self.cancel.is_some() {
            0
        } else {
            self.cfg.max_in_flight.saturating_sub(self.pipeline.len())
        };
        // One clock read per pump, not per unit.
        let now = if st.queue.is_empty() {
            None
        } else {
            Some(self.rt.now())
        };
        let mut moved = 0usize;
        let mut data = 0usize;
        let mut bytes = 0usize;
        let work_cap = nanos(self.cfg.max_queue_work);
        let mut work_bound = false;
        let heavy_window = (self.cfg.max_in_flight / 4).min(HEAVY_WINDOW);
        while moved < room && self.wbuf.len() + bytes < WRITE_HIGH_WATER {
            // Adaptive in-flight limit: the estimated work in flight stays under the cap while
            // the units are few and heavy. One unit always goes, however slow, so an idle
            // connection never stalls; and from `heavy_window` units on, the count governs:
            // a window of cheap units is what pipelining needs, and their estimates swing with
            // the machine's scheduling more than with their own cost.
            match st.queue.front() {
                None => break,
                Some(q)
                    if !self.pipeline.is_empty()
                        && self.pipeline.len() < heavy_window
                        && self.in_flight_cost.saturating_add(q.cost) > work_cap =>
                {
                    c.inc(&c.work_limited);
                    work_bound = true;
                    break;
                }
                Some(_) => {}
            }
            let Some(q) = st.queue.pop_front() else { break };
            let start = self.pumped + bytes as u64;
            bytes += q.len;
            if matches!(q.kind, crate::proto::UnitKind::Data) {
                // COPY data of the unit in flight: written, never answered.
                data += 1;
                continue;
            }
            self.in_flight_cost += q.cost;
            moved += 1;
            match q.kind {
                crate::proto::UnitKind::Prepare => {
                    c.inc(&c.parses_sent);
                    c.inc(&c.describes_sent);
                }
                crate::proto::UnitKind::Typed => {
                    c.inc(&c.parses_sent);
                    c.inc(&c.describes_sent);
                }
                crate::proto::UnitKind::Execute(_)
                | crate::proto::UnitKind::Stream(_)
                | crate::proto::UnitKind::Simple
                | crate::proto::UnitKind::CopyOut
                | crate::proto::UnitKind::CopyIn
                | crate::proto::UnitKind::Data => {}
            }
            if q.closes {
                c.inc(&c.closes_sent);
            }
            let sent_at = now.unwrap_or(self.last_done);
            self.pipeline.push(
                Sent {
                    token: q.token,
                    start,
                    cost: q.cost,
                    stmt: q.stmt,
                    sent_at,
                },
                q.kind,
            );
        }
        if bytes > 0 {
            self.wbuf.extend_from_slice(&st.buf[..bytes]);
            st.buf.advance(bytes);
            st.committed -= bytes;
            self.pumped += bytes as u64;
        }
        self.queue_left = self.wbuf.len() + bytes >= WRITE_HIGH_WATER && !st.queue.is_empty();
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

    /// Graceful end: everything accepted has completed; say Terminate and close the socket.
    fn close(&mut self, cx: &mut Context<'_>) -> Poll<()> {
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
    fn closed_status(&self) -> Status {
        match lock(&self.shared.state).status {
            Status::Retiring => Status::Dead(RETIRED.into()),
            _ => Status::Closed,
        }
    }

    /// Retires an on-demand connection that has had nothing to do for `idle_timeout`; arms a
    /// timer for that moment otherwise. `true`: it stopped accepting work and should close.
    fn retire_if_idle(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.pipeline.is_empty() {
            self.idle_timer = None;
            return false;
        }
        loop {
            let due = self.last_active.max(self.last_done) + self.cfg.idle_timeout;
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
        let unused = st.queue.is_empty() && st.space_waiters.is_empty() && st.reserved == 0;
        if !unused || !matches!(st.status, Status::Open) {
            return false;
        }
        self.shared.set_status(&mut st, Status::Retiring);
        let c = &self.shared.counters;
        c.inc(&c.retired_idle);
        true
    }

    /// Fails every unit: sent ones as `Indeterminate`, never-sent ones as `NotDispatched`.
    /// A shared connection then reconnects with backoff unless the service is closing.
    fn die(&mut self, reason: String) -> Poll<()> {
        let reason: Arc<str> = reason.into();
        let c = &self.shared.counters;
        c.inc(&c.errors_connection);
        self.fail_all(&reason);
        self.socket = None;
        self.rbuf.clear();
        self.wbuf.clear();
        // On-demand connections are not reconnected: the service opens one again when needed.
        let stopping = self.shared.abort_flag.load(Relaxed) || self.exclusive || self.on_demand();
        if stopping {
            return self.finish(Status::Dead(reason));
        }
        self.back_off()
    }

    /// Marks the connection dead and fails every unit it holds: sent ones as `Indeterminate`
    /// (unless none of their bytes were written), queued ones as `NotDispatched`.
    fn fail_all(&mut self, reason: &Arc<str>) {
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
        self.in_flight_cost = 0;
        let written = self.written;
        let sent: Vec<Sent> = self.pipeline.take_all().collect();
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

    fn finish(&mut self, status: Status) -> Poll<()> {
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

fn sub_saturating(c: &std::sync::atomic::AtomicU64, v: u64) {
    let _ = c.fetch_update(Relaxed, Relaxed, |x| Some(x.saturating_sub(v)));
}

fn fail(
    shared: &ConnShared,
    token: Token,
    cost: u64,
    reason: &Arc<str>,
    dispatched: bool,
    wakes: &mut DeferredWakes,
) {
    let c = &shared.counters;
    sub_saturating(&c.est_pending_ns, cost);
    match token {
        Token::Query(w) => {
            let err = if dispatched {
                c.inc(&c.errors_indeterminate);
                Error::Indeterminate {
                    reason: reason.clone(),
                }
            } else {
                c.inc(&c.errors_not_dispatched);
                Error::NotDispatched {
                    reason: reason.clone(),
                }
            };
            w.unblock(Err(err), wakes);
        }
        Token::Prepare(p) => {
            let err = if dispatched {
                PrepareError::Indeterminate(reason.clone())
            } else {
                PrepareError::NotDispatched(reason.clone())
            };
            shared.finish_prepare(&p, Err(err), wakes);
        }
        Token::Stream(sink) => {
            let err = if dispatched {
                c.inc(&c.errors_indeterminate);
                Error::Indeterminate {
                    reason: reason.clone(),
                }
            } else {
                c.inc(&c.errors_not_dispatched);
                Error::NotDispatched {
                    reason: reason.clone(),
                }
            };
            sink.finish(Err(err), wakes);
        }
        Token::CopyOut(sink) => sink.finish(Err(lost(c, reason, dispatched)), wakes),
        Token::CopyIn(copy) => copy.finish(Err(lost(c, reason, dispatched)), wakes),
        Token::Data => {}
    }
}

/// The error of a unit whose connection died: never sent, or outcome unknown.
fn lost(c: &crate::stats::Counters, reason: &Arc<str>, dispatched: bool) -> Error {
    if dispatched {
        c.inc(&c.errors_indeterminate);
        Error::Indeterminate {
            reason: reason.clone(),
        }
    } else {
        c.inc(&c.errors_not_dispatched);
        Error::NotDispatched {
            reason: reason.clone(),
        }
    }
}

/// A COPY unit's end: the rows copied, or why not.
fn copy_end(outcome: Outcome) -> Result<u64, Error> {
    match outcome {
        Outcome::Rows { affected, .. } => Ok(affected),
        Outcome::Failed(e) => Err(Error::from(e)),
        Outcome::Prepared { .. } => Err(Error::Protocol("prepare result for a COPY".into())),
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

impl<R: Runtime> ConnTask<R> {
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

impl<R: Runtime> Drop for ConnTask<R> {
    fn drop(&mut self) {
        // A runtime that drops the task without finishing it (shutdown) must not leave callers
        // waiting forever.
        if !matches!(self.phase, Phase::Done) {
            let reason: Arc<str> = "connection task was dropped by its runtime".into();
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

/// Applies the pipeline's findings to callers and connection state, inside the drain.
struct Completer<'a> {
    shared: &'a ConnShared,
    wakes: &'a mut DeferredWakes,
    fatal: &'a mut Option<DbError>,
    session: &'a mut SessionInfo,
    exclusive: bool,
    leaked: Option<String>,
    /// When this drain's bytes were read.
    now: Instant,
    /// When the previous drain completed units on this connection.
    last_done: Instant,
    in_flight_cost: &'a mut u64,
    trip_floor: &'a mut u64,
    batch: &'a mut Vec<(Option<Arc<Statement>>, u64)>,
    /// When this drain's first unit reached the head of the FIFO (server work began).
    batch_start: Option<Instant>,
}

/// Shares the server time of one drain's units among them in proportion to their estimates.
///
/// The units read in one batch completed at unknown moments before the read; only the batch's
/// span (from its first unit reaching the head of the FIFO to the read) is known. Split evenly,
/// a slow unit would lend its time to the fast ones beside it; given to the first unit alone,
/// each sample would carry the client's read delay. In proportion to the current estimates,
/// a batch of alike units splits evenly and a known slow one keeps its share, and a new slow
/// statement still grows its share sample by sample.
///
/// Each statement gets one sample per drain, however many of its units the drain completed
/// (they all have the same share): a stall that lands in one drain — a late packet, a client busy
/// elsewhere — is then one outlier for the estimate to absorb, not one per unit.
fn attribute(
    batch: &mut Vec<(Option<Arc<Statement>>, u64)>,
    seen: &mut Vec<usize>,
    span: Duration,
) {
    let span = nanos(span);
    let total: u128 = batch.iter().map(|(_, e)| u128::from(*e)).sum();
    seen.clear();
    for (stmt, est) in batch.drain(..) {
        let Some(stmt) = stmt else { continue };
        let id = Arc::as_ptr(&stmt) as usize;
        if total == 0 || seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let share = u128::from(span) * u128::from(est) / total;
        stmt.observe(u64::try_from(share).unwrap_or(u64::MAX));
    }
}

impl Handler<Sent> for Completer<'_> {
    fn unit_done(&mut self, sent: Sent, outcome: Outcome) {
        let c = &self.shared.counters;
        c.inc(&c.units_completed);
        sub_saturating(&c.est_pending_ns, sent.cost);
        *self.in_flight_cost = self.in_flight_cost.saturating_sub(sent.cost);
        // Server work of this drain began when its first unit reached the head of the FIFO,
        // as seen from here (shifted by the round trip both ways, which cancels): when the
        // previous drain read the unit before it, or, if the unit was sent later than one round
        // trip before that, at its send plus the round trip (the backend sat idle meanwhile; on
        // a slow network that is most of the time). The round trip is the shortest trip seen of
        // a unit sent to an empty pipeline.
        if self.batch_start.is_none() {
            if sent.sent_at >= self.last_done {
                let trip = nanos(self.now.saturating_duration_since(sent.sent_at));
                *self.trip_floor = (*self.trip_floor).min(trip);
            }
            let floor = Duration::from_nanos(*self.trip_floor);
            let arrived = sent.sent_at.checked_add(floor).unwrap_or(sent.sent_at);
            self.batch_start = Some(arrived.max(self.last_done));
        }
        // Every unit takes its share of the span (failed ones and prepares too), but only a
        // successful execution updates its statement's estimate.
        let est = sent
            .stmt
            .as_ref()
            .map_or(DEFAULT_COST_NS, |s| s.estimate_ns());
        let failed = matches!(outcome, Outcome::Failed(_));
        self.batch.push((sent.stmt.filter(|_| !failed), est));
        if matches!(outcome, Outcome::Failed(_)) {
            c.inc(&c.errors_db);
        }
        match sent.token {
            Token::Query(w) => {
                let r = match outcome {
                    Outcome::Rows {
                        rows,
                        affected,
                        verb,
                    } => Ok(QueryResult {
                        rows,
                        affected,
                        verb,
                    }),
                    Outcome::Failed(e) => Err(Error::from(e)),
                    Outcome::Prepared { .. } => {
                        Err(Error::Protocol("prepare result for a query unit".into()))
                    }
                };
                w.unblock(r, self.wakes);
            }
            Token::Prepare(p) => {
                let r = match outcome {
                    Outcome::Prepared { params, columns } => Ok((params, columns)),
                    Outcome::Failed(e) => Err(PrepareError::Db(Arc::new(e))),
                    Outcome::Rows { .. } => {
                        Ok((Vec::<Type>::new(), Arc::<[Column]>::from(Vec::new())))
                    }
                };
                self.shared.finish_prepare(&p, r, self.wakes);
            }
            Token::Stream(sink) => {
                let end = match outcome {
                    Outcome::Rows { affected, .. } => Ok(affected),
                    Outcome::Failed(e) => Err(Error::from(e)),
                    Outcome::Prepared { .. } => Err(Error::Protocol(
                        "prepare result for a streaming unit".into(),
                    )),
                };
                sink.finish(end, self.wakes);
            }
            Token::CopyOut(sink) => sink.finish(copy_end(outcome), self.wakes),
            Token::CopyIn(copy) => copy.finish(copy_end(outcome), self.wakes),
            Token::Data => {}
        }
    }

    fn has_room(&mut self, sent: &Sent) -> bool {
        match &sent.token {
            Token::Stream(sink) => sink.has_room(),
            Token::CopyOut(sink) => sink.has_room(),
            _ => true,
        }
    }

    fn stream_row(&mut self, sent: &Sent, row: crate::Row) {
        if let Token::Stream(sink) = &sent.token {
            sink.push(row, self.wakes);
        }
    }

    fn copy_data(&mut self, sent: &Sent, data: bytes::Bytes) {
        if let Token::CopyOut(sink) = &sent.token {
            sink.push(data, self.wakes);
        }
    }

    fn copy_in_ready(&mut self, sent: &Sent) {
        if let Token::CopyIn(copy) = &sent.token {
            copy.ready(self.wakes);
        }
    }

    fn ready(&mut self, status: u8) {
        // The status first: a count that includes this ReadyForQuery implies its status
        // (`ConnShared::settled_tx_status`).
        self.shared.tx_status.store(status, Relaxed);
        let c = &self.shared.counters;
        c.ready_received.fetch_add(1, Release);
        if self.exclusive {
            return;
        }
        // Backstop: a shared connection must be idle between units. A transaction left open
        // would capture other callers' statements.
        if status != b'I' && self.leaked.is_none() {
            self.leaked = Some(format!(
                "a unit left the shared connection in transaction state {:?}; connection taken out of service",
                status as char
            ));
        }
    }

    fn parameter_status(&mut self, name: &str, value: &str) {
        let changed = match self.session.parameters.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) if v == value => false,
            Some((_, v)) => {
                *v = value.to_owned();
                true
            }
            None => {
                self.session
                    .parameters
                    .push((name.to_owned(), value.to_owned()));
                true
            }
        };
        // Backstop: on a shared connection nothing may change session parameters.
        if changed && !self.exclusive && self.leaked.is_none() {
            self.leaked = Some(format!(
                "session parameter {name} changed on a shared connection; connection taken out of service"
            ));
        }
    }

    fn fatal(&mut self, error: &DbError) {
        *self.fatal = Some(error.clone());
    }

    fn notification(&mut self, pid: i32, channel: &str, payload: &str) {
        let mut q = lock(&self.shared.notifications);
        if q.items.len() >= NOTIFICATION_BACKLOG {
            q.items.pop_front();
            q.dropped += 1;
        }
        q.items.push_back(Notification {
            process_id: pid,
            channel: channel.to_owned(),
            payload: payload.to_owned(),
        });
        if let Some(w) = q.waker.take() {
            self.wakes.push(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn estimates_start_low_and_at_most_double_per_sample() {
        let s = Statement::unobserved();
        assert_eq!(s.estimate_ns(), DEFAULT_COST_NS);
        // A statement that really takes 20 ms crosses 2 ms at its seventh sample.
        let mut seen = Vec::new();
        for _ in 0..7 {
            s.observe(20 * MS);
            seen.push(s.estimate_ns());
        }
        assert_eq!(seen[0], 2 * DEFAULT_COST_NS);
        assert!(seen.windows(2).all(|w| w[1] <= 2 * w[0]), "{seen:?}");
        assert!(seen[5] < 2 * MS && seen[6] >= 2 * MS, "{seen:?}");
        // Then it follows the samples as an EWMA of weight 1/8.
        for _ in 0..60 {
            s.observe(20 * MS);
        }
        let before = s.estimate_ns();
        assert!(before > 19 * MS, "{before}");
        s.observe(0);
        assert_eq!(s.estimate_ns(), before - before / 8);
    }

    #[test]
    fn six_stalls_in_a_row_do_not_make_a_trivial_statement_slow() {
        let s = Statement::unobserved();
        for _ in 0..6 {
            s.observe(50 * MS);
        }
        assert!(s.estimate_ns() < 2 * MS, "{}", s.estimate_ns());
        // Back to normal samples, the estimate falls back quickly.
        for _ in 0..40 {
            s.observe(20_000);
        }
        assert!(s.estimate_ns() < 100_000, "{}", s.estimate_ns());
    }

    #[test]
    fn a_drain_span_is_shared_in_proportion_to_estimates_once_per_statement() {
        let slow = Statement::unobserved();
        let fast = Statement::unobserved();
        for _ in 0..80 {
            slow.observe(10 * MS);
            fast.observe(10_000);
        }
        let (e_slow, e_fast) = (slow.estimate_ns(), fast.estimate_ns());
        // One drain: the slow unit and ten fast ones completed within 10.1 ms.
        let mut batch = vec![(Some(slow.clone()), e_slow)];
        batch.extend((0..10).map(|_| (Some(fast.clone()), e_fast)));
        let mut seen = Vec::new();
        attribute(&mut batch, &mut seen, Duration::from_micros(10_100));
        assert!(batch.is_empty());
        // Each got its share: the slow one ~10 ms, the fast ones ~10 µs; not 0.9 ms each
        // (an even split) and not one big sample for whichever came first.
        let (after_slow, after_fast) = (slow.estimate_ns(), fast.estimate_ns());
        assert!(
            after_slow.abs_diff(e_slow) < e_slow / 50,
            "{e_slow} -> {after_slow}"
        );
        assert!(
            after_fast.abs_diff(e_fast) < e_fast / 50,
            "{e_fast} -> {after_fast}"
        );
        // Ten units of one statement in one drain are one sample, not ten.
        let lone = Statement::unobserved();
        let mut batch: Vec<_> = (0..10)
            .map(|_| (Some(lone.clone()), DEFAULT_COST_NS))
            .collect();
        attribute(&mut batch, &mut seen, Duration::from_millis(100));
        assert_eq!(lone.estimate_ns(), 2 * DEFAULT_COST_NS);
        // Failed units and prepares take a share but update nothing.
        let mut batch = vec![(None, DEFAULT_COST_NS), (Some(fast.clone()), e_fast)];
        let before = fast.estimate_ns();
        attribute(&mut batch, &mut seen, Duration::from_micros(20));
        assert!(fast.estimate_ns() < before);
    }
}
