//! The connection and client behind every exclusive handle: the pending BEGIN, the order of
//! the holder's statements, a dropped transaction's settling, and the statements themselves.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use postgres_types::ToSql;

use crate::driver::shared::{Framing, Order, PendingBegin, QueryResult, Ticket};
use crate::exclusive::Held;
use crate::rt::Runtime;
use crate::{Client, Error};

/// The connection and client behind every exclusive handle.
pub(super) struct Exclusive<R: Runtime> {
    pub(super) client: Client<R>,
    /// The connection held: replaced only when the holder's first statement found it dead
    /// before anything of the holder went out ([`Exclusive::moved_after_never_sent`]).
    held: Mutex<Arc<Held>>,
    /// Checked out for a transaction (`Client::transaction`), not a session.
    for_tx: bool,
    /// The transaction's BEGIN while it has not gone out (the next unit takes it).
    pub(super) begin: PendingBegin,
    /// A session's transaction was dropped while units of it were unanswered: whether it
    /// must be rolled back is decided from the server's status before the next statement.
    pub(super) settle: AtomicBool,
    /// The connection came with the previous holder's COMMIT still unanswered
    /// (`exclusive.rs`): until the first unit of this holder is answered, its failing with
    /// 25P02 means that transaction failed before its COMMIT, and the unit is sent again
    /// after a ROLLBACK.
    pub(super) early: AtomicBool,
    /// The holder's statements, in the order they started: their units are queued in it.
    pub(super) order: Order,
    /// Portals opened so far (each one's cursor is named by its number).
    pub(super) portals: AtomicU32,
}

impl<R: Runtime> Exclusive<R> {
    pub(super) fn new(client: Client<R>, held: Held, for_tx: bool) -> Self {
        let early = AtomicBool::new(held.early);
        Exclusive {
            client,
            held: Mutex::new(Arc::new(held)),
            for_tx,
            begin: PendingBegin::default(),
            settle: AtomicBool::new(false),
            early,
            order: Order::default(),
            portals: AtomicU32::new(0),
        }
    }

    /// The connection held now.
    pub(super) fn held(&self) -> Arc<Held> {
        crate::sched::lock(&self.held).clone()
    }

    /// Whether `r`, the result of the holder's first statement (`turn`, the only one it has
    /// started), says its connection died before the unit went out (a server shutting down
    /// terminated it between the checkout and the statement): then nothing of the holder ran,
    /// and, as a shared unit goes to another connection, the holder moves to a connection
    /// checked out again (its BEGIN armed again) for the unit to be sent there, the dead one
    /// released first. A later statement, or one beside others, fails as it is; so does the
    /// first when the checkout fails (with the checkout's error).
    pub(super) async fn moved_after_never_sent<T>(
        &self,
        r: &Result<T, Error>,
        turn: &Ticket<'_>,
    ) -> Result<bool, Error> {
        // Not whether the connection still says it is open: the unit's failure can reach its
        // caller before the connection's task has marked it dead.
        if !matches!(r, Err(Error::NotDispatched { .. })) || !turn.first_and_only() {
            return Ok(false);
        }
        self.held().release_unused();
        let held = self.client.checkout(self.for_tx).await?;
        self.early.store(held.early, Relaxed);
        *crate::sched::lock(&self.held) = Arc::new(held);
        if self.for_tx {
            self.begin.arm();
        }
        Ok(true)
    }

    /// Whether `r`, a unit's result while the connection came early (before this holder's
    /// first answer), failed only because the previous holder's transaction had failed: then
    /// that transaction is rolled back (and this holder's BEGIN armed again) so the unit can be
    /// sent again. Only the unit that carried (or would have carried) the BEGIN is sent again:
    /// another one, concurrent with it, fails as it is. Any other answer ends the early state.
    pub(super) async fn failed_behind_previous<T>(
        &self,
        r: &Result<T, Error>,
    ) -> Result<bool, Error> {
        if !self.early.load(Relaxed) {
            return Ok(false);
        }
        let carried_begin = match r {
            Err(e) if e.code() == Some(&crate::SqlState::IN_FAILED_SQL_TRANSACTION) => {
                matches!(e, Error::BeginFailed(_)) || self.begin.is_pending()
            }
            _ => {
                self.early.store(false, Relaxed);
                return Ok(false);
            }
        };
        if !carried_begin || !self.early.swap(false, Relaxed) {
            return Ok(false);
        }
        self.end_dropped_transaction().await?;
        if matches!(r, Err(Error::BeginFailed(_))) {
            self.begin.arm();
        }
        Ok(true)
    }

