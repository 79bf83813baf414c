//! Every type of PostgreSQL's regression-test type list that `postgres-types` (with the type
//! features, through the adapter crate) can represent, in as a parameter and out as a column,
//! equal: each value alone, all of them in a 1-D array with a NULL among them, an empty array,
//! and NULL itself. Then the custom kinds (enum, domain, composite, range) and arrays of each,
//! and the server's text rendering of a few values.
//!
//! Not in the table, because `postgres-types` has no Rust type for them: interval, money,
//! line, lseg, polygon, circle, xml, tsvector, tsquery, txid_snapshot, and multiranges (their
//! lookup is tested in `types.rs`).

use std::collections::HashMap;
use std::fmt::Debug;
use std::net::IpAddr;
use std::ops::Bound;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bit_vec::BitVec;
use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use eui48::MacAddress;
use geo_types::{Coord, LineString, Point, Rect};
use pgpipe::types::{self, FromSql, FromSqlOwned, IsNull, Kind, PgLsn, ToSql, Type};
use postgres_protocol::types::{self as wire, RangeBound};
use rust_decimal::Decimal;
use serde_json::json;
use uuid::Uuid;

use pgpipe::error::BoxError;

use pgpipe::{Adapter, Client, SqlState};

use crate::{client, psql, Harness};

/// `a == b` for types whose equality is the plain one.
fn same<T: PartialEq>(a: &T, b: &T) -> bool {
    a == b
}

/// NaN equals NaN, and the sign of zero counts.
fn same_f64(a: &f64, b: &f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
}

fn same_f32(a: &f32, b: &f32) -> bool {
    same_f64(&f64::from(*a), &f64::from(*b))
}

/// One row of the table: each value as `$1::ty` and back, the values in a `ty[]` array with a
/// NULL among them, an empty array, and NULL.
async fn row<R: Adapter, T>(db: &Client<R>, ty: &str, values: &[T], eq: fn(&T, &T) -> bool)
where
    T: ToSql + Sync + FromSqlOwned + Debug + Clone,
{
    let one = format!("SELECT $1::{ty}");
    for v in values {
        let r = db.query_one(&one, &[v]).await;
        let got: T = r
            .and_then(|r| r.try_get(0))
            .unwrap_or_else(|e| panic!("{ty}: {v:?}: {e}"));
        assert!(eq(v, &got), "{ty}: sent {v:?}, got {got:?}");
    }
    let null: Option<T> = db.query_one(&one, &[&None::<T>]).await.unwrap().get(0);
    assert!(null.is_none(), "{ty}: NULL came back as {null:?}");
    let many = format!("SELECT $1::{ty}[]");
    let mut sent: Vec<Option<T>> = values.iter().cloned().map(Some).collect();
    sent.insert(sent.len() / 2, None);
    for sent in [sent, Vec::new()] {
        let r = db.query_one(&many, &[&sent]).await;
        let got: Vec<Option<T>> = r
            .and_then(|r| r.try_get(0))
            .unwrap_or_else(|e| panic!("{ty}[]: {sent:?}: {e}"));
        let equal = sent.len() == got.len()
            && sent.iter().zip(&got).all(|p| match p {
                (Some(a), Some(b)) => eq(a, b),
                (a, b) => a.is_none() && b.is_none(),
            });
        assert!(equal, "{ty}[]: sent {sent:?}, got {got:?}");
    }
}

/// The server's text rendering of `v` as `ty`.
async fn text<R: Adapter>(db: &Client<R>, ty: &str, v: &(dyn ToSql + Sync), want: &str) {
    let got: String = db
        .query_one(&format!("SELECT $1::{ty}::text"), &[v])
        .await
        .unwrap_or_else(|e| panic!("{ty} as text: {e}"))
        .get(0);
    assert_eq!(got, want, "{ty} rendered by the server");
}

pub async fn every_representable_type_round_trips<H: Harness>() {
    let db = client::<H>(|_| {}).await;
    builtin_scalars(&db).await;
    dates_and_times(&db).await;
    network_bits_and_geometry(&db).await;
    custom_kinds(&db, &schema::<H>()).await;
    rendered_by_the_server(&db, &schema::<H>()).await;
    db.close().await;
}

