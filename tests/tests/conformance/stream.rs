//! Streaming a large result on an exclusive connection: rows arrive while the statement still
//! runs, memory stays bounded, and dropping a stream or an error in it leaves the connection
//! usable.

use crate::{client, key, Harness};
use pgpipe::SqlState;

pub async fn rows_stream_with_bounded_memory<H: Harness>() {
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let session = db.session().await.unwrap();
    let mut stream = session
        .query_stream(
            "SELECT g, repeat('x', 200) FROM generate_series(1, $1) g",
            &[&200_000i32],
        )
        .await
        .unwrap();
    let mut n = 0i32;
    while let Some(row) = stream.next().await {
        let row = row.unwrap();
        n += 1;
        assert_eq!(row.get::<_, i32>(0), n);
    }
    assert_eq!(n, 200_000);
    assert_eq!(stream.rows_affected(), Some(200_000));
    assert!(stream.peak_buffered() <= 256, "{}", stream.peak_buffered());
    drop(stream);
    // In a transaction too, and the connection serves the next statement.
    let tx = db.transaction().await.unwrap();
    let mut s = tx
        .query_stream("SELECT g FROM generate_series(1, 1000) g", &[])
        .await
        .unwrap();
    let mut sum = 0i64;
    while let Some(r) = s.next().await {
        sum += i64::from(r.unwrap().get::<_, i32>(0));
    }
    assert_eq!(sum, 500_500);
    drop(s);
    tx.commit().await.unwrap();
    drop(session);
    db.close().await;
}

pub async fn rows_arrive_before_the_statement_ends<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 2;
    })
    .await;
    let k = key::<H>() ^ 0x5157;
    let blocker = db.session().await.unwrap();
    blocker
        .execute("SELECT pg_advisory_lock($1::int4)", &[&k])
        .await
        .unwrap();
    let session = db.session().await.unwrap();
    // Its last row waits for the lock the blocker holds: every row before it must arrive.
    let mut stream = session
        .query_stream(
            "SELECT g, repeat('x', 1000), \
             CASE WHEN g = 5000 THEN pg_advisory_lock($1::int4)::text END \
             FROM generate_series(1, 5000) g",
            &[&k],
        )
        .await
        .unwrap();
    for i in 1..=1000 {
        let row = stream.next().await.unwrap().unwrap();
        assert_eq!(row.get::<_, i32>(0), i);
    }
    assert_eq!(
        stream.rows_affected(),
        None,
        "the statement is still running"
    );
    blocker
        .execute("SELECT pg_advisory_unlock($1::int4)", &[&k])
        .await
        .unwrap();
    let mut n = 1000;
    while let Some(row) = stream.next().await {
        row.unwrap();
        n += 1;
    }
    assert_eq!(n, 5000);
    drop(stream);
    session
        .execute("SELECT pg_advisory_unlock($1::int4)", &[&k])
        .await
        .unwrap();
    drop(session);
    drop(blocker);
    db.close().await;
}

pub async fn dropped_or_failed_streams_leave_the_connection_usable<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let session = db.session().await.unwrap();
    // Dropped after a few rows: the rest is discarded as it arrives.
    let mut stream = session
        .query_stream("SELECT g FROM generate_series(1, 100000) g", &[])
        .await
        .unwrap();
    for _ in 0..10 {
        stream.next().await.unwrap().unwrap();
    }
    drop(stream);
    let row = session.query_one("SELECT 41 + 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 42);
    // An error part-way: the rows before it, then the error, then the end.
    let mut stream = session
        .query_stream("SELECT 1 / (g - 500) FROM generate_series(1, 1000) g", &[])
        .await
        .unwrap();
    let mut ok = 0;
    let err = loop {
        match stream.next().await {
            Some(Ok(_)) => ok += 1,
            Some(Err(e)) => break e,
            None => panic!("the division by zero was not reported"),
        }
    };
    assert_eq!(err.code(), Some(&SqlState::DIVISION_BY_ZERO), "{err}");
    assert!(ok < 500, "{ok} rows before the error");
    assert!(stream.next().await.is_none());
    drop(stream);
    let row = session
        .query_one("SELECT 'still here'::text", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "still here");
    drop(session);
    db.close().await;
}
