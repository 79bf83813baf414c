//! The connection service: the guard on the shared path, exclusive sessions and transactions,
//! backpressure, routing around a slow connection, abort.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    drop(s);
    db.close().await;
}

pub async fn a_slow_query_does_not_stall_callers_routed_elsewhere<H: Harness>() {
    let db = client::<H>(|c| c.pipeline_size = 2).await;
    db.query("SELECT $1::int4", &[&0i32]).await.unwrap();
    let slow_done = Arc::new(AtomicBool::new(false));
    let slow = {
        let (db, slow_done) = (db.clone(), slow_done.clone());
        H::spawn(async move {
            let r = db.query("SELECT pg_sleep(2)", &[]).await.map(|_| ());
            slow_done.store(true, Ordering::SeqCst);
            r
        })
    };
    crate::wait_until::<H>(|| db.stats().total.in_flight > 0).await;
    let started = std::time::Instant::now();
    for i in 0..200i32 {
        let r = db.query_one("SELECT $1::int4", &[&i]).await.unwrap();
        assert_eq!(r.get::<_, i32>(0), i);
    }
    // All 200 finished while the slow statement still held the other connection.
    assert!(
        !slow_done.load(Ordering::SeqCst),
        "fast callers waited for the slow one ({:?})",
        started.elapsed()
    );
    slow.await.unwrap();
    db.close().await;
}

/// Cost-aware routing: once a statement is known to be slow, concurrent fast units go to the
/// connection with less estimated work ahead, even when counting units would send some of them
/// behind the slow one.
pub async fn fast_units_are_not_routed_behind_a_known_slow_one<H: Harness>() {
    // Routing alone: no lanes to isolate the slow statement.
    let db = client::<H>(|c| {
        c.pipeline_size = 2;
        c.max_connections = 2;
    })
    .await;
    let slow_sql = "SELECT pg_sleep($1::float8)";
    let fast_sql = "SELECT $1::int4";
    // Learn the estimates: the slow text takes ~0.3 s on whichever connection runs it (until
    // its estimate, which at most doubles per sample, is over 200 ms), and the fast text is
    // prepared on both (two concurrent callers take both connections). The margin matters on a
    // loaded machine, where the fast text's estimate swings to milliseconds: 30 of them must
    // still add up to less than the slow one.
    while estimate::<H>(&db, slow_sql) < Duration::from_millis(200) {
        let (a, b) = futures_lite::future::zip(
            db.query(slow_sql, &[&0.3f64]),
            db.query(slow_sql, &[&0.3f64]),
        )
        .await;
        a.unwrap();
        b.unwrap();
        let (a, b) =
            futures_lite::future::zip(db.query(fast_sql, &[&0i32]), db.query(fast_sql, &[&0i32]))
                .await;
        a.unwrap();
        b.unwrap();
    }
    assert_eq!(
        db.statement_estimates()
            .iter()
            .filter(|(_, sql, _)| sql == fast_sql)
            .count(),
        2,
        "the fast text is prepared on both connections"
    );
    let known = db.statement_estimates();
    assert!(
        known
            .iter()
            .filter(|(_, sql, _)| sql == slow_sql)
            .all(|(_, _, e)| e.is_some_and(|e| e >= Duration::from_millis(200))),
        "{known:?}"
    );
    let slow_done = Arc::new(AtomicBool::new(false));
    let slow = {
        let (db, slow_done) = (db.clone(), slow_done.clone());
        H::spawn(async move {
            let r = db.query(slow_sql, &[&2.0f64]).await.map(|_| ());
            slow_done.store(true, Ordering::SeqCst);
            r
        })
    };
    crate::wait_until::<H>(|| db.stats().total.in_flight > 0).await;
    assert!(db.stats().connections.iter().any(|c| c.est_pending_ns > 0));
    // 30 fast units at once: by unit count, about a third would join the slow connection's
    // queue; by expected cost, all go to the other.
    let fast: Vec<_> = (0..30i32)
        .map(|i| {
            let db = db.clone();
            H::spawn(async move {
                let r = db.query_one(fast_sql, &[&i]).await.unwrap();
                assert_eq!(r.get::<_, i32>(0), i);
            })
        })
        .collect();
    for f in fast {
        f.await;
    }
    assert!(
        !slow_done.load(Ordering::SeqCst),
        "a fast unit waited behind the slow one"
    );
    slow.await.unwrap();
    db.close().await;
}

