//! What a unit's messages call for, and the check of every answer against it: each frontend
//! message a unit sent (read from the bytes written, not from what the caller meant to send)
//! calls for one answer, in order — ParseComplete for a Parse, BindComplete for a Bind, a
//! ParameterDescription and a row description for a Describe of a statement, a row
//! description for a Describe of a portal, rows and a completion for an Execute,
//! CloseComplete for a Close, ReadyForQuery for a Sync; a simple Query calls for anything up
//! to its ReadyForQuery. An ErrorResponse makes the server skip to the Sync. An answer that is
//! not the one due is a protocol violation: behind a pooler that mixed two clients' units up,
//! it is often the first sign (`docs/FAULTS.md` says what this catches and what no client can).
//!
//! A unit's script is packed in a `u64`, four bits an answer, first answer lowest: a point
//! select's `Bind Execute Sync` is three nibbles, checked with a shift. Answers beyond
//! [`PACKED`] (a batch of many statements) wait in the pipeline's spill, in FIFO order.

use std::collections::VecDeque;

use super::ProtocolViolation;

/// ParseComplete.
const PARSE: u8 = 1;
/// BindComplete.
const BIND: u8 = 2;
/// ParameterDescription (a Describe of a statement; its row description follows).
const PARAMS: u8 = 3;
/// RowDescription or NoData.
const SHAPE: u8 = 4;
/// DataRows, then CommandComplete or EmptyQueryResponse (an Execute).
const ROWS: u8 = 5;
/// CloseComplete.
const CLOSE: u8 = 6;
/// ReadyForQuery (a Sync).
const READY: u8 = 7;
/// Anything up to a ReadyForQuery (a simple Query).
const QUERY: u8 = 8;

/// Answers a packed script holds.
pub(super) const PACKED: u32 = 16;

/// The answers due for one unit, in order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Script {
    /// The next answers, the first lowest; 0 when none is left here.
    packed: u64,
    /// Further answers of this unit in the pipeline's spill.
    spilled: u32,
}

/// What an answer does to its unit's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// It is the answer due, and the next one is due now.
    Next,
    /// It is part of the answer due (a row, a COPY message, a simple query's results).
    Within,
}

impl Script {
    /// The script of `sent`, a unit's whole frontend messages; answers beyond [`PACKED`] go to
    /// the back of `spill`.
    pub(super) fn of(sent: &[u8], spill: &mut VecDeque<u8>) -> Script {
        let mut s = Script::default();
        let mut n = 0u32;
        let mut at = 0usize;
        let mut add = |code: u8, s: &mut Script| {
            if n < PACKED {
                s.packed |= u64::from(code) << (4 * n);
            } else {
                spill.push_back(code);
                s.spilled += 1;
            }
            n += 1;
        };
        while let Some(head) = sent.get(at..at + 5) {
            let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            match head[0] {
                b'P' => add(PARSE, &mut s),
                b'B' => add(BIND, &mut s),
                b'D' => {
                    if sent.get(at + 5) == Some(&b'S') {
                        add(PARAMS, &mut s);
                    }
                    add(SHAPE, &mut s);
                }
                b'E' => add(ROWS, &mut s),
                b'C' => add(CLOSE, &mut s),
                b'S' => add(READY, &mut s),
                b'Q' => add(QUERY, &mut s),
                // Flush, COPY data, Terminate: no answer of their own.
                _ => {}
            }
            at = at.saturating_add(1).saturating_add(len.max(4));
        }
        s
    }

    /// Leaves out the last answer if it is a ReadyForQuery (the unit's Sync was dropped: the
    /// next unit's ends it).
    pub(super) fn drop_ready(&mut self, spill: &mut VecDeque<u8>) {
        if self.spilled > 0 {
            if spill.back() == Some(&READY) {
                spill.pop_back();
                self.spilled -= 1;
            }
            return;
        }
        if self.packed == 0 {
            return;
        }
        let top = (63 - self.packed.leading_zeros()) / 4;
        if (self.packed >> (4 * top)) & 0xF == u64::from(READY) {
            self.packed &= !(0xF << (4 * top));
        }
    }

    /// Checks backend message `tag` against the answer due. An ErrorResponse and the
    /// ReadyForQuery after one are the drain's to judge ([`Script::skip`]).
    #[inline]
    pub(super) fn fit(&self, tag: u8) -> Result<Fit, ProtocolViolation> {
        let due = (self.packed & 0xF) as u8;
        let fit = match (due, tag) {
            (ROWS, b'D') => Fit::Within,
            (ROWS, b'C' | b'I')
            | (BIND, b'2')
            | (READY, b'Z')
            | (PARSE, b'1')
            | (SHAPE, b'T' | b'n')
            | (PARAMS, b't')
            | (CLOSE, b'3')
            | (QUERY, b'Z') => Fit::Next,
            (QUERY, b'T' | b'D' | b'C' | b'I' | b'G' | b'H' | b'W' | b'd' | b'c') => Fit::Within,
            _ => return Err(unexpected(due, tag)),
        };
        Ok(fit)
    }

    /// The answer due was given: the next one is due.
    #[inline]
    pub(super) fn advance(&mut self, spill: &mut VecDeque<u8>) {
        self.packed >>= 4;
        if self.packed == 0 && self.spilled > 0 {
            self.refill(spill);
        }
    }

