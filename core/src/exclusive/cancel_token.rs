//! A holder's cancel token: another task asks the server to stop what a session or
//! transaction is running.

use std::fmt;
use std::sync::{Arc, Weak};

use super::Pinned;
use crate::driver::shared::ConnShared;
use crate::sched::DeferredWakes;

/// Asks the server to cancel what a [`Session`](crate::Session) or
/// [`Transaction`](crate::Transaction) is running, from any task or thread; from
/// `cancel_token()`. Cheap to clone; it holds no connection open.
///
/// A cancel is PostgreSQL's CancelRequest, sent by the connection's own task on a short
/// connection of its own: the statement running then fails with SQLSTATE 57014
/// (`query_canceled`), which its caller receives as [`Error::Db`](crate::Error::Db). The
/// request names a backend, not a statement, so it is sent only while the holder still holds
/// the connection and only once the units queued before the holder got it are answered; the
/// holder's next statements wait until the server has taken the request, so it never lands
/// on them. The statements the holder had queued when it asked must end within 2 s of the
/// request, or the connection is closed (its session ends). There is none for the shared
/// path, where a backend runs other callers' statements.
///
/// Behind a transaction pooler the request goes to the pooler, which passes it on only while
/// the session's server connection is linked to it (PgBouncer: while the transaction runs).
#[derive(Clone)]
pub struct CancelToken {
    pinned: Weak<Pinned>,
    conn: Weak<ConnShared>,
    holder: u64,
}

impl CancelToken {
    pub(crate) fn new(pinned: &Arc<Pinned>, conn: &Arc<ConnShared>, holder: u64) -> CancelToken {
        CancelToken {
            pinned: Arc::downgrade(pinned),
            conn: Arc::downgrade(conn),
            holder,
        }
    }

    /// Asks the server to cancel the statement the session is running (or the next of those
    /// it has queued). Returns whether a request was made: `false` when the session had
    /// nothing unanswered, or has ended (its connection went to another holder).
    pub fn cancel(&self) -> bool {
        let (Some(pinned), Some(conn)) = (self.pinned.upgrade(), self.conn.upgrade()) else {
            return false;
        };
        pinned.cancel_holder(self.holder, &conn)
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// Asks the connection task to cancel the units pushed on `conn` since `since` that are not
/// answered yet; whether there were any.
pub(super) fn cancel_unanswered(conn: &ConnShared, since: u64, wakes: &mut DeferredWakes) -> bool {
    let pushed = conn.units_pushed();
    let answered = pushed - conn.units_unanswered();
    let any = pushed > answered.max(since);
    if any {
        conn.request_cancel(since, pushed, wakes);
    }
    any
}
