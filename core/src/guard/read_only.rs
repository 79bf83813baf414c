//! Which statements may share a Sync with their neighbours (Sync coalescing, `docs/ROUTING.md`):
//! those the guard can show to read and nothing else.
//!
//! Units that share a Sync run in one implicit transaction, so an error in one of them rolls
//! back whatever the others wrote, after the others were told they succeeded. Only statements
//! without any effect may therefore share one. This is an allowlist, stricter than the
//! session-neutrality rules: a plain query (`SELECT`, `VALUES`, `TABLE`, or `WITH` of those),
//! no data-modifying word anywhere (`INSERT`, `UPDATE`, `DELETE`, `MERGE`, `INTO`), no row
//! locks (`FOR UPDATE|SHARE|NO KEY|KEY`), and no call of anything but a listed built-in
//! (immutable or stable, no effect). What it cannot see: a view, a rule or a row-security
//! policy that calls a function with effects, or a user operator, cast or type named like a
//! built-in; `docs/GUARD.md` says so and how to turn coalescing off.

use super::lex::{is_ident, is_word_at, is_word_start, next_word, prev_word, skip_space, word_end};
use super::mask::mask_and_see;

/// Words that start a query.
const LEADING: [&str; 4] = ["select", "values", "with", "table"];

/// Words that make a statement write (or create a table, or lock rows) wherever they occur.
const WRITING: [&str; 5] = ["insert", "update", "delete", "merge", "into"];

/// What may follow `FOR` to lock rows.
const LOCKING: [&str; 4] = ["update", "share", "no", "key"];

/// Words that may precede `(` without calling anything: keywords, and type names with a type
/// modifier (`numeric(10, 2)`). Sorted, lower case.
const NOT_CALLS: &[&str] = &[
    "all",
    "and",
    "any",
    "array",
    "as",
    "between",
    "bit",
    "by",
    "case",
    "cast",
    "char",
    "character",
    "decimal",
    "distinct",
    "else",
    "except",
    "exists",
    "filter",
    "float",
    "from",
    "group",
    "having",
    "ilike",
    "in",
    "intersect",
    "interval",
    "join",
    "lateral",
    "like",
    "limit",
    "materialized",
    "not",
    "numeric",
    "offset",
    "on",
    "or",
    "over",
    "row",
    "select",
    "some",
    "then",
    "time",
    "timestamp",
    "timestamptz",
    "union",
    "using",
    "values",
    "varbit",
    "varchar",
    "varying",
    "when",
    "where",
];

