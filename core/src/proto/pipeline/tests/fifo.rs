//! Units answered in order with each error kept in its unit, under every split of the stream;
//! protocol violations and over-long headers reported, not panicked; a CommandComplete's count;
//! a streaming unit pausing at a full consumer.

use super::*;
use crate::proto::pipeline::fields::affected_rows;

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
        p.push_kind(i, k.clone());
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
    p.push_kind(1, UnitKind::Typed);
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "DataRow before RowDescription"
    );
    let mut p: Pipeline<u8> = Pipeline::new();
    p.push_kind(1, UnitKind::Execute(columns()));
    let mut s = vec![];
    data_row(&mut s, &[Some(b"x")]);
    assert!(
        p.drain(&mut BytesMut::from(&s[..]), &mut Nop).is_err(),
        "column count mismatch"
    );
    let mut p: Pipeline<u8> = Pipeline::new();
    p.push_kind(1, UnitKind::Execute(columns()));
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
    assert_eq!(affected_rows(b"42\0"), 42);
    assert_eq!(affected_rows(b"FETCH 1x\0"), 0);
    assert_eq!(affected_rows(b"MOVE x1\0"), 0);
    assert_eq!(affected_rows(b"SELECT 99999999999999999999999\0"), u64::MAX);
    assert_eq!(affected_rows(b"SELECT 7"), 7, "without its NUL");
    assert_eq!(Verb::from_tag(b"INSERT 0 5\0").as_str(), "INSERT");
    assert_eq!(Verb::from_tag(b"BEGIN\0").as_str(), "BEGIN");
    assert_eq!(Verb::from_tag(b"\0").as_str(), "");
    assert_eq!(
        Verb::from_tag(b"ABCDEFGHIJKLMNOPQRS").as_str(),
        "ABCDEFGHIJKLMNO"
    );
    // Every length around the eight bytes read at once, ended by a space or a NUL.
    for word in [
        "",
        "A",
        "MERGE",
        "COMMIT",
        "ROLLBACK",
        "DEALLOCATE",
        "REFRESH",
    ] {
        for end in [" 1\0", "\0", " ", ""] {
            let tag = format!("{word}{end}");
            assert_eq!(Verb::from_tag(tag.as_bytes()).as_str(), word, "{tag:?}");
            assert!(Verb::from_tag(tag.as_bytes()) == Verb::from_tag(word.as_bytes()));
        }
    }
    assert_eq!(Verb::from_tag("ÉTÉ 1\0".as_bytes()).as_str(), "ÉTÉ");
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
    p.push_kind(1usize, UnitKind::Stream(columns()));
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

#[test]
fn a_length_header_beyond_the_cap_fails_before_its_body_is_reserved() {
    struct Nop;
    impl Handler<u8> for Nop {
        fn unit_done(&mut self, _: u8, _: Outcome) {}
    }
    let mut p: Pipeline<u8> = Pipeline::new().with_max_message(1 << 20);
    p.push_kind(1, UnitKind::Execute(columns()));
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
    p.push_kind(1, UnitKind::Execute(columns()));
    let mut buf = BytesMut::from(&b"D\x3f\xff\xff\xf0\0\x01"[..]);
    assert_eq!(p.drain(&mut buf, &mut Nop).unwrap(), 0);
    assert!(
        buf.capacity() <= crate::proto::frame::RESERVE_AHEAD + 4096,
        "{}",
        buf.capacity()
    );
}
