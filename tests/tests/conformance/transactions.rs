//! Transactions and atomic batches: what they cost in round trips, that errors say which
//! statement failed, that checkouts are served in arrival order within the connection budget,
//! that a release sends only what the server's status and the holder's statements call for,
//! and that batches run all or nothing on the shared path.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use pgpipe::{Error, ReleaseReset, SqlState};

use crate::{client, psql, psql_async, wait_until, Harness};

/// A fresh table `name (id int PRIMARY KEY, v int8)` with rows `1..=rows`, `v = 0`.
fn accounts(name: &str, rows: i32) {
    psql(&format!(
        "DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id int PRIMARY KEY, v int8 NOT NULL); \
         INSERT INTO {name} SELECT g, 0 FROM generate_series(1, {rows}) g;"
    ));
}

/// BEGIN rides with the first statement and COMMIT with the last: a transaction of N
/// statements sends N units (round trips), the release sends nothing, and the BEGIN really
/// opened a transaction (its write is invisible to others until the commit).
pub async fn a_transaction_of_n_statements_takes_n_round_trips<H: Harness>() {
    let t = format!("tx_cost_{}", H::name());
    accounts(&t, 3);
    let db = client::<H>(|c| {
        // One exclusive connection, so its statements are prepared once.
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
    })
    .await;
    let update = format!("UPDATE {t} SET v = v + 1 WHERE id = $1");
    let select = format!("SELECT v FROM {t} WHERE id = $1");
    // Prepared on the exclusive connection once (each prepare is a unit of its own).
    let tx = db.transaction().await.unwrap();
    tx.execute(&update, &[&1i32]).await.unwrap();
    tx.query_and_commit(&select, &[&1i32]).await.unwrap();

    let before = db.stats().exclusive;
    let tx = db.transaction().await.unwrap();
    assert_eq!(tx.execute(&update, &[&1i32]).await.unwrap(), 1);
    // Inside the transaction: another session does not see the write yet.
    let outside = format!("SELECT v FROM {t} WHERE id = 1");
    assert_eq!(psql_async::<H>(&outside).await.trim(), "1");
    let rows = tx.query_and_commit(&select, &[&1i32]).await.unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 2);
    assert_eq!(psql_async::<H>(&outside).await.trim(), "2");
    let after = db.stats().exclusive;
    assert_eq!(after.units - before.units, 2, "{before:?} -> {after:?}");
    assert_eq!(
        (after.rollbacks, after.resets),
        (before.rollbacks, before.resets),
        "a committed transaction of plain statements needs no reset"
    );

    // Three statements and a separate commit(): four units.
    let before = db.stats().exclusive;
    let tx = db.transaction().await.unwrap();
    for id in 1..=3i32 {
        tx.execute(&update, &[&id]).await.unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(db.stats().exclusive.units - before.units, 4);

    // A transaction that ran nothing sends nothing, committed or rolled back or dropped.
    let before = db.stats().exclusive;
    db.transaction().await.unwrap().commit().await.unwrap();
    db.transaction().await.unwrap().rollback().await.unwrap();
    drop(db.transaction().await.unwrap());
    let after = db.stats().exclusive;
    assert_eq!(
        (after.units, after.rollbacks),
        (before.units, before.rollbacks)
    );

    // Dropped after a statement: the release rolls back (the server said a transaction is
    // open), and the next holder does not wait for it.
    let tx = db.transaction().await.unwrap();
    tx.execute(&update, &[&3i32]).await.unwrap();
    drop(tx);
    assert_eq!(db.stats().exclusive.rollbacks, after.rollbacks + 1);
    let v: i64 = db.query_one(&select, &[&3i32]).await.unwrap().get(0);
    assert_eq!(v, 1, "the dropped transaction's update was rolled back");
    // A single-statement transaction: BEGIN, the statement and COMMIT in one unit.
    let before = db.stats().exclusive;
    let tx = db.transaction().await.unwrap();
    assert_eq!(tx.execute_and_commit(&update, &[&3i32]).await.unwrap(), 1);
    assert_eq!(db.stats().exclusive.units - before.units, 1);
    db.close().await;
}

