//! The Rust code of the documentation is code of this file, so it cannot drift.
//!
//! Every ```` ```rust ```` block of the files in [`DOCS`] must appear here, line for line (after
//! removing the common indentation), between `// <file>: begin` and `// <file>: end` markers; and
//! every marked region must appear in its file. The README's "Use" and "Types" blocks run
//! against the throwaway test server; the blocks that connect to other hosts only compile. The
//! functions are `#[rustfmt::skip]`: their text is the documentation's.
//!
//! The README's `toml` block names adapter features: each must be a feature of `pgpipe-smol`.

use pgpipe_adopt::root;
use std::error::Error;

/// Documentation files whose Rust blocks live here.
const DOCS: &[&str] = &[
    "README.md",
    "docs/CONNECTING.md",
    "docs/TOPOLOGY.md",
    "docs/TRANSACTIONS.md",
    "docs/DATA.md",
    "docs/ERRORS.md",
    "docs/MIGRATING.md",
];

/// This file, as the messages name it.
const THIS: &str = "tests/adopt/tests/docs.rs";

/// The fenced blocks of `text` whose info string starts with `lang`, as lines.
fn blocks(text: &str, lang: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(info)) if info.split([',', ' ']).next() == Some(lang) => {
                current = Some(Vec::new());
            }
            (Some(_), Some(_)) => out.extend(current.take()),
            (Some(lines), None) => lines.push(line.trim_end().to_owned()),
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unterminated ```{lang} block");
    out
}

/// The regions of this file marked for `doc`, dedented.
fn regions(source: &str, doc: &str) -> Vec<Vec<String>> {
    let (begin, end) = (format!("// {doc}: begin"), format!("// {doc}: end"));
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in source.lines() {
        let t = line.trim();
        if t == begin {
            assert!(current.is_none(), "nested {begin}");
            current = Some(Vec::new());
        } else if t == end {
            out.push(dedent(&current.take().expect("end without begin")));
        } else if let Some(lines) = &mut current {
            lines.push(line);
        }
    }
    assert!(current.is_none(), "{begin} without end");
    out
}

fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end().to_owned())
        .collect()
}

#[test]
fn every_rust_block_of_the_docs_is_compiled_here() {
    let source = std::fs::read_to_string(root().join(THIS)).unwrap();
    for doc in DOCS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let (blocks, regions) = (blocks(&text, "rust"), regions(&source, doc));
        assert!(!blocks.is_empty(), "{doc} has no rust block");
        for b in &blocks {
            assert!(
                regions.contains(b),
                "this ```rust block of {doc} is not in {THIS} (copy it between \
                 `// {doc}: begin` and `// {doc}: end`):\n{}",
                b.join("\n")
            );
        }
        for r in &regions {
            assert!(
                blocks.contains(r),
                "this region of {THIS} is no block of {doc}:\n{}",
                r.join("\n")
            );
        }
    }
}

#[test]
fn the_readme_toml_names_adapter_features() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let manifest = std::fs::read_to_string(root().join("adapters/smol/Cargo.toml")).unwrap();
    let tomls = blocks(&readme, "toml");
    assert!(!tomls.is_empty(), "README.md has no toml block");
    for line in tomls.iter().flatten() {
        let Some(features) = line
            .strip_prefix("pgpipe-smol = ")
            .and_then(|l| l.split("features = [").nth(1))
        else {
            continue;
        };
        for f in features.split(']').next().unwrap_or("").split(',') {
            let f = f.trim().trim_matches('"');
            assert!(
                manifest.lines().any(|l| l.starts_with(&format!("{f} = "))),
                "README.md names feature {f:?}, which pgpipe-smol does not have"
            );
        }
    }
}

#[test]
fn the_readme_names_every_metric_the_driver_emits() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let observe = std::fs::read_to_string(root().join("core/src/observe.rs")).unwrap();
    let mut names = Vec::new();
    for kind in ["counter!(", "gauge!(", "histogram!("] {
        for rest in observe.split(kind).skip(1) {
            // The name is the macro's first argument, a string literal (maybe on the next line).
            let name = rest
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next());
            names.push(name.expect("a metric named by a literal"));
        }
    }
    assert!(
        names.len() >= 10,
        "found only {names:?} in core/src/observe.rs"
    );
    for name in names {
        assert!(
            readme.contains(&format!("`{name}`")),
            "README.md's Observe section does not name the metric {name:?}"
        );
    }
}

