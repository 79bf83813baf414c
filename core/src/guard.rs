//! The session-neutrality guard: only statements that leave no session state behind may share a
//! connection with other callers.
//!
//! The guard is a conservative lexical filter, not a parser and not a security boundary. It keeps
//! one caller's session state (settings, temp tables, advisory locks, sequence state, large-object
//! descriptors, dblink connections) from leaking into a stranger's statements; anything it refuses
//! belongs in `session()` or `transaction()`.
//!
//! A check works on a *masked* copy of the SQL: literals, comments, dollar quotes and quoted
//! identifiers become spaces (same byte length, newlines kept), so text inside them can neither
//! trigger nor hide a rule. The rules then run on the masked text. `docs/GUARD.md` lists each rule
//! and why it exists.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which rule set a [`Guard`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Refuse statements that change session state; sequence calls (`nextval`, `setval`) are
    /// allowed because their effect is meant to be global.
    #[default]
    Default,
    /// Also refuse `nextval`, `setval` (they set the session's `currval`/`lastval`) and
    /// `pg_export_snapshot` (the snapshot lives as long as the exporting transaction's session).
    Strict,
}

/// Why a statement was refused. Machine-readable; [`fmt::Display`] gives a human sentence.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Nothing but whitespace and comments, or the statement does not start with a word
    /// (for example a leading `(`).
    Empty,
    /// The first keyword (lower-cased) is not SELECT, INSERT, UPDATE, DELETE, MERGE, VALUES or
    /// WITH.
    LeadingKeyword(String),
    /// Something other than whitespace follows the first `;`.
    MultipleStatements,
    /// A call of a function that changes session state; the canonical lower-case name.
    ForbiddenCall(&'static str),
    /// `INTO [GLOBAL|LOCAL] TEMP|TEMPORARY`: `SELECT ... INTO` creating a temporary table.
    IntoTemp,
    /// `INTO [TABLE] pg_temp[_N].`: writing to or creating a table in the session's temp schema.
    IntoPgTemp,
    /// A `U&"..."` identifier whose body is not a plain identifier: escapes could spell any name.
    UnicodeEscapedIdentifier,
    /// `UESCAPE` together with a `U&` literal or identifier.
    Uescape,
    /// `UPDATE pg_settings`: the same as SET (and for parameters the server does not report,
    /// such as `search_path`, invisible to the ParameterStatus backstop).
    UpdatePgSettings,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Empty => {
                f.write_str("no statement keyword (empty, or not starting with a word)")
            }
            Reason::LeadingKeyword(k) => write!(
                f,
                "leading keyword `{k}` is not SELECT, INSERT, UPDATE, DELETE, MERGE, VALUES or WITH"
            ),
            Reason::MultipleStatements => f.write_str("more than one statement"),
            Reason::ForbiddenCall(name) => write!(f, "call of session-state function `{name}`"),
            Reason::IntoTemp => f.write_str("INTO a temporary table"),
            Reason::IntoPgTemp => f.write_str("INTO a table in the session's pg_temp schema"),
            Reason::UnicodeEscapedIdentifier => {
                f.write_str("U&\"...\" identifier that is not a plain identifier")
            }
            Reason::Uescape => f.write_str("UESCAPE with a U& literal or identifier"),
            Reason::UpdatePgSettings => f.write_str("UPDATE of pg_settings (equivalent to SET)"),
        }
    }
}

/// A statement the guard refused for the shared path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule that refused it.
    pub reason: Reason,
    /// The statement, shortened to its first [`SHOWN_CHARS`] characters plus `…` if longer.
    pub sql: String,
}

/// How many characters of the refused SQL a [`Refusal`] keeps.
pub const SHOWN_CHARS: usize = 120;

impl Refusal {
    fn new(reason: Reason, sql: &str) -> Refusal {
        Refusal {
            reason,
            sql: shorten(sql, SHOWN_CHARS),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "statement refused on the shared path ({}): {:?}; use session() or transaction() \
             for statements that change session state",
            self.reason, self.sql
        )
    }
}

impl std::error::Error for Refusal {}

/// The first `max` characters of `s`, plus `…` when something was cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => {
            let mut out = String::with_capacity(at + '…'.len_utf8());
            out.push_str(&s[..at]);
            out.push('…');
            out
        }
        None => s.to_owned(),
    }
}

/// Default number of verdicts a [`Guard`] remembers.
pub const DEFAULT_CACHE_CAPACITY: usize = 2048;

/// Longer texts are checked every time rather than cached. The cache bounds entries, not bytes:
/// without this, 2,048 unique multi-megabyte statements (inline bulk INSERTs) would all be kept.
/// Checking costs about as much per byte as hashing, so a long text gains little from the cache.
pub const MAX_CACHED_LEN: usize = 16 * 1024;

