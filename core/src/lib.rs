//! pgpipe: a PostgreSQL connection service that pipelines many callers' statements over a few
//! connections, on any async runtime.
//!
//! This crate is runtime-neutral; pick an adapter crate (`pgpipe-smol`, ...) for a ready
//! [`Client`]. Layers, from the bottom:
//! - `proto` (private): protocol state with no I/O (encoding, the in-flight FIFO, startup,
//!   statement cache);
//! - `sched` and the connection task, `driver` (private): `block`/`unblock` on wakers with
//!   deferred wakeups, and the owner loop of each socket;
//! - [`rt`]: the small surface an adapter implements.
//!
//! # Features
//! All off by default: `postgres-types`' optional features under their own names (`derive`,
//! `array-impls`, `with-chrono-0_4`, `with-time-0_3`, `with-uuid-1`, `with-serde_json-1`,
//! `with-bit-vec-0_9`, `with-eui48-1`, `with-geo-types-0_7`, `with-cidr-0_3`, ...), each adding
//! `ToSql`/`FromSql` for that crate's types, and `with-rust_decimal-1` (NUMERIC as
//! `rust_decimal::Decimal`, through rust_decimal's `db-postgres` feature, which pulls no
//! driver). No feature selects a runtime. The adapter crates forward every one of them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod binary_copy;
mod client;
pub mod config;
mod copy;
mod driver;
pub mod error;
mod exclusive;
mod generic;
pub mod guard;
mod observe;
mod prepared;
mod proto;
pub mod row;
pub mod rt;
mod sched;
mod session;
pub mod stats;
mod stream;
mod tls;
mod typeinfo;

pub use client::{Adapter, Batch, Client, ConnTask, StatementResult};
pub use config::{
    ChannelBinding, Config, Keepalives, LoadBalanceHosts, Pooler, ReleaseReset, RootCert, Server,
    SslMode, SslNegotiation, TargetSessionAttrs, TlsConfig, TlsVersion,
};
pub use copy::{CopyIn, CopyOut};
pub use driver::Notification;
pub use error::{DbError, Error, ErrorKind, Reason, SqlState};
pub use exclusive::CancelToken;
pub use generic::{GenericClient, GenericTransaction};
pub use prepared::{Statement, ToStatement};
pub use row::{Column, Row, RowIndex, SimpleQueryMessage, SimpleQueryRow};
pub use session::{IsolationLevel, Portal, Savepoint, Session, Transaction, TransactionBuilder};
pub use stats::{ConnStats, ExclusiveStats, Stats};
pub use stream::RowStream;

/// Internals for the project's own benchmarks and tests (feature `internals`, off by default):
/// the protocol state and the driver-tick probe. No stability promise; not for applications.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    use std::sync::Arc;

    pub use crate::proto::pipeline::Script;
    pub use crate::proto::{encode, Frame, Handler, Outcome, Pipeline, UnitKind};
    /// The startup and authentication state machine with what it takes and gives, for the
    /// fuzz targets; [`next_message`] cuts its messages from the server's bytes.
    pub use crate::proto::{Binding, Startup, Step};
    pub use crate::sched::in_driver_tick;
    use crate::{Column, Row};

    /// The catalog question a shared connection asks for the extension routines the guard
    /// refuses (`proto::catalog`): schema, name, argument count, defaults, variadic.
    pub const EXTENSION_ROUTINES_QUERY: &str = crate::proto::catalog::QUERY;

    /// A column description, as a RowDescription would give it.
    pub fn column(name: String, type_: crate::types::Type) -> Column {
        Column::new(name, type_)
    }

    /// A row from a DataRow body (`None` if malformed).
    pub fn row(columns: Arc<[Column]>, body: bytes::Bytes) -> Option<Row> {
        Row::new(columns, body)
    }

    /// The next whole backend message in `buf`, or `None` until it has all arrived; its header
    /// is checked first against `max` (the frame check the driver reads startup messages with).
    pub fn next_message(
        buf: &mut bytes::BytesMut,
        max: usize,
    ) -> Result<Option<postgres_protocol::message::backend::Message>, String> {
        crate::proto::frame::next_message(buf, max)
    }
}

/// The `postgres-types` crate: `ToSql`, `FromSql`, `Type` and friends.
pub use postgres_types as types;

/// For adapter crates: re-exports the user-facing API and names the adapter's runtime once, so
/// that users depend on the adapter crate alone (`pgpipe_smol::Session`, `pgpipe_smol::types`,
/// `pgpipe_smol::Error`, ...). The adapter defines its own `Client` alias, `connect` and
/// `connect_with`; `adapter_api!(MyRuntime)` adds the rest:
/// the [`Session`], [`Transaction`] and [`Savepoint`] aliases on `MyRuntime`, and rows, errors,
/// notifications, statistics, configuration, [`guard`] and [`types`] re-exported.
#[macro_export]
macro_rules! adapter_api {
    ($rt:ty) => {
        pub use $crate::config::{
            ChannelBinding, Config, Keepalives, LoadBalanceHosts, ReleaseReset, RootCert, Server,
            SslMode, SslNegotiation, TargetSessionAttrs, TlsConfig, TlsVersion,
        };
        pub use $crate::error::{BoxError, DbError, Error, ErrorKind, Reason, SqlState};
        pub use $crate::row::{Column, Row, RowIndex, SimpleQueryMessage, SimpleQueryRow};
        pub use $crate::stats::{ConnStats, ExclusiveStats, Stats};
        pub use $crate::{binary_copy, config, error, guard, row, stats, types};
        pub use $crate::{CancelToken, CopyIn, CopyOut, GenericClient, GenericTransaction};
        pub use $crate::{IsolationLevel, Notification, Portal, Statement, ToStatement};
        pub use $crate::{RowStream, StatementResult};

        /// A pinned exclusive connection for session state (`SET`, `LISTEN`, temp tables),
        /// from `Client::session`.
        pub type Session = $crate::Session<$rt>;

        /// A transaction on an exclusive connection, from `Client::transaction`; dropping it
        /// rolls back.
        pub type Transaction = $crate::Transaction<$rt>;

        /// A transaction's modes before it starts, from `Client::build_transaction`.
        pub type TransactionBuilder<'a> = $crate::TransactionBuilder<'a, $rt>;

        /// A savepoint inside a [`Transaction`], or a transaction inside a [`Session`].
        pub type Savepoint<'a> = $crate::Savepoint<'a, $rt>;

        /// Statements run all or nothing as one unit on the shared path, from
        /// `Client::batch`.
        pub type Batch<'a> = $crate::Batch<'a, $rt>;
    };
}
