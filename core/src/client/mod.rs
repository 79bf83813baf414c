//! The connection service callers use: `pipeline_size` pipelined connections behind one handle,
//! and up to `max_connections` when slow statements or saturating server work call for more.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;
use std::time::Instant;

use postgres_types::{ToSql, Type};

use crate::driver::open::Endpoint;
use crate::driver::shared::{nanos, ConnShared, CostTable, Gate, Role};
use crate::driver::types::TypeCache;
/// The future that owns one connection, which an adapter's [`Spawn`] runs: opaque to adapters,
/// which only spawn it (see [`Adapter`]).
pub use crate::driver::ConnTask;
use crate::exclusive::Pinned;
use crate::guard::Guard;
use crate::rt::{Runtime, Spawn};
use crate::sched::Waiter;
use crate::stats::Stats;
use crate::{Config, Error, Row, ToStatement};

use on_demand::{spawn_connection, start_task};

mod batch;
mod checkout;
mod on_demand;
mod route;
mod run;

pub use batch::{Batch, StatementResult};

/// A shared-path statement's parameters: typed by the server (prepared, cached) or by the caller.
#[derive(Clone, Copy)]
enum Params<'p> {
    Untyped(&'p [&'p (dyn ToSql + Sync)]),
    Typed(&'p [(&'p (dyn ToSql + Sync), Type)]),
}

impl Params<'_> {
    fn len(&self) -> usize {
        match self {
            Params::Untyped(p) => p.len(),
            Params::Typed(p) => p.len(),
        }
    }
}

/// A runtime that can run pgpipe: a [`Runtime`] that can spawn the connection task.
/// Implemented automatically; adapters only implement `Runtime` and `Spawn`.
pub trait Adapter: Runtime + Spawn<ConnTask<Self>> {}
impl<R> Adapter for R where R: Runtime + Spawn<ConnTask<R>> {}

/// A handle to the connection service. Cheap to clone; every clone shares the connections.
/// When the last clone is dropped the connections drain their work and close.
pub struct Client<R: Runtime> {
    inner: Arc<Inner<R>>,
}

impl<R: Runtime> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client {
            inner: self.inner.clone(),
        }
    }
}

/// Starts a connection task on a claimed slot, exclusive or not (a plain `fn`, so the handle
/// stays `Send` and `Sync` whatever the runtime, and callers need no `Spawn` bound).
type OpenFn<R> = fn(&R, &Arc<Endpoint>, &Arc<ConnShared>, bool) -> Opened;

/// Tells whether a connection task got its connection serving.
type Opened = Arc<Waiter<Result<(), Error>>>;

struct Inner<R> {
    rt: R,
    config: Config,
    /// The same settings, shared with the connection tasks.
    cfg: Arc<Endpoint>,
    /// Every pipelined slot: the first `pipeline_size` are kept open, the rest are opened on
    /// demand (see [`Inner::base`], [`Inner::on_demand`]).
    conns: Vec<Arc<ConnShared>>,
    open_fn: OpenFn<R>,
    /// Set by `close()`/`abort()`: no slot is opened any more.
    closing: AtomicBool,
    /// `slow_threshold` in ns.
    slow_ns: u64,
    /// After an on-demand connection failed to open (the server may be at its connection
    /// limit), no other is tried before this time, so callers do not hammer the server.
    open_paused_until: std::sync::Mutex<Option<Instant>>,
    cursor: AtomicUsize,
    pinned: Arc<Pinned>,
    guard: Guard,
    /// Tells, for an exclusive connection's release, whether a statement may have changed
    /// session state (strict: `nextval` sets `currval`).
    session_guard: Guard,
    /// Cost estimates per SQL text, shared by every connection.
    costs: Arc<CostTable>,
    /// Fast units held back while every lane has a queue (`Config::fair_lanes`).
    gate: Arc<Gate>,
    /// Server types `postgres-types` does not know, looked up once for all connections.
    pub(crate) types: Arc<TypeCache>,
    /// Whether the machine has CPU to spare for an overflow connection (`spare_cpu_pct`).
    spare: std::sync::Mutex<crate::driver::spare::SpareCpu>,
    /// Overflow connections not opened for want of spare CPU.
    overflow_held: AtomicU64,
}

