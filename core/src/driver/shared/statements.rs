//! Prepared statements of one connection: the single-flight prepare (concurrent callers of a
//! new text share one Parse), eviction and re-prepare, and the per-text server-time estimates
//! shared by the client's connections.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;

use postgres_types::Type;

use super::{status_check, ConnShared, State, Token};
use crate::proto::pipeline::Completes;
use crate::proto::timing::{fold_sample, Sampled, DEFAULT_COST_NS};
use crate::proto::{encode, UnitKind};
use crate::row::Column;
use crate::sched::{lock, DeferredWakes, SharedWaiter};
use crate::{Error, Reason};

/// A statement prepared on one connection.
pub(crate) struct Statement {
    /// Its name on the server; empty when statements are not kept by name
    /// (`named_statements` off), and then every execution parses `sql` again.
    pub(crate) name: String,
    pub(crate) sql: Box<str>,
    params: Vec<Type>,
    columns: Arc<[Column]>,
    /// Some parameter or column type was unknown when the prepare completed: the first caller
    /// looks it up and stores the full types here (see `crate::typeinfo`).
    unresolved: bool,
    resolved: OnceLock<(Vec<Type>, Arc<[Column]>)>,
    /// Cleared (under the connection lock) when evicted: a caller holding it re-prepares.
    live: AtomicBool,
    /// Estimated server time per execution in ns (EWMA; 0 until first observed), shared by
    /// every connection of the client that prepared the same text.
    cost_ns: Arc<AtomicU64>,
    /// The guard proves it only reads (`guard::is_read_only`): on a shared connection its
    /// executions may share a Sync (`Config::sync_coalescing`).
    pub(crate) read_only: bool,
    /// Its last execution failed: while so, a unit of it may end a shared Sync but nothing
    /// joins after it (an error there would make the server skip the units behind it).
    last_failed: AtomicBool,
    /// The command its executions' completions must name, where its text fixes one
    /// (`guard::command_verb`): an answer naming another is not this statement's.
    pub(crate) completes: Completes,
}

impl Statement {
    /// A read-only statement without parameters or columns, prepared as `name`, whose
    /// executions were timed at `cost_ns` (unit tests of the connection's rules).
    #[cfg(test)]
    pub(crate) fn for_test(name: &str, sql: &str, cost_ns: u64) -> Arc<Statement> {
        Arc::new(Statement {
            name: name.to_owned(),
            sql: sql.into(),
            params: Vec::new(),
            columns: Arc::from(Vec::new()),
            unresolved: false,
            resolved: OnceLock::new(),
            live: AtomicBool::new(true),
            cost_ns: Arc::new(AtomicU64::new(cost_ns)),
            read_only: true,
            last_failed: AtomicBool::new(false),
            completes: Completes::of_verb(crate::guard::command_verb(sql)),
        })
    }

    /// The parameter types (complete once [`Statement::needs_types`] is false).
    pub(crate) fn params(&self) -> &[Type] {
        self.resolved.get().map_or(&self.params, |r| &r.0)
    }

    /// The result columns (complete once [`Statement::needs_types`] is false).
    pub(crate) fn columns(&self) -> &Arc<[Column]> {
        self.resolved.get().map_or(&self.columns, |r| &r.1)
    }

    /// Whether a type still has to be looked up before the statement is used.
    pub(crate) fn needs_types(&self) -> bool {
        self.unresolved && self.resolved.get().is_none()
    }

    /// Stores the looked-up types (concurrent first callers may race; the first one wins and
    /// they are the same types).
    pub(crate) fn complete(&self, params: Vec<Type>, columns: Arc<[Column]>) {
        let _ = self.resolved.set((params, columns));
    }

    /// `ParamCount` unless `given` parameters are what the statement takes.
    pub(crate) fn check_param_count(&self, given: usize) -> Result<(), Error> {
        let expected = self.params().len();
        if expected != given {
            return Err(Error::ParamCount { expected, given });
        }
        Ok(())
    }

