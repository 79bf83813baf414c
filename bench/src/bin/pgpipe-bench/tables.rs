//! The tables the runs read, created and filled before the first run: the accounts table and
//! the COPY source (with the empty table COPY in fills).

use std::sync::Arc;

use crate::engine::bulk;

/// Creates and fills `pgpipe_bench_accounts` (pgbench_accounts' shape, its own name so a real
/// pgbench table is never touched) unless it already holds exactly `rows` rows. The DDL goes
/// through an exclusive pgpipe session: the shared path's guard refuses DDL.
pub(crate) fn load_accounts(base: &pgpipe::Config, rows: i32) -> Result<(), String> {
    let ex = Arc::new(async_executor::Executor::new());
    let e = |e: pgpipe::Error| format!("loading the accounts table: {e}");
    async_io::block_on(ex.run(async {
        let mut cfg = base.clone();
        cfg.pipeline_size = 1;
        cfg.application_name = Some("pgpipe-bench-setup".into());
        let db = pgpipe::Client::connect(pgpipe_smol::SmolRuntime::on(ex.clone()), cfg)
            .await
            .map_err(e)?;
        let s = db.session().await.map_err(e)?;
        let exists: bool = s
            .query_one(
                "SELECT to_regclass('pgpipe_bench_accounts') IS NOT NULL",
                &[],
            )
            .await
            .map_err(e)?
            .get(0);
        let have: i64 = if exists {
            s.query_one("SELECT count(*) FROM pgpipe_bench_accounts", &[])
                .await
                .map_err(e)?
                .get(0)
        } else {
            -1
        };
        if have != i64::from(rows) {
            eprintln!("pgpipe-bench: loading {rows} accounts");
            s.batch_execute(&format!(
                "DROP TABLE IF EXISTS pgpipe_bench_accounts;
                 CREATE TABLE pgpipe_bench_accounts (
                     aid int4 NOT NULL, bid int4 NOT NULL, abalance int4 NOT NULL, filler char(84)
                 ) WITH (fillfactor = 100);
                 INSERT INTO pgpipe_bench_accounts
                     SELECT g, (g - 1) / 100000 + 1, 0, '' FROM generate_series(1, {rows}) g;
                 ALTER TABLE pgpipe_bench_accounts ADD PRIMARY KEY (aid);"
            ))
            .await
            .map_err(e)?;
            s.batch_execute("VACUUM ANALYZE pgpipe_bench_accounts")
                .await
                .map_err(e)?;
        }
        drop(s);
        db.close().await;
        Ok(())
    }))
}

/// Creates `pgpipe_bench_copy_src` with `rows` generated rows (what COPY out and the stream
/// read) and an empty `pgpipe_bench_copy_in` (what COPY in fills), unless the source already
/// holds exactly `rows` rows.
pub(crate) fn load_copy_source(base: &pgpipe::Config, rows: u64) -> Result<(), String> {
    let ex = Arc::new(async_executor::Executor::new());
    let e = |e: pgpipe::Error| format!("loading the COPY source table: {e}");
    async_io::block_on(ex.run(async {
        let mut cfg = base.clone();
        cfg.pipeline_size = 1;
        cfg.application_name = Some("pgpipe-bench-setup".into());
        let db = pgpipe::Client::connect(pgpipe_smol::SmolRuntime::on(ex.clone()), cfg)
            .await
            .map_err(e)?;
        let s = db.session().await.map_err(e)?;
        let sql = format!(
            "SELECT to_regclass('{}') IS NOT NULL AND to_regclass('{}') IS NOT NULL",
            bulk::SOURCE_TABLE,
            bulk::TARGET_TABLE
        );
        let exists: bool = s.query_one(&sql, &[]).await.map_err(e)?.get(0);
        let have: i64 = if exists {
            let sql = format!("SELECT count(*) FROM {}", bulk::SOURCE_TABLE);
            s.query_one(&sql, &[]).await.map_err(e)?.get(0)
        } else {
            -1
        };
        if u64::try_from(have).ok() != Some(rows) {
            eprintln!("pgpipe-bench: loading {rows} rows to COPY out and stream");
            s.batch_execute(&bulk::load_sql(rows)).await.map_err(e)?;
            s.batch_execute(&format!("VACUUM ANALYZE {}", bulk::SOURCE_TABLE))
                .await
                .map_err(e)?;
        }
        drop(s);
        db.close().await;
        Ok(())
    }))
}