    #[cold]
    fn refill(&mut self, spill: &mut VecDeque<u8>) {
        let n = self.spilled.min(PACKED);
        for i in 0..n {
            let code = spill.pop_front().unwrap_or(0);
            self.packed |= u64::from(code) << (4 * i);
        }
        self.spilled -= n;
    }

    /// The unit failed (or was skipped): the server ends it at the next Sync, whatever was
    /// due. Its answers leave the spill. Returns whether its script held a ReadyForQuery (the
    /// Sync that ends it).
    pub(super) fn skip(&mut self, spill: &mut VecDeque<u8>) -> bool {
        let mut synced = false;
        while self.packed != 0 {
            let code = (self.packed & 0xF) as u8;
            synced |= matches!(code, READY | QUERY);
            self.packed >>= 4;
            if self.packed == 0 && self.spilled > 0 {
                self.refill(spill);
            }
        }
        synced
    }

    /// Whether every answer due was given.
    pub(super) fn is_done(&self) -> bool {
        self.packed == 0 && self.spilled == 0
    }
}

#[cold]
#[inline(never)]
fn unexpected(due: u8, tag: u8) -> ProtocolViolation {
    let due = match due {
        PARSE => "ParseComplete",
        BIND => "BindComplete",
        PARAMS => "ParameterDescription",
        SHAPE => "RowDescription or NoData",
        ROWS => "DataRow or CommandComplete",
        CLOSE => "CloseComplete",
        READY => "ReadyForQuery",
        QUERY => "a simple query's results",
        _ => "nothing (the unit is answered)",
    };
    ProtocolViolation(format!(
        "message {:?} where {due} was due: the answer does not match what was sent",
        char::from(tag)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// The answers `sent` calls for, as the backend tags that give them.
    fn due(sent: &[u8]) -> String {
        let mut spill = VecDeque::new();
        let mut s = Script::of(sent, &mut spill);
        let mut out = String::new();
        while !s.is_done() {
            out.push(match (s.packed & 0xF) as u8 {
                PARSE => '1',
                BIND => '2',
                PARAMS => 't',
                SHAPE => 'T',
                ROWS => 'C',
                CLOSE => '3',
                READY => 'Z',
                QUERY => 'Q',
                _ => '?',
            });
            s.advance(&mut spill);
        }
        assert!(spill.is_empty());
        out
    }

    #[test]
    fn each_message_calls_for_its_answer() {
        let execute = [msg(b'B', b""), msg(b'E', b""), msg(b'S', b"")].concat();
        assert_eq!(due(&execute), "2CZ");
        let unnamed = [msg(b'P', b""), execute.clone()].concat();
        assert_eq!(due(&unnamed), "12CZ");
        let prepare = [
            msg(b'C', b"Sold\0"),
            msg(b'P', b""),
            msg(b'D', b"Ss1\0"),
            msg(b'S', b""),
        ]
        .concat();
        assert_eq!(due(&prepare), "31tTZ");
        let typed = [
            msg(b'P', b""),
            msg(b'B', b""),
            msg(b'D', b"P\0"),
            msg(b'E', b""),
            msg(b'S', b""),
        ]
        .concat();
        assert_eq!(due(&typed), "12TCZ");
        assert_eq!(due(&msg(b'Q', b"SELECT 1\0")), "Q");
        assert_eq!(due(&[msg(b'd', b"x"), msg(b'c', b"")].concat()), "");
    }

    #[test]
    fn long_units_spill_in_order_and_come_back() {
        // A batch of 20 statements: 41 answers.
        let step = [msg(b'B', b""), msg(b'E', b"")].concat();
        let mut sent: Vec<u8> = (0..20).flat_map(|_| step.clone()).collect();
        sent.extend(msg(b'S', b""));
        assert_eq!(due(&sent), format!("{}Z", "2C".repeat(20)));
        // Two such units: each takes its own answers back from the spill.
        let mut spill = VecDeque::new();
        let mut a = Script::of(&sent, &mut spill);
        let mut b = Script::of(&sent, &mut spill);
        assert_eq!(spill.len(), 2 * (41 - PACKED as usize));
        for _ in 0..41 {
            a.advance(&mut spill);
        }
        assert!(a.is_done());
        assert!(b.skip(&mut spill), "a Sync ends it");
        assert!(spill.is_empty());
    }

    #[test]
    fn a_dropped_sync_leaves_the_script() {
        let mut spill = VecDeque::new();
        let sent = [msg(b'B', b""), msg(b'E', b""), msg(b'S', b"")].concat();
        let mut s = Script::of(&sent, &mut spill);
        s.drop_ready(&mut spill);
        assert!(matches!(s.fit(b'2'), Ok(Fit::Next)));
        s.advance(&mut spill);
        assert!(matches!(s.fit(b'D'), Ok(Fit::Within)));
        assert!(matches!(s.fit(b'C'), Ok(Fit::Next)));
        s.advance(&mut spill);
        assert!(s.is_done());
        assert!(!s.skip(&mut spill), "no Sync of its own");
    }

    #[test]
    fn an_answer_out_of_turn_is_a_violation() {
        let mut spill = VecDeque::new();
        let sent = [msg(b'B', b""), msg(b'E', b""), msg(b'S', b"")].concat();
        let s = Script::of(&sent, &mut spill);
        // ParseComplete where no Parse was sent, a row before its BindComplete, a
        // ReadyForQuery before the Execute's completion.
        for tag in [b'1', b'D', b'Z', b't', b'T'] {
            let e = s.fit(tag).expect_err("out of turn");
            assert!(e.0.contains("BindComplete was due"), "{e}");
        }
    }
}
