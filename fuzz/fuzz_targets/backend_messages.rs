//! The server's byte stream, as a hostile or broken server could send it, fed to the in-flight
//! FIFO (`Pipeline::drain`) after a few units of different kinds were pushed.
//!
//! Input layout (see `fuzz/seeds.py`, which writes the seed corpus):
//! - byte 0: bits 0-2 units - 1 (1..=8); bits 3-4 the message cap (default 1 GiB, near
//!   `Config`'s 30,000 minimum, a tiny one only the API allows, `usize::MAX`); bits 5-7 how the
//!   stream is cut into reads (0: one read; n: chunks of 1..=2^n bytes);
//! - byte 1: the cap's offset and the chunking seed;
//! - one byte per unit: bits 0-3 its kind (values 11-15 are kinds 0-4 sent unnamed: a Parse
//!   before the Bind, a Close before a prepare), bit 4 a BEGIN before it, bit 5 a COMMIT after
//!   it, bit 6 it shares the previous unit's Sync (`join_last`), bit 7 its consumer has room
//!   only every other row (frames and joins only where the driver makes them);
//! - the rest: the server's bytes.
//!
//! Properties: no panic; every callback is for the unit at the head of the FIFO, in order and
//! with an outcome its kind can have; `drain` counts exactly the units it reported; and every
//! unit pushed is either reported once or still in the FIFO (`take_all`) when the input ends or
//! the pipeline reports a protocol violation, so no caller is ever left waiting.
#![no_main]

use std::sync::Arc;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pgpipe::internals::{column, Frame, Handler, Outcome, Pipeline, UnitKind};
use pgpipe::types::Type;
use pgpipe::{Column, Row};

/// What the harness knows of each unit it pushed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    Prepare,
    Execute,
    Typed,
    Simple,
    SimpleRows,
    Stream,
    CopyOut,
    CopyIn,
    Batch(usize),
    Status,
}

fn int8_text() -> Arc<[Column]> {
    Arc::from(vec![
        column("n".into(), Type::INT8),
        column("t".into(), Type::TEXT),
    ])
}

fn text() -> Arc<[Column]> {
    Arc::from(vec![column("t".into(), Type::TEXT)])
}

fn unit(desc: u8) -> (UnitKind, Shape) {
    match (desc & 0x0f) % 12 {
        0 => (UnitKind::Prepare, Shape::Prepare),
        1 => (UnitKind::Execute(int8_text()), Shape::Execute),
        2 => (UnitKind::Execute(text()), Shape::Execute),
        3 => (UnitKind::Execute(Arc::from(Vec::new())), Shape::Execute),
        4 => (UnitKind::Typed, Shape::Typed),
        5 => (UnitKind::Simple, Shape::Simple),
        6 => (UnitKind::Stream(int8_text()), Shape::Stream),
        7 => (UnitKind::CopyOut, Shape::CopyOut),
        8 => (UnitKind::CopyIn, Shape::CopyIn),
        9 => {
            let shape: Arc<[Arc<[Column]>]> = Arc::from(vec![int8_text(), Arc::from(Vec::new())]);
            (UnitKind::Batch(shape), Shape::Batch(2))
        }
        10 => (UnitKind::SimpleRows, Shape::SimpleRows),
        _ => (UnitKind::Status, Shape::Status),
    }
}

/// A frontend message.
fn front(buf: &mut Vec<u8>, tag: u8, body: &[u8]) {
    buf.push(tag);
    buf.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    buf.extend_from_slice(body);
}

