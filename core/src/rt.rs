//! The runtime surface: what an adapter supplies so the runtime-neutral driver can run.
//!
//! An adapter implements [`Runtime`] (connect, clock, timer) and [`Spawn`] for the connection
//! task, and a [`Socket`] whose `poll_read` / `poll_write` are its `io_wait`: returning
//! `Pending` means "interest registered, the task's waker fires on readiness (or on completion,
//! for completion-based runtimes such as io_uring)". `block` / `unblock` are not part of the
//! adapter: core implements them once on wakers (its `sched` module), because a `Waker` only
//! schedules its task and never runs it inline, which is exactly the deferred wakeup the driver
//! needs.
//!
//! No trait here mentions `Send`: Send-ness follows the runtime. [`Spawn`] is generic over the
//! future (hyper's executor idea), so a multi-threaded runtime can require `F: Send` in its impl
//! while a thread-per-core runtime accepts `!Send` futures.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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
    /// The runtime's stream: TCP, or a Unix-domain socket (see [`Either`]).
    type Socket: Socket;
    /// A timer future that completes at a deadline (its output is ignored).
    type Sleep: Future + Unpin;
    /// The future of [`Runtime::connect`]. Named (usually a boxed future) because the connection
    /// task stores it to reconnect by itself; Send-ness follows the runtime.
    type Connect: Future<Output = io::Result<Self::Socket>> + Unpin;

    /// Opens a connection to `target`. A TCP stream gets TCP_NODELAY (pipelined writes are
    /// already batched by the driver; Nagle would only add latency) and the target's
    /// [`TcpOptions`] (apply them with [`TcpOptions::apply`]).
    fn connect(&self, target: &Target) -> Self::Connect;
    /// The runtime's notion of now (a runtime with a virtual clock returns virtual time).
    fn now(&self) -> Instant;
    /// A timer firing at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;

    /// The machine's CPU counters now, for the rules that open overflow connections, and take a
    /// late lone answer as server time, only while the machine has CPU to spare
    /// (`Config::spare_cpu_pct`). The default reads Linux's
    /// `/proc/stat` ([`CpuSample::read`]); `None` where nothing can be read, and the rules then
    /// stand aside. A runtime with a virtual clock returns its own counters, or `None`.
    fn cpu_sample(&self) -> Option<CpuSample> {
        CpuSample::read()
    }
}

/// The machine's CPU time so far, summed over its CPUs, in the kernel's ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuSample {
    /// Time no task wanted a CPU (idle and I/O wait).
    pub idle: u64,
    /// All time, stolen by a hypervisor included.
    pub total: u64,
}

impl CpuSample {
    /// Reads `/proc/stat`'s aggregate `cpu` line; `None` elsewhere than Linux or when it
    /// cannot be read.
    pub fn read() -> Option<CpuSample> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the aggregate `cpu` line of a `/proc/stat` text (`user nice system idle iowait
    /// irq softirq steal ...`; guest time is already in user, so eight fields add up).
    pub fn parse(stat: &str) -> Option<CpuSample> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let mut total = 0u64;
        let mut idle = 0u64;
        for (i, field) in line.split_whitespace().skip(1).take(8).enumerate() {
            let v: u64 = field.parse().ok()?;
            total = total.saturating_add(v);
            if i == 3 || i == 4 {
                idle = idle.saturating_add(v);
            }
        }
        (total > 0).then_some(CpuSample { idle, total })
    }
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

/// Where a connection goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// TCP to `host` (a name to resolve, or an IP literal) on `port`.
    Tcp {
        /// Host name or IP address.
        host: String,
        /// TCP port.
        port: u16,
        /// Keepalive and user-timeout settings for the socket.
        options: TcpOptions,
    },
    /// A Unix-domain socket file (`<dir>/.s.PGSQL.<port>`).
    Unix(PathBuf),
    /// A Linux abstract-namespace socket: the name without its leading NUL (or `@`).
    Abstract(Vec<u8>),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp { host, port, .. } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Target::Tcp { host, port, .. } => write!(f, "{host}:{port}"),
            Target::Unix(path) => write!(f, "{}", path.display()),
            Target::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

/// Socket options of a TCP connection, from the `keepalives*` and `tcp_user_timeout` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Turn keepalive probes on.
    pub keepalive: bool,
    /// Idle time before the first probe (`None`: the system default).
    pub keepalive_idle: Option<Duration>,
    /// Time between probes.
    pub keepalive_interval: Option<Duration>,
    /// Unanswered probes before the connection is dropped.
    pub keepalive_count: Option<u32>,
    /// `TCP_USER_TIMEOUT`: how long sent data may stay unacknowledged.
    pub user_timeout: Option<Duration>,
}

