//! What the gate counts, marked: callgrind's inclusive cost of the [`marker`] functions is the
//! instruction count of the code they run, and [`Meter`]s count the allocations made inside
//! them.
//!
//! Three kinds of marked code: a sans-IO loop ([`marker::unit`]), a caller's task
//! ([`marker::caller`]: everything a caller's future does when polled) and a connection task
//! ([`marker::task`]). Socket calls made by a connection task run inside [`marker::io`], so
//! that they can be taken out: the in-memory socket stands for the kernel, whose copies are not
//! the client's work.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

use pgpipe_bench::alloc;
use pgpipe_sim::net::SimSocket;

/// Allocations made inside one kind of marked code.
pub struct Meter(AtomicU64);

impl Meter {
    const fn new() -> Meter {
        Meter(AtomicU64::new(0))
    }

    fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// Allocations counted so far.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Allocations inside [`marker::unit`].
pub static UNIT: Meter = Meter::new();
/// Allocations inside [`marker::caller`].
pub static CALLER: Meter = Meter::new();
/// Allocations inside [`marker::task`], socket calls included.
pub static TASK: Meter = Meter::new();
/// Allocations inside [`marker::io`] (socket calls of connection tasks).
pub static IO: Meter = Meter::new();

thread_local! {
    /// A connection task is being polled: its socket calls go through [`marker::io`]. Socket
    /// calls elsewhere (tokio-postgres' startup runs in the unmarked root task) stay unmarked,
    /// so that `task - io` is exactly the task's own work.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// The marker functions. Each is `#[inline(never)]`, so it stays a function of its own that
/// callgrind reports by name, and does bookkeeping after the marked call, so that the call is
/// never turned into a tail jump (callgrind would not see it as a call).
pub mod marker {
    use super::*;

    /// Runs a sans-IO measured loop.
    #[inline(never)]
    pub fn unit<R>(f: impl FnOnce() -> R) -> R {
        let before = alloc::allocations();
        let r = f();
        UNIT.add(alloc::allocations() - before);
        r
    }

    /// Polls a caller's future once.
    #[inline(never)]
    pub fn caller<F: Future + ?Sized>(f: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let before = alloc::allocations();
        let r = f.poll(cx);
        CALLER.add(alloc::allocations() - before);
        r
    }

    /// Polls a connection task once.
    #[inline(never)]
    pub fn task<F: Future + ?Sized>(f: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let before = alloc::allocations();
        let outer = IN_TASK.replace(true);
        let r = f.poll(cx);
        IN_TASK.set(outer);
        TASK.add(alloc::allocations() - before);
        r
    }

    /// Runs one socket call of a connection task.
    #[inline(never)]
    pub fn io<R>(f: impl FnOnce() -> R) -> R {
        let before = alloc::allocations();
        let r = f();
        IO.add(alloc::allocations() - before);
        r
    }
}

/// A socket call: inside [`marker::io`] when a connection task makes it.
fn socket_call<R>(f: impl FnOnce() -> R) -> R {
    if IN_TASK.get() {
        marker::io(f)
    } else {
        f()
    }
}

/// Which marker a [`Marked`] future runs under.
#[derive(Clone, Copy)]
enum Role {
    Caller,
    Task,
}

/// A future polled inside [`marker::caller`] or [`marker::task`].
pub struct Marked<F> {
    role: Role,
    fut: Pin<Box<F>>,
}

impl<F: Future> Marked<F> {
    /// A caller's future.
    pub fn caller(fut: F) -> Self {
        Marked {
            role: Role::Caller,
            fut: Box::pin(fut),
        }
    }

    /// A connection task.
    pub fn task(fut: F) -> Self {
        Marked {
            role: Role::Task,
            fut: Box::pin(fut),
        }
    }
}

impl<F: Future> Future for Marked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        match this.role {
            Role::Caller => marker::caller(this.fut.as_mut(), cx),
            Role::Task => marker::task(this.fut.as_mut(), cx),
        }
    }
}

/// The simulation's in-memory socket as pgpipe's [`pgpipe::rt::Socket`], its calls marked.
pub struct PgSocket(pub SimSocket);

impl pgpipe::rt::Socket for PgSocket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        socket_call(|| self.0.poll_read_buf(cx, buf))
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        socket_call(|| self.0.poll_write_buf(cx, buf))
    }
    fn poll_close(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket_call(|| self.0.shutdown());
        Poll::Ready(Ok(()))
    }
}

/// The simulation's in-memory socket as tokio's `AsyncRead + AsyncWrite`, for tokio-postgres,
/// its calls marked. The adapter's own work (zeroing tokio's uninitialized read buffer) is
/// inside the marked call: a real socket would not do it.
pub struct TokioSocket(pub SimSocket);

impl tokio::io::AsyncRead for TokioSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        socket_call(|| {
            let r = this.0.poll_read_buf(cx, buf.initialize_unfilled());
            if let Poll::Ready(Ok(n)) = r {
                buf.advance(n);
            }
            r.map_ok(|_| ())
        })
    }
}

impl tokio::io::AsyncWrite for TokioSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        socket_call(|| this.0.poll_write_buf(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        socket_call(|| this.0.shutdown());
        Poll::Ready(Ok(()))
    }
}
