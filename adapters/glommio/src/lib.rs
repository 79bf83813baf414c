//! pgpipe on glommio: io_uring sockets and timers, thread-per-core.
//!
//! ```no_run
//! glommio::LocalExecutorBuilder::default()
//!     .spawn(|| async {
//!         let db = pgpipe_glommio::connect("postgres://postgres@127.0.0.1:5432/postgres").await?;
//!         let row = db.query_one("SELECT $1::int4 + 1", &[&41i32]).await?;
//!         assert_eq!(row.get::<_, i32>(0), 42);
//!         db.close().await;
//!         Ok::<(), pgpipe_glommio::Error>(())
//!     })
//!     .unwrap()
//!     .join()
//!     .unwrap()
//!     .unwrap();
//! ```
//!
//! # Thread-per-core
//! A [`Client`] and its connection tasks belong to the glommio executor that created it: the
//! tasks are spawned with `glommio::spawn_local` and the sockets are registered with that
//! executor's rings. The client is therefore `!Send`. Run one service per executor (for example
//! one [`connect`] per shard of a `LocalExecutorPoolBuilder`) and share nothing across cores.
//!
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<pgpipe_glommio::Client>();
//! ```
//!
//! # When io_uring is unavailable
//! glommio needs io_uring (Linux 5.8 or later, not blocked by seccomp, and an RLIMIT_MEMLOCK of at
//! least 512 KiB per executor). [`check_io_uring`] tells which requirement fails, as a typed
//! error; [`connect`] reports the same error when it is called outside an executor because
//! none could be created. Call [`check_io_uring`] before building executors.
//!
//! # One crate to depend on
//! This crate re-exports everything a program names: [`Client`], [`Session`], [`Transaction`],
//! [`Savepoint`], [`Row`], [`Error`], [`Notification`], [`Stats`], [`Config`] and its settings,
//! [`guard`], and [`types`] (`ToSql`, `FromSql`, `Type`). `postgres-types`' optional features
//! are features of this crate too (`with-chrono-0_4`, `with-uuid-1`, `with-serde_json-1`, ...),
//! and `with-rust_decimal-1` decodes NUMERIC as `rust_decimal::Decimal`; all are off by default.
//! The derive macros (`derive` feature) generate paths into the `postgres_types` crate, so a
//! program that derives `ToSql`/`FromSql` also lists `postgres-types` as a dependency.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Instant;

use glommio::net::{TcpStream, UnixStream};
use glommio::timer::Timer;
use glommio::{GlommioError, LocalExecutorBuilder, Placement, ReactorErrorKind};
use pgpipe::rt::{Either, FuturesIo, Runtime, Spawn, Target, TcpOptions};

pgpipe::adapter_api!(GlommioRuntime);

/// A pgpipe client on glommio; `!Send`, it stays on the executor that created it.
pub type Client = pgpipe::Client<GlommioRuntime>;

/// The glommio executor a client's sockets, timers and connection tasks belong to.
/// `!Send` on purpose: it is only valid on that executor's thread.
#[derive(Clone, Debug)]
pub struct GlommioRuntime {
    executor_id: usize,
    _local: PhantomData<Rc<()>>,
}

impl GlommioRuntime {
    /// The executor running the caller. Outside one, fails with [`Error::Io`]: the
    /// [`check_io_uring`] error if io_uring is unusable here, otherwise "not inside an executor".
    /// (glommio offers no fallible query, so that path catches glommio's panic, whose message
    /// the panic hook still prints; with `panic = "abort"` it aborts instead.)
    pub fn current() -> Result<Self, Error> {
        match std::panic::catch_unwind(|| glommio::executor().id()) {
            Ok(executor_id) => Ok(GlommioRuntime {
                executor_id,
                _local: PhantomData,
            }),
            Err(_) => {
                check_io_uring()?;
                Err(Error::Io(io::Error::other(
                    "pgpipe-glommio: not inside a glommio LocalExecutor; connect from a task of \
                     the executor that will own the client",
                )))
            }
        }
    }

    /// The id of the owning executor (`glommio::executor().id()`).
    pub fn executor_id(&self) -> usize {
        self.executor_id
    }
}

impl Runtime for GlommioRuntime {
    type Socket = Either<FuturesIo<TcpStream>, FuturesIo<UnixStream>>;
    type Sleep = Timer;
    type Connect = Pin<Box<dyn Future<Output = io::Result<Self::Socket>>>>;

