//! The in-flight FIFO: which unit each backend message belongs to, and when a unit is complete.
//!
//! No I/O and no async: [`Pipeline::drain`] consumes whole messages from a byte buffer and
//! reports each finished unit to a [`Handler`]. The server answers units strictly in order and
//! ends each with exactly one ReadyForQuery (one Sync per unit), so the head of the FIFO owns
//! every message until its ReadyForQuery. An ErrorResponse marks only the head unit failed: the
//! server skips the rest of that unit up to its Sync, and the next unit starts clean.
//!
//! Sync coalescing: read-only units may share one Sync (a *segment*; see
//! [`Pipeline::join_last`]). A unit whose Sync was dropped completes at its CommandComplete; an
//! error in it makes the server skip the rest of the segment, and the units it skipped go to
//! [`Handler::unit_skipped`] (they did not run: the caller sends them again).

use std::collections::VecDeque;
use std::sync::Arc;

use postgres_types::Type;

use crate::error::DbError;
use crate::row::{Column, Row};

mod drain;
mod expect;
mod fields;

pub use expect::{Completes, Script};

pub(crate) use fields::{parse_error_fields, type_for_oid};

/// What a unit expects back, and therefore how its messages are interpreted.
#[derive(Debug, Clone)]
pub enum UnitKind {
    /// Parse + Describe(statement): yields parameter types and result columns.
    Prepare,
    /// Bind + Execute of a prepared statement whose result columns are known.
    Execute(Arc<[Column]>),
    /// Parse(unnamed) + Bind + Describe(portal) + Execute: columns arrive in the stream.
    Typed,
    /// A simple-protocol Query (possibly several statements): text-format rows are skipped;
    /// the outcome is the last command's affected-row count, or the first error.
    Simple,
    /// A simple-protocol Query whose results are kept: each statement's text-format rows and
    /// count go to [`Handler::batch_statement`] as it completes; the outcome is
    /// [`Outcome::Batch`], or the first error.
    SimpleRows,
    /// As [`UnitKind::Execute`], but each row goes to [`Handler::stream_row`] as it arrives,
    /// while the handler has room for it; the outcome carries no rows.
    Stream(Arc<[Column]>),
    /// A simple-protocol `COPY ... TO STDOUT`: each CopyData goes to [`Handler::copy_data`]
    /// (with the same room check as streamed rows).
    CopyOut,
    /// A simple-protocol `COPY ... FROM STDIN`: [`Handler::copy_in_ready`] when the server
    /// waits for data, which the caller then sends as [`UnitKind::Data`].
    CopyIn,
    /// Bytes that belong to the unit in flight (COPY data): written, never answered, so they
    /// never enter the FIFO.
    Data,
    /// Several executions of prepared statements (their result columns, in order) before one
    /// Sync: an atomic batch. The outcome is [`Outcome::Batch`], one result per statement.
    Batch(Arc<[Arc<[Column]>]>),
    /// A bare Sync: answered by a ReadyForQuery alone, which reports the transaction status
    /// after every earlier unit.
    Status,
}

/// How many statements ride in a unit before and after its own (see
/// [`crate::proto::encode::Frame`]): their completions are not the unit's result, and an error
/// in one of them is reported as theirs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Statements before the unit's own (a transaction's BEGIN).
    pub before: u8,
    /// Statements after it (a COMMIT).
    pub after: u8,
}

impl Frame {
    /// The unit's own statements only.
    pub const NONE: Frame = Frame {
        before: 0,
        after: 0,
    };
}

/// Which statement of a unit an error came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A statement of the unit's [`Frame`] before its own (a BEGIN): the unit's own did not run.
    Before,
    /// The unit's own statement; for a batch, the index of the one that failed.
    Own(usize),
    /// A statement of the frame after the unit's own (a COMMIT), which had succeeded.
    After,
}

/// How a unit ended. Produced once per unit, at its ReadyForQuery.
#[derive(Debug)]
pub enum Outcome {
    /// Rows and the command's affected-row count (0 when the tag carries none).
    Rows {
        /// The rows, in server order.
        rows: Vec<Row>,
        /// Rows affected (INSERT/UPDATE/DELETE/MERGE/SELECT count from CommandComplete).
        affected: u64,
        /// The command tag's first word (of the last command, for a simple query).
        verb: Verb,
    },
    /// A prepare finished.
    Prepared {
        /// Parameter types, as the server inferred them.
        params: Vec<Type>,
        /// Result columns (empty for statements that return no rows).
        columns: Arc<[Column]>,
    },
    /// Every statement of a [`UnitKind::Batch`] completed (each one's result went to
    /// [`Handler::batch_statement`], in order) and the batch committed.
    Batch,
    /// The server rejected the unit; nothing else on the connection is affected.
    Failed {
        /// The server's error.
        error: Box<DbError>,
        /// Which of the unit's statements it came from.
        part: Part,
    },
}

/// The first word of a CommandComplete tag (`SELECT`, `INSERT`, `COMMIT`, `ROLLBACK`, ...),
/// kept inline so completing a unit allocates nothing for it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Verb {
    bytes: [u8; 15],
    len: u8,
}

