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
//!   answered: `ROLLBACK` only if a transaction is open, and the session [`RESET`] only if the
//!   holder ran something that could change session state ([`Handover`]). A connection whose
//!   holder left units outstanding gets a bare Sync first, whose answer says the status.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::driver::shared::{ConnShared, QueryWaiter};
use crate::sched::{lock, DeferredWakes, Waiter};
use crate::stats::ExclusiveCounters;
use crate::Error;

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

#[derive(Default)]
struct PinnedState {
    /// Most recently released last.
    idle: Vec<Idle>,
    /// Connections open or being opened, idle or held.
    open: usize,
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

/// What the next holder of a released connection must see done before using it.
#[derive(Default)]
pub(crate) struct Handover {
    /// Units queued at release whose success comes first (a reset, a status probe): any
    /// failure means the connection is replaced.
    wait: Vec<Arc<QueryWaiter>>,
    /// `wait` ends with a status probe; once it is answered, the rest of the release is
    /// decided from the status it reports.
    probe: bool,
    /// The holder may have changed session state: reset before reuse.
    changed: bool,
}

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
        let open = lock(&self.state).open;
        self.on_demand_open() + open.max(self.reserve) < self.budget
    }

    /// Lets a lane or overflow connection open (`claim` reserves its slot) if that leaves
    /// the exclusive reserve free; under the pool's lock, so the two never overdraw the budget.
    pub(crate) fn admit_on_demand<T>(&self, claim: impl FnOnce() -> Option<T>) -> Option<T> {
        let mut st = lock(&self.state);
        prune(&mut st);
        if self.on_demand_open() + st.open.max(self.reserve) >= self.budget {
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
            // It retired (or died) while idle.
            st.open -= 1;
        }
        if st.open < self.limit() {
            st.open += 1;
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

    /// Gives back a reserved slot whose connection could not be used.
    pub(crate) fn forfeit(&self) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            st.open -= 1;
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
        let st = lock(&self.state);
        let e = Error::CheckoutTimeout {
            waited,
            held: st.holders.len(),
            open: st.open,
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
            if let Some(i) = st.holders.iter().position(|h| h.id == id) {
                let h = st.holders.swap_remove(i);
                let units = conn.units_pushed().saturating_sub(h.pushed_at);
                self.counters.units.fetch_add(units, Relaxed);
            }
            // Statements still running belong to nobody now: the connection task cancels
            // them, and closes the connection if they outlive the bound (`driver/cancel.rs`).
            if conn.counters.in_flight.load(Relaxed) > 0 {
                conn.cancel_abandoned.store(true, Relaxed);
            }
            let handover = if conn.is_open() && !st.closing {
                released(conn, self.always_reset, &self.counters)
            } else {
                None
            };
            match handover {
                Some(handover) => self.give(&mut st, conn.clone(), handover, &mut wakes),
                None => {
                    conn.begin_close();
                    st.open -= 1;
                    self.dispatch(&mut st, &mut wakes);
                }
            }
        }
        wakes.wake_all();
    }

    /// A usable connection goes to the oldest waiter, or parks idle.
    fn give(
        &self,
        st: &mut PinnedState,
        conn: Arc<ConnShared>,
        handover: Handover,
        wakes: &mut DeferredWakes,
    ) {
        match st.queue.pop_front() {
            Some(t) => t.unblock(Grant::Conn(conn, handover), wakes),
            None => {
                // Its task retires it after `idle_timeout` unused.
                conn.pool_idle();
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
            st.open -= idle.len();
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
            st.open -= all.len();
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
        prune(&mut st);
        (st.open, st.holders.len())
    }

    /// Checkouts waiting for an exclusive connection.
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// The statistics of exclusive connections.
    pub(crate) fn stats(&self) -> crate::stats::ExclusiveStats {
        let mut st = lock(&self.state);
        prune(&mut st);
        self.counters
            .snapshot(st.open, st.holders.len(), st.queue.len())
    }
}

/// Forgets idle connections that retired or died while parked.
fn prune(st: &mut PinnedState) {
    let before = st.idle.len();
    st.idle.retain(|i| i.conn.is_open());
    st.open -= before - st.idle.len();
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
                    st.open -= 1;
                    p.dispatch(&mut st, &mut wakes);
                }
                Some(Grant::Closed) | None => {}
            }
        }
        wakes.wake_all();
    }
}

/// Queues what a released connection needs before reuse, from what the server said (see the
/// module docs). `None`: it could not queue anything (the connection is going away).
fn released(conn: &ConnShared, always_reset: bool, n: &ExclusiveCounters) -> Option<Handover> {
    let changed = conn.session_changed.swap(false, Relaxed) || always_reset;
    match conn.settled_tx_status() {
        Some(status) => after_status(conn, status, changed, n),
        None => {
            n.inc(&n.status_probes);
            Some(Handover {
                wait: vec![conn.submit_status_now().ok()?],
                probe: true,
                changed,
            })
        }
    }
}

/// The release once the transaction status is known: `ROLLBACK` if a transaction is open
/// (not awaited: in a transaction it fails only with the connection, which the next holder
/// would see anyway), then the reset if the session may have changed (awaited: a reset that
/// fails leaves state behind, and the connection is replaced).
fn after_status(
    conn: &ConnShared,
    status: u8,
    changed: bool,
    n: &ExclusiveCounters,
) -> Option<Handover> {
    if status != b'I' {
        n.inc(&n.rollbacks);
        conn.submit_simple_now("ROLLBACK").ok()?;
    }
    let mut wait = Vec::new();
    if changed {
        n.inc(&n.resets);
        wait.push(conn.submit_simple_now(RESET).ok()?);
    }
    Some(Handover {
        wait,
        probe: false,
        changed: false,
    })
}

/// Completes a handover for its next holder; `false` if the connection must be replaced.
pub(crate) async fn finish_handover(
    conn: &ConnShared,
    mut h: Handover,
    n: &ExclusiveCounters,
) -> bool {
    loop {
        let reset = !h.wait.is_empty() && !h.probe;
        for w in h.wait.drain(..) {
            if futures_lite::future::poll_fn(|cx| w.poll_block(cx))
                .await
                .is_err()
            {
                return false;
            }
        }
        if reset {
            // The reset's own parameter reports do not count as the next holder's changes.
            conn.session_changed.store(false, Relaxed);
        }
        if !h.probe {
            return true;
        }
        h = match conn.settled_tx_status() {
            Some(status) => match after_status(conn, status, h.changed, n) {
                Some(next) => next,
                None => return false,
            },
            None => match conn.submit_status_now() {
                Ok(w) => Handover { wait: vec![w], ..h },
                Err(_) => return false,
            },
        };
    }
}

/// `DISCARD ALL` without `DEALLOCATE ALL`: the connection's own prepared statements (protocol
/// level, `from_sql` false) stay, so the next holder does not prepare them again; statements a
/// holder prepared with SQL `PREPARE` are deallocated. One simple query, one round trip.
pub(crate) const RESET: &str =
    "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; \
    SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES; DISCARD PLANS; \
    DO $pgpipe_reset$ DECLARE s text; BEGIN \
    FOR s IN SELECT name FROM pg_catalog.pg_prepared_statements WHERE from_sql LOOP \
    EXECUTE format('DEALLOCATE %I', s); END LOOP; END $pgpipe_reset$";

/// A checked-out exclusive connection; returned to the pool when dropped.
pub(crate) struct Held {
    pub(crate) conn: Arc<ConnShared>,
    pub(crate) pinned: Arc<Pinned>,
    pub(crate) id: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pinned.release(self.id, &self.conn);
    }
}
