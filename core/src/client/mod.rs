//! The connection service callers use: `pipeline_size` pipelined connections behind one handle,
//! and up to `max_connections` when slow statements or saturating server work call for more.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;
use std::time::Instant;

use postgres_types::{ToSql, Type};

use crate::driver::open::Endpoint;
use crate::driver::shared::{
    nanos, ConnShared, CostTable, Framing, Gate, QueryResult, QueryWaiter, Role, Statement,
};
use crate::driver::types::TypeCache;
/// The future that owns one connection, which an adapter's [`Spawn`] runs: opaque to adapters,
/// which only spawn it (see [`Adapter`]).
pub use crate::driver::ConnTask;
use crate::exclusive::Pinned;
use crate::guard::Guard;
use crate::proto::encode;
use crate::rt::{with_deadline, Runtime, Spawn};
use crate::sched::Waiter;
use crate::stats::Stats;
use crate::{Config, Error, Row};

use on_demand::{open_on_demand, spawn_connection};

mod batch;
mod checkout;
mod on_demand;
mod route;

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

/// Starts a connection task on a claimed slot (a plain `fn`, so the handle stays `Send` and
/// `Sync` whatever the runtime, and callers need no `Spawn` bound).
type OpenFn<R> = fn(&R, &Arc<Endpoint>, &Arc<ConnShared>) -> Opened;

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
        let client = Client {
            inner: Arc::new(Inner {
                rt,
                open_fn: open_on_demand::<R>,
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
    pub async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        Ok(self.run(sql, params).await?.rows)
    }

    /// Runs a statement and returns the number of rows it affected.
    pub async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
        Ok(self.run(sql, params).await?.affected)
    }

    /// Runs a statement that must return exactly one row.
    pub async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, Error> {
        exactly_one(self.run(sql, params).await?.rows)
    }

    /// Runs a statement that returns at most one row.
    pub async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        at_most_one(self.run(sql, params).await?.rows)
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

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.inner
            .config
            .query_timeout
            .map(|d| self.inner.rt.now() + d)
    }

    /// Checks a shared-path statement before anything is sent: input limits, then the guard.
    fn admit(&self, sql: &str, n_params: usize) -> Result<(), Error> {
        encode::check_input(sql, n_params)?;
        self.inner.guard.check(sql).map_err(|r| {
            crate::observe::refused(&r.reason);
            Error::Refused(r)
        })
    }

    pub(crate) async fn typed_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        let op = async {
            let submit = conn.submit_typed(sql, params, framing);
            let w = with_deadline(&self.inner.rt, deadline, submit).await?;
            let mut r = self.wait_for(deadline, &w).await?;
            r.rows = self.complete_rows(conn, r.rows, deadline).await?;
            Ok(r)
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// `fut`, one public operation on `sql`, inside its span and metrics (`crate::observe`).
    pub(crate) async fn observed<T>(
        &self,
        sql: &str,
        fut: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, fut).await
    }

    pub(crate) async fn wait_for(
        &self,
        deadline: Option<Instant>,
        w: &QueryWaiter,
    ) -> Result<QueryResult, Error> {
        wait(&self.inner.rt, deadline, w).await
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

    async fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<QueryResult, Error> {
        let op = async {
            let (_, r, _) = self.shared_path(sql, Params::Untyped(params)).await?;
            Ok(r)
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// Every shared-path statement goes through here, whatever its entry point: the guard's
    /// admission, the deadline, routing, and retries of units never sent. Returns the
    /// connection that answered (typed rows may need its type lookups) and the deadline.
    async fn shared_path(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<(&ConnShared, QueryResult, Option<Instant>), Error> {
        self.admit(sql, params.len())?;
        let deadline = self.deadline();
        let mut attempts = 0;
        loop {
            let conn = self.route(deadline).await?;
            let (used, r) = match params {
                Params::Untyped(p) => self.attempt(conn, sql, p, deadline).await,
                Params::Typed(p) => {
                    let r = async {
                        let submit = conn.submit_typed(sql, p, &Framing::NONE);
                        let w = with_deadline(&self.inner.rt, deadline, submit).await?;
                        wait(&self.inner.rt, deadline, &w).await
                    }
                    .await;
                    (&**conn, r)
                }
            };
            if let Some(r) = self.retry_or_return(used, r, &mut attempts) {
                return r.map(|r| (used, r, deadline));
            }
        }
    }

    /// One try on the shared path: the statement is looked up on the routed connection, which
    /// also gives its cost estimate; one estimated slow goes to a lane of its own instead.
    async fn attempt<'a>(
        &'a self,
        conn: &'a Arc<ConnShared>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
    ) -> (&'a ConnShared, Result<QueryResult, Error>) {
        let rt = &self.inner.rt;
        let stmt = match with_deadline(rt, deadline, conn.statement(sql)).await {
            Ok(s) => s,
            Err(e) => return (conn, Err(e)),
        };
        if stmt.estimate_ns() >= self.inner.slow_ns && !self.inner.on_demand().is_empty() {
            if let Some(home) = self.slow_home(deadline, stmt.estimate_ns()).await {
                if home.role() == Role::Lane {
                    home.counters.inc(&home.counters.lane_units);
                }
                let r = self
                    .run_on(home, sql, params, deadline, &Framing::NONE)
                    .await;
                return (home, r);
            }
        }
        if self.inner.config.fair_lanes {
            match self.hold_while_lanes_queue(deadline).await {
                Ok(true) => conn.counters.inc(&conn.counters.held_for_lanes),
                Ok(false) => {}
                Err(e) => return (conn, Err(e)),
            }
        }
        let r = self
            .execute_fresh(conn, sql, &stmt, params, deadline, &Framing::NONE)
            .await;
        (conn, r)
    }

    /// `None`: retry (the unit was never sent, and a connection is open or may come back
    /// within `dispatch_timeout`, which routing waits for). The count bounds a unit whose
    /// connections keep dying under it; each retry follows a connection's failure.
    fn retry_or_return<T>(
        &self,
        conn: &ConnShared,
        r: Result<T, Error>,
        attempts: &mut usize,
    ) -> Option<Result<T, Error>> {
        match r {
            Err(Error::NotDispatched { reason })
                if (self.inner.config.retry_not_dispatched || reason.is_retired())
                    && *attempts < self.inner.conns.len() + 2
                    && (!self.inner.config.dispatch_timeout.is_zero()
                        || self.inner.conns.iter().any(|c| c.is_open())) =>
            {
                *attempts += 1;
                conn.counters.inc(&conn.counters.retries);
                None
            }
            Err(e) => {
                if matches!(e, Error::Timeout) {
                    conn.counters.inc(&conn.counters.errors_timeout);
                }
                Some(Err(e))
            }
            ok => Some(ok),
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

    /// Runs `sql` on `conn` with `framing` (a transaction's BEGIN or COMMIT riding along).
    pub(crate) async fn run_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        let stmt = with_deadline(&self.inner.rt, deadline, conn.statement(sql)).await?;
        self.execute_fresh(conn, sql, &stmt, params, deadline, framing)
            .await
    }

    /// Executes `stmt`, preparing it once more when the server says a schema change made it
    /// stale (a type it uses was dropped and created again, a table's columns changed): that
    /// error comes before anything runs, so the retry cannot run the statement twice. Not in a
    /// transaction, which the error has aborted.
    async fn execute_fresh(
        &self,
        conn: &ConnShared,
        sql: &str,
        stmt: &Arc<Statement>,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        let rt = &self.inner.rt;
        with_deadline(rt, deadline, self.complete_types(conn, stmt, deadline)).await?;
        // A stale statement's error comes before anything of its unit ran, and only outside
        // a transaction (a BEGIN riding with it leaves one open, failed), so the retry below
        // never needs the BEGIN again.
        match self
            .execute_prepared(conn, stmt, params, deadline, framing)
            .await
        {
            // Not for a unit that ends its transaction: its connection may already belong to
            // the next holder, whose status `tx_status` then says.
            Err(e)
                if is_stale_statement(&e)
                    && framing.queued.is_none()
                    && !framing.commit
                    && conn.tx_status.load(Relaxed) == b'I' =>
            {
                if e.code().is_some_and(|c| c.as_str() == "26000") && self.inner.costs.unname() {
                    crate::observe::pooler_detected();
                }
                let fresh = with_deadline(rt, deadline, conn.reprepare(sql, stmt)).await?;
                with_deadline(rt, deadline, self.complete_types(conn, &fresh, deadline)).await?;
                self.execute_prepared(conn, &fresh, params, deadline, framing)
                    .await
            }
            other => other,
        }
    }

    /// Executes a prepared statement whose types are complete.
    pub(crate) async fn execute_prepared(
        &self,
        conn: &ConnShared,
        stmt: &Arc<Statement>,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        stmt.check_param_count(params.len())?;
        let rt = &self.inner.rt;
        let w = with_deadline(rt, deadline, conn.submit_execute(stmt, params, framing)).await?;
        framing.was_queued();
        wait(rt, deadline, &w).await
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

/// `block` with an optional deadline from the runtime's clock.
async fn wait<R: Runtime, T>(
    rt: &R,
    deadline: Option<Instant>,
    w: &Waiter<Result<T, Error>>,
) -> Result<T, Error> {
    with_deadline(
        rt,
        deadline,
        futures_lite::future::poll_fn(|cx| w.poll_block(cx)),
    )
    .await
}

/// The server's errors for a prepared statement that a schema change invalidated: its types
/// no longer exist (`XX000`, `cache lookup failed for type`), or its result shape changed
/// (`0A000`, `cached plan must not change result type`), or a holder of the connection ran
/// `DEALLOCATE ALL` (`26000` naming one of ours).
fn is_stale_statement(e: &Error) -> bool {
    match e {
        Error::Db(db) => is_stale(db),
        _ => false,
    }
}

/// [`is_stale_statement`] for the server's error itself.
fn is_stale(db: &crate::DbError) -> bool {
    match db.code().as_str() {
        "26000" => db.message.contains("\"pgpipe_"),
        "XX000" => db.message.starts_with("cache lookup failed for type"),
        "0A000" => db
            .message
            .starts_with("cached plan must not change result type"),
        _ => false,
    }
}
