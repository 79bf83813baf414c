//! Which units share a Sync (Sync coalescing, `docs/ROUTING.md`): the bounds of a *segment*,
//! decided unit by unit as the connection task's pump takes units from the mailbox. No I/O: the
//! pump drops the Syncs this says to drop, and the in-flight FIFO
//! ([`crate::proto::Pipeline::join_last`]) completes and re-sends accordingly.

/// At most this many units share one Sync...
pub(crate) const MAX_SEGMENT: usize = 16;
/// ...each estimated at most this much server time (an eighth of the default slow
/// threshold)...
pub(crate) const CHEAP_NS: u64 = 250_000;
/// ...and together at most this much, which bounds how long the first unit's answer waits for
/// the segment's end (the server flushes at the Sync).
pub(crate) const SEGMENT_BUDGET_NS: u64 = 1_000_000;

/// The Sync message that ends every encoded execution unit.
pub(crate) const SYNC: [u8; 5] = [b'S', 0, 0, 0, 4];

/// What the pump knows of a unit as it takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unit {
    /// The guard proved its statement read-only, and the statement's cost was measured.
    pub(crate) read_only: bool,
    /// Its estimated server time in ns.
    pub(crate) cost: u64,
    /// Its statement's last execution failed.
    pub(crate) risky: bool,
    /// Its encoded bytes end in [`SYNC`] (the Sync the pump may drop).
    pub(crate) ends_in_sync: bool,
}

/// The segment the last unit taken belongs to, within one pump pass (a segment never waits for
/// units to come: it ends with the pass).
#[derive(Default, Debug)]
pub(crate) struct Segment {
    /// Units in it; 0: the last unit taken cannot be followed in a segment.
    len: usize,
    /// Their estimated server time.
    cost: u64,
}

impl Segment {
    /// Takes the next unit: `true` if it joins the previous unit's segment (the previous unit's
    /// Sync is to be dropped). `on`: coalescing is enabled on this connection.
    pub(crate) fn take(&mut self, on: bool, u: Unit) -> bool {
        let cheap = cheap(on, u);
        let join = self.joins(on, u);
        if join {
            self.len += 1;
            self.cost += u.cost;
        } else if cheap {
            self.len = 1;
            self.cost = u.cost;
        } else {
            self.len = 0;
        }
        if u.risky {
            // An error in it would make the server skip whatever came after it.
            self.len = 0;
        }
        join
    }

    /// Whether `u` would join the segment ([`Segment::take`] without taking it): the pump
    /// of a connection that may have one Sync outstanding takes nothing that would not.
    pub(crate) fn joins(&self, on: bool, u: Unit) -> bool {
        cheap(on, u)
            && self.len > 0
            && self.len < MAX_SEGMENT
            && self.cost + u.cost <= SEGMENT_BUDGET_NS
    }
}

/// A unit that may share a Sync at all.
fn cheap(on: bool, u: Unit) -> bool {
    on && u.read_only && u.ends_in_sync && u.cost > 0 && u.cost <= CHEAP_NS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(cost: u64) -> Unit {
        Unit {
            read_only: true,
            cost,
            risky: false,
            ends_in_sync: true,
        }
    }

    /// The joins of a run of units, as a string: `|` starts a segment, `+` joins one.
    fn segments(on: bool, units: &[Unit]) -> String {
        let mut s = Segment::default();
        units
            .iter()
            .map(|&u| if s.take(on, u) { '+' } else { '|' })
            .collect()
    }

    #[test]
    fn segments_end_at_the_count_and_the_budget() {
        let cheap = [unit(20_000); 40];
        assert_eq!(
            segments(true, &cheap),
            format!("|{0}|{0}|{1}", "+".repeat(15), "+".repeat(7))
        );
        // 250 µs each: four fit in 1 ms.
        assert_eq!(segments(true, &[unit(CHEAP_NS); 9]), "|+++|+++|");
        assert_eq!(segments(false, &cheap[..4]), "||||");
    }

    #[test]
    fn only_cheap_measured_read_only_units_with_a_sync_join() {
        let writer = Unit {
            read_only: false,
            ..unit(20_000)
        };
        let no_sync = Unit {
            ends_in_sync: false,
            ..unit(20_000)
        };
        let slow = unit(CHEAP_NS + 1);
        let unmeasured = unit(0);
        for odd in [writer, no_sync, slow, unmeasured] {
            let u = unit(20_000);
            assert_eq!(segments(true, &[u, odd, u, u]), "|||+", "{odd:?}");
        }
    }

    #[test]
    fn a_unit_whose_statement_failed_may_end_a_segment_but_not_precede_one() {
        let risky = Unit {
            risky: true,
            ..unit(20_000)
        };
        let u = unit(20_000);
        assert_eq!(segments(true, &[u, risky, u, u]), "|+|+");
        assert_eq!(segments(true, &[risky, u, u]), "||+");
    }
}
