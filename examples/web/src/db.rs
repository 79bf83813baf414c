//! [`Db`] and [`Conn`] for each client: pgpipe (any runtime), deadpool-postgres, and a few
//! tokio-postgres clients shared round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pgpipe::rt::Runtime;

use crate::app::{checked, plan_update, random_id, Conn, Db, DbError, Fortune, World};

/// The point select of `/db`, `/queries` and `/updates`.
pub const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
/// The read of `/fortunes`.
pub const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// The write of `/updates`: one statement for any number of rows, so one prepared statement
/// serves every `q` (TechEmpower allows "individual update statements that affect multiple
/// rows"; each row is still read by its own query).
pub const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = v.r \
     FROM unnest($1::int4[], $2::int4[]) AS v(id, r) WHERE world.id = v.id";

/// The write of pgpipe's `/updates`, in the same atomic batch as the reads: it cannot know the
/// old numbers when it draws the new ones, so a drawn number equal to the stored one moves on
/// by one, and it returns what it wrote.
pub const UPDATE_WORLDS_RETURNING: &str = "UPDATE world SET randomnumber = \
     CASE WHEN world.randomnumber = v.r THEN v.r % 10000 + 1 ELSE v.r END \
     FROM unnest($1::int4[], $2::int4[]) AS v(id, r) WHERE world.id = v.id \
     RETURNING world.id, world.randomnumber";

fn err(e: impl std::error::Error) -> DbError {
    DbError::from_error(e)
}

// pgpipe: the client is the per-request handle (a clone is a reference count).
impl<R: Runtime> Db for pgpipe::Client<R> {
    type Conn = pgpipe::Client<R>;

    async fn conn(&self) -> Result<Self::Conn, DbError> {
        Ok(self.clone())
    }
}

impl<R: Runtime> Conn for pgpipe::Client<R> {
    async fn world(&self, id: i32) -> Result<World, DbError> {
        world_of(&self.query_one(SELECT_WORLD, &[&id]).await.map_err(err)?)
    }

    async fn fortunes(&self) -> Result<Vec<Fortune>, DbError> {
        let rows = self.query(SELECT_FORTUNES, &[]).await.map_err(err)?;
        rows.iter()
            .map(|r| {
                Ok(Fortune {
                    id: r.try_get(0).map_err(err)?,
                    message: r.try_get(1).map_err(err)?,
                })
            })
            .collect()
    }

    async fn update_worlds(&self, ids: &[i32], numbers: &[i32]) -> Result<u64, DbError> {
        self.execute(UPDATE_WORLDS, &[&ids, &numbers])
            .await
            .map_err(err)
    }

    /// One atomic batch on the shared path: every row's read and the one write, in one
    /// round trip and one implicit transaction.
    async fn read_and_update(&self, n: usize) -> Result<Vec<World>, DbError> {
        let drawn: Vec<i32> = (0..n).map(|_| random_id()).collect();
        let mut worlds: Vec<World> = drawn
            .iter()
            .map(|&id| World {
                id,
                random_number: random_id(),
            })
            .collect();
        let (ids, numbers) = plan_update(&mut worlds);
        let mut batch = self.batch();
        for id in &drawn {
            batch.add(SELECT_WORLD, &[id]);
        }
        batch.add(UPDATE_WORLDS_RETURNING, &[&ids, &numbers]);
        let results = batch.run().await.map_err(err)?;
        for (id, r) in drawn.iter().zip(&results) {
            let row = r
                .rows()
                .first()
                .ok_or_else(|| DbError(format!("no world {id}")))?;
            checked(*id, world_of(row)?)?;
        }
        let written = results.last().map(|r| r.rows()).unwrap_or_default();
        if written.len() != ids.len() {
            return Err(DbError(format!(
                "updated {} rows of {} ids",
                written.len(),
                ids.len()
            )));
        }
        let now: std::collections::HashMap<i32, i32> = written
            .iter()
            .map(|r| world_of(r).map(|w| (w.id, w.random_number)))
            .collect::<Result<_, _>>()?;
        for w in &mut worlds {
            w.random_number = now[&w.id];
        }
        Ok(worlds)
    }
}