impl Verb {
    /// The first word of `tag` (a CommandComplete's), at most 15 bytes.
    #[inline]
    fn from_tag(tag: &[u8]) -> Verb {
        let mut v = Verb::default();
        // Nearly every tag has eight bytes and a word shorter than that (`SELECT 1`, `INSERT 0
        // 1`): its end found in one word, not byte by byte.
        if let Some(head) = tag.first_chunk::<8>() {
            const ONES: u64 = 0x0101_0101_0101_0101;
            const HIGHS: u64 = 0x8080_8080_8080_8080;
            let x = u64::from_le_bytes(*head);
            let spaces = x ^ (ONES * u64::from(b' '));
            // The high bit of each byte that is 0 or a space (exact at the lowest one).
            let ends = (x.wrapping_sub(ONES) & !x | spaces.wrapping_sub(ONES) & !spaces) & HIGHS;
            if ends != 0 {
                let n = ends.trailing_zeros() / 8;
                let word = x & ((1u64 << (8 * n)) - 1);
                v.bytes[..8].copy_from_slice(&word.to_le_bytes());
                v.len = n as u8;
                return v;
            }
        }
        let mut n = 0;
        while n < v.bytes.len() && n < tag.len() {
            let b = tag[n];
            if b == b' ' || b == 0 {
                break;
            }
            v.bytes[n] = b;
            n += 1;
        }
        v.len = n as u8;
        v
    }

    /// The verb as text (empty when the unit had no CommandComplete).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Debug for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives what [`Pipeline::drain`] finds. Called synchronously from inside the drain loop:
/// implementations must not run waiting tasks (collect their wakers and wake them afterwards).
pub trait Handler<T> {
    /// The unit `token` completed at its ReadyForQuery.
    fn unit_done(&mut self, token: T, outcome: Outcome);
    /// A ReadyForQuery arrived; `status` is `b'I'` (idle), `b'T'` (in a transaction) or `b'E'`
    /// (failed transaction).
    fn ready(&mut self, _status: u8) {}
    /// The server reported a (changed) session parameter.
    fn parameter_status(&mut self, _name: &str, _value: &str) {}
    /// The server is terminating the session (FATAL/PANIC ErrorResponse).
    fn fatal(&mut self, _error: &DbError) {}
    /// A NoticeResponse.
    fn notice(&mut self, _notice: DbError) {}
    /// A NotificationResponse (LISTEN/NOTIFY).
    fn notification(&mut self, _pid: i32, _channel: &str, _payload: &str) {}
    /// Whether the consumer of streaming unit `token` can take one more row. `false` stops
    /// the drain before that row (see [`Pipeline::is_paused`]) until it is called again.
    fn has_room(&mut self, _token: &T) -> bool {
        true
    }
    /// Unit `token` (of `kind`) shared a Sync with an earlier unit that failed, so the server
    /// skipped it: it did not run; `last`: the segment's last unit (the one whose Sync it
    /// was). The default reports it failed with that reason; the connection task sends it
    /// again instead.
    fn unit_skipped(&mut self, token: T, _kind: UnitKind, _last: bool) {
        let e = DbError {
            severity: "ERROR".into(),
            message: "skipped: an earlier statement sharing its Sync failed".into(),
            ..DbError::default()
        };
        self.unit_done(
            token,
            Outcome::Failed {
                error: Box::new(e),
                part: Part::Own(0),
            },
        );
    }
    /// A row of streaming unit `token`.
    fn stream_row(&mut self, _token: &T, _row: Row) {}
    /// Statement `index` of batch unit `token` completed with these rows and this count
    /// (whether the batch commits is known at its end: [`Outcome::Batch`] or a failure).
    fn batch_statement(&mut self, _token: &T, _index: usize, _rows: Vec<Row>, _affected: u64) {}
    /// One CopyData message's payload of COPY-out unit `token`.
    fn copy_data(&mut self, _token: &T, _data: bytes::Bytes) {}
    /// The server is in COPY-in mode for unit `token` and waits for its data.
    fn copy_in_ready(&mut self, _token: &T) {}
}

/// The server sent something the pipeline cannot account for. The connection must be closed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolViolation(pub String);

struct InFlight<T> {
    token: T,
    kind: UnitKind,
    rows: Vec<Row>,
    affected: u64,
    verb: Verb,
    /// The server's error, and how many of the unit's statements had completed before it.
    error: Option<Box<(DbError, u16)>>,
    params: Vec<Type>,
    columns: Option<Arc<[Column]>>,
    /// Ends with its own Sync; `false`: its Sync was dropped and the next unit's ends it.
    synced: bool,
    /// [`PLAIN`] (one statement with nothing around it: its completion is the unit's result,
    /// and no steps are counted), or [`BEFORE`] for a frame with a statement ahead of the
    /// unit's own (kept to a byte: the entry stays within its 128 bytes).
    shape: u8,
    /// Statements of the unit completed so far (CommandComplete or EmptyQueryResponse), for
    /// units that are not plain.
    step: u16,
    /// The answers its messages call for, in order (`expect.rs`).
    script: Script,
}

/// See [`InFlight::shape`].
const PLAIN: u8 = 1;
const BEFORE: u8 = 2;

impl<T> InFlight<T> {
    fn plain(&self) -> bool {
        self.shape & PLAIN != 0
    }

