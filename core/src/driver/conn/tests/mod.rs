//! The connection's rules with made-up instants and a scripted server's bytes: the pump
//! (window, segments, the replay after an error at every position, the cancel's hold), the
//! health check, idle retirement and the cancel bound; the path through a pooler in `path.rs`.
//! No socket, no timer, no clock.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};

use super::{Conn, Due};
use crate::driver::health::Verdict;
use crate::driver::open::Endpoint;
use crate::driver::shared::{ConnShared, CostTable, Framing, QueryWaiter, Statement, Status};
use crate::error::{Fault, HalfOpen};
use crate::proto::SessionInfo;
use crate::sched::lock;
use crate::Config;

mod answers;
mod path;

const SYNC: [u8; 5] = [b'S', 0, 0, 0, 4];

struct Rig {
    conn: Conn,
    shared: Arc<ConnShared>,
    t0: Instant,
}

/// A connection just opened; a shared one's probe of its path is answered: direct.
fn rig(options: &str, exclusive: bool) -> Rig {
    let mut r = unproven(options, exclusive);
    if !exclusive {
        r.write_all();
        r.server_says(0, &probe_answer(true))
            .expect("the probe's answer");
    } else {
        // A shared connection of the client proved the path direct.
        r.shared.found_direct();
    }
    r
}

/// A connection just opened, its probe (if shared) unanswered.
fn unproven(options: &str, exclusive: bool) -> Rig {
    let mut config =
        Config::parse("host=127.0.0.1 user=u dbname=d").expect("a valid configuration");
    config.apply_pgpipe_options(options).expect("valid options");
    let declared = config.pooler.declared();
    let ep = Arc::new(Endpoint::new(config).expect("an endpoint"));
    let shared = Arc::new(ConnShared::new(
        256,
        16,
        Arc::new(CostTable::new(16, true, declared)),
        Arc::default(),
        exclusive,
    ));
    shared.set_status(&mut lock(&shared.state), Status::Open);
    let t0 = Instant::now();
    let mut conn = Conn::new(ep, shared.clone(), exclusive, t0);
    let info = SessionInfo {
        backend_key: Some((4242, 7)),
        ..SessionInfo::default()
    };
    conn.opened(info, &[], 0, t0);
    Rig { conn, shared, t0 }
}

impl Rig {
    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    fn pump(&mut self, ms: u64) -> super::Pumped {
        let now = self.at(ms);
        let mut st = lock(&self.shared.state);
        self.conn.pump(&mut st, || now)
    }

    /// Everything pumped is written.
    fn write_all(&mut self) -> Vec<u8> {
        let out = self.conn.transmit().to_vec();
        self.conn.wrote(out.len());
        out
    }

    fn server_says(&mut self, ms: u64, bytes: &[u8]) -> Result<(), Fault> {
        self.conn.read_buf().extend_from_slice(bytes);
        let now = self.at(ms);
        self.conn.received(now, true, || None)
    }

    fn simple(&self) -> Arc<QueryWaiter> {
        self.shared.submit_simple_now("SELECT 1").expect("queued")
    }

    /// A read-only execution of `stmt` (already timed, so it may share a Sync).
    fn execute(&self, stmt: &Arc<Statement>) -> Arc<QueryWaiter> {
        futures_lite::future::block_on(self.shared.submit_execute(stmt, &[], &Framing::NONE))
            .expect("queued")
    }
}

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(tag);
    b.put_i32(body.len() as i32 + 4);
    b.put_slice(body);
    b.to_vec()
}

fn complete(tag: &str) -> Vec<u8> {
    let mut body = tag.as_bytes().to_vec();
    body.push(0);
    msg(b'C', &body)
}

fn ready() -> Vec<u8> {
    msg(b'Z', b"I")
}

fn error() -> Vec<u8> {
    msg(b'E', b"SERROR\0C22012\0Mdivision by zero\0\0")
}

/// A simple query's answer: no rows, then ReadyForQuery.
fn simple_answer() -> Vec<u8> {
    [complete("SELECT 0"), ready()].concat()
}

/// An execution's answer up to its CommandComplete (its ReadyForQuery comes with its Sync).
fn executed() -> Vec<u8> {
    [msg(b'2', &[]), complete("SELECT 0")].concat()
}

/// The probe's answer: one row when the backend is the one the startup named.
fn probe_answer(direct: bool) -> Vec<u8> {
    [
        complete(if direct { "SELECT 1" } else { "SELECT 0" }),
        ready(),
    ]
    .concat()
}

fn done(w: &QueryWaiter) -> Option<bool> {
    w.take().map(|r| r.is_ok())
}

