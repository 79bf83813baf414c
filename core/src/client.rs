//! The connection service callers use: `pipeline_size` pipelined connections behind one handle.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use postgres_types::{ToSql, Type};

use crate::driver::shared::{ConnShared, CostTable, QueryResult, QueryWaiter};
use crate::driver::ConnTask;
use crate::exclusive::{reset_ok, Checkout, Held, Pinned};
use crate::guard::Guard;
use crate::proto::encode;
use crate::rt::{Runtime, Spawn};
use crate::sched::Waiter;
use crate::session::{Session, Transaction};
use crate::stats::Stats;
use crate::{Config, Error, Row};

/// Estimated extra work ahead (ns) on the least-loaded connection beyond which routing prefers
/// the connection with the least estimated work: roughly one statement known to be slow.
const SLOW_AHEAD_NS: u64 = 5_000_000;

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

struct Inner<R> {
    rt: R,
    config: Config,
    /// The same settings, shared with the connection tasks.
    cfg: Arc<Config>,
    conns: Vec<Arc<ConnShared>>,
    cursor: AtomicUsize,
    pinned: Arc<Pinned>,
    guard: Guard,
    /// Cost estimates per SQL text, shared by every connection.
    costs: Arc<CostTable>,
}

impl<R> Drop for Inner<R> {
    fn drop(&mut self) {
        for c in &self.conns {
            c.begin_close();
        }
        self.pinned.close();
    }
}

impl<R: Adapter> Client<R> {
    /// Opens `config.pipeline_size` connections on runtime `rt` and starts their tasks.
    pub async fn connect(rt: R, config: Config) -> Result<Client<R>, Error> {
        config.validate()?;
        let cfg = Arc::new(config.clone());
        // Enough for every connection's statement cache, shared and exclusive.
        let costs = Arc::new(CostTable::new(
            config.statement_cache_size * (config.pipeline_size + config.pinned_size),
        ));
        // All connections open concurrently; the first failure is reported.
        let opening: Vec<_> = (0..config.pipeline_size)
            .map(|_| spawn_connection(&rt, &cfg, false, &costs))
            .collect();
        let mut conns = Vec::with_capacity(opening.len());
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
        let pinned = Arc::new(Pinned::new(config.pinned_size));
        let guard = Guard::new(config.guard);
        Ok(Client {
            inner: Arc::new(Inner {
                rt,
                config,
                cfg,
                conns,
                cursor: AtomicUsize::new(0),
                pinned,
                guard,
                costs,
            }),
        })
    }

    /// Checks out an exclusive connection for session state (SET, LISTEN, temp tables,
    /// session advisory locks). Waits while all `pinned_size` are held.
    pub async fn session(&self) -> Result<Session<R>, Error> {
        let held = self.checkout().await?;
        Ok(Session::new(self.clone(), held))
    }

    /// Checks out an exclusive connection and starts a transaction on it.
    pub async fn transaction(&self) -> Result<Transaction<R>, Error> {
        let held = self.checkout().await?;
        Transaction::begin(self.clone(), held).await
    }

    async fn checkout(&self) -> Result<Held, Error> {
        let me = futures_lite::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let pinned = &self.inner.pinned;
        loop {
            let conn = match pinned.acquire(&me).await? {
                Checkout::Idle(conn, reset) => {
                    if conn.is_open() && reset_ok(reset).await {
                        conn
                    } else {
                        // The previous holder's session could not be reset: replace it.
                        conn.begin_close();
                        pinned.forfeit();
                        continue;
                    }
                }
                Checkout::Open => {
                    let (shared, opened) =
                        spawn_connection(&self.inner.rt, &self.inner.cfg, true, &self.inner.costs);
                    if let Err(e) = futures_lite::future::poll_fn(|cx| opened.poll_block(cx)).await
                    {
                        pinned.forfeit();
                        return Err(e);
                    }
                    shared
                }
            };
            let id = pinned.hold(conn.clone(), me.clone());
            return Ok(Held {
                conn,
                pinned: pinned.clone(),
                id,
            });
        }
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
        encode::check_input(sql, params.len())?;
        let deadline = self.deadline();
        let mut attempts = 0;
        loop {
            let conn = self.route()?;
            let r = async {
                let w =
                    with_deadline(&self.inner.rt, deadline, conn.submit_typed(sql, params)).await?;
                wait(&self.inner.rt, deadline, &w).await
            }
            .await;
            match self.retry_or_return(conn, r, &mut attempts) {
                Some(r) => return r.map(|q| q.rows),
                None => continue,
            }
        }
    }

    /// Counters of every connection and their sum.
    pub fn stats(&self) -> Stats {
        Stats::from_connections(
            self.inner
                .conns
                .iter()
                .map(|c| c.counters.snapshot())
                .collect(),
        )
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
        for c in &self.inner.conns {
            c.begin_close();
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

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.inner
            .config
            .query_timeout
            .map(|d| self.inner.rt.now() + d)
    }

    /// Checks a shared-path statement before anything is sent: input limits, then the guard.
    fn admit(&self, sql: &str, n_params: usize) -> Result<(), Error> {
        encode::check_input(sql, n_params)?;
        self.inner.guard.check(sql).map_err(Error::Refused)
    }

    pub(crate) async fn typed_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        deadline: Option<Instant>,
    ) -> Result<QueryResult, Error> {
        let w = with_deadline(&self.inner.rt, deadline, conn.submit_typed(sql, params)).await?;
        self.wait_for(deadline, &w).await
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
        for c in &self.inner.conns {
            c.abort();
        }
        self.inner.pinned.abort();
    }

