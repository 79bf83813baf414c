//! One helper, written once against the adapter's `GenericClient`, run on a client, a session,
//! a transaction and a savepoint, on smol, tokio and glommio; on tokio it runs in a spawned
//! task of the multi-thread runtime, which needs its future to be `Send`.

use pgpipe_smol::{Error, GenericClient, GenericTransaction};

/// Statements only: runs on any handle, and is `Send` wherever the handle's futures are.
async fn reads<C: GenericClient>(c: &C, v: i32) -> Result<i32, Error> {
    let row = c.query_one("SELECT $1::int4 + 1", &[&v]).await?;
    let got: i32 = row.get(0);
    let rows = c
        .query_typed("SELECT $1::int4", &[(&got, pgpipe_smol::types::Type::INT4)])
        .await?;
    assert_eq!(rows[0].get::<_, i32>(0), got);
    assert!(c.query_opt("SELECT 1 WHERE false", &[]).await?.is_none());
    Ok(got)
}

/// [`reads`], then a nested scope of `c` that is rolled back: what every kind of handle must
/// do alike.
async fn helper<C: GenericClient>(c: &mut C, v: i32) -> Result<i32, Error> {
    let got = reads(c, v).await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute("SELECT g FROM generate_series(1, $1::int4) g", &[&got])
        .await?;
    assert_eq!(n, got as u64);
    let rows = tx.query("SELECT $1::int4 * 2", &[&got]).await?;
    tx.rollback().await?;
    Ok(rows[0].get(0))
}

/// The helper on the four handles of one client: its results, each `2 * (v + 1)`.
macro_rules! four_handles {
    ($db:expr) => {{
        let mut db = $db;
        let mut out = vec![helper(&mut db, 1).await?];
        let mut s = db.session().await?;
        out.push(helper(&mut s, 2).await?);
        drop(s);
        let mut tx = db.transaction().await?;
        out.push(helper(&mut tx, 3).await?);
        let mut sp = tx.savepoint().await?;
        out.push(helper(&mut sp, 4).await?);
        sp.commit().await?;
        tx.commit().await?;
        db.close().await;
        Ok::<_, Error>(out)
    }};
}

const EXPECTED: [i32; 4] = [4, 6, 8, 10];

#[test]
fn one_helper_runs_on_every_handle_of_smol() {
    let url = pgpipe_tests::shared().url();
    let out = smol::block_on(async { four_handles!(pgpipe_smol::connect(&url).await?) });
    assert_eq!(out.expect("smol"), EXPECTED);
}

#[test]
fn one_helper_runs_on_every_handle_of_tokio_and_in_a_spawned_task() {
    let url = pgpipe_tests::shared().url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let spawned = rt.block_on({
        let url = url.clone();
        async move {
            // `tokio::spawn` requires `Send`: a statements-only helper's future is, on tokio.
            tokio::spawn(async move {
                let db = pgpipe_tokio::connect(&url).await?;
                let got = reads(&db, 41).await?;
                let s = db.session().await?;
                let in_session = reads(&s, 41).await?;
                drop(s);
                db.close().await;
                Ok::<_, Error>((got, in_session))
            })
            .await
            .expect("task")
        }
    });
    assert_eq!(spawned.expect("tokio, spawned"), (42, 42));
    // Nesting through `transaction()` runs on the runtime's own threads (`block_on`): proving
    // `Send` for it would need the compiler to see through the scope's lifetime (see
    // GenericClient's documentation).
    let out = rt.block_on(async move { four_handles!(pgpipe_tokio::connect(&url).await?) });
    assert_eq!(out.expect("tokio"), EXPECTED);
}

#[test]
fn one_helper_runs_on_every_handle_of_glommio() {
    let url = pgpipe_tests::shared().url();
    let out = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { four_handles!(pgpipe_glommio::connect(&url).await?) })
        .expect("glommio executor (io_uring)")
        .join()
        .expect("executor thread");
    assert_eq!(out.expect("glommio"), EXPECTED);
}
