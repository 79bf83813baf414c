//! The pipeline's deterministic tests: every message split, every outcome, in order.

use bytes::BytesMut;

use super::fields::affected_rows;
use super::*;

/// Backend messages, encoded as the server would send them.
fn msg(buf: &mut Vec<u8>, tag: u8, body: &[u8]) {
    buf.push(tag);
    buf.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    buf.extend_from_slice(body);
}
fn data_row(buf: &mut Vec<u8>, cols: &[Option<&[u8]>]) {
    let mut b = (cols.len() as u16).to_be_bytes().to_vec();
    for c in cols {
        match c {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    msg(buf, b'D', &b);
}
fn error(buf: &mut Vec<u8>, code: &str, severity: &str) {
    let mut b = vec![];
    for (k, v) in [
        (b'S', severity),
        (b'V', severity),
        (b'C', code),
        (b'M', "boom"),
    ] {
        b.push(k);
        b.extend_from_slice(v.as_bytes());
        b.push(0);
    }
    b.push(0);
    msg(buf, b'E', &b);
}
fn ready(buf: &mut Vec<u8>) {
    msg(buf, b'Z', b"I");
}
fn complete(buf: &mut Vec<u8>, tag: &str) {
    let mut b = tag.as_bytes().to_vec();
    b.push(0);
    msg(buf, b'C', &b);
}

fn columns() -> Arc<[Column]> {
    Arc::from(vec![
        Column::new("n".into(), Type::INT8),
        Column::new("t".into(), Type::TEXT),
    ])
}

/// A recorded-style stream: a prepare, then execute units where unit 3 fails mid-result
/// (rows, then an error), unit 5 fails at bind, and the rest return rows; plus a notice
/// and a parameter status in between.
fn stream() -> (Vec<u8>, Vec<UnitKind>) {
    let mut s = vec![];
    let mut kinds = vec![UnitKind::Prepare];
    // Prepare: ParseComplete, ParameterDescription(int8, text), RowDescription, ReadyForQuery.
    msg(&mut s, b'1', b"");
    let mut pd = 2u16.to_be_bytes().to_vec();
    pd.extend_from_slice(&20u32.to_be_bytes());
    pd.extend_from_slice(&25u32.to_be_bytes());
    msg(&mut s, b't', &pd);
    let mut rd = 2u16.to_be_bytes().to_vec();
    for (name, oid) in [("n", 20u32), ("t", 25u32)] {
        rd.extend_from_slice(name.as_bytes());
        rd.push(0);
        rd.extend_from_slice(&0u32.to_be_bytes());
        rd.extend_from_slice(&0i16.to_be_bytes());
        rd.extend_from_slice(&oid.to_be_bytes());
        rd.extend_from_slice(&(-1i16).to_be_bytes());
        rd.extend_from_slice(&(-1i32).to_be_bytes());
        rd.extend_from_slice(&1i16.to_be_bytes());
    }
    msg(&mut s, b'T', &rd);
    ready(&mut s);
    for u in 1..=8u64 {
        kinds.push(UnitKind::Execute(columns()));
        msg(&mut s, b'2', b"");
        if u == 5 {
            error(&mut s, "22P02", "ERROR");
            ready(&mut s);
            continue;
        }
        for r in 0..u {
            let n = (u * 100 + r).to_be_bytes();
            let t = format!("u{u}r{r}");
            data_row(
                &mut s,
                &[Some(&n), if r % 2 == 0 { Some(t.as_bytes()) } else { None }],
            );
        }
        if u == 3 {
            error(&mut s, "22012", "ERROR");
        } else {
            complete(&mut s, &format!("SELECT {u}"));
        }
        if u == 6 {
            let mut n = vec![];
            error(&mut n, "01000", "WARNING");
            n[0] = b'N';
            s.extend_from_slice(&n);
            msg(&mut s, b'S', b"TimeZone\0UTC\0");
        }
        ready(&mut s);
    }
    (s, kinds)
}

#[derive(Default)]
struct Record {
    log: Vec<String>,
}
impl Handler<usize> for Record {
    fn unit_done(&mut self, token: usize, outcome: Outcome) {
        let line = match outcome {
            Outcome::Rows { rows, affected, .. } => {
                let vals: Vec<String> = rows
                    .iter()
                    .map(|r| format!("{}:{:?}", r.get::<_, i64>(0), r.get::<_, Option<&str>>("t")))
                    .collect();
                format!(
                    "{token} rows={} affected={affected} {}",
                    rows.len(),
                    vals.join(",")
                )
            }
            Outcome::Prepared { params, columns } => format!(
                "{token} prepared {:?} {:?}",
                params
                    .iter()
                    .map(|t| t.name().to_owned())
                    .collect::<Vec<_>>(),
                columns
                    .iter()
                    .map(|c| c.name().to_owned())
                    .collect::<Vec<_>>()
            ),
            Outcome::Failed { error: e, .. } => format!("{token} failed {}", e.code),
            Outcome::Batch => format!("{token} batch"),
        };
        self.log.push(line);
    }
    fn notice(&mut self, n: DbError) {
        self.log.push(format!("notice {}", n.code));
    }
    fn parameter_status(&mut self, name: &str, value: &str) {
        self.log.push(format!("param {name}={value}"));
    }
}

/// Feeds `stream` in the given chunk sizes and returns what the handler saw.
fn feed(stream: &[u8], kinds: &[UnitKind], cuts: &mut dyn Iterator<Item = usize>) -> Vec<String> {
    let mut p = Pipeline::new();
    for (i, k) in kinds.iter().enumerate() {
        p.push(i, k.clone());
    }
    let mut h = Record::default();
    let mut buf = BytesMut::new();
    let mut at = 0;
    while at < stream.len() {
        let n = cuts
            .next()
            .unwrap_or(stream.len())
            .clamp(1, stream.len() - at);
        buf.extend_from_slice(&stream[at..at + n]);
        at += n;
        p.drain(&mut buf, &mut h).expect("valid stream");
    }
    assert!(buf.is_empty(), "every byte consumed");
    assert!(p.is_empty(), "every unit completed");
    assert_eq!(
        p.ready_seen(),
        kinds.len() as u64,
        "one ReadyForQuery per unit"
    );
    h.log
}

#[test]
fn outcomes_are_fifo_and_errors_stay_in_their_unit() {
    let (s, kinds) = stream();
    let log = feed(&s, &kinds, &mut std::iter::empty());
    assert_eq!(log[0], r#"0 prepared ["int8", "text"] ["n", "t"]"#);
    assert_eq!(log[1], r#"1 rows=1 affected=1 100:Some("u1r0")"#);
    assert_eq!(
        log[3], "3 failed 22012",
        "rows before an error are discarded"
    );
    assert_eq!(
        log[4],
        r#"4 rows=4 affected=4 400:Some("u4r0"),401:None,402:Some("u4r2"),403:None"#
    );
    assert_eq!(log[5], "5 failed 22P02");
    assert_eq!(log[6], "notice 01000");
    assert_eq!(log[7], "param TimeZone=UTC");
    assert!(log[8].starts_with("6 rows=6"), "{}", log[8]);
    assert!(log[10].starts_with("8 rows=8 affected=8"), "{}", log[10]);
    assert_eq!(log.len(), 11);
}

#[test]
fn every_split_gives_the_same_outcome() {
    let (s, kinds) = stream();
    let whole = feed(&s, &kinds, &mut std::iter::empty());
    assert_eq!(
        feed(&s, &kinds, &mut std::iter::repeat(1)),
        whole,
        "one byte at a time"
    );
    for cut in 1..s.len() {
        let mut cuts = [cut, s.len()].into_iter();
        assert_eq!(feed(&s, &kinds, &mut cuts), whole, "split at {cut}");
    }
    // Random chunkings from a fixed-seed generator (reproducible).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..500 {
        let mut cuts = std::iter::from_fn(|| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Some((x % 40) as usize + 1)
        });
        assert_eq!(feed(&s, &kinds, &mut cuts), whole);
    }
}

#[test]
fn violations_are_reported_not_panicked() {
    struct Nop;
    impl Handler<u8> for Nop {
        fn unit_done(&mut self, _: u8, _: Outcome) {}
    }
    let mut p: Pipeline<u8> = Pipeline::new();
    let mut s = vec![];
    ready(&mut s);
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "ReadyForQuery with nothing in flight"
    );
    let mut s = vec![];
    data_row(&mut s, &[Some(b"x")]);
    p.push(1, UnitKind::Typed);
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "DataRow before RowDescription"
    );
    let mut p: Pipeline<u8> = Pipeline::new();
    p.push(1, UnitKind::Execute(columns()));
    let mut s = vec![];
    data_row(&mut s, &[Some(b"x")]);
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "column count mismatch"
    );
    let mut p: Pipeline<u8> = Pipeline::new();
    p.push(1, UnitKind::Execute(columns()));
    assert!(
        p.drain(&mut BytesMut::from(&b"Z\0\0\0\x01"[..]), &mut Nop)
            .is_err(),
        "bad length"
    );
    let mut s = vec![];
    msg(&mut s, b'H', b"\0\0\0");
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "COPY refused"
    );
    // A FATAL error with nothing in flight (server shutdown) is not a violation.
    let mut p: Pipeline<u8> = Pipeline::new();
    let mut s = vec![];
    error(&mut s, "57P01", "FATAL");
    assert!(p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_ok());
}

