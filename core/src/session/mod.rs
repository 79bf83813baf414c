//! `Session`, `Transaction` and `Savepoint`: statements on an exclusive connection.
//!
//! A transaction costs no round trip of its own. `transaction()` sends nothing: its `BEGIN`
//! rides in the unit of the transaction's first statement, before the same Sync (so a failed
//! BEGIN never lets that statement run outside the transaction), and
//! [`Transaction::execute_and_commit`] / [`Transaction::query_and_commit`] carry the `COMMIT`
//! in the unit of its last one. A transaction of N statements takes N round trips; one that
//! never ran a statement sends nothing at all.

use std::sync::atomic::Ordering::Relaxed;

use postgres_types::{ToSql, Type};

use crate::driver::shared::{Notification, QueryResult};
use crate::exclusive::Held;
use crate::rt::Runtime;
use crate::{Adapter, Client, Error, Row};

use exclusive::Exclusive;
pub use options::{IsolationLevel, TransactionBuilder};
pub use portal::Portal;

mod exclusive;
mod options;
mod portal;

/// Statement methods shared by every exclusive handle.
macro_rules! statements {
    () => {
        /// Runs a statement and returns its rows.
        pub async fn query<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Vec<Row>, Error> {
            Ok(self
                .x()
                .run(statement.sql_text(), params, false)
                .await?
                .rows)
        }

        /// Runs a statement and returns the number of rows it affected.
        pub async fn execute<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<u64, Error> {
            Ok(self
                .x()
                .run(statement.sql_text(), params, false)
                .await?
                .affected)
        }

        /// Runs a statement that must return exactly one row.
        pub async fn query_one<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Row, Error> {
            let rows = self
                .x()
                .run(statement.sql_text(), params, false)
                .await?
                .rows;
            crate::client::exactly_one(rows)
        }

        /// Runs a statement that returns at most one row.
        pub async fn query_opt<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Option<Row>, Error> {
            let rows = self
                .x()
                .run(statement.sql_text(), params, false)
                .await?
                .rows;
            crate::client::at_most_one(rows)
        }

        /// Runs a statement with caller-supplied parameter types (one round trip, no cache).
        pub async fn query_typed(
            &self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<Vec<Row>, Error> {
            let x = self.x();
            let turn = x.order.ticket();
            x.prepare_for(sql).await?;
            // In turn first: the settling may roll back, which must not overtake earlier units.
            x.wait_turn(&turn).await?;
            x.settle_early().await?;
            let deadline = x.client.deadline();
            Ok(x.client
                .typed_on(&x.held().conn, sql, params, deadline, &x.framing(&turn))
                .await?
                .rows)
        }

        /// Runs a statement and streams its rows as they arrive, with bounded memory however
        /// large the result (see [`crate::RowStream`]). Statements issued while the stream is
        /// open queue behind it on this connection. `query_timeout` bounds only the start.
        pub async fn query_stream<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<crate::RowStream<'_>, Error> {
            let (x, sql) = (self.x(), statement.sql_text());
            let turn = x.order.ticket();
            crate::proto::encode::check_input(sql, params.len())?;
            x.prepare_for(sql).await?;
            // In turn first: the settling may roll back, which must not overtake earlier units.
            x.wait_turn(&turn).await?;
            x.settle_early().await?;
            let deadline = x.client.deadline();
            x.client
                .stream_on(&x.held().conn, sql, params, deadline, &x.framing(&turn))
                .await
        }

        /// Starts `COPY ... FROM STDIN`: write the data to the returned [`crate::CopyIn`],
        /// then `finish()` it for the number of rows copied. Statements issued on this
        /// connection while it is open wait until its end is sent (they would land between
        /// the COPY and its data).
        pub async fn copy_in(&self, sql: &str) -> Result<crate::CopyIn<'_>, Error> {
            let x = self.x();
            let turn = x.order.ticket();
            crate::proto::encode::check_input(sql, 0)?;
            x.prepare_for(sql).await?;
            // In turn first: the settling may roll back, which must not overtake earlier units.
            x.wait_turn(&turn).await?;
            x.settle_early().await?;
            let mut copy = x
                .client
                .copy_in_on(&x.held().conn, sql, &x.framing(&turn))
                .await?;
            copy.keep_turn(turn);
            Ok(copy)
        }

        /// Starts `COPY ... TO STDOUT`: the returned [`crate::CopyOut`] yields its data.
        pub async fn copy_out(&self, sql: &str) -> Result<crate::CopyOut<'_>, Error> {
            let x = self.x();
            let turn = x.order.ticket();
            crate::proto::encode::check_input(sql, 0)?;
            x.prepare_for(sql).await?;
            // In turn first: the settling may roll back, which must not overtake earlier units.
            x.wait_turn(&turn).await?;
            x.settle_early().await?;
            x.client
                .copy_out_on(&x.held().conn, sql, &x.framing(&turn))
                .await
        }

        /// The oldest notice (`RAISE NOTICE`, `WARNING`, the server's own notes) the holder's
        /// statements drew and nobody took yet, if any. A statement's notices are here once it
        /// has completed; up to 1,000 are kept, then the oldest are dropped
        /// (`notices_dropped`). With the `tracing` feature every notice is also logged.
        pub fn try_next_notice(&self) -> Option<crate::DbError> {
            crate::sched::lock(&self.x().held().conn.notices)
                .items
                .pop_front()
        }

        /// Notices dropped because the backlog was full.
        pub fn notices_dropped(&self) -> u64 {
            crate::sched::lock(&self.x().held().conn.notices).dropped
        }

        /// Prepares `sql` on this connection without running it: its parameter and column
        /// types ([`crate::Statement`]).
        pub async fn prepare(&self, sql: &str) -> Result<crate::Statement, Error> {
            let x = self.x();
            // In turn: what it names may be created by a statement issued before it.
            let turn = x.order.ticket();
            crate::proto::encode::check_input(sql, 0)?;
            x.wait_turn(&turn).await?;
            let held = x.held();
            let op = x.client.describe_on(&held.conn, sql, x.client.deadline());
            x.client.observed(sql, op).await
        }

        /// A token another task can use to cancel what this runs ([`crate::CancelToken`]).
        pub fn cancel_token(&self) -> crate::CancelToken {
            self.x().held().cancel_token()
        }

        /// Runs one or more `;`-separated statements with the simple protocol (no parameters)
        /// and returns every statement's rows, their values as text, each statement ending
        /// with its count ([`crate::SimpleQueryMessage`]). Stops at the first error. For
        /// `SHOW`, scripts and tools that read text.
        pub async fn simple_query(
            &self,
            sql: &str,
        ) -> Result<Vec<crate::SimpleQueryMessage>, Error> {
            self.x().simple_rows(sql).await
        }

        /// Runs one or more `;`-separated statements with the simple protocol (no parameters,
        /// results discarded). Stops at the first error.
        pub async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
            self.x().simple(sql).await.map(|_| ())
        }
    };
}