/// A failed BEGIN, statement or COMMIT says which it was; nothing of a failed transaction is
/// committed; server error positions point into the caller's own text.
pub async fn a_failed_begin_statement_or_commit_says_which<H: Harness>() {
    let t = format!("tx_fail_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; \
         CREATE TABLE {t} (x int UNIQUE DEFERRABLE INITIALLY DEFERRED);"
    ));
    let db = client::<H>(|_| {}).await;
    let insert = format!("INSERT INTO {t} VALUES ($1)");
    let count = format!("SELECT count(*) FROM {t}");
    // A deferred constraint fails at COMMIT, riding with the last statement or alone.
    let tx = db.transaction().await.unwrap();
    tx.execute(&insert, &[&1i32]).await.unwrap();
    match tx.execute_and_commit(&insert, &[&1i32]).await {
        Err(e @ Error::CommitFailed(_)) => {
            assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
        }
        other => panic!("expected CommitFailed, got {other:?}"),
    }
    let tx = db.transaction().await.unwrap();
    tx.execute(&insert, &[&2i32]).await.unwrap();
    tx.execute(&insert, &[&2i32]).await.unwrap();
    assert!(matches!(tx.commit().await, Err(Error::CommitFailed(_))));
    // The statement that carries the COMMIT fails: the COMMIT never runs.
    let tx = db.transaction().await.unwrap();
    tx.execute(&insert, &[&3i32]).await.unwrap();
    let e = tx
        .execute_and_commit(&format!("INSERT INTO {t} VALUES (1 / $1)"), &[&0i32])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Db(_)), "{e:?}");
    assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO));
    let n: i64 = db.query_one(&count, &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "nothing of a failed transaction is committed");

    // A BEGIN fails in a session whose own transaction failed: the statement did not run
    // (prepared before, since a Parse fails there too).
    let mut s = db.session().await.unwrap();
    s.query_one("SELECT 1", &[]).await.unwrap();
    s.batch_execute("BEGIN; SELECT 1 / 0").await.unwrap_err();
    {
        let sp = s.transaction().await.unwrap();
        match sp.query_one("SELECT 1", &[]).await {
            Err(e @ Error::BeginFailed(_)) => {
                assert_eq!(e.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
            }
            other => panic!("expected BeginFailed, got {other:?}"),
        }
        sp.rollback().await.unwrap();
    }
    // The session works again, and an error's position is in the caller's text even though
    // the text went out behind a BEGIN.
    let sp = s.transaction().await.unwrap();
    let e = sp.batch_execute("SELECT nosuchcolumn").await.unwrap_err();
    assert_eq!(e.as_db().and_then(|d| d.position()), Some(8), "{e:?}");
    drop(sp);
    drop(s);
    let n: i64 = db.query_one(&count, &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    db.close().await;
}

/// Callers waiting for an exclusive connection get one in the order they asked; a caller that
/// releases and asks again queues behind them.
pub async fn checkouts_are_served_in_arrival_order<H: Harness>() {
    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
    })
    .await;
    let held = db.session().await.unwrap();
    let order = Rc::new(RefCell::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5usize {
        let (db2, order) = (db.clone(), order.clone());
        tasks.push(H::spawn(async move {
            let s = db2.session().await.unwrap();
            order.borrow_mut().push(i);
            s.query_one("SELECT 1", &[]).await.unwrap();
        }));
        // The next one asks only once this one is queued.
        wait_until::<H>(|| db.checkouts_waiting() == i + 1).await;
    }
    drop(held);
    let again = db.session().await.unwrap();
    order.borrow_mut().push(99);
    drop(again);
    for t in tasks {
        t.await;
    }
    assert_eq!(*order.borrow(), vec![0, 1, 2, 3, 4, 99]);
    let x = db.stats().exclusive;
    assert_eq!((x.waiting, x.queued), (0, 6), "{x:?}");
    db.close().await;
}