#[test]
fn affected_rows_from_tags() {
    assert_eq!(affected_rows(b"INSERT 0 5\0"), 5);
    assert_eq!(affected_rows(b"UPDATE 12\0"), 12);
    assert_eq!(affected_rows(b"CREATE TABLE\0"), 0);
    assert_eq!(affected_rows(b"\0"), 0);
}

/// A consumer with room for `room` rows at a time.
struct Sink {
    room: usize,
    rows: Vec<i64>,
    done: Vec<String>,
}
impl Handler<usize> for Sink {
    fn unit_done(&mut self, token: usize, outcome: Outcome) {
        let what = match outcome {
            Outcome::Rows { rows, affected, .. } => {
                format!("rows={} affected={affected}", rows.len())
            }
            Outcome::Failed { error: e, .. } => format!("failed {}", e.code),
            Outcome::Prepared { .. } => "prepared".into(),
            Outcome::Batch => "batch".into(),
        };
        self.done.push(format!("{token} {what}"));
    }
    fn has_room(&mut self, _token: &usize) -> bool {
        self.rows.len() < self.room
    }
    fn stream_row(&mut self, _token: &usize, row: Row) {
        self.rows.push(row.get::<_, i64>(0));
    }
}

#[test]
fn a_stream_pauses_at_a_full_consumer_and_resumes_where_it_stopped() {
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    for n in 0..5i64 {
        data_row(&mut s, &[Some(&n.to_be_bytes()), None]);
    }
    complete(&mut s, "SELECT 5");
    ready(&mut s);
    let mut p = Pipeline::new();
    p.push(1usize, UnitKind::Stream(columns()));
    let mut buf = BytesMut::from(&s[..]);
    let mut h = Sink {
        room: 2,
        rows: vec![],
        done: vec![],
    };
    assert_eq!(p.drain(&mut buf, &mut h).unwrap(), 0);
    assert!(p.is_paused());
    assert_eq!(h.rows, vec![0, 1]);
    let left = buf.len();
    // Still full: nothing moves.
    assert_eq!(p.drain(&mut buf, &mut h).unwrap(), 0);
    assert_eq!(buf.len(), left);
    // The consumer takes its rows; the drain goes on from the same row.
    h.room = 10;
    assert_eq!(p.drain(&mut buf, &mut h).unwrap(), 1);
    assert!(!p.is_paused());
    assert_eq!(h.rows, vec![0, 1, 2, 3, 4]);
    assert_eq!(h.done, vec!["1 rows=0 affected=5"]);
    assert!(buf.is_empty());
}

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
    fn unit_skipped(&mut self, token: usize, _kind: UnitKind) {
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
                    p.push(u, UnitKind::Execute(columns()));
                    if u + 1 < len {
                        assert!(p.join_last().is_some());
                    }
                }
                p.push(len, UnitKind::Execute(columns()));
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
    p.push(0, UnitKind::Prepare);
    assert!(p.join_last().is_none());
    p.push(1, UnitKind::Simple);
    assert!(p.join_last().is_none());
    p.push(2, UnitKind::Typed);
    assert_eq!(p.join_last().copied(), Some(2));
}

