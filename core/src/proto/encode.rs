//! Frontend messages of one unit, encoded into a caller-owned buffer.
//!
//! Every function appends a complete unit ending in its own Sync (one Sync per unit: an error
//! aborts only that unit), or appends nothing and returns an error: on failure the buffer is
//! truncated back to where it was, so a half-encoded unit can never reach the wire.

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use postgres_types::{ToSql, Type};

use crate::Error;

/// A parameter list as callers pass it.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The protocol's limit on parameters per statement (a 16-bit count).
pub const MAX_PARAMS: usize = u16::MAX as usize;

/// Validates what can be checked before anything is encoded: no NUL in the SQL text and at most
/// [`MAX_PARAMS`] parameters.
pub fn check_input(sql: &str, n_params: usize) -> Result<(), Error> {
    if let Some(offset) = sql.bytes().position(|b| b == 0) {
        return Err(Error::NulInSql { offset });
    }
    if n_params > MAX_PARAMS {
        return Err(Error::TooManyParams { given: n_params });
    }
    Ok(())
}

/// Prepare unit: `[Close(S, evict)] Parse(name, sql) Describe(S, name) Sync`.
///
/// The server answers `[CloseComplete] ParseComplete ParameterDescription RowDescription|NoData
/// ReadyForQuery`. Closing an evicted statement rides in the same unit, so eviction costs no
/// extra Sync.
pub fn prepare(
    name: &str,
    sql: &str,
    evict: Option<&str>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    let start = buf.len();
    let r = (|| {
        if let Some(old) = evict {
            frontend::close(b'S', old, buf)?;
        }
        frontend::parse(name, sql, std::iter::empty(), buf)?;
        frontend::describe(b'S', name, buf)?;
        frontend::sync(buf);
        Ok::<_, std::io::Error>(())
    })();
    r.map_err(|e| {
        buf.truncate(start);
        Error::Protocol(format!("cannot encode prepare: {e}"))
    })
}

/// Execute unit for a prepared statement: `Bind(stmt, params) Execute Sync`, binary parameters
/// and binary results. The server answers `BindComplete DataRow* CommandComplete ReadyForQuery`.
/// An empty `statement` name means statements are not kept by name: the unit then starts with
/// its own `Parse(unnamed, sql, types)` (and the answer with ParseComplete), so it needs
/// nothing from an earlier unit (behind a transaction pooler, that may have run elsewhere).
pub fn execute(
    statement: &str,
    sql: &str,
    types: &[Type],
    params: Params<'_>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    if types.len() != params.len() {
        return Err(Error::ParamCount {
            expected: types.len(),
            given: params.len(),
        });
    }
    let start = buf.len();
    let r = match statement.is_empty() {
        true => frontend::parse("", sql, types.iter().map(Type::oid), buf)
            .map_err(|e| Error::Protocol(format!("cannot encode parse: {e}"))),
        false => Ok(()),
    };
    let r = r.and_then(|()| bind_execute(statement, types, params, buf));
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

/// Typed unit: the caller supplies parameter types, so no prepare round trip and no cache:
/// `Parse(unnamed, sql, types) Bind Describe(P) Execute Sync`. The server answers
/// `ParseComplete BindComplete RowDescription|NoData DataRow* CommandComplete ReadyForQuery`.
pub fn typed(
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
    buf: &mut BytesMut,
) -> Result<(), Error> {
    if params.len() > MAX_PARAMS {
        return Err(Error::TooManyParams {
            given: params.len(),
        });
    }
    let start = buf.len();
    let r = (|| {
        frontend::parse("", sql, params.iter().map(|(_, t)| t.oid()), buf)
            .map_err(|e| Error::Protocol(format!("cannot encode parse: {e}")))?;
        bind_values("", params.len(), params.iter().map(|(v, t)| (*v, t)), buf)?;
        frontend::describe(b'P', "", buf).map_err(io_err)?;
        frontend::execute("", 0, buf).map_err(io_err)?;
        frontend::sync(buf);
        Ok(())
    })();
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

/// Simple-protocol unit: `Query(sql)`. The server runs every statement in the text and ends with
/// one ReadyForQuery; results come back in text format. Used on exclusive connections only
/// (`batch_execute`, resets), never on the shared path.
pub fn simple(sql: &str, buf: &mut BytesMut) -> Result<(), Error> {
    check_input(sql, 0)?;
    let start = buf.len();
    frontend::query(sql, buf).map_err(|e| {
        buf.truncate(start);
        io_err(e)
    })
}

fn bind_execute(
    statement: &str,
    types: &[Type],
    params: Params<'_>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    bind_values(
        statement,
        params.len(),
        params.iter().copied().zip(types.iter()),
        buf,
    )?;
    frontend::execute("", 0, buf).map_err(io_err)?;
    frontend::sync(buf);
    Ok(())
}

