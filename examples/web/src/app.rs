//! The endpoints, written once for every variant: request in (endpoint, query string), reply
//! out (status, content type, body). Nothing here knows which HTTP server or database client
//! runs it.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::try_join_all;
use serde::Serialize;

/// Rows of the `world` table (ids 1..=WORLD_ROWS).
pub const WORLD_ROWS: i32 = 10_000;
/// TechEmpower's bounds of `q`.
pub const MAX_QUERIES: usize = 500;
/// The fortune every `/fortunes` response adds at request time (id 0).
pub const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

/// One row of `world`, serialized as TechEmpower wants it.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct World {
    /// Primary key, 1..=10000.
    pub id: i32,
    /// 1..=10000.
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// One row of `fortune`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fortune {
    /// Primary key (0 for the one added at request time).
    pub id: i32,
    /// The text, HTML-escaped only when rendered.
    pub message: String,
}

/// A database failure, as text (the reply is a 500 either way).
#[derive(Debug, Clone)]
pub struct DbError(pub String);

impl DbError {
    /// Wraps an error with its chain of sources (tokio-postgres says only "db error" at the
    /// top; the server's message is its source).
    pub fn from_error(e: impl std::error::Error) -> DbError {
        DbError(error_chain(&e))
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A database the endpoints can use: hands out a per-request [`Conn`]. For a pool that is a
/// checked-out connection (held for the whole request, as TechEmpower's pool entries do); for
/// pgpipe and shared clients it is a cheap handle.
///
/// The futures are not required to be `Send`, so that glommio's `!Send` client fits; axum
/// still gets `Send` futures because it always names a concrete implementation.
pub trait Db {
    /// What one request works with.
    type Conn: Conn;
    /// The connection (or handle) for one request.
    fn conn(&self) -> impl Future<Output = Result<Self::Conn, DbError>>;
}

/// The statements of the endpoints. Concurrent calls on one `Conn` are allowed (and are how
/// `/queries` pipelines).
pub trait Conn {
    /// `SELECT id, randomnumber FROM world WHERE id = $1`.
    fn world(&self, id: i32) -> impl Future<Output = Result<World, DbError>>;
    /// `SELECT id, message FROM fortune`.
    fn fortunes(&self) -> impl Future<Output = Result<Vec<Fortune>, DbError>>;
    /// Sets `randomnumber = numbers[i]` where `id = ids[i]`, in one statement; `ids` are
    /// distinct and sorted. Returns the rows updated.
    fn update_worlds(
        &self,
        ids: &[i32],
        numbers: &[i32],
    ) -> impl Future<Output = Result<u64, DbError>>;
    /// `/updates`: reads `n` random rows, each by its own query, gives each a new number
    /// (never its old one) and writes them back; returns the rows as written. By default
    /// the reads, then one UPDATE; a client may do it in one round trip.
    fn read_and_update(&self, n: usize) -> impl Future<Output = Result<Vec<World>, DbError>> {
        read_then_update(self, n)
    }
}

/// The routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/db`: one random row.
    Db,
    /// `/queries?q=N`: N random rows, read concurrently.
    Queries,
    /// `/updates?q=N`: N random rows read, changed and written back.
    Updates,
    /// `/fortunes`: the fortune table as HTML.
    Fortunes,
}

impl Endpoint {
    /// The endpoint of a request path, if any.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        match path {
            "/db" => Some(Endpoint::Db),
            "/queries" => Some(Endpoint::Queries),
            "/updates" => Some(Endpoint::Updates),
            "/fortunes" => Some(Endpoint::Fortunes),
            _ => None,
        }
    }
}

/// A response, independent of the HTTP stack.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

/// `Content-Type` of the JSON endpoints.
pub const JSON: &str = "application/json";
/// `Content-Type` of `/fortunes`.
pub const HTML: &str = "text/html; charset=utf-8";
/// `Content-Type` of errors.
pub const TEXT: &str = "text/plain; charset=utf-8";
/// `Server` header every variant sends (TechEmpower requires one).
pub const SERVER_NAME: &str = "pgpipe-web";

