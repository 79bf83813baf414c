//! Exclusive connections: sessions and transactions.
//!
//! Statements that change session state (SET, LISTEN, temp tables, session advisory locks) and
//! transactions must not share a connection. Exclusive connections are opened on demand and
//! handed out one holder at a time:
//! - **In arrival order.** A checkout that finds none free queues; a released connection goes
//!   straight to the oldest waiter, so a caller that releases and asks again queues behind
//!   everyone already waiting. Idle connections are reused most recently released first, so
//!   under a light load the same few stay warm and the rest retire.
//! - **Within one budget.** Beyond the `pipeline_size` base connections, exclusive connections
//!   share `max_connections` with the shared path's lanes and overflow: `pinned_size` of it
//!   (the reserve) is always theirs, and they may use whatever lanes and overflow leave.
//!   Lanes never take the reserve. An idle exclusive connection closes after `idle_timeout`.
//! - **Released exactly.** What a release sends is decided from the server's own answer, the
//!   transaction status of the last ReadyForQuery, once every unit of the holder has been
//!   answered: `ROLLBACK` only if a transaction is open, and the session
//!   [`RESET`](handover::RESET) only if the holder ran something that could change session
//!   state ([`Handover`]). A connection whose holder left units outstanding gets a bare Sync
//!   first, whose answer says the status.
//! - **Handed on with the COMMIT.** A transaction whose last statement carries its COMMIT
//!   releases the connection as soon as that unit is queued: the next transaction's first
//!   unit follows it in the same pipeline instead of waiting a round trip for its answer.
//!   That unit ends the transaction whatever happens (committed, or failed before the COMMIT
//!   and left aborted); in the second case the next transaction's BEGIN fails before anything
//!   of it ran, and it is sent again after a ROLLBACK (`session/exclusive.rs`). A session, which has no
//!   BEGIN to fail first, waits for the answer instead.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::driver::shared::ConnShared;
use crate::sched::{lock, DeferredWakes, Waiter};
use crate::stats::ExclusiveCounters;
use crate::Error;

use cancel_token::cancel_unanswered;
use handover::{released, Handover};

mod cancel_token;
mod handover;

pub use cancel_token::CancelToken;

pub(crate) use handover::finish_handover;

/// The pool of exclusive connections.
pub(crate) struct Pinned {
    /// Exclusive connections that may always be open (`pinned_size`).
    reserve: usize,
    /// Connections beyond the base ones, shared with lanes and overflow.
    budget: usize,
    /// The client's lane and overflow slots (they count against `budget`).
    on_demand: Vec<Arc<ConnShared>>,
    /// Reset every released connection, whatever its holder ran (`release_reset=always`).
    always_reset: bool,
    state: Mutex<PinnedState>,
    pub(crate) counters: ExclusiveCounters,
}

/// A connection just released, parked until the next checkout takes it.
struct Idle {
    conn: Arc<ConnShared>,
    handover: Handover,
}

struct Holder {
    id: u64,
    conn: Arc<ConnShared>,
    /// The waker of the task that checked it out (to recognize a checkout by a task that
    /// already holds one).
    task: Waker,
    since: Instant,
    /// The connection's units pushed when the holder got it.
    pushed_at: u64,
}

impl Holder {
    /// Counts the units the holder sent.
    fn done(&self, n: &ExclusiveCounters) {
        let units = self.conn.units_pushed().saturating_sub(self.pushed_at);
        n.units.fetch_add(units, Relaxed);
    }
}

#[derive(Default)]
struct PinnedState {
    /// Most recently released last.
    idle: Vec<Idle>,
    /// Slots granted to checkouts that are opening a connection (not yet registered).
    opening: usize,
    /// Every exclusive connection whose task has not ended: idle, held or closing (a closing
    /// one still holds a server backend, so it still counts against the budget).
    conns: Vec<Arc<ConnShared>>,
    holders: Vec<Holder>,
    /// Checkouts waiting, oldest first.
    queue: VecDeque<Arc<Ticket>>,
    next_id: u64,
    closing: bool,
}

/// What a checkout gets.
pub(crate) enum Grant {
    /// Use this connection once its handover is done.
    Conn(Arc<ConnShared>, Handover),
    /// Open a new connection (a slot is reserved for it).
    Open,
    /// The service is closing.
    Closed,
}

type Ticket = Waiter<Grant>;

impl Pinned {
    pub(crate) fn new(
        reserve: usize,
        budget: usize,
        on_demand: Vec<Arc<ConnShared>>,
        always_reset: bool,
    ) -> Pinned {
        Pinned {
            reserve,
            budget,
            on_demand,
            always_reset,
            state: Mutex::new(PinnedState::default()),
            counters: ExclusiveCounters::default(),
        }
    }

