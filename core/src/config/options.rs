//! Setting one keyword: the single place where every connection-string keyword, from either
//! form or from the environment, is checked and applied to a [`Config`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{
    boolean, choice, connect_timeout, list, not_yet, port, positive, tls_version, too_big,
};
use super::{
    bad, ChannelBinding, Config, LoadBalanceHosts, RootCert, Server, SslMode, SslNegotiation,
    TargetSessionAttrs,
};
use crate::Error;

/// A keyword, the environment variable libpq reads as its default, and whether it is one of
/// pgpipe's own (`tuning.rs`) rather than libpq's.
pub(crate) struct Keyword {
    pub(crate) name: &'static str,
    pub(crate) env: Option<&'static str>,
    pub(crate) pgpipe: bool,
}

const fn kw(name: &'static str, env: Option<&'static str>) -> Keyword {
    Keyword {
        name,
        env,
        pgpipe: false,
    }
}

/// One of pgpipe's own keywords: no libpq environment variable (see `PGPIPE_OPTIONS`).
const fn own(name: &'static str) -> Keyword {
    Keyword {
        name,
        env: None,
        pgpipe: true,
    }
}

/// Every keyword, in the order parsing applies them: a later one may overwrite an earlier one
/// (`application_name` beats `fallback_application_name`, `sslmode` beats `requiressl`).
pub(crate) const KEYWORDS: &[Keyword] = &[
    kw("host", Some("PGHOST")),
    kw("hostaddr", Some("PGHOSTADDR")),
    kw("port", Some("PGPORT")),
    kw("user", Some("PGUSER")),
    kw("password", Some("PGPASSWORD")),
    kw("passfile", Some("PGPASSFILE")),
    kw("dbname", Some("PGDATABASE")),
    kw("connect_timeout", Some("PGCONNECT_TIMEOUT")),
    kw("fallback_application_name", None),
    kw("application_name", Some("PGAPPNAME")),
    kw("options", Some("PGOPTIONS")),
    kw("client_encoding", Some("PGCLIENTENCODING")),
    kw("requiressl", Some("PGREQUIRESSL")),
    kw("sslmode", Some("PGSSLMODE")),
    kw("sslrootcert", Some("PGSSLROOTCERT")),
    kw("sslcert", Some("PGSSLCERT")),
    kw("sslkey", Some("PGSSLKEY")),
    kw("sslpassword", None),
    kw("sslcertmode", Some("PGSSLCERTMODE")),
    kw("sslcrl", Some("PGSSLCRL")),
    kw("sslcrldir", Some("PGSSLCRLDIR")),
    kw("sslnegotiation", Some("PGSSLNEGOTIATION")),
    kw("sslsni", Some("PGSSLSNI")),
    kw("sslcompression", Some("PGSSLCOMPRESSION")),
    kw("ssl_min_protocol_version", Some("PGSSLMINPROTOCOLVERSION")),
    kw("ssl_max_protocol_version", Some("PGSSLMAXPROTOCOLVERSION")),
    kw("channel_binding", Some("PGCHANNELBINDING")),
    kw("keepalives", None),
    kw("keepalives_idle", None),
    kw("keepalives_interval", None),
    kw("keepalives_count", None),
    kw("tcp_user_timeout", None),
    kw("target_session_attrs", Some("PGTARGETSESSIONATTRS")),
    kw("load_balance_hosts", Some("PGLOADBALANCEHOSTS")),
    kw("gssencmode", Some("PGGSSENCMODE")),
    kw("krbsrvname", Some("PGKRBSRVNAME")),
    kw("gsslib", Some("PGGSSLIB")),
    kw("gssdelegation", Some("PGGSSDELEGATION")),
    kw("require_auth", Some("PGREQUIREAUTH")),
    kw("requirepeer", Some("PGREQUIREPEER")),
    kw("service", Some("PGSERVICE")),
    kw("servicefile", None),
    kw("replication", None),
    // pgpipe's own settings.
    own("pipeline_size"),
    own("max_in_flight"),
    own("mailbox_size"),
    own("statement_cache_size"),
    own("named_statements"),
    own("pooler"),
    own("fair_lanes"),
    own("spare_cpu_pct"),
    own("sync_coalescing"),
    own("trace_sql"),
    own("max_message_size"),
    own("query_timeout"),
    own("retry_not_dispatched"),
    own("dispatch_timeout_ms"),
    own("pinned_size"),
    own("release_reset"),
    own("guard"),
    own("guard_allow_functions"),
    own("max_connections"),
    own("slow_threshold_us"),
    own("max_queue_work_us"),
    own("idle_timeout_ms"),
    own("checkout_timeout_ms"),
    own("shared_statement_timeout_ms"),
    own("health_check_ms"),
];

