//! Why a connection stopped serving, typed: the driver decides on a [`Fault`] (never on text),
//! keeps the error behind it, and callers see it as a [`super::Reason`] that reads as a
//! message.

use std::io;
use std::sync::Arc;
use std::time::Duration;

#[cfg(test)]
use super::Reason;
use super::{DbError, Error};

/// Why a connection stopped serving (or is not serving yet), as the driver decided it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Fault {
    /// A slot whose connection has not opened yet.
    #[error("not connected yet")]
    NotConnected,
    /// A slot whose connection is being opened again.
    #[error("opening")]
    Opening,
    /// The first connect of this connection failed (its opener has the error).
    #[error("connection could not be opened")]
    OpenFailed,
    /// A checkout's exclusive connection did not open within its bounds (`dispatch_timeout`,
    /// `checkout_timeout`); the last attempt's failure.
    #[error("no connection opened within {waited:?}: {last}")]
    NoneOpened {
        /// Since the checkout started.
        waited: std::time::Duration,
        /// The last attempt's failure.
        #[source]
        last: Error,
    },
    /// A shared connection died and is opening again after this failure.
    #[error("reconnecting: {0}")]
    Reconnecting(#[source] Error),
    /// An on-demand connection was retired while idle.
    #[error("connection retired while idle")]
    Retired,
    /// The client aborted its connections.
    #[error("aborted by the client")]
    Aborted,
    /// The server broke the protocol (what the pipeline found).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// Reading the socket failed.
    #[error("read failed: {0}")]
    Read(#[source] io::Error),
    /// Writing the socket failed (a socket that takes no bytes is `WriteZero`).
    #[error("write failed: {0}")]
    Write(#[source] io::Error),
    /// The server closed the connection, with the FATAL it sent before, if any.
    #[error("server closed the connection{}", closed_with(.0))]
    Closed(Option<Box<DbError>>),
    /// Backstop: a unit left a shared connection in this transaction status.
    #[error(
        "a unit left the shared connection in transaction state {0:?}; connection taken out of \
         service"
    )]
    LeftInTransaction(char),
    /// Backstop: a session parameter changed on a shared connection.
    #[error(
        "session parameter {0} changed on a shared connection; connection taken out of service"
    )]
    ParameterChanged(String),
    /// The server reported more parameters than a connection keeps.
    #[error("{0}")]
    TooManyParameters(#[source] Error),
    /// The server's role no longer matches `target_session_attrs`.
    #[error("{server} became {role} (target_session_attrs); reconnecting")]
    RoleChanged {
        /// The server, `host:port`.
        server: String,
        /// What it became.
        role: &'static str,
    },
    /// A unit skipped by an earlier failure could not be sent again: the connection had
    /// stopped sending.
    #[error("the connection stopped sending (its server's role changed)")]
    StoppedSending,
    /// The health check found the connection half-open.
    #[error("half-open: {0}")]
    HalfOpen(HalfOpen),
    /// Work abandoned by a released session outlived its cancel.
    #[error(
        "statements abandoned by a released session still ran {0:?} after their cancel; \
         connection closed"
    )]
    CancelOutlived(Duration),
    /// A session's connection closed while it waited for a notification.
    #[error("the session's connection is closed")]
    SessionClosed,
    /// A COMMIT outlived `query_timeout`; it is not withdrawn.
    #[error("COMMIT did not complete within query_timeout; it may still commit")]
    CommitTimedOut,
    /// The runtime dropped the connection task before it finished.
    #[error("connection task was dropped by its runtime")]
    Dropped,
    /// A reason given as text (the public `From<&str>` / `From<String>`).
    #[error("{0}")]
    Text(Arc<str>),
}

fn closed_with(fatal: &Option<Box<DbError>>) -> String {
    match fatal {
        Some(e) => format!(": {e}"),
        None => String::new(),
    }
}

/// What the half-open check found (`driver/health.rs`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum HalfOpen {
    /// The server no longer has the backend.
    #[error("the server no longer has this connection's backend (pid {0})")]
    Gone(i32),
    /// The backend is blocked sending an answer that never arrives.
    #[error("the server's backend (pid {0}) is blocked sending an answer that does not arrive")]
    BlockedSending(i32),
    /// The backend is idle (or idle in a transaction) while units wait for it.
    #[error("the server's backend (pid {pid}) is {state} while statements wait for its answer")]
    IdleWhileWaiting {
        /// The backend.
        pid: i32,
        /// Its `pg_stat_activity.state`.
        state: String,
    },
    /// The check's connection could not reach the server.
    #[error("a health check could not reach the server: {0}")]
    Unreachable(#[source] io::Error),
    /// The check's connection failed while asking.
    #[error("the health check lost the server: {0}")]
    Lost(#[source] io::Error),
    /// The server did not answer the check within `connect_timeout`.
    #[error("the server did not answer a health check within {0:?}")]
    NoAnswer(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_text_and_carry_their_kind() {
        let r = Reason::from("server closed the connection");
        assert_eq!(&*r, "server closed the connection");
        assert!(!r.is_retired());
        // The retirement signal is its kind, not its text.
        assert!(Reason::retired().is_retired());
        assert!(!Reason::from(Reason::retired().to_string()).is_retired());
    }

    #[test]
    fn reasons_keep_the_error_behind_them() {
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let r = Reason::from(Fault::Read(reset));
        assert!(r.starts_with("read failed: "));
        assert_eq!(
            r.io_error().map(io::Error::kind),
            Some(io::ErrorKind::ConnectionReset)
        );
        assert!(r.server_error().is_none());
        assert_eq!(
            &*Reason::from(Fault::Closed(None)),
            "server closed the connection"
        );
        assert_eq!(
            &*Reason::from(Fault::HalfOpen(HalfOpen::Gone(7))),
            "half-open: the server no longer has this connection's backend (pid 7)"
        );
        assert_eq!(
            &*Reason::from(Fault::LeftInTransaction('T')),
            "a unit left the shared connection in transaction state 'T'; connection taken out of \
             service"
        );
    }
}