// Sessions depend on the client, never the reverse: the client's exclusive-connection
// operations are defined here, on top of its checkout.
impl<R: Adapter> Client<R> {
    /// Checks out an exclusive connection for session state (SET, LISTEN, temp tables,
    /// session advisory locks). Waits, in arrival order, while every exclusive connection the
    /// client may open is held (`docs/TRANSACTIONS.md`).
    pub async fn session(&self) -> Result<Session<R>, Error> {
        let held = self.checkout(false).await?;
        Ok(Session::new(self.clone(), held))
    }

    /// Checks out an exclusive connection for a transaction. Nothing is sent yet: the
    /// transaction's `BEGIN` goes out with its first statement.
    pub async fn transaction(&self) -> Result<Transaction<R>, Error> {
        self.transaction_with_modes(0).await
    }

    /// A transaction with an isolation level, `READ ONLY` or `DEFERRABLE`: set them on the
    /// returned builder, then `start()` it. They ride in the transaction's BEGIN, which still
    /// travels with its first statement.
    pub fn build_transaction(&self) -> TransactionBuilder<'_, R> {
        TransactionBuilder::new(self)
    }

    async fn transaction_with_modes(&self, modes: u8) -> Result<Transaction<R>, Error> {
        let held = self.checkout(true).await?;
        let x = Exclusive::new(self.clone(), held, true);
        x.begin.set_modes(modes);
        x.begin.arm();
        Ok(Transaction { x })
    }
}

/// A pinned exclusive connection for session state: `SET`, temp tables, `LISTEN`, session
/// advisory locks. Dropping it returns it to the pool: a transaction left open is rolled back,
/// and if it ran anything that may change session state the session is reset (`DISCARD ALL`
/// but for its cached prepared statements); nothing of the session is visible to the next
/// holder (see [`crate::ReleaseReset`] for what counts).
pub struct Session<R: Runtime> {
    x: Exclusive<R>,
}

