//! The session-neutrality guard on arbitrary text (UTF-8; invalid sequences replaced).
//!
//! Properties, each from the guard's documentation:
//! - no panic, in either mode, for `check`, `mask`, `needs_masking` and `is_read_only`;
//! - the verdict does not depend on the cache: a guard that remembers verdicts (its cache kept
//!   across inputs, small enough to evict) answers the same twice, and the same as a guard
//!   with no cache;
//! - `Strict` refuses everything `Default` refuses;
//! - `mask` keeps the byte length, keeps every `\n` and `\r` where it was, and changes bytes
//!   only to spaces; without `needs_masking` it returns the text unchanged;
//! - a refusal keeps at most `SHOWN_CHARS` characters of the text, plus `…`.
#![no_main]

use std::borrow::Cow;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use pgpipe::guard::{is_read_only, mask, needs_masking, Guard, Mode, Refusal, SHOWN_CHARS};

static CACHED: LazyLock<[Guard; 2]> = LazyLock::new(|| {
    [
        Guard::with_cache_capacity(Mode::Default, 16),
        Guard::with_cache_capacity(Mode::Strict, 16),
    ]
});

fn verdict(sql: &str, mode: Mode, cached: &Guard) -> Result<(), Refusal> {
    let first = cached.check(sql);
    let again = cached.check(sql);
    assert_eq!(
        first, again,
        "{mode:?}: a cached verdict differs for {sql:?}"
    );
    let uncached = Guard::with_cache_capacity(mode, 0).check(sql);
    assert_eq!(
        first, uncached,
        "{mode:?}: the cache changed the verdict for {sql:?}"
    );
    if let Err(r) = &first {
        let _ = (r.to_string(), r.reason.to_string(), r.kind(), r.advice());
        assert!(
            r.sql.chars().count() <= SHOWN_CHARS + 1,
            "a refusal keeps {} characters",
            r.sql.chars().count()
        );
    }
    first
}

fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data);
    let sql = sql.as_ref();
    let [default, strict] = &*CACHED;
    let d = verdict(sql, Mode::Default, default);
    let s = verdict(sql, Mode::Strict, strict);
    if let Err(r) = &d {
        assert!(
            s.is_err(),
            "Strict allows what Default refuses ({:?}): {sql:?}",
            r.reason
        );
    }

    let masked = mask(sql);
    assert_eq!(
        masked.len(),
        sql.len(),
        "mask changed the length of {sql:?}"
    );
    for (i, (&m, &o)) in masked.as_bytes().iter().zip(sql.as_bytes()).enumerate() {
        let line_end = |b: u8| b == b'\n' || b == b'\r';
        assert!(
            m == o || (m == b' ' && !line_end(o)),
            "mask turned byte {i} ({o:#04x}) into {m:#04x} in {sql:?}"
        );
    }
    if !needs_masking(sql) {
        assert!(matches!(masked, Cow::Borrowed(m) if m == sql));
    }
    let _ = is_read_only(sql);
});
