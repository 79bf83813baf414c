//! What one seed draws: the client's settings, the faults, and each caller's steps, from
//! streams of the seed's own (so a plan does not depend on its run).

use std::time::Duration;

use pgpipe::{Config, SslMode};

use crate::net::Faults;
use crate::rng::Rng;
use crate::server::Kind;

/// What one seed draws: the client's settings, the faults, the callers' work.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The client's configuration.
    pub config: Config,
    /// The network's and server's faults.
    pub faults: Faults,
    /// Connect failures from the start (the client may fail to connect at all).
    pub early_faults_on: bool,
    /// Per caller: its steps.
    pub callers: Vec<Vec<Step>>,
    /// How many of `callers`, at the end, run batches and transactions that carry their
    /// COMMIT (drawn from a stream of their own, after the others).
    pub transactional: usize,
    /// `close_within(limit)` this long after the start, while callers may still be working
    /// (`(after, limit)`); otherwise `close()` once every caller is done.
    pub early_close: Option<(Duration, Duration)>,
    /// Per mille of Executes outside transactions that the server fails with 40001 before
    /// running them.
    pub server_errors: u64,
}

/// One thing a caller does.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// A shared-path query, its future dropped after this long if `Some`.
    Query(Kind, Option<Duration>),
    /// A transaction with one statement, then COMMIT (`true`) or ROLLBACK; the whole
    /// transaction is dropped after this long if `Some`.
    Tx(Kind, bool, Option<Duration>),
    /// A transaction whose one statement carries its COMMIT (`query_and_commit`); dropped
    /// after this long if `Some`.
    TxCommitWith(Kind, Option<Duration>),
    /// An atomic batch of two statements on the shared path; dropped after this long if
    /// `Some`.
    Batch([Kind; 2], Option<Duration>),
    /// A statement on a session (an exclusive connection, reset when released); dropped
    /// after this long if `Some`.
    Session(Kind, Option<Duration>),
}

fn us(rng: &mut Rng, max: u64) -> Duration {
    Duration::from_micros(rng.below(max + 1))
}

impl Plan {
    /// The plan of `seed` (its own generator, so the plan does not depend on the run).
    pub fn of(seed: u64) -> Plan {
        let mut r = Rng::new(seed ^ 0x005e_ed0f_91a4);
        let mut config = Config::default();
        config.host = "sim".into();
        config.user = "sim".into();
        config.dbname = "sim".into();
        config.tls.mode = SslMode::Disable;
        config.pipeline_size = 1 + r.below(3) as usize;
        config.max_in_flight = 1 + r.below(8) as usize;
        config.mailbox_size = 1 + r.below(12) as usize;
        config.statement_cache_size = 1 + r.below(4) as usize;
        config.max_connections = config.pipeline_size + r.below(3) as usize;
        config.idle_timeout = Duration::from_millis(1 + r.below(30));
        config.connect_timeout = Duration::from_millis(50 + r.below(500));
        config.query_timeout = r
            .chance(150)
            .then(|| Duration::from_millis(1 + r.below(20)));
        config.retry_not_dispatched = !r.chance(100);
        config.pinned_size = 1 + r.below(2) as usize;
        // About a third of the seeds run without faults, the rest with a seeded mix.
        let faulty = !r.chance(300);
        let mut faults = Faults {
            capacity: 1 + r.below(4096) as usize,
            ..Faults::default()
        };
        if faulty {
            faults.split_writes = r.chance(500);
            faults.split_reads = r.chance(500);
            faults.max_delay = if r.chance(500) {
                us(&mut r, 2000)
            } else {
                Duration::ZERO
            };
            faults.max_connect_delay = if r.chance(300) {
                us(&mut r, 5000)
            } else {
                Duration::ZERO
            };
            faults.connect_fail = if r.chance(300) { r.below(500) } else { 0 };
            faults.reset = if r.chance(400) { r.below(40) } else { 0 };
            faults.terminate = if r.chance(300) { r.below(30) } else { 0 };
            faults.garbage = if r.chance(100) { r.below(20) } else { 0 };
            faults.slow_read = if r.chance(300) {
                us(&mut r, 1000)
            } else {
                Duration::ZERO
            };
        }
        let early_faults_on = faulty && r.chance(50);
        let mut callers: Vec<Vec<Step>> = (0..1 + r.below(6))
            .map(|_| {
                (0..1 + r.below(4))
                    .map(|_| {
                        let kind = Kind::ALL[r.below(Kind::ALL.len() as u64) as usize];
                        let drop_after = r.chance(150).then(|| us(&mut r, 4000));
                        match r.below(100) {
                            0..12 => Step::Tx(kind, !r.chance(300), drop_after),
                            12..18 => Step::Session(kind, drop_after),
                            _ => Step::Query(kind, drop_after),
                        }
                    })
                    .collect()
            })
            .collect();
        // From its own stream, so adding it left every other draw (and the regression
        // seeds' plans) as they were.
        let mut r2 = Rng::new(seed ^ 0x00c1_05ed);
        let early_close = r2
            .chance(100)
            .then(|| (us(&mut r2, 10_000), us(&mut r2, 5_000)));
        config.checkout_timeout = r2
            .chance(200)
            .then(|| Duration::from_micros(100 + r2.below(10_000)));
        // Sync coalescing, from a third stream for the same reason: off in a fifth of the
        // seeds; in half of the seeds the server fails Executes at random (40001, before
        // running them), so errors land at every position of a shared Sync.
        let mut r3 = Rng::new(seed ^ 0x5c0a_1e5c);
        config.sync_coalescing = !r3.chance(200);
        let server_errors = if r3.chance(500) { 1 + r3.below(200) } else { 0 };
        // Transactions whose COMMIT rides with their statement, and atomic batches: callers
        // of their own in about half of the seeds, from a fourth stream (the callers above
        // are drawn as before).
        let mut r4 = Rng::new(seed ^ 0x0ba7_c4ed);
        let kind = |r: &mut Rng| Kind::ALL[r.below(Kind::ALL.len() as u64) as usize];
        let more = if r4.chance(500) { 1 + r4.below(3) } else { 0 };
        let transactional = more as usize;
        for _ in 0..more {
            let steps = (0..1 + r4.below(3))
                .map(|_| {
                    let drop_after = r4.chance(150).then(|| us(&mut r4, 4000));
                    match r4.chance(600) {
                        true => Step::Batch([kind(&mut r4), kind(&mut r4)], drop_after),
                        false => Step::TxCommitWith(kind(&mut r4), drop_after),
                    }
                })
                .collect();
            callers.push(steps);
        }
        Plan {
            config,
            faults,
            early_faults_on,
            callers,
            transactional,
            early_close,
            server_errors,
        }
    }
}
