//! What a unit of an exclusive connection carries besides its own statement: the
//! transaction's pending BEGIN, a COMMIT after it, and its turn among the holder's statements.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8};
use std::sync::OnceLock;

use super::{ConnShared, Ticket};
use crate::proto::Frame;

/// A transaction's BEGIN that has not gone out yet: the transaction's first unit takes it
/// (under the mailbox lock, so no other unit of the transaction can get ahead of it), with the
/// transaction's modes.
#[derive(Default)]
pub(crate) struct PendingBegin {
    pending: AtomicBool,
    /// The modes, as [`begin_text`] reads them.
    modes: AtomicU8,
}

/// The statement that starts a transaction without modes.
pub(crate) const BEGIN: &str = "BEGIN";

impl PendingBegin {
    /// A transaction is asked for: the next unit carries its BEGIN.
    pub(crate) fn arm(&self) {
        self.pending.store(true, Relaxed);
    }

    /// The modes its BEGIN carries ([`begin_text`]'s encoding).
    pub(crate) fn set_modes(&self, modes: u8) {
        self.modes.store(modes, Relaxed);
    }

    /// The BEGIN this transaction sends.
    pub(crate) fn text(&self) -> &'static str {
        begin_text(self.modes.load(Relaxed))
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

/// The BEGIN for `modes`: bits 0–2 the isolation level (0: the server's default, then READ
/// UNCOMMITTED, READ COMMITTED, REPEATABLE READ, SERIALIZABLE), bits 3–4 the access (0: default,
/// 1: READ WRITE, 2: READ ONLY), bits 5–6 deferrability (0: default, 1: NOT DEFERRABLE, 2:
/// DEFERRABLE). Each text is built once.
pub(crate) fn begin_text(modes: u8) -> &'static str {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        (0..128u8)
            .map(|m| {
                let mut text = BEGIN.to_owned();
                let parts = [
                    [
                        "",
                        " ISOLATION LEVEL READ UNCOMMITTED",
                        " ISOLATION LEVEL READ COMMITTED",
                        " ISOLATION LEVEL REPEATABLE READ",
                        " ISOLATION LEVEL SERIALIZABLE",
                    ]
                    .get(usize::from(m & 7)),
                    ["", " READ WRITE", " READ ONLY"].get(usize::from(m >> 3 & 3)),
                    ["", " NOT DEFERRABLE", " DEFERRABLE"].get(usize::from(m >> 5 & 3)),
                ];
                for p in parts.into_iter().flatten() {
                    text.push_str(p);
                }
                text
            })
            .collect()
    });
    texts
        .get(usize::from(modes & 127))
        .map_or(BEGIN, String::as_str)
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

    /// The unit went into `conn`'s mailbox: the holder's next statement may queue its own.
    pub(crate) fn was_queued(&self, conn: &ConnShared) {
        if let Some(t) = self.turn {
            t.queued(conn.units_pushed());
        }
        if let Some(f) = self.queued {
            f();
        }
    }

    /// Takes the pending BEGIN, if any (call under the mailbox lock).
    #[inline]
    pub(crate) fn take_begin(&self) -> Option<&'static str> {
        self.begin.filter(|b| b.disarm()).map(PendingBegin::text)
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

#[cfg(test)]
mod tests {
    use super::begin_text;

    #[test]
    fn begin_texts_carry_each_mode() {
        assert_eq!(begin_text(0), "BEGIN");
        assert_eq!(
            begin_text(4 | 2 << 3 | 2 << 5),
            "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE"
        );
        assert_eq!(
            begin_text(2 | 1 << 3),
            "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE"
        );
        assert_eq!(begin_text(1 << 5), "BEGIN NOT DEFERRABLE");
        // Codes past the table fall back to a plain BEGIN rather than panic.
        assert_eq!(begin_text(7), "BEGIN");
        assert_eq!(begin_text(255), begin_text(127));
    }
}
