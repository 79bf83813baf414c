//! What a shared connection asks the catalog once it has started up: the volatile functions of
//! the installed extensions, which the guard refuses unless it knows them to keep no session
//! state (`guard::names`, `docs/GUARD.md`). Asked with the simple protocol before the
//! connection serves, so it is neither a unit nor in the statement cache.

use bytes::BytesMut;

use crate::Error;

/// One row, one value: the names, lower case, separated by spaces (NULL when there are none).
/// Trigger, handler and `internal` functions are left out: SQL cannot call them.
pub const QUERY: &str = "SELECT pg_catalog.string_agg(DISTINCT pg_catalog.lower(p.proname::pg_catalog.text), ' ') \
     FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_depend d \
     ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e' \
     WHERE p.provolatile = 'v' AND p.prokind = 'f' \
     AND p.prorettype::pg_catalog.regtype <> ALL (ARRAY['trigger', 'event_trigger', 'internal', \
     'fdw_handler', 'index_am_handler', 'tsm_handler', 'table_am_handler', \
     'language_handler']::pg_catalog.regtype[])";

/// The longest answer message read: a database with thousands of extension functions stays
/// far below it.
const MAX_ANSWER: usize = 1 << 20;

/// Writes [`QUERY`] into `buf`.
pub fn ask(buf: &mut BytesMut) -> Result<(), Error> {
    super::encode::simple(QUERY, buf)
}

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The names (possibly none).
    Names(String),
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
    let names = match answer.rows.as_slice() {
        [] => String::new(),
        [row] => match row.as_slice() {
            [Some(v)] => String::from_utf8(v.clone()).map_err(|_| bad("a name is not UTF-8"))?,
            [None] => String::new(),
            _ => return Err(bad("a row that is not one value")),
        },
        _ => return Err(bad("more than one row")),
    };
    Ok(Some(Answer::Names(names)))
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

    fn row(value: Option<&[u8]>) -> Vec<u8> {
        let mut b = vec![0, 1];
        match value {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        b
    }

    #[test]
    fn reads_the_names_once_ready() {
        let mut buf = BytesMut::new();
        msg(&mut buf, b'T', b"\0\x01x\0");
        msg(&mut buf, b'D', &row(Some(b"my_fn other_fn")));
        msg(&mut buf, b'C', b"SELECT 1\0");
        let whole = buf.clone();
        assert_eq!(from_answer(&mut buf).unwrap(), None, "no ReadyForQuery yet");
        assert_eq!(buf, whole, "a partial answer stays whole");
        msg(&mut buf, b'Z', b"I");
        msg(&mut buf, b'S', b"a\0b\0");
        assert_eq!(
            from_answer(&mut buf).unwrap(),
            Some(Answer::Names("my_fn other_fn".into()))
        );
        assert_eq!(&buf[..1], b"S", "what follows is the connection's");
    }

    #[test]
    fn none_a_failure_and_a_malformed_row() {
        let mut buf = BytesMut::new();
        msg(&mut buf, b'D', &row(None));
        msg(&mut buf, b'Z', b"I");
        assert_eq!(
            from_answer(&mut buf).unwrap(),
            Some(Answer::Names(String::new()))
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
        let mut buf = BytesMut::new();
        msg(&mut buf, b'D', b"\0\x02");
        msg(&mut buf, b'Z', b"I");
        assert!(from_answer(&mut buf).is_err());
        let mut buf = BytesMut::new();
        msg(&mut buf, b'D', &row(Some(b"\xff")));
        msg(&mut buf, b'Z', b"I");
        assert!(from_answer(&mut buf).is_err());
    }
}