    /// Lane and overflow connections open or opening.
    fn on_demand_open(&self) -> usize {
        self.on_demand.iter().filter(|c| !c.has_exited()).count()
    }

    /// Exclusive connections that may be open now: the reserve, or what lanes and overflow
    /// leave of the budget.
    fn limit(&self) -> usize {
        self.reserve
            .max(self.budget.saturating_sub(self.on_demand_open()))
    }

    /// Whether the budget has room for one more lane or overflow connection (a hint: the
    /// decision is [`Pinned::admit_on_demand`]'s).
    pub(crate) fn on_demand_room(&self) -> bool {
        let open = lock(&self.state).open();
        self.on_demand_open() + open.max(self.reserve) < self.budget
    }

    /// Lets a lane or overflow connection open (`claim` reserves its slot) if that leaves
    /// the exclusive reserve free; under the pool's lock, so the two never overdraw the budget.
    pub(crate) fn admit_on_demand<T>(&self, claim: impl FnOnce() -> Option<T>) -> Option<T> {
        let mut st = lock(&self.state);
        prune(&mut st);
        if self.on_demand_open() + st.open().max(self.reserve) >= self.budget {
            return None;
        }
        claim()
    }

    /// A checkout: an idle connection, a slot to open one, or (when every connection the budget
    /// allows is held) a place in the queue, served in arrival order. Refuses a checkout that
    /// would wait for a connection held by the calling task itself.
    pub(crate) async fn acquire(&self, me: &Waker) -> Result<Grant, Error> {
        let ticket = {
            let mut st = lock(&self.state);
            if st.closing {
                return Err(Error::Closed);
            }
            prune(&mut st);
            if st.queue.is_empty() {
                if let Some(g) = self.take_idle_or_slot(&mut st) {
                    return Ok(g);
                }
            }
            if st.holders.iter().any(|h| h.task.will_wake(me)) {
                return Err(Error::RecursiveCheckout);
            }
            let t = Arc::new(Ticket::new());
            st.queue.push_back(t.clone());
            self.counters.inc(&self.counters.queued);
            t
        };
        let mut place = Place {
            pinned: self,
            ticket,
            done: false,
        };
        let grant = futures_lite::future::poll_fn(|cx| place.ticket.poll_block(cx)).await;
        place.done = true;
        match grant {
            Grant::Closed => Err(Error::Closed),
            g => Ok(g),
        }
    }

    /// The most recently released idle connection, or a slot if the budget has room.
    fn take_idle_or_slot(&self, st: &mut PinnedState) -> Option<Grant> {
        while let Some(idle) = st.idle.pop() {
            if idle.conn.unpool() {
                return Some(Grant::Conn(idle.conn, idle.handover));
            }
            // It retired (or died) while idle; it counts until its task ends.
        }
        if st.open() < self.limit() {
            st.opening += 1;
            self.counters.inc(&self.counters.opened);
            return Some(Grant::Open);
        }
        None
    }

    /// Serves waiting checkouts, oldest first, while there are idle connections or room to
    /// open one (a connection closed, or lanes gave budget back).
    fn dispatch(&self, st: &mut PinnedState, wakes: &mut DeferredWakes) {
        prune(st);
        while !st.queue.is_empty() {
            let Some(g) = self.take_idle_or_slot(st) else {
                break;
            };
            if let Some(t) = st.queue.pop_front() {
                t.unblock(g, wakes);
            }
        }
    }

