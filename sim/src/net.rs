//! In-memory duplex pipes with faults drawn from the seed, and `connect` that hands one end to
//! the client and serves the other with the fake server.
//!
//! Faults: writes and reads split at arbitrary byte boundaries (down to one byte), a virtual
//! delay before written bytes become readable, a bounded pipe (a slow reader makes the writer
//! wait), connection resets (both ends fail), and failed or slow connects.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::executor::{Sim, Sleep};
use crate::server::{self, Db};

/// The network's fault settings for one run, drawn from the seed.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Writes take a random prefix of what is offered.
    pub split_writes: bool,
    /// Reads return a random prefix of what is readable.
    pub split_reads: bool,
    /// Upper bound of the virtual delay before written bytes become readable (0: none).
    pub max_delay: Duration,
    /// Bytes a pipe direction holds before its writer must wait.
    pub capacity: usize,
    /// Chance (per mille) that a connect fails, once `faults_on` is on.
    pub connect_fail: u64,
    /// Upper bound of a connect's virtual duration.
    pub max_connect_delay: Duration,
    /// Server faults per message (per mille): reset, FATAL 57P01 termination.
    pub reset: u64,
    /// See `reset`.
    pub terminate: u64,
    /// Per mille per message: the server sends a message pgpipe must not accept on that
    /// connection (an unknown message type, or a ParameterStatus change, which takes a shared
    /// connection out of service).
    pub garbage: u64,
    /// The server pauses up to this long before each read (a slow reader).
    pub slow_read: Duration,
}

/// The simulated network: faults, the server's state, connection counters.
pub struct Net {
    /// This run's faults.
    pub faults: Faults,
    /// Connect failures apply only when set (the scenario decides when).
    pub faults_on: bool,
    /// The fake server's shared state and log.
    pub db: Rc<RefCell<Db>>,
    /// Connections accepted so far (also the server's process ids).
    pub accepted: u32,
    /// Largest number of bytes buffered in one pipe direction.
    pub peak_buffered: usize,
    /// Per mille of Executes outside transactions the server fails with 40001 before running
    /// them (`Plan::server_errors`).
    pub server_errors: u64,
}

impl Net {
    /// A network with `faults` in front of `db`.
    pub fn new(faults: Faults, db: Rc<RefCell<Db>>) -> Net {
        Net {
            faults,
            faults_on: false,
            db,
            accepted: 0,
            peak_buffered: 0,
            server_errors: 0,
        }
    }
}

/// One direction of a pipe.
#[derive(Default)]
struct Half {
    /// Chunks with the virtual time they become readable.
    chunks: VecDeque<(Duration, Vec<u8>)>,
    buffered: usize,
    /// The writer closed: EOF once drained.
    closed: bool,
    /// The reader is gone: writes fail.
    reader_gone: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// One end of an in-memory connection: pgpipe's [`pgpipe::rt::Socket`] on the client side, and
/// what the fake server reads and writes.
pub struct SimSocket {
    sim: Sim,
    rx: Rc<RefCell<Half>>,
    tx: Rc<RefCell<Half>>,
    reset: Rc<Cell<bool>>,
    /// Waits for delayed bytes to become readable.
    delay: Option<Sleep>,
    /// For the event log: the server's pid, negative on the client's end.
    label: i64,
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

fn reset_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset (simulated)",
    )
}

impl SimSocket {
    /// Resets the connection: every later read or write on either end fails.
    pub fn reset(&mut self) {
        self.reset.set(true);
        wake(&mut self.rx.borrow_mut().writer);
        wake(&mut self.rx.borrow_mut().reader);
        wake(&mut self.tx.borrow_mut().reader);
        wake(&mut self.tx.borrow_mut().writer);
    }

