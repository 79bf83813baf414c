//! The client's cache of types resolved from the server, by OID, shared by its connections.
//! The connection task applies it when a prepare completes; the lookups that fill it run in
//! callers' tasks (`crate::typeinfo`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use postgres_types::Type;

use crate::row::Column;
use crate::sched::lock;

/// The resolved types of a client, by OID. Entries are small and types rarely number more than
/// a few hundred, so the cache is not bounded.
#[derive(Default)]
pub(crate) struct TypeCache {
    pub(crate) map: Mutex<HashMap<u32, Type>>,
    /// `pg_type` lookups run (each unknown OID costs one, plus one for enum labels or fields).
    pub(crate) lookups: AtomicU64,
    /// The server has no multirange types (before PostgreSQL 14): use the query without them.
    pub(crate) no_multirange: AtomicBool,
}

/// A type `postgres-types` does not know and the cache did not have: a placeholder from the
/// protocol layer, to be looked up.
pub(crate) fn is_placeholder(t: &Type) -> bool {
    Type::from_oid(t.oid()).is_none() && t.schema().is_empty()
}

impl TypeCache {
    /// `t`, or its cached resolution when `t` is a placeholder.
    pub(crate) fn known(&self, t: &Type) -> Option<Type> {
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
