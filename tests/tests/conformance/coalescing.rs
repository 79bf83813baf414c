//! Sync coalescing: read-only units share a Sync, an error fails only its own unit (the units
//! the server skipped after it are sent again, never reported failed), and a statement with
//! effects never shares one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{client, psql, Db, Harness};

/// Reads that fail (division by zero) exactly when the second parameter is 0.
const READ: &str = "SELECT $1::int8 * 2, 10 / $2::int8";

/// Runs `READ` once per statement so its cost is known (only known-cheap units share a Sync).
async fn warm<H: Harness>(db: &Db<H>) {
    for _ in 0..3 {
        db.query_one(READ, &[&1i64, &1i64]).await.expect("warm-up");
    }
}

/// `tasks` callers × `per_task` reads; every seventh fails. Each answer is checked.
async fn reads_with_errors<H: Harness>(db: &Db<H>, tasks: i64, per_task: i64) {
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let db = db.clone();
            H::spawn(async move {
                for q in 0..per_task {
                    let n = t * 1000 + q;
                    let fails = n % 7 == 3;
                    let divisor = i64::from(!fails);
                    match db.query_one(READ, &[&n, &divisor]).await {
                        Ok(row) if !fails => {
                            assert_eq!(row.get::<_, i64>(0), n * 2);
                            assert_eq!(row.get::<_, i64>(1), 10);
                        }
                        Err(e) if fails => {
                            assert_eq!(e.code().map(|c| c.as_str()), Some("22012"), "{e}")
                        }
                        other => panic!("unit {n} (failing: {fails}) got {other:?}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.await;
    }
}

pub async fn an_error_in_a_shared_sync_fails_only_its_own_unit<H: Harness>() {
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    warm::<H>(&db).await;
    reads_with_errors::<H>(&db, 500, 20).await;
    let s = db.stats().total;
    eprintln!(
        "{}: {} units, {} shared a Sync, {} skipped and sent again, {:.3} ReadyForQuery per unit",
        H::name(),
        s.units_completed,
        s.units_coalesced,
        s.units_resent,
        s.ready_per_unit()
    );
    assert!(s.ready_accounts_for_every_unit(), "{s:?}");
    // 500 callers on one connection keep its pipeline full: units share Syncs, and errors
    // fall in the middle of segments.
    assert!(s.units_coalesced > 0, "nothing shared a Sync: {s:?}");
    assert!(s.units_resent > 0, "no error ever skipped a unit: {s:?}");
    assert_eq!(s.errors_connection, 0);
    db.close().await;
}

pub async fn a_statement_with_effects_never_shares_a_sync<H: Harness>() {
    let name = H::name();
    let table = format!("coalesce_effects_{name}");
    let bump = format!("coalesce_bump_{name}");
    psql(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (id int8 PRIMARY KEY); TRUNCATE {table}; \
         CREATE OR REPLACE FUNCTION {bump}(int8) RETURNS int8 \
         AS 'INSERT INTO {table} VALUES ($1) RETURNING $1' LANGUAGE sql;"
    ));
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    warm::<H>(&db).await;
    let call = format!("SELECT {bump}($1::int8)");
    db.query_one(&call, &[&-1i64]).await.expect("warm-up call");
    let done = Arc::new(AtomicU64::new(1));
    let call: Arc<str> = call.into();
    // Writes between failing reads: were a write to share a Sync with a read after it that
    // fails, its insert would roll back after it was reported done.
    let handles: Vec<_> = (0..400i64)
        .map(|t| {
            let (db, call, done) = (db.clone(), call.clone(), done.clone());
            H::spawn(async move {
                for q in 0..10i64 {
                    let n = t * 1000 + q;
                    if q % 2 == 0 {
                        let row = db.query_one(&call, &[&n]).await.expect("write");
                        assert_eq!(row.get::<_, i64>(0), n);
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let e = db.query_one(READ, &[&n, &0i64]).await.expect_err("fails");
                        assert_eq!(e.code().map(|c| c.as_str()), Some("22012"), "{e}");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.await;
    }
    let row = db
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .expect("count");
    assert_eq!(
        row.get::<_, i64>(0) as u64,
        done.load(Ordering::Relaxed),
        "every write reported done is in the table"
    );
    let s = db.stats().total;
    assert!(s.ready_accounts_for_every_unit(), "{s:?}");
    db.close().await;
}

pub async fn with_coalescing_off_every_unit_has_its_own_sync<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.sync_coalescing = false;
    })
    .await;
    warm::<H>(&db).await;
    reads_with_errors::<H>(&db, 300, 10).await;
    let s = db.stats().total;
    assert_eq!(s.units_coalesced, 0, "{s:?}");
    assert_eq!(s.units_resent, 0, "{s:?}");
    assert_eq!(s.ready_received, s.units_completed, "{s:?}");
    db.close().await;
}
