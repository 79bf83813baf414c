//! The rule oracle, written independently of `pgpipe::guard`: the reference masker (char by
//! char) classifies every char, a tokenizer turns the code into words and punctuation, and two
//! one-sided judgements are made from tokens alone, without the grammar:
//! - what must be refused: a refused name followed by `(` where no exception of the grammar can
//!   apply (the token before it is none of `AS`, `WITH`, `RECURSIVE`, `,`, `INTO`, `.`, `::`,
//!   a name or `)`), `(expr).name`, an UPDATE of `pg_settings`, a second statement, escapes in
//!   a `U&` name, UESCAPE, a first word that is no shared-path statement;
//! - what must be admitted: a statement holding none of the refused names, nor INTO,
//!   `pg_settings`, `pg_temp`, `U&`, a second statement or deep nesting.
//!
//! Between the two lies what only the grammar decides (is this `name (` a CTE's head, an
//! alias's column list, a type's modifiers?); the server oracle in `guard_server.rs` judges
//! those on a real server.

#![allow(dead_code)] // each test binary uses a different part

mod mask;

#[allow(unused_imports)] // guard_classes.rs does not use the masker directly
pub use mask::{ref_ident, ref_space, ref_word_start, reference_mask, reference_mask_classes, Cls};
use pgpipe::guard::{Mode, Reason};

/// Functions whose effect stays in the session (or that read what another caller left there).
pub const SESSION_FUNCTIONS: &[&str] = &[
    // settings: set_config; pg_trgm's similarity threshold; sepgsql's security label; isn's
    // weak mode (isn_weak is declared IMMUTABLE, and sets it)
    "set_config",
    "set_limit",
    "isn_weak",
    "sepgsql_setcon",
    // the session's random() seed and sequence state
    "setseed",
    "currval",
    "lastval",
    // session-level advisory locks
    "pg_advisory_lock",
    "pg_try_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_try_advisory_lock_shared",
    "pg_advisory_unlock",
    "pg_advisory_unlock_shared",
    "pg_advisory_unlock_all",
    // postgres_fdw: the per-backend connection cache
    "postgres_fdw_disconnect",
    "postgres_fdw_disconnect_all",
    "postgres_fdw_get_connections",
    // dblink's named connections, cursors and asynchronous queries
    "dblink_connect",
    "dblink_connect_u",
    "dblink_disconnect",
    "dblink_open",
    "dblink_fetch",
    "dblink_close",
    "dblink_send_query",
    "dblink_get_result",
    "dblink_is_busy",
    "dblink_cancel_query",
    "dblink_get_notify",
    "dblink_error_message",
    "dblink_get_connections",
    // large-object descriptors
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
    // replication origin of the session; temporary replication slots
    "pg_replication_origin_session_setup",
    "pg_replication_origin_session_reset",
    "pg_replication_origin_session_is_setup",
    "pg_replication_origin_session_progress",
    "pg_replication_origin_xact_setup",
    "pg_replication_origin_xact_reset",
    "pg_create_physical_replication_slot",
    "pg_create_logical_replication_slot",
    "pg_copy_physical_replication_slot",
    "pg_copy_logical_replication_slot",
    // a backup started in the session belongs to it
    "pg_backup_start",
    "pg_backup_stop",
    "pg_start_backup",
    "pg_stop_backup",
    // session cursors
    "cursor_to_xml",
    "cursor_to_xmlschema",
];

/// Built-ins that run SQL given as text.
pub const SQL_TEXT_FUNCTIONS: &[&str] = &[
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "ts_stat",
    "ts_rewrite",
    "crosstab",
    "crosstab2",
    "crosstab3",
    "crosstab4",
    "connectby",
    "xpath_table",
];

/// Refused only in strict mode.
pub const STRICT_ONLY: &[&str] = &["nextval", "setval", "pg_export_snapshot"];

/// Keywords that can never be a table's name (reserved, and type-or-function-name keywords).
const NOT_A_TABLE_NAME: &str = "all analyse analyze and any array as asc asymmetric both case \
    cast check collate column constraint create current_catalog current_date current_role \
    current_time current_timestamp current_user default deferrable desc distinct do else end \
    except false fetch for foreign from grant group having in initially intersect into lateral \
    leading limit localtime localtimestamp not null offset on only or order placing primary \
    references returning select session_user some symmetric table then to trailing true union \
    unique user using variadic when where window with authorization binary collation \
    concurrently cross current_schema freeze full ilike inner is isnull join left like natural \
    notnull outer overlaps right similar tablesample verbose";

