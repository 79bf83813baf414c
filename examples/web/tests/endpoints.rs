//! Every endpoint of every variant, checked against the throwaway PostgreSQL: JSON shapes and
//! ranges, rows matching the table, `q` clamping, the fortunes page byte for byte (escaping,
//! sorting, the added fortune), updates read back through psql, and a burst of concurrent
//! requests. Each variant gets a database of its own, so the tests run in parallel without
//! seeing each other's writes.

use std::collections::HashMap;
use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use pgpipe_web::server::{self, Options, Variant};
use serde_json::Value;

/// What a GET returned.
struct Got {
    status: u16,
    content_type: String,
    server: String,
    body: String,
}

/// One GET on a fresh connection, with hyper's client.
async fn get(addr: SocketAddr, path: &str) -> Got {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let header = |name| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (content_type, server) = (
        header(hyper::header::CONTENT_TYPE),
        header(hyper::header::SERVER),
    );
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Got {
        status,
        content_type,
        server,
        body: String::from_utf8(body.to_vec()).expect("utf-8 body"),
    }
}

/// A variant's server on its own freshly loaded database; returns its address and the
/// database's URL.
fn serve(variant: Variant) -> (SocketAddr, String) {
    let admin = pgpipe_tests::shared().url();
    let name = format!("pgpipe_web_test_{}", variant.name().replace('-', "_"));
    let url = pgpipe_web::schema::recreate_database(&admin, &name).expect("create database");
    pgpipe_web::schema::load(&url).expect("load tables");
    let mut opts = Options::new(variant, &url);
    // Two threads even on a one-core machine, so that the glommio variant really runs
    // several executors behind one port.
    opts.threads = 2;
    opts.connections = opts.variant.default_connections(2).min(4);
    let addr = server::start(opts).expect("start server");
    (addr, url)
}

/// The whole `world` table through psql.
fn world_table(url: &str) -> HashMap<i64, i64> {
    let out = pgpipe_tests::psql_with(url, "SELECT id, randomnumber FROM world").expect("psql");
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (a, b) = l.split_once('|').expect("id|randomnumber");
            (a.parse().expect("id"), b.parse().expect("number"))
        })
        .collect()
}

/// A `{"id":..,"randomNumber":..}` object with both in 1..=10000, as (id, number).
fn world_of(v: &Value) -> (i64, i64) {
    let obj = v.as_object().expect("a JSON object");
    assert_eq!(obj.len(), 2, "exactly id and randomNumber: {v}");
    let id = obj["id"].as_i64().expect("integer id");
    let n = obj["randomNumber"].as_i64().expect("integer randomNumber");
    assert!((1..=10_000).contains(&id), "id {id}");
    assert!((1..=10_000).contains(&n), "randomNumber {n}");
    (id, n)
}

fn json(got: &Got) -> Value {
    assert_eq!(got.status, 200, "body: {}", got.body);
    assert_eq!(got.content_type, "application/json");
    assert_eq!(got.server, "pgpipe-web");
    serde_json::from_str(&got.body).expect("JSON body")
}

/// TechEmpower's expected page: sorted by message (`<` before letters, the added fortune
/// among them, the Japanese one last), every message escaped.
const FORTUNES_HTML: &str = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>\
<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>\
<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>\
<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>\
<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#x27;t broken.</td></tr>\
<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>\
<tr><td>0</td><td>Additional fortune added at request time.</td></tr>\
<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>\
<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>\
<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>\
<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>\
<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>\
<tr><td>1</td><td>fortune: No such file or directory</td></tr>\
<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>\
</table></body></html>";

async fn check_variant(addr: SocketAddr, url: &str) {
    let table = world_table(url);
    assert_eq!(table.len(), 10_000);

    // /db: one row, as stored.
    for _ in 0..20 {
        let (id, n) = world_of(&json(&get(addr, "/db").await));
        assert_eq!(table[&id], n, "/db row {id}");
    }

    // /queries: N rows as stored; q clamped to 1..=500.
    let rows = json(&get(addr, "/queries?q=20").await);
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 20);
    for r in rows {
        let (id, n) = world_of(r);
        assert_eq!(table[&id], n, "/queries row {id}");
    }
    for (query, len) in [
        ("/queries", 1),
        ("/queries?q=", 1),
        ("/queries?q=0", 1),
        ("/queries?q=-4", 1),
        ("/queries?q=foo", 1),
        ("/queries?q=1", 1),
        ("/queries?q=500", 500),
        ("/queries?q=501", 500),
        ("/queries?q=100000", 500),
    ] {
        let v = json(&get(addr, query).await);
        let a = v.as_array().unwrap_or_else(|| panic!("{query}: an array"));
        assert_eq!(a.len(), len, "{query}");
        a.iter().for_each(|r| {
            world_of(r);
        });
    }

    // /fortunes: the page, exactly.
    let f = get(addr, "/fortunes").await;
    assert_eq!(f.status, 200);
    assert_eq!(f.content_type, "text/html; charset=utf-8");
    assert_eq!(f.body, FORTUNES_HTML);

    // /updates: N rows with new numbers, and the table holds them afterwards.
    let before = world_table(url);
    let v = json(&get(addr, "/updates?q=20").await);
    let updated: Vec<(i64, i64)> = v
        .as_array()
        .expect("an array")
        .iter()
        .map(world_of)
        .collect();
    assert_eq!(updated.len(), 20);
    let after = world_table(url);
    for &(id, n) in &updated {
        assert_eq!(after[&id], n, "row {id} written back");
        assert_ne!(before[&id], n, "row {id} got a new number");
    }
    let changed = before.iter().filter(|(id, n)| after[id] != **n).count();
    let distinct: std::collections::HashSet<_> = updated.iter().map(|w| w.0).collect();
    assert_eq!(
        changed,
        distinct.len(),
        "only the rows of the response changed"
    );
    for (query, len) in [
        ("/updates?q=0", 1),
        ("/updates?q=x", 1),
        ("/updates?q=501", 500),
    ] {
        let v = json(&get(addr, query).await);
        let a = v.as_array().unwrap_or_else(|| panic!("{query}: an array"));
        assert_eq!(a.len(), len, "{query}");
        let now = world_table(url);
        for (id, n) in a.iter().map(world_of) {
            assert_eq!(now[&id], n, "{query}: row {id} written back");
        }
    }

    // Unknown paths.
    assert_eq!(get(addr, "/nope").await.status, 404);

    // A burst of concurrent requests on every endpoint: all succeed (a row for the wrong id
    // would be a 500 from the server's own check).
    let mut tasks = Vec::new();
    for i in 0..64 {
        let path = ["/db", "/queries?q=20", "/fortunes", "/updates?q=5"][i % 4];
        tasks.push(tokio::spawn(async move { (path, get(addr, path).await) }));
    }
    for t in tasks {
        let (path, got) = t.await.expect("task");
        assert_eq!(got.status, 200, "{path}: {}", got.body);
        if path == "/fortunes" {
            assert_eq!(got.body, FORTUNES_HTML);
        } else {
            drop(json(&got));
        }
    }
}

fn run(variant: Variant) {
    let (addr, url) = serve(variant);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(check_variant(addr, &url));
}

#[test]
fn pgpipe_glommio() {
    run(Variant::PgpipeGlommio);
}

#[test]
fn pgpipe_tokio_axum() {
    run(Variant::PgpipeTokio);
}

#[test]
fn axum_deadpool() {
    run(Variant::Deadpool);
}

#[test]
fn axum_tokio_postgres() {
    run(Variant::TokioPostgres);
}