/// Built-in functions that read nothing but their arguments and the catalog (immutable or
/// stable) and change nothing. Sorted, lower case. `random`, `clock_timestamp` and
/// `gen_random_uuid` are left out: volatile, though without effect.
const PURE_FUNCTIONS: &[&str] = &[
    "abs",
    "age",
    "array_agg",
    "array_append",
    "array_cat",
    "array_length",
    "array_lower",
    "array_position",
    "array_positions",
    "array_prepend",
    "array_remove",
    "array_replace",
    "array_to_json",
    "array_to_string",
    "array_upper",
    "ascii",
    "avg",
    "bit_length",
    "bool_and",
    "bool_or",
    "btrim",
    "cardinality",
    "cbrt",
    "ceil",
    "ceiling",
    "char_length",
    "character_length",
    "chr",
    "coalesce",
    "concat",
    "concat_ws",
    "count",
    "cume_dist",
    "date_part",
    "date_trunc",
    "decode",
    "degrees",
    "dense_rank",
    "div",
    "encode",
    "every",
    "exp",
    "extract",
    "first_value",
    "floor",
    "format",
    "generate_series",
    "generate_subscripts",
    "greatest",
    "initcap",
    "isfinite",
    "json_agg",
    "json_array_elements",
    "json_array_elements_text",
    "json_array_length",
    "json_build_array",
    "json_build_object",
    "json_each",
    "json_each_text",
    "json_extract_path",
    "json_extract_path_text",
    "json_object_agg",
    "json_typeof",
    "jsonb_agg",
    "jsonb_array_elements",
    "jsonb_array_elements_text",
    "jsonb_array_length",
    "jsonb_build_array",
    "jsonb_build_object",
    "jsonb_each",
    "jsonb_each_text",
    "jsonb_extract_path",
    "jsonb_extract_path_text",
    "jsonb_object_agg",
    "jsonb_path_exists",
    "jsonb_path_query",
    "jsonb_set",
    "jsonb_strip_nulls",
    "jsonb_typeof",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "lag",
    "last_value",
    "lead",
    "least",
    "left",
    "length",
    "ln",
    "log",
    "log10",
    "lower",
    "lpad",
    "ltrim",
    "make_date",
    "make_interval",
    "make_time",
    "make_timestamp",
    "make_timestamptz",
    "max",
    "md5",
    "min",
    "mod",
    "now",
    "nth_value",
    "ntile",
    "nullif",
    "octet_length",
    "percent_rank",
    "pi",
    "position",
    "power",
    "quote_ident",
    "quote_literal",
    "quote_nullable",
    "radians",
    "rank",
    "regexp_match",
    "regexp_matches",
    "regexp_replace",
    "regexp_split_to_array",
    "repeat",
    "replace",
    "reverse",
    "right",
    "round",
    "row_number",
    "row_to_json",
    "rpad",
    "rtrim",
    "sign",
    "split_part",
    "sqrt",
    "starts_with",
    "statement_timestamp",
    "stddev",
    "string_agg",
    "string_to_array",
    "strpos",
    "substr",
    "substring",
    "sum",
    "to_char",
    "to_date",
    "to_hex",
    "to_json",
    "to_jsonb",
    "to_number",
    "to_timestamp",
    "transaction_timestamp",
    "translate",
    "trim",
    "trunc",
    "unnest",
    "upper",
    "variance",
];

fn listed(list: &[&str], word: &[u8]) -> bool {
    if word.len() > 32 {
        return false;
    }
    let mut buf = [0u8; 32];
    let lower = &mut buf[..word.len()];
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    list.binary_search_by(|w| w.as_bytes().cmp(lower)).is_ok()
}

/// Whether `sql` is a single query that provably only reads: it may then share a Sync with
/// other such units. `false` is always safe (the unit gets its own Sync).
pub fn is_read_only(sql: &str) -> bool {
    let (masked, seen) = mask_and_see(sql);
    if seen.u_amp {
        return false;
    }
    let m = masked.as_bytes();
    let raw = sql.as_bytes();
    let mut start = skip_space(m, 0);
    while m.get(start) == Some(&b'(') {
        start = skip_space(m, start + 1);
    }
    if !m.get(start).is_some_and(|&c| is_word_start(c)) {
        return false;
    }
    if !LEADING.iter().any(|k| {
        k.as_bytes()
            .eq_ignore_ascii_case(&m[start..word_end(m, start)])
    }) {
        return false;
    }
    let mut i = start;
    while i < m.len() {
        let c = m[i];
        if is_word_start(c) && (i == 0 || !is_ident(m[i - 1])) {
            let e = word_end(m, i);
            let word = &m[i..e];
            if listed_exact(&WRITING, word) {
                return false;
            }
            if is_word_at(m, i, b"for")
                && next_word(m, e).is_some_and(|(s, e2)| listed_exact(&LOCKING, &m[s..e2]))
            {
                return false;
            }
            i = e;
            continue;
        }
        match c {
            b';' if !m[i + 1..].iter().all(|&b| b.is_ascii_whitespace()) => return false,
            b'(' if !paren_is_pure(m, raw, i) => return false,
            // `(expr).f` is `f(expr)`: refused whatever `f` is.
            b'.' if m[..i].iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b')') => {
                return false
            }
            _ => {}
        }
        i += 1;
    }
    true
}

fn listed_exact(list: &[&str], word: &[u8]) -> bool {
    list.iter().any(|w| w.as_bytes().eq_ignore_ascii_case(word))
}