/// The frontend messages of a unit as the driver sends them, which its answers are checked
/// against: `unnamed`, an execution carries its own Parse and a prepare closes an evicted
/// statement first.
fn sent(kind: &UnitKind, frame: Frame, unnamed: bool) -> Vec<u8> {
    let mut b = Vec::new();
    let control = |b: &mut Vec<u8>| {
        front(b, b'P', b"\0BEGIN\0\0\0");
        front(b, b'B', b"\0\0\0\0\0\0\0\0");
        front(b, b'E', b"\0\0\0\0\0");
    };
    let execute = |b: &mut Vec<u8>| {
        if unnamed {
            front(b, b'P', b"\0SELECT 1\0\0\0");
        }
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
                    if unnamed {
                        front(&mut b, b'C', b"Ss0\0");
                    }
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

struct Check {
    shapes: Vec<Shape>,
    /// Consumers that have room only every other row.
    choosy: Vec<bool>,
    /// The next unit to complete: units complete in the order they were pushed.
    next: usize,
    room_calls: usize,
    /// Statements of the head batch reported so far.
    batch_done: usize,
    /// After a pause, the harness makes room (as the driver does when the consumer reads).
    force_room: bool,
}

impl Check {
    fn head(&self, token: usize, what: &str) -> Shape {
        assert_eq!(
            token, self.next,
            "{what} for unit {token}, head is {}",
            self.next
        );
        self.shapes[token]
    }

    fn rows(&self, rows: &[Row]) {
        for row in rows {
            exercise(row);
        }
    }
}

/// Reads every value of a row the ways a caller would; errors are fine, panics are not.
fn exercise(row: &Row) {
    assert_eq!(row.len(), row.columns().len());
    for i in 0..row.len() {
        let _ = row.raw(i);
        let _ = row.try_get::<_, Option<i64>>(i);
        let _ = row.try_get::<_, Option<&str>>(i);
    }
    let _ = row.try_get::<_, Option<i64>>(row.len());
}

impl Handler<usize> for Check {
    fn unit_done(&mut self, token: usize, outcome: Outcome) {
        let shape = self.head(token, "unit_done");
        self.next += 1;
        let batch_done = std::mem::take(&mut self.batch_done);
        match outcome {
            Outcome::Rows { rows, verb, .. } => {
                assert!(
                    !matches!(shape, Shape::Prepare | Shape::Batch(_) | Shape::SimpleRows),
                    "rows for a {shape:?} unit"
                );
                let _ = verb.as_str();
                self.rows(&rows);
            }
            Outcome::Prepared { columns, .. } => {
                assert_eq!(
                    shape,
                    Shape::Prepare,
                    "Prepared outcome for a {shape:?} unit"
                );
                let _ = columns.len();
            }
            Outcome::Batch => match shape {
                Shape::Batch(n) => assert_eq!(batch_done, n, "a batch of {n} completed"),
                // A simple text has as many statements as the server completed.
                Shape::SimpleRows => {}
                _ => panic!("Batch outcome for a {shape:?} unit"),
            },
            Outcome::Failed { error, part } => {
                let _ = (error.to_string(), part);
            }
        }
    }

    fn unit_skipped(&mut self, token: usize, _kind: UnitKind, _last: bool) {
        let shape = self.head(token, "unit_skipped");
        assert!(
            matches!(shape, Shape::Execute | Shape::Typed),
            "skipped a {shape:?} unit, which never shares a Sync"
        );
        self.next += 1;
    }

    fn has_room(&mut self, token: &usize) -> bool {
        let shape = self.head(*token, "has_room");
        assert!(
            matches!(shape, Shape::Stream | Shape::CopyOut),
            "has_room for {shape:?}"
        );
        self.room_calls += 1;
        self.force_room || !self.choosy[*token] || self.room_calls % 2 == 0
    }

    fn stream_row(&mut self, token: &usize, row: Row) {
        let shape = self.head(*token, "stream_row");
        assert_eq!(shape, Shape::Stream, "streamed row for a {shape:?} unit");
        // Not necessarily the pushed columns: a RowDescription from the server replaces them.
        exercise(&row);
    }

    fn batch_statement(&mut self, token: &usize, index: usize, rows: Vec<Row>, _affected: u64) {
        let shape = self.head(*token, "batch_statement");
        assert!(
            matches!(shape, Shape::Batch(_) | Shape::SimpleRows),
            "batch statement for a {shape:?} unit"
        );
        // In order; a completion beyond the batch's statements is a violation (its script).
        assert_eq!(index, self.batch_done, "batch statements out of order");
        self.batch_done += 1;
        self.rows(&rows);
    }

    fn copy_data(&mut self, token: &usize, _data: bytes::Bytes) {
        let shape = self.head(*token, "copy_data");
        assert_eq!(shape, Shape::CopyOut, "CopyData for a {shape:?} unit");
    }

    fn copy_in_ready(&mut self, token: &usize) {
        let shape = self.head(*token, "copy_in_ready");
        assert_eq!(shape, Shape::CopyIn, "CopyInResponse for a {shape:?} unit");
    }

    fn parameter_status(&mut self, name: &str, value: &str) {
        let _ = (name.len(), value.len());
    }

    fn notice(&mut self, notice: pgpipe::DbError) {
        let _ = notice.to_string();
    }
}

/// A small deterministic generator for chunk sizes.
struct Lcg(u32);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        self.0 >> 16
    }
}

