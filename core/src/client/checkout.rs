//! Checking out an exclusive connection (sessions and transactions): an idle one whose
//! handover is done or a new one, under `checkout_timeout`, and the claim that gives a
//! connection back if the checkout is abandoned half-way.

use std::sync::atomic::Ordering::Acquire;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::on_demand::new_connection;
use super::Client;
use crate::driver::shared::ConnShared;
use crate::exclusive::{finish_handover, Grant, Held, Pinned};
use crate::rt::Runtime;
use crate::Error;

impl<R: Runtime> Client<R> {
    /// An exclusive connection for the caller (see `Client::session`, in `session/mod.rs`): an
    /// idle one once its handover is done, or a new one while the budget allows, in arrival
    /// order (`exclusive/mod.rs`).
    pub(crate) async fn checkout(&self, for_tx: bool) -> Result<Held, Error> {
        let me = futures_lite::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let pinned = &self.inner.pinned;
        let started = self.inner.rt.now();
        let mut pause = REOPEN_PAUSE;
        let mut last_try = false;
        loop {
            let mut early = false;
            let conn = match self.acquire(&me, started).await? {
                Grant::Conn(conn, handover) => {
                    let claim = Claim::new(pinned, &conn);
                    let done = match conn.is_open() {
                        true => finish_handover(&conn, handover, for_tx, &pinned.counters).await,
                        false => None,
                    };
                    match done {
                        Some(e) => {
                            early = e;
                            claim.keep()
                        }
                        // The previous holder's session could not be reset: replace it
                        // (dropping the claim closes it and frees its slot).
                        None => continue,
                    }
                }
                Grant::Open => {
                    let inner = &self.inner;
                    let shared = new_connection(&inner.cfg, true, &inner.costs, &inner.types);
                    // Before the task starts: its end, however soon, must free the budget.
                    self.on_exit_free_budget(&shared);
                    pinned.register(&shared);
                    let opened = (inner.open_fn)(&inner.rt, &inner.cfg, &shared, true);
                    let claim = Claim::new(pinned, &shared);
                    // On failure the claim's drop frees the slot.
                    match futures_lite::future::poll_fn(|cx| opened.poll_block(cx)).await {
                        Ok(()) => claim.keep(),
                        Err(e) => {
                            drop(claim);
                            self.pause_before_reopen(e, started, &mut pause, &mut last_try)
                                .await?;
                            continue;
                        }
                    }
                }
                Grant::Closed => return Err(Error::Closed),
            };
            conn.forget_previous_holder();
            let id = pinned.hold(conn.clone(), me.clone(), self.inner.rt.now());
            return Ok(Held::new(conn, pinned.clone(), id, early));
        }
    }
}

/// The first pause before a checkout opens again after its open failed; it doubles up to
/// [`REOPEN_PAUSE_MAX`].
const REOPEN_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
const REOPEN_PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(1);

impl<R: Runtime> Client<R> {
    /// Opening an exclusive connection failed with `e`. Nothing of the checkout was sent, so
    /// while the failure is one a restart or failover gives (the server refused or dropped
    /// the connection, or said it is starting up or shutting down) the checkout opens again
    /// after a pause, cut short when another connection of the client opens
    /// (`driver/open/reached.rs`), within `dispatch_timeout` and `checkout_timeout` since
    /// `started`: a pause that would pass them ends at them, for a last try. Past them the
    /// checkout fails as the shared path does, `Error::NoConnection` (with `e` as its cause);
    /// a failure of another kind is the checkout's error as it is.
    async fn pause_before_reopen(
        &self,
        e: Error,
        started: Instant,
        pause: &mut std::time::Duration,
        last_try: &mut bool,
    ) -> Result<(), Error> {
        let inner = &*self.inner;
        let config = &inner.config;
        let mut until = started + config.dispatch_timeout;
        if let Some(limit) = config.checkout_timeout {
            until = until.min(started + limit);
        }
        if !e.is_transient_connect() || inner.closing.load(Acquire) {
            return Err(e);
        }
        let rt = &inner.rt;
        let now = rt.now();
        if *last_try || now >= until {
            let waited = now.saturating_duration_since(started);
            let fault = crate::error::Fault::NoneOpened { waited, last: e };
            return Err(Error::NoConnection {
                reason: crate::Reason::from(fault),
            });
        }
        let at = (now + *pause).min(until);
        *pause = (*pause * 2).min(REOPEN_PAUSE_MAX);
        let reached = &inner.cfg.reached;
        let mark = reached.mark();
        loop {
            let now = rt.now();
            if now >= at {
                reached.trying(now);
                break;
            }
            if reached.scout(now) {
                break;
            }
            let called_back = async {
                futures_lite::future::poll_fn(|cx| reached.poll_since(mark, cx)).await;
                true
            };
            let slept = async {
                rt.sleep_until(reached.look_again(at)).await;
                false
            };
            if futures_lite::future::or(called_back, slept).await {
                reached.trying(rt.now());
                break;
            }
        }
        // The try after a pause that ran to the deadline is the last.
        *last_try = rt.now() >= until;
        Ok(())
    }

    /// Waits for an exclusive connection or a slot, for at most `checkout_timeout` since
    /// `started`. Only this wait is bounded here: opening is bounded by `connect_timeout`, and
    /// a previous holder's reset by the cancel bound.
    async fn acquire(&self, me: &std::task::Waker, started: Instant) -> Result<Grant, Error> {
        let pinned = &self.inner.pinned;
        let Some(limit) = self.inner.config.checkout_timeout else {
            return pinned.acquire(me).await;
        };
        let rt = &self.inner.rt;
        futures_lite::future::or(pinned.acquire(me), async {
            rt.sleep_until(started + limit).await;
            let now = rt.now();
            Err(pinned.timed_out(now.saturating_duration_since(started), now))
        })
        .await
    }

    /// When `conn`'s task ends, the pool may open another connection in its place.
    pub(super) fn on_exit_free_budget(&self, conn: &ConnShared) {
        let pinned = Arc::downgrade(&self.inner.pinned);
        let _ = conn.on_exit.set(Box::new(move || {
            if let Some(p) = pinned.upgrade() {
                p.budget_freed();
            }
        }));
    }
}

/// An exclusive connection a checkout has claimed (opening it, or resetting an idle one) but
/// not yet handed to its holder. Dropped unkept — the reset or open failed, or the caller
/// dropped the checkout's future while it waited — it closes the connection and frees the
/// pool slot, which would otherwise stay counted as open and serve nobody, forever.
struct Claim<'a> {
    pinned: &'a Pinned,
    conn: Option<Arc<ConnShared>>,
}

impl<'a> Claim<'a> {
    fn new(pinned: &'a Pinned, conn: &Arc<ConnShared>) -> Self {
        Claim {
            pinned,
            conn: Some(conn.clone()),
        }
    }

    /// The checkout succeeded: the connection goes to its holder.
    fn keep(mut self) -> Arc<ConnShared> {
        self.conn.take().expect("kept once")
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.begin_close();
            self.pinned.forfeit();
        }
    }
}
