//! What a unit's messages call for, and the check of every answer against it: each frontend
//! message a unit sent calls for one answer, in order — ParseComplete for a Parse,
//! BindComplete for a Bind, a ParameterDescription and a row description for a Describe of a
//! statement, a row description for a Describe of a portal, rows and a completion for an
//! Execute, CloseComplete for a Close, ReadyForQuery for a Sync; a simple Query calls for
//! anything up to its ReadyForQuery. An ErrorResponse makes the server skip to the Sync. An
//! answer that is not the one due is a protocol violation: behind a pooler that mixed two
//! clients' units up, it is often the first sign (`docs/FAULTS.md` says what this catches and
//! what no client can).
//!
//! The script is read from the unit's bytes as written ([`Script::of`]), or, for the hot
//! path's executions, given by their encoder ([`Script::execution`], held to the bytes by a
//! test). It is packed in a `u64`, four bits an answer, first answer lowest: a point select's
//! `Bind Execute Sync` is three nibbles, each answer checked with a table load and a shift.
//! A unit of more answers (a batch of many statements) keeps the rest in the pipeline's spill,
//! in FIFO order, up to its ReadyForQuery; [`MORE`] in its top nibble says so.

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
/// DataRows, then a CommandComplete that names SELECT (an execution whose text fixes it: see
/// [`Completes`]); the four after it name INSERT, UPDATE, DELETE and MERGE.
const ROWS_SELECT: u8 = 9;
const ROWS_INSERT: u8 = 10;
const ROWS_UPDATE: u8 = 11;
const ROWS_DELETE: u8 = 12;
const ROWS_MERGE: u8 = 13;
/// The unit's further answers wait in the spill, through its ReadyForQuery. Only ever the top
/// nibble: what is left once the others are given.
const MORE: u8 = 0xF;

/// Answers a packed script holds besides [`MORE`].
const PACKED: u32 = 15;

/// The answer each frontend message calls for (0: none of its own: Flush, COPY data,
/// Terminate); a Describe of a statement calls for a ParameterDescription first.
const ANSWER: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'P' as usize] = PARSE;
    t[b'B' as usize] = BIND;
    t[b'D' as usize] = SHAPE;
    t[b'E' as usize] = ROWS;
    t[b'C' as usize] = CLOSE;
    t[b'S' as usize] = READY;
    t[b'Q' as usize] = QUERY;
    t
};

/// What a backend message is to each answer due, indexed by the answer's code (a nibble, so
/// no bound to check) and the message's type: [`NO`], [`WITHIN`] (part of it) or [`NEXT`]
/// (the whole of it, or its end).
const FITS: [[u8; 256]; 16] = {
    let mut t = [[NO; 256]; 16];
    t[PARSE as usize][b'1' as usize] = NEXT;
    t[BIND as usize][b'2' as usize] = NEXT;
    t[PARAMS as usize][b't' as usize] = NEXT;
    t[SHAPE as usize][b'T' as usize] = NEXT;
    t[SHAPE as usize][b'n' as usize] = NEXT;
    t[ROWS as usize][b'D' as usize] = WITHIN;
    t[ROWS as usize][b'C' as usize] = NEXT;
    t[ROWS as usize][b'I' as usize] = NEXT;
    // A statement whose text fixes its command is not empty: no EmptyQueryResponse.
    let mut code = ROWS_SELECT;
    while code <= ROWS_MERGE {
        t[code as usize][b'D' as usize] = WITHIN;
        t[code as usize][b'C' as usize] = NEXT;
        code += 1;
    }
    t[CLOSE as usize][b'3' as usize] = NEXT;
    t[READY as usize][b'Z' as usize] = NEXT;
    t[QUERY as usize][b'Z' as usize] = NEXT;
    let within = [b'T', b'D', b'C', b'I', b'G', b'H', b'W', b'd', b'c'];
    let mut i = 0;
    while i < within.len() {
        t[QUERY as usize][within[i] as usize] = WITHIN;
        i += 1;
    }
    t
};
/// Not the answer due.
pub(super) const NO: u8 = 0;
/// Part of the answer due (a row, a COPY message, a simple query's results).
pub(super) const WITHIN: u8 = 1;
/// The answer due, or its end: the next one is due.
pub(super) const NEXT: u8 = 2;

