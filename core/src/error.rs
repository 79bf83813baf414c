//! Typed errors. Every failure a caller can see is one variant here; the variant says whether the
//! statement may have run (see `Error::NotDispatched` vs `Error::Indeterminate`).

use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::Arc;

mod fault;
mod sqlstate;
pub(crate) use fault::{Fault, HalfOpen};
pub use sqlstate::SqlState;

/// A boxed error from a `ToSql` / `FromSql` implementation.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything pgpipe can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server rejected this statement. Only this caller's unit failed; the connection is fine.
    #[error("{0}")]
    Db(Box<DbError>),
    /// The transaction's `BEGIN` failed. It travels with the transaction's first statement,
    /// which therefore did not run; the transaction did not start.
    #[error(
        "BEGIN failed, so the transaction did not start and its first statement did not run: {0}"
    )]
    BeginFailed(Box<DbError>),
    /// `COMMIT` failed (a deferred constraint, a serialization failure, ...): the server rolled
    /// the transaction back.
    #[error("COMMIT failed and the transaction was rolled back: {0}")]
    CommitFailed(Box<DbError>),
    /// Statement `index` (from 0) of an atomic batch failed: the batch ran as one transaction,
    /// so nothing of it was committed, and the statements after it did not run.
    #[error(
        "statement {index} of the batch failed, so nothing of the batch was committed: {source}"
    )]
    BatchFailed {
        /// Which statement failed, counting from 0 in the order they were added.
        index: usize,
        /// The server's error.
        source: Box<DbError>,
    },
    /// The unit was queued but never written to the server: it did not run, and retrying is safe.
    #[error("not dispatched: {reason} (the statement was never sent; safe to retry)")]
    NotDispatched {
        /// Why the connection stopped before sending it.
        reason: Reason,
    },
    /// The unit was sent but its connection died before its ReadyForQuery: it may or may not have run.
    #[error("indeterminate: {reason} (the statement was sent and may or may not have run)")]
    Indeterminate {
        /// Why the connection died.
        reason: Reason,
    },
    /// COMMIT was sent but the connection failed before its answer: the transaction may or may
    /// not have committed.
    #[error("commit outcome unknown: {reason} (the transaction may or may not have committed)")]
    IndeterminateCommit {
        /// Why the connection died.
        reason: Reason,
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
    /// `session()` / `transaction()` waited `checkout_timeout` for an exclusive connection:
    /// every one the budget allowed was held, and the checkout was still queued behind others.
    #[error("no exclusive connection after {waited:?}: {held} of {open} open are held (at most {limit} may be open now), {waiting} checkouts waiting{}", longest_held.map(|d| format!(", the longest held for {d:?}")).unwrap_or_default())]
    CheckoutTimeout {
        /// How long the caller waited.
        waited: std::time::Duration,
        /// Exclusive connections held by callers when the wait ended.
        held: usize,
        /// Exclusive connections open (held, idle or opening).
        open: usize,
        /// Exclusive connections that could be open then: `pinned_size`, or what lanes and
        /// overflow connections left of `max_connections` beyond the `pipeline_size` base.
        limit: usize,
        /// Checkouts still queued (this one included).
        waiting: usize,
        /// How long the longest current holder has held its connection.
        longest_held: Option<std::time::Duration>,
    },
    /// The caller's deadline passed. The unit stays in its pipeline and is drained and discarded;
    /// on a session or transaction its statement is also cancelled on the server, so the
    /// holder's next statements do not wait for it (see [`crate::CancelToken`]).
    #[error("timed out waiting for the result (the statement may still run)")]
    Timeout,
    /// The client was closed (or is closing) and accepts no new work.
    #[error("the client is closed")]
    Closed,
    /// No live connection could take the unit.
    #[error("no live connection: {reason}")]
    NoConnection {
        /// The last connection failure seen.
        reason: Reason,
    },
    /// Connecting or talking to the server failed at the socket level.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The server refused to authenticate the connection (a wrong password, no `pg_hba.conf`
    /// entry for this user and host, a missing client certificate, ...): its error, whose
    /// SQLSTATE is in class 28 ([`SqlState::INVALID_PASSWORD`],
    /// [`SqlState::INVALID_AUTHORIZATION_SPECIFICATION`]).
    #[error("authentication failed: {0}")]
    AuthRejected(Box<DbError>),
    /// Authentication could not go on at the client: no password is configured, the server asks
    /// for a method pgpipe does not implement, `channel_binding=require` cannot be met, or the
    /// server's SCRAM messages or signature are wrong.
    #[error("authentication failed: {message}")]
    Auth {
        /// What failed and what to do.
        message: String,
        /// The underlying error, where there is one (a malformed SCRAM message, ...).
        #[source]
        source: Option<BoxError>,
    },
    /// TLS could not be set up, or the server failed one of its checks; the message says which
    /// and what to do, in one sentence.
    #[error("TLS: {message}")]
    Tls {
        /// Which check failed and what to do.
        message: String,
        /// The TLS library's error (a `rustls::Error`) or the file error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The server broke the protocol (or sent something pgpipe cannot handle on this path); the
    /// connection was closed.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server cannot serve the shared path safely (for example `standard_conforming_strings` is off).
    #[error("unsupported server: {0}")]
    UnsupportedServer(String),
    /// The server does not have the role `target_session_attrs` asks for (a standby when a
    /// primary is wanted, ...).
    #[error("{server} is {why} (target_session_attrs)")]
    WrongRole {
        /// The server, as `host:port`.
        server: String,
        /// What it is instead.
        why: &'static str,
    },
    /// No server of a host list could be used; each attempt's error, in the order tried.
    #[error("no server of the host list could be used: {}", attempts.iter().map(|(s, e)| format!("{s}: {e}")).collect::<Vec<_>>().join("; "))]
    NoServer {
        /// `(host:port, why)` for every attempt.
        attempts: Vec<(String, Error)>,
    },
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
    /// An atomic batch holds at most 65535 statements.
    #[error("a batch of {statements} statements; at most 65535 run as one unit")]
    BatchTooLarge {
        /// Statements added.
        statements: usize,
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
            Error::Db(_)
            | Error::BeginFailed(_)
            | Error::CommitFailed(_)
            | Error::BatchFailed { .. } => ErrorKind::Db,
            Error::NotDispatched { .. } => ErrorKind::NotDispatched,
            Error::Indeterminate { .. } | Error::IndeterminateCommit { .. } => {
                ErrorKind::Indeterminate
            }
            Error::Timeout | Error::CheckoutTimeout { .. } => ErrorKind::Timeout,
            Error::Io(_)
            | Error::Protocol(_)
            | Error::NoConnection { .. }
            | Error::WrongRole { .. }
            | Error::NoServer { .. } => ErrorKind::Connection,
            _ => ErrorKind::Other,
        }
    }

    /// The server's error, wherever the server sent one: it rejected the statement (or the
    /// BEGIN, COMMIT or batch statement that carried it), or refused the connection (an
    /// unknown database, a wrong password, ...). For [`Error::NoServer`], the last attempt's.
    pub fn as_db(&self) -> Option<&DbError> {
        match self {
            Error::Db(e)
            | Error::BeginFailed(e)
            | Error::CommitFailed(e)
            | Error::AuthRejected(e)
            | Error::BatchFailed { source: e, .. } => Some(e),
            Error::NoServer { attempts } => attempts.last().and_then(|(_, e)| e.as_db()),
            _ => None,
        }
    }

    /// Whether authentication failed, at the server ([`Error::AuthRejected`]) or at the client
    /// ([`Error::Auth`]); also through [`Error::NoServer`] when its last attempt did.
    pub fn is_auth(&self) -> bool {
        match self {
            Error::Auth { .. } | Error::AuthRejected(_) => true,
            Error::NoServer { attempts } => attempts.last().is_some_and(|(_, e)| e.is_auth()),
            _ => false,
        }
    }

    /// A connect failed the way a server restart or failover makes it fail, so trying again
    /// soon may succeed: the connection was refused, reset or timed out, the server said it
    /// is starting up, shutting down or out of connection slots (SQLSTATE classes 57 and 08,
    /// 53300), or it had the wrong role for `target_session_attrs`.
    pub(crate) fn is_transient_connect(&self) -> bool {
        match self {
            Error::Io(_) | Error::WrongRole { .. } | Error::Timeout => true,
            Error::Db(db) => {
                let code = db.code().as_str();
                code.starts_with("57") || code.starts_with("08") || code == "53300"
            }
            Error::NoServer { attempts } => attempts.iter().all(|(_, e)| e.is_transient_connect()),
            _ => false,
        }
    }

    pub(crate) fn auth(message: impl Into<String>) -> Error {
        Error::Auth {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn auth_from(message: impl Into<String>, source: impl Into<BoxError>) -> Error {
        Error::Auth {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    pub(crate) fn tls(message: impl Into<String>) -> Error {
        Error::Tls {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn tls_from(message: impl Into<String>, source: impl Into<BoxError>) -> Error {
        Error::Tls {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The SQLSTATE, wherever the server sent one (see [`Error::as_db`]).
    pub fn code(&self) -> Option<&SqlState> {
        self.as_db().map(DbError::code)
    }
}

/// Why a connection stopped serving: a message for people and, for pgpipe's own decisions, what
/// kind of stop it was (never decided by comparing text). Reads as a `str`; the error behind it
/// (a socket's, or the server's FATAL) is kept: [`Reason::io_error`], [`Reason::server_error`].
#[derive(Debug, Clone)]
pub struct Reason {
    text: Arc<str>,
    fault: Arc<Fault>,
}

impl Reason {
    /// The message.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The socket error the connection failed with, when it failed on one (a read, a write,
    /// a health check that could not reach the server, or a connect).
    pub fn io_error(&self) -> Option<&io::Error> {
        match &*self.fault {
            Fault::Read(e) | Fault::Write(e) => Some(e),
            Fault::HalfOpen(HalfOpen::Unreachable(e) | HalfOpen::Lost(e)) => Some(e),
            Fault::Reconnecting(Error::Io(e)) => Some(e),
            Fault::NoneOpened {
                last: Error::Io(e), ..
            } => Some(e),
            _ => None,
        }
    }

    /// The error the server sent as it ended the connection (a FATAL: `admin_shutdown`,
    /// `idle_session_timeout`, ...), when it sent one.
    pub fn server_error(&self) -> Option<&DbError> {
        match &*self.fault {
            Fault::Closed(Some(e)) => Some(e),
            Fault::Reconnecting(e) | Fault::NoneOpened { last: e, .. } => e.as_db(),
            _ => None,
        }
    }

    /// An on-demand connection was retired while idle as the unit reached it: always retried
    /// elsewhere, whatever `retry_not_dispatched` says.
    pub(crate) fn retired() -> Reason {
        Reason::from(Fault::Retired)
    }

    pub(crate) fn is_retired(&self) -> bool {
        matches!(*self.fault, Fault::Retired)
    }
}

impl From<Fault> for Reason {
    fn from(fault: Fault) -> Reason {
        Reason {
            text: fault.to_string().into(),
            fault: Arc::new(fault),
        }
    }
}

impl Deref for Reason {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        *self.text == *other
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::from(Fault::Text(text.into()))
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason::from(Fault::Text(text.into()))
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

/// An ErrorResponse from the server: read it through its accessors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbError {
    pub(crate) severity: String,
    pub(crate) code: SqlState,
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
    pub(crate) hint: Option<String>,
    pub(crate) position: Option<u32>,
    pub(crate) where_: Option<String>,
    pub(crate) schema: Option<String>,
    pub(crate) table: Option<String>,
    pub(crate) column: Option<String>,
    pub(crate) datatype: Option<String>,
    pub(crate) constraint: Option<String>,
}

impl DbError {
    /// Severity (`ERROR`, `FATAL`, `PANIC`), not localized.
    pub fn severity(&self) -> &str {
        &self.severity
    }

    /// The SQLSTATE, e.g. [`SqlState::UNIQUE_VIOLATION`].
    pub fn code(&self) -> &SqlState {
        &self.code
    }

    /// The primary message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The optional detail.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The optional hint.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// The 1-based character position in the SQL text, when the server reports one.
    pub fn position(&self) -> Option<u32> {
        self.position
    }

    /// Where in a function or trigger the error happened (the context the server reports).
    pub fn where_(&self) -> Option<&str> {
        self.where_.as_deref()
    }

    /// The schema of the object concerned, when reported.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The table concerned, when reported.
    pub fn table(&self) -> Option<&str> {
        self.table.as_deref()
    }

    /// The column concerned, when reported.
    pub fn column(&self) -> Option<&str> {
        self.column.as_deref()
    }

    /// The data type concerned, when reported.
    pub fn datatype(&self) -> Option<&str> {
        self.datatype.as_deref()
    }

    /// The constraint violated, for constraint violations.
    pub fn constraint(&self) -> Option<&str> {
        self.constraint.as_deref()
    }

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

impl From<Box<DbError>> for Error {
    fn from(e: Box<DbError>) -> Self {
        Error::Db(e)
    }
}

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
