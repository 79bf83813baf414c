//! The state one connection shares between callers and its task: the mailbox of encoded units,
//! the statement cache, the coalesced wakeup of the task, and the counters.
//!
//! Callers encode their unit directly into the mailbox buffer while holding its lock (no
//! per-query buffer). The task moves whole units from the mailbox into its write buffer.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::typeinfo::TypeCache;
use std::task::Waker;

use bytes::{Bytes, BytesMut};
use event_listener::Event;
use postgres_types::Type;

use crate::proto::{encode, StatementCache, UnitKind};
use crate::row::{Column, Row};
use crate::sched::{lock, DeferredWakes, SharedWaiter, Waiter};
use crate::stats::Counters;
use crate::Error;

/// The result of one executed unit.
#[derive(Debug)]
pub struct QueryResult {
    /// Rows returned.
    pub rows: Vec<Row>,
    /// Rows affected according to the command tag.
    pub affected: u64,
    /// The command tag's first word.
    pub verb: crate::proto::pipeline::Verb,
}

pub(crate) type QueryWaiter = Waiter<Result<QueryResult, Error>>;

/// A statement prepared on one connection.
pub(crate) struct Statement {
    pub(crate) name: String,
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
}

#[cfg(test)]
impl Statement {
    /// A statement with no estimate yet, for the estimator's tests.
    pub(crate) fn unobserved() -> Arc<Statement> {
        Arc::new(Statement {
            name: String::new(),
            params: Vec::new(),
            columns: Arc::from(Vec::new()),
            unresolved: false,
            resolved: OnceLock::new(),
            live: AtomicBool::new(true),
            cost_ns: Arc::new(AtomicU64::new(0)),
        })
    }
}

/// A duration in whole nanoseconds, saturating (estimates and their limits are `u64` ns).
pub(crate) fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The estimate used for a statement never observed yet: about a trivial statement's server time
/// here, so a burst of first uses neither trips the in-flight work limit nor looks slow.
pub(crate) const DEFAULT_COST_NS: u64 = 20_000;

impl Statement {
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

    /// Expected server time of one execution.
    pub(crate) fn estimate_ns(&self) -> u64 {
        match self.cost_ns.load(Relaxed) {
            0 => DEFAULT_COST_NS,
            c => c,
        }
    }

    /// Folds one observed execution time into the estimate: an EWMA of weight 1/8, starting
    /// from [`DEFAULT_COST_NS`], that at most doubles per sample. A sample can carry a stall
    /// that is not the statement's (a cold first execution, a client busy elsewhere before it
    /// read the result, a late packet), so a few samples must not make a trivial statement look
    /// slow; one that really takes 20 ms crosses a 2 ms threshold at its seventh.
    /// Only connection tasks write it.
    pub(crate) fn observe(&self, ns: u64) {
        let _ = self.cost_ns.fetch_update(Relaxed, Relaxed, |old| {
            let old = if old == 0 { DEFAULT_COST_NS } else { old };
            let ewma = (old - old / 8).saturating_add(ns / 8);
            Some(ewma.min(old.saturating_mul(2)).max(1))
        });
    }
}

/// Cost estimates per SQL text, shared by a client's connections so that routing compares the
/// same estimate everywhere (one connection's noisy sample must not skew the split). Bounded:
/// past its capacity, entries no cached statement uses any more are dropped.
pub(crate) struct CostTable {
    cells: Mutex<std::collections::HashMap<Box<str>, Arc<AtomicU64>>>,
    capacity: usize,
}

