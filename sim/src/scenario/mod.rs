//! One seed's scenario: settings and faults drawn from the seed, callers issuing units through
//! pgpipe's public API (some dropping their futures mid-flight), a graceful close, and the
//! checks of `check.rs` plus the end-of-run properties (quiescence, bounds, statistics).
//!
//! The plan a seed draws is in `plan.rs`, the root task that runs it in `root.rs` (each
//! caller's steps in `steps.rs`), the statistics checked while open and after close in
//! `stats.rs`; here, the run and its report.

mod plan;
mod root;
mod stats;
mod steps;

pub use plan::{Plan, Step};

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use pgpipe::Client;

use crate::check::{self, BatchGot, BatchRecord, Got, Record, Report, TxRecord};
use crate::executor::{End, Sim};
use crate::net::Net;
use crate::rng::mix;
use crate::server::Db;
use root::root;

/// Virtual time a run may take before it counts as a hang.
const TIME_LIMIT: Duration = Duration::from_secs(120);
/// Polls a run may take before it counts as a live-lock.
const STEP_LIMIT: u64 = 2_000_000;

/// What the root task leaves for the checks.
#[derive(Default)]
struct Outcome {
    records: Vec<Record>,
    txs: Vec<TxRecord>,
    batches: Vec<BatchRecord>,
    connect_error: Option<String>,
    /// `Some(Err)`: a check inside the run failed.
    end_checks: Option<Result<(), String>>,
    closed: bool,
    /// `close_within` ran out of time and aborted what was left.
    aborted: bool,
    /// The client, for diagnostics of a run that did not end.
    client: Option<Client<Sim>>,
    /// Sync coalescing's counters after close: units that shared a Sync, units sent again;
    /// and the transactions that handed their connection on with their COMMIT.
    coalescing: (u64, u64, u64),
}

/// Runs one seed and checks its properties; `Err` says which failed, with the seed.
pub fn run_seed(seed: u64) -> Result<Report, String> {
    let plan = Plan::of(seed);
    run_plan(seed, &plan).map_err(|e| format!("seed {seed}: {e}\n  plan: {plan:?}"))
}

fn run_plan(seed: u64, plan: &Plan) -> Result<Report, String> {
    // pgpipe draws statement-name nonces and host-list shuffles from fastrand's thread-local
    // generator; the whole run is on this thread, so seeding it keeps the run a function of
    // the seed.
    fastrand::seed(seed);
    let db = Rc::new(RefCell::new(Db::default()));
    let mut net = Net::new(plan.faults.clone(), db.clone());
    net.server_errors = plan.server_errors;
    net.faults_on = plan.early_faults_on;
    let sim = Sim::new(seed, net);
    let out = Rc::new(RefCell::new(Outcome::default()));
    sim.spawn_task(root(sim.clone(), plan.clone(), out.clone()));
    let end = sim.run(TIME_LIMIT, STEP_LIMIT);
    let leftover = sim.live_tasks();
    let peak_tasks = sim.st.borrow().peak_tasks;
    let (trace, accepted, peak_buffered) = {
        let st = sim.st.borrow();
        (st.trace, st.net.accepted, st.net.peak_buffered)
    };
    if end != End::Quiescent {
        let o = out.borrow();
        let stats = o.client.as_ref().map(|c| (c.stats(), c.live_connections()));
        let msg = format!(
            "the run did not end cleanly: {end:?} at {:?} with {leftover} tasks left {:?} (closed: {})\n  \
             outcomes: {:?}\n  server log: {:?}\n  stats: {stats:?}",
            sim.elapsed(),
            sim.live_names(),
            o.closed,
            o.records,
            db.borrow().log,
        );
        drop(o);
        out.borrow_mut().client = None;
        sim.clear();
        return Err(msg);
    }
    // Break the executor's reference cycles (tasks hold handles to it).
    sim.clear();
    let out = std::mem::take(&mut *out.borrow_mut());
    let (coalesced, resent, early_handovers) = out.coalescing;
    out.end_checks.clone().unwrap_or(Ok(()))?;
    let db = db.borrow();
    if let Some(e) = &out.connect_error {
        if !db.log.is_empty() {
            return Err(format!(
                "connect failed ({e}) but the server ran statements"
            ));
        }
    }
    let batched: std::collections::HashSet<i64> =
        out.batches.iter().flat_map(|b| b.params).collect();
    check::outcomes(&out.records, &batched, &db, out.aborted)?;
    check::transactions(&out.txs, &db)?;
    check::batches(&out.batches, &db)?;
    // Bounded memory: tasks are callers, connection tasks and their server ends, and the root.
    let cfg = &plan.config;
    let task_bound = 1 + plan.callers.len() + 2 * (cfg.connection_limit() + cfg.pinned_size) + 2;
    if peak_tasks > task_bound {
        return Err(format!(
            "{peak_tasks} tasks alive at once (bound {task_bound})"
        ));
    }
    if peak_buffered > plan.faults.capacity {
        return Err(format!(
            "a pipe held {peak_buffered} bytes (capacity {})",
            plan.faults.capacity
        ));
    }
    let mut trace = mix(trace ^ sim.elapsed().as_nanos() as u64 ^ (db.messages << 32));
    for e in &db.log {
        trace = mix(trace ^ e.param as u64 ^ (u64::from(e.conn) << 48) ^ e.kind as u64);
    }
    for r in &out.records {
        trace = mix(trace ^ hash_of(r));
    }
    for t in &out.txs {
        trace = mix(trace ^ hash_of(t));
    }
    for b in &out.batches {
        trace = mix(trace ^ hash_of(b));
    }
    let ok = out
        .records
        .iter()
        .filter(|r| matches!(r.got, Got::Value(_)))
        .count();
    let lost = out
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.got,
                Got::NotDispatched | Got::Indeterminate | Got::NoConnection
            )
        })
        .count();
    Ok(Report {
        trace,
        units: out.records.len(),
        executed: db.log.len(),
        ok,
        lost,
        connections: accepted,
        faults: db.faults,
        committed: db.committed.len(),
        cancels: db.cancel_requests,
        coalesced,
        resent,
        early_handovers,
        batches_committed: out
            .batches
            .iter()
            .filter(|b| matches!(b.got, BatchGot::Values(_)))
            .count(),
        batches_failed: out
            .batches
            .iter()
            .filter(|b| matches!(b.got, BatchGot::Failed { .. }))
            .count(),
        abandoned: out
            .records
            .iter()
            .filter(|r| matches!(r.got, Got::Dropped | Got::Timeout))
            .count(),
        elapsed_us: sim.elapsed().as_micros() as u64,
    })
}

/// A stable hash (fixed keys) of an outcome, for the trace.
fn hash_of(v: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}
