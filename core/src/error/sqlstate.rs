//! SQLSTATE codes. The named constants and the condition names are generated from PostgreSQL's
//! own error-code table (`errcodes.txt`) into `sqlstate_consts.rs` (one constant per code) and
//! `sqlstate_names.rs` (the sorted tables of condition names and class titles); a unit test
//! regenerates them and fails when a checked-in file differs from what the server's table gives.

use std::borrow::Cow;
use std::fmt;

/// A SQLSTATE code: five characters, the first two its class. Compare with the constants
/// (`e.code() == Some(&SqlState::UNIQUE_VIOLATION)`) or as text (`code == "23505"`).
///
/// Every code PostgreSQL defines has a constant, named after its condition name
/// (`unique_violation` is [`SqlState::UNIQUE_VIOLATION`]); where two codes share a condition
/// name, after PostgreSQL's own macro (`WARNING_STRING_DATA_RIGHT_TRUNCATION` for `01004`,
/// `STRING_DATA_RIGHT_TRUNCATION` for `22001`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SqlState(Cow<'static, str>);

impl SqlState {
    /// The code as the server sent it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The class: the code's first two characters (`23` for integrity constraint violations).
    pub fn class(&self) -> &str {
        self.0.get(..2).unwrap_or(&self.0)
    }

    /// The condition name PostgreSQL gives this code (`unique_violation` for `23505`: the name
    /// PL/pgSQL's `EXCEPTION WHEN` uses), or `None` for a code PostgreSQL does not define.
    pub fn condition_name(&self) -> Option<&'static str> {
        lookup(&self.0).map(|(_, name)| name)
    }

    /// The title of the code's class (`Integrity Constraint Violation` for class `23`), or
    /// `None` for a class PostgreSQL does not define.
    pub fn class_title(&self) -> Option<&'static str> {
        let class = self.class();
        CLASSES
            .binary_search_by(|(c, _)| (*c).cmp(class))
            .ok()
            .map(|i| CLASSES[i].1)
    }

    /// The code's severity in PostgreSQL's table: a success (class `00`), a warning (classes
    /// `01` and `02`) or an error.
    pub fn is_error(&self) -> bool {
        !matches!(self.class(), "00" | "01" | "02")
    }

    /// A code as the server sent it; a known code borrows the table's text (no allocation).
    pub(crate) fn from_server(code: String) -> SqlState {
        match lookup(&code) {
            Some((known, _)) => SqlState(Cow::Borrowed(known)),
            None => SqlState(Cow::Owned(code)),
        }
    }

    /// A code from text (for comparing with, or building test errors); known codes borrow.
    pub fn from_code(code: &str) -> SqlState {
        match lookup(code) {
            Some((known, _)) => SqlState(Cow::Borrowed(known)),
            None => SqlState(Cow::Owned(code.to_owned())),
        }
    }
}

