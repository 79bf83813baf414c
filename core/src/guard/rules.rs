//! The rules, applied to the masked text. Each rule is written for a class of statements, not
//! for examples: `docs/GUARD.md` states every rule and the class it closes.

use super::lex::{
    close_paren, eq_word, for_each_candidate, is_ident, is_space, is_word_at, is_word_start,
    next_word, open_paren, prev_word, skip_space, skip_space_back, word_end,
};
use super::mask::{block_comment_end, line_end, mask_and_see};
use super::names::{cannot_name_table, refused_function, ExtensionNames};
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
    let (masked, seen) = mask_and_see(sql);
    let m = masked.as_bytes();

    // Only plain DML and queries: everything else (SET, BEGIN, LISTEN, COPY, PREPARE, DECLARE,
    // CREATE TEMP ...) is session or protocol state by nature. Parentheses may come first:
    // `(SELECT 1) UNION (SELECT 2)` is what ORMs write for set operations.
    let mut start = skip_space(m, 0);
    while m.get(start) == Some(&b'(') {
        start = skip_space(m, start + 1);
    }
    if !m.get(start).is_some_and(|&c| is_word_start(c)) {
        return Some(Reason::Empty);
    }
    let word = &masked[start..word_end(m, start)];
    if !LEADING.iter().any(|k| k.eq_ignore_ascii_case(word)) {
        return Some(Reason::LeadingKeyword(keyword_for_display(word)));
    }

    // One pass over the text collects what every remaining rule needs; the rules are then
    // applied in a fixed order, so the reason does not depend on where things occur.
    let facts = Facts::scan(m, sql.as_bytes(), Refused { mode, ext }, seen.u_amp);

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
    if facts.call.is_some() {
        return facts.call;
    }
    if facts.into.is_some() {
        return facts.into;
    }
    facts.pg_settings.then_some(Reason::UpdatePgSettings)
}

/// What one pass over the masked text found.
#[derive(Default)]
struct Facts {
    /// Something other than whitespace after the first `;`.
    second_statement: bool,
    /// The word UESCAPE, looked for only when a `U&` construct was seen.
    uescape: bool,
    /// The first refused call (`ForbiddenCall` or `SqlTextCall`).
    call: Option<Reason>,
    /// The first INTO TEMP / INTO pg_temp.
    into: Option<Reason>,
    /// An UPDATE whose target is `pg_settings`.
    pg_settings: bool,
    /// Verdicts of the walk back from CTE names to WITH, by name position: each earlier entry
    /// is read once however many later ones walk past it, which keeps the check linear.
    cte_entries: CteMemo,
    /// Matching parentheses, for the INTO rule.
    parens: Parens,
}

/// The `(` matching each `)` of the masked text, found in one pass when a rule first asks, so
/// that asking at every `)` of an adversarial text stays linear.
#[derive(Default)]
struct Parens(Option<Vec<(usize, usize)>>);

impl Parens {
    /// The `(` that the `)` at `close` closes.
    fn open_of(&mut self, m: &[u8], close: usize) -> Option<usize> {
        let pairs = self.0.get_or_insert_with(|| {
            let (mut pairs, mut open) = (Vec::new(), Vec::new());
            for (i, &c) in m.iter().enumerate() {
                match c {
                    b'(' => open.push(i),
                    b')' => {
                        if let Some(o) = open.pop() {
                            pairs.push((i, o));
                        }
                    }
                    _ => {}
                }
            }
            pairs
        });
        let at = pairs.binary_search_by_key(&close, |&(c, _)| c).ok()?;
        Some(pairs[at].1)
    }
}

/// Whether the CTE entry whose name starts at a position qualifies (see [`starts_cte_entry`]),
/// sorted by position. Empty unless a CTE is named like a refused function.
#[derive(Default)]
struct CteMemo(Vec<(usize, bool)>);

