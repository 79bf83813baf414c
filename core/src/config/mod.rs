//! Connection settings: what a service connects to, how (TLS, sockets, keepalives), and how it
//! pipelines. Parsing of connection strings lives in the submodules.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::Error;

mod env;
mod keyword;
mod options;
mod parse;
mod pgpass;
mod pooler;
mod require_auth;
#[cfg(test)]
mod tests;
mod tuning;
mod url;
mod values;

pub use pooler::Pooler;
pub use require_auth::{AuthMethod, RequireAuth};
pub use tuning::{pgpipe_keywords, PGPIPE_OPTIONS};
pub(crate) use tuning::{DEFAULT_MAX_MESSAGE_SIZE, SHORT_MESSAGE_MAX};

/// Settings of a connection service. Build one from a libpq connection string with
/// [`Config::parse`], or field by field from `Config::default()`.
///
/// Every setting is a typed field and a keyword of both string forms. libpq's settings (host
/// to `tcp_user_timeout`, and `connect_timeout`) come first; the rest are pgpipe's own
/// ([`pgpipe_keywords`]), which [`Config::apply_pgpipe_options`] and the [`PGPIPE_OPTIONS`]
/// variable set apart from the connection string, so a `DATABASE_URL` can stay libpq's.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Server host name or IP address; a value starting with `/` is the directory of a Unix
    /// socket (`<dir>/.s.PGSQL.<port>`), one starting with `@` a Linux abstract socket name.
    pub host: String,
    /// Numeric address to connect to instead of resolving `host` (`hostaddr`); `host` is still
    /// the name that TLS verifies and that the password file matches.
    pub hostaddr: Option<IpAddr>,
    /// Server port (for a Unix socket, the number in its file name).
    pub port: u16,
    /// The second and later servers of a host list (`host=a,b`, `postgres://a:5432,b:5433/db`),
    /// tried after `host` in order, or all of them shuffled with `load_balance_hosts=random`.
    /// Every server uses the same user, password, database and TLS settings.
    pub other_hosts: Vec<Server>,
    /// Which servers of the list may serve (`target_session_attrs`, libpq's meaning).
    pub target_session_attrs: TargetSessionAttrs,
    /// The order servers are tried in (`load_balance_hosts`).
    pub load_balance_hosts: LoadBalanceHosts,
    /// Role to authenticate as.
    pub user: String,
    /// Password, when the server asks for one (`password`, `PGPASSWORD`). Without one, the
    /// password file is read for each server of the host list ([`Config::password_for`]).
    pub password: Option<String>,
    /// Database name (defaults to the user name).
    pub dbname: String,
    /// `application_name` reported to the server.
    pub application_name: Option<String>,
    /// Command-line options for the backend (`options`, e.g. `-c statement_timeout=5s`), sent
    /// in the startup packet of every connection alike, so the shared path stays session-neutral.
    pub options: Option<String>,
    /// Transport security (`sslmode` and the `ssl*` keys).
    pub tls: TlsConfig,
    /// SCRAM channel binding (`channel_binding`, default `prefer`).
    pub channel_binding: ChannelBinding,
    /// The authentication methods the server may use (`require_auth`, libpq 16's syntax and
    /// meaning; default: any). Checked before anything is sent in answer to a request.
    pub require_auth: RequireAuth,
    /// TCP keepalives (`keepalives`, `keepalives_idle`, `keepalives_interval`, `keepalives_count`).
    pub keepalives: Keepalives,
    /// `TCP_USER_TIMEOUT` (`tcp_user_timeout` in milliseconds; `None` leaves the system default).
    pub tcp_user_timeout: Option<Duration>,
    /// Connections carrying the shared, pipelined path (URL key `pipeline_size`, default 4).
    pub pipeline_size: usize,
    /// The most units in flight per connection (`max_in_flight`, default 1024). Within it the
    /// window adapts to the connection: enough units to cover twice its round trip at its
    /// backend's pace (the bandwidth-delay product), and at least 64, so a distant server needs
    /// no tuning and a near one keeps its latency (see `docs/ROUTING.md`). Further units wait in
    /// the mailbox.
    pub max_in_flight: usize,
    /// Units a connection's mailbox holds before callers wait (`mailbox_size`, default 256).
    pub mailbox_size: usize,
    /// Prepared statements cached per connection; the least recently used is closed on overflow
    /// (`statement_cache_size`, default 256).
    pub statement_cache_size: usize,
    /// Keep prepared statements on the server under names (`named_statements`, default on).
    /// Turn it off behind a transaction-mode pooler (PgBouncer before 1.21), where the next
    /// unit may run on another backend: a statement's first use then only learns its types
    /// (once per connection, as before), and every execution carries its own unnamed Parse,
    /// still one round trip (see `docs/TOPOLOGY.md`). Off, the client takes a transaction
    /// pooler's rules (as when a connection's probe finds one; see [`Pooler`]): one Sync at a
    /// time per connection, and no lanes or overflow connections.
    pub named_statements: bool,
    /// What stands between the client and the server (`pooler`: `auto`, the default, `none`,
    /// `session`, `transaction` or `transaction-pipelined`); see [`Pooler`].
    pub pooler: Pooler,
    /// Deadline for connecting and authenticating (`connect_timeout` in seconds, default 10;
    /// as in libpq, 1 means 2). No timeout (`connect_timeout` 0, negative or empty) is
    /// [`Config::NO_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// How long `session()` / `transaction()` wait for an exclusive connection before failing
    /// with `Error::CheckoutTimeout` (`checkout_timeout_ms`; `None`, the default, waits).
    pub checkout_timeout: Option<Duration>,
    /// A server-side `statement_timeout` set at startup on every shared (pipelined) connection
    /// alike, so it stays session-neutral (`shared_statement_timeout_ms`; `None`: the server's).
    /// A statement that exceeds it fails alone (57014); exclusive connections are not affected.
    pub shared_statement_timeout: Option<Duration>,
    /// Deadline per query, measured from submission; `None` waits forever (`query_timeout` in
    /// milliseconds). On expiry the caller gets `Error::Timeout` and the unit is drained and discarded.
    pub query_timeout: Option<Duration>,
    /// Retry units that were never sent on another live connection (`retry_not_dispatched`, default true).
    pub retry_not_dispatched: bool,
    /// How long a shared-path unit that has not been sent waits for a live connection while
    /// every pipelined connection is down (reconnecting after a restart, a failover, a
    /// terminated backend), bounded by its deadline too (`dispatch_timeout_ms`, default
    /// 10000). When it passes the unit fails with `Error::NoConnection` and the last
    /// connection error; zero fails at once.
    pub dispatch_timeout: Duration,
    /// Exclusive connections (sessions and transactions) that may always be open, whatever the
    /// shared path's lanes and overflow use (`pinned_size`, default 2). Beyond it, exclusive
    /// connections open on demand while the client's connections stay within `max_connections`;
    /// idle ones close after `idle_timeout`. See `docs/TRANSACTIONS.md`.
    pub pinned_size: usize,
    /// What the release of an exclusive connection resets (`release_reset`, default
    /// `changed`): see [`ReleaseReset`].
    pub release_reset: ReleaseReset,
    /// How strict the session-neutrality guard of the shared path is (`guard`: `default` or `strict`).
    pub guard: crate::guard::Mode,
    /// Functions of installed extensions the guard admits on the shared path although they are
    /// volatile and not known to keep no session state (`guard_allow_functions`: names
    /// separated by commas, any case; `*` admits every extension function). See
    /// `docs/GUARD.md`.
    pub guard_allow_functions: Vec<String>,
    /// Upper bound on the client's connections (`max_connections`, default 16). Beyond the
    /// `pipeline_size` kept open, the service opens connections on demand — exclusive ones for
    /// sessions and transactions, lanes for statements estimated slow, and overflow connections
    /// when server-side work saturates the others — and closes them after `idle_timeout`
    /// unused. Lanes and overflow leave `pinned_size` of them to exclusive connections. At most
    /// `pipeline_size`: no lanes or overflow, and `pinned_size` exclusive connections beside.
    /// Behind a pooler (declared by `pooler`, found by a connection's probe, or
    /// `named_statements` off) no lanes or overflow open either: the pooler's own pool is the
    /// capacity there.
    pub max_connections: usize,
    /// A statement whose estimated server time reaches this runs on a lane of its own, away from
    /// the pipelined fast path (`slow_threshold_us`, default 2000 µs).
    pub slow_threshold: Duration,
    /// Adaptive in-flight limit: estimated server work a connection holds in flight before
    /// further units wait (`max_queue_work_us`, default 10000 µs); `max_in_flight` still caps
    /// the count. A connection stopped by this limit with under 16 units (or a quarter of `max_in_flight`) in
    /// flight and units waiting is work-bound: the signal to open an overflow connection.
    pub max_queue_work: Duration,
    /// Overflow connections open only while at least this share of the machine's CPU time, in
    /// percent, was idle over the last second or more (`spare_cpu_pct`, default 5; 0 turns the
    /// check off). An overflow connection adds server capacity, which a client whose machine
    /// has no CPU to spare cannot use: its own queueing then looks like server work. Below it,
    /// a server-time sample far above its statement's estimate (over 250 µs and twice it) is
    /// discounted too (a lone answer's not taken, a busy backend's taken as twice the
    /// estimate), so waits for a CPU, the client's or the backend's, do not make cheap
    /// statements look slow enough for lanes (`Stats` counts `samples_discounted_busy_cpu`).
    /// Measured from `/proc/stat` (see [`crate::rt::Runtime::cpu_sample`]); where it cannot be
    /// read, both rules stand aside. Lanes for statements estimated slow are not held.
    pub spare_cpu_pct: u8,
    /// Fair lanes (`fair_lanes`, default on): while every lane has slow statements queued
    /// and no more lanes can be opened, fast statements wait (up to 20 ms) until a lane has
    /// none, so slow work is not starved by the fast path's pace (see `docs/ROUTING.md`).
    pub fair_lanes: bool,
    /// Sync coalescing (`sync_coalescing`, default on): cheap statements the guard proves
    /// read-only ([`crate::guard::is_read_only`]) share one Sync with their neighbours in a
    /// connection's pipeline (up to 16 per Sync), so the server ends one transaction and
    /// flushes once for all of them. An error fails only its own statement; the ones after it
    /// that the server skipped are sent again. See `docs/ROUTING.md`.
    pub sync_coalescing: bool,
    /// How long an on-demand connection (lane, overflow, or an idle exclusive one) may sit
    /// unused before it is closed (`idle_timeout_ms`, default 2000).
    pub idle_timeout: Duration,
    /// A connection that has waited this long for the server with work in flight, hearing
    /// nothing, is checked from a second, short connection (`health_check_ms`, default 10000;
    /// 0 turns it off): if the server's view of its backend (`pg_stat_activity`) is gone or
    /// idle, the connection is half-open, and is closed with its units failed as the bytes
    /// written say (see `docs/DESIGN.md`). A backend still running keeps it.
    pub health_check: Option<Duration>,
    /// The longest message accepted from the server, in bytes (`max_message_size`, default
    /// 1 GiB, the server's own limit): a longer one (a row, COPY data, an error) fails its
    /// connection before anything is allocated for it. Messages that never carry data
    /// (authentication, statuses, completions) are refused over 30,000 bytes, as libpq does.
    pub max_message_size: usize,
    /// With the `tracing` feature: record each statement's text in its span's `db.query.text`
    /// (off by default: statement texts can carry data an operator should not collect).
    pub trace_sql: bool,
    /// The password file (`passfile`, `PGPASSFILE`, `~/.pgpass`), looked up per server when no
    /// password is set.
    passfile: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 5432,
            user: "postgres".into(),
            hostaddr: None,
            other_hosts: Vec::new(),
            target_session_attrs: TargetSessionAttrs::Any,
            load_balance_hosts: LoadBalanceHosts::Disable,
            password: None,
            dbname: String::new(),
            application_name: Some("pgpipe".into()),
            options: None,
            tls: TlsConfig::default(),
            channel_binding: ChannelBinding::default(),
            require_auth: RequireAuth::default(),
            keepalives: Keepalives::default(),
            tcp_user_timeout: None,
            pipeline_size: 4,
            max_in_flight: 1024,
            mailbox_size: 256,
            statement_cache_size: 256,
            named_statements: true,
            pooler: Pooler::Auto,
            connect_timeout: Duration::from_secs(10),
            query_timeout: None,
            checkout_timeout: None,
            shared_statement_timeout: None,
            retry_not_dispatched: true,
            dispatch_timeout: Duration::from_secs(10),
            pinned_size: 2,
            release_reset: ReleaseReset::Changed,
            guard: crate::guard::Mode::Default,
            guard_allow_functions: Vec::new(),
            max_connections: 16,
            slow_threshold: Duration::from_micros(2000),
            max_queue_work: Duration::from_micros(10_000),
            spare_cpu_pct: 5,
            idle_timeout: Duration::from_millis(2000),
            fair_lanes: true,
            sync_coalescing: true,
            health_check: Some(Duration::from_secs(10)),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            trace_sql: false,
            passfile: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written out so the password can never reach logs through `{:?}`.
        f.debug_struct("Config")
            .field("host", &self.host)
            .field("hostaddr", &self.hostaddr)
            .field("port", &self.port)
            .field("other_hosts", &self.other_hosts)
            .field("target_session_attrs", &self.target_session_attrs)
            .field("load_balance_hosts", &self.load_balance_hosts)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("dbname", &self.dbname)
            .field("application_name", &self.application_name)
            .field("options", &self.options)
            .field("tls", &self.tls)
            .field("channel_binding", &self.channel_binding)
            .field("require_auth", &self.require_auth)
            .field("keepalives", &self.keepalives)
            .field("tcp_user_timeout", &self.tcp_user_timeout)
            .field("pipeline_size", &self.pipeline_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("mailbox_size", &self.mailbox_size)
            .field("statement_cache_size", &self.statement_cache_size)
            .field("named_statements", &self.named_statements)
            .field("pooler", &self.pooler)
            .field("connect_timeout", &self.connect_timeout)
            .field("query_timeout", &self.query_timeout)
            .field("checkout_timeout", &self.checkout_timeout)
            .field("shared_statement_timeout", &self.shared_statement_timeout)
            .field("retry_not_dispatched", &self.retry_not_dispatched)
            .field("dispatch_timeout", &self.dispatch_timeout)
            .field("pinned_size", &self.pinned_size)
            .field("release_reset", &self.release_reset)
            .field("guard", &self.guard)
            .field("guard_allow_functions", &self.guard_allow_functions)
            .field("max_connections", &self.max_connections)
            .field("slow_threshold", &self.slow_threshold)
            .field("max_queue_work", &self.max_queue_work)
            .field("idle_timeout", &self.idle_timeout)
            .field("fair_lanes", &self.fair_lanes)
            .field("spare_cpu_pct", &self.spare_cpu_pct)
            .field("sync_coalescing", &self.sync_coalescing)
            .field("health_check", &self.health_check)
            .field("max_message_size", &self.max_message_size)
            .field("trace_sql", &self.trace_sql)
            .field("passfile", &self.passfile)
            .finish()
    }
}

