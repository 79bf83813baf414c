//! The connection service: the guard on the shared path, exclusive sessions and transactions,
//! and what a released session keeps. Routing is in `routing.rs`, backpressure in
//! `backpressure.rs`, work given up (abort, timeouts, cancels) in `giving_up.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pgpipe::{Error, SqlState};

use crate::{client, key, psql, Harness};

pub async fn a_refused_statement_never_reaches_the_server<H: Harness>() {
    let app = format!("pgpipe-guard-{}-{}", std::process::id(), H::name());
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.application_name = Some(app.clone());
    })
    .await;
    let before = db.stats().total.bytes_out;
    for sql in [
        "SET application_name = 'leak'".to_owned(),
        "SELECT set_config('application_name', 'leak', false)".to_owned(),
        "SELECT 1; SET application_name = 'leak'".to_owned(),
        "select pg_catalog.set_config/* hidden */('application_name', 'leak', false)".to_owned(),
    ] {
        match db.query(&sql, &[]).await {
            Err(Error::Refused(r)) => {
                let msg = Error::Refused(r).to_string();
                assert!(
                    msg.contains("session()") || msg.contains("transaction()"),
                    "{msg}"
                );
            }
            other => panic!("{sql}: expected a refusal, got {other:?}"),
        }
        // The typed path (caller-supplied parameter types) is the shared path too.
        match db.query_typed(&sql, &[]).await {
            Err(Error::Refused(_)) => {}
            other => panic!("{sql} (typed): expected a refusal, got {other:?}"),
        }
    }
    // search_path is not reported by the server, so only the guard can keep it off.
    let e = db
        .query_typed("SET search_path TO pg_catalog", &[])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Refused(_)), "{e:?}");
    assert_eq!(db.stats().total.bytes_out, before, "nothing was sent");
    let seen = psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'leak'");
    assert_eq!(seen.trim(), "0");
    let mine = psql(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'"
    ));
    assert_eq!(mine.trim(), "1", "the shared connection kept its own name");
    db.close().await;
}

