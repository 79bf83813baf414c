//! Hostile servers, scripted by the project's fake server (`tests/src/fake_server.rs`): a
//! startup or a pipelined answer cut or corrupted at every byte, messages that contradict the
//! protocol, floods, and authentication a client must not answer. Every case ends with a
//! result or a typed error within its bound, never a panic or a hang, and no password goes to
//! a server that asked for a method the client refuses.

use std::time::{Duration, Instant};

use pgpipe::{Config, Error, ErrorKind};
use pgpipe_tests::fake_server::{
    auth_request, data_row, error_fields, message, parameter_status, row_description, startup_tail,
    Auth, Bend, FakeServer, Script,
};

use crate::Harness;

/// Far beyond every case's bound: only the protocol's own checks may end an attempt in time.
const PATIENCE: Duration = Duration::from_secs(600);
/// How long any one case may take.
const BOUND: Duration = Duration::from_secs(5);

fn config(server: &FakeServer, extra: &str) -> Config {
    let mut c = Config::parse(&format!("{} password=secret {extra}", server.conninfo("u")))
        .expect("conninfo");
    c.pipeline_size = 1;
    c.max_connections = 1;
    c.connect_timeout = PATIENCE;
    // A dead connection is not waited for: the error is what the case looks at.
    c.dispatch_timeout = Duration::ZERO;
    c
}

/// Connects to a server playing `script`; the outcome and how long it took.
async fn connect<H: Harness>(
    script: Script,
    extra: &str,
) -> (Result<crate::Db<H>, Error>, Duration, FakeServer) {
    let server = FakeServer::start(script).expect("fake server");
    let t = Instant::now();
    let r = H::connect(config(&server, extra)).await;
    (r, t.elapsed(), server)
}

/// Whether `e` is a typed failure of a connect to a server that misbehaved.
fn connect_failure(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Connection | ErrorKind::Timeout | ErrorKind::Other | ErrorKind::Db
    ) && !matches!(e, Error::Config(_))
}

pub async fn a_startup_cut_or_corrupted_at_every_byte_fails_typed<H: Harness>() {
    let honest = {
        let mut b = auth_request(0, b"");
        b.extend(startup_tail());
        b
    };
    let mut cases: Vec<Bend> = (0..honest.len()).map(Bend::CutAt).collect();
    for (n, b) in honest.iter().enumerate() {
        cases.push(Bend::Corrupt(n, b ^ 0xff));
    }
    let (mut ok, mut failed) = (0, 0);
    for bend in cases {
        let script = Script {
            startup: bend.clone(),
            ..Script::default()
        };
        let (r, took, _server) = connect::<H>(script, "").await;
        assert!(took < BOUND, "{bend:?} took {took:?}");
        match r {
            Ok(db) => {
                ok += 1;
                db.abort();
            }
            Err(e) => {
                assert!(connect_failure(&e), "{bend:?}: {e:?}");
                failed += 1;
            }
        }
    }
    eprintln!(
        "{}: {} startup bytes, cut and corrupted: {ok} connected, {failed} typed errors",
        H::name(),
        honest.len()
    );
    // Every cut fails (the server hangs up before ReadyForQuery).
    assert!(failed >= honest.len(), "{failed} failures");
}

pub async fn a_pipelined_answer_cut_or_corrupted_at_every_byte_resolves_typed<H: Harness>() {
    // The honest answer to the first query, as the fake server builds it, is what the cases
    // cut: a probe connection learns its length.
    let (db, _, _server) = connect::<H>(Script::default(), "").await;
    let db = db.expect("an honest fake server");
    let row = db
        .query_one("SELECT 1", &[])
        .await
        .expect("an honest answer");
    assert_eq!(row.get::<_, String>(0), "1");
    db.close().await;
    let honest_len = {
        let mut n = 0;
        for m in [
            message(b'1', b""),
            message(b't', &0i16.to_be_bytes()),
            row_description(),
            message(b'2', b""),
            data_row(&[Some(b"1")]),
            message(b'C', b"SELECT 1\0"),
            message(b'Z', b"I"),
        ] {
            n += m.len();
        }
        n
    };
    let mut cases: Vec<Bend> = (0..honest_len).map(Bend::CutAt).collect();
    for n in 0..honest_len {
        cases.push(Bend::Corrupt(n, 0xff));
        cases.push(Bend::Corrupt(n, 0x00));
    }
    let (mut ok, mut sent) = (0, 0);
    for bend in cases {
        let script = Script {
            reply: bend.clone(),
            ..Script::default()
        };
        let (db, _, _server) = connect::<H>(script, "").await;
        let db = db.expect("connect");
        let t = Instant::now();
        let r = db.query_one("SELECT 1", &[]).await;
        assert!(t.elapsed() < BOUND, "{bend:?} took {:?}", t.elapsed());
        match r {
            Ok(row) => {
                // A corrupted value is the server's word; reading it must not panic.
                let _ = row.try_get::<_, String>(0);
                ok += 1;
            }
            // The statement's first use is a prepare unit, then the execution: a cut or a
            // corrupted status after the prepare's answer fails the execution before it was
            // sent.
            Err(e) if resolved_typed(&e) => sent += 1,
            Err(e) => panic!("{bend:?}: {e:?}"),
        }
        db.abort();
    }
    eprintln!(
        "{}: a {honest_len}-byte answer cut and corrupted: {ok} answered, {sent} failed typed",
        H::name()
    );
    assert!(
        sent >= honest_len,
        "every cut fails the unit it was sent with"
    );
}