/// A ReadyForQuery inside a segment, before its unit's CommandComplete, is a violation.
#[test]
fn ready_inside_a_segment_is_a_violation() {
    let mut p = Pipeline::new();
    p.push(0usize, UnitKind::Execute(columns()));
    p.join_last();
    p.push(1usize, UnitKind::Execute(columns()));
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    ready(&mut s);
    let mut buf = BytesMut::from(&s[..]);
    assert!(p.drain(&mut buf, &mut Segments::default()).is_err());
}

/// Outcomes of framed, batch, simple and status units, as text.
#[derive(Default)]
struct Parts {
    log: Vec<String>,
    statuses: Vec<u8>,
    statements: Vec<String>,
}
impl Handler<usize> for Parts {
    fn unit_done(&mut self, token: usize, outcome: Outcome) {
        let what = match outcome {
            Outcome::Rows {
                rows,
                affected,
                verb,
            } => format!("rows={} affected={affected} verb={verb:?}", rows.len()),
            Outcome::Failed { error, part } => {
                self.statements.clear();
                format!("failed {} in {part:?}", error.code)
            }
            Outcome::Batch => format!("batch {}", std::mem::take(&mut self.statements).join(" ")),
            Outcome::Prepared { .. } => "prepared".into(),
        };
        self.log.push(format!("{token} {what}"));
    }
    fn ready(&mut self, status: u8) {
        self.statuses.push(status);
    }
    fn batch_statement(&mut self, _: &usize, index: usize, rows: Vec<Row>, affected: u64) {
        assert_eq!(index, self.statements.len(), "statements in order");
        self.statements.push(format!("{}/{affected}", rows.len()));
    }
}

