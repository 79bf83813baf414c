//! The order of a holder's statements on its exclusive connection: each statement's units are
//! queued in the order the statement was first polled, so a statement issued after another
//! never runs before it, nor prepares before it (its Parse would not see a table the earlier
//! one creates).
//!
//! A statement takes a [`Ticket`] when it starts and waits for its turn before its first unit
//! (its prepare, when its text is new, or its execution); it passes the turn on once its
//! execution is queued, or when it ends without one (an error, a timeout, a dropped future):
//! a ticket dropped unpassed passes itself. A COPY FROM STDIN keeps the turn until its end.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::task::{Poll, Waker};

use crate::sched::lock;

/// The turns of one holder's statements.
#[derive(Default)]
pub(crate) struct Order {
    state: Mutex<Turns>,
}

#[derive(Default)]
struct Turns {
    /// Tickets handed out.
    issued: u64,
    /// The ticket whose unit may be queued now: every earlier one has passed.
    turn: u64,
    /// Tickets passed before their turn (their statement failed before queuing).
    passed_early: BTreeSet<u64>,
    /// Statements waiting for their turn.
    waiting: Vec<Waker>,
}

impl Order {
    /// A statement's place, taken when it starts.
    pub(crate) fn ticket(&self) -> Ticket<'_> {
        let mut st = lock(&self.state);
        let n = st.issued;
        st.issued += 1;
        Ticket {
            order: self,
            n,
            passed: AtomicBool::new(false),
            at: AtomicU64::new(0),
        }
    }
}

/// One statement's place among its holder's; passes itself when dropped.
pub(crate) struct Ticket<'a> {
    order: &'a Order,
    n: u64,
    passed: AtomicBool,
    /// The connection's units pushed once the statement's own was queued (0: not queued).
    at: AtomicU64,
}

impl Ticket<'_> {
    /// Waits until every statement issued before this one has queued its unit or ended.
    pub(crate) fn wait(&self) -> impl Future<Output = ()> + '_ {
        futures_lite::future::poll_fn(move |cx| {
            let mut st = lock(&self.order.state);
            if st.turn >= self.n {
                return Poll::Ready(());
            }
            if !st.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                st.waiting.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }

    /// The statement's unit is queued, `at` the connection's count of units pushed with it:
    /// its queue position, for a cancel of it alone.
    pub(crate) fn queued(&self, at: u64) {
        self.at.store(at, Relaxed);
        self.pass();
    }

    /// Whether this is the holder's first statement and no other has started since.
    pub(crate) fn first_and_only(&self) -> bool {
        self.n == 0 && lock(&self.order.state).issued == 1
    }

    /// Where the statement's unit was queued ([`Ticket::queued`]); 0 when it was not.
    pub(crate) fn queued_at(&self) -> u64 {
        self.at.load(Relaxed)
    }

    /// The statement's unit is queued, or it ends without one: the next may go.
    pub(crate) fn pass(&self) {
        if self.passed.swap(true, Relaxed) {
            return;
        }
        let waiting = {
            let mut st = lock(&self.order.state);
            st.passed_early.insert(self.n);
            loop {
                let turn = st.turn;
                if !st.passed_early.remove(&turn) {
                    break;
                }
                st.turn += 1;
            }
            std::mem::take(&mut st.waiting)
        };
        for w in waiting {
            w.wake();
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::Context;

    fn ready(t: &Ticket<'_>) -> bool {
        let mut f = pin!(t.wait());
        f.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    }

    #[test]
    fn turns_follow_the_tickets_whatever_order_they_pass_in() {
        let order = Order::default();
        let (a, b, c) = (order.ticket(), order.ticket(), order.ticket());
        assert!(ready(&a) && !ready(&b) && !ready(&c));
        // The third ends first (it failed before queuing): the second still waits for the first.
        drop(c);
        assert!(!ready(&b));
        a.pass();
        assert!(ready(&b));
        b.pass();
        // Passing twice is once.
        b.pass();
        let d = order.ticket();
        assert!(ready(&d), "every earlier ticket passed");
        drop(a);
        assert!(ready(&d));
    }
}