impl<R: Runtime> Session<R> {
    pub(crate) fn new(client: Client<R>, held: Held) -> Self {
        Session {
            x: Exclusive::new(client, held, false),
        }
    }

    fn x(&self) -> &Exclusive<R> {
        &self.x
    }

    statements!();

    /// Waits for the next NOTIFY on a channel this session LISTENs to. Notifications arrive
    /// while the session is idle too; up to 10,000 are kept, then the oldest are dropped (see
    /// [`Session::notifications_dropped`]).
    pub async fn next_notification(&self) -> Result<Notification, Error> {
        let conn = &self.x.held().conn;
        futures_lite::future::poll_fn(|cx| {
            let mut q = crate::sched::lock(&conn.notifications);
            if let Some(n) = q.items.pop_front() {
                return std::task::Poll::Ready(Ok(n));
            }
            if !conn.is_open() {
                return std::task::Poll::Ready(Err(Error::NoConnection {
                    reason: crate::Reason::from(crate::error::Fault::SessionClosed),
                }));
            }
            q.waker = Some(cx.waker().clone());
            std::task::Poll::Pending
        })
        .await
    }

    /// The session's notifications as a stream; it ends when the connection closes.
    pub fn notifications(&self) -> impl futures_lite::Stream<Item = Notification> + '_ {
        futures_lite::stream::unfold(self, |s| async move {
            s.next_notification().await.ok().map(|n| (n, s))
        })
    }

    /// A notification if one is waiting, without waiting.
    pub fn try_next_notification(&self) -> Option<Notification> {
        crate::sched::lock(&self.x.held().conn.notifications)
            .items
            .pop_front()
    }

    /// Notifications dropped because the backlog was full.
    pub fn notifications_dropped(&self) -> u64 {
        crate::sched::lock(&self.x.held().conn.notifications).dropped
    }

    /// Starts a transaction on this session's connection. Nothing is sent yet: its `BEGIN`
    /// goes out with its first statement.
    pub async fn transaction(&mut self) -> Result<Savepoint<'_, R>, Error> {
        if self.x.settle.swap(false, Relaxed) {
            self.x.end_dropped_transaction().await?;
        }
        self.x.begin.arm();
        Ok(Savepoint {
            x: &self.x,
            name: None,
            done: false,
            depth: 0,
        })
    }
}

/// A transaction on an exclusive connection. `commit()` or `rollback()` ends it; dropping it
/// without either rolls it back. Savepoints nest with [`Transaction::savepoint`].
///
/// Its `BEGIN` travels with its first statement and costs no round trip; errors still say
/// which failed (`Error::BeginFailed`, `Error::CommitFailed`).
pub struct Transaction<R: Runtime> {
    x: Exclusive<R>,
}

impl<R: Runtime> Transaction<R> {
    fn x(&self) -> &Exclusive<R> {
        &self.x
    }

    statements!();

    /// Commits. If the connection fails after COMMIT was sent, or `query_timeout` passes
    /// before it completes, the outcome is unknown: `Error::IndeterminateCommit`. If an
    /// earlier statement failed, the server rolls back instead and this returns
    /// `Error::RolledBack`; a COMMIT the server refuses (a deferred constraint, a
    /// serialization failure) is `Error::CommitFailed`. A transaction that ran no statement
    /// sends nothing.
    pub async fn commit(self) -> Result<(), Error> {
        if self.x.begin.disarm() {
            return Ok(());
        }
        commit(&self.x, true).await
    }

    /// Runs a last statement and commits, in one round trip (the COMMIT travels in the
    /// statement's unit): the statement's affected-row count. If the statement fails, the
    /// COMMIT does not run and the transaction is rolled back (`Error::Db`); otherwise
    /// errors are those of [`Transaction::commit`].
    pub async fn execute_and_commit(
        self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        committed(self.x.run(sql, params, true).await).map(|r| r.affected)
    }

    /// [`Transaction::execute_and_commit`] for a last statement whose rows the caller needs.
    pub async fn query_and_commit(
        self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        committed(self.x.run(sql, params, true).await).map(|r| r.rows)
    }

