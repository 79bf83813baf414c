//! PostgreSQL's lexer, as far as the guard needs it: the text as tokens, the way the server's
//! `scan.l` cuts it (PostgreSQL 15, `standard_conforming_strings` on), in one pass over the
//! bytes. Whitespace and comments (`--`, nested `/* */`) separate tokens; literals
//! (`'...'`, `E'...'` with backslash escapes, `B'`, `X'`, `N'`, `U&'`, glued segments,
//! `$tag$...$tag$`) are one token each, whatever they hold; a quoted identifier (`"..."`,
//! `U&"..."`) is one name. A construct left open runs to the end of the text (the server
//! rejects it, so nothing in it runs).
//!
//! Names are compared as the server resolves them: an unquoted one folded to lower case (ASCII
//! only, as for UTF-8 databases), a quoted one exactly, each cut to 63 bytes on a character
//! boundary (`NAMEDATALEN`).

use super::lex::{
    block_comment_end, continuation, dollar_tag_end, is_ident, is_space, is_word_start, line_end,
};

/// The longest name the server keeps (`NAMEDATALEN - 1`); longer ones are cut.
pub(super) const NAME_MAX: usize = 63;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An unquoted identifier or keyword.
    Word,
    /// A quoted identifier (`"..."`, or `U&"..."` without escapes): a name, exactly.
    Quoted,
    /// `U&"..."` whose body holds its escape character: escapes could spell any name.
    Escaped,
    /// A string constant of any form, or a dollar-quoted one.
    Literal,
    /// A number.
    Number,
    /// `$1`, `$2`, ...
    Param,
    /// An operator (`+`, `<>`, `->>`, ...), or one of `:`, `=>`, `:=`.
    Op,
    /// `::`
    Cast,
    /// `(`
    Open,
    /// `)`
    Close,
    /// `[`
    OpenBracket,
    /// `]`
    CloseBracket,
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// `.`
    Dot,
}

/// A token: its kind and where it is in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub(super) kind: Kind,
    /// Where it starts and ends, as `u32`: twelve bytes a token, since a long statement is read
    /// as a vector of them (a text past 4 GiB is never read: no message can carry it).
    lo: u32,
    hi: u32,
}

impl Token {
    pub(super) fn new(kind: Kind, start: usize, end: usize) -> Token {
        Token {
            kind,
            lo: start as u32,
            hi: end as u32,
        }
    }

    /// Where it starts in the text.
    #[inline]
    pub(super) fn start(self) -> usize {
        self.lo as usize
    }

    /// Where it ends in the text.
    #[inline]
    pub(super) fn end(self) -> usize {
        self.hi as usize
    }
}

