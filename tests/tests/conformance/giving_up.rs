//! Work given up: abort, a COMMIT whose outcome is unknown (its backend killed, its deadline
//! passed), session work abandoned and cancelled within a bound, a session's statement cancelled
//! by its token or its `query_timeout`, and the timeouts that free
//! resources (`checkout_timeout`, `close_within`, the shared path's `statement_timeout`).

use std::time::Duration;

use pgpipe::{Error, SqlState};

use crate::{client, psql, Harness};

pub async fn abort_fails_everything_at_once<H: Harness>() {
    let db = client::<H>(|c| c.pipeline_size = 2).await;
    db.query("SELECT pg_sleep($1::float8)", &[&0.0f64])
        .await
        .unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let db = db.clone();
            H::spawn(async move { db.query("SELECT pg_sleep($1::float8)", &[&3.0f64]).await })
        })
        .collect();
    crate::wait_until::<H>(|| db.stats().total.in_flight == 20).await;
    let started = std::time::Instant::now();
    db.abort();
    for t in tasks {
        match t.await {
            Err(Error::Indeterminate { .. }) | Err(Error::NotDispatched { .. }) => {}
            other => panic!("expected a typed failure, got {other:?}"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "abort does not wait for the server"
    );
    assert!(db.query("SELECT 1", &[]).await.is_err());
}

pub async fn commit_with_unknown_outcome_is_indeterminate_commit<H: Harness>() {
    let t = format!("tx_slow_commit_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int); \
         CREATE OR REPLACE FUNCTION {t}_fn() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$; \
         CREATE CONSTRAINT TRIGGER {t}_trg AFTER INSERT ON {t} \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {t}_fn();"
    ));
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let tx = db.transaction().await.unwrap();
    let pid: i32 = tx
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    tx.execute(&format!("INSERT INTO {t} VALUES (1)"), &[])
        .await
        .unwrap();
    // Killed while the server runs the COMMIT (its deferred trigger sleeps 2 s).
    let killer = std::thread::spawn(move || {
        let running = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} AND state = 'active' \
             AND query = 'COMMIT'"
        );
        while psql(&running).trim() != "1" {
            std::thread::sleep(Duration::from_millis(10));
        }
        psql(&format!("SELECT pg_terminate_backend({pid})"));
    });
    match tx.commit().await {
        Err(Error::IndeterminateCommit { .. }) => {}
        other => panic!("expected IndeterminateCommit, got {other:?}"),
    }
    killer.join().unwrap();
    // The dead exclusive connection is replaced on the next checkout.
    let s = db.session().await.unwrap();
    s.query("SELECT 1", &[]).await.unwrap();
    drop(s);
    db.close().await;
    a_commit_past_its_deadline_is_indeterminate::<H>().await;
}

/// A COMMIT whose deadline passes may still commit (or be cancelled at release): its outcome
/// is unknown, and the error says so.
async fn a_commit_past_its_deadline_is_indeterminate<H: Harness>() {
    let t = format!("slow_commit_{}", H::name());
    psql(&format!(
        "CREATE TABLE IF NOT EXISTS {t} (id int); \
         CREATE OR REPLACE FUNCTION {t}() RETURNS trigger AS $$ \
         BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$ LANGUAGE plpgsql; \
         DROP TRIGGER IF EXISTS {t} ON {t}; \
         CREATE CONSTRAINT TRIGGER {t} AFTER INSERT ON {t} DEFERRABLE INITIALLY DEFERRED \
         FOR EACH ROW EXECUTE FUNCTION {t}();"
    ));
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.query_timeout = Some(Duration::from_millis(150));
    })
    .await;
    let tx = db.transaction().await.unwrap();
    tx.execute(&format!("INSERT INTO {t} VALUES (1)"), &[])
        .await
        .unwrap();
    // The deferred trigger sleeps at COMMIT, past the deadline.
    match tx.commit().await {
        Err(Error::IndeterminateCommit { reason }) => {
            assert!(reason.contains("query_timeout"), "{reason}")
        }
        other => panic!("expected IndeterminateCommit, got {other:?}"),
    }
    db.close().await;
}

/// A session released while its statement runs: the statement is cancelled, and the next
/// holder gets the connection within seconds (not after the statement's 30 s); a statement that
/// swallows the cancel costs its connection instead, closed after the bound.
pub async fn abandoned_session_work_is_cancelled_within_a_bound<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let s = db.session().await.unwrap();
    let pid: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // Abandon a 30 s statement once it runs (its future is dropped), then the session.
    let sleep = s.execute("SELECT pg_sleep(30)", &[]);
    let abandoned = futures_lite::future::or(async { Some(sleep.await) }, async {
        crate::wait_running::<H>(pid, "pg_sleep(30)").await;
        None
    })
    .await;
    assert!(abandoned.is_none());
    drop(s);
    let started = std::time::Instant::now();
    let s = db.session().await.unwrap();
    let again: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "the next session waited {waited:?}"
    );
    assert_eq!(
        again, pid,
        "the cancel worked: the same connection, not a replacement"
    );
    // A statement that swallows cancels: the bound closes its connection.
    s.batch_execute(&format!(
        "SET client_connection_check_interval = '100ms'; \
         CREATE OR REPLACE FUNCTION pg_temp.stubborn_{0}() RETURNS void AS $$ \
         BEGIN LOOP BEGIN PERFORM pg_sleep(30); \
         EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$ LANGUAGE plpgsql",
        H::name()
    ))
    .await
    .unwrap();
    let call = format!("SELECT pg_temp.stubborn_{}()", H::name());
    let stubborn = s.execute(&call, &[]);
    let abandoned = futures_lite::future::or(async { Some(stubborn.await) }, async {
        crate::wait_running::<H>(pid, "stubborn_").await;
        None
    })
    .await;
    assert!(abandoned.is_none());
    drop(s);
    let s = db.session().await.unwrap();
    let replaced: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_ne!(
        replaced, pid,
        "a backend that ignored its cancel is not handed out again"
    );
    drop(s);
    db.close().await;
}

