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
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use postgres_types::{Field, Kind, Type};

use crate::driver::shared::{ConnShared, Framing, Statement};
use crate::driver::types::is_placeholder;
use crate::row::Column;
use crate::rt::with_deadline;
use crate::rt::Runtime;
use crate::sched::lock;
use crate::{Client, Error};

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

/// What the catalog says of one type: its `pg_type` row, and its labels or fields.
struct Fetched {
    name: String,
    schema: String,
    shape: Shape,
}

/// A type's kind, with the OIDs of the types it is built from (resolved in a second pass).
enum Shape {
    Simple,
    Pseudo,
    Enum(Vec<String>),
    Array(u32),
    Domain(u32),
    Range(u32),
    Multirange(u32),
    Composite(Vec<(String, u32)>),
}

impl Shape {
    fn parts(&self) -> Vec<u32> {
        match self {
            Shape::Array(o) | Shape::Domain(o) | Shape::Range(o) | Shape::Multirange(o) => vec![*o],
            Shape::Composite(fields) => fields.iter().map(|(_, o)| *o).collect(),
            _ => Vec::new(),
        }
    }
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

    /// The full `Type` for `t`: itself when known, else looked up with every type it is built
    /// from (first every catalog row, then the types bottom-up), and cached.
    async fn resolve(
        &self,
        conn: &ConnShared,
        t: Type,
        deadline: Option<Instant>,
    ) -> Result<Type, Error> {
        let types = self.type_cache();
        if let Some(known) = types.known(&t) {
            return Ok(known);
        }
        let mut fetched: HashMap<u32, Fetched> = HashMap::new();
        let mut pending = vec![t.oid()];
        while let Some(oid) = pending.pop() {
            if fetched.contains_key(&oid) || types.known(&placeholder(oid)).is_some() {
                continue;
            }
            let f = self.fetch(conn, oid, deadline).await?;
            pending.extend(f.shape.parts());
            fetched.insert(oid, f);
        }
        let mut map = lock(&types.map);
        build(t.oid(), &fetched, &mut map)
    }

    /// The catalog's description of `oid` (one query, two for enums and composites).
    async fn fetch(
        &self,
        conn: &ConnShared,
        oid: u32,
        deadline: Option<Instant>,
    ) -> Result<Fetched, Error> {
        let row = self.type_row(conn, oid, deadline).await?;
        let shape = match row.typtype as u8 {
            b'e' => {
                let rows = self.lookup(conn, ENUM_QUERY, oid, deadline).await?;
                Shape::Enum(
                    rows.iter()
                        .map(|r| r.try_get::<_, String>(0))
                        .collect::<Result<_, _>>()?,
                )
            }
            b'p' => Shape::Pseudo,
            b'd' => Shape::Domain(row.base),
            b'r' => Shape::Range(
                row.range_subtype
                    .ok_or_else(|| missing(oid, "range subtype"))?,
            ),
            b'm' => Shape::Multirange(
                row.multirange_of
                    .ok_or_else(|| missing(oid, "range type"))?,
            ),
            b'c' => {
                let rows = self.lookup(conn, FIELDS_QUERY, row.relid, deadline).await?;
                Shape::Composite(
                    rows.iter()
                        .map(|r| Ok((r.try_get::<_, String>(0)?, r.try_get::<_, u32>(1)?)))
                        .collect::<Result<_, Error>>()?,
                )
            }
            _ if row.category as u8 == b'A' && row.elem != 0 => Shape::Array(row.elem),
            _ => Shape::Simple,
        };
        Ok(Fetched {
            name: row.name,
            schema: row.schema,
            shape,
        })
    }

    async fn type_row(
        &self,
        conn: &ConnShared,
        oid: u32,
        deadline: Option<Instant>,
    ) -> Result<TypeRow, Error> {
        let types = self.type_cache();
        let rows = if types.no_multirange.load(Relaxed) {
            self.lookup(conn, TYPE_QUERY_NO_MULTIRANGE, oid, deadline)
                .await?
        } else {
            match self.lookup(conn, TYPE_QUERY, oid, deadline).await {
                // 42703 undefined_column: `rngmultitypid` is new in PostgreSQL 14.
                Err(e) if e.code() == Some(&crate::SqlState::UNDEFINED_COLUMN) => {
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
        let stmt = with_deadline(self.runtime(), deadline, conn.statement(sql)).await?;
        // Catalog columns are built-in types: nothing to complete, so no lookup recursion.
        let r = self
            .execute_prepared(conn, &stmt, &[&oid], deadline, &Framing::NONE)
            .await?;
        Ok(r.rows)
    }
}

/// Builds the type `oid` from the fetched rows, its parts first; every type built is cached.
fn build(
    oid: u32,
    fetched: &HashMap<u32, Fetched>,
    cache: &mut HashMap<u32, Type>,
) -> Result<Type, Error> {
    if let Some(t) = Type::from_oid(oid).or_else(|| cache.get(&oid).cloned()) {
        return Ok(t);
    }
    let f = fetched
        .get(&oid)
        .ok_or_else(|| missing(oid, "pg_type row"))?;
    let mut part = |o: u32| build(o, fetched, cache);
    let kind = match &f.shape {
        Shape::Simple => Kind::Simple,
        Shape::Pseudo => Kind::Pseudo,
        Shape::Enum(labels) => Kind::Enum(labels.clone()),
        Shape::Array(o) => Kind::Array(part(*o)?),
        Shape::Domain(o) => Kind::Domain(part(*o)?),
        Shape::Range(o) => Kind::Range(part(*o)?),
        Shape::Multirange(o) => Kind::Multirange(part(*o)?),
        Shape::Composite(fields) => Kind::Composite(
            fields
                .iter()
                .map(|(name, o)| Ok(Field::new(name.clone(), part(*o)?)))
                .collect::<Result<_, Error>>()?,
        ),
    };
    let t = Type::new(f.name.clone(), oid, kind, f.schema.clone());
    cache.insert(oid, t.clone());
    Ok(t)
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
