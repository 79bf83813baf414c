//! The names the rules look for: the refused functions, and PostgreSQL's reserved keywords
//! (the INTO TEMP rule needs to know which words cannot name a table).

use super::{Mode, Reason};

/// Why a function is refused on the shared path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Its effect outlives the statement in the session, or it reads state another caller left.
    Session,
    /// It runs SQL given to it as text, which no lexical rule can check (class 4 in GUARD.md).
    SqlText,
    /// Refused only in [`Mode::Strict`]: the session state it touches is sequence or snapshot
    /// state that default mode accepts as global in effect.
    Strict,
}

use Kind::{Session, SqlText, Strict};

/// Every refused function, sorted by name (a unit test checks the order), lower case.
/// `docs/GUARD.md` gives the reason for each group.
pub(super) const FUNCTIONS: &[(&str, Kind)] = &[
    ("connectby", SqlText), // tablefunc: builds and runs a query from text arguments
    ("crosstab", SqlText),  // tablefunc
    ("crosstab2", SqlText), // tablefunc
    ("crosstab3", SqlText), // tablefunc
    ("crosstab4", SqlText), // tablefunc
    ("currval", Session),   // reads the session's sequence state
    ("cursor_to_xml", Session), // fetches from a session cursor
    ("cursor_to_xmlschema", Session),
    ("dblink_cancel_query", Session), // dblink: the named connections live in the session
    ("dblink_close", Session),
    ("dblink_connect", Session),
    ("dblink_connect_u", Session),
    ("dblink_disconnect", Session),
    ("dblink_error_message", Session),
    ("dblink_fetch", Session),
    ("dblink_get_connections", Session),
    ("dblink_get_notify", Session),
    ("dblink_get_result", Session),
    ("dblink_is_busy", Session),
    ("dblink_open", Session),
    ("dblink_send_query", Session),
    ("lastval", Session),  // reads the session's sequence state
    ("lo_close", Session), // large-object descriptors live in the session
    ("lo_creat", Session),
    ("lo_create", Session),
    ("lo_export", Session),
    ("lo_import", Session),
    ("lo_lseek", Session),
    ("lo_lseek64", Session),
    ("lo_open", Session),
    ("lo_read", Session),
    ("lo_tell", Session),
    ("lo_tell64", Session),
    ("lo_truncate", Session),
    ("lo_truncate64", Session),
    ("lo_unlink", Session),
    ("lo_write", Session),
    ("loread", Session),
    ("lowrite", Session),
    ("nextval", Strict),           // sets the session's currval/lastval
    ("pg_advisory_lock", Session), // session-level advisory locks outlive the statement
    ("pg_advisory_lock_shared", Session),
    ("pg_advisory_unlock", Session),
    ("pg_advisory_unlock_all", Session),
    ("pg_advisory_unlock_shared", Session),
    ("pg_backup_start", Session), // the backup belongs to the session (15+)
    ("pg_backup_stop", Session),
    ("pg_copy_logical_replication_slot", Session), // may create a temporary slot
    ("pg_copy_physical_replication_slot", Session),
    ("pg_create_logical_replication_slot", Session), // may create a temporary slot
    ("pg_create_physical_replication_slot", Session),
    ("pg_export_snapshot", Strict), // lives as long as the exporting transaction
    ("pg_replication_origin_session_is_setup", Session), // the origin is set per session
    ("pg_replication_origin_session_progress", Session),
    ("pg_replication_origin_session_reset", Session),
    ("pg_replication_origin_session_setup", Session),
    ("pg_replication_origin_xact_reset", Session),
    ("pg_replication_origin_xact_setup", Session),
    ("pg_start_backup", Session), // the names before 15
    ("pg_stop_backup", Session),
    ("pg_try_advisory_lock", Session),
    ("pg_try_advisory_lock_shared", Session),
    ("query_to_xml", SqlText),
    ("query_to_xml_and_xmlschema", SqlText),
    ("query_to_xmlschema", SqlText),
    ("sepgsql_setcon", Session), // sepgsql: the session's security label
    ("set_config", Session),     // sets a setting
    ("set_limit", Session),      // pg_trgm: sets pg_trgm.similarity_threshold, never reported
    ("setseed", Session),        // seeds the session's random()
    ("setval", Strict),          // sets the session's currval/lastval
    ("ts_rewrite", SqlText),     // the (tsquery, text) form runs its second argument
    ("ts_stat", SqlText),
    ("xpath_table", SqlText), // xml2: builds and runs a query from text arguments
];

