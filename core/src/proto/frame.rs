//! The frame of a backend message: its type byte and length, checked before anything is
//! allocated for its body. A corrupt or hostile server's length header must cost no memory.

pub(crate) use crate::config::{DEFAULT_MAX_MESSAGE_SIZE, SHORT_MESSAGE_MAX};

/// How far ahead of the bytes received a partial message may reserve buffer space: memory grows
/// with what the server actually sent, not with what its header claims.
pub const RESERVE_AHEAD: usize = 1 << 20;

/// Message types that may be long: rows and their description, COPY data, function results,
/// errors, notices and notifications (libpq's `VALID_LONG_MESSAGE_TYPE`).
fn may_be_long(tag: u8) -> bool {
    matches!(tag, b'T' | b'D' | b'd' | b'V' | b'E' | b'N' | b'A')
}

/// An impossible message header: its type, claimed length and the limit it broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadFrame {
    tag: u8,
    len: usize,
    limit: usize,
}

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, len) = (self.tag.escape_ascii(), self.len);
        if len < 4 {
            write!(f, "message '{name}' has length {len}")
        } else if !may_be_long(self.tag) {
            write!(
                f,
                "message '{name}' claims {len} bytes; a message of this type is never longer \
                 than {SHORT_MESSAGE_MAX} (a corrupt or hostile server)"
            )
        } else {
            write!(
                f,
                "message '{name}' claims {len} bytes, more than max_message_size ({}); raise \
                 it if rows or COPY data this large are expected",
                self.limit
            )
        }
    }
}

/// The length of the whole message at the start of `buf` (type byte included) once its header
/// has arrived, `None` before. Fails when the header is impossible: shorter than itself, a short
/// type over [`SHORT_MESSAGE_MAX`], or any message over `max` (the configured cap; a cap below
/// [`SHORT_MESSAGE_MAX`] acts as that, since every message up to it passes the fast check, and
/// `Config` refuses such caps). On the hot
/// path (every message of every unit): a few comparisons, no formatting until it fails.
#[inline]
pub fn frame_len(buf: &[u8], max: usize) -> Result<Option<usize>, BadFrame> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    // Nearly every message is short: one comparison decides, the rest is out of line.
    if !(4..=SHORT_MESSAGE_MAX).contains(&len) {
        check_long(buf[0], len, max)?;
    }
    Ok(Some(len + 1))
}

#[cold]
#[inline(never)]
fn check_long(tag: u8, len: usize, max: usize) -> Result<(), BadFrame> {
    let limit = if may_be_long(tag) {
        max
    } else {
        SHORT_MESSAGE_MAX
    };
    if !(4..=limit).contains(&len) {
        return Err(BadFrame { tag, len, limit });
    }
    Ok(())
}

/// Makes room in `buf` for the rest of a partial message of `total` bytes, at most
/// [`RESERVE_AHEAD`] beyond what has arrived.
pub fn reserve_for(buf: &mut bytes::BytesMut, total: usize) {
    let missing = total.saturating_sub(buf.len());
    buf.reserve(missing.min(RESERVE_AHEAD));
}

/// The next whole message in `buf`, parsed, or `None` until it has all arrived; its header is
/// checked first ([`frame_len`]), so a partial message reserves nothing for its claimed length.
pub fn next_message(
    buf: &mut bytes::BytesMut,
    max: usize,
) -> Result<Option<postgres_protocol::message::backend::Message>, String> {
    match frame_len(buf, max).map_err(|e| e.to_string())? {
        Some(total) if buf.len() >= total => {
            postgres_protocol::message::backend::Message::parse(buf).map_err(|e| e.to_string())
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tag: u8, len: u32) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&len.to_be_bytes());
        v
    }

    #[test]
    fn impossible_lengths_fail_before_any_body_arrives() {
        let frame_len = |b: &[u8], max| frame_len(b, max).map_err(|e| e.to_string());
        assert_eq!(frame_len(&[b'Z', 0, 0], 1 << 30), Ok(None));
        assert_eq!(frame_len(&header(b'Z', 5), 1 << 30), Ok(Some(6)));
        assert!(frame_len(&header(b'Z', 3), 1 << 30).is_err());
        // A short type over libpq's limit, whatever the cap.
        let e = frame_len(&header(b'R', 0x7fff_fff0), usize::MAX).unwrap_err();
        assert!(e.contains("never longer than 30000"), "{e}");
        assert_eq!(frame_len(&header(b'R', 30_000), 1 << 30), Ok(Some(30_001)));
        // Rows may be long, up to the cap; a 4 GiB header is refused by it.
        assert_eq!(
            frame_len(&header(b'D', 1 << 20), 1 << 30),
            Ok(Some((1 << 20) + 1))
        );
        let e = frame_len(&header(b'D', u32::MAX), 1 << 30).unwrap_err();
        assert!(e.contains("max_message_size"), "{e}");
        assert!(frame_len(&header(b'D', 1 << 20), 1 << 19).is_err());
    }

    #[test]
    fn a_partial_message_reserves_no_more_than_arrived_plus_the_step() {
        let mut buf = bytes::BytesMut::from(&header(b'D', (1 << 30) - 1)[..]);
        reserve_for(&mut buf, 1 << 30);
        assert!(buf.capacity() <= RESERVE_AHEAD + 64, "{}", buf.capacity());
    }
}
