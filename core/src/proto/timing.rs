//! The connection's time-dependent rules, with time as a parameter: per-statement server-time
//! estimates, how one drain's span is shared among its units, the in-flight work limit,
//! reconnect backoff and idle retirement.
//!
//! Nothing here reads a clock. The connection task passes the runtime's `now` into each call,
//! in this order within one tick: [`Estimator::unit_done`] for every unit a drain completes,
//! then [`Estimator::end_drain`]; [`Estimator::admits`] and [`Estimator::sent`] for every unit
//! the pump moves; [`Estimator::idle_due`] when the pipeline is empty; [`Silence::heard`]
//! after each drain, [`Silence::busy`] when the pump moves units, [`Silence::quiet`] when
//! the pipeline is empty and [`Silence::due`] to arm the half-open check. So every rule is tested
//! with made-up instants, without sockets or sleeps.

use std::time::{Duration, Instant};

/// A duration in whole nanoseconds, saturating (estimates and their limits are `u64` ns).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The estimate used for a statement never observed yet: about a trivial statement's server time
/// here, so a burst of first uses neither trips the in-flight work limit nor looks slow.
pub(crate) const DEFAULT_COST_NS: u64 = 20_000;

/// The in-flight work limit holds windows of fewer units than this (or than a quarter of
/// `max_in_flight`): units heavy enough for it average over `max_queue_work / 16` each.
pub(crate) const HEAVY_WINDOW: usize = 16;

/// The in-flight window never adapts below this many units (what a direct connection needs to
/// keep its backend busy; it was the fixed window before the window adapted).
pub(crate) const MIN_WINDOW: usize = 64;

/// Folds one observed execution time `ns` into the estimate `old` (0: never observed): an EWMA
/// of weight 1/8, starting from [`DEFAULT_COST_NS`], that at most doubles per sample. A sample
/// can carry a stall that is not the statement's (a cold first execution, a client busy
/// elsewhere before it read the result, a late packet), so a few samples must not make a
/// trivial statement look slow; one that really takes 20 ms crosses a 2 ms threshold at its
/// seventh.
pub(crate) fn fold_sample(old: u64, ns: u64) -> u64 {
    let old = if old == 0 { DEFAULT_COST_NS } else { old };
    let ewma = (old - old / 8).saturating_add(ns / 8);
    ewma.min(old.saturating_mul(2)).max(1)
}

/// What the estimator samples: a statement's shared estimate.
pub(crate) trait Sampled {
    /// Folds in one sample (see [`fold_sample`]).
    fn observe(&self, ns: u64);
    /// Identifies the statement, so one drain samples it once.
    fn key(&self) -> usize;
}

/// Per-connection estimation state: when the last drain completed units, the round-trip floor,
/// the estimated work in flight, and the current drain's units.
pub(crate) struct Estimator<S> {
    /// When the previous drain completed units.
    last_done: Instant,
    /// The shortest trip (send to ReadyForQuery) of a unit sent to an empty pipeline: the round
    /// trip with next to no server work, taken off such units' samples so that estimates are
    /// server time, not latency.
    trip_floor: u64,
    /// Estimated server work of the units in flight (the adaptive in-flight limit's gauge).
    in_flight_cost: u64,
    /// The current drain's completed units with their estimates, and the statements already
    /// sampled in it (both reused across drains).
    batch: Vec<(Option<S>, u64)>,
    seen: Vec<usize>,
    /// When the current drain's first unit reached the head of the FIFO (server work began).
    batch_start: Option<Instant>,
    /// Estimated server time of the units sent, per unit (EWMA of weight 1/16): with the trip
    /// floor, the bandwidth-delay product that sizes the in-flight window.
    unit_cost: u64,
}

