//! The pipeline's deterministic tests: every message split, every outcome, in order. This
//! module builds backend messages as the server would send them; its children test by subject.

use bytes::BytesMut;

use super::*;

mod fifo;
mod parts;
mod segments;

/// Backend messages, encoded as the server would send them.
fn msg(buf: &mut Vec<u8>, tag: u8, body: &[u8]) {
    buf.push(tag);
    buf.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    buf.extend_from_slice(body);
}
fn data_row(buf: &mut Vec<u8>, cols: &[Option<&[u8]>]) {
    let mut b = (cols.len() as u16).to_be_bytes().to_vec();
    for c in cols {
        match c {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    msg(buf, b'D', &b);
}
fn error(buf: &mut Vec<u8>, code: &str, severity: &str) {
    let mut b = vec![];
    for (k, v) in [
        (b'S', severity),
        (b'V', severity),
        (b'C', code),
        (b'M', "boom"),
    ] {
        b.push(k);
        b.extend_from_slice(v.as_bytes());
        b.push(0);
    }
    b.push(0);
    msg(buf, b'E', &b);
}
fn ready(buf: &mut Vec<u8>) {
    msg(buf, b'Z', b"I");
}
fn complete(buf: &mut Vec<u8>, tag: &str) {
    let mut b = tag.as_bytes().to_vec();
    b.push(0);
    msg(buf, b'C', &b);
}

/// A frontend message (as the client sends it).
fn front(buf: &mut Vec<u8>, tag: u8, body: &[u8]) {
    msg(buf, tag, body);
}

/// The frontend messages a unit of `kind` with `frame` sends, as the driver encodes it with
/// named statements: what its answers are checked against.
fn sent(kind: &UnitKind, frame: Frame) -> Vec<u8> {
    let mut b = Vec::new();
    let control = |b: &mut Vec<u8>| {
        front(b, b'P', b"\0BEGIN\0\0\0");
        front(b, b'B', b"\0\0\0\0\0\0\0\0");
        front(b, b'E', b"\0\0\0\0\0");
    };
    let execute = |b: &mut Vec<u8>| {
        front(b, b'B', b"\0s1\0\0\0\0\0\0\0");
        front(b, b'E', b"\0\0\0\0\0");
    };
    match kind {
        UnitKind::Simple | UnitKind::SimpleRows | UnitKind::CopyIn | UnitKind::CopyOut => {
            front(&mut b, b'Q', b"SELECT 1\0");
            return b;
        }
        UnitKind::Data => return b,
        UnitKind::Status => {}
        _ => {
            for _ in 0..frame.before {
                control(&mut b);
            }
            match kind {
                UnitKind::Prepare => {
                    front(&mut b, b'P', b"s1\0SELECT 1\0\0\0");
                    front(&mut b, b'D', b"Ss1\0");
                }
                UnitKind::Typed => {
                    front(&mut b, b'P', b"\0SELECT 1\0\0\0");
                    front(&mut b, b'B', b"\0\0\0\0\0\0\0\0");
                    front(&mut b, b'D', b"P\0");
                    front(&mut b, b'E', b"\0\0\0\0\0");
                }
                UnitKind::Batch(shape) => {
                    for _ in 0..shape.len() {
                        execute(&mut b);
                    }
                }
                _ => execute(&mut b),
            }
            for _ in 0..frame.after {
                control(&mut b);
            }
        }
    }
    front(&mut b, b'S', b"");
    b
}

impl<T> Pipeline<T> {
    /// Pushes a unit of `kind` as the driver would send it ([`sent`]).
    fn push_kind(&mut self, token: T, kind: UnitKind) {
        self.push_kind_framed(token, kind, Frame::NONE);
    }

    fn push_kind_framed(&mut self, token: T, kind: UnitKind, frame: Frame) {
        let wire = sent(&kind, frame);
        self.push_framed(token, kind, frame, &wire);
    }
}

fn columns() -> Arc<[Column]> {
    Arc::from(vec![
        Column::new("n".into(), Type::INT8),
        Column::new("t".into(), Type::TEXT),
    ])
}