/// The highest estimate of `sql` on any connection (zero before it has completed once).
fn estimate<H: Harness>(db: &crate::Db<H>, sql: &str) -> Duration {
    db.statement_estimates()
        .into_iter()
        .filter(|(_, s, _)| s == sql)
        .filter_map(|(_, _, e)| e)
        .max()
        .unwrap_or_default()
}

const LOCK: &str = "SELECT pg_advisory_lock($1::int4, $2::int4)";
const UNLOCK: &str = "SELECT pg_advisory_unlock($1::int4, $2::int4)";

/// Teaches the client that `slow_sql` (an advisory-lock wait on `key`, with an int4 tag as
/// third parameter when `tagged`) is slow: while its estimate is under the 10 ms threshold,
/// runs go to the base connection, each held for 40 ms by the lock `holder` takes (the
/// estimate may at most double per sample).
async fn learn_slow<H: Harness>(
    db: &crate::Db<H>,
    holder: &pgpipe::Session<H::Rt>,
    (space, id): (i32, i32),
    slow_sql: &'static str,
    tagged: bool,
) {
    while estimate::<H>(db, slow_sql) < Duration::from_millis(10) {
        holder.query(LOCK, &[&space, &id]).await.unwrap();
        let run = {
            let db = db.clone();
            H::spawn(async move {
                match tagged {
                    true => db.query(slow_sql, &[&space, &id, &0i32]).await,
                    false => db.query(slow_sql, &[&space, &id]).await,
                }
                .map(|_| ())
            })
        };
        H::sleep(Duration::from_millis(40)).await;
        holder.query(UNLOCK, &[&space, &id]).await.unwrap();
        run.await.unwrap();
    }
}

pub async fn slow_statements_get_lanes_that_retire_when_idle<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 5; // 1 base, 2 lanes, 2 kept for exclusive connections
        c.slow_threshold = Duration::from_millis(10);
        c.idle_timeout = Duration::from_millis(300);
    })
    .await;
    // The slow statement waits for an advisory lock a session holds, so "slow" is decided by
    // the test, not by the machine's speed.
    // A key space of its own: the leak test counts every lock in this adapter's `key`.
    let (space, id) = (key::<H>() ^ 0x0100_0000, 7001i32);
    let slow_sql = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)";
    let fast_sql = "SELECT $1::int4";
    let holder = db.session().await.unwrap();
    learn_slow::<H>(&db, &holder, (space, id), slow_sql, false).await;
    assert_eq!(db.stats().open_lanes, 0);
    // Known slow now: two runs each get a lane while the base connection stays free.
    holder.query(LOCK, &[&space, &id]).await.unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let (db, done) = (db.clone(), done.clone());
            H::spawn(async move {
                let r = db.query(slow_sql, &[&space, &id]).await.map(|_| ());
                done.fetch_add(1, Ordering::SeqCst);
                r
            })
        })
        .collect();
    crate::wait_until::<H>(|| db.stats().total.lane_units == 2).await;
    for i in 0..50i32 {
        let r = db.query_one(fast_sql, &[&i]).await.unwrap();
        assert_eq!(r.get::<_, i32>(0), i);
    }
    assert_eq!(done.load(Ordering::SeqCst), 0, "the lock is still held");
    let s = db.stats();
    assert!((1..=2).contains(&s.open_lanes), "{s:?}");
    assert_eq!(s.open_base, 1);
    assert_eq!(
        s.connections[0].lane_units, 0,
        "no slow unit on the base connection"
    );
    holder.query(UNLOCK, &[&space, &id]).await.unwrap();
    for t in slow {
        t.await.unwrap();
    }
    drop(holder);
    // Unused lanes close after idle_timeout; the base connection stays.
    crate::wait_until::<H>(|| db.stats().open_lanes == 0).await;
    let s = db.stats();
    assert_eq!(s.total.retired_idle, s.total.opened_on_demand, "{s:?}");
    assert_eq!(s.open_base, 1);
    // And a lane opens again when a slow statement comes back.
    db.query(slow_sql, &[&space, &id]).await.unwrap();
    let again = db.stats();
    assert_eq!(again.total.opened_on_demand, s.total.opened_on_demand + 1);
    db.close().await;
    assert_eq!(db.live_connections(), 0);
}

