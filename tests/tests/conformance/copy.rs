//! COPY on exclusive connections: in and out in text and CSV, large copies with bounded
//! buffers, an abandoned COPY, a rejected row, the shared path's refusal, and the handles as
//! `Sink` and `Stream`.

use pgpipe::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
use pgpipe::types::Type;
use pgpipe::SqlState;

use crate::{client, Harness};

fn table<H: Harness>() -> String {
    format!("copy_{}", H::name())
}

pub async fn copy_in_and_out_round_trip<H: Harness>() {
    let t = table::<H>();
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let s = db.session().await.unwrap();
    s.batch_execute(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int PRIMARY KEY, name text, note text)"
    ))
    .await
    .unwrap();
    // 100,000 rows of text format, written in pieces of odd sizes.
    let mut data = Vec::new();
    for i in 0..100_000 {
        data.extend_from_slice(format!("{i}\tname {i}\t\\N\n").as_bytes());
    }
    let mut w = s.copy_in(&format!("COPY {t} FROM STDIN")).await.unwrap();
    for piece in data.chunks(7777) {
        w.write(piece).await.unwrap();
    }
    assert_eq!(w.finish().await.unwrap(), 100_000);
    let row = s
        .query_one(
            &format!("SELECT count(*), count(note), max(name) FROM {t}"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 100_000);
    assert_eq!(row.get::<_, i64>(1), 0, "\\N is NULL");
    // CSV with quotes, in a transaction.
    let tx = db.transaction().await.unwrap();
    let mut w = tx
        .copy_in(&format!("COPY {t} FROM STDIN (FORMAT csv)"))
        .await
        .unwrap();
    w.write(b"100000,\"a, \"\"quoted\"\" name\",x\n")
        .await
        .unwrap();
    assert_eq!(w.finish().await.unwrap(), 1);
    tx.commit().await.unwrap();
    // Out again: every row, in order, byte for byte.
    let mut out = s
        .copy_out(&format!(
            "COPY (SELECT * FROM {t} WHERE id < 100000 ORDER BY id) TO STDOUT"
        ))
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(chunk) = out.next().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(out.rows_copied(), Some(100_000));
    assert!(got == data, "COPY out differs from what went in");
    drop(out);
    let mut out = s
        .copy_out(&format!(
            "COPY (SELECT name FROM {t} WHERE id = 100000) TO STDOUT (FORMAT csv)"
        ))
        .await
        .unwrap();
    let chunk = out.next().await.unwrap().unwrap();
    assert_eq!(&chunk[..], b"\"a, \"\"quoted\"\" name\"\n");
    assert!(out.next().await.is_none());
    drop(out);
    drop(s);
    db.close().await;
}

pub async fn abandoned_and_rejected_copies_leave_the_connection_usable<H: Harness>() {
    let t = format!("{}_x", table::<H>());
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let s = db.session().await.unwrap();
    s.batch_execute(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id int PRIMARY KEY)"
    ))
    .await
    .unwrap();
    // Dropped unfinished: CopyFail, nothing copied.
    let mut w = s.copy_in(&format!("COPY {t} FROM STDIN")).await.unwrap();
    w.write(b"1\n2\n").await.unwrap();
    drop(w);
    let n: i64 = s
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // A row the server rejects: the error comes from finish() (or a later write).
    let mut w = s.copy_in(&format!("COPY {t} FROM STDIN")).await.unwrap();
    w.write(b"1\nnot a number\n3\n").await.unwrap();
    let e = w.finish().await.unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::INVALID_TEXT_REPRESENTATION),
        "{e}"
    );
    // A COPY out dropped early: the rest is discarded.
    let mut out = s
        .copy_out("COPY (SELECT g FROM generate_series(1, 200000) g) TO STDOUT")
        .await
        .unwrap();
    out.next().await.unwrap().unwrap();
    drop(out);
    // copy_in() of a statement that is not COPY FROM STDIN is an error, not a hang.
    let e = s.copy_in("SELECT 1").await.err().expect("not a COPY");
    assert!(e.to_string().contains("COPY"), "{e}");
    let row = s.query_one("SELECT 7", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 7);
    drop(s);
    // The shared path refuses COPY before sending it.
    let e = db
        .execute(&format!("COPY {t} FROM STDIN"), &[])
        .await
        .unwrap_err();
    assert!(matches!(e, pgpipe::Error::Refused(_)), "{e}");
    db.close().await;
}

