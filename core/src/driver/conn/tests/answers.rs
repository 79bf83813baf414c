//! Answers checked against what was asked: one that does not fit its unit's messages, or fits
//! them but not its statement, ends the connection; its units resolve as sent with an unknown
//! outcome, and nothing learned from it is kept.

use std::future::Future;
use std::pin::Pin;

use super::{complete, executed, lock, msg, ready, rig, Statement};
use crate::driver::shared::CacheEntry;
use crate::error::Fault;
use crate::{Error, ErrorKind, Reason};

/// Polls `f` once: what it queued is queued; a result if it had one.
fn poll_once<T>(f: &mut Pin<Box<impl Future<Output = T>>>) -> Option<T> {
    futures_lite::future::block_on(futures_lite::future::poll_once(f.as_mut()))
}

fn kind(r: Option<Result<impl Sized, Error>>) -> Option<ErrorKind> {
    r.and_then(|r| r.err()).map(|e| e.kind())
}

#[test]
fn a_description_with_another_statements_parameters_is_not_kept() {
    let mut r = rig("", false);
    let sql = "SELECT $1::int4, $2::text";
    let shared = r.shared.clone();
    let mut prepare = Box::pin(shared.statement(sql));
    assert!(poll_once(&mut prepare).is_none(), "queued");
    r.pump(1);
    let out = r.write_all();
    assert_eq!(out[0], b'P');
    // ParseComplete, then a ParameterDescription of one int8: another statement's.
    let params = [&1i16.to_be_bytes()[..], &20u32.to_be_bytes()].concat();
    let answer = [msg(b'1', b""), msg(b't', &params), msg(b'n', b""), ready()].concat();
    match r.server_says(2, &answer) {
        Err(Fault::Protocol(e)) => assert!(e.contains("naming 2 parameters"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        kind(poll_once(&mut prepare)),
        Some(ErrorKind::Indeterminate)
    );
    assert!(
        !matches!(
            lock(&r.shared.state).statements.get(sql),
            Some(CacheEntry::Ready(_))
        ),
        "nothing of the answer is cached"
    );
}

#[test]
fn a_completion_with_another_statements_verb_ends_the_connection() {
    let mut r = rig("", false);
    let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
    let w = r.execute(&stmt);
    r.pump(1);
    r.write_all();
    // The shape of a point select's answer, but an INSERT's completion.
    let answer = [msg(b'2', b""), complete("INSERT 0 1"), ready()].concat();
    match r.server_says(2, &answer) {
        Err(Fault::Protocol(e)) => assert!(e.contains("\"INSERT 0 1\" names another"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(
        w.take().is_none(),
        "in flight until the connection fails it"
    );
    r.conn
        .fail_all(&Reason::from(Fault::Protocol("not its answer".into())));
    let got = w.take().expect("resolved").map(|q| q.affected);
    assert_eq!(got.map_err(|e| e.kind()), Err(ErrorKind::Indeterminate));
}

#[test]
fn an_answer_out_of_turn_fails_every_unit_as_sent() {
    let mut r = rig("", false);
    let stmt = Statement::for_test("s1", "SELECT 1", 20_000);
    let (a, b) = (r.execute(&stmt), r.execute(&stmt));
    r.pump(1);
    r.write_all();
    // The two share a Sync. The first is answered as a select; the second with a
    // ParseComplete it never asked for.
    let answer = [executed(), msg(b'1', b""), executed(), ready()].concat();
    match r.server_says(2, &answer) {
        Err(Fault::Protocol(e)) => assert!(e.contains("'1' where BindComplete was due"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(a.take().expect("answered").is_ok(), "answered before it");
    r.conn
        .fail_all(&Reason::from(Fault::Protocol("out of turn".into())));
    let got = b.take().expect("resolved").map(|q| q.affected);
    assert_eq!(got.map_err(|e| e.kind()), Err(ErrorKind::Indeterminate));
}
