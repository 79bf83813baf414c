//! `block` / `unblock` on wakers, with permit semantics and deferred wakeups.
//!
//! A caller *blocks* on a [`Waiter`] (a future that is ready once a value arrives); the driver
//! *unblocks* it by storing the value and moving the caller's waker into a [`DeferredWakes`]
//! list. The list is woken only after the driver's tick ends and every lock is released, so no
//! waiting task can run, or re-enter the driver, in the middle of a drain or pump. An unblock
//! that happens before the caller first blocks is not lost: the value is the permit.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Locks a mutex, ignoring poisoning: every critical section in pgpipe leaves its data
/// consistent before anything that could panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakers collected during a driver tick, woken together when it ends.
#[derive(Default)]
pub struct DeferredWakes(Vec<Waker>);

impl DeferredWakes {
    /// Queues a waker.
    pub fn push(&mut self, w: Waker) {
        self.0.push(w);
    }
    /// Wakes every queued waker. Must be called with no lock held and outside any drain/pump loop.
    pub fn wake_all(&mut self) {
        debug_assert!(
            !in_driver_tick(),
            "wakeups must be deferred until the tick ends"
        );
        for w in self.0.drain(..) {
            w.wake();
        }
    }
}

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// A one-shot rendezvous between one blocked caller and the driver.
pub struct Waiter<T> {
    slot: Mutex<Slot<T>>,
}

impl<T> Default for Waiter<T> {
    fn default() -> Self {
        Waiter {
            slot: Mutex::new(Slot {
                value: None,
                waker: None,
            }),
        }
    }
}

impl<T> Waiter<T> {
    /// A waiter with no value yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` and defers the caller's wakeup into `wakes`.
    pub fn unblock(&self, value: T, wakes: &mut DeferredWakes) {
        let waker = {
            let mut s = lock(&self.slot);
            s.value = Some(value);
            s.waker.take()
        };
        if let Some(w) = waker {
            wakes.push(w);
        }
    }

    /// Takes the value if it has arrived, without waiting (a caller giving up its wait).
    pub fn take(&self) -> Option<T> {
        lock(&self.slot).value.take()
    }

    /// `block`: ready with the value once unblocked; otherwise registers the caller's waker.
    pub fn poll_block(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = lock(&self.slot);
        if let Some(v) = s.value.take() {
            return Poll::Ready(v);
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A rendezvous between several blocked callers and the driver; every caller gets a clone of
/// the value. Used for single-flight prepares.
pub struct SharedWaiter<T> {
    slot: Mutex<(Option<T>, Vec<Waker>)>,
}

impl<T: Clone> Default for SharedWaiter<T> {
    fn default() -> Self {
        SharedWaiter {
            slot: Mutex::new((None, Vec::new())),
        }
    }
}

impl<T: Clone> SharedWaiter<T> {
    /// Stores `value` and defers every caller's wakeup into `wakes`.
    pub fn unblock(&self, value: T, wakes: &mut DeferredWakes) {
        let mut s = lock(&self.slot);
        s.0 = Some(value);
        for w in s.1.drain(..) {
            wakes.push(w);
        }
    }

    /// Ready with a clone of the value once unblocked.
    pub fn poll_block(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = lock(&self.slot);
        if let Some(v) = &s.0 {
            return Poll::Ready(v.clone());
        }
        if !s.1.iter().any(|w| w.will_wake(cx.waker())) {
            s.1.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

thread_local! {
    static IN_TICK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is inside a connection driver's read/drain/pump/write tick.
/// Always `false` inside a waker's `wake`: the driver defers every wakeup until the tick ends,
/// which the test suite checks through this function.
pub fn in_driver_tick() -> bool {
    IN_TICK.with(Cell::get)
}

/// Marks the current thread as inside a tick for the guard's lifetime.
pub(crate) struct TickGuard(());

impl TickGuard {
    pub(crate) fn enter() -> TickGuard {
        IN_TICK.with(|t| {
            assert!(!t.get(), "connection driver re-entered inside its own tick");
            t.set(true);
        });
        TickGuard(())
    }
}

impl Drop for TickGuard {
    fn drop(&mut self) {
        IN_TICK.with(|t| t.set(false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn unblock_before_block_is_a_permit() {
        let w = Waiter::new();
        let mut wakes = DeferredWakes::default();
        w.unblock(5, &mut wakes);
        assert!(wakes.0.is_empty());
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        assert_eq!(
            w.poll_block(&mut Context::from_waker(&waker)),
            Poll::Ready(5)
        );
    }

    #[test]
    fn unblock_defers_the_wake() {
        let w = Waiter::new();
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        assert_eq!(
            w.poll_block(&mut Context::from_waker(&waker)),
            Poll::Pending
        );
        let mut wakes = DeferredWakes::default();
        w.unblock(1, &mut wakes);
        assert!(
            !flag.0.load(std::sync::atomic::Ordering::SeqCst),
            "woken inline"
        );
        wakes.wake_all();
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst));
    }
}