#[test]
fn the_readme_runs_against_the_test_server() {
    // The README reads DATABASE_URL; this test is the only one here that touches the
    // environment or opens connections.
    let url = pgpipe_tests::shared().url();
    std::env::set_var("DATABASE_URL", url);
    smol::block_on(async {
        readme_use().await.expect("README: Use");
        readme_types().await.expect("README: Types");
        transactions_cost().await.expect("TRANSACTIONS.md");
        data().await.expect("DATA.md");
        errors().await.expect("ERRORS.md");
    });
    // The migration guide's program is tokio-postgres's, on the tokio adapter.
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    rt.block_on(migrating()).expect("MIGRATING.md");
}

#[rustfmt::skip]
async fn migrating() -> Result<(), Box<dyn Error>> {
    // docs/MIGRATING.md: begin
    use pgpipe_tokio::IsolationLevel;

    // tokio_postgres::connect(url, NoTls) + tokio::spawn(connection); deadpool's Pool
    let db = pgpipe_tokio::connect(&std::env::var("DATABASE_URL")?).await?;
    let by_id = db.prepare("SELECT name FROM accounts WHERE id = $1").await?;  // client.prepare
    let name: String = db.query_one(&by_id, &[&1i32]).await?.get(0);           // client.query_one

    let tx = db                                                                 // client.build_transaction()
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await?;
    tx.execute("UPDATE accounts SET balance = balance - 1 WHERE id = $1", &[&1i32]).await?;
    tx.commit().await?;

    let s = db.session().await?;                      // where a pooled client ran SET, LISTEN, scripts
    s.batch_execute("SET statement_timeout = '5s'; CREATE TEMP TABLE seen (id int)").await?;
    let token = s.cancel_token();                     // client.cancel_token()
    let asked = token.cancel();                       // nothing running: nothing to cancel
    // docs/MIGRATING.md: end
    assert_eq!((name.as_str(), asked), ("alice", false));
    drop(s);
    db.close().await;
    Ok(())
}

#[rustfmt::skip]
async fn errors() -> Result<(), Box<dyn Error>> {
    // docs/ERRORS.md: begin
    use pgpipe_smol::guard::RefusalKind;
    use pgpipe_smol::{Error, SqlState};

    let db = pgpipe_smol::connect(&std::env::var("DATABASE_URL")?).await?;
    let e = db.execute("SELECT 1 / 0", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO));
    assert_eq!(e.code().and_then(SqlState::condition_name), Some("division_by_zero"));
    assert_eq!(e.code().and_then(SqlState::class_title), Some("Data Exception"));

    // The guard says what kind of statement it refused and what to run instead.
    match db.execute("SET search_path TO app", &[]).await {
        Err(Error::Refused(r)) => {
            assert_eq!(r.kind(), RefusalKind::SessionChanging);
            assert!(r.advice().contains("options=-c search_path=app"));
        }
        other => panic!("{other:?}"),
    }
    db.close().await;
    // docs/ERRORS.md: end
    Ok(())
}

/// Compiled only: the host does not exist here.
#[allow(dead_code)]
#[rustfmt::skip]
async fn errors_login() -> Result<(), pgpipe_tokio::Error> {
    // docs/ERRORS.md: begin
    match pgpipe_tokio::connect("postgres://app:typo@db.example/shop").await {
        Err(e) if e.code() == Some(&pgpipe_tokio::SqlState::INVALID_PASSWORD) => { /* ask again */ }
        Err(e) if e.is_auth() => { /* another authentication problem: e says which */ }
        Err(e) => return Err(e),
        Ok(db) => db.close().await,
    }
    // docs/ERRORS.md: end
    Ok(())
}

#[rustfmt::skip]
async fn readme_use() -> Result<(), Box<dyn Error>> {
    // README.md: begin
    let db = pgpipe_smol::connect(&std::env::var("DATABASE_URL")?).await?;  // e.g. postgres://app:pw@localhost/shop
    let s = db.session().await?;                      // exclusive connection: DDL, SET, LISTEN, temp tables
    s.batch_execute("CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, name text, balance int)").await?;
    drop(s);                                          // reset, then back in the pool

    let n: u64 = db.execute(
        "INSERT INTO accounts VALUES ($1, $2, 100) ON CONFLICT (id) DO UPDATE SET balance = 100",
        &[&1i32, &"alice"],
    ).await?;
    let row = db.query_one("SELECT id, name, balance FROM accounts WHERE id = $1", &[&1i32]).await?;
    let balance: i32 = row.get("balance");            // decoded on access; panics on a wrong type
    let name: Option<String> = row.try_get("name")?;  // a typed error instead of a panic
    let by_balance = db.prepare("SELECT id FROM accounts WHERE balance >= $1").await?;  // types, not run
    let rows = db.query(&by_balance, &[&50i32]).await?;
    let ratio = db.stats().total.units_per_readable();
    println!("{n} upserted, {name:?} has {balance}, {} rows, {ratio:.1} units per readable", rows.len());

    let tx = db.transaction().await?;                 // exclusive connection; drop = rollback
    tx.execute("UPDATE accounts SET balance = balance - 1 WHERE id = $1", &[&1i32]).await?;
    tx.commit().await?;

    let s = db.session().await?;
    s.batch_execute("LISTEN jobs").await?;
    db.execute("SELECT pg_notify('jobs', $1)", &[&"job 42"]).await?;  // NOTIFY from any connection
    let note = s.next_notification().await?;
    assert_eq!(note.payload, "job 42");
    db.close().await;                                 // drain in-flight work, then close
    // README.md: end
    assert_eq!((n, name.as_deref(), balance), (1, Some("alice"), 100));
    Ok(())
}

