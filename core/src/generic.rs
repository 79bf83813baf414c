//! [`GenericClient`]: the statements every handle runs, so that a helper is written once for
//! the shared path ([`Client`]), a [`Session`], a [`Transaction`] and a [`Savepoint`].
//!
//! The methods return `impl Future` rather than being `async fn` so that the trait states no
//! `Send` bound of its own: a future is as `Send` as the handle's on its runtime (a tokio or
//! smol client's are, a glommio client's are not). A generic helper called with a concrete
//! handle is therefore `Send` wherever that handle's futures are, and `tokio::spawn` accepts it;
//! only code that must prove `Send` for an *unknown* implementation (spawning inside the generic
//! function itself) cannot, and should take the concrete type or spawn at the call site.
//!
//! One limit of today's compiler: a generic helper that opens a nested scope with
//! [`GenericClient::transaction`] cannot be proven `Send` (the scope's type borrows the handle
//! for a lifetime the check cannot name: "implementation of `GenericClient` is not general
//! enough"). Such a helper runs anywhere but in `tokio::spawn`; run it from the runtime's
//! `block_on`, or spawn a statements-only helper (tests/adopt/tests/generic.rs does both).

use std::future::Future;

use postgres_types::{ToSql, Type};

use crate::rt::Runtime;
use crate::{Adapter, Client, Error, Row, Savepoint, Session, ToStatement, Transaction};

/// What a helper needs of a handle that runs statements: implemented by [`Client`] (the
/// shared path, where the guard applies), [`Session`], [`Transaction`] and [`Savepoint`].
///
/// ```no_run
/// use pgpipe::{Error, GenericClient, GenericTransaction};
///
/// /// Moves `amount` from one account to another inside whatever `c` is: a client (a new
/// /// transaction), a transaction (a savepoint), a session (a transaction in it).
/// async fn transfer<C: GenericClient>(c: &mut C, from: i32, to: i32, amount: i64) -> Result<(), Error> {
///     let tx = c.transaction().await?;
///     tx.execute("UPDATE accounts SET balance = balance - $2 WHERE id = $1", &[&from, &amount]).await?;
///     tx.execute("UPDATE accounts SET balance = balance + $2 WHERE id = $1", &[&to, &amount]).await?;
///     tx.commit().await
/// }
/// ```
pub trait GenericClient {
    /// What [`GenericClient::transaction`] opens here: a [`Transaction`] on a client, a
    /// transaction inside a session, a [`Savepoint`] inside a transaction or savepoint.
    type Transaction<'a>: GenericTransaction
    where
        Self: 'a;

    /// Runs a statement and returns its rows.
    fn query<T: ?Sized + ToStatement + Sync>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Vec<Row>, Error>>;

    /// Runs a statement and returns the number of rows it affected.
    fn execute<T: ?Sized + ToStatement + Sync>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<u64, Error>>;

    /// Runs a statement that must return exactly one row.
    fn query_one<T: ?Sized + ToStatement + Sync>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, Error>>;

    /// Runs a statement that returns at most one row.
    fn query_opt<T: ?Sized + ToStatement + Sync>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Option<Row>, Error>>;

    /// Runs a statement with caller-supplied parameter types (one round trip, no cache).
    fn query_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> impl Future<Output = Result<Vec<Row>, Error>>;

    /// Opens a transaction scope: see [`GenericClient::Transaction`]. Dropping it without
    /// [`GenericTransaction::commit`] rolls it back.
    fn transaction(&mut self) -> impl Future<Output = Result<Self::Transaction<'_>, Error>>;
}

/// A transaction scope opened by [`GenericClient::transaction`]: it runs statements, nests,
/// and ends with a commit or a rollback.
pub trait GenericTransaction: GenericClient + Sized {
    /// Commits (or releases the savepoint).
    fn commit(self) -> impl Future<Output = Result<(), Error>>;

    /// Rolls back (to the savepoint).
    fn rollback(self) -> impl Future<Output = Result<(), Error>>;
}

/// The statement methods, by delegation to the inherent ones (which take precedence).
macro_rules! statements {
    ($ty:ty) => {
        fn query<T: ?Sized + ToStatement + Sync>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> impl Future<Output = Result<Vec<Row>, Error>> {
            <$ty>::query(self, statement, params)
        }

        fn execute<T: ?Sized + ToStatement + Sync>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> impl Future<Output = Result<u64, Error>> {
            <$ty>::execute(self, statement, params)
        }

        fn query_one<T: ?Sized + ToStatement + Sync>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> impl Future<Output = Result<Row, Error>> {
            <$ty>::query_one(self, statement, params)
        }

        fn query_opt<T: ?Sized + ToStatement + Sync>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> impl Future<Output = Result<Option<Row>, Error>> {
            <$ty>::query_opt(self, statement, params)
        }

        fn query_typed(
            &self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> impl Future<Output = Result<Vec<Row>, Error>> {
            <$ty>::query_typed(self, sql, params)
        }
    };
}

impl<R: Adapter> GenericClient for Client<R> {
    type Transaction<'a> = Transaction<R>;
    statements!(Client<R>);

    fn transaction(&mut self) -> impl Future<Output = Result<Transaction<R>, Error>> {
        Client::transaction(self)
    }
}

impl<R: Runtime> GenericClient for Session<R> {
    type Transaction<'a> = Savepoint<'a, R>;
    statements!(Session<R>);

    fn transaction(&mut self) -> impl Future<Output = Result<Savepoint<'_, R>, Error>> {
        Session::transaction(self)
    }
}

impl<R: Runtime> GenericClient for Transaction<R> {
    type Transaction<'a> = Savepoint<'a, R>;
    statements!(Transaction<R>);

    fn transaction(&mut self) -> impl Future<Output = Result<Savepoint<'_, R>, Error>> {
        Transaction::savepoint(self)
    }
}

impl<'s, R: Runtime> GenericClient for Savepoint<'s, R> {
    type Transaction<'a>
        = Savepoint<'a, R>
    where
        Self: 'a;
    statements!(Savepoint<'s, R>);

    fn transaction(&mut self) -> impl Future<Output = Result<Savepoint<'_, R>, Error>> {
        Savepoint::savepoint(self)
    }
}

impl<R: Runtime> GenericTransaction for Transaction<R> {
    fn commit(self) -> impl Future<Output = Result<(), Error>> {
        Transaction::commit(self)
    }

    fn rollback(self) -> impl Future<Output = Result<(), Error>> {
        Transaction::rollback(self)
    }
}

impl<R: Runtime> GenericTransaction for Savepoint<'_, R> {
    fn commit(self) -> impl Future<Output = Result<(), Error>> {
        Savepoint::commit(self)
    }

    fn rollback(self) -> impl Future<Output = Result<(), Error>> {
        Savepoint::rollback(self)
    }
}
