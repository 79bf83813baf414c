//! From a connection string to a [`Config`], as libpq does it: the string's keywords, then
//! the environment for keywords the string leaves unset, then defaults, then the password file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::env::{self, Sources, DEFAULT_SOCKET_DIRS};
use super::options::{lookup, unknown, KEYWORDS};
use super::values::boolean;
use super::{keyword, tuning, url, Config, RootCert, SslMode, PGPIPE_OPTIONS};
use crate::Error;

impl Config {
    /// Parses a libpq connection string, with the process environment as defaults.
    ///
    /// Both of libpq's forms are accepted: a URL when the string starts with `postgres://` or
    /// `postgresql://` (`postgres://user:password@host:port/dbname?key=value`,
    /// percent-decoded), otherwise keyword/value pairs (`host=db port=5432 user='a b'`).
    /// The empty string is valid and means all defaults. Both forms take every keyword of
    /// `docs/CONNECTING.md`: libpq's that apply to pgpipe, and pgpipe's own
    /// (`pipeline_size`, ...). An unknown keyword is an error that names it.
    ///
    /// As in libpq, `PG*` environment variables (`PGHOST`, `PGUSER`, `PGPASSWORD`,
    /// `PGSSLMODE`, ...) supply keywords the string does not set; the user defaults to the OS
    /// user, the database to the user, the host to the Unix socket directory holding
    /// `.s.PGSQL.<port>` among `/var/run/postgresql` and `/tmp` (else `localhost`), and,
    /// without a password, the password file (`passfile`, `PGPASSFILE` or `~/.pgpass`) is
    /// looked up for each server of the host list when connecting ([`Config::password_for`]).
    /// `Config::default()` keeps its own plain defaults (host `127.0.0.1`, no password file).
    ///
    /// `sslmode=verify-ca` or `verify-full` with no root certificate at all (no `sslrootcert`,
    /// no `~/.postgresql/root.crt`) parses; connecting then fails.
    pub fn parse(s: &str) -> Result<Config, Error> {
        Config::parse_with_env(s, |name| std::env::var(name).ok())
    }

    /// [`Config::parse`] with `env` in place of the process environment: `env(name)` returns
    /// the variable's value. This also supplies `HOME` (for `~/.pgpass` and
    /// `~/.postgresql/`) and `USER` / `LOGNAME` (the default user). An empty value counts as
    /// unset.
    pub fn parse_with_env(s: &str, env: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        parse_in(
            s,
            &Sources {
                var: &env,
                socket_dirs: &DEFAULT_SOCKET_DIRS,
            },
        )
    }
}

/// A keyword's value and the environment variable it came from (`None`: the string).
type Given = BTreeMap<usize, (String, Option<&'static str>)>;

pub(crate) fn parse_in(s: &str, src: &Sources<'_>) -> Result<Config, Error> {
    let pairs = if url::is_url(s) {
        url::split(s)?
    } else {
        keyword::split(s)?
    };
    let mut given = Given::new();
    for (k, v) in pairs {
        let i = lookup(&k).ok_or_else(|| unknown(&k))?;
        given.insert(i, (v, None)); // the last one wins, as in libpq
    }
    // `requiressl=1` in the string is an old spelling of `sslmode=require`, so it beats
    // PGSSLMODE; an explicit `sslmode` beats it (it is applied later).
    if is_set(&given, "requiressl") && !is_set(&given, "sslmode") {
        let on =
            value(&given, "requiressl").is_some_and(|v| boolean("requiressl", v).unwrap_or(false));
        if on {
            given.insert(index("sslmode"), ("require".to_owned(), None));
        }
    }
    for (i, var, v) in env::defaults(src) {
        given.entry(i).or_insert((v, Some(var)));
    }
    // pgpipe's own options from their own variable, under the string's as PG* variables are.
    if let Some(own) = (src.var)(PGPIPE_OPTIONS).filter(|v| !v.is_empty()) {
        let pairs = tuning::pgpipe_pairs(&own, PGPIPE_OPTIONS)
            .map_err(|e| from_env(e, Some(PGPIPE_OPTIONS)))?;
        for (k, v) in pairs {
            given.entry(index(&k)).or_insert((v, Some(PGPIPE_OPTIONS)));
        }
    }

    check_list_lengths(&given)?;
    let mut cfg = Config::default();
    for (&i, (v, origin)) in &given {
        let name = KEYWORDS[i].name;
        if name != "passfile" {
            cfg.set(name, v).map_err(|e| from_env(e, *origin))?;
        }
    }

    if !is_set(&given, "user") {
        cfg.user = src.os_user();
    }
    if !is_set(&given, "host") {
        cfg.host = match cfg.hostaddr {
            // libpq matches the password file and verifies TLS against the address then.
            Some(addr) => addr.to_string(),
            None => env::default_host(cfg.port, src.socket_dirs),
        };
    }
    if cfg.dbname.is_empty() {
        cfg.dbname = cfg.user.clone();
    }
    // libpq: `sslrootcert=system` makes verify-full the default; validate() refuses weaker.
    if cfg.tls.root_cert == Some(RootCert::System)
        && cfg.tls.mode == SslMode::Prefer
        && !is_set(&given, "sslmode")
    {
        cfg.tls.mode = SslMode::VerifyFull;
    }
    let home = src.home();
    if cfg.tls.mode != SslMode::Disable {
        if let Some(home) = &home {
            env::default_tls_files(&mut cfg, home);
        }
    }
    let file = match value(&given, "passfile") {
        Some(f) if !f.is_empty() => Some(PathBuf::from(f)),
        _ => home.map(|h| h.join(".pgpass")),
    };
    cfg.set_passfile(file);
    cfg.validate()?;
    Ok(cfg)
}

/// libpq's rules for the lists of `host`, `hostaddr` and `port`, with its messages: when both
/// name lists are set they have one entry each per server; the servers are the addresses when
/// given, else the host names, else one; one port serves them all, or one port per server.
fn check_list_lengths(given: &Given) -> Result<(), Error> {
    let count = |name: &str| {
        value(given, name)
            .filter(|v| !v.is_empty())
            .map(|v| v.split(',').count())
    };
    let (names, addrs) = (count("host"), count("hostaddr"));
    if let (Some(h), Some(a)) = (names, addrs) {
        if h != a {
            return Err(Error::Config(format!(
                "could not match {h} host names to {a} hostaddr values"
            )));
        }
    }
    let servers = addrs.or(names).unwrap_or(1);
    match count("port") {
        Some(p) if p > 1 && p != servers => Err(Error::Config(format!(
            "could not match {p} port numbers to {servers} hosts"
        ))),
        _ => Ok(()),
    }
}

fn index(name: &str) -> usize {
    lookup(name).unwrap_or(usize::MAX)
}

fn value<'a>(given: &'a Given, name: &str) -> Option<&'a str> {
    given.get(&index(name)).map(|(v, _)| v.as_str())
}

/// Set to a non-empty value (libpq treats an empty value as unset).
fn is_set(given: &Given, name: &str) -> bool {
    value(given, name).is_some_and(|v| !v.is_empty())
}

/// Says which variable a bad value came from, since the string does not show it.
fn from_env(e: Error, var: Option<&'static str>) -> Error {
    match (e, var) {
        (Error::Config(msg), Some(var)) => {
            Error::Config(format!("{msg} (from the environment variable {var})"))
        }
        (e, _) => e,
    }
}