    /// After a unit whose caller stopped waiting (`query_timeout`): its statement alone is
    /// cancelled (bounded, `driver/cancel.rs`), so what follows it on the connection does not
    /// wait for as long as it runs: the holder's next statements, or, after a unit that ended
    /// the transaction and handed the connection on, the next holder's. `unit` is its queue
    /// position (the connection's units pushed with it; 0: never queued). The signal goes only
    /// while nothing after it is on the wire, so it reaches no other statement.
    pub(super) fn cancel_if_abandoned<T>(&self, r: &Result<T, Error>, unit: u64) {
        if matches!(r, Err(Error::Timeout)) && unit > 0 {
            let mut wakes = crate::sched::DeferredWakes::default();
            self.held().conn.request_cancel(unit - 1, unit, &mut wakes);
            wakes.wake_all();
        }
    }

    /// Waits, within the deadline, until the holder's statements issued before `turn`'s have
    /// queued their units (`driver/shared/order.rs`).
    pub(super) async fn wait_turn(&self, turn: &Ticket<'_>) -> Result<(), Error> {
        let wait = async {
            turn.wait().await;
            Ok(())
        };
        crate::rt::with_deadline(self.client.runtime(), self.client.deadline(), wait).await
    }

    /// Before a unit that is not sent again after a failure (streams, COPY, typed): a
    /// connection that came early first waits for the previous holder's end.
    pub(super) async fn settle_early(&self) -> Result<(), Error> {
        if self.early.swap(false, Relaxed) {
            self.end_dropped_transaction().await?;
        }
        Ok(())
    }