    /// Reads what is readable now into `buf` (at most a seeded prefix when reads split).
    pub fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if self.reset.get() {
            return Poll::Ready(Err(reset_error()));
        }
        let now = self.sim.elapsed();
        let mut rx = self.rx.borrow_mut();
        let Some((at, _)) = rx.chunks.front() else {
            if rx.closed {
                return Poll::Ready(Ok(0));
            }
            rx.reader = Some(cx.waker().clone());
            return Poll::Pending;
        };
        if *at > now {
            let at = *at;
            rx.reader = Some(cx.waker().clone());
            drop(rx);
            let mut sleep = self.sim.sleep(at - now);
            // Registers the timer (not yet due).
            let _ = Pin::new(&mut sleep).poll(cx);
            self.delay = Some(sleep);
            return Poll::Pending;
        }
        self.delay = None;
        let split = self.sim.st.borrow().net.faults.split_reads;
        let mut limit = buf.len();
        if split && self.sim.below(2) == 0 {
            limit = 1 + self.sim.below(limit as u64) as usize;
        }
        let mut n = 0;
        while n < limit {
            let Some((at, chunk)) = rx.chunks.front_mut() else {
                break;
            };
            if *at > now {
                break;
            }
            let take = chunk.len().min(limit - n);
            buf[n..n + take].copy_from_slice(&chunk[..take]);
            chunk.drain(..take);
            n += take;
            if chunk.is_empty() {
                rx.chunks.pop_front();
            }
        }
        rx.buffered -= n;
        wake(&mut rx.writer);
        let (label, tags) = (self.label, &buf[..n]);
        if label < 0 {
            self.sim.log(|| {
                format!(
                    "client {}: read {n} bytes {:?}",
                    -label,
                    String::from_utf8_lossy(tags)
                )
            });
        }
        Poll::Ready(Ok(n))
    }

    /// Writes a prefix of `buf` (seeded when writes split), waiting while the pipe is full.
    pub fn poll_write_buf(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.reset.get() {
            return Poll::Ready(Err(reset_error()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let faults = self.sim.st.borrow().net.faults.clone();
        let mut tx = self.tx.borrow_mut();
        if tx.reader_gone {
            // As TCP before the peer's RST arrives: the write is taken (and lost), so the
            // writer still reads what the peer sent before it closed.
            return Poll::Ready(Ok(buf.len()));
        }
        if tx.closed {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        }
        let room = faults.capacity.saturating_sub(tx.buffered);
        if room == 0 {
            tx.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut n = buf.len().min(room);
        if faults.split_writes && self.sim.below(2) == 0 {
            n = 1 + self.sim.below(n as u64) as usize;
        }
        let now = self.sim.elapsed();
        let delay = if faults.max_delay.is_zero() || self.sim.below(4) != 0 {
            Duration::ZERO
        } else {
            Duration::from_micros(self.sim.below(faults.max_delay.as_micros() as u64 + 1))
        };
        // Bytes stay in order: never readable before those written earlier.
        let at = (now + delay).max(tx.chunks.back().map_or(Duration::ZERO, |c| c.0));
        tx.chunks.push_back((at, buf[..n].to_vec()));
        tx.buffered += n;
        let buffered = tx.buffered;
        wake(&mut tx.reader);
        drop(tx);
        let mut st = self.sim.st.borrow_mut();
        st.net.peak_buffered = st.net.peak_buffered.max(buffered);
        Poll::Ready(Ok(n))
    }

    /// Closes the sending direction: the peer reads EOF once it has read the rest.
    pub fn shutdown(&mut self) {
        let mut tx = self.tx.borrow_mut();
        tx.closed = true;
        wake(&mut tx.reader);
    }

    /// Reads some bytes (0 at EOF).
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read_buf(cx, buf)).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_buf(cx, buf)).await?;
            buf = &buf[n..];
        }
        Ok(())
    }
}

impl Drop for SimSocket {
    fn drop(&mut self) {
        self.shutdown();
        let mut rx = self.rx.borrow_mut();
        rx.reader_gone = true;
        rx.chunks.clear();
        rx.buffered = 0;
        wake(&mut rx.writer);
    }
}

impl pgpipe::rt::Socket for SimSocket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.poll_read_buf(cx, buf)
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_buf(cx, buf)
    }
    fn poll_close(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shutdown();
        Poll::Ready(Ok(()))
    }
}

/// A connected pair of sockets.
fn pair(sim: &Sim, pid: u32) -> (SimSocket, SimSocket) {
    let a = Rc::new(RefCell::new(Half::default()));
    let b = Rc::new(RefCell::new(Half::default()));
    let reset = Rc::new(Cell::new(false));
    let end = |rx: &Rc<RefCell<Half>>, tx: &Rc<RefCell<Half>>, label| SimSocket {
        sim: sim.clone(),
        rx: rx.clone(),
        tx: tx.clone(),
        reset: reset.clone(),
        delay: None,
        label,
    };
    (end(&a, &b, -i64::from(pid)), end(&b, &a, i64::from(pid)))
}

/// The client's connect: after a seeded virtual delay, fails (when connect faults are on and
/// the seed says so) or returns a socket whose peer is served by a new server task.
pub(crate) async fn connect(sim: Sim) -> io::Result<SimSocket> {
    let (max_delay, fail, on) = {
        let st = sim.st.borrow();
        let f = &st.net.faults;
        (f.max_connect_delay, f.connect_fail, st.net.faults_on)
    };
    if !max_delay.is_zero() {
        let d = Duration::from_micros(sim.below(max_delay.as_micros() as u64 + 1));
        sim.sleep(d).await;
    }
    if on && sim.st.borrow_mut().rng.chance(fail) {
        sim.log(|| "connect refused".into());
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "connection refused (simulated)",
        ));
    }
    let (pid, db) = {
        let mut st = sim.st.borrow_mut();
        st.net.accepted += 1;
        (st.net.accepted, st.net.db.clone())
    };
    let (client, server_end) = pair(&sim, pid);
    sim.log(|| format!("connect: server {pid}"));
    sim.spawn_task(server::serve(sim.clone(), pid, server_end, db));
    Ok(client)
}
