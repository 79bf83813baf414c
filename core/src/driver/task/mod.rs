//! The connection task: the one owner of a socket, moving bytes for a [`Conn`] (the rules,
//! sans I/O, in `driver/conn/`) and sleeping until its one deadline.
//!
//! Each poll is one tick: read everything available, let the connection drain it (completing
//! units in FIFO order), pump queued units into its write buffer, write the batch, and only
//! then wake the callers whose units completed. Nothing inside a tick awaits, and no waiting
//! task can run until the tick is over (see [`crate::sched`]). One timer serves every rule:
//! it is armed for the earliest of the connection's deadline, a health check's and the
//! opening's or backoff's, and kept when a later one comes (firing early only re-arms it).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::driver::cancel::Cancel;
use crate::driver::conn::Conn;
use crate::driver::health::Probe;
use crate::driver::open::{Endpoint, Opening};
use crate::driver::shared::ConnShared;
use crate::driver::transport::Transport;
use crate::error::Fault;
use crate::proto::timing::Backoff;
use crate::rt::Runtime;
use crate::sched::{lock, Waiter};
use crate::{Error, Reason};

mod beside;
mod io;
mod lifecycle;

/// Where the task is in a connection's life.
enum Phase<R: Runtime> {
    /// Connecting, TLS and authentication, bounded by `connect_timeout` (boxed: large, and
    /// alive only while connecting).
    Opening(Box<Opening<R>>),
    /// Serving units: every poll is one tick.
    Running,
    /// Waiting until this instant before reconnecting a shared connection that died, or until
    /// another connection of the client opens after the mark (`open/reached.rs`).
    Backoff(Instant, u64),
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
    conn: Conn,
    socket: Option<Transport<R::Socket>>,
    chunk: Box<[u8]>,
    /// Told the outcome of the first connect; reconnects report to nobody.
    opened: Option<Arc<Waiter<Result<(), Error>>>>,
    backoff: Backoff,
    /// The one timer, and the instant it is armed for.
    timer: Option<(Instant, R::Sleep)>,
    /// The health check the connection asked for, in progress.
    probe: Option<Box<Probe<R>>>,
    /// The CancelRequest the connection asked for, in progress (exclusive connections).
    cancel: Option<Cancel<R>>,
}

impl<R: Runtime> ConnTask<R> {
    pub(crate) fn new(
        rt: R,
        cfg: Arc<Endpoint>,
        shared: Arc<ConnShared>,
        exclusive: bool,
        opened: Arc<Waiter<Result<(), Error>>>,
    ) -> Self {
        cfg.reached.trying(rt.now());
        let phase = Phase::Opening(Box::new(Opening::new(&rt, &cfg, exclusive)));
        let conn = Conn::new(cfg.clone(), shared.clone(), exclusive, rt.now());
        ConnTask {
            rt,
            cfg,
            shared,
            phase,
            conn,
            socket: None,
            chunk: vec![0u8; io::READ_CHUNK].into_boxed_slice(),
            opened: Some(opened),
            backoff: Backoff::new(),
            timer: None,
            probe: None,
            cancel: None,
        }
    }

    /// One tick. Returns `Ready` when the task is finished.
    fn tick(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.abort_flag.load(Relaxed) {
            if let Some(sock) = self.socket.as_mut() {
                let _ = sock.poll_close(cx);
            }
            return self.die(Fault::Aborted);
        }
        if self.conn.is_paused() {
            // A streaming consumer made room: take what is buffered before reading more.
            let (rt, now) = (&self.rt, self.rt.now());
            if let Err(fault) = self.conn.received(now, false, || rt.cpu_sample()) {
                return self.die(fault);
            }
        }
        // While a stream's consumer has no room, nothing more is read: TCP holds the server.
        let (more, heard) = match self.conn.is_paused() {
            true => (false, false),
            false => match self.read(cx) {
                Ok(read) => read,
                Err(end) => return self.read_ended(end),
            },
        };
        if !self.conn.read_buf().is_empty() {
            let (rt, now) = (&self.rt, self.rt.now());
            if let Err(fault) = self.conn.received(now, heard, || rt.cpu_sample()) {
                return self.die(fault);
            }
        }
        if let Some(fault) = self.conn.stale_done() {
            return self.die(fault);
        }
        self.drive_cancel(cx);
        let pumped = {
            let rt = &self.rt;
            let mut st = lock(&self.shared.state);
            st.wake_pending = false;
            match &st.task_waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => st.task_waker = Some(cx.waker().clone()),
            }
            self.conn.pump(&mut st, || rt.now())
        };
        if let Err(fault) = self.write(cx) {
            return self.die(fault);
        }
        let rt = &self.rt;
        if self.conn.watch(|| rt.now()) {
            self.probe = None;
        }
        if let Err(fault) = self.drive_probe(cx) {
            return self.die(fault);
        }
        match self.poll_timer(cx) {
            Err(fault) => return self.die(fault),
            Ok(true) => return self.close(cx),
            Ok(false) => {}
        }
        if pumped.idle_closing {
            return self.close(cx);
        }
        if more || pumped.again || self.conn.queue_left() {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl<R: Runtime> Future for ConnTask<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let r = this.step(cx);
        // Every lock is released and the tick is over: now the callers may run.
        this.conn.wakes.wake_all();

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
            let reason = Reason::from(Fault::Dropped);
            self.conn.fail_all(&reason);
            if let Some(w) = self.opened.take() {
                w.unblock(
                    Err(Error::NoConnection {
                        reason: reason.clone(),
                    }),
                    &mut self.conn.wakes,
                );
            }
            self.conn.wakes.wake_all();
            self.shared.mark_exited();
        }
    }
}