/// A unit's typed failure against a server that broke the protocol: it was sent and its
/// connection failed (`Indeterminate`), it was never sent because the connection failed first
/// (`NotDispatched`), the server's own error, or what the client made of a corrupted answer
/// (an undecodable value, a statement described with parameters it does not take). Never a
/// timeout (the case waited for nothing it was owed) nor `Closed`.
fn resolved_typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Indeterminate { .. }
            | Error::NotDispatched { .. }
            | Error::Decode { .. }
            | Error::ParamCount { .. }
            | Error::Protocol(_)
    ) || e.kind() == ErrorKind::Db
}

/// One query against a server that answers it with `reply` instead of the honest answer (or
/// puts `before` first); what the query gave, within the bound.
async fn query_against<H: Harness>(bend: Bend) -> Result<String, Error> {
    let script = Script {
        reply: bend,
        ..Script::default()
    };
    let (db, _, _server) = connect::<H>(script, "").await;
    let db = db.expect("connect");
    let t = Instant::now();
    let r = db.query_one("SELECT 1", &[]).await;
    assert!(t.elapsed() < BOUND, "took {:?}", t.elapsed());
    db.abort();
    r.and_then(|row| row.try_get::<_, String>(0))
}

pub async fn answers_that_contradict_the_protocol_fail_their_units_typed<H: Harness>() {
    let answer = |rows: Vec<u8>| {
        let mut b = message(b'1', b"");
        b.extend(message(b't', &0i16.to_be_bytes()));
        b.extend(row_description());
        b.extend(message(b'2', b""));
        b.extend(rows);
        b.extend(message(b'C', b"SELECT 1\0"));
        b.extend(message(b'Z', b"I"));
        b
    };
    // A DataRow with two values for one column.
    let two = answer(data_row(&[Some(b"1"), Some(b"2")]));
    match query_against::<H>(Bend::Instead(two)).await {
        Err(e) if resolved_typed(&e) => {}
        other => panic!("a row of two values for one column: {other:?}"),
    }
    // An unknown message type, and BindComplete before ParseComplete.
    let mut unknown = message(b'j', b"junk");
    unknown.extend(answer(data_row(&[Some(b"1")])));
    let mut out_of_order = message(b'2', b"");
    out_of_order.extend(answer(data_row(&[Some(b"1")])));
    for (what, bytes) in [("unknown type", unknown), ("out of order", out_of_order)] {
        match query_against::<H>(Bend::Instead(bytes)).await {
            Err(e) if resolved_typed(&e) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // An error whose fields are not UTF-8: the server's error, readable.
    let bad_utf8 = {
        let mut b = message(b'1', b"");
        b.extend(error_fields(
            b'E',
            &[
                (b'S', b"ERROR"),
                (b'V', b"ERROR"),
                (b'C', b"XX000"),
                (b'M', b"caf\xe9 \xff\xfe"),
            ],
        ));
        b.extend(message(b'Z', b"I"));
        b
    };
    match query_against::<H>(Bend::Instead(bad_utf8)).await {
        Err(e) if e.kind() == ErrorKind::Db => {
            assert!(e.to_string().contains("caf"), "{e}");
        }
        Err(e) if resolved_typed(&e) => {}
        other => panic!("an error that is not UTF-8: {other:?}"),
    }
    // A DataRow claiming half a gigabyte: refused at its header (the cap is 1 MiB here).
    let mut huge = message(b'1', b"");
    huge.extend([b'D', 0x1f, 0xff, 0xff, 0xff, 0, 1]);
    let script = Script {
        reply: Bend::Instead(huge),
        ..Script::default()
    };
    let (db, _, _server) = connect::<H>(script, "max_message_size=1048576").await;
    let db = db.expect("connect");
    match db.query_one("SELECT 1", &[]).await {
        Err(Error::Indeterminate { reason }) => {
            assert!(reason.contains("max_message_size"), "{reason}")
        }
        other => panic!("a half-gigabyte row header: {other:?}"),
    }
    db.abort();
}

pub async fn floods_of_notices_and_parameter_reports_are_bounded<H: Harness>() {
    // 100,000 notices and as many reports of one parameter before the answer: served.
    let mut flood = Vec::new();
    let notice = error_fields(b'N', &[(b'S', b"NOTICE"), (b'C', b"00000"), (b'M', b"hi")]);
    for _ in 0..100_000 {
        flood.extend_from_slice(&notice);
    }
    // Reports that change nothing (a change would take a shared connection out of service).
    for _ in 0..100_000 {
        flood.extend(parameter_status("TimeZone", "UTC"));
    }
    match query_against::<H>(Bend::Before(flood)).await {
        Ok(v) => assert_eq!(v, "1"),
        Err(e) => panic!("a flood of notices and reports: {e:?}"),
    }
    // Distinct names without end at startup: refused at the 257th.
    let mut names = Vec::new();
    for i in 0..1000 {
        names.extend(parameter_status(&format!("p{i}"), "v"));
    }
    let script = Script {
        startup: Bend::Before(names),
        ..Script::default()
    };
    let (r, took, _server) = connect::<H>(script, "").await;
    assert!(took < BOUND, "{took:?}");
    match r {
        Err(e) => assert!(e.to_string().contains("more than 256"), "{e}"),
        Ok(_) => panic!("1000 parameter names were accepted"),
    }
}

pub async fn authentication_a_client_must_not_answer_sends_nothing<H: Harness>() {
    for (auth, extra, needle) in [
        (
            Auth::Cleartext,
            "require_auth=scram-sha-256",
            "cleartext password",
        ),
        (Auth::Md5, "require_auth=scram-sha-256", "MD5"),
        (Auth::Md5, "require_auth=!md5", "MD5"),
        (
            Auth::ScramWrongSignature,
            "require_auth=md5",
            "SCRAM-SHA-256",
        ),
        (
            Auth::Trust,
            "require_auth=scram-sha-256",
            "without authentication",
        ),
    ] {
        let script = Script {
            auth: auth.clone(),
            ..Script::default()
        };
        let (r, took, server) = connect::<H>(script, extra).await;
        assert!(took < BOUND, "{auth:?}: {took:?}");
        let e = r.map(|_| ()).expect_err("refused");
        assert!(e.is_auth(), "{auth:?} {extra}: {e:?}");
        assert!(e.to_string().contains(needle), "{auth:?} {extra}: {e}");
        assert!(
            server.passwords().is_empty(),
            "{auth:?} {extra}: a secret was sent"
        );
    }
    // SCRAM that the server cannot complete honestly: a wrong signature, or no final message.
    for (auth, needle) in [
        (Auth::ScramWrongSignature, "signature is wrong"),
        (Auth::ScramSkipFinal, "before completing SCRAM"),
    ] {
        let script = Script {
            auth: auth.clone(),
            ..Script::default()
        };
        let (r, took, server) = connect::<H>(script, "").await;
        assert!(took < BOUND, "{auth:?}: {took:?}");
        let e = r.map(|_| ()).expect_err("refused");
        assert!(
            e.is_auth() && e.to_string().contains(needle),
            "{auth:?}: {e}"
        );
        // The client's proof went out (SCRAM never reveals the password itself).
        assert!(
            server
                .passwords()
                .iter()
                .all(|p| !p.windows(6).any(|w| w == b"secret")),
            "{auth:?}: the password itself was sent"
        );
    }
    // What the client allows is answered.
    let script = Script {
        auth: Auth::Cleartext,
        ..Script::default()
    };
    let (r, _, server) = connect::<H>(script, "require_auth=password").await;
    r.expect("allowed").abort();
    assert_eq!(server.passwords().len(), 1);
}
