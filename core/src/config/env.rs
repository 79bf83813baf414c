//! What parsing takes from the machine, as libpq does: the `PG*` environment variables, the
//! OS user, files in the home directory, and the Unix socket directory.

use std::path::{Path, PathBuf};

use super::options::KEYWORDS;
use super::{Config, RootCert};

/// Where a local server's socket is looked for when no host is given: Debian's directory and
/// upstream PostgreSQL's.
pub(crate) const DEFAULT_SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// The machine state parsing reads; tests pass their own.
pub(crate) struct Sources<'a> {
    /// Reads an environment variable.
    pub(crate) var: &'a dyn Fn(&str) -> Option<String>,
    /// Directories probed for `.s.PGSQL.<port>` when no host is given.
    pub(crate) socket_dirs: &'a [&'a str],
}

impl Sources<'_> {
    /// A variable's value; an empty variable counts as unset.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.is_empty())
    }

    /// The home directory (`HOME`), where `.pgpass` and `.postgresql/` live.
    pub(crate) fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }

    /// The OS user name, libpq's default role: `USER`, then `LOGNAME`, then `postgres`.
    /// (libpq asks the password database; core has no safe way to, so it reads these.)
    pub(crate) fn os_user(&self) -> String {
        self.get("USER")
            .or_else(|| self.get("LOGNAME"))
            .unwrap_or_else(|| "postgres".to_owned())
    }
}

/// Each keyword's environment default: `(index in KEYWORDS, variable, value)` for the
/// keywords with a variable that is set. libpq's deprecated `PGREQUIRESSL` is one of them.
pub(crate) fn defaults(src: &Sources<'_>) -> Vec<(usize, &'static str, String)> {
    KEYWORDS
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let var = k.env?;
            src.get(var).map(|v| (i, var, v))
        })
        .collect()
}

/// libpq's default host: the first directory holding the socket of `port`, else `localhost`.
pub(crate) fn default_host(port: u16, socket_dirs: &[&str]) -> String {
    socket_dirs
        .iter()
        .find(|d| Path::new(d).join(format!(".s.PGSQL.{port}")).exists())
        .map_or_else(|| "localhost".to_owned(), |d| (*d).to_owned())
}

/// libpq's default TLS files in `~/.postgresql/`, each used only when it exists and the
/// keyword was not set: `root.crt`, `postgresql.crt`, and `postgresql.key` (with a
/// certificate only).
pub(crate) fn default_tls_files(cfg: &mut Config, home: &Path) {
    let dir = home.join(".postgresql");
    let existing = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    if cfg.tls.root_cert.is_none() {
        cfg.tls.root_cert = existing("root.crt").map(RootCert::File);
    }
    if cfg.tls.cert.is_none() {
        cfg.tls.cert = existing("postgresql.crt");
    }
    if cfg.tls.key.is_none() && cfg.tls.cert.is_some() {
        cfg.tls.key = existing("postgresql.key");
    }
}