    /// What the next unit carries: the pending BEGIN, and the statement's turn.
    pub(super) fn framing<'a>(&'a self, turn: &'a Ticket<'a>) -> Framing<'a> {
        Framing {
            begin: Some(&self.begin),
            commit: false,
            queued: None,
            turn: Some(turn),
        }
    }

    /// Before a statement of the holder's: its release-time bookkeeping (see
    /// [`Client::note_statement`]) and any rollback a dropped transaction left undecided.
    pub(super) async fn prepare_for(&self, sql: &str) -> Result<(), Error> {
        self.client.note_statement(&self.held().conn, sql);
        if self.settle.swap(false, Relaxed) {
            self.end_dropped_transaction().await?;
        }
        Ok(())
    }

    /// Rolls back the transaction a dropped [`Savepoint`] left, if the server says one is open
    /// once every earlier unit is answered (a bare Sync tells).
    pub(super) async fn end_dropped_transaction(&self) -> Result<(), Error> {
        let held = self.held();
        let conn = &held.conn;
        loop {
            match conn.settled_tx_status() {
                Some(b'I') => return Ok(()),
                Some(_) => {
                    let w = conn.submit_simple_now("ROLLBACK")?;
                    return self.client.wait_for(None, &w).await.map(|_| ());
                }
                None => {
                    let w = conn.submit_status_now()?;
                    self.client.wait_for(None, &w).await?;
                }
            }
        }
    }

    /// Runs a statement; with `commit`, the COMMIT rides in its unit, and the connection goes
    /// to the next holder as soon as that unit is queued.
    pub(super) async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        commit: bool,
    ) -> Result<QueryResult, Error> {
        let turn = self.order.ticket();
        let op = async {
            crate::proto::encode::check_input(sql, params.len())?;
            self.prepare_for(sql).await?;
            let (held, early) = (&self.held, &self.early);
            let release = || {
                // Not while this unit may still have to be sent again (see `early`).
                if !early.load(Relaxed) {
                    let held = crate::sched::lock(held).clone();
                    held.release_with_commit();
                }
            };
            let framing = Framing {
                begin: Some(&self.begin),
                commit,
                queued: commit.then_some(&release as &(dyn Fn() + Sync)),
                turn: Some(&turn),
            };
            loop {
                let deadline = self.client.deadline();
                let r = self
                    .client
                    .run_on(&self.held().conn, sql, params, deadline, &framing)
                    .await;
                if self.moved_after_never_sent(&r, &turn).await? {
                    continue;
                }
                if !self.failed_behind_previous(&r).await? {
                    self.cancel_if_abandoned(&r, turn.queued_at());
                    return r;
                }
            }
        };
        self.client.observed(sql, op).await
    }

    /// The holder's own simple-protocol text.
    pub(super) async fn simple(&self, sql: &str) -> Result<QueryResult, Error> {
        let turn = self.order.ticket();
        self.prepare_for(sql).await?;
        self.control_in_turn(sql, false, &turn).await
    }

    /// A simple-protocol text of pgpipe's own (COMMIT, SAVEPOINT, ...), or the holder's once
    /// noted; a pending BEGIN leads it, in the same text.
    pub(super) async fn control(&self, sql: &str) -> Result<QueryResult, Error> {
        self.control_ending(sql, false).await
    }

    /// The holder's simple-protocol text with its results kept: every statement's rows (as
    /// text) and count, in order. Not sent again after a failure, so a connection that came
    /// early first waits for the previous holder's end.
    pub(super) async fn simple_rows(
        &self,
        sql: &str,
    ) -> Result<Vec<crate::SimpleQueryMessage>, Error> {
        let turn = self.order.ticket();
        self.prepare_for(sql).await?;
        // In turn first: the settling may roll back, which must not overtake earlier units.
        self.wait_turn(&turn).await?;
        self.settle_early().await?;
        let framing = self.framing(&turn);
        let op = async {
            let deadline = self.client.deadline();
            let rt = self.client.runtime();
            crate::rt::with_deadline(rt, deadline, framing.my_turn_or_error()).await?;
            let (r, begun, at) = self
                .client
                .simple_rows_on(&self.held().conn, sql, deadline, &framing)
                .await;
            let r = match r {
                Err(Error::Db(mut e)) if begun => {
                    let shift = crate::proto::encode::simple_prefix_chars(self.begin.text());
                    e.position = e.position.map(|p| p.saturating_sub(shift as u32));
                    Err(Error::Db(e))
                }
                r => r,
            };
            self.cancel_if_abandoned(&r, at);
            r
        };
        self.client.observed(sql, op).await
    }

    /// [`Exclusive::control`]; `ends`: the text ends the holder's transaction whatever
    /// happens (COMMIT, ROLLBACK of a [`Transaction`]), so the connection goes to the next
    /// holder as soon as it is queued.
    pub(super) async fn control_ending(&self, sql: &str, ends: bool) -> Result<QueryResult, Error> {
        let turn = self.order.ticket();
        self.control_in_turn(sql, ends, &turn).await
    }

    /// [`Exclusive::control_ending`] for a statement that took its `turn` already.
    pub(super) async fn control_in_turn(
        &self,
        sql: &str,
        ends: bool,
        turn: &Ticket<'_>,
    ) -> Result<QueryResult, Error> {
        let framing = self.framing(turn);
        let op = async {
            let deadline = self.client.deadline();
            let in_turn = framing.my_turn_or_error();
            crate::rt::with_deadline(self.client.runtime(), deadline, in_turn).await?;
            loop {
                let held = self.held();
                let (w, begun) = match held.conn.submit_simple_framed(sql, &framing) {
                    Ok(queued) => queued,
                    Err(e) => {
                        let r = Err(e);
                        if !ends && self.moved_after_never_sent(&r, turn).await? {
                            continue;
                        }
                        return r;
                    }
                };
                framing.was_queued(&held.conn);
                let unit = held.conn.units_pushed();
                // Not while this unit may still have to be sent again (see `early`).
                if ends && !self.early.load(Relaxed) {
                    held.release_with_commit();
                }
                let deadline: Option<Instant> = self.client.deadline();
                let r = match self.client.wait_for(deadline, &w).await {
                    // The server counts the position in the whole text, BEGIN included.
                    Err(Error::Db(mut e)) if begun => {
                        let shift =
                            crate::proto::encode::simple_prefix_chars(self.begin.text()) as u32;
                        e.position = e.position.map(|p| p.saturating_sub(shift));
                        Err(Error::Db(e))
                    }
                    r => r,
                };
                if !ends && self.moved_after_never_sent(&r, turn).await? {
                    continue;
                }
                if !self.failed_behind_previous(&r).await? {
                    self.cancel_if_abandoned(&r, unit);
                    return r;
                }
            }
        };
        self.client.observed(sql, op).await
    }
}
