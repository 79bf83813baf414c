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
    ("isn_weak", Session), // isn: sets the session's weak mode, though declared IMMUTABLE
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
    ("pg_cursor", Session), // the session's cursors (what pg_cursors shows)
    ("pg_export_snapshot", Strict), // lives as long as the exporting transaction
    ("pg_get_backend_memory_contexts", Session), // the session's plans, other callers' SQL in them
    ("pg_prepared_statement", Session), // the connection's prepared statements: others' SQL
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
    ("postgres_fdw_disconnect", Session), // postgres_fdw: the connection cache is per backend
    ("postgres_fdw_disconnect_all", Session),
    ("postgres_fdw_get_connections", Session), // reads the cache other callers filled
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

/// For each first byte (lower case), where its names start in [`FUNCTIONS`] (they end where
/// the next byte's start): a lookup compares only names of the same first letter and length.
const FIRST_INDEX: [u8; 129] = {
    let mut index = [0u8; 129];
    let mut c = 0;
    while c < 128 {
        let mut i = 0;
        while i < FUNCTIONS.len() && (FUNCTIONS[i].0.as_bytes()[0] as usize) < c {
            i += 1;
        }
        index[c] = i as u8;
        c += 1;
    }
    index[128] = FUNCTIONS.len() as u8;
    index
};

/// Whether a word whose first byte is `first` and whose length is `len` (cut to 63) could be one
/// of [`FUNCTIONS`], in any case: one load and a shift, so that the rules look closer only at
/// the few words that could matter.
#[inline]
pub(super) fn may_be_listed(first: u8, len: usize) -> bool {
    len <= LONGEST
        && LENGTHS_BY_FIRST
            .get(first.to_ascii_lowercase() as usize)
            .is_some_and(|bits| bits & (1 << len) != 0)
}

/// The refusal for calling `name` (as the server keeps it: folded if it was unquoted, exact if
/// quoted) in `mode`, if any. A name with an upper-case letter was quoted and is another
/// function (`"SET_CONFIG"(` does not call `set_config`).
pub(super) fn refused_function(name: &[u8], mode: Mode) -> Option<Reason> {
    let first = *name.first()?;
    let lengths = LENGTHS_BY_FIRST.get(first as usize).copied().unwrap_or(0);
    if name.len() > LONGEST || lengths & (1 << name.len()) == 0 {
        return None;
    }
    let c = first as usize;
    let same_first = &FUNCTIONS[FIRST_INDEX[c] as usize..FIRST_INDEX[c + 1] as usize];
    let (name, kind) = *same_first.iter().find(|(f, _)| f.as_bytes() == name)?;
    match (kind, mode) {
        (Session, _) | (Strict, Mode::Strict) => Some(Reason::ForbiddenCall(name)),
        (SqlText, _) => Some(Reason::SqlTextCall(name)),
        (Strict, Mode::Default) => None,
    }
}

/// The refused functions that belong to contrib extensions, which may be installed in any
/// schema: a call qualified by any schema may be theirs. The others are built-ins, in
/// `pg_catalog`. Sorted.
const CONTRIB: &[&str] = &[
    "connectby",
    "crosstab",
    "crosstab2",
    "crosstab3",
    "crosstab4",
    "dblink_cancel_query",
    "dblink_close",
    "dblink_connect",
    "dblink_connect_u",
    "dblink_disconnect",
    "dblink_error_message",
    "dblink_fetch",
    "dblink_get_connections",
    "dblink_get_notify",
    "dblink_get_result",
    "dblink_is_busy",
    "dblink_open",
    "dblink_send_query",
    "isn_weak",
    "postgres_fdw_disconnect",
    "postgres_fdw_disconnect_all",
    "postgres_fdw_get_connections",
    "sepgsql_setcon",
    "set_limit",
    "xpath_table",
];

/// Whether a call of the listed `name` qualified by `schema` may reach the listed function: a
/// built-in only through `pg_catalog` (`billing.set_config(...)` is the application's own), a
/// contrib function through any schema.
pub(super) fn reaches_listed(schema: &[u8], name: &[u8]) -> bool {
    schema == b"pg_catalog" || CONTRIB.iter().any(|c| c.as_bytes() == name)
}

/// Views that show the session's own state: on a shared connection, other callers' statements
/// (their text, literals included) and cursors. Sorted, lower case.
const SESSION_VIEWS: &[&str] = &[
    "pg_backend_memory_contexts",
    "pg_cursors",
    "pg_prepared_statements",
];

/// Whether a word whose first byte is `first` and whose length is `len` could be one of
/// [`SESSION_VIEWS`].
#[inline]
pub(super) fn may_be_view(first: u8, len: usize) -> bool {
    first | 0x20 == b'p' && matches!(len, 10 | 22 | 26)
}

/// The session view `name` (as the server keeps it) is, if any.
pub(super) fn session_view(name: &[u8]) -> Option<&'static str> {
    SESSION_VIEWS.iter().copied().find(|v| v.as_bytes() == name)
}

/// Whether `name` (lower case) is refused whatever the catalog says.
pub(crate) fn is_listed(name: &str) -> bool {
    FUNCTIONS.binary_search_by(|(f, _)| f.cmp(&name)).is_ok()
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
        for pair in CONTRIB.windows(2) {
            assert!(pair[0] < pair[1], "{} before {}", pair[0], pair[1]);
        }
        for c in CONTRIB {
            assert!(is_listed(c), "{c}");
        }
        for pair in CANNOT_NAME_TABLE.windows(2) {
            assert!(pair[0] < pair[1], "{} before {}", pair[0], pair[1]);
        }
        assert_eq!(CANNOT_NAME_TABLE.iter().map(|k| k.len()).max(), Some(17));
        assert!(FUNCTIONS.len() < 256, "FIRST_INDEX holds u8");
        for (name, _) in FUNCTIONS {
            assert!(name.is_ascii());
        }
    }

    #[test]
    fn lookup_is_exact_and_respects_mode() {
        // Names arrive folded; one with capitals was quoted and names another function.
        assert_eq!(
            refused_function(b"set_config", Mode::Default),
            Some(Reason::ForbiddenCall("set_config"))
        );
        assert_eq!(refused_function(b"Set_Config", Mode::Default), None);
        assert_eq!(refused_function(b"nextval", Mode::Default), None);
        assert_eq!(
            refused_function(b"nextval", Mode::Strict),
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
