//! Prepared statements: `prepare` learns a statement's parameter and column types without
//! running it, and the statement runs through every query method, on the shared path and on
//! sessions.

use pgpipe::types::Type;
use pgpipe::{Error, SqlState};

use crate::{client, psql, Harness};

pub async fn prepare_gives_types_without_running_the_statement<H: Harness>() {
    let table = format!("prepared_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; \
         CREATE TABLE {table} (id int8 PRIMARY KEY, name text, at timestamptz)"
    ));
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let insert = db
        .prepare(&format!("INSERT INTO {table} (id, name) VALUES ($1, $2)"))
        .await
        .unwrap();
    assert_eq!(insert.params(), &[Type::INT8, Type::TEXT]);
    assert!(insert.columns().is_empty());
    let select = db
        .prepare(&format!("SELECT id, name, at FROM {table} WHERE id = $1"))
        .await
        .unwrap();
    assert_eq!(select.params(), &[Type::INT8]);
    let columns: Vec<(&str, &Type)> = select
        .columns()
        .iter()
        .map(|c| (c.name(), c.type_()))
        .collect();
    assert_eq!(
        columns,
        [
            ("id", &Type::INT8),
            ("name", &Type::TEXT),
            ("at", &Type::TIMESTAMPTZ)
        ]
    );
    assert_eq!(
        psql(&format!("SELECT count(*) FROM {table}")).trim(),
        "0",
        "preparing ran nothing"
    );

    // The statements run by reference wherever their text would.
    assert_eq!(db.execute(&insert, &[&1i64, &"one"]).await.unwrap(), 1);
    let row = db.query_one(&select, &[&1i64]).await.unwrap();
    assert_eq!(row.get::<_, &str>("name"), "one");
    assert_eq!(db.query(&select, &[&2i64]).await.unwrap().len(), 0);
    let s = db.session().await.unwrap();
    assert_eq!(s.execute(&insert, &[&2i64, &"two"]).await.unwrap(), 1);
    assert!(s.query_opt(&select, &[&2i64]).await.unwrap().is_some());
    // A session prepares what the shared path refuses.
    let set = s
        .prepare("SELECT set_config('application_name', $1, false)")
        .await
        .unwrap();
    assert_eq!(set.params(), &[Type::TEXT]);
    assert_eq!(set.columns()[0].type_(), &Type::TEXT);
    drop(s);
    // The shared path's guard refuses before anything is sent, as for the execution.
    let refused = db
        .prepare("SELECT set_config('application_name', $1, false)")
        .await;
    assert!(matches!(refused, Err(Error::Refused(_))), "{refused:?}");
    // What the server cannot prepare is its error.
    let e = db
        .prepare("SELECT nothing FROM no_such_table_here")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_TABLE), "{e:?}");
    db.close().await;
    psql(&format!("DROP TABLE {table}"));
}

/// A session's `simple_query`: every statement's rows as text and its count, in order; NULL
/// as `None`; the first error stops the text; a transaction's BEGIN riding ahead of the text
/// stays out of its results and its error positions.
pub async fn simple_query_returns_every_statements_text_rows<H: Harness>() {
    use pgpipe::SimpleQueryMessage as M;
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let s = db.session().await.unwrap();
    let out = s
        .simple_query(
            "CREATE TEMP TABLE simple_t (id int, name text); \
             INSERT INTO simple_t VALUES (1, 'one'), (2, NULL); \
             SELECT id, name FROM simple_t ORDER BY id; \
             SHOW standard_conforming_strings",
        )
        .await
        .unwrap();
    let shape: Vec<String> = out
        .iter()
        .map(|m| match m {
            M::Row(r) => format!(
                "row {:?}",
                (0..r.len()).map(|i| r.get(i)).collect::<Vec<_>>()
            ),
            M::CommandComplete(n) => format!("done {n}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "done 0",
            "done 2",
            "row [Some(\"1\"), Some(\"one\")]",
            "row [Some(\"2\"), None]",
            "done 2",
            "row [Some(\"on\")]",
            "done 0",
        ]
    );
    let M::Row(row) = &out[2] else {
        panic!("{out:?}")
    };
    assert_eq!(row.columns()[1].name(), "name");
    assert!(row.try_get(5).is_err());
    // The first error stops the text: nothing after it ran.
    let e = s
        .simple_query("SELECT 1; SELECT nope FROM simple_t; INSERT INTO simple_t VALUES (3, 'x')")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_COLUMN), "{e:?}");
    let n = s
        .simple_query("SELECT count(*) FROM simple_t")
        .await
        .unwrap();
    assert!(matches!(&n[0], M::Row(r) if r.get(0) == Some("2")), "{n:?}");
    drop(s);
    // In a transaction the BEGIN rides ahead: not among the results, not in the position.
    let tx = db.transaction().await.unwrap();
    let out = tx.simple_query("SELECT 'a' AS x").await.unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    let e = tx.simple_query("SELECT nope").await.unwrap_err();
    assert_eq!(e.as_db().and_then(|d| d.position()), Some(8), "{e:?}");
    drop(tx);
    db.close().await;
}

