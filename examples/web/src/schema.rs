//! The benchmark's data: a database of its own, `world` (10,000 rows) and `fortune` (the 12
//! TechEmpower fortunes), loaded with tokio-postgres on a throwaway current-thread runtime.

use crate::app::{error_chain, WORLD_ROWS};

/// TechEmpower's fortunes, as its `create-postgres.sql` inserts them.
pub const FORTUNES: [(i32, &str); 12] = [
    (1, "fortune: No such file or directory"),
    (
        2,
        "A computer scientist is someone who fixes things that aren't broken.",
    ),
    (3, "After enough decimal places, nobody gives a damn."),
    (
        4,
        "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    ),
    (
        5,
        "A computer program does what you tell it to do, not what you want it to do.",
    ),
    (
        6,
        "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen",
    ),
    (7, "Any program that runs right is obsolete."),
    (
        8,
        "A list is only as strong as its weakest link. — Donald Knuth",
    ),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (
        11,
        "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
    ),
    (12, "フレームワークのベンチマーク"),
];

/// `url` with its database replaced by `dbname`. Handles `postgres://` URLs (the path) and
/// keyword/value strings (a `dbname=` appended, which wins over an earlier one).
pub fn with_dbname(url: &str, dbname: &str) -> String {
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return format!("{url} dbname={dbname}");
    };
    let scheme = &url[..url.len() - rest.len()];
    let (before_query, query) = match rest.find('?') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let authority = before_query.split('/').next().unwrap_or("");
    format!("{scheme}{authority}/{dbname}{query}")
}

fn block_on<T>(fut: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(fut)
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("connecting to {}: {}", redact(url), error_chain(&e)))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => {
            let cred = &url[s + 3..at];
            match cred.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &cred[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Drops and creates the database `dbname` through `admin_url` (any database of the same
/// server), and returns the URL of the new one.
pub fn recreate_database(admin_url: &str, dbname: &str) -> Result<String, String> {
    if !dbname
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(format!("bad database name {dbname:?}"));
    }
    block_on(async {
        let c = connect(admin_url).await?;
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"))
            .await
            .map_err(|e| format!("dropping {dbname}: {}", error_chain(&e)))?;
        c.batch_execute(&format!("CREATE DATABASE {dbname}"))
            .await
            .map_err(|e| format!("creating {dbname}: {}", error_chain(&e)))?;
        Ok(())
    })?;
    Ok(with_dbname(admin_url, dbname))
}

/// (Re)creates `world` and `fortune` in the database of `url` and fills them: world ids
/// 1..=10000 with random numbers 1..=10000, and the 12 fortunes.
pub fn load(url: &str) -> Result<(), String> {
    block_on(async {
        let c = connect(url).await?;
        let sql = format!(
            "DROP TABLE IF EXISTS world, fortune;
             CREATE TABLE world (id int4 PRIMARY KEY, randomnumber int4 NOT NULL DEFAULT 0);
             CREATE TABLE fortune (id int4 PRIMARY KEY, message varchar(2048) NOT NULL);
             INSERT INTO world SELECT g, 1 + floor(random() * {WORLD_ROWS})::int4
                 FROM generate_series(1, {WORLD_ROWS}) g;"
        );
        c.batch_execute(&sql).await.map_err(|e| error_chain(&e))?;
        let insert = c
            .prepare("INSERT INTO fortune (id, message) VALUES ($1, $2)")
            .await
            .map_err(|e| error_chain(&e))?;
        for (id, message) in FORTUNES {
            c.execute(&insert, &[&id, &message])
                .await
                .map_err(|e| error_chain(&e))?;
        }
        // One statement per call: a multi-statement string is one transaction, and VACUUM
        // refuses to run in one.
        for table in ["world", "fortune"] {
            c.batch_execute(&format!("VACUUM ANALYZE {table}"))
                .await
                .map_err(|e| error_chain(&e))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbname_is_replaced() {
        assert_eq!(
            with_dbname("postgres://u:p@127.0.0.1:5/postgres?sslmode=disable", "w"),
            "postgres://u:p@127.0.0.1:5/w?sslmode=disable"
        );
        assert_eq!(with_dbname("postgres://h", "w"), "postgres://h/w");
        assert_eq!(with_dbname("host=h", "w"), "host=h dbname=w");
        assert_eq!(redact("postgres://u:p@h/d"), "postgres://u:***@h/d");
    }
}
