//! The harness's error: what failed (finding binaries, running a command, starting a server,
//! making certificates) and with what it failed.

use std::fmt;
use std::io;

use crate::PG_BIN_ENV;

/// Errors of the harness.
#[derive(Debug)]
pub enum HarnessError {
    /// No directory containing the PostgreSQL server binaries was found.
    BinariesNotFound {
        /// Every place that was looked at, with what was found there.
        searched: Vec<String>,
    },
    /// The `pgbouncer` binary was not found.
    PgBouncerNotFound {
        /// Every place that was looked at.
        searched: Vec<String>,
    },
    /// The `haproxy` binary was not found.
    HaProxyNotFound {
        /// Every place that was looked at.
        searched: Vec<String>,
    },
    /// A binary of the high-availability stack (`patroni`, `etcd`) was not found.
    HaToolNotFound {
        /// The binary looked for.
        tool: &'static str,
        /// The Debian package that has it.
        package: &'static str,
        /// Every place that was looked at.
        searched: Vec<String>,
    },
    /// An I/O operation (file system, spawning a process, ...) failed.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// An external command ran but exited unsuccessfully.
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard output.
        stdout: String,
        /// Its standard error.
        stderr: String,
    },
    /// The server did not start (it exited, timed out, or no free port
    /// could be bound).
    StartupFailed {
        /// The last port that was tried.
        port: u16,
        /// Why startup was given up.
        reason: String,
        /// The last lines of the server log.
        log_tail: String,
    },
    /// Test certificates could not be generated.
    Tls(String),
}

impl HarnessError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        HarnessError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::BinariesNotFound { searched } => {
                write!(
                    f,
                    "no PostgreSQL server binaries (a directory containing `initdb`) found; searched: {}; \
                     set {PG_BIN_ENV} to the directory holding initdb, postgres and psql",
                    searched.join("; ")
                )
            }
            HarnessError::PgBouncerNotFound { searched } => write!(
                f,
                "no pgbouncer binary found (install it with `apt-get install -y pgbouncer`, or set \
                 PGPIPE_PGBOUNCER to its path); searched: {}",
                searched.join("; ")
            ),
            HarnessError::HaProxyNotFound { searched } => write!(
                f,
                "no haproxy binary found (install it with `apt-get install -y haproxy`, or set \
                 PGPIPE_HAPROXY to its path); searched: {}",
                searched.join("; ")
            ),
            HarnessError::HaToolNotFound {
                tool,
                package,
                searched,
            } => write!(
                f,
                "no {tool} binary found (install it with `apt-get install -y {package}`); \
                 searched: {}",
                searched.join("; ")
            ),
            HarnessError::Io { context, source } => write!(f, "{context}: {source}"),
            HarnessError::CommandFailed {
                command,
                status,
                stdout,
                stderr,
            } => {
                write!(f, "command `{command}` failed ({status})")?;
                let stderr = stderr.trim();
                if !stderr.is_empty() {
                    write!(f, "; stderr:\n{stderr}")?;
                }
                let stdout = stdout.trim();
                if !stdout.is_empty() {
                    write!(f, "\nstdout:\n{stdout}")?;
                }
                Ok(())
            }
            HarnessError::StartupFailed {
                port,
                reason,
                log_tail,
            } => write!(
                f,
                "PostgreSQL server on port {port} failed to start: {reason}; server log tail:\n{log_tail}"
            ),
            HarnessError::Tls(reason) => write!(f, "generating test certificates: {reason}"),
        }
    }
}

impl std::error::Error for HarnessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HarnessError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
