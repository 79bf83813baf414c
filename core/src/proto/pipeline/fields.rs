//! What the fields of backend messages say: an ErrorResponse's or NoticeResponse's fields as a
//! [`DbError`] (startup's and an opening connection's questions read them too), a CommandComplete
//! tag's affected-row count, and a [`Type`] for an OID a description names.

use postgres_types::{Kind, Type};

use crate::error::DbError;

/// A `Type` for a server OID. Built-in types map exactly; others (enums, domains, composites)
/// get a placeholder that only accepts raw access until type lookup exists.
pub fn type_for_oid(oid: u32) -> Type {
    Type::from_oid(oid)
        .unwrap_or_else(|| Type::new(format!("oid_{oid}"), oid, Kind::Simple, String::new()))
}

/// The affected-row count from a CommandComplete tag: its last word when numeric
/// (`INSERT 0 5`, `UPDATE 3`, `SELECT 10`), else 0. Read from the end: the digits, then the
/// space before them (or the tag's start).
#[inline]
pub(super) fn affected_rows(body: &[u8]) -> u64 {
    let tag = match body.split_last() {
        Some((0, rest)) => rest,
        _ => body,
    };
    let mut start = tag.len();
    while start > 0 && tag[start - 1].is_ascii_digit() {
        start -= 1;
    }
    if start == tag.len() || (start > 0 && tag[start - 1] != b' ') {
        return 0;
    }
    tag[start..].iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}

/// Parses ErrorResponse / NoticeResponse fields: `(type byte, C string)*` then a 0 byte.
pub fn parse_error_fields(mut body: &[u8]) -> DbError {
    let mut e = DbError::default();
    let mut localized_severity = None;
    while let Some((&kind, rest)) = body.split_first() {
        if kind == 0 {
            break;
        }
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let value = String::from_utf8_lossy(&rest[..end]).into_owned();
        body = rest.get(end + 1..).unwrap_or(&[]);
        match kind {
            b'V' => e.severity = value,
            b'S' => localized_severity = Some(value),
            b'C' => e.code = crate::SqlState::from_server(value),
            b'M' => e.message = value,
            b'D' => e.detail = Some(value),
            b'H' => e.hint = Some(value),
            b'P' => e.position = value.parse().ok(),
            b'W' => e.where_ = Some(value),
            b's' => e.schema = Some(value),
            b't' => e.table = Some(value),
            b'c' => e.column = Some(value),
            b'd' => e.datatype = Some(value),
            b'n' => e.constraint = Some(value),
            _ => {}
        }
    }
    if e.severity.is_empty() {
        e.severity = localized_severity.unwrap_or_default();
    }
    e
}
