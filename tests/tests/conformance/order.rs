//! The order of a holder's statements: on a session or transaction, statements issued
//! together run in the order they were first polled, whatever round trips the earlier ones
//! need first (a prepare for a new text, a type lookup).

use crate::{client, Harness};

/// An INSERT whose text is new (it needs a prepare round trip first) and a SELECT whose text
/// is cached, issued together: the SELECT sees the INSERT's row every time. The same with a
/// simple-protocol text, a typed statement, and in a transaction.
pub async fn statements_on_a_session_run_in_the_order_issued<H: Harness>() {
    let db = client::<H>(|c| {
        c.pipeline_size = 1;
        c.pinned_size = 1;
    })
    .await;
    let s = db.session().await.unwrap();
    s.batch_execute("CREATE TEMP TABLE ordered (x int)")
        .await
        .unwrap();
    let count = "SELECT count(*)::int4 FROM ordered";
    let seen = |r: Result<pgpipe::Row, pgpipe::Error>| r.unwrap().get::<_, i32>(0);
    assert_eq!(seen(s.query_one(count, &[]).await), 0);
    for i in 1..=20i32 {
        // A new text each time: its prepare is a round trip the SELECT does not need.
        let insert = format!("INSERT INTO ordered VALUES ($1) -- {i}");
        let (inserted, after) =
            futures_lite::future::zip(s.execute(&insert, &[&i]), s.query_one(count, &[])).await;
        assert_eq!(inserted.unwrap(), 1);
        assert_eq!(seen(after), i, "round {i}: the SELECT overtook the INSERT");
    }
    // Behind a statement still preparing: a simple-protocol text, and a typed statement.
    let insert = "INSERT INTO ordered SELECT $1::int4 + 0 -- simple";
    let (inserted, simple) = futures_lite::future::zip(
        s.execute(insert, &[&21i32]),
        s.batch_execute("DELETE FROM ordered WHERE x = 21"),
    )
    .await;
    assert_eq!(inserted.unwrap(), 1);
    simple.unwrap();
    assert_eq!(
        seen(s.query_one(count, &[]).await),
        20,
        "the DELETE ran last"
    );
    let insert = "INSERT INTO ordered SELECT $1::int4 + 0 -- typed";
    let (inserted, typed) =
        futures_lite::future::zip(s.execute(insert, &[&22i32]), s.query_typed(count, &[])).await;
    assert_eq!(inserted.unwrap(), 1);
    assert_eq!(typed.unwrap()[0].get::<_, i32>(0), 21);
    // A statement that fails before it is sent (a wrong parameter count) does not hold up
    // the ones after it.
    let (bad, after) = futures_lite::future::zip(
        s.execute("INSERT INTO ordered VALUES ($1) -- bad", &[&1i32, &2i32]),
        s.query_one(count, &[]),
    )
    .await;
    assert!(bad.is_err());
    assert_eq!(seen(after), 21);
    // A statement's prepare waits its turn too: its Parse would not see the table an earlier
    // statement creates.
    let (created, inserted) = futures_lite::future::zip(
        s.execute(
            "CREATE TEMP TABLE made_here AS SELECT $1::int4 AS a",
            &[&1i32],
        ),
        s.execute("INSERT INTO made_here VALUES ($1)", &[&2i32]),
    )
    .await;
    assert_eq!(created.unwrap(), 1);
    assert_eq!(inserted.unwrap(), 1);
    drop(s);

    // In a transaction: the COMMIT too waits for the statements issued before it.
    let table = format!("ordered_{}", H::name());
    crate::psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (x int)"
    ));
    let tx = db.transaction().await.unwrap();
    let insert = format!("INSERT INTO {table} VALUES ($1) -- in a transaction");
    let tally = format!("SELECT count(*)::int4 FROM {table}");
    let (inserted, after) =
        futures_lite::future::zip(tx.execute(&insert, &[&1i32]), tx.query_one(&tally, &[])).await;
    assert_eq!(inserted.unwrap(), 1);
    assert_eq!(seen(after), 1);
    tx.commit().await.unwrap();
    assert_eq!(seen(db.query_one(&tally, &[]).await), 1);
    crate::psql(&format!("DROP TABLE {table}"));
    db.close().await;
}
