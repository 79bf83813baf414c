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

/// Statements that ride in another statement's unit, sharing its Sync: a transaction's
/// `BEGIN` before its first statement, a `COMMIT` after its last. An error in any of them makes
/// the server skip the rest of the unit, so a failed `BEGIN` never lets the statement run
/// outside the transaction, and a failed statement never lets the `COMMIT` run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Sent before the unit's own statement.
    pub before: Option<&'a str>,
    /// Sent after it.
    pub after: Option<&'a str>,
}

impl Frame<'_> {
    /// No statement besides the unit's own.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub const NONE: Frame<'static> = Frame {
        before: None,
        after: None,
    };
}

/// Execute unit for a prepared statement: `Bind(stmt, params) Execute Sync`, binary parameters
/// and binary results. The server answers `BindComplete DataRow* CommandComplete ReadyForQuery`.
/// An empty `statement` name means statements are not kept by name: the unit then starts with
/// its own `Parse(unnamed, sql, types)` (and the answer with ParseComplete), so it needs
/// nothing from an earlier unit (behind a transaction pooler, that may have run elsewhere).
///
/// `frame`'s statements go around the execution, before the one Sync: `[control] [Parse]
/// Bind Execute [control] Sync`, each control statement an unnamed `Parse Bind Execute`.
pub fn execute_framed(
    statement: &str,
    sql: &str,
    types: &[Type],
    params: Params<'_>,
    frame: Frame<'_>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    if types.len() != params.len() {
        return Err(param_count(types.len(), params.len()));
    }
    let start = buf.len();
    let mut r = Ok(());
    if let Some(before) = frame.before {
        r = control(before, buf);
    }
    let r = r
        .and_then(|()| execution(statement, sql, types, params, buf))
        .and_then(|()| frame.after.map_or(Ok(()), |after| control(after, buf)));
    match r {
        Ok(()) => {
            frontend::sync(buf);
            Ok(())
        }
        Err(e) => {
            buf.truncate(start);
            Err(e)
        }
    }
}

/// `body` between `frame`'s control statements (no Sync).
fn framed(
    frame: Frame<'_>,
    buf: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), Error>,
) -> Result<(), Error> {
    if let Some(before) = frame.before {
        control(before, buf)?;
    }
    body(buf)?;
    if let Some(after) = frame.after {
        control(after, buf)?;
    }
    Ok(())
}

/// One statement of an atomic batch: its prepared name (empty when statements are not kept by
/// name), text, parameter types and values.
pub type BatchStep<'a> = (&'a str, &'a str, &'a [Type], Params<'a>);

/// Batch unit: every statement's `[Parse] Bind Execute`, then one Sync. The server runs them
/// in one implicit transaction: all of them commit at the Sync, or, after an error in one,
/// none (it skips the rest up to the Sync). Answers: each statement's `BindComplete DataRow*
/// CommandComplete`, then one ReadyForQuery.
pub fn batch<'a>(
    steps: impl IntoIterator<Item = BatchStep<'a>>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    let start = buf.len();
    let r = (|| {
        for (statement, sql, types, params) in steps {
            if types.len() != params.len() {
                return Err(Error::ParamCount {
                    expected: types.len(),
                    given: params.len(),
                });
            }
            execution(statement, sql, types, params, buf)?;
        }
        frontend::sync(buf);
        Ok(())
    })();
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

/// A bare Sync: the server answers with one ReadyForQuery carrying the transaction status after
/// every earlier unit, and changes nothing (between units no implicit transaction is open).
pub fn status(buf: &mut BytesMut) {
    frontend::sync(buf);
}

/// `[Parse(unnamed)] Bind Execute` of one prepared statement, without a Sync.
#[inline]
fn execution(
    statement: &str,
    sql: &str,
    types: &[Type],
    params: Params<'_>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    if statement.is_empty() {
        frontend::parse("", sql, types.iter().map(Type::oid), buf).map_err(parse_err)?;
    }
    bind_values(
        statement,
        params.len(),
        params.iter().copied().zip(types.iter()),
        buf,
    )?;
    frontend::execute("", 0, buf).map_err(io_err)
}