impl Reply {
    fn ok(content_type: &'static str, body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            content_type,
            body,
        }
    }

    /// A 500 whose body says why. The first few are also printed, so that a benchmark run
    /// with errors shows what they were without flooding the log.
    pub fn error(why: impl fmt::Display) -> Reply {
        static PRINTED: AtomicUsize = AtomicUsize::new(0);
        let text = why.to_string();
        if PRINTED.fetch_add(1, Ordering::Relaxed) < 10 {
            eprintln!("pgpipe-web: 500: {text}");
        }
        Reply {
            status: 500,
            content_type: TEXT,
            body: text.into_bytes(),
        }
    }

    /// A 404 for unknown paths.
    pub fn not_found() -> Reply {
        Reply {
            status: 404,
            content_type: TEXT,
            body: b"not found".to_vec(),
        }
    }
}

/// `e` and its sources, joined by ": ".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = s.source();
    }
    text
}

/// Serves one request.
pub async fn handle<D: Db>(db: &D, endpoint: Endpoint, query: Option<&str>) -> Reply {
    let result = match endpoint {
        Endpoint::Db => single(db).await,
        Endpoint::Queries => queries(db, parse_q(query)).await,
        Endpoint::Updates => updates(db, parse_q(query)).await,
        Endpoint::Fortunes => fortunes(db).await,
    };
    result.unwrap_or_else(Reply::error)
}

/// `q` as TechEmpower defines it: missing, not an integer or below 1 means 1; above 500 means
/// 500.
pub fn parse_q(query: Option<&str>) -> usize {
    let raw = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("q="))
        .unwrap_or("");
    match raw.parse::<i64>() {
        Ok(n) if n > MAX_QUERIES as i64 => MAX_QUERIES,
        Ok(n) if n >= 1 => n as usize,
        // Too large for an i64, but still an integer above 500.
        Err(_) if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) => MAX_QUERIES,
        _ => 1,
    }
}

async fn single<D: Db>(db: &D) -> Result<Reply, DbError> {
    let conn = db.conn().await?;
    let id = random_id();
    let w = checked(id, conn.world(id).await?)?;
    json(&w)
}

async fn queries<D: Db>(db: &D, n: usize) -> Result<Reply, DbError> {
    let conn = db.conn().await?;
    let worlds = read_worlds(&conn, n).await?;
    json(&worlds)
}

/// Reads `n` random rows, all statements in flight at once (pgpipe pipelines them; on a
/// tokio-postgres client they pipeline too, on that one connection).
async fn read_worlds<C: Conn + ?Sized>(conn: &C, n: usize) -> Result<Vec<World>, DbError> {
    let ids: Vec<i32> = (0..n).map(|_| random_id()).collect();
    let rows = try_join_all(ids.iter().map(|&id| conn.world(id))).await?;
    ids.iter()
        .zip(rows)
        .map(|(&id, w)| checked(id, w))
        .collect()
}

/// A row for another id than asked for would be a client bug (results crossed between
/// statements): answer 500, so that it shows as an error under load.
pub fn checked(id: i32, w: World) -> Result<World, DbError> {
    if w.id == id {
        Ok(w)
    } else {
        Err(DbError(format!("asked for world {id}, got {}", w.id)))
    }
}

async fn updates<D: Db>(db: &D, n: usize) -> Result<Reply, DbError> {
    let conn = db.conn().await?;
    json(&conn.read_and_update(n).await?)
}

/// [`Conn::read_and_update`] as two steps: the reads (concurrently), then one UPDATE.
pub async fn read_then_update<C: Conn + ?Sized>(conn: &C, n: usize) -> Result<Vec<World>, DbError> {
    let mut worlds = read_worlds(conn, n).await?;
    for w in &mut worlds {
        // A new value, never the old one, so that a lost write is visible.
        let mut r = random_id();
        while r == w.random_number {
            r = random_id();
        }
        w.random_number = r;
    }
    let (ids, numbers) = plan_update(&mut worlds);
    let updated = conn.update_worlds(&ids, &numbers).await?;
    if updated != ids.len() as u64 {
        return Err(DbError(format!(
            "updated {updated} rows of {} ids",
            ids.len()
        )));
    }
    Ok(worlds)
}

