//! The answer to a simple query a connection asks while it opens (the server's role, the
//! extension functions): the values of its rows and the server's error, read once its
//! ReadyForQuery has arrived. Frames are walked in place, so a partial answer leaves the buffer
//! whole for the next read.

use bytes::BytesMut;

use crate::error::DbError;
use crate::proto::pipeline::parse_error_fields;

/// What the server answered.
#[derive(Debug, Default)]
pub struct Answer {
    /// Each DataRow's values (`None` for NULL), in order.
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
    /// The server's error, if it refused the query.
    pub error: Option<DbError>,
}

/// Reads the answer at the front of `buf`, no message of it longer than `max`. `Ok(None)`
/// until its ReadyForQuery has arrived; then the bytes it used are taken from `buf` (what
/// follows belongs to the connection). `Err` says what is wrong with it.
pub fn read(buf: &mut BytesMut, max: usize) -> Result<Option<Answer>, String> {
    let mut at = 0;
    let mut answer = Answer::default();
    loop {
        let Some(total) = super::frame::frame_len(&buf[at..], max).map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let Some(body) = buf.get(at + 5..at + total) else {
            return Ok(None);
        };
        match buf[at] {
            b'D' => {
                let values = columns(body).ok_or("a malformed row")?;
                answer
                    .rows
                    .push(values.iter().map(|v| v.map(<[u8]>::to_vec)).collect());
            }
            b'E' => answer.error = Some(parse_error_fields(body)),
            b'Z' => {
                let _ = buf.split_to(at + total);
                return Ok(Some(answer));
            }
            // RowDescription, CommandComplete, notices, parameter reports.
            _ => {}
        }
        at += total;
    }
}

/// A DataRow's values (`None` for NULL).
fn columns(body: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let n = i16::from_be_bytes(body.get(..2)?.try_into().ok()?);
    let mut rest = &body[2..];
    let mut out = Vec::with_capacity(usize::try_from(n).ok()?);
    for _ in 0..n {
        let len = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        rest = &rest[4..];
        if len < 0 {
            out.push(None);
            continue;
        }
        let len = len as usize;
        out.push(Some(rest.get(..len)?));
        rest = &rest[len..];
    }
    Some(out)
}