impl CostTable {
    pub(crate) fn new(capacity: usize) -> CostTable {
        CostTable {
            cells: Mutex::new(std::collections::HashMap::new()),
            capacity: capacity.max(1),
        }
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
    NotDispatched(Arc<str>),
    Indeterminate(Arc<str>),
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

/// Who is waiting for a unit.
pub(crate) enum Token {
    Query(Arc<QueryWaiter>),
    Prepare(Arc<Prepare>),
    Stream(Arc<crate::stream::RowSink>),
    CopyOut(Arc<crate::stream::Sink<bytes::Bytes>>),
    CopyIn(Arc<crate::copy::CopyInShared>),
    /// COPY data: written and never answered, so nobody waits on it.
    Data,
}

pub(crate) struct Queued {
    pub(crate) len: usize,
    pub(crate) token: Token,
    pub(crate) kind: UnitKind,
    pub(crate) closes: bool,
    /// The estimate this unit added to the connection's pending cost.
    pub(crate) cost: u64,
    /// The statement executed, whose estimate the completion updates.
    pub(crate) stmt: Option<Arc<Statement>>,
}

#[derive(Clone)]
pub(crate) enum Status {
    Open,
    /// An on-demand connection closing because it sat unused: callers that still reach it get
    /// `NotDispatched` with [`RETIRED`] and go elsewhere.
    Retiring,
    Closing,
    Closed,
    Dead(Arc<str>),
}

/// The `NotDispatched` reason of a unit that reached an on-demand connection as it was being
/// retired: always retried elsewhere, whatever `retry_not_dispatched` says.
pub(crate) const RETIRED: &str = "connection retired while idle";

/// What a pipelined connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Role {
    /// One of the `pipeline_size` connections, kept open (reconnected when it dies).
    Base = 0,
    /// Opened on demand for statements estimated slow.
    Lane = 1,
    /// Opened on demand when queued server work saturates the base connections.
    Overflow = 2,
}

pub(crate) struct State {
    /// Encoded units not yet taken by the task; only `..committed` is valid.
    pub(crate) buf: BytesMut,
    pub(crate) committed: usize,
    pub(crate) queue: VecDeque<Queued>,
    pub(crate) statements: StatementCache<CacheEntry>,
    next_statement: u64,
    pub(crate) task_waker: Option<Waker>,
    pub(crate) wake_pending: bool,
    pub(crate) status: Status,
    /// Callers waiting for mailbox room, oldest first.
    pub(crate) space_waiters: VecDeque<Arc<SpaceWaiter>>,
    /// Slots granted to waiters that have not pushed their unit yet.
    pub(crate) reserved: usize,
}

/// A NOTIFY delivered to a session that LISTENs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Process id of the notifying backend.
    pub process_id: i32,
    /// Channel name.
    pub channel: String,
    /// Payload (empty when none was given).
    pub payload: String,
}

/// Notifications not yet taken by the session; bounded, the oldest dropped first.
#[derive(Default)]
pub(crate) struct Notifications {
    pub(crate) items: VecDeque<Notification>,
    pub(crate) waker: Option<Waker>,
    pub(crate) dropped: u64,
}

/// Notifications kept per session before the oldest is dropped.
pub(crate) const NOTIFICATION_BACKLOG: usize = 10_000;

/// One connection as callers see it.
pub(crate) struct ConnShared {
    pub(crate) state: Mutex<State>,
    pub(crate) counters: Counters,
    /// Signalled when the task has exited.
    pub(crate) exited: Event,
    pub(crate) exited_flag: AtomicBool,
    /// The client's cost estimates, shared by its connections.
    costs: Arc<CostTable>,
    /// Types resolved from the server, shared by the client's connections.
    types: Arc<TypeCache>,
    /// Mirrors `status == Open` so routing never takes the lock.
    open_flag: AtomicBool,
    /// Set by `abort()`: the task fails everything at its next tick.
    pub(crate) abort_flag: AtomicBool,
    /// Transaction status from the last ReadyForQuery (`b'I'`, `b'T'`, `b'E'`).
    pub(crate) tx_status: AtomicU8,
    /// An exclusive connection was released with work still running: cancel it, bounded.
    pub(crate) cancel_abandoned: AtomicBool,
    /// Units ever queued here; each gets one ReadyForQuery (`counters.ready_received`).
    pushed: AtomicU64,
    /// `pushed` just after the last ROLLBACK queued by [`ConnShared::submit_rollback_now`].
    rollback_mark: AtomicU64,
    pub(crate) notifications: Mutex<Notifications>,
    pub(crate) mailbox_size: usize,
    /// A [`Role`]; set when an on-demand connection is opened.
    role: AtomicU8,
    /// The task's last pump stopped at the in-flight work limit with units still queued: the
    /// backend has a full share of server work and more is waiting (the overflow signal).
    pub(crate) work_bound: AtomicBool,
}