    /// Whether the statement is still prepared under its name (false once evicted).
    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Relaxed)
    }

    /// Records whether its last execution failed (written only on a change).
    pub(crate) fn set_failed(&self, failed: bool) {
        if self.last_failed.load(Relaxed) != failed {
            self.last_failed.store(failed, Relaxed);
        }
    }

    /// Whether its last execution failed.
    pub(crate) fn last_failed(&self) -> bool {
        self.last_failed.load(Relaxed)
    }

    /// Whether an execution was ever timed (before that, the estimate is a default guess).
    pub(crate) fn observed(&self) -> bool {
        self.cost_ns.load(Relaxed) != 0
    }

    /// Expected server time of one execution.
    pub(crate) fn estimate_ns(&self) -> u64 {
        match self.cost_ns.load(Relaxed) {
            0 => DEFAULT_COST_NS,
            c => c,
        }
    }
}

/// Only connection tasks observe; routing reads the estimate.
impl Sampled for Arc<Statement> {
    fn observe(&self, ns: u64) {
        let _ = self
            .cost_ns
            .fetch_update(Relaxed, Relaxed, |old| Some(fold_sample(old, ns)));
    }

    fn key(&self) -> usize {
        Arc::as_ptr(self) as usize
    }
}

/// What a client's connections share about statements: cost estimates per SQL text, so that
/// routing compares the same estimate everywhere (one connection's noisy sample must not skew
/// the split), and whether statements are kept by name. The table is bounded: past its
/// capacity, entries no cached statement uses any more are dropped.
pub(crate) struct CostTable {
    cells: Mutex<std::collections::HashMap<Box<str>, Arc<AtomicU64>>>,
    capacity: usize,
    /// Statements are prepared under names and bound by name; off behind a transaction pooler
    /// (`named_statements`), where the next unit may reach another backend: then a prepare
    /// only learns the types, and every execution carries its own unnamed Parse.
    named: AtomicBool,
    /// A pooler stands between the client and the server: declared (`pooler`), or found by a
    /// connection's probe (`driver/conn/path.rs`); exclusive connections, which do not
    /// probe, take its rules.
    pooler: AtomicBool,
    /// A connection's probe proved its path direct.
    direct: AtomicBool,
}

impl CostTable {
    /// A table for `capacity` statements; `named`: statements are kept by name; `pooler`: one
    /// is declared in between.
    pub(crate) fn new(capacity: usize, named: bool, pooler: bool) -> CostTable {
        CostTable {
            cells: Mutex::new(std::collections::HashMap::new()),
            capacity: capacity.max(1),
            named: AtomicBool::new(named),
            pooler: AtomicBool::new(pooler),
            direct: AtomicBool::new(false),
        }
    }

    /// Whether a connection's probe proved its path direct.
    pub(crate) fn direct_seen(&self) -> bool {
        self.direct.load(Relaxed)
    }

    /// A connection's probe proved its path direct.
    pub(crate) fn found_direct(&self) {
        self.direct.store(true, Relaxed);
    }

    /// Whether a pooler is declared, or a connection of this client found one, in between.
    pub(crate) fn pooler_seen(&self) -> bool {
        self.pooler.load(Relaxed)
    }

    /// A connection found a pooler in between; `true` if this call made the change.
    pub(crate) fn found_pooler(&self) -> bool {
        !self.pooler.swap(true, Relaxed)
    }

    /// Whether this client's connections may sit behind a transaction-mode pooler, as far as
    /// it knows: statements are not kept by name, or a connection's probe found a pooler.
    pub(crate) fn pooler_known(&self) -> bool {
        !self.named() || self.pooler_seen()
    }

    /// Whether statements are kept by name.
    pub(crate) fn named(&self) -> bool {
        self.named.load(Relaxed)
    }

    /// A statement this client prepared and never closed is missing on the server: a pooler
    /// sent the Bind to another backend. From now on statements are not kept by name.
    /// `true` if this call made the change.
    pub(crate) fn unname(&self) -> bool {
        self.named.swap(false, Relaxed)
    }