async fn builtin_scalars<R: Adapter>(db: &Client<R>) {
    row(db, "bool", &[true, false], same).await;
    row(db, "\"char\"", &[i8::MIN, -1, 0, b'a' as i8, i8::MAX], same).await;
    row(db, "int2", &[i16::MIN, -1, 0, 1, i16::MAX], same).await;
    row(db, "int4", &[i32::MIN, -1, 0, 1, i32::MAX], same).await;
    row(db, "int8", &[i64::MIN, -1, 0, 1, i64::MAX], same).await;
    row(db, "oid", &[0u32, 1, u32::MAX], same).await;
    let f4 = [0.0f32, -0.0, 1.5, -3.25e-7, f32::MIN_POSITIVE, f32::MAX];
    let special4 = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
    row(db, "float4", &[&f4[..], &special4[..]].concat(), same_f32).await;
    let f8 = [0.0f64, -0.0, 1.5, -3.25e-300, f64::MIN_POSITIVE, f64::MAX];
    let special8 = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    row(db, "float8", &[&f8[..], &special8[..]].concat(), same_f64).await;
    let decimals: Vec<Decimal> = [
        "0",
        "1.50",
        "-0.000000001",
        "12345678901234567890.123456789",
        "79228162514264337593543950335",
        "-79228162514264337593543950335",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    row(db, "numeric", &decimals, same).await;
    // NUMERIC's NaN and infinities have no Decimal: a typed decoding error, not a panic.
    let r = db
        .query_one("SELECT 'NaN'::numeric, 'Infinity'::numeric", &[])
        .await
        .unwrap();
    for i in 0..2 {
        let e = r.try_get::<_, Decimal>(i).unwrap_err();
        assert!(matches!(e, pgpipe::Error::Decode { .. }), "{e:?}");
    }
    let strings: Vec<String> = ["", "hello", "ünïcödé ☃ 🐘", "it's \"quoted\" \\ \t\n", "x"]
        .iter()
        .map(|s| s.to_string())
        .chain(["a".repeat(100_000)])
        .collect();
    row(db, "text", &strings, same).await;
    row(db, "varchar", &strings, same).await;
    row(db, "bpchar", &strings[1..3], same).await;
    row(db, "name", &strings[..4], same).await;
    let bytes: Vec<Vec<u8>> = vec![
        vec![],
        vec![0, 1, 2, 0xff],
        (0..=255).cycle().take(70_000).collect(),
    ];
    row(db, "bytea", &bytes, same).await;
    let docs = vec![
        json!({"a": [1, 2.5, null, "x"], "b": {"c": true}}),
        json!([]),
        json!("text"),
        json!(null),
        json!(-12345678901234i64),
    ];
    row(db, "json", &docs, same).await;
    row(db, "jsonb", &docs, same).await;
    let uuids = [
        Uuid::nil(),
        Uuid::max(),
        Uuid::parse_str("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap(),
    ];
    row(db, "uuid", &uuids, same).await;
    row(
        db,
        "pg_lsn",
        &[PgLsn::from(0), PgLsn::from(0x16_B374_D848)],
        same,
    )
    .await;
    let mut map = HashMap::new();
    map.insert("a".to_owned(), Some("1".to_owned()));
    map.insert("b".to_owned(), None);
    map.insert("ü key".to_owned(), Some("a \"quoted\" => value".to_owned()));
    if hstore_available() {
        row(db, "hstore", &[map, HashMap::new()], same).await;
    }
}

/// Whether the hstore extension is (or can be) installed; prints why not otherwise.
fn hstore_available() -> bool {
    match pgpipe_tests::shared().psql("CREATE EXTENSION IF NOT EXISTS hstore") {
        Ok(_) => true,
        // Two instances creating it at once: one wins, the other sees it exists.
        Err(e)
            if e.to_string().contains("already exists")
                || e.to_string().contains("duplicate key") =>
        {
            true
        }
        Err(e) => {
            pgpipe_tests::report_skip(
                "hstore",
                &format!("the extension is not available on the server: {e}"),
            );
            false
        }
    }
}

async fn dates_and_times<R: Adapter>(db: &Client<R>) {
    let days = [
        NaiveDate::from_ymd_opt(2000, 1, 1).unwrap(),
        NaiveDate::from_ymd_opt(2024, 2, 29).unwrap(),
        NaiveDate::from_ymd_opt(1, 1, 1).unwrap(),
        NaiveDate::from_ymd_opt(9999, 12, 31).unwrap(),
    ];
    let times = [
        NaiveTime::from_hms_opt(0, 0, 0).unwrap(),
        NaiveTime::from_hms_micro_opt(23, 59, 59, 999_999).unwrap(),
    ];
    let stamps: Vec<NaiveDateTime> = days
        .iter()
        .flat_map(|d| times.map(|t| d.and_time(t)))
        .collect();
    row(db, "date", &days, same).await;
    row(db, "time", &times, same).await;
    row(db, "timestamp", &stamps, same).await;
    let utc: Vec<DateTime<Utc>> = stamps.iter().map(|s| s.and_utc()).collect();
    row(db, "timestamptz", &utc, same).await;
    let system = [
        UNIX_EPOCH,
        UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456),
    ];
    row::<R, SystemTime>(db, "timestamptz", &system, same).await;
    // infinity and -infinity, through postgres-types' wrappers.
    let inf = [
        types::Timestamp::PosInfinity,
        types::Timestamp::NegInfinity,
        types::Timestamp::Value(stamps[1]),
    ];
    row(db, "timestamp", &inf, same).await;
    let inf = [
        types::Date::PosInfinity,
        types::Date::NegInfinity,
        types::Date::Value(days[1]),
    ];
    row(db, "date", &inf, same).await;
    // The same through the `time` crate.
    let d = time::Date::from_calendar_date(2024, time::Month::February, 29).unwrap();
    let t = time::Time::from_hms_micro(23, 59, 59, 999_999).unwrap();
    row(
        db,
        "date",
        &[d, time::Date::MIN.replace_year(1).unwrap()],
        same,
    )
    .await;
    row(db, "time", &[t, time::Time::MIDNIGHT], same).await;
    row(db, "timestamp", &[d.with_time(t)], same).await;
    let plus_5_30 = time::UtcOffset::from_hms(5, 30, 0).unwrap();
    let at = [
        d.with_time(t).assume_utc(),
        d.with_time(t).assume_offset(plus_5_30),
    ];
    // Read back in UTC: the same instant.
    let instant = |a: &time::OffsetDateTime, b: &time::OffsetDateTime| a == b;
    row(db, "timestamptz", &at, instant).await;
}

async fn network_bits_and_geometry<R: Adapter>(db: &Client<R>) {
    let ips: Vec<IpAddr> = ["127.0.0.1", "0.0.0.0", "::1", "2001:db8::ff00:42:8329"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    row(db, "inet", &ips, same).await;
    let inets: Vec<cidr::IpInet> = ["10.1.2.3/8", "192.168.0.1/32", "2001:db8::1/64"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    row(db, "inet", &inets, same).await;
    let nets: Vec<cidr::IpCidr> = ["10.0.0.0/8", "192.168.0.1/32", "2001:db8::/32"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    row(db, "cidr", &nets, same).await;
    let macs = [
        MacAddress::new([0x08, 0x00, 0x2b, 0x01, 0x02, 0x03]),
        MacAddress::nil(),
        MacAddress::broadcast(),
    ];
    row(db, "macaddr", &macs, same).await;
    row(
        db,
        "bit(8)",
        &[
            BitVec::from_bytes(&[0b1010_0101]),
            BitVec::from_elem(8, false),
        ],
        same,
    )
    .await;
    let mut nine = BitVec::from_bytes(&[0xA5]);
    nine.push(true);
    let varbits = [
        BitVec::new(),
        BitVec::from_elem(3, true),
        nine,
        BitVec::from_bytes(&[0xff, 0, 0x0f]),
    ];
    row(db, "varbit", &varbits, same).await;
    row(
        db,
        "point",
        &[Point::new(1.5, -2.0), Point::new(0.0, 0.0)],
        same,
    )
    .await;
    let c = |x, y| Coord { x, y };
    let boxes = [
        Rect::new(c(0.0, 0.0), c(2.0, 3.0)),
        Rect::new(c(5.0, -1.0), c(-5.0, 1.0)),
    ];
    row(db, "box", &boxes, same).await;
    let paths = [
        LineString::from(vec![(0.0, 0.0), (1.0, 1.0), (2.0, 0.0)]),
        LineString::from(vec![(-1.5, 2.5)]),
    ];
    row(db, "path", &paths, same).await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSql, FromSql)]
#[postgres(name = "color", rename_all = "lowercase")]
enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSql, FromSql)]
#[postgres(name = "percent")]
struct Percent(i16);

#[derive(Debug, Clone, PartialEq, ToSql, FromSql)]
#[postgres(name = "item")]
struct Item {
    name: String,
    qty: i32,
    color: Color,
    tags: Vec<String>,
    note: Option<String>,
}

/// A range of any subtype with a Rust type (no crate brings one for postgres-types): empty, or
/// two bounds, on postgres-protocol's wire encoding.
#[derive(Debug, Clone, PartialEq)]
enum Range<T> {
    Empty,
    Span(Bound<T>, Bound<T>),
}

fn subtype(ty: &Type) -> Option<&Type> {
    match ty.kind() {
        Kind::Range(inner) => Some(inner),
        _ => None,
    }
}

impl<T: ToSql> ToSql for Range<T> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let inner = subtype(ty).ok_or("not a range type")?;
        let (lo, hi) = match self {
            Range::Empty => {
                wire::empty_range_to_sql(out);
                return Ok(IsNull::No);
            }
            Range::Span(lo, hi) => (lo, hi),
        };
        let bound = |b: &Bound<T>, out: &mut BytesMut| {
            let value = |v: &T, out: &mut BytesMut| match v.to_sql(inner, out)? {
                IsNull::Yes => Ok::<_, BoxError>(postgres_protocol::IsNull::Yes),
                IsNull::No => Ok(postgres_protocol::IsNull::No),
            };
            Ok(match b {
                Bound::Included(v) => RangeBound::Inclusive(value(v, out)?),
                Bound::Excluded(v) => RangeBound::Exclusive(value(v, out)?),
                Bound::Unbounded => RangeBound::Unbounded,
            })
        };
        wire::range_to_sql(|out| bound(lo, out), |out| bound(hi, out), out)?;
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        subtype(ty).is_some_and(T::accepts)
    }

    types::to_sql_checked!();
}