/// What the oracle says `name` (lower case) costs when called.
pub fn refusal_for(name: &str, mode: Mode) -> Option<Reason> {
    let canonical = |list: &[&'static str]| list.iter().copied().find(|&f| f == name);
    if let Some(f) = canonical(SESSION_FUNCTIONS) {
        return Some(Reason::ForbiddenCall(f));
    }
    if let Some(f) = canonical(SQL_TEXT_FUNCTIONS) {
        return Some(Reason::SqlTextCall(f));
    }
    match mode {
        Mode::Strict => canonical(STRICT_ONLY).map(Reason::ForbiddenCall),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// An identifier or keyword: its text as written, and whether it was a quoted identifier.
    Word {
        text: String,
        quoted: bool,
    },
    Punct(char),
    /// A literal, dollar quote or non-plain quoted identifier: masked, so invisible to every
    /// rule except that it is *something* (after INTO TEMP it can only be a name).
    Hidden,
    /// A non-plain quoted identifier alone (`"a b"`): masked like [`Tok::Hidden`], but a
    /// column list may hold it.
    HiddenName,
}

impl Tok {
    fn word(&self) -> Option<String> {
        match self {
            Tok::Word { text, .. } => Some(text.to_ascii_lowercase()),
            _ => None,
        }
    }
    fn is(&self, w: &str) -> bool {
        self.word().is_some_and(|x| x == w)
    }
    fn starts_word(&self) -> bool {
        matches!(self, Tok::Word { text, .. } if text.chars().next().is_some_and(ref_word_start))
    }
    fn quoted(&self) -> bool {
        matches!(self, Tok::Word { quoted: true, .. })
    }
    fn hidden(&self) -> bool {
        matches!(self, Tok::Hidden | Tok::HiddenName)
    }
}

/// Tokens of `sql` with the char range each covers.
pub fn tokenize_spans(sql: &str) -> (Vec<(Tok, usize, usize)>, mask::RefSeen) {
    let (_, seen, cls) = reference_mask_classes(sql);
    let cs: Vec<char> = sql.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let s = i;
        match cls[i] {
            Cls::Comment | Cls::Mark => i += 1,
            Cls::Hidden => {
                while i < cs.len() && cls[i] == Cls::Hidden {
                    i += 1;
                }
                let name = cs[s] == '"' && i - s >= 2 && cs[i - 1] == '"';
                let tok = if name { Tok::HiddenName } else { Tok::Hidden };
                toks.push((tok, s, i));
            }
            Cls::QuotedBody => {
                while i < cs.len() && cls[i] == Cls::QuotedBody {
                    i += 1;
                }
                let text = cs[s..i].iter().collect();
                toks.push((Tok::Word { text, quoted: true }, s, i));
            }
            Cls::Code if ref_space(cs[i]) => i += 1,
            Cls::Code if ref_ident(cs[i]) => {
                while i < cs.len() && cls[i] == Cls::Code && ref_ident(cs[i]) {
                    i += 1;
                }
                let text = cs[s..i].iter().collect();
                toks.push((
                    Tok::Word {
                        text,
                        quoted: false,
                    },
                    s,
                    i,
                ));
            }
            Cls::Code => {
                toks.push((Tok::Punct(cs[i]), s, i + 1));
                i += 1;
            }
        }
    }
    (toks, seen)
}

/// Tokens of `sql` and what the masker saw.
pub fn tokenize(sql: &str) -> (Vec<Tok>, mask::RefSeen) {
    let (toks, seen) = tokenize_spans(sql);
    (toks.into_iter().map(|t| t.0).collect(), seen)
}

/// What the oracle says of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Refused for this very reason (the rules' order decides between several).
    Refuse(Reason),
    /// Refused, for whichever reason comes first.
    RefuseAny(String),
    /// Admitted.
    Admit,
    /// Only the grammar decides.
    Either,
}

