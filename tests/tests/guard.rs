//! The session-neutrality guard through its public API: a table of cases for every rule, every
//! statement allowed on purpose and the known traps; property tests against a deliberately simple
//! reference masker and reference rule checker written here; allocation counts; and a long fuzz
//! run (`PGPIPE_GUARD_FUZZ_CASES=100000 cargo test -p pgpipe-tests --test guard fuzz`).
//! No server is needed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;

mod guard_oracle;

use guard_oracle::{
    oracle_verdict as reference_verdict, reference_mask, SESSION_FUNCTIONS, STRICT_ONLY,
};
use pgpipe::guard::{mask, needs_masking, Guard, Mode, Reason};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

// ---------------------------------------------------------------------------------------------
// Allocation counting (per thread, so parallel tests do not disturb each other).

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: the thread-local may already be gone while a thread shuts down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

// ---------------------------------------------------------------------------------------------
// The table.

/// The verdict of a fresh guard (so no cached verdict is involved).
fn verdict(mode: Mode, sql: &str) -> Option<Reason> {
    Guard::new(mode).check(sql).err().map(|r| r.reason)
}

/// Checks every `(sql, expected)` in both modes (none of these rows uses a strict-only name).
fn table(rows: &[(&str, Option<Reason>)]) {
    let mut failures = Vec::new();
    for (sql, want) in rows {
        for mode in [Mode::Default, Mode::Strict] {
            let got = verdict(mode, sql);
            if &got != want {
                failures.push(format!("{mode:?} {sql:?}: got {got:?}, want {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

const OK: Option<Reason> = None;

fn call(name: &'static str) -> Option<Reason> {
    Some(Reason::ForbiddenCall(name))
}

fn leading(word: &str) -> Option<Reason> {
    Some(Reason::LeadingKeyword(word.to_owned()))
}

#[test]
fn leading_keyword() {
    table(&[
        ("SELECT 1", OK),
        ("select 1", OK),
        ("SeLeCt 1", OK),
        ("INSERT INTO t VALUES ($1)", OK),
        ("UPDATE t SET a = $1 WHERE id = $2", OK),
        ("DELETE FROM t WHERE id = $1", OK),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DO NOTHING",
            OK,
        ),
        ("VALUES (1), (2)", OK),
        ("WITH x AS (SELECT 1) SELECT * FROM x", OK),
        ("  \n\t SELECT 1", OK),
        ("/* hello */ SELECT 1", OK),
        ("-- hello\nSELECT 1", OK),
        ("/* a /* nested */ b */SELECT 1", OK),
        ("SELECT*FROM t", OK),
        ("", Some(Reason::Empty)),
        ("   \n ", Some(Reason::Empty)),
        ("-- only a comment", Some(Reason::Empty)),
        ("/* only a comment */", Some(Reason::Empty)),
        (";", Some(Reason::Empty)),
        ("(SELECT 1)", OK),
        ("(SELECT 1) UNION (SELECT 2)", OK),
        ("(1)", Some(Reason::Empty)),
        ("'SELECT' 1", Some(Reason::Empty)),
        ("123", Some(Reason::Empty)),
        ("SET x = 1", leading("set")),
        ("set search_path = evil", leading("set")),
        ("RESET ALL", leading("reset")),
        ("BEGIN", leading("begin")),
        ("START TRANSACTION", leading("start")),
        ("COMMIT", leading("commit")),
        ("LISTEN channel", leading("listen")),
        ("NOTIFY channel", leading("notify")),
        ("COPY t TO STDOUT", leading("copy")),
        ("CREATE TEMP TABLE t (a int)", leading("create")),
        ("PREPARE p AS SELECT 1", leading("prepare")),
        (
            "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
            leading("declare"),
        ),
        ("DISCARD ALL", leading("discard")),
        ("LOCK TABLE t", leading("lock")),
        ("DO $$ BEGIN PERFORM 1; END $$", leading("do")),
        ("CALL p()", leading("call")),
        ("EXPLAIN SELECT 1", leading("explain")),
        ("TABLE t", OK),
        ("SELECT$1", leading("select$1")),
        ("selectx 1", leading("selectx")),
        ("\"SET\" x = 1", leading("set")),
    ]);
}

#[test]
fn single_statement() {
    table(&[
        ("SELECT 1;", OK),
        ("SELECT 1;  ", OK),
        ("SELECT 1;\n\t\r\n", OK),
        ("SELECT 1; -- done", OK),
        ("SELECT 1; /* done */", OK),
        ("SELECT ';' , 1", OK),
        ("SELECT $$;$$, 1", OK),
        ("SELECT 1 -- ; SET x = 1", OK),
        ("SELECT 1; SELECT 2", Some(Reason::MultipleStatements)),
        ("SELECT 1;SET x = 1", Some(Reason::MultipleStatements)),
        ("SELECT 1;;", Some(Reason::MultipleStatements)),
        ("SELECT 1; ;", Some(Reason::MultipleStatements)),
        // A masked literal is not a statement; the server rejects the text as a syntax error.
        ("SELECT 1; 'x'", OK),
        (
            "SELECT 1;\n-- c\nSET x = 1",
            Some(Reason::MultipleStatements),
        ),
        // The reason does not depend on position: the second statement wins over a call.
        (
            "SELECT set_config('a', 'b', false); SELECT 2",
            Some(Reason::MultipleStatements),
        ),
    ]);
}

#[test]
fn every_session_function_is_refused_in_every_spelling() {
    let mut rows = Vec::new();
    for name in SESSION_FUNCTIONS {
        let upper = name.to_ascii_uppercase();
        for sql in [
            format!("SELECT {name}(1)"),
            format!("SELECT {upper}(1)"),
            format!("SELECT {name} (1)"),
            format!("SELECT {name}\n\t(1)"),
            format!("SELECT {name}/* c */(1)"),
            format!("SELECT {name}-- c\n(1)"),
            format!("SELECT pg_catalog.{name}(1)"),
            format!("SELECT pg_catalog . {name} (1)"),
            format!("SELECT \"{name}\"(1)"),
            format!("SELECT \"pg_catalog\".\"{name}\"(1)"),
            format!("SELECT U&\"{name}\"(1)"),
            format!("SELECT 1 FROM t WHERE x = ({name}(1))"),
            format!("WITH a AS (SELECT {name}(1)) SELECT * FROM a"),
            format!("SELECT 'x', {name}('y')"),
        ] {
            rows.push((sql, call(name)));
        }
    }
    let rows: Vec<(&str, Option<Reason>)> =
        rows.iter().map(|(s, r)| (s.as_str(), r.clone())).collect();
    table(&rows);
}

#[test]
fn allowed_on_purpose() {
    table(&[
        ("SELECT pg_advisory_xact_lock(1)", OK),
        ("SELECT pg_try_advisory_xact_lock(1)", OK),
        ("SELECT pg_advisory_xact_lock_shared(1)", OK),
        ("SELECT pg_try_advisory_xact_lock_shared(1)", OK),
        ("SELECT lo_get(16384)", OK),
        ("SELECT lo_put(16384, 0, '\\x00')", OK),
        (
            "SELECT * FROM dblink('dbname=x', 'SELECT 1') AS t(a int)",
            OK,
        ),
        ("SELECT my_set_config('a', 'b')", OK),
        ("SELECT set_config_x(1)", OK),
        ("SELECT xset_config(1)", OK),
        ("SELECT a$set_config(1)", OK),
        ("SELECT set_config$(1)", OK),
        ("SELECT set_config FROM t", OK),
        ("SELECT set_config, setseed FROM t", OK),
        ("SELECT current_setting('search_path')", OK),
        ("SELECT * FROM temp_table", OK),
        ("SELECT * FROM temp", OK),
        ("INSERT INTO temp_table VALUES (1)", OK),
        ("INSERT INTO pg_temporary.t VALUES (1)", OK),
        ("INSERT INTO my_pg_temp.t VALUES (1)", OK),
        ("INSERT INTO pg_temp_x.t VALUES (1)", OK),
        ("INSERT INTO pg_temp_1x.t VALUES (1)", OK),
        ("SELECT 'into temp t', 'set_config(1)'", OK),
        ("SELECT uescape FROM t", OK),
        ("SELECT U&'d\\0061t'", OK),
        ("SELECT U&\"plain_name\" FROM t", OK),
    ]);
    for name in STRICT_ONLY {
        assert_eq!(verdict(Mode::Default, &format!("SELECT {name}('s')")), None);
    }
    assert_eq!(verdict(Mode::Default, "SELECT setval('s', 42, true)"), None);
}

#[test]
fn strict_mode_also_refuses_sequence_and_snapshot_calls() {
    for name in STRICT_ONLY {
        for sql in [
            format!("SELECT {name}('s')"),
            format!("SELECT pg_catalog.{}  ('s')", name.to_ascii_uppercase()),
            format!("INSERT INTO t VALUES (\"{name}\"/**/('s'))"),
        ] {
            assert_eq!(verdict(Mode::Strict, &sql), call(name), "{sql}");
            assert_eq!(verdict(Mode::Default, &sql), None, "{sql}");
        }
    }
    assert_eq!(verdict(Mode::Strict, "SELECT my_nextval('s')"), None);
    assert_eq!(verdict(Mode::Strict, "SELECT 'nextval(1)'"), None);
}

#[test]
fn into_temp_and_pg_temp() {
    let temp = Some(Reason::IntoTemp);
    let pg_temp = Some(Reason::IntoPgTemp);
    table(&[
        ("SELECT * INTO TEMP t FROM x", temp.clone()),
        ("SELECT * INTO TEMPORARY t FROM x", temp.clone()),
        ("select * into temp table t from x", temp.clone()),
        ("SELECT * INTO GLOBAL TEMP t FROM x", temp.clone()),
        ("SELECT * INTO LOCAL TEMPORARY t FROM x", temp.clone()),
        ("SELECT * INTO\n\tTEMP\nt FROM x", temp.clone()),
        ("SELECT * INTO/* c */TEMP t FROM x", temp.clone()),
        ("SELECT * INTO \"temp\" FROM x", OK), // a table named temp
        ("SELECT * INTO TEMP \"t\" FROM x", temp.clone()),
        ("INSERT INTO temp.readings VALUES (1)", OK), // a schema named temp
        ("INSERT INTO temp VALUES (1)", OK),
        ("SELECT * INTO pg_temp.t FROM x", pg_temp.clone()),
        ("SELECT * INTO TABLE pg_temp.t FROM x", pg_temp.clone()),
        ("SELECT * INTO pg_temp_3.t FROM x", pg_temp.clone()),
        ("SELECT * INTO PG_TEMP . t FROM x", pg_temp.clone()),
        ("SELECT * INTO \"pg_temp\".t FROM x", pg_temp.clone()),
        ("SELECT * INTO U&\"pg_temp\".t FROM x", pg_temp.clone()),
        (
            "SELECT * INTO TABLE u&\"pg_temp_3\" . t FROM x",
            pg_temp.clone(),
        ),
        ("INSERT INTO pg_temp.t VALUES (1)", pg_temp.clone()),
        ("INSERT INTO pg_temp_12.t (a) VALUES (1)", pg_temp.clone()),
        (
            "MERGE INTO pg_temp.t USING s ON true WHEN MATCHED THEN DO NOTHING",
            pg_temp.clone(),
        ),
        ("SELECT * INTO t FROM x", OK),
        ("SELECT * INTO UNLOGGED t FROM x", OK),
        ("SELECT * INTO pg_temp FROM x", OK), // a table named pg_temp, no schema
        ("SELECT * FROM pg_temp.t", OK),      // reading: no INTO
        ("SELECT * INTO 'temp'", OK),
        ("SELECT into_temp FROM t", OK),
    ]);
}

#[test]
fn unicode_escapes() {
    table(&[
        (
            "SELECT U&\"\\0073et_config\"('a', 'b', false)",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        (
            "SELECT u&\"d\\0061t\" FROM t",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        (
            "SELECT U&\"with space\" FROM t",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        (
            "SELECT U&\"unterminated",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        ("SELECT U&'d!0061t' UESCAPE '!'", Some(Reason::Uescape)),
        ("SELECT U&\"plain\" UESCAPE '!'", Some(Reason::Uescape)),
        ("SELECT U&'x', \"uescape\" FROM t", Some(Reason::Uescape)),
        ("SELECT U&'x', 'UESCAPE'", OK),
        ("SELECT xU&\"a b\" FROM t", OK), // `xU` is an identifier, then `&`, then a quoted one
        ("SELECT 1 UESCAPE", OK),
    ]);
}

/// The traps named in the issue, plus the ones met while writing the masker.
#[test]
fn masking_traps() {
    let set_config = call("set_config");
    table(&[
        // A quoted identifier containing `(` creates no call.
        ("SELECT \"weird(col\" FROM t", OK),
        ("SELECT setseed \"(x\" FROM t", OK),
        // standard_conforming_strings: in a plain literal a backslash is not an escape.
        (
            "SELECT 'a\\', set_config('x', 'y', false)",
            set_config.clone(),
        ),
        (
            "SELECT 'a\\' , set_config('x','y',false) --'",
            set_config.clone(),
        ),
        // In an E'' literal it is.
        ("SELECT E'it\\'s', 1", OK),
        ("SELECT E'it\\'s set_config(1)'", OK),
        (
            "SELECT e'\\\\', set_config('x', 'y', false)",
            set_config.clone(),
        ),
        // ...but only when E starts the token.
        (
            "SELECT typeE'\\' , set_config('a','b',false) --'",
            set_config.clone(),
        ),
        // Glued literal segments keep E'' mode.
        (
            "SELECT E'a'\n'\\' , x ', set_config('a','b',false) --'",
            set_config.clone(),
        ),
        (
            "SELECT E'a' -- c\n'\\' , x ', set_config('a','b',false) --'",
            set_config.clone(),
        ),
        (
            "SELECT 'a'\n'b', set_config('a','b',false)",
            set_config.clone(),
        ),
        // Without a newline between them, the second literal is a new, plain one.
        (
            "SELECT E'a' '\\', set_config('a','b',false) --'",
            set_config.clone(),
        ),
        // Nested comments.
        ("SELECT 1 /* /* */ set_config( */", OK),
        ("SELECT 1 /* /* */ set_config('a','b',false) */", OK),
        (
            "SELECT 1 /* /* */ */ , set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT 1 /* unterminated set_config(", OK),
        ("SELECT 1 -- set_config(\n, 2", OK),
        (
            "SELECT 1 -- c\r, set_config('a','b',false)",
            set_config.clone(),
        ),
        // Dollar quotes.
        ("SELECT $$ set_config('a','b',false) $$", OK),
        ("SELECT $tag$ set_config('a','b',false) $tag$", OK),
        (
            "SELECT $tag$ $other$ $tag$, set_config('a','b',false)",
            set_config.clone(),
        ),
        (
            "SELECT $a$ $$ $a$, set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT $тег$ set_config('a','b',false) $тег$", OK),
        (
            "SELECT $тег$x$тег$, set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT $unterminated$ set_config(", OK),
        // `$1` is a parameter, not a tag; `a$b$` is an identifier, not a quote.
        ("SELECT $1, set_config('a', $2, false)", set_config.clone()),
        (
            "SELECT a$b$ , set_config('x','y',false) , $b$ FROM t",
            set_config.clone(),
        ),
        // Masking can create a match, so the raw text never rules one out.
        (
            "SELECT set_config/* c */('a','b',false)",
            set_config.clone(),
        ),
        // Quoted plain identifiers stay visible.
        ("SELECT \"set_config\"('a','b',false)", set_config.clone()),
        ("SELECT \"SET_CONFIG\"('a','b',false)", set_config.clone()), // conservative
        ("SELECT \"set config\"('a','b',false)", OK),
        ("SELECT \"a\"\"b\"(1)", OK),
        (
            "SELECT pg_catalog.set_config('a','b',false)",
            set_config.clone(),
        ),
    ]);
    // Strict-only names, so outside the table (which checks both modes).
    assert_eq!(verdict(Mode::Default, "SELECT nextval/* c */('s')"), None);
    assert_eq!(
        verdict(Mode::Strict, "SELECT nextval/* c */('s')"),
        call("nextval")
    );
}

#[test]
fn mask_examples() {
    // `#` marks a masked byte.
    for (sql, want) in [
        ("SELECT 'a''b', x", "SELECT ######, x"),
        ("SELECT E'\\'' x", "SELECT E#### x"),
        ("SELECT \"Col\", \"a b\"", "SELECT #Col#, #####"),
        ("SELECT 1 -- é\n", "SELECT 1 #####\n"),
        ("SELECT /* a\n */ 1", "SELECT ####\n### 1"),
        ("SELECT $тег$x$тег$", "SELECT #################"),
        ("SELECT U&'x' UESCAPE '!'", "SELECT U&### UESCAPE ###"),
        ("SELECT U&\"a\", U&\"b c\"", "SELECT ###a#, #######"),
    ] {
        assert_eq!(mask(sql), want.replace('#', " "), "{sql:?}");
    }
}

#[test]
fn fast_path() {
    let sql = "SELECT id, name FROM users WHERE org_id = $1 AND a - b > c / 2";
    assert!(!needs_masking(sql));
    assert!(matches!(mask(sql), Cow::Borrowed(s) if s == sql));
    for needs in [
        "SELECT 'a'",
        "SELECT \"a\"",
        "SELECT 1 -- c",
        "SELECT 1 /* c */",
        "SELECT $$a$$",
        "SELECT $t$a$t$",
    ] {
        assert!(needs_masking(needs), "{needs}");
    }
    for fast in ["SELECT $1", "SELECT a$b", "SELECT 1 - -1", "SELECT 4 / 2"] {
        assert!(!needs_masking(fast), "{fast}");
    }
}

#[test]
fn refusal_names_reason_shortened_sql_and_remedy() {
    let sql = format!("SET application_name = '{}'", "ж".repeat(300));
    let err = Guard::new(Mode::Default).check(&sql).unwrap_err();
    assert_eq!(err.reason, Reason::LeadingKeyword("set".into()));
    assert!(err.sql.ends_with('…'));
    assert_eq!(err.sql.chars().count(), 121);
    assert!(sql.starts_with(err.sql.trim_end_matches('…')));
    let text = err.to_string();
    assert!(text.contains("set"), "{text}");
    assert!(text.contains("SET application_name"), "{text}");
    assert!(text.contains("run it in session()"), "{text}");
    let _: &dyn std::error::Error = &err;

    let short = Guard::new(Mode::Default).check("BEGIN").unwrap_err();
    assert_eq!(short.sql, "BEGIN");
    let text = short.to_string();
    assert!(
        text.contains("BEGIN") && text.contains("transaction()"),
        "{text}"
    );
}

#[test]
fn guard_is_send_sync_and_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Guard>();
    let guard = Guard::with_cache_capacity(Mode::Default, 64);
    std::thread::scope(|s| {
        for t in 0..4 {
            let guard = &guard;
            s.spawn(move || {
                for i in 0..500 {
                    let sql = format!("SELECT {}", (i * 7 + t) % 200);
                    assert!(guard.check(&sql).is_ok());
                    assert!(guard.check("SET x = 1").is_err());
                }
            });
        }
    });
}

#[test]
fn cache_is_bounded_and_keeps_verdicts() {
    // More distinct statements than the capacity: per-entry eviction keeps answering correctly.
    let guard = Guard::with_cache_capacity(Mode::Default, 8);
    for round in 0..3 {
        for i in 0..50 {
            let allowed = format!("SELECT {i}");
            let refused = format!("SELECT set_config('a', '{i}', false)");
            assert!(guard.check(&allowed).is_ok(), "round {round}");
            assert_eq!(
                guard.check(&refused).unwrap_err().reason,
                Reason::ForbiddenCall("set_config")
            );
        }
    }
}

#[test]
fn allocations_per_check() {
    let sql =
        "SELECT id, name, email FROM users WHERE org_id = $1 AND status = $2 ORDER BY id LIMIT 50";
    let masked =
        "SELECT id, name FROM users WHERE org_id = $1 AND status = 'active' /* c */ LIMIT 50";

    let guard = Guard::new(Mode::Default);
    guard.check(sql).unwrap();
    assert_eq!(allocations(|| guard.check(sql).unwrap()), 0, "cache hit");
    guard.check(masked).unwrap();
    assert_eq!(allocations(|| guard.check(masked).unwrap()), 0, "cache hit");

    let uncached = Guard::with_cache_capacity(Mode::Default, 0);
    assert_eq!(
        allocations(|| uncached.check(sql).unwrap()),
        0,
        "uncached fast path"
    );
    assert!(
        allocations(|| uncached.check(masked).unwrap()) <= 1,
        "uncached, masked"
    );
    assert_eq!(allocations(|| drop(mask(sql))), 0);
    assert_eq!(allocations(|| drop(mask(masked))), 1);
}

#[test]
fn reference_agrees_with_the_table() {
    // The reference itself must be right before it can judge the guard.
    for (sql, want) in [
        (
            "SELECT E'a'\n'\\' , x ', set_config('a','b',false) --'",
            call("set_config"),
        ),
        (
            "SELECT $тег$x$тег$, set_config('a','b',false)",
            call("set_config"),
        ),
        ("SELECT 1 /* /* */ set_config( */", None),
        ("SELECT * INTO TABLE pg_temp_3 .t", Some(Reason::IntoPgTemp)),
        ("SELECT U&'x' UESCAPE '!'", Some(Reason::Uescape)),
        ("SELECT 1; SELECT 2", Some(Reason::MultipleStatements)),
    ] {
        assert_eq!(reference_verdict(sql, Mode::Default), want, "{sql:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.

/// SQL-ish text: fragments chosen to collide (quotes, dollars, comment starts, prefixes, glued
/// literals, forbidden names, INTO words, newlines, non-ASCII), interleaved with arbitrary
/// characters, usually after an allowed leading keyword so that the later rules are reached.
fn sqlish() -> impl Strategy<Value = String> {
    #[rustfmt::skip]
    const FRAGMENTS: &[&str] = &[
        "'", "''", "\"", "\"\"", "$", "$$", "$a$", "$ab$", "$тег$", "$1", "$_", "a$b", "-", "--",
        "/", "*", "/*", "*/", "/* /* */", "*/ */", "\\", "E", "e", "U", "u", "&", "U&", "E'",
        "E'\\'", "e'\\\\'", "U&'", "U&\"", "U&\"a b\"", "U&\"x\"", "' '", "'\n'", "'\r\n  '",
        "' -- c\n'", "\n", "\r", " ", "  ", "\t", "\u{b}", "(", ")", ";", ",", ".", "a", "x",
        "_", "1", "é", "€", "тег", "😀", "SELECT ", "set_config", "SET_CONFIG", "setseed", "(",
        "set_config(", "pg_catalog.", "pg_advisory_lock", "lo_open", "nextval", "my_set_config",
        "into ", "INTO ", "temp ", "TEMPORARY ", "global ", "table ", "pg_temp", "pg_temp_7",
        "pg_temp.", "uescape", "UESCAPE ", "\"set_config\"", "\"a b\"",
        ".", "(1).setseed", ". \"currval\"", "WITH lastval(v) AS (SELECT 1) ", ", lastval(w) AS (",
        " AS (", "values (", "UPDATE ", "ONLY (", "pg_settings", "query_to_xml(", "TABLE ",
    ];
    let fragment = prop_oneof![
        6 => proptest::sample::select(FRAGMENTS).prop_map(str::to_owned),
        1 => any::<char>().prop_map(String::from),
    ];
    let lead = prop_oneof![
        4 => proptest::sample::select(vec!["SELECT ", "select ", "WITH x AS (", "VALUES ("]),
        1 => Just(""),
    ];
    (lead, proptest::collection::vec(fragment, 0..48))
        .prop_map(|(lead, parts)| format!("{lead}{}", parts.concat()))
}

/// Either SQL-ish text or an arbitrary string.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![4 => sqlish(), 1 => any::<String>()]
}

/// Every property at once; used by the proptests below and by the long fuzz run.
fn check_all(sql: &str) -> Result<(), TestCaseError> {
    // (a) The fast path is only taken when masking is the identity.
    let masked = mask(sql);
    if !needs_masking(sql) {
        prop_assert!(matches!(masked, Cow::Borrowed(_)));
        prop_assert_eq!(masked.as_ref(), sql);
    }
    // (b) Same result as the reference masker.
    let (reference, _) = reference_mask(sql);
    prop_assert_eq!(masked.as_ref(), reference.as_str(), "sql = {:?}", sql);
    // (c) Byte length and line breaks kept.
    prop_assert_eq!(masked.len(), sql.len());
    for (i, (&a, &b)) in sql.as_bytes().iter().zip(masked.as_bytes()).enumerate() {
        if a == b'\n' || a == b'\r' || b == b'\n' || b == b'\r' {
            prop_assert_eq!(a, b, "line break moved at byte {}", i);
        }
    }
    // (d) No panic; the cached verdict equals the uncached one; both equal the reference rules.
    for mode in [Mode::Default, Mode::Strict] {
        let guard = Guard::new(mode);
        let miss = guard.check(sql);
        let hit = guard.check(sql);
        prop_assert_eq!(&miss, &hit);
        let uncached = Guard::with_cache_capacity(mode, 0).check(sql);
        prop_assert_eq!(&miss, &uncached);
        let reason = miss.err().map(|r| r.reason);
        prop_assert_eq!(reason, reference_verdict(sql, mode), "sql = {:?}", sql);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn prop_fast_path_is_identity(sql in text()) {
        if !needs_masking(&sql) {
            prop_assert!(matches!(mask(&sql), Cow::Borrowed(s) if s == sql));
        }
    }

    #[test]
    fn prop_mask_matches_reference(sql in sqlish()) {
        let (masked, reference) = (mask(&sql), reference_mask(&sql).0);
        prop_assert_eq!(masked.as_ref(), reference.as_str());
    }

    #[test]
    fn prop_mask_keeps_length_and_line_breaks(sql in text()) {
        let masked = mask(&sql);
        prop_assert_eq!(masked.len(), sql.len());
        let breaks = |s: &str| -> Vec<(usize, u8)> {
            s.bytes().enumerate().filter(|&(_, b)| b == b'\n' || b == b'\r').collect()
        };
        prop_assert_eq!(breaks(&sql), breaks(&masked));
    }

    #[test]
    fn prop_check_total_cached_and_matching_reference(sql in text()) {
        check_all(&sql)?;
    }

    /// A forbidden call stays refused however it is decorated.
    #[test]
    fn prop_decorated_call_is_refused(
        name in proptest::sample::select(SESSION_FUNCTIONS),
        upper in proptest::collection::vec(any::<bool>(), 40),
        schema in proptest::sample::select(vec!["", "pg_catalog.", "pg_catalog . ", "\"pg_catalog\"."]),
        quoted in any::<bool>(),
        gap in proptest::sample::select(vec!["", " ", "\n", "\t \r\n", "/* c */", "/* a /* b */ */", "-- c\n"]),
        prefix in proptest::sample::select(vec!["SELECT ", "SELECT 1, ", "WITH a AS (SELECT 1) SELECT ", "INSERT INTO t VALUES ("]),
    ) {
        let spelled: String = name
            .chars()
            .zip(&upper)
            .map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c })
            .collect();
        let callee = if quoted { format!("\"{spelled}\"") } else { spelled };
        let sql = format!("{prefix}{schema}{callee}{gap}('x')");
        prop_assert_eq!(verdict(Mode::Default, &sql), call(name), "sql = {:?}", sql);
    }

    /// A forbidden call inside a literal, comment or dollar quote is harmless.
    #[test]
    fn prop_hidden_call_is_allowed(
        name in proptest::sample::select(SESSION_FUNCTIONS),
        wrap in proptest::sample::select(vec![
            ("'", "'"), ("E'\\'", "'"), ("$$", "$$"), ("$q$", "$q$"), ("$тег$", "$тег$"),
            ("/*", "*/"), ("/* /*", "*/ */"), ("--", "\n"), ("\"", "\""), ("U&'", "'"),
        ]),
    ) {
        let sql = format!("SELECT {}{name}(1){}", wrap.0, wrap.1);
        prop_assert_eq!(verdict(Mode::Default, &sql), None, "sql = {:?}", sql);
    }
}

/// The long fuzz run: `PGPIPE_GUARD_FUZZ_CASES` cases (1,000 when unset) of every property.
#[test]
fn fuzz() {
    let cases: u32 = match std::env::var("PGPIPE_GUARD_FUZZ_CASES") {
        Ok(v) => v.parse().expect("PGPIPE_GUARD_FUZZ_CASES is a number"),
        Err(_) => 1000,
    };
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&text(), |sql| check_all(&sql)) {
        panic!("{e}");
    }
    eprintln!(
        "guard fuzz: {cases} cases, no failure, {:.1?}",
        started.elapsed()
    );
}
