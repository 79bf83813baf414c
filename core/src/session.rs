//! `Session`, `Transaction` and `Savepoint`: statements on an exclusive connection.

use std::time::Instant;

use postgres_types::{ToSql, Type};

use crate::driver::shared::Notification;
use crate::exclusive::Held;
use crate::rt::Runtime;
use crate::{Adapter, Client, Error, Row};

/// Statement methods shared by every exclusive handle.
macro_rules! statements {
    () => {
        /// Runs a statement and returns its rows.
        pub async fn query(
            &self,
            sql: &str,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Vec<Row>, Error> {
            Ok(self.x().run(sql, params).await?.rows)
        }

        /// Runs a statement and returns the number of rows it affected.
        pub async fn execute(
            &self,
            sql: &str,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<u64, Error> {
            Ok(self.x().run(sql, params).await?.affected)
        }

        /// Runs a statement that must return exactly one row.
        pub async fn query_one(
            &self,
            sql: &str,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Row, Error> {
            let rows = self.x().run(sql, params).await?.rows;
            crate::client::exactly_one(rows)
        }

        /// Runs a statement that returns at most one row.
        pub async fn query_opt(
            &self,
            sql: &str,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Option<Row>, Error> {
            let rows = self.x().run(sql, params).await?.rows;
            crate::client::at_most_one(rows)
        }

        /// Runs a statement with caller-supplied parameter types (one round trip, no cache).
        pub async fn query_typed(
            &self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<Vec<Row>, Error> {
            let x = self.x();
            let deadline = x.client.deadline();
            Ok(x.client
                .typed_on(&x.held.conn, sql, params, deadline)
                .await?
                .rows)
        }

        /// Runs a statement and streams its rows as they arrive, with bounded memory however
        /// large the result (see [`crate::RowStream`]). Statements issued while the stream is
        /// open queue behind it on this connection. `query_timeout` bounds only the start.
        pub async fn query_stream(
            &self,
            sql: &str,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<crate::RowStream<'_>, Error> {
            let x = self.x();
            crate::proto::encode::check_input(sql, params.len())?;
            let deadline = x.client.deadline();
            x.client
                .stream_on(&x.held.conn, sql, params, deadline)
                .await
        }

        /// Starts `COPY ... FROM STDIN`: write the data to the returned [`crate::CopyIn`],
        /// then `finish()` it for the number of rows copied.
        pub async fn copy_in(&self, sql: &str) -> Result<crate::CopyIn<'_>, Error> {
            let x = self.x();
            crate::proto::encode::check_input(sql, 0)?;
            x.client.copy_in_on(&x.held.conn, sql).await
        }

        /// Starts `COPY ... TO STDOUT`: the returned [`crate::CopyOut`] yields its data.
        pub async fn copy_out(&self, sql: &str) -> Result<crate::CopyOut<'_>, Error> {
            let x = self.x();
            crate::proto::encode::check_input(sql, 0)?;
            x.client.copy_out_on(&x.held.conn, sql).await
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
    /// session advisory locks). Waits while all `pinned_size` are held.
    pub async fn session(&self) -> Result<Session<R>, Error> {
        let held = self.checkout().await?;
        Ok(Session::new(self.clone(), held))
    }

    /// Checks out an exclusive connection and starts a transaction on it.
    pub async fn transaction(&self) -> Result<Transaction<R>, Error> {
        let held = self.checkout().await?;
        Transaction::begin(self.clone(), held).await
    }
}

/// The connection and client behind every exclusive handle.
struct Exclusive<R: Runtime> {
    client: Client<R>,
    held: Held,
}

impl<R: Runtime> Exclusive<R> {
    async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<crate::driver::shared::QueryResult, Error> {
        let op = async {
            crate::proto::encode::check_input(sql, params.len())?;
            let deadline = self.client.deadline();
            self.client
                .run_on(&self.held.conn, sql, params, deadline)
                .await
        };
        self.client.observed(sql, op).await
    }

    async fn simple(&self, sql: &str) -> Result<crate::driver::shared::QueryResult, Error> {
        let op = async {
            let w = self.held.conn.submit_simple_now(sql)?;
            let deadline: Option<Instant> = self.client.deadline();
            self.client.wait_for(deadline, &w).await
        };
        self.client.observed(sql, op).await
    }
}

/// A pinned exclusive connection for session state: `SET`, temp tables, `LISTEN`, session
/// advisory locks. Dropping it resets the connection (`DISCARD ALL` but for its cached prepared
/// statements, after `ROLLBACK` if a transaction may be open) and returns it to the pool;
/// nothing of the session is visible to the next holder.
pub struct Session<R: Runtime> {
    x: Exclusive<R>,
}

impl<R: Runtime> Session<R> {
    pub(crate) fn new(client: Client<R>, held: Held) -> Self {
        Session {
            x: Exclusive { client, held },
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
        let conn = &self.x.held.conn;
        futures_lite::future::poll_fn(|cx| {
            let mut q = crate::sched::lock(&conn.notifications);
            if let Some(n) = q.items.pop_front() {
                return std::task::Poll::Ready(Ok(n));
            }
            if !conn.is_open() {
                return std::task::Poll::Ready(Err(Error::NoConnection {
                    reason: "the session's connection is closed".into(),
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
        crate::sched::lock(&self.x.held.conn.notifications)
            .items
            .pop_front()
    }

    /// Notifications dropped because the backlog was full.
    pub fn notifications_dropped(&self) -> u64 {
        crate::sched::lock(&self.x.held.conn.notifications).dropped
    }

    /// Starts a transaction on this session's connection.
    pub async fn transaction(&mut self) -> Result<Savepoint<'_, R>, Error> {
        self.x.simple("BEGIN").await?;
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
pub struct Transaction<R: Runtime> {
    x: Exclusive<R>,
}

impl<R: Runtime> Transaction<R> {
    pub(crate) async fn begin(client: Client<R>, held: Held) -> Result<Self, Error> {
        let x = Exclusive { client, held };
        x.simple("BEGIN").await?;
        Ok(Transaction { x })
    }

    fn x(&self) -> &Exclusive<R> {
        &self.x
    }

    statements!();

    /// Commits. If the connection fails after COMMIT was sent, or `query_timeout` passes
    /// before it completes, the outcome is unknown: `Error::IndeterminateCommit`. If an earlier statement failed, the server rolls back
    /// instead and this returns `Error::RolledBack`.
    pub async fn commit(self) -> Result<(), Error> {
        commit(&self.x).await
    }

    /// Rolls back. (Dropping the transaction rolls back too: releasing a connection in a
    /// transaction starts with ROLLBACK.)
    pub async fn rollback(self) -> Result<(), Error> {
        self.x.simple("ROLLBACK").await.map(|_| ())
    }

    /// Opens a savepoint: a nested scope that can be rolled back on its own.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_, R>, Error> {
        Savepoint::open(&self.x, 1).await
    }
}

async fn commit<R: Runtime>(x: &Exclusive<R>) -> Result<(), Error> {
    match x.simple("COMMIT").await {
        Ok(r) if r.verb.as_str() == "ROLLBACK" => Err(Error::RolledBack),
        Ok(_) => Ok(()),
        Err(Error::Indeterminate { reason }) => Err(Error::IndeterminateCommit { reason }),
        // The COMMIT is not withdrawn when its caller stops waiting: it may still commit, or
        // be cancelled when the connection is released. Either way, nobody knows yet.
        Err(Error::Timeout) => Err(Error::IndeterminateCommit {
            reason: "COMMIT did not complete within query_timeout; it may still commit".into(),
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
        x.simple(&format!("SAVEPOINT {name}")).await?;
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
                .simple(&format!("RELEASE SAVEPOINT {n}"))
                .await
                .map(|_| ()),
            None => commit(self.x).await,
        }
    }

    /// Rolls back to the savepoint (or rolls back the session's transaction).
    pub async fn rollback(mut self) -> Result<(), Error> {
        self.done = true;
        match &self.name {
            Some(n) => self
                .x
                .simple(&format!("ROLLBACK TO SAVEPOINT {n}; RELEASE SAVEPOINT {n}"))
                .await
                .map(|_| ()),
            None => self.x.simple("ROLLBACK").await.map(|_| ()),
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
        let conn = &self.x.held.conn;
        let _ = match &self.name {
            Some(n) => {
                conn.submit_simple_now(&format!("ROLLBACK TO SAVEPOINT {n}; RELEASE SAVEPOINT {n}"))
            }
            None => conn.submit_rollback_now(),
        };
    }
}
