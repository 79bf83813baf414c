//! Masking: literals, quoted identifiers, comments and dollar quotes become spaces, so text
//! inside them can neither trigger a rule nor hide from one. `docs/GUARD.md` has the table of
//! constructs and why each is masked the way it is.

use std::borrow::Cow;

use super::lex::{
    block_comment_end, continuation, dollar_tag_end, for_each_candidate, is_ident, line_end,
    may_open_dollar,
};

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

/// What masking saw that the rules need and the masked text no longer shows.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Seen {
    /// A `U&'...'` literal or `U&"..."` identifier.
    pub(super) u_amp: bool,
    /// A `U&"..."` identifier whose body is not a plain identifier.
    pub(super) u_ident_escaped: bool,
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

/// The masked text and what masking saw; borrows `sql` on the fast path.
pub(super) fn mask_and_see(sql: &str) -> (Cow<'_, str>, Seen) {
    if needs_masking(sql) {
        Masker::new(sql).run()
    } else {
        (Cow::Borrowed(sql), Seen::default())
    }
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
