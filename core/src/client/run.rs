//! Running one statement: the shared path (the guard's admission, the deadline, routing, a
//! slow statement's own lane, retries of units never sent) and what every path shares: executing
//! a prepared statement, preparing it again when a schema change made it stale, and waiting
//! under a deadline.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use postgres_types::{ToSql, Type};

use super::{Client, Params};
use crate::driver::shared::{ConnShared, Framing, QueryResult, QueryWaiter, Role, Statement};
use crate::proto::encode;
use crate::rt::{with_deadline, Runtime};
use crate::sched::Waiter;
use crate::Error;

impl<R: Runtime> Client<R> {
    /// The deadline of an operation starting now: `query_timeout` on the runtime's clock, if set.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.inner
            .config
            .query_timeout
            .map(|d| self.inner.rt.now() + d)
    }

    /// Checks a shared-path statement before anything is sent: input limits, then the guard.
    pub(super) fn admit(&self, sql: &str, n_params: usize) -> Result<(), Error> {
        encode::check_input(sql, n_params)?;
        self.inner.guard.check(sql).map_err(|r| {
            crate::observe::refused(&r.reason);
            Error::Refused(r)
        })
    }

    /// [`Client::admit`] for a simple-protocol text: every statement in it.
    pub(super) fn admit_script(&self, sql: &str) -> Result<(), Error> {
        encode::check_input(sql, 0)?;
        self.inner.guard.check_script(sql).map_err(|r| {
            crate::observe::refused(&r.reason);
            Error::Refused(r)
        })
    }

    /// Runs `sql` with caller-typed parameters on `conn` with `framing` (a transaction's BEGIN
    /// or COMMIT riding along), inside its span and metrics.
    pub(crate) async fn typed_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        let op = async {
            let rt = &self.inner.rt;
            if framing.turn.is_some() {
                with_deadline(rt, deadline, framing.my_turn_or_error()).await?;
            }
            let submit = conn.submit_typed(sql, params, framing);
            let w = with_deadline(rt, deadline, submit).await?;
            framing.was_queued(conn);
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

    /// Waits for `w`'s result until `deadline`.
    pub(crate) async fn wait_for(
        &self,
        deadline: Option<Instant>,
        w: &QueryWaiter,
    ) -> Result<QueryResult, Error> {
        wait(&self.inner.rt, deadline, w).await
    }

    /// Queues a simple-protocol text on `conn` with its results kept (`framing`'s pending BEGIN
    /// leading it) and waits until `deadline`: every statement's text rows and count, in
    /// order; whether it took the BEGIN; and its position among the units pushed to `conn`
    /// (what a cancel of it names). A statement's error is the server's own (`Error::Db`), not
    /// a batch's.
    pub(crate) async fn simple_rows_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> (Result<Vec<crate::SimpleQueryMessage>, Error>, bool, u64) {
        let (unit, begun) = match conn.submit_simple_rows(sql, framing) {
            Ok(queued) => queued,
            Err(e) => return (Err(e), false, 0),
        };
        let at = conn.units_pushed();
        framing.was_queued(conn);
        let waited = futures_lite::future::poll_fn(|cx| unit.waiter.poll_block(cx));
        let results = match with_deadline(&self.inner.rt, deadline, waited).await {
            Err(Error::BatchFailed { source, .. }) => return (Err(Error::Db(source)), begun, at),
            Err(e) => return (Err(e), begun, at),
            Ok(results) => results,
        };
        let mut out = Vec::new();
        for result in results {
            out.extend(
                result
                    .rows
                    .into_iter()
                    .map(|row| crate::SimpleQueryMessage::Row(crate::SimpleQueryRow::new(row))),
            );
            out.push(crate::SimpleQueryMessage::CommandComplete(result.affected));
        }
        (Ok(out), begun, at)
    }

    /// Runs `sql` on the shared path, inside its span and metrics.
    pub(super) async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<QueryResult, Error> {
        let op = async {
            let (_, r, _) = self.shared_path(sql, Params::Untyped(params)).await?;
            Ok(r)
        };
        crate::observe::operation(&self.inner.rt, &self.inner.cfg, sql, op).await
    }

    /// Every shared-path statement goes through here, whatever its entry point: the guard's
    /// admission, the deadline, routing, and retries of units never sent. Returns the
    /// connection that answered (typed rows may need its type lookups) and the deadline.
    pub(super) async fn shared_path(
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
        if stmt.estimate_ns() >= self.inner.slow_ns && self.inner.elastic() {
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
    pub(super) fn retry_or_return<T>(
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

    /// Runs `sql` on `conn` with `framing` (a transaction's BEGIN or COMMIT riding along).
    pub(crate) async fn run_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
        framing: &Framing<'_>,
    ) -> Result<QueryResult, Error> {
        // On an exclusive connection, in turn before the prepare: its Parse must not overtake
        // an earlier statement that creates what it names.
        if framing.turn.is_some() {
            with_deadline(&self.inner.rt, deadline, framing.my_turn_or_error()).await?;
        }
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

    /// Prepares `sql` on `conn` (or finds it in its cache) with complete types, running
    /// nothing: what `prepare()` returns.
    pub(crate) async fn describe_on(
        &self,
        conn: &ConnShared,
        sql: &str,
        deadline: Option<Instant>,
    ) -> Result<crate::Statement, Error> {
        let rt = &self.inner.rt;
        let stmt = with_deadline(rt, deadline, conn.statement(sql)).await?;
        with_deadline(rt, deadline, self.complete_types(conn, &stmt, deadline)).await?;
        Ok(crate::Statement::new(sql, stmt.params(), stmt.columns()))
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
        if framing.turn.is_some() {
            with_deadline(rt, deadline, framing.my_turn_or_error()).await?;
        }
        let w = with_deadline(rt, deadline, conn.submit_execute(stmt, params, framing)).await?;
        framing.was_queued(conn);
        wait(rt, deadline, &w).await
    }
}

/// `block` with an optional deadline from the runtime's clock.
pub(super) async fn wait<R: Runtime, T>(
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
pub(super) fn is_stale(db: &crate::DbError) -> bool {
    match db.code().as_str() {
        "26000" => db.message.contains("\"pgpipe_"),
        "XX000" => db.message.starts_with("cache lookup failed for type"),
        "0A000" => db
            .message
            .starts_with("cached plan must not change result type"),
        _ => false,
    }
}
