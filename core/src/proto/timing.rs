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

/// On a machine without spare CPU, a sample over this and over twice its statement's estimate
/// is suspect: it may be a wait for a CPU rather than the statement's work (see
/// [`Estimator::end_drain`]). Below it, such waits cannot make a statement look slow.
pub(crate) const SUSPECT_NS: u64 = 250_000;

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
    /// `spare`: whether the machine had CPU to spare lately (`driver/spare.rs`; `None`: still
    /// measuring, which counts as none: a load that just began may already be saturating it).
    /// Returns how many samples were discounted for want of spare CPU.
    pub(crate) fn end_drain(
        &mut self,
        now: Instant,
        pipeline_empty: bool,
        spare: Option<bool>,
    ) -> u64 {
        let Some(start) = self.batch_start.take() else {
            return 0;
        };
        self.last_done = now;
        // With units still in flight the backend was busy through the whole span, so the span
        // is server work. A drain that empties the pipeline ends with the backend idle for
        // however long the client took to read: several units sharing such a span would all be
        // charged the client's delay, so only a lone unit (its trip floor taken off) is sampled.
        if pipeline_empty && self.batch.len() > 1 {
            self.batch.clear();
            return 0;
        }
        let span = now.saturating_duration_since(start);
        // On a machine without spare CPU (or not measured yet) a sample far above its estimate
        // is as likely the machine's as the statement's. A lone unit's is not taken: a client
        // waiting for a CPU reads late (5-21 ms measured for a 50 µs statement), which would
        // soon make it look slow enough for a lane of its own. A busy backend's span is server
        // time, but it includes the backend's own waits for a CPU (one waited 534 ms in a
        // run queue on the web benchmark's machine): it counts as at most twice the estimate,
        // so such a stall raises an estimate by an eighth instead of doubling it, while a
        // statement that really is slow still gets there (a 5 ms one past 2 ms at its 40th sample
        // instead of its 8th).
        let busy = spare != Some(true);
        if busy && pipeline_empty && suspect(&self.batch, span) {
            self.batch.clear();
            return 1;
        }
        attribute(&mut self.batch, &mut self.seen, span, busy)
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

/// Whether a sample of `ns` for a statement estimated at `est` is suspect on a machine
/// without spare CPU ([`SUSPECT_NS`]): it would raise the estimate more than noise does.
fn suspect_sample(ns: u64, est: u64) -> bool {
    ns > SUSPECT_NS.max(est.saturating_mul(2))
}

/// Whether a lone unit's `span` is a suspect sample. Prepares and failures update nothing.
fn suspect<S>(batch: &[(Option<S>, u64)], span: Duration) -> bool {
    matches!(batch, [(Some(_), est)] if suspect_sample(nanos(span), *est))
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
///
/// `busy`: the machine has no CPU to spare, and a suspect share counts as twice its estimate.
/// Returns how many shares were cut so.
fn attribute<S: Sampled>(
    batch: &mut Vec<(Option<S>, u64)>,
    seen: &mut Vec<usize>,
    span: Duration,
    busy: bool,
) -> u64 {
    let mut cut = 0;
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
        let mut share = u64::try_from(share).unwrap_or(u64::MAX);
        if busy && suspect_sample(share, est) {
            share = est.saturating_mul(2);
            cut += 1;
        }
        stmt.observe(share);
    }
    cut
}

/// Reconnect delays of a shared connection: exponential from 50 ms to 5 s, and at least 30 s
/// after the server refused the credentials (they do not fix themselves in milliseconds;
/// retrying fast would only lock accounts and flood the server's log with failed logins).
pub(crate) struct Backoff {
    next: Duration,
    /// The last failure was refused credentials.
    auth: bool,
}

impl Backoff {
    const START: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(5);
    const AUTH: Duration = Duration::from_secs(30);
    const WRONG_ROLE_MAX: Duration = Duration::from_secs(1);

    /// A connection that has not failed yet.
    pub(crate) fn new() -> Self {
        Backoff {
            next: Self::START,
            auth: false,
        }
    }

    /// The connection served again: the next failure starts over.
    pub(crate) fn reset(&mut self) {
        self.next = Self::START;
        self.auth = false;
    }

    /// Whether the wait is for credentials the server refused.
    pub(crate) fn refused_credentials(&self) -> bool {
        self.auth
    }

    /// The wait before the next attempt, after a failure (`auth`: the credentials were
    /// refused).
    pub(crate) fn after_failure(&mut self, auth: bool) -> Duration {
        self.auth = auth;
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
        self.auth = false;
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
mod tests;
