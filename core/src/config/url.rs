//! The `postgres://` URL form.

use super::{bad, Config};
use crate::Error;

impl Config {
    /// Parses `postgres://user:password@host:port/dbname?key=value&...` (also `postgresql://`).
    /// Percent-escapes are decoded. Unknown keys are an error, so a typo is not silently ignored.
    pub fn from_url(url: &str) -> Result<Config, Error> {
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| bad("URL must start with postgres:// or postgresql://"))?;
        let mut cfg = Config::default();
        let (main, query) = match rest.split_once('?') {
            Some((m, q)) => (m, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match main.split_once('/') {
            Some((a, p)) => (a, p),
            None => (main, ""),
        };
        let hostport = match authority.rsplit_once('@') {
            Some((userinfo, hp)) => {
                match userinfo.split_once(':') {
                    Some((u, p)) => {
                        cfg.user = decode(u)?;
                        cfg.password = Some(decode(p)?);
                    }
                    None => cfg.user = decode(userinfo)?,
                }
                hp
            }
            None => authority,
        };
        if !hostport.is_empty() {
            let (host, port) = if let Some(stripped) = hostport.strip_prefix('[') {
                let (h, after) = stripped
                    .split_once(']')
                    .ok_or_else(|| bad("unterminated [ in host"))?;
                (h, after.strip_prefix(':'))
            } else {
                match hostport.rsplit_once(':') {
                    Some((h, p)) => (h, Some(p)),
                    None => (hostport, None),
                }
            };
            if !host.is_empty() {
                cfg.host = decode(host)?;
            }
            if let Some(p) = port {
                cfg.port = p.parse().map_err(|_| bad(&format!("invalid port {p:?}")))?;
            }
        }
        cfg.dbname = decode(path)?;
        if let Some(q) = query {
            for pair in q.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                cfg.set(&decode(k)?, &decode(v)?)?;
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

fn decode(s: &str) -> Result<String, Error> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("invalid percent-escape in URL"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad("percent-escape decodes to invalid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_full_url() {
        let c = Config::from_url(
            "postgres://al%40ice:p%3Aw@db.local:6543/app?pipeline_size=2&max_in_flight=8&query_timeout=250",
        )
        .unwrap();
        assert_eq!(c.user, "al@ice");
        assert_eq!(c.password.as_deref(), Some("p:w"));
        assert_eq!(c.host, "db.local");
        assert_eq!(c.port, 6543);
        assert_eq!(c.dbname, "app");
        assert_eq!(c.pipeline_size, 2);
        assert_eq!(c.max_in_flight, 8);
        assert_eq!(c.query_timeout, Some(Duration::from_millis(250)));
    }

    #[test]
    fn defaults_and_errors() {
        let c = Config::from_url("postgresql://bob@[::1]").unwrap();
        assert_eq!(c.host, "::1");
        assert_eq!(c.port, 5432);
        assert_eq!(c.database(), "bob");
        assert_eq!(c.pipeline_size, 4);
        assert!(Config::from_url("mysql://x").is_err());
        assert!(Config::from_url("postgres://x@h/db?pipline_size=2").is_err());
        assert!(Config::from_url("postgres://x@h/db?pipeline_size=0").is_err());
        assert!(Config::from_url("postgres://x@h:notaport/db").is_err());
        let e = Config::from_url(
            "postgres://x@h/db?max_connections=6&slow_threshold_us=500&max_queue_work_us=900&idle_timeout_ms=50",
        )
        .unwrap();
        assert_eq!(e.max_connections, 6);
        assert_eq!(e.slow_threshold, Duration::from_micros(500));
        assert_eq!(e.max_queue_work, Duration::from_micros(900));
        assert_eq!(e.idle_timeout, Duration::from_millis(50));
    }
}