/// The scripts of execution units, by `parse | before << 1 | after << 2`
/// ([`Script::execution`]).
const EXECUTIONS: [u64; 8] = {
    const CONTROL: u64 = PARSE as u64 | (BIND as u64) << 4 | (ROWS as u64) << 8;
    let mut t = [0u64; 8];
    let mut i = 0;
    while i < 8 {
        let (parse, before, after) = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
        let (mut packed, mut shift) = (0u64, 0);
        if before {
            packed |= CONTROL;
            shift += 12;
        }
        if parse {
            packed |= (PARSE as u64) << shift;
            shift += 4;
        }
        packed |= ((BIND as u64) | (ROWS as u64) << 4) << shift;
        shift += 8;
        if after {
            packed |= CONTROL << shift;
            shift += 12;
        }
        t[i] = packed | (READY as u64) << shift;
        i += 1;
    }
    t
};

/// The command an execution's CommandComplete must name, where its statement's text fixes it
/// (its first keyword: `guard::command_verb`). Rules keep it too: PostgreSQL reports the
/// original command's type. An answer of the right shape that names another command is
/// another statement's.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Completes {
    /// Not fixed by the text (WITH, a parenthesized query, anything else).
    #[default]
    Any,
    /// SELECT (also for VALUES and TABLE).
    Select,
    /// INSERT.
    Insert,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
    /// MERGE.
    Merge,
}

impl Completes {
    /// For the verb `guard::command_verb` gives.
    pub(crate) fn of_verb(verb: Option<&str>) -> Completes {
        match verb {
            Some("SELECT") => Completes::Select,
            Some("INSERT") => Completes::Insert,
            Some("UPDATE") => Completes::Update,
            Some("DELETE") => Completes::Delete,
            Some("MERGE") => Completes::Merge,
            _ => Completes::Any,
        }
    }

    fn code(self) -> u8 {
        match self {
            Completes::Any => ROWS,
            Completes::Select => ROWS_SELECT,
            Completes::Insert => ROWS_INSERT,
            Completes::Update => ROWS_UPDATE,
            Completes::Delete => ROWS_DELETE,
            Completes::Merge => ROWS_MERGE,
        }
    }
}

/// The answers due for one unit, in order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Script(u64);

impl Script {
    /// The script of `sent`, a unit's whole frontend messages; answers beyond a packed
    /// script's go to the back of `spill`.
    #[inline]
    pub(super) fn of(sent: &[u8], spill: &mut VecDeque<u8>) -> Script {
        let mut packed = 0u64;
        let mut n = 0u32;
        let mut at = 0usize;
        while let Some(head) = sent.get(at..at + 5) {
            let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            let mut codes = [ANSWER[usize::from(head[0])], 0];
            if head[0] == b'D' && sent.get(at + 5) == Some(&b'S') {
                codes = [PARAMS, SHAPE];
            }
            for code in codes {
                if code == 0 {
                    continue;
                }
                if n == PACKED {
                    // The rest waits in the spill, up to the unit's ReadyForQuery.
                    packed |= u64::from(MORE) << (4 * PACKED);
                }
                if n < PACKED {
                    packed |= u64::from(code) << (4 * n);
                } else {
                    spill.push_back(code);
                }
                n += 1;
            }
            at = at.saturating_add(1).saturating_add(len.max(4));
        }
        Script(packed)
    }

