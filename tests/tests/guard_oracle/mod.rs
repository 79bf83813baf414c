//! The rule oracle: the guard's rules written a second time, independently of `pgpipe::guard`,
//! as a reader of the docs would: the reference masker (char by char) classifies every char,
//! a tokenizer turns the code into words and punctuation, and each rule is a pattern over
//! tokens. The tests compare the guard with it on generated and mutated statements.

#![allow(dead_code)] // each test binary uses a different part

mod mask;

#[allow(unused_imports)] // guard_classes.rs does not use the masker directly
pub use mask::{ref_ident, ref_space, ref_word_start, reference_mask, reference_mask_classes, Cls};
use pgpipe::guard::{Mode, Reason};

/// Functions whose effect stays in the session (or that read what another caller left there).
pub const SESSION_FUNCTIONS: &[&str] = &[
    // settings: set_config; pg_trgm's similarity threshold; sepgsql's security label
    "set_config",
    "set_limit",
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

/// The oracle's verdict on `sql`.
pub fn oracle_verdict(sql: &str, mode: Mode) -> Option<Reason> {
    let (spans, seen) = tokenize_spans(sql);
    let all: Vec<Tok> = spans.iter().map(|t| t.0.clone()).collect();
    // `vis`: the tokens every rule sees (masked constructs read as whitespace); `at[i]` is
    // where `vis[i]` is in `all`.
    let at: Vec<usize> = (0..all.len()).filter(|&i| !all[i].hidden()).collect();
    let vis: Vec<Tok> = at.iter().map(|&i| all[i].clone()).collect();
    let cs: Vec<char> = sql.chars().collect();

    // Leading keyword, after any opening parentheses.
    let first = vis.iter().find(|t| **t != Tok::Punct('('));
    let Some(first) = first.filter(|t| t.starts_word()) else {
        return Some(Reason::Empty);
    };
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
        return Some(Reason::LeadingKeyword(lead[..cut].to_owned()));
    }

    // One statement; the rules look before the first `;`.
    let semi = vis.iter().position(|t| *t == Tok::Punct(';'));
    if let Some(s) = semi {
        if s + 1 < vis.len() {
            return Some(Reason::MultipleStatements);
        }
    }
    let vis = &vis[..semi.unwrap_or(vis.len())];
    let all_semi = all.iter().position(|t| *t == Tok::Punct(';'));
    let all = &all[..all_semi.unwrap_or(all.len())];
    let view = View {
        vis,
        at: &at[..vis.len()],
        all,
    };

    if seen.u_ident_escaped {
        return Some(Reason::UnicodeEscapedIdentifier);
    }
    if seen.u_amp && vis.iter().any(|t| t.is("uescape")) {
        return Some(Reason::Uescape);
    }

    // Calls: `name (` unless it heads a CTE, and `. name`; the first in the text wins.
    for k in 0..vis.len() {
        let found = match &vis[k] {
            Tok::Punct('(') if k > 0 => vis[k - 1]
                .word()
                .and_then(|w| refusal_for(&w, mode))
                .filter(|_| !alias_head(&view, k - 1) && !cte_head(&view, k - 1)),
            // A number's dot (`1. lastval`: the number 1, then an alias) is no call.
            Tok::Punct('.') if k > 0 && ends_number(&spans, &cs, at[k - 1], at[k]) => None,
            Tok::Punct('.') => vis
                .get(k + 1)
                .and_then(Tok::word)
                .and_then(|w| refusal_for(&w, mode)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }

    for (k, tok) in all.iter().enumerate() {
        if tok.is("into") {
            if let Some(r) = into_rule(&view, k) {
                return Some(r);
            }
        }
    }

    for k in 0..vis.len() {
        if vis[k].is("pg_settings") && pg_settings_target(vis, k) {
            return Some(Reason::UpdatePgSettings);
        }
    }
    None
}

/// The tokens before the first `;`: the visible ones, where each is among all of them, and all.
struct View<'a> {
    vis: &'a [Tok],
    at: &'a [usize],
    all: &'a [Tok],
}

/// Whether the word token `w` (a digit run) ends right at the `.` token `dot` and follows
/// neither an identifier char nor a dot: a number's trailing dot.
fn ends_number(spans: &[(Tok, usize, usize)], cs: &[char], w: usize, dot: usize) -> bool {
    let (
        Tok::Word {
            text,
            quoted: false,
        },
        s,
        e,
    ) = &spans[w]
    else {
        return false;
    };
    text.chars().all(|c| c.is_ascii_digit())
        && *e == spans[dot].1
        && (*s == 0 || !(ref_ident(cs[s - 1]) || cs[s - 1] == '.'))
}

/// Between `all[from..to]`: names (plain words, or quoted identifiers masked whole) separated by
/// commas, and nothing else.
fn column_list(all: &[Tok], from: usize, to: usize) -> bool {
    let inner = &all[from..to];
    !inner.is_empty()
        && inner.len() % 2 == 1
        && inner.iter().enumerate().all(|(j, tok)| match j % 2 {
            0 => tok.starts_word() || *tok == Tok::HiddenName,
            _ => *tok == Tok::Punct(','),
        })
}

/// `AS name (cols)` or `) name (cols)`: a table alias with its column list, `name` at `n`.
fn alias_head(v: &View, n: usize) -> bool {
    let t = v.vis;
    let after = n > 0 && (t[n - 1] == Tok::Punct(')') || (t[n - 1].is("as") && !t[n - 1].quoted()));
    after
        && matching(t, n + 1).is_some_and(|close| column_list(v.all, v.at[n + 1] + 1, v.at[close]))
}

/// The index of the token matching the parenthesis at `k` (forwards for `(`, backwards for `)`).
fn matching(t: &[Tok], k: usize) -> Option<usize> {
    let (open, close, forward) = match t[k] {
        Tok::Punct('(') => ('(', ')', true),
        Tok::Punct(')') => (')', '(', false),
        _ => return None,
    };
    let mut depth = 0i32;
    let mut i = k as isize;
    while i >= 0 && (i as usize) < t.len() {
        if t[i as usize] == Tok::Punct(open) {
            depth += 1;
        } else if t[i as usize] == Tok::Punct(close) {
            depth -= 1;
            if depth == 0 {
                return Some(i as usize);
            }
        }
        i += if forward { 1 } else { -1 };
    }
    None
}

/// `WITH [RECURSIVE] name (a, b) AS [[NOT] MATERIALIZED] (`, or `, name (...) AS (` after a
/// complete earlier CTE of the list; `name` at `n`, its `(` at `n + 1`.
fn cte_head(v: &View, n: usize) -> bool {
    let t = v.vis;
    let Some(close) = matching(t, n + 1) else {
        return false;
    };
    // The column list: name (, name)*
    if !column_list(v.all, v.at[n + 1] + 1, v.at[close]) {
        return false;
    }
    // AS [NOT MATERIALIZED | MATERIALIZED] (
    let mut j = close + 1;
    if !t.get(j).is_some_and(|x| x.is("as")) {
        return false;
    }
    j += 1;
    if t.get(j).is_some_and(|x| x.is("not")) {
        if !t.get(j + 1).is_some_and(|x| x.is("materialized")) {
            return false;
        }
        j += 2;
    } else if t.get(j).is_some_and(|x| x.is("materialized")) {
        j += 1;
    }
    if t.get(j) != Some(&Tok::Punct('(')) || !statement_at(t, j + 1) {
        return false;
    }
    // Back to WITH through the earlier entries of the list.
    let mut at = n;
    loop {
        if at == 0 {
            return false;
        }
        let prev = &t[at - 1];
        if *prev == Tok::Punct(',') {
            // name [(cols)] AS [[NOT] MATERIALIZED] ( body ) ,
            if at < 2 || t[at - 2] != Tok::Punct(')') {
                return false;
            }
            let Some(open) = matching(t, at - 2) else {
                return false;
            };
            if !statement_at(t, open + 1) {
                return false;
            }
            let mut w = match open.checked_sub(1) {
                Some(w) if t[w].word().is_some() => w,
                _ => return false,
            };
            if t[w].is("materialized") {
                w = match w.checked_sub(1) {
                    Some(x) if t[x].word().is_some() => x,
                    _ => return false,
                };
                if t[w].is("not") {
                    w = match w.checked_sub(1) {
                        Some(x) if t[x].word().is_some() => x,
                        _ => return false,
                    };
                }
            }
            if !t[w].is("as") || w == 0 {
                return false;
            }
            let name = if t[w - 1] == Tok::Punct(')') {
                match matching(t, w - 1).and_then(|o| o.checked_sub(1)) {
                    Some(x) => x,
                    None => return false,
                }
            } else {
                w - 1
            };
            if !t[name].starts_word() {
                return false;
            }
            at = name;
            continue;
        }
        return prev.is("with") || (prev.is("recursive") && at >= 2 && t[at - 2].is("with"));
    }
}

/// A CTE body: after any `(`, an unquoted statement keyword.
fn statement_at(t: &[Tok], mut j: usize) -> bool {
    while t.get(j) == Some(&Tok::Punct('(')) {
        j += 1;
    }
    t.get(j).is_some_and(|w| {
        !w.quoted()
            && [
                "select", "insert", "update", "delete", "merge", "values", "with", "table",
            ]
            .iter()
            .any(|k| w.is(k))
    })
}

/// INTO [GLOBAL|LOCAL] TEMP|TEMPORARY creating a table (not after a statement's INSERT or
/// MERGE, whose INTO takes a table's name), or INTO [TABLE] and a dotted name with a
/// `pg_temp[_N]` qualifier, any number of parts.
fn into_rule(v: &View, k: usize) -> Option<Reason> {
    let all = v.all;
    let next_vis = |from: usize| (from..all.len()).find(|&j| !all[j].hidden());
    let prev_vis = |before: usize| (0..before).rev().find(|&j| !all[j].hidden());
    let first = next_vis(k + 1).filter(|&j| all[j].word().is_some());
    let mut w = first;
    let temp_like = w.is_some_and(|j| {
        ["global", "local", "temp", "temporary"]
            .iter()
            .any(|x| all[j].is(x))
    });
    let of_dml = temp_like
        && prev_vis(k)
            .is_some_and(|j| (all[j].is("insert") || all[j].is("merge")) && starts_statement(v, j));
    if temp_like && !of_dml {
        if w.is_some_and(|t| all[t].is("global") || all[t].is("local")) {
            w = w
                .and_then(|t| next_vis(t + 1))
                .filter(|&j| all[j].word().is_some());
        }
        if let Some(t) =
            w.filter(|&t| (all[t].is("temp") || all[t].is("temporary")) && !all[t].quoted())
        {
            // The TEMP keyword is followed by TABLE or a name; a table called temp is not.
            let creates = match all.get(t + 1) {
                Some(x) if x.hidden() => true,
                Some(x) if x.starts_word() => {
                    let not_name = x.word().is_some_and(|y| {
                        y != "table" && NOT_A_TABLE_NAME.split_whitespace().any(|n| n == y)
                    });
                    if x.is("table") || x.quoted() {
                        true
                    } else if not_name {
                        false
                    } else {
                        next_vis(t + 2).is_none_or(|j| all[j] != Tok::Punct('('))
                    }
                }
                _ => false,
            };
            return creates.then_some(Reason::IntoTemp);
        }
    }
    let mut j = match w.filter(|&j| all[j].is("table")) {
        Some(table) => table + 1,
        None => k + 1,
    };
    // Parts: a name (or nothing visible) then `.`; a pg_temp part followed by `.` qualifies.
    loop {
        let p = next_vis(j)?;
        if all[p] == Tok::Punct('.') {
            j = p + 1;
            continue;
        }
        if !all[p].starts_word() || next_vis(p + 1).is_none_or(|d| all[d] != Tok::Punct('.')) {
            return None;
        }
        let name = all[p].word()?;
        let pg_temp = name.strip_prefix("pg_temp").is_some_and(|s| {
            s.is_empty()
                || s.strip_prefix('_')
                    .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        });
        if pg_temp {
            return Some(Reason::IntoPgTemp);
        }
        j = next_vis(p + 1)? + 1;
    }
}

/// Whether the token `all[j]` starts a statement: nothing visible before it, or `(`, or the `)`
/// that ends a CTE body (`AS [[NOT] MATERIALIZED] (statement)`).
fn starts_statement(v: &View, j: usize) -> bool {
    let Some(i) = v.at.iter().position(|&a| a == j) else {
        return false;
    };
    let t = v.vis;
    if i == 0 || t[i - 1] == Tok::Punct('(') {
        return true;
    }
    if t[i - 1] != Tok::Punct(')') {
        return false;
    }
    matching(t, i - 1).is_some_and(|open| {
        open > 0
            && (t[open - 1].is("as") || t[open - 1].is("materialized"))
            && statement_at(t, open + 1)
    })
}

/// `UPDATE [ONLY] [(] [[q] .] [q .] pg_settings` with `pg_settings` at `k`: the outermost
/// qualifier may be invisible (a masked quoted name).
fn pg_settings_target(t: &[Tok], k: usize) -> bool {
    let update_before = |i: usize| {
        let mut j = i;
        if j > 0 && t[j - 1] == Tok::Punct('(') {
            j -= 1;
        }
        if j > 0 && t[j - 1].is("only") {
            j -= 1;
        }
        j > 0 && t[j - 1].is("update")
    };
    if update_before(k) {
        return true;
    }
    let mut i = k;
    for _ in 0..2 {
        if i == 0 || t[i - 1] != Tok::Punct('.') {
            return false;
        }
        if update_before(i - 1) {
            return true;
        }
        if i < 2 || t[i - 2].word().is_none() {
            return false;
        }
        i -= 2;
        if update_before(i) {
            return true;
        }
    }
    false
}
