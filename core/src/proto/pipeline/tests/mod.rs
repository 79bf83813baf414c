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

fn columns() -> Arc<[Column]> {
    Arc::from(vec![
        Column::new("n".into(), Type::INT8),
        Column::new("t".into(), Type::TEXT),
    ])
}