impl<S: Sampled> Estimator<S> {
    /// A connection that starts serving at `now`.
    pub(crate) fn new(now: Instant) -> Self {
        Estimator {
            last_done: now,
            trip_floor: u64::MAX,
            in_flight_cost: 0,
            batch: Vec::new(),
            seen: Vec::new(),
            batch_start: None,
            unit_cost: DEFAULT_COST_NS,
        }
    }

    /// How many units to keep in flight, at most `cap` (`max_in_flight`): the bandwidth-delay
    /// product of the connection — the units its backend completes in one round trip, the trip
    /// floor over the mean estimated unit cost — twice over (so the backend never runs dry while
    /// answers and new units cross), and at least [`MIN_WINDOW`]. A direct connection's round
    /// trip is a few units long, so it keeps [`MIN_WINDOW`] and its latency; at 10 ms of round
    /// trip and 20 µs units it grows to 1,000.
    pub(crate) fn window(&self, cap: usize) -> usize {
        if self.trip_floor == u64::MAX {
            return MIN_WINDOW.min(cap);
        }
        // Units estimated under 1 µs are estimates gone wrong, not 10,000-unit windows.
        let bdp = self.trip_floor / self.unit_cost.max(1_000);
        let want = usize::try_from(bdp.saturating_mul(2)).unwrap_or(usize::MAX);
        want.max(MIN_WINDOW).min(cap)
    }

    /// When units last completed (a unit sent with no clock reading is stamped with it).
    pub(crate) fn last_done(&self) -> Instant {
        self.last_done
    }

    /// Whether the adaptive in-flight limit lets a unit of estimated `cost` go now, with
    /// `in_flight` units on the wire: the estimated work in flight stays under `cap` while the
    /// units are few and heavy. One unit always goes, however slow, so an idle connection never
    /// stalls; and from `window` units on, the count governs: a window of cheap units is what
    /// pipelining needs, and their estimates swing with the machine's scheduling more than with
    /// their own cost.
    pub(crate) fn admits(&self, in_flight: usize, window: usize, cost: u64, cap: u64) -> bool {
        in_flight == 0 || in_flight >= window || self.in_flight_cost.saturating_add(cost) <= cap
    }

    /// A unit of estimated `cost` went on the wire.
    pub(crate) fn sent(&mut self, cost: u64) {
        self.in_flight_cost = self.in_flight_cost.saturating_add(cost);
        self.unit_cost = self.unit_cost - self.unit_cost / 16 + cost / 16;
    }

    /// A unit sent at `sent_at` completed in the drain of bytes read at `now`. `stmt` is the
    /// statement whose estimate the unit's share updates (`None` for prepares and failures,
    /// which take a share but update nothing), `estimate` its estimate when it was sent.
    pub(crate) fn unit_done(
        &mut self,
        now: Instant,
        sent_at: Instant,
        cost: u64,
        stmt: Option<S>,
        estimate: u64,
    ) {
        self.in_flight_cost = self.in_flight_cost.saturating_sub(cost);
        // Server work of this drain began when its first unit reached the head of the FIFO,
        // as seen from here (shifted by the round trip both ways, which cancels): when the
        // previous drain read the unit before it, or, if the unit was sent later than one round
        // trip before that, at its send plus the round trip (the backend sat idle meanwhile; on
        // a slow network that is most of the time).
        if self.batch_start.is_none() {
            if sent_at >= self.last_done {
                let trip = nanos(now.saturating_duration_since(sent_at));
                self.trip_floor = self.trip_floor.min(trip);
            }
            let floor = Duration::from_nanos(self.trip_floor);
            let arrived = sent_at.checked_add(floor).unwrap_or(sent_at);
            self.batch_start = Some(arrived.max(self.last_done));
        }
        self.batch.push((stmt, estimate));
    }