/// A parameterless statement of a [`Frame`]: `Parse(unnamed) Bind Execute`, no Sync (off the
/// common path: most units have no frame).
#[cold]
#[inline(never)]
fn control(sql: &str, buf: &mut BytesMut) -> Result<(), Error> {
    check_input(sql, 0)?;
    frontend::parse("", sql, std::iter::empty(), buf).map_err(io_err)?;
    bind_values("", 0, std::iter::empty(), buf)?;
    frontend::execute("", 0, buf).map_err(io_err)
}

/// Typed unit: the caller supplies parameter types, so no prepare round trip and no cache:
/// `Parse(unnamed, sql, types) Bind Describe(P) Execute Sync` (with `frame`'s statements
/// around it, before the Sync). The server answers `ParseComplete BindComplete
/// RowDescription|NoData DataRow* CommandComplete ReadyForQuery`.
pub fn typed_framed(
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
    frame: Frame<'_>,
    buf: &mut BytesMut,
) -> Result<(), Error> {
    if params.len() > MAX_PARAMS {
        return Err(Error::TooManyParams {
            given: params.len(),
        });
    }
    let start = buf.len();
    let r = framed(frame, buf, |buf| {
        frontend::parse("", sql, params.iter().map(|(_, t)| t.oid()), buf).map_err(parse_err)?;
        bind_values("", params.len(), params.iter().map(|(v, t)| (*v, t)), buf)?;
        frontend::describe(b'P', "", buf).map_err(io_err)?;
        frontend::execute("", 0, buf).map_err(io_err)
    });
    match r {
        Ok(()) => {
            frontend::sync(buf);
            Ok(())
        }
        Err(e) => {
            buf.truncate(start);
            Err(e)
        }
    }
}

/// Simple-protocol unit: `Query(sql)`. The server runs every statement in the text and ends with
/// one ReadyForQuery; results come back in text format. Used on exclusive connections only
/// (`batch_execute`, resets), never on the shared path.
pub fn simple(sql: &str, buf: &mut BytesMut) -> Result<(), Error> {
    simple_after(None, sql, buf)
}

/// [`simple`] with `before` (a transaction's `BEGIN`) as the text's first statement: one
/// Query `"{before}; {sql}"`. An error in `before` makes the server skip the rest of the text.
pub fn simple_after(before: Option<&str>, sql: &str, buf: &mut BytesMut) -> Result<(), Error> {
    check_input(sql, 0)?;
    let start = buf.len();
    let r = match before {
        None => frontend::query(sql, buf),
        Some(before) => {
            check_input(before, 0)?;
            frontend::query(&format!("{before}; {sql}"), buf)
        }
    };
    r.map_err(|e| {
        buf.truncate(start);
        io_err(e)
    })
}

/// The characters [`simple_after`] puts before the caller's text: a server error's position in
/// the caller's text is the reported one minus this.
pub fn simple_prefix_chars(before: &str) -> usize {
    before.chars().count() + 2
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
        Err(frontend::BindError::Conversion(source)) => {
            Err(encode_failed(index, failed_type, source))
        }
        Err(frontend::BindError::Serialization(e)) => Err(io_err(e)),
    }
}

/// Writes an execution unit's bytes (`Bind(statement) Execute`, no Sync) to `out` so they no
/// longer need the named statement: an unnamed `Parse` of `sql` with `types`, then the same
/// Bind naming the unnamed statement. For a unit sent again after its statement was closed
/// (evicted from the cache meanwhile). `false`, writing nothing, if `unit` does not start
/// with a well-formed Bind naming a statement.
pub fn rebind_unnamed(unit: &[u8], sql: &str, types: &[Type], out: &mut BytesMut) -> bool {
    let Some((bind, rest)) = split_bind(unit) else {
        return false;
    };
    // Portal name, then the statement name: both NUL-terminated.
    let body = &bind[5..];
    let Some(portal_end) = body.iter().position(|&b| b == 0) else {
        return false;
    };
    let after_portal = &body[portal_end + 1..];
    let Some(name_len) = after_portal.iter().position(|&b| b == 0) else {
        return false;
    };
    if name_len == 0 {
        return false;
    }
    let start = out.len();
    if frontend::parse("", sql, types.iter().map(Type::oid), out).is_err() {
        out.truncate(start);
        return false;
    }
    let len = (bind.len() - 1 - name_len) as u32;
    out.extend_from_slice(b"B");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body[..=portal_end]);
    out.extend_from_slice(&after_portal[name_len..]);
    out.extend_from_slice(rest);
    true
}

