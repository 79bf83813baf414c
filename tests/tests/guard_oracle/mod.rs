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
}

/// Tokens of `sql` and what the masker saw.
pub fn tokenize(sql: &str) -> (Vec<Tok>, mask::RefSeen) {
    let (_, seen, cls) = reference_mask_classes(sql);
    let cs: Vec<char> = sql.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        match cls[i] {
            Cls::Comment | Cls::Mark => i += 1,
            Cls::Hidden => {
                while i < cs.len() && cls[i] == Cls::Hidden {
                    i += 1;
                }
                toks.push(Tok::Hidden);
            }
            Cls::QuotedBody => {
                let s = i;
                while i < cs.len() && cls[i] == Cls::QuotedBody {
                    i += 1;
                }
                toks.push(Tok::Word {
                    text: cs[s..i].iter().collect(),
                    quoted: true,
                });
            }
            Cls::Code if ref_space(cs[i]) => i += 1,
            Cls::Code if ref_ident(cs[i]) => {
                let s = i;
                while i < cs.len() && cls[i] == Cls::Code && ref_ident(cs[i]) {
                    i += 1;
                }
                toks.push(Tok::Word {
                    text: cs[s..i].iter().collect(),
                    quoted: false,
                });
            }
            Cls::Code => {
                toks.push(Tok::Punct(cs[i]));
                i += 1;
            }
        }
    }
    (toks, seen)
}

/// The oracle's verdict on `sql`.
pub fn oracle_verdict(sql: &str, mode: Mode) -> Option<Reason> {
    let (all, seen) = tokenize(sql);
    // `vis`: the tokens every rule sees (masked constructs read as whitespace).
    let vis: Vec<Tok> = all.iter().filter(|t| **t != Tok::Hidden).cloned().collect();

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
                .filter(|_| !cte_head(vis, k - 1)),
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

    for k in 0..all.len() {
        if all[k].is("into") {
            if let Some(r) = into_rule(all, k) {
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
fn cte_head(t: &[Tok], n: usize) -> bool {
    let Some(close) = matching(t, n + 1) else {
        return false;
    };
    // The column list: word (, word)*
    let inner = &t[n + 2..close];
    if inner.is_empty() || inner.len().is_multiple_of(2) {
        return false;
    }
    for (j, tok) in inner.iter().enumerate() {
        let ok = if j % 2 == 0 {
            tok.starts_word()
        } else {
            *tok == Tok::Punct(',')
        };
        if !ok {
            return false;
        }
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

/// INTO [GLOBAL|LOCAL] TEMP|TEMPORARY creating a table, or INTO [TABLE] pg_temp[_N] `.`.
fn into_rule(all: &[Tok], k: usize) -> Option<Reason> {
    let next_vis = |from: usize| (from..all.len()).find(|&j| all[j] != Tok::Hidden);
    let mut w = next_vis(k + 1).filter(|&j| all[j].word().is_some())?;
    if all[w].is("global") || all[w].is("local") {
        w = next_vis(w + 1).filter(|&j| all[j].word().is_some())?;
    }
    if (all[w].is("temp") || all[w].is("temporary")) && !all[w].quoted() {
        // The TEMP keyword is followed by TABLE or a name; a table called temp is not.
        let creates = match all.get(w + 1) {
            Some(Tok::Hidden) => true,
            Some(t) if t.starts_word() => {
                let not_name = t.word().is_some_and(|x| {
                    x != "table" && NOT_A_TABLE_NAME.split_whitespace().any(|k| k == x)
                });
                if t.is("table") || t.quoted() {
                    true
                } else if not_name {
                    false
                } else {
                    next_vis(w + 2).is_none_or(|j| all[j] != Tok::Punct('('))
                }
            }
            _ => false,
        };
        return creates.then_some(Reason::IntoTemp);
    }
    if all[w].is("table") {
        w = next_vis(w + 1).filter(|&j| all[j].word().is_some())?;
    }
    let name = all[w].word()?;
    let pg_temp = name.strip_prefix("pg_temp").is_some_and(|s| {
        s.is_empty()
            || s.strip_prefix('_')
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    });
    let dot = next_vis(w + 1).is_some_and(|j| all[j] == Tok::Punct('.'));
    (pg_temp && dot).then_some(Reason::IntoPgTemp)
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
