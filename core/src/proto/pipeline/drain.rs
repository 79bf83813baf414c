//! The drain: [`Pipeline::drain`] takes each whole backend message from the buffer and
//! dispatches it to the unit at the head of the FIFO (rows, completions, errors, the
//! ReadyForQuery that ends a unit and any units it skipped), and works out each finished unit's
//! [`Outcome`] and which statement of it failed ([`Part`]).

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;

use super::expect::{NEXT, WITHIN};
use super::fields::{affected_rows, parse_error_fields, type_for_oid};
use super::{Handler, InFlight, Outcome, Part, Pipeline, ProtocolViolation, UnitKind, Verb};
use crate::row::{Column, Row};

fn no_columns() -> Arc<[Column]> {
    Arc::from(Vec::new())
}

impl<T> Pipeline<T> {
    /// Consumes every complete message in `buf`, leaving a partial trailing message in place.
    /// Returns the number of units completed.
    pub fn drain(
        &mut self,
        buf: &mut BytesMut,
        handler: &mut impl Handler<T>,
    ) -> Result<usize, ProtocolViolation> {
        let mut done = 0;
        self.paused = false;
        // Whole messages read but not cut from `buf` yet: cut once, where a message must be
        // at the front (a row, kept as it came) and when the drain ends, not one by one.
        let mut at = 0;
        let r = self.messages(buf, handler, &mut at, &mut done);
        buf.advance(at);
        r.map(|()| done)
    }