    /// Statements of its frame before its own (a BEGIN; one after it needs no count: the
    /// unit's own statement's completion is told apart by the step).
    fn before(&self) -> u16 {
        u16::from(self.shape & BEFORE != 0)
    }
}

/// The FIFO of units sent and not yet answered by their ReadyForQuery.
pub struct Pipeline<T> {
    fifo: VecDeque<InFlight<T>>,
    ready_seen: u64,
    /// The longest message accepted (`Config::max_message_size`).
    max_message: usize,
    /// The last drain stopped at a row its streaming consumer had no room for.
    paused: bool,
    /// Answers due beyond what a unit's packed script holds, for the units in flight in
    /// FIFO order (`expect.rs`).
    spill: VecDeque<u8>,
}

impl<T> Default for Pipeline<T> {
    fn default() -> Self {
        Pipeline {
            fifo: VecDeque::new(),
            ready_seen: 0,
            max_message: super::frame::DEFAULT_MAX_MESSAGE_SIZE,
            paused: false,
            spill: VecDeque::new(),
        }
    }
}

impl<T> Pipeline<T> {
    /// An empty pipeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// This pipeline, refusing messages longer than `max` bytes (and short-type messages over
    /// [`super::frame::SHORT_MESSAGE_MAX`]) before anything is allocated for them; a `max` below
    /// that limit acts as the limit (see [`super::frame::frame_len`]).
    pub fn with_max_message(mut self, max: usize) -> Self {
        self.max_message = max;
        self
    }

    /// Records that a unit's messages, `sent` (whole frontend messages, as written), went to
    /// the server: every answer is checked against them.
    pub fn push(&mut self, token: T, kind: UnitKind, sent: &[u8]) {
        self.push_framed(token, kind, Frame::NONE, sent);
    }

    /// [`Pipeline::push`] for a unit that carries `frame`'s statements around its own.
    pub fn push_framed(&mut self, token: T, kind: UnitKind, frame: Frame, sent: &[u8]) {
        let script = Script::of(sent, &mut self.spill);
        self.push_scripted(token, kind, frame, script);
    }

    /// [`Pipeline::push_framed`] for a unit whose script its encoder gave
    /// ([`Script::execution`]): the hot path's executions, whose bytes are not read again.
    pub fn push_scripted(&mut self, token: T, kind: UnitKind, frame: Frame, script: Script) {
        let columns = match &kind {
            UnitKind::Execute(c) | UnitKind::Stream(c) => Some(c.clone()),
            UnitKind::Batch(shape) => shape.first().cloned(),
            _ => None,
        };
        debug_assert!(
            frame.before <= 1,
            "a frame has at most one statement before"
        );
        let plain =
            frame == Frame::NONE && !matches!(kind, UnitKind::Batch(_) | UnitKind::SimpleRows);
        let shape = if plain { PLAIN } else { 0 } | if frame.before > 0 { BEFORE } else { 0 };
        self.fifo.push_back(InFlight {
            token,
            kind,
            rows: Vec::new(),
            affected: 0,
            verb: Verb::default(),
            error: None,
            params: Vec::new(),
            columns,
            synced: true,
            shape,
            step: 0,
            script,
        });
    }

    /// Records that the newest unit's Sync was dropped: the next unit pushed shares it. Only
    /// execution units ([`UnitKind::Execute`], [`UnitKind::Typed`]) can share a Sync, since they
    /// end in a CommandComplete; for others this returns `None` and changes nothing. Returns
    /// the newest unit's token.
    pub fn join_last(&mut self) -> Option<&mut T> {
        let last = self.fifo.back_mut()?;
        if !matches!(last.kind, UnitKind::Execute(_) | UnitKind::Typed) {
            return None;
        }
        last.synced = false;
        last.script.drop_ready();
        Some(&mut last.token)
    }

    /// Units sent and not yet complete.
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// The oldest unit in flight (the next to be answered).
    pub fn oldest(&self) -> Option<&T> {
        self.fifo.front().map(|u| &u.token)
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// ReadyForQuery messages seen so far (equals units completed when the protocol holds).
    pub fn ready_seen(&self) -> u64 {
        self.ready_seen
    }

    /// Whether the last drain stopped at a row its streaming consumer had no room for: the
    /// rest of the buffer waits (and the connection should read no more) until there is room.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Removes every in-flight unit (oldest first), for failing them when the connection dies.
    pub fn take_all(&mut self) -> impl Iterator<Item = T> + '_ {
        self.spill.clear();
        self.fifo.drain(..).map(|u| u.token)
    }
}

#[cfg(test)]
mod tests;
