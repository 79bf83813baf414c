//! What stands between a connection and its server, and how it may write because of it.
//!
//! PgBouncer before 1.21, in transaction mode, hands its server connection back to the pool
//! as soon as a ReadyForQuery answers the last Sync it has forwarded, even when it has already
//! forwarded the first messages of the client's next unit: it counts Syncs, not messages
//! (PgBouncer issue 759). The rest of that unit then reaches another backend: the first one
//! ends with `invalid frontend message type` (the cut fell inside a message), stops
//! answering, or answers another client's statement with this unit's rows, and a
//! transaction's statements commit outside it. A write that reaches PgBouncer in pieces (a
//! late TCP segment, a retransmission) is enough: no bound on bytes in flight prevents it
//! (`tests/conformance/pieces.rs` cuts writes so and checks every answer and write).
//!
//! So behind a transaction pooler a connection writes [`Writes::OneSync`]: nothing while a
//! Sync is unanswered. Then no ReadyForQuery is due while any part of a unit is on its way,
//! and the pooler cannot release the link in the middle of one, however the bytes arrive.
//! What still shares a round trip shares that one Sync: cheap reads (Sync coalescing, with
//! the ones an error made the server skip sent again as one segment), an atomic batch's
//! statements, a transaction's BEGIN with its first statement. Pipelining several Syncs
//! through such a pooler ([`Writes::Bounded`], at most [`POOLER_FLIGHT_BYTES`] in flight) is
//! the explicit `pooler=transaction-pipelined`.
//!
//! Whether a pooler is in between is declared (`pooler`) or, by default, asked: a shared
//! connection's first unit is a probe, `SELECT WHERE pg_backend_pid() = <the pid its startup
//! named>`. One row: the client talks to that backend itself. None (or an error): something
//! in between hands out its own keys, whose pool mode the probe cannot see, so it is taken
//! for a transaction pooler. Until the answer (one round trip) the probe is the one Sync in
//! flight. Exclusive connections do not probe (their unit counts belong to their holders):
//! they write freely only once a probe of the client has proved a path direct and none has
//! found a pooler.

use std::fmt::Write as _;
use std::time::Instant;

use bytes::BufMut;

use super::{Conn, Sent};
use crate::config::Pooler;
use crate::driver::shared::Token;
use crate::proto::UnitKind;

/// The most bytes of requests a connection keeps in flight through a pooler with
/// `pooler=transaction-pipelined`: below the 20 KiB PgBouncer reads from one client before it
/// looks at its servers (5 × 4 KiB, its defaults), with room for the few bytes of a split
/// header it keeps between reads. It keeps PgBouncer's reads from cutting a unit; it cannot
/// keep the network from doing so.
pub(crate) const POOLER_FLIGHT_BYTES: usize = 16 * 1024;
/// Room that must be free before a pass adds to what is in flight under that bound (half of
/// it: writes of at least this much, unless less is queued), so that writes and the answers
/// they draw come in batches, not a unit for every unit answered.
pub(crate) const POOLER_REFILL_BYTES: usize = 8 * 1024;

/// What the connection knows of its path to the server.
pub(super) enum Path {
    /// The probe is in flight.
    Probing,
    /// The backend answering is the one the startup named (or `pooler=none` says so).
    Direct,
    /// Something in between hands out its own backend keys, or is declared.
    Pooler,
}

/// How a connection may write, given its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Pipelined, within the window.
    Free,
    /// Nothing while a Sync is unanswered: one unit, or one segment of units sharing a Sync,
    /// at a time.
    OneSync,
    /// Pipelined within [`POOLER_FLIGHT_BYTES`], each write ending at a Sync.
    Bounded,
}

impl Conn {
    /// Sets the path of a connection just opened: declared, or asked by a shared one with its
    /// probe, which goes out first, ahead of everything queued.
    pub(super) fn probe_path(&mut self, now: Instant) {
        match self.cfg.pooler {
            Pooler::None => {
                self.path = Path::Direct;
                return;
            }
            Pooler::Session | Pooler::Transaction | Pooler::TransactionPipelined => {
                self.path = Path::Pooler;
                self.health = super::Health::Off;
                return;
            }
            Pooler::Auto if self.exclusive => {
                self.path = Path::Direct;
                return;
            }
            Pooler::Auto => {}
        }
        let Some((pid, _)) = self.session.backend_key else {
            // No key to compare (and no cancel either): nothing proves the path direct.
            self.path = Path::Pooler;
            return;
        };
        // Written in place, not through a formatted String: one probe per connection, no
        // allocation (the allocation gate counts them).
        let before = self.wbuf.len();
        self.wbuf.put_u8(b'Q');
        self.wbuf.put_i32(0);
        self.wbuf
            .extend_from_slice(b"SELECT WHERE pg_catalog.pg_backend_pid() = ");
        // The key's pid is an i32 (protocol); fmt::Write into BytesMut cannot fail.
        let _ = write!(self.wbuf, "{pid}");
        self.wbuf.put_u8(0);
        let len = (self.wbuf.len() - before - 1) as i32;
        self.wbuf[before + 1..before + 5].copy_from_slice(&len.to_be_bytes());
        self.pipeline.push(
            Sent {
                token: Token::Data,
                start: self.pumped,
                cost: 0,
                stmt: None,
                sent_at: now,
                replay: 0,
                joined: false,
                internal: true,
            },
            UnitKind::Simple,
            &self.wbuf[before..],
        );
        self.pumped += (self.wbuf.len() - before) as u64;
        self.est.sent(0);
        self.path = Path::Probing;
    }

    /// Takes the probe's answer: `direct` when it named the backend the startup did.
    pub(super) fn settle_path(&mut self, direct: bool) {
        if direct {
            self.path = Path::Direct;
            self.shared.found_direct();
            return;
        }
        self.path = Path::Pooler;
        // The server's view of backends says nothing about this connection's.
        self.health = super::Health::Off;
        if self.shared.found_pooler() {
            crate::observe::pooler_in_between();
        }
    }

    /// How this connection may write now.
    pub(crate) fn writes(&self) -> Writes {
        match self.cfg.pooler {
            Pooler::None | Pooler::Session => Writes::Free,
            Pooler::Transaction => Writes::OneSync,
            Pooler::TransactionPipelined => Writes::Bounded,
            Pooler::Auto => {
                let direct = match self.exclusive {
                    false => matches!(self.path, Path::Direct),
                    true => self.shared.direct_seen(),
                };
                // A pooler known to the client (declared by `named_statements=off`, found by
                // another connection, or by a vanished statement) outweighs one probe.
                if direct && !self.shared.pooler_known() {
                    Writes::Free
                } else {
                    Writes::OneSync
                }
            }
        }
    }
}