fn bind_values<'v>(
    statement: &str,
    n: usize,
    values: impl Iterator<Item = (&'v (dyn ToSql + Sync), &'v Type)>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    let mut index = 0usize;
    let mut failed_type: Option<&Type> = None;
    // One format code applies to every parameter; an empty list means "no parameters".
    let formats: &[i16] = if n == 0 { &[] } else { &[1] };
    let r = frontend::bind(
        "",
        statement,
        formats.iter().copied(),
        values,
        |(v, ty), out| {
            failed_type = Some(ty);
            let r = v.to_sql_checked(ty, out);
            if r.is_ok() {
                index += 1;
            }
            r.map(|n| match n {
                postgres_types::IsNull::Yes => postgres_protocol::IsNull::Yes,
                postgres_types::IsNull::No => postgres_protocol::IsNull::No,
            })
        },
        std::iter::once(1),
        buf,
    );
    match r {
        Ok(()) => Ok(()),
        Err(frontend::BindError::Conversion(source)) => Err(Error::Encode {
            index,
            ty: failed_type.map(|t| t.name().to_owned()).unwrap_or_default(),
            source,
        }),
        Err(frontend::BindError::Serialization(e)) => Err(io_err(e)),
    }
}

fn io_err(e: std::io::Error) -> Error {
    Error::Protocol(format!("cannot encode message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_encode_leaves_buffer_untouched() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"earlier");
        let v: i64 = 5;
        let bad: &str = "not an int";
        let err = execute("s1", "", &[Type::INT8, Type::INT4], &[&v, &bad], &mut buf).unwrap_err();
        assert!(matches!(err, Error::Encode { index: 1, .. }), "{err:?}");
        assert_eq!(&buf[..], b"earlier");
    }

    #[test]
    fn count_mismatch_and_input_checks() {
        let mut buf = BytesMut::new();
        let v: i64 = 5;
        assert!(matches!(
            execute("s1", "", &[], &[&v], &mut buf),
            Err(Error::ParamCount {
                expected: 0,
                given: 1
            })
        ));
        assert!(buf.is_empty());
        assert!(matches!(
            check_input("select 1\0", 0),
            Err(Error::NulInSql { offset: 8 })
        ));
        assert!(matches!(
            check_input("select 1", 70000),
            Err(Error::TooManyParams { given: 70000 })
        ));
    }

    #[test]
    fn execute_unit_layout() {
        let mut buf = BytesMut::new();
        let v: i32 = 7;
        execute("s1", "", &[Type::INT4], &[&v], &mut buf).unwrap();
        // Bind, Execute, Sync and nothing else.
        let tags: Vec<u8> = walk(&buf).into_iter().map(|(t, _)| t).collect();
        assert_eq!(tags, b"BES");

        // Not kept by name: the unit carries its own unnamed Parse, with the learned types.
        let mut buf = BytesMut::new();
        execute("", "SELECT $1", &[Type::INT4], &[&v], &mut buf).unwrap();
        let tags: Vec<u8> = walk(&buf).into_iter().map(|(t, _)| t).collect();
        assert_eq!(tags, b"PBES");
        let parse_len = walk(&buf)[0].1;
        // len, "" NUL, "SELECT $1" NUL, one type: 4 + 1 + 10 + 2 + 4.
        assert_eq!(parse_len, 21);
        assert_eq!(
            &buf[parse_len + 1 - 4..parse_len + 1],
            &Type::INT4.oid().to_be_bytes()
        );
    }

    fn walk(buf: &[u8]) -> Vec<(u8, usize)> {
        let mut out = vec![];
        let mut at = 0;
        while at < buf.len() {
            let len = u32::from_be_bytes(buf[at + 1..at + 5].try_into().unwrap()) as usize;
            out.push((buf[at], len));
            at += 1 + len;
        }
        out
    }
}
