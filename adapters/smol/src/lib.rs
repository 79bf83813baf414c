//! pgpipe on smol: `async-io` sockets and timers, tasks on an `async-executor`.
//!
//! ```no_run
//! # smol::block_on(async {
//! let db = pgpipe_smol::connect("postgres://postgres@127.0.0.1:5432/postgres").await?;
//! let row = db.query_one("SELECT $1::int4 + 1", &[&41i32]).await?;
//! assert_eq!(row.get::<_, i32>(0), 42);
//! db.close().await;
//! # Ok::<(), pgpipe_smol::Error>(())
//! # });
//! ```
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
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use async_io::{Async, Timer};
use pgpipe::rt::{Either, FuturesIo, Runtime, Spawn, Target, TcpOptions};

pgpipe::adapter_api!(SmolRuntime);

/// A pgpipe client on smol.
pub type Client = pgpipe::Client<SmolRuntime>;

/// Where connection tasks run: smol's global executor, or an executor the application owns.
#[derive(Clone, Default)]
pub struct SmolRuntime {
    executor: Option<Arc<async_executor::Executor<'static>>>,
}

impl SmolRuntime {
    /// Connection tasks run on smol's global executor (`smol::spawn`).
    pub fn global() -> Self {
        SmolRuntime { executor: None }
    }

    /// Connection tasks run on `executor`; the application must keep running it.
    pub fn on(executor: Arc<async_executor::Executor<'static>>) -> Self {
        SmolRuntime {
            executor: Some(executor),
        }
    }
}

/// Both runtimes use async-io's sockets and timers; they differ only in where tasks run
/// (and therefore whether the connect future must be `Send`).
macro_rules! async_io_runtime {
    ($rt:ty, $($send:tt)*) => {
        impl Runtime for $rt {
            type Socket = SmolSocket;
            type Sleep = Timer;
            type Connect = Pin<Box<dyn Future<Output = io::Result<Self::Socket>> $($send)*>>;

            fn connect(&self, target: &Target) -> Self::Connect {
                Box::pin(open(target.clone()))
            }

            fn now(&self) -> Instant {
                Instant::now()
            }

            fn sleep_until(&self, deadline: Instant) -> Timer {
                Timer::at(deadline)
            }
        }
    };
}

async_io_runtime!(SmolRuntime, + Send);

impl<F: Future<Output = ()> + Send + 'static> Spawn<F> for SmolRuntime {
    fn spawn(&self, fut: F) {
        match &self.executor {
            Some(ex) => ex.spawn(fut).detach(),
            None => smol::spawn(fut).detach(),
        }
    }
}

/// Connection tasks on a `LocalExecutor` the application drives, so callers and connection
/// tasks share one thread (as on a current-thread tokio runtime or glommio): no wakeup crosses
/// threads. The client is `!Send` and must stay on that thread.
#[derive(Clone)]
pub struct SmolLocalRuntime {
    executor: Rc<async_executor::LocalExecutor<'static>>,
}

impl SmolLocalRuntime {
    /// Connection tasks run on `executor`; the application must keep running it.
    pub fn on(executor: Rc<async_executor::LocalExecutor<'static>>) -> Self {
        SmolLocalRuntime { executor }
    }
}

async_io_runtime!(SmolLocalRuntime,);

impl<F: Future<Output = ()> + 'static> Spawn<F> for SmolLocalRuntime {
    fn spawn(&self, fut: F) {
        self.executor.spawn(fut).detach();
    }
}

/// A pgpipe client whose connection tasks run on a [`SmolLocalRuntime`].
pub type LocalClient = pgpipe::Client<SmolLocalRuntime>;

/// A socket of the async-io reactor: TCP or Unix-domain.
pub type SmolSocket = Either<FuturesIo<Async<TcpStream>>, FuturesIo<Async<UnixStream>>>;

async fn open(target: Target) -> io::Result<SmolSocket> {
    match target {
        Target::Tcp {
            host,
            port,
            options,
        } => connect_tcp(host, port, options).await.map(Either::Tcp),
        Target::Unix(path) => Ok(Either::Unix(FuturesIo(
            Async::<UnixStream>::connect(path).await?,
        ))),
        Target::Abstract(name) => Ok(Either::Unix(FuturesIo(Async::new(
            pgpipe::rt::connect_abstract(&name)?,
        )?))),
    }
}

/// Resolves and connects, trying each address in turn, with the target's socket options.
async fn connect_tcp(
    host: String,
    port: u16,
    options: TcpOptions,
) -> io::Result<FuturesIo<Async<TcpStream>>> {
    let addrs = smol::net::resolve((host.as_str(), port)).await?;
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host} resolved to no address"),
    );
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(s) => {
                options.apply(s.get_ref())?;
                return Ok(FuturesIo(s));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects with a libpq connection string, URL (`postgres://...`) or keyword/value
/// (`host=... dbname=...`), with the `PG*` environment and the password file as libpq reads
/// them; pgpipe's own options such as `pipeline_size` are keywords too (docs/CONNECTING.md).
pub async fn connect(url: &str) -> Result<Client, Error> {
    connect_with(Config::parse(url)?).await
}

/// Connects with a [`Config`], running connection tasks on smol's global executor. That
/// executor has one thread unless `SMOL_THREADS` says otherwise, shared by every client that
/// uses it; pass your own executor with `pgpipe::Client::connect(SmolRuntime::on(ex), config)`
/// or [`SmolLocalRuntime`].
pub async fn connect_with(config: Config) -> Result<Client, Error> {
    pgpipe::Client::connect(SmolRuntime::global(), config).await
}