impl CteMemo {
    fn get(&self, at: usize) -> Option<bool> {
        // A walk asks first for its own name (after everything held) and stops at the entry
        // the previous walk started from (the last held): both are answered here.
        match self.0.last() {
            None => return None,
            Some(&(p, _)) if p < at => return None,
            Some(&(p, v)) if p == at => return Some(v),
            _ => {}
        }
        let i = self.0.binary_search_by_key(&at, |&(p, _)| p).ok()?;
        Some(self.0[i].1)
    }
}

/// Which names are refused as calls: the fixed list in `mode`, and the extension functions.
#[derive(Clone, Copy)]
struct Refused<'a> {
    mode: Mode,
    ext: &'a ExtensionNames,
}

impl Refused<'_> {
    fn call(self, word: &[u8]) -> Option<Reason> {
        refused_function(word, self.mode).or_else(|| self.ext.refuses(word))
    }
}

impl Facts {
    /// The prefilter is built in: every pattern is anchored on `(`, `.`, `;`, the letters `nt`
    /// (as in INTO), `pg` (as in pg_settings) or `ue` (as in UESCAPE, once a `U&` was seen), so
    /// the pass stops only there. A chunk with none of them costs one vector compare.
    fn scan(m: &[u8], raw: &[u8], refused: Refused<'_>, u_amp: bool) -> Facts {
        let mut facts = Facts::default();
        let candidate = |c: u8, next: u8| {
            (c == b'(')
                | (c == b'.')
                | (c == b';')
                | (c | 0x20 == b'n') & (next | 0x20 == b't')
                | (c | 0x20 == b'p') & (next | 0x20 == b'g')
                | u_amp & (c | 0x20 == b'u') & (next | 0x20 == b'e')
        };
        for_each_candidate(m, candidate, |i| {
            match m[i] {
                b'(' => {
                    if facts.call.is_none() {
                        facts.call = called_before(m, raw, i, refused, &mut facts.cte_entries);
                    }
                }
                b'.' => {
                    if facts.call.is_none() && !ends_number(m, i) {
                        facts.call = attribute_call(m, i, refused);
                    }
                }
                b';' => {
                    // Whatever follows is either nothing or a second statement: stop here.
                    facts.second_statement = !m[i + 1..].iter().all(|&c| is_space(c));
                    return false;
                }
                _ if i > 0 && is_word_at(m, i - 1, b"into") => {
                    if facts.into.is_none() {
                        facts.into = into_temp(m, raw, i - 1, i + 3, &mut facts.parens);
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

/// Lower-cased, at most 64 bytes (cut on a character boundary).
fn keyword_for_display(word: &str) -> String {
    let mut cut = word.len().min(64);
    while !word.is_char_boundary(cut) {
        cut -= 1;
    }
    word[..cut].to_ascii_lowercase()
}

/// The refusal for the name called by the `(` at `paren`, if any (whitespace allowed in
/// between). Reading backwards from the parenthesis takes the maximal identifier run, so the
/// name is at an identifier boundary on both sides: `my_set_config(` is not `set_config(`, while
/// `pg_catalog.set_config(` is. A CTE's name with its column list (`WITH lastval(v) AS (`) is
/// not a call, nor is an alias with its column list (`FROM t AS lastval(v)`).
fn called_before(
    m: &[u8],
    raw: &[u8],
    paren: usize,
    refused: Refused<'_>,
    memo: &mut CteMemo,
) -> Option<Reason> {
    let (s, e) = prev_word(m, paren)?;
    let reason = refused.call(&m[s..e])?;
    let not_a_call = is_alias_head(m, raw, s, paren) || is_cte_head(m, raw, s, paren, memo);
    (!not_a_call).then_some(reason)
}

/// Whether the digits before the `.` at `dot` are a number's (`1.`, `SELECT 1. lastval` is
/// the number 1 with the alias lastval), not the end of an identifier or a parameter (`$1.f`
/// is `f($1)`). A number takes no field selection, so its dot is never a call.
fn ends_number(m: &[u8], dot: usize) -> bool {
    let mut j = dot;
    while j > 0 && m[j - 1].is_ascii_digit() {
        j -= 1;
    }
    j < dot && (j == 0 || !(is_ident(m[j - 1]) || matches!(m[j - 1], b'$' | b'.')))
}

/// Whether the name at `name_start`, followed by the `(` at `paren`, is a table alias with its
/// column list: `AS name (col, ...)` or, without AS, right after a parenthesised table
/// (`FROM (VALUES (1)) lastval(v)`). No call follows `AS` or `)` in PostgreSQL's grammar, and
/// the list holds names only.
fn is_alias_head(m: &[u8], raw: &[u8], name_start: usize, paren: usize) -> bool {
    let p = skip_space_back(m, name_start);
    let after_table = p > 0 && m[p - 1] == b')';
    let after_as = !after_table
        && prev_word(m, name_start).is_some_and(|w| eq_word(m, w, "as") && !is_quoted(raw, w));
    if !(after_table || after_as) {
        return false;
    }
    close_paren(m, paren).is_some_and(|close| is_column_list(m, raw, paren + 1, close))
}

/// The refusal for a name after the `.` at `dot`: PostgreSQL reads `(expr).f` as `f(expr)` for
/// any one-argument function, with whitespace and comments allowed around the dot. A column
/// that happens to bear a refused name (`t.currval`) is refused too; that is the price of
/// closing the class.
fn attribute_call(m: &[u8], dot: usize, refused: Refused<'_>) -> Option<Reason> {
    let s = skip_space(m, dot + 1);
    if !m.get(s).is_some_and(|&c| is_word_start(c)) {
        return None;
    }
    refused.call(&m[s..word_end(m, s)])
}

/// Whether the name at `name_start`, followed by the `(` at `paren`, heads a common table
/// expression: `WITH [RECURSIVE] name (col, ...) AS [[NOT] MATERIALIZED] (statement`, or the
/// same after the `,` that follows an earlier CTE of the same list. The walk back to WITH
/// follows the list's structure, and every body must start with a statement keyword, so a call
/// with a column definition list in a FROM list (`FROM f(x) AS (a int), lastval(y) AS (b int)`)
/// never passes for a CTE.
fn is_cte_head(m: &[u8], raw: &[u8], name_start: usize, paren: usize, memo: &mut CteMemo) -> bool {
    let Some(close) = close_paren(m, paren) else {
        return false;
    };
    is_column_list(m, raw, paren + 1, close)
        && body_follows(m, raw, close + 1)
        && starts_cte_entry(m, raw, name_start, memo)
}

/// `a, b, "C d"`: in `m[from..to]`, one or more names separated by commas, each a plain word
/// or a quoted identifier (which masking blanks; the raw text says it was one).
fn is_column_list(m: &[u8], raw: &[u8], from: usize, to: usize) -> bool {
    let mut s = from;
    loop {
        let e = m[s..to]
            .iter()
            .position(|&c| c == b',')
            .map_or(to, |k| s + k);
        if !is_column_name(m, raw, s, e) {
            return false;
        }
        if e == to {
            return true;
        }
        s = e + 1;
    }
}

/// Whether `m[from..to]` is one name, with only whitespace and comments around it: a plain
/// word, or a quoted identifier (masked whole, so read from the raw text).
fn is_column_name(m: &[u8], raw: &[u8], from: usize, to: usize) -> bool {
    let s = skip_space(&m[..to], from);
    let e = skip_space_back(m, to).max(s);
    if s < e {
        // A plain quoted name keeps its body visible; its quotes (and `U&`) are part of it.
        let (mut qs, mut qe) = (s, e);
        if is_quoted(raw, (s, e)) {
            (qs, qe) = (s - 1, e + 1);
            if qs >= 2 && raw[qs - 1] == b'&' && raw[qs - 2] | 0x20 == b'u' {
                qs -= 2;
            }
        }
        return is_word_start(m[s])
            && m[s..e].iter().all(|&c| is_ident(c))
            && !masked_token_between(raw, from, qs)
            && !masked_token_between(raw, qe, to);
    }
    let Some(open) = (from..to).find(|&j| masked_token_between(raw, from, j + 1)) else {
        return false;
    };
    if raw[open] != b'"' {
        return false;
    }
    // The closing quote: the first `"` not doubled.
    let mut j = open + 1;
    while j < to {
        match (raw[j], raw.get(j + 1)) {
            (b'"', Some(b'"')) if j + 1 < to => j += 2,
            (b'"', _) => return !masked_token_between(raw, j + 1, to),
            _ => j += 1,
        }
    }
    false
}

/// From `i`: `AS [[NOT] MATERIALIZED] (` and a statement.
fn body_follows(m: &[u8], raw: &[u8], i: usize) -> bool {
    let Some(w) = next_word(m, i).filter(|&w| eq_word(m, w, "as")) else {
        return false;
    };
    let mut j = w.1;
    if let Some(not) = next_word(m, j).filter(|&w| eq_word(m, w, "not")) {
        match next_word(m, not.1).filter(|&w| eq_word(m, w, "materialized")) {
            Some(mat) => j = mat.1,
            None => return false,
        }
    } else if let Some(mat) = next_word(m, j).filter(|&w| eq_word(m, w, "materialized")) {
        j = mat.1;
    }
    let open = skip_space(m, j);
    m.get(open) == Some(&b'(') && statement_starts(m, raw, open + 1)
}

/// Whether a statement keyword (unquoted) starts at `i`, after whitespace and any `(`.
fn statement_starts(m: &[u8], raw: &[u8], i: usize) -> bool {
    let mut s = skip_space(m, i);
    while m.get(s) == Some(&b'(') {
        s = skip_space(m, s + 1);
    }
    let Some(w) = next_word(m, s) else {
        return false;
    };
    !is_quoted(raw, w) && is_leading(&m[w.0..w.1])
}

/// Whether `word` is one of [`LEADING`], any case: one length check and one lower-cased copy,
/// since the CTE rules ask at every entry.
fn is_leading(word: &[u8]) -> bool {
    if !(4..=6).contains(&word.len()) {
        return false;
    }
    let mut buf = [0u8; 6];
    let lower = &mut buf[..word.len()];
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    LEADING.iter().any(|k| k.as_bytes() == lower)
}

/// Whether the name at `at` is the first entry after `WITH [RECURSIVE]`, or follows `,` after a
/// complete earlier entry `name [(cols)] AS [[NOT] MATERIALIZED] (statement)` that itself
/// qualifies. Every entry the walk passes shares its verdict, kept in `memo`: a later walk
/// stops at the first entry an earlier one passed.
fn starts_cte_entry(m: &[u8], raw: &[u8], mut at: usize, memo: &mut CteMemo) -> bool {
    // Walks run from later names to earlier ones, and each stops at the first entry an earlier
    // walk passed: every entry this one passes lies after all the memo holds, so appending
    // them (in reverse, once the verdict is known) keeps it sorted.
    let first_new = memo.0.len();
    let verdict = loop {
        if let Some(known) = memo.get(at) {
            break known;
        }
        memo.0.push((at, false));
        let p = skip_space_back(m, at);
        if p > 0 && m[p - 1] == b',' {
            match previous_cte_name(m, raw, p - 1, memo) {
                Some(name) => {
                    at = name;
                    continue;
                }
                None => break false,
            }
        }
        break match prev_word(m, at) {
            Some(w) if eq_word(m, w, "with") => true,
            Some(w) if eq_word(m, w, "recursive") => {
                prev_word(m, w.0).is_some_and(|x| eq_word(m, x, "with"))
            }
            _ => false,
        };
    };
    let passed = &mut memo.0[first_new..];
    passed.reverse();
    for entry in passed {
        entry.1 = verdict;
    }
    verdict
}

#[cfg(test)]
thread_local! {
    /// Steps of the walk back over CTE entries (`previous_cte_name`), counted so a test can see
    /// that the walk stays linear.
    pub(super) static CTE_STEPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// For the `,` at `comma`, the start of the name of the CTE entry that ends before it.
/// An entry the memo holds had its body checked already (when its own name was checked, or
/// when an earlier walk passed it), so only a new one's is.
fn previous_cte_name(m: &[u8], raw: &[u8], comma: usize, memo: &CteMemo) -> Option<usize> {
    #[cfg(test)]
    CTE_STEPS.with(|n| n.set(n.get() + 1));
    let q = skip_space_back(m, comma);
    if q == 0 || m[q - 1] != b')' {
        return None;
    }
    let body_open = open_paren(m, q - 1)?;
    let mut w = prev_word(m, body_open)?;
    if eq_word(m, w, "materialized") {
        w = prev_word(m, w.0)?;
        if eq_word(m, w, "not") {
            w = prev_word(m, w.0)?;
        }
    }
    if !eq_word(m, w, "as") {
        return None;
    }
    let r = skip_space_back(m, w.0);
    let name = if r > 0 && m[r - 1] == b')' {
        let cols_open = open_paren(m, r - 1)?;
        prev_word(m, cols_open)?
    } else {
        prev_word(m, w.0)?
    };
    let checked = memo.get(name.0).is_some();
    (is_word_start(m[name.0]) && (checked || statement_starts(m, raw, body_open + 1)))
        .then_some(name.0)
}

/// Whether the word at `at` is `pg_settings` and the target of an UPDATE:
/// `UPDATE [ONLY] [(] [[db.]schema.]pg_settings`, any case and whitespace, any qualifier (a
/// masked quoted one included). For parameters the server does not report (`search_path` on
/// PostgreSQL 15) the ParameterStatus backstop would never see the change.
fn updates_pg_settings(m: &[u8], at: usize) -> bool {
    if !is_word_at(m, at, b"pg_settings") {
        return false;
    }
    if update_before(m, at) {
        return true;
    }
    // Qualifiers: at most `db.schema.`. A quoted one may be masked whole, so each dot is also
    // tried as the start of the name.
    let mut i = at;
    for _ in 0..2 {
        let p = skip_space_back(m, i);
        if p == 0 || m[p - 1] != b'.' {
            return false;
        }
        if update_before(m, p - 1) {
            return true;
        }
        match prev_word(m, p - 1) {
            Some(w) => i = w.0,
            None => return false,
        }
        if update_before(m, i) {
            return true;
        }
    }
    false
}

/// Whether `UPDATE [ONLY] [(]` ends right before `i` (whitespace aside).
fn update_before(m: &[u8], mut i: usize) -> bool {
    let p = skip_space_back(m, i);
    if p > 0 && m[p - 1] == b'(' {
        i = p - 1;
    }
    let Some(mut w) = prev_word(m, i) else {
        return false;
    };
    if eq_word(m, w, "only") {
        match prev_word(m, w.0) {
            Some(x) => w = x,
            None => return false,
        }
    }
    eq_word(m, w, "update")
}

/// After the word INTO (`into_start..into_end`): `[GLOBAL|LOCAL] TEMP|TEMPORARY` creating a
/// table, or `[TABLE]` and a name qualified by `pg_temp[_N]` anywhere in it (`pg_temp.t`, and
/// `db.pg_temp.t`: PostgreSQL accepts the current database's name as a third part). Any case,
/// any whitespace; the optional words are accepted in any combination, which only widens the
/// net. Only SELECT's INTO has the TEMP form: after INSERT INTO and MERGE INTO, `temp` is a
/// table's name.
fn into_temp(
    m: &[u8],
    raw: &[u8],
    into_start: usize,
    into_end: usize,
    parens: &mut Parens,
) -> Option<Reason> {
    let is = |w: (usize, usize), options: &[&str]| options.iter().any(|o| eq_word(m, w, o));
    let mut w = next_word(m, into_end);
    // Asked only when the TEMP form is possible at all.
    let temp_like = w.is_some_and(|x| is(x, &["global", "local", "temp", "temporary"]));
    let of_dml = temp_like
        && prev_word(m, into_start)
            .is_some_and(|v| is(v, &["insert", "merge"]) && starts_statement(m, raw, v.0, parens));
    if temp_like && !of_dml {
        if let Some(x) = w.filter(|&x| is(x, &["global", "local"])) {
            w = next_word(m, x.1);
        }
        if let Some(t) = w.filter(|&x| is(x, &["temp", "temporary"]) && !is_quoted(raw, x)) {
            return creates_table_after(m, raw, t.1).then_some(Reason::IntoTemp);
        }
    }
    let mut at = into_end;
    if let Some(x) = w.filter(|&x| is(x, &["table"])) {
        at = x.1;
    }
    qualified_by_pg_temp(m, at).then_some(Reason::IntoPgTemp)
}

/// Whether the word at `at` starts a statement: first in the text (after any `(`), first in
/// a parenthesised body, or right after a WITH list's last entry. Anywhere else an INSERT or
/// MERGE before INTO is a column label (`SELECT 1 insert INTO TEMP t` creates a temp table).
fn starts_statement(m: &[u8], raw: &[u8], at: usize, parens: &mut Parens) -> bool {
    let p = skip_space_back(m, at);
    if p == 0 || m[p - 1] == b'(' {
        return true;
    }
    if m[p - 1] != b')' {
        return false;
    }
    // After `)`: the end of a CTE body, `AS [[NOT] MATERIALIZED] (statement)`.
    let Some(open) = parens.open_of(m, p - 1) else {
        return false;
    };
    // The word first: it is one step, while the body's check skips a run of `(`.
    prev_word(m, open).is_some_and(|w| eq_word(m, w, "as") || eq_word(m, w, "materialized"))
        && statement_starts(m, raw, open + 1)
}

/// Whether the dotted name that starts after `i` has `pg_temp[_N]` among its qualifiers, with
/// whitespace around the dots and any number of parts (a part masked whole, a quoted one, is
/// never pg_temp: quoting keeps a plain name visible).
fn qualified_by_pg_temp(m: &[u8], mut i: usize) -> bool {
    loop {
        let s = skip_space(m, i);
        let e = match m.get(s) {
            Some(&c) if is_word_start(c) => word_end(m, s),
            _ => s,
        };
        let dot = skip_space(m, e);
        if m.get(dot) != Some(&b'.') {
            return false;
        }
        if is_pg_temp(&m[s..e]) {
            return true;
        }
        i = dot + 1;
    }
}

/// Whether what follows the word TEMP ending at `e` makes it the TEMP keyword: the real form is
/// always followed by TABLE or a table's name. A schema or table *named* temp is followed by
/// `.`, `(`, a keyword that cannot name a table (`VALUES (`, SELECT, DEFAULT, AS ...), or
/// nothing: `INSERT INTO temp.readings`, `INSERT INTO temp (a) VALUES ...`.
fn creates_table_after(m: &[u8], raw: &[u8], e: usize) -> bool {
    let p = skip_space(m, e);
    // A quoted name is masked (whole, or its quotes): it is still a name.
    if masked_token_between(raw, e, p) {
        return true;
    }
    if !m.get(p).is_some_and(|&c| is_word_start(c)) {
        return false;
    }
    let w = (p, word_end(m, p));
    let quoted = is_quoted(raw, w);
    if eq_word(m, w, "table") || quoted {
        return true;
    }
    if cannot_name_table(&m[w.0..w.1]) {
        return false;
    }
    // A table name is never followed by `(` here; `INSERT INTO temp VALUES (1)` is (VALUES may
    // name a table, so it is not in the keyword list).
    m.get(skip_space(m, w.1)) != Some(&b'(')
}

/// Whether `raw[from..to]`, which masks to whitespace, holds anything but whitespace and
/// comments (a quoted identifier, its quotes, or a literal).
fn masked_token_between(raw: &[u8], from: usize, to: usize) -> bool {
    let mut j = from;
    while j < to {
        j = match (raw[j], raw.get(j + 1)) {
            (c, _) if is_space(c) => j + 1,
            (b'-', Some(b'-')) => line_end(raw, j),
            (b'/', Some(b'*')) => block_comment_end(raw, j),
            _ => return true,
        };
    }
    false
}

/// Whether the visible word `w` was a quoted identifier: its quotes were masked, the body kept.
fn is_quoted(raw: &[u8], (s, e): (usize, usize)) -> bool {
    s > 0 && raw[s - 1] == b'"' && raw.get(e) == Some(&b'"')
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
