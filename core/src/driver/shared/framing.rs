//! What a unit of an exclusive connection carries besides its own statement: the
//! transaction's pending BEGIN, a COMMIT after it, and its turn among the holder's statements.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use super::Ticket;
use crate::proto::Frame;

/// A transaction's BEGIN that has not gone out yet: the transaction's first unit takes it
/// (under the mailbox lock, so no other unit of the transaction can get ahead of it).
#[derive(Default)]
pub(crate) struct PendingBegin {
    pending: AtomicBool,
}

/// The statement that starts every transaction.
pub(crate) const BEGIN: &str = "BEGIN";

impl PendingBegin {
    /// A transaction is asked for: the next unit carries its BEGIN.
    pub(crate) fn arm(&self) {
        self.pending.store(true, Relaxed);
    }

    /// Whether the BEGIN is still to go out.
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(Relaxed)
    }

    /// Withdraws a BEGIN that never went out; `true` if there was one (nothing was sent, so
    /// there is no transaction to end).
    pub(crate) fn disarm(&self) -> bool {
        self.pending.swap(false, Relaxed)
    }
}

/// What a unit of an exclusive connection carries besides its own statement: the
/// transaction's pending BEGIN, and a COMMIT after it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Framing<'a> {
    pub(crate) begin: Option<&'a PendingBegin>,
    pub(crate) commit: bool,
    /// Called once the unit is queued (a transaction's last unit: the connection can go to
    /// the next holder while its answer travels).
    pub(crate) queued: Option<&'a (dyn Fn() + Sync)>,
    /// The statement's place among its holder's (`order.rs`): its unit is queued in turn.
    pub(crate) turn: Option<&'a Ticket<'a>>,
}

impl<'a> Framing<'a> {
    /// Nothing but the unit's own statement (the shared path).
    pub(crate) const NONE: Framing<'static> = Framing {
        begin: None,
        commit: false,
        queued: None,
        turn: None,
    };

    /// Waits until the units of the holder's statements issued before this one are queued
    /// (or those statements ended without one).
    pub(crate) async fn my_turn(&self) {
        if let Some(t) = self.turn {
            t.wait().await;
        }
    }

    /// [`Framing::my_turn`] as a fallible future, to race a deadline.
    pub(crate) async fn my_turn_or_error(&self) -> Result<(), crate::Error> {
        self.my_turn().await;
        Ok(())
    }

    /// The unit went into the mailbox: the holder's next statement may queue its own.
    pub(crate) fn was_queued(&self) {
        if let Some(t) = self.turn {
            t.pass();
        }
        if let Some(f) = self.queued {
            f();
        }
    }

    /// Takes the pending BEGIN, if any (call under the mailbox lock).
    #[inline]
    pub(crate) fn take_begin(&self) -> Option<&'static str> {
        self.begin.filter(|b| b.disarm()).map(|_| BEGIN)
    }

    /// Puts back a BEGIN taken for a unit that could not be encoded.
    pub(crate) fn restore_begin(&self, taken: Option<&str>) {
        if let (Some(b), Some(_)) = (self.begin, taken) {
            b.arm();
        }
    }

    /// Takes the pending BEGIN and returns the frame for the pipeline and for the encoder.
    #[inline]
    pub(crate) fn take(&self) -> (Frame, crate::proto::encode::Frame<'static>) {
        let before = self.take_begin();
        let after = self.commit.then_some("COMMIT");
        let frame = Frame {
            before: u8::from(before.is_some()),
            after: u8::from(after.is_some()),
        };
        (frame, crate::proto::encode::Frame { before, after })
    }
}
