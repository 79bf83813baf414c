//! The URL form, `postgres://user:password@host:port/dbname?key=value&...`, split into the
//! same `(keyword, value)` pairs as the keyword/value form.

use super::options::is_secret;
use super::{bad, Config};
use crate::Error;

const SCHEMES: [&str; 2] = ["postgresql://", "postgres://"];

impl Config {
    /// Parses a `postgres://` or `postgresql://` URL, like [`Config::parse`] (environment
    /// defaults and the password file included), but refuses the keyword/value form.
    pub fn from_url(url: &str) -> Result<Config, Error> {
        if !is_url(url) {
            return Err(bad("URL must start with postgres:// or postgresql://"));
        }
        Config::parse(url)
    }
}

/// Whether `s` is in the URL form (libpq decides by the prefix alone).
pub(crate) fn is_url(s: &str) -> bool {
    SCHEMES.iter().any(|p| s.starts_with(p))
}

/// Splits a URL into keyword/value pairs: the parts before `?` first, then the query
/// parameters in order, so `?host=` overrides the host of the authority. Everything is
/// percent-decoded. An empty part sets nothing.
pub(crate) fn split(url: &str) -> Result<Vec<(String, String)>, Error> {
    let rest = SCHEMES
        .iter()
        .find_map(|p| url.strip_prefix(p))
        .ok_or_else(|| bad("URL must start with postgres:// or postgresql://"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    // An '@' after the authority usually means a password with an unencoded '/', '?' or '#';
    // then the "host" and "port" may be pieces of the password and are not echoed in errors.
    let quiet = tail.contains('@');
    let mut pairs = Vec::new();

    let hosts = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            push(&mut pairs, "user", decode(user, "the user name")?);
            if let Some(p) = password {
                push(&mut pairs, "password", decode(p, "the password")?);
            }
            hosts
        }
        None => authority,
    };
    // A host list, `a:5432,b:5433`: one `host` and one `port` list (an entry without a port
    // gets the default).
    let mut names = Vec::new();
    let mut ports = Vec::new();
    for entry in hosts.split(',') {
        let (host, port) = host_port(entry, quiet)?;
        names.push(host);
        ports.push(port);
    }
    if names.len() > 1 && names.iter().any(String::is_empty) {
        return Err(bad(&format!(
            "the URL's host list {hosts:?} has an empty entry"
        )));
    }
    push(&mut pairs, "host", names.join(","));
    if ports.iter().any(|p| !p.is_empty()) {
        push(&mut pairs, "port", ports.join(","));
    }

    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let dbname = path.strip_prefix('/').unwrap_or(path);
    push(&mut pairs, "dbname", decode(dbname, "the database name")?);

    for param in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let Some((k, v)) = param.split_once('=') else {
            return Err(match pairs.last() {
                Some((k, _)) if is_secret(k) => bad(&format!(
                    "a URL parameter after {k:?} has no \"=\"; {ENCODE_HINT}"
                )),
                _ => bad(&format!(
                    "URL parameter {param:?} has no value (expected key=value)"
                )),
            });
        };
        let key = decode(k, "a parameter name")?;
        let what = if is_secret(&key) {
            "the password".to_owned()
        } else {
            format!("{key:?}")
        };
        let value = decode(v, &format!("the value of {what}"))?;
        if key == "ssl" {
            // libpq's JDBC-compatible spelling.
            if value != "true" {
                return Err(bad(&format!(
                    "ssl={value:?}: only ssl=true (meaning sslmode=require) is accepted"
                )));
            }
            pairs.push(("sslmode".into(), "require".into()));
        } else {
            pairs.push((key, value));
        }
    }
    Ok(pairs)
}

const ENCODE_HINT: &str =
    "if the password contains '/', '?', '#', '@', ':', ',' or '&', percent-encode it (%2F, %3F, %23, %40, %3A, %2C, %26)";

fn push(pairs: &mut Vec<(String, String)>, key: &str, value: String) {
    if !value.is_empty() {
        pairs.push((key.to_owned(), value));
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, each part percent-decoded.
fn host_port(s: &str, quiet: bool) -> Result<(String, String), Error> {
    let (host, port) = if let Some(inner) = s.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(|| {
            bad("unterminated [ in the host of the URL (an IPv6 address is written [::1])")
        })?;
        match after {
            "" => (h, ""),
            _ => match after.strip_prefix(':') {
                Some(p) => (h, p),
                None => {
                    return Err(bad(
                        "unexpected text after ] in the host of the URL (expected :port)",
                    ))
                }
            },
        }
    } else {
        s.split_once(':').unwrap_or((s, ""))
    };
    let host = decode(host, "the host")?;
    let port = decode(port, "the port")?;
    if !port.is_empty() && !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(if quiet {
            bad(&format!("the URL has an invalid port; {ENCODE_HINT}"))
        } else if port.contains(':') || host.is_empty() {
            bad(&format!(
                "invalid port {port:?} in the URL (an IPv6 address must be in brackets: [::1]:5432)"
            ))
        } else {
            bad(&format!(
                "invalid port {port:?} in the URL (expected a number)"
            ))
        });
    }
    Ok((host, port))
}