impl<R> Inner<R> {
    /// The `pipeline_size` connections kept open.
    fn base(&self) -> &[Arc<ConnShared>] {
        &self.conns[..self.config.pipeline_size]
    }

    /// The slots opened on demand (lanes and overflow); empty when elasticity is off.
    fn on_demand(&self) -> &[Arc<ConnShared>] {
        &self.conns[self.config.pipeline_size..]
    }

    /// Whether units may go to on-demand connections (lanes, overflow): elasticity is on and
    /// no pooler is known to stand in between. Behind one, its own pool of server connections
    /// is the capacity, and waiting in its queue looks like server work: more client
    /// connections would only queue there too (8 processes through PgBouncer opened 75 of
    /// them for its 16 server connections).
    fn elastic(&self) -> bool {
        !self.on_demand().is_empty() && !self.costs.pooler_known()
    }
}

impl<R> Drop for Inner<R> {
    fn drop(&mut self) {
        self.closing.store(true, Release);
        for c in &self.conns {
            c.begin_close();
        }
        self.pinned.close();
    }
}

impl<R: Adapter> Client<R> {
    /// Opens `config.pipeline_size` connections on runtime `rt` and starts their tasks.
    pub async fn connect(rt: R, config: Config) -> Result<Client<R>, Error> {
        let cfg = Arc::new(Endpoint::new(config.clone())?);
        // Enough for every connection's statement cache, shared and exclusive.
        let costs = Arc::new(CostTable::new(
            config.statement_cache_size * (config.pipeline_size + config.pinned_size),
            config.named_statements,
            config.pooler.declared(),
        ));
        // The first connection authenticates alone, so wrong credentials cost the server one
        // failed login, not one per connection; the rest then open concurrently.
        let types = Arc::new(TypeCache::default());
        let first = spawn_connection(&rt, &cfg, false, &costs, &types);
        if let Err(e) = futures_lite::future::poll_fn(|cx| first.1.poll_block(cx)).await {
            first.0.begin_close();
            return Err(e);
        }
        let opening: Vec<_> = (1..config.pipeline_size)
            .map(|_| spawn_connection(&rt, &cfg, false, &costs, &types))
            .collect();
        let mut conns = Vec::with_capacity(config.connection_limit());
        conns.push(first.0);
        let mut failure = None;
        for (shared, opened) in opening {
            if let Err(e) = futures_lite::future::poll_fn(|cx| opened.poll_block(cx)).await {
                failure.get_or_insert(e);
            }
            conns.push(shared);
        }
        if let Some(e) = failure {
            for c in &conns {
                c.begin_close();
            }
            return Err(e);
        }
        let gate = Arc::new(Gate::default());
        while conns.len() < config.connection_limit() {
            conns.push(Arc::new(ConnShared::parked(
                config.mailbox_size,
                config.statement_cache_size,
                costs.clone(),
                types.clone(),
                gate.clone(),
            )));
        }
        let on_demand = conns[config.pipeline_size..].to_vec();
        let pinned = Arc::new(Pinned::new(
            config.pinned_size,
            config
                .connection_limit()
                .saturating_sub(config.pipeline_size),
            on_demand,
            config.release_reset == crate::config::ReleaseReset::Always,
        ));
        let guard = Guard::with_extensions(config.guard, cfg.extensions.clone());
        let session_guard =
            Guard::with_extensions(crate::guard::Mode::Strict, cfg.extensions.clone());
        let spare = crate::driver::spare::SpareCpu::new(config.spare_cpu_pct);
        let client = Client {
            inner: Arc::new(Inner {
                spare: std::sync::Mutex::new(spare),
                overflow_held: AtomicU64::new(0),
                rt,
                open_fn: start_task::<R>,
                closing: AtomicBool::new(false),
                slow_ns: nanos(config.slow_threshold),
                open_paused_until: std::sync::Mutex::new(None),
                config,
                cfg,
                conns,
                cursor: AtomicUsize::new(0),
                pinned,
                guard,
                session_guard,
                costs,
                gate,
                types,
            }),
        };
        for c in client.inner.on_demand() {
            client.on_exit_free_budget(c);
        }
        Ok(client)
    }
}