/// Position of `name` in [`KEYWORDS`].
pub(crate) fn lookup(name: &str) -> Option<usize> {
    KEYWORDS.iter().position(|k| k.name == name)
}

/// The error for a keyword not in [`KEYWORDS`], with the nearest known one as a hint.
pub(crate) fn unknown(name: &str) -> Error {
    let near = KEYWORDS
        .iter()
        .map(|k| (edit_distance(name, k.name), k.name))
        .min()
        .filter(|&(d, _)| d <= 2);
    match near {
        Some((_, k)) => bad(&format!("unknown keyword {name:?} (did you mean {k:?}?)")),
        None => bad(&format!("unknown keyword {name:?}")),
    }
}

/// Keywords whose value must never be echoed in an error.
pub(crate) fn is_secret(name: &str) -> bool {
    matches!(name, "password" | "sslpassword")
}

impl Config {
    /// Applies one connection-string keyword (libpq's or pgpipe's own, as in the keyword/value
    /// form) to this configuration, checking its value. An empty value leaves the setting as
    /// it is, as libpq treats an empty value as not set (except `connect_timeout`, where it
    /// means no timeout). Settings that depend on each other (`sslrootcert=system` and
    /// `sslmode`, defaults, the password file) are resolved by [`Config::parse`];
    /// [`Config::validate`] checks the combinations. `passfile` names the password file, read
    /// for each server when connecting if no password is set ([`Config::password_for`]).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        if lookup(key).is_none() {
            return Err(unknown(key));
        }
        if value.is_empty() {
            if key == "connect_timeout" {
                self.connect_timeout = Config::NO_CONNECT_TIMEOUT;
            }
            return Ok(());
        }
        let v = value;
        match key {
            "host" => {
                let hosts = list(key, v, 0)?;
                self.host = hosts[0].to_owned();
                let port = self.port;
                self.other_hosts = hosts[1..].iter().map(|h| Server::new(*h, port)).collect();
            }
            "hostaddr" => {
                let n = 1 + self.other_hosts.len();
                let addrs = list(key, v, n)?
                    .into_iter()
                    .map(|a| {
                        a.parse::<IpAddr>().map_err(|_| {
                            bad(&format!("hostaddr={a:?} is not an IP address (a host name goes in host)"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if n == 1 && addrs.len() > 1 {
                    // Addresses without host names: each names itself (for TLS and the password file).
                    let port = self.port;
                    self.other_hosts = addrs[1..]
                        .iter()
                        .map(|a| Server { hostaddr: Some(*a), ..Server::new(a.to_string(), port) })
                        .collect();
                }
                self.hostaddr = Some(addrs[0]);
                if addrs.len() > 1 {
                    for (s, a) in self.other_hosts.iter_mut().zip(&addrs[1..]) {
                        s.hostaddr = Some(*a);
                    }
                }
            }
            "port" => {
                let ports = list(key, v, 1 + self.other_hosts.len())?
                    .into_iter()
                    .map(port)
                    .collect::<Result<Vec<_>, _>>()?;
                self.port = ports[0];
                for (i, s) in self.other_hosts.iter_mut().enumerate() {
                    s.port = if ports.len() == 1 { ports[0] } else { ports[i + 1] };
                }
            }
            "user" => self.user = v.to_owned(),
            "password" => self.password = Some(v.to_owned()),
            "passfile" => self.set_passfile(Some(PathBuf::from(v))),
            "dbname" => self.dbname = v.to_owned(),
            "connect_timeout" => self.connect_timeout = connect_timeout(v)?,
            "application_name" | "fallback_application_name" => {
                self.application_name = Some(v.to_owned())
            }
            "options" => self.options = Some(v.to_owned()),
            "client_encoding" => {
                let norm: String = v.chars().filter(char::is_ascii_alphanumeric).collect();
                if !matches!(norm.to_ascii_lowercase().as_str(), "utf8" | "unicode") {
                    return Err(bad(&format!(
                        "client_encoding={v:?} is not supported: pgpipe exchanges text as UTF-8, \
                         so only UTF8 is accepted (or leave it unset)"
                    )));
                }
            }
            "requiressl" => {
                if boolean(key, v)? {
                    self.tls.mode = SslMode::Require;
                }
            }
            "sslmode" => self.tls.mode = choice(key, v, SSL_MODES)?,
            "sslrootcert" => {
                self.tls.root_cert = Some(match v {
                    "system" => RootCert::System,
                    path => RootCert::File(PathBuf::from(path)),
                })
            }
            "sslcert" => self.tls.cert = Some(PathBuf::from(v)),
            "sslkey" => self.tls.key = Some(PathBuf::from(v)),
            "sslnegotiation" => {
                let modes = [("postgres", SslNegotiation::Postgres), ("direct", SslNegotiation::Direct)];
                self.tls.negotiation = choice(key, v, &modes)?;
            }
            "sslsni" => self.tls.sni = boolean(key, v)?,
            "sslcompression" => {
                // Modern libpq accepts and ignores it: TLS compression is gone everywhere.
                boolean(key, v)?;
            }
            "ssl_min_protocol_version" => self.tls.min_version = tls_version(key, v)?,
            "ssl_max_protocol_version" => self.tls.max_version = Some(tls_version(key, v)?),
            "channel_binding" => {
                let modes = [
                    ("disable", ChannelBinding::Disable),
                    ("prefer", ChannelBinding::Prefer),
                    ("require", ChannelBinding::Require),
                ];
                self.channel_binding = choice(key, v, &modes)?;
            }
            "keepalives" => self.keepalives.enabled = boolean(key, v)?,
            "keepalives_idle" => self.keepalives.idle = positive(key, v)?.map(Duration::from_secs),
            "keepalives_interval" => {
                self.keepalives.interval = positive(key, v)?.map(Duration::from_secs)
            }
            "keepalives_count" => {
                self.keepalives.count = match positive(key, v)? {
                    Some(n) => Some(u32::try_from(n).map_err(|_| too_big(key, v))?),
                    None => None,
                }
            }
            "tcp_user_timeout" => self.tcp_user_timeout = positive(key, v)?.map(Duration::from_millis),
            "target_session_attrs" => {
                use TargetSessionAttrs as T;
                self.target_session_attrs = choice(key, v, &[
                    ("any", T::Any),
                    ("read-write", T::ReadWrite),
                    ("read-only", T::ReadOnly),
                    ("primary", T::Primary),
                    ("standby", T::Standby),
                    ("prefer-standby", T::PreferStandby),
                ])?;
            }
            "load_balance_hosts" => {
                use LoadBalanceHosts as L;
                self.load_balance_hosts =
                    choice(key, v, &[("disable", L::Disable), ("random", L::Random)])?;
            }
            "gssencmode" => {
                let all = ["disable", "prefer", "require"];
                not_yet(key, v, &all, &["disable", "prefer"], "pgpipe does not implement GSSAPI")?;
            }
            // Only meaningful with GSSAPI, which pgpipe never uses.
            "krbsrvname" | "gsslib" => {}
            "gssdelegation" => {
                boolean(key, v)?;
            }
            "sslcertmode" => {
                let all = ["disable", "allow", "require"];
                not_yet(key, v, &all, &["allow"], "the client certificate is sent when configured")?;
            }
            "sslpassword" => {
                return Err(bad(
                    "sslpassword is not supported: encrypted client keys cannot be used; give \
                     an unencrypted key in sslkey (for example `openssl pkey -in enc.key -out plain.key`)",
                ))
            }
            "sslcrl" | "sslcrldir" => {
                return Err(bad(&format!(
                    "{key}={v:?}: certificate revocation lists are not supported"
                )))
            }
            "service" | "servicefile" => {
                return Err(bad(&format!(
                    "{key}={v:?}: connection service files are not supported; put the settings \
                     in the connection string"
                )))
            }
            "require_auth" => self.require_auth = super::RequireAuth::parse(v)?,
            "requirepeer" => return Err(bad(&format!("{key}={v:?} is not supported yet"))),
            "replication" => {
                if v == "database" || boolean(key, v)? {
                    return Err(bad(&format!(
                        "replication={v:?}: replication connections are not supported"
                    )));
                }
            }
            _ => self.set_own(key, v)?,
        }
        Ok(())
    }
}

const SSL_MODES: &[(&str, SslMode)] = &[
    ("disable", SslMode::Disable),
    ("allow", SslMode::Allow),
    ("prefer", SslMode::Prefer),
    ("require", SslMode::Require),
    ("verify-ca", SslMode::VerifyCa),
    ("verify-full", SslMode::VerifyFull),
];

/// libpq's spelling of a mode, for messages.
pub(crate) fn ssl_mode_name(mode: SslMode) -> &'static str {
    SSL_MODES
        .iter()
        .find(|(_, m)| *m == mode)
        .map_or("?", |(n, _)| n)
}

/// Levenshtein distance, for the "did you mean" hint.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
