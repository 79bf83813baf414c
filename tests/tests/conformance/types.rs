//! Types users define: enums, domains, composites, ranges, multiranges and arrays of them, with
//! `postgres-types`' derive, in both directions; looked up once per client; a type dropped and
//! created again is looked up again.

use pgpipe::types::{FromSql, Kind, ToSql, Type};
use pgpipe::SqlState;

use crate::{client, psql, Harness};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSql, FromSql)]
#[postgres(name = "mood")]
enum Mood {
    #[postgres(name = "sad")]
    Sad,
    #[postgres(name = "ok")]
    Ok,
    #[postgres(name = "happy")]
    Happy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSql, FromSql)]
#[postgres(name = "posint")]
struct PosInt(i32);

#[derive(Debug, Clone, PartialEq, ToSql, FromSql)]
#[postgres(name = "pair")]
struct Pair {
    a: i32,
    b: String,
    m: Mood,
}

/// A range's wire bytes, for a range type no Rust crate is linked here for: enough to see it
/// decode with the right kind.
#[derive(Debug)]
struct RawRange(Kind);

impl<'a> FromSql<'a> for RawRange {
    fn from_sql(
        ty: &Type,
        _raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawRange(ty.kind().clone()))
    }
    fn accepts(ty: &Type) -> bool {
        matches!(ty.kind(), Kind::Range(_) | Kind::Multirange(_))
    }
}

fn schema<H: Harness>() -> String {
    format!("ct_{}", H::name())
}

fn create_types(s: &str) {
    psql(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s};
         CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
         CREATE DOMAIN {s}.posint AS int4 CHECK (VALUE > 0);
         CREATE TYPE {s}.pair AS (a int4, b text, m {s}.mood);
         CREATE TYPE {s}.floatrange AS RANGE (subtype = float8);
         CREATE TABLE {s}.t (id int PRIMARY KEY, m {s}.mood, ms {s}.mood[], p {s}.pair, ps {s}.pair[], n {s}.posint);"
    ));
}

