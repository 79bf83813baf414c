//! A refusal as the caller sees it: what kind of statement it was, why it was refused and what
//! to run instead.

use std::fmt;

use super::Reason;

/// A statement the guard refused for the shared path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule that refused it.
    pub reason: Reason,
    /// The statement, shortened to its first [`SHOWN_CHARS`] characters plus `…` if longer.
    pub sql: String,
}

/// How many characters of the refused SQL a [`Refusal`] keeps.
pub const SHOWN_CHARS: usize = 120;

/// What kind of statement was refused, which decides what to do instead.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalKind {
    /// Not a statement PostgreSQL knows: empty, or a first word that is no SQL command (a typo
    /// such as `SELEC`). Fix the text; no other path would run it either.
    Unrecognized,
    /// A statement that changes (or reads) session state: SET, transaction control, LISTEN,
    /// PREPARE, cursors, temp tables, session functions such as `set_config`. It belongs in
    /// `session()` or `transaction()`; a setting every connection should have belongs in the
    /// connection string's `options`.
    SessionChanging,
    /// A statement the guard cannot prove leaves no session state behind (DDL and other utility
    /// commands, several statements in one text, SQL run from text, escaped identifiers). It may
    /// well be harmless; it runs in `session()` or `transaction()`.
    NotProvablyNeutral,
}

/// First words that are PostgreSQL commands changing or using session state.
const SESSION_COMMANDS: &[&str] = &[
    "abort",
    "begin",
    "close",
    "commit",
    "deallocate",
    "declare",
    "discard",
    "end",
    "execute",
    "fetch",
    "listen",
    "load",
    "lock",
    "move",
    "prepare",
    "release",
    "reset",
    "rollback",
    "savepoint",
    "set",
    "start",
    "unlisten",
];

/// First words that are PostgreSQL commands the guard does not analyse.
const OTHER_COMMANDS: &[&str] = &[
    "alter",
    "analyze",
    "analyse",
    "call",
    "checkpoint",
    "cluster",
    "comment",
    "copy",
    "create",
    "do",
    "drop",
    "explain",
    "grant",
    "import",
    "notify",
    "reassign",
    "refresh",
    "reindex",
    "revoke",
    "security",
    "show",
    "truncate",
    "vacuum",
];

/// Transaction control and what only makes sense inside a transaction.
const TRANSACTION_COMMANDS: &[&str] = &[
    "abort",
    "begin",
    "commit",
    "end",
    "lock",
    "release",
    "rollback",
    "savepoint",
    "start",
];

impl Reason {
    /// What kind of statement this rule refuses.
    pub fn kind(&self) -> RefusalKind {
        match self {
            Reason::Empty => RefusalKind::Unrecognized,
            Reason::LeadingKeyword(k) if SESSION_COMMANDS.contains(&k.as_str()) => {
                RefusalKind::SessionChanging
            }
            Reason::LeadingKeyword(k) if OTHER_COMMANDS.contains(&k.as_str()) => {
                RefusalKind::NotProvablyNeutral
            }
            Reason::LeadingKeyword(_) => RefusalKind::Unrecognized,
            Reason::ForbiddenCall(_)
            | Reason::SessionView(_)
            | Reason::IntoTemp
            | Reason::IntoPgTemp
            | Reason::UpdatePgSettings => RefusalKind::SessionChanging,
            Reason::MultipleStatements
            | Reason::SqlTextCall(_)
            | Reason::ExtensionFunction(_)
            | Reason::UnicodeEscapedIdentifier
            | Reason::Uescape
            | Reason::TooDeep => RefusalKind::NotProvablyNeutral,
        }
    }

    /// Whether this is a setting: SET, RESET, `set_config` or an UPDATE of `pg_settings`.
    fn is_setting(&self) -> bool {
        match self {
            Reason::LeadingKeyword(k) => k == "set" || k == "reset",
            Reason::ForbiddenCall(name) => *name == "set_config",
            Reason::UpdatePgSettings => true,
            _ => false,
        }
    }
}

impl Refusal {
    pub(super) fn new(reason: Reason, sql: &str) -> Refusal {
        Refusal {
            reason,
            sql: shorten(sql, SHOWN_CHARS),
        }
    }

    /// What kind of statement was refused.
    pub fn kind(&self) -> RefusalKind {
        self.reason.kind()
    }

