//! One seed's scenario: settings and faults drawn from the seed, callers issuing units through
//! pgpipe's public API (some dropping their futures mid-flight), a graceful close, and the
//! checks of `check.rs` plus the end-of-run properties (quiescence, bounds, statistics).

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use pgpipe::{Client, Config, SslMode};

use crate::check::{self, BatchGot, BatchRecord, Got, Record, Report, TxEnd, TxRecord};
use crate::executor::{End, Sim};
use crate::net::{Faults, Net};
use crate::rng::{mix, Rng};
use crate::server::{Db, Kind};

/// Virtual time a run may take before it counts as a hang.
const TIME_LIMIT: Duration = Duration::from_secs(120);
/// Polls a run may take before it counts as a live-lock.
const STEP_LIMIT: u64 = 2_000_000;

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

/// Counts finished callers and wakes the waiter when all are done.
#[derive(Default)]
struct Join {
    left: usize,
    waiter: Option<Waker>,
}

/// `fut`, or `None` once `sleep` fires first (then `fut` is dropped mid-flight).
async fn or_drop<T>(fut: impl Future<Output = T>, sleep: impl Future<Output = ()>) -> Option<T> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(sleep);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

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

async fn root(sim: Sim, plan: Plan, out: Rc<RefCell<Outcome>>) {
    sim.log(|| format!("plan: {plan:?}"));
    let client = match Client::connect(sim.clone(), plan.config.clone()).await {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            out.borrow_mut().end_checks = Some(
                if plan.early_faults_on
                    && matches!(e, pgpipe::Error::Io(_) | pgpipe::Error::NoConnection { .. })
                {
                    Ok(())
                } else {
                    Err(format!("connect failed without a connect fault: {msg}"))
                },
            );
            out.borrow_mut().connect_error = Some(msg);
            return;
        }
    };
    sim.st.borrow_mut().net.faults_on = true;
    out.borrow_mut().client = Some(client.clone());
    let join = Rc::new(RefCell::new(Join {
        left: plan.callers.len(),
        waiter: None,
    }));
    for (i, units) in plan.callers.iter().enumerate() {
        let (client, sim, out, join) = (client.clone(), sim.clone(), out.clone(), join.clone());
        let units = units.clone();
        sim.clone().spawn_task(async move {
            for (j, step) in units.into_iter().enumerate() {
                let param = (i as i64 + 1) * 1000 + j as i64;
                match step {
                    Step::Query(kind, drop_after) => {
                        let got = query(&client, &sim, kind, param, drop_after).await;
                        sim.log(|| format!("caller {i}: unit {param} ({kind:?}) got {got:?}"));
                        let shared = true;
                        out.borrow_mut().records.push(Record {
                            param,
                            kind,
                            got,
                            shared,
                        });
                    }
                    Step::Session(kind, drop_after) => {
                        let work = on_session(&client, kind, param);
                        let got = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(Got::Dropped),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: session unit {param} got {got:?}"));
                        let shared = false;
                        out.borrow_mut().records.push(Record {
                            param,
                            kind,
                            got,
                            shared,
                        });
                    }
                    Step::Tx(kind, commit, drop_after) => {
                        let work = transaction(&client, kind, param, commit);
                        let t = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(TxRecord {
                                param,
                                commit,
                                got: Got::Dropped,
                                end: TxEnd::NotReached,
                            }),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: transaction {t:?}"));
                        out.borrow_mut().txs.push(t);
                    }
                    Step::TxCommitWith(kind, drop_after) => {
                        let work = transaction_commit_with(&client, kind, param);
                        let t = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(TxRecord {
                                param,
                                commit: true,
                                got: Got::Dropped,
                                end: TxEnd::NotReached,
                            }),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: transaction with its commit {t:?}"));
                        out.borrow_mut().txs.push(t);
                    }
                    Step::Batch(kinds, drop_after) => {
                        let params = [param, param + 500];
                        let work = batch(&client, kinds, params);
                        let got = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d))
                                .await
                                .unwrap_or(BatchGot::Dropped),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: batch {params:?} got {got:?}"));
                        out.borrow_mut()
                            .batches
                            .push(BatchRecord { params, kinds, got });
                    }
                }
            }
            let mut j = join.borrow_mut();
            j.left -= 1;
            if j.left == 0 {
                if let Some(w) = j.waiter.take() {
                    w.wake();
                }
            }
        });
    }
    let all_done = || {
        std::future::poll_fn(|cx| {
            let mut j = join.borrow_mut();
            if j.left == 0 {
                Poll::Ready(())
            } else {
                j.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    };
    if let Some((after, limit)) = plan.early_close {
        // Close while callers may still be working: what is in flight when the limit passes
        // fails with typed errors, later calls get `Closed`.
        let done = or_drop(all_done(), sim.sleep(after)).await.is_some();
        let open = open_stats(&client, &plan.config);
        sim.log(|| format!("close_within({limit:?}), callers done: {done}"));
        let graceful = client.close_within(limit).await;
        sim.log(|| format!("closed (graceful: {graceful})"));
        all_done().await;
        let mut o = out.borrow_mut();
        o.closed = true;
        o.aborted = !graceful;
        o.client = None;
        o.coalescing = coalescing(&client);
        let end = open.and_then(|()| end_stats(&client, &plan.config, 0, 0));
        o.end_checks = Some(end);
        return;
    }
    all_done().await;
    let open = open_stats(&client, &plan.config);
    sim.log(|| "callers done; closing".into());
    client.close().await;
    sim.log(|| "closed".into());
    let mut o = out.borrow_mut();
    o.closed = true;
    o.client = None;
    o.coalescing = coalescing(&client);
    let answered = |f: fn(&Got) -> bool| {
        let shared = o.records.iter().filter(|r| r.shared);
        shared.filter(|r| f(&r.got)).count() as u64
    };
    let (values, db_errors) = (
        answered(|g| matches!(g, Got::Value(_))),
        answered(|g| matches!(g, Got::Db(_))),
    );
    let end = open.and_then(|()| end_stats(&client, &plan.config, values, db_errors));
    o.end_checks = Some(end);
}

/// Routing's limits while the client is open (`docs/ROUTING.md`): at most `pipeline_size`
/// base connections, on-demand ones only up to `max_connections`, and no lane traffic when
/// there is no room for a lane.
fn coalescing(client: &Client<Sim>) -> (u64, u64, u64) {
    let s = client.stats();
    let t = s.total;
    (
        t.units_coalesced,
        t.units_resent,
        s.exclusive.early_handovers,
    )
}

fn open_stats(client: &Client<Sim>, cfg: &Config) -> Result<(), String> {
    let s = client.stats();
    let on_demand = cfg.connection_limit() - cfg.pipeline_size;
    if s.open_base > cfg.pipeline_size || s.open_lanes + s.open_overflow > on_demand {
        return Err(format!(
            "open connections: {} base, {} lanes, {} overflow (limits {}, {on_demand})",
            s.open_base, s.open_lanes, s.open_overflow, cfg.pipeline_size
        ));
    }
    if client.live_connections() > cfg.connection_limit() {
        return Err(format!("{} live connections", client.live_connections()));
    }
    // Exclusive connections share the budget beyond the base: lanes and overflow leave them
    // `pinned_size`, and all of them together stay within it (or within `pinned_size`).
    let (exclusive, _) = client.pinned_counts();
    let lanes = s.open_lanes + s.open_overflow;
    if lanes > on_demand.saturating_sub(cfg.pinned_size)
        || lanes + exclusive > on_demand.max(cfg.pinned_size)
    {
        return Err(format!(
            "{lanes} lanes and overflow with {exclusive} exclusive connections (budget {on_demand}, reserve {})",
            cfg.pinned_size
        ));
    }
    if on_demand == 0 && (s.total.lane_units > 0 || s.total.opened_on_demand > 0) {
        return Err("lane traffic without room for a lane".into());
    }
    Ok(())
}

/// One shared-path query, dropped mid-flight after `drop_after` if `Some`.
async fn query(
    client: &Client<Sim>,
    sim: &Sim,
    kind: Kind,
    param: i64,
    drop_after: Option<Duration>,
) -> Got {
    let params: [&(dyn pgpipe::types::ToSql + Sync); 1] = [&param];
    let fut = client.query_one(kind.sql(), &params);
    match drop_after {
        Some(d) => match or_drop(fut, sim.sleep(d)).await {
            Some(r) => Got::of(r),
            None => Got::Dropped,
        },
        None => Got::of(fut.await),
    }
}

/// One statement on a session; the session is released (and reset) at the end.
async fn on_session(client: &Client<Sim>, kind: Kind, param: i64) -> Got {
    match client.session().await {
        Ok(s) => Got::of(s.query_one(kind.sql(), &[&param]).await),
        Err(e) => Got::NotRun(format!("session(): {e}")),
    }
}

/// BEGIN, one statement, COMMIT or ROLLBACK on an exclusive connection.
async fn transaction(client: &Client<Sim>, kind: Kind, param: i64, commit: bool) -> TxRecord {
    let mut t = TxRecord {
        param,
        commit,
        got: Got::Dropped,
        end: TxEnd::NotReached,
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            t.got = Got::Other(format!("BEGIN: {e}"));
            return t;
        }
    };
    t.got = Got::of(tx.query_one(kind.sql(), &[&param]).await);
    let end = if commit {
        tx.commit().await
    } else {
        tx.rollback().await
    };
    t.end = match end {
        Ok(()) => TxEnd::Ok,
        Err(pgpipe::Error::RolledBack) => TxEnd::RolledBack,
        Err(pgpipe::Error::IndeterminateCommit { .. }) => TxEnd::IndeterminateCommit,
        Err(pgpipe::Error::Timeout) => TxEnd::Timeout,
        Err(e) => TxEnd::Failed(e.to_string()),
    };
    t
}

/// A transaction whose one statement carries its COMMIT.
async fn transaction_commit_with(client: &Client<Sim>, kind: Kind, param: i64) -> TxRecord {
    let mut t = TxRecord {
        param,
        commit: true,
        got: Got::Dropped,
        end: TxEnd::NotReached,
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            t.got = Got::Other(format!("checkout: {e}"));
            return t;
        }
    };
    match tx.query_and_commit(kind.sql(), &[&param]).await {
        Ok(rows) => {
            t.got = match rows.first().map(|r| r.try_get::<_, i64>(0)) {
                Some(Ok(v)) => Got::Value(v),
                other => Got::Other(format!("rows: {other:?}")),
            };
            t.end = TxEnd::Ok;
        }
        Err(pgpipe::Error::IndeterminateCommit { .. }) => {
            t.got = Got::Indeterminate;
            t.end = TxEnd::IndeterminateCommit;
        }
        Err(pgpipe::Error::RolledBack) => t.end = TxEnd::RolledBack,
        Err(pgpipe::Error::CommitFailed(e)) => {
            t.end = TxEnd::Failed(format!("COMMIT failed: {e}"));
        }
        Err(e) => t.got = Got::of(Err(e)),
    }
    t
}