impl TcpOptions {
    /// Applies TCP_NODELAY and these options to a connected TCP socket. Adapters call this once
    /// after connecting, so every runtime sets the same options the same way.
    pub fn apply<S: std::os::fd::AsFd>(&self, socket: &S) -> io::Result<()> {
        let sock = socket2::SockRef::from(socket);
        sock.set_tcp_nodelay(true)?;
        if self.keepalive {
            let mut ka = socket2::TcpKeepalive::new();
            if let Some(idle) = self.keepalive_idle {
                ka = ka.with_time(idle);
            }
            if let Some(interval) = self.keepalive_interval {
                ka = ka.with_interval(interval);
            }
            #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
            if let Some(count) = self.keepalive_count {
                ka = ka.with_retries(count);
            }
            sock.set_tcp_keepalive(&ka)?;
        } else {
            sock.set_keepalive(false)?;
        }
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
        if let Some(t) = self.user_timeout {
            sock.set_tcp_user_timeout(Some(t))?;
        }
        Ok(())
    }
}

/// Connects a blocking std stream to a Linux abstract socket, for adapters to register with
/// their reactor (a local connect does not block for long). Elsewhere, an `Unsupported` error.
pub fn connect_abstract(name: &[u8]) -> io::Result<std::os::unix::net::UnixStream> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        let stream = std::os::unix::net::UnixStream::connect_addr(&addr)?;
        stream.set_nonblocking(true)?;
        Ok(stream)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = name;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "abstract Unix sockets exist only on Linux",
        ))
    }
}

/// One of two socket types, so an adapter's [`Runtime::Socket`] can be TCP or Unix.
#[derive(Debug)]
pub enum Either<T, U> {
    /// A TCP stream.
    Tcp(T),
    /// A Unix-domain stream.
    Unix(U),
}

impl<T: Socket, U: Socket> Socket for Either<T, U> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self {
            Either::Tcp(s) => s.poll_read(cx, buf),
            Either::Unix(s) => s.poll_read(cx, buf),
        }
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Either::Tcp(s) => s.poll_write(cx, buf),
            Either::Unix(s) => s.poll_write(cx, buf),
        }
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Either::Tcp(s) => s.poll_close(cx),
            Either::Unix(s) => s.poll_close(cx),
        }
    }
}

/// `fut`, or `Error::Timeout` once the runtime's clock reaches `deadline` (if any). `fut` is
/// polled first, so an answer that is ready wins over a deadline that passed meanwhile.
///
/// A combinator rather than an `async fn`: an async wrapper would hold `fut`'s state twice (its
/// argument, and the future it awaits) and copy it on every call, and the shared path nests
/// several of these inside each caller's future.
pub(crate) fn with_deadline<R: Runtime, T, F>(
    rt: &R,
    deadline: Option<Instant>,
    fut: F,
) -> futures_lite::future::Or<F, Deadline<'_, R, T>>
where
    F: Future<Output = Result<T, crate::Error>>,
{
    futures_lite::future::or(
        fut,
        Deadline {
            rt,
            at: deadline,
            sleep: None,
            _output: std::marker::PhantomData,
        },
    )
}

/// The timeout side of [`with_deadline`]: pending forever without a deadline; with one, it makes
/// its timer when first polled and completes with `Error::Timeout` when the timer fires.
pub(crate) struct Deadline<'r, R: Runtime, T> {
    rt: &'r R,
    at: Option<Instant>,
    sleep: Option<R::Sleep>,
    /// The output type only: neither owned nor borrowed, so no auto trait depends on `T`.
    _output: std::marker::PhantomData<fn() -> T>,
}

impl<R: Runtime, T> Future for Deadline<'_, R, T> {
    type Output = Result<T, crate::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(at) = this.at else {
            return Poll::Pending;
        };
        let rt = this.rt;
        let sleep = this.sleep.get_or_insert_with(|| rt.sleep_until(at));
        match Pin::new(sleep).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Err(crate::Error::Timeout)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuSample;

    #[test]
    fn the_aggregate_cpu_line_gives_idle_and_total() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let stat = "cpu  100 5 50 1000 20 1 2 3 7 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let s = CpuSample::parse(stat).expect("a cpu line");
        assert_eq!(s.idle, 1020);
        assert_eq!(s.total, 100 + 5 + 50 + 1000 + 20 + 1 + 2 + 3);
        assert_eq!(CpuSample::parse("cpu0 1 2 3 4\n"), None);
        assert_eq!(CpuSample::parse("cpu  1 x 3 4\n"), None);
        assert_eq!(CpuSample::parse("cpu  0 0 0 0 0\n"), None);
        if cfg!(target_os = "linux") {
            let s = CpuSample::read().expect("/proc/stat on Linux");
            assert!(s.idle <= s.total);
        }
    }
}