/// Many tasks looping transactions over two connections: every task is served at a similar
/// rate (the slowest-served gets at least half of the median's transactions).
pub async fn looping_transactions_share_connections_fairly<H: Harness>() {
    const TASKS: usize = 100;
    const TOTAL: usize = 3000;
    let t = format!("tx_fair_{}", H::name());
    accounts(&t, TASKS as i32);
    let db = client::<H>(|c| {
        c.pinned_size = 2;
        c.max_connections = c.pipeline_size;
    })
    .await;
    let done = Rc::new(RefCell::new(0usize));
    let update: Arc<str> = format!("UPDATE {t} SET v = v + 1 WHERE id = $1").into();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (db, done, update) = (db.clone(), done.clone(), update.clone());
            H::spawn(async move {
                let id = i as i32 + 1;
                let mut mine = 0usize;
                while *done.borrow() < TOTAL {
                    let tx = db.transaction().await.unwrap();
                    tx.execute_and_commit(&update, &[&id]).await.unwrap();
                    *done.borrow_mut() += 1;
                    mine += 1;
                }
                mine
            })
        })
        .collect();
    let mut counts = Vec::new();
    for task in tasks {
        counts.push(task.await);
    }
    counts.sort_unstable();
    let (min, median) = (counts[0], counts[TASKS / 2]);
    assert!(
        min * 2 >= median,
        "the slowest-served task did {min} transactions, the median {median}: {counts:?}"
    );
    // Every transaction committed exactly once.
    let sum: i64 = db
        .query_one(&format!("SELECT sum(v)::int8 FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sum as usize, counts.iter().sum::<usize>());
    db.close().await;
}

/// Exclusive connections open on demand within the budget beyond the base connections,
/// queue callers when it is spent, and close when idle.
pub async fn exclusive_connections_grow_within_the_budget_and_retire_when_idle<H: Harness>() {
    let app = format!("pgpipe_budget_{}", H::name());
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.max_connections = 5;
        c.pinned_size = 2;
        c.idle_timeout = Duration::from_millis(200);
        c.application_name = Some(app.clone());
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(db.session().await.unwrap());
    }
    assert_eq!(db.pinned_counts(), (4, 4), "the whole budget of 4");
    let waiter = {
        let db = db.clone();
        H::spawn(async move {
            let s = db.session().await.unwrap();
            s.query_one("SELECT 1", &[]).await.unwrap();
        })
    };
    wait_until::<H>(|| db.checkouts_waiting() == 1).await;
    let backends =
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'");
    assert_eq!(psql_async::<H>(&backends).await.trim(), "5");
    held.pop();
    waiter.await;
    drop(held);
    // Idle ones retire after idle_timeout; only the base connection stays.
    wait_until::<H>(|| db.pinned_counts().0 == 0).await;
    while psql_async::<H>(&backends).await.trim() != "1" {
        H::sleep(Duration::from_millis(20)).await;
    }
    // And a new checkout opens one again.
    let s = db.session().await.unwrap();
    s.query_one("SELECT 1", &[]).await.unwrap();
    drop(s);
    assert!(db.stats().exclusive.opened >= 5);
    db.close().await;
}

/// The release resets a session only when its holder ran something that may change session
/// state, or the server reported a changed parameter; `release_reset=always` resets every one.
pub async fn release_resets_only_what_the_holder_may_have_changed<H: Harness>() {
    let f = format!("tx_set_app_{}", H::name());
    psql(&format!(
        "CREATE OR REPLACE FUNCTION {f}() RETURNS int LANGUAGE plpgsql AS \
         $$ BEGIN PERFORM set_config('application_name', 'changed', false); RETURN 1; END $$;"
    ));
    let app = format!("pgpipe_resets_{}", H::name());
    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
        c.application_name = Some(app.clone());
    })
    .await;
    let resets = || db.stats().exclusive.resets;
    let s = db.session().await.unwrap();
    s.query_one("SELECT 1", &[]).await.unwrap();
    drop(s);
    let r0 = resets();
    let s = db.session().await.unwrap();
    s.query_one("SELECT 1", &[]).await.unwrap();
    drop(s);
    assert_eq!(resets(), r0, "a session that only read needs no reset");
    let s = db.session().await.unwrap();
    s.batch_execute("SET work_mem = '7MB'").await.unwrap();
    drop(s);
    assert_eq!(resets(), r0 + 1);
    let s = db.session().await.unwrap();
    let w: String = s
        .query_one("SELECT current_setting('work_mem')", &[])
        .await
        .unwrap()
        .get(0);
    assert_ne!(w, "7MB");
    // A change the guard cannot see, inside a function, that the server reports.
    s.query_one(&format!("SELECT {f}()"), &[]).await.unwrap();
    drop(s);
    assert_eq!(resets(), r0 + 2, "a reported parameter change resets");
    let s = db.session().await.unwrap();
    let a: String = s
        .query_one("SELECT current_setting('application_name')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(a, app);
    drop(s);
    db.close().await;

    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
        c.release_reset = ReleaseReset::Always;
    })
    .await;
    for _ in 0..3 {
        let s = db.session().await.unwrap();
        s.query_one("SELECT 1", &[]).await.unwrap();
    }
    assert_eq!(db.stats().exclusive.resets, 3);
    db.close().await;
}