#[test]
fn the_pump_sends_no_more_than_the_window() {
    let mut r = rig("max_in_flight=3", false);
    let waiters: Vec<_> = (0..5).map(|_| r.simple()).collect();
    r.pump(0);
    assert_eq!(r.conn.pipeline.len(), 3, "the window is max_in_flight");
    assert_eq!(lock(&r.shared.state).queue.len(), 2);
    r.write_all();
    r.server_says(1, &simple_answer()).expect("a good answer");
    assert_eq!(done(&waiters[0]), Some(true));
    assert_eq!(done(&waiters[1]), None);
    r.pump(1);
    assert_eq!(r.conn.pipeline.len(), 3, "one answer, one more unit");
    assert_eq!(lock(&r.shared.state).queue.len(), 1);
}

#[test]
fn a_pass_waits_until_half_the_window_is_free() {
    let mut r = rig("max_in_flight=8", false);
    let waiters: Vec<_> = (0..20).map(|_| r.simple()).collect();
    r.pump(0);
    assert_eq!(r.conn.pipeline.len(), 8);
    r.write_all();
    r.server_says(1, &simple_answer()).expect("a good answer");
    r.pump(1);
    assert_eq!(r.conn.pipeline.len(), 7, "one unit free: no pass yet");
    assert!(r.conn.transmit().is_empty(), "nothing written for it");
    let three: Vec<u8> = (0..3).flat_map(|_| simple_answer()).collect();
    r.server_says(2, &three).expect("good answers");
    r.pump(2);
    assert_eq!(r.conn.pipeline.len(), 8, "half free: one batch fills it");
    assert_eq!(lock(&r.shared.state).queue.len(), 8);
    assert_eq!(waiters.iter().filter(|w| done(w) == Some(true)).count(), 4);
    // With nothing in flight a pass never waits.
    r.write_all();
    let eight: Vec<u8> = (0..8).flat_map(|_| simple_answer()).collect();
    r.server_says(3, &eight).expect("good answers");
    r.pump(3);
    assert_eq!(r.conn.pipeline.len(), 8);
}

#[test]
fn a_stale_connection_sends_nothing_and_reconnects_once_answered() {
    let mut r = rig("", false);
    let first = r.simple();
    r.pump(0);
    r.write_all();
    r.conn.stale = Some(Fault::StoppedSending);
    let second = r.simple();
    r.pump(1);
    assert_eq!(r.conn.pipeline.len(), 1, "nothing more goes out");
    assert!(r.conn.stale_done().is_none(), "a unit is still in flight");
    r.server_says(2, &simple_answer()).expect("a good answer");
    assert_eq!(done(&first), Some(true));
    assert!(matches!(r.conn.stale_done(), Some(Fault::StoppedSending)));
    assert_eq!(
        done(&second),
        None,
        "queued, failed by the reconnect as never sent"
    );
}

/// Read-only statements already timed: their executions share a Sync.
fn shared_segment(n: usize) -> (Rig, Vec<Arc<QueryWaiter>>) {
    let r = rig("sync_coalescing=true", false);
    let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
    let waiters = (0..n).map(|_| r.execute(&stmt)).collect();
    (r, waiters)
}

#[test]
fn a_segment_shares_one_sync_and_keeps_its_bytes_to_replay() {
    let (mut r, waiters) = shared_segment(4);
    r.pump(0);
    let out = r.write_all();
    let syncs = out.windows(5).filter(|w| *w == SYNC).count();
    assert_eq!(syncs, 1, "four units, one Sync");
    assert!(out.ends_with(&SYNC));
    assert_eq!(
        r.conn.replay.len(),
        out.len() - SYNC.len(),
        "every unit kept to replay"
    );
    let answer = [executed(), executed(), executed(), executed(), ready()].concat();
    r.server_says(1, &answer).expect("a good answer");
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
    assert!(
        r.conn.replay.is_empty(),
        "answered units leave the replay buffer"
    );
    assert!(r.conn.pipeline.is_empty());
}

