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

use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use postgres_types::{Kind, Type};

use crate::error::DbError;
use crate::row::{Column, Row};

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
    fn from_tag(tag: &[u8]) -> Verb {
        let word = tag.split(|&b| b == b' ' || b == 0).next().unwrap_or(&[]);
        let mut v = Verb::default();
        let n = word.len().min(v.bytes.len());
        v.bytes[..n].copy_from_slice(&word[..n]);
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
    /// skipped it: it did not run. The default reports it failed with that reason; the
    /// connection task sends it again instead.
    fn unit_skipped(&mut self, token: T, _kind: UnitKind) {
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

pub use crate::error::fault::ProtocolViolation;

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
}

impl<T> Default for Pipeline<T> {
    fn default() -> Self {
        Pipeline {
            fifo: VecDeque::new(),
            ready_seen: 0,
            max_message: super::frame::DEFAULT_MAX_MESSAGE_SIZE,
            paused: false,
        }
    }
}

fn no_columns() -> Arc<[Column]> {
    Arc::from(Vec::new())
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

    /// Records that a unit's messages were written (in this order) to the server.
    pub fn push(&mut self, token: T, kind: UnitKind) {
        self.push_framed(token, kind, Frame::NONE);
    }

    /// [`Pipeline::push`] for a unit that carries `frame`'s statements around its own.
    pub fn push_framed(&mut self, token: T, kind: UnitKind, frame: Frame) {
        let columns = match &kind {
            UnitKind::Execute(c) | UnitKind::Stream(c) => Some(c.clone()),
            UnitKind::Batch(shape) => shape.first().cloned(),
            _ => None,
        };
        debug_assert!(
            frame.before <= 1,
            "a frame has at most one statement before"
        );
        let plain = frame == Frame::NONE && !matches!(kind, UnitKind::Batch(_));
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
        Some(&mut last.token)
    }

    /// Units sent and not yet complete.
    pub fn len(&self) -> usize {
        self.fifo.len()
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
        self.fifo.drain(..).map(|u| u.token)
    }

    /// Consumes every complete message in `buf`, leaving a partial trailing message in place.
    /// Returns the number of units completed.
    pub fn drain(
        &mut self,
        buf: &mut BytesMut,
        handler: &mut impl Handler<T>,
    ) -> Result<usize, ProtocolViolation> {
        let mut done = 0;
        self.paused = false;
        loop {
            let Some(total) = super::frame::frame_len(buf, self.max_message)
                .map_err(|e| ProtocolViolation(e.to_string()))?
            else {
                return Ok(done);
            };
            let (tag, len) = (buf[0], total - 1);
            if buf.len() < total {
                super::frame::reserve_for(buf, total);
                return Ok(done);
            }
            if matches!(tag, b'D' | b'T')
                && matches!(self.fifo.front().map(|u| &u.kind), Some(UnitKind::Simple))
            {
                // Simple-protocol rows are text-format and unused: skip without parsing.
                buf.advance(total);
                continue;
            }
            // Most frequent first: rows, then the per-unit bookkeeping messages.
            match tag {
                b'D' => {
                    let head = self.head(tag)?;
                    if matches!(head.kind, UnitKind::Stream(_)) && head.error.is_none() {
                        if !handler.has_room(&head.token) {
                            self.paused = true;
                            return Ok(done);
                        }
                        let row = stream_row(head, buf, total)?;
                        handler.stream_row(&head.token, row);
                        continue;
                    }
                    let columns = head.columns.clone().ok_or_else(|| {
                        ProtocolViolation("DataRow before a row description".into())
                    })?;
                    let mut body = buf.split_to(total).freeze();
                    body.advance(5);
                    if head.error.is_none() {
                        let row = Row::new(columns, body).ok_or_else(|| {
                            ProtocolViolation(
                                "DataRow column count differs from its description".into(),
                            )
                        })?;
                        head.rows.push(row);
                    }
                }
                b'd' => {
                    let head = self.head(tag)?;
                    if !matches!(head.kind, UnitKind::CopyOut) {
                        return Err(ProtocolViolation(
                            "CopyData outside a COPY TO STDOUT".into(),
                        ));
                    }
                    if !handler.has_room(&head.token) {
                        self.paused = true;
                        return Ok(done);
                    }
                    let mut body = buf.split_to(total).freeze();
                    body.advance(5);
                    handler.copy_data(&head.token, body);
                }
                b'H' | b'G' | b'W' => {
                    let head = self.head(tag)?;
                    match (tag, &head.kind) {
                        (b'H', UnitKind::CopyOut) => {}
                        (b'G', UnitKind::CopyIn) => handler.copy_in_ready(&head.token),
                        _ => {
                            return Err(ProtocolViolation(
                                "the server started a COPY this statement cannot carry: use \
                                 copy_in() or copy_out() of a session or transaction"
                                    .into(),
                            ))
                        }
                    }
                    buf.advance(total);
                }
                b'c' => {
                    self.head(tag)?;
                    buf.advance(total);
                }
                b'2' | b'1' | b'3' | b'n' => {
                    let head = self.head(tag)?;
                    if tag == b'n' && matches!(head.kind, UnitKind::Prepare | UnitKind::Typed) {
                        head.columns = Some(no_columns());
                    }
                    buf.advance(total);
                }
                b'C' => {
                    let head = self.head(tag)?;
                    let tag = &buf[5..total];
                    head.verb = Verb::from_tag(tag);
                    if head.plain() {
                        head.affected = affected_rows(tag);
                    } else {
                        statement_done(head, affected_rows(tag), handler);
                    }
                    buf.advance(total);
                    if !head.synced {
                        done += self.complete_joined(handler);
                    }
                }
                b'I' => {
                    let head = self.head(tag)?;
                    buf.advance(total);
                    if !head.plain() {
                        statement_done(head, 0, handler);
                    }
                    if !head.synced {
                        done += self.complete_joined(handler);
                    }
                }
                b'Z' => {
                    if len != 5 {
                        return Err(ProtocolViolation("ReadyForQuery of wrong length".into()));
                    }
                    let status = buf[5];
                    buf.advance(total);
                    let unit = self.fifo.pop_front().ok_or_else(|| {
                        ProtocolViolation("ReadyForQuery with no unit in flight".into())
                    })?;
                    self.ready_seen += 1;
                    done += 1;
                    handler.ready(status);
                    // A unit that shared its Sync reaches a ReadyForQuery only by failing: the
                    // server skipped the rest of its segment.
                    let broke_segment = !unit.synced;
                    // A violation leaves the unit in the FIFO, so `take_all` fails it with the
                    // connection rather than dropping it unanswered.
                    if broke_segment && unit.error.is_none() {
                        self.fifo.push_front(unit);
                        return Err(ProtocolViolation(
                            "ReadyForQuery before a statement's CommandComplete".into(),
                        ));
                    }
                    if let (None, UnitKind::Batch(shape)) = (&unit.error, &unit.kind) {
                        if usize::from(unit.step) != shape.len() {
                            let e = format!(
                                "a batch of {} statements ended after {}",
                                shape.len(),
                                unit.step
                            );
                            self.fifo.push_front(unit);
                            return Err(ProtocolViolation(e));
                        }
                    }
                    let (plain, before) = (unit.plain(), unit.before());
                    let outcome = match (unit.error, unit.kind) {
                        (Some(failure), kind) => {
                            let (error, at) = *failure;
                            Outcome::Failed {
                                part: part_failed(plain, before, &kind, at),
                                error: Box::new(error),
                            }
                        }
                        (None, UnitKind::Prepare) => Outcome::Prepared {
                            params: unit.params,
                            columns: unit.columns.unwrap_or_else(no_columns),
                        },
                        (None, UnitKind::Batch(_)) => Outcome::Batch,
                        (None, _) => Outcome::Rows {
                            rows: unit.rows,
                            affected: unit.affected,
                            verb: unit.verb,
                        },
                    };
                    handler.unit_done(unit.token, outcome);
                    if broke_segment {
                        loop {
                            let skipped = self.fifo.pop_front().ok_or_else(|| {
                                ProtocolViolation("a segment's units outlived its Sync".into())
                            })?;
                            done += 1;
                            let last = skipped.synced;
                            handler.unit_skipped(skipped.token, skipped.kind);
                            if last {
                                break;
                            }
                        }
                    }
                }
                b'E' => {
                    let err = parse_error_fields(&buf[5..total]);
                    buf.advance(total);
                    if err.is_fatal() {
                        handler.fatal(&err);
                    }
                    match self.fifo.front_mut() {
                        Some(head) => {
                            head.rows = Vec::new();
                            if head.error.is_none() {
                                head.error = Some(Box::new((err, head.step)));
                            }
                        }
                        None if err.is_fatal() => {}
                        None => {
                            return Err(ProtocolViolation(format!(
                                "error with no unit in flight: {err}"
                            )))
                        }
                    }
                }
                b'N' => {
                    let notice = parse_error_fields(&buf[5..total]);
                    buf.advance(total);
                    handler.notice(notice);
                }
                b's' => {
                    return Err(ProtocolViolation(
                        "PortalSuspended: partial execution is never requested".into(),
                    ))
                }
                _ => self.slow_message(buf, handler)?,
            }
        }
    }

    /// The head shares a later unit's Sync and its statement is complete: done, and read-only,
    /// so whatever later units of its segment do cannot change its result; it need not wait
    /// for the segment's end. Returns the units completed (0 if the head had failed: it waits
    /// for the ReadyForQuery that ends the segment).
    fn complete_joined(&mut self, handler: &mut impl Handler<T>) -> usize {
        if self.fifo.front().is_some_and(|u| u.error.is_some()) {
            return 0;
        }
        let Some(unit) = self.fifo.pop_front() else {
            return 0;
        };
        // Only executions share a Sync (`join_last`): the outcome is rows.
        let outcome = Outcome::Rows {
            rows: unit.rows,
            affected: unit.affected,
            verb: unit.verb,
        };
        handler.unit_done(unit.token, outcome);
        1
    }

    fn head(&mut self, tag: u8) -> Result<&mut InFlight<T>, ProtocolViolation> {
        self.fifo.front_mut().ok_or_else(|| {
            ProtocolViolation(format!("message {:?} with no unit in flight", tag as char))
        })
    }

    /// Messages that carry structure (descriptions, parameter status, notifications): parsed
    /// with `postgres-protocol`, off the hot path.
    fn slow_message(
        &mut self,
        buf: &mut BytesMut,
        handler: &mut impl Handler<T>,
    ) -> Result<(), ProtocolViolation> {
        let msg = Message::parse(buf)
            .map_err(|e| ProtocolViolation(format!("malformed message: {e}")))?
            .ok_or_else(|| ProtocolViolation("incomplete message after length check".into()))?;
        let bad = |e: std::io::Error| ProtocolViolation(format!("malformed message: {e}"));
        match msg {
            Message::ParameterDescription(body) => {
                let head = self.head(b't')?;
                let mut it = body.parameters();
                while let Some(oid) = it.next().map_err(bad)? {
                    head.params.push(type_for_oid(oid));
                }
            }
            Message::RowDescription(body) => {
                let head = self.head(b'T')?;
                let mut cols = Vec::new();
                let mut it = body.fields();
                while let Some(f) = it.next().map_err(bad)? {
                    cols.push(Column::new(f.name().to_owned(), type_for_oid(f.type_oid())));
                }
                head.columns = Some(Arc::from(cols));
            }
            Message::ParameterStatus(body) => {
                handler.parameter_status(body.name().map_err(bad)?, body.value().map_err(bad)?);
            }
            Message::NotificationResponse(body) => {
                handler.notification(
                    body.process_id(),
                    body.channel().map_err(bad)?,
                    body.message().map_err(bad)?,
                );
            }
            other => {
                return Err(ProtocolViolation(format!(
                    "unexpected message on a pipelined connection: {}",
                    message_name(&other)
                )))
            }
        }
        Ok(())
    }
}

/// Takes the DataRow of `total` bytes at the front of `buf` as a row of `head`.
fn stream_row<T>(
    head: &InFlight<T>,
    buf: &mut BytesMut,
    total: usize,
) -> Result<Row, ProtocolViolation> {
    let columns = head
        .columns
        .clone()
        .ok_or_else(|| ProtocolViolation("DataRow before a row description".into()))?;
    let mut body = buf.split_to(total).freeze();
    body.advance(5);
    Row::new(columns, body).ok_or_else(|| {
        ProtocolViolation("DataRow column count differs from its description".into())
    })
}

/// A statement of a framed, batch or simple unit completed (the plain one-statement unit is
/// handled inline): the unit's own statement sets the affected-row count, a batch keeps each
/// statement's rows and count, and the statements of its frame count only as steps.
fn statement_done<T>(head: &mut InFlight<T>, affected: u64, handler: &mut impl Handler<T>) {
    let step = head.step;
    head.step = step.saturating_add(1);
    let Some(own) = step.checked_sub(head.before()) else {
        return;
    };
    match &head.kind {
        UnitKind::Batch(shape) => {
            let rows = std::mem::take(&mut head.rows);
            if head.error.is_none() {
                handler.batch_statement(&head.token, usize::from(own), rows, affected);
            }
            head.columns = shape.get(usize::from(own) + 1).cloned();
        }
        // Every statement of a simple query's text is its own; the last one's count stands.
        UnitKind::Simple => head.affected = affected,
        _ if own == 0 => head.affected = affected,
        _ => {}
    }
}

/// Which statement of a unit its error came from (see [`Part`]): the unit is `plain` or has
/// `before` statements ahead of its own, and the error came after `error_at` completed.
fn part_failed(plain: bool, before: u16, kind: &UnitKind, error_at: u16) -> Part {
    if plain {
        return Part::Own(0);
    }
    let own = match kind {
        UnitKind::Batch(shape) => shape.len(),
        UnitKind::Simple => usize::MAX,
        _ => 1,
    };
    match error_at.checked_sub(before) {
        None => Part::Before,
        Some(i) if usize::from(i) < own => Part::Own(usize::from(i)),
        Some(_) => Part::After,
    }
}

/// A `Type` for a server OID. Built-in types map exactly; others (enums, domains, composites)
/// get a placeholder that only accepts raw access until type lookup exists.
pub fn type_for_oid(oid: u32) -> Type {
    Type::from_oid(oid)
        .unwrap_or_else(|| Type::new(format!("oid_{oid}"), oid, Kind::Simple, String::new()))
}

/// The affected-row count from a CommandComplete tag: its last word when numeric
/// (`INSERT 0 5`, `UPDATE 3`, `SELECT 10`), else 0.
fn affected_rows(body: &[u8]) -> u64 {
    let tag = body.strip_suffix(&[0]).unwrap_or(body);
    let last = tag.rsplit(|&b| b == b' ').next().unwrap_or(&[]);
    let mut n: u64 = 0;
    if last.is_empty() {
        return 0;
    }
    for &b in last {
        if !b.is_ascii_digit() {
            return 0;
        }
        n = n.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    n
}

/// Parses ErrorResponse / NoticeResponse fields: `(type byte, C string)*` then a 0 byte.
pub fn parse_error_fields(mut body: &[u8]) -> DbError {
    let mut e = DbError::default();
    let mut localized_severity = None;
    while let Some((&kind, rest)) = body.split_first() {
        if kind == 0 {
            break;
        }
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let value = String::from_utf8_lossy(&rest[..end]).into_owned();
        body = rest.get(end + 1..).unwrap_or(&[]);
        match kind {
            b'V' => e.severity = value,
            b'S' => localized_severity = Some(value),
            b'C' => e.code = crate::SqlState::from_server(value),
            b'M' => e.message = value,
            b'D' => e.detail = Some(value),
            b'H' => e.hint = Some(value),
            b'P' => e.position = value.parse().ok(),
            b'W' => e.where_ = Some(value),
            b's' => e.schema = Some(value),
            b't' => e.table = Some(value),
            b'c' => e.column = Some(value),
            b'd' => e.datatype = Some(value),
            b'n' => e.constraint = Some(value),
            _ => {}
        }
    }
    if e.severity.is_empty() {
        e.severity = localized_severity.unwrap_or_default();
    }
    e
}

fn message_name(m: &Message) -> &'static str {
    match m {
        Message::BackendKeyData(_) => "BackendKeyData",
        Message::CopyData(_) => "CopyData",
        Message::CopyDone => "CopyDone",
        Message::AuthenticationOk
        | Message::AuthenticationCleartextPassword
        | Message::AuthenticationMd5Password(_)
        | Message::AuthenticationSasl(_)
        | Message::AuthenticationSaslContinue(_)
        | Message::AuthenticationSaslFinal(_) => "Authentication",
        _ => "other",
    }
}

#[cfg(test)]
mod tests;