/// Checks statements for the shared path and remembers its verdicts.
///
/// `Send + Sync`; [`Guard::check`] takes `&self` (the verdict cache sits behind a mutex that is
/// never held while a statement is being analysed).
pub struct Guard {
    mode: Mode,
    cache: Mutex<Cache>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = self.lock();
        f.debug_struct("Guard")
            .field("mode", &self.mode)
            .field("cached", &cache.map.len())
            .field("capacity", &cache.cap)
            .finish()
    }
}

impl Default for Guard {
    fn default() -> Guard {
        Guard::new(Mode::Default)
    }
}

impl Guard {
    /// A guard with the default cache capacity ([`DEFAULT_CACHE_CAPACITY`]).
    pub fn new(mode: Mode) -> Guard {
        Guard::with_cache_capacity(mode, DEFAULT_CACHE_CAPACITY)
    }

    /// A guard remembering at most `capacity` verdicts (0 disables the cache). Texts longer than
    /// [`MAX_CACHED_LEN`] are never cached.
    pub fn with_cache_capacity(mode: Mode, capacity: usize) -> Guard {
        Guard {
            mode,
            cache: Mutex::new(Cache::new(capacity)),
        }
    }

    /// The rule set this guard applies.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `Ok(())` if `sql` may run on a shared connection, otherwise the rule that refuses it.
    ///
    /// A cache hit for an allowed statement does not allocate; a refusal allocates its message.
    pub fn check(&self, sql: &str) -> Result<(), Refusal> {
        let cached = self.lock().get(sql);
        let verdict = match cached {
            Some(v) => v,
            None => {
                let v = verdict(sql, self.mode);
                self.lock().insert(sql, v.clone());
                v
            }
        };
        match verdict {
            None => Ok(()),
            Some(reason) => Err(Refusal::new(reason, sql)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        // The cache is consistent after every operation, so a poisoned lock is still usable.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    fn cached_len(&self) -> usize {
        self.lock().map.len()
    }
}

/// A bounded verdict cache with second-chance (CLOCK) eviction: entries leave one at a time, and
/// an entry hit since its last turn gets another round, so hot statements stay. Clearing the
/// whole cache when full would make every statement pay the uncached cost at once.
struct Cache {
    cap: usize,
    map: HashMap<Arc<str>, Slot>,
    /// Insertion order; the front is the next eviction candidate.
    ring: VecDeque<Arc<str>>,
}

struct Slot {
    verdict: Option<Reason>,
    hit: bool,
}

impl Cache {
    fn new(cap: usize) -> Cache {
        Cache {
            cap,
            map: HashMap::new(),
            ring: VecDeque::new(),
        }
    }

    /// `Arc<str>: Borrow<str>`, so the lookup needs no owned key.
    fn get(&mut self, sql: &str) -> Option<Option<Reason>> {
        let slot = self.map.get_mut(sql)?;
        slot.hit = true;
        Some(slot.verdict.clone())
    }

    fn insert(&mut self, sql: &str, verdict: Option<Reason>) {
        // Another thread may have inserted the same text while we were analysing it.
        if self.cap == 0 || sql.len() > MAX_CACHED_LEN || self.map.contains_key(sql) {
            return;
        }
        while self.map.len() >= self.cap {
            self.evict_one();
        }
        let key: Arc<str> = Arc::from(sql);
        self.ring.push_back(Arc::clone(&key));
        self.map.insert(
            key,
            Slot {
                verdict,
                hit: false,
            },
        );
    }

    fn evict_one(&mut self) {
        // Terminates: each pass over a hit entry clears its bit.
        while let Some(key) = self.ring.pop_front() {
            match self.map.get_mut(&key) {
                Some(slot) if slot.hit => {
                    slot.hit = false;
                    self.ring.push_back(key);
                }
                _ => {
                    self.map.remove(&key);
                    return;
                }
            }
        }
    }
}

/// Statements allowed to start a shared-path statement.
const LEADING: [&str; 7] = [
    "select", "insert", "update", "delete", "merge", "values", "with",
];

/// Functions whose effect outlives the statement in the session.
const FORBIDDEN: [&str; 31] = [
    // GUCs and the session's random seed.
    "set_config",
    "setseed",
    // Read the session's sequence state: on a shared connection that is a stranger's value.
    "currval",
    "lastval",
    // Session-level advisory locks outlive the statement (the _xact_ forms do not).
    "pg_advisory_lock",
    "pg_try_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_try_advisory_lock_shared",
    "pg_advisory_unlock",
    "pg_advisory_unlock_shared",
    "pg_advisory_unlock_all",
    // Named dblink connections live in the session.
    "dblink_connect",
    "dblink_connect_u",
    "dblink_disconnect",
    // Large-object descriptors live in the session (lo_get/lo_put do not use one).
    "lo_open",
    "lo_close",
    "lo_creat",
    "lo_create",
    "lo_import",
    "lo_export",
    "lo_unlink",
    "lo_read",
    "lo_write",
    "lo_lseek",
    "lo_lseek64",
    "lo_tell",
    "lo_tell64",
    "lo_truncate",
    "lo_truncate64",
    "loread",
    "lowrite",
];

/// Refused only in [`Mode::Strict`].
const FORBIDDEN_STRICT: [&str; 3] = ["nextval", "setval", "pg_export_snapshot"];

/// Longest name in either list; longer words are skipped without comparing.
const LONGEST_FORBIDDEN: usize = 27;

/// Bytes that continue a PostgreSQL identifier. Bytes >= 0x80 are identifier characters in
/// PostgreSQL, so every byte of a non-ASCII character counts.
#[inline]
fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Bytes that may start a word (keyword or identifier), and a dollar-quote tag (`$1` is a
/// parameter, not a tag).
#[inline]
fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

/// Later bytes of a dollar-quote tag (no `$`: it ends the tag).
#[inline]
fn is_tag_cont(b: u8) -> bool {
    is_word_start(b) || b.is_ascii_digit()
}

/// PostgreSQL's whitespace (`\v` since 16; older servers reject it, which is also safe).
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Whether `b[at] == '$'` may open a dollar quote: not inside an identifier (`a$b`), and followed
/// by `$` or a tag start. A tag without its closing `$` is not a quote, so this over-approximates.
#[inline]
fn may_open_dollar(b: &[u8], at: usize) -> bool {
    (at == 0 || !is_ident(b[at - 1]))
        && matches!(b.get(at + 1), Some(&c) if c == b'$' || is_word_start(c))
}

/// The fast-path test: `false` means the text has no quote, no comment start and no dollar-quote
/// start, so [`mask`] would return it unchanged.
pub fn needs_masking(sql: &str) -> bool {
    let b = sql.as_bytes();
    let candidate = |c: u8, next: u8| {
        (c == b'\'')
            | (c == b'"')
            | (c == b'-') & (next == b'-')
            | (c == b'/') & (next == b'*')
            | (c == b'$')
    };
    let mut needed = false;
    for_each_candidate(b, candidate, |i| {
        needed = b[i] != b'$' || may_open_dollar(b, i);
        !needed
    });
    needed
}

/// Calls `visit(i)`, in order and while it returns true, for every `i` with
/// `candidate(b[i], b[i + 1])` (0 stands for the byte after the end).
///
/// Most bytes of a statement are not candidates, so each 32-byte chunk is first tested as a
/// whole with a branch-free fold over fixed-size arrays, which the compiler turns into vector
/// compares; only chunks with a candidate are walked byte by byte.
#[inline(always)]
fn for_each_candidate(
    b: &[u8],
    candidate: impl Fn(u8, u8) -> bool,
    mut visit: impl FnMut(usize) -> bool,
) {
    const CHUNK: usize = 32;
    let mut base = 0;
    while base + CHUNK < b.len() {
        let cur: &[u8; CHUNK] = b[base..base + CHUNK].try_into().expect("CHUNK bytes");
        let next: &[u8; CHUNK] = b[base + 1..base + CHUNK + 1]
            .try_into()
            .expect("CHUNK bytes");
        let any = cur
            .iter()
            .zip(next)
            .fold(false, |any, (&c, &n)| any | candidate(c, n));
        if any {
            for k in 0..CHUNK {
                if candidate(cur[k], next[k]) && !visit(base + k) {
                    return;
                }
            }
        }
        base += CHUNK;
    }
    for i in base..b.len() {
        if candidate(b[i], b.get(i + 1).copied().unwrap_or(0)) && !visit(i) {
            return;
        }
    }
}

/// What masking saw that the rules need and the masked text no longer shows.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    /// A `U&'...'` literal or `U&"..."` identifier.
    u_amp: bool,
    /// A `U&"..."` identifier whose body is not a plain identifier.
    u_ident_escaped: bool,
}

/// `sql` with string literals, quoted identifiers, comments and dollar quotes replaced by spaces.
///
/// The result has the same byte length and keeps every `\n` and `\r` where it was; every byte of
/// a masked multibyte character becomes a space, so the result is valid UTF-8. The body of a
/// quoted identifier that is a plain identifier (`"set_config"`) stays visible (only its quotes
/// are masked), because it names the same function as the unquoted word. Unterminated constructs
/// mask to the end. Returns the input borrowed when [`needs_masking`] is false (or when nothing
/// turned out to need masking, as in `$a` without a closing `$`), and allocates at most one
/// `String` otherwise.
pub fn mask(sql: &str) -> Cow<'_, str> {
    if !needs_masking(sql) {
        return Cow::Borrowed(sql);
    }
    Masker::new(sql).run().0
}

/// Writes the masked copy lazily: nothing is allocated until the first byte is masked.
struct Masker<'a> {
    src: &'a str,
    out: Option<String>,
    /// `src[..copied]` has been written to `out`.
    copied: usize,
    seen: Seen,
}

