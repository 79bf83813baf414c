//! The table: the guard's verdict, in both modes, on cases for every rule, every statement
//! allowed on purpose and the known traps; and the reference rules checked against it.

use pgpipe::guard::{mask, Guard, Mode, Reason};

use crate::guard_oracle::{expectation, Expect, SESSION_FUNCTIONS, STRICT_ONLY};

/// The verdict of a fresh guard (so no cached verdict is involved).
pub(crate) fn verdict(mode: Mode, sql: &str) -> Option<Reason> {
    Guard::new(mode).check(sql).err().map(|r| r.reason)
}

/// Checks every `(sql, expected)` in both modes (none of these rows uses a strict-only name).
fn table(rows: &[(&str, Option<Reason>)]) {
    let mut failures = Vec::new();
    for (sql, want) in rows {
        for mode in [Mode::Default, Mode::Strict] {
            let got = verdict(mode, sql);
            if &got != want {
                failures.push(format!("{mode:?} {sql:?}: got {got:?}, want {want:?}"));
            }
            // The oracle's one-sided judgement never contradicts a row.
            let oracle = expectation(sql, mode);
            if !oracle.fits(want) {
                failures.push(format!(
                    "{mode:?} {sql:?}: oracle {oracle:?}, want {want:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

const OK: Option<Reason> = None;

pub(crate) fn call(name: &'static str) -> Option<Reason> {
    Some(Reason::ForbiddenCall(name))
}

fn leading(word: &str) -> Option<Reason> {
    Some(Reason::LeadingKeyword(word.to_owned()))
}

#[test]
fn leading_keyword() {
    table(&[
        ("SELECT 1", OK),
        ("select 1", OK),
        ("SeLeCt 1", OK),
        ("INSERT INTO t VALUES ($1)", OK),
        ("UPDATE t SET a = $1 WHERE id = $2", OK),
        ("DELETE FROM t WHERE id = $1", OK),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DO NOTHING",
            OK,
        ),
        ("VALUES (1), (2)", OK),
        ("WITH x AS (SELECT 1) SELECT * FROM x", OK),
        ("  \n\t SELECT 1", OK),
        ("/* hello */ SELECT 1", OK),
        ("-- hello\nSELECT 1", OK),
        ("/* a /* nested */ b */SELECT 1", OK),
        ("SELECT*FROM t", OK),
        ("", Some(Reason::Empty)),
        ("   \n ", Some(Reason::Empty)),
        ("-- only a comment", Some(Reason::Empty)),
        ("/* only a comment */", Some(Reason::Empty)),
        (";", Some(Reason::Empty)),
        ("(SELECT 1)", OK),
        ("(SELECT 1) UNION (SELECT 2)", OK),
        ("(1)", Some(Reason::Empty)),
        ("'SELECT' 1", Some(Reason::Empty)),
        ("123", Some(Reason::Empty)),
        ("SET x = 1", leading("set")),
        ("set search_path = evil", leading("set")),
        ("RESET ALL", leading("reset")),
        ("BEGIN", leading("begin")),
        ("START TRANSACTION", leading("start")),
        ("COMMIT", leading("commit")),
        ("LISTEN channel", leading("listen")),
        ("NOTIFY channel", leading("notify")),
        ("COPY t TO STDOUT", leading("copy")),
        ("CREATE TEMP TABLE t (a int)", leading("create")),
        ("PREPARE p AS SELECT 1", leading("prepare")),
        (
            "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
            leading("declare"),
        ),
        ("DISCARD ALL", leading("discard")),
        ("LOCK TABLE t", leading("lock")),
        ("DO $$ BEGIN PERFORM 1; END $$", leading("do")),
        ("CALL p()", leading("call")),
        ("EXPLAIN SELECT 1", leading("explain")),
        ("TABLE t", OK),
        ("SELECT$1", leading("select$1")),
        ("selectx 1", leading("selectx")),
        // A quoted name is never a keyword.
        ("\"SET\" x = 1", Some(Reason::Empty)),
    ]);
}

#[test]
fn single_statement() {
    table(&[
        ("SELECT 1;", OK),
        ("SELECT 1;  ", OK),
        ("SELECT 1;\n\t\r\n", OK),
        ("SELECT 1; -- done", OK),
        ("SELECT 1; /* done */", OK),
        ("SELECT ';' , 1", OK),
        ("SELECT $$;$$, 1", OK),
        ("SELECT 1 -- ; SET x = 1", OK),
        ("SELECT 1; SELECT 2", Some(Reason::MultipleStatements)),
        ("SELECT 1;SET x = 1", Some(Reason::MultipleStatements)),
        // Empty statements are nothing: the server runs one statement (the extended protocol
        // too).
        ("SELECT 1;;", OK),
        ("SELECT 1; ;", OK),
        ("SELECT 1; ; SELECT 2", Some(Reason::MultipleStatements)),
        // A literal after the `;` is a token of a second statement (the server rejects it).
        ("SELECT 1; 'x'", Some(Reason::MultipleStatements)),
        (
            "SELECT 1;\n-- c\nSET x = 1",
            Some(Reason::MultipleStatements),
        ),
        // The reason does not depend on position: the second statement wins over a call.
        (
            "SELECT set_config('a', 'b', false); SELECT 2",
            Some(Reason::MultipleStatements),
        ),
    ]);
}

#[test]
fn every_session_function_is_refused_in_every_spelling() {
    let mut rows = Vec::new();
    for name in SESSION_FUNCTIONS {
        let upper = name.to_ascii_uppercase();
        for sql in [
            format!("SELECT {name}(1)"),
            format!("SELECT {upper}(1)"),
            format!("SELECT {name} (1)"),
            format!("SELECT {name}\n\t(1)"),
            format!("SELECT {name}/* c */(1)"),
            format!("SELECT {name}-- c\n(1)"),
            format!("SELECT pg_catalog.{name}(1)"),
            format!("SELECT pg_catalog . {name} (1)"),
            format!("SELECT \"{name}\"(1)"),
            format!("SELECT \"pg_catalog\".\"{name}\"(1)"),
            format!("SELECT U&\"{name}\"(1)"),
            format!("SELECT 1 FROM t WHERE x = ({name}(1))"),
            format!("WITH a AS (SELECT {name}(1)) SELECT * FROM a"),
            format!("SELECT 'x', {name}('y')"),
        ] {
            rows.push((sql, call(name)));
        }
    }
    let rows: Vec<(&str, Option<Reason>)> =
        rows.iter().map(|(s, r)| (s.as_str(), r.clone())).collect();
    table(&rows);
}

#[test]
fn allowed_on_purpose() {
    table(&[
        ("SELECT pg_advisory_xact_lock(1)", OK),
        ("SELECT pg_try_advisory_xact_lock(1)", OK),
        ("SELECT pg_advisory_xact_lock_shared(1)", OK),
        ("SELECT pg_try_advisory_xact_lock_shared(1)", OK),
        ("SELECT lo_get(16384)", OK),
        ("SELECT lo_put(16384, 0, '\\x00')", OK),
        (
            "SELECT * FROM dblink('dbname=x', 'SELECT 1') AS t(a int)",
            OK,
        ),
        ("SELECT my_set_config('a', 'b')", OK),
        ("SELECT set_config_x(1)", OK),
        ("SELECT xset_config(1)", OK),
        ("SELECT a$set_config(1)", OK),
        ("SELECT set_config$(1)", OK),
        ("SELECT set_config FROM t", OK),
        ("SELECT set_config, setseed FROM t", OK),
        ("SELECT current_setting('search_path')", OK),
        ("SELECT * FROM temp_table", OK),
        ("SELECT * FROM temp", OK),
        ("INSERT INTO temp_table VALUES (1)", OK),
        ("INSERT INTO pg_temporary.t VALUES (1)", OK),
        ("INSERT INTO my_pg_temp.t VALUES (1)", OK),
        ("INSERT INTO pg_temp_x.t VALUES (1)", OK),
        ("INSERT INTO pg_temp_1x.t VALUES (1)", OK),
        ("SELECT 'into temp t', 'set_config(1)'", OK),
        ("SELECT uescape FROM t", OK),
        ("SELECT U&'d\\0061t'", OK),
        ("SELECT U&\"plain_name\" FROM t", OK),
    ]);
    for name in STRICT_ONLY {
        assert_eq!(verdict(Mode::Default, &format!("SELECT {name}('s')")), None);
    }
    assert_eq!(verdict(Mode::Default, "SELECT setval('s', 42, true)"), None);
}

#[test]
fn strict_mode_also_refuses_sequence_and_snapshot_calls() {
    for name in STRICT_ONLY {
        for sql in [
            format!("SELECT {name}('s')"),
            format!("SELECT pg_catalog.{}  ('s')", name.to_ascii_uppercase()),
            format!("INSERT INTO t VALUES (\"{name}\"/**/('s'))"),
        ] {
            assert_eq!(verdict(Mode::Strict, &sql), call(name), "{sql}");
            assert_eq!(verdict(Mode::Default, &sql), None, "{sql}");
        }
    }
    assert_eq!(verdict(Mode::Strict, "SELECT my_nextval('s')"), None);
    assert_eq!(verdict(Mode::Strict, "SELECT 'nextval(1)'"), None);
}

#[test]
fn into_temp_and_pg_temp() {
    let temp = Some(Reason::IntoTemp);
    let pg_temp = Some(Reason::IntoPgTemp);
    table(&[
        ("SELECT * INTO TEMP t FROM x", temp.clone()),
        ("SELECT * INTO TEMPORARY t FROM x", temp.clone()),
        ("select * into temp table t from x", temp.clone()),
        ("SELECT * INTO GLOBAL TEMP t FROM x", temp.clone()),
        ("SELECT * INTO LOCAL TEMPORARY t FROM x", temp.clone()),
        ("SELECT * INTO\n\tTEMP\nt FROM x", temp.clone()),
        ("SELECT * INTO/* c */TEMP t FROM x", temp.clone()),
        ("SELECT * INTO \"temp\" FROM x", OK), // a table named temp
        ("SELECT * INTO TEMP \"t\" FROM x", temp.clone()),
        ("INSERT INTO temp.readings VALUES (1)", OK), // a schema named temp
        ("INSERT INTO temp VALUES (1)", OK),
        ("SELECT * INTO pg_temp.t FROM x", pg_temp.clone()),
        ("SELECT * INTO TABLE pg_temp.t FROM x", pg_temp.clone()),
        ("SELECT * INTO pg_temp_3.t FROM x", pg_temp.clone()),
        ("SELECT * INTO PG_TEMP . t FROM x", pg_temp.clone()),
        ("SELECT * INTO \"pg_temp\".t FROM x", pg_temp.clone()),
        ("SELECT * INTO U&\"pg_temp\".t FROM x", pg_temp.clone()),
        (
            "SELECT * INTO TABLE u&\"pg_temp_3\" . t FROM x",
            pg_temp.clone(),
        ),
        // No admitted statement creates a temporary table, so these fail on the server.
        ("INSERT INTO pg_temp.t VALUES (1)", OK),
        ("INSERT INTO pg_temp_12.t (a) VALUES (1)", OK),
        (
            "MERGE INTO pg_temp.t USING s ON true WHEN MATCHED THEN DO NOTHING",
            OK,
        ),
        ("SELECT * INTO t FROM x", OK),
        ("SELECT * INTO UNLOGGED t FROM x", OK),
        ("SELECT * INTO pg_temp FROM x", OK), // a table named pg_temp, no schema
        ("SELECT * FROM pg_temp.t", OK),      // reading: no INTO
        ("SELECT * INTO 'temp'", OK),
        ("SELECT into_temp FROM t", OK),
    ]);
}

#[test]
fn unicode_escapes() {
    table(&[
        (
            "SELECT U&\"\\0073et_config\"('a', 'b', false)",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        (
            "SELECT u&\"d\\0061t\" FROM t",
            Some(Reason::UnicodeEscapedIdentifier),
        ),
        // Without escapes a U& name is the name, exactly as a quoted one.
        ("SELECT U&\"with space\" FROM t", OK),
        // The server rejects an unterminated name: nothing runs.
        ("SELECT U&\"unterminated", OK),
        ("SELECT U&'d!0061t' UESCAPE '!'", Some(Reason::Uescape)),
        ("SELECT U&\"plain\" UESCAPE '!'", Some(Reason::Uescape)),
        // A quoted name is never the keyword.
        ("SELECT U&'x', \"uescape\" FROM t", OK),
        ("SELECT U&'x', 'UESCAPE'", OK),
        ("SELECT xU&\"a b\" FROM t", OK), // `xU` is an identifier, then `&`, then a quoted one
        ("SELECT 1 UESCAPE", OK),
    ]);
}

/// The traps named in the issue, plus the ones met while writing the masker.
#[test]
fn masking_traps() {
    let set_config = call("set_config");
    table(&[
        // A quoted identifier containing `(` creates no call.
        ("SELECT \"weird(col\" FROM t", OK),
        ("SELECT setseed \"(x\" FROM t", OK),
        // standard_conforming_strings: in a plain literal a backslash is not an escape.
        (
            "SELECT 'a\\', set_config('x', 'y', false)",
            set_config.clone(),
        ),
        (
            "SELECT 'a\\' , set_config('x','y',false) --'",
            set_config.clone(),
        ),
        // In an E'' literal it is.
        ("SELECT E'it\\'s', 1", OK),
        ("SELECT E'it\\'s set_config(1)'", OK),
        (
            "SELECT e'\\\\', set_config('x', 'y', false)",
            set_config.clone(),
        ),
        // ...but only when E starts the token.
        (
            "SELECT typeE'\\' , set_config('a','b',false) --'",
            set_config.clone(),
        ),
        // Glued literal segments keep E'' mode.
        (
            "SELECT E'a'\n'\\' , x ', (set_config('a','b',false)) --'",
            set_config.clone(),
        ),
        (
            "SELECT E'a' -- c\n'\\' , x ', set_config('a','b',false) --'",
            set_config.clone(),
        ),
        (
            "SELECT 'a'\n'b', set_config('a','b',false)",
            set_config.clone(),
        ),
        // Without a newline between them, the second literal is a new, plain one.
        (
            "SELECT E'a' '\\', set_config('a','b',false) --'",
            set_config.clone(),
        ),
        // Nested comments.
        ("SELECT 1 /* /* */ set_config( */", OK),
        ("SELECT 1 /* /* */ set_config('a','b',false) */", OK),
        (
            "SELECT 1 /* /* */ */ , set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT 1 /* unterminated set_config(", OK),
        ("SELECT 1 -- set_config(\n, 2", OK),
        (
            "SELECT 1 -- c\r, set_config('a','b',false)",
            set_config.clone(),
        ),
        // Dollar quotes.
        ("SELECT $$ set_config('a','b',false) $$", OK),
        ("SELECT $tag$ set_config('a','b',false) $tag$", OK),
        (
            "SELECT $tag$ $other$ $tag$, set_config('a','b',false)",
            set_config.clone(),
        ),
        (
            "SELECT $a$ $$ $a$, set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT $тег$ set_config('a','b',false) $тег$", OK),
        (
            "SELECT $тег$x$тег$ || set_config('a','b',false)",
            set_config.clone(),
        ),
        ("SELECT $unterminated$ set_config(", OK),
        // `$1` is a parameter, not a tag; `a$b$` is an identifier, not a quote.
        ("SELECT $1, set_config('a', $2, false)", set_config.clone()),
        (
            "SELECT a$b$ , set_config('x','y',false) , $b$ FROM t",
            set_config.clone(),
        ),
        // Masking can create a match, so the raw text never rules one out.
        (
            "SELECT set_config/* c */('a','b',false)",
            set_config.clone(),
        ),
        // Quoted plain identifiers stay visible.
        ("SELECT \"set_config\"('a','b',false)", set_config.clone()),
        // A quoted name is exact: this is another function (which does not exist).
        ("SELECT \"SET_CONFIG\"('a','b',false)", OK),
        ("SELECT \"set config\"('a','b',false)", OK),
        ("SELECT \"a\"\"b\"(1)", OK),
        (
            "SELECT pg_catalog.set_config('a','b',false)",
            set_config.clone(),
        ),
    ]);
    // Strict-only names, so outside the table (which checks both modes).
    assert_eq!(verdict(Mode::Default, "SELECT nextval/* c */('s')"), None);
    assert_eq!(
        verdict(Mode::Strict, "SELECT nextval/* c */('s')"),
        call("nextval")
    );
}

#[test]
fn mask_examples() {
    // `#` marks a masked byte.
    for (sql, want) in [
        ("SELECT 'a''b', x", "SELECT ######, x"),
        ("SELECT E'\\'' x", "SELECT E#### x"),
        ("SELECT \"Col\", \"a b\"", "SELECT #Col#, #####"),
        ("SELECT 1 -- é\n", "SELECT 1 #####\n"),
        ("SELECT /* a\n */ 1", "SELECT ####\n### 1"),
        ("SELECT $тег$x$тег$", "SELECT #################"),
        ("SELECT U&'x' UESCAPE '!'", "SELECT U&### UESCAPE ###"),
        ("SELECT U&\"a\", U&\"b c\"", "SELECT ###a#, #######"),
    ] {
        assert_eq!(mask(sql), want.replace('#', " "), "{sql:?}");
    }
}

#[test]
fn reference_agrees_with_the_table() {
    // The reference itself must be right before it can judge the guard.
    for (sql, want) in [
        (
            "SELECT E'a'\n'\\' , x ', (set_config('a','b',false)) --'",
            call("set_config"),
        ),
        (
            "SELECT $тег$x$тег$ || set_config('a','b',false)",
            call("set_config"),
        ),
        ("SELECT 1 /* /* */ set_config( */", None),
        (
            "UPDATE ONLY (pg_catalog.pg_settings) SET setting = 'x'",
            Some(Reason::UpdatePgSettings),
        ),
        ("SELECT U&'x' UESCAPE '!'", Some(Reason::Uescape)),
        ("SELECT 1; SELECT 2", Some(Reason::MultipleStatements)),
    ] {
        let got = expectation(sql, Mode::Default);
        let fits = match &want {
            Some(w) => got == Expect::Refuse(w.clone()) || matches!(got, Expect::RefuseAny(_)),
            None => got == Expect::Admit,
        };
        assert!(fits, "{sql:?}: {got:?}, want {want:?}");
    }
}
