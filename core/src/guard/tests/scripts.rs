//! Simple-protocol texts of several statements ([`Guard::check_script`]): every statement is
//! checked, cut only at a `;` the lexer finds outside literals, quoted names and comments.

use super::*;

fn script(sql: &str) -> Option<Reason> {
    Guard::new(Mode::Strict)
        .check_script(sql)
        .err()
        .map(|r| r.reason)
}

#[test]
fn every_statement_of_a_script_is_checked() {
    assert_eq!(script("SELECT 1; SELECT 2;"), None);
    assert_eq!(script("INSERT INTO t VALUES (1); SELECT * FROM t"), None);
    assert_eq!(
        script("SELECT 1; SET search_path = evil"),
        Some(Reason::LeadingKeyword("set".into()))
    );
    assert_eq!(
        script("SELECT 1; SELECT set_config('a', 'b', false)"),
        Some(Reason::ForbiddenCall("set_config"))
    );
    // The refusal names the statement it refuses.
    let r = Guard::new(Mode::Strict)
        .check_script("SELECT 1; LISTEN c")
        .unwrap_err();
    assert_eq!(r.sql, "LISTEN c");
    // Blanks between the `;`s are no statements; a text of none is empty.
    assert_eq!(script(";; SELECT 1 ;; -- done\n"), None);
    assert_eq!(script(" ; -- ; \n"), Some(Reason::Empty));
}

#[test]
fn a_semicolon_inside_a_literal_a_name_or_a_comment_cuts_nothing() {
    // Each would hide a second statement from a cut at every `;`, or split one.
    assert_eq!(script("SELECT 'a; SET x = 1'"), None);
    assert_eq!(script("SELECT $q$; SET x = 1$q$"), None);
    assert_eq!(script("SELECT 1 AS \"; SET x\""), None);
    assert_eq!(script("SELECT 1 /* ; SET x = 1 */; SELECT 2"), None);
    assert_eq!(script("SELECT 1 -- ; SET x = 1\n; SELECT 2"), None);
    assert_eq!(script("SELECT E'\\'; SET x = 1'"), None);
    // And one outside them still cuts.
    assert_eq!(
        script("SELECT 'a;'; SET x = 1"),
        Some(Reason::LeadingKeyword("set".into()))
    );
}

#[test]
fn a_semicolon_the_server_would_not_cut_at_refuses_or_fails_whole() {
    // Inside parentheses: the server refuses the whole text (a syntax error) before running
    // any of it; here the piece after the cut is no statement the guard admits.
    assert!(script("SELECT (1; SET x = 1)").is_some());
    // A body of BEGIN ATOMIC: the cut leaves a CREATE, which is refused.
    assert!(script("CREATE FUNCTION f() RETURNS int BEGIN ATOMIC SELECT 1; END").is_some());
}
