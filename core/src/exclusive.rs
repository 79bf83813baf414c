//! Exclusive connections: sessions and transactions.
//!
//! Statements that change session state (SET, LISTEN, temp tables, session advisory locks,
//! transactions) must not share a connection. A small pool of `pinned_size` connections, opened
//! lazily, serves them one holder at a time. On release every connection gets a reset (`DISCARD
//! ALL` but for the connection's own prepared statements, see [`RESET`]), after a `ROLLBACK` if
//! it may be in a transaction (pipelined, not awaited by the releasing caller); the next
//! holder's statements queue behind that reset, and a connection whose reset failed is
//! replaced.

use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use event_listener::Event;

use crate::driver::shared::{ConnShared, QueryWaiter};
use crate::sched::lock;
use crate::Error;

/// The pool of exclusive connections.
pub(crate) struct Pinned {
    max: usize,
    state: Mutex<PinnedState>,
    available: Event,
}

struct Idle {
    conn: Arc<ConnShared>,
    /// The release's ROLLBACK (if any) and reset; both must succeed before reuse.
    reset: [Option<Arc<QueryWaiter>>; 2],
}

#[derive(Default)]
struct PinnedState {
    idle: Vec<Idle>,
    /// Connections open or being opened, idle or held.
    open: usize,
    /// Current holders: id, the connection, the waker of the task that checked it out (to
    /// recognize a checkout by a task that already holds one), and since when it is held.
    holders: Vec<(u64, Arc<ConnShared>, Waker, Instant)>,
    next_id: u64,
    closing: bool,
}

pub(crate) enum Checkout {
    /// Use this connection (its reset, if any, must be awaited first).
    Idle(Arc<ConnShared>, [Option<Arc<QueryWaiter>>; 2]),
    /// Open a new connection (a slot is reserved).
    Open,
}

impl Pinned {
    pub(crate) fn new(max: usize) -> Pinned {
        Pinned {
            max,
            state: Mutex::new(PinnedState::default()),
            available: Event::new(),
        }
    }

    /// Takes an idle connection or a slot to open one, waiting while all are held. Refuses a
    /// checkout that would wait for a connection held by the calling task itself.
    pub(crate) async fn acquire(&self, me: &Waker) -> Result<Checkout, Error> {
        loop {
            let listener = {
                let mut st = lock(&self.state);
                if st.closing {
                    return Err(Error::Closed);
                }
                if let Some(idle) = st.idle.pop() {
                    return Ok(Checkout::Idle(idle.conn, idle.reset));
                }
                if st.open < self.max {
                    st.open += 1;
                    return Ok(Checkout::Open);
                }
                if st.holders.iter().any(|(_, _, w, _)| w.will_wake(me)) {
                    return Err(Error::RecursiveCheckout);
                }
                self.available.listen()
            };
            listener.await;
        }
    }

    /// Gives back a reserved slot whose connection could not be used.
    pub(crate) fn forfeit(&self) {
        lock(&self.state).open -= 1;
        self.available.notify(1);
    }

    /// Records a holder; returns its id for [`Pinned::release`].
    pub(crate) fn hold(&self, conn: Arc<ConnShared>, me: Waker, now: Instant) -> u64 {
        let mut st = lock(&self.state);
        st.next_id += 1;
        let id = st.next_id;
        st.holders.push((id, conn, me, now));
        id
    }

    /// The error for a checkout that waited `waited` (at `now`): how many connections are held
    /// and for how long the longest holder has had one.
    pub(crate) fn timed_out(&self, waited: Duration, now: Instant) -> Error {
        let st = lock(&self.state);
        let e = Error::CheckoutTimeout {
            waited,
            held: st.holders.len(),
            pinned: self.max,
            longest_held: st
                .holders
                .iter()
                .map(|(_, _, _, since)| now.saturating_duration_since(*since))
                .max(),
        };
        crate::observe::checkout_timed_out(&e);
        e
    }

    /// Returns a held connection: queue its reset and put it back, or close it if it is dead
    /// or the service is closing.
    pub(crate) fn release(&self, id: u64, conn: &Arc<ConnShared>) {
        let mut st = lock(&self.state);
        st.holders.retain(|(h, _, _, _)| *h != id);
        // Statements still running belong to nobody now: the connection task cancels them,
        // and closes the connection if they outlive the bound (see `driver/cancel.rs`).
        if conn
            .counters
            .in_flight
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            conn.cancel_abandoned
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let reset = if conn.is_open() && !st.closing {
            reset_units(conn)
        } else {
            None
        };
        match reset {
            Some(reset) => st.idle.push(Idle {
                conn: conn.clone(),
                reset,
            }),
            None => {
                conn.begin_close();
                st.open -= 1;
            }
        }
        drop(st);
        self.available.notify(1);
    }

    /// Stops handing out connections and closes the idle ones. Returns every connection that
    /// was open, for waiting on (held ones close when released).
    pub(crate) fn close(&self) -> Vec<Arc<ConnShared>> {
        let mut st = lock(&self.state);
        st.closing = true;
        let idle: Vec<_> = st.idle.drain(..).map(|i| i.conn).collect();
        st.open -= idle.len();
        drop(st);
        for c in &idle {
            c.begin_close();
        }
        self.available.notify(usize::MAX);
        idle
    }

    /// Fails all work on every exclusive connection, idle or held.
    pub(crate) fn abort(&self) {
        let mut st = lock(&self.state);
        st.closing = true;
        let mut all: Vec<_> = st.idle.drain(..).map(|i| i.conn).collect();
        st.open -= all.len();
        all.extend(st.holders.iter().map(|(_, c, _, _)| c.clone()));
        drop(st);
        for c in &all {
            c.abort();
        }
        self.available.notify(usize::MAX);
    }

    /// Connections open (idle or held) and held.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let st = lock(&self.state);
        (st.open, st.holders.len())
    }
}

/// Queues the reset of a released connection: ROLLBACK when it may be in a transaction, then
/// [`RESET`] (its own unit, so a failed transaction cannot swallow it). `None` if the
/// connection took neither.
fn reset_units(conn: &ConnShared) -> Option<[Option<Arc<QueryWaiter>>; 2]> {
    // Outside a transaction, ROLLBACK would make the server log a WARNING.
    let rollback = if conn.may_be_in_transaction() {
        Some(conn.submit_simple_now("ROLLBACK").ok()?)
    } else {
        None
    };
    let discard = conn.submit_simple_now(RESET).ok()?;
    Some([rollback, Some(discard)])
}

/// `DISCARD ALL` without `DEALLOCATE ALL`: the connection's own prepared statements (protocol
/// level, `from_sql` false) stay, so the next holder does not prepare them again; statements a
/// holder prepared with SQL `PREPARE` are deallocated. One simple query, one round trip.
const RESET: &str = "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; \
    SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES; DISCARD PLANS; \
    DO $pgpipe_reset$ DECLARE s text; BEGIN \
    FOR s IN SELECT name FROM pg_catalog.pg_prepared_statements WHERE from_sql LOOP \
    EXECUTE format('DEALLOCATE %I', s); END LOOP; END $pgpipe_reset$";

/// Waits for a reset unit; any failure means the connection must be replaced.
pub(crate) async fn reset_ok(reset: [Option<Arc<QueryWaiter>>; 2]) -> bool {
    for w in reset.into_iter().flatten() {
        if futures_lite::future::poll_fn(|cx| w.poll_block(cx))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// A checked-out exclusive connection; returned to the pool (reset) when dropped.
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
