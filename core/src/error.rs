//! Typed errors. Every failure a caller can see is one variant here; the variant says whether the
//! statement may have run (see `Error::NotDispatched` vs `Error::Indeterminate`).

use std::fmt;
use std::sync::Arc;

/// A boxed error from a `ToSql` / `FromSql` implementation.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything pgpipe can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server rejected this statement. Only this caller's unit failed; the connection is fine.
    #[error("{0}")]
    Db(Box<DbError>),
    /// The unit was queued but never written to the server: it did not run, and retrying is safe.
    #[error("not dispatched: {reason} (the statement was never sent; safe to retry)")]
    NotDispatched {
        /// Why the connection stopped before sending it.
        reason: Arc<str>,
    },
    /// The unit was sent but its connection died before its ReadyForQuery: it may or may not have run.
    #[error("indeterminate: {reason} (the statement was sent and may or may not have run)")]
    Indeterminate {
        /// Why the connection died.
        reason: Arc<str>,
    },
    /// COMMIT was sent but the connection failed before its answer: the transaction may or may
    /// not have committed.
    #[error("commit outcome unknown: {reason} (the transaction may or may not have committed)")]
    IndeterminateCommit {
        /// Why the connection died.
        reason: Arc<str>,
    },
    /// COMMIT found the transaction already failed; the server rolled it back.
    #[error("the transaction was rolled back because an earlier statement in it failed")]
    RolledBack,
    /// The session-neutrality guard refused the statement on the shared path.
    #[error("{0}")]
    Refused(crate::guard::Refusal),
    /// Checking out an exclusive connection would wait for one held by the calling task itself.
    #[error("recursive checkout: this task already holds an exclusive connection and every one is in use, so it would wait for itself forever")]
    RecursiveCheckout,
    /// `session()` / `transaction()` waited `checkout_timeout` for an exclusive connection.
    #[error("no exclusive connection after {waited:?}: {held} of {pinned} are held{}", longest_held.map(|d| format!(", the longest for {d:?}")).unwrap_or_default())]
    CheckoutTimeout {
        /// How long the caller waited.
        waited: std::time::Duration,
        /// Exclusive connections held by callers when the wait ended.
        held: usize,
        /// `pinned_size`.
        pinned: usize,
        /// How long the longest current holder has held its connection.
        longest_held: Option<std::time::Duration>,
    },
    /// The caller's deadline passed. The unit stays in its pipeline and is drained and discarded.
    #[error("timed out waiting for the result (the statement may still run)")]
    Timeout,
    /// The client was closed (or is closing) and accepts no new work.
    #[error("the client is closed")]
    Closed,
    /// No live connection could take the unit.
    #[error("no live connection: {reason}")]
    NoConnection {
        /// The last connection failure seen.
        reason: Arc<str>,
    },
    /// Connecting or talking to the server failed at the socket level.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Authentication failed or asked for a method pgpipe does not implement.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// TLS could not be set up, or the server failed one of its checks; the message says which
    /// and what to do.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server broke the protocol (or sent something pgpipe cannot handle on this path); the
    /// connection was closed.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server cannot serve the shared path safely (for example `standard_conforming_strings` is off).
    #[error("unsupported server: {0}")]
    UnsupportedServer(String),
    /// The connection string or `Config` is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The SQL text contains a NUL byte, which the protocol cannot carry.
    #[error("SQL text contains a NUL byte at offset {offset}")]
    NulInSql {
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// The statement takes a different number of parameters than were given.
    #[error(
        "statement expects {expected} {} but {given} {} given",
        plural(*.expected, "parameter", "parameters"),
        plural(*.given, "was", "were")
    )]
    ParamCount {
        /// Parameters the server reported for the statement.
        expected: usize,
        /// Parameters passed by the caller.
        given: usize,
    },
    /// The protocol carries at most 65535 parameters per statement.
    #[error("{given} parameters given; PostgreSQL accepts at most 65535")]
    TooManyParams {
        /// Parameters passed by the caller.
        given: usize,
    },
    /// A parameter value could not be encoded as the statement's parameter type.
    #[error("parameter ${} could not be encoded as {ty}: {source}", index + 1)]
    Encode {
        /// Zero-based parameter index.
        index: usize,
        /// The PostgreSQL type the statement expects.
        ty: String,
        /// The `ToSql` error.
        #[source]
        source: BoxError,
    },
    /// A column name or index does not exist in the row.
    #[error("no column {0} in this row")]
    ColumnNotFound(String),
    /// A column value could not be decoded into the requested Rust type.
    #[error("column {column} could not be decoded: {source}")]
    Decode {
        /// Column name.
        column: String,
        /// The `FromSql` error.
        #[source]
        source: BoxError,
    },
    /// `query_one` got a different number of rows.
    #[error("expected exactly one row, got {0}")]
    RowCount(usize),
}

impl Error {
    /// A short machine-readable name of the variant, used for per-kind error counters.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Db(_) => ErrorKind::Db,
            Error::NotDispatched { .. } => ErrorKind::NotDispatched,
            Error::Indeterminate { .. } | Error::IndeterminateCommit { .. } => {
                ErrorKind::Indeterminate
            }
            Error::Timeout | Error::CheckoutTimeout { .. } => ErrorKind::Timeout,
            Error::Io(_) | Error::Protocol(_) | Error::NoConnection { .. } => ErrorKind::Connection,
            _ => ErrorKind::Other,
        }
    }

    /// The server's error, when the server rejected the statement.
    pub fn as_db(&self) -> Option<&DbError> {
        match self {
            Error::Db(e) => Some(e),
            _ => None,
        }
    }

    /// The SQLSTATE code, when the server rejected the statement.
    pub fn code(&self) -> Option<&str> {
        self.as_db().map(|e| e.code.as_str())
    }
}

/// `one` for a count of 1, `many` otherwise (messages read "expects 1 parameter").
fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Coarse classes of errors, counted per connection in [`crate::Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server rejected a statement.
    Db,
    /// Never sent; retried elsewhere when possible.
    NotDispatched,
    /// Sent, outcome unknown.
    Indeterminate,
    /// The caller's deadline passed.
    Timeout,
    /// Socket or protocol failure.
    Connection,
    /// Caller-side validation and everything else.
    Other,
}

/// An ErrorResponse from the server, with the fields callers use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbError {
    /// Severity (`ERROR`, `FATAL`, `PANIC`), not localized.
    pub severity: String,
    /// SQLSTATE code, e.g. `23505` for a unique violation.
    pub code: String,
    /// The primary message.
    pub message: String,
    /// Optional detail.
    pub detail: Option<String>,
    /// Optional hint.
    pub hint: Option<String>,
    /// 1-based character position in the SQL text, when the server reports one.
    pub position: Option<u32>,
    /// Constraint name, for constraint violations.
    pub constraint: Option<String>,
    /// Table name, when reported.
    pub table: Option<String>,
}

impl DbError {
    /// Whether the server is closing the connection because of this error.
    pub fn is_fatal(&self) -> bool {
        self.severity == "FATAL" || self.severity == "PANIC"
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.severity, self.code, self.message)?;
        if let Some(d) = &self.detail {
            write!(f, " (detail: {d})")?;
        }
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DbError {}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        Error::Db(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn parameter_counts_read_as_english() {
        let msg = |expected, given| Error::ParamCount { expected, given }.to_string();
        assert_eq!(msg(1, 2), "statement expects 1 parameter but 2 were given");
        assert_eq!(msg(2, 1), "statement expects 2 parameters but 1 was given");
        assert_eq!(msg(0, 1), "statement expects 0 parameters but 1 was given");
    }
}
