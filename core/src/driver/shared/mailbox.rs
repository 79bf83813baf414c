//! The mailbox: callers encode units straight into the connection's shared buffer under its
//! lock, with FIFO backpressure (a full mailbox queues callers in order and grants freed slots
//! to them, so a newcomer cannot barge), and one wakeup of the task per burst.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use postgres_types::Type;

use super::{
    status_check, BatchUnit, ConnShared, Framing, QueryWaiter, Queued, State, Statement, Token,
};
use crate::proto::pipeline::Script;
use crate::proto::{encode, Frame, UnitKind};
use crate::sched::{lock, DeferredWakes};
use crate::Error;

/// CopyData messages (of `copy::CHUNK` bytes, 64 KiB) a COPY may have waiting in the mailbox.
/// COPY in produces faster than the server consumes, so without this cap it would fill the
/// whole mailbox (`mailbox_size` messages: 16 MiB at the default 256) and hold that much client
/// memory for the whole COPY. Four keep the connection's write buffer fed between two pumps.
pub(crate) const COPY_DATA_QUEUED: usize = 4;

impl ConnShared {
    /// Queues a simple-protocol unit without waiting (exclusive connections: resets and
    /// `batch_execute`, where one holder cannot overrun the mailbox by much).
    pub(crate) fn submit_simple_now(&self, sql: &str) -> Result<Arc<QueryWaiter>, Error> {
        self.submit_simple_framed(sql, &Framing::NONE)
            .map(|(w, _)| w)
    }

    /// [`ConnShared::submit_simple_now`] carrying `framing`'s pending BEGIN as the text's
    /// first statement; `true` with the waiter when it took the BEGIN.
    pub(crate) fn submit_simple_framed(
        &self,
        sql: &str,
        framing: &Framing<'_>,
    ) -> Result<(Arc<QueryWaiter>, bool), Error> {
        let mut wakes = DeferredWakes::default();
        let r = self.queue_simple(sql, framing, &mut wakes);
        wakes.wake_all();
        r
    }

    /// [`ConnShared::submit_simple_framed`], the task's wakeup deferred into `wakes` (for
    /// callers that hold another lock, the exclusive pool's).
    pub(crate) fn queue_simple(
        &self,
        sql: &str,
        framing: &Framing<'_>,
        wakes: &mut DeferredWakes,
    ) -> Result<(Arc<QueryWaiter>, bool), Error> {
        let waiter = Arc::new(QueryWaiter::new());
        let token = Token::Query(waiter.clone());
        let begun = self.queue_text(sql, framing, token, UnitKind::Simple, wakes)?;
        Ok((waiter, begun))
    }

    /// A simple-protocol text whose results are kept ([`UnitKind::SimpleRows`]), carrying
    /// `framing`'s pending BEGIN as its first statement: each statement's rows and count, in
    /// order, through the batch's waiter; `true` when it took the BEGIN.
    pub(crate) fn submit_simple_rows(
        &self,
        sql: &str,
        framing: &Framing<'_>,
    ) -> Result<(Arc<BatchUnit>, bool), Error> {
        let unit = Arc::new(BatchUnit::new(1));
        let token = Token::Batch(unit.clone());
        let mut wakes = DeferredWakes::default();
        let begun = self.queue_text(sql, framing, token, UnitKind::SimpleRows, &mut wakes);
        wakes.wake_all();
        Ok((unit, begun?))
    }

    /// Encodes a simple-protocol text (`kind`: [`UnitKind::Simple`] or
    /// [`UnitKind::SimpleRows`]) led by `framing`'s pending BEGIN, and queues it for `token`;
    /// whether it took the BEGIN.
    fn queue_text(
        &self,
        sql: &str,
        framing: &Framing<'_>,
        token: Token,
        kind: UnitKind,
        wakes: &mut DeferredWakes,
    ) -> Result<bool, Error> {
        let mut st = lock(&self.state);
        status_check(&st.status)?;
        let start = st.committed;
        st.buf.truncate(start);
        let begin = framing.take_begin();
        if let Err(e) = encode::simple_after(begin, sql, &mut st.buf) {
            framing.restore_begin(begin);
            return Err(e);
        }
        let frame = Frame {
            before: u8::from(begin.is_some()),
            after: 0,
        };
        if let Some(w) = self.push(&mut st, start, Queued::new(token, kind).framed(frame)) {
            wakes.push(w);
        }
        Ok(begin.is_some())
    }

