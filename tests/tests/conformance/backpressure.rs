//! Backpressure: a connection's in-flight work capped by its estimated cost (overflow
//! connections take the rest), and a full mailbox that makes callers wait.

use std::time::Duration;

use crate::routing::estimate;
use crate::{client, Harness};

pub async fn work_bound_connections_cap_in_flight_work_and_grow<H: Harness>() {
    // Nothing counts as slow here: every unit stays on the pipelined path.
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 4; // 1 base, 1 overflow, 2 kept for exclusive connections
        c.slow_threshold = Duration::from_secs(3600);
        c.max_queue_work = Duration::from_millis(5);
        c.idle_timeout = Duration::from_millis(300);
        // Whether the machine running the tests has CPU to spare is not this test's subject
        // (tests/spare_cpu.rs scripts it).
        c.spare_cpu_pct = 0;
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