    /// Budget may have come free (a lane, overflow or exclusive connection ended): serve the
    /// queue. Called when such a connection's task exits.
    pub(crate) fn budget_freed(&self) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            if !st.closing {
                self.dispatch(&mut st, &mut wakes);
            }
        }
        wakes.wake_all();
    }

    /// A checkout given a slot ([`Grant::Open`]) started `conn` in it.
    pub(crate) fn register(&self, conn: &Arc<ConnShared>) {
        let mut st = lock(&self.state);
        st.opening -= 1;
        st.conns.push(conn.clone());
    }

    /// A claimed connection could not be used (its reset or opening failed; it is closing,
    /// and counts until its task ends): serve the queue meanwhile.
    pub(crate) fn forfeit(&self) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            self.dispatch(&mut st, &mut wakes);
        }
        wakes.wake_all();
    }

    /// Records a holder; returns its id for [`Pinned::release`].
    pub(crate) fn hold(&self, conn: Arc<ConnShared>, me: Waker, now: Instant) -> u64 {
        self.counters.inc(&self.counters.checkouts);
        let mut st = lock(&self.state);
        st.next_id += 1;
        let id = st.next_id;
        st.holders.push(Holder {
            id,
            pushed_at: conn.units_pushed(),
            conn,
            task: me,
            since: now,
        });
        id
    }

    /// The error for a checkout that waited `waited` (at `now`).
    pub(crate) fn timed_out(&self, waited: Duration, now: Instant) -> Error {
        let mut st = lock(&self.state);
        let e = Error::CheckoutTimeout {
            waited,
            held: st.holders.len(),
            open: st.open(),
            limit: self.limit(),
            waiting: st.queue.len(),
            longest_held: st
                .holders
                .iter()
                .map(|h| now.saturating_duration_since(h.since))
                .max(),
        };
        crate::observe::checkout_timed_out(&e);
        e
    }

    /// Returns a held connection: queues what its release needs and hands it to the oldest
    /// waiting checkout (or parks it idle), or closes it if it is dead or the service is
    /// closing.
    pub(crate) fn release(&self, id: u64, conn: &Arc<ConnShared>) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            let mut since = 0;
            if let Some(i) = st.holders.iter().position(|h| h.id == id) {
                let h = st.holders.swap_remove(i);
                h.done(&self.counters);
                since = h.pushed_at;
            }
            // Statements of this holder still running belong to nobody now: the connection
            // task cancels them (once the units queued before this holder got the connection,
            // a previous holder's COMMIT, are answered), and closes the connection if they
            // outlive the bound (`driver/cancel.rs`).
            cancel_unanswered(conn, since, &mut wakes);
            let handover = if conn.is_open() && !st.closing {
                released(conn, self.always_reset, &self.counters, &mut wakes)
            } else {
                None
            };
            match handover {
                Some(handover) => self.give(&mut st, conn.clone(), handover, &mut wakes),
                None => {
                    // It counts until its task ends (`budget_freed`).
                    conn.begin_close_into(&mut wakes);
                    self.dispatch(&mut st, &mut wakes);
                }
            }
        }
        wakes.wake_all();
    }

    /// Cancels what holder `id` has unanswered on `conn` ([`CancelToken::cancel`]), if it still
    /// holds it: decided under the lock its release takes, so no later holder's unit is ever in
    /// the range.
    pub(crate) fn cancel_holder(&self, id: u64, conn: &Arc<ConnShared>) -> bool {
        let mut wakes = DeferredWakes::default();
        let asked = {
            let st = lock(&self.state);
            st.holders
                .iter()
                .find(|h| h.id == id && Arc::ptr_eq(&h.conn, conn))
                .is_some_and(|h| cancel_unanswered(conn, h.pushed_at, &mut wakes))
        };
        wakes.wake_all();
        asked
    }

    /// Releases a held connection whose holder just queued its transaction's last unit (with
    /// the COMMIT) and has nothing else unanswered: the next holder may queue its own units
    /// behind it at once (see the module docs). `false` (nothing done: the holder's drop
    /// releases it as usual) if the session may have changed, other units are outstanding, or
    /// the connection is going away.
    pub(crate) fn release_with_commit(&self, id: u64, conn: &Arc<ConnShared>) -> bool {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            let ready = conn.is_open()
                && !st.closing
                && !self.always_reset
                && !conn.session_changed.load(Relaxed)
                && conn.units_unanswered() == 1;
            let Some(i) = st.holders.iter().position(|h| h.id == id).filter(|_| ready) else {
                return false;
            };
            st.holders.swap_remove(i).done(&self.counters);
            self.counters.inc(&self.counters.early_handovers);
            let handover = Handover {
                early: true,
                ..Handover::default()
            };
            self.give(&mut st, conn.clone(), handover, &mut wakes);
        }
        wakes.wake_all();
        true
    }

    /// A usable connection goes to the oldest waiter, or parks idle.
    fn give(
        &self,
        st: &mut PinnedState,
        conn: Arc<ConnShared>,
        handover: Handover,
        wakes: &mut DeferredWakes,
    ) {
        if st.closing {
            // A grant handed back after `close()` (its checkout gave up): nobody takes it now.
            conn.begin_close_into(wakes);
            return;
        }
        match st.queue.pop_front() {
            Some(t) => t.unblock(Grant::Conn(conn, handover), wakes),
            None => {
                // Its task retires it after `idle_timeout` unused.
                conn.pool_idle(wakes);
                st.idle.push(Idle { conn, handover });
            }
        }
    }

    /// Stops handing out connections and closes the idle ones. Returns every connection that
    /// was open, for waiting on (held ones close when released).
    pub(crate) fn close(&self) -> Vec<Arc<ConnShared>> {
        let mut wakes = DeferredWakes::default();
        let idle: Vec<_> = {
            let mut st = lock(&self.state);
            st.closing = true;
            let idle: Vec<_> = st.idle.drain(..).map(|i| i.conn).collect();
            for t in st.queue.drain(..) {
                t.unblock(Grant::Closed, &mut wakes);
            }
            idle
        };
        wakes.wake_all();
        for c in &idle {
            c.begin_close();
        }
        idle
    }

    /// Fails all work on every exclusive connection, idle or held.
    pub(crate) fn abort(&self) {
        let mut wakes = DeferredWakes::default();
        let all: Vec<_> = {
            let mut st = lock(&self.state);
            st.closing = true;
            let mut all: Vec<_> = st.idle.drain(..).map(|i| i.conn).collect();
            all.extend(st.holders.iter().map(|h| h.conn.clone()));
            for t in st.queue.drain(..) {
                t.unblock(Grant::Closed, &mut wakes);
            }
            all
        };
        wakes.wake_all();
        for c in &all {
            c.abort();
        }
    }

    /// Exclusive connections open (idle or held) and held.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let mut st = lock(&self.state);
        (st.open(), st.holders.len())
    }

    /// Checkouts waiting for an exclusive connection.
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// The statistics of exclusive connections.
    pub(crate) fn stats(&self) -> crate::stats::ExclusiveStats {
        let mut st = lock(&self.state);
        let open = st.open();
        self.counters
            .snapshot(open, st.holders.len(), st.queue.len())
    }
}