/// The one UPDATE's parameters: ids sorted (every request locks rows in the same order, so
/// concurrent updates cannot deadlock) and distinct. A row drawn twice gets one new value,
/// and every entry of the response shows it, so the response matches what is stored.
pub fn plan_update(worlds: &mut [World]) -> (Vec<i32>, Vec<i32>) {
    let mut order: Vec<usize> = (0..worlds.len()).collect();
    order.sort_by_key(|&i| worlds[i].id);
    let (mut ids, mut numbers) = (Vec::with_capacity(order.len()), Vec::new());
    for &i in &order {
        if ids.last() == Some(&worlds[i].id) {
            worlds[i].random_number = *numbers.last().unwrap_or(&worlds[i].random_number);
        } else {
            ids.push(worlds[i].id);
            numbers.push(worlds[i].random_number);
        }
    }
    (ids, numbers)
}

async fn fortunes<D: Db>(db: &D) -> Result<Reply, DbError> {
    let conn = db.conn().await?;
    let mut all = conn.fortunes().await?;
    all.push(Fortune {
        id: 0,
        message: ADDED_FORTUNE.to_string(),
    });
    all.sort_by(|a, b| a.message.cmp(&b.message));
    Ok(Reply::ok(HTML, render_fortunes(&all).into_bytes()))
}

/// TechEmpower's fortunes template, byte for byte.
pub fn render_fortunes(all: &[Fortune]) -> String {
    let mut html = String::with_capacity(1200);
    html.push_str(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>",
    );
    for f in all {
        // Writing to a String cannot fail.
        let _ = write!(html, "<tr><td>{}</td><td>", f.id);
        escape_html(&f.message, &mut html);
        html.push_str("</td></tr>");
    }
    html.push_str("</table></body></html>");
    html
}

/// Escapes the five characters HTML gives meaning to.
pub fn escape_html(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<Reply, DbError> {
    serde_json::to_vec(value)
        .map(|body| Reply::ok(JSON, body))
        .map_err(DbError::from_error)
}

thread_local! {
    // xorshift64*; seeded per thread from std's random hasher keys.
    static RNG: Cell<u64> = Cell::new(RandomState::new().hash_one(0u64) | 1);
}

/// A random id (and random number) in 1..=10000.
pub fn random_id() -> i32 {
    RNG.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as i32 % WORLD_ROWS + 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_is_clamped() {
        assert_eq!(parse_q(None), 1);
        assert_eq!(parse_q(Some("q=")), 1);
        assert_eq!(parse_q(Some("q=foo")), 1);
        assert_eq!(parse_q(Some("q=0")), 1);
        assert_eq!(parse_q(Some("q=-3")), 1);
        assert_eq!(parse_q(Some("q=20")), 20);
        assert_eq!(parse_q(Some("x=1&q=7")), 7);
        assert_eq!(parse_q(Some("q=501")), 500);
        assert_eq!(parse_q(Some("q=99999999999999999999")), 500);
    }

    #[test]
    fn random_ids_stay_in_range() {
        for _ in 0..100_000 {
            let id = random_id();
            assert!((1..=WORLD_ROWS).contains(&id));
        }
    }

    #[test]
    fn update_plan_is_sorted_distinct_and_consistent() {
        let mut ws = vec![
            World {
                id: 5,
                random_number: 1,
            },
            World {
                id: 2,
                random_number: 2,
            },
            World {
                id: 5,
                random_number: 3,
            },
        ];
        let (ids, nums) = plan_update(&mut ws);
        assert_eq!(ids, vec![2, 5]);
        assert_eq!(nums, vec![2, 1]);
        assert_eq!(ws[0].random_number, ws[2].random_number);
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        escape_html("<a href=\"x\">'&'</a>", &mut s);
        assert_eq!(s, "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;");
    }
}