impl Config {
    /// `connect_timeout` meaning "wait forever" (libpq's `connect_timeout=0`): about 136
    /// years, so `now + connect_timeout` cannot overflow; compare with it to skip the timer.
    pub const NO_CONNECT_TIMEOUT: Duration = Duration::from_secs(u32::MAX as u64);

    /// Checks the limits that the service relies on, and combinations of settings that
    /// libpq refuses.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_tls()?;
        if self.pipeline_size == 0 {
            return Err(bad("pipeline_size must be at least 1"));
        }
        if self.max_in_flight == 0 || self.mailbox_size == 0 {
            return Err(bad("max_in_flight and mailbox_size must be at least 1"));
        }
        if self.max_queue_work.is_zero() {
            return Err(bad("max_queue_work must be positive"));
        }
        if self.pinned_size == 0 {
            return Err(bad("pinned_size must be at least 1"));
        }
        if self.statement_cache_size == 0 {
            return Err(bad("statement_cache_size must be at least 1"));
        }
        Ok(())
    }

    fn validate_tls(&self) -> Result<(), Error> {
        let mode = options::ssl_mode_name(self.tls.mode);
        let strong = matches!(
            self.tls.mode,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        );
        if self.tls.root_cert == Some(RootCert::System) && self.tls.mode != SslMode::VerifyFull {
            return Err(bad(&format!(
                "sslmode={mode} is too weak for sslrootcert=system, which needs sslmode=verify-full"
            )));
        }
        if self.tls.negotiation == SslNegotiation::Direct && !strong {
            return Err(bad(&format!(
                "sslnegotiation=direct needs sslmode require, verify-ca or verify-full (sslmode is {mode})"
            )));
        }
        if self.channel_binding == ChannelBinding::Require && self.tls.mode == SslMode::Disable {
            return Err(bad(
                "channel_binding=require needs TLS, but sslmode=disable turns it off",
            ));
        }
        if self
            .tls
            .max_version
            .is_some_and(|max| max < self.tls.min_version)
        {
            return Err(bad(
                "ssl_max_protocol_version is lower than ssl_min_protocol_version",
            ));
        }
        Ok(())
    }

    /// Pipelined connections the service may hold at once (never fewer than `pipeline_size`).
    pub fn connection_limit(&self) -> usize {
        self.max_connections.max(self.pipeline_size)
    }

    /// Every server of the host list, `host` first, in the order given.
    pub fn servers(&self) -> Vec<Server> {
        let first = Server {
            host: self.host.clone(),
            hostaddr: self.hostaddr,
            port: self.port,
        };
        std::iter::once(first)
            .chain(self.other_hosts.iter().cloned())
            .collect()
    }

    /// This configuration for `server` alone: its host, address and port, no other hosts.
    pub fn for_server(&self, server: &Server) -> Config {
        Config {
            host: server.host.clone(),
            hostaddr: server.hostaddr,
            port: server.port,
            other_hosts: Vec::new(),
            ..self.clone()
        }
    }

    /// The password to send to `server`: [`Config::password`] if set, else the first line of the
    /// password file that matches this server's host and port (and the database and user), as
    /// libpq looks it up for each host of a list. Reads the file.
    pub fn password_for(&self, server: &Server) -> Option<String> {
        if let Some(p) = &self.password {
            return Some(p.clone());
        }
        pgpass::lookup(self.passfile.as_deref()?, &self.for_server(server))
    }

    /// The password file [`Config::password_for`] reads, if any.
    pub fn passfile(&self) -> Option<&std::path::Path> {
        self.passfile.as_deref()
    }

    /// Sets the password file (the `passfile` keyword).
    pub fn set_passfile(&mut self, path: Option<PathBuf>) {
        self.passfile = path;
    }

    /// The database to connect to: `dbname`, or the user name when empty (as libpq does).
    pub fn database(&self) -> &str {
        if self.dbname.is_empty() {
            &self.user
        } else {
            &self.dbname
        }
    }
}

