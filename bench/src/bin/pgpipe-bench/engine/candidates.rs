//! The candidate clients as the load models see them ([`Db`]): pgpipe, tokio-postgres on N
//! connections (prepared statements, or `query_typed` behind a transaction-mode pooler) and
//! deadpool-postgres, each running an op and checking its answer.

use std::rc::Rc;

use super::{
    err, Db, Job, Op, HOL_SLOW_SQL, POINT_ID_SQL, POINT_SQL, SELECT1_SQL, SLEEP_SQL, UPDATE_SQL,
};
use crate::plan::Workload;

/// A pgpipe client; transactions run as interactive `transaction()`s, or (`batch`, the
/// candidate's `-batch`) as atomic batches on the shared path.
#[derive(Clone)]
pub(super) struct PgpipeDb<R: pgpipe::rt::Runtime> {
    client: pgpipe::Client<R>,
    batch: bool,
}

impl<R: pgpipe::rt::Runtime> PgpipeDb<R> {
    /// The candidate on `client`, running transactions as `job`'s candidate says.
    pub(super) fn new(client: &pgpipe::Client<R>, job: &Job) -> Self {
        PgpipeDb {
            client: client.clone(),
            batch: job.cand.batch,
        }
    }
}
impl<R: pgpipe::Adapter> Db for PgpipeDb<R> {
    async fn op(&self, op: Op) -> Result<(), String> {
        let c = &self.client;
        match op {
            Op::Point(aid) => {
                let row = c.query_one(POINT_SQL, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
            }
            Op::PointId(aid) => {
                let row = c.query_one(POINT_ID_SQL, &[&aid]).await.map_err(err)?;
                check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
                row.try_get::<_, i32>(1).map_err(err)?;
            }
            Op::Select1 => {
                let row = c.query_one(SELECT1_SQL, &[]).await.map_err(err)?;
                check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
            }
            Op::ReadWrite { aid, delta } => {
                let n = c.execute(UPDATE_SQL, &[&delta, &aid]).await.map_err(err)?;
                check_updated(n)?;
                let row = c.query_one(POINT_SQL, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
            }
            Op::Sleep(s) => {
                c.query(SLEEP_SQL, &[&s]).await.map_err(err)?;
            }
            Op::Slow => check_rows(c.query(HOL_SLOW_SQL, &[]).await.map_err(err)?.len())?,
            Op::Tx(aid) if self.batch => {
                let r = c
                    .batch()
                    .add(UPDATE_SQL, &[&1i32, &aid])
                    .add(POINT_SQL, &[&aid])
                    .run()
                    .await
                    .map_err(err)?;
                check_updated(r[0].affected())?;
                check_rows(r[1].rows().len())?;
            }
            Op::Tx(aid) => {
                let tx = c.transaction().await.map_err(err)?;
                check_updated(tx.execute(UPDATE_SQL, &[&1i32, &aid]).await.map_err(err)?)?;
                let rows = tx.query_and_commit(POINT_SQL, &[&aid]).await.map_err(err)?;
                check_rows(rows.len())?;
            }
        }
        Ok(())
    }

    fn fill(&self) -> Option<pgpipe::ConnStats> {
        Some(self.client.stats().total)
    }

    async fn bulk(
        &self,
        w: Workload,
        rows: u64,
        marks: &crate::engine::bulk::Marks,
    ) -> Result<crate::engine::bulk::Sums, String> {
        crate::engine::bulk::pgpipe(&self.client, w, rows, marks).await
    }
}

fn check_one(v: i32) -> Result<(), String> {
    if v == 1 {
        Ok(())
    } else {
        Err(format!("SELECT 1 returned {v}"))
    }
}

/// A point select's answer must be the row asked for.
fn check_key(asked: i32, got: i32) -> Result<(), String> {
    if asked == got {
        Ok(())
    } else {
        Err(format!(
            "wrong answer: asked for aid {asked}, got the row of aid {got}"
        ))
    }
}

fn check_rows(n: usize) -> Result<(), String> {
    if n == 1 {
        Ok(())
    } else {
        Err(format!("a statement returned {n} rows, expected 1"))
    }
}

fn check_updated(n: u64) -> Result<(), String> {
    if n == 1 {
        Ok(())
    } else {
        Err(format!("UPDATE affected {n} rows, expected 1"))
    }
}

/// One tokio-postgres connection with its statements prepared once, as a careful user would;
/// behind a transaction-mode pooler (`unnamed`) none, every op through `query_typed`.
pub(super) struct TpgConn {
    client: tokio_postgres::Client,
    statements: Option<TpgStatements>,
}

/// The prepared statements of one tokio-postgres connection.
struct TpgStatements {
    point: tokio_postgres::Statement,
    point_id: tokio_postgres::Statement,
    select1: tokio_postgres::Statement,
    update: tokio_postgres::Statement,
    sleep: tokio_postgres::Statement,
    slow: tokio_postgres::Statement,
}

impl TpgConn {
    /// Connects in plaintext, or over TLS through `tls`; prepares the statements unless
    /// `unnamed`.
    pub(super) async fn connect(
        cfg: &tokio_postgres::Config,
        tls: Option<&tokio_postgres_rustls::MakeRustlsConnect>,
        unnamed: bool,
    ) -> Result<TpgConn, String> {
        let client = match tls {
            None => {
                let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(err)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                client
            }
            Some(tls) => {
                let (client, conn) = cfg.connect(tls.clone()).await.map_err(err)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                client
            }
        };
        if unnamed {
            return Ok(TpgConn {
                client,
                statements: None,
            });
        }
        Ok(TpgConn {
            statements: Some(TpgStatements {
                point: client.prepare(POINT_SQL).await.map_err(err)?,
                point_id: client.prepare(POINT_ID_SQL).await.map_err(err)?,
                select1: client.prepare(SELECT1_SQL).await.map_err(err)?,
                update: client.prepare(UPDATE_SQL).await.map_err(err)?,
                sleep: client.prepare(SLEEP_SQL).await.map_err(err)?,
                slow: client.prepare(HOL_SLOW_SQL).await.map_err(err)?,
            }),
            client,
        })
    }
}

/// One op through `query_typed`: the unnamed statement parsed, bound and executed in one
/// round trip with the parameter types given, nothing prepared (what works behind a
/// transaction-mode pooler that cannot carry named statements).
async fn tpg_typed_op(c: &tokio_postgres::Client, op: Op) -> Result<(), String> {
    use tokio_postgres::types::Type;
    match op {
        Op::Point(aid) => {
            let row = c
                .query_typed_one(POINT_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::PointId(aid) => {
            let row = c
                .query_typed_one(POINT_ID_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
            row.try_get::<_, i32>(1).map_err(err)?;
        }
        Op::Select1 => {
            let row = c.query_typed_one(SELECT1_SQL, &[]).await.map_err(err)?;
            check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
        }
        Op::ReadWrite { aid, delta } => {
            let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
                [(&delta, Type::INT4), (&aid, Type::INT4)];
            let stream = c.query_typed_raw(UPDATE_SQL, params).await.map_err(err)?;
            let mut stream = std::pin::pin!(stream);
            while let Some(r) = futures_lite::StreamExt::next(&mut stream).await {
                r.map_err(err)?;
            }
            check_updated(stream.rows_affected().unwrap_or(0))?;
            let row = c
                .query_typed_one(POINT_SQL, &[(&aid, Type::INT4)])
                .await
                .map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::Sleep(s) => {
            c.query_typed(SLEEP_SQL, &[(&s, Type::FLOAT8)])
                .await
                .map_err(err)?;
        }
        Op::Slow => check_rows(c.query_typed(HOL_SLOW_SQL, &[]).await.map_err(err)?.len())?,
        Op::Tx(_) => return Err(NO_TX.into()),
    }
    Ok(())
}

/// Shared tokio-postgres connections cannot hold a caller's transaction.
const NO_TX: &str = "tokio-postgres on shared connections does not run transactions";

async fn tpg_op(
    c: &tokio_postgres::Client,
    op: Op,
    st: [&tokio_postgres::Statement; 6],
) -> Result<(), String> {
    let [point, point_id, select1, update, sleep, slow] = st;
    match op {
        Op::Point(aid) => {
            let row = c.query_one(point, &[&aid]).await.map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::PointId(aid) => {
            let row = c.query_one(point_id, &[&aid]).await.map_err(err)?;
            check_key(aid, row.try_get::<_, i32>(0).map_err(err)?)?;
            row.try_get::<_, i32>(1).map_err(err)?;
        }
        Op::Select1 => {
            let row = c.query_one(select1, &[]).await.map_err(err)?;
            check_one(row.try_get::<_, i32>(0).map_err(err)?)?;
        }
        Op::ReadWrite { aid, delta } => {
            check_updated(c.execute(update, &[&delta, &aid]).await.map_err(err)?)?;
            let row = c.query_one(point, &[&aid]).await.map_err(err)?;
            row.try_get::<_, i32>(0).map_err(err)?;
        }
        Op::Sleep(s) => {
            c.query(sleep, &[&s]).await.map_err(err)?;
        }
        Op::Slow => check_rows(c.query(slow, &[]).await.map_err(err)?.len())?,
        Op::Tx(_) => return Err(NO_TX.into()),
    }
    Ok(())
}

/// tokio-postgres on N connections; task `i` always uses connection `i % N`.
#[derive(Clone)]
pub(super) struct TpgDb {
    /// The connections, shared by every task's handle.
    pub(super) conns: Rc<Vec<TpgConn>>,
    /// The connection this handle's task uses.
    pub(super) mine: usize,
}

impl Db for TpgDb {
    fn for_task(&self, i: usize) -> Self {
        TpgDb {
            conns: self.conns.clone(),
            mine: i % self.conns.len(),
        }
    }
    async fn op(&self, op: Op) -> Result<(), String> {
        let c = &self.conns[self.mine];
        match &c.statements {
            Some(s) => {
                tpg_op(
                    &c.client,
                    op,
                    [
                        &s.point,
                        &s.point_id,
                        &s.select1,
                        &s.update,
                        &s.sleep,
                        &s.slow,
                    ],
                )
                .await
            }
            None => tpg_typed_op(&c.client, op).await,
        }
    }

    async fn bulk(
        &self,
        w: Workload,
        rows: u64,
        marks: &crate::engine::bulk::Marks,
    ) -> Result<crate::engine::bulk::Sums, String> {
        crate::engine::bulk::tokio_postgres(&self.conns[self.mine].client, w, rows, marks).await
    }
}

/// deadpool-postgres: check a connection out per op, statements from its per-connection cache;
/// behind a transaction-mode pooler (`unnamed`, the second field) no cache, every op through
/// its client's `query_typed`.
#[derive(Clone)]
pub(super) struct DeadpoolDb(pub(super) deadpool_postgres::Pool, pub(super) bool);

impl Db for DeadpoolDb {
    async fn op(&self, op: Op) -> Result<(), String> {
        let mut c = self.0.get().await.map_err(err)?;
        if let Op::Tx(aid) = op {
            // BEGIN, the two statements (from the connection's statement cache; behind a
            // transaction-mode pooler, whose next transaction may run on another backend,
            // through `query_typed`), COMMIT: each waits for its answer, as with any classic
            // pool.
            use tokio_postgres::types::Type;
            let tx = c.transaction().await.map_err(err)?;
            if self.1 {
                let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
                    [(&1i32, Type::INT4), (&aid, Type::INT4)];
                let stream = tx.query_typed_raw(UPDATE_SQL, params).await.map_err(err)?;
                let mut stream = std::pin::pin!(stream);
                while let Some(r) = futures_lite::StreamExt::next(&mut stream).await {
                    r.map_err(err)?;
                }
                check_updated(stream.rows_affected().unwrap_or(0))?;
                let rows = tx
                    .query_typed(POINT_SQL, &[(&aid, Type::INT4)])
                    .await
                    .map_err(err)?;
                check_rows(rows.len())?;
                return tx.commit().await.map_err(err);
            }
            let update = tx.prepare_cached(UPDATE_SQL).await.map_err(err)?;
            check_updated(tx.execute(&update, &[&1i32, &aid]).await.map_err(err)?)?;
            let point = tx.prepare_cached(POINT_SQL).await.map_err(err)?;
            check_rows(tx.query(&point, &[&aid]).await.map_err(err)?.len())?;
            return tx.commit().await.map_err(err);
        }
        if self.1 {
            return tpg_typed_op(&c, op).await;
        }
        let sql = match op {
            Op::Point(_) => POINT_SQL,
            Op::PointId(_) => POINT_ID_SQL,
            Op::Select1 => SELECT1_SQL,
            Op::ReadWrite { .. } | Op::Tx(_) => UPDATE_SQL,
            Op::Sleep(_) => SLEEP_SQL,
            Op::Slow => HOL_SLOW_SQL,
        };
        let st = c.prepare_cached(sql).await.map_err(err)?;
        match op {
            Op::ReadWrite { aid, delta } => {
                check_updated(c.execute(&st, &[&delta, &aid]).await.map_err(err)?)?;
                let point = c.prepare_cached(POINT_SQL).await.map_err(err)?;
                let row = c.query_one(&point, &[&aid]).await.map_err(err)?;
                row.try_get::<_, i32>(0).map_err(err)?;
                Ok(())
            }
            op => tpg_op(&c, op, [&st, &st, &st, &st, &st, &st]).await,
        }
    }
}
