//! Atomic batches on the shared path: statements known in advance, run all or nothing as one
//! pipelined unit among other callers' units (`docs/TRANSACTIONS.md`).
//!
//! The unit is every statement's Bind and Execute, then one Sync. In the extended protocol the
//! statements before a Sync form one implicit transaction: they commit together at the Sync,
//! and an error in one makes the server skip the rest and roll back the ones before. No
//! exclusive connection, no BEGIN or COMMIT, one round trip. A batch never shares its Sync with
//! other callers' units (Sync coalescing takes single reads only), so another caller's error
//! can never roll it back.

use std::sync::Arc;
use std::time::Instant;

use postgres_types::ToSql;

use super::run::{is_stale, wait};
use super::Client;
use crate::driver::shared::{ConnShared, QueryResult, Statement};
use crate::rt::{with_deadline, Runtime};
use crate::{Error, Row};

/// Statements to run as one atomic unit on the shared path, from [`Client::batch`]: add them
/// with [`Batch::add`], then [`Batch::run`] them. Every statement must pass the guard, as on
/// the shared path; transaction control (`BEGIN`, `COMMIT`) is refused.
#[must_use = "a batch does nothing until it is run"]
pub struct Batch<'a, R: Runtime> {
    client: &'a Client<R>,
    /// Each statement's text and where its parameters are in `params`.
    steps: Vec<(&'a str, std::ops::Range<usize>)>,
    params: Vec<&'a (dyn ToSql + Sync)>,
}

/// What one statement of a batch returned.
#[derive(Debug)]
pub struct StatementResult {
    rows: Vec<Row>,
    affected: u64,
}

impl StatementResult {
    /// The statement's rows (empty for one that returns none).
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The statement's rows, owned.
    pub fn into_rows(self) -> Vec<Row> {
        self.rows
    }

    /// The rows it affected (from its command tag: inserted, updated, deleted, selected).
    pub fn affected(&self) -> u64 {
        self.affected
    }
}

impl<R: Runtime> Client<R> {
    /// An empty atomic batch: statements added to it run in one implicit transaction, all or
    /// nothing, as one unit on a shared connection (one round trip, no exclusive connection).
    /// For transactions whose statements are known in advance; one whose next statement
    /// depends on an earlier one's result needs [`Client::transaction`].
    pub fn batch(&self) -> Batch<'_, R> {
        Batch {
            client: self,
            steps: Vec::new(),
            params: Vec::new(),
        }
    }
}

impl<'a, R: Runtime> Batch<'a, R> {
    /// Adds a statement; its parameters bind to `$1, $2, ...` as in [`Client::query`]. The
    /// batch keeps the references, so the list itself may be a temporary.
    pub fn add(&mut self, sql: &'a str, params: &[&'a (dyn ToSql + Sync)]) -> &mut Self {
        let start = self.params.len();
        self.params.extend_from_slice(params);
        self.steps.push((sql, start..self.params.len()));
        self
    }

    fn statements(&self) -> impl Iterator<Item = (&'a str, &[&'a (dyn ToSql + Sync)])> + '_ {
        self.steps
            .iter()
            .map(|(sql, at)| (*sql, &self.params[at.clone()]))
    }

    /// Statements added.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether no statement was added.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the statements as one unit: each one's result, in the order added, once all of
    /// them have committed. Errors: `Error::BatchFailed` names the statement that failed
    /// (nothing of the batch was committed); `Error::NotDispatched` (never sent, retried on
    /// another connection like any shared-path unit) and `Error::Indeterminate` (sent, the
    /// connection died: all of it or nothing committed) as for single statements; a refusal
    /// or bad input before anything is sent.
    pub async fn run(&self) -> Result<Vec<StatementResult>, Error> {
        let client = self.client;
        // The in-flight FIFO counts a unit's statements in 16 bits.
        if self.steps.len() > usize::from(u16::MAX) {
            return Err(Error::BatchTooLarge {
                statements: self.steps.len(),
            });
        }
        for (sql, params) in self.statements() {
            client.admit(sql, params.len())?;
        }
        if self.steps.is_empty() {
            return Ok(Vec::new());
        }
        let op = async {
            let deadline = client.deadline();
            let mut attempts = 0;
            loop {
                let conn = client.route(deadline).await?;
                let r = self.run_on(conn, deadline).await;
                if let Some(r) = client.retry_or_return(conn, r, &mut attempts) {
                    return r;
                }
            }
        };
        let results = client.observed("BATCH", op).await?;
        Ok(results
            .into_iter()
            .map(|r| StatementResult {
                rows: r.rows,
                affected: r.affected,
            })
            .collect())
    }

    /// One try on `conn`: the statements prepared there (once per connection and text), then
    /// the unit. A statement a schema change made stale fails before anything of the batch
    /// ran or committed, so it is prepared again and the batch re-sent, once per statement.
    async fn run_on(
        &self,
        conn: &ConnShared,
        deadline: Option<Instant>,
    ) -> Result<Vec<QueryResult>, Error> {
        let client = self.client;
        let rt = client.runtime();
        let mut stale_retries = 0;
        loop {
            let mut steps: Vec<(Arc<Statement>, &[&(dyn ToSql + Sync)])> =
                Vec::with_capacity(self.steps.len());
            for (sql, params) in self.statements() {
                let stmt = with_deadline(rt, deadline, conn.statement(sql)).await?;
                with_deadline(rt, deadline, client.complete_types(conn, &stmt, deadline)).await?;
                stmt.check_param_count(params.len())?;
                steps.push((stmt, params));
            }
            let unit = with_deadline(rt, deadline, conn.submit_batch(&steps)).await?;
            match wait(rt, deadline, &unit.waiter).await {
                Err(Error::BatchFailed { index, source })
                    if stale_retries < steps.len() && is_stale(&source) =>
                {
                    stale_retries += 1;
                    let sql = self.steps[index].0;
                    if source.code().as_str() == "26000" && client.inner.costs.unname() {
                        crate::observe::pooler_detected();
                    }
                    with_deadline(rt, deadline, conn.reprepare(sql, &steps[index].0)).await?;
                }
                other => return other,
            }
        }
    }
}