pub(crate) fn bad(msg: &str) -> Error {
    Error::Config(msg.to_owned())
}

/// A fresh directory under the system temp directory, for tests that need real files.
#[cfg(test)]
pub(crate) fn test_dir(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("pgpipe-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// One server of a host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Host name, IP address, socket directory (`/...`) or abstract socket name (`@...`).
    pub host: String,
    /// Numeric address to connect to instead of resolving `host`.
    pub hostaddr: Option<IpAddr>,
    /// Port.
    pub port: u16,
}

impl Server {
    /// A server by host name (or address) and port.
    pub fn new(host: impl Into<String>, port: u16) -> Server {
        Server {
            host: host.into(),
            hostaddr: None,
            port,
        }
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hostaddr {
            Some(a) if a.to_string() != self.host => write!(f, "{} ({a}):{}", self.host, self.port),
            _ if self.host.contains(':') => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// `target_session_attrs`: which servers may serve, decided from what each reports
/// (`in_hot_standby`, `default_transaction_read_only`; a query on servers older than 14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TargetSessionAttrs {
    /// Any server that accepts the connection.
    #[default]
    Any,
    /// One that accepts writes by default (not a standby, `default_transaction_read_only` off).
    ReadWrite,
    /// One that does not (a standby, or `default_transaction_read_only` on).
    ReadOnly,
    /// Not in hot standby.
    Primary,
    /// In hot standby.
    Standby,
    /// A standby if any server of the list is one; otherwise any server.
    PreferStandby,
}

/// `load_balance_hosts`: the order in which the servers of a host list are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadBalanceHosts {
    /// In the order given.
    #[default]
    Disable,
    /// Shuffled for every connection, spreading connections over the servers.
    Random,
}

/// `sslmode`: whether TLS is used and what is verified, with libpq's meaning of each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// Plaintext first; TLS only if the server rejects the plaintext connection.
    Allow,
    /// TLS if the server offers it, else plaintext (libpq's default).
    #[default]
    Prefer,
    /// TLS, without verifying the server's certificate, unless a root certificate is configured
    /// (then as [`SslMode::VerifyCa`], as libpq does).
    Require,
    /// TLS, with the server's certificate chain verified against the root certificates.
    VerifyCa,
    /// As [`SslMode::VerifyCa`], and the certificate must name the host connected to.
    VerifyFull,
}

/// Where trusted root certificates come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// The platform's trust store (`sslrootcert=system`); implies `verify-full` as in libpq.
    System,
}