    /// Exclusive connections open and held: `(open, held)`.
    pub fn pinned_counts(&self) -> (usize, usize) {
        self.inner.pinned.counts()
    }

    async fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<QueryResult, Error> {
        self.admit(sql, params.len())?;
        let deadline = self.deadline();
        let mut attempts = 0;
        loop {
            let conn = self.route()?;
            let r = self.run_on(conn, sql, params, deadline).await;
            if let Some(r) = self.retry_or_return(conn, r, &mut attempts) {
                return r;
            }
        }
    }

    /// `None`: retry on another connection (the unit was never sent and one is still open).
    fn retry_or_return(
        &self,
        conn: &ConnShared,
        r: Result<QueryResult, Error>,
        attempts: &mut usize,
    ) -> Option<Result<QueryResult, Error>> {
        match r {
            Err(Error::NotDispatched { .. })
                if self.inner.config.retry_not_dispatched
                    && *attempts < self.inner.conns.len()
                    && self.inner.conns.iter().any(|c| c.is_open()) =>
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

    pub(crate) async fn run_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
    ) -> Result<QueryResult, Error> {
        let rt = &self.inner.rt;
        loop {
            let stmt = with_deadline(rt, deadline, conn.statement(sql)).await?;
            if stmt.params.len() != params.len() {
                return Err(Error::ParamCount {
                    expected: stmt.params.len(),
                    given: params.len(),
                });
            }
            match with_deadline(rt, deadline, conn.submit_execute(&stmt, params)).await? {
                Some(w) => return wait(rt, deadline, &w).await,
                None => continue, // evicted between lookup and submit: prepare again
            }
        }
    }

    /// Least-loaded open connection (load = queued + in flight); the first idle one from a
    /// rotating start wins, so ties spread evenly.
    fn route(&self) -> Result<&Arc<ConnShared>, Error> {
        let conns = &self.inner.conns;
        let n = conns.len();
        let start = self.inner.cursor.fetch_add(1, Relaxed) % n;
        // Least loaded by count (which keeps uniform work evenly spread), unless that
        // connection has far more estimated work ahead than the one with the least: then a
        // statement expected to be slow is queued there, and this unit goes around it.
        let mut by_count: Option<((u64, u64), &Arc<ConnShared>)> = None;
        let mut by_cost: Option<((u64, u64), &Arc<ConnShared>)> = None;
        for i in 0..n {
            let c = &conns[(start + i) % n];
            if !c.is_open() {
                continue;
            }
            let load = c.load();
            if load == 0 {
                return Ok(c);
            }
            let cost = c.pending_cost();
            if by_count.is_none_or(|(k, _)| (load, cost) < k) {
                by_count = Some(((load, cost), c));
            }
            if by_cost.is_none_or(|(k, _)| (cost, load) < k) {
                by_cost = Some(((cost, load), c));
            }
        }
        let best = match (by_count, by_cost) {
            (Some(((_, count_cost), _)), Some(((min_cost, _), k)))
                if count_cost > min_cost + SLOW_AHEAD_NS =>
            {
                Some(k)
            }
            (Some((_, c)), _) => Some(c),
            _ => None,
        };
        match best {
            Some(c) => Ok(c),
            None if conns.iter().all(|c| c.has_exited() || !c.is_open()) && self.any_closing() => {
                Err(Error::Closed)
            }
            None => Err(Error::NoConnection {
                reason: "every pipelined connection has failed".into(),
            }),
        }
    }

    fn any_closing(&self) -> bool {
        self.inner.conns.iter().any(|c| {
            matches!(
                crate::sched::lock(&c.state).status,
                crate::driver::shared::Status::Closing | crate::driver::shared::Status::Closed
            )
        })
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
async fn wait<R: Runtime>(
    rt: &R,
    deadline: Option<Instant>,
    w: &QueryWaiter,
) -> Result<QueryResult, Error> {
    with_deadline(
        rt,
        deadline,
        futures_lite::future::poll_fn(|cx| w.poll_block(cx)),
    )
    .await
}

async fn with_deadline<R: Runtime, T>(
    rt: &R,
    deadline: Option<Instant>,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match deadline {
        None => fut.await,
        Some(d) => {
            let mut sleep = rt.sleep_until(d);
            let mut fut = std::pin::pin!(fut);
            futures_lite::future::poll_fn(|cx| {
                if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
                match std::pin::Pin::new(&mut sleep).poll(cx) {
                    Poll::Ready(_) => Poll::Ready(Err(Error::Timeout)),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await
        }
    }
}

/// Starts a connection task; the returned waiter reports when it is serving (or why not).
fn spawn_connection<R: Adapter>(
    rt: &R,
    cfg: &Arc<Config>,
    exclusive: bool,
    costs: &Arc<CostTable>,
) -> (Arc<ConnShared>, Arc<Waiter<Result<(), Error>>>) {
    let shared = Arc::new(ConnShared::new(
        cfg.mailbox_size,
        cfg.statement_cache_size,
        costs.clone(),
    ));
    let opened = Arc::new(Waiter::new());
    rt.spawn(ConnTask::new(
        rt.clone(),
        cfg.clone(),
        shared.clone(),
        exclusive,
        opened.clone(),
    ));
    (shared, opened)
}
