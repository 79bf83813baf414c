//! A TechEmpower-style web service on pgpipe, and the same service on the stacks people pick
//! instead, for a side-by-side benchmark through a real HTTP server.
//!
//! The four TechEmpower database endpoints (`/db`, `/queries?q=N`, `/updates?q=N`,
//! `/fortunes`) are written once, in [`app`], against two small traits ([`app::Db`],
//! [`app::Conn`]). [`db`] implements them for pgpipe (any runtime), deadpool-postgres and a few
//! shared tokio-postgres clients; [`server`] runs them as one of four [`server::Variant`]s:
//! pgpipe on glommio thread-per-core (hyper 1.x on glommio sockets, [`glommio_io`]), pgpipe on
//! tokio with axum, axum with deadpool-postgres, axum with round-robin tokio-postgres clients.
//! [`schema`] creates and fills the `world` and `fortune` tables; [`bench`](mod@bench) holds the pieces of
//! the `web-bench` binary that are worth testing (wrk output parsing, CPU accounting, charts).

#![warn(missing_docs)]

pub mod app;
pub mod bench;
pub mod db;
pub mod glommio_io;
pub mod schema;
pub mod server;
