//! The reference masker: deliberately simple, char by char, written for obviousness rather than
//! speed. Besides the masked text it reports the class of every input char, which the rule
//! oracle tokenizes.

pub fn ref_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()
}

pub fn ref_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

pub fn ref_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
}

/// What the reference masker saw besides the masked text.
#[derive(Debug, Default, PartialEq)]
pub struct RefSeen {
    pub u_amp: bool,
    pub u_ident_escaped: bool,
}

#[derive(Clone, Copy)]
enum St {
    Code,
    LineComment,
    BlockComment(usize),
    Literal {
        escapes: bool,
    },
    /// After a literal's closing quote: whitespace and `--` comments, then maybe a glued segment.
    AfterLiteral {
        escapes: bool,
        newline: bool,
    },
    LineCommentAfterLiteral {
        escapes: bool,
        newline: bool,
    },
}

/// The reference masker's output and what it saw.
pub fn reference_mask(sql: &str) -> (String, RefSeen) {
    let (out, seen, _) = reference_mask_classes(sql);
    (out, seen)
}

/// What a char of the input was, as the reference masker read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cls {
    /// Visible code.
    Code,
    /// Inside a comment (masked; the rules treat it as whitespace).
    Comment,
    /// A string literal or dollar quote, or a quoted identifier that is not plain (masked).
    Hidden,
    /// The quotes (and `U&`) of a plain quoted identifier (masked).
    Mark,
    /// The body of a plain quoted identifier (kept).
    QuotedBody,
}