/// A session's cancel token stops its running statement from another thread (the server's
/// 57014 reaches the caller) and the session goes on, on the same backend; a token does nothing
/// while the session is idle or once it has ended. A statement past `query_timeout` on a session
/// is cancelled on the server, so the next one does not wait for it.
pub async fn a_session_statement_is_cancelled_by_its_token_or_its_timeout<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
        c.max_connections = 2;
    })
    .await;
    let s = db.session().await.unwrap();
    let pid = |r: Result<pgpipe::Row, Error>| r.unwrap().get::<_, i32>(0);
    let backend = pid(s.query_one("SELECT pg_backend_pid()", &[]).await);
    let token = s.cancel_token();
    assert!(!token.cancel(), "nothing running: nothing to cancel");
    let started = std::time::Instant::now();
    let (slept, asked) = futures_lite::future::zip(s.execute("SELECT pg_sleep(30)", &[]), async {
        crate::wait_running::<H>(backend, "pg_sleep(30)").await;
        let token = token.clone();
        std::thread::spawn(move || token.cancel()).join().unwrap()
    })
    .await;
    assert!(asked, "a running statement is cancelled");
    let e = slept.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        pid(s.query_one("SELECT pg_backend_pid()", &[]).await),
        backend,
        "the session goes on, on its own backend"
    );

    // In a transaction too: the transaction fails, the session does not.
    let mut s = s;
    let tx = s.transaction().await.unwrap();
    let tx_token = tx.cancel_token();
    let (slept, asked) = futures_lite::future::zip(tx.execute("SELECT pg_sleep(30)", &[]), async {
        crate::wait_running::<H>(backend, "pg_sleep(30)").await;
        tx_token.cancel()
    })
    .await;
    assert!(asked);
    assert_eq!(slept.unwrap_err().code(), Some(&SqlState::QUERY_CANCELED));
    assert!(matches!(tx.commit().await, Err(Error::RolledBack)));
    drop(s);

    // Once the session has ended its token reaches nobody: the next holder of the same
    // connection runs undisturbed.
    let next = db.session().await.unwrap();
    let (slept, asked) =
        futures_lite::future::zip(next.execute("SELECT pg_sleep(1)", &[]), async {
            crate::wait_running::<H>(backend, "pg_sleep(1)").await;
            token.cancel()
        })
        .await;
    assert!(!asked, "an ended session's token cancels nothing");
    slept.unwrap();
    drop(next);
    db.close().await;

    // A statement past query_timeout on a session is cancelled: the next statement runs at
    // once, on the same backend, instead of waiting 30 s behind it.
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
        c.max_connections = 2;
        c.query_timeout = Some(Duration::from_millis(300));
    })
    .await;
    let s = db.session().await.unwrap();
    let backend = pid(s.query_one("SELECT pg_backend_pid()", &[]).await);
    let started = std::time::Instant::now();
    let e = s.execute("SELECT pg_sleep(30)", &[]).await.unwrap_err();
    assert!(matches!(e, Error::Timeout), "{e:?}");
    assert_eq!(
        pid(s.query_one("SELECT pg_backend_pid()", &[]).await),
        backend,
        "the next statement ran after a cancel, not on a replacement"
    );
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(20), "waited {waited:?}");
    drop(s);
    db.close().await;
}

/// `checkout_timeout` bounds the wait for an exclusive connection and says who holds them;
/// `close_within` ends in-flight work with typed errors after its limit; a shared-path
/// `statement_timeout` fails the statement over it alone and leaves sessions alone.
pub async fn timeouts_free_resources<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 1;
        c.pinned_size = 1;
        c.checkout_timeout = Some(Duration::from_millis(300));
        c.shared_statement_timeout = Some(Duration::from_millis(300));
    })
    .await;
    let held = db.session().await.unwrap();
    // Another task asks (this one would be refused as a recursive checkout).
    let other = {
        let db = db.clone();
        H::spawn(async move { db.session().await.map(|_| ()) })
    };
    match other.await {
        Err(Error::CheckoutTimeout {
            held: 1,
            open: 1,
            limit: 1,
            waiting: 1,
            longest_held: Some(_),
            ..
        }) => {}
        other => panic!("expected a checkout timeout, got {other:?}"),
    }
    // Sessions do not get the shared path's statement_timeout.
    let row = held.query_one("SHOW statement_timeout", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "0");
    drop(held);
    // On the shared path the slow statement fails alone; its neighbours are answered.
    let (slow, fast) = futures_lite::future::zip(
        db.execute("SELECT pg_sleep(2)", &[]),
        db.query_one("SELECT 5", &[]),
    )
    .await;
    assert_eq!(slow.unwrap_err().code(), Some(&SqlState::QUERY_CANCELED));
    assert_eq!(fast.unwrap().get::<_, i32>(0), 5);
    let row = db
        .query_one("SELECT current_setting('statement_timeout')", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "300ms");
    db.close().await;

    // close_within: a unit still running at the limit fails as Indeterminate.
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let slow = {
        let db = db.clone();
        H::spawn(async move { db.execute("SELECT pg_sleep(5)", &[]).await })
    };
    crate::wait_until::<H>(|| db.stats().total.in_flight > 0).await;
    assert!(!db.close_within(Duration::from_millis(200)).await);
    assert!(matches!(slow.await, Err(Error::Indeterminate { .. })));
}
