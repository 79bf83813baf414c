//! Routing around a slow connection: callers routed past a busy one, cost-aware routing
//! behind a known slow statement, lanes for slow statements (opened, spilled past, retired
//! when idle) and a server with no room for a lane.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{client, key, psql, Harness};

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
        // The cost is learned from units run alone; whether the machine running the tests
        // has CPU to spare for such samples is not this test's subject (tests/spare_cpu.rs).
        c.spare_cpu_pct = 0;
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
pub fn estimate<H: Harness>(db: &crate::Db<H>, sql: &str) -> Duration {
    pgpipe_tests::highest_estimate(db.statement_estimates(), sql)
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
        // The cost is learned from units run alone; whether the machine running the tests
        // has CPU to spare for such samples is not this test's subject (tests/spare_cpu.rs).
        c.spare_cpu_pct = 0;
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
        // The cost is learned from units run alone; whether the machine running the tests
        // has CPU to spare for such samples is not this test's subject (tests/spare_cpu.rs).
        c.spare_cpu_pct = 0;
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
    // Units placed on a connection (in flight or queued there), over every connection.
    let placed = || {
        let s = db.stats();
        s.connections
            .iter()
            .map(|c| c.in_flight + c.queued)
            .sum::<u64>()
    };
    // One at a time, each placed before the next comes (`lane_units` counts a unit when its
    // lane is chosen, before it is queued there: the next one must see it queued): two lanes
    // open and run one each, then each gets one queued behind it.
    let mut slow = Vec::new();
    for n in 1..=6i32 {
        let db2 = db.clone();
        slow.push(H::spawn(async move {
            let row = db2.query_one(slow_sql, &[&space, &id, &n]).await.unwrap();
            assert_eq!(row.get::<_, i32>(1), n);
        }));
        let lane_units = match n {
            1..=4 => n as u64,
            // Both lanes hold two: the base connection is sooner.
            5 => 4,
            // The base connection has slow work now: back to a lane.
            _ => 5,
        };
        crate::wait_until::<H>(|| placed() == n as u64).await;
        let s = db.stats();
        assert_eq!(s.total.lane_units, lane_units, "unit {n}: {s:?}");
        if n == 5 {
            assert_eq!(load(0), 1, "the fifth spilled: {:?}", db.stats());
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
            // The cost is learned from units run alone; whether the machine running the tests
            // has CPU to spare for such samples is not this test's subject (tests/spare_cpu.rs).
            c.spare_cpu_pct = 0;
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
        // The cost is learned from units run alone; whether the machine running the tests
        // has CPU to spare for such samples is not this test's subject (tests/spare_cpu.rs).
        c.spare_cpu_pct = 0;
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
