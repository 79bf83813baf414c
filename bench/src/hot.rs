//! Fixtures of the sans-IO hot path, shared by the criterion micro benchmarks
//! (`benches/hot_path.rs`) and the instruction-count gate (`pgpipe-icount`): encoding an Execute
//! unit, draining a batch of server responses through the pipeline FIFO, and decoding a row.
//!
//! Each fixture owns its buffers and reuses them, as the driver does, so that a run measures
//! the steady state: the first run may grow a buffer, later ones do not.

use std::hint::black_box;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use pgpipe::internals::{encode, Frame, Handler, Outcome, Pipeline, Script, UnitKind};
use pgpipe::types::Type;
use pgpipe::{Column, Row};

use crate::backend;

/// Units per drained batch.
pub const BATCH: u32 = 64;
/// The prepared statement name the driver would use.
pub const STATEMENT: &str = "pgpipe_1";
/// The text parameter / result value.
pub const TEXT: &str = "hello, pgpipe";
/// What an Execute unit of a named statement sends (`Bind Execute Sync`), as its encoder says.
const SCRIPT: Script = Script::execution(false, false, false);

/// One Execute unit (`Bind` with an `int8` and a `text` parameter, `Execute`, `Sync`) encoded
/// into a buffer reused (and cleared) per unit, as the driver does.
pub struct EncodeFixture {
    buf: BytesMut,
    n: i64,
    s: &'static str,
}

impl Default for EncodeFixture {
    fn default() -> Self {
        Self::new()
    }
}

impl EncodeFixture {
    /// A fixture with a 4 KiB buffer.
    pub fn new() -> Self {
        EncodeFixture {
            buf: BytesMut::with_capacity(4096),
            n: 21,
            s: TEXT,
        }
    }

    /// Encodes one unit; returns its length in bytes.
    pub fn run(&mut self) -> usize {
        self.buf.clear();
        let n = black_box(self.n);
        let s = black_box(self.s);
        encode::execute_framed(
            STATEMENT,
            "",
            &[Type::INT8, Type::TEXT],
            &[&n, &s],
            encode::Frame::NONE,
            &mut self.buf,
        )
        .expect("encode");
        self.buf.len()
    }
}

/// Counts completed units and folds cheap facts of each outcome into a checksum; the rows
/// themselves are dropped undecoded (decoding is [`decode`]'s job).
#[derive(Default)]
struct CountingHandler {
    done: u64,
    checksum: u64,
}

impl Handler<u32> for CountingHandler {
    fn unit_done(&mut self, token: u32, outcome: Outcome) {
        self.done += 1;
        match outcome {
            Outcome::Rows { rows, affected, .. } => {
                self.checksum = self
                    .checksum
                    .wrapping_add(u64::from(token) + rows.len() as u64 + affected);
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

/// A batch of [`BATCH`] Execute units answered in one read: the response stream (per unit
/// BindComplete, one DataRow of `(int8, text)`, CommandComplete, ReadyForQuery) is built once;
/// each run copies it into a reused read buffer, pushes the units (with what they sent, which
/// every answer is checked against, as the driver's encoder gives it) into a reused pipeline
/// and drains it.
pub struct DrainFixture {
    stream: Bytes,
    buf: BytesMut,
    pipeline: Pipeline<u32>,
    columns: Arc<[Column]>,
    handler: CountingHandler,
}

impl Default for DrainFixture {
    fn default() -> Self {
        Self::new()
    }
}

impl DrainFixture {
    /// The fixture, with its response stream built.
    pub fn new() -> Self {
        let mut stream = BytesMut::new();
        for i in 0..BATCH {
            backend::select_unit_response(&mut stream, i64::from(i) * 2, TEXT);
        }
        DrainFixture {
            stream: stream.freeze(),
            buf: BytesMut::new(),
            pipeline: Pipeline::new(),
            columns: backend::select_int8_text_columns(),
            handler: CountingHandler::default(),
        }
    }

    /// Pushes and drains one batch; returns the units completed ([`BATCH`]).
    pub fn run(&mut self) -> usize {
        self.buf.clear();
        self.buf.extend_from_slice(&self.stream);
        for token in 0..BATCH {
            self.pipeline.push_scripted(
                token,
                UnitKind::Execute(self.columns.clone()),
                Frame::NONE,
                SCRIPT,
            );
        }
        let done = self
            .pipeline
            .drain(&mut self.buf, &mut self.handler)
            .expect("drain");
        debug_assert!(self.buf.is_empty() && self.pipeline.is_empty());
        done
    }

    /// Checks once, outside any measurement, that the stream is consumed as intended.
    pub fn check(&mut self) {
        let (done0, sum0) = (self.handler.done, self.handler.checksum);
        assert_eq!(self.run(), BATCH as usize);
        assert!(self.buf.is_empty() && self.pipeline.is_empty());
        assert_eq!(self.handler.done - done0, u64::from(BATCH));
        // token + 1 row + affected 1, per unit.
        let want: u64 = (0..u64::from(BATCH)).map(|t| t + 2).sum();
        assert_eq!(self.handler.checksum.wrapping_sub(sum0), want);
    }
}

/// A row of `SELECT $1::int8 * 2, $2::text` as `drain` would build it.
pub fn sample_row() -> Row {
    let body = backend::data_row_body(&[Some(&42i64.to_be_bytes()), Some(TEXT.as_bytes())]);
    pgpipe::internals::row(backend::select_int8_text_columns(), body).expect("row")
}

/// Reads both values of a [`sample_row`]: the `int8` and the `text` (borrowed, no copy).
pub fn decode(row: &Row) -> (i64, usize) {
    let n = row.get::<_, i64>(0);
    let s = row.get::<_, &str>(1);
    (n, s.len())
}
