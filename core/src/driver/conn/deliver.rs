//! What a drain finds, delivered: each completed unit's outcome to its caller (and its share of
//! the drain's time to the estimator), server reports to the connection's state (notices and
//! notifications to its holder's queues), and each lost
//! unit's error when the connection dies.

use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;
use std::time::Instant;

use postgres_types::Type;

use super::Sent;
use crate::driver::shared::{
    ConnShared, Notification, PrepareError, QueryResult, Statement, Token, DEFAULT_COST_NS,
    NOTICE_BACKLOG, NOTIFICATION_BACKLOG,
};
use crate::error::Fault;
use crate::proto::coalesce::SYNC;
use crate::proto::pipeline::Verb;
use crate::proto::timing::Estimator;
use crate::proto::{Handler, Outcome, Part, SessionInfo, UnitKind};
use crate::row::Column;
use crate::sched::{lock, DeferredWakes};
use crate::{DbError, Error, Reason};
use bytes::{Buf, BytesMut};

fn sub_saturating(c: &std::sync::atomic::AtomicU64, v: u64) {
    let _ = c.fetch_update(Relaxed, Relaxed, |x| Some(x.saturating_sub(v)));
}

/// Fails one unit of a connection that died: `dispatched` says whether any of its bytes were
/// written (outcome unknown) or none were (safe to send elsewhere).
pub(super) fn fail(
    shared: &ConnShared,
    token: Token,
    cost: u64,
    reason: &Reason,
    dispatched: bool,
    wakes: &mut DeferredWakes,
) {
    let c = &shared.counters;
    sub_saturating(&c.est_pending_ns, cost);
    match token {
        Token::Query(w) => w.unblock(Err(lost(c, reason, dispatched)), wakes),
        Token::Batch(b) => b.waiter.unblock(Err(lost(c, reason, dispatched)), wakes),
        Token::Prepare(p) => {
            let err = if dispatched {
                PrepareError::Indeterminate(reason.clone())
            } else {
                PrepareError::NotDispatched(reason.clone())
            };
            shared.finish_prepare(&p, Err(err), wakes);
        }
        Token::Stream(sink) => sink.finish(Err(lost(c, reason, dispatched)), wakes),
        Token::CopyOut(sink) => sink.finish(Err(lost(c, reason, dispatched)), wakes),
        Token::CopyIn(copy) => copy.finish(Err(lost(c, reason, dispatched)), wakes),
        Token::Data => {}
    }
}

/// The error of a unit whose connection died: never sent, or outcome unknown.
fn lost(c: &crate::stats::Counters, reason: &Reason, dispatched: bool) -> Error {
    if dispatched {
        c.inc(&c.errors_indeterminate);
        Error::Indeterminate {
            reason: reason.clone(),
        }
    } else {
        c.inc(&c.errors_not_dispatched);
        Error::NotDispatched {
            reason: reason.clone(),
        }
    }
}

/// A COPY unit's end: the rows copied, or why not.
fn copy_end(outcome: Outcome) -> Result<u64, Error> {
    match outcome {
        Outcome::Rows { affected, .. } => Ok(affected),
        Outcome::Failed { error, part } => Err(unit_error(error, part)),
        _ => Err(Error::Protocol("unexpected result for a COPY".into())),
    }
}

/// The caller's error for a unit the server rejected, by the statement that failed: the
/// transaction's BEGIN riding with it, its own, or the COMMIT after it.
fn unit_error(error: Box<DbError>, part: Part) -> Error {
    match part {
        Part::Before => Error::BeginFailed(error),
        Part::Own(_) => Error::Db(error),
        Part::After => Error::CommitFailed(error),
    }
}

/// Applies the pipeline's findings to callers and connection state, inside the drain.
/// Reported parameters that say what the server is, not what a session set.
const ROLE_PARAMETERS: [&str; 2] = ["in_hot_standby", "default_transaction_read_only"];

