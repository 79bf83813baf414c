//! The session-neutrality guard through its public API: a table of cases for every rule, every
//! statement allowed on purpose and the known traps (in `guard_table/`); property tests against
//! a deliberately simple reference masker and reference rule checker written here; allocation
//! counts; and a long fuzz run
//! (`PGPIPE_GUARD_FUZZ_CASES=100000 cargo test -p pgpipe-tests --test guard fuzz`).
//! No server is needed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;

mod guard_oracle;
mod guard_table;

use guard_oracle::{expectation, reference_mask, SESSION_FUNCTIONS};
use guard_table::{call, verdict};
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
// The API: the fast path, refusals, sharing across threads, the cache, allocations.

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
    // (d) No panic; the cached verdict equals the uncached one; both fit the oracle's judgement.
    for mode in [Mode::Default, Mode::Strict] {
        let guard = Guard::new(mode);
        let miss = guard.check(sql);
        let hit = guard.check(sql);
        prop_assert_eq!(&miss, &hit);
        let uncached = Guard::with_cache_capacity(mode, 0).check(sql);
        prop_assert_eq!(&miss, &uncached);
        let reason = miss.err().map(|r| r.reason);
        let expect = expectation(sql, mode);
        prop_assert!(
            expect.fits(&reason),
            "{:?}: guard {:?}, oracle {:?}, sql = {:?}",
            mode,
            reason,
            expect,
            sql
        );
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
    fn prop_check_total_cached_and_fitting_the_oracle(sql in text()) {
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
        // A quoted name is exact: with a capital it names another function.
        let want = if quoted && spelled != name { None } else { call(name) };
        let callee = if quoted { format!("\"{spelled}\"") } else { spelled };
        let sql = format!("{prefix}{schema}{callee}{gap}('x')");
        prop_assert_eq!(verdict(Mode::Default, &sql), want, "sql = {:?}", sql);
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