/// How the TLS connection is started (`sslnegotiation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslNegotiation {
    /// The PostgreSQL way: an SSLRequest first, then TLS if the server answers `S`.
    #[default]
    Postgres,
    /// TLS from the first byte, with ALPN `postgresql` (PostgreSQL 17 and later).
    Direct,
}

/// A TLS protocol version bound (`ssl_min_protocol_version`, `ssl_max_protocol_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// Transport security settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsConfig {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`: trusted roots for `verify-ca` / `verify-full`.
    pub root_cert: Option<RootCert>,
    /// `sslcert`: the client certificate chain (PEM), for certificate authentication.
    pub cert: Option<PathBuf>,
    /// `sslkey`: the client certificate's private key (PEM, unencrypted).
    pub key: Option<PathBuf>,
    /// `sslnegotiation`.
    pub negotiation: SslNegotiation,
    /// `sslsni`: send the host name in the TLS handshake (default on; never for IP addresses).
    pub sni: bool,
    /// `ssl_min_protocol_version` (default TLS 1.2, as libpq).
    pub min_version: TlsVersion,
    /// `ssl_max_protocol_version` (default: the newest supported).
    pub max_version: Option<TlsVersion>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            mode: SslMode::default(),
            root_cert: None,
            cert: None,
            key: None,
            negotiation: SslNegotiation::default(),
            sni: true,
            min_version: TlsVersion::Tls12,
            max_version: None,
        }
    }
}

