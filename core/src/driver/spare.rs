//! Whether the machine has CPU to spare (`Config::spare_cpu_pct`), for two rules. An overflow
//! connection adds server capacity; a client whose machine has no idle CPU cannot use it, and
//! there its own queueing looks like server work (a statement's estimate runs from its send to
//! the read of its answer, and a read that waits for a CPU stretches it): overflow connections
//! open only while the machine has CPU to spare (`client/route.rs`), and on a machine without
//! any, server-time samples far above their estimates are discounted
//! (`proto::timing::Estimator::end_drain`). No I/O here: the samples are handed in.

use std::time::{Duration, Instant};

use crate::rt::CpuSample;

/// The verdict is measured over at least this long, and again at most this often (each
/// measurement is a read of `/proc/stat`): a saturated machine still shows idle moments of a
/// few tens of milliseconds (measured over 100 ms, the web benchmark's 99%-busy machine looked
/// spare often enough to open 9 overflow connections in a few seconds).
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The machine's idle share over a spell of checks, and its verdict. The client keeps one for
/// overflow (checked with every unit routed while the base connections are work-bound); each
/// connection keeps one for its estimates (checked at most every 100 ms while answers come), so
/// a connection needs no lock to ask; each reads `/proc/stat` at most once a second.
#[derive(Debug)]
pub(crate) struct SpareCpu {
    /// Idle share (percent of the machine's time) required; 0: the rule is off.
    min_pct: u8,
    /// The last check: checks come while the condition lasts (work-bound routing, answers
    /// coming), so a gap longer than [`SAMPLE_EVERY`] ends a spell.
    last_check: Option<Instant>,
    /// The sample the current interval runs from, and when it was taken.
    from: Option<(Instant, CpuSample)>,
    /// The last verdict; `None` until an interval was measured.
    spare: Option<bool>,
    /// When the counters last could not be read: not tried again for [`SAMPLE_EVERY`] (checks
    /// come with every unit routed while work-bound).
    unreadable: Option<Instant>,
}

impl SpareCpu {
    /// A gauge requiring `min_pct` percent of the machine's time idle.
    pub(crate) fn new(min_pct: u8) -> SpareCpu {
        SpareCpu {
            min_pct,
            last_check: None,
            from: None,
            spare: None,
            unreadable: None,
        }
    }

    /// Whether at least `min_pct` of the machine's time was idle over the last interval of at
    /// least [`SAMPLE_EVERY`] of this spell. A spell's first second measures and decides
    /// nothing: an interval that began before the spell (a client that sat idle, then met its
    /// load) would count a quiet past as spare CPU now. `sample` is called at most once per
    /// [`SAMPLE_EVERY`]. `None`: not measured yet (nothing opens, a suspect sample is
    /// skipped); where nothing can be measured the rules stand aside: `Some(true)`.
    pub(crate) fn check(
        &mut self,
        now: Instant,
        sample: impl FnOnce() -> Option<CpuSample>,
    ) -> Option<bool> {
        if self.min_pct == 0 {
            return Some(true);
        }
        if let Some(at) = self.unreadable {
            if now.saturating_duration_since(at) < SAMPLE_EVERY {
                return Some(true);
            }
        }
        let spell = self
            .last_check
            .is_some_and(|c| now.saturating_duration_since(c) <= SAMPLE_EVERY);
        self.last_check = Some(now);
        if let (true, Some((at, _))) = (spell, self.from) {
            if now.saturating_duration_since(at) < SAMPLE_EVERY {
                return self.spare;
            }
        }
        let Some(s) = sample() else {
            self.unreadable = Some(now);
            self.from = None;
            self.spare = None;
            return Some(true);
        };
        self.unreadable = None;
        match self.from {
            Some((_, prev)) if spell => {
                let total = s.total.saturating_sub(prev.total);
                // Counters that did not move measure nothing: the last verdict stands.
                if total > 0 {
                    let idle = s.idle.saturating_sub(prev.idle);
                    let spare = idle.saturating_mul(100) >= u64::from(self.min_pct) * total;
                    self.spare = Some(spare);
                }
            }
            // A new spell: the measurement starts here.
            _ => self.spare = None,
        }
        self.from = Some((now, s));
        self.spare
    }
}