    /// The cell for `sql` (called when a prepare completes, not per query).
    fn cell(&self, sql: &str) -> Arc<AtomicU64> {
        let mut cells = lock(&self.cells);
        if let Some(c) = cells.get(sql) {
            return c.clone();
        }
        if cells.len() >= self.capacity {
            cells.retain(|_, c| Arc::strong_count(c) > 1);
        }
        let c = Arc::new(AtomicU64::new(0));
        cells.insert(sql.into(), c.clone());
        c
    }
}

/// Why a prepare failed: a server error (shared by every waiter) or a connection failure.
#[derive(Clone)]
pub(crate) enum PrepareError {
    Db(Arc<crate::DbError>),
    NotDispatched(Reason),
    Indeterminate(Reason),
}

impl PrepareError {
    fn into_error(self) -> Error {
        match self {
            PrepareError::Db(e) => Error::Db(Box::new((*e).clone())),
            PrepareError::NotDispatched(reason) => Error::NotDispatched { reason },
            PrepareError::Indeterminate(reason) => Error::Indeterminate { reason },
        }
    }
}

/// A prepare in progress, awaited by every caller of its SQL text on this connection.
pub(crate) struct Prepare {
    pub(crate) sql: Box<str>,
    pub(crate) name: String,
    pub(crate) waiter: SharedWaiter<Result<Arc<Statement>, PrepareError>>,
}

pub(crate) enum CacheEntry {
    Ready(Arc<Statement>),
    Preparing(Arc<Prepare>),
}

impl State {
    /// Empties the statement cache, marking every prepared statement dead so a caller holding
    /// one prepares again instead of binding a name the server no longer knows.
    pub(crate) fn forget_statements(&mut self) {
        for e in self.statements.drain() {
            if let CacheEntry::Ready(s) = e {
                s.live.store(false, Relaxed);
            }
        }
    }
}

impl ConnShared {
    /// Returns the prepared statement for `sql`, preparing it (once, shared by concurrent
    /// callers) if this connection has not seen it yet.
    pub(crate) async fn statement(&self, sql: &str) -> Result<Arc<Statement>, Error> {
        let (prepare, waker) = {
            let mut st = lock(&self.state);
            status_check(&st.status)?;
            match st.statements.get(sql) {
                Some(CacheEntry::Ready(s)) => return Ok(s.clone()),
                Some(CacheEntry::Preparing(p)) => (p.clone(), None),
                // A new text. Mailbox space is not awaited: prepares are rare, and letting them
                // through keeps a full mailbox from delaying a text's first use.
                None => self.start_prepare(&mut st, sql, None)?,
            }
        };
        Self::await_prepare(prepare, waker).await
    }

    /// Prepares `sql` again because the server invalidated `stale` (a type or table it
    /// depends on was dropped or changed since). The stale name is closed in the same unit;
    /// concurrent callers that found the same stale statement share one prepare.
    pub(crate) async fn reprepare(
        &self,
        sql: &str,
        stale: &Arc<Statement>,
    ) -> Result<Arc<Statement>, Error> {
        let (prepare, waker) = {
            let mut st = lock(&self.state);
            status_check(&st.status)?;
            match st.statements.get(sql) {
                Some(CacheEntry::Ready(s)) if Arc::ptr_eq(s, stale) => {
                    st.statements.remove(sql);
                    stale.live.store(false, Relaxed);
                    self.start_prepare(&mut st, sql, Some(&stale.name))?
                }
                Some(CacheEntry::Ready(s)) => return Ok(s.clone()),
                Some(CacheEntry::Preparing(p)) => (p.clone(), None),
                None => self.start_prepare(&mut st, sql, None)?,
            }
        };
        Self::await_prepare(prepare, waker).await
    }

    pub(super) async fn await_prepare(
        prepare: Arc<Prepare>,
        waker: Option<Waker>,
    ) -> Result<Arc<Statement>, Error> {
        if let Some(w) = waker {
            w.wake();
        }
        // Shared by every concurrent caller of this text on this connection (single flight).
        futures_lite::future::poll_fn(|cx| prepare.waiter.poll_block(cx))
            .await
            .map_err(PrepareError::into_error)
    }

