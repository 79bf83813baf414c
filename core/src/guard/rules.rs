//! The rules, applied to the masked text. Each rule is written for a class of statements, not
//! for examples: `docs/GUARD.md` states every rule and the class it closes.

use super::lex::{
    close_paren, eq_word, for_each_candidate, is_ident, is_space, is_word_at, is_word_start,
    next_word, open_paren, prev_word, skip_space, skip_space_back, word_end,
};
use super::mask::{block_comment_end, line_end, mask_and_see};
use super::names::{cannot_name_table, refused_function};
use super::{Mode, Reason};

/// Words that may start a shared-path statement (after any number of `(`).
const LEADING: [&str; 8] = [
    "select", "insert", "update", "delete", "merge", "values", "with", "table",
];

/// How many earlier CTEs the walk back from a CTE name may cross; a longer list is refused
/// (the name is read as a call), which is only ever a false refusal.
const MAX_CTE_WALK: usize = 64;

/// The verdict on `sql`: `None` if allowed.
pub(super) fn verdict(sql: &str, mode: Mode) -> Option<Reason> {
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
    let facts = Facts::scan(m, sql.as_bytes(), mode, seen.u_amp);

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
}

impl Facts {
    /// The prefilter is built in: every pattern is anchored on `(`, `.`, `;`, the letters `nt`
    /// (as in INTO), `pg` (as in pg_settings) or `ue` (as in UESCAPE, once a `U&` was seen), so
    /// the pass stops only there. A chunk with none of them costs one vector compare.
    fn scan(m: &[u8], raw: &[u8], mode: Mode, u_amp: bool) -> Facts {
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
                        facts.call = called_before(m, raw, i, mode);
                    }
                }
                b'.' => {
                    if facts.call.is_none() {
                        facts.call = attribute_call(m, i, mode);
                    }
                }
                b';' => {
                    // Whatever follows is either nothing or a second statement: stop here.
                    facts.second_statement = !m[i + 1..].iter().all(|&c| is_space(c));
                    return false;
                }
                _ if i > 0 && is_word_at(m, i - 1, b"into") => {
                    if facts.into.is_none() {
                        facts.into = into_temp(m, raw, i + 3);
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
/// not a call.
fn called_before(m: &[u8], raw: &[u8], paren: usize, mode: Mode) -> Option<Reason> {
    let (s, e) = prev_word(m, paren)?;
    let reason = refused_function(&m[s..e], mode)?;
    (!is_cte_head(m, raw, s, paren)).then_some(reason)
}

/// The refusal for a name after the `.` at `dot`: PostgreSQL reads `(expr).f` as `f(expr)` for
/// any one-argument function, with whitespace and comments allowed around the dot. A column
/// that happens to bear a refused name (`t.currval`) is refused too; that is the price of
/// closing the class.
fn attribute_call(m: &[u8], dot: usize, mode: Mode) -> Option<Reason> {
    let s = skip_space(m, dot + 1);
    if !m.get(s).is_some_and(|&c| is_word_start(c)) {
        return None;
    }
    refused_function(&m[s..word_end(m, s)], mode)
}

/// Whether the name at `name_start`, followed by the `(` at `paren`, heads a common table
/// expression: `WITH [RECURSIVE] name (col, ...) AS [[NOT] MATERIALIZED] (statement`, or the
/// same after the `,` that follows an earlier CTE of the same list. The walk back to WITH
/// follows the list's structure, and every body must start with a statement keyword, so a call
/// with a column definition list in a FROM list (`FROM f(x) AS (a int), lastval(y) AS (b int)`)
/// never passes for a CTE.
fn is_cte_head(m: &[u8], raw: &[u8], name_start: usize, paren: usize) -> bool {
    let Some(close) = close_paren(m, paren) else {
        return false;
    };
    is_column_list(&m[paren + 1..close])
        && body_follows(m, raw, close + 1)
        && starts_cte_entry(m, raw, name_start)
}

/// `a, b, c`: one or more plain words separated by commas.
fn is_column_list(b: &[u8]) -> bool {
    b.split(|&c| c == b',').all(|part| {
        let s = skip_space(part, 0);
        let e = skip_space_back(part, part.len());
        s < e && is_word_start(part[s]) && part[s..e].iter().all(|&c| is_ident(c))
    })
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
    !is_quoted(raw, w) && LEADING.iter().any(|k| eq_word(m, w, k))
}

/// Whether the name at `at` is the first entry after `WITH [RECURSIVE]`, or follows `,` after a
/// complete earlier entry `name [(cols)] AS [[NOT] MATERIALIZED] (statement)` that itself
/// qualifies.
fn starts_cte_entry(m: &[u8], raw: &[u8], mut at: usize) -> bool {
    for _ in 0..MAX_CTE_WALK {
        let p = skip_space_back(m, at);
        if p > 0 && m[p - 1] == b',' {
            match previous_cte_name(m, raw, p - 1) {
                Some(name) => {
                    at = name;
                    continue;
                }
                None => return false,
            }
        }
        return match prev_word(m, at) {
            Some(w) if eq_word(m, w, "with") => true,
            Some(w) if eq_word(m, w, "recursive") => {
                prev_word(m, w.0).is_some_and(|x| eq_word(m, x, "with"))
            }
            _ => false,
        };
    }
    false
}

/// For the `,` at `comma`, the start of the name of the CTE entry that ends before it.
fn previous_cte_name(m: &[u8], raw: &[u8], comma: usize) -> Option<usize> {
    let q = skip_space_back(m, comma);
    if q == 0 || m[q - 1] != b')' {
        return None;
    }
    let body_open = open_paren(m, q - 1)?;
    if !statement_starts(m, raw, body_open + 1) {
        return None;
    }
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
    is_word_start(m[name.0]).then_some(name.0)
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

/// After the word INTO ending at `into_end`: `[GLOBAL|LOCAL] TEMP|TEMPORARY` creating a table,
/// or `[TABLE] pg_temp[_N] .` (any case, any whitespace; the optional words are accepted in any
/// combination, which only widens the net).
fn into_temp(m: &[u8], raw: &[u8], into_end: usize) -> Option<Reason> {
    let is = |w: (usize, usize), options: &[&str]| options.iter().any(|o| eq_word(m, w, o));
    let mut w = next_word(m, into_end);
    if let Some(x) = w.filter(|&x| is(x, &["global", "local"])) {
        w = next_word(m, x.1);
    }
    if let Some(t) = w.filter(|&x| is(x, &["temp", "temporary"]) && !is_quoted(raw, x)) {
        return creates_table_after(m, raw, t.1).then_some(Reason::IntoTemp);
    }
    if let Some(x) = w.filter(|&x| is(x, &["table"])) {
        w = next_word(m, x.1);
    }
    let (s, e) = w?;
    (is_pg_temp(&m[s..e]) && m.get(skip_space(m, e)) == Some(&b'.')).then_some(Reason::IntoPgTemp)
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