    /// [`Pipeline::drain`]'s loop, from `buf[*at..]`, which it moves on as it reads.
    fn messages(
        &mut self,
        buf: &mut BytesMut,
        handler: &mut impl Handler<T>,
        at: &mut usize,
        done: &mut usize,
    ) -> Result<(), ProtocolViolation> {
        loop {
            let Some(total) = crate::proto::frame::frame_len(&buf[*at..], self.max_message)
                .map_err(|e| ProtocolViolation(e.to_string()))?
            else {
                return Ok(());
            };
            let m = *at;
            let (tag, len) = (buf[m], total - 1);
            if buf.len() - m < total {
                cut(buf, at);
                crate::proto::frame::reserve_for(buf, total);
                return Ok(());
            }
            if matches!(tag, b'D' | b'T')
                && matches!(self.fifo.front().map(|u| &u.kind), Some(UnitKind::Simple))
            {
                // Simple-protocol rows are text-format and unused: skip without parsing.
                *at += total;
                continue;
            }
            // Most frequent first: rows, then the per-unit bookkeeping messages.
            match tag {
                b'D' => {
                    let head = self.answer(tag)?;
                    if matches!(head.kind, UnitKind::Stream(_)) && head.error.is_none() {
                        if !handler.has_room(&head.token) {
                            self.paused = true;
                            return Ok(());
                        }
                        cut(buf, at);
                        let row = stream_row(head, buf, total)?;
                        handler.stream_row(&head.token, row);
                        continue;
                    }
                    let columns = head.columns.clone().ok_or_else(|| {
                        ProtocolViolation("DataRow before a row description".into())
                    })?;
                    cut(buf, at);
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
                    let head = self.answer(tag)?;
                    if !matches!(head.kind, UnitKind::CopyOut) {
                        return Err(ProtocolViolation(
                            "CopyData outside a COPY TO STDOUT".into(),
                        ));
                    }
                    if !handler.has_room(&head.token) {
                        self.paused = true;
                        return Ok(());
                    }
                    cut(buf, at);
                    let mut body = buf.split_to(total).freeze();
                    body.advance(5);
                    handler.copy_data(&head.token, body);
                }
                b'H' | b'G' | b'W' => {
                    let head = self.answer(tag)?;
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
                    *at += total;
                }
                b'c' => {
                    self.answer(tag)?;
                    *at += total;
                }
                b'2' | b'1' | b'3' | b'n' => {
                    let head = self.answer(tag)?;
                    if tag == b'n' && matches!(head.kind, UnitKind::Prepare | UnitKind::Typed) {
                        head.columns = Some(no_columns());
                    }
                    *at += total;
                }
                b'C' => {
                    let tag = &buf[m + 5..m + total];
                    let Some(head) = self.fifo.front_mut() else {
                        return Err(no_unit(b'C'));
                    };
                    head.script.complete(tag, &mut self.spill)?;
                    head.verb = Verb::from_tag(tag);
                    if head.plain() {
                        head.affected = affected_rows(tag);
                    } else {
                        statement_done(head, affected_rows(tag), handler);
                    }
                    *at += total;
                    if !head.synced {
                        *done += self.complete_joined(handler);
                    }
                }
                b'I' => {
                    let head = self.answer(tag)?;
                    *at += total;
                    if !head.plain() {
                        statement_done(head, 0, handler);
                    }
                    if !head.synced {
                        *done += self.complete_joined(handler);
                    }
                }
                b'Z' => {
                    if len != 5 {
                        return Err(ProtocolViolation("ReadyForQuery of wrong length".into()));
                    }
                    let status = buf[m + 5];
                    *at += total;
                    *done += self.ready(status, handler)?;
                }
                b'E' => {
                    let err = parse_error_fields(&buf[m + 5..m + total]);
                    *at += total;
                    if err.is_fatal() {
                        handler.fatal(&err);
                    }
                    match self.fifo.front_mut() {
                        Some(head) => {
                            head.rows = Vec::new();
                            // The server skips to the Sync: its ReadyForQuery is all that
                            // may come now.
                            head.script.fail(&mut self.spill);
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
                    let notice = parse_error_fields(&buf[m + 5..m + total]);
                    *at += total;
                    handler.notice(notice);
                }
                b's' => {
                    return Err(ProtocolViolation(
                        "PortalSuspended: partial execution is never requested".into(),
                    ))
                }
                _ => {
                    cut(buf, at);
                    self.slow_message(buf, handler)?;
                }
            }
        }
    }

    /// A ReadyForQuery with `status` ends the head unit: its outcome to `handler`, and, if it
    /// failed sharing a Sync, the units of its segment the server skipped. Returns the units
    /// completed.
    #[inline]
    fn ready(
        &mut self,
        status: u8,
        handler: &mut impl Handler<T>,
    ) -> Result<usize, ProtocolViolation> {
        let mut unit = self
            .fifo
            .pop_front()
            .ok_or_else(|| ProtocolViolation("ReadyForQuery with no unit in flight".into()))?;
        // The answer due is this ReadyForQuery, and it is the unit's last.
        if unit.script.fit(b'Z') != NEXT {
            let e = unit.script.violation(b'Z');
            self.fifo.push_front(unit);
            return Err(e);
        }
        unit.script.advance(&mut self.spill);
        debug_assert!(unit.script.is_done(), "a Sync ends its unit");
        self.ready_seen += 1;
        let mut done = 1;
        handler.ready(status);
        // A unit that shared its Sync reaches a ReadyForQuery only by failing (its script saw
        // to that): the server skipped the rest of its segment.
        let broke_segment = !unit.synced;
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
            (None, UnitKind::Batch(_) | UnitKind::SimpleRows) => Outcome::Batch,
            (None, _) => Outcome::Rows {
                rows: unit.rows,
                affected: unit.affected,
                verb: unit.verb,
            },
        };
        handler.unit_done(unit.token, outcome);
        if broke_segment {
            loop {
                let mut skipped = self.fifo.pop_front().ok_or_else(|| {
                    ProtocolViolation("a segment's units outlived its Sync".into())
                })?;
                skipped.script.skip(&mut self.spill);
                done += 1;
                let last = skipped.synced;
                handler.unit_skipped(skipped.token, skipped.kind, last);
                if last {
                    break;
                }
            }
        }
        Ok(done)
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

    /// The unit backend message `tag` answers, once the message is checked against what the
    /// unit sent: the answer due, or part of it (`expect.rs`; after an error only the
    /// ReadyForQuery is due).
    #[inline(always)]
    fn answer(&mut self, tag: u8) -> Result<&mut InFlight<T>, ProtocolViolation> {
        let Some(head) = self.fifo.front_mut() else {
            return Err(no_unit(tag));
        };
        match head.script.fit(tag) {
            NEXT => head.script.advance(&mut self.spill),
            WITHIN => {}
            _ => return Err(head.script.violation(tag)),
        }
        Ok(head)
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
                let head = self.answer(b't')?;
                let mut it = body.parameters();
                while let Some(oid) = it.next().map_err(bad)? {
                    head.params.push(type_for_oid(oid));
                }
            }
            Message::RowDescription(body) => {
                let head = self.answer(b'T')?;
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
        // Each statement's rows and count are its own result; the next one describes its own.
        UnitKind::SimpleRows => {
            let rows = std::mem::take(&mut head.rows);
            if head.error.is_none() {
                handler.batch_statement(&head.token, usize::from(own), rows, affected);
            }
            head.columns = None;
        }
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
        UnitKind::Simple | UnitKind::SimpleRows => usize::MAX,
        _ => 1,
    };
    match error_at.checked_sub(before) {
        None => Part::Before,
        Some(i) if usize::from(i) < own => Part::Own(usize::from(i)),
        Some(_) => Part::After,
    }
}

/// Cuts the messages read so far from the front of `buf`.
#[inline]
fn cut(buf: &mut BytesMut, at: &mut usize) {
    buf.advance(*at);
    *at = 0;
}

#[cold]
#[inline(never)]
fn no_unit(tag: u8) -> ProtocolViolation {
    ProtocolViolation(format!("message {:?} with no unit in flight", tag as char))
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
