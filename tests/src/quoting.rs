//! Quoting: SQL literals and identifiers, percent-encoded URL parts and libpq `key=value`
//! values.

/// Quotes a string as an SQL literal.
pub(crate) fn sql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Quotes a string as an SQL identifier.
pub(crate) fn sql_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Percent-encodes everything except RFC 3986 unreserved characters, which
/// is always safe inside the user-info part of a URL.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `user[:password]` percent-encoded for a URL.
pub(crate) fn userinfo(user: &str, password: &str) -> String {
    if password.is_empty() {
        percent_encode(user)
    } else {
        format!("{}:{}", percent_encode(user), percent_encode(password))
    }
}

/// Quotes a value for a libpq `key=value` connection string.
pub(crate) fn conninfo_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}
