//! One rule for every connection of a client that waits to open again: a connection of the
//! client that opens is evidence that the server takes connections, so every other one waiting
//! out a pause (a shared connection's backoff, a checkout's pause before it opens again) tries
//! at once. Without it, a connection refused or closed during startup by a proxy in front of a
//! restarting server (HAProxy with no healthy backend accepts and closes) keeps backing off,
//! up to 5 s, while the server already serves.
//!
//! And while none opens, the client keeps trying at least every [`SCOUT_PERIOD`] however long
//! each one's own backoff has grown (a shared connection's doubles to 5 s, to spare a server
//! that is down from every connection of every client): every waiter looks again when the
//! period since the client's last attempt has passed, and the first to look tries, as the
//! client's scout. An attempt that hangs (HAProxy waits up to a second before it tries a
//! refusing server again) does not hold the others back: the period counts from its start.
//! The first scout to open calls the rest back, so the client serves within about
//! `SCOUT_PERIOD` of the server taking connections again, at a cost to a server that is down
//! of a few attempts a second per client.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often, at least, a client whose connections all wait to open again tries one.
pub(crate) const SCOUT_PERIOD: Duration = Duration::from_millis(250);

/// How many connections of the client have opened, and who waits for the next.
#[derive(Default)]
pub(crate) struct Reached {
    opened: AtomicU64,
    /// At most one per connection waiting (each registers its own task's waker once).
    waiting: Mutex<Vec<Waker>>,
    /// When the client last started an attempt to open while waiting.
    last_try: Mutex<Option<Instant>>,
}

impl Reached {
    /// How many connections have opened so far: a waiter's mark.
    pub(crate) fn mark(&self) -> u64 {
        self.opened.load(Acquire)
    }

    /// A connection opened: everyone waiting tries now.
    pub(crate) fn opened(&self) {
        self.opened.fetch_add(1, Release);
        let waiting = std::mem::take(&mut *crate::sched::lock(&self.waiting));
        for w in waiting {
            w.wake();
        }
    }

    /// An attempt to open starts at `now`.
    pub(crate) fn trying(&self, now: Instant) {
        *crate::sched::lock(&self.last_try) = Some(now);
    }

    /// Whether a waiter looking at `now` tries now, as the client's scout: no attempt has
    /// started for [`SCOUT_PERIOD`]. If so, its attempt counts as started.
    pub(crate) fn scout(&self, now: Instant) -> bool {
        let mut last = crate::sched::lock(&self.last_try);
        match *last {
            Some(at) if now < at + SCOUT_PERIOD => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }

    /// When a waiter whose own pause ends at `until` looks again: then, or when the period
    /// since the client's last attempt ends, if sooner.
    pub(crate) fn look_again(&self, until: Instant) -> Instant {
        match *crate::sched::lock(&self.last_try) {
            Some(at) => until.min(at + SCOUT_PERIOD),
            None => until,
        }
    }

    /// `Ready` once a connection opened after `mark`; until then the task is woken when one
    /// does.
    pub(crate) fn poll_since(&self, mark: u64, cx: &mut Context<'_>) -> Poll<()> {
        if self.mark() != mark {
            return Poll::Ready(());
        }
        let mut waiting = crate::sched::lock(&self.waiting);
        // Looked again under the lock: an `opened` in between has taken the list already.
        if self.mark() != mark {
            return Poll::Ready(());
        }
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn an_open_wakes_each_waiter_once_and_readies_every_earlier_mark() {
        let r = Reached::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mark = r.mark();
        assert!(r.poll_since(mark, &mut cx).is_pending());
        // Polled again before any open: still one registration.
        assert!(r.poll_since(mark, &mut cx).is_pending());
        r.opened();
        assert_eq!(count.0.load(Relaxed), 1);
        assert!(r.poll_since(mark, &mut cx).is_ready());
        // A new mark waits for the next open.
        assert!(r.poll_since(r.mark(), &mut cx).is_pending());
        r.opened();
        assert_eq!(count.0.load(Relaxed), 2);
    }

    #[test]
    fn one_waiter_at_a_time_scouts_once_a_period_has_passed_since_the_last_attempt() {
        let r = Reached::default();
        let t0 = Instant::now();
        let long = t0 + Duration::from_secs(5);
        // Nothing tried yet: the first to look scouts.
        assert!(r.scout(t0));
        // Within the period, others wait, looking again when it ends.
        assert!(!r.scout(t0 + SCOUT_PERIOD / 2));
        assert_eq!(r.look_again(long), t0 + SCOUT_PERIOD);
        // A waiter whose own pause ends first keeps it.
        let soon = t0 + SCOUT_PERIOD / 4;
        assert_eq!(r.look_again(soon), soon);
        // An attempt started by anyone (its own pause over) restarts the period.
        let t1 = t0 + SCOUT_PERIOD / 2;
        r.trying(t1);
        assert!(!r.scout(t0 + SCOUT_PERIOD));
        assert_eq!(r.look_again(long), t1 + SCOUT_PERIOD);
        // However long that attempt hangs, the next to look after the period tries.
        assert!(r.scout(t1 + SCOUT_PERIOD));
        assert!(!r.scout(t1 + SCOUT_PERIOD));
    }
}
