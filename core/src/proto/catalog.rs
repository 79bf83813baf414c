//! What a shared connection asks the catalog once it has started up: the volatile routines of
//! the installed extensions (functions, aggregates, window functions, procedures), which the
//! guard refuses unless it knows them to keep no session state (`guard::names`,
//! `docs/GUARD.md`). Asked with the simple protocol before the connection serves, so it is
//! neither a unit nor in the statement cache.

use bytes::BytesMut;

use crate::guard::Routine;
use crate::Error;

/// One row a routine: its schema and name exactly as the catalog keeps them, its number of
/// arguments, how many of them have defaults, and whether it is variadic (so a call's argument
/// count can tell overloads apart). An aggregate counts as volatile when one of its support
/// functions is: `CREATE AGGREGATE` labels every aggregate immutable, whatever its state
/// function does. Trigger, handler and `internal` routines are left out: SQL cannot call them.
pub const QUERY: &str = "SELECT DISTINCT n.nspname, p.proname, p.pronargs, p.pronargdefaults, \
     p.provariadic <> 0 \
     FROM pg_catalog.pg_proc p \
     JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
     JOIN pg_catalog.pg_depend d \
     ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e' \
     WHERE (p.provolatile = 'v' OR EXISTS (SELECT 1 FROM pg_catalog.pg_aggregate a \
     JOIN pg_catalog.pg_proc f ON f.oid = ANY (ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, \
     a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]::pg_catalog.oid[]) \
     WHERE a.aggfnoid = p.oid AND f.provolatile = 'v')) \
     AND p.prorettype::pg_catalog.regtype <> ALL (ARRAY['trigger', 'event_trigger', 'internal', \
     'fdw_handler', 'index_am_handler', 'tsm_handler', 'table_am_handler', \
     'language_handler']::pg_catalog.regtype[])";

/// The longest answer message read: a database with thousands of extension routines stays far
/// below it.
const MAX_ANSWER: usize = 4 << 20;

/// Writes [`QUERY`] into `buf`.
pub fn ask(buf: &mut BytesMut) -> Result<(), Error> {
    super::encode::simple(QUERY, buf)
}

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The routines (possibly none).
    Routines(Vec<Routine>),
    /// The server could not answer (an older server without `prokind`, a proxy that refuses
    /// catalog queries): its message. The guard then refuses only its fixed list.
    Failed(String),
}

/// Reads the answer to [`QUERY`] from `buf`. `Ok(None)` until its ReadyForQuery has arrived;
/// the bytes it used are taken from `buf`.
pub fn from_answer(buf: &mut BytesMut) -> Result<Option<Answer>, Error> {
    let bad = |what: &str| Error::Protocol(format!("reading the extension functions: {what}"));
    let Some(answer) = super::answer::read(buf, MAX_ANSWER).map_err(|e| bad(&e))? else {
        return Ok(None);
    };
    if let Some(e) = answer.error {
        return Ok(Some(Answer::Failed(e.message().to_owned())));
    }
    let text = |v: &Option<Vec<u8>>| -> Result<String, Error> {
        let v = v
            .as_ref()
            .ok_or_else(|| bad("a NULL where a name belongs"))?;
        String::from_utf8(v.clone()).map_err(|_| bad("a name is not UTF-8"))
    };
    let number = |v: &Option<Vec<u8>>| -> Result<u16, Error> {
        text(v)?
            .parse()
            .map_err(|_| bad("a count that is not a number"))
    };
    let mut routines = Vec::with_capacity(answer.rows.len());
    for row in &answer.rows {
        let [schema, name, args, defaults, variadic] = row.as_slice() else {
            return Err(bad("a row that is not five values"));
        };
        routines.push(Routine {
            schema: text(schema)?,
            name: text(name)?,
            args: number(args)?,
            defaults: number(defaults)?,
            variadic: match text(variadic)?.as_str() {
                "t" => true,
                "f" => false,
                _ => return Err(bad("a flag that is not t or f")),
            },
        });
    }
    Ok(Some(Answer::Routines(routines)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    fn msg(buf: &mut BytesMut, tag: u8, body: &[u8]) {
        buf.put_u8(tag);
        buf.put_i32(4 + body.len() as i32);
        buf.put_slice(body);
    }

    fn row(values: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = (values.len() as u16).to_be_bytes().to_vec();
        for value in values {
            match value {
                Some(v) => {
                    b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    b.extend_from_slice(v);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        b
    }

    #[test]
    fn reads_the_routines_once_ready() {
        let mut buf = BytesMut::new();
        msg(&mut buf, b'T', b"\0\x05");
        let odd = "Odd name \u{e9}";
        msg(
            &mut buf,
            b'D',
            &row(&[
                Some(b"public"),
                Some(b"my_fn"),
                Some(b"2"),
                Some(b"1"),
                Some(b"f"),
            ]),
        );
        msg(
            &mut buf,
            b'D',
            &row(&[
                Some(b"ext"),
                Some(odd.as_bytes()),
                Some(b"0"),
                Some(b"0"),
                Some(b"t"),
            ]),
        );
        msg(&mut buf, b'C', b"SELECT 2\0");
        let whole = buf.clone();
        assert_eq!(from_answer(&mut buf).unwrap(), None, "no ReadyForQuery yet");
        assert_eq!(buf, whole, "a partial answer stays whole");
        msg(&mut buf, b'Z', b"I");
        msg(&mut buf, b'S', b"a\0b\0");
        let routine = |schema: &str, name: &str, args, defaults, variadic| Routine {
            schema: schema.into(),
            name: name.into(),
            args,
            defaults,
            variadic,
        };
        assert_eq!(
            from_answer(&mut buf).unwrap(),
            Some(Answer::Routines(vec![
                routine("public", "my_fn", 2, 1, false),
                // A name with a space and a capital is one name.
                routine("ext", odd, 0, 0, true),
            ]))
        );
        assert_eq!(&buf[..1], b"S", "what follows is the connection's");
    }

    #[test]
    fn none_a_failure_and_malformed_rows() {
        let mut buf = BytesMut::new();
        msg(&mut buf, b'Z', b"I");
        assert_eq!(
            from_answer(&mut buf).unwrap(),
            Some(Answer::Routines(Vec::new()))
        );
        let mut buf = BytesMut::new();
        msg(
            &mut buf,
            b'E',
            b"SERROR\0C42703\0Mcolumn \"prokind\" does not exist\0\0",
        );
        msg(&mut buf, b'Z', b"I");
        assert_eq!(
            from_answer(&mut buf).unwrap(),
            Some(Answer::Failed("column \"prokind\" does not exist".into()))
        );
        for bad in [
            row(&[Some(b"s"), Some(b"f")]),
            row(&[
                Some(b"s"),
                Some(b"\xff"),
                Some(b"0"),
                Some(b"0"),
                Some(b"f"),
            ]),
            row(&[Some(b"s"), None, Some(b"0"), Some(b"0"), Some(b"f")]),
            row(&[Some(b"s"), Some(b"f"), Some(b"x"), Some(b"0"), Some(b"f")]),
            row(&[
                Some(b"s"),
                Some(b"f"),
                Some(b"0"),
                Some(b"0"),
                Some(b"maybe"),
            ]),
        ] {
            let mut buf = BytesMut::new();
            msg(&mut buf, b'D', &bad);
            msg(&mut buf, b'Z', b"I");
            assert!(from_answer(&mut buf).is_err());
        }
    }
}
