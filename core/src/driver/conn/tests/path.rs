//! The path to the server: the probe for a pooler, one Sync at a time behind one (cheap reads
//! sharing it, skipped ones sent again as one segment), the declared paths, and the bound on
//! bytes in flight of `pooler=transaction-pipelined` with its refill.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::{
    done, error, executed, lock, probe_answer, ready, simple_answer, unproven, QueryWaiter, Rig,
    Statement, SYNC,
};
use crate::driver::conn::path::{Writes, POOLER_FLIGHT_BYTES, POOLER_REFILL_BYTES};
use crate::driver::conn::Health;

impl Rig {
    /// Bytes handed to the write buffer whose unit is not answered yet.
    fn bytes_in_flight(&self) -> u64 {
        let c = &self.conn;
        c.pipeline.oldest().map_or(0, |s| c.pumped - s.start)
    }

    /// A simple query of about `size` bytes on the wire.
    fn sized(&self, size: usize) -> Arc<QueryWaiter> {
        let sql = format!("SELECT 1 -- {}", "x".repeat(size.saturating_sub(18)));
        self.shared.submit_simple_now(&sql).expect("queued")
    }

    /// A shared connection whose probe found a pooler.
    fn behind_a_pooler(options: &str) -> Rig {
        let mut r = unproven(options, false);
        r.write_all();
        r.server_says(0, &probe_answer(false)).expect("an answer");
        r
    }
}

/// Syncs (and simple Queries, each its own) in written bytes.
fn syncs(out: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    while at < out.len() {
        let len = u32::from_be_bytes([out[at + 1], out[at + 2], out[at + 3], out[at + 4]]);
        n += usize::from(matches!(out[at], b'S' | b'Q'));
        at += 1 + len as usize;
    }
    n
}

#[test]
fn a_new_connection_probes_its_backend_first() {
    let mut r = unproven("", false);
    let out = r.write_all();
    assert_eq!(out[0], b'Q', "the probe is the first thing sent");
    let sql = String::from_utf8_lossy(&out[5..]).to_string();
    assert!(sql.contains("pg_backend_pid() = 4242"), "{sql}");
    assert_eq!(r.conn.pipeline.len(), 1);
    // No caller's unit: the gauges callers read do not see it.
    let shared = r.shared.clone();
    let c = &shared.counters;
    assert_eq!(c.in_flight.load(Relaxed), 0);
    r.server_says(1, &probe_answer(true)).expect("an answer");
    assert!(r.conn.pipeline.is_empty());
    let seen = [&c.in_flight, &c.units_completed, &c.ready_received].map(|n| n.load(Relaxed));
    assert_eq!(seen, [0, 0, 0]);
    assert_eq!(r.conn.writes(), Writes::Free, "direct: pipelined");
}

#[test]
fn until_the_probe_answers_nothing_else_is_sent() {
    let mut r = unproven("", false);
    let waiters: Vec<_> = (0..40).map(|_| r.sized(1000)).collect();
    r.pump(0);
    assert_eq!(r.conn.pipeline.len(), 1, "the probe alone");
    assert_eq!(r.conn.writes(), Writes::OneSync);
    r.write_all();
    r.pump(1);
    assert!(
        r.conn.transmit().is_empty(),
        "nothing while the probe is out"
    );
    r.server_says(1, &probe_answer(true)).expect("an answer");
    r.pump(1);
    assert_eq!(
        r.conn.pipeline.len(),
        40,
        "direct: the rest goes out at once"
    );
    r.write_all();
    let answers: Vec<u8> = (0..40).flat_map(|_| simple_answer()).collect();
    r.server_says(2, &answers).expect("answers");
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
}

#[test]
fn behind_a_pooler_one_sync_at_a_time_and_the_health_check_stands_down() {
    let mut r = Rig::behind_a_pooler("");
    assert_eq!(r.conn.health, Health::Off);
    assert!(r.shared.pooler_known(), "the client knows of the pooler");
    // Units of every size, large ones too: what matters is the Sync, not the bytes.
    let waiters: Vec<_> = (0..100)
        .map(|i| r.sized(if i % 10 == 0 { 40_000 } else { 700 }))
        .collect();
    let mut answered = 0;
    for ms in 1..1000 {
        r.pump(ms);
        let out = r.write_all();
        if r.conn.pipeline.is_empty() {
            break;
        }
        assert_eq!(syncs(&out), 1, "one unit, one Sync, per answer");
        assert_eq!(r.conn.pipeline.len(), 1);
        r.pump(ms);
        assert!(
            r.conn.transmit().is_empty(),
            "nothing while it is unanswered"
        );
        r.server_says(ms, &simple_answer()).expect("an answer");
        answered += 1;
    }
    assert_eq!(answered, 100);
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
}

