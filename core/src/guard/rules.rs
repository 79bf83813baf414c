//! The rules, applied to what the reader found. Each rule is written for a class of statements,
//! not for examples: `docs/GUARD.md` states every rule and the class it closes.

use super::extensions::ExtensionNames;
use super::lex::{for_each_candidate, is_space, is_word_start, word_end};
use super::lexer::{kept_len, Kind, Lexer, Name, NAME_MAX};
use super::names::{
    may_be_listed, may_be_view, reaches_listed, refused_function, session_view, FUNCTIONS,
};
use super::reader::read;
use super::{Mode, Reason};

/// Words that may start a shared-path statement (after any number of `(`).
const LEADING: [&str; 8] = [
    "select", "insert", "update", "delete", "merge", "values", "with", "table",
];

/// The verdict on `sql`: `None` if allowed.
#[cfg(test)]
pub(super) fn verdict(sql: &str, mode: Mode) -> Option<Reason> {
    verdict_with(sql, mode, &ExtensionNames::default())
}

/// The verdict on `sql` with the extension functions `ext` refused too: `None` if allowed.
pub(super) fn verdict_with(sql: &str, mode: Mode, ext: &ExtensionNames) -> Option<Reason> {
    // Only plain DML and queries: everything else (SET, BEGIN, LISTEN, COPY, PREPARE, DECLARE,
    // CREATE TEMP ...) is session or protocol state by nature. Parentheses may come first:
    // `(SELECT 1) UNION (SELECT 2)` is what ORMs write for set operations.
    let first = Lexer::new(sql).find(|t| t.kind != Kind::Open);
    let Some(first) = first.filter(|t| t.kind == Kind::Word) else {
        return Some(Reason::Empty);
    };
    let word = &sql[first.start()..first.end()];
    if !LEADING.iter().any(|k| k.eq_ignore_ascii_case(word)) {
        return Some(Reason::LeadingKeyword(keyword_for_display(word)));
    }

    let found = prefilter(sql.as_bytes(), mode, ext, word);
    if !found.read {
        return None;
    }
    read_verdict(sql, mode, ext, found.names)
}

/// The verdict of the reader, past the leading keyword.
fn read_verdict(sql: &str, mode: Mode, ext: &ExtensionNames, names: bool) -> Option<Reason> {
    // The reader's tokens hold 32-bit offsets; no message can carry a longer text anyway.
    if u32::try_from(sql.len()).is_err() {
        return Some(Reason::TooDeep);
    }
    let refused = |schema: Option<&Name>, name: &Name, args: Option<u16>| {
        let listed = refused_function(name.as_bytes(), mode)
            .filter(|_| schema.is_none_or(|s| reaches_listed(s.as_bytes(), name.as_bytes())));
        listed.or_else(|| ext.refuses(schema, name, args))
    };
    // Names whose first byte and length no refused name has are not looked up at all.
    let may = |first: u8, len: usize| may_be_listed(first, len) || ext.may_name(first, len);
    let found = read(sql, &refused, &may, names, !ext.is_empty());

    // The rules in a fixed order, so the reason does not depend on where things occur.
    // A second statement would escape every other rule's context (and the extended protocol
    // refuses it anyway).
    if found.second_statement {
        return Some(Reason::MultipleStatements);
    }
    // Escapes in a U& identifier could spell any name.
    if found.escaped_name {
        return Some(Reason::UnicodeEscapedIdentifier);
    }
    if found.uescape {
        return Some(Reason::Uescape);
    }
    if found.too_deep {
        return Some(Reason::TooDeep);
    }
    if found.call.is_some() {
        return found.call;
    }
    if let Some(view) = found.view {
        return Some(Reason::SessionView(view));
    }
    if found.into.is_some() {
        return found.into;
    }
    found.pg_settings.then_some(Reason::UpdatePgSettings)
}

/// Whether the byte prefilter sends `sql` to the reader, and skips only what changes nothing,
/// and the reader's verdict regardless: the test that the prefilter never admits what the
/// reader refuses.
#[cfg(test)]
pub(super) fn prefilter_and_reader(
    sql: &str,
    mode: Mode,
    ext: &ExtensionNames,
) -> (bool, Option<Reason>) {
    let lead = Lexer::new(sql)
        .find(|t| t.kind != Kind::Open)
        .map_or("", |t| &sql[t.start()..t.end()]);
    let found = prefilter(sql.as_bytes(), mode, ext, lead);
    // The reader with every pass, whatever the prefilter said.
    let verdict = read_verdict(sql, mode, ext, true);
    // Skipping the calls' pass is sound only where no name was seen.
    let skipped = read_verdict(sql, mode, ext, found.names);
    (found.read && (found.names || skipped == verdict), verdict)
}

/// Tokens the reader looked at over `sql`, and how many tokens it has, for the test that
/// reading is linear.
#[cfg(test)]
pub(super) fn steps(sql: &str) -> (usize, usize) {
    let tokens = Lexer::new(sql).count();
    (
        read(sql, &|_, _, _| None, &|_, _| true, true, true).steps,
        tokens,
    )
}