/// Whether the `(` at `paren` opens something other than a call of an unlisted function.
fn paren_is_pure(m: &[u8], raw: &[u8], paren: usize) -> bool {
    let Some((s, e)) = prev_word(m, paren) else {
        // After an operator, a comma or another parenthesis: grouping. Unless something
        // masked stands right before it: a quoted identifier names a function invisibly.
        return !masked_quote_before(m, raw, paren);
    };
    if raw[e..paren].contains(&b'"') || s > 0 && raw[s - 1] == b'"' {
        // A quoted name, or masked text between name and parenthesis that holds a quote.
        return false;
    }
    let word = &m[s..e];
    if word.first().is_some_and(u8::is_ascii_digit) {
        return false;
    }
    let qualified = s > 0 && m[..s].iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'.');
    if qualified {
        // Only `pg_catalog.f(...)`, for a listed `f`.
        let dot = m[..s]
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
        let Some((qs, qe)) = prev_word(m, dot) else {
            return false;
        };
        return m[qs..qe].eq_ignore_ascii_case(b"pg_catalog") && listed(PURE_FUNCTIONS, word);
    }
    listed(NOT_CALLS, word) || listed(PURE_FUNCTIONS, word)
}

/// Whether masked text (a quoted identifier, a comment) with a `"` in it ends right before
/// `paren`: `"f"(x)` and `"my f" (x)` are calls the masked text does not show.
fn masked_quote_before(m: &[u8], raw: &[u8], paren: usize) -> bool {
    let mut k = paren;
    while k > 0 && m[k - 1].is_ascii_whitespace() {
        k -= 1;
        if raw[k] == b'"' {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_and_lower_case() {
        for list in [NOT_CALLS, PURE_FUNCTIONS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "unsorted: {list:?}");
            assert!(list.iter().all(|w| w.len() <= 32
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())));
        }
    }

    #[test]
    fn plain_queries_are_read_only() {
        for sql in [
            "SELECT 1",
            "select $1::int8",
            "SELECT $1::int8 / 0",
            "SELECT id, name FROM users WHERE id = $1",
            "SELECT count(*) FROM t WHERE a IN (1, 2) AND NOT (b = 3)",
            "SELECT lower(name), coalesce(x, 0) FROM t",
            "SELECT pg_catalog.lower($1)",
            "  (SELECT 1) UNION ALL (SELECT 2);  ",
            "VALUES (1), (2)",
            "TABLE t",
            "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
            "SELECT $1::numeric(10, 2), CAST($2 AS varchar(20))",
            "SELECT row_number() OVER (PARTITION BY a ORDER BY b) FROM t",
            "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)",
            "SELECT 'insert into x; nextval(1)' AS s -- update\n",
            "SELECT id, randomnumber FROM world WHERE id = $1",
            "SELECT * FROM fortune",
        ] {
            assert!(is_read_only(sql), "should be read-only: {sql}");
        }
    }

    #[test]
    fn writes_locks_and_unknown_calls_are_not() {
        for sql in [
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            "SELECT * INTO new_table FROM t",
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t FOR NO KEY UPDATE",
            "SELECT * FROM t FOR SHARE",
            "SELECT nextval('s')",
            "SELECT pg_sleep(1)",
            "SELECT pg_advisory_lock(1)",
            "SELECT my_function(1)",
            "SELECT public.lower($1)",
            "SELECT \"my f\"(1)",
            "SELECT \"lower\" (1)",
            "SELECT (t).f FROM t",
            "SELECT random()",
            "SELECT set_config('a', 'b', false)",
            "SELECT 1; SELECT 2",
            "SELECT * FROM f(1)",
            "WITH x(a) AS (SELECT 1) SELECT a FROM x",
            "SELECT * FROM t TABLESAMPLE bernoulli(10)",
            "SET a = 1",
            "DO $$ BEGIN END $$",
            "SELECT U&\"d\\0061t\\+000061\"(1)",
            "",
            "(1)",
            "EXPLAIN SELECT 1",
        ] {
            assert!(!is_read_only(sql), "should not be read-only: {sql}");
        }
    }
}