#[rustfmt::skip]
async fn transactions_cost() -> Result<(), Box<dyn Error>> {
    let db = pgpipe_smol::connect(&std::env::var("DATABASE_URL")?).await?;
    db.execute("INSERT INTO accounts VALUES (1, 'alice', 100), (2, 'bob', 100) \
                ON CONFLICT (id) DO UPDATE SET balance = 100", &[]).await?;
    // docs/TRANSACTIONS.md: begin
    let tx = db.transaction().await?;                       // sends nothing yet
    tx.execute("UPDATE accounts SET balance = balance - $1 WHERE id = $2", &[&5i32, &1i32]).await?;
    let rows = tx.query_and_commit("SELECT balance FROM accounts WHERE id = $1", &[&1i32]).await?;

    let results = db.batch()                                // no exclusive connection at all
        .add("UPDATE accounts SET balance = balance - $1 WHERE id = $2", &[&5i32, &1i32])
        .add("UPDATE accounts SET balance = balance + $1 WHERE id = $2", &[&5i32, &2i32])
        .add("SELECT balance FROM accounts WHERE id = $1", &[&1i32])
        .run()
        .await?;
    let balance: i32 = results[2].rows()[0].get(0);
    // docs/TRANSACTIONS.md: end
    assert_eq!((rows[0].get::<_, i32>(0), balance), (95, 90));
    db.close().await;
    Ok(())
}

#[rustfmt::skip]
async fn readme_types() -> Result<(), Box<dyn Error>> {
    // README.md: begin
    #[derive(Debug, PartialEq, postgres_types::ToSql, postgres_types::FromSql)]
    #[postgres(name = "mood", rename_all = "lowercase")]
    enum Mood { Sad, Ok, Happy }

    let db = pgpipe_smol::connect(&std::env::var("DATABASE_URL")?).await?;
    let s = db.session().await?;
    s.batch_execute("DROP TYPE IF EXISTS mood; CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')").await?;
    drop(s);
    let price: rust_decimal::Decimal = "19.99".parse()?;
    let row = db.query_one(
        "SELECT $1::mood, $2::numeric * 3, now(), gen_random_uuid(), $3::jsonb",
        &[&Mood::Happy, &price, &serde_json::json!({"tags": ["new"]})],
    ).await?;
    let mood: Mood = row.get(0);
    let total: rust_decimal::Decimal = row.get(1);
    let at: chrono::DateTime<chrono::Utc> = row.get(2);
    let id: uuid::Uuid = row.get(3);
    let doc: serde_json::Value = row.get(4);
    assert_eq!((mood, total.to_string(), doc["tags"][0].as_str()), (Mood::Happy, "59.97".into(), Some("new")));
    println!("{id} at {at}");
    db.close().await;
    // README.md: end
    Ok(())
}

/// Connection strings for other hosts: compiled, never run.
#[rustfmt::skip]
#[allow(dead_code, unused_variables)]
async fn readme_connection_strings() -> Result<(), pgpipe_smol::Error> {
    // README.md: begin
    let db = pgpipe_smol::connect("postgres://user:pw@127.0.0.1:5432/db?pipeline_size=4").await?;
    let db = pgpipe_tokio::connect("host=db.example.com dbname=shop user=app sslmode=verify-full sslrootcert=ca.pem").await?;
    let db = pgpipe_smol::connect("postgres:///shop?host=/var/run/postgresql&pipeline_size=8").await?;
    // README.md: end
    Ok(())
}

/// The read-replica pattern of docs/TOPOLOGY.md (it names other hosts: compiled, never run).
#[rustfmt::skip]
#[allow(dead_code, unused_variables)]
async fn topology_replicas() -> Result<(), pgpipe_tokio::Error> {
    // docs/TOPOLOGY.md: begin
    let writes = pgpipe_tokio::connect("postgres://app@db1,db2/shop?target_session_attrs=read-write").await?;
    let reads = pgpipe_tokio::connect("postgres://app@db2,db1/shop?target_session_attrs=prefer-standby").await?;
    writes.execute("UPDATE accounts SET balance = balance - 1 WHERE id = $1", &[&1i32]).await?;
    let row = reads.query_one("SELECT balance FROM accounts WHERE id = $1", &[&1i32]).await?;  // may be stale
    // docs/TOPOLOGY.md: end
    Ok(())
}