/// The leading Bind message of `unit` and what follows it.
fn split_bind(unit: &[u8]) -> Option<(&[u8], &[u8])> {
    if unit.first() != Some(&b'B') {
        return None;
    }
    let len = u32::from_be_bytes(unit.get(1..5)?.try_into().ok()?) as usize;
    let end = 1usize.checked_add(len)?;
    (end <= unit.len() && len >= 4).then(|| unit.split_at(end))
}

// The error paths stay out of line: built in the encoding functions they would make them big
// enough that the compiler stops inlining the protocol writers (measured: +50 instructions per
// unit in the instruction-count gate's encode stage).
#[cold]
#[inline(never)]
fn io_err(e: std::io::Error) -> Error {
    Error::Protocol(format!("cannot encode message: {e}"))
}

#[cold]
#[inline(never)]
fn parse_err(e: std::io::Error) -> Error {
    Error::Protocol(format!("cannot encode parse: {e}"))
}

#[cold]
#[inline(never)]
fn encode_failed(index: usize, ty: Option<&Type>, source: crate::error::BoxError) -> Error {
    Error::Encode {
        index,
        ty: ty.map(|t| t.name().to_owned()).unwrap_or_default(),
        source,
    }
}

#[cold]
#[inline(never)]
fn param_count(expected: usize, given: usize) -> Error {
    Error::ParamCount { expected, given }
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
        let err = execute_framed(
            "s1",
            "",
            &[Type::INT8, Type::INT4],
            &[&v, &bad],
            Frame::NONE,
            &mut buf,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Encode { index: 1, .. }), "{err:?}");
        assert_eq!(&buf[..], b"earlier");
    }

    #[test]
    fn count_mismatch_and_input_checks() {
        let mut buf = BytesMut::new();
        let v: i64 = 5;
        assert!(matches!(
            execute_framed("s1", "", &[], &[&v], Frame::NONE, &mut buf),
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
        execute_framed("s1", "", &[Type::INT4], &[&v], Frame::NONE, &mut buf).unwrap();
        // Bind, Execute, Sync and nothing else.
        let tags: Vec<u8> = walk(&buf).into_iter().map(|(t, _)| t).collect();
        assert_eq!(tags, b"BES");

        // Not kept by name: the unit carries its own unnamed Parse, with the learned types.
        let mut buf = BytesMut::new();
        execute_framed("", "SELECT $1", &[Type::INT4], &[&v], Frame::NONE, &mut buf).unwrap();
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

    #[test]
    fn a_named_execution_rebinds_unnamed() {
        let v: i32 = 7;
        let mut named = BytesMut::new();
        execute_framed("s1", "", &[Type::INT4], &[&v], Frame::NONE, &mut named).unwrap();
        let unit = &named[..named.len() - SYNC_LEN];
        let mut inline = BytesMut::new();
        execute_framed(
            "",
            "SELECT $1",
            &[Type::INT4],
            &[&v],
            Frame::NONE,
            &mut inline,
        )
        .unwrap();

        let mut out = BytesMut::new();
        assert!(rebind_unnamed(unit, "SELECT $1", &[Type::INT4], &mut out));
        // The same bytes as a unit encoded unnamed in the first place.
        assert_eq!(&out[..], &inline[..inline.len() - SYNC_LEN]);

        // Already unnamed, or not an execution: nothing written.
        let mut none = BytesMut::new();
        assert!(!rebind_unnamed(&out, "SELECT $1", &[Type::INT4], &mut none));
        assert!(!rebind_unnamed(&unit[..3], "SELECT $1", &[], &mut none));
        assert!(none.is_empty());
    }

    const SYNC_LEN: usize = 5;

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
