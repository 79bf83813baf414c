//! The runtime surface: what an adapter supplies so the runtime-neutral driver can run.
//!
//! An adapter implements [`Runtime`] (connect, clock, timer) and [`Spawn`] for the connection
//! task, and a [`Socket`] whose `poll_read` / `poll_write` are its `io_wait`: returning
//! `Pending` means "interest registered, the task's waker fires on readiness (or on completion,
//! for completion-based runtimes such as io_uring)". `block` / `unblock` are not part of the
//! adapter: core implements them once on wakers (see [`crate::sched`]), because a `Waker` only
//! schedules its task and never runs it inline, which is exactly the deferred wakeup the driver
//! needs.
//!
//! No trait here mentions `Send`: Send-ness follows the runtime. [`Spawn`] is generic over the
//! future (hyper's executor idea), so a multi-threaded runtime can require `F: Send` in its impl
//! while a thread-per-core runtime accepts `!Send` futures.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// A connected byte stream to the server.
pub trait Socket: Unpin + 'static {
    /// Reads available bytes into `buf`; `Ok(0)` means the peer closed.
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
    /// Writes some of `buf`, returning how many bytes were taken.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
    /// Flushes and shuts the stream down.
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

/// Connect, clock and timer of one async runtime.
pub trait Runtime: Clone + Unpin + 'static {
    /// The runtime's TCP stream.
    type Socket: Socket;
    /// A timer future that completes at a deadline (its output is ignored).
    type Sleep: Future + Unpin;
    /// The future of [`Runtime::connect`]. Named (usually a boxed future) because the connection
    /// task stores it to reconnect by itself; Send-ness follows the runtime.
    type Connect: Future<Output = io::Result<Self::Socket>> + Unpin;

    /// Opens a TCP connection to `host:port` with TCP_NODELAY set (pipelined writes are already
    /// batched by the driver; Nagle would only add latency).
    fn connect(&self, host: &str, port: u16) -> Self::Connect;
    /// The runtime's notion of now (a runtime with a virtual clock returns virtual time).
    fn now(&self) -> Instant;
    /// A timer firing at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;
}

/// Spawns a detached task running `F` on the runtime.
pub trait Spawn<F: Future<Output = ()>> {
    /// Runs `fut` to completion in the background.
    fn spawn(&self, fut: F);
}

/// Adapts any `futures-io` stream (smol's `Async<TcpStream>`, glommio's `TcpStream`) to [`Socket`].
#[derive(Debug)]
pub struct FuturesIo<S>(pub S);

impl<S> Socket for FuturesIo<S>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin + 'static,
{
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}