pub async fn session_state_never_leaks_to_the_shared_path_or_the_next_session<H: Harness>() {
    let app: Arc<str> = format!("pgpipe-leak-test-{}", H::name()).into();
    // Advisory locks go in this adapter's key space (two-int4 form: classid = space,
    // objid = i), so parallel instances neither contend nor see each other's locks.
    let space = key::<H>();
    let db = client::<H>(|c| {
        c.pipeline_size = 2;
        c.pinned_size = 4;
        c.max_connections = 2; // exclusive connections: the 4 of pinned_size, no more
        c.application_name = Some(app.to_string());
    })
    .await;
    let default_path = db
        .query_one("SELECT current_setting('search_path')", &[])
        .await
        .unwrap()
        .get::<_, String>(0);
    let leaks = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..1000i32)
        .map(|i| {
            let (db, leaks, default_path, app) =
                (db.clone(), leaks.clone(), default_path.clone(), app.clone());
            H::spawn(async move {
                if i % 2 == 0 {
                    let s = db.session().await.expect("session");
                    // What the previous holder did must be gone.
                    let r = s
                        .query_one(
                            "SELECT current_setting('search_path'), current_setting('application_name'), \
                             to_regclass('pg_temp.mine') IS NULL",
                            &[],
                        )
                        .await
                        .unwrap();
                    if r.get::<_, String>(0) != default_path
                        || r.get::<_, String>(1) != *app
                        || !r.get::<_, bool>(2)
                    {
                        leaks.fetch_add(1, Ordering::Relaxed);
                    }
                    s.batch_execute(&format!(
                        "SET search_path = leak_{i}, public; SET application_name = 'leak_{i}'; \
                         CREATE TEMP TABLE mine (x int); SELECT pg_advisory_lock({space}, {i})"
                    ))
                    .await
                    .expect("session statements");
                    // The session sees its own state.
                    let r = s
                        .query_one("SELECT current_setting('application_name')", &[])
                        .await
                        .unwrap();
                    assert_eq!(r.get::<_, String>(0), format!("leak_{i}"));
                } else {
                    let r = db
                        .query_one(
                            "SELECT current_setting('search_path'), current_setting('application_name'), \
                             pg_my_temp_schema()::int8",
                            &[],
                        )
                        .await
                        .unwrap();
                    if r.get::<_, String>(0) != default_path
                        || r.get::<_, String>(1) != *app
                        || r.get::<_, i64>(2) != 0
                    {
                        leaks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    assert_eq!(leaks.load(Ordering::Relaxed), 0, "session state leaked");
    let (open, held) = db.pinned_counts();
    assert!(open <= 4 && held == 0, "open={open} held={held}");
    // Advisory locks taken in sessions were released by the reset.
    let s = db.session().await.unwrap();
    drop(s);
    db.close().await;
    let locks = psql(&format!(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
         AND classid = {space}::oid AND objsubid = 2"
    ));
    assert_eq!(locks.trim(), "0");
}

pub async fn concurrent_transfers_keep_the_total<H: Harness>() {
    let table: Arc<str> = format!("tx_accounts_{}", H::name()).into();
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; \
         CREATE TABLE {table} (id int PRIMARY KEY, balance int8 NOT NULL); \
         INSERT INTO {table} SELECT g, 1000 FROM generate_series(1, 20) g;"
    ));
    let db = client::<H>(|c| c.pinned_size = 4).await;
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let (db, table) = (db.clone(), table.clone());
            H::spawn(async move {
                let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                x ^= x >> 29;
                let a = (x % 20) as i32 + 1;
                let b = ((x / 20) % 19) as i32 + 1;
                let b = if b >= a { b + 1 } else { b };
                let amount = (x % 50) as i64 + 1;
                let tx = db.transaction().await.expect("begin");
                // Lock rows in id order so concurrent transfers cannot deadlock.
                let (first, second) = if a < b { (a, b) } else { (b, a) };
                let update = format!("UPDATE {table} SET balance = balance + $1 WHERE id = $2");
                for id in [first, second] {
                    let delta = if id == a { -amount } else { amount };
                    tx.execute(&update, &[&delta, &id]).await.expect("update");
                }
                if i % 7 == 0 {
                    tx.rollback().await.expect("rollback");
                } else if i % 11 == 0 {
                    drop(tx); // dropped without commit: rolled back
                } else {
                    tx.commit().await.expect("commit");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    let total = db
        .query_one(&format!("SELECT sum(balance)::int8 FROM {table}"), &[])
        .await
        .unwrap();
    assert_eq!(total.get::<_, i64>(0), 20_000);
    db.close().await;
}

pub async fn errors_and_drops_roll_back_and_the_connection_comes_back_clean<H: Harness>() {
    let t = format!("tx_items_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int PRIMARY KEY);"
    ));
    let insert = |id: i32| format!("INSERT INTO {t} VALUES ({id})");
    let db = client::<H>(|c| c.pinned_size = 1).await;
    // An error inside the transaction: COMMIT reports the rollback.
    let tx = db.transaction().await.unwrap();
    tx.execute(&insert(1), &[]).await.unwrap();
    let e = tx.execute("SELECT 1 / 0", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO));
    assert!(matches!(tx.commit().await, Err(Error::RolledBack)));
    // Dropped without commit.
    let tx = db.transaction().await.unwrap();
    tx.execute(&insert(2), &[]).await.unwrap();
    tx.batch_execute("SET LOCAL statement_timeout = 1234; PREPARE mine AS SELECT 1")
        .await
        .unwrap();
    drop(tx);
    // The same (only) exclusive connection, clean for the next user.
    let s = db.session().await.unwrap();
    let r = s
        .query_one(
            &format!(
                "SELECT (SELECT count(*) FROM {t}), current_setting('statement_timeout'), \
                 (SELECT count(*) FROM pg_prepared_statements WHERE name = 'mine')"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 0, "nothing committed");
    assert_eq!(r.get::<_, String>(1), "0");
    assert_eq!(r.get::<_, i64>(2), 0, "DISCARD ALL ran");
    // SAVEPOINT outside a transaction block is an error: the dropped transaction is gone.
    let e = s.batch_execute("SAVEPOINT probe").await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::NO_ACTIVE_SQL_TRANSACTION), "{e}");
    drop(s);
    // Savepoints nest and roll back on their own.
    let mut tx = db.transaction().await.unwrap();
    tx.execute(&insert(10), &[]).await.unwrap();
    {
        let mut sp = tx.savepoint().await.unwrap();
        sp.execute(&insert(11), &[]).await.unwrap();
        {
            let inner = sp.savepoint().await.unwrap();
            inner.execute(&insert(12), &[]).await.unwrap();
            inner.rollback().await.unwrap();
        }
        sp.commit().await.unwrap();
    }
    {
        let sp = tx.savepoint().await.unwrap();
        sp.execute(&insert(13), &[]).await.unwrap();
        // dropped: rolled back to the savepoint
    }
    tx.commit().await.unwrap();
    let ids: Vec<i32> = db
        .query(&format!("SELECT id FROM {t} ORDER BY id"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![10, 11]);
    db.close().await;
}

pub async fn a_checkout_that_would_wait_for_itself_is_refused<H: Harness>() {
    let db = client::<H>(|c| {
        // One exclusive connection at most: no budget beyond the base to borrow.
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
    })
    .await;
    let s = db.session().await.unwrap();
    assert!(matches!(
        db.transaction().await,
        Err(Error::RecursiveCheckout)
    ));
    assert!(matches!(db.session().await, Err(Error::RecursiveCheckout)));
    drop(s);
    let s2 = db.session().await.unwrap();
    s2.query("SELECT 1", &[]).await.unwrap();
    drop(s2);
    db.close().await;
}

pub async fn listen_delivers_notifications_to_the_session<H: Harness>() {
    let channel = format!("pgpipe_events_{}", H::name());
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let s = db.session().await.unwrap();
    s.batch_execute(&format!("LISTEN {channel}")).await.unwrap();
    for i in 0..3 {
        db.query(
            "SELECT pg_notify($1, $2)",
            &[&channel, &format!("event-{i}")],
        )
        .await
        .unwrap();
    }
    for i in 0..3 {
        let n = s.next_notification().await.unwrap();
        assert_eq!(n.channel, channel);
        assert_eq!(n.payload, format!("event-{i}"));
    }
    assert!(s.try_next_notification().is_none());
    // Notifications the holder left unread are its own: the next holder of the same
    // connection sees none of them.
    // (Two in one transaction reach the connection in one write, so the second is queued once
    // the first is read.)
    let pid: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    db.query(
        "SELECT pg_notify($1, 'read'), pg_notify($1, 'unread')",
        &[&channel],
    )
    .await
    .unwrap();
    assert_eq!(s.next_notification().await.unwrap().payload, "read");
    drop(s);
    let s = db.session().await.unwrap();
    let again: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, pid, "the same connection");
    assert!(s.try_next_notification().is_none(), "the previous holder's");
    assert_eq!(s.notifications_dropped(), 0);
    drop(s);
    db.close().await;
}

/// Notices reach the holder whose statements drew them, in order, from the simple and the
/// extended protocol, in sessions and transactions; bounded; none reaches the next holder.
pub async fn notices_reach_their_holder_and_no_one_else<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let s = db.session().await.unwrap();
    assert!(s.try_next_notice().is_none());
    // The suite fails a test whose server logs a WARNING; this one is meant.
    s.batch_execute("SET log_min_messages = error")
        .await
        .unwrap();
    s.batch_execute(
        "DO $$ BEGIN RAISE NOTICE 'hello %', 1; \
         RAISE WARNING 'careful' USING HINT = 'look'; END $$",
    )
    .await
    .unwrap();
    let n = s.try_next_notice().unwrap();
    assert_eq!((n.severity(), n.message()), ("NOTICE", "hello 1"));
    assert_eq!(n.code().as_str(), "00000");
    let w = s.try_next_notice().unwrap();
    assert_eq!((w.severity(), w.message()), ("WARNING", "careful"));
    assert_eq!((w.code().as_str(), w.hint()), ("01000", Some("look")));
    assert!(s.try_next_notice().is_none());
    // From a statement with parameters (the extended protocol).
    s.batch_execute(
        "CREATE FUNCTION pg_temp.noisy(n int) RETURNS int LANGUAGE plpgsql AS \
         $$ BEGIN RAISE NOTICE 'noisy %', n; RETURN n; END $$",
    )
    .await
    .unwrap();
    let r: i32 = s
        .query_one("SELECT pg_temp.noisy($1)", &[&7i32])
        .await
        .unwrap()
        .get(0);
    assert_eq!(r, 7);
    assert_eq!(s.try_next_notice().unwrap().message(), "noisy 7");
    // Bounded: the oldest go first.
    s.batch_execute("DO $$ BEGIN FOR i IN 1..1500 LOOP RAISE NOTICE '%', i; END LOOP; END $$")
        .await
        .unwrap();
    assert_eq!(s.notices_dropped(), 500);
    assert_eq!(s.try_next_notice().unwrap().message(), "501");
    // Left untaken: the next holder of the same connection sees none of them.
    let pid: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    drop(s);
    let tx = db.transaction().await.unwrap();
    let again: i32 = tx
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, pid, "the same connection");
    assert!(tx.try_next_notice().is_none(), "the previous holder's");
    assert_eq!(tx.notices_dropped(), 0);
    tx.batch_execute("DO $$ BEGIN RAISE NOTICE 'in a transaction'; END $$")
        .await
        .unwrap();
    assert_eq!(tx.try_next_notice().unwrap().message(), "in a transaction");
    tx.commit().await.unwrap();
    db.close().await;
}

/// The release resets what a session changed but keeps the connection's own prepared
/// statements, so the next holder does not prepare them again; statements the session
/// prepared with SQL are gone, and a session's own `DEALLOCATE ALL` is survived.
pub async fn release_keeps_cached_statements_and_nothing_else<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let k = key::<H>() ^ 0x7e5e;
    let s = db.session().await.unwrap();
    let pid: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        s.query_one("SELECT $1::int4 + 1", &[&1i32])
            .await
            .unwrap()
            .get::<_, i32>(0),
        2
    );
    s.batch_execute(&format!(
        "PREPARE mine AS SELECT 1; SET work_mem = '7MB'; CREATE TEMP TABLE kept_{0} (x int); \
         LISTEN chan_{0}; SELECT pg_advisory_lock({k})",
        H::name()
    ))
    .await
    .unwrap();
    drop(s);
    let s = db.session().await.unwrap();
    let again: i32 = s
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        again, pid,
        "the same connection, reset rather than replaced"
    );
    let count = |from_sql: bool| {
        let s = &s;
        async move {
            s.query_one(
                "SELECT count(*) FROM pg_prepared_statements WHERE from_sql = $1",
                &[&from_sql],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    assert_eq!(count(true).await, 0, "the session's PREPARE is gone");
    let ours = count(false).await;
    assert!(ours >= 2, "cached statements survive the reset: {ours}");
    assert_eq!(
        s.query_one("SELECT $1::int4 + 1", &[&2i32])
            .await
            .unwrap()
            .get::<_, i32>(0),
        3
    );
    assert_eq!(count(false).await, ours, "no statement was prepared again");
    let row = s
        .query_one(
            &format!(
                "SELECT current_setting('work_mem'), to_regclass('pg_temp.kept_{}') IS NULL, \
                 (SELECT count(*) FROM pg_listening_channels()), \
                 (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())",
                H::name()
            ),
            &[],
        )
        .await
        .unwrap();
    assert_ne!(row.get::<_, String>(0), "7MB");
    assert!(row.get::<_, bool>(1), "the temp table is gone");
    assert_eq!(row.get::<_, i64>(2), 0, "no LISTEN left");
    assert_eq!(row.get::<_, i64>(3), 0, "no advisory lock left");
    // A session that deallocates everything itself: cached statements are prepared again.
    s.batch_execute("DEALLOCATE ALL").await.unwrap();
    assert_eq!(
        s.query_one("SELECT $1::int4 + 1", &[&3i32])
            .await
            .unwrap()
            .get::<_, i32>(0),
        4
    );
    drop(s);
    db.close().await;
}
