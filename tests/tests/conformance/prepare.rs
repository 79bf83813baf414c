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