/// Length bounds of [`FUNCTIONS`] (the longest sizes the lookup buffer; 38 < 64 keeps the
/// length bits of [`LENGTHS_BY_FIRST`] in a `u64`).
#[cfg(test)]
const SHORTEST: usize = 6;
const LONGEST: usize = 38;

/// For each first byte (lower case), a bit per name length that occurs: most words are ruled
/// out by one load and a shift, which matters because every `.` and `(` asks.
const LENGTHS_BY_FIRST: [u64; 128] = {
    let mut table = [0u64; 128];
    let mut i = 0;
    while i < FUNCTIONS.len() {
        let name = FUNCTIONS[i].0.as_bytes();
        table[name[0] as usize] |= 1 << name.len();
        i += 1;
    }
    table
};

/// The refusal for calling `word` (an identifier run from the masked text) in `mode`, if any.
pub(super) fn refused_function(word: &[u8], mode: Mode) -> Option<Reason> {
    let first = word.first()?.to_ascii_lowercase();
    let lengths = LENGTHS_BY_FIRST.get(first as usize).copied().unwrap_or(0);
    if word.len() > LONGEST || lengths & (1 << word.len()) == 0 {
        return None;
    }
    let mut buf = [0u8; LONGEST];
    let lower = &mut buf[..word.len()];
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    let at = FUNCTIONS
        .binary_search_by(|(name, _)| name.as_bytes().cmp(lower))
        .ok()?;
    let (name, kind) = FUNCTIONS[at];
    match (kind, mode) {
        (Session, _) | (Strict, Mode::Strict) => Some(Reason::ForbiddenCall(name)),
        (SqlText, _) => Some(Reason::SqlTextCall(name)),
        (Strict, Mode::Default) => None,
    }
}

/// PostgreSQL's reserved and type-or-function-name keywords (`pg_get_keywords()` categories R
/// and T, PostgreSQL 15), sorted. None of them can start a table name, so after `INTO TEMP` they
/// show that `temp` is a table's name, not the TEMP keyword. TABLE is among them and is handled
/// before this list is consulted.
const CANNOT_NAME_TABLE: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

/// Whether `word` is a keyword that cannot start a table name.
pub(super) fn cannot_name_table(word: &[u8]) -> bool {
    if word.len() > 17 {
        return false;
    }
    let mut buf = [0u8; 17];
    let lower = &mut buf[..word.len()];
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    CANNOT_NAME_TABLE
        .binary_search_by(|k| k.as_bytes().cmp(lower))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_lower_case_and_within_bounds() {
        for pair in FUNCTIONS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
        for (name, _) in FUNCTIONS {
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!((SHORTEST..=LONGEST).contains(&name.len()), "{name}");
        }
        assert_eq!(FUNCTIONS.iter().map(|f| f.0.len()).min(), Some(SHORTEST));
        assert_eq!(FUNCTIONS.iter().map(|f| f.0.len()).max(), Some(LONGEST));
        for pair in CANNOT_NAME_TABLE.windows(2) {
            assert!(pair[0] < pair[1], "{} before {}", pair[0], pair[1]);
        }
        assert_eq!(CANNOT_NAME_TABLE.iter().map(|k| k.len()).max(), Some(17));
    }

    #[test]
    fn lookup_ignores_case_and_respects_mode() {
        assert_eq!(
            refused_function(b"Set_Config", Mode::Default),
            Some(Reason::ForbiddenCall("set_config"))
        );
        assert_eq!(refused_function(b"nextval", Mode::Default), None);
        assert_eq!(
            refused_function(b"NEXTVAL", Mode::Strict),
            Some(Reason::ForbiddenCall("nextval"))
        );
        assert_eq!(
            refused_function(b"query_to_xml", Mode::Default),
            Some(Reason::SqlTextCall("query_to_xml"))
        );
        assert_eq!(refused_function(b"set_config_x", Mode::Default), None);
        assert_eq!(
            refused_function("sét_config".as_bytes(), Mode::Default),
            None
        );
        assert!(!cannot_name_table(b"VALUES") && cannot_name_table(b"Select"));
    }
}
