//! What releasing an exclusive connection sends: a reset the server takes without complaint.
//! `ROLLBACK` outside a transaction makes the server log `WARNING: there is no transaction in
//! progress`, so the reset sends it only when a transaction may be open.

use pgpipe_tests::shared;

use crate::{client, psql, Harness};

pub async fn release_rolls_back_only_open_transactions<H: Harness>() {
    let Some(log) = shared().server_log() else {
        eprintln!(
            "skipping release_rolls_back_only_open_transactions: an external server's log \
             cannot be read"
        );
        return;
    };
    let app = format!("pgpipe_reset_{}", H::name());
    let table = format!("reset_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (x int)"
    ));
    // One exclusive connection: every checkout below reuses it after a reset.
    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.application_name = Some(app.clone());
    })
    .await;
    let insert = format!("INSERT INTO {table} VALUES (1)");
    for _ in 0..3 {
        // Sessions that read, and that change session state.
        let s = db.session().await.unwrap();
        s.query_one("SELECT 1", &[]).await.unwrap();
        drop(s);
        let s = db.session().await.unwrap();
        s.batch_execute("SET work_mem = '8MB'; CREATE TEMP TABLE scratch (x int); LISTEN jobs")
            .await
            .unwrap();
        drop(s);
        // Transactions committed, rolled back, failed, and dropped while open.
        let tx = db.transaction().await.unwrap();
        tx.query("SELECT 1", &[]).await.unwrap();
        tx.commit().await.unwrap();
        let tx = db.transaction().await.unwrap();
        tx.rollback().await.unwrap();
        let tx = db.transaction().await.unwrap();
        tx.execute("SELECT 1 / 0", &[]).await.unwrap_err();
        drop(tx);
        let tx = db.transaction().await.unwrap();
        tx.execute(&insert, &[]).await.unwrap();
        drop(tx);
        // A session's own transactions: committed, and dropped together with the session
        // (its queued ROLLBACK ends the transaction; the reset must not send another).
        let mut s = db.session().await.unwrap();
        let t = s.transaction().await.unwrap();
        t.commit().await.unwrap();
        let t = s.transaction().await.unwrap();
        t.execute(&insert, &[]).await.unwrap();
        drop(t);
        drop(s);
        // A transaction the session opened itself and left open.
        let s = db.session().await.unwrap();
        s.batch_execute(&format!("BEGIN; {insert}")).await.unwrap();
        drop(s);
    }
    // Every dropped or abandoned transaction rolled back.
    let n: i64 = db
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "an open transaction was not rolled back on release");
    // Closing drains the last reset; the server has logged whatever it answered by then.
    db.close().await;
    let text = std::fs::read_to_string(log).expect("server log");
    let tag = format!("app={app}:");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&tag) && l.contains("WARNING"))
        .collect();
    assert!(
        warnings.is_empty(),
        "the server logged warnings for this client:\n{}",
        warnings.join("\n")
    );
    // The test sees the lines it filters on (the prefix names the application).
    assert!(
        text.lines()
            .any(|l| l.contains(&tag) && l.contains("division by zero")),
        "no line of this client in the server log"
    );
}