/// The masked text, what was seen, and the class of every char of `sql`.
pub fn reference_mask_classes(sql: &str) -> (String, RefSeen, Vec<Cls>) {
    let cs: Vec<char> = sql.chars().collect();
    let mut cls = vec![Cls::Code; cs.len()];
    let at = |i: usize| cs.get(i).copied();
    let before = |i: usize, k: usize| if i >= k { Some(cs[i - k]) } else { None };
    let not_ident = |c: Option<char>| c.is_none_or(|c| !ref_ident(c));
    let u_amp_before = |i: usize| {
        before(i, 1) == Some('&')
            && matches!(before(i, 2), Some('u' | 'U'))
            && not_ident(before(i, 3))
    };
    let mut out = String::new();
    let mut seen = RefSeen::default();
    let blank = |out: &mut String, c: char| {
        if c == '\n' || c == '\r' {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    };
    let mut st = St::Code;
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        match st {
            St::Code => {
                if c == '\'' {
                    seen.u_amp |= u_amp_before(i);
                    let escapes =
                        matches!(before(i, 1), Some('e' | 'E')) && not_ident(before(i, 2));
                    st = St::Literal { escapes };
                    blank(&mut out, c);
                    cls[i] = Cls::Hidden;
                    i += 1;
                } else if c == '"' {
                    // Find the closing quote ("" is a quote inside).
                    let mut j = i + 1;
                    let mut close = None;
                    while j < cs.len() {
                        if cs[j] == '"' && at(j + 1) == Some('"') {
                            j += 2;
                        } else if cs[j] == '"' {
                            close = Some(j);
                            break;
                        } else {
                            j += 1;
                        }
                    }
                    let u_amp = u_amp_before(i);
                    seen.u_amp |= u_amp;
                    let plain = close.is_some_and(|close| {
                        let body = &cs[i + 1..close];
                        !body.is_empty()
                            && (body[0].is_ascii_alphabetic() || body[0] == '_')
                            && body
                                .iter()
                                .all(|&b| b.is_ascii_alphanumeric() || b == '_' || b == '$')
                    });
                    let end = close.map_or(cs.len(), |c| c + 1);
                    if u_amp {
                        // The `U&` already written as code is masked with the quotes.
                        out.truncate(out.len() - 2);
                        out.push_str("  ");
                        let mark = if plain { Cls::Mark } else { Cls::Hidden };
                        cls[i - 2] = mark;
                        cls[i - 1] = mark;
                    }
                    if plain {
                        out.push(' ');
                        out.extend(&cs[i + 1..end - 1]);
                        out.push(' ');
                        cls[i] = Cls::Mark;
                        cls[end - 1] = Cls::Mark;
                        cls[i + 1..end - 1].fill(Cls::QuotedBody);
                    } else {
                        seen.u_ident_escaped |= u_amp;
                        for &b in &cs[i..end] {
                            blank(&mut out, b);
                        }
                        cls[i..end].fill(Cls::Hidden);
                    }
                    i = end;
                } else if c == '-' && at(i + 1) == Some('-') {
                    st = St::LineComment;
                } else if c == '/' && at(i + 1) == Some('*') {
                    st = St::BlockComment(0);
                } else if c == '$' && not_ident(before(i, 1)) {
                    // A tag: nothing, or a non-digit tag character then tag characters.
                    let mut j = i + 1;
                    if at(j).is_some_and(ref_word_start) {
                        while at(j).is_some_and(|t| ref_word_start(t) || t.is_ascii_digit()) {
                            j += 1;
                        }
                    }
                    if at(j) == Some('$') {
                        let delim: String = cs[i..=j].iter().collect();
                        let rest: String = cs[j + 1..].iter().collect();
                        let end = match rest.find(&delim) {
                            Some(p) => j + 1 + rest[..p].chars().count() + delim.chars().count(),
                            None => cs.len(),
                        };
                        for &b in &cs[i..end] {
                            blank(&mut out, b);
                        }
                        cls[i..end].fill(Cls::Hidden);
                        i = end;
                    } else {
                        out.push(c);
                        i += 1;
                    }
                } else {
                    out.push(c);
                    i += 1;
                }
            }
            St::LineComment => {
                if c == '\n' || c == '\r' {
                    st = St::Code;
                } else {
                    blank(&mut out, c);
                    cls[i] = Cls::Comment;
                    i += 1;
                }
            }
            St::BlockComment(depth) => {
                if c == '/' && at(i + 1) == Some('*') {
                    st = St::BlockComment(depth + 1);
                    out.push_str("  ");
                    cls[i] = Cls::Comment;
                    cls[i + 1] = Cls::Comment;
                    i += 2;
                } else if c == '*' && at(i + 1) == Some('/') {
                    st = if depth == 1 {
                        St::Code
                    } else {
                        St::BlockComment(depth - 1)
                    };
                    out.push_str("  ");
                    cls[i] = Cls::Comment;
                    cls[i + 1] = Cls::Comment;
                    i += 2;
                } else {
                    blank(&mut out, c);
                    cls[i] = Cls::Comment;
                    i += 1;
                }
            }
            St::Literal { escapes } => {
                cls[i] = Cls::Hidden;
                if escapes && c == '\\' {
                    blank(&mut out, c);
                    if let Some(n) = at(i + 1) {
                        blank(&mut out, n);
                        cls[i + 1] = Cls::Hidden;
                    }
                    i += 2;
                } else if c == '\'' && at(i + 1) == Some('\'') {
                    out.push_str("  ");
                    cls[i + 1] = Cls::Hidden;
                    i += 2;
                } else if c == '\'' {
                    blank(&mut out, c);
                    st = St::AfterLiteral {
                        escapes,
                        newline: false,
                    };
                    i += 1;
                } else {
                    blank(&mut out, c);
                    i += 1;
                }
            }
            St::AfterLiteral { escapes, newline } => {
                if c == '\n' || c == '\r' {
                    out.push(c);
                    st = St::AfterLiteral {
                        escapes,
                        newline: true,
                    };
                    i += 1;
                } else if ref_space(c) {
                    out.push(c);
                    i += 1;
                } else if c == '-' && at(i + 1) == Some('-') {
                    st = St::LineCommentAfterLiteral { escapes, newline };
                } else if c == '\'' && newline {
                    blank(&mut out, c);
                    cls[i] = Cls::Hidden;
                    st = St::Literal { escapes };
                    i += 1;
                } else {
                    st = St::Code; // look at `c` again as code
                }
            }
            St::LineCommentAfterLiteral { escapes, newline } => {
                if c == '\n' || c == '\r' {
                    st = St::AfterLiteral { escapes, newline };
                } else {
                    blank(&mut out, c);
                    cls[i] = Cls::Comment;
                    i += 1;
                }
            }
        }
    }
    (out, seen, cls)
}
