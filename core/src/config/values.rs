//! Single values as libpq reads them: integers, booleans, choices, ports, timeouts, TLS
//! versions. Each error names the keyword, the value and what is accepted.

use std::time::Duration;

use super::{bad, Config, TlsVersion};
use crate::Error;

/// A comma-separated list (`host=a,b`); `n_hosts` is how many the host list has so far, which
/// a longer list of ports or addresses must match.
pub(crate) fn list<'a>(key: &str, v: &'a str, n_hosts: usize) -> Result<Vec<&'a str>, Error> {
    let items: Vec<&str> = v.split(',').map(str::trim).collect();
    if key == "host" && items.iter().any(|i| i.is_empty()) {
        return Err(bad(&format!("host={v:?} has an empty entry")));
    }
    if key != "host" && items.len() > 1 && n_hosts > 1 && items.len() != n_hosts {
        return Err(bad(&format!(
            "{key}={v:?} lists {} values for {n_hosts} hosts (give one, or one per host)",
            items.len()
        )));
    }
    Ok(items)
}

/// A port; empty (an entry of a list such as `port=,5433`) is the default 5432.
pub(crate) fn port(v: &str) -> Result<u16, Error> {
    if v.trim().is_empty() {
        return Ok(5432);
    }
    match v.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(bad(&format!(
            "port={v:?} is not a port number (1 to 65535)"
        ))),
    }
}

/// libpq: whole seconds; zero, negative or empty means no timeout; 1 means 2.
pub(crate) fn connect_timeout(v: &str) -> Result<Duration, Error> {
    let secs = int("connect_timeout", v)?;
    Ok(match secs {
        s if s <= 0 => Config::NO_CONNECT_TIMEOUT,
        1 => Duration::from_secs(2),
        s => Duration::from_secs(s.unsigned_abs()).min(Config::NO_CONNECT_TIMEOUT),
    })
}

pub(crate) fn tls_version(key: &str, v: &str) -> Result<TlsVersion, Error> {
    match v.to_ascii_lowercase().as_str() {
        "tlsv1.2" => Ok(TlsVersion::Tls12),
        "tlsv1.3" => Ok(TlsVersion::Tls13),
        "tlsv1" | "tlsv1.1" => Err(bad(&format!(
            "{key}={v:?} is not supported: pgpipe speaks TLSv1.2 and TLSv1.3 only"
        ))),
        _ => Err(bad(&format!(
            "{key}={v:?} is not valid; expected TLSv1.2 or TLSv1.3"
        ))),
    }
}

/// An integer as libpq reads one: surrounding whitespace allowed.
fn int(key: &str, v: &str) -> Result<i64, Error> {
    v.trim()
        .parse()
        .map_err(|_| bad(&format!("{key}={v:?} is not an integer")))
}

/// A non-negative count of units; zero or less means "system default", as in libpq.
pub(crate) fn positive(key: &str, v: &str) -> Result<Option<u64>, Error> {
    let n = int(key, v)?;
    Ok((n > 0).then_some(n.unsigned_abs()))
}

pub(crate) fn too_big(key: &str, v: &str) -> Error {
    bad(&format!("{key}={v:?} is too large"))
}

pub(crate) fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, Error> {
    v.trim()
        .parse()
        .map_err(|_| bad(&format!("{key}={v:?} is not a valid non-negative number")))
}

/// libpq's booleans are integers (0 off, anything else on); the words PostgreSQL accepts for
/// booleans are taken too.
pub(crate) fn boolean(key: &str, v: &str) -> Result<bool, Error> {
    if let Ok(n) = v.trim().parse::<i64>() {
        return Ok(n != 0);
    }
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" => Ok(true),
        "false" | "off" | "no" => Ok(false),
        _ => Err(bad(&format!(
            "{key}={v:?} is not a boolean; expected 0 or 1"
        ))),
    }
}

pub(crate) fn choice<T: Copy>(key: &str, v: &str, allowed: &[(&str, T)]) -> Result<T, Error> {
    allowed
        .iter()
        .find(|(n, _)| *n == v)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            bad(&format!(
                "{key}={v:?} is not valid; expected one of {}",
                names.join(", ")
            ))
        })
}

/// A keyword whose valid values pgpipe accepts only in part, until the feature lands.
pub(crate) fn not_yet(
    key: &str,
    v: &str,
    all: &[&str],
    accepted: &[&str],
    why: &str,
) -> Result<(), Error> {
    if accepted.contains(&v) {
        Ok(())
    } else if all.contains(&v) {
        Err(bad(&format!(
            "{key}={v:?} is not supported yet ({why}); accepted: {}",
            accepted.join(", ")
        )))
    } else {
        Err(bad(&format!(
            "{key}={v:?} is not valid; expected one of {}",
            all.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_integers_and_timeouts() {
        for (v, want) in [
            ("1", true),
            ("0", false),
            ("2", true),
            ("-1", true),
            (" 1 ", true),
            ("on", true),
            ("OFF", false),
            ("yes", true),
            ("false", false),
        ] {
            assert_eq!(boolean("k", v).ok(), Some(want), "{v:?}");
        }
        for v in ["", "y", "1.0", "tru"] {
            assert!(boolean("k", v).is_err(), "{v:?}");
        }
        let none = Config::NO_CONNECT_TIMEOUT;
        for (v, want) in [
            ("0", none),
            ("-3", none),
            ("1", Duration::from_secs(2)),
            ("2", Duration::from_secs(2)),
            (" 15", Duration::from_secs(15)),
            ("99999999999", none),
        ] {
            assert_eq!(connect_timeout(v).ok(), Some(want), "{v:?}");
        }
        assert!(connect_timeout("1.5").is_err());
        for (v, want) in [
            ("1", Some(1)),
            ("65535", Some(65535)),
            (" 80 ", Some(80)),
            ("0", None),
            ("65536", None),
            ("-1", None),
            ("x", None),
        ] {
            assert_eq!(port(v).ok(), want, "{v:?}");
        }
        assert_eq!(positive("k", "-4").ok(), Some(None));
        assert_eq!(positive("k", "4").ok(), Some(Some(4)));
    }
}