pub async fn custom_types_round_trip_and_are_looked_up_once<H: Harness>() {
    let s = schema::<H>();
    create_types(&s);
    let db = client::<H>(|c| {
        c.pipeline_size = 2;
    })
    .await;
    // Enum in, enum out; and an array of them.
    let row = db
        .query_one(&format!("SELECT $1::{s}.mood"), &[&Mood::Happy])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Mood>(0), Mood::Happy);
    let first = db.stats().type_lookups;
    assert!(
        first >= 2,
        "the enum was looked up (type and labels): {first}"
    );
    let moods = vec![Mood::Sad, Mood::Ok];
    let row = db
        .query_one(&format!("SELECT $1::{s}.mood[]"), &[&moods])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<Mood>>(0), moods);
    // Domain, composite (with an enum field), arrays of composites, through a table.
    let pair = Pair {
        a: 7,
        b: "seven".into(),
        m: Mood::Ok,
    };
    let n = db
        .execute(
            &format!("INSERT INTO {s}.t VALUES (1, $1, $2, $3, $4, $5)"),
            &[
                &Mood::Sad,
                &moods,
                &pair,
                &vec![pair.clone(), pair.clone()],
                &PosInt(3),
            ],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let row = db
        .query_one(
            &format!("SELECT m, ms, p, ps, n FROM {s}.t WHERE id = $1"),
            &[&1i32],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Mood>(0), Mood::Sad);
    assert_eq!(row.get::<_, Vec<Mood>>(1), moods);
    assert_eq!(row.get::<_, Pair>(2), pair);
    assert_eq!(row.get::<_, Vec<Pair>>(3).len(), 2);
    assert_eq!(row.get::<_, PosInt>(4), PosInt(3));
    // The domain's check still runs on the server.
    let e = db
        .execute(
            &format!("UPDATE {s}.t SET n = $1 WHERE id = 1"),
            &[&PosInt(-1)],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{e}");
    // Ranges and multiranges resolve to their kinds.
    let row = db
        .query_one(
            &format!("SELECT {s}.floatrange(1, 2), {s}.floatmultirange({s}.floatrange(1, 2))"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.columns()[0].type_().name(), "floatrange");
    assert!(matches!(row.get::<_, RawRange>(0).0, Kind::Range(ref t) if *t == Type::FLOAT8));
    assert!(
        matches!(row.get::<_, RawRange>(1).0, Kind::Multirange(ref r) if r.name() == "floatrange")
    );
    // Every type is known now: new statements over them cost no lookup, on any connection.
    let known = db.stats().type_lookups;
    for i in 0..20i32 {
        let row = db
            .query_one(
                &format!("SELECT $1::{s}.mood, $2::{s}.pair, {i}"),
                &[&Mood::Ok, &pair],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, Pair>(1), pair);
    }
    assert_eq!(
        db.stats().type_lookups,
        known,
        "cached types are not looked up again"
    );
    // A typed query has no cached statement: its result columns are completed from the cache.
    let rows = db
        .query_typed(
            &format!("SELECT $1::text::{s}.mood"),
            &[(&"happy", Type::TEXT)],
        )
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, Mood>(0), Mood::Happy);
    // The same in a transaction, on an exclusive connection.
    let tx = db.transaction().await.unwrap();
    let row = tx
        .query_one(&format!("SELECT p FROM {s}.t WHERE id = 1"), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Pair>(0), pair);
    tx.rollback().await.unwrap();
    db.close().await;
}

pub async fn a_type_created_again_is_looked_up_again<H: Harness>() {
    let s = format!("{}_re", schema::<H>());
    create_types(&s);
    let db = client::<H>(|c| c.pipeline_size = 1).await;
    let sql = format!("SELECT $1::{s}.mood::text");
    let row = db.query_one(&sql, &[&Mood::Ok]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "ok");
    // A type created inside a session's own transaction is looked up on that session's
    // connection (no other connection can see it yet).
    let session = db.session().await.unwrap();
    session
        .batch_execute(&format!(
            "BEGIN; CREATE SCHEMA {s}_tx; CREATE TYPE {s}_tx.mood AS ENUM ('sad', 'ok', 'happy')"
        ))
        .await
        .unwrap();
    let row = session
        .query_one(&format!("SELECT $1::{s}_tx.mood"), &[&Mood::Ok])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Mood>(0), Mood::Ok);
    session.batch_execute("ROLLBACK").await.unwrap();
    drop(session);
    // Dropped and created again: a new OID, looked up again under a new statement.
    psql(&format!(
        "DROP TYPE {s}.mood CASCADE; CREATE TYPE {s}.mood AS ENUM ('happy', 'ok', 'sad')"
    ));
    // The cached statement of the same text is stale on the server ("cache lookup failed for
    // type"): it is prepared again, once, and its new types looked up.
    let before = db.stats().type_lookups;
    let row = db.query_one(&sql, &[&Mood::Happy]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "happy");
    assert!(
        db.stats().type_lookups > before,
        "the new OID was looked up"
    );
    // The same for a result whose shape changed under a cached statement.
    let select = format!("SELECT * FROM {s}.t WHERE id = $1");
    assert_eq!(db.query(&select, &[&1i32]).await.unwrap().len(), 0);
    psql(&format!(
        "ALTER TABLE {s}.t ADD COLUMN extra text DEFAULT 'x'; INSERT INTO {s}.t (id) VALUES (1)"
    ));
    let rows = db.query(&select, &[&1i32]).await.unwrap();
    assert_eq!(
        rows[0].get::<_, Option<String>>("extra").as_deref(),
        Some("x")
    );
    // Inside a transaction the error aborts it, so nothing is retried there.
    let tx = db.transaction().await.unwrap();
    assert_eq!(tx.query(&select, &[&1i32]).await.unwrap().len(), 1);
    tx.execute(&format!("ALTER TABLE {s}.t ADD COLUMN extra2 int"), &[])
        .await
        .unwrap();
    let e = tx.query(&select, &[&1i32]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED), "{e}");
    tx.rollback().await.unwrap();
    db.close().await;
}