/// An atomic batch: one unit on the shared path, each statement's result, all or nothing.
pub async fn batches_run_all_or_nothing_on_the_shared_path<H: Harness>() {
    let t = format!("tx_batch_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int PRIMARY KEY, v int8 NOT NULL);"
    ));
    let db = client::<H>(|c| c.pipeline_size = 2).await;
    let insert = format!("INSERT INTO {t} VALUES ($1, $2) RETURNING id");
    let update = format!("UPDATE {t} SET v = v + $1");
    let select = format!("SELECT sum(v)::int8 FROM {t}");
    let (one, two, ten) = (1i32, 2i32, 10i64);
    let results = db
        .batch()
        .add(&insert, &[&one, &ten])
        .add(&insert, &[&two, &ten])
        .add(&update, &[&ten])
        .add(&select, &[])
        .run()
        .await
        .unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[1].rows()[0].get::<_, i32>(0), 2);
    assert_eq!(results[2].affected(), 2);
    assert_eq!(results[3].rows()[0].get::<_, i64>(0), 40);
    let x = db.stats().exclusive;
    assert_eq!(x.opened, 0, "a batch needs no exclusive connection");

    // The third statement fails: the first two are rolled back with it.
    let three = 3i32;
    let e = db
        .batch()
        .add(&insert, &[&three, &ten])
        .add(&update, &[&ten])
        .add(&insert, &[&one, &ten])
        .run()
        .await
        .unwrap_err();
    match &e {
        Error::BatchFailed { index: 2, .. } => {}
        other => panic!("expected the third statement to fail, got {other:?}"),
    }
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
    let sum: i64 = db.query_one(&select, &[]).await.unwrap().get(0);
    assert_eq!(sum, 40, "nothing of the failed batch was committed");

    // Refused before anything is sent: session state, transaction control, bad input.
    let before = db.stats().total.units_completed;
    for bad in ["SET work_mem = '1MB'", "BEGIN", "COMMIT"] {
        let r = db.batch().add(&update, &[&ten]).add(bad, &[]).run().await;
        assert!(matches!(r, Err(Error::Refused(_))), "{bad}: {r:?}");
    }
    assert!(db.batch().run().await.unwrap().is_empty());
    assert_eq!(db.stats().total.units_completed, before, "nothing was sent");
    let r = db.batch().add(&update, &[]).run().await;
    assert!(matches!(r, Err(Error::ParamCount { .. })), "{r:?}");
    let sum: i64 = db.query_one(&select, &[]).await.unwrap().get(0);
    assert_eq!(sum, 40);

    // A schema change between runs: the stale statement is prepared again and the batch
    // re-sent (nothing of the first attempt committed).
    let star = format!("SELECT * FROM {t} WHERE id = $1");
    let r = db.batch().add(&star, &[&one]).run().await.unwrap();
    assert_eq!(r[0].rows()[0].len(), 2);
    psql(&format!("ALTER TABLE {t} ADD COLUMN note text"));
    for _ in 0..2 {
        let r = db
            .batch()
            .add(&update, &[&ten])
            .add(&star, &[&one])
            .run()
            .await
            .unwrap();
        assert_eq!(r[1].rows()[0].len(), 3);
    }
    let sum: i64 = db.query_one(&select, &[]).await.unwrap().get(0);
    assert_eq!(sum, 80, "each batch's update committed once");
    db.close().await;
}

