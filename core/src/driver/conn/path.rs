//! What stands between a connection and its server, and the rule that follows from it.
//!
//! PgBouncer before 1.21, in transaction mode, hands its server connection back to the pool
//! as soon as a ReadyForQuery answers the last Sync it has forwarded, even when it has already
//! forwarded the first messages of the client's next unit: it counts Syncs, not messages
//! (PgBouncer issue 759). The rest of that unit then reaches another backend, and the first
//! one ends with `invalid frontend message type` (the cut fell inside a message), stops
//! answering, or answers another client's statement with this unit's rows. PgBouncer forwards
//! a client's bytes as it reads them, and it reads a client until the socket is empty or it
//! has filled `sbuf_loopcnt` (5) buffers of `pkt_buf` (4 KiB) in one go; it turns to its
//! server connections only in between. So a cut falls inside a unit only when more than about
//! 20 KiB of the client's bytes wait unread (or a write reaches it in pieces). Behind a pooler
//! a connection therefore keeps at most [`POOLER_FLIGHT_BYTES`] of requests in flight (written
//! and not yet answered, which bounds what can wait unread), each write ends at a Sync (a
//! unit's, or the last of a segment's units sharing one: PgBouncer counts Syncs, so a segment
//! is one unit to it), and a unit larger than the bound goes out alone, when nothing is in
//! flight: then no ReadyForQuery is due while its bytes are forwarded. A pass adds to what is
//! in flight only once [`POOLER_REFILL_BYTES`] are free: PgBouncer forwards what it reads as
//! it reads it, so a trickle of small writes came back as a trickle of answers, one unit per
//! read, each costing PgBouncer and the client a wake-up of their own.
//!
//! Whether a pooler is in between is asked, not assumed: a shared connection's first unit is
//! a probe, `SELECT WHERE pg_backend_pid() = <the pid its startup named>`. One row: the client
//! talks to that backend itself. None (or an error): something in between hands out its own
//! keys. Until the answer, one round trip, the connection keeps the pooler's bound. Exclusive
//! connections do not probe (their unit counts belong to their holders): they keep the bound
//! once the client knows of a pooler (a probe found one, or statements are not kept by name).

use std::fmt::Write as _;
use std::time::Instant;

use bytes::BufMut;

use super::{Conn, Sent};
use crate::driver::shared::Token;
use crate::proto::UnitKind;

/// The most bytes of requests a connection keeps in flight through a pooler: below the
/// 20 KiB PgBouncer reads from one client before it looks at its servers (5 × 4 KiB, its
/// defaults), with room for the few bytes of a split header it keeps between reads.
pub(crate) const POOLER_FLIGHT_BYTES: usize = 16 * 1024;
/// Room that must be free before a pass adds to what is in flight through a pooler (half the
/// bound: writes of at least this much, unless less is queued).
pub(crate) const POOLER_REFILL_BYTES: usize = 8 * 1024;

/// What the connection knows of its path to the server.
pub(super) enum Path {
    /// The probe is in flight; until its answer the pooler's bound applies.
    Probing,
    /// The backend answering is the one the startup named.
    Direct,
    /// Something in between hands out its own backend keys (or the probe could not tell).
    Pooler,
}

impl Conn {
    /// Sets the path of a connection just opened: a shared one sends its probe first, ahead
    /// of everything queued.
    pub(super) fn probe_path(&mut self, now: Instant) {
        if self.exclusive {
            self.path = Path::Direct;
            return;
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
        );
        self.pumped += (self.wbuf.len() - before) as u64;
        self.est.sent(0);
        self.path = Path::Probing;
    }

    /// Takes the probe's answer: `direct` when it named the backend the startup did.
    pub(super) fn settle_path(&mut self, direct: bool) {
        if direct {
            self.path = Path::Direct;
            return;
        }
        self.path = Path::Pooler;
        // The server's view of backends says nothing about this connection's.
        self.health = super::Health::Off;
        if self.shared.found_pooler() {
            crate::observe::pooler_in_between();
        }
    }

    /// The most bytes of requests this connection may have in flight; `None`: no bound
    /// beyond the window.
    pub(super) fn flight_limit(&self) -> Option<usize> {
        match self.path {
            Path::Direct if !self.shared.pooler_known() => None,
            _ => Some(POOLER_FLIGHT_BYTES),
        }
    }
}