    /// The script of an execution unit as `encode::execute_framed` writes it, without reading
    /// its bytes (the hot path's units): `[Parse Bind Execute]` for a statement before it,
    /// `[Parse]` when it carries its own, `Bind Execute`, `[Parse Bind Execute]` after, `Sync`.
    /// A test holds it to [`Script::of`] of the encoder's bytes.
    #[inline]
    pub const fn execution(parse: bool, before: bool, after: bool) -> Script {
        Script(EXECUTIONS[parse as usize | (before as usize) << 1 | (after as usize) << 2])
    }

    /// This execution script's own Execute must complete naming `c` (where its encoder's
    /// script was made without: [`Script::execution`] `(parse, before, _)`).
    #[inline]
    pub fn completing(self, c: Completes, parse: bool, before: bool) -> Script {
        let at = 4 * (3 * u32::from(before) + u32::from(parse) + 1);
        Script(self.0 + (u64::from(c.code() - ROWS) << at))
    }

    /// A CommandComplete with tag `body`: the answer due must be an execution's (or a simple
    /// query's), and the command it names the one its statement's text fixed, if it did.
    #[inline(always)]
    pub(super) fn complete(
        &mut self,
        body: &[u8],
        spill: &mut VecDeque<u8>,
    ) -> Result<(), ProtocolViolation> {
        let due = (self.0 & 0xF) as u8;
        match FITS[usize::from(due)][usize::from(b'C')] {
            NEXT if due >= ROWS_SELECT && !names(due, body) => Err(another_command(body)),
            NEXT => {
                self.advance(spill);
                Ok(())
            }
            // One statement of a simple query's text.
            WITHIN => Ok(()),
            _ => Err(self.violation(b'C')),
        }
    }

    /// Leaves out the last answer if it is a ReadyForQuery (the unit's Sync was dropped: the
    /// next unit's ends it). Only short units share a Sync, so it is in the packed script.
    pub(super) fn drop_ready(&mut self) {
        if self.0 == 0 {
            return;
        }
        let top = (63 - self.0.leading_zeros()) / 4;
        if (self.0 >> (4 * top)) & 0xF == u64::from(READY) {
            self.0 &= !(0xF << (4 * top));
        }
    }

    /// What backend message `tag` is to the answer due: [`NEXT`], [`WITHIN`] or [`NO`]
    /// (then [`Script::violation`] says so).
    #[inline(always)]
    pub(super) fn fit(&self, tag: u8) -> u8 {
        FITS[(self.0 & 0xF) as usize][usize::from(tag)]
    }

    /// The answer due was given: the next one is due.
    #[inline(always)]
    pub(super) fn advance(&mut self, spill: &mut VecDeque<u8>) {
        self.0 >>= 4;
        if self.0 == u64::from(MORE) {
            self.refill(spill);
        }
    }

    #[cold]
    fn refill(&mut self, spill: &mut VecDeque<u8>) {
        let mut packed = 0u64;
        for n in 0..PACKED {
            let Some(code) = spill.pop_front() else { break };
            packed |= u64::from(code) << (4 * n);
            if code == READY {
                self.0 = packed;
                return;
            }
        }
        // No ReadyForQuery yet: the unit's answers go on in the spill.
        self.0 = packed | u64::from(MORE) << (4 * PACKED);
    }

    /// Whether some of the unit's answers wait in the spill (its top nibble is [`MORE`]).
    fn spilled(&self) -> bool {
        self.0 != 0 && self.0 >> ((63 - self.0.leading_zeros()) / 4 * 4) == u64::from(MORE)
    }

    /// The unit was skipped (an earlier one sharing its Sync failed): none of its answers
    /// will come. Those in the spill leave it.
    pub(super) fn skip(&mut self, spill: &mut VecDeque<u8>) {
        if self.spilled() {
            while let Some(code) = spill.pop_front() {
                if code == READY {
                    break;
                }
            }
        }
        self.0 = 0;
    }