impl Expect {
    /// Whether the guard's verdict `got` fits.
    pub fn fits(&self, got: &Option<Reason>) -> bool {
        match self {
            Expect::Refuse(r) => got.as_ref() == Some(r),
            Expect::RefuseAny(_) => got.is_some(),
            Expect::Admit => got.is_none(),
            Expect::Either => true,
        }
    }

    /// A short label, for counts.
    pub fn label(&self) -> String {
        match self {
            Expect::Refuse(r) => format!("{r:?}")
                .split('(')
                .next()
                .unwrap_or_default()
                .to_owned(),
            Expect::RefuseAny(why) => why.clone(),
            Expect::Admit => "admit".to_owned(),
            Expect::Either => "grammar".to_owned(),
        }
    }
}

/// The name a word token stands for: folded if unquoted, exact if quoted.
fn name_of(t: &Tok) -> Option<String> {
    match t {
        Tok::Word {
            text,
            quoted: false,
        } => Some(text.to_ascii_lowercase()),
        Tok::Word { text, quoted: true } => Some(text.clone()),
        _ => None,
    }
}

/// The oracle's judgement of `sql`.
pub fn expectation(sql: &str, mode: Mode) -> Expect {
    let (spans, seen) = tokenize_spans(sql);
    let all: Vec<Tok> = spans.iter().map(|t| t.0.clone()).collect();
    let vis: Vec<Tok> = all.iter().filter(|t| !t.hidden()).cloned().collect();

    // Leading keyword, after any opening parentheses; a quoted name, a literal or a word that
    // prefixes one (`E'`, `U&'`) is no keyword.
    let Some(f) = spans.iter().position(|t| t.0 != Tok::Punct('(')) else {
        return Expect::Refuse(Reason::Empty);
    };
    let chars: Vec<char> = sql.chars().collect();
    // Token `k`, when it starts right where the one before ends.
    let glued = |k: usize| spans.get(k).filter(|t| t.1 == spans[k - 1].2);
    let quote = |t: &(Tok, usize, usize)| t.0.hidden() && matches!(chars[t.1], '\'' | '"');
    let prefix = match (spans[f].0.word().as_deref(), glued(f + 1), glued(f + 2)) {
        (Some("e" | "b" | "x" | "n"), Some(t), _) => quote(t) && chars[t.1] == '\'',
        (Some("u"), Some(amp), Some(t)) => amp.0 == Tok::Punct('&') && quote(t),
        _ => false,
    };
    let first = &spans[f].0;
    if !first.starts_word() || first.quoted() || prefix {
        return Expect::Refuse(Reason::Empty);
    }
    let lead = first.word().unwrap_or_default();
    if ![
        "select", "insert", "update", "delete", "merge", "values", "with", "table",
    ]
    .contains(&lead.as_str())
    {
        let mut cut = lead.len().min(64);
        while !lead.is_char_boundary(cut) {
            cut -= 1;
        }
        return Expect::Refuse(Reason::LeadingKeyword(lead[..cut].to_owned()));
    }

    // A visible `$` that neither continues a word (`a$b`) nor opens a parameter (`$1`): the
    // reference masker (like `mask`) reads it as part of a word, where the server's lexer
    // starts a dollar quote (`1$$;$$`) or a token of its own (`$E';'`). The server rejects
    // such a text either way; only a reader as faithful as the server's judges it.
    let code = &chars;
    let (_, _, cls) = reference_mask_classes(sql);
    let word_dollar = |i: usize| {
        let mut s = i;
        while s > 0 && cls[s - 1] == Cls::Code && ref_ident(code[s - 1]) {
            s -= 1;
        }
        if s < i {
            ref_word_start(code[s])
        } else {
            code.get(i + 1).is_some_and(|c| c.is_ascii_digit())
        }
    };
    // And a word glued to a dollar quote's end (`$$$$E';'`): the server starts a token there.
    let after_dollar_quote =
        |i: usize| i > 0 && cls[i - 1] == Cls::Hidden && code[i - 1] == '$' && ref_ident(code[i]);
    if (0..code.len()).any(|i| {
        cls[i] == Cls::Code && ((code[i] == '$' && !word_dollar(i)) || after_dollar_quote(i))
    }) {
        return Expect::Either;
    }

    // `1lastval`, `0E'x'`, `$1U&"`: the server (15) rejects letters glued to a number or a
    // parameter as trailing junk;
    // the reference reads one word, the guard's lexer a number and what follows. Nothing runs.
    let junk = all.iter().any(|t| {
        matches!(t, Tok::Word { text, quoted: false }
            if text.trim_start_matches('$').starts_with(|c: char| c.is_ascii_digit())
                && text.contains(|c: char| c.is_ascii_alphabetic()))
    });
    if junk {
        return Expect::Either;
    }

    // One statement: any token but `;` (an empty statement) after the first `;` is a second.
    if let Some(s) = all.iter().position(|t| *t == Tok::Punct(';')) {
        if all[s + 1..].iter().any(|t| *t != Tok::Punct(';')) {
            return Expect::Refuse(Reason::MultipleStatements);
        }
    }
    let vis = match vis.iter().position(|t| *t == Tok::Punct(';')) {
        Some(s) => &vis[..s],
        None => &vis[..],
    };
    // The reference masker hides every U& name that is not plain, escaped or not (`U&"a b"`
    // is the name `a b`, `U&"\0061"` an escape): only the names' text tells them apart.
    if seen.u_ident_escaped {
        return Expect::Either;
    }
    if seen.u_amp && vis.iter().any(|t| t.is("uescape") && !t.quoted()) {
        return Expect::Refuse(Reason::Uescape);
    }

    let refused = |t: &Tok| name_of(t).and_then(|n| refusal_for(&n, mode));
    // Calls no exception of the grammar can cover (every token counts here: a literal or a
    // quoted name between a name and `(` is a token like any other).
    let upto = all
        .iter()
        .position(|t| *t == Tok::Punct(';'))
        .unwrap_or(all.len());
    let toks = &all[..upto];
    for k in 0..toks.len() {
        if toks[k] != Tok::Punct('(') || k == 0 || refused(&toks[k - 1]).is_none() {
            continue;
        }
        let before = k.checked_sub(2).map(|j| &toks[j]);
        let exception_possible = match before {
            None => false,
            Some(Tok::Punct(c)) => matches!(c, ',' | '.' | ':' | ')'),
            Some(Tok::HiddenName) => true,
            // A reserved keyword is never an alias: only AS, WITH and INTO open a place
            // where a name before `(` may be no call.
            Some(t) if !t.quoted() => t.word().is_some_and(|w| {
                matches!(w.as_str(), "as" | "with" | "into")
                    || !NOT_A_TABLE_NAME.split_whitespace().any(|r| r == w)
            }),
            Some(t) => t.word().is_some(),
        };
        if !exception_possible {
            return Expect::RefuseAny(format!("call after {before:?}"));
        }
    }
    // `(expr).name`: never a relation, always a call or a field.
    for k in 2..toks.len() {
        if toks[k - 2] == Tok::Punct(')')
            && toks[k - 1] == Tok::Punct('.')
            && refused(&toks[k]).is_some()
        {
            return Expect::RefuseAny("attribute call".to_owned());
        }
    }
    // A statement `UPDATE [ONLY] [(] [q .]* pg_settings` (where else UPDATE may start a
    // statement is the grammar's to say).
    if let Some(k) = toks
        .iter()
        .position(|t| *t != Tok::Punct('('))
        .filter(|&k| toks[k].is("update"))
    {
        let mut j = k + 1;
        if toks.get(j).is_some_and(|t| t.is("only")) {
            j += 1;
        }
        if toks.get(j) == Some(&Tok::Punct('(')) {
            j += 1;
        }
        let part = |t: &Tok| t.word().is_some() || *t == Tok::HiddenName;
        while toks.get(j).is_some_and(part) && toks.get(j + 1) == Some(&Tok::Punct('.')) {
            j += 2;
        }
        if toks
            .get(j)
            .and_then(name_of)
            .is_some_and(|n| n == "pg_settings")
        {
            return Expect::RefuseAny("update of pg_settings".to_owned());
        }
    }

    // Nothing any rule looks for: admitted.
    let mut depth = 0i32;
    let mut deepest = 0;
    for t in &all {
        match t {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => depth -= 1,
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    let suspicious = all.iter().any(|t| {
        refused(t).is_some()
            || name_of(t).is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                n == "into" || n == "pg_settings" || n.starts_with("pg_temp")
            })
    });
    if !suspicious && !seen.u_amp && deepest < 50 {
        return Expect::Admit;
    }
    Expect::Either
}
