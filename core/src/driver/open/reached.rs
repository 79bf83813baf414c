//! One rule for every connection of a client that waits to open again: a connection of the
//! client that opens is evidence that the server takes connections, so every other one waiting
//! out a pause (a shared connection's backoff, a checkout's pause before it opens again) tries
//! at once. Without it, a connection refused or closed during startup by a proxy in front of a
//! restarting server (HAProxy with no healthy backend accepts and closes) keeps backing off,
//! up to 5 s, while the server already serves.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// How many connections of the client have opened, and who waits for the next.
#[derive(Default)]
pub(crate) struct Reached {
    opened: AtomicU64,
    /// At most one per connection waiting (each registers its own task's waker once).
    waiting: Mutex<Vec<Waker>>,
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
}