/// The tokens of a text, in order. Iterating costs a bounded amount per byte: no construct is
/// read twice.
pub(super) struct Lexer<'a> {
    b: &'a [u8],
    at: usize,
    /// A `U&` literal or identifier was read.
    pub(super) u_amp: bool,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(sql: &'a str) -> Lexer<'a> {
        Lexer {
            b: sql.as_bytes(),
            at: 0,
            u_amp: false,
        }
    }

    /// Skips whitespace and comments.
    fn skip_blank(&mut self) {
        let b = self.b;
        // Most tokens follow one space.
        if b.get(self.at) == Some(&b' ') {
            self.at += 1;
        }
        loop {
            match (b.get(self.at), b.get(self.at + 1)) {
                (Some(&c), _) if is_space(c) => self.at += 1,
                (Some(b'-'), Some(b'-')) => self.at = line_end(b, self.at),
                (Some(b'/'), Some(b'*')) => self.at = block_comment_end(b, self.at),
                _ => return,
            }
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.skip_blank();
        let b = self.b;
        let start = self.at;
        let c = *b.get(start)?;
        let next = b.get(start + 1).copied();
        let (kind, end) = match c {
            b'(' => (Kind::Open, start + 1),
            b')' => (Kind::Close, start + 1),
            b'[' => (Kind::OpenBracket, start + 1),
            b']' => (Kind::CloseBracket, start + 1),
            b',' => (Kind::Comma, start + 1),
            b';' => (Kind::Semicolon, start + 1),
            b':' if next == Some(b':') => (Kind::Cast, start + 2),
            b':' if next == Some(b'=') => (Kind::Op, start + 2),
            b':' => (Kind::Op, start + 1),
            b'.' if next.is_some_and(|d| d.is_ascii_digit()) => {
                (Kind::Number, number_end(b, start))
            }
            b'.' if next == Some(b'.') => (Kind::Op, start + 2),
            b'.' => (Kind::Dot, start + 1),
            b'\'' => (Kind::Literal, literal_end(b, start, false)),
            b'"' => (Kind::Quoted, quoted_end(b, start)),
            b'$' => match dollar_tag_end(b, start) {
                Some(open_end) => (Kind::Literal, dollar_body_end(b, start, open_end)),
                None => match b[start + 1..]
                    .iter()
                    .take_while(|d| d.is_ascii_digit())
                    .count()
                {
                    0 => (Kind::Op, start + 1),
                    n => (Kind::Param, start + 1 + n),
                },
            },
            c if c.is_ascii_digit() => (Kind::Number, number_end(b, start)),
            c if is_word_start(c) => self.word_or_prefixed(start),
            _ => (Kind::Op, operator_end(b, start)),
        };
        self.at = end;
        Some(Token::new(kind, start, end))
    }
}

impl Lexer<'_> {
    /// A word, or a literal or name that a word-like prefix opens: `E'`, `B'`, `X'`, `N'`,
    /// `U&'`, `U&"`. The prefix counts only where it starts the token.
    fn word_or_prefixed(&mut self, start: usize) -> (Kind, usize) {
        let b = self.b;
        let c = b[start] | 0x20;
        let next = b.get(start + 1).copied();
        match (c, next) {
            (b'e', Some(b'\'')) => (Kind::Literal, literal_end(b, start + 1, true)),
            (b'b' | b'x' | b'n', Some(b'\'')) => (Kind::Literal, literal_end(b, start + 1, false)),
            (b'u', Some(b'&')) if b.get(start + 2) == Some(&b'\'') => {
                self.u_amp = true;
                (Kind::Literal, literal_end(b, start + 2, false))
            }
            (b'u', Some(b'&')) if b.get(start + 2) == Some(&b'"') => {
                self.u_amp = true;
                let end = quoted_end(b, start + 2);
                // The default escape is `\`; UESCAPE may name another, which the rules refuse.
                let body = &b[start + 3..end.saturating_sub(1).max(start + 3)];
                match body.contains(&b'\\') {
                    true => (Kind::Escaped, end),
                    false => (Kind::Quoted, end),
                }
            }
            _ => {
                let mut end = start + 1;
                while b.get(end).is_some_and(|&c| is_ident(c)) {
                    end += 1;
                }
                (Kind::Word, end)
            }
        }
    }
}

/// End of a number starting at `i`: digits, a fraction, an exponent (`1`, `1.5`, `.5`, `1e-3`).
/// What may stick to it (`1x`, trailing junk) is an error on PostgreSQL 15; reading it as a
/// separate token only keeps tokens the server would reject anyway.
fn number_end(b: &[u8], i: usize) -> usize {
    let digits = |j: usize| j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut j = digits(i);
    // `1..2` is `1` and `..`; `1.` is a number.
    if b.get(j) == Some(&b'.') && b.get(j + 1) != Some(&b'.') {
        j = digits(j + 1);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if b.get(k).is_some_and(|c| c.is_ascii_digit()) {
            j = digits(k);
        }
    }
    j
}

/// Whether `c` is one of the server's operator characters, `~!@#^&|`?+-*/%<>=`.
#[inline]
fn is_op(c: u8) -> bool {
    static OP: [bool; 256] = {
        let mut table = [false; 256];
        let chars = b"~!@#^&|`?+-*/%<>=";
        let mut k = 0;
        while k < chars.len() {
            table[chars[k] as usize] = true;
            k += 1;
        }
        table
    };
    OP[c as usize]
}

/// End of an operator starting at `i`: a run of operator characters, cut before a comment
/// (`+--` is `+` and a comment) as the server cuts it.
fn operator_end(b: &[u8], i: usize) -> usize {
    if !is_op(b[i]) {
        // Anything else (a byte the server rejects, such as `\\` or `{`) is a token of its
        // own. Every byte of a multibyte character starts or continues a word, never this.
        return i + 1;
    }
    let mut j = i + 1;
    while let Some(&c) = b.get(j) {
        if !is_op(c) || (c == b'-' && b.get(j + 1) == Some(&b'-')) {
            break;
        }
        if c == b'/' && b.get(j + 1) == Some(&b'*') {
            break;
        }
        j += 1;
    }
    j
}