/// Transfers as batches among many callers, with reads that share Syncs and failing reads
/// around them: the total holds, and every read and failure is its own.
pub async fn concurrent_batches_keep_the_total_among_shared_reads<H: Harness>() {
    let t = format!("tx_batch_transfers_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; \
         CREATE TABLE {t} (id int PRIMARY KEY, v int8 NOT NULL CHECK (v >= 0)); \
         INSERT INTO {t} SELECT g, 100 FROM generate_series(1, 10) g;"
    ));
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let sql: Arc<[String; 3]> = Arc::new([
        format!("UPDATE {t} SET v = v - $1 WHERE id = $2"),
        format!("UPDATE {t} SET v = v + $1 WHERE id = $2"),
        format!("SELECT v FROM {t} WHERE id = $1"),
    ]);
    let tasks: Vec<_> = (0..200i64)
        .map(|i| {
            let (db, sql) = (db.clone(), sql.clone());
            H::spawn(async move {
                let (from, to) = ((i % 10) as i32 + 1, ((i * 7 + 3) % 10) as i32 + 1);
                // Some transfers overdraw: the CHECK fails them whole.
                let amount = if i % 9 == 0 { 1000i64 } else { i % 5 + 1 };
                let r = db
                    .batch()
                    .add(&sql[0], &[&amount, &from])
                    .add(&sql[1], &[&amount, &to])
                    .run()
                    .await;
                match (amount, r) {
                    (1000, Err(Error::BatchFailed { index: 0, source })) => {
                        assert_eq!(source.code(), &SqlState::CHECK_VIOLATION);
                    }
                    (1000, other) => panic!("an overdraft went through: {other:?}"),
                    (_, r) => assert_eq!(r.unwrap().len(), 2),
                }
                let row = db.query_one(&sql[2], &[&from]).await.unwrap();
                assert!(row.get::<_, i64>(0) >= 0);
                let e = db.query_one("SELECT 1 / $1::int4", &[&0i32]).await;
                assert_eq!(e.unwrap_err().code(), Some(&SqlState::DIVISION_BY_ZERO));
            })
        })
        .collect();
    for task in tasks {
        task.await;
    }
    let sum: i64 = psql_async::<H>(&format!("SELECT sum(v) FROM {t}"))
        .await
        .trim()
        .parse()
        .unwrap();
    assert_eq!(sum, 1000);
    assert!(db.stats().total.ready_accounts_for_every_unit());
    db.close().await;
}