fn ready_with(buf: &mut Vec<u8>, status: &[u8; 1]) {
    msg(buf, b'Z', status);
}

/// Feeds `stream` to a pipeline holding `units` under every two-way split; asserts every split
/// gives the same log and returns it.
fn parts(units: &[(UnitKind, Frame)], stream: &[u8]) -> (Vec<String>, Vec<u8>) {
    let run = |cut: usize| {
        let mut p = Pipeline::new();
        for (i, (k, f)) in units.iter().enumerate() {
            p.push_framed(i, k.clone(), *f);
        }
        let mut h = Parts::default();
        let mut buf = BytesMut::new();
        for chunk in [&stream[..cut], &stream[cut..]] {
            buf.extend_from_slice(chunk);
            p.drain(&mut buf, &mut h).expect("valid stream");
        }
        assert!(buf.is_empty() && p.is_empty(), "split at {cut}");
        assert_eq!(p.ready_seen(), units.len() as u64);
        (h.log, h.statuses)
    };
    let whole = run(stream.len());
    for cut in 0..stream.len() {
        assert_eq!(run(cut), whole, "split at {cut}");
    }
    whole
}

fn row(buf: &mut Vec<u8>, n: i64) {
    data_row(buf, &[Some(&n.to_be_bytes()), Some(b"x")]);
}

const BEGIN_COMMIT: Frame = Frame {
    before: 1,
    after: 1,
};
const BEGIN: Frame = Frame {
    before: 1,
    after: 0,
};