/// End of a quoted identifier opening at `b[i] == '"'` (after its closing quote, or the end of
/// the text); `""` is a quote inside it.
fn quoted_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match (b[j], b.get(j + 1)) {
            (b'"', Some(b'"')) => j += 2,
            (b'"', _) => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// End of a string literal whose opening quote is at `b[open]`, glued segments included: a
/// literal continues after whitespace with a newline (and `--` comments) and another quote,
/// in the same escape mode. `escapes`: an `E'...'` literal, where `\` escapes the next byte.
fn literal_end(b: &[u8], open: usize, escapes: bool) -> usize {
    let mut q = open;
    loop {
        let mut j = q + 1;
        let end = loop {
            match b.get(j) {
                None => return b.len(),
                Some(b'\\') if escapes => j += 2,
                Some(b'\'') if b.get(j + 1) == Some(&b'\'') => j += 2,
                Some(b'\'') => break j + 1,
                Some(_) => j += 1,
            }
        };
        match continuation(b, end) {
            Some(next) => q = next,
            None => return end,
        }
    }
}

/// End of the dollar quote whose delimiter is `b[start..open_end]`: after its closing
/// delimiter, or the end of the text. Found with the failure function of the delimiter
/// (Knuth–Morris–Pratt), so a body full of near-delimiters costs no more than its length.
fn dollar_body_end(b: &[u8], start: usize, open_end: usize) -> usize {
    let delim = &b[start..open_end];
    if delim.len() == 2 {
        // `$$`: the next `$$`.
        let mut j = open_end;
        while j + 1 < b.len() {
            if b[j] == b'$' && b[j + 1] == b'$' {
                return j + 2;
            }
            j += 1;
        }
        return b.len();
    }
    let mut fail = vec![0usize; delim.len()];
    let mut k = 0;
    for i in 1..delim.len() {
        while k > 0 && delim[i] != delim[k] {
            k = fail[k - 1];
        }
        if delim[i] == delim[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut k = 0;
    for (j, &c) in b.iter().enumerate().skip(open_end) {
        while k > 0 && c != delim[k] {
            k = fail[k - 1];
        }
        if c == delim[k] {
            k += 1;
            if k == delim.len() {
                return j + 1;
            }
        }
    }
    b.len()
}

/// The length the server keeps of the unquoted name `b[s..e]`: all of it, or its first 63 bytes
/// cut back to a character's boundary.
pub(super) fn kept_len(b: &[u8], s: usize, e: usize) -> usize {
    let mut len = (e - s).min(NAME_MAX);
    if len < e - s {
        while len > 0 && b[s + len] & 0xC0 == 0x80 {
            len -= 1;
        }
    }
    len
}

/// A name as the server keeps it: folded (unquoted) or unescaped (quoted), cut to
/// [`NAME_MAX`] bytes on a character boundary. Held inline: reading one allocates nothing.
#[derive(Clone, Copy)]
pub(super) struct Name {
    bytes: [u8; NAME_MAX],
    len: u8,
}

impl Name {
    /// The name token `t` of `sql` stands for (a word or a quoted identifier).
    pub(super) fn of(sql: &[u8], t: Token) -> Name {
        let mut n = Name {
            bytes: [0; NAME_MAX],
            len: 0,
        };
        // The source bytes, quotes doubled inside a quoted name read as one.
        let (quoted, from, to) = match t.kind {
            Kind::Quoted | Kind::Escaped => {
                let open = if sql[t.start()] == b'"' {
                    t.start()
                } else {
                    t.start() + 2
                };
                // An unterminated one runs to the end.
                let closed = t.end() > open + 1 && sql[t.end() - 1] == b'"';
                (true, open + 1, if closed { t.end() - 1 } else { t.end() })
            }
            _ => (false, t.start(), t.end()),
        };
        let mut j = from;
        while j < to {
            let c = sql[j];
            // Whole characters only: one that would pass the limit ends the name.
            let width = match c {
                0xF0..=0xF7 => 4,
                0xE0..=0xEF => 3,
                0xC0..=0xDF => 2,
                _ => 1,
            };
            let len = usize::from(n.len);
            if len + width > NAME_MAX || j + width > to {
                break;
            }
            for k in 0..width {
                n.bytes[len + k] = if quoted {
                    sql[j + k]
                } else {
                    sql[j + k].to_ascii_lowercase()
                };
            }
            n.len += width as u8;
            j += if quoted && c == b'"' { 2 } else { width };
        }
        n
    }

    /// The name's bytes.
    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Whether it is `word` (lower case ASCII).
    pub(super) fn is(&self, word: &str) -> bool {
        self.as_bytes() == word.as_bytes()
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(Kind, &str)> {
        Lexer::new(sql)
            .map(|t| (t.kind, &sql[t.start()..t.end()]))
            .collect()
    }

    #[test]
    fn tokens_as_the_server_cuts_them() {
        use Kind::*;
        assert_eq!(
            kinds("SELECT a.b::int8[] FROM t WHERE x <> $1 -- c\n AND y IN (1, 2.5e3);"),
            [
                (Word, "SELECT"),
                (Word, "a"),
                (Dot, "."),
                (Word, "b"),
                (Cast, "::"),
                (Word, "int8"),
                (OpenBracket, "["),
                (CloseBracket, "]"),
                (Word, "FROM"),
                (Word, "t"),
                (Word, "WHERE"),
                (Word, "x"),
                (Op, "<>"),
                (Param, "$1"),
                (Word, "AND"),
                (Word, "y"),
                (Word, "IN"),
                (Open, "("),
                (Number, "1"),
                (Comma, ","),
                (Number, "2.5e3"),
                (Close, ")"),
                (Semicolon, ";"),
            ]
        );
        // Literals of every form are one token, what they hold included.
        assert_eq!(
            kinds("'a''b' E'c\\'d' B'01' X'ff' N'n' U&'x' $$ $1 ) $$ $q$ $$ $q$ 'e'\n'f'"),
            [
                (Literal, "'a''b'"),
                (Literal, "E'c\\'d'"),
                (Literal, "B'01'"),
                (Literal, "X'ff'"),
                (Literal, "N'n'"),
                (Literal, "U&'x'"),
                (Literal, "$$ $1 ) $$"),
                (Literal, "$q$ $$ $q$"),
                (Literal, "'e'\n'f'"),
            ]
        );
        // With standard_conforming_strings a backslash is plain text; in an identifier an E
        // is a letter, and `$` belongs to it.
        assert_eq!(kinds("'a\\' x"), [(Literal, "'a\\'"), (Word, "x")]);
        assert_eq!(kinds("typeE'x'"), [(Word, "typeE"), (Literal, "'x'")]);
        assert_eq!(kinds("a$b$ c"), [(Word, "a$b$"), (Word, "c")]);
        // Comments nest; an operator ends where a comment starts.
        assert_eq!(kinds("/* /* */ x */ y +-- z"), [(Word, "y"), (Op, "+")]);
        assert_eq!(kinds("1. lastval"), [(Number, "1."), (Word, "lastval")]);
        assert_eq!(kinds("1..2"), [(Number, "1"), (Op, ".."), (Number, "2")]);
        // Left open: to the end.
        assert_eq!(kinds("'abc"), [(Literal, "'abc")]);
        assert_eq!(kinds("\"ab"), [(Quoted, "\"ab")]);
        assert_eq!(kinds("x /* open"), [(Word, "x")]);
    }

    #[test]
    fn names_fold_unquote_and_cut_like_the_server() {
        let name = |sql: &str| {
            let t = Lexer::new(sql).next().unwrap();
            String::from_utf8(Name::of(sql.as_bytes(), t).as_bytes().to_vec()).unwrap()
        };
        assert_eq!(name("Set_Config"), "set_config");
        assert_eq!(name("\"Set_Config\""), "Set_Config");
        assert_eq!(name("\"a\"\"b\""), "a\"b");
        assert_eq!(name("U&\"set_config\""), "set_config");
        assert_eq!(name("ÉTÉ"), "ÉtÉ", "only ASCII folds");
        let long = "x".repeat(70);
        assert_eq!(name(&long), "x".repeat(63));
        // A two-byte character straddling byte 63 is dropped whole.
        let straddle = format!("{}é", "y".repeat(62));
        assert_eq!(name(&straddle), "y".repeat(62));
        let fits = format!("{}é", "y".repeat(61));
        assert_eq!(name(&fits), fits);
    }

    #[test]
    fn escaped_unicode_names_are_told_apart() {
        let k = kinds("U&\"\\0073et_config\" U&\"plain\"");
        assert_eq!(k[0].0, Kind::Escaped);
        assert_eq!(k[1].0, Kind::Quoted);
    }

    #[test]
    fn a_dollar_body_full_of_near_delimiters_is_read_once() {
        let tag = "$abcdefgh$";
        let body = "$abcdefg".repeat(10_000);
        let sql = format!("{tag}{body}{tag} x");
        assert_eq!(
            kinds(&sql),
            [(Kind::Literal, &sql[..sql.len() - 2]), (Kind::Word, "x")]
        );
    }
}