pub async fn binary_copy_round_trips_typed_rows<H: Harness>() {
    let t = format!("{}_bin", table::<H>());
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let s = db.session().await.unwrap();
    s.batch_execute(&format!(
        "DROP TABLE IF EXISTS {t}; \
         CREATE TABLE {t} (id int8, name text, score float8, tags text[], maybe int4)"
    ))
    .await
    .unwrap();
    let types = [
        Type::INT8,
        Type::TEXT,
        Type::FLOAT8,
        Type::TEXT_ARRAY,
        Type::INT4,
    ];
    let copy = s
        .copy_in(&format!("COPY {t} FROM STDIN (FORMAT binary)"))
        .await
        .unwrap();
    let mut w = BinaryCopyInWriter::new(copy, &types);
    for i in 0..50_000i64 {
        let name = format!("row {i}");
        let tags = vec![format!("t{}", i % 7), "x".to_owned()];
        let maybe: Option<i32> = (i % 3 == 0).then_some(i as i32);
        w.write(&[&i, &name, &(i as f64 / 2.0), &tags, &maybe])
            .await
            .unwrap();
    }
    // A value of the wrong type is refused before anything of its row is sent.
    let e = w
        .write(&[&"no", &"x", &1.0f64, &Vec::<String>::new(), &None::<i32>])
        .await;
    assert!(
        matches!(e, Err(pgpipe::Error::Encode { index: 0, .. })),
        "{e:?}"
    );
    assert_eq!(w.finish().await.unwrap(), 50_000);
    let copy = s
        .copy_out(&format!(
            "COPY (SELECT * FROM {t} ORDER BY id) TO STDOUT (FORMAT binary)"
        ))
        .await
        .unwrap();
    let mut r = BinaryCopyOutStream::new(copy, &types);
    let mut i = 0i64;
    while let Some(row) = r.next().await {
        let row = row.unwrap();
        assert_eq!(row.get::<i64>(0), i);
        assert_eq!(row.get::<&str>(1), format!("row {i}"));
        assert_eq!(row.get::<f64>(2), i as f64 / 2.0);
        assert_eq!(
            row.get::<Vec<String>>(3),
            vec![format!("t{}", i % 7), "x".to_owned()]
        );
        assert_eq!(row.get::<Option<i32>>(4), (i % 3 == 0).then_some(i as i32));
        i += 1;
    }
    assert_eq!(i, 50_000);
    assert_eq!(r.rows_copied(), Some(50_000));
    drop(r);
    drop(s);
    db.close().await;
}

/// `CopyIn` is a `Sink` of chunks and `CopyOut` and the binary reader are `Stream`s: the
/// ecosystem's helpers (`send_all`, `try_collect`) work on them unchanged; a chunk larger than a
/// CopyData message is split; a sink dropped before `close` aborts the COPY.
pub async fn copy_handles_are_sinks_and_streams<H: Harness>() {
    use bytes::Bytes;
    use futures_util::{SinkExt, TryStreamExt};
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let s = db.session().await.unwrap();
    s.batch_execute("CREATE TEMP TABLE sunk (id int, name text)")
        .await
        .unwrap();
    let mut sink = s.copy_in("COPY sunk FROM STDIN").await.unwrap();
    let mut lines = futures_util::stream::iter(
        (0..10_000).map(|i| Ok::<_, pgpipe::Error>(Bytes::from(format!("{i}\tname {i}\n")))),
    );
    sink.send_all(&mut lines).await.unwrap();
    // One item of 200 KB: three messages' worth.
    let long = format!("10000\t{}\n", "x".repeat(200_000));
    sink.send(Bytes::from(long)).await.unwrap();
    sink.close().await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 10_001);

    let out = s.copy_out("COPY sunk TO STDOUT").await.unwrap();
    let chunks: Vec<Bytes> = out.try_collect().await.unwrap();
    assert_eq!(chunks.len(), 10_001);
    assert_eq!(&chunks[7][..], b"7\tname 7\n");
    assert_eq!(chunks[10_000].len(), 6 + 200_000 + 1);

    let out = s
        .copy_out("COPY (SELECT id, name FROM sunk ORDER BY id) TO STDOUT (FORMAT binary)")
        .await
        .unwrap();
    let rows: Vec<_> = BinaryCopyOutStream::new(out, &[Type::INT4, Type::TEXT])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rows.len(), 10_001);
    assert_eq!(rows[5].get::<i32>(0), 5);
    assert_eq!(rows[5].get::<&str>(1), "name 5");

    // A statement issued while a COPY is open waits for its end (it would land between the
    // COPY and its data): it sees the copied rows.
    let mut sink = s.copy_in("COPY sunk FROM STDIN").await.unwrap();
    let (count, copied) =
        futures_lite::future::zip(s.query_one("SELECT count(*) FROM sunk", &[]), async {
            sink.send(Bytes::from_static(b"20000\tlate\n")).await?;
            sink.close().await?;
            sink.finish().await
        })
        .await;
    assert_eq!(copied.unwrap(), 1);
    assert_eq!(count.unwrap().get::<_, i64>(0), 10_002);

    // A rejected row fails the sink, and every later call says so instead of waiting.
    let mut sink = s.copy_in("COPY sunk FROM STDIN").await.unwrap();
    let bad = sink.send(Bytes::from_static(b"not a number\tx\n")).await;
    let closed = match bad {
        Ok(()) => sink.close().await,
        Err(e) => Err(e),
    };
    let e = closed.unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::INVALID_TEXT_REPRESENTATION),
        "{e:?}"
    );
    let again = sink.close().await.unwrap_err();
    assert_eq!(again.code(), e.code(), "{again:?}");
    assert_eq!(sink.finish().await.unwrap_err().code(), e.code());

    // Abandoned after a send, before close: nothing of it is copied, the session goes on.
    let mut sink = s.copy_in("COPY sunk FROM STDIN").await.unwrap();
    sink.send(Bytes::from_static(b"99999\tabandoned\n"))
        .await
        .unwrap();
    drop(sink);
    let n: i64 = s
        .query_one("SELECT count(*) FROM sunk", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 10_002);
    drop(s);
    db.close().await;
}