/// `channel_binding`: SCRAM-SHA-256-PLUS with `tls-server-end-point` over TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChannelBinding {
    /// Never bind the channel.
    Disable,
    /// Bind when TLS is on and the server offers SCRAM-SHA-256-PLUS (libpq's default).
    #[default]
    Prefer,
    /// Fail unless the server authenticates with channel binding.
    Require,
}

/// TCP keepalive settings; `None` fields keep the system defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalives {
    /// `keepalives` (default on, as libpq).
    pub enabled: bool,
    /// `keepalives_idle`: idle time before the first probe.
    pub idle: Option<Duration>,
    /// `keepalives_interval`: time between probes.
    pub interval: Option<Duration>,
    /// `keepalives_count`: probes lost before the connection is considered dead.
    pub count: Option<u32>,
}

impl Default for Keepalives {
    fn default() -> Self {
        Keepalives {
            enabled: true,
            idle: None,
            interval: None,
            count: None,
        }
    }
}

/// What releasing an exclusive connection resets before the next holder gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleaseReset {
    /// The session only if its holder ran something that may change session state (what the
    /// guard would refuse on the shared path: SET, LISTEN, temp tables, DDL, `nextval`, ...)
    /// or the server reported a changed parameter. A holder that only queried and wrote data
    /// costs no reset. Session changes hidden inside functions are not seen.
    #[default]
    Changed,
    /// Every release resets the session (one round trip the next holder waits for).
    Always,
}
