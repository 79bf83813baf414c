//! Types the server knows and `postgres-types` does not: enums, domains, composites, ranges,
//! multiranges and arrays of them.
//!
//! A statement whose parameters or columns carry such OIDs is completed before its first use:
//! each unknown OID is looked up in `pg_type` (recursively: element, base, field and range
//! types) with ordinary queries on the statement's own connection, and the result is cached for
//! the client, shared by its connections. Only the first statement that meets a type pays for
//! the lookup; a statement prepared later finds every type in the cache when its prepare
//! completes. Lookups run in the caller's task as ordinary units, never inside the connection
//! task, so they queue like any other statement and cannot stall or deadlock the pipeline. A
//! type dropped and created again has a new OID, so it is simply looked up again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use postgres_types::{Field, Kind, Type};

use crate::driver::shared::{ConnShared, Statement};
use crate::row::Column;
use crate::rt::Runtime;
use crate::sched::lock;
use crate::{Client, Error};

/// The resolved types of a client, by OID. Entries are small and types rarely number more than
/// a few hundred, so the cache is not bounded.
#[derive(Default)]
pub(crate) struct TypeCache {
    map: Mutex<HashMap<u32, Type>>,
    /// `pg_type` lookups run (each unknown OID costs one, plus one for enum labels or fields).
    pub(crate) lookups: AtomicU64,
    /// The server has no multirange types (before PostgreSQL 14): use the query without them.
    no_multirange: AtomicBool,
}

/// A type `postgres-types` does not know and the cache did not have: a placeholder from the
/// protocol layer, to be looked up.
pub(crate) fn is_placeholder(t: &Type) -> bool {
    Type::from_oid(t.oid()).is_none() && t.schema().is_empty()
}

impl TypeCache {
    /// `t`, or its cached resolution when `t` is a placeholder.
    fn known(&self, t: &Type) -> Option<Type> {
        if !is_placeholder(t) {
            return Some(t.clone());
        }
        lock(&self.map).get(&t.oid()).cloned()
    }

    /// Replaces placeholders that the cache already resolved (called once per prepare, by the
    /// connection task). Returns whether placeholders remain.
    pub(crate) fn apply(&self, params: &mut [Type], columns: &mut Arc<[Column]>) -> bool {
        let mut missing = false;
        for p in params.iter_mut() {
            match self.known(p) {
                Some(t) => *p = t,
                None => missing = true,
            }
        }
        if columns.iter().any(|c| is_placeholder(c.type_())) {
            let fixed: Vec<Column> = columns
                .iter()
                .map(|c| match self.known(c.type_()) {
                    Some(t) => Column::new(c.name().to_owned(), t),
                    None => {
                        missing = true;
                        c.clone()
                    }
                })
                .collect();
            *columns = Arc::from(fixed);
        }
        missing
    }
}

/// One row of the `pg_type` lookup.
struct TypeRow {
    name: String,
    typtype: i8,
    category: i8,
    elem: u32,
    base: u32,
    relid: u32,
    schema: String,
    range_subtype: Option<u32>,
    multirange_of: Option<u32>,
}

const TYPE_QUERY: &str = "SELECT t.typname::text, t.typtype, t.typcategory, t.typelem, \
     t.typbasetype, t.typrelid, n.nspname::text, r.rngsubtype, \
     (SELECT m.rngtypid FROM pg_catalog.pg_range m WHERE m.rngmultitypid = t.oid) \
     FROM pg_catalog.pg_type t \
     JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace \
     LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid \
     WHERE t.oid = $1";
/// The same for servers before PostgreSQL 14, which have no `rngmultitypid`.
const TYPE_QUERY_NO_MULTIRANGE: &str = "SELECT t.typname::text, t.typtype, t.typcategory, \
     t.typelem, t.typbasetype, t.typrelid, n.nspname::text, r.rngsubtype, NULL::oid \
     FROM pg_catalog.pg_type t \
     JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace \
     LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid \
     WHERE t.oid = $1";
const ENUM_QUERY: &str = "SELECT enumlabel::text FROM pg_catalog.pg_enum \
     WHERE enumtypid = $1 ORDER BY enumsortorder";
const FIELDS_QUERY: &str = "SELECT attname::text, atttypid FROM pg_catalog.pg_attribute \
     WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum";

type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Type, Error>> + 'a>>;

impl<R: Runtime> Client<R> {
    /// Completes `stmt`'s placeholder types before it is executed on `conn` (where it was
    /// prepared, so a type created in a session's own transaction is visible). Nothing to do,
    /// after one load, for a statement whose types were all known.
    pub(crate) async fn complete_types(
        &self,
        conn: &ConnShared,
        stmt: &Statement,
        deadline: Option<Instant>,
    ) -> Result<(), Error> {
        if !stmt.needs_types() {
            return Ok(());
        }
        let mut params = stmt.params().to_vec();
        let mut columns: Vec<Column> = stmt.columns().to_vec();
        for p in params.iter_mut() {
            *p = self.resolve(conn, p.clone(), deadline).await?;
        }
        for c in columns.iter_mut() {
            let t = self.resolve(conn, c.type_().clone(), deadline).await?;
            *c = Column::new(c.name().to_owned(), t);
        }
        stmt.complete(params, Arc::from(columns));
        Ok(())
    }