pub async fn portals_fetch_a_query_a_number_of_rows_at_a_time<H: Harness>() {
    let db = client::<H>(|c| c.pinned_size = 1).await;
    let select = "SELECT g, 'r' || g AS name FROM generate_series(1, $1::int4) g ORDER BY g";
    for round in 0..2 {
        let mut tx = db.transaction().await.unwrap();
        let portal = tx.bind(select, &[&10i32]).await.unwrap();
        // A second portal, open at once, keeps its own place.
        let other = tx.bind(select, &[&3i32]).await.unwrap();
        assert_ne!(portal.name(), other.name());
        let mut seen = Vec::new();
        for want in [4, 4, 2, 0] {
            let rows = tx.query_portal(&portal, 4).await.unwrap();
            assert_eq!(rows.len(), want, "round {round}");
            seen.extend(
                rows.iter()
                    .map(|r| (r.get::<_, i32>(0), r.get::<_, String>(1))),
            );
        }
        let want: Vec<(i32, String)> = (1..=10).map(|g| (g, format!("r{g}"))).collect();
        assert_eq!(seen, want);
        // 0 rows asked: all that are left.
        let rest = tx.query_portal(&other, 0).await.unwrap();
        assert_eq!(rest.len(), 3);
        // Through a savepoint, as on the transaction.
        let sp = tx.savepoint().await.unwrap();
        let inner = sp.bind("VALUES (1), (2)", &[]).await.unwrap();
        assert_eq!(sp.query_portal(&inner, 1).await.unwrap().len(), 1);
        sp.commit().await.unwrap();
        tx.commit().await.unwrap();
    }
    // Errors point into the caller's statement, not the DECLARE around it.
    let tx = db.transaction().await.unwrap();
    let e = tx.bind("SELECT nope", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_COLUMN), "{e:?}");
    assert_eq!(e.as_db().and_then(|d| d.position()), Some(8), "{e:?}");
    drop(tx);
    // Anything but a SELECT or VALUES is the server's refusal, typed.
    let tx = db.transaction().await.unwrap();
    let e = tx.bind("SHOW search_path", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::SYNTAX_ERROR), "{e:?}");
    drop(tx);
    // Its transaction ended, the portal is gone.
    let tx = db.transaction().await.unwrap();
    let portal = tx.bind("VALUES (1)", &[]).await.unwrap();
    tx.commit().await.unwrap();
    let tx = db.transaction().await.unwrap();
    tx.execute("SELECT 1", &[]).await.unwrap();
    let e = tx.query_portal(&portal, 1).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_CURSOR), "{e:?}");
    drop(tx);
    db.close().await;
}

pub async fn simple_query_runs_on_the_shared_path_when_the_guard_admits_every_statement<
    H: Harness,
>() {
    use pgpipe::SimpleQueryMessage as M;
    let table = format!("simple_shared_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, name text)"
    ));
    let db = client::<H>(|_| {}).await;
    let out = db
        .simple_query(&format!(
            "INSERT INTO {table} VALUES (1, 'one'), (2, NULL); \
             SELECT id, name FROM {table} ORDER BY id"
        ))
        .await
        .unwrap();
    let shape: Vec<String> = out
        .iter()
        .map(|m| match m {
            M::Row(r) => format!("{:?}", (r.get(0), r.get(1))),
            M::CommandComplete(n) => format!("done {n}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "done 2",
            "(Some(\"1\"), Some(\"one\"))",
            "(Some(\"2\"), None)",
            "done 2"
        ]
    );
    // One statement the guard refuses refuses the text: nothing of it is sent.
    let e = db
        .simple_query(&format!(
            "INSERT INTO {table} VALUES (3, 'three'); SET search_path = pg_catalog"
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Refused(_)), "{e:?}");
    // The text is one implicit transaction: an error undoes what ran before it.
    let e = db
        .simple_query(&format!(
            "INSERT INTO {table} VALUES (4, 'four'); SELECT 1 / 0"
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO), "{e:?}");
    let n = db
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(n, 2);
    // Many tasks at once, pipelined beside ordinary statements: each gets its own text back.
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let db = db.clone();
            H::spawn(async move {
                let out = db
                    .simple_query(&format!("SELECT {i}; SELECT 'x{i}'"))
                    .await
                    .unwrap();
                let row = |k: usize| match &out[k] {
                    M::Row(r) => r.get(0).map(str::to_owned),
                    other => panic!("{other:?}"),
                };
                assert_eq!(row(0).as_deref(), Some(i.to_string().as_str()));
                assert_eq!(row(2), Some(format!("x{i}")));
                let n: i32 = db.query_one("SELECT $1::int4", &[&i]).await.unwrap().get(0);
                assert_eq!(n, i);
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    db.close().await;
    psql(&format!("DROP TABLE {table}"));
}