    /// [`ConnShared::queue_status`], waking the task at once.
    pub(crate) fn submit_status_now(&self) -> Result<Arc<QueryWaiter>, Error> {
        let mut wakes = DeferredWakes::default();
        let r = self.queue_status(&mut wakes);
        wakes.wake_all();
        r
    }

    /// Queues a bare Sync without waiting (its wakeup deferred into `wakes`): its answer comes
    /// after every unit queued before it, and its ReadyForQuery says the transaction status
    /// they left (an exclusive connection released with work outstanding).
    pub(crate) fn queue_status(
        &self,
        wakes: &mut DeferredWakes,
    ) -> Result<Arc<QueryWaiter>, Error> {
        let mut st = lock(&self.state);
        status_check(&st.status)?;
        let start = st.committed;
        st.buf.truncate(start);
        encode::status(&mut st.buf);
        let waiter = Arc::new(QueryWaiter::new());
        let token = Token::Query(waiter.clone());
        if let Some(w) = self.push_locked(&mut st, start, token, UnitKind::Status, false) {
            wakes.push(w);
        }
        Ok(waiter)
    }

    /// Encodes an execute unit for `stmt` into the mailbox, waiting for room if it is full.
    pub(crate) async fn submit_execute(
        &self,
        stmt: &Arc<Statement>,
        params: encode::Params<'_>,
        framing: &Framing<'_>,
    ) -> Result<Arc<QueryWaiter>, Error> {
        self.with_room(self.mailbox_size, |st| {
            let start = st.committed;
            st.buf.truncate(start);
            let (frame, wire) = framing.take();
            let name = name_or_inline(stmt);
            let r =
                encode::execute_framed(name, &stmt.sql, stmt.params(), params, wire, &mut st.buf);
            if let Err(e) = r {
                framing.restore_begin(wire.before);
                return Err(e);
            }
            let waiter = Arc::new(QueryWaiter::new());
            let kind = UnitKind::Execute(stmt.columns().clone());
            let token = Token::Query(waiter.clone());
            let q = execution(token, kind, frame, stmt, name.is_empty());
            let waker = self.push(st, start, q);
            Ok((waiter, waker))
        })
        .await
        .map(wake_and_return)
    }