    /// Completes the column types of rows from a typed query (which has no cached statement
    /// to carry them): nothing to do unless a column's type was unknown.
    pub(crate) async fn complete_rows(
        &self,
        conn: &ConnShared,
        rows: Vec<crate::Row>,
        deadline: Option<Instant>,
    ) -> Result<Vec<crate::Row>, Error> {
        let Some(first) = rows.first() else {
            return Ok(rows);
        };
        if !first.columns().iter().any(|c| is_placeholder(c.type_())) {
            return Ok(rows);
        }
        let mut columns: Vec<Column> = first.columns().to_vec();
        for c in columns.iter_mut() {
            let t = self.resolve(conn, c.type_().clone(), deadline).await?;
            *c = Column::new(c.name().to_owned(), t);
        }
        let columns: Arc<[Column]> = Arc::from(columns);
        Ok(rows
            .into_iter()
            .map(|r| r.with_columns(columns.clone()))
            .collect())
    }

    /// The full `Type` for `t`: itself when known, else looked up (and cached).
    fn resolve<'a>(
        &'a self,
        conn: &'a ConnShared,
        t: Type,
        deadline: Option<Instant>,
    ) -> Lookup<'a> {
        Box::pin(async move {
            let types = &self.type_cache();
            if let Some(known) = types.known(&t) {
                return Ok(known);
            }
            let oid = t.oid();
            let row = self.type_row(conn, oid, deadline).await?;
            let kind = match row.typtype as u8 {
                b'e' => {
                    let rows = self.lookup(conn, ENUM_QUERY, oid, deadline).await?;
                    let labels = rows
                        .iter()
                        .map(|r| r.try_get::<_, String>(0))
                        .collect::<Result<Vec<_>, _>>()?;
                    Kind::Enum(labels)
                }
                b'p' => Kind::Pseudo,
                b'd' => Kind::Domain(self.resolve(conn, placeholder(row.base), deadline).await?),
                b'r' => {
                    let sub = row
                        .range_subtype
                        .ok_or_else(|| missing(oid, "range subtype"))?;
                    Kind::Range(self.resolve(conn, placeholder(sub), deadline).await?)
                }
                b'm' => {
                    let range = row
                        .multirange_of
                        .ok_or_else(|| missing(oid, "range type"))?;
                    Kind::Multirange(self.resolve(conn, placeholder(range), deadline).await?)
                }
                b'c' => {
                    let rows = self.lookup(conn, FIELDS_QUERY, row.relid, deadline).await?;
                    let mut fields = Vec::with_capacity(rows.len());
                    for r in &rows {
                        let name: String = r.try_get(0)?;
                        let ty = self
                            .resolve(conn, placeholder(r.try_get(1)?), deadline)
                            .await?;
                        fields.push(Field::new(name, ty));
                    }
                    Kind::Composite(fields)
                }
                _ if row.category as u8 == b'A' && row.elem != 0 => {
                    Kind::Array(self.resolve(conn, placeholder(row.elem), deadline).await?)
                }
                _ => Kind::Simple,
            };
            let ty = Type::new(row.name, oid, kind, row.schema);
            lock(&types.map).insert(oid, ty.clone());
            Ok(ty)
        })
    }

    async fn type_row(
        &self,
        conn: &ConnShared,
        oid: u32,
        deadline: Option<Instant>,
    ) -> Result<TypeRow, Error> {
        let types = &self.type_cache();
        let rows = if types.no_multirange.load(Relaxed) {
            self.lookup(conn, TYPE_QUERY_NO_MULTIRANGE, oid, deadline)
                .await?
        } else {
            match self.lookup(conn, TYPE_QUERY, oid, deadline).await {
                // 42703 undefined_column: `rngmultitypid` is new in PostgreSQL 14.
                Err(e) if e.code() == Some("42703") => {
                    types.no_multirange.store(true, Relaxed);
                    self.lookup(conn, TYPE_QUERY_NO_MULTIRANGE, oid, deadline)
                        .await?
                }
                other => other?,
            }
        };
        let r = rows.first().ok_or_else(|| missing(oid, "pg_type row"))?;
        Ok(TypeRow {
            name: r.try_get(0)?,
            typtype: r.try_get(1)?,
            category: r.try_get(2)?,
            elem: r.try_get(3)?,
            base: r.try_get(4)?,
            relid: r.try_get(5)?,
            schema: r.try_get(6)?,
            range_subtype: r.try_get(7)?,
            multirange_of: r.try_get(8)?,
        })
    }

    async fn lookup(
        &self,
        conn: &ConnShared,
        sql: &str,
        oid: u32,
        deadline: Option<Instant>,
    ) -> Result<Vec<crate::Row>, Error> {
        self.type_cache().lookups.fetch_add(1, Relaxed);
        Ok(self.run_on(conn, sql, &[&oid], deadline).await?.rows)
    }
}

/// A placeholder for `oid`, to be resolved (the protocol layer makes the same).
fn placeholder(oid: u32) -> Type {
    crate::proto::pipeline::type_for_oid(oid)
}

fn missing(oid: u32, what: &str) -> Error {
    Error::Protocol(format!(
        "type {oid}: the server's catalog has no {what} for it"
    ))
}