#[test]
fn units_skipped_after_an_error_are_sent_again_at_every_position() {
    for failed in 0..4 {
        let (mut r, waiters) = shared_segment(4);
        r.pump(0);
        let first = r.write_all();
        let unit = (first.len() - SYNC.len()) / 4;
        // The server answers the units before the failed one, fails it and skips to the Sync.
        let mut answer: Vec<u8> = (0..failed).flat_map(|_| executed()).collect();
        answer.extend(error());
        answer.extend(ready());
        r.server_says(1, &answer).expect("a good answer");
        for (i, w) in waiters.iter().enumerate() {
            let want = match i {
                i if i < failed => Some(true),
                i if i == failed => Some(false),
                _ => None,
            };
            assert_eq!(done(w), want, "unit {i} with unit {failed} failed");
        }
        let skipped = 3 - failed;
        let again = r.write_all();
        assert_eq!(
            again.len(),
            skipped * (unit + SYNC.len()),
            "each skipped unit, own Sync"
        );
        assert_eq!(again.windows(5).filter(|w| *w == SYNC).count(), skipped);
        assert_eq!(r.conn.pipeline.len(), skipped);
        let answers: Vec<u8> = (0..skipped)
            .flat_map(|_| [executed(), ready()].concat())
            .collect();
        r.server_says(2, &answers).expect("a good answer");
        for w in &waiters[failed + 1..] {
            assert_eq!(done(w), Some(true), "sent again and answered");
        }
        assert!(r.conn.pipeline.is_empty() && r.conn.replay.is_empty());
    }
}

#[test]
fn a_silent_connection_is_checked_after_the_interval_and_the_verdict_counts() {
    let mut r = rig("health_check_ms=1000", false);
    assert_eq!(
        r.conn.poll_timeout(),
        None,
        "nothing in flight, nothing to time"
    );
    let _w = r.simple();
    r.pump(0);
    r.write_all();
    assert!(!r.conn.watch(|| r.t0));
    assert_eq!(r.conn.poll_timeout(), Some(r.at(1000)));
    assert_eq!(r.conn.handle_timeout(r.at(999)).ok(), Some(None));
    let probe = r.conn.handle_timeout(r.at(1000)).ok().flatten();
    assert_eq!(
        probe,
        Some(Due::Probe {
            pid: 4242,
            settled: Duration::from_millis(500)
        })
    );
    assert_eq!(
        r.conn.poll_timeout(),
        None,
        "no second check while one is out"
    );
    // The check says the backend works: the silence is measured again from the verdict.
    r.conn.verdict(Verdict::Alive, r.at(1100)).expect("alive");
    assert_eq!(r.conn.poll_timeout(), Some(r.at(2100)));
    // A byte heard during a check makes it moot.
    assert!(matches!(
        r.conn.handle_timeout(r.at(2100)),
        Ok(Some(Due::Probe { .. }))
    ));
    r.server_says(2200, &complete("SELECT 0"))
        .expect("part of an answer");
    let at = r.at(2200);
    assert!(r.conn.watch(|| at), "the check in progress is dropped");
    assert_eq!(r.conn.poll_timeout(), Some(r.at(3200)));
    // A half-open verdict ends the connection, typed.
    assert!(matches!(
        r.conn.handle_timeout(r.at(3200)),
        Ok(Some(Due::Probe { .. }))
    ));
    let end = r
        .conn
        .verdict(Verdict::HalfOpen(HalfOpen::Gone(4242)), r.at(3300));
    assert!(matches!(end, Err(Fault::HalfOpen(HalfOpen::Gone(4242)))));
}

#[test]
fn behind_a_pooler_checks_stop_for_good() {
    let mut r = rig("health_check_ms=1000", false);
    let _w = r.simple();
    r.pump(0);
    r.write_all();
    assert!(matches!(
        r.conn.handle_timeout(r.at(1000)),
        Ok(Some(Due::Probe { .. }))
    ));
    r.conn
        .verdict(Verdict::Pooled, r.at(1001))
        .expect("not a verdict on the connection");
    assert_eq!(r.conn.poll_timeout(), None);
    assert_eq!(r.conn.handle_timeout(r.at(60_000)).ok(), Some(None));
}

#[test]
fn nothing_waiting_means_no_silence_to_measure() {
    let mut r = rig("health_check_ms=1000", false);
    let _w = r.simple();
    r.pump(0);
    r.write_all();
    r.server_says(10, &simple_answer()).expect("a good answer");
    let at = r.at(10);
    r.conn.watch(|| at);
    assert_eq!(
        r.conn.poll_timeout(),
        None,
        "the check is for work in flight only"
    );
    assert_eq!(r.conn.handle_timeout(r.at(5_000)).ok(), Some(None));
}

#[test]
fn a_parked_connection_retires_after_idle_timeout_unless_work_arrives() {
    let mut r = rig("idle_timeout_ms=500", true);
    lock(&r.shared.state).pooled = true;
    r.pump(100);
    assert_eq!(
        r.conn.poll_timeout(),
        Some(r.at(600)),
        "idle from when it was parked"
    );
    assert_eq!(r.conn.handle_timeout(r.at(599)).ok(), Some(None));
    // Work promised to a caller keeps it: its idle time starts over.
    lock(&r.shared.state).reserved = 1;
    assert_eq!(r.conn.handle_timeout(r.at(600)).ok(), Some(None));
    assert_eq!(r.conn.poll_timeout(), Some(r.at(1100)));
    lock(&r.shared.state).reserved = 0;
    assert_eq!(
        r.conn.handle_timeout(r.at(1100)).ok(),
        Some(Some(Due::Retire))
    );
    assert!(matches!(lock(&r.shared.state).status, Status::Retiring));
}

