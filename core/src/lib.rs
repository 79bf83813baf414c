//! pgpipe: a PostgreSQL connection service that pipelines many callers' statements over a few
//! connections, on any async runtime.
//!
//! This crate is runtime-neutral; pick an adapter crate (`pgpipe-smol`, ...) for a ready
//! [`Client`]. Layers, from the bottom:
//! - [`proto`]: protocol state with no I/O (encoding, the in-flight FIFO, startup, statement cache);
//! - [`sched`] and the connection task (`driver`): `block`/`unblock` on wakers with deferred
//!   wakeups, and the owner loop of each socket;
//! - [`rt`]: the small surface an adapter implements.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod binary_copy;
mod client;
pub mod config;
mod copy;
mod driver;
pub mod error;
mod exclusive;
pub mod guard;
pub mod proto;
pub mod row;
pub mod rt;
pub mod sched;
mod session;
pub mod stats;
mod stream;
mod tls;
mod typeinfo;

pub use client::{Adapter, Client};
pub use config::{
    ChannelBinding, Config, Keepalives, RootCert, SslMode, SslNegotiation, TlsConfig, TlsVersion,
};
pub use copy::{CopyIn, CopyOut};
pub use driver::{ConnTask, Notification, QueryResult};
pub use error::{DbError, Error, ErrorKind};
pub use row::{Column, Row, RowIndex};
pub use session::{Savepoint, Session, Transaction};
pub use stats::{ConnStats, Stats};
pub use stream::RowStream;

/// The `postgres-types` crate: `ToSql`, `FromSql`, `Type` and friends.
pub use postgres_types as types;