/// Slow work spills: once every lane has a slow unit queued behind its running one, the next
/// slow unit runs on a base connection without slow work instead of queueing on a lane (where
/// it would wait behind two); a base connection takes one such unit at a time.
pub async fn slow_statements_spill_to_the_base_when_every_lane_has_a_queue<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 5; // 1 base, 2 lanes, 2 kept for exclusive connections
        c.slow_threshold = Duration::from_millis(10);
    })
    .await;
    let (space, id) = (key::<H>() ^ 0x0200_0000, 7002i32);
    let slow_sql = "SELECT pg_advisory_xact_lock($1::int4, $2::int4), $3::int4";
    let holder = db.session().await.unwrap();
    learn_slow::<H>(&db, &holder, (space, id), slow_sql, true).await;
    holder.query(LOCK, &[&space, &id]).await.unwrap();
    let load = |i: usize| {
        let c = &db.stats().connections[i];
        c.in_flight + c.queued
    };
    // One at a time, each placed before the next comes: two lanes open and run one each, then
    // each gets one queued behind it.
    let mut slow = Vec::new();
    for n in 1..=6i32 {
        let db2 = db.clone();
        slow.push(H::spawn(async move {
            let row = db2.query_one(slow_sql, &[&space, &id, &n]).await.unwrap();
            assert_eq!(row.get::<_, i32>(1), n);
        }));
        match n {
            1..=4 => crate::wait_until::<H>(|| db.stats().total.lane_units == n as u64).await,
            // Both lanes hold two: the base connection is sooner.
            5 => crate::wait_until::<H>(|| load(0) == 1).await,
            // The base connection has slow work now: back to a lane.
            _ => crate::wait_until::<H>(|| db.stats().total.lane_units == 5).await,
        }
    }
    let s = db.stats();
    assert_eq!(s.open_lanes, 2, "{s:?}");
    assert_eq!(
        load(0),
        1,
        "one slow unit at a time on the base connection: {s:?}"
    );
    assert_eq!(s.connections[0].lane_units, 0);
    holder.query(UNLOCK, &[&space, &id]).await.unwrap();
    for t in slow {
        t.await;
    }
    drop(holder);
    db.close().await;
}

pub async fn fast_units_wait_while_every_lane_has_a_queue<H: Harness>() {
    for fair in [false, true] {
        let db = client::<H>(|c| {
            c.pipeline_size = 2;
            c.max_connections = 5; // 2 base, 1 lane, 2 kept for exclusive connections
            c.slow_threshold = Duration::from_millis(10);
            c.fair_lanes = fair;
        })
        .await;
        let (space, id) = (key::<H>() ^ 0x0400_0000, 7004i32 + i32::from(fair));
        let slow_sql = "SELECT pg_advisory_xact_lock($1::int4, $2::int4), $3::int4";
        let holder = db.session().await.unwrap();
        learn_slow::<H>(&db, &holder, (space, id), slow_sql, true).await;
        holder.query(LOCK, &[&space, &id]).await.unwrap();
        // The lane runs one and queues one; one spills to a base connection (see the test
        // above), so the other base connection is clean.
        let mut slow = Vec::new();
        for n in 1..=3i32 {
            let db2 = db.clone();
            slow.push(H::spawn(async move {
                let row = db2.query_one(slow_sql, &[&space, &id, &n]).await.unwrap();
                assert_eq!(row.get::<_, i32>(1), n);
            }));
            let units = |db: &crate::Db<H>| {
                let s = db.stats();
                s.connections
                    .iter()
                    .map(|c| c.in_flight + c.queued)
                    .sum::<u64>()
            };
            crate::wait_until::<H>(|| units(&db) == n as u64).await;
        }
        // Fast units: served at once by the clean base connection without fair lanes; held
        // back (up to the cap, since the lane cannot finish) with them.
        for _ in 0..5 {
            let row = db.query_one("SELECT 1::int4", &[]).await.unwrap();
            assert_eq!(row.get::<_, i32>(0), 1);
        }
        let held = db.stats().total.held_for_lanes;
        match fair {
            false => assert_eq!(held, 0),
            true => assert_eq!(held, 5, "{:?}", db.stats()),
        }
        holder.query(UNLOCK, &[&space, &id]).await.unwrap();
        for t in slow {
            t.await;
        }
        // The lanes drained: nothing is held any more.
        db.query_one("SELECT 1::int4", &[]).await.unwrap();
        assert_eq!(db.stats().total.held_for_lanes, held);
        drop(holder);
        db.close().await;
    }
}

