//! Behaviours that lean on the runtime itself: deadlines on the adapter's clock and timer,
//! several clients on one runtime, one client per runtime on several threads, and a close that
//! completes every unit it accepted.

use std::collections::HashSet;
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use pgpipe::{Error, Row};

use crate::{client, config, psql, wait_until, Db, Harness, Local};

const TIMEOUT: Duration = Duration::from_millis(250);
/// The slow statements: 1.5 s on the server.
const SLOW: &str = "SELECT pg_sleep($1::float8)";
const SLOW_SECS: f64 = 1.5;
/// Well under the 1.5 s the slow statements take: an expiry this late waited for the server.
/// (Generous, so a loaded machine's scheduling delays are not mistaken for a late timer.)
const LATE: Duration = Duration::from_millis(1200);

fn assert_timed_out(what: &str, r: Result<impl std::fmt::Debug, Error>, took: Duration) {
    assert!(matches!(r, Err(Error::Timeout)), "{what}: {r:?}");
    // Deadlines come from the adapter's now() and fire on its timer: neither early nor late.
    assert!(
        (TIMEOUT..LATE).contains(&took),
        "{what}: timed out after {took:?}"
    );
}

pub async fn query_timeouts_fire_on_the_adapter_clock<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        // Everything on the one connection, queued behind the slow unit (no lane).
        c.max_connections = 1;
        c.query_timeout = Some(TIMEOUT);
    })
    .await;
    // Prepared first, so each caller's unit goes to the mailbox at its first poll, in order.
    db.query("SELECT $1::int4", &[&0i32]).await.unwrap();
    db.query(SLOW, &[&0.0f64]).await.unwrap();
    // One slow unit heads the only connection and 50 callers are pipelined behind it: every
    // caller's own deadline fires, together, none waits for the server.
    let timed = |db: Db<H>, i: i32| async move {
        let t0 = Instant::now();
        let r = if i == 0 {
            db.query(SLOW, &[&SLOW_SECS]).await.map(|_| ())
        } else {
            db.query_one("SELECT $1::int4", &[&i]).await.map(|_| ())
        };
        (r, t0.elapsed())
    };
    let slow = H::spawn(timed(db.clone(), 0));
    wait_until::<H>(|| db.stats().total.queued + db.stats().total.in_flight >= 1).await;
    let queued: Vec<_> = (1..=50).map(|i| H::spawn(timed(db.clone(), i))).collect();
    let (r, took) = slow.await;
    assert_timed_out("the slow unit", r, took);
    for q in queued {
        let (r, took) = q.await;
        assert_timed_out("a unit behind it", r, took);
    }
    assert_eq!(db.stats().total.errors_timeout, 51);
    // The abandoned units are still drained in order; then the connection serves as before.
    wait_until::<H>(|| {
        let s = db.stats().total;
        s.in_flight == 0 && s.queued == 0
    })
    .await;
    let row = db.query_one("SELECT $1::int4", &[&7i32]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 7);
    assert!(db.stats().total.ready_accounts_for_every_unit());

    // The same deadline bounds the exclusive path.
    let s = db.session().await.unwrap();
    let t0 = Instant::now();
    let r = s.query(SLOW, &[&SLOW_SECS]).await;
    assert_timed_out("a session statement", r, t0.elapsed());
    drop(s);
    let tx = db.transaction().await.unwrap();
    let t0 = Instant::now();
    let r = tx.execute(SLOW, &[&SLOW_SECS]).await;
    assert_timed_out("a transaction statement", r, t0.elapsed());
    drop(tx);
    db.close().await;
}

