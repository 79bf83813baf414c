//! The path to the server: the probe for a pooler, the bound on bytes in flight behind one,
//! its refill, and Sync coalescing within it.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::{
    done, executed, lock, probe_answer, ready, simple_answer, unproven, QueryWaiter, Rig,
    Statement, SYNC,
};
use crate::driver::conn::path::{POOLER_FLIGHT_BYTES, POOLER_REFILL_BYTES};

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
    assert_eq!(r.conn.flight_limit(), None, "direct: no bound");
}

#[test]
fn until_the_probe_answers_the_bytes_in_flight_stay_within_the_pooler_bound() {
    let mut r = unproven("", false);
    let waiters: Vec<_> = (0..40).map(|_| r.sized(1000)).collect();
    r.pump(0);
    let limit = POOLER_FLIGHT_BYTES as u64;
    assert!(r.bytes_in_flight() <= limit, "{}", r.bytes_in_flight());
    assert!(
        r.bytes_in_flight() + 1000 > limit,
        "filled up to the bound: {}",
        r.bytes_in_flight()
    );
    let sent = r.conn.pipeline.len() - 1;
    r.write_all();
    r.server_says(1, &probe_answer(true)).expect("an answer");
    r.pump(1);
    assert_eq!(
        r.conn.pipeline.len(),
        40,
        "direct: the rest goes out at once ({sent} had)"
    );
    r.write_all();
    let answers: Vec<u8> = (0..40).flat_map(|_| simple_answer()).collect();
    r.server_says(2, &answers).expect("answers");
    assert!(waiters.iter().all(|w| done(w) == Some(true)));
}

#[test]
fn behind_a_pooler_every_pump_keeps_the_bound_and_the_health_check_stands_down() {
    let mut r = unproven("", false);
    r.write_all();
    r.server_says(0, &probe_answer(false)).expect("an answer");
    assert_eq!(r.conn.health, crate::driver::conn::Health::Off);
    assert!(r.shared.pooler_known(), "the client knows of the pooler");
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
fn behind_a_pooler_a_unit_larger_than_the_bound_goes_out_alone() {
    let mut r = unproven("", false);
    r.write_all();
    r.server_says(0, &probe_answer(false)).expect("an answer");
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
fn an_exclusive_connection_does_not_probe_and_takes_what_the_client_knows() {
    let mut r = unproven("", true);
    assert!(
        r.write_all().is_empty(),
        "nothing sent before its holder's units"
    );
    assert_eq!(r.conn.flight_limit(), None);
    r.shared.found_pooler();
    assert_eq!(r.conn.flight_limit(), Some(POOLER_FLIGHT_BYTES));
}

#[test]
fn behind_a_pooler_a_pass_waits_for_a_refill_of_room() {
    let mut r = unproven("", false);
    r.write_all();
    r.server_says(0, &probe_answer(false)).expect("an answer");
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
fn behind_a_pooler_cheap_reads_share_syncs_and_every_write_ends_at_one() {
    let mut r = unproven("sync_coalescing=true", false);
    r.write_all();
    r.server_says(0, &probe_answer(false)).expect("an answer");
    let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
    let waiters: Vec<_> = (0..200).map(|_| r.execute(&stmt)).collect();
    let mut t = 1;
    while !(r.conn.pipeline.is_empty() && lock(&r.shared.state).queue.is_empty()) {
        r.pump(t);
        let out = r.write_all();
        // PgBouncer 1.18 may hand its server back at a ReadyForQuery once the Syncs it
        // forwarded are answered: a write read whole never ends inside a segment.
        assert!(out.ends_with(&SYNC), "a write ends inside a segment");
        assert!(r.bytes_in_flight() <= POOLER_FLIGHT_BYTES as u64);
        let segments = executes_per_sync(&out);
        assert!(
            segments.iter().all(|&n| (1..=16).contains(&n)) && segments.iter().any(|&n| n > 1),
            "cheap reads share Syncs behind a pooler too: {segments:?}"
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