/// Forgets idle connections that retired or died while parked.
fn prune(st: &mut PinnedState) {
    st.idle.retain(|i| i.conn.is_open());
}

impl PinnedState {
    /// Exclusive connections open, opening or still closing (their tasks not ended).
    fn open(&mut self) -> usize {
        self.conns.retain(|c| !c.has_exited());
        self.opening + self.conns.len()
    }
}

/// A checkout's place in the queue. Dropped before its grant is taken (the caller gave up:
/// `checkout_timeout`, or its future was dropped), it leaves the queue, and a grant that
/// reached it meanwhile goes on to the next waiter.
struct Place<'a> {
    pinned: &'a Pinned,
    ticket: Arc<Ticket>,
    done: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut wakes = DeferredWakes::default();
        {
            let p = self.pinned;
            let mut st = lock(&p.state);
            st.queue.retain(|t| !Arc::ptr_eq(t, &self.ticket));
            match self.ticket.take() {
                Some(Grant::Conn(conn, handover)) => p.give(&mut st, conn, handover, &mut wakes),
                Some(Grant::Open) => {
                    st.opening -= 1;
                    p.dispatch(&mut st, &mut wakes);
                }
                Some(Grant::Closed) | None => {}
            }
        }
        wakes.wake_all();
    }
}
/// A checked-out exclusive connection; returned to the pool when dropped (or, for a
/// transaction, once its last unit is queued: [`Held::release_with_commit`]).
pub(crate) struct Held {
    pub(crate) conn: Arc<ConnShared>,
    pub(crate) pinned: Arc<Pinned>,
    pub(crate) id: u64,
    /// Handed on before the previous holder's last unit was answered.
    pub(crate) early: bool,
    released: std::sync::atomic::AtomicBool,
}

impl Held {
    pub(crate) fn new(conn: Arc<ConnShared>, pinned: Arc<Pinned>, id: u64, early: bool) -> Held {
        Held {
            conn,
            pinned,
            id,
            early,
            released: Default::default(),
        }
    }

    /// A token that cancels what this holder runs, while it holds the connection.
    pub(crate) fn cancel_token(&self) -> CancelToken {
        CancelToken::new(&self.pinned, &self.conn, self.id)
    }

    /// The holder queued its transaction's last unit: hand the connection on now if that is
    /// safe (see [`Pinned::release_with_commit`]); nothing may be sent on it after this.
    pub(crate) fn release_with_commit(&self) {
        if !self.released.load(Relaxed) && self.pinned.release_with_commit(self.id, &self.conn) {
            self.released.store(true, Relaxed);
        }
    }
}

impl Held {
    /// Gives the connection back now, before the holder is dropped: nothing of the holder went
    /// out on it (its first unit failed never sent), and the holder checks out another (a
    /// checkout while it still held this one would count as waiting for itself).
    pub(crate) fn release_unused(&self) {
        if !self.released.swap(true, Relaxed) {
            self.pinned.release(self.id, &self.conn);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.released.load(Relaxed) {
            self.pinned.release(self.id, &self.conn);
        }
    }
}