    /// The drain of bytes read at `now` is over; `pipeline_empty`: nothing is in flight after it.
    pub(crate) fn end_drain(&mut self, now: Instant, pipeline_empty: bool) {
        let Some(start) = self.batch_start.take() else {
            return;
        };
        self.last_done = now;
        // With units still in flight the backend was busy through the whole span, so the span
        // is server work. A drain that empties the pipeline ends with the backend idle for
        // however long the client took to read: several units sharing such a span would all be
        // charged the client's delay, so only a lone unit (its trip floor taken off) is sampled.
        if pipeline_empty && self.batch.len() > 1 {
            self.batch.clear();
        } else {
            attribute(
                &mut self.batch,
                &mut self.seen,
                now.saturating_duration_since(start),
            );
        }
    }

    /// The connection died: nothing is in flight any more.
    pub(crate) fn connection_lost(&mut self) {
        self.in_flight_cost = 0;
        self.batch.clear();
        self.batch_start = None;
    }

    /// When a connection idle since `last_active` (its last pump of work) retires after
    /// `idle_timeout` without any.
    pub(crate) fn idle_due(&self, last_active: Instant, idle_timeout: Duration) -> Instant {
        last_active.max(self.last_done) + idle_timeout
    }
}

/// Shares the server time of one drain's units among them in proportion to their estimates.
///
/// The units read in one batch completed at unknown moments before the read; only the batch's
/// span (from its first unit reaching the head of the FIFO to the read) is known. Split evenly,
/// a slow unit would lend its time to the fast ones beside it; given to the first unit alone,
/// each sample would carry the client's read delay. In proportion to the current estimates,
/// a batch of alike units splits evenly and a known slow one keeps its share, and a new slow
/// statement still grows its share sample by sample.
///
/// Each statement gets one sample per drain, however many of its units the drain completed
/// (they all have the same share): a stall that lands in one drain — a late packet, a client busy
/// elsewhere — is then one outlier for the estimate to absorb, not one per unit.
fn attribute<S: Sampled>(batch: &mut Vec<(Option<S>, u64)>, seen: &mut Vec<usize>, span: Duration) {
    let span = nanos(span);
    let total: u128 = batch.iter().map(|(_, e)| u128::from(*e)).sum();
    seen.clear();
    for (stmt, est) in batch.drain(..) {
        let Some(stmt) = stmt else { continue };
        let id = stmt.key();
        if total == 0 || seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let share = u128::from(span) * u128::from(est) / total;
        stmt.observe(u64::try_from(share).unwrap_or(u64::MAX));
    }
}

/// Reconnect delays of a shared connection: exponential from 50 ms to 5 s, and at least 30 s
/// after the server refused the credentials (they do not fix themselves in milliseconds;
/// retrying fast would only lock accounts and flood the server's log with failed logins).
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    const START: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(5);
    const AUTH: Duration = Duration::from_secs(30);
    const WRONG_ROLE_MAX: Duration = Duration::from_secs(1);

    /// A connection that has not failed yet.
    pub(crate) fn new() -> Self {
        Backoff { next: Self::START }
    }

    /// The connection served again: the next failure starts over.
    pub(crate) fn reset(&mut self) {
        self.next = Self::START;
    }

    /// The wait before the next attempt, after a failure (`auth`: the credentials were
    /// refused).
    pub(crate) fn after_failure(&mut self, auth: bool) -> Duration {
        if auth {
            self.next = self.next.max(Self::AUTH);
        }
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        delay
    }

    /// The wait after every server answered with the wrong role for `target_session_attrs`:
    /// during a failover a standby becomes the primary within seconds, so the wait is capped
    /// at a second.
    pub(crate) fn after_wrong_role(&mut self) -> Duration {
        self.next = self.next.min(Self::WRONG_ROLE_MAX);
        let delay = self.next;
        self.next = (self.next * 2).min(Self::WRONG_ROLE_MAX);
        delay
    }
}

/// How long a connection with work in flight has heard nothing from the server: after
/// `health_check` of it, the task asks the server whether the connection is half-open
/// (`driver/health.rs`). Bytes heard restart the wait; so does an inconclusive check.
#[derive(Debug, Default)]
pub(crate) struct Silence {
    since: Option<Instant>,
}