fuzz_target!(|data: &[u8]| {
    let [b0, b1, rest @ ..] = data else {
        return;
    };
    let n = usize::from(b0 & 7) + 1;
    if rest.len() < n {
        return;
    }
    let (descs, stream) = rest.split_at(n);

    let mut pipeline = Pipeline::new();
    pipeline = match (b0 >> 3) & 3 {
        0 => pipeline,
        1 => pipeline.with_max_message(30_000 + usize::from(*b1) * 4),
        2 => pipeline.with_max_message(usize::from(*b1)),
        _ => pipeline.with_max_message(usize::MAX),
    };
    let mut check = Check {
        shapes: Vec::new(),
        choosy: Vec::new(),
        next: 0,
        room_calls: 0,
        batch_done: 0,
        force_room: false,
    };
    for (token, &desc) in descs.iter().enumerate() {
        let (kind, shape) = unit(desc);
        let frame = unit_frame(desc);
        // As the driver coalesces: an unframed execution joins an unframed execution before it.
        let joinable =
            |s: Shape, f: Frame| matches!(s, Shape::Execute | Shape::Typed) && f == Frame::NONE;
        if desc & 0x40 != 0
            && token > 0
            && joinable(shape, frame)
            && joinable(check.shapes[token - 1], unit_frame(descs[token - 1]))
        {
            assert_eq!(pipeline.join_last().copied(), Some(token - 1));
        }
        let wire = sent(&kind, frame, desc & 0x0f >= 11);
        pipeline.push_framed(token, kind, frame, &wire);
        check.shapes.push(shape);
        check.choosy.push(desc & 0x80 != 0);
    }
    assert_eq!(pipeline.len(), n);

    let chunking = b0 >> 5;
    let mut rng = Lcg(u32::from(*b1) | 0x5eed_0000);
    let mut buf = BytesMut::new();
    let mut at = 0;
    let mut violated = false;
    while at < stream.len() && !violated {
        let take = if chunking == 0 {
            stream.len() - at
        } else {
            (1 + rng.next() as usize % (1 << chunking)).min(stream.len() - at)
        };
        buf.extend_from_slice(&stream[at..at + take]);
        at += take;
        loop {
            let before = check.next;
            match pipeline.drain(&mut buf, &mut check) {
                Ok(done) => assert_eq!(done, check.next - before, "drain's count"),
                Err(violation) => {
                    let _ = violation.to_string();
                    violated = true;
                    break;
                }
            }
            if !pipeline.is_paused() || check.force_room {
                check.force_room = false;
                break;
            }
            check.force_room = true;
        }
        if !violated {
            assert_eq!(pipeline.len(), n - check.next, "units in flight");
        }
    }
    // Whatever was not reported is still in flight, to be failed when the connection closes.
    let left: Vec<usize> = pipeline.take_all().collect();
    let want: Vec<usize> = (check.next..n).collect();
    assert_eq!(left, want, "units neither completed nor left in flight");
    assert!(pipeline.is_empty());
});

/// The BEGIN and COMMIT around a unit, as the driver frames them (`driver/shared`): executions
/// may have both, simple queries and COPY a BEGIN only, prepares, batches and bare Syncs none.
fn unit_frame(desc: u8) -> Frame {
    let (before, after) = (u8::from(desc & 0x10 != 0), u8::from(desc & 0x20 != 0));
    match unit(desc).1 {
        Shape::Execute | Shape::Typed | Shape::Stream => Frame { before, after },
        Shape::Simple | Shape::SimpleRows | Shape::CopyOut | Shape::CopyIn => {
            Frame { before, after: 0 }
        }
        Shape::Prepare | Shape::Batch(_) | Shape::Status => Frame::NONE,
    }
}