    /// The unit failed: the server skips the rest of it up to the Sync, so a ReadyForQuery
    /// is all that may come now (the one ending its segment, if it shares a Sync).
    pub(super) fn fail(&mut self, spill: &mut VecDeque<u8>) {
        self.skip(spill);
        self.0 = u64::from(READY);
    }

    /// Whether every answer due was given.
    pub(super) fn is_done(&self) -> bool {
        self.0 == 0
    }

    /// The violation of backend message `tag` arriving where it does not fit.
    #[cold]
    #[inline(never)]
    pub(super) fn violation(&self, tag: u8) -> ProtocolViolation {
        let due = match (self.0 & 0xF) as u8 {
            PARSE => "ParseComplete",
            BIND => "BindComplete",
            PARAMS => "ParameterDescription",
            SHAPE => "RowDescription or NoData",
            ROWS => "DataRow or CommandComplete",
            ROWS_SELECT => "DataRow or CommandComplete SELECT",
            ROWS_INSERT => "DataRow or CommandComplete INSERT",
            ROWS_UPDATE => "DataRow or CommandComplete UPDATE",
            ROWS_DELETE => "DataRow or CommandComplete DELETE",
            ROWS_MERGE => "DataRow or CommandComplete MERGE",
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
}

/// The first bytes of a CommandComplete naming each fixed command, with the space after the
/// verb (every such tag carries a count), and the mask of those bytes: one load and compare.
const VERBS: [(u64, u64); 5] = [
    tag_head(b"SELECT "),
    tag_head(b"INSERT "),
    tag_head(b"UPDATE "),
    tag_head(b"DELETE "),
    tag_head(b"MERGE "),
];

const fn tag_head(verb: &[u8]) -> (u64, u64) {
    let (mut value, mut mask) = (0u64, 0u64);
    let mut i = 0;
    while i < verb.len() {
        value |= (verb[i] as u64) << (8 * i);
        mask |= 0xFF << (8 * i);
        i += 1;
    }
    (value, mask)
}

/// Whether CommandComplete `body` (its tag) names the command of answer `due` (one of the
/// `ROWS_*` codes after [`ROWS`]).
#[inline(always)]
fn names(due: u8, body: &[u8]) -> bool {
    let Some((value, mask)) = VERBS.get(usize::from(due.wrapping_sub(ROWS_SELECT))) else {
        return true;
    };
    match body.first_chunk::<8>() {
        Some(head) => u64::from_le_bytes(*head) & mask == *value,
        // A count follows each of these verbs: "MERGE 1" and a NUL is the shortest.
        None => false,
    }
}

#[cold]
#[inline(never)]
fn another_command(body: &[u8]) -> ProtocolViolation {
    ProtocolViolation(format!(
        "CommandComplete {:?} names another command than its statement: not its answer",
        String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(body))
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
            out.push(match (s.0 & 0xF) as u8 {
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
    fn an_execution_is_scripted_as_the_encoder_writes_it() {
        use crate::proto::encode::{execute_framed, Frame};
        use postgres_types::Type;
        let v = 7i32;
        for name in ["s1", ""] {
            for before in [None, Some("BEGIN")] {
                for after in [None, Some("COMMIT")] {
                    let mut buf = bytes::BytesMut::new();
                    let frame = Frame { before, after };
                    execute_framed(name, "SELECT $1", &[Type::INT4], &[&v], frame, &mut buf)
                        .expect("encoded");
                    let mut spill = VecDeque::new();
                    assert_eq!(
                        Script::execution(name.is_empty(), before.is_some(), after.is_some()),
                        Script::of(&buf, &mut spill),
                        "{name:?} {frame:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_completion_must_name_the_command_its_text_fixes() {
        for (parse, before, after) in [
            (false, false, false),
            (true, true, true),
            (true, false, true),
        ] {
            let s = Script::execution(parse, before, after).completing(
                Completes::Insert,
                parse,
                before,
            );
            let mut spill = VecDeque::new();
            let mut s = s;
            // Up to its own Execute: the frame's and the parse's answers are plain.
            let skip = 3 * usize::from(before) + usize::from(parse) + 1;
            for _ in 0..skip {
                s.advance(&mut spill);
            }
            assert_eq!(s.fit(b'I'), NO, "its text is not empty");
            for wrong in [&b"SELECT 1\0"[..], b"INSERTED 1\0"] {
                let e = s
                    .clone()
                    .complete(wrong, &mut spill)
                    .expect_err("another command");
                assert!(e.0.contains("names another command"), "{e}");
            }
            s.complete(b"INSERT 0 1\0", &mut spill).expect("its own");
            if after {
                s.advance(&mut spill);
                s.advance(&mut spill);
                s.complete(b"COMMIT\0", &mut spill)
                    .expect("the frame's COMMIT names its own");
            }
        }
        assert_eq!(Completes::of_verb(Some("MERGE")), Completes::Merge);
        assert_eq!(Completes::of_verb(None), Completes::Any);
    }

    #[test]
    fn long_units_spill_in_order_and_come_back() {
        // Batches of 20 and 7 statements: 41 and 15 answers (the second fits exactly).
        let step = [msg(b'B', b""), msg(b'E', b"")].concat();
        let batch = |n: usize| -> Vec<u8> {
            let mut sent: Vec<u8> = (0..n).flat_map(|_| step.clone()).collect();
            sent.extend(msg(b'S', b""));
            sent
        };
        assert_eq!(due(&batch(20)), format!("{}Z", "2C".repeat(20)));
        assert_eq!(due(&batch(7)), format!("{}Z", "2C".repeat(7)));
        assert_eq!(due(&batch(8)), format!("{}Z", "2C".repeat(8)));
        // Three such units: each takes its own answers back from the spill.
        let mut spill = VecDeque::new();
        let mut a = Script::of(&batch(20), &mut spill);
        let mut b = Script::of(&batch(20), &mut spill);
        let mut c = Script::of(&batch(20), &mut spill);
        assert_eq!(spill.len(), 3 * (41 - PACKED as usize));
        for _ in 0..41 {
            a.advance(&mut spill);
        }
        assert!(a.is_done());
        // The second fails at once: only its ReadyForQuery may come, and its spill is gone.
        b.fail(&mut spill);
        assert_eq!(spill.len(), 41 - PACKED as usize);
        assert_eq!(b.fit(b'2'), NO);
        assert_eq!(b.fit(b'Z'), NEXT);
        b.advance(&mut spill);
        assert!(b.is_done());
        // The third is skipped halfway through its spill.
        for _ in 0..20 {
            c.advance(&mut spill);
        }
        c.skip(&mut spill);
        assert!(spill.is_empty());
    }

    #[test]
    fn a_dropped_sync_leaves_the_script() {
        let mut spill = VecDeque::new();
        let sent = [msg(b'B', b""), msg(b'E', b""), msg(b'S', b"")].concat();
        let mut s = Script::of(&sent, &mut spill);
        s.drop_ready();
        assert_eq!(s.fit(b'2'), NEXT);
        s.advance(&mut spill);
        assert_eq!(s.fit(b'D'), WITHIN);
        assert_eq!(s.fit(b'C'), NEXT);
        s.advance(&mut spill);
        assert!(s.is_done(), "no Sync of its own");
    }

    #[test]
    fn an_answer_out_of_turn_is_a_violation() {
        let mut spill = VecDeque::new();
        let sent = [msg(b'B', b""), msg(b'E', b""), msg(b'S', b"")].concat();
        let s = Script::of(&sent, &mut spill);
        // ParseComplete where no Parse was sent, a row before its BindComplete, a
        // ReadyForQuery before the Execute's completion.
        for tag in [b'1', b'D', b'Z', b't', b'T', 0xFF] {
            assert_eq!(s.fit(tag), NO);
            let e = s.violation(tag);
            assert!(e.0.contains("BindComplete was due"), "{e}");
        }
    }
}