    /// Encodes an atomic batch into one unit: each prepared statement with its parameters,
    /// then one Sync, waiting for room.
    pub(crate) async fn submit_batch(
        &self,
        steps: &[(Arc<Statement>, encode::Params<'_>)],
    ) -> Result<Arc<BatchUnit>, Error> {
        self.with_room(self.mailbox_size, |st| {
            let start = st.committed;
            st.buf.truncate(start);
            let wire = steps
                .iter()
                .map(|(s, p)| (name_or_inline(s), &*s.sql, s.params(), *p));
            encode::batch(wire, &mut st.buf)?;
            let unit = Arc::new(BatchUnit::new(steps.len()));
            let shape: Arc<[_]> = steps.iter().map(|(s, _)| s.columns().clone()).collect();
            let mut q = Queued::new(Token::Batch(unit.clone()), UnitKind::Batch(shape));
            q.cost = steps.iter().map(|(s, _)| s.estimate_ns()).sum();
            let waker = self.push(st, start, q);
            Ok((unit, waker))
        })
        .await
        .map(wake_and_return)
    }

    /// Encodes a streaming execute unit for `stmt` (rows go to `sink` as they arrive), waiting
    /// for room.
    pub(crate) async fn submit_stream(
        &self,
        stmt: &Arc<Statement>,
        params: encode::Params<'_>,
        sink: &Arc<crate::driver::shared::sinks::RowSink>,
        framing: &Framing<'_>,
    ) -> Result<(), Error> {
        let r = self
            .with_room(self.mailbox_size, |st| {
                let start = st.committed;
                st.buf.truncate(start);
                let (frame, wire) = framing.take();
                let name = name_or_inline(stmt);
                let r = encode::execute_framed(
                    name,
                    &stmt.sql,
                    stmt.params(),
                    params,
                    wire,
                    &mut st.buf,
                );
                if let Err(e) = r {
                    framing.restore_begin(wire.before);
                    return Err(e);
                }
                let kind = UnitKind::Stream(stmt.columns().clone());
                let token = Token::Stream(sink.clone());
                let q = execution(token, kind, frame, stmt, name.is_empty());
                Ok(self.push(st, start, q))
            })
            .await?;
        if let Some(w) = r {
            w.wake();
        }
        Ok(())
    }

    /// Queues a COPY statement (simple protocol) as a unit of `kind`, waiting for room.
    pub(crate) async fn submit_copy(
        &self,
        sql: &str,
        kind: UnitKind,
        token: Token,
        framing: &Framing<'_>,
    ) -> Result<(), Error> {
        let mut token = Some(token);
        let waker = self
            .with_room(self.mailbox_size, |st| {
                let start = st.committed;
                st.buf.truncate(start);
                let begin = framing.take_begin();
                if let Err(e) = encode::simple_after(begin, sql, &mut st.buf) {
                    framing.restore_begin(begin);
                    return Err(e);
                }
                let token = token
                    .take()
                    .ok_or_else(|| Error::Protocol("COPY queued twice".into()))?;
                let frame = Frame {
                    before: u8::from(begin.is_some()),
                    after: 0,
                };
                Ok(self.push(st, start, Queued::new(token, kind.clone()).framed(frame)))
            })
            .await?;
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Queues COPY data (whole frontend messages) behind the COPY unit, waiting for room: at
    /// most [`COPY_DATA_QUEUED`] messages of it wait in the mailbox.
    pub(crate) async fn submit_data(&self, data: &[u8]) -> Result<(), Error> {
        let limit = self.mailbox_size.min(COPY_DATA_QUEUED);
        let waker = self
            .with_room(limit, |st| {
                let start = st.committed;
                st.buf.truncate(start);
                st.buf.extend_from_slice(data);
                Ok(self.push_locked(st, start, Token::Data, UnitKind::Data, false))
            })
            .await?;
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// [`ConnShared::submit_data`] without waiting for room (abandoning a COPY from `Drop`).
    pub(crate) fn submit_data_now(&self, data: &[u8]) {
        let mut st = lock(&self.state);
        if status_check(&st.status).is_err() {
            return;
        }
        let start = st.committed;
        st.buf.truncate(start);
        st.buf.extend_from_slice(data);
        let waker = self.push_locked(&mut st, start, Token::Data, UnitKind::Data, false);
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Encodes a typed unit into the mailbox (no statement cache), waiting for room.
    pub(crate) async fn submit_typed(
        &self,
        sql: &str,
        params: &[(&(dyn postgres_types::ToSql + Sync), Type)],
        framing: &Framing<'_>,
    ) -> Result<Arc<QueryWaiter>, Error> {
        self.with_room(self.mailbox_size, |st| {
            let start = st.committed;
            st.buf.truncate(start);
            let (frame, wire) = framing.take();
            if let Err(e) = encode::typed_framed(sql, params, wire, &mut st.buf) {
                framing.restore_begin(wire.before);
                return Err(e);
            }
            let waiter = Arc::new(QueryWaiter::new());
            let token = Token::Query(waiter.clone());
            let waker = self.push(st, start, Queued::new(token, UnitKind::Typed).framed(frame));
            Ok((waiter, waker))
        })
        .await
        .map(wake_and_return)
    }

    /// Runs `f` under the state lock once the mailbox has room for one more unit: fewer than
    /// `limit` (at most `mailbox_size`) units queued.
    ///
    /// Backpressure is FIFO: a caller that finds the mailbox full, or other callers already
    /// waiting, queues behind them; the task grants freed slots to waiters in order and
    /// reserves them, so a newcomer cannot take a slot from someone who waited for it.
    /// A `limit` under `mailbox_size` holds back only a caller that finds that many units
    /// queued; once it waits, it is granted its slot like any other waiter (when the task takes
    /// units), so it still adds at most one unit per pump that takes any.
    pub(super) async fn with_room<T>(
        &self,
        limit: usize,
        mut f: impl FnMut(&mut State) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut ticket: Option<Ticket<'_>> = None;
        loop {
            {
                let mut st = lock(&self.state);
                status_check(&st.status)?;
                let may_go = match &ticket {
                    Some(t) => t.slot.granted.load(Relaxed),
                    None => st.space_waiters.is_empty() && st.queue.len() + st.reserved < limit,
                };
                if may_go {
                    if let Some(t) = &mut ticket {
                        // Consume the reservation: the unit pushed below takes its place.
                        st.reserved -= 1;
                        t.consumed = true;
                    }
                    let r = f(&mut st);
                    // If `f` pushed nothing (bad input, evicted statement), the slot is free
                    // again: pass it on rather than wait for the next tick.
                    let mut wakes = DeferredWakes::default();
                    if !st.space_waiters.is_empty() {
                        self.grant_room(&mut st, &mut wakes);
                    }
                    drop(st);
                    wakes.wake_all();
                    return r;
                }
                ticket.get_or_insert_with(|| {
                    let slot = Arc::new(SpaceWaiter::default());
                    st.space_waiters.push_back(slot.clone());
                    Ticket {
                        conn: self,
                        slot,
                        consumed: false,
                    }
                });
            }
            let slot = ticket.as_ref().map(|t| t.slot.clone());
            if let Some(slot) = slot {
                futures_lite::future::poll_fn(|cx| slot.poll_granted(cx)).await;
            }
        }
    }

    /// Grants freed mailbox slots to waiting callers, oldest first (called by the task with the
    /// state lock held; the wakeups go to `wakes`, woken after the tick).
    pub(crate) fn grant_room(&self, st: &mut State, wakes: &mut DeferredWakes) {
        while st.queue.len() + st.reserved < self.mailbox_size {
            let Some(w) = st.space_waiters.pop_front() else {
                break;
            };
            st.reserved += 1;
            w.grant(wakes);
        }
    }

    /// Wakes every waiting caller so it sees a changed status (closing, dead).
    pub(crate) fn wake_waiters(&self, st: &mut State, wakes: &mut DeferredWakes) {
        for w in st.space_waiters.drain(..) {
            w.wake(wakes);
        }
    }

    /// Commits the unit encoded at `buf[start..]` to the mailbox. Returns the task's waker if
    /// this submission is the first since the task last looked (one wakeup per burst).
    pub(super) fn push_locked(
        &self,
        st: &mut State,
        start: usize,
        token: Token,
        kind: UnitKind,
        closes: bool,
    ) -> Option<Waker> {
        self.push(st, start, Queued::new(token, kind).closing(closes))
    }

    /// Commits unit `q`, encoded at `buf[start..]`, to the mailbox (see
    /// [`ConnShared::push_locked`]). An execution's estimate counts as pending work on this
    /// connection until it completes (cost-aware routing reads the sum).
    #[inline]
    pub(super) fn push(&self, st: &mut State, start: usize, mut q: Queued) -> Option<Waker> {
        q.len = st.buf.len() - start;
        st.committed = st.buf.len();
        self.counters.est_pending_ns.fetch_add(q.cost, Relaxed);
        if !matches!(q.kind, UnitKind::Data) {
            self.pushed.fetch_add(1, Relaxed);
        }
        st.queue.push_back(q);
        #[cfg(feature = "tracing")]
        crate::observe::record_server(st.server.as_ref());
        let q = self.counters.queued.fetch_add(1, Relaxed) + 1;
        self.counters.queued_peak.fetch_max(q, Relaxed);
        if st.wake_pending {
            None
        } else {
            st.wake_pending = true;
            st.task_waker.take()
        }
    }
}

/// The name a unit executes `stmt` under: its own, or, once evicted (by other texts prepared
/// since its lookup, in a cache smaller than the texts in use), none: the unit parses it again
/// unnamed, with the types it was prepared with. Preparing it anew instead could be evicted
/// again before its execution, by the same churn, forever.
fn name_or_inline(stmt: &Statement) -> &str {
    if stmt.is_live() {
        &stmt.name
    } else {
        ""
    }
}

fn wake_and_return<W>(r: (Arc<W>, Option<Waker>)) -> Arc<W> {
    if let Some(w) = r.1 {
        w.wake();
    }
    r.0
}

/// A caller waiting for mailbox room.
#[derive(Default)]
pub(crate) struct SpaceWaiter {
    granted: AtomicBool,
    woken: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl SpaceWaiter {
    fn grant(&self, wakes: &mut DeferredWakes) {
        self.granted.store(true, Relaxed);
        self.wake(wakes);
    }

    fn wake(&self, wakes: &mut DeferredWakes) {
        self.woken.store(true, Release);
        if let Some(w) = lock(&self.waker).take() {
            wakes.push(w);
        }
    }

    fn poll_granted(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.woken.swap(false, Acquire) {
            return std::task::Poll::Ready(());
        }
        *lock(&self.waker) = Some(cx.waker().clone());
        // Re-check: a wake between the swap and storing the waker must not be lost.
        if self.woken.swap(false, Acquire) {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

/// A caller's place in the backpressure queue. Dropping it (the caller gave up, or got its
/// slot) leaves the queue; an unused reservation passes to the next waiter.
struct Ticket<'a> {
    conn: &'a ConnShared,
    slot: Arc<SpaceWaiter>,
    consumed: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.consumed {
            return;
        }
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.conn.state);
            if self.slot.granted.load(Relaxed) {
                st.reserved -= 1;
                self.conn.grant_room(&mut st, &mut wakes);
            } else {
                st.space_waiters.retain(|w| !Arc::ptr_eq(w, &self.slot));
            }
        }
        wakes.wake_all();
    }
}

/// An execution of `stmt` (`parse`: unnamed, so it carries its own Parse) in `frame`, as its
/// encoder wrote it: the unit, with the answers it expects. Forced inline: on the hot path a
/// call cost the caller 11 instructions per unit (callgrind, `pgpipe-icount`).
#[inline(always)]
fn execution(
    token: Token,
    kind: UnitKind,
    frame: Frame,
    stmt: &Arc<Statement>,
    parse: bool,
) -> Queued {
    let (before, after) = (frame.before > 0, frame.after > 0);
    let script = Script::execution(parse, before, after).completing(stmt.completes, parse, before);
    Queued::new(token, kind)
        .framed(frame)
        .executing(stmt, script)
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use bytes::Buf;

    use super::*;
    use crate::driver::shared::{CostTable, Status};
    use crate::driver::types::TypeCache;

    fn open_conn() -> ConnShared {
        let c = ConnShared::new(
            256,
            16,
            Arc::new(CostTable::new(16, true, false)),
            Arc::new(TypeCache::default()),
            true,
        );
        c.set_status(&mut lock(&c.state), Status::Open);
        c
    }

    /// What the task's pump does with queued COPY data: takes it and grants freed room.
    fn pump_one(c: &ConnShared) {
        let mut st = lock(&c.state);
        let q = st.queue.pop_front().expect("a queued unit");
        st.buf.advance(q.len);
        st.committed -= q.len;
        let mut wakes = DeferredWakes::default();
        c.grant_room(&mut st, &mut wakes);
        drop(st);
        wakes.wake_all();
    }

    #[test]
    fn copy_data_waits_behind_a_few_queued_chunks_not_the_whole_mailbox() {
        let c = open_conn();
        let chunk = vec![b'd'; 64 * 1024];
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..COPY_DATA_QUEUED {
            let f = pin!(c.submit_data(&chunk));
            assert!(matches!(f.poll(&mut cx), Poll::Ready(Ok(()))));
        }
        // The mailbox has room for 252 more units, but not for more COPY data.
        let mut next = pin!(c.submit_data(&chunk));
        assert!(next.as_mut().poll(&mut cx).is_pending());
        assert_eq!(lock(&c.state).queue.len(), COPY_DATA_QUEUED);
        assert_eq!(lock(&c.state).buf.len(), COPY_DATA_QUEUED * chunk.len());
        // Once the task takes a chunk, the waiting one goes in.
        pump_one(&c);
        assert!(matches!(next.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(lock(&c.state).queue.len(), COPY_DATA_QUEUED);
    }
}