/// Percent-decoding. Errors name the part, never its text: it may be a password.
fn decode(s: &str, what: &str) -> Result<String, Error> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let byte = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    bad(&format!(
                        "invalid percent-escape in {what} in the URL (expected % and two hex digits)"
                    ))
                })?;
            if byte == 0 {
                return Err(bad(&format!("%00 is not allowed (in {what} in the URL)")));
            }
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        bad(&format!(
            "{what} in the URL percent-decodes to invalid UTF-8"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(s: &str) -> Vec<(String, String)> {
        split(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn splits_urls() {
        let table: &[(&str, &[(&str, &str)])] = &[
            ("postgres://", &[]),
            ("postgresql://", &[]),
            ("postgres:///", &[]),
            ("postgres://h", &[("host", "h")]),
            ("postgres://h:5433", &[("host", "h"), ("port", "5433")]),
            ("postgres://h:/db", &[("host", "h"), ("dbname", "db")]),
            (
                "postgres://u@h/db",
                &[("user", "u"), ("host", "h"), ("dbname", "db")],
            ),
            (
                "postgres://al%40ice:p%3Aw%2F%3F@db.local:6543/my%20db",
                &[
                    ("user", "al@ice"),
                    ("password", "p:w/?"),
                    ("host", "db.local"),
                    ("port", "6543"),
                    ("dbname", "my db"),
                ],
            ),
            ("postgres://u:@h", &[("user", "u"), ("host", "h")]),
            ("postgres://:pw@h", &[("password", "pw"), ("host", "h")]),
            (
                "postgres://u:p@ss@h",
                &[("user", "u"), ("password", "p@ss"), ("host", "h")],
            ),
            (
                "postgres://[::1]:5432/db",
                &[("host", "::1"), ("port", "5432"), ("dbname", "db")],
            ),
            ("postgres://[::1]", &[("host", "::1")]),
            (
                "postgres://[fe80::1%25eth0]:1",
                &[("host", "fe80::1%eth0"), ("port", "1")],
            ),
            (
                "postgres://%2Fvar%2Frun%2Fpostgresql/db",
                &[("host", "/var/run/postgresql"), ("dbname", "db")],
            ),
            (
                "postgres:///db?host=/var/run/postgresql",
                &[("dbname", "db"), ("host", "/var/run/postgresql")],
            ),
            (
                "postgres://h/db?host=%2Ftmp&port=6000",
                &[
                    ("host", "h"),
                    ("dbname", "db"),
                    ("host", "/tmp"),
                    ("port", "6000"),
                ],
            ),
            (
                "postgres://h?sslmode=require",
                &[("host", "h"), ("sslmode", "require")],
            ),
            (
                "postgres://h/?ssl=true",
                &[("host", "h"), ("sslmode", "require")],
            ),
            (
                "postgres://h/db?a=1&&b=",
                &[("host", "h"), ("dbname", "db"), ("a", "1"), ("b", "")],
            ),
            (
                "postgres://h/db?options=-c%20x%3D1&application_name=a+b",
                &[
                    ("host", "h"),
                    ("dbname", "db"),
                    ("options", "-c x=1"),
                    ("application_name", "a+b"),
                ],
            ),
            (
                "postgres://h/db?options=-c x=1",
                &[("host", "h"), ("dbname", "db"), ("options", "-c x=1")],
            ),
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
    fn url_errors() {
        let table = [
            ("mysql://h", "must start with postgres://"),
            (
                "postgres://a,,b/db",
                "host list \"a,,b\" has an empty entry",
            ),
            ("postgres://[::1/db", "unterminated ["),
            ("postgres://[::1]x/db", "unexpected text after ]"),
            ("postgres://::1/db", "must be in brackets"),
            ("postgres://h:port/db", "invalid port \"port\""),
            (
                "postgres://h/d%zzb",
                "invalid percent-escape in the database name",
            ),
            (
                "postgres://h/d%4",
                "invalid percent-escape in the database name",
            ),
            ("postgres://h/d%00", "%00 is not allowed"),
            ("postgres://h/d%ff", "invalid UTF-8"),
            (
                "postgres://h/db?sslmode",
                "URL parameter \"sslmode\" has no value",
            ),
            ("postgres://h/db?ssl=1", "only ssl=true"),
        ];
        for (s, want) in table {
            let e = split(s).expect_err(s).to_string();
            assert!(e.contains(want), "{s:?}: {e}");
        }
    }

    #[test]
    fn url_errors_keep_passwords_out() {
        let table = [
            "postgres://u:s3cr%zzet@h/db",
            "postgres://u:s3cr/et@h/db",
            "postgres://u:s3cr?et@h/db",
            "postgres://u:s3cr,et/x@h/db",
            "postgres://h/db?password=s3cr%zzet",
            "postgres://h/db?password=s3cr&et",
        ];
        for s in table {
            let e = split(s).expect_err(s).to_string();
            assert!(
                !e.contains("s3cr") && !e.contains("et@") && !e.contains("\"et"),
                "{s:?}: {e}"
            );
        }
    }
}
