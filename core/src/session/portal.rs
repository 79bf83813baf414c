//! `Portal`: a query's rows fetched a number at a time inside a transaction.
//!
//! A portal is a cursor of SQL (`DECLARE ... NO SCROLL CURSOR FOR`), not a protocol portal
//! (Bind with a name, Execute with a row limit). Every unit on a connection ends with its own
//! Sync and its answers are checked against a script of what it sent; a protocol portal's
//! Execute may stop at PortalSuspended and leaves a unit's state on the server between
//! units. A cursor is two ordinary statements: DECLARE, prepared and cached as any other
//! statement (the name is the transaction's n-th portal, so the text repeats across
//! transactions), and each `FETCH FORWARD n` in the binary format. The server drops both
//! kinds at the transaction's end. The difference a caller sees: a cursor takes a `SELECT`
//! or `VALUES` only (the server says so for anything else).

use std::sync::atomic::Ordering::Relaxed;

use postgres_types::ToSql;

use super::{Savepoint, Transaction};
use crate::rt::Runtime;
use crate::{Error, Row};

/// A query bound to its parameters inside a transaction, whose rows are fetched a number at
/// a time with `query_portal` ([`Transaction::query_portal`], [`Savepoint::query_portal`]).
/// It lives until its transaction ends.
#[derive(Debug, Clone)]
pub struct Portal {
    name: String,
}

impl Portal {
    /// The cursor's name on the server (for `MOVE`, `CLOSE`, or `WHERE CURRENT OF`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The text of a portal's DECLARE, and how many characters precede the caller's statement.
fn declare(name: &str, sql: &str) -> (String, u32) {
    let prefix = format!("DECLARE {name} NO SCROLL CURSOR FOR ");
    let shift = prefix.chars().count() as u32;
    (prefix + sql, shift)
}

/// A server error's position in the DECLARE, made one in the caller's statement.
fn unshifted(e: Error, shift: u32) -> Error {
    match e {
        Error::Db(mut db) => {
            db.position = db.position.map(|p| p.saturating_sub(shift));
            Error::Db(db)
        }
        e => e,
    }
}

/// The portal methods of every handle inside a transaction.
macro_rules! portals {
    () => {
        /// Binds a query's parameters and opens a [`Portal`] on it: its rows are then
        /// fetched with `query_portal`, a number at a time. One round trip (two the first
        /// time a connection sees the query, to prepare it). The query must be a `SELECT` or
        /// `VALUES` (the server refuses anything else); errors carry positions in it.
        pub async fn bind<T: ?Sized + crate::ToStatement>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<Portal, Error> {
            let x = self.x();
            let name = format!("pgpipe_portal_{}", x.portals.fetch_add(1, Relaxed));
            let (sql, shift) = declare(&name, statement.sql_text());
            match x.run(&sql, params, false).await {
                Ok(_) => Ok(Portal { name }),
                Err(e) => Err(unshifted(e, shift)),
            }
        }

        /// The portal's next `max_rows` rows (all that are left when `max_rows` is 0 or
        /// less); fewer than asked, or none, once it is exhausted.
        pub async fn query_portal(
            &self,
            portal: &Portal,
            max_rows: i32,
        ) -> Result<Vec<Row>, Error> {
            let sql = match max_rows {
                n if n > 0 => format!("FETCH FORWARD {n} FROM {}", portal.name),
                _ => format!("FETCH FORWARD ALL FROM {}", portal.name),
            };
            self.query_typed(&sql, &[]).await
        }
    };
}

impl<R: Runtime> Transaction<R> {
    portals!();
}

impl<R: Runtime> Savepoint<'_, R> {
    portals!();
}