    /// What to run instead, as one clause (`use transaction()`, ...).
    pub fn advice(&self) -> String {
        let kind = self.kind();
        match &self.reason {
            Reason::Empty => return "there is no statement to run".to_owned(),
            Reason::LeadingKeyword(_) if kind == RefusalKind::Unrecognized => {
                return "check its spelling".to_owned()
            }
            Reason::LeadingKeyword(k) if TRANSACTION_COMMANDS.contains(&k.as_str()) => {
                return "run transactions with transaction() (and savepoints with its \
                        savepoint())"
                    .to_owned()
            }
            Reason::LeadingKeyword(k) if k == "listen" || k == "unlisten" => {
                return "listen in session() and read its notifications()".to_owned()
            }
            Reason::ExtensionFunction(name) => {
                return format!(
                    "run it in session() or transaction(); if it keeps no session state, allow \
                     it on the shared path with guard_allow_functions={name}"
                )
            }
            _ => {}
        }
        if self.reason.is_setting() {
            let option = match set_parts(&self.sql) {
                Some((name, value)) => format!("options=-c {name}={value}"),
                None => "options=-c name=value".to_owned(),
            };
            return format!(
                "run it in session() (or SET LOCAL in transaction()); a setting every \
                 connection should have goes in the connection string: {option}"
            );
        }
        match kind {
            RefusalKind::NotProvablyNeutral => {
                "run it in session() or transaction(), which take a connection of their own"
                    .to_owned()
            }
            _ => "run it in session() or transaction()".to_owned(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind() {
            RefusalKind::Unrecognized => match &self.reason {
                Reason::LeadingKeyword(k) => format!("`{k}` is not a PostgreSQL statement"),
                other => other.to_string(),
            },
            RefusalKind::SessionChanging => match &self.reason {
                Reason::LeadingKeyword(k) => {
                    format!("`{}` changes session state", k.to_ascii_uppercase())
                }
                other => format!("{other}, which changes session state"),
            },
            RefusalKind::NotProvablyNeutral => match &self.reason {
                Reason::LeadingKeyword(k) => format!(
                    "the guard cannot prove that `{}` leaves no session state (it proves only \
                     SELECT, INSERT, UPDATE, DELETE, MERGE, VALUES, WITH and TABLE)",
                    k.to_ascii_uppercase()
                ),
                other => format!("{other}, which the guard cannot prove leaves no session state"),
            },
        };
        write!(
            f,
            "statement {:?} refused on the shared path: {what}; {}",
            self.sql,
            self.advice()
        )
    }
}

impl std::error::Error for Refusal {}

/// `SET [SESSION] name {TO|=} value` as `(name, value)`, when the value is one plain word
/// (quotes dropped): what `options=-c name=value` takes.
fn set_parts(sql: &str) -> Option<(String, String)> {
    let mut words = sql.trim().trim_end_matches(';').split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("set") {
        return None;
    }
    let mut name = words.next()?;
    if name.eq_ignore_ascii_case("session") {
        name = words.next()?;
    }
    let (name, rest) = match name.split_once('=') {
        Some((n, v)) => (n, v.to_owned()),
        None => {
            let sep = words.next()?;
            let rest = match sep.strip_prefix('=') {
                Some(v) if !v.is_empty() => v.to_owned(),
                _ if sep == "=" || sep.eq_ignore_ascii_case("to") => String::new(),
                _ => return None,
            };
            (name, rest)
        }
    };
    let mut value = rest;
    for w in words {
        if !value.is_empty() {
            value.push(' ');
        }
        value.push_str(w);
    }
    let value = value.trim_matches('\'');
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.,-$".contains(&b))
    };
    (plain(name) && plain(value) && !name.eq_ignore_ascii_case("local"))
        .then(|| (name.to_ascii_lowercase(), value.to_owned()))
}

/// The first `max` characters of `s`, plus `…` when something was cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => {
            let mut out = String::with_capacity(at + '…'.len_utf8());
            out.push_str(&s[..at]);
            out.push('…');
            out
        }
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Guard, Mode};
    use super::*;

    fn refuse(sql: &str) -> Refusal {
        Guard::new(Mode::Default).check(sql).unwrap_err()
    }

    #[test]
    fn a_typo_is_not_called_session_state() {
        let r = refuse("SELEC id FROM t");
        assert_eq!(r.kind(), RefusalKind::Unrecognized);
        let text = r.to_string();
        assert!(
            text.contains("`selec` is not a PostgreSQL statement"),
            "{text}"
        );
        assert!(text.contains("check its spelling"), "{text}");
        assert!(!text.contains("session"), "{text}");
        assert_eq!(refuse("  ").kind(), RefusalKind::Unrecognized);
    }

    #[test]
    fn settings_suggest_the_connection_options() {
        for (sql, option) in [
            ("SET search_path TO app, public", None),
            ("SET search_path TO app", Some("options=-c search_path=app")),
            (
                "set statement_timeout = '5s';",
                Some("options=-c statement_timeout=5s"),
            ),
            (
                "SET SESSION work_mem='64MB'",
                Some("options=-c work_mem=64MB"),
            ),
            ("SELECT set_config('x.y', '1', false)", None),
            ("RESET ALL", None),
        ] {
            let r = refuse(sql);
            assert_eq!(r.kind(), RefusalKind::SessionChanging, "{sql}");
            let text = r.to_string();
            assert!(text.contains("changes session state"), "{text}");
            assert!(text.contains("session()"), "{text}");
            assert!(
                text.contains(option.unwrap_or("options=-c name=value")),
                "{sql}: {text}"
            );
        }
        assert_eq!(set_parts("SET LOCAL x = 1"), None);
        assert_eq!(set_parts("SET x=1"), Some(("x".into(), "1".into())));
    }

    #[test]
    fn kinds_tell_session_state_from_what_is_not_provably_neutral() {
        assert!(refuse("BEGIN").to_string().contains("transaction()"));
        assert!(refuse("LISTEN jobs")
            .to_string()
            .contains("notifications()"));
        assert_eq!(
            refuse("PREPARE p AS SELECT 1").kind(),
            RefusalKind::SessionChanging
        );
        assert_eq!(
            refuse("SELECT 1 INTO TEMP t").kind(),
            RefusalKind::SessionChanging
        );
        for sql in [
            "CREATE TABLE t (id int)",
            "SELECT 1; SELECT 2",
            "SELECT * FROM query_to_xml('select 1', true, true, '')",
            "SHOW work_mem",
        ] {
            let r = refuse(sql);
            assert_eq!(r.kind(), RefusalKind::NotProvablyNeutral, "{sql}");
            assert!(r.to_string().contains("cannot prove"), "{r}");
        }
    }

    #[test]
    fn every_command_word_is_a_known_keyword() {
        for w in SESSION_COMMANDS.iter().chain(OTHER_COMMANDS) {
            let kind = refuse(&format!("{w} x")).kind();
            assert_ne!(kind, RefusalKind::Unrecognized, "{w}");
        }
        assert!(TRANSACTION_COMMANDS
            .iter()
            .all(|w| SESSION_COMMANDS.contains(w)));
    }
}