/// A transaction hands its connection on as soon as its COMMIT is queued: the next
/// transaction's first unit follows it in the pipeline. When the last statement failed
/// instead (its COMMIT skipped, the transaction left aborted), the next transaction's BEGIN
/// fails before anything of it ran and is sent again after a ROLLBACK; a session waits for
/// the answer instead.
pub async fn a_committing_transaction_hands_its_connection_on<H: Harness>() {
    let t = format!("tx_handover_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int PRIMARY KEY);"
    ));
    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
    })
    .await;
    let insert: Arc<str> = format!("INSERT INTO {t} VALUES ($1)").into();
    let count: Arc<str> = format!("SELECT count(*)::int8 FROM {t}").into();
    let waiting = |db: &crate::Db<H>, insert: Arc<str>, id: i32| {
        let db = db.clone();
        H::spawn(async move {
            let tx = db.transaction().await.unwrap();
            tx.execute(&insert, &[&id]).await.unwrap();
            tx.commit().await.unwrap();
        })
    };
    // A's last statement fails: nothing of A commits, B (queued behind it) commits.
    let a = db.transaction().await.unwrap();
    a.execute(&insert, &[&1i32]).await.unwrap();
    let b = waiting(&db, insert.clone(), 2);
    wait_until::<H>(|| db.checkouts_waiting() == 1).await;
    // The division runs after a pause (in an InitPlan, which planning cannot fold): the
    // release must not race the server's answer, which on a loaded machine can come first
    // when the connection task runs on another thread.
    let e = a
        .query_and_commit("SELECT 1 / (SELECT $1::int4 FROM pg_sleep(0.2))", &[&0i32])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO));
    b.await;
    let ids = db.query(&format!("SELECT id FROM {t}"), &[]).await.unwrap();
    let ids: Vec<i32> = ids.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, [2], "A rolled back, B committed");
    // A's COMMIT had B waiting: its release came before the server's answer.
    let handed = db.stats().exclusive.early_handovers;
    assert!(
        handed >= 1,
        "A's COMMIT handed the connection on: {:?}",
        db.stats().exclusive
    );

    // A commits with its last statement while a session waits: the session sees A's row.
    let a = db.transaction().await.unwrap();
    let session = {
        let (db, count) = (db.clone(), count.clone());
        H::spawn(async move {
            let s = db.session().await.unwrap();
            s.query_one(&count, &[]).await.unwrap().get::<_, i64>(0)
        })
    };
    wait_until::<H>(|| db.checkouts_waiting() == 1).await;
    a.execute_and_commit(&insert, &[&3i32]).await.unwrap();
    assert_eq!(session.await, 2);
    db.close().await;

    // A last statement whose caller stops waiting is cancelled: the transaction queued
    // behind it does not wait for it to end (30 s).
    let db = client::<H>(|c| {
        c.pinned_size = 1;
        c.max_connections = c.pipeline_size;
        c.query_timeout = Some(Duration::from_millis(300));
    })
    .await;
    let a = db.transaction().await.unwrap();
    a.execute(&insert, &[&4i32]).await.unwrap();
    let e = a
        .query_and_commit("SELECT pg_sleep(30)", &[])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IndeterminateCommit { .. }), "{e:?}");
    // B's statements (300 ms each) run only if A's was cancelled.
    waiting(&db, insert.clone(), 5).await;
    let n: i64 = db.query_one(&count, &[]).await.unwrap().get(0);
    assert_eq!(n, 3, "A's cancelled transaction did not commit, B's did");
    db.close().await;
}

/// A transaction's isolation level, access and deferrability ride in its BEGIN (still with its
/// first statement); a read-only transaction refuses writes; error positions in a simple text
/// still count from the holder's own statement.
pub async fn transaction_modes_ride_in_the_begin<H: Harness>() {
    use pgpipe::IsolationLevel;
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let modes = "SELECT current_setting('transaction_isolation'), \
                 current_setting('transaction_read_only'), \
                 current_setting('transaction_deferrable')";
    let seen = |row: pgpipe::Row| {
        (
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, String>(2),
        )
    };
    let tx = db
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .read_only(true)
        .deferrable(true)
        .start()
        .await
        .unwrap();
    let row = tx.query_one(modes, &[]).await.unwrap();
    assert_eq!(seen(row), ("serializable".into(), "on".into(), "on".into()));
    let e = tx
        .execute(&format!("CREATE TABLE nope_{} (x int)", H::name()), &[])
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
        "{e:?}"
    );
    assert!(matches!(tx.commit().await, Err(Error::RolledBack)));

    let tx = db
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(false)
        .deferrable(false)
        .start()
        .await
        .unwrap();
    // The BEGIN leads this simple text: the position still counts from the holder's text.
    let e = tx
        .batch_execute("SELECT * FROM no_such_table_anywhere")
        .await
        .unwrap_err();
    assert_eq!(e.as_db().and_then(|d| d.position()), Some(15), "{e:?}");
    drop(tx);
    let tx = db
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(false)
        .deferrable(false)
        .start()
        .await
        .unwrap();
    let row = tx.query_one(modes, &[]).await.unwrap();
    assert_eq!(
        seen(row),
        ("repeatable read".into(), "off".into(), "off".into())
    );
    tx.commit().await.unwrap();

    // Without modes: the server's defaults.
    let tx = db.transaction().await.unwrap();
    let row = tx.query_one(modes, &[]).await.unwrap();
    assert_eq!(
        seen(row),
        ("read committed".into(), "off".into(), "off".into())
    );
    tx.commit().await.unwrap();
    db.close().await;
}
