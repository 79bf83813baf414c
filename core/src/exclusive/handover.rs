//! What a released exclusive connection needs before its next holder uses it (the
//! [`Handover`]), decided from the server's own answer: `ROLLBACK` if a transaction is open,
//! the session [`RESET`] if the holder may have changed session state, a status probe first if
//! units were still outstanding; and how the next holder completes it (see `exclusive`'s module
//! docs for the rules).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::driver::shared::{ConnShared, Framing, QueryWaiter};
use crate::sched::DeferredWakes;
use crate::stats::ExclusiveCounters;

/// What the next holder of a released connection must see done before using it.
#[derive(Default)]
pub(crate) struct Handover {
    /// Units queued at release whose success comes first (a reset, a status probe): any
    /// failure means the connection is replaced.
    pub(super) wait: Vec<Arc<QueryWaiter>>,
    /// `wait` ends with a status probe; once it is answered, the rest of the release is
    /// decided from the status it reports.
    pub(super) probe: bool,
    /// The holder may have changed session state: reset before reuse.
    pub(super) changed: bool,
    /// Handed on with the previous holder's last unit (its COMMIT) still unanswered.
    pub(super) early: bool,
}

/// Queues what a released connection needs before reuse, from what the server said (see
/// `exclusive`'s module docs). `None`: it could not queue anything (the connection is going away).
pub(super) fn released(
    conn: &ConnShared,
    always_reset: bool,
    n: &ExclusiveCounters,
    wakes: &mut DeferredWakes,
) -> Option<Handover> {
    let changed = conn.session_changed.swap(false, Relaxed) || always_reset;
    match conn.settled_tx_status() {
        Some(status) => after_status(conn, status, changed, n, wakes),
        None => {
            n.inc(&n.status_probes);
            Some(Handover {
                wait: vec![conn.queue_status(wakes).ok()?],
                probe: true,
                changed,
                early: false,
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
    wakes: &mut DeferredWakes,
) -> Option<Handover> {
    let none = Framing::NONE;
    if status != b'I' {
        n.inc(&n.rollbacks);
        conn.queue_simple("ROLLBACK", &none, wakes).ok()?;
    }
    let mut wait = Vec::new();
    if changed {
        n.inc(&n.resets);
        wait.push(conn.queue_simple(RESET, &none, wakes).ok()?.0);
    }
    Some(Handover {
        wait,
        ..Handover::default()
    })
}

/// Completes a handover for its next holder, a transaction (`for_tx`) or a session: `None`
/// if the connection must be replaced, else whether the holder got it early (its first unit
/// may find the previous holder's transaction failed, see `exclusive`'s module docs).
pub(crate) async fn finish_handover(
    conn: &ConnShared,
    mut h: Handover,
    for_tx: bool,
    n: &ExclusiveCounters,
) -> Option<bool> {
    // No lock is held here: the task's wakeups go out as each unit is queued.
    let after = |status, changed| {
        let mut wakes = DeferredWakes::default();
        let r = after_status(conn, status, changed, n, &mut wakes);
        wakes.wake_all();
        r
    };
    if h.early {
        match conn.settled_tx_status() {
            // Answered meanwhile: the status is known.
            Some(status) => h = after(status, h.changed)?,
            None if for_tx => return Some(true),
            None => {
                n.inc(&n.status_probes);
                h = Handover {
                    wait: vec![conn.submit_status_now().ok()?],
                    probe: true,
                    ..h
                };
            }
        }
    }
    loop {
        let reset = !h.wait.is_empty() && !h.probe;
        for w in h.wait.drain(..) {
            futures_lite::future::poll_fn(|cx| w.poll_block(cx))
                .await
                .ok()?;
        }
        if reset {
            // The reset's own parameter reports do not count as the next holder's changes.
            conn.session_changed.store(false, Relaxed);
        }
        if !h.probe {
            return Some(false);
        }
        // Parameters the outstanding units changed were reported before the probe's answer.
        let changed = h.changed || conn.session_changed.swap(false, Relaxed);
        h = match conn.settled_tx_status() {
            Some(status) => after(status, changed)?,
            None => Handover {
                wait: vec![conn.submit_status_now().ok()?],
                changed,
                ..h
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
