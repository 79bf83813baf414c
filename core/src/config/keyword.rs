//! The keyword/value form, `host=db port=5432 options='-c search_path=app'`, split into pairs
//! with libpq's rules; the values are applied by `Config::set`.

use super::bad;
use super::options::is_secret;
use crate::Error;

/// C's `isspace` in the "C" locale, which is what libpq's parser uses (it includes `\v`).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// Splits a keyword/value string into `(keyword, value)` pairs, in order.
///
/// libpq's rules: whitespace separates pairs; spaces may surround `=`; a value is either bare
/// (it ends at whitespace) or in single quotes; in both, a backslash takes the next character
/// literally (`\'`, `\\`, `\ `). Keywords are not checked here.
pub(crate) fn split(s: &str) -> Result<Vec<(String, String)>, Error> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while it.next_if(|&c| is_space(c)).is_some() {}
        if it.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = it.next_if(|&c| c != '=' && !is_space(c)) {
            key.push(c);
        }
        while it.next_if(|&c| is_space(c)).is_some() {}
        if it.next() != Some('=') {
            return Err(missing_equals(&key, pairs.last()));
        }
        while it.next_if(|&c| is_space(c)).is_some() {}
        let mut value = String::new();
        if it.next_if_eq(&'\'').is_some() {
            loop {
                match it.next() {
                    None => {
                        return Err(bad(&format!(
                            "unterminated quoted string in the value of {key:?} (close it with ')"
                        )))
                    }
                    Some('\\') => value.extend(it.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = it.next_if(|&c| !is_space(c)) {
                if c == '\\' {
                    value.extend(it.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// A word without `=`. When it follows a secret, the word may be the rest of an unquoted
/// password that contained a space, so it is not echoed.
fn missing_equals(word: &str, prev: Option<&(String, String)>) -> Error {
    match prev {
        Some((k, _)) if is_secret(k) => bad(&format!(
            "missing \"=\" after the value of {k:?} (a value with spaces must be quoted: {k}='...')"
        )),
        _ => bad(&format!(
            "missing \"=\" after {word:?} in the connection string (expected keyword=value)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(s: &str) -> Vec<(String, String)> {
        split(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn lexes_libpq_forms() {
        let table: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("   \t\n ", &[]),
            ("host=db", &[("host", "db")]),
            (
                "host = db  port= 5433 ",
                &[("host", "db"), ("port", "5433")],
            ),
            ("host =db\tport=1", &[("host", "db"), ("port", "1")]),
            ("user=''", &[("user", "")]),
            ("user=", &[("user", "")]),
            ("a= b=c", &[("a", "b=c")]),
            (r"password='it\'s'", &[("password", "it's")]),
            (r"password='back\\slash'", &[("password", r"back\slash")]),
            (r"password=bare\ space", &[("password", "bare space")]),
            (r"password=a\'b", &[("password", "a'b")]),
            (
                "options='-c search_path=app -c x=1'",
                &[("options", "-c search_path=app -c x=1")],
            ),
            ("dbname='a'user=b", &[("dbname", "a"), ("user", "b")]),
            ("password=p=w", &[("password", "p=w")]),
            (
                "application_name='héllo wörld'",
                &[("application_name", "héllo wörld")],
            ),
            ("host=a host=b", &[("host", "a"), ("host", "b")]),
            ("x=\\", &[("x", "")]),
            ("=x", &[("", "x")]),
            ("\x0bhost=a\x0b", &[("host", "a")]),
        ];
        for (s, want) in table {
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(pairs(s), want, "{s:?}");
        }
    }

    #[test]
    fn lex_errors() {
        let table = [
            ("host", "missing \"=\" after \"host\""),
            ("host db", "missing \"=\" after \"host\""),
            ("host=db port", "missing \"=\" after \"port\""),
            (
                "password='abc",
                "unterminated quoted string in the value of \"password\"",
            ),
            (
                "password='it''s'",
                "missing \"=\" after the value of \"password\"",
            ),
        ];
        for (s, want) in table {
            let e = split(s).expect_err(s).to_string();
            assert!(e.contains(want), "{s:?}: {e}");
        }
        // The second word of an unquoted password is not echoed.
        let e = split("user=u password=hunter two")
            .expect_err("split")
            .to_string();
        assert!(!e.contains("two"), "{e}");
        assert!(e.contains("must be quoted"), "{e}");
    }
}