    fn connect(&self, target: &Target) -> Self::Connect {
        let target = target.clone();
        Box::pin(async move {
            match target {
                Target::Tcp {
                    host,
                    port,
                    options,
                } => {
                    // glommio's own connect hides the descriptor, so socket options could not
                    // be set: connect (and resolve) on the executor's blocking pool, then hand
                    // the socket to the reactor.
                    let stream = glommio::executor()
                        .spawn_blocking(move || connect_tcp(&host, port, &options))
                        .await?;
                    Ok(Either::Tcp(FuturesIo(TcpStream::from(socket2_glommio::Socket::from(
                        stream,
                    )))))
                }
                Target::Unix(path) => Ok(Either::Unix(FuturesIo(
                    UnixStream::connect(path).await.map_err(io::Error::from)?,
                ))),
                Target::Abstract(_) => Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "pgpipe-glommio: glommio cannot connect to abstract Unix sockets; use a socket \
                     directory (a host starting with /)",
                )),
            }
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Timer {
        Timer::new(deadline.saturating_duration_since(Instant::now()))
    }
}

impl<F: Future<Output = ()> + 'static> Spawn<F> for GlommioRuntime {
    fn spawn(&self, fut: F) {
        drop(glommio::spawn_local(fut).detach());
    }
}

/// Resolves and connects (blocking, on the blocking pool), trying each address in turn.
fn connect_tcp(host: &str, port: u16, options: &TcpOptions) -> io::Result<std::net::TcpStream> {
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host} resolved to no address"),
    );
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => (host, port).to_socket_addrs()?.collect(),
    };
    for addr in addrs {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => {
                options.apply(&s)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects with a libpq connection string, URL (`postgres://...`) or keyword/value
/// (`host=... dbname=...`), with the `PG*` environment and the password file as libpq reads
/// them; pgpipe's own options such as `pipeline_size` are keywords too (docs/CONNECTING.md).
/// Must be called from a task of the glommio executor that will own the client.
pub async fn connect(url: &str) -> Result<Client, Error> {
    connect_with(Config::parse(url)?).await
}

/// Connects with a [`Config`] on the calling glommio executor (see [`GlommioRuntime::current`]).
pub async fn connect_with(config: Config) -> Result<Client, Error> {
    pgpipe::Client::connect(GlommioRuntime::current()?, config).await
}

/// Checks that glommio can run here: RLIMIT_MEMLOCK (from `/proc/self/limits`), then builds and
/// runs a throwaway executor on a new thread, which calls `io_uring_setup`. The result is
/// computed once per process. On failure: [`Error::Io`] of kind `Unsupported` whose message
/// starts with "io_uring unavailable:" and names the reason (memlock, seccomp/sysctl, kernel).
pub fn check_io_uring() -> Result<(), Error> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone().map_err(|why| {
        Error::Io(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("io_uring unavailable: {why}"),
        ))
    })
}

/// glommio's own per-executor floor (`Reactor::new`).
const MIN_MEMLOCK: u64 = 512 * 1024;

fn probe() -> Result<(), String> {
    if let Some(limit) = memlock_limit() {
        if limit < MIN_MEMLOCK {
            return Err(format!(
                "RLIMIT_MEMLOCK is {limit} bytes, glommio needs at least {MIN_MEMLOCK} per \
                 executor (raise `ulimit -l` / memlock in limits.conf, or --ulimit memlock=-1)"
            ));
        }
    }
    let made = std::thread::spawn(|| {
        let ex = LocalExecutorBuilder::new(Placement::Unbound)
            .io_memory(64 * 1024)
            .make()?;
        ex.run(async {});
        Ok::<(), GlommioError<()>>(())
    })
    .join();
    match made {
        Ok(Ok(())) => Ok(()),
        Ok(Err(GlommioError::ReactorError(ReactorErrorKind::MemLockLimit(have, need)))) => Err(
            format!("RLIMIT_MEMLOCK is {have} bytes, glommio needs at least {need} per executor"),
        ),
        Ok(Err(e)) => Err(explain(io::Error::from(e))),
        Err(_) => Err("creating a glommio executor panicked".to_owned()),
    }
}

/// Names the cause of an executor-creation (`io_uring_setup`) failure.
fn explain(e: io::Error) -> String {
    match e.kind() {
        // ENOSYS
        io::ErrorKind::Unsupported => {
            format!("the kernel has no io_uring support (glommio needs Linux >= 5.8): {e}")
        }
        // EPERM / EACCES
        io::ErrorKind::PermissionDenied => {
            let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
            match sysctl.as_deref().map(str::trim) {
                Ok("2") => format!("disabled by sysctl kernel.io_uring_disabled=2: {e}"),
                Ok("1") => format!(
                    "kernel.io_uring_disabled=1 restricts io_uring to kernel.io_uring_group: {e}"
                ),
                _ => format!(
                    "io_uring_setup was denied, most likely by a seccomp profile (Docker's \
                     default one blocks io_uring): {e}"
                ),
            }
        }
        // ENOMEM: ring memory is charged to RLIMIT_MEMLOCK on older kernels.
        io::ErrorKind::OutOfMemory => format!("io_uring_setup ran out of locked memory: {e}"),
        _ => format!("creating a glommio executor failed: {e}"),
    }
}

fn memlock_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    match line.split_whitespace().nth(3)? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}
