//! pgpipe on tokio: tokio sockets and timers, connection tasks spawned on a runtime [`Handle`].
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), pgpipe_tokio::Error> {
//! let db = pgpipe_tokio::connect("postgres://postgres@127.0.0.1:5432/postgres").await?;
//! let row = db.query_one("SELECT $1::int4 + 1", &[&41i32]).await?;
//! assert_eq!(row.get::<_, i32>(0), 42);
//! db.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! Transactions, atomic batches and sessions, each on the path it needs:
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), pgpipe_tokio::Error> {
//! # let db = pgpipe_tokio::connect("postgres://postgres@127.0.0.1:5432/postgres").await?;
//! // A transaction: BEGIN rides with the first statement, COMMIT with the last.
//! let tx = db.transaction().await?;
//! tx.execute("UPDATE accounts SET balance = balance - $1 WHERE id = $2", &[&10i32, &1i32]).await?;
//! tx.execute_and_commit("UPDATE accounts SET balance = balance + $1 WHERE id = $2", &[&10i32, &2i32]).await?;
//!
//! // Statements known in advance: all or nothing, one unit on the shared path.
//! db.batch()
//!     .add("INSERT INTO audit (note) VALUES ($1)", &[&"moved 10"])
//!     .add("UPDATE stats SET moves = moves + 1", &[])
//!     .run()
//!     .await?;
//!
//! // Session state (SET, LISTEN, temp tables) on an exclusive connection.
//! let s = db.session().await?;
//! s.batch_execute("SET search_path TO reports; CREATE TEMP TABLE t (id int)").await?;
//! match db.execute("SET search_path TO reports", &[]).await {
//!     // The shared path refuses it and says what to do instead.
//!     Err(pgpipe_tokio::Error::Refused(r)) => eprintln!("{r}"),
//!     other => { other?; }
//! }
//! # drop(s);
//! # Ok(())
//! # }
//! ```
//!
//! The [`Client`] is `Send + Sync + Clone`: share it across the tasks of a multi-thread runtime.
//! It works the same on a current-thread runtime (or a `LocalSet` inside one); the connection
//! tasks then run whenever that runtime is being driven (`block_on`).
//!
//! The runtime is chosen once, when the [`TokioRuntime`] is built: [`TokioRuntime::current`]
//! (what [`connect`] uses) is the only place that reads tokio's ambient context. After that,
//! sockets, timers and tasks all belong to the captured [`Handle`], whichever task or thread
//! awaits the client. That runtime must have I/O and time enabled (`enable_all()`).
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
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use pgpipe::rt::{Either, Runtime, Socket, Spawn, Target};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::runtime::Handle;
use tokio::task::AbortHandle;
use tokio::time::Sleep;

pgpipe::adapter_api!(TokioRuntime);

/// A pgpipe client on tokio.
pub type Client = pgpipe::Client<TokioRuntime>;

/// The tokio runtime a client's sockets, timers and connection tasks belong to.
#[derive(Clone, Debug)]
pub struct TokioRuntime {
    handle: Handle,
}

impl TokioRuntime {
    /// Uses the runtime behind `handle`.
    pub fn new(handle: Handle) -> Self {
        TokioRuntime { handle }
    }

    /// Uses the runtime the caller runs in.
    ///
    /// # Panics
    /// Outside a tokio runtime; see [`TokioRuntime::try_current`] for the fallible form.
    pub fn current() -> Self {
        Self::try_current().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Uses the runtime the caller runs in, or fails with [`Error::Io`] outside one.
    pub fn try_current() -> Result<Self, Error> {
        Handle::try_current().map(Self::new).map_err(|e| {
            Error::Io(io::Error::other(format!(
                "pgpipe-tokio: no tokio runtime on this thread ({e}); call from inside a runtime \
                 or pass one explicitly with TokioRuntime::new(handle)"
            )))
        })
    }

    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// A tokio stream (TCP or Unix-domain) as a pgpipe [`Socket`].
#[derive(Debug)]
pub struct TokioIo<S>(pub S);

/// A tokio TCP stream as a pgpipe [`Socket`].
pub type TokioSocket = TokioIo<TcpStream>;

impl<S: AsyncRead + AsyncWrite + Unpin + 'static> Socket for TokioIo<S> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        ready!(Pin::new(&mut self.0).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().len()))
    }
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// What a tokio client's connections run on.
pub type TokioStream = Either<TokioSocket, TokioIo<UnixStream>>;

async fn open(target: Target) -> io::Result<TokioStream> {
    match target {
        Target::Tcp {
            host,
            port,
            options,
        } => {
            let stream = TcpStream::connect((host.as_str(), port)).await?;
            options.apply(&stream)?;
            Ok(Either::Tcp(TokioIo(stream)))
        }
        Target::Unix(path) => Ok(Either::Unix(TokioIo(UnixStream::connect(path).await?))),
        Target::Abstract(name) => Ok(Either::Unix(TokioIo(UnixStream::from_std(
            pgpipe::rt::connect_abstract(&name)?,
        )?))),
    }
}

/// Aborts the connect task when the caller gives up (connect timeout, dropped future).
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Runtime for TokioRuntime {
    type Socket = TokioStream;
    type Sleep = Pin<Box<Sleep>>;
    type Connect = Pin<Box<dyn Future<Output = io::Result<TokioStream>> + Send>>;

    fn connect(&self, target: &Target) -> Self::Connect {
        let target = target.clone();
        let this = self.clone();
        Box::pin(async move {
            // Connect on our runtime, so the socket registers with its reactor whatever task
            // (or executor) awaits this.
            let task = this.handle.spawn(open(target));
            let _abort = AbortOnDrop(task.abort_handle());
            task.await.map_err(io::Error::other)?
        })
    }

    fn now(&self) -> Instant {
        // tokio's clock, so a paused / auto-advancing test clock drives query timeouts too.
        let _rt = self.handle.enter();
        tokio::time::Instant::now().into_std()
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<Sleep>> {
        // The timer binds to our runtime's time driver at creation, not to the caller's context.
        let _rt = self.handle.enter();
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }
}

impl<F: Future<Output = ()> + Send + 'static> Spawn<F> for TokioRuntime {
    fn spawn(&self, fut: F) {
        drop(self.handle.spawn(fut));
    }
}

/// Connects with a libpq connection string, URL (`postgres://...`) or keyword/value
/// (`host=... dbname=...`), with the `PG*` environment and the password file as libpq reads
/// them; pgpipe's own options such as `pipeline_size` are keywords too (docs/CONNECTING.md),
/// on the tokio runtime the caller runs in.
pub async fn connect(url: &str) -> Result<Client, Error> {
    connect_with(Config::parse(url)?).await
}

/// Connects with a [`Config`] on the tokio runtime the caller runs in; fails with [`Error::Io`]
/// outside a runtime. Use `pgpipe::Client::connect(TokioRuntime::new(handle), config)` to pick
/// another runtime.
pub async fn connect_with(config: Config) -> Result<Client, Error> {
    pgpipe::Client::connect(TokioRuntime::try_current()?, config).await
}
