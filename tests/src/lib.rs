//! Throwaway PostgreSQL clusters for pgpipe's integration tests and examples.
//!
//! [`Cluster::start`] creates a fresh data directory under the system temp
//! directory, runs `initdb`, installs a `pg_hba.conf` with one login role per
//! password method (see [`MD5_USER`], [`SCRAM_USER`], [`CLEAR_USER`]) and
//! starts `postgres` on a free port of 127.0.0.1. Dropping the [`Cluster`]
//! (or calling [`Cluster::stop`]) shuts the server down and removes the
//! directory.
//!
//! Because the test process may panic, be interrupted or be killed, every
//! cluster also gets a small detached watchdog shell process that waits for
//! the test process to disappear and then stops the server and removes the
//! directory. This is what cleans up the process-wide cluster behind
//! [`shared`], whose static is never dropped.
//!
//! Server binaries are located through `PGPIPE_PG_BIN`, `pg_config --bindir`
//! or `/usr/lib/postgresql/*/bin` (see [`find_bin_dir`]). `initdb` and
//! `postgres` refuse to run as root, so when the current effective uid is 0
//! they are run as the `postgres` system user through `runuser`.
//!
//! Setting `PGPIPE_TEST_URL` makes [`shared`] use that external server
//! instead of starting a cluster.
//!
//! # TLS
//!
//! [`Cluster::builder`]`().tls(true)` starts a server with `ssl = on` and
//! certificates made at test time ([`TlsMaterial`], in the cluster
//! directory; nothing secret is in the repository). Such a cluster also
//! has the TLS roles [`TLS_SCRAM_USER`] (SCRAM, TLS only), [`CERT_USER`]
//! (client certificate only) and [`NOSSL_USER`] (plaintext only); every
//! other rule above matches TLS and plaintext alike. Its plain URLs
//! ([`Cluster::url`], [`Cluster::url_for`]) say `sslmode=disable`, so a
//! client defaulting to `prefer` stays in plaintext; [`Cluster::tls_url`]
//! gives `sslmode=verify-full` URLs for host `localhost`.
//!
//! The cluster behind [`shared`] is such a TLS cluster, so every test can
//! use it both ways. An expired server certificate is tested on a cluster
//! of its own ([`ClusterBuilder::expired_server_cert`]) rather than by
//! swapping certificates on the shared one, which other tests use at the
//! same time.
//!
//! [`libpq_connects`] and [`psql_with`] run psql with a given connection
//! string, so that tests can compare pgpipe with libpq on the same server.
//! [`Cluster::socket_dir`] is the server's unix socket directory (`host=`
//! that directory connects through it; `local` connections are trusted).

#![warn(missing_docs)]

pub mod autogroup;
mod binaries;
pub mod chunk_proxy;
mod cluster;
mod error;
mod estimates;
pub mod fake_server;
pub mod fault_proxy;
pub mod haproxy;
pub mod host_speed;
mod libpq;
pub mod patroni;
pub mod pgbouncer;
mod process;
mod quoting;
mod scratch;
pub mod server_log;
mod test_db;
pub mod tls;
mod tls_checks;

pub use binaries::find_bin_dir;
pub use cluster::{Cluster, ClusterBuilder};
pub use error::HarnessError;
pub use estimates::highest_estimate;
pub use haproxy::HaProxy;
pub use libpq::{libpq_connects, psql_with, psql_with_env};
pub use patroni::Patroni;
pub use pgbouncer::{PgBouncer, PoolMode};
pub use test_db::{shared, TestDb};
pub use tls::TlsMaterial;

/// Says on the terminal that `test` was skipped and why: written to the process's stderr
/// directly, past the test harness's capture (which shows a passing test's `eprintln!` to
/// nobody), so a run without an optional tool says what it did not check.
pub fn report_skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}

/// Superuser of every cluster started by this crate (trust authentication).
pub const SUPERUSER: &str = "postgres";
/// Database every URL produced by a [`Cluster`] points at.
pub const DATABASE: &str = "postgres";

/// Role that must authenticate with MD5 over TCP.
pub const MD5_USER: &str = "pgpipe_md5";
/// Password of [`MD5_USER`] (stored as an MD5 hash).
pub const MD5_PASSWORD: &str = "md5-secret";
/// Role that must authenticate with SCRAM-SHA-256 over TCP.
pub const SCRAM_USER: &str = "pgpipe_scram";
/// Password of [`SCRAM_USER`] (stored as a SCRAM verifier).
pub const SCRAM_PASSWORD: &str = "scram-secret";
/// Role that must authenticate with a cleartext password over TCP.
pub const CLEAR_USER: &str = "pgpipe_clear";
/// Password of [`CLEAR_USER`] (stored as a SCRAM verifier, sent in clear).
pub const CLEAR_PASSWORD: &str = "clear-secret";

/// Role of TLS clusters that must use TLS and SCRAM-SHA-256: `hostssl`
/// connections authenticate with SCRAM, `hostnossl` ones are rejected.
pub const TLS_SCRAM_USER: &str = "pgpipe_tls_scram";
/// Password of [`TLS_SCRAM_USER`] (stored as a SCRAM verifier).
pub const TLS_SCRAM_PASSWORD: &str = "tls-scram-secret";
/// Role of TLS clusters that logs in only with the client certificate
/// ([`TlsMaterial::client_cert`], whose CN is this name) over TLS (`cert`
/// authentication); plaintext is rejected. It has no password.
pub const CERT_USER: &str = "pgpipe_cert";
/// Role of TLS clusters that may only use plaintext: `hostnossl` is
/// trusted, `hostssl` rejected, so `sslmode=prefer` must fall back to
/// plaintext and `require` must fail.
pub const NOSSL_USER: &str = "pgpipe_nossl";

/// Environment variable naming the directory holding `initdb`, `postgres`
/// and `psql`; overrides every other way of finding them.
pub const PG_BIN_ENV: &str = "PGPIPE_PG_BIN";
/// Environment variable with a connection URL of an external server that
/// [`shared`] uses instead of starting a throwaway cluster.
pub const TEST_URL_ENV: &str = "PGPIPE_TEST_URL";

/// The password roles: name, password and the `password_encryption` used to
/// store the password.
const AUTH_ROLES: [(&str, &str, &str); 3] = [
    (MD5_USER, MD5_PASSWORD, "md5"),
    (SCRAM_USER, SCRAM_PASSWORD, "scram-sha-256"),
    (CLEAR_USER, CLEAR_PASSWORD, "scram-sha-256"),
];