#[test]
fn a_connection_in_use_is_not_retired() {
    let mut r = rig("idle_timeout_ms=500 health_check_ms=0", true);
    assert_eq!(
        r.conn.poll_timeout(),
        None,
        "held by a session: not retirable"
    );
    lock(&r.shared.state).pooled = true;
    let _w = r.simple();
    r.pump(0);
    assert_eq!(r.conn.poll_timeout(), None, "work in flight");
}

/// An exclusive connection whose released holder left one unit running.
fn abandoned() -> (Rig, Arc<QueryWaiter>) {
    let mut r = rig("", true);
    let w = r.simple();
    r.pump(0);
    r.write_all();
    r.shared.cancel_after.store(0, Relaxed);
    r.shared.cancel_until.store(1, Relaxed);
    r.shared.cancel_abandoned.store(true, Relaxed);
    (r, w)
}

#[test]
fn abandoned_work_is_cancelled_and_bounded() {
    let (mut r, _w) = abandoned();
    let at = r.at(10);
    assert_eq!(
        r.conn.cancel_due(|| at),
        Some((4242, 7)),
        "cancel with the backend's key"
    );
    r.conn.cancel_sent();
    // The next holder's unit waits until the cancel is acknowledged.
    let next = r.simple();
    r.pump(11);
    assert_eq!(
        r.conn.pipeline.len(),
        1,
        "nothing past the abandoned work goes out"
    );
    assert_eq!(r.conn.poll_timeout(), Some(r.at(2010)));
    assert_eq!(r.conn.handle_timeout(r.at(2009)).ok(), Some(None));
    let end = r.conn.handle_timeout(r.at(2010));
    assert!(
        matches!(end, Err(Fault::CancelOutlived(_))),
        "the bound is kept"
    );
    assert_eq!(done(&next), None);
}

#[test]
fn abandoned_work_that_finishes_lifts_the_bound() {
    let (mut r, _w) = abandoned();
    let at = r.at(10);
    assert!(r.conn.cancel_due(|| at).is_some());
    r.conn.cancel_sent();
    r.server_says(20, &simple_answer()).expect("a good answer");
    assert!(r.conn.cancel_moot(), "a request not sent yet is not needed");
    r.conn.cancel_over();
    assert_eq!(r.conn.cancel_due(|| at), None);
    assert_eq!(
        r.conn.poll_timeout(),
        None,
        "no bound once the work is done"
    );
    let next = r.simple();
    r.pump(21);
    assert_eq!(r.conn.pipeline.len(), 1, "the next holder's unit goes out");
    r.write_all();
    r.server_says(22, &simple_answer()).expect("a good answer");
    assert_eq!(done(&next), Some(true));
}

#[test]
fn a_cancel_never_reaches_a_later_holders_unit_on_the_wire() {
    let mut r = rig("health_check_ms=0", true);
    let _abandoned = r.simple();
    // A later holder's unit went out with the abandoned one, before the release said so.
    let _later = r.simple();
    r.pump(0);
    r.write_all();
    r.shared.cancel_after.store(0, Relaxed);
    r.shared.cancel_until.store(1, Relaxed);
    r.shared.cancel_abandoned.store(true, Relaxed);
    let at = r.at(10);
    assert_eq!(
        r.conn.cancel_due(|| at),
        None,
        "the abandoned work is left to finish"
    );
    assert_eq!(r.conn.poll_timeout(), None);
}

#[test]
fn a_server_that_closes_says_why() {
    let mut r = rig("", false);
    let fatal = msg(b'E', b"SFATAL\0C57P01\0Mterminating connection\0\0");
    r.server_says(0, &fatal)
        .expect("a FATAL is not a violation");
    match r.conn.closed() {
        Fault::Closed(Some(e)) => assert_eq!(e.code().as_str(), "57P01"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_shared_connection_left_in_a_transaction_is_taken_out_of_service() {
    let mut r = rig("", false);
    let _w = r.simple();
    r.pump(0);
    r.write_all();
    let answer = [complete("BEGIN"), msg(b'Z', b"T")].concat();
    let end = r.server_says(1, &answer);
    assert!(matches!(end, Err(Fault::LeftInTransaction('T'))));
}