impl<'a, T: FromSql<'a>> FromSql<'a> for Range<T> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        let inner = subtype(ty).ok_or("not a range type")?;
        let bound = |b: RangeBound<Option<&'a [u8]>>| -> Result<Bound<T>, BoxError> {
            Ok(match b {
                RangeBound::Inclusive(v) => {
                    Bound::Included(T::from_sql(inner, v.ok_or("NULL bound")?)?)
                }
                RangeBound::Exclusive(v) => {
                    Bound::Excluded(T::from_sql(inner, v.ok_or("NULL bound")?)?)
                }
                RangeBound::Unbounded => Bound::Unbounded,
            })
        };
        Ok(match wire::range_from_sql(raw)? {
            wire::Range::Empty => Range::Empty,
            wire::Range::Nonempty(lo, hi) => Range::Span(bound(lo)?, bound(hi)?),
        })
    }

    fn accepts(ty: &Type) -> bool {
        subtype(ty).is_some_and(T::accepts)
    }
}

/// Ranges as the server keeps them: discrete ones as `[a,b)`.
fn ranges<T: Clone>(a: T, b: T) -> Vec<Range<T>> {
    use Bound::*;
    vec![
        Range::Empty,
        Range::Span(Included(a.clone()), Excluded(b.clone())),
        Range::Span(Unbounded, Excluded(b)),
        Range::Span(Included(a), Unbounded),
        Range::Span(Unbounded, Unbounded),
    ]
}