impl<'a> Masker<'a> {
    fn new(src: &'a str) -> Masker<'a> {
        Masker {
            src,
            out: None,
            copied: 0,
            seen: Seen::default(),
        }
    }

    /// Replaces `src[start..end]` by spaces, keeping line breaks. Both ends are on character
    /// boundaries: every masked range starts at an ASCII delimiter and ends after one or at the
    /// end of the text.
    fn blank(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let src = self.src;
        let out = self
            .out
            .get_or_insert_with(|| String::with_capacity(src.len()));
        out.push_str(&src[self.copied..start]);
        for &c in &src.as_bytes()[start..end] {
            out.push(if c == b'\n' || c == b'\r' {
                c as char
            } else {
                ' '
            });
        }
        self.copied = end;
    }

    fn run(mut self) -> (Cow<'a, str>, Seen) {
        let b = self.src.as_bytes();
        let n = b.len();
        let mut i = 0;
        while i < n {
            i = match b[i] {
                b'\'' => self.literal(i),
                b'"' => self.quoted_ident(i),
                b'-' if b.get(i + 1) == Some(&b'-') => {
                    let end = line_end(b, i);
                    self.blank(i, end);
                    end
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    let end = block_comment_end(b, i);
                    self.blank(i, end);
                    end
                }
                b'$' if may_open_dollar(b, i) => match dollar_tag_end(b, i) {
                    Some(open_end) => {
                        let delim = &b[i..open_end];
                        let end = find(b, open_end, delim).map_or(n, |at| at + delim.len());
                        self.blank(i, end);
                        end
                    }
                    None => i + 1,
                },
                _ => i + 1,
            };
        }
        let out = match self.out {
            None => Cow::Borrowed(self.src),
            Some(mut out) => {
                out.push_str(&self.src[self.copied..]);
                Cow::Owned(out)
            }
        };
        (out, self.seen)
    }

    /// A string literal opening at `b[i] == '\''`; returns the index after it.
    ///
    /// Backslash escapes apply only to `E'...'` where the E starts a token (the byte before it is
    /// not an identifier byte): with standard_conforming_strings, `'a\'` ends at its second quote.
    /// A literal continues after whitespace containing a newline (and `--` comments) followed by
    /// another quote, in the same escape mode: PostgreSQL glues such segments into one literal, so
    /// `E'a'<newline>'\'...'` is still an E-string.
    fn literal(&mut self, i: usize) -> usize {
        let b = self.src.as_bytes();
        if is_u_amp(b, i) {
            self.seen.u_amp = true;
        }
        let escapes = i >= 1 && b[i - 1] | 0x20 == b'e' && (i == 1 || !is_ident(b[i - 2]));
        let mut open = i;
        loop {
            let Some(end) = literal_segment_end(b, open, escapes) else {
                self.blank(open, b.len());
                return b.len();
            };
            self.blank(open, end);
            let Some(next_quote) = continuation(b, end) else {
                return end;
            };
            // The gap is whitespace and `--` comments: mask the comments, as code would.
            let mut j = end;
            while j < next_quote {
                if b[j] == b'-' {
                    let e = line_end(b, j);
                    self.blank(j, e);
                    j = e;
                } else {
                    j += 1;
                }
            }
            open = next_quote;
        }
    }

    /// A quoted identifier opening at `b[i] == '"'`; returns the index after it.
    ///
    /// A `U&` prefix is masked with the quotes: left visible, `INTO U&"pg_temp".t` would read as
    /// INTO followed by the word `U` rather than `pg_temp`.
    fn quoted_ident(&mut self, i: usize) -> usize {
        let b = self.src.as_bytes();
        let u_amp = is_u_amp(b, i);
        self.seen.u_amp |= u_amp;
        let open = if u_amp { i - 2 } else { i };
        let mut j = i + 1;
        let close = loop {
            match b.get(j) {
                None => break None,
                Some(b'"') if b.get(j + 1) == Some(&b'"') => j += 2,
                Some(b'"') => break Some(j),
                Some(_) => j += 1,
            }
        };
        match close {
            Some(close) if is_plain_ident(&b[i + 1..close]) => {
                // Same name as the bare word, so it stays visible: `"set_config"(` is a call.
                self.blank(open, i + 1);
                self.blank(close, close + 1);
                close + 1
            }
            _ => {
                self.seen.u_ident_escaped |= u_amp;
                let end = close.map_or(b.len(), |c| c + 1);
                self.blank(open, end);
                end
            }
        }
    }
}

/// Whether the quote at `b[i]` is prefixed by a token-starting `U&`.
#[inline]
fn is_u_amp(b: &[u8], i: usize) -> bool {
    i >= 2 && b[i - 1] == b'&' && b[i - 2] | 0x20 == b'u' && (i == 2 || !is_ident(b[i - 3]))
}

/// `[A-Za-z_][A-Za-z0-9_$]*`
fn is_plain_ident(body: &[u8]) -> bool {
    match body.split_first() {
        Some((&first, rest)) => {
            (first.is_ascii_alphabetic() || first == b'_')
                && rest
                    .iter()
                    .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
        }
        None => false,
    }
}

/// End of the line comment starting at `i`: the next `\n` or `\r` (not included), or the end.
fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n' || c == b'\r')
        .map_or(b.len(), |p| i + p)
}