#[test]
fn a_framed_unit_reports_its_own_statement_and_which_part_failed() {
    let exec = || UnitKind::Execute(columns());
    // BEGIN, the statement (2 rows), COMMIT: the statement's count, COMMIT's verb.
    let mut ok = vec![];
    for t in [b"1", b"2"] {
        msg(&mut ok, t[0], b"");
    }
    complete(&mut ok, "BEGIN");
    msg(&mut ok, b'2', b"");
    row(&mut ok, 1);
    row(&mut ok, 2);
    complete(&mut ok, "UPDATE 2");
    msg(&mut ok, b'1', b"");
    msg(&mut ok, b'2', b"");
    complete(&mut ok, "COMMIT");
    ready(&mut ok);
    let (log, st) = parts(&[(exec(), BEGIN_COMMIT)], &ok);
    assert_eq!(log, ["0 rows=2 affected=2 verb=COMMIT"]);
    assert_eq!(st, b"I");

    // BEGIN fails: the rest was skipped.
    let mut s = vec![];
    msg(&mut s, b'1', b"");
    error(&mut s, "25P02", "ERROR");
    ready_with(&mut s, b"E");
    assert_eq!(
        parts(&[(exec(), BEGIN_COMMIT)], &s).0,
        ["0 failed 25P02 in Before"]
    );

    // The statement fails after its rows began: the COMMIT never ran.
    let mut s = vec![];
    msg(&mut s, b'1', b"");
    msg(&mut s, b'2', b"");
    complete(&mut s, "BEGIN");
    msg(&mut s, b'2', b"");
    row(&mut s, 1);
    error(&mut s, "22012", "ERROR");
    ready_with(&mut s, b"E");
    assert_eq!(
        parts(&[(exec(), BEGIN_COMMIT)], &s),
        (vec!["0 failed 22012 in Own(0)".to_owned()], b"E".to_vec())
    );

    // The COMMIT fails (a deferred constraint).
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    complete(&mut s, "INSERT 0 1");
    msg(&mut s, b'1', b"");
    msg(&mut s, b'2', b"");
    error(&mut s, "23505", "ERROR");
    ready(&mut s);
    let commit_only = Frame {
        before: 0,
        after: 1,
    };
    assert_eq!(
        parts(&[(exec(), commit_only)], &s).0,
        ["0 failed 23505 in After"]
    );

    // A BEGIN before a plain unit, then an unframed unit: each its own outcome.
    let mut s = vec![];
    msg(&mut s, b'1', b"");
    msg(&mut s, b'2', b"");
    complete(&mut s, "BEGIN");
    msg(&mut s, b'2', b"");
    row(&mut s, 7);
    complete(&mut s, "SELECT 1");
    ready_with(&mut s, b"T");
    msg(&mut s, b'2', b"");
    complete(&mut s, "UPDATE 3");
    ready_with(&mut s, b"T");
    assert_eq!(
        parts(&[(exec(), BEGIN), (exec(), Frame::NONE)], &s),
        (
            vec![
                "0 rows=1 affected=1 verb=SELECT".to_owned(),
                "1 rows=0 affected=3 verb=UPDATE".to_owned()
            ],
            b"TT".to_vec()
        )
    );
}

