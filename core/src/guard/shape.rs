//! What the driver reads off a statement's text to check the server's answers to it, apart
//! from the guard's verdict: how many parameters the server will say it takes, and the verb
//! its completion carries. Both on the masked text, so literals, comments and quoted names
//! count for nothing.

use super::lex::{is_ident, is_word_start};
use super::mask::mask;

/// The parameters the server reports for `sql` prepared without parameter types: its highest
/// `$n` (0 without any). As PostgreSQL's lexer reads it: `$` inside an identifier (`a$1`) is
/// part of it, and a number ends before a `$`.
pub(crate) fn placeholders(sql: &str) -> usize {
    let masked = mask(sql);
    let b = masked.as_bytes();
    let (mut i, mut highest) = (0, 0usize);
    while i < b.len() {
        let c = b[i];
        if is_word_start(c) {
            i += 1;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
        } else if c == b'$' {
            let digits = b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
            let n = b[i + 1..i + 1 + digits].iter().fold(0usize, |n, d| {
                n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
            });
            highest = highest.max(n);
            i += 1 + digits;
        } else {
            i += 1;
        }
    }
    highest
}

/// The first word of the CommandComplete an execution of `sql` must carry, where its first
/// keyword fixes it: `SELECT` for SELECT, VALUES and TABLE; the statement's own for INSERT,
/// UPDATE, DELETE and MERGE (rules keep it too: PostgreSQL reports the original command's
/// type). `None` where it does not (WITH, a parenthesized query, anything else).
pub(crate) fn command_verb(sql: &str) -> Option<&'static str> {
    let masked = mask(sql);
    let b = masked.as_bytes();
    let start = b.iter().position(|&c| !super::lex::is_space(c))?;
    let len = b[start..].iter().take_while(|&&c| is_ident(c)).count();
    let word = &b[start..start + len];
    let is = |kw: &str| word.eq_ignore_ascii_case(kw.as_bytes());
    if is("select") || is("values") || is("table") {
        Some("SELECT")
    } else {
        ["INSERT", "UPDATE", "DELETE", "MERGE"]
            .into_iter()
            .find(|kw| is(kw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_the_highest_dollar_number_outside_quotes_and_names() {
        for (sql, n) in [
            ("SELECT 1", 0),
            ("SELECT $1", 1),
            ("SELECT $2, $1::int", 2),
            ("SELECT $1 + $12", 12),
            ("SELECT '$5', $1", 1),
            ("SELECT $1 -- $9", 1),
            ("SELECT /* $9 */ $3", 3),
            ("SELECT $$ $9 $$, $2", 2),
            ("SELECT $q$ $9 $q$, $2", 2),
            ("SELECT \"$9\", $2", 2),
            ("SELECT a$1, $2 FROM t", 2),
            ("SELECT x1$4 FROM t WHERE y = $1", 1),
            ("SELECT 1$1", 1),
            ("SELECT E'\\' $7', $1", 1),
            ("select $1 from t where v in ($3)", 3),
        ] {
            assert_eq!(placeholders(sql), n, "{sql}");
        }
    }

    #[test]
    fn the_completion_verb_follows_the_first_keyword() {
        for (sql, verb) in [
            ("SELECT 1", Some("SELECT")),
            ("  -- c\n values (1)", Some("SELECT")),
            ("TABLE t", Some("SELECT")),
            ("insert into t values (1)", Some("INSERT")),
            ("/* x */ UPDATE t SET v = 1", Some("UPDATE")),
            ("DELETE FROM t", Some("DELETE")),
            (
                "MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE",
                Some("MERGE"),
            ),
            ("WITH x AS (SELECT 1) SELECT * FROM x", None),
            ("(SELECT 1)", None),
            ("selector", None),
            ("", None),
        ] {
            assert_eq!(command_verb(sql), verb, "{sql}");
        }
    }
}