    /// Registers a prepare of `sql` in the cache and queues its unit, closing the least
    /// recently used statement in the same unit when the cache is full.
    pub(super) fn start_prepare(
        &self,
        st: &mut MutexGuard<'_, State>,
        sql: &str,
        stale: Option<&str>,
    ) -> Result<(Arc<Prepare>, Option<Waker>), Error> {
        st.next_statement += 1;
        let named = self.costs.named();
        let p = Arc::new(Prepare {
            sql: sql.into(),
            name: match named {
                // Unique to this connection: behind a pooler another client connection's
                // statement of the same number may sit on the backend a Bind reaches, and
                // must never be mistaken for ours (a missing name is an error; see
                // `CostTable::unname`).
                true => format!("pgpipe_{:x}_{}", self.nonce, st.next_statement),
                false => String::new(),
            },
            waiter: SharedWaiter::default(),
        });
        let evicted = st
            .statements
            .insert(sql, CacheEntry::Preparing(p.clone()), |e| {
                matches!(e, CacheEntry::Ready(_))
            });
        // A stale statement was removed first, so the insert made no eviction of its own.
        let evict_name = match &evicted {
            Some((_, CacheEntry::Ready(s))) => {
                s.live.store(false, Relaxed);
                Some(s.name.as_str())
            }
            _ => stale,
        };
        // The unnamed statement needs no Close: the next Parse replaces it.
        let evict_name = evict_name.filter(|n| !n.is_empty());
        let start = st.committed;
        st.buf.truncate(start);
        if let Err(e) = encode::prepare(&p.name, sql, evict_name, &mut st.buf) {
            st.statements.remove(sql);
            return Err(e);
        }
        let closes = evict_name.is_some();
        let waker = self.push_locked(
            st,
            start,
            Token::Prepare(p.clone()),
            UnitKind::Prepare,
            closes,
        );
        Ok((p, waker))
    }

    /// Completes a prepare: caches the statement (or forgets the text on failure) and unblocks
    /// every waiter. Called by the task inside its drain; wakeups go to `wakes`.
    pub(crate) fn finish_prepare(
        &self,
        p: &Prepare,
        result: Result<(Vec<Type>, Arc<[Column]>), PrepareError>,
        wakes: &mut DeferredWakes,
    ) {
        let value = {
            let mut st = lock(&self.state);
            let mine = matches!(st.statements.get_mut(&p.sql), Some(CacheEntry::Preparing(q)) if std::ptr::eq(&**q, p));
            match result {
                Ok((mut params, mut columns)) => {
                    let unresolved = self.types.apply(&mut params, &mut columns);
                    let s = Arc::new(Statement {
                        name: p.name.clone(),
                        sql: p.sql.clone(),
                        params,
                        columns,
                        unresolved,
                        resolved: OnceLock::new(),
                        live: AtomicBool::new(true),
                        cost_ns: self.costs.cell(&p.sql),
                        read_only: !self.exclusive && crate::guard::is_read_only(&p.sql),
                        last_failed: AtomicBool::new(false),
                        completes: Completes::of_verb(crate::guard::command_verb(&p.sql)),
                    });
                    if mine {
                        if let Some(e) = st.statements.get_mut(&p.sql) {
                            *e = CacheEntry::Ready(s.clone());
                        }
                    }
                    Ok(s)
                }
                Err(e) => {
                    if mine {
                        st.statements.remove(&p.sql);
                    }
                    Err(e)
                }
            }
        };
        p.waiter.unblock(value, wakes);
    }

    /// Statements cached on this connection with their cost estimates.
    pub(crate) fn estimates(&self) -> Vec<(String, u64)> {
        let st = lock(&self.state);
        st.statements
            .iter()
            .filter_map(|(sql, e)| match e {
                CacheEntry::Ready(s) => Some((sql.to_owned(), s.cost_ns.load(Relaxed))),
                CacheEntry::Preparing(_) => None,
            })
            .collect()
    }
}