    /// Rolls back. (Dropping the transaction rolls back too: the release sends ROLLBACK when
    /// the server says a transaction is open.)
    pub async fn rollback(self) -> Result<(), Error> {
        if self.x.begin.disarm() {
            return Ok(());
        }
        self.x.control_ending("ROLLBACK", true).await.map(|_| ())
    }

    /// Opens a savepoint: a nested scope that can be rolled back on its own.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_, R>, Error> {
        Savepoint::open(&self.x, 1).await
    }
}

/// COMMIT on `x`; `ends`: it ends the holder's hold too (a [`Transaction`]'s).
async fn commit<R: Runtime>(x: &Exclusive<R>, ends: bool) -> Result<(), Error> {
    match committed(x.control_ending("COMMIT", ends).await) {
        // The server refused the COMMIT itself.
        Err(Error::Db(e)) => Err(Error::CommitFailed(e)),
        r => r.map(|_| ()),
    }
}

/// The outcome of a unit that ended with COMMIT, for the caller.
fn committed(r: Result<QueryResult, Error>) -> Result<QueryResult, Error> {
    match r {
        Ok(r) if r.verb.as_str() == "ROLLBACK" => Err(Error::RolledBack),
        Ok(r) => Ok(r),
        Err(Error::Indeterminate { reason }) => Err(Error::IndeterminateCommit { reason }),
        // The COMMIT is not withdrawn when its caller stops waiting: it may still commit, or
        // be cancelled when the connection is released. Either way, nobody knows yet.
        Err(Error::Timeout) => Err(Error::IndeterminateCommit {
            reason: crate::Reason::from(crate::error::Fault::CommitTimedOut),
        }),
        Err(e) => Err(e),
    }
}

/// A savepoint inside a transaction (or a transaction inside a [`Session`]). `commit()`
/// releases it; `rollback()` or dropping it rolls back to it.
pub struct Savepoint<'a, R: Runtime> {
    x: &'a Exclusive<R>,
    /// `None` for a transaction opened by [`Session::transaction`].
    name: Option<String>,
    done: bool,
    depth: u32,
}

impl<'a, R: Runtime> Savepoint<'a, R> {
    async fn open(x: &'a Exclusive<R>, depth: u32) -> Result<Savepoint<'a, R>, Error> {
        let name = format!("pgpipe_sp_{depth}");
        x.control(&format!("SAVEPOINT {name}")).await?;
        Ok(Savepoint {
            x,
            name: Some(name),
            done: false,
            depth,
        })
    }

    fn x(&self) -> &Exclusive<R> {
        self.x
    }

    statements!();

    /// Releases the savepoint (or commits the session's transaction).
    pub async fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        match &self.name {
            Some(n) => self
                .x
                .control(&format!("RELEASE SAVEPOINT {n}"))
                .await
                .map(|_| ()),
            None if self.x.begin.disarm() => Ok(()),
            None => commit(self.x, false).await,
        }
    }

    /// Rolls back to the savepoint (or rolls back the session's transaction).
    pub async fn rollback(mut self) -> Result<(), Error> {
        self.done = true;
        match &self.name {
            Some(n) => self
                .x
                .control(&format!("ROLLBACK TO SAVEPOINT {n}; RELEASE SAVEPOINT {n}"))
                .await
                .map(|_| ()),
            None if self.x.begin.disarm() => Ok(()),
            None => self.x.control("ROLLBACK").await.map(|_| ()),
        }
    }

    /// Opens a nested savepoint.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_, R>, Error> {
        Savepoint::open(self.x, self.depth + 1).await
    }
}

impl<R: Runtime> Drop for Savepoint<'_, R> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Queued without waiting; the connection runs it before anything its holder sends next.
        let conn = &self.x.held().conn;
        match &self.name {
            Some(n) => {
                let _ = conn.submit_simple_now(&format!(
                    "ROLLBACK TO SAVEPOINT {n}; RELEASE SAVEPOINT {n}"
                ));
            }
            // Its BEGIN never went out: there is nothing to end.
            None if self.x.begin.disarm() => {}
            // ROLLBACK only where the server says a transaction is open; with units still
            // unanswered that is not known yet, and the session's next statement decides.
            None => match conn.settled_tx_status() {
                Some(b'I') => {}
                Some(_) => {
                    let _ = conn.submit_simple_now("ROLLBACK");
                }
                None => self.x.settle.store(true, Relaxed),
            },
        }
    }
}
