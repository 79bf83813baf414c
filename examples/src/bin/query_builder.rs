//! A query builder's output, used unchanged: sea-query builds the SQL text and its values, and
//! sea-query-postgres binds the values as `postgres-types` parameters, which pgpipe's query
//! methods take as they are (`&[&(dyn ToSql + Sync)]`).
//!
//! ```text
//! cargo run -p pgpipe-examples --bin query_builder
//! ```
//! With `DATABASE_URL` (a `postgres://` URL) it uses that server; otherwise it starts a
//! throwaway PostgreSQL cluster and removes it afterwards. It checks what it reads back and
//! exits with an error when anything differs.

use sea_query::{Expr, ExprTrait, Iden, Order, PostgresQueryBuilder, Query};
use sea_query_postgres::PostgresBinder;

#[derive(Iden)]
enum Fruit {
    Table,
    Id,
    Name,
    Price,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_cluster, url) = pgpipe_examples::database();
    smol::block_on(async {
        let db = pgpipe_smol::connect(&url).await?;
        let s = db.session().await?;
        s.batch_execute(
            "DROP TABLE IF EXISTS fruit; \
             CREATE TABLE fruit (id int4 PRIMARY KEY, name text NOT NULL, price float8 NOT NULL)",
        )
        .await?;
        drop(s);

        let (sql, values) = Query::insert()
            .into_table(Fruit::Table)
            .columns([Fruit::Id, Fruit::Name, Fruit::Price])
            .values_panic([1.into(), "apple".into(), 0.5f64.into()])
            .values_panic([2.into(), "pear".into(), 0.75f64.into()])
            .values_panic([3.into(), "plum".into(), 1.25f64.into()])
            .build_postgres(PostgresQueryBuilder);
        println!("{sql}");
        let inserted = db.execute(&sql, &values.as_params()).await?;

        let (sql, values) = Query::select()
            .columns([Fruit::Name, Fruit::Price])
            .from(Fruit::Table)
            .and_where(Expr::col(Fruit::Price).gt(0.6f64))
            .order_by(Fruit::Id, Order::Asc)
            .build_postgres(PostgresQueryBuilder);
        println!("{sql}");
        let rows = db.query(&sql, &values.as_params()).await?;
        let found: Vec<(String, f64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        println!("{inserted} inserted; priced over 0.6: {found:?}");
        let expected = vec![("pear".to_owned(), 0.75), ("plum".to_owned(), 1.25)];
        if inserted != 3 || found != expected {
            return Err(format!("expected 3 inserted and {expected:?}").into());
        }

        let s = db.session().await?;
        s.batch_execute("DROP TABLE fruit").await?;
        drop(s);
        db.close().await;
        Ok(())
    })
}
