//! The process-wide test database behind [`shared`]: the external server of `PGPIPE_TEST_URL`,
//! or a throwaway TLS [`Cluster`] started on first use.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::binaries::psql_in;
use crate::process::run_with_stdin;
use crate::quoting::{conninfo_quote, sql_ident, sql_literal, userinfo};
use crate::{
    find_bin_dir, server_log, Cluster, HarnessError, TlsMaterial, AUTH_ROLES, TEST_URL_ENV,
};

/// Replaces the credentials of a connection string, keeping its host, port,
/// database and parameters.
///
/// `postgres://` and `postgresql://` URLs get a new user-info part; anything
/// else is taken to be a libpq `key=value` string, to which `user` and
/// `password` keywords are appended (later keywords win in libpq).
fn with_credentials(url: &str, user: &str, password: &str) -> String {
    for scheme in ["postgresql://", "postgres://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let hostport = match authority.rfind('@') {
                Some(at) => &authority[at + 1..],
                None => authority,
            };
            return format!("{scheme}{}@{hostport}{tail}", userinfo(user, password));
        }
    }
    format!(
        "{url} user={} password={}",
        conninfo_quote(user),
        conninfo_quote(password)
    )
}

/// A database for tests: either the external server from `PGPIPE_TEST_URL`,
/// or a process-wide throwaway TLS [`Cluster`] started on first use and
/// removed at process exit by its watchdog.
///
/// Obtained through [`shared`].
#[derive(Debug)]
pub struct TestDb {
    inner: TestDbInner,
}

#[derive(Debug)]
enum TestDbInner {
    /// A server given by `PGPIPE_TEST_URL`.
    External {
        /// The URL as given.
        url: String,
        /// The psql used to run SQL against it.
        psql: PathBuf,
    },
    /// A throwaway cluster owned by this process.
    Local(Box<Cluster>),
}

/// The process-wide test database, set up on first use.
///
/// With `PGPIPE_TEST_URL` set, no cluster is started: the URL is used as is,
/// and the password roles ([`MD5_USER`](crate::MD5_USER),
/// [`SCRAM_USER`](crate::SCRAM_USER), [`CLEAR_USER`](crate::CLEAR_USER))
/// are created on that server if possible (existing ones get their password
/// reset; failures are reported on stderr and otherwise ignored).
///
/// # Panics
///
/// Panics, on this and every later call, if the database cannot be set up
/// (no server binaries, startup failure, ...).
pub fn shared() -> &'static TestDb {
    static SHARED: OnceLock<Result<TestDb, String>> = OnceLock::new();
    match SHARED.get_or_init(|| TestDb::init().map_err(|e| e.to_string())) {
        Ok(db) => db,
        Err(msg) => panic!("pgpipe-tests: could not set up the test database: {msg}"),
    }
}

impl TestDb {
    /// Sets up the external or local database.
    fn init() -> Result<TestDb, HarnessError> {
        match std::env::var(TEST_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => {
                let psql = find_bin_dir()
                    .map(|bin| psql_in(&bin))
                    .unwrap_or_else(|_| PathBuf::from("psql"));
                let db = TestDb {
                    inner: TestDbInner::External {
                        url: url.trim().to_owned(),
                        psql,
                    },
                };
                db.ensure_external_roles();
                Ok(db)
            }
            _ => Ok(TestDb {
                inner: TestDbInner::Local(Box::new(Cluster::builder().tls(true).start()?)),
            }),
        }
    }

    /// Best-effort creation of the password roles on an external server.
    fn ensure_external_roles(&self) {
        for (user, password, encryption) in AUTH_ROLES {
            let set = format!("SET password_encryption = {};\n", sql_literal(encryption));
            let create = format!(
                "{set}CREATE ROLE {} LOGIN PASSWORD {};\n",
                sql_ident(user),
                sql_literal(password)
            );
            let result = match self.psql(&create) {
                Err(e) if e.to_string().contains("already exists") => {
                    // Make sure the password and its storage match.
                    self.psql(&format!(
                        "{set}ALTER ROLE {} LOGIN PASSWORD {};\n",
                        sql_ident(user),
                        sql_literal(password)
                    ))
                }
                other => other,
            };
            if let Err(e) = result {
                eprintln!(
                    "pgpipe-tests: warning: could not set up role {user} on the {TEST_URL_ENV} server: {e}"
                );
            }
        }
    }

