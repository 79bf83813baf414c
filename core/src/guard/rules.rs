//! The rules, applied to what the reader found. Each rule is written for a class of statements,
//! not for examples: `docs/GUARD.md` states every rule and the class it closes.

use super::lexer::{Kind, Lexer, Name};
use super::names::{refused_function, ExtensionNames};
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
    let word = &sql[first.start..first.end];
    if !LEADING.iter().any(|k| k.eq_ignore_ascii_case(word)) {
        return Some(Reason::LeadingKeyword(keyword_for_display(word)));
    }

    if !needs_reading(sql.as_bytes()) {
        return None;
    }
    let refused = |schema: Option<&Name>, name: &Name, args: Option<u16>| {
        refused_function(name.as_bytes(), mode).or_else(|| ext.refuses(schema, name, args))
    };
    let found = read(sql, &refused, !ext.is_empty());

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
    if found.into.is_some() {
        return found.into;
    }
    found.pg_settings.then_some(Reason::UpdatePgSettings)
}

/// Tokens the reader looked at over `sql`, and how many tokens it has, for the test that
/// reading is linear.
#[cfg(test)]
pub(super) fn steps(sql: &str) -> (usize, usize) {
    let tokens = Lexer::new(sql).count();
    (read(sql, &|_, _, _| None, true).steps, tokens)
}

/// Whether any rule after the first could refuse `sql`: a call needs `(` or `.`, a second
/// statement `;`, a `U&` construct `&`, the INTO rule the word INTO and the UPDATE rule the
/// name `pg_settings` (a quoted spelling of it holds the same letters). A text with none of
/// them is admitted without reading its structure, which costs one pass and no allocation.
fn needs_reading(b: &[u8]) -> bool {
    if b.iter().any(|c| matches!(c, b'(' | b'.' | b';' | b'&')) {
        return true;
    }
    let has = |word: &[u8]| b.windows(word.len()).any(|w| w.eq_ignore_ascii_case(word));
    has(b"into") || has(b"pg_settings")
}

/// Lower-cased, at most 64 bytes (cut on a character boundary).
fn keyword_for_display(word: &str) -> String {
    let mut cut = word.len().min(64);
    while !word.is_char_boundary(cut) {
        cut -= 1;
    }
    word[..cut].to_ascii_lowercase()
}