impl Silence {
    /// Units went out: if none were waiting before, the wait starts now.
    pub(crate) fn busy(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    /// The server said something (or a check found it working): the wait restarts.
    pub(crate) fn heard(&mut self, now: Instant) {
        if let Some(since) = &mut self.since {
            *since = now;
        }
    }

    /// Nothing waits for the server: there is no silence to measure.
    pub(crate) fn quiet(&mut self) {
        self.since = None;
    }

    /// When the connection should be checked, if it is waiting for the server.
    pub(crate) fn due(&self, after: Duration) -> Option<Instant> {
        self.since.map(|s| s + after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    const MS: u64 = 1_000_000;

    /// A statement's estimate cell, as the driver's statements share one.
    #[derive(Clone, Default)]
    struct Stmt(Rc<Cell<u64>>);

    impl Stmt {
        fn estimate_ns(&self) -> u64 {
            match self.0.get() {
                0 => DEFAULT_COST_NS,
                c => c,
            }
        }
    }

    impl Sampled for Stmt {
        fn observe(&self, ns: u64) {
            self.0.set(fold_sample(self.0.get(), ns));
        }
        fn key(&self) -> usize {
            Rc::as_ptr(&self.0) as usize
        }
    }

    fn at(base: Instant, us: u64) -> Instant {
        base + Duration::from_micros(us)
    }

    #[test]
    fn estimates_start_low_and_at_most_double_per_sample() {
        let s = Stmt::default();
        assert_eq!(s.estimate_ns(), DEFAULT_COST_NS);
        // A statement that really takes 20 ms crosses 2 ms at its seventh sample.
        let mut seen = Vec::new();
        for _ in 0..7 {
            s.observe(20 * MS);
            seen.push(s.estimate_ns());
        }
        assert_eq!(seen[0], 2 * DEFAULT_COST_NS);
        assert!(seen.windows(2).all(|w| w[1] <= 2 * w[0]), "{seen:?}");
        assert!(seen[5] < 2 * MS && seen[6] >= 2 * MS, "{seen:?}");
        // Then it follows the samples as an EWMA of weight 1/8.
        for _ in 0..60 {
            s.observe(20 * MS);
        }
        let before = s.estimate_ns();
        assert!(before > 19 * MS, "{before}");
        s.observe(0);
        assert_eq!(s.estimate_ns(), before - before / 8);
    }

    #[test]
    fn six_stalls_in_a_row_do_not_make_a_trivial_statement_slow() {
        let s = Stmt::default();
        for _ in 0..6 {
            s.observe(50 * MS);
        }
        assert!(s.estimate_ns() < 2 * MS, "{}", s.estimate_ns());
        // Back to normal samples, the estimate falls back quickly.
        for _ in 0..40 {
            s.observe(20_000);
        }
        assert!(s.estimate_ns() < 100_000, "{}", s.estimate_ns());
    }

    #[test]
    fn a_drain_span_is_shared_in_proportion_to_estimates_once_per_statement() {
        let slow = Stmt::default();
        let fast = Stmt::default();
        for _ in 0..80 {
            slow.observe(10 * MS);
            fast.observe(10_000);
        }
        let (e_slow, e_fast) = (slow.estimate_ns(), fast.estimate_ns());
        // One drain: the slow unit and ten fast ones completed within 10.1 ms.
        let mut batch = vec![(Some(slow.clone()), e_slow)];
        batch.extend((0..10).map(|_| (Some(fast.clone()), e_fast)));
        let mut seen = Vec::new();
        attribute(&mut batch, &mut seen, Duration::from_micros(10_100));
        assert!(batch.is_empty());
        // Each got its share: the slow one ~10 ms, the fast ones ~10 µs; not 0.9 ms each
        // (an even split) and not one big sample for whichever came first.
        let (after_slow, after_fast) = (slow.estimate_ns(), fast.estimate_ns());
        assert!(
            after_slow.abs_diff(e_slow) < e_slow / 50,
            "{e_slow} -> {after_slow}"
        );
        assert!(
            after_fast.abs_diff(e_fast) < e_fast / 50,
            "{e_fast} -> {after_fast}"
        );
        // Ten units of one statement in one drain are one sample, not ten.
        let lone = Stmt::default();
        let mut batch: Vec<_> = (0..10)
            .map(|_| (Some(lone.clone()), DEFAULT_COST_NS))
            .collect();
        attribute(&mut batch, &mut seen, Duration::from_millis(100));
        assert_eq!(lone.estimate_ns(), 2 * DEFAULT_COST_NS);
        // Failed units and prepares take a share but update nothing.
        let mut batch = vec![(None, DEFAULT_COST_NS), (Some(fast.clone()), e_fast)];
        let before = fast.estimate_ns();
        attribute(&mut batch, &mut seen, Duration::from_micros(20));
        assert!(fast.estimate_ns() < before);
    }

    #[test]
    fn a_lone_unit_is_charged_its_trip_less_the_round_trip_floor() {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        let ping = Stmt::default();
        // A trivial unit on an idle connection: 1 ms there and back sets the floor.
        e.sent(DEFAULT_COST_NS);
        e.unit_done(
            at(t0, 1_000),
            at(t0, 0),
            DEFAULT_COST_NS,
            Some(ping.clone()),
            DEFAULT_COST_NS,
        );
        e.end_drain(at(t0, 1_000), true);
        // A 5 ms statement on the same 1 ms network is charged about 5 ms, not 6.
        let slow = Stmt::default();
        for i in 0..40u64 {
            let sent = at(t0, 10_000 + i * 10_000);
            e.sent(slow.estimate_ns());
            let est = slow.estimate_ns();
            e.unit_done(
                at(t0, 16_000 + i * 10_000),
                sent,
                est,
                Some(slow.clone()),
                est,
            );
            e.end_drain(at(t0, 16_000 + i * 10_000), true);
        }
        let est = slow.estimate_ns();
        assert!((4_800_000..5_200_000).contains(&est), "{est}");
        assert_eq!(e.in_flight_cost, 0);
    }

    #[test]
    fn several_units_ending_an_idle_drain_are_not_sampled() {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        let s = Stmt::default();
        let other = Stmt::default();
        // Two units read together after the client was busy for 50 ms: the span is the
        // client's delay, not server work.
        e.unit_done(at(t0, 50_000), t0, 0, Some(s.clone()), DEFAULT_COST_NS);
        e.unit_done(at(t0, 50_000), t0, 0, Some(other.clone()), DEFAULT_COST_NS);
        e.end_drain(at(t0, 50_000), true);
        assert_eq!((s.0.get(), other.0.get()), (0, 0));
        // The same two with more in flight behind them: the backend was busy, they are sampled.
        e.unit_done(
            at(t0, 60_000),
            at(t0, 50_000),
            0,
            Some(s.clone()),
            DEFAULT_COST_NS,
        );
        e.unit_done(
            at(t0, 60_000),
            at(t0, 50_000),
            0,
            Some(other.clone()),
            DEFAULT_COST_NS,
        );
        e.end_drain(at(t0, 60_000), false);
        assert!(s.0.get() > 0 && other.0.get() > 0);
        assert_eq!(e.last_done(), at(t0, 60_000));
    }

    #[test]
    fn the_work_limit_always_lets_one_unit_go_and_counts_from_the_window_on() {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        let cap = 10 * MS;
        // An idle connection takes a unit of any cost.
        assert!(e.admits(0, 16, 100 * MS, cap));
        e.sent(8 * MS);
        // Few heavy units: the work in flight stays under the cap.
        assert!(e.admits(1, 16, MS, cap));
        assert!(!e.admits(1, 16, 3 * MS, cap));
        // From the window on, the count governs.
        assert!(e.admits(16, 16, 3 * MS, cap));
        e.unit_done(at(t0, 9_000), t0, 8 * MS, None, 8 * MS);
        e.end_drain(at(t0, 9_000), true);
        assert!(e.admits(1, 16, 3 * MS, cap));
        e.sent(8 * MS);
        e.connection_lost();
        assert!(e.admits(1, 16, 10 * MS, cap));
    }

    #[test]
    fn idle_retirement_counts_from_the_last_work_either_way() {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        let idle = Duration::from_secs(10);
        assert_eq!(e.idle_due(at(t0, 5), idle), at(t0, 5) + idle);
        e.unit_done(at(t0, 2_000), at(t0, 1_000), 0, None, 0);
        e.end_drain(at(t0, 2_000), true);
        assert_eq!(e.idle_due(at(t0, 1_000), idle), at(t0, 2_000) + idle);
    }

    #[test]
    fn backoff_doubles_to_its_cap_waits_long_after_refused_credentials_and_resets() {
        let mut b = Backoff::new();
        let waits: Vec<_> = (0..9).map(|_| b.after_failure(false)).collect();
        assert_eq!(waits[0], Duration::from_millis(50));
        assert_eq!(waits[1], Duration::from_millis(100));
        assert_eq!(waits[8], Duration::from_secs(5));
        assert!(b.after_failure(true) >= Duration::from_secs(30));
        b.reset();
        assert_eq!(b.after_failure(false), Duration::from_millis(50));
    }

    #[test]
    fn silence_counts_from_the_last_sound_while_busy() {
        let base = Instant::now();
        let check = Duration::from_millis(100);
        let mut s = Silence::default();
        // Bytes heard while idle do not start a wait.
        s.heard(at(base, 5_000));
        assert_eq!(s.due(check), None);
        s.busy(at(base, 10_000));
        assert_eq!(s.due(check), Some(at(base, 110_000)));
        // More units going out do not move the start: the oldest wait counts.
        s.busy(at(base, 50_000));
        assert_eq!(s.due(check), Some(at(base, 110_000)));
        s.heard(at(base, 90_000));
        assert_eq!(s.due(check), Some(at(base, 190_000)));
        s.quiet();
        assert_eq!(s.due(check), None);
        s.busy(at(base, 300_000));
        assert_eq!(s.due(check), Some(at(base, 400_000)));
    }

    /// One trivial unit sent to an idle connection and answered `trip_us` later: the floor.
    fn with_trip(trip_us: u64) -> Estimator<Stmt> {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        e.sent(DEFAULT_COST_NS);
        e.unit_done(at(t0, trip_us), t0, DEFAULT_COST_NS, None, DEFAULT_COST_NS);
        e.end_drain(at(t0, trip_us), true);
        e
    }

    #[test]
    fn the_window_covers_twice_the_round_trip_and_never_shrinks_below_the_floor() {
        // Before any trip is known: the floor.
        let e = Estimator::<Stmt>::new(Instant::now());
        assert_eq!(e.window(1024), MIN_WINDOW);
        // Direct (100 µs of round trip, 20 µs units): 10 units, so the floor.
        assert_eq!(with_trip(100).window(1024), MIN_WINDOW);
        // 5 ms each way: 500 units per round trip, twice that.
        assert_eq!(with_trip(10_000).window(4096), 1000);
        // ... within the cap, and a cap under the floor is obeyed.
        assert_eq!(with_trip(10_000).window(1024), 1000);
        assert_eq!(with_trip(50_000).window(1024), 1024);
        assert_eq!(with_trip(10_000).window(8), 8);
        // Heavier units need fewer in flight for the same trip.
        let mut e = with_trip(10_000);
        for _ in 0..200 {
            e.sent(100_000);
        }
        assert!((190..=210).contains(&e.window(4096)), "{}", e.window(4096));
    }
}