/// What the byte prefilter found.
#[derive(Clone, Copy, Debug, Default)]
struct Prefilter {
    /// Some rule past the first could refuse the text: it must be read.
    read: bool,
    /// Some word may be a refused name (or an extension routine's): its calls must be looked
    /// up. Without one, the reader skips that pass.
    names: bool,
}

/// Whether any rule after the first could refuse `sql`, from its bytes alone: a call needs a
/// word that may be a refused name (checked by first byte and length, then by name), the INTO
/// rule the word INTO (beyond the one an INSERT or MERGE starts with), the UPDATE rule the
/// word `pg_settings`, a second statement a `;` with something after it, a `U&` construct
/// `u&`. Words inside literals and comments count too, which only sends a text to the reader.
/// A text with none of them is admitted without reading its structure, however deep it nests
/// (only what the reader reads can be too deep for it): one pass over its bytes, chunk by
/// chunk, and no allocation.
fn prefilter(b: &[u8], mode: Mode, ext: &ExtensionNames, lead: &str) -> Prefilter {
    // INSERT INTO and MERGE INTO: their own INTO is no SELECT's.
    let own_into = lead.eq_ignore_ascii_case("insert") || lead.eq_ignore_ascii_case("merge");
    let quotes = ext.has_unusual_names();
    let mut intos = 0u32;
    let mut empty_tail = false;
    let mut found = Prefilter::default();
    let mut word = |s: usize, found: &mut Prefilter| {
        let e = word_end(b, s);
        // The server cuts a longer name to its first 63 bytes, on a character's boundary.
        let len = kept_len(b, s, e);
        let first = b[s];
        let folded = first.to_ascii_lowercase();
        let listed = may_be_listed(first, len)
            || may_be_view(first, len)
            || (folded == b'i' && len == 4)
            || (folded == b'p' && len == 11);
        if !listed && !ext.may_name(first, len) {
            return;
        }
        let mut buf = [0u8; NAME_MAX];
        let lower = &mut buf[..len];
        lower.copy_from_slice(&b[s..s + len]);
        lower.make_ascii_lowercase();
        if lower == b"into" {
            intos += 1;
            found.read |= intos > u32::from(own_into);
        } else if lower == b"pg_settings" {
            found.read = true;
        } else if refused_function(lower, mode).is_some()
            || session_view(lower).is_some()
            || ext.may_call(lower)
        {
            found.read = true;
            found.names = true;
        }
    };
    if b.first().is_some_and(|&c| is_word_start(c)) {
        word(0, &mut found);
    }
    // Only words whose first letter some name has: a bit a letter, and whether a name starts
    // with `_` or a non-ASCII byte.
    let letters = FIRST_LETTERS | ext.first_letters();
    let others = ext.starts_otherwise();
    for_each_candidate(
        b,
        |c, next| {
            let letter = next.is_ascii_alphabetic()
                & ((letters >> ((next | 0x20).wrapping_sub(b'a') & 31)) & 1 != 0);
            (c == b';')
                | (c == b'&')
                | (quotes & (c == b'"'))
                // A word starts after any byte that cannot start one: a digit (`1lastval`
                // is a number and a name to the lexer) or `$` too.
                | (!is_word_start(c) & (letter | (others & ((next == b'_') | (next >= 0x80)))))
        },
        |i| {
            match b[i] {
                // A `;` matters when a statement follows it; `&` when it makes `U&` (`&&`,
                // `?&` are operators).
                // (Empty statements, `;;`, are nothing. The rest is looked at once: after a
                // `;` with only `;` and spaces after it, every later one has the same.)
                b';' if !found.read && !empty_tail => {
                    empty_tail = b[i + 1..].iter().all(|&c| is_space(c) || c == b';');
                    found.read = !empty_tail;
                }
                b'&' => found.read |= i > 0 && b[i - 1] | 0x20 == b'u',
                // A name that only a quoted spelling can write.
                b'"' if quotes => {
                    found.read = true;
                    found.names = true;
                }
                _ => {}
            }
            if b.get(i + 1).is_some_and(|&c| is_word_start(c)) {
                word(i + 1, &mut found);
            }
            // Once a name is seen there is nothing left to learn.
            !found.names
        },
    );
    found
}

/// The first letters of the refused names, INTO and `pg_settings`, a bit each (`a` is bit 0).
const FIRST_LETTERS: u32 = {
    let mut bits = (1 << (b'i' - b'a')) | (1 << (b'p' - b'a'));
    let mut i = 0;
    while i < FUNCTIONS.len() {
        bits |= 1 << (FUNCTIONS[i].0.as_bytes()[0] - b'a');
        i += 1;
    }
    bits
};

/// Lower-cased, at most 64 bytes (cut on a character boundary).
fn keyword_for_display(word: &str) -> String {
    let mut cut = word.len().min(64);
    while !word.is_char_boundary(cut) {
        cut -= 1;
    }
    word[..cut].to_ascii_lowercase()
}