#[rustfmt::skip]
#[allow(dead_code, unused_variables)]
async fn connecting_strings() -> Result<(), pgpipe_tokio::Error> {
    // docs/CONNECTING.md: begin
    let db = pgpipe_tokio::connect("postgres://app@db.example/shop?sslmode=verify-full&pipeline_size=8").await?;
    let db = pgpipe_tokio::connect("host=db.example user=app dbname=shop sslmode=verify-full pipeline_size=8").await?;

    let mut cfg = pgpipe_tokio::Config::parse("host=/var/run/postgresql dbname=shop")?;
    cfg.max_in_flight = 32;
    let db = pgpipe_tokio::connect_with(cfg).await?;
    // docs/CONNECTING.md: end
    Ok(())
}

#[rustfmt::skip]
#[allow(dead_code, unused_variables)]
async fn connecting_tls() -> Result<(), pgpipe_tokio::Error> {
    // docs/CONNECTING.md: begin
    // Managed PostgreSQL: encrypted, the certificate checked against the CA and the host name.
    let db = pgpipe_tokio::connect("host=db.example.com user=app dbname=shop sslmode=verify-full sslrootcert=/etc/ssl/db-ca.pem").await?;
    // The platform's trust store (implies verify-full, as in libpq).
    let db = pgpipe_tokio::connect("postgres://app@db.example.com/shop?sslrootcert=system").await?;
    // Client-certificate login.
    let db = pgpipe_tokio::connect("host=db.internal user=batch sslmode=verify-full sslrootcert=ca.pem sslcert=batch.crt sslkey=batch.key").await?;
    // docs/CONNECTING.md: end
    Ok(())
}

#[rustfmt::skip]
#[allow(dead_code, unused_variables)]
async fn connecting_unix_sockets() -> Result<(), pgpipe_smol::Error> {
    // docs/CONNECTING.md: begin
    let db = pgpipe_smol::connect("host=/var/run/postgresql dbname=shop").await?;
    let db = pgpipe_smol::connect("postgres:///shop?host=/var/run/postgresql").await?;
    let db = pgpipe_smol::connect("postgres://%2Fvar%2Frun%2Fpostgresql/shop").await?;
    // docs/CONNECTING.md: end
    Ok(())
}

#[rustfmt::skip]
#[allow(unused_variables)]
async fn data() -> Result<(), Box<dyn Error>> {
    use postgres_types::{FromSql, ToSql};
    let db = pgpipe_smol::connect(&std::env::var("DATABASE_URL")?).await?;
    let session = db.session().await?;
    session.batch_execute("DROP TYPE IF EXISTS mood CASCADE; CREATE TYPE mood AS ENUM ('sad', 'happy'); \
                           CREATE TEMP TABLE items (id int, name text)").await?;
    // docs/DATA.md: begin
    #[derive(Debug, ToSql, FromSql)]
    #[postgres(name = "mood")]
    enum Mood { #[postgres(name = "sad")] Sad, #[postgres(name = "happy")] Happy }

    let row = db.query_one("SELECT $1::mood", &[&Mood::Happy]).await?;
    let m: Mood = row.get(0);
    // docs/DATA.md: end
    assert!(matches!(m, Mood::Happy));
    // docs/DATA.md: begin
    let mut w = session.copy_in("COPY items FROM STDIN (FORMAT csv)").await?;
    w.write(b"1,apple\n2,pear\n").await?;
    let copied = w.finish().await?;                     // rows copied

    let mut out = session.copy_out("COPY items TO STDOUT").await?;
    while let Some(chunk) = out.next().await { let chunk = chunk?; /* one row per chunk in text/CSV */ }
    // docs/DATA.md: end
    assert_eq!(copied, 2);
    // docs/DATA.md: begin
    use pgpipe_smol::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
    use pgpipe_smol::types::Type;

    let types = [Type::INT4, Type::TEXT];
    let mut w = BinaryCopyInWriter::new(session.copy_in("COPY items FROM STDIN (FORMAT binary)").await?, &types);
    w.write(&[&3i32, &"plum"]).await?;
    let copied = w.finish().await?;                     // rows copied

    let mut rows = BinaryCopyOutStream::new(session.copy_out("COPY items TO STDOUT (FORMAT binary)").await?, &types);
    while let Some(row) = rows.next().await { let row = row?; let name: &str = row.get(1); }
    // docs/DATA.md: end
    assert_eq!(copied, 1);
    drop(session);
    db.close().await;
    Ok(())
}
