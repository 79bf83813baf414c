//! Units sharing one Sync (a segment): each completes at its CommandComplete, a failure fails
//! its unit and skips the rest, only executions join, and a ReadyForQuery inside a segment is a
//! violation.

use super::*;

/// Records outcomes and skips of segment tests, with the ReadyForQuery count at each event.
#[derive(Default)]
struct Segments {
    log: Vec<String>,
    ready: usize,
}
impl Handler<usize> for Segments {
    fn unit_done(&mut self, token: usize, outcome: Outcome) {
        let what = match outcome {
            Outcome::Rows { rows, .. } => format!("rows={}", rows.len()),
            Outcome::Failed { error: e, .. } => format!("failed {}", e.code),
            Outcome::Prepared { .. } => "prepared".into(),
            Outcome::Batch => "batch".into(),
        };
        self.log.push(format!("{token} {what} z{}", self.ready));
    }
    fn unit_skipped(&mut self, token: usize, _kind: UnitKind, _last: bool) {
        self.log.push(format!("{token} skipped z{}", self.ready));
    }
    fn ready(&mut self, _status: u8) {
        self.ready += 1;
    }
}

/// One point-select answer without its ReadyForQuery (a unit that shares a Sync).
fn point(s: &mut Vec<u8>, n: u64) {
    msg(s, b'2', b"");
    data_row(s, &[Some(&n.to_be_bytes()), None]);
    complete(s, "SELECT 1");
}

/// A segment of `len` units where unit `fails` (if any) fails at bind, every split of the
/// stream: units before the failure complete at their CommandComplete (before the
/// ReadyForQuery), the failed one at the ReadyForQuery, the rest are skipped, and a unit
/// with its own Sync after the segment is untouched.
#[test]
fn a_failure_in_a_segment_fails_its_unit_and_skips_the_rest() {
    for len in 1..=5usize {
        for fails in (0..len).map(Some).chain([None]) {
            let mut s = vec![];
            for u in 0..len {
                if Some(u) == fails {
                    error(&mut s, "22012", "ERROR");
                    break;
                }
                point(&mut s, u as u64);
            }
            ready(&mut s);
            point(&mut s, 99);
            ready(&mut s);
            for cut in [1usize, 3, 7, s.len()] {
                let mut p = Pipeline::new();
                for u in 0..len {
                    p.push_kind(u, UnitKind::Execute(columns()));
                    if u + 1 < len {
                        assert!(p.join_last().is_some());
                    }
                }
                p.push_kind(len, UnitKind::Execute(columns()));
                let mut h = Segments::default();
                let mut buf = BytesMut::new();
                for chunk in s.chunks(cut) {
                    buf.extend_from_slice(chunk);
                    p.drain(&mut buf, &mut h).expect("valid stream");
                }
                assert!(p.is_empty() && buf.is_empty());
                let mut want = vec![];
                for u in 0..len {
                    want.push(match fails {
                        Some(f) if u == f => format!("{u} failed 22012 z1"),
                        Some(f) if u > f => format!("{u} skipped z1"),
                        _ if u + 1 == len => format!("{u} rows=1 z1"),
                        _ => format!("{u} rows=1 z0"),
                    });
                }
                want.push(format!("{len} rows=1 z2"));
                assert_eq!(h.log, want, "len {len}, failing {fails:?}, cut {cut}");
                assert_eq!(p.ready_seen(), 2);
            }
        }
    }
}

/// Only execution units can share a Sync; a prepare keeps its own.
#[test]
fn only_executions_join_a_segment() {
    let mut p: Pipeline<usize> = Pipeline::new();
    assert!(p.join_last().is_none(), "nothing to join");
    p.push_kind(0, UnitKind::Prepare);
    assert!(p.join_last().is_none());
    p.push_kind(1, UnitKind::Simple);
    assert!(p.join_last().is_none());
    p.push_kind(2, UnitKind::Typed);
    assert_eq!(p.join_last().copied(), Some(2));
}

/// A ReadyForQuery inside a segment, before its unit's CommandComplete, is a violation.
#[test]
fn ready_inside_a_segment_is_a_violation() {
    let mut p = Pipeline::new();
    p.push_kind(0usize, UnitKind::Execute(columns()));
    p.join_last();
    p.push_kind(1usize, UnitKind::Execute(columns()));
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    ready(&mut s);
    let mut buf = BytesMut::from(&s[..]);
    assert!(p.drain(&mut buf, &mut Segments::default()).is_err());
}