fn lookup(code: &str) -> Option<(&'static str, &'static str)> {
    CODES
        .binary_search_by(|(c, _)| (*c).cmp(code))
        .ok()
        .map(|i| CODES[i])
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for SqlState {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SqlState {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

include!("sqlstate_consts.rs");
include!("sqlstate_names.rs");

#[cfg(test)]
mod tests {
    use super::*;

    /// Where PostgreSQL 15 (the version the table was generated from) installs its table.
    const ERRCODES: &str = "/usr/share/postgresql/15/errcodes.txt";

    #[test]
    fn sql_states_compare_as_constants_and_text() {
        let from_server = SqlState::from_server("40001".to_owned());
        assert_eq!(from_server, SqlState::SERIALIZATION_FAILURE);
        assert!(matches!(from_server.0, Cow::Borrowed(_)));
        assert!(from_server == "40001");
        assert_eq!(from_server.class(), "40");
        assert_eq!(from_server.condition_name(), Some("serialization_failure"));
        assert_eq!(from_server.class_title(), Some("Transaction Rollback"));
        assert!(from_server.is_error());
        let unknown = SqlState::from_server("4".to_owned());
        assert_eq!(unknown.class(), "4");
        assert_eq!(unknown.condition_name(), None);
        assert_eq!(SqlState::from_code("ZZ999").class_title(), None);
        assert_ne!(SqlState::DEADLOCK_DETECTED, SqlState::SERIALIZATION_FAILURE);
        assert_eq!(SqlState::INVALID_PASSWORD, "28P01");
        assert_eq!(SqlState::UNDEFINED_DATABASE, SqlState::INVALID_CATALOG_NAME);
        assert!(!SqlState::WARNING.is_error());
    }

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(CODES.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(CLASSES.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(CODES.len() >= 260, "{}", CODES.len());
    }

    /// The checked-in tables are exactly what PostgreSQL's `errcodes.txt` generates. Where the
    /// server's table is installed (always in CI, which installs PostgreSQL 15) they must match;
    /// `PGPIPE_BLESS=1` rewrites `sqlstate_consts.rs` and `sqlstate_names.rs` from it.
    #[test]
    fn sqlstate_table_is_postgresqls() {
        let Ok(source) = std::fs::read_to_string(ERRCODES) else {
            eprintln!("note: {ERRCODES} not found (package postgresql-15); table not compared");
            return;
        };
        let (consts, names) = generate(&source);
        let check = |file: &str, generated: String, checked_in: &str| {
            if std::env::var_os("PGPIPE_BLESS").is_some() {
                let path = format!("{}/src/error/{file}", env!("CARGO_MANIFEST_DIR"));
                std::fs::write(path, &generated).expect("write the generated table");
            }
            assert!(
                generated == checked_in,
                "{file} differs from {ERRCODES}: rerun this test with PGPIPE_BLESS=1"
            );
        };
        let (consts_rs, names_rs) = (
            include_str!("sqlstate_consts.rs"),
            include_str!("sqlstate_names.rs"),
        );
        check("sqlstate_consts.rs", consts, consts_rs);
        check("sqlstate_names.rs", names, names_rs);
    }

    /// Renders `errcodes.txt` as Rust: one constant per code (and per alias), for
    /// `sqlstate_consts.rs`; the sorted `(code, condition name)` table and the sorted
    /// `(class, title)` table, for `sqlstate_names.rs`.
    fn generate(source: &str) -> (String, String) {
        struct Line<'a> {
            code: &'a str,
            mac: &'a str,
            condition: Option<&'a str>,
        }
        let mut lines = Vec::new();
        let mut classes = Vec::new();
        for line in source.lines() {
            if let Some(rest) = line.strip_prefix("Section: Class ") {
                let (class, title) = rest.split_once(" - ").expect("Section: Class XX - Title");
                let title = title.split(" (").next().unwrap_or(title);
                classes.push((class.to_owned(), title.trim().to_owned()));
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 3 || f[0].len() != 5 {
                continue;
            }
            lines.push(Line {
                code: f[0],
                mac: f[2].strip_prefix("ERRCODE_").unwrap_or(f[2]),
                condition: f.get(3).copied(),
            });
        }
        let shared = |c: &str| lines.iter().filter(|l| l.condition == Some(c)).count() > 1;
        let mut consts: Vec<(String, &str, &str)> = Vec::new();
        let mut codes: Vec<(&str, &str)> = Vec::new();
        for l in &lines {
            let name = match l.condition {
                Some(c) if !shared(c) => c.to_ascii_uppercase(),
                _ => l.mac.to_owned(),
            };
            if let Some(c) = l.condition {
                codes.push((l.code, c));
            }
            let condition = l
                .condition
                .or_else(|| lines.iter().find(|o| o.code == l.code)?.condition)
                .unwrap_or("");
            consts.push((name, l.code, condition));
        }
        let mut names: Vec<&str> = consts.iter().map(|c| c.0.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), consts.len(), "two constants with one name");
        codes.sort_unstable();
        codes.dedup_by(|a, b| a.0 == b.0);
        classes.sort();

        let header = "// Generated from PostgreSQL 15's errcodes.txt by the unit test\n\
                      // `sqlstate_table_is_postgresqls` (run it with PGPIPE_BLESS=1); do not edit.\n";
        let mut out = format!(
            "{header}// The named constants: one per SQLSTATE code (and per alias).\n\n\
             impl SqlState {{\n"
        );
        for (name, code, condition) in &consts {
            let class = &code[..2];
            let title = classes
                .iter()
                .find(|(c, _)| c == class)
                .map_or("", |(_, t)| t.as_str());
            out += &format!(
                "    /// `{code}` {condition} (class {class}, {title}).\n    \
                 pub const {name}: SqlState = SqlState(Cow::Borrowed(\"{code}\"));\n"
            );
        }
        out += "}\n";
        let mut lookup = format!(
            "{header}// The lookup tables: condition names by code, class titles by class.\n\n\
             /// Every code with its condition name, sorted by code.\n\
             static CODES: &[(&str, &str)] = &[\n"
        );
        for (code, condition) in &codes {
            lookup += &format!("    (\"{code}\", \"{condition}\"),\n");
        }
        lookup += "];\n\n/// Every class with its title, sorted by class.\n\
                  static CLASSES: &[(&str, &str)] = &[\n";
        for (class, title) in &classes {
            lookup += &format!("    (\"{class}\", \"{title}\"),\n");
        }
        lookup += "];\n";
        (out, lookup)
    }
}