impl<R: Runtime> Client<R> {
    /// Runs a statement and returns its rows. Parameters bind to `$1, $2, ...`.
    pub async fn query<T: ?Sized + ToStatement>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        Ok(self.run(statement.sql_text(), params).await?.rows)
    }

    /// Runs a statement and returns the number of rows it affected.
    pub async fn execute<T: ?Sized + ToStatement>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        Ok(self.run(statement.sql_text(), params).await?.affected)
    }

    /// Runs a statement that must return exactly one row.
    pub async fn query_one<T: ?Sized + ToStatement>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        exactly_one(self.run(statement.sql_text(), params).await?.rows)
    }

    /// Runs a statement that returns at most one row.
    pub async fn query_opt<T: ?Sized + ToStatement>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        at_most_one(self.run(statement.sql_text(), params).await?.rows)
    }

    /// Prepares `sql` on a shared connection without running it: its parameter and column
    /// types. The guard admits it first, as it would its execution. The returned
    /// [`crate::Statement`] runs wherever its text would (each connection prepares it once).
    pub async fn prepare(&self, sql: &str) -> Result<crate::Statement, Error> {
        let op = async {
            self.admit(sql, 0)?;
            let deadline = self.deadline();
            let mut attempts = 0;
            loop {
                let conn = self.route(deadline).await?;
                let r = self.describe_on(conn, sql, deadline).await;
                if let Some(r) = self.retry_or_return(conn, r, &mut attempts) {
                    return r;
                }
            }
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// Runs a simple-protocol text, one statement or several, on a shared connection: every
    /// statement's rows as text and its count, in order. The guard admits the text only if it
    /// admits every statement in it (`Error::Refused`, before anything is sent). The
    /// statements run as one implicit transaction: the first error stops the text and undoes
    /// what ran before it.
    pub async fn simple_query(&self, sql: &str) -> Result<Vec<crate::SimpleQueryMessage>, Error> {
        let op = async {
            self.admit_script(sql)?;
            let deadline = self.deadline();
            let mut attempts = 0;
            loop {
                let conn = self.route(deadline).await?;
                let framing = &crate::driver::shared::Framing::NONE;
                let (r, _, _) = self.simple_rows_on(conn, sql, deadline, framing).await;
                if let Some(r) = self.retry_or_return(conn, r, &mut attempts) {
                    return r;
                }
            }
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// Runs a statement with caller-supplied parameter types: one round trip, no statement cache
    /// (useful for one-off SQL texts that would only churn the cache).
    pub async fn query_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, Error> {
        let op = async {
            let (conn, r, deadline) = self.shared_path(sql, Params::Typed(params)).await?;
            self.complete_rows(conn, r.rows, deadline).await
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// Counters of every pipelined slot (the `pipeline_size` kept open first, then those opened
    /// on demand) and their sum, with how many connections are open in each role.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::from_connections(
            self.inner
                .conns
                .iter()
                .map(|c| c.counters.snapshot())
                .collect(),
        );
        for c in self.inner.conns.iter().filter(|c| c.is_open()) {
            match c.role() {
                Role::Base => s.open_base += 1,
                Role::Lane => s.open_lanes += 1,
                Role::Overflow => s.open_overflow += 1,
            }
        }
        s.type_lookups = self.inner.types.lookups.load(Relaxed);
        s.overflow_held_busy_cpu = self.inner.overflow_held.load(Relaxed);
        s.exclusive = self.inner.pinned.stats();
        s
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Each cached statement's estimated server time per execution, per pipelined connection:
    /// `(connection index, SQL text, estimate)`; `None` until the statement has completed once.
    pub fn statement_estimates(&self) -> Vec<(usize, String, Option<std::time::Duration>)> {
        let mut out = Vec::new();
        for (i, c) in self.inner.conns.iter().enumerate() {
            for (sql, ns) in c.estimates() {
                out.push((
                    i,
                    sql,
                    (ns > 0).then(|| std::time::Duration::from_nanos(ns)),
                ));
            }
        }
        out
    }

    /// Connections still accepting work.
    pub fn live_connections(&self) -> usize {
        self.inner.conns.iter().filter(|c| c.is_open()).count()
    }

    /// Graceful close: stop accepting work, let every accepted unit complete, then close the
    /// connections. Returns when all connection tasks have ended. Other clones see `Error::Closed`.
    pub async fn close(&self) {
        self.inner.closing.store(true, Release);
        for c in &self.inner.conns {
            c.begin_close();
            c.live.notify(usize::MAX);
        }
        let idle = self.inner.pinned.close();
        for c in self.inner.conns.iter().chain(&idle) {
            while !c.has_exited() {
                let l = c.exited.listen();
                if c.has_exited() {
                    break;
                }
                l.await;
            }
        }
    }

    /// [`Client::close`], but for at most `limit`: what is still in flight then fails with
    /// typed errors (`Indeterminate` if it was sent, `NotDispatched` if not) and every
    /// connection is closed at once. Returns whether everything finished in time.
    pub async fn close_within(&self, limit: std::time::Duration) -> bool {
        let rt = &self.inner.rt;
        let deadline = rt.now() + limit;
        let graceful = futures_lite::future::or(
            async {
                self.close().await;
                true
            },
            async {
                rt.sleep_until(deadline).await;
                false
            },
        )
        .await;
        if !graceful {
            self.abort();
            self.close().await;
        }
        graceful
    }

    /// Fails all work at once, shared and exclusive: sent units as `Indeterminate`, queued ones
    /// as `NotDispatched` (not retried), then closes every connection.
    pub fn abort(&self) {
        self.inner.closing.store(true, Release);
        for c in &self.inner.conns {
            c.abort();
            c.live.notify(usize::MAX);
        }
        self.inner.pinned.abort();
    }

    /// Exclusive connections open and held: `(open, held)`.
    pub fn pinned_counts(&self) -> (usize, usize) {
        self.inner.pinned.counts()
    }

    /// Checkouts (`session()`, `transaction()`) waiting for an exclusive connection.
    pub fn checkouts_waiting(&self) -> usize {
        self.inner.pinned.waiting()
    }

    /// Records that `sql`, about to run on exclusive connection `conn`, may change session
    /// state (anything the guard would refuse on the shared path): the release then resets
    /// the session. Statements that leave none behind cost no reset.
    pub(crate) fn note_statement(&self, conn: &ConnShared, sql: &str) {
        if !conn.session_changed.load(Relaxed) && self.inner.session_guard.check(sql).is_err() {
            conn.session_changed.store(true, Relaxed);
        }
    }

    /// The runtime the client runs on.
    pub(crate) fn runtime(&self) -> &R {
        &self.inner.rt
    }

    /// The client's cache of server types (see `crate::typeinfo`).
    pub(crate) fn type_cache(&self) -> &TypeCache {
        &self.inner.types
    }
}

pub(crate) fn exactly_one(mut rows: Vec<Row>) -> Result<Row, Error> {
    if rows.len() != 1 {
        return Err(Error::RowCount(rows.len()));
    }
    rows.pop().ok_or(Error::RowCount(0))
}

pub(crate) fn at_most_one(mut rows: Vec<Row>) -> Result<Option<Row>, Error> {
    if rows.len() > 1 {
        return Err(Error::RowCount(rows.len()));
    }
    Ok(rows.pop())
}
