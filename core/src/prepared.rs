//! Prepared statements as callers hold them: `Client::prepare` and a session's `prepare`
//! return a [`Statement`] with its parameter and column types, learned from the server without
//! running it; every query method takes one where it takes SQL text ([`ToStatement`]).
//!
//! A `Statement` names its text: running it goes through the connection's statement cache like
//! the text itself, so each connection prepares it once (by name, or unnamed behind a
//! transaction pooler) and no connection is tied to it.

use std::sync::Arc;

use postgres_types::Type;

use crate::row::Column;

/// A statement prepared by the server: its text, its parameters' types and its columns. Cheap
/// to clone. Pass `&statement` to `query`, `execute` and the like instead of the text.
#[derive(Clone)]
pub struct Statement {
    sql: Arc<str>,
    params: Arc<[Type]>,
    columns: Arc<[Column]>,
}

impl Statement {
    pub(crate) fn new(sql: &str, params: &[Type], columns: &Arc<[Column]>) -> Statement {
        Statement {
            sql: Arc::from(sql),
            params: Arc::from(params),
            columns: columns.clone(),
        }
    }

    /// The SQL text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The types of its parameters (`$1`, `$2`, ...), as the server inferred or was told them.
    pub fn params(&self) -> &[Type] {
        &self.params
    }

    /// The columns its rows have (none for a statement that returns no rows).
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
}

impl std::fmt::Debug for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Statement")
            .field("sql", &self.sql)
            .field("params", &self.params)
            .field("columns", &self.columns)
            .finish()
    }
}

/// What the query methods run: SQL text (`&str`, `&String`) or a prepared [`Statement`].
/// Sealed: the crate's own types only.
pub trait ToStatement: sealed::Sealed {}

pub(crate) mod sealed {
    /// The text a [`super::ToStatement`] runs.
    pub trait Sealed {
        /// The SQL text.
        fn sql_text(&self) -> &str;
    }
}

impl sealed::Sealed for str {
    fn sql_text(&self) -> &str {
        self
    }
}
impl ToStatement for str {}

impl sealed::Sealed for String {
    fn sql_text(&self) -> &str {
        self
    }
}
impl ToStatement for String {}

impl sealed::Sealed for Statement {
    fn sql_text(&self) -> &str {
        &self.sql
    }
}
impl ToStatement for Statement {}

/// Texts held in the usual owners: `&Arc<str>` and the like passed as before (the methods
/// took `&str`, which these coerced to).
macro_rules! text_owner {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {
            fn sql_text(&self) -> &str {
                self
            }
        }
        impl ToStatement for $t {}
    )*};
}
text_owner!(Arc<str>, Box<str>, std::borrow::Cow<'_, str>);

impl<T: ?Sized + ToStatement> sealed::Sealed for &T {
    fn sql_text(&self) -> &str {
        (**self).sql_text()
    }
}
impl<T: ?Sized + ToStatement> ToStatement for &T {}