pub(super) struct Completer<'a> {
    pub(super) shared: &'a ConnShared,
    pub(super) wakes: &'a mut DeferredWakes,
    pub(super) fatal: &'a mut Option<Box<DbError>>,
    pub(super) session: &'a mut SessionInfo,
    pub(super) exclusive: bool,
    pub(super) leaked: Option<Fault>,
    /// The server reported a change of its role (`in_hot_standby`, ...); the task checks it
    /// against `target_session_attrs`.
    pub(super) role_changed: bool,
    /// When this drain's bytes were read.
    pub(super) now: Instant,
    pub(super) est: &'a mut Estimator<Arc<Statement>>,
    /// Sync coalescing: the bytes of the units in flight that share a Sync (FIFO), the write
    /// buffer and its byte count, where skipped units are written again, and those units.
    pub(super) replay: &'a mut BytesMut,
    pub(super) wbuf: &'a mut BytesMut,
    pub(super) pumped: &'a mut u64,
    pub(super) resent: &'a mut Vec<(Sent, UnitKind, std::ops::Range<usize>)>,
    /// Skipped units may be sent again here (not when the connection stopped sending).
    pub(super) resend: bool,
    /// The connection writes one Sync at a time (`path.rs`): skipped units go again as one
    /// segment; `resegment` counts those of it written so far.
    pub(super) one_sync: bool,
    pub(super) resegment: usize,
    /// Units of the connection's own completed in this drain (not in the gauge callers read).
    pub(super) internal_done: usize,
    /// The path probe's answer, if it came in this drain: `true` when it proved the path direct.
    pub(super) probed: Option<bool>,
    /// The probe is unanswered: the next ReadyForQuery is its own (it went out first).
    pub(super) probing: bool,
}

impl Completer<'_> {
    /// An answer that fits its unit's messages but not its statement: the unit fails as sent
    /// with an unknown outcome, nothing of the answer is kept, and the connection goes (a
    /// protocol violation: its other answers cannot be trusted either).
    #[cold]
    fn mismatch(&mut self, token: Token, cost: u64, what: String) {
        let reason = Reason::from(Fault::Protocol(what.clone()));
        fail(self.shared, token, cost, &reason, true, self.wakes);
        if self.leaked.is_none() {
            self.leaked = Some(Fault::Protocol(what));
        }
    }
}