#[test]
fn units_behind_the_one_sync_mark_the_connection_sync_bound() {
    let mut r = Rig::behind_a_pooler("");
    let (a, b) = (r.simple(), r.simple());
    r.pump(1);
    r.write_all();
    assert!(
        r.shared.is_sync_bound(),
        "one waits behind the other's Sync"
    );
    r.server_says(2, &simple_answer()).expect("an answer");
    r.pump(2);
    r.write_all();
    assert!(!r.shared.is_sync_bound(), "nothing waits");
    r.server_says(3, &simple_answer()).expect("an answer");
    assert_eq!((done(&a), done(&b)), (Some(true), Some(true)));
    // Straight to the server nothing waits behind a Sync.
    let mut d = super::rig("", false);
    let _w: Vec<_> = (0..3).map(|_| d.simple()).collect();
    d.pump(1);
    assert!(!d.shared.is_sync_bound());
}

#[test]
fn an_exclusive_connection_does_not_probe_and_takes_what_the_client_knows() {
    let mut r = unproven("", true);
    assert!(
        r.write_all().is_empty(),
        "nothing sent before its holder's units"
    );
    assert_eq!(
        r.conn.writes(),
        Writes::OneSync,
        "no path proved direct yet: the safe side"
    );
    r.shared.found_direct();
    assert_eq!(r.conn.writes(), Writes::Free);
    r.shared.found_pooler();
    assert_eq!(r.conn.writes(), Writes::OneSync, "a pooler outweighs");
}

#[test]
fn declared_paths_take_no_probe() {
    for (pooler, writes, health) in [
        ("none", Writes::Free, Health::Watching),
        ("session", Writes::Free, Health::Off),
        ("transaction", Writes::OneSync, Health::Off),
        ("transaction-pipelined", Writes::Bounded, Health::Off),
    ] {
        let mut r = unproven(&format!("pooler={pooler}"), false);
        assert!(r.write_all().is_empty(), "{pooler}: no probe");
        assert_eq!(r.conn.writes(), writes, "{pooler}");
        assert_eq!(r.conn.health, health, "{pooler}");
        // Declared, a pooler keeps lanes and overflow closed, as a found one does.
        assert_eq!(r.shared.pooler_known(), pooler != "none", "{pooler}");
    }
}

#[test]
fn pipelined_through_a_pooler_every_pump_keeps_the_bound() {
    let mut r = unproven("pooler=transaction-pipelined", false);
    let waiters: Vec<_> = (0..100).map(|_| r.sized(700)).collect();
    let limit = POOLER_FLIGHT_BYTES as u64;
    let mut answered = 0;
    for ms in 1..1000 {
        r.pump(ms);
        assert!(r.bytes_in_flight() <= limit, "{}", r.bytes_in_flight());
        r.write_all();
        if r.conn.pipeline.is_empty() {
            break;
        }
        // The server answers one unit at a time.
        r.server_says(ms, &simple_answer()).expect("an answer");
        answered += 1;
    }
    assert_eq!(answered, 100);
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
}

#[test]
fn pipelined_through_a_pooler_a_unit_larger_than_the_bound_goes_out_alone() {
    let mut r = unproven("pooler=transaction-pipelined", false);
    let small = r.simple();
    let big = r.sized(POOLER_FLIGHT_BYTES + 100);
    let after = r.simple();
    r.pump(1);
    assert_eq!(
        r.conn.pipeline.len(),
        1,
        "the big unit waits for the small one"
    );
    r.write_all();
    r.server_says(2, &simple_answer()).expect("an answer");
    assert_eq!(done(&small), Some(true));
    r.pump(2);
    assert_eq!(r.conn.pipeline.len(), 1, "alone");
    r.write_all();
    r.server_says(3, &simple_answer()).expect("an answer");
    assert_eq!(done(&big), Some(true));
    r.pump(3);
    r.write_all();
    r.server_says(4, &simple_answer()).expect("an answer");
    assert_eq!(done(&after), Some(true));
}