impl ConnShared {
    pub(crate) fn new(
        mailbox_size: usize,
        cache_size: usize,
        costs: Arc<CostTable>,
        types: Arc<TypeCache>,
    ) -> ConnShared {
        ConnShared {
            costs,
            types,
            state: Mutex::new(State {
                buf: BytesMut::with_capacity(8 * 1024),
                committed: 0,
                queue: VecDeque::with_capacity(mailbox_size.min(1024)),
                statements: StatementCache::new(cache_size),
                next_statement: 0,
                task_waker: None,
                wake_pending: false,
                status: Status::Dead("not connected yet".into()),
                space_waiters: VecDeque::new(),
                reserved: 0,
            }),
            counters: Counters::default(),
            exited: Event::new(),
            exited_flag: AtomicBool::new(false),
            open_flag: AtomicBool::new(false),
            abort_flag: AtomicBool::new(false),
            tx_status: AtomicU8::new(b'I'),
            cancel_abandoned: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            rollback_mark: AtomicU64::new(u64::MAX),
            notifications: Mutex::new(Notifications::default()),
            mailbox_size,
            role: AtomicU8::new(Role::Base as u8),
            work_bound: AtomicBool::new(false),
        }
    }

    /// A slot for an on-demand connection: no task, closed until [`ConnShared::reserve`].
    pub(crate) fn parked(
        mailbox_size: usize,
        cache_size: usize,
        costs: Arc<CostTable>,
        types: Arc<TypeCache>,
    ) -> Self {
        let c = ConnShared::new(mailbox_size, cache_size, costs, types);
        // A caller racing with a retirement may still reach the slot: it must be retried.
        c.set_status(&mut lock(&c.state), Status::Dead(RETIRED.into()));
        c.exited_flag.store(true, Release);
        c
    }

    /// Whether server work, not round trips, limits this connection (see `work_bound`).
    pub(crate) fn is_work_bound(&self) -> bool {
        self.work_bound.load(Relaxed)
    }

    /// What this connection is for.
    pub(crate) fn role(&self) -> Role {
        match self.role.load(Relaxed) {
            1 => Role::Lane,
            2 => Role::Overflow,
            _ => Role::Base,
        }
    }

    /// Claims a parked slot for a new connection task with `role`. `false` if the slot is in
    /// use (its task has not exited) or the service is closing (checked under the slot's lock,
    /// so `close()` either sees the claim and waits for the task, or the claim sees the close).
    pub(crate) fn reserve(&self, role: Role, service_closing: &AtomicBool) -> bool {
        let mut st = lock(&self.state);
        if !self.has_exited() || service_closing.load(Acquire) {
            return false;
        }
        self.role.store(role as u8, Relaxed);
        self.exited_flag.store(false, Release);
        self.set_status(&mut st, Status::Dead("opening".into()));
        true
    }

