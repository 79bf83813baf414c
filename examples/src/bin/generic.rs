//! One library function, generic over the runtime, used unchanged from smol, tokio and glommio
//! in one program.
//!
//! ```text
//! cargo run -p pgpipe-examples --bin generic
//! ```
//! With `DATABASE_URL` (a `postgres://` URL) it uses that server; otherwise it starts a
//! throwaway PostgreSQL cluster and removes it afterwards. glommio needs io_uring; where it is
//! unavailable the program says why and exits with an error after the other two runtimes.
//!
//! A library that uses pgpipe takes `&pgpipe::Client<R>` with `R: pgpipe::rt::Runtime` for
//! statements on the shared path, and `R: pgpipe::Adapter` where it also opens sessions or
//! transactions (those may open a connection, so they need the runtime's spawn). Nothing else
//! about the runtime shows in its signatures: Send-ness follows `R` (the futures of a tokio
//! client are `Send`, a glommio client's are not), so the same function serves both.

use pgpipe::rt::Runtime;
use pgpipe::{Adapter, Client, Error};

/// Creates and fills the example's table once (DDL goes through a session: the shared path's
/// guard admits only statements that leave no session state behind).
pub async fn setup<R: Adapter>(db: &Client<R>) -> Result<(), Error> {
    let s = db.session().await?;
    s.batch_execute(
        "CREATE TABLE IF NOT EXISTS pgpipe_generic_accounts (id int4 PRIMARY KEY, balance int8 NOT NULL)",
    )
    .await?;
    s.execute(
        "INSERT INTO pgpipe_generic_accounts \
         SELECT g, (g * 7919) % 10007 FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING",
        &[],
    )
    .await?;
    Ok(())
}

/// The `n` accounts with the highest balance, highest first: `(id, balance)`.
pub async fn top_balances<R: Runtime>(db: &Client<R>, n: i64) -> Result<Vec<(i32, i64)>, Error> {
    let rows = db
        .query(
            "SELECT id, balance FROM pgpipe_generic_accounts ORDER BY balance DESC, id LIMIT $1",
            &[&n],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Moves `amount` between two accounts in one transaction; returns the new balance of `from`.
pub async fn transfer<R: Adapter>(
    db: &Client<R>,
    from: i32,
    to: i32,
    amount: i64,
) -> Result<i64, Error> {
    let tx = db.transaction().await?;
    let left: i64 = tx
        .query_one(
            "UPDATE pgpipe_generic_accounts SET balance = balance - $2 WHERE id = $1 RETURNING balance",
            &[&from, &amount],
        )
        .await?
        .get(0);
    tx.execute(
        "UPDATE pgpipe_generic_accounts SET balance = balance + $2 WHERE id = $1",
        &[&to, &amount],
    )
    .await?;
    tx.commit().await?;
    Ok(left)
}

/// What each runtime reports: the top balances, and the total after a transfer there and back.
type Report = (Vec<(i32, i64)>, i64);

/// The same calls on any runtime: the library functions do not know which one runs them.
async fn exercise<R: Adapter>(db: &Client<R>) -> Result<Report, Error> {
    setup(db).await?;
    let top = top_balances(db, 3).await?;
    transfer(db, 1, 2, 5).await?;
    transfer(db, 2, 1, 5).await?;
    let total: i64 = db
        .query_one(
            "SELECT sum(balance)::int8 FROM pgpipe_generic_accounts",
            &[],
        )
        .await?
        .get(0);
    Ok((top, total))
}

fn on_smol(url: &str) -> Result<Report, Error> {
    smol::block_on(async {
        let db = pgpipe_smol::connect(url).await?;
        let r = exercise(&db).await;
        db.close().await;
        r
    })
}

fn on_tokio(url: &str) -> Result<Report, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let db = pgpipe_tokio::connect(url).await?;
        // On tokio the client and the library's futures are Send: run them on a worker task.
        let worker = db.clone();
        let r = tokio::spawn(async move { exercise(&worker).await })
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))?;
        db.close().await;
        r
    })
}

fn on_glommio(url: &str) -> Result<Report, Error> {
    pgpipe_glommio::check_io_uring()?;
    let url = url.to_owned();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            // The client and the library's futures stay on this executor (!Send).
            let db = pgpipe_glommio::connect(&url).await?;
            let r = exercise(&db).await;
            db.close().await;
            r
        })
        .and_then(|h| h.join())
        .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?
}

fn main() {
    let (_cluster, url) = pgpipe_examples::database();
    type Run = fn(&str) -> Result<Report, Error>;
    let runs: [(&str, Run); 3] = [
        ("smol", on_smol),
        ("tokio", on_tokio),
        ("glommio", on_glommio),
    ];
    let mut reports = Vec::new();
    let mut failed = false;
    for (name, run) in runs {
        match run(&url) {
            Ok((top, total)) => {
                println!("{name:<8} top_balances(3) = {top:?}, total after transfers = {total}");
                reports.push((top, total));
            }
            Err(e) => {
                eprintln!("{name:<8} failed: {e}");
                failed = true;
            }
        }
    }
    if reports.windows(2).any(|w| w[0] != w[1]) {
        eprintln!("the runtimes disagree");
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
    println!("one library function, three runtimes, the same answers");
}