    /// URL of the database as the superuser, in plaintext
    /// (`sslmode=disable`); for an external server: the `PGPIPE_TEST_URL`
    /// value as given.
    pub fn url(&self) -> String {
        match &self.inner {
            TestDbInner::External { url, .. } => url.clone(),
            TestDbInner::Local(cluster) => cluster.url(),
        }
    }

    /// URL of the same database for `user` with `password`, in plaintext
    /// (see [`Cluster::url_for`]). For an external server, the host, port,
    /// database and parameters of `PGPIPE_TEST_URL` are kept and only the
    /// credentials replaced.
    pub fn url_for(&self, user: &str, password: &str) -> String {
        match &self.inner {
            TestDbInner::External { url, .. } => with_credentials(url, user, password),
            TestDbInner::Local(cluster) => cluster.url_for(user, password),
        }
    }

    /// The throwaway cluster, `None` for an external server.
    pub(crate) fn local(&self) -> Option<&Cluster> {
        match &self.inner {
            TestDbInner::External { .. } => None,
            TestDbInner::Local(cluster) => Some(cluster),
        }
    }

    /// Superuser URL over TLS verified against the test CA, for host
    /// `localhost` (see [`Cluster::tls_url_for`]); `None` for an external
    /// server.
    pub fn tls_url(&self) -> Option<String> {
        self.local()?.tls_url()
    }

    /// As [`TestDb::tls_url`], for `user` with `password`.
    pub fn tls_url_for(&self, user: &str, password: &str) -> Option<String> {
        self.local()?.tls_url_for(user, password)
    }

    /// The server's certificates; `None` for an external server.
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.local()?.tls()
    }

    /// As [`TestDb::tls`], but prints on stderr that `test` is skipped
    /// (and why) when there is no TLS material: `let Some(tls) =
    /// shared().tls_or_skip("name") else { return };`.
    pub fn tls_or_skip(&self, test: &str) -> Option<&TlsMaterial> {
        let tls = self.tls();
        if tls.is_none() {
            crate::report_skip(
                test,
                &format!(
                    "{TEST_URL_ENV} names an external server, and TLS tests need the \
                     harness's own cluster and certificates"
                ),
            );
        }
        tls
    }

    /// The server's unix socket directory; `None` for an external server.
    pub fn socket_dir(&self) -> Option<&Path> {
        Some(self.local()?.socket_dir())
    }

    /// The server's abstract socket name (`@name`); `None` for an external
    /// server.
    pub fn abstract_socket(&self) -> Option<String> {
        Some(self.local()?.abstract_socket())
    }

    /// Runs `sql` with psql (as the superuser, or the `PGPIPE_TEST_URL`
    /// user) and returns the unaligned, tuples-only output; see
    /// [`Cluster::psql`].
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        match &self.inner {
            TestDbInner::External { url, psql } => {
                let mut cmd = Command::new(psql);
                cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                    .arg("-d")
                    .arg(url)
                    .args(["-f", "-"])
                    .env("PGCONNECT_TIMEOUT", "10");
                run_with_stdin(cmd, sql)
            }
            TestDbInner::Local(cluster) => cluster.psql(sql),
        }
    }

    /// The server log of the throwaway cluster (see [`Cluster::log_path`]);
    /// `None` for an external server.
    pub fn server_log(&self) -> Option<&Path> {
        Some(self.local()?.log_path())
    }

    /// WARNING lines the throwaway cluster logged since any caller last asked (each line is
    /// returned once per process); empty for an external server.
    pub fn new_log_warnings(&self) -> Vec<String> {
        static READER: OnceLock<server_log::LogReader> = OnceLock::new();
        match self.server_log() {
            Some(log) => READER.get_or_init(Default::default).new_warnings(log),
            None => Vec::new(),
        }
    }

    /// Whether this is the external server from `PGPIPE_TEST_URL`.
    pub fn is_external(&self) -> bool {
        matches!(self.inner, TestDbInner::External { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_replaced_in_urls() {
        assert_eq!(
            with_credentials(
                "postgres://old:pw@db.example:6543/app?sslmode=disable",
                "u",
                "p w"
            ),
            "postgres://u:p%20w@db.example:6543/app?sslmode=disable"
        );
        assert_eq!(
            with_credentials("postgresql://localhost", "u", ""),
            "postgresql://u@localhost"
        );
        assert_eq!(
            with_credentials("host=/tmp dbname=x", "u", "it's"),
            "host=/tmp dbname=x user='u' password='it\\'s'"
        );
    }
}