/// End of the (nesting) block comment starting at `b[i..i + 2] == "/*"`, or the end of the text.
fn block_comment_end(b: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match (b[j], b.get(j + 1)) {
            (b'/', Some(b'*')) => {
                depth += 1;
                j += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return j;
                }
            }
            _ => j += 1,
        }
    }
    b.len()
}

/// If `b[i]` opens a dollar quote (`$$` or `$tag$`), the index after its opening delimiter.
fn dollar_tag_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if b.get(j).is_some_and(|&c| is_word_start(c)) {
        j += 1;
        while b.get(j).is_some_and(|&c| is_tag_cont(c)) {
            j += 1;
        }
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

/// First occurrence of `needle` in `b[from..]`. Tags are short, so a scan for `$` suffices.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let last = b.len().checked_sub(needle.len())?;
    (from..=last).find(|&at| b[at] == needle[0] && &b[at..at + needle.len()] == needle)
}

/// End (after the closing quote) of one literal segment opening at `b[open] == '\''`, or `None`
/// if it is unterminated. `''` is a quote inside the literal; with `escapes`, so is `\'`.
fn literal_segment_end(b: &[u8], open: usize, escapes: bool) -> Option<usize> {
    let mut j = open + 1;
    while j < b.len() {
        match b[j] {
            b'\\' if escapes => j += 2,
            b'\'' if b.get(j + 1) == Some(&b'\'') => j += 2,
            b'\'' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// If the literal that ended at `end` continues (whitespace and `--` comments containing a
/// newline, then a quote), the index of that quote.
fn continuation(b: &[u8], end: usize) -> Option<usize> {
    let mut newline = false;
    let mut j = end;
    while j < b.len() {
        match b[j] {
            b'\n' | b'\r' => {
                newline = true;
                j += 1;
            }
            c if is_space(c) => j += 1,
            b'-' if b.get(j + 1) == Some(&b'-') => j = line_end(b, j),
            b'\'' if newline => return Some(j),
            _ => return None,
        }
    }
    None
}

/// The verdict on `sql`: `None` if allowed.
fn verdict(sql: &str, mode: Mode) -> Option<Reason> {
    let (masked, seen) = if needs_masking(sql) {
        Masker::new(sql).run()
    } else {
        (Cow::Borrowed(sql), Seen::default())
    };
    let m = masked.as_bytes();

    // Only plain DML and queries: everything else (SET, BEGIN, LISTEN, COPY, PREPARE, DECLARE,
    // CREATE TEMP ...) is session or protocol state by nature.
    let start = m.iter().position(|&c| !is_space(c)).unwrap_or(m.len());
    if !m.get(start).is_some_and(|&c| is_word_start(c)) {
        return Some(Reason::Empty);
    }
    let word = &masked[start..word_end(m, start)];
    if !LEADING.iter().any(|k| k.eq_ignore_ascii_case(word)) {
        return Some(Reason::LeadingKeyword(keyword_for_display(word)));
    }

    // One pass over the text collects what every remaining rule needs; the rules are then
    // applied in a fixed order, so the reason does not depend on where things occur.
    let facts = Facts::scan(m, mode, seen.u_amp);

    // A second statement would escape every other rule's context (and the extended protocol
    // refuses it anyway); only whitespace may follow the first `;`.
    if facts.second_statement {
        return Some(Reason::MultipleStatements);
    }
    // Escapes in a U& identifier could spell any name, which no lexical rule can see.
    if seen.u_ident_escaped {
        return Some(Reason::UnicodeEscapedIdentifier);
    }
    if facts.uescape {
        return Some(Reason::Uescape);
    }
    if let Some(name) = facts.call {
        return Some(Reason::ForbiddenCall(name));
    }
    if facts.into.is_some() {
        return facts.into;
    }
    facts.pg_settings.then_some(Reason::UpdatePgSettings)
}

/// Whether the word at `at` is `pg_settings` and the target of an UPDATE:
/// `UPDATE [ONLY] [pg_catalog.]pg_settings`, any case and whitespace.
fn updates_pg_settings(m: &[u8], at: usize) -> bool {
    if !is_word_at(m, at, b"pg_settings") {
        return false;
    }
    let back_space = |mut i: usize| {
        while i > 0 && is_space(m[i - 1]) {
            i -= 1;
        }
        i
    };
    let word_before = |end: usize| {
        let mut s = end;
        while s > 0 && is_ident(m[s - 1]) {
            s -= 1;
        }
        (s, &m[s..end])
    };
    let mut i = back_space(at);
    if i > 0 && m[i - 1] == b'.' {
        let (s, w) = word_before(back_space(i - 1));
        if !w.eq_ignore_ascii_case(b"pg_catalog") {
            return false;
        }
        i = back_space(s);
    }
    let (s, mut w) = word_before(i);
    if w.eq_ignore_ascii_case(b"only") {
        w = word_before(back_space(s)).1;
    }
    w.eq_ignore_ascii_case(b"update")
}

/// What one pass over the masked text found.
#[derive(Default)]
struct Facts {
    /// Something other than whitespace after the first `;`.
    second_statement: bool,
    /// The word UESCAPE, looked for only when a `U&` construct was seen.
    uescape: bool,
    /// The first forbidden call.
    call: Option<&'static str>,
    /// The first INTO TEMP / INTO pg_temp.
    into: Option<Reason>,
    /// `UPDATE [ONLY] [pg_catalog.]pg_settings`.
    pg_settings: bool,
}

impl Facts {
    /// The prefilter is built in: every forbidden pattern is anchored on `(` or on the word INTO,
    /// so the pass stops only at `(`, `;` and the letters `nt` (as in INTO; and `ue` as in
    /// UESCAPE once a `U&` was seen). A text with none of them costs one chunked scan.
    fn scan(m: &[u8], mode: Mode, u_amp: bool) -> Facts {
        let mut facts = Facts::default();
        let candidate = |c: u8, next: u8| {
            (c == b'(')
                | (c == b';')
                | (c | 0x20 == b'n') & (next | 0x20 == b't')
                | u_amp & (c | 0x20 == b'u') & (next | 0x20 == b'e')
                | (c | 0x20 == b'p') & (next | 0x20 == b'g')
        };
        for_each_candidate(m, candidate, |i| {
            match m[i] {
                b'(' => {
                    if facts.call.is_none() {
                        facts.call = forbidden_call(m, i, mode);
                    }
                }
                b';' => {
                    // Whatever follows is either nothing or a second statement: stop here.
                    facts.second_statement = !m[i + 1..].iter().all(|&c| is_space(c));
                    return false;
                }
                _ if i > 0 && is_word_at(m, i - 1, b"into") => {
                    if facts.into.is_none() {
                        facts.into = into_temp(m, i + 3);
                    }
                }
                b'p' | b'P' => facts.pg_settings |= updates_pg_settings(m, i),
                _ => facts.uescape |= is_word_at(m, i, b"uescape"),
            }
            true
        });
        facts
    }
}

/// Whether `m[at..]` starts with `word` (lower-case ASCII), in any case, as a whole identifier.
fn is_word_at(m: &[u8], at: usize, word: &[u8]) -> bool {
    let end = at + word.len();
    (at == 0 || !is_ident(m[at - 1]))
        && m.get(at..end).is_some_and(|w| w.eq_ignore_ascii_case(word))
        && m.get(end).is_none_or(|&c| !is_ident(c))
}

/// End of the identifier run starting at `i`.
fn word_end(m: &[u8], i: usize) -> usize {
    m[i..]
        .iter()
        .position(|&c| !is_ident(c))
        .map_or(m.len(), |p| i + p)
}

/// Lower-cased, at most 64 bytes (cut on a character boundary).
fn keyword_for_display(word: &str) -> String {
    let mut cut = word.len().min(64);
    while !word.is_char_boundary(cut) {
        cut -= 1;
    }
    word[..cut].to_ascii_lowercase()
}

/// The forbidden name called by the `(` at `paren`, if any (whitespace allowed in between).
/// Reading backwards from the parenthesis takes the maximal identifier run, so the name is at an
/// identifier boundary on both sides: `my_set_config(` is not `set_config(`, while
/// `pg_catalog.set_config(` is.
fn forbidden_call(m: &[u8], paren: usize, mode: Mode) -> Option<&'static str> {
    let mut end = paren;
    while end > 0 && is_space(m[end - 1]) {
        end -= 1;
    }
    let mut start = end;
    while start > 0 && is_ident(m[start - 1]) {
        start -= 1;
    }
    let name = &m[start..end];
    if name.is_empty() || name.len() > LONGEST_FORBIDDEN {
        return None;
    }
    let strict: &[&'static str] = match mode {
        Mode::Default => &[],
        Mode::Strict => &FORBIDDEN_STRICT,
    };
    FORBIDDEN
        .iter()
        .chain(strict)
        .find(|f| f.as_bytes().eq_ignore_ascii_case(name))
        .copied()
}

/// After the word INTO ending at `into_end`: `[GLOBAL|LOCAL] TEMP|TEMPORARY` or
/// `[TABLE] pg_temp[_N] .` (any case, any whitespace; the optional words are accepted in any
/// combination, which only widens the net).
fn into_temp(m: &[u8], into_end: usize) -> Option<Reason> {
    let is = |(s, e): (usize, usize), options: &[&str]| {
        options
            .iter()
            .any(|o| o.as_bytes().eq_ignore_ascii_case(&m[s..e]))
    };
    let mut w = next_word(m, into_end);
    if let Some(x) = w.filter(|&x| is(x, &["global", "local"])) {
        w = next_word(m, x.1);
    }
    if w.is_some_and(|x| is(x, &["temp", "temporary"])) {
        return Some(Reason::IntoTemp);
    }
    if let Some(x) = w.filter(|&x| is(x, &["table"])) {
        w = next_word(m, x.1);
    }
    let (s, e) = w?;
    (is_pg_temp(&m[s..e]) && m[e..].iter().find(|&&c| !is_space(c)) == Some(&b'.'))
        .then_some(Reason::IntoPgTemp)
}

/// The identifier run after whitespace from `i`, if the next non-space byte starts one.
fn next_word(m: &[u8], i: usize) -> Option<(usize, usize)> {
    let s = i + m[i..].iter().position(|&c| !is_space(c))?;
    is_ident(m[s]).then(|| (s, word_end(m, s)))
}

/// `pg_temp` or `pg_temp_<digits>`, any case.
fn is_pg_temp(word: &[u8]) -> bool {
    if word.len() < 7 || !word[..7].eq_ignore_ascii_case(b"pg_temp") {
        return false;
    }
    match &word[7..] {
        [] => true,
        [b'_', digits @ ..] => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sql: &str) -> Option<Reason> {
        verdict(sql, Mode::Default)
    }

    #[test]
    fn masks_each_construct_to_same_length() {
        // `#` marks a masked byte.
        let cases = [
            ("SELECT 'a''b' x", "SELECT ###### x"),
            ("SELECT 'a\\' x", "SELECT #### x"),
            ("SELECT E'a\\'b' x", "SELECT E###### x"),
            ("SELECT \"a b\" x", "SELECT ##### x"),
            ("SELECT \"set_config\"(1)", "SELECT #set_config#(1)"),
            ("SELECT 1 -- c\n, 2", "SELECT 1 ####\n, 2"),
            ("SELECT /* a /* b */ c */ 1", "SELECT ################# 1"),
            ("SELECT $$a'b$$ x", "SELECT ####### x"),
            ("SELECT $t$a$$b$t$ x", "SELECT ########## x"),
            ("SELECT $1, a$b$c", "SELECT $1, a$b$c"),
            ("SELECT 'open", "SELECT #####"),
            ("SELECT 'é'", "SELECT ####"),
            ("SELECT 'a'\r\n'b'", "SELECT ###\r\n###"),
        ];
        for (sql, want) in cases {
            let got = mask(sql);
            assert_eq!(got, want.replace('#', " "), "mask({sql:?})");
            assert_eq!(got.len(), sql.len());
        }
    }

    #[test]
    fn fast_path_borrows() {
        assert!(matches!(
            mask("SELECT a FROM t WHERE id = $1"),
            Cow::Borrowed(_)
        ));
        assert!(!needs_masking("SELECT a - b / c FROM t WHERE x = $1"));
        assert!(needs_masking("SELECT 1 -- c"));
        assert!(needs_masking("SELECT $$x$$"));
        assert!(needs_masking("SELECT $t$x$t$"));
    }

    #[test]
    fn literal_continuation_keeps_escape_mode() {
        // One E-string in PostgreSQL: the second segment's `\'` is escaped.
        let sql = "SELECT E'a'\n'\\' , x ', set_config('a','b',false) --'";
        assert_eq!(refused(sql), Some(Reason::ForbiddenCall("set_config")));
        // Without a newline the second literal is a separate, plain one.
        assert_eq!(mask("SELECT E'a' 'b\\' x"), "SELECT E         x");
    }

    #[test]
    fn update_of_pg_settings_is_set() {
        for sql in [
            "UPDATE pg_settings SET setting = 'x' WHERE name = 'search_path'",
            "update  PG_CATALOG . pg_settings set setting = 'x'",
            "WITH s AS (UPDATE ONLY pg_catalog.pg_settings SET setting = '1' RETURNING 1) SELECT 1",
            "UPDATE /* c */ pg_settings SET setting = 'x'",
        ] {
            assert_eq!(refused(sql), Some(Reason::UpdatePgSettings), "{sql}");
        }
        for sql in [
            "SELECT name, setting FROM pg_settings WHERE name = $1",
            "UPDATE my_pg_settings SET x = 1",
            "UPDATE t SET note = 'pg_settings'",
            "UPDATE other.pg_settings SET x = 1",
        ] {
            assert_eq!(refused(sql), None, "{sql}");
        }
    }

    #[test]
    fn rules_in_order() {
        assert_eq!(refused(""), Some(Reason::Empty));
        assert_eq!(refused(" -- only\n"), Some(Reason::Empty));
        assert_eq!(refused("(SELECT 1)"), Some(Reason::Empty));
        assert_eq!(
            refused("SET x = 1"),
            Some(Reason::LeadingKeyword("set".into()))
        );
        assert_eq!(
            refused("select 1; select 2"),
            Some(Reason::MultipleStatements)
        );
        assert_eq!(refused("select 1;\n "), None);
        assert_eq!(
            refused("select U&\"\\0073et_config\"('a','b',false)"),
            Some(Reason::UnicodeEscapedIdentifier)
        );
        assert_eq!(
            refused("select U&'d!0061t' UESCAPE '!'"),
            Some(Reason::Uescape)
        );
        assert_eq!(
            refused("select Set_Config ('a','b',false)"),
            Some(Reason::ForbiddenCall("set_config"))
        );
        assert_eq!(
            refused("select * into temp t from x"),
            Some(Reason::IntoTemp)
        );
        assert_eq!(
            refused("select * into table pg_temp_3 . t from x"),
            Some(Reason::IntoPgTemp)
        );
        assert_eq!(refused("insert into pg_temp_x.t values (1)"), None);
        assert_eq!(refused("select nextval('s')"), None);
        assert_eq!(
            verdict("select nextval('s')", Mode::Strict),
            Some(Reason::ForbiddenCall("nextval"))
        );
    }

    #[test]
    fn cache_evicts_one_entry_at_a_time_and_keeps_hot_ones() {
        let g = Guard::with_cache_capacity(Mode::Default, 4);
        for i in 0..4 {
            g.check(&format!("select {i}")).unwrap();
        }
        assert_eq!(g.cached_len(), 4);
        g.check("select 0").unwrap(); // hit: select 0 gets a second chance
        g.check("select 4").unwrap(); // evicts select 1, the oldest not hit
        assert_eq!(g.cached_len(), 4);
        let cache = g.lock();
        assert!(cache.map.contains_key("select 0"));
        assert!(!cache.map.contains_key("select 1"));
        assert!(cache.map.contains_key("select 4"));
        assert_eq!(cache.ring.len(), 4);
    }

    #[test]
    fn long_texts_are_not_cached() {
        let g = Guard::new(Mode::Default);
        let long = format!("SELECT 1 {}", " ".repeat(MAX_CACHED_LEN));
        assert!(g.check(&long).is_ok());
        assert_eq!(g.cached_len(), 0);
        let limit = format!("SELECT 1{}", " ".repeat(MAX_CACHED_LEN - 8));
        assert!(g.check(&limit).is_ok());
        assert_eq!(g.cached_len(), 1);
    }

    #[test]
    fn zero_capacity_disables_the_cache() {
        let g = Guard::with_cache_capacity(Mode::Default, 0);
        assert!(g.check("select 1").is_ok());
        assert!(g.check("set x = 1").is_err());
        assert_eq!(g.cached_len(), 0);
    }

    #[test]
    fn refusal_names_reason_sql_and_remedy() {
        let long = format!("SET x = '{}'", "é".repeat(200));
        let err = Guard::new(Mode::Default).check(&long).unwrap_err();
        assert_eq!(err.sql.chars().count(), SHOWN_CHARS + 1);
        assert!(err.sql.ends_with('…'));
        let text = err.to_string();
        assert!(text.contains("leading keyword `set`"), "{text}");
        assert!(text.contains("use session() or transaction()"), "{text}");
    }

    #[test]
    fn guard_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Guard>();
        assert_send_sync::<Refusal>();
    }
}