/// An atomic batch of two statements on the shared path.
async fn batch(client: &Client<Sim>, kinds: [Kind; 2], params: [i64; 2]) -> BatchGot {
    let mut b = client.batch();
    b.add(kinds[0].sql(), &[&params[0]]);
    b.add(kinds[1].sql(), &[&params[1]]);
    match b.run().await {
        Ok(results) => {
            let value = |i: usize| -> Option<i64> {
                results.get(i)?.rows().first()?.try_get::<_, i64>(0).ok()
            };
            match (results.len(), value(0), value(1)) {
                (2, Some(a), Some(b)) => BatchGot::Values([a, b]),
                _ => BatchGot::Other(format!("results: {results:?}")),
            }
        }
        Err(pgpipe::Error::BatchFailed { index, source }) => BatchGot::Failed {
            index,
            code: source.code().as_str().to_owned(),
        },
        Err(e) => match Got::of(Err(e)) {
            Got::NotDispatched => BatchGot::NotDispatched,
            Got::NoConnection | Got::Closed => BatchGot::NotDispatched,
            Got::Indeterminate => BatchGot::Indeterminate,
            Got::Timeout => BatchGot::Timeout,
            other => BatchGot::Other(format!("{other:?}")),
        },
    }
}

/// Statistics after a graceful close: no connection live, nothing queued or in flight, one
/// ReadyForQuery per unit, the counters consistent with what callers saw, the in-flight and
/// mailbox bounds held.
fn end_stats(
    client: &Client<Sim>,
    cfg: &Config,
    values: u64,
    db_errors: u64,
) -> Result<(), String> {
    let s = client.stats();
    let t = &s.total;
    if client.live_connections() != 0 {
        return Err(format!(
            "{} connections live after close",
            client.live_connections()
        ));
    }
    // Every shared-path answer a caller saw was a completed unit (and an error counted).
    if t.units_completed < values + db_errors || t.errors_db < db_errors {
        return Err(format!(
            "callers saw {values} values and {db_errors} server errors, but the counters say \
             {} units completed and {} server errors",
            t.units_completed, t.errors_db
        ));
    }
    if t.in_flight != 0 || t.queued != 0 {
        return Err(format!(
            "after close: {} in flight, {} queued",
            t.in_flight, t.queued
        ));
    }
    if !t.ready_accounts_for_every_unit() {
        return Err(format!(
            "{} ReadyForQuery and {} units sharing a Sync for {} units",
            t.ready_received, t.units_coalesced, t.units_completed
        ));
    }
    if t.in_flight_peak > cfg.max_in_flight as u64 {
        return Err(format!(
            "in flight peaked at {} (max {})",
            t.in_flight_peak, cfg.max_in_flight
        ));
    }
    // Prepare units bypass the mailbox's bound (one per SQL text in flight, single flight),
    // so the bound is the mailbox plus the distinct texts.
    let bound = (cfg.mailbox_size + Kind::ALL.len()) as u64;
    if t.queued_peak > bound {
        return Err(format!(
            "queued peaked at {} (bound {bound})",
            t.queued_peak
        ));
    }
    Ok(())
}