fn world_of(row: &pgpipe::Row) -> Result<World, DbError> {
    Ok(World {
        id: row.try_get(0).map_err(err)?,
        random_number: row.try_get(1).map_err(err)?,
    })
}

// deadpool-postgres: one pooled connection per request, statements prepared and cached per
// connection by deadpool (`prepare_cached`).
impl Db for deadpool_postgres::Pool {
    type Conn = deadpool_postgres::Object;

    async fn conn(&self) -> Result<Self::Conn, DbError> {
        self.get().await.map_err(err)
    }
}

impl Conn for deadpool_postgres::Object {
    async fn world(&self, id: i32) -> Result<World, DbError> {
        let st = self.prepare_cached(SELECT_WORLD).await.map_err(err)?;
        let row = self.query_one(&st, &[&id]).await.map_err(err)?;
        tp_world(&row)
    }

    async fn fortunes(&self) -> Result<Vec<Fortune>, DbError> {
        let st = self.prepare_cached(SELECT_FORTUNES).await.map_err(err)?;
        let rows = self.query(&st, &[]).await.map_err(err)?;
        rows.iter().map(tp_fortune).collect()
    }

    async fn update_worlds(&self, ids: &[i32], numbers: &[i32]) -> Result<u64, DbError> {
        let st = self.prepare_cached(UPDATE_WORLDS).await.map_err(err)?;
        self.execute(&st, &[&ids, &numbers]).await.map_err(err)
    }
}

fn tp_world(row: &tokio_postgres::Row) -> Result<World, DbError> {
    Ok(World {
        id: row.try_get(0).map_err(err)?,
        random_number: row.try_get(1).map_err(err)?,
    })
}

fn tp_fortune(row: &tokio_postgres::Row) -> Result<Fortune, DbError> {
    Ok(Fortune {
        id: row.try_get(0).map_err(err)?,
        message: row.try_get(1).map_err(err)?,
    })
}

/// One tokio-postgres connection with the endpoints' statements prepared on it.
pub struct PgConn {
    client: tokio_postgres::Client,
    world: tokio_postgres::Statement,
    fortunes: tokio_postgres::Statement,
    update: tokio_postgres::Statement,
}

/// A few tokio-postgres clients shared by all requests, a request's statements all on the
/// next client in turn (tokio-postgres pipelines concurrent statements on one connection).
pub struct PgShared {
    conns: Vec<Arc<PgConn>>,
    next: AtomicUsize,
}

impl PgShared {
    /// Opens `n` connections (at least one) with `config` and prepares the statements on each;
    /// must run inside a tokio runtime (each connection's task is spawned on it).
    pub async fn connect(config: &tokio_postgres::Config, n: usize) -> Result<PgShared, DbError> {
        let mut conns = Vec::new();
        for _ in 0..n.max(1) {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await.map_err(err)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!("pgpipe-web: tokio-postgres connection ended: {e}");
                }
            });
            let world = client.prepare(SELECT_WORLD).await.map_err(err)?;
            let fortunes = client.prepare(SELECT_FORTUNES).await.map_err(err)?;
            let update = client.prepare(UPDATE_WORLDS).await.map_err(err)?;
            conns.push(Arc::new(PgConn {
                client,
                world,
                fortunes,
                update,
            }));
        }
        Ok(PgShared {
            conns,
            next: AtomicUsize::new(0),
        })
    }
}

impl Db for PgShared {
    type Conn = Arc<PgConn>;

    async fn conn(&self) -> Result<Self::Conn, DbError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        Ok(self.conns[i].clone())
    }
}

impl Conn for Arc<PgConn> {
    async fn world(&self, id: i32) -> Result<World, DbError> {
        let row = self
            .client
            .query_one(&self.world, &[&id])
            .await
            .map_err(err)?;
        tp_world(&row)
    }

    async fn fortunes(&self) -> Result<Vec<Fortune>, DbError> {
        let rows = self.client.query(&self.fortunes, &[]).await.map_err(err)?;
        rows.iter().map(tp_fortune).collect()
    }

    async fn update_worlds(&self, ids: &[i32], numbers: &[i32]) -> Result<u64, DbError> {
        self.client
            .execute(&self.update, &[&ids, &numbers])
            .await
            .map_err(err)
    }
}