    /// Estimated server work queued and in flight on this connection, in ns.
    pub(crate) fn pending_cost(&self) -> u64 {
        self.counters.est_pending_ns.load(Relaxed)
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

    /// Load used for routing: units queued plus in flight.
    pub(crate) fn load(&self) -> u64 {
        self.counters.queued.load(Relaxed) + self.counters.in_flight.load(Relaxed)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open_flag.load(Relaxed)
    }

    /// Changes the status (the caller holds the state lock).
    pub(crate) fn set_status(&self, st: &mut State, status: Status) {
        self.open_flag
            .store(matches!(status, Status::Open), Relaxed);
        st.status = status;
    }

    pub(crate) fn has_exited(&self) -> bool {
        self.exited_flag.load(Acquire)
    }

    pub(crate) fn mark_exited(&self) {
        self.exited_flag.store(true, Release);
        self.exited.notify(usize::MAX);
    }

    /// Stops accepting work; the task drains what was accepted, then closes.
    pub(crate) fn begin_close(&self) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            // A connection that is reconnecting must stop trying too.
            if matches!(st.status, Status::Open | Status::Retiring | Status::Dead(_)) {
                self.set_status(&mut st, Status::Closing);
            }
            // Callers waiting for room must see the new status.
            self.wake_waiters(&mut st, &mut wakes);
            if let Some(w) = st.task_waker.take() {
                wakes.push(w);
            }
        }
        wakes.wake_all();
    }

    /// Wakes the connection task (a streaming consumer made room, or went away).
    pub(crate) fn wake_task(&self) {
        let w = lock(&self.state).task_waker.clone();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Fails everything at once: the task fails sent units as `Indeterminate` and queued ones as
    /// `NotDispatched` at its next tick, then closes the socket.
    pub(crate) fn abort(&self) {
        self.abort_flag.store(true, Release);
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            if matches!(st.status, Status::Open | Status::Retiring | Status::Closing) {
                self.set_status(&mut st, Status::Closing);
            }
            // Callers waiting for room must see the new status.
            self.wake_waiters(&mut st, &mut wakes);
            if let Some(w) = st.task_waker.take() {
                wakes.push(w);
            }
        }
        wakes.wake_all();
    }

    /// Whether this connection may be in a transaction once its queued units have run: the
    /// last ReadyForQuery says so, or units are still outstanding whose outcome could open one
    /// (a dropped future's unit) — unless the last unit queued is a ROLLBACK, which ends any.
    /// Meant for the holder of an exclusive connection, the only one queueing units on it.
    pub(crate) fn may_be_in_transaction(&self) -> bool {
        let pushed = self.pushed.load(Relaxed);
        if self.rollback_mark.load(Relaxed) == pushed {
            return false;
        }
        // A count that includes the last ReadyForQuery implies its status (stored first).
        let ready = self.counters.ready_received.load(Acquire);
        ready != pushed || self.tx_status.load(Relaxed) != b'I'
    }

    /// Queues `ROLLBACK` without waiting (a dropped transaction handle), and remembers that
    /// it ends whatever transaction the units before it leave open.
    pub(crate) fn submit_rollback_now(&self) -> Result<Arc<QueryWaiter>, Error> {
        let w = self.submit_simple_now("ROLLBACK")?;
        self.rollback_mark.store(self.pushed.load(Relaxed), Relaxed);
        Ok(w)
    }

    /// Queues a simple-protocol unit without waiting (exclusive connections: resets and
    /// `batch_execute`, where one holder cannot overrun the mailbox by much).
    pub(crate) fn submit_simple_now(&self, sql: &str) -> Result<Arc<QueryWaiter>, Error> {
        let mut st = lock(&self.state);
        status_check(&st.status)?;
        let start = st.committed;
        st.buf.truncate(start);
        encode::simple(sql, &mut st.buf)?;
        let waiter = Arc::new(QueryWaiter::new());
        let waker = self.push_locked(
            &mut st,
            start,
            Token::Query(waiter.clone()),
            UnitKind::Simple,
            false,
        );
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(waiter)
    }

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

    async fn await_prepare(
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
    fn start_prepare(
        &self,
        st: &mut MutexGuard<'_, State>,
        sql: &str,
        stale: Option<&str>,
    ) -> Result<(Arc<Prepare>, Option<Waker>), Error> {
        st.next_statement += 1;
        let p = Arc::new(Prepare {
            sql: sql.into(),
            name: format!("pgpipe_{}", st.next_statement),
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

    /// Encodes an execute unit for `stmt` into the mailbox, waiting for room if it is full.
    /// Returns `Ok(None)` if the statement was evicted meanwhile (the caller re-prepares).
    pub(crate) async fn submit_execute(
        &self,
        stmt: &Arc<Statement>,
        params: encode::Params<'_>,
    ) -> Result<Option<Arc<QueryWaiter>>, Error> {
        self.with_room(|st| {
            if !stmt.live.load(Relaxed) {
                return Ok(None);
            }
            let start = st.committed;
            st.buf.truncate(start);
            encode::execute(&stmt.name, stmt.params(), params, &mut st.buf)?;
            let waiter = Arc::new(QueryWaiter::new());
            let kind = UnitKind::Execute(stmt.columns().clone());
            let token = Token::Query(waiter.clone());
            let waker = self.push_costed(st, start, token, kind, false, Some(stmt.clone()));
            Ok(Some((waiter, waker)))
        })
        .await
        .map(|r| r.map(wake_and_return))
    }

    /// Encodes a streaming execute unit for `stmt` (rows go to `sink` as they arrive), waiting
    /// for room. `Ok(false)`: the statement was evicted meanwhile (the caller re-prepares).
    pub(crate) async fn submit_stream(
        &self,
        stmt: &Arc<Statement>,
        params: encode::Params<'_>,
        sink: &Arc<crate::stream::RowSink>,
    ) -> Result<bool, Error> {
        let r = self
            .with_room(|st| {
                if !stmt.live.load(Relaxed) {
                    return Ok(None);
                }
                let start = st.committed;
                st.buf.truncate(start);
                encode::execute(&stmt.name, stmt.params(), params, &mut st.buf)?;
                let kind = UnitKind::Stream(stmt.columns().clone());
                let token = Token::Stream(sink.clone());
                let waker = self.push_costed(st, start, token, kind, false, Some(stmt.clone()));
                Ok(Some(waker))
            })
            .await?;
        Ok(match r {
            Some(waker) => {
                if let Some(w) = waker {
                    w.wake();
                }
                true
            }
            None => false,
        })
    }

    /// Queues a COPY statement (simple protocol) as a unit of `kind`, waiting for room.
    pub(crate) async fn submit_copy(
        &self,
        sql: &str,
        kind: UnitKind,
        token: Token,
    ) -> Result<(), Error> {
        let mut token = Some(token);
        let waker = self
            .with_room(|st| {
                let start = st.committed;
                st.buf.truncate(start);
                encode::simple(sql, &mut st.buf)?;
                let token = token
                    .take()
                    .ok_or_else(|| Error::Protocol("COPY queued twice".into()))?;
                Ok(self.push_locked(st, start, token, kind.clone(), false))
            })
            .await?;
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Queues COPY data (whole frontend messages) behind the COPY unit, waiting for room.
    pub(crate) async fn submit_data(&self, data: Bytes) -> Result<(), Error> {
        let waker = self
            .with_room(|st| {
                let start = st.committed;
                st.buf.truncate(start);
                st.buf.extend_from_slice(&data);
                Ok(self.push_locked(st, start, Token::Data, UnitKind::Data, false))
            })
            .await?;
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// [`ConnShared::submit_data`] without waiting for room (abandoning a COPY from `Drop`).
    pub(crate) fn submit_data_now(&self, data: Bytes) {
        let mut st = lock(&self.state);
        if status_check(&st.status).is_err() {
            return;
        }
        let start = st.committed;
        st.buf.truncate(start);
        st.buf.extend_from_slice(&data);
        let waker = self.push_locked(&mut st, start, Token::Data, UnitKind::Data, false);
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Encodes a typed unit into the mailbox (no statement cache), waiting for room.
    pub(crate) async fn submit_typed(
        &self,
        sql: &str,
        params: &[(&(dyn postgres_types::ToSql + Sync), Type)],
    ) -> Result<Arc<QueryWaiter>, Error> {
        self.with_room(|st| {
            let start = st.committed;
            st.buf.truncate(start);
            encode::typed(sql, params, &mut st.buf)?;
            let waiter = Arc::new(QueryWaiter::new());
            let waker = self.push_locked(
                st,
                start,
                Token::Query(waiter.clone()),
                UnitKind::Typed,
                false,
            );
            Ok((waiter, waker))
        })
        .await
        .map(wake_and_return)
    }

    /// Runs `f` under the state lock once the mailbox has room for one more unit.
    ///
    /// Backpressure is FIFO: a caller that finds the mailbox full, or other callers already
    /// waiting, queues behind them; the task grants freed slots to waiters in order and
    /// reserves them, so a newcomer cannot take a slot from someone who waited for it.
    async fn with_room<T>(
        &self,
        mut f: impl FnMut(&mut State) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut ticket: Option<Ticket<'_>> = None;
        loop {
            {
                let mut st = lock(&self.state);
                status_check(&st.status)?;
                let may_go = match &ticket {
                    Some(t) => t.slot.granted.load(Relaxed),
                    None => {
                        st.space_waiters.is_empty()
                            && st.queue.len() + st.reserved < self.mailbox_size
                    }
                };
                if may_go {
                    if let Some(t) = &mut ticket {
                        // Consume the reservation: the unit pushed below takes its place.
                        st.reserved -= 1;
                        t.consumed = true;
                    }
                    let r = f(&mut st);
                    // If `f` pushed nothing (bad input, evicted statement), the slot is free
                    // again: pass it on rather than wait for the next tick.
                    let mut wakes = DeferredWakes::default();
                    if !st.space_waiters.is_empty() {
                        self.grant_room(&mut st, &mut wakes);
                    }
                    drop(st);
                    wakes.wake_all();
                    return r;
                }
                ticket.get_or_insert_with(|| {
                    let slot = Arc::new(SpaceWaiter::default());
                    st.space_waiters.push_back(slot.clone());
                    Ticket {
                        conn: self,
                        slot,
                        consumed: false,
                    }
                });
            }
            let slot = ticket.as_ref().map(|t| t.slot.clone());
            if let Some(slot) = slot {
                futures_lite::future::poll_fn(|cx| slot.poll_granted(cx)).await;
            }
        }
    }

    /// Grants freed mailbox slots to waiting callers, oldest first (called by the task with the
    /// state lock held; the wakeups go to `wakes`, woken after the tick).
    pub(crate) fn grant_room(&self, st: &mut State, wakes: &mut DeferredWakes) {
        while st.queue.len() + st.reserved < self.mailbox_size {
            let Some(w) = st.space_waiters.pop_front() else {
                break;
            };
            st.reserved += 1;
            w.grant(wakes);
        }
    }

    /// Wakes every waiting caller so it sees a changed status (closing, dead).
    pub(crate) fn wake_waiters(&self, st: &mut State, wakes: &mut DeferredWakes) {
        for w in st.space_waiters.drain(..) {
            w.wake(wakes);
        }
    }

    /// Commits the unit encoded at `buf[start..]` to the mailbox. Returns the task's waker if
    /// this submission is the first since the task last looked (one wakeup per burst).
    fn push_locked(
        &self,
        st: &mut State,
        start: usize,
        token: Token,
        kind: UnitKind,
        closes: bool,
    ) -> Option<Waker> {
        self.push_costed(st, start, token, kind, closes, None)
    }

    /// [`ConnShared::push_locked`] for an execution of `stmt`: its estimate counts as pending work
    /// on this connection until it completes (cost-aware routing reads the sum).
    fn push_costed(
        &self,
        st: &mut State,
        start: usize,
        token: Token,
        kind: UnitKind,
        closes: bool,
        stmt: Option<Arc<Statement>>,
    ) -> Option<Waker> {
        let len = st.buf.len() - start;
        st.committed = st.buf.len();
        let cost = stmt.as_ref().map_or(0, |s| s.estimate_ns());
        self.counters.est_pending_ns.fetch_add(cost, Relaxed);
        st.queue.push_back(Queued {
            len,
            token,
            kind,
            closes,
            cost,
            stmt,
        });
        self.pushed.fetch_add(1, Relaxed);
        let q = self.counters.queued.fetch_add(1, Relaxed) + 1;
        self.counters.queued_peak.fetch_max(q, Relaxed);
        if st.wake_pending {
            None
        } else {
            st.wake_pending = true;
            st.task_waker.take()
        }
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
                        params,
                        columns,
                        unresolved,
                        resolved: OnceLock::new(),
                        live: AtomicBool::new(true),
                        cost_ns: self.costs.cell(&p.sql),
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

fn wake_and_return(r: (Arc<QueryWaiter>, Option<Waker>)) -> Arc<QueryWaiter> {
    if let Some(w) = r.1 {
        w.wake();
    }
    r.0
}

/// A caller waiting for mailbox room.
#[derive(Default)]
pub(crate) struct SpaceWaiter {
    granted: AtomicBool,
    woken: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl SpaceWaiter {
    fn grant(&self, wakes: &mut DeferredWakes) {
        self.granted.store(true, Relaxed);
        self.wake(wakes);
    }

    fn wake(&self, wakes: &mut DeferredWakes) {
        self.woken.store(true, Release);
        if let Some(w) = lock(&self.waker).take() {
            wakes.push(w);
        }
    }

    fn poll_granted(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.woken.swap(false, Acquire) {
            return std::task::Poll::Ready(());
        }
        *lock(&self.waker) = Some(cx.waker().clone());
        // Re-check: a wake between the swap and storing the waker must not be lost.
        if self.woken.swap(false, Acquire) {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

/// A caller's place in the backpressure queue. Dropping it (the caller gave up, or got its
/// slot) leaves the queue; an unused reservation passes to the next waiter.
struct Ticket<'a> {
    conn: &'a ConnShared,
    slot: Arc<SpaceWaiter>,
    consumed: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.consumed {
            return;
        }
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.conn.state);
            if self.slot.granted.load(Relaxed) {
                st.reserved -= 1;
                self.conn.grant_room(&mut st, &mut wakes);
            } else {
                st.space_waiters.retain(|w| !Arc::ptr_eq(w, &self.slot));
            }
        }
        wakes.wake_all();
    }
}

fn status_check(s: &Status) -> Result<(), Error> {
    match s {
        Status::Open => Ok(()),
        Status::Retiring => Err(Error::NotDispatched {
            reason: RETIRED.into(),
        }),
        Status::Closing | Status::Closed => Err(Error::Closed),
        Status::Dead(reason) => Err(Error::NotDispatched {
            reason: reason.clone(),
        }),
    }
}