impl SpareCpu {
    /// An overflow connection just opened: the next one waits for a second measured with it in
    /// place (the machine's idle share was measured without it), so connections open one at
    /// a time and only while each still leaves CPU to spare.
    pub(crate) fn opened(&mut self) {
        self.last_check = None;
        self.from = None;
        self.spare = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    fn s(idle: u64, total: u64) -> Option<CpuSample> {
        Some(CpuSample { idle, total })
    }

    /// Checks every 100 ms from `from` to `to` (ms), each seeing the same verdict `want`.
    fn spell(g: &mut SpareCpu, t0: Instant, from: u64, to: u64, want: Option<bool>, c: &mut u64) {
        for ms in (from..to).step_by(100) {
            let idle = *c;
            assert_eq!(
                g.check(at(t0, ms), || s(idle, idle * 20)),
                want,
                "at {ms} ms"
            );
        }
        *c += 1;
    }

    #[test]
    fn a_spell_measures_its_first_second_then_the_idle_share_decides() {
        let t0 = Instant::now();
        let mut g = SpareCpu::new(5);
        // The spell's first second: measuring, nothing opens.
        assert_eq!(g.check(at(t0, 0), || s(0, 0)), None);
        assert_eq!(
            g.check(at(t0, 500), || panic!("read within the second")),
            None
        );
        // 4 of 200 ticks idle: 2%, under 5%.
        assert_eq!(g.check(at(t0, 1000), || s(4, 200)), Some(false));
        assert_eq!(
            g.check(at(t0, 1500), || panic!("read within the second")),
            Some(false)
        );
        // 20 of 200 idle: 10%.
        assert_eq!(g.check(at(t0, 2000), || s(24, 400)), Some(true));
        // Exactly 5%; then 4.5%.
        assert_eq!(g.check(at(t0, 3000), || s(34, 600)), Some(true));
        assert_eq!(g.check(at(t0, 4000), || s(43, 800)), Some(false));
    }

    #[test]
    fn a_new_spell_does_not_count_the_quiet_before_it() {
        let t0 = Instant::now();
        let mut g = SpareCpu::new(5);
        let mut c = 1;
        spell(&mut g, t0, 0, 1000, None, &mut c);
        // Half idle over the next interval: spare.
        assert_eq!(g.check(at(t0, 1000), || s(1000, 2000)), Some(true));
        // A minute with no check (idle, as far as anyone knows), then work-bound again: the
        // spell measures its own first second, whatever the counters say of the minute.
        assert_eq!(g.check(at(t0, 61_000), || s(50_000, 60_000)), None);
        assert_eq!(
            g.check(at(t0, 61_500), || panic!("read within the second")),
            None
        );
        assert_eq!(g.check(at(t0, 62_000), || s(50_001, 60_200)), Some(false));
    }

    #[test]
    fn after_an_opening_the_next_waits_for_a_second_measured_with_it() {
        let t0 = Instant::now();
        let mut g = SpareCpu::new(5);
        assert_eq!(g.check(at(t0, 0), || s(0, 0)), None);
        assert_eq!(g.check(at(t0, 1000), || s(100, 200)), Some(true));
        g.opened();
        assert_eq!(g.check(at(t0, 1010), || s(101, 202)), None);
        assert_eq!(g.check(at(t0, 1500), || panic!("within the second")), None);
        assert_eq!(g.check(at(t0, 2010), || s(102, 402)), Some(false));
    }

    #[test]
    fn unmeasured_means_the_rule_stands_aside() {
        let t0 = Instant::now();
        let mut off = SpareCpu::new(0);
        assert_eq!(
            off.check(at(t0, 500), || panic!("the rule is off")),
            Some(true)
        );
        let mut none = SpareCpu::new(5);
        assert_eq!(none.check(at(t0, 500), || None), Some(true));
        // Not read again within the second (a connection checks with every answer).
        assert_eq!(
            none.check(at(t0, 600), || panic!("read within the second")),
            Some(true)
        );
        assert_eq!(none.check(at(t0, 1600), || None), Some(true));
        // Counters that did not move decide nothing: the last verdict stands.
        let mut g = SpareCpu::new(5);
        assert_eq!(g.check(at(t0, 0), || s(0, 100)), None);
        assert_eq!(g.check(at(t0, 1000), || s(50, 200)), Some(true));
        assert_eq!(g.check(at(t0, 2000), || s(50, 200)), Some(true));
    }
}
