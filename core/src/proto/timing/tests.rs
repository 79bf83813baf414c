//! The time rules with made-up instants.

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
    attribute(&mut batch, &mut seen, Duration::from_micros(10_100), false);
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
    attribute(&mut batch, &mut seen, Duration::from_millis(100), false);
    assert_eq!(lone.estimate_ns(), 2 * DEFAULT_COST_NS);
    // Failed units and prepares take a share but update nothing.
    let mut batch = vec![(None, DEFAULT_COST_NS), (Some(fast.clone()), e_fast)];
    let before = fast.estimate_ns();
    attribute(&mut batch, &mut seen, Duration::from_micros(20), false);
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
    e.end_drain(at(t0, 1_000), true, Some(true));
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
        e.end_drain(at(t0, 16_000 + i * 10_000), true, Some(true));
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
    e.end_drain(at(t0, 50_000), true, Some(true));
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
    e.end_drain(at(t0, 60_000), false, Some(true));
    assert!(s.0.get() > 0 && other.0.get() > 0);
    assert_eq!(e.last_done(), at(t0, 60_000));
}

/// Lone units of a 50 µs statement, each read `late_us` after it was sent, on a machine
/// whose CPU verdict is `spare`: the statement's estimate after 40 of them, and how many
/// samples were skipped.
fn lone_late_reads(late_us: u64, spare: Option<bool>) -> (u64, u64) {
    let t0 = Instant::now();
    let mut e = Estimator::<Stmt>::new(t0);
    let s = Stmt::default();
    // The floor: a round trip of 30 µs with nothing else in flight.
    e.unit_done(at(t0, 30), t0, 0, None, 0);
    e.end_drain(at(t0, 30), true, spare);
    let mut skipped = 0;
    for i in 1..=40u64 {
        let sent = at(t0, i * 100_000);
        let est = s.estimate_ns();
        e.sent(est);
        let read = at(t0, i * 100_000 + 80 + late_us);
        e.unit_done(read, sent, est, Some(s.clone()), est);
        skipped += e.end_drain(read, true, spare);
    }
    (s.estimate_ns(), skipped)
}

#[test]
fn a_lone_answer_read_late_on_a_saturated_machine_is_not_server_time() {
    // Read 8 ms late, as a client waiting for a CPU reads: with CPU to spare the span is
    // taken as server time, and the statement soon looks slow ...
    let (est, skipped) = lone_late_reads(8_000, Some(true));
    assert!(est > 2 * MS && skipped == 0, "{est} {skipped}");
    // ... but not while the machine has none, or is still being measured: the suspect
    // samples are skipped.
    let (est, skipped) = lone_late_reads(8_000, Some(false));
    assert_eq!((est, skipped), (DEFAULT_COST_NS, 40));
    let (est, skipped) = lone_late_reads(8_000, None);
    assert_eq!((est, skipped), (DEFAULT_COST_NS, 40));
    // Answers on time are sampled on a saturated machine too: about 50 µs.
    let (est, skipped) = lone_late_reads(0, Some(false));
    assert!(
        (45_000..60_000).contains(&est) && skipped == 0,
        "{est} {skipped}"
    );
    // A sample just under the suspect floor still counts: it cannot make a lane.
    let (est, skipped) = lone_late_reads(150, Some(false));
    assert!(est > 150_000 && skipped == 0, "{est} {skipped}");
}

#[test]
fn a_busy_backend_span_counts_on_a_saturated_machine_at_most_as_twice_the_estimate() {
    // A 5 ms statement with work queued behind it (the pipeline is not empty after its
    // drain): the span is the backend's, but on a machine without spare CPU it may be the
    // backend's wait for one, so each sample counts as at most twice the estimate.
    let run = |spare: Option<bool>, n: u64| {
        let t0 = Instant::now();
        let mut e = Estimator::<Stmt>::new(t0);
        e.unit_done(at(t0, 30), t0, 0, None, 0);
        e.end_drain(at(t0, 30), true, spare);
        let slow = Stmt::default();
        let mut cut = 0;
        // Each sent 1 ms before the one ahead of it completes, each read 5 ms after that.
        for i in 1..=n {
            let sent = at(t0, i * 5_000 - 1_000);
            let est = slow.estimate_ns();
            e.sent(est);
            let read = at(t0, (i + 1) * 5_000);
            e.unit_done(read, sent, est, Some(slow.clone()), est);
            cut += e.end_drain(read, false, spare);
        }
        (slow.estimate_ns(), cut)
    };
    // With CPU to spare: past 2 ms at the eighth sample.
    let (est, cut) = run(Some(true), 8);
    assert!(est > 2 * MS && cut == 0, "{est} {cut}");
    // Without: an eighth per sample, so one stall cannot double a cheap statement's estimate
    // ...
    let (est, cut) = run(Some(false), 1);
    assert_eq!((est, cut), (DEFAULT_COST_NS * 9 / 8, 1));
    // ... and a statement that really is slow is slow all the same, at the 40th sample.
    let (est, _) = run(Some(false), 39);
    assert!(est < 2 * MS, "{est}");
    let (est, cut) = run(Some(false), 40);
    assert!(est > 2 * MS && cut == 40, "{est} {cut}");
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
    e.end_drain(at(t0, 9_000), true, Some(true));
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
    e.end_drain(at(t0, 2_000), true, Some(true));
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
    e.end_drain(at(t0, trip_us), true, Some(true));
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
