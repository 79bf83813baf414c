//! pgpipe on smol: `async-io` sockets and timers, tasks on an `async-executor`.
//!
//! ```no_run
//! # smol::block_on(async {
//! let db = pgpipe_smol::connect("postgres://postgres@127.0.0.1:5432/postgres").await?;
//! let row = db.query_one("SELECT $1::int4 + 1", &[&41i32]).await?;
//! assert_eq!(row.get::<_, i32>(0), 42);
//! db.close().await;
//! # Ok::<(), pgpipe::Error>(())
//! # });
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use async_io::{Async, Timer};
use pgpipe::rt::{FuturesIo, Runtime, Spawn};

pub use pgpipe::{Config, Error, Row};

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

impl Runtime for SmolRuntime {
    type Socket = FuturesIo<Async<TcpStream>>;
    type Sleep = Timer;
    type Connect = Pin<Box<dyn Future<Output = io::Result<Self::Socket>> + Send>>;

    fn connect(&self, host: &str, port: u16) -> Self::Connect {
        let host = host.to_owned();
        Box::pin(async move {
            let host = host.as_str();

            let addrs = smol::net::resolve((host, port)).await?;
            let mut last = io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} resolved to no address"),
            );
            for addr in addrs {
                match Async::<TcpStream>::connect(addr).await {
                    Ok(s) => {
                        s.get_ref().set_nodelay(true)?;
                        return Ok(FuturesIo(s));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Timer {
        Timer::at(deadline)
    }
}

impl<F: Future<Output = ()> + Send + 'static> Spawn<F> for SmolRuntime {
    fn spawn(&self, fut: F) {
        match &self.executor {
            Some(ex) => ex.spawn(fut).detach(),
            None => smol::spawn(fut).detach(),
        }
    }
}

/// Connects with a `postgres://` URL (options such as `pipeline_size` go in its query string).
pub async fn connect(url: &str) -> Result<Client, Error> {
    connect_with(Config::from_url(url)?).await
}

/// Connects with a [`Config`], running connection tasks on smol's global executor.
pub async fn connect_with(config: Config) -> Result<Client, Error> {
    pgpipe::Client::connect(SmolRuntime::global(), config).await
}