impl Handler<Sent> for Completer<'_> {
    fn unit_done(&mut self, sent: Sent, outcome: Outcome) {
        let c = &self.shared.counters;
        if sent.internal {
            // The path probe: one row when the backend is the one the startup named.
            self.internal_done += 1;
            self.probed = Some(matches!(outcome, Outcome::Rows { affected: 1, .. }));
            self.est
                .unit_done(self.now, sent.sent_at, 0, None, DEFAULT_COST_NS);
            return;
        }
        c.inc(&c.units_completed);
        if sent.replay > 0 {
            self.replay.advance(sent.replay);
        }
        if sent.joined && !matches!(outcome, Outcome::Failed { .. }) {
            // Completed at its CommandComplete; a failed one took its segment's ReadyForQuery.
            c.inc(&c.units_coalesced);
        }
        // A lane with nothing queued behind its running unit: the lanes no longer all have a
        // queue, so fast units held back for them may go (the count still includes this unit).
        if let Some(gate) = &self.shared.gate {
            if self.shared.load() <= 2 {
                gate.release_all(self.wakes);
            }
        }
        sub_saturating(&c.est_pending_ns, sent.cost);
        // Every unit takes its share of the span (failed ones and prepares too), but only a
        // successful execution updates its statement's estimate.
        let est = sent
            .stmt
            .as_ref()
            .map_or(DEFAULT_COST_NS, |s| s.estimate_ns());
        let failed = matches!(outcome, Outcome::Failed { .. });
        if let Some(s) = &sent.stmt {
            s.set_failed(failed);
        }
        let stmt = sent.stmt.filter(|_| !failed);
        self.est
            .unit_done(self.now, sent.sent_at, sent.cost, stmt, est);
        if failed {
            c.inc(&c.errors_db);
        }
        match sent.token {
            Token::Query(w) => {
                let r = match outcome {
                    Outcome::Rows {
                        rows,
                        affected,
                        verb,
                    } => Ok(QueryResult {
                        rows,
                        affected,
                        verb,
                    }),
                    Outcome::Failed { error, part } => Err(unit_error(error, part)),
                    _ => Err(Error::Protocol("unexpected result for a query unit".into())),
                };
                w.unblock(r, self.wakes);
            }
            Token::Batch(b) => {
                let done = std::mem::take(&mut *lock(&b.done));
                let r = match outcome {
                    Outcome::Batch => Ok(done),
                    Outcome::Failed {
                        error,
                        part: Part::Own(index),
                    } => Err(Error::BatchFailed {
                        index,
                        source: error,
                    }),
                    Outcome::Failed { error, part } => Err(unit_error(error, part)),
                    _ => Err(Error::Protocol("unexpected result for a batch".into())),
                };
                b.waiter.unblock(r, self.wakes);
            }
            Token::Prepare(p) => {
                let r = match outcome {
                    // Nothing learned from an answer that is not this statement's is kept: the
                    // server counts the parameters its text names.
                    Outcome::Prepared { params, .. }
                        if params.len() != crate::guard::placeholders(&p.sql) =>
                    {
                        let e = format!(
                            "a statement naming {} parameters described with {}: not its answer",
                            crate::guard::placeholders(&p.sql),
                            params.len()
                        );
                        return self.mismatch(Token::Prepare(p), 0, e);
                    }
                    Outcome::Prepared { params, columns } => Ok((params, columns)),
                    Outcome::Failed { error, .. } => Err(PrepareError::Db(Arc::new(*error))),
                    _ => Ok((Vec::<Type>::new(), Arc::<[Column]>::from(Vec::new()))),
                };
                self.shared.finish_prepare(&p, r, self.wakes);
            }
            Token::Stream(sink) => {
                let end = match outcome {
                    Outcome::Rows { affected, .. } => Ok(affected),
                    Outcome::Failed { error, part } => Err(unit_error(error, part)),
                    _ => Err(Error::Protocol(
                        "unexpected result for a streaming unit".into(),
                    )),
                };
                sink.finish(end, self.wakes);
            }
            Token::CopyOut(sink) => sink.finish(copy_end(outcome), self.wakes),
            Token::CopyIn(copy) => copy.finish(copy_end(outcome), self.wakes),
            Token::Data => {}
        }
    }

    fn unit_skipped(&mut self, mut sent: Sent, kind: UnitKind, last: bool) {
        // It did not run: an earlier unit sharing its Sync failed and the server skipped to
        // the Sync. Sent again with a Sync of its own, so it cannot be skipped twice; with one
        // Sync at a time (`path.rs`), the skipped units go again as one segment, in which at
        // least the failing unit completes each time.
        let bytes = self.replay.split_to(sent.replay);
        if !self.resend {
            let reason = Reason::from(Fault::StoppedSending);
            fail(
                self.shared,
                sent.token,
                sent.cost,
                &reason,
                false,
                self.wakes,
            );
            return;
        }
        self.shared.counters.inc(&self.shared.counters.units_resent);
        sent.start = *self.pumped;
        let joined = self.one_sync && !last;
        let in_segment = joined || self.resegment > 0;
        let at = self.wbuf.len();
        // Its statement may have been closed since (evicted by a prepare sent after it): the
        // unit then parses it again, unnamed.
        let rebound = match &sent.stmt {
            Some(s) if !s.is_live() => {
                crate::proto::encode::rebind_unnamed(&bytes, &s.sql, s.params(), self.wbuf)
            }
            _ => false,
        };
        if !rebound {
            self.wbuf.extend_from_slice(&bytes);
        }
        sent.replay = 0;
        if in_segment {
            // Kept again until its segment ends, behind what is kept for units ahead of it.
            sent.replay = self.wbuf.len() - at;
            self.replay.extend_from_slice(&self.wbuf[at..]);
        }
        sent.joined = joined;
        if joined {
            self.resegment += 1;
        } else {
            self.wbuf.extend_from_slice(&SYNC);
            self.resegment = 0;
        }
        *self.pumped += (self.wbuf.len() - at) as u64;
        self.resent.push((sent, kind, at..self.wbuf.len()));
    }

    fn has_room(&mut self, sent: &Sent) -> bool {
        match &sent.token {
            Token::Stream(sink) => sink.has_room(),
            Token::CopyOut(sink) => sink.has_room(),
            _ => true,
        }
    }

    fn batch_statement(
        &mut self,
        sent: &Sent,
        _index: usize,
        rows: Vec<crate::Row>,
        affected: u64,
    ) {
        if let Token::Batch(b) = &sent.token {
            lock(&b.done).push(QueryResult {
                rows,
                affected,
                verb: Verb::default(),
            });
        }
    }

    fn stream_row(&mut self, sent: &Sent, row: crate::Row) {
        if let Token::Stream(sink) = &sent.token {
            sink.push(row, self.wakes);
        }
    }

    fn copy_data(&mut self, sent: &Sent, data: bytes::Bytes) {
        if let Token::CopyOut(sink) = &sent.token {
            sink.push(data, self.wakes);
        }
    }

    fn copy_in_ready(&mut self, sent: &Sent) {
        if let Token::CopyIn(copy) = &sent.token {
            copy.ready(self.wakes);
        }
    }

    fn ready(&mut self, status: u8) {
        // The status first: a count that includes this ReadyForQuery implies its status
        // (`ConnShared::settled_tx_status`).
        self.shared.tx_status.store(status, Relaxed);
        let c = &self.shared.counters;
        if std::mem::take(&mut self.probing) {
            // The probe's, on a shared connection: kept out of the counts callers read.
            return;
        }
        c.ready_received.fetch_add(1, Release);
        if self.exclusive {
            return;
        }
        // Backstop: a shared connection must be idle between units. A transaction left open
        // would capture other callers' statements.
        if status != b'I' && self.leaked.is_none() {
            self.leaked = Some(Fault::LeftInTransaction(status as char));
        }
    }

    fn parameter_status(&mut self, name: &str, value: &str) {
        let changed = match self.session.set_parameter(name, value) {
            Ok(changed) => changed,
            Err(e) => {
                // Too many names: the connection goes, as for any protocol violation.
                if self.leaked.is_none() {
                    self.leaked = Some(Fault::TooManyParameters(e));
                }
                return;
            }
        };
        // The server's role is not session state: promotion changes it under every session.
        if ROLE_PARAMETERS.contains(&name) {
            self.role_changed |= changed;
            return;
        }
        // An exclusive connection's holder changed it (perhaps inside a function the guard
        // cannot read): its release resets the session.
        if changed && self.exclusive {
            self.shared.session_changed.store(true, Relaxed);
        }
        // Backstop: on a shared connection nothing may change session parameters.
        if changed && !self.exclusive && self.leaked.is_none() {
            self.leaked = Some(Fault::ParameterChanged(name.to_owned()));
        }
    }

    fn fatal(&mut self, error: &DbError) {
        *self.fatal = Some(Box::new(error.clone()));
    }

    fn notice(&mut self, notice: DbError) {
        crate::observe::notice(&notice);
        // On an exclusive connection every statement is the holder's: its notices are too.
        // On a shared one a notice cannot be told apart from a neighbour's: logged only.
        if self.exclusive {
            let mut q = lock(&self.shared.notices);
            // The unit drawing it is the first unanswered one: no unit shares a Sync here.
            if self.shared.counters.ready_received.load(Relaxed) < q.from {
                return;
            }
            if q.items.len() >= NOTICE_BACKLOG {
                q.items.pop_front();
                q.dropped += 1;
            }
            q.items.push_back(notice);
        }
    }

    fn notification(&mut self, pid: i32, channel: &str, payload: &str) {
        let mut q = lock(&self.shared.notifications);
        if q.items.len() >= NOTIFICATION_BACKLOG {
            q.items.pop_front();
            q.dropped += 1;
        }
        q.items.push_back(Notification {
            process_id: pid,
            channel: channel.to_owned(),
            payload: payload.to_owned(),
        });
        if let Some(w) = q.waker.take() {
            self.wakes.push(w);
        }
    }
}
