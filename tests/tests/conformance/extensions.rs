//! The guard's policy for extension functions, against the catalog of a real server: a
//! volatile function that belongs to an installed extension is refused on the shared path
//! unless pgpipe knows it keeps no session state or the configuration allows it; every
//! volatile function of PostgreSQL's contrib extensions is classified.

use pgpipe::guard::Reason;
use pgpipe::{Config, Error};

use crate::{client, config, psql, Db, Harness};

/// A database of its own for the adapter, with `extensions` installed (as the test's
/// superuser), and a client of it.
async fn database_with<H: Harness>(
    name: &str,
    extensions: &[&str],
    f: impl FnOnce(&mut Config),
) -> Db<H> {
    let db = format!("{name}_{}", H::name());
    psql(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
    psql(&format!("CREATE DATABASE {db}"));
    let setup = client::<H>(|c| c.dbname = db.clone()).await;
    let s = setup.session().await.expect("session");
    for e in extensions {
        s.batch_execute(&format!("CREATE EXTENSION IF NOT EXISTS \"{e}\" CASCADE"))
            .await
            .unwrap_or_else(|err| panic!("CREATE EXTENSION {e}: {err}"));
    }
    drop(s);
    setup.close().await;
    H::connect(config(|c| {
        c.dbname = db;
        f(c);
    }))
    .await
    .expect("connect")
}

/// The guard's reason for refusing `sql`, or `None` when it let the statement through.
async fn refused<H: Harness>(db: &Db<H>, sql: &str) -> Option<Reason> {
    match db.query(sql, &[]).await {
        Err(Error::Refused(r)) => Some(r.reason.clone()),
        _ => None,
    }
}

pub async fn extension_functions_are_refused_from_the_catalog<H: Harness>() {
    let setup = database_with::<H>(
        "ext_policy",
        &["pg_trgm", "uuid-ossp", "postgres_fdw"],
        |_| {},
    )
    .await;
    // Two functions of our own made members of an extension: one volatile, one stable.
    let s = setup.session().await.expect("session");
    // Besides: a stable overload of the volatile one, a user function of the same name in
    // another schema, an aggregate whose state function is volatile (CREATE AGGREGATE labels
    // it immutable), and a name with a space and a capital.
    s.batch_execute(
        "CREATE FUNCTION keeps_state() RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 1'; \
         CREATE FUNCTION reads_only() RETURNS int STABLE LANGUAGE sql AS 'SELECT 2'; \
         CREATE FUNCTION keeps_state(int) RETURNS int STABLE LANGUAGE sql AS 'SELECT $1'; \
         CREATE FUNCTION counted_step(int, int) RETURNS int VOLATILE LANGUAGE sql \
         AS 'SELECT $1 + $2'; \
         CREATE AGGREGATE counted(int) (sfunc = counted_step, stype = int, initcond = '0'); \
         CREATE FUNCTION \"Keeps State\"() RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 4'; \
         ALTER EXTENSION pg_trgm ADD FUNCTION keeps_state(); \
         ALTER EXTENSION pg_trgm ADD FUNCTION reads_only(); \
         ALTER EXTENSION pg_trgm ADD FUNCTION keeps_state(int); \
         ALTER EXTENSION pg_trgm ADD FUNCTION counted_step(int, int); \
         ALTER EXTENSION pg_trgm ADD AGGREGATE counted(int); \
         ALTER EXTENSION pg_trgm ADD FUNCTION \"Keeps State\"(); \
         CREATE SCHEMA app; \
         CREATE FUNCTION app.keeps_state() RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 3'",
    )
    .await
    .expect("extension members");
    drop(s);
    let dbname = setup.config().dbname.clone();
    setup.close().await;

    // Read when the shared connections open.
    let db = H::connect(config(|c| c.dbname = dbname.clone()))
        .await
        .expect("connect");
    assert_eq!(
        refused::<H>(&db, "SELECT keeps_state()").await,
        Some(Reason::ExtensionFunction("keeps_state".into()))
    );
    assert_eq!(
        refused::<H>(&db, "SELECT * FROM KEEPS_STATE()").await,
        Some(Reason::ExtensionFunction("keeps_state".into())),
        "any call syntax, any case"
    );
    let e = db.query("SELECT keeps_state()", &[]).await.unwrap_err();
    assert!(
        e.to_string().contains("guard_allow_functions=keeps_state"),
        "{e}"
    );
    assert_eq!(
        refused::<H>(&db, "SELECT postgres_fdw_get_connections()").await,
        Some(Reason::ForbiddenCall("postgres_fdw_get_connections"))
    );
    assert_eq!(
        refused::<H>(&db, "SELECT counted(v) FROM (VALUES (1), (2)) t(v)").await,
        Some(Reason::ExtensionFunction("counted".into())),
        "an aggregate, by its state function"
    );
    assert_eq!(
        refused::<H>(&db, "SELECT \"Keeps State\"()").await,
        Some(Reason::ExtensionFunction("Keeps State".into())),
        "an exact name"
    );
    // Known to keep no state, stable, or not a call: admitted and run.
    for sql in [
        "SELECT uuid_generate_v4() IS NOT NULL",
        "SELECT reads_only() = 2",
        "SELECT similarity('abc', 'abd') > 0",
        // The stable overload, and a function of the same name in another schema.
        "SELECT keeps_state(7) = 7",
        "SELECT (7).KEEPS_STATE = 7",
        "SELECT app.keeps_state() = 3",
        "WITH keeps_state(v) AS (SELECT true) SELECT v FROM keeps_state",
    ] {
        let row = db
            .query_one(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(row.get::<_, bool>(0), "{sql}");
    }
    // In a session it runs.
    let s = db.session().await.expect("session");
    let v: i32 = s
        .query_one("SELECT keeps_state()", &[])
        .await
        .expect("in a session")
        .get(0);
    assert_eq!(v, 1);
    drop(s);
    db.close().await;

    let allowed = H::connect(config(|c| {
        c.dbname = dbname.clone();
        c.guard_allow_functions = vec!["Keeps_State".into()];
    }))
    .await
    .expect("connect");
    let v: i32 = allowed
        .query_one("SELECT keeps_state()", &[])
        .await
        .expect("allowed by configuration")
        .get(0);
    assert_eq!(v, 1);
    allowed.close().await;
    psql(&format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"));
}

/// Every volatile routine (any kind; aggregates by their support functions) of every contrib
/// extension this server has is either refused by name (it keeps session state) or known to
/// keep none: none falls to the catalog rule, so a new one in a later PostgreSQL shows up here.
pub async fn every_contrib_volatile_function_is_classified<H: Harness>() {
    let available: Vec<String> =
        psql("SELECT name FROM pg_available_extensions WHERE name <> 'plpgsql' ORDER BY name")
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
    assert!(available.len() >= 20, "contrib is installed: {available:?}");
    let names: Vec<&str> = available.iter().map(String::as_str).collect();
    let db = database_with::<H>("ext_contrib", &names, |_| {}).await;
    // What the client itself asks, with a call of each routine's argument count.
    let s = db.session().await.expect("session");
    let routines: Vec<(String, String, i16)> = s
        .query(
            &format!(
                "SELECT q.nspname::text, q.proname::text, q.pronargs::int2 FROM ({}) q(nspname, \
                 proname, pronargs, pronargdefaults, is_variadic) ORDER BY 1, 2, 3",
                pgpipe_catalog_query()
            ),
            &[],
        )
        .await
        .expect("the catalog")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    drop(s);
    assert!(
        routines.len() >= 100,
        "{} volatile routines",
        routines.len()
    );
    let mut unknown = Vec::new();
    for (schema, name, args) in &routines {
        let nulls = vec!["NULL"; *args as usize].join(", ");
        // WHERE false: the call is planned, never run.
        let sql = format!("SELECT \"{schema}\".\"{name}\"({nulls}) WHERE false");
        if let Some(Reason::ExtensionFunction(n)) = refused::<H>(&db, &sql).await {
            unknown.push(n);
        }
    }
    assert!(
        unknown.is_empty(),
        "volatile contrib routines pgpipe has not classified: {unknown:?}"
    );
    let dbname = db.config().dbname.clone();
    db.close().await;
    psql(&format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"));
}

/// The catalog question a shared connection asks (`proto::catalog`), as the test asks it.
fn pgpipe_catalog_query() -> &'static str {
    pgpipe::internals::EXTENSION_ROUTINES_QUERY
}