pub async fn a_server_at_its_connection_limit_still_runs_slow_statements<H: Harness>() {
    // A role allowed one connection: the base connection takes it, so no lane can open.
    let role = format!("pgpipe_limited_{}", H::name());
    psql(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN CONNECTION LIMIT 1"
    ));
    let mut cfg = crate::config(|c| {
        c.pipeline_size = 1;
        c.max_connections = 5; // 1 base, 2 lanes, 2 kept for exclusive connections
        c.slow_threshold = Duration::from_millis(1);
    });
    cfg.user = role;
    cfg.password = None;
    let db = H::connect(cfg).await.expect("connect");
    let sql = "SELECT pg_sleep($1::float8)";
    while estimate::<H>(&db, sql) < Duration::from_millis(1) {
        db.query(sql, &[&0.02f64]).await.unwrap();
    }
    // Slow now: each run wants a lane. The first attempt fails (the server refuses the role a
    // second connection) and pauses further attempts; every run still completes on the base
    // connection.
    for _ in 0..10 {
        assert_eq!(db.query(sql, &[&0.005f64]).await.unwrap().len(), 1);
    }
    let s = db.stats();
    assert_eq!(s.open_lanes, 0, "{s:?}");
    assert_eq!(
        s.total.opened_on_demand, 1,
        "one attempt, then a pause: {s:?}"
    );
    assert_eq!(s.connections[0].units_completed, s.total.units_completed);
    db.close().await;
}

pub async fn work_bound_connections_cap_in_flight_work_and_grow<H: Harness>() {
    // Nothing counts as slow here: every unit stays on the pipelined path.
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 4; // 1 base, 1 overflow, 2 kept for exclusive connections
        c.slow_threshold = Duration::from_secs(3600);
        c.max_queue_work = Duration::from_millis(5);
        c.idle_timeout = Duration::from_millis(300);
    })
    .await;
    let sql = "SELECT pg_sleep($1::float8)";
    // Learn the cost one unit at a time, until one unit is estimated over the 5 ms limit.
    while estimate::<H>(&db, sql) < Duration::from_millis(6) {
        db.query(sql, &[&0.03f64]).await.unwrap();
    }
    assert_eq!(db.stats().total.in_flight_peak, 1);
    let spawn = |n: usize| -> Vec<_> {
        (0..n)
            .map(|_| {
                let db = db.clone();
                H::spawn(async move { db.query(sql, &[&0.03f64]).await.map(|r| r.len()) })
            })
            .collect()
    };
    let mut tasks = spawn(8);
    // Once the connection is known to be work-bound, the next caller opens an overflow one.
    crate::wait_until::<H>(|| db.stats().total.work_limited > 0).await;
    tasks.extend(spawn(4));
    for t in tasks {
        assert_eq!(t.await.unwrap(), 1);
    }
    let s = db.stats();
    // Each unit is estimated over the limit, so each connection had one in flight at a time
    // (by count, max_in_flight = 64 would have let all eight go at once) ...
    assert_eq!(s.total.in_flight_peak, 1, "{s:?}");
    assert!(s.total.work_limited > 0, "{s:?}");
    // ... and the waiting work opened an overflow connection, which took some of it.
    assert_eq!(s.total.opened_on_demand, 1, "{s:?}");
    assert!(s.connections[1].units_completed > 0, "{s:?}");
    crate::wait_until::<H>(|| db.stats().open_overflow == 0).await;
    assert_eq!(db.stats().total.retired_idle, 1);
    db.close().await;
}

pub async fn a_full_mailbox_makes_callers_wait_instead_of_growing<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_in_flight = 4;
        c.mailbox_size = 8;
    })
    .await;
    let tasks: Vec<_> = (0..2000i32)
        .map(|i| {
            let db = db.clone();
            H::spawn(async move {
                db.query_one("SELECT $1::int4", &[&i])
                    .await
                    .unwrap()
                    .get::<_, i32>(0)
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        assert_eq!(t.await, i as i32);
    }
    let s = db.stats().total;
    assert!(s.in_flight_peak <= 4, "{s:?}");
    assert!(
        s.queued_peak <= 8 + 1,
        "mailbox bound (plus one prepare): {s:?}"
    );
    db.close().await;
}

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
