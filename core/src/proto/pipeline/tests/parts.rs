//! Which statement of a unit an outcome or error belongs to: framed units (a BEGIN before, a
//! COMMIT after), batches, a simple text led by a BEGIN, a simple text whose rows are kept, and
//! a bare status unit.

use super::*;

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
            p.push_kind_framed(i, k.clone(), *f);
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
    p.push_kind_framed(0usize, k, f);
    let err = p
        .drain(&mut BytesMut::from(&s[..]), &mut Parts::default())
        .unwrap_err();
    // Its script sees it first: the next statement's BindComplete was due.
    assert!(err.0.contains("'Z' where BindComplete was due"), "{err}");
    // Still in flight, so the connection fails it as it closes (found by fuzzing).
    assert_eq!(p.take_all().collect::<Vec<_>>(), [0]);

    // Likewise a coalesced unit that reaches a ReadyForQuery without completing or failing.
    let mut p = Pipeline::new();
    p.push_kind(0usize, UnitKind::Execute(columns()));
    p.join_last();
    p.push_kind(1, UnitKind::Execute(columns()));
    let mut s = vec![];
    msg(&mut s, b'2', b"");
    ready(&mut s);
    let err = p
        .drain(&mut BytesMut::from(&s[..]), &mut Parts::default())
        .unwrap_err();
    assert!(
        err.0
            .contains("'Z' where DataRow or CommandComplete was due"),
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

/// A RowDescription of text columns named `names`.
fn describe_text(buf: &mut Vec<u8>, names: &[&str]) {
    let mut body = (names.len() as i16).to_be_bytes().to_vec();
    for name in names {
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(&0i32.to_be_bytes()); // table
        body.extend_from_slice(&0i16.to_be_bytes()); // column
        body.extend_from_slice(&25i32.to_be_bytes()); // text
        body.extend_from_slice(&(-1i16).to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes()); // text format
    }
    msg(buf, b'T', &body);
}

#[test]
fn a_simple_text_whose_rows_are_kept_gives_each_statement_its_own() {
    // BEGIN (the frame's), a SELECT of two rows of two columns, an INSERT, a SELECT of one.
    let mut s = vec![];
    complete(&mut s, "BEGIN");
    describe_text(&mut s, &["a", "b"]);
    data_row(&mut s, &[Some(b"1"), Some(b"x")]);
    data_row(&mut s, &[Some(b"2"), None]);
    complete(&mut s, "SELECT 2");
    complete(&mut s, "INSERT 0 5");
    describe_text(&mut s, &["c"]);
    data_row(&mut s, &[Some(b"3")]);
    complete(&mut s, "SELECT 1");
    ready_with(&mut s, b"T");
    assert_eq!(
        parts(
            &[(
                UnitKind::SimpleRows,
                Frame {
                    before: 1,
                    after: 0
                }
            )],
            &s
        )
        .0,
        ["0 batch 2/2 0/5 1/1"]
    );
    // A row whose width differs from the statement's own description is a violation.
    let mut s = vec![];
    describe_text(&mut s, &["c"]);
    data_row(&mut s, &[Some(b"3"), Some(b"4")]);
    let mut p = Pipeline::new();
    p.push_kind(0usize, UnitKind::SimpleRows);
    let mut buf = BytesMut::from(&s[..]);
    assert!(p.drain(&mut buf, &mut Parts::default()).is_err());
    // An error stops the text: the statements before it were reported, the unit failed.
    let mut s = vec![];
    complete(&mut s, "SELECT 0");
    error(&mut s, "42703", "ERROR");
    ready_with(&mut s, b"I");
    assert_eq!(
        parts(&[(UnitKind::SimpleRows, Frame::NONE)], &s).0,
        ["0 failed 42703 in Own(1)"]
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