#[test]
fn pipelined_through_a_pooler_a_pass_waits_for_a_refill_of_room() {
    let mut r = unproven("pooler=transaction-pipelined", false);
    let waiters: Vec<_> = (0..40).map(|_| r.sized(1000)).collect();
    r.pump(1);
    r.write_all();
    let full = r.conn.pipeline.len();
    let mut t = 2;
    let out = loop {
        r.server_says(t, &simple_answer()).expect("an answer");
        let room = POOLER_FLIGHT_BYTES as u64 - r.bytes_in_flight();
        r.pump(t);
        t += 1;
        if room < POOLER_REFILL_BYTES as u64 {
            assert!(
                r.conn.transmit().is_empty(),
                "{room} bytes free: no pass yet"
            );
            assert!(r.conn.pipeline.len() < full);
        } else {
            break r.write_all();
        }
    };
    // Units of about 1 KiB: the pass filled the room up to the bound in one write.
    assert!(
        out.len() + 1024 > POOLER_REFILL_BYTES,
        "one batch of {} bytes",
        out.len()
    );
    let in_flight = r.bytes_in_flight();
    assert!(
        in_flight <= POOLER_FLIGHT_BYTES as u64 && in_flight + 1024 > POOLER_FLIGHT_BYTES as u64
    );
    while !r.conn.pipeline.is_empty() {
        t += 1;
        r.server_says(t, &simple_answer()).expect("an answer");
        r.pump(t);
        r.write_all();
    }
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
}

/// The executions per Sync of written bytes, in order.
fn executes_per_sync(out: &[u8]) -> Vec<usize> {
    let (mut at, mut n, mut segments) = (0, 0, Vec::new());
    while at < out.len() {
        let len = u32::from_be_bytes([out[at + 1], out[at + 2], out[at + 3], out[at + 4]]);
        match out[at] {
            b'E' => n += 1,
            b'S' => segments.push(std::mem::take(&mut n)),
            _ => {}
        }
        at += 1 + len as usize;
    }
    assert_eq!(n, 0, "executions after the last Sync");
    segments
}

#[test]
fn behind_a_pooler_cheap_reads_share_the_one_sync() {
    let mut r = Rig::behind_a_pooler("sync_coalescing=true");
    let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
    let waiters: Vec<_> = (0..200).map(|_| r.execute(&stmt)).collect();
    let mut t = 1;
    while !(r.conn.pipeline.is_empty() && lock(&r.shared.state).queue.is_empty()) {
        let queued = lock(&r.shared.state).queue.len();
        r.pump(t);
        let out = r.write_all();
        let segments = executes_per_sync(&out);
        assert_eq!(
            segments,
            [queued.min(16)],
            "one segment, one Sync, at a time"
        );
        let answer: Vec<u8> = segments
            .iter()
            .flat_map(|&n| (0..n).flat_map(|_| executed()).chain(ready()))
            .collect();
        r.server_says(t, &answer).expect("a good answer");
        t += 1;
    }
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
    let c = &r.shared.counters;
    assert_eq!(c.units_completed.load(Relaxed), 200);
    assert!(c.ready_received.load(Relaxed) <= 200 / 12, "{c:?}");
}

#[test]
fn behind_a_pooler_units_skipped_after_an_error_go_again_as_one_segment() {
    for failed in 0..4 {
        let mut r = Rig::behind_a_pooler("sync_coalescing=true");
        let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
        let waiters: Vec<_> = (0..4).map(|_| r.execute(&stmt)).collect();
        r.pump(1);
        let first = r.write_all();
        assert_eq!(executes_per_sync(&first), [4]);
        let unit = (first.len() - SYNC.len()) / 4;
        let mut answer: Vec<u8> = (0..failed).flat_map(|_| executed()).collect();
        answer.extend(error());
        answer.extend(ready());
        r.server_says(2, &answer).expect("a good answer");
        assert_eq!(done(&waiters[failed]), Some(false), "{failed} failed");
        let skipped = 3 - failed;
        let again = r.write_all();
        assert_eq!(
            again.len(),
            skipped * unit + SYNC.len() * usize::from(skipped > 0)
        );
        assert_eq!(
            syncs(&again),
            usize::from(skipped > 0),
            "one Sync for all of them"
        );
        assert_eq!(r.conn.pipeline.len(), skipped);
        if skipped == 0 {
            continue;
        }
        // The first of them fails too: the rest go again, once more together.
        let mut answer = error();
        answer.extend(ready());
        r.server_says(3, &answer).expect("a good answer");
        assert_eq!(done(&waiters[failed + 1]), Some(false));
        let again = r.write_all();
        let left = skipped - 1;
        assert_eq!(syncs(&again), usize::from(left > 0));
        assert_eq!(r.conn.pipeline.len(), left);
        let answer: Vec<u8> = (0..left)
            .flat_map(|_| executed())
            .chain(if left > 0 { ready() } else { Vec::new() })
            .collect();
        r.server_says(4, &answer).expect("a good answer");
        for w in &waiters[failed + 2..] {
            assert_eq!(done(w), Some(true), "sent again and answered");
        }
        assert!(r.conn.pipeline.is_empty() && r.conn.replay.is_empty());
        assert!(r.write_all().is_empty());
    }
}