#[test]
fn a_batch_reports_each_statement_or_the_one_that_failed() {
    let shape: Arc<[Arc<[Column]>]> = Arc::from(vec![columns(), Arc::from(Vec::new()), columns()]);
    let batch = || (UnitKind::Batch(shape.clone()), Frame::NONE);
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    row(&mut s, 1);
    row(&mut s, 2);
    complete(&mut s, "SELECT 2");
    msg(&mut s, b'2', b"");
    complete(&mut s, "UPDATE 5");
    msg(&mut s, b'2', b"");
    row(&mut s, 3);
    complete(&mut s, "SELECT 1");
    ready(&mut s);
    // A unit after it is untouched.
    msg(&mut s, b'2', b"");
    complete(&mut s, "DELETE 4");
    ready(&mut s);
    let (log, _) = parts(&[batch(), (UnitKind::Execute(columns()), Frame::NONE)], &s);
    assert_eq!(
        log,
        ["0 batch 2/2 0/5 1/1", "1 rows=0 affected=4 verb=DELETE"]
    );

    // Statement 1 fails: the batch fails there (statement 0's result was reported, but the
    // batch's failure says none of it counts).
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    row(&mut s, 1);
    complete(&mut s, "SELECT 1");
    msg(&mut s, b'2', b"");
    error(&mut s, "23505", "ERROR");
    ready(&mut s);
    assert_eq!(parts(&[batch()], &s).0, ["0 failed 23505 in Own(1)"]);

    // A server that ends the batch early breaks the protocol.
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    complete(&mut s, "SELECT 0");
    ready(&mut s);
    let mut p = Pipeline::new();
    let (k, f) = batch();
    p.push_framed(0usize, k, f);
    let err = p
        .drain(&mut BytesMut::from(&s[..]), &mut Parts::default())
        .unwrap_err();
    assert!(
        err.0.contains("batch of 3 statements ended after 1"),
        "{err}"
    );
    // Still in flight, so the connection fails it as it closes (found by fuzzing).
    assert_eq!(p.take_all().collect::<Vec<_>>(), [0]);

    // Likewise a coalesced unit that reaches a ReadyForQuery without completing or failing.
    let mut p = Pipeline::new();
    p.push(0usize, UnitKind::Execute(columns()));
    p.join_last();
    p.push(1, UnitKind::Execute(columns()));
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    ready(&mut s);
    let err = p
        .drain(&mut BytesMut::from(&s[..]), &mut Parts::default())
        .unwrap_err();
    assert!(
        err.0.contains("before a statement's CommandComplete"),
        "{err}"
    );
    assert_eq!(p.take_all().collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn a_simple_text_led_by_begin_counts_its_own_statements() {
    let mut s = vec![];
    complete(&mut s, "BEGIN");
    complete(&mut s, "INSERT 0 1");
    complete(&mut s, "UPDATE 3");
    ready_with(&mut s, b"T");
    assert_eq!(
        parts(&[(UnitKind::Simple, BEGIN)], &s).0,
        ["0 rows=0 affected=3 verb=UPDATE"]
    );
    let mut s = vec![];
    error(&mut s, "25P02", "ERROR");
    ready_with(&mut s, b"E");
    assert_eq!(
        parts(&[(UnitKind::Simple, BEGIN)], &s).0,
        ["0 failed 25P02 in Before"]
    );
    let mut s = vec![];
    complete(&mut s, "BEGIN");
    complete(&mut s, "INSERT 0 1");
    error(&mut s, "42P01", "ERROR");
    ready_with(&mut s, b"E");
    assert_eq!(
        parts(&[(UnitKind::Simple, BEGIN)], &s).0,
        ["0 failed 42P01 in Own(1)"]
    );
}

#[test]
fn a_status_unit_is_answered_by_a_ready_for_query_alone() {
    let mut s = vec![];
    ready_with(&mut s, b"T");
    assert_eq!(
        parts(&[(UnitKind::Status, Frame::NONE)], &s),
        (vec!["0 rows=0 affected=0 verb=".to_owned()], b"T".to_vec())
    );
}

#[test]
fn a_length_header_beyond_the_cap_fails_before_its_body_is_reserved() {
    struct Nop;
    impl Handler<u8> for Nop {
        fn unit_done(&mut self, _: u8, _: Outcome) {}
    }
    let mut p: Pipeline<u8> = Pipeline::new().with_max_message(1 << 20);
    p.push(1, UnitKind::Execute(columns()));
    // A DataRow claiming 4 GiB: refused at its header.
    let mut buf = BytesMut::from(&b"D\xff\xff\xff\xf0"[..]);
    let e = p.drain(&mut buf, &mut Nop).unwrap_err();
    assert!(e.0.contains("max_message_size"), "{}", e.0);
    assert!(buf.capacity() < 4096, "{}", buf.capacity());
    // A CommandComplete claiming 1 MiB: a short type, refused whatever the cap.
    let mut buf = BytesMut::from(&b"C\x00\x10\x00\x00"[..]);
    let e = p.drain(&mut buf, &mut Nop).unwrap_err();
    assert!(e.0.contains("never longer"), "{}", e.0);
    // A legitimate partial row under the cap reserves at most one step ahead of what arrived.
    let mut p: Pipeline<u8> = Pipeline::new();
    p.push(1, UnitKind::Execute(columns()));
    let mut buf = BytesMut::from(&b"D\x3f\xff\xff\xf0\0\x01"[..]);
    assert_eq!(p.drain(&mut buf, &mut Nop).unwrap(), 0);
    assert!(
        buf.capacity() <= crate::proto::frame::RESERVE_AHEAD + 4096,
        "{}",
        buf.capacity()
    );
}