pub async fn several_clients_in_one_process_serve_concurrently<H: Harness>() {
    const CLIENTS: usize = 4;
    const TASKS: i32 = 250;
    let apps: Vec<String> = (0..CLIENTS)
        .map(|k| format!("pgpipe-multi-{}-{}-{k}", std::process::id(), H::name()))
        .collect();
    // The clients connect at the same time, on one runtime.
    let connecting: Vec<_> = apps
        .iter()
        .map(|app| {
            H::connect(config(|c| {
                c.pipeline_size = 2;
                // Exactly the two connections: the test counts backends.
                c.max_connections = 2;
                c.application_name = Some(app.clone());
            }))
        })
        .collect();
    let mut dbs: Vec<Db<H>> = Vec::with_capacity(CLIENTS);
    for c in connecting {
        dbs.push(c.await.expect("connect"));
    }
    // Every client's callers run interleaved; each gets rows from its own connections only.
    let tasks: Vec<_> = (0..TASKS)
        .flat_map(|t| (0..CLIENTS).map(move |k| (k, t)))
        .map(|(k, t)| {
            let (db, app) = (dbs[k].clone(), apps[k].clone());
            H::spawn(async move {
                let row = db
                    .query_one(
                        "SELECT current_setting('application_name'), pg_backend_pid(), $1::int4",
                        &[&t],
                    )
                    .await
                    .expect("query");
                assert_eq!(row.get::<_, String>(0), app);
                assert_eq!(row.get::<_, i32>(2), t);
                (k, row.get::<_, i32>(1))
            })
        })
        .collect();
    let mut pids = vec![HashSet::new(); CLIENTS];
    for task in tasks {
        let (k, pid) = task.await;
        pids[k].insert(pid);
    }
    for (k, p) in pids.iter().enumerate() {
        assert!((1..=2).contains(&p.len()), "client {k} used {p:?}");
        for other in &pids[k + 1..] {
            assert!(p.is_disjoint(other), "clients share a backend: {pids:?}");
        }
        let s = dbs[k].stats();
        assert!(s.total.ready_accounts_for_every_unit(), "{s:?}");
        assert!(s.total.units_completed >= TASKS as u64, "{s:?}");
        let n = psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}'",
            apps[k]
        ));
        assert_eq!(n.trim(), "2", "client {k}'s backends");
    }
    // Closing one client leaves the others serving.
    dbs[0].close().await;
    assert!(matches!(
        dbs[0].query("SELECT 1", &[]).await,
        Err(Error::Closed)
    ));
    for (k, db) in dbs.iter().enumerate().skip(1) {
        let row = db.query_one("SELECT $1::int8", &[&(k as i64)]).await;
        assert_eq!(row.expect("still serving").get::<_, i64>(0), k as i64);
    }
    for db in &dbs[1..] {
        db.close().await;
    }
    // Every backend goes away once its client is closed.
    let pattern = format!("pgpipe-multi-{}-{}-%", std::process::id(), H::name());
    loop {
        let n = psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '{pattern}'"
        ));
        if n.trim() == "0" {
            break;
        }
        H::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn one_client_per_runtime_on_several_threads<H: Harness>() {
    // Nothing crosses threads: each thread runs its own runtime, client and callers.
    let threads = thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            thread::spawn(|| {
                H::run(|| async {
                    let db = client::<H>(|c| c.pipeline_size = 1).await;
                    let tasks: Vec<_> = (0..200i64)
                        .map(|t| {
                            let db = db.clone();
                            H::spawn(async move {
                                for q in 0..5i64 {
                                    let n = t * 1000 + q;
                                    let row = db.query_one("SELECT $1::int8 * 2", &[&n]).await;
                                    assert_eq!(row.expect("query").get::<_, i64>(0), n * 2);
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await;
                    }
                    let s = db.stats().total;
                    assert!(s.ready_accounts_for_every_unit(), "{s:?}");
                    assert!(s.units_completed >= 1000, "{s:?}");
                    db.close().await;
                })
            })
        })
        .collect();
    // Wait without blocking this runtime; the test's limit bounds the wait.
    wait_until::<H>(|| handles.iter().all(|h| h.is_finished())).await;
    for h in handles {
        if let Err(panic) = h.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

pub async fn close_completes_every_accepted_unit<H: Harness>() {
    const UNITS: i32 = 400;
    let db = client::<H>(|c| {
        c.pipeline_size = 2;
        // Room for every unit, so that each is accepted by its first poll (an on-demand
        // connection would make a caller wait for its connect first).
        c.mailbox_size = 1024;
        c.max_connections = 2;
    })
    .await;
    let sql = "SELECT $1::int4, pg_sleep(0.001)::text";
    // Prepare on both connections, so a first poll goes straight to the mailbox.
    while !db.stats().connections[..2]
        .iter()
        .all(|c| c.parses_sent >= 1)
    {
        let (a, b) =
            futures_lite::future::zip(db.query(sql, &[&0i32]), db.query(sql, &[&0i32])).await;
        a.unwrap();
        b.unwrap();
    }
    let warm = db.stats().total.units_completed;
    // Each caller's future, and its result if its first poll already had it.
    type Unit = (Local<Result<Row, Error>>, Option<Result<Row, Error>>);
    let mut units: Vec<Unit> = (0..UNITS)
        .map(|i| {
            let db = db.clone();
            let f: Local<_> = Box::pin(async move { db.query_one(sql, &[&i]).await });
            (f, None)
        })
        .collect();
    // One poll each: the unit is encoded into a mailbox (accepted) and its caller waits.
    futures_lite::future::poll_fn(|cx| {
        for (f, out) in &mut units {
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                *out = Some(r);
            }
        }
        Poll::Ready(())
    })
    .await;
    let done_before = db.stats().total.units_completed - warm;
    assert!(done_before < UNITS as u64, "close must find work in flight");
    db.close().await;
    // close() returned only after every accepted unit completed.
    let s = db.stats().total;
    assert_eq!(s.units_completed - warm, UNITS as u64, "{s:?}");
    assert!(s.ready_accounts_for_every_unit(), "{s:?}");
    for (i, (f, out)) in units.into_iter().enumerate() {
        let r = match out {
            Some(r) => r,
            None => f.await,
        };
        let row = r.unwrap_or_else(|e| panic!("unit {i} was accepted before close: {e:?}"));
        assert_eq!(row.get::<_, i32>(0), i as i32);
    }
    assert!(matches!(
        db.query("SELECT 1", &[]).await,
        Err(Error::Closed)
    ));
    assert_eq!(db.live_connections(), 0);
}
