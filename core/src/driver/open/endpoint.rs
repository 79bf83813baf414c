//! What a client derives once from its configuration for every connection it opens: each
//! server of the host list with its connect target, password and TLS connector, the order to
//! try them in, and the TLS attempts `sslmode` calls for.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;

use super::Attempt;
use crate::config::{LoadBalanceHosts, SslMode};
use crate::driver::cancel::CancelBudget;
use crate::guard::ExtensionFunctions;
use crate::rt::{Target, TcpOptions};
use crate::tls::TlsConnector;
use crate::{Config, Error};

/// A service's configuration with what every connection derives from it once: for each
/// server of the host list, the connect target and the TLS connector (root certificates and
/// keys are loaded once per client).
pub(crate) struct Endpoint {
    config: Config,
    /// The host list, in the order given (`config.servers()`).
    pub(crate) servers: Vec<ServerEnd>,
    /// Cancels in flight for the whole client (see `cancel.rs`).
    pub(crate) cancels: Arc<CancelBudget>,
    /// The extension functions the client's guard refuses, read by each shared connection as
    /// it opens.
    pub(crate) extensions: Arc<ExtensionFunctions>,
    /// Connections of the client that opened: each one calls back those waiting to open.
    pub(crate) reached: super::Reached,
}

/// One server of the host list, ready to connect to.
pub(crate) struct ServerEnd {
    /// `host:port`, for errors and logs.
    pub(crate) name: String,
    /// The host name TLS verifies.
    pub(crate) host: String,
    /// The port (for spans).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) port: u16,
    /// The password for this server: the configured one, or its line of the password file.
    pub(super) password: Option<String>,
    pub(crate) target: Target,
    pub(crate) tls: Option<TlsConnector>,
}

impl Deref for Endpoint {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.config
    }
}

impl Endpoint {
    /// Checks `config` and prepares what connecting needs; fails on unreadable TLS files.
    pub(crate) fn new(config: Config) -> Result<Endpoint, Error> {
        config.validate()?;
        let servers = config
            .servers()
            .iter()
            .map(|s| {
                let one = config.for_server(s);
                Ok(ServerEnd {
                    name: s.to_string(),
                    host: s.host.clone(),
                    port: s.port,
                    password: config.password_for(s),
                    target: target_of(&one),
                    tls: TlsConnector::new(&one)?,
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Endpoint {
            servers,
            cancels: Arc::default(),
            extensions: Arc::new(ExtensionFunctions::new(&config.guard_allow_functions)),
            reached: super::Reached::default(),
            config,
        })
    }

    /// The configuration this endpoint was made from.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The attempts `sslmode` calls for, in order.
    pub(super) fn first_attempt(&self, server: usize) -> Attempt {
        match (&self.servers[server].tls, self.config.tls.mode) {
            (None, _) | (_, SslMode::Disable | SslMode::Allow) => Attempt::Plain,
            _ => Attempt::Tls,
        }
    }

    /// The attempt after `failed` was refused by the server, if `sslmode` allows one.
    pub(super) fn fallback(&self, server: usize, failed: Attempt) -> Option<Attempt> {
        self.servers[server].tls.as_ref()?;
        match (self.config.tls.mode, failed) {
            (SslMode::Prefer, Attempt::Tls) => Some(Attempt::Plain),
            (SslMode::Allow, Attempt::Plain) => Some(Attempt::Tls),
            _ => None,
        }
    }

    /// The order to try the servers in: as given, or shuffled (`load_balance_hosts=random`).
    pub(super) fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.servers.len()).collect();
        if self.config.load_balance_hosts == LoadBalanceHosts::Random {
            fastrand::shuffle(&mut order);
        }
        order
    }
}

/// Where to connect for `cfg`: a socket file for a host that is a directory, else TCP.
fn target_of(cfg: &Config) -> Target {
    if let Some(name) = cfg.host.strip_prefix('@') {
        return Target::Abstract(format!("{name}/.s.PGSQL.{}", cfg.port).into_bytes());
    }
    if cfg.host.starts_with('/') {
        return Target::Unix(PathBuf::from(&cfg.host).join(format!(".s.PGSQL.{}", cfg.port)));
    }
    let k = &cfg.keepalives;
    Target::Tcp {
        host: match cfg.hostaddr {
            Some(addr) => addr.to_string(),
            None => cfg.host.clone(),
        },
        port: cfg.port,
        options: TcpOptions {
            keepalive: k.enabled,
            keepalive_idle: k.idle,
            keepalive_interval: k.interval,
            keepalive_count: k.count,
            user_timeout: cfg.tcp_user_timeout,
        },
    }
}