fn schema<H: Harness>() -> String {
    format!("vals_{}", H::name())
}

async fn custom_kinds<R: Adapter>(db: &Client<R>, s: &str) {
    psql(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s};
         CREATE TYPE {s}.color AS ENUM ('red', 'green', 'blue');
         CREATE DOMAIN {s}.percent AS int2 CHECK (VALUE BETWEEN 0 AND 100);
         CREATE TYPE {s}.item AS (name text, qty int4, color {s}.color, tags text[], note text);
         CREATE TYPE {s}.floatrange AS RANGE (subtype = float8);"
    ));
    row(
        db,
        &format!("{s}.color"),
        &[Color::Red, Color::Green, Color::Blue],
        same,
    )
    .await;
    row(
        db,
        &format!("{s}.percent"),
        &[Percent(0), Percent(42), Percent(100)],
        same,
    )
    .await;
    let items = [
        Item {
            name: "widget".into(),
            qty: 3,
            color: Color::Red,
            tags: vec!["a".into(), "b c".into()],
            note: None,
        },
        Item {
            name: "".into(),
            qty: -1,
            color: Color::Blue,
            tags: vec![],
            note: Some("\"(,)\"".into()),
        },
    ];
    row(db, &format!("{s}.item"), &items, same).await;
    row(db, "int4range", &ranges(1i32, 10), same).await;
    row(db, "int8range", &ranges(i64::MIN + 1, i64::MAX), same).await;
    let (lo, hi): (Decimal, Decimal) = ("-1.5".parse().unwrap(), "2.25".parse().unwrap());
    let mut nums = ranges(lo, hi);
    nums.push(Range::Span(Bound::Excluded(lo), Bound::Included(hi)));
    row(db, "numrange", &nums, same).await;
    let day = |d| NaiveDate::from_ymd_opt(2024, 2, d).unwrap();
    row(db, "daterange", &ranges(day(1), day(29)), same).await;
    let at = |d: u32| day(d).and_hms_micro_opt(12, 0, 0, 5).unwrap();
    row(db, "tsrange", &ranges(at(1), at(2)), same).await;
    row(
        db,
        "tstzrange",
        &ranges(at(1).and_utc(), at(2).and_utc()),
        same,
    )
    .await;
    let mut floats = ranges(1.5f64, 2.5);
    floats.push(Range::Span(Bound::Included(-0.5), Bound::Included(0.5)));
    row(db, &format!("{s}.floatrange"), &floats, same).await;
    // The domain's check still runs on the server.
    let e = db
        .query_one(&format!("SELECT $1::{s}.percent"), &[&Percent(101)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{e}");
}

async fn rendered_by_the_server<R: Adapter>(db: &Client<R>, s: &str) {
    let dec: Decimal = "-12345678901234567890.123456789".parse().unwrap();
    text(db, "numeric", &dec, "-12345678901234567890.123456789").await;
    text(db, "numeric", &"1.50".parse::<Decimal>().unwrap(), "1.50").await;
    text(db, "float8", &f64::NAN, "NaN").await;
    text(db, "float8", &f64::NEG_INFINITY, "-Infinity").await;
    text(db, "float8", &-0.0f64, "-0").await;
    text(db, "float4", &1.5f32, "1.5").await;
    text(db, "bytea", &vec![0u8, 1, 0xff], "\\x0001ff").await;
    let ts = NaiveDate::from_ymd_opt(2024, 2, 29)
        .unwrap()
        .and_hms_micro_opt(23, 59, 59, 999_999)
        .unwrap();
    text(db, "timestamp", &ts, "2024-02-29 23:59:59.999999").await;
    text(
        db,
        "timestamp",
        &types::Timestamp::<NaiveDateTime>::PosInfinity,
        "infinity",
    )
    .await;
    text(db, "date", &ts.date(), "2024-02-29").await;
    let id = Uuid::parse_str("67E55044-10B1-426F-9247-BB680E5FE0C8").unwrap();
    text(db, "uuid", &id, "67e55044-10b1-426f-9247-bb680e5fe0c8").await;
    // `::text` of inet keeps the netmask (the `inet` output function would not).
    text(db, "inet", &"::1".parse::<IpAddr>().unwrap(), "::1/128").await;
    text(
        db,
        "cidr",
        &"10.0.0.0/8".parse::<cidr::IpCidr>().unwrap(),
        "10.0.0.0/8",
    )
    .await;
    let mac = MacAddress::new([0x08, 0x00, 0x2b, 0x01, 0x02, 0x03]);
    text(db, "macaddr", &mac, "08:00:2b:01:02:03").await;
    text(
        db,
        "bit(8)",
        &BitVec::from_bytes(&[0b1010_0101]),
        "10100101",
    )
    .await;
    text(db, "point", &Point::new(1.5, -2.0), "(1.5,-2)").await;
    text(
        db,
        "jsonb",
        &json!({"b": 1, "a": [true, null]}),
        r#"{"a": [true, null], "b": 1}"#,
    )
    .await;
    text(db, "pg_lsn", &PgLsn::from(0x16_B374_D848), "16/B374D848").await;
    text(db, &format!("{s}.color"), &Color::Green, "green").await;
    let item = Item {
        name: "widget".into(),
        qty: 3,
        color: Color::Red,
        tags: vec!["a".into(), "b c".into()],
        note: None,
    };
    text(
        db,
        &format!("{s}.item"),
        &item,
        r#"(widget,3,red,"{a,""b c""}",)"#,
    )
    .await;
    text(
        db,
        "int4range",
        &Range::Span(Bound::Included(1i32), Bound::Included(5)),
        "[1,6)",
    )
    .await;
    text(db, "int4[]", &vec![Some(1i32), None, Some(3)], "{1,NULL,3}").await;
}
