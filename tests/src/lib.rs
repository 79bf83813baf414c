//! Throwaway PostgreSQL clusters for pgpipe's integration tests and examples.
//!
//! [`Cluster::start`] creates a fresh data directory under the system temp
//! directory, runs `initdb`, installs a `pg_hba.conf` with one login role per
//! password method (see [`MD5_USER`], [`SCRAM_USER`], [`CLEAR_USER`]) and
//! starts `postgres` on a free port of 127.0.0.1. Dropping the [`Cluster`]
//! (or calling [`Cluster::stop`]) shuts the server down and removes the
//! directory.
//!
//! Because the test process may panic, be interrupted or be killed, every
//! cluster also gets a small detached watchdog shell process that waits for
//! the test process to disappear and then stops the server and removes the
//! directory. This is what cleans up the process-wide cluster behind
//! [`shared`], whose static is never dropped.
//!
//! Server binaries are located through `PGPIPE_PG_BIN`, `pg_config --bindir`
//! or `/usr/lib/postgresql/*/bin` (see [`find_bin_dir`]). `initdb` and
//! `postgres` refuse to run as root, so when the current effective uid is 0
//! they are run as the `postgres` system user through `runuser`.
//!
//! Setting `PGPIPE_TEST_URL` makes [`shared`] use that external server
//! instead of starting a cluster.
//!
//! # TLS
//!
//! [`Cluster::builder`]`().tls(true)` starts a server with `ssl = on` and
//! certificates made at test time ([`TlsMaterial`], in the cluster
//! directory; nothing secret is in the repository). Such a cluster also
//! has the TLS roles [`TLS_SCRAM_USER`] (SCRAM, TLS only), [`CERT_USER`]
//! (client certificate only) and [`NOSSL_USER`] (plaintext only); every
//! other rule above matches TLS and plaintext alike. Its plain URLs
//! ([`Cluster::url`], [`Cluster::url_for`]) say `sslmode=disable`, so a
//! client defaulting to `prefer` stays in plaintext; [`Cluster::tls_url`]
//! gives `sslmode=verify-full` URLs for host `localhost`.
//!
//! The cluster behind [`shared`] is such a TLS cluster, so every test can
//! use it both ways. An expired server certificate is tested on a cluster
//! of its own ([`ClusterBuilder::expired_server_cert`]) rather than by
//! swapping certificates on the shared one, which other tests use at the
//! same time.
//!
//! [`libpq_connects`] and [`psql_with`] run psql with a given connection
//! string, so that tests can compare pgpipe with libpq on the same server.
//! [`Cluster::socket_dir`] is the server's unix socket directory (`host=`
//! that directory connects through it; `local` connections are trusted).

#![warn(missing_docs)]

pub mod fake_server;
pub mod fault_proxy;
mod libpq;
pub mod pgbouncer;
pub mod server_log;
pub mod tls;

pub use libpq::{libpq_connects, psql_with, psql_with_env};
pub use pgbouncer::{PgBouncer, PoolMode};
pub use tls::TlsMaterial;

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Superuser of every cluster started by this crate (trust authentication).
pub const SUPERUSER: &str = "postgres";
/// Database every URL produced by a [`Cluster`] points at.
pub const DATABASE: &str = "postgres";

/// Role that must authenticate with MD5 over TCP.
pub const MD5_USER: &str = "pgpipe_md5";
/// Password of [`MD5_USER`] (stored as an MD5 hash).
pub const MD5_PASSWORD: &str = "md5-secret";
/// Role that must authenticate with SCRAM-SHA-256 over TCP.
pub const SCRAM_USER: &str = "pgpipe_scram";
/// Password of [`SCRAM_USER`] (stored as a SCRAM verifier).
pub const SCRAM_PASSWORD: &str = "scram-secret";
/// Role that must authenticate with a cleartext password over TCP.
pub const CLEAR_USER: &str = "pgpipe_clear";
/// Password of [`CLEAR_USER`] (stored as a SCRAM verifier, sent in clear).
pub const CLEAR_PASSWORD: &str = "clear-secret";

/// Role of TLS clusters that must use TLS and SCRAM-SHA-256: `hostssl`
/// connections authenticate with SCRAM, `hostnossl` ones are rejected.
pub const TLS_SCRAM_USER: &str = "pgpipe_tls_scram";
/// Password of [`TLS_SCRAM_USER`] (stored as a SCRAM verifier).
pub const TLS_SCRAM_PASSWORD: &str = "tls-scram-secret";
/// Role of TLS clusters that logs in only with the client certificate
/// ([`TlsMaterial::client_cert`], whose CN is this name) over TLS (`cert`
/// authentication); plaintext is rejected. It has no password.
pub const CERT_USER: &str = "pgpipe_cert";
/// Role of TLS clusters that may only use plaintext: `hostnossl` is
/// trusted, `hostssl` rejected, so `sslmode=prefer` must fall back to
/// plaintext and `require` must fail.
pub const NOSSL_USER: &str = "pgpipe_nossl";

/// Environment variable naming the directory holding `initdb`, `postgres`
/// and `psql`; overrides every other way of finding them.
pub const PG_BIN_ENV: &str = "PGPIPE_PG_BIN";
/// Environment variable with a connection URL of an external server that
/// [`shared`] uses instead of starting a throwaway cluster.
pub const TEST_URL_ENV: &str = "PGPIPE_TEST_URL";

/// Conventional location of Debian/Ubuntu server packages, one directory per
/// major version.
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

/// The `pg_hba.conf` written into every cluster (replacing initdb's); a TLS
/// cluster gets [`PG_HBA_TLS`] before the last line.
const PG_HBA: &str = "\
local all all trust
local replication all trust
host replication all 127.0.0.1/32 trust
host all pgpipe_md5 127.0.0.1/32 md5
host all pgpipe_scram 127.0.0.1/32 scram-sha-256
host all pgpipe_clear 127.0.0.1/32 password
host all all 127.0.0.1/32 trust
";

/// The rules of the TLS roles. They come before the final `trust` line,
/// which would otherwise let them in any way.
const PG_HBA_TLS: &str = "\
hostssl all pgpipe_tls_scram 127.0.0.1/32 scram-sha-256
hostnossl all pgpipe_tls_scram 127.0.0.1/32 reject
hostssl all pgpipe_cert 127.0.0.1/32 cert
hostnossl all pgpipe_cert 127.0.0.1/32 reject
hostnossl all pgpipe_nossl 127.0.0.1/32 trust
hostssl all pgpipe_nossl 127.0.0.1/32 reject
";

/// The password roles: name, password and the `password_encryption` used to
/// store the password.
const AUTH_ROLES: [(&str, &str, &str); 3] = [
    (MD5_USER, MD5_PASSWORD, "md5"),
    (SCRAM_USER, SCRAM_PASSWORD, "scram-sha-256"),
    (CLEAR_USER, CLEAR_PASSWORD, "scram-sha-256"),
];

/// How long to wait for a freshly started server to accept queries.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take before the server is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How many ports to try when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 5;
/// Number of server log lines quoted in startup errors.
const LOG_TAIL_LINES: usize = 40;

/// Shell script of the watchdog process.
///
/// Arguments: test process pid, pid of the spawned server process (the
/// postmaster, or `runuser` when running as root), cluster directory and the
/// path of `postmaster.pid`. The postmaster pid is read when cleanup starts,
/// so the script also covers a server that was still starting up.
const WATCHDOG_SCRIPT: &str = r#"parent=$1; server=$2; dir=$3; pidfile=$4
while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
pm=$(head -n 1 "$pidfile" 2>/dev/null)
case "$pm" in ''|*[!0-9]*) pm="" ;; esac
if [ -n "$pm" ]; then kill -INT "$pm" 2>/dev/null; else kill -INT "$server" 2>/dev/null; fi
i=0
while [ "$i" -lt 20 ] && kill -0 "${pm:-$server}" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -KILL $pm "$server" 2>/dev/null
rm -rf "$dir"
"#;

/// Errors of the harness.
#[derive(Debug)]
pub enum HarnessError {
    /// No directory containing the PostgreSQL server binaries was found.
    BinariesNotFound {
        /// Every place that was looked at, with what was found there.
        searched: Vec<String>,
    },
    /// The `pgbouncer` binary was not found.
    PgBouncerNotFound {
        /// Every place that was looked at.
        searched: Vec<String>,
    },
    /// An I/O operation (file system, spawning a process, ...) failed.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// An external command ran but exited unsuccessfully.
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard output.
        stdout: String,
        /// Its standard error.
        stderr: String,
    },
    /// The server did not start (it exited, timed out, or no free port
    /// could be bound).
    StartupFailed {
        /// The last port that was tried.
        port: u16,
        /// Why startup was given up.
        reason: String,
        /// The last lines of the server log.
        log_tail: String,
    },
    /// Test certificates could not be generated.
    Tls(String),
}

impl HarnessError {
    fn io(context: impl Into<String>, source: io::Error) -> Self {
        HarnessError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::BinariesNotFound { searched } => {
                write!(
                    f,
                    "no PostgreSQL server binaries (a directory containing `initdb`) found; searched: {}; \
                     set {PG_BIN_ENV} to the directory holding initdb, postgres and psql",
                    searched.join("; ")
                )
            }
            HarnessError::PgBouncerNotFound { searched } => write!(
                f,
                "no pgbouncer binary found (install it with `apt-get install -y pgbouncer`, or set \
                 PGPIPE_PGBOUNCER to its path); searched: {}",
                searched.join("; ")
            ),
            HarnessError::Io { context, source } => write!(f, "{context}: {source}"),
            HarnessError::CommandFailed {
                command,
                status,
                stdout,
                stderr,
            } => {
                write!(f, "command `{command}` failed ({status})")?;
                let stderr = stderr.trim();
                if !stderr.is_empty() {
                    write!(f, "; stderr:\n{stderr}")?;
                }
                let stdout = stdout.trim();
                if !stdout.is_empty() {
                    write!(f, "\nstdout:\n{stdout}")?;
                }
                Ok(())
            }
            HarnessError::StartupFailed {
                port,
                reason,
                log_tail,
            } => write!(
                f,
                "PostgreSQL server on port {port} failed to start: {reason}; server log tail:\n{log_tail}"
            ),
            HarnessError::Tls(reason) => write!(f, "generating test certificates: {reason}"),
        }
    }
}

impl std::error::Error for HarnessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HarnessError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Finds the directory holding the PostgreSQL server binaries.
///
/// In order: the `PGPIPE_PG_BIN` environment variable (used as is, but it
/// must contain `initdb`), the output of `pg_config --bindir` if that
/// directory contains `initdb`, and the highest-numbered
/// `/usr/lib/postgresql/*/bin` containing `initdb`.
pub fn find_bin_dir() -> Result<PathBuf, HarnessError> {
    let mut searched = Vec::new();

    match std::env::var_os(PG_BIN_ENV) {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.join("initdb").is_file() {
                return Ok(dir);
            }
            searched.push(format!("{PG_BIN_ENV}={} (no initdb there)", dir.display()));
            return Err(HarnessError::BinariesNotFound { searched });
        }
        _ => searched.push(format!("{PG_BIN_ENV} (not set)")),
    }

    match Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if dir.join("initdb").is_file() {
                return Ok(dir);
            }
            searched.push(format!(
                "`pg_config --bindir` = {} (no initdb there)",
                dir.display()
            ));
        }
        Ok(out) => searched.push(format!("`pg_config --bindir` (failed: {})", out.status)),
        Err(e) => searched.push(format!("`pg_config --bindir` (could not run: {e})")),
    }

    let mut best: Option<(Vec<u32>, PathBuf)> = None;
    if let Ok(entries) = fs::read_dir(DEBIAN_PG_ROOT) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(version) = parse_version(&name.to_string_lossy()) else {
                continue;
            };
            let bin = entry.path().join("bin");
            if !bin.join("initdb").is_file() {
                continue;
            }
            let better = match &best {
                Some((best_version, _)) => version > *best_version,
                None => true,
            };
            if better {
                best = Some((version, bin));
            }
        }
    }
    if let Some((_, bin)) = best {
        return Ok(bin);
    }
    searched.push(format!("{DEBIAN_PG_ROOT}/*/bin (no directory with initdb)"));
    Err(HarnessError::BinariesNotFound { searched })
}

/// Parses a directory name such as `15` or `9.6` into comparable numbers.
fn parse_version(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

/// The `psql` of `bin`, or plain `psql` (looked up on `PATH`) if `bin` has
/// none.
fn psql_in(bin: &Path) -> PathBuf {
    let psql = bin.join("psql");
    if psql.is_file() {
        psql
    } else {
        PathBuf::from("psql")
    }
}

/// Whether the effective uid of this process is 0.
fn is_root() -> bool {
    if let Ok(status) = fs::read_to_string("/proc/self/status") {
        // "Uid:\treal\teffective\tsaved\tfs"
        if let Some(euid) = status
            .lines()
            .find(|line| line.starts_with("Uid:"))
            .and_then(|line| line.split_whitespace().nth(2))
        {
            return euid == "0";
        }
    }
    Command::new("id")
        .arg("-u")
        .stdin(Stdio::null())
        .output()
        .map(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Creates a fresh, uniquely named directory under the system temp dir.
fn create_unique_dir() -> Result<PathBuf, HarnessError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let mut last_err = None;
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("pgpipe-{}-{n}-{nanos:x}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => {
                return Err(HarnessError::io(
                    format!("creating cluster directory {}", dir.display()),
                    e,
                ))
            }
        }
    }
    Err(HarnessError::io(
        format!("creating a unique directory under {}", base.display()),
        last_err.unwrap_or_else(|| io::Error::other("no attempt made")),
    ))
}

/// Asks the kernel for a currently free TCP port on 127.0.0.1.
fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to pick a free port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| HarnessError::io("reading the address of the port probe", e))?
        .port();
    Ok(port)
}

/// Renders a command line for error messages.
fn describe(cmd: &Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Turns a finished command into its stdout, or an error when it failed.
fn check_output(command: String, output: Output) -> Result<String, HarnessError> {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(HarnessError::CommandFailed {
            command,
            status: output.status.to_string(),
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Runs `cmd` to completion with stdin closed and returns its stdout.
fn run(mut cmd: Command) -> Result<String, HarnessError> {
    let command = describe(&cmd);
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HarnessError::io(format!("running `{command}`"), e))?;
    check_output(command, output)
}

/// Runs `cmd` to completion feeding `input` on stdin and returns its stdout.
fn run_with_stdin(mut cmd: Command, input: &str) -> Result<String, HarnessError> {
    let command = describe(&cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| HarnessError::io(format!("running `{command}`"), e))?;
    // Written from another thread so that a large output cannot deadlock
    // against a large input.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_owned();
        thread::spawn(move || {
            // A failure shows up as the command's own error.
            let _ = stdin.write_all(input.as_bytes());
        })
    });
    let output = child
        .wait_with_output()
        .map_err(|e| HarnessError::io(format!("waiting for `{command}`"), e))?;
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    check_output(command, output)
}

/// Sends `signal` (a name such as `INT`) to `pids` with the shell's `kill`,
/// ignoring processes that are already gone.
fn send_signal(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("sh")
        .arg("-c")
        .arg(r#"sig=$1; shift; kill -s "$sig" "$@" 2>/dev/null"#)
        .arg("sh")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether a process with this pid exists (`kill -0`).
fn process_alive(pid: u32) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(r#"kill -0 "$1" 2>/dev/null"#)
        .arg("sh")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

/// Quotes a string as an SQL literal.
fn sql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Quotes a string as an SQL identifier.
fn sql_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Percent-encodes everything except RFC 3986 unreserved characters, which
/// is always safe inside the user-info part of a URL.
fn percent_encode(s: &str) -> String {
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
fn userinfo(user: &str, password: &str) -> String {
    if password.is_empty() {
        percent_encode(user)
    } else {
        format!("{}:{}", percent_encode(user), percent_encode(password))
    }
}

/// Quotes a value for a libpq `key=value` connection string.
fn conninfo_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A command running `program`, through `runuser -u postgres` when `as_root` (PostgreSQL's
/// binaries refuse to run as root, and PgBouncer runs beside them as the same user).
pub(crate) fn command_as_postgres(program: &Path, as_root: bool) -> Command {
    if as_root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// Replaces the credentials of a connection string, keeping its host, port,
/// database and parameters.
///
/// `postgres://` and `postgresql://` URLs get a new user-info part; anything
/// else is taken to be a libpq `key=value` string, to which `user` and
/// `password` keywords are appended (later keywords win in libpq).
fn with_credentials(url: &str, user: &str, password: &str) -> String {
    for scheme in ["postgresql://", "postgres://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let hostport = match authority.rfind('@') {
                Some(at) => &authority[at + 1..],
                None => authority,
            };
            return format!("{scheme}{}@{hostport}{tail}", userinfo(user, password));
        }
    }
    format!(
        "{url} user={} password={}",
        conninfo_quote(user),
        conninfo_quote(password)
    )
}

/// Result of one attempt to bring the server up on a port.
enum Readiness {
    /// The server answers queries.
    Ready,
    /// The port is in use by someone else; try another one.
    PortTaken(String),
}

/// An owned throwaway PostgreSQL cluster.
///
/// Dropping it (or calling [`Cluster::stop`]) stops the server and removes
/// its directory. A watchdog process does the same if this process dies
/// without dropping it.
#[derive(Debug)]
pub struct Cluster {
    /// Directory of the server binaries.
    bin: PathBuf,
    /// The `psql` used for [`Cluster::psql`].
    psql: PathBuf,
    /// Cluster directory: holds the data directory, the unix socket and the
    /// server log. Removed on stop.
    dir: PathBuf,
    /// Data directory (`dir/data`).
    data: PathBuf,
    /// Server log (`dir/server.log`).
    log: PathBuf,
    /// TCP port on 127.0.0.1 (0 until the server has been started).
    port: u16,
    /// Whether the server binaries run as `postgres` through `runuser`.
    as_root: bool,
    /// The spawned server process: the postmaster, or `runuser` as root.
    server: Option<Child>,
    /// The detached cleanup watchdog.
    watchdog: Option<Child>,
    /// Whether the directory has been removed already.
    cleaned: bool,
    /// Certificates of a TLS cluster (`dir/tls`); `None` without TLS.
    tls: Option<TlsMaterial>,
    /// Whether the server presents the expired certificate.
    expired_cert: bool,
}

/// Options of a [`Cluster`] to start; from [`Cluster::builder`].
#[derive(Debug, Clone, Default)]
pub struct ClusterBuilder {
    tls: bool,
    expired_cert: bool,
}

impl ClusterBuilder {
    /// Whether the server offers TLS (`ssl = on`, certificates from a fresh
    /// [`TlsMaterial`], the TLS roles and rules). Off by default.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Whether the server presents the expired certificate
    /// ([`TlsMaterial::expired_cert`]) instead of the valid one; implies
    /// [`ClusterBuilder::tls`].
    pub fn expired_server_cert(mut self, on: bool) -> Self {
        self.expired_cert = on;
        self.tls |= on;
        self
    }

    /// Creates, initializes and starts the cluster; see [`Cluster::start`].
    pub fn start(self) -> Result<Cluster, HarnessError> {
        Cluster::start_with(self)
    }
}

impl Cluster {
    /// Creates, initializes and starts a new cluster without TLS, and
    /// creates the password roles ([`MD5_USER`], [`SCRAM_USER`],
    /// [`CLEAR_USER`]).
    ///
    /// Takes a second or two, most of it in `initdb`.
    pub fn start() -> Result<Cluster, HarnessError> {
        Cluster::start_with(ClusterBuilder::default())
    }

    /// Options for a cluster to start, such as TLS.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    fn start_with(options: ClusterBuilder) -> Result<Cluster, HarnessError> {
        let bin = find_bin_dir()?;
        let dir = create_unique_dir()?;
        // From here on, dropping `cluster` on an error path cleans up.
        let mut cluster = Cluster {
            psql: psql_in(&bin),
            bin,
            data: dir.join("data"),
            log: dir.join("server.log"),
            dir,
            port: 0,
            as_root: is_root(),
            server: None,
            watchdog: None,
            cleaned: false,
            tls: None,
            expired_cert: options.expired_cert,
        };
        cluster.init()?;
        if options.tls {
            cluster.setup_tls()?;
        }
        cluster.launch()?;
        cluster.create_auth_roles()?;
        Ok(cluster)
    }

    /// TCP port the server listens on (at 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Superuser URL: `postgres://postgres@127.0.0.1:PORT/postgres`, plus
    /// `?sslmode=disable` on a TLS cluster.
    pub fn url(&self) -> String {
        self.url_for(SUPERUSER, "")
    }

    /// URL for `user` with `password`:
    /// `postgres://user:password@127.0.0.1:PORT/postgres`, with user and
    /// password percent-encoded (the `:password` part is left out when the
    /// password is empty). On a TLS cluster `?sslmode=disable` follows, so
    /// the connection is plaintext whatever the client's default.
    pub fn url_for(&self, user: &str, password: &str) -> String {
        let params = if self.tls.is_some() {
            "?sslmode=disable"
        } else {
            ""
        };
        format!(
            "postgres://{}@127.0.0.1:{}/{DATABASE}{params}",
            userinfo(user, password),
            self.port
        )
    }

    /// Superuser URL over verified TLS; see [`Cluster::tls_url_for`].
    pub fn tls_url(&self) -> Option<String> {
        self.tls_url_for(SUPERUSER, "")
    }

    /// URL for `user` with `password` over TLS, verified against the test
    /// CA: `postgres://user:password@localhost:PORT/postgres?sslmode=verify-full&sslrootcert=CA`
    /// (credentials and the CA path percent-encoded). `None` without TLS.
    pub fn tls_url_for(&self, user: &str, password: &str) -> Option<String> {
        let tls = self.tls.as_ref()?;
        Some(format!(
            "postgres://{}@localhost:{}/{DATABASE}?sslmode=verify-full&sslrootcert={}",
            userinfo(user, password),
            self.port,
            percent_encode(&tls.ca_cert().to_string_lossy())
        ))
    }

    /// The certificates of a TLS cluster; `None` without TLS.
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_ref()
    }

    /// The directory of the server's unix socket (`.s.PGSQL.PORT`): pass it
    /// as `host` to connect through the socket. It is the cluster directory.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// The server's Linux abstract socket "directory" (`@name`, unique per
    /// cluster): pass it as `host` to connect through the abstract socket.
    pub fn abstract_socket(&self) -> String {
        let name = self.dir.file_name().unwrap_or_default().to_string_lossy();
        format!("@{name}")
    }

    /// Runs `sql` (one or more statements, or a psql script) as the
    /// superuser against database `postgres` and returns psql's unaligned,
    /// tuples-only output (`-A -t`). Stops at the first error, which is
    /// returned as [`HarnessError::CommandFailed`] with psql's stderr.
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        run_with_stdin(self.psql_command(10), sql)
    }

    /// The cluster directory (data directory, unix socket and server log);
    /// it is removed when the cluster stops.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server log. Its lines start with the time, the backend's pid
    /// and `app=<application_name>:`, so a test can find what its own
    /// connections made the server log.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The directory of the PostgreSQL binaries in use.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// Restarts the server on the same port and data directory: a fast
    /// shutdown (every backend gets FATAL 57P01), then a start. Blocks until
    /// the server answers again.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.stop_server();
        self.spawn_server()?;
        self.spawn_watchdog()?;
        match self.wait_ready()? {
            Readiness::Ready => Ok(()),
            Readiness::PortTaken(reason) => Err(HarnessError::StartupFailed {
                port: self.port,
                reason: format!("restart: {reason}"),
                log_tail: self.log_tail(),
            }),
        }
    }

    /// A streaming standby of this cluster (`pg_basebackup -R`, hot standby)
    /// in a directory and on a port of its own, started and answering
    /// queries. It has the primary's roles and data; without TLS.
    pub fn standby(&self) -> Result<Cluster, HarnessError> {
        let dir = create_unique_dir()?;
        let mut standby = Cluster {
            psql: self.psql.clone(),
            bin: self.bin.clone(),
            data: dir.join("data"),
            log: dir.join("server.log"),
            dir,
            port: 0,
            as_root: self.as_root,
            server: None,
            watchdog: None,
            cleaned: false,
            tls: None,
            expired_cert: false,
        };
        if standby.as_root {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:"]).arg(&standby.dir);
            run(chown)?;
        }
        let mut backup = standby.server_command("pg_basebackup");
        backup
            .arg("-D")
            .arg(&standby.data)
            .args(["-R", "-X", "stream", "--no-sync", "-c", "fast"])
            .args(["-h", "127.0.0.1", "-U", SUPERUSER, "-p"])
            .arg(self.port.to_string());
        run(backup)?;
        standby.launch()?;
        Ok(standby)
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    pub fn promote(&self) -> Result<(), HarnessError> {
        self.psql("SELECT pg_catalog.pg_promote(true, 60)")
            .map(drop)
    }

    /// Whether the server is in hot standby (`pg_is_in_recovery()`).
    pub fn is_standby(&self) -> Result<bool, HarnessError> {
        Ok(self.psql("SELECT pg_catalog.pg_is_in_recovery()")?.trim() == "t")
    }

    /// Stops the server (fast shutdown), keeping its directory and port for
    /// [`Cluster::resume`].
    pub fn halt(&mut self) {
        self.stop_server();
    }

    /// Starts a server stopped by [`Cluster::halt`] again on the same port.
    pub fn resume(&mut self) -> Result<(), HarnessError> {
        self.restart()
    }

    /// Stops the server (fast shutdown, killed after 5 s) and removes the
    /// cluster directory. Dropping the cluster does the same but ignores
    /// errors.
    pub fn stop(mut self) -> Result<(), HarnessError> {
        self.shutdown()
    }

    /// A command running server binary `name`, as `postgres` when root.
    fn server_command(&self, name: &str) -> Command {
        let mut cmd = command_as_postgres(&self.bin.join(name), self.as_root);
        // The postgres user may not be able to access our working directory.
        cmd.current_dir(&self.dir);
        cmd
    }

    /// psql connected to this cluster as the superuser, reading stdin.
    fn psql_command(&self, connect_timeout_secs: u32) -> Command {
        let mut cmd = Command::new(&self.psql);
        cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", SUPERUSER, "-d", DATABASE])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-f", "-"])
            .env("PGCONNECT_TIMEOUT", connect_timeout_secs.to_string())
            // The harness's own SQL needs no TLS, even on a TLS cluster.
            .env("PGSSLMODE", "disable")
            .env_remove("PGOPTIONS")
            .current_dir(&self.dir);
        cmd
    }

    /// Runs initdb and installs the harness's pg_hba.conf.
    fn init(&mut self) -> Result<(), HarnessError> {
        if self.as_root {
            let mut chown = Command::new("chown");
            // `postgres:` is the postgres user and its login group.
            chown.args(["-R", "postgres:"]).arg(&self.dir);
            run(chown)?;
        }
        let mut initdb = self.server_command("initdb");
        initdb
            .arg("-D")
            .arg(&self.data)
            .args(["-A", "trust", "-U", SUPERUSER, "--no-sync"])
            .args(["-E", "UTF8", "--locale=C"]);
        run(initdb)?;
        self.write_hba()
    }

    /// Installs the harness's pg_hba.conf, with the TLS rules on a TLS
    /// cluster.
    fn write_hba(&self) -> Result<(), HarnessError> {
        let mut text = PG_HBA.to_owned();
        if self.tls.is_some() {
            // Before the last line, the catch-all `trust`.
            let last = text.trim_end().rfind('\n').map_or(0, |i| i + 1);
            text.insert_str(last, PG_HBA_TLS);
        }
        // Overwriting keeps the owner initdb gave the file.
        let hba = self.data.join("pg_hba.conf");
        fs::write(&hba, text).map_err(|e| HarnessError::io(format!("writing {}", hba.display()), e))
    }

    /// Generates the certificates into `dir/tls`, gives the server keys to
    /// the user running the server (it refuses keys that others can read or
    /// that belong to someone else) and adds the TLS rules to pg_hba.conf.
    fn setup_tls(&mut self) -> Result<(), HarnessError> {
        let dir = self.dir.join("tls");
        fs::create_dir(&dir)
            .map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
        let tls = TlsMaterial::generate(&dir)?;
        if self.as_root {
            let mut chown = Command::new("chown");
            chown.arg("postgres:").args(tls.server_keys());
            run(chown)?;
        }
        self.tls = Some(tls);
        self.write_hba()
    }

    /// Starts the server on a free port, retrying with other ports if the
    /// chosen one turns out to be taken.
    fn launch(&mut self) -> Result<(), HarnessError> {
        let mut last_reason = String::new();
        for _ in 0..PORT_ATTEMPTS {
            self.port = free_port()?;
            self.spawn_server()?;
            self.spawn_watchdog()?;
            match self.wait_ready()? {
                Readiness::Ready => return Ok(()),
                Readiness::PortTaken(reason) => {
                    self.stop_server();
                    last_reason = reason;
                }
            }
        }
        Err(HarnessError::StartupFailed {
            port: self.port,
            reason: format!("gave up after {PORT_ATTEMPTS} ports were taken ({last_reason})"),
            log_tail: self.log_tail(),
        })
    }

    /// Spawns the postmaster with its output going to the server log.
    fn spawn_server(&mut self) -> Result<(), HarnessError> {
        let log = fs::File::create(&self.log)
            .map_err(|e| HarnessError::io(format!("creating {}", self.log.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| HarnessError::io("duplicating the server log handle", e))?;
        let mut cmd = self.server_command("postgres");
        cmd.arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string());
        let mut settings = vec![
            "listen_addresses=127.0.0.1".to_owned(),
            format!(
                "unix_socket_directories={},{}",
                self.dir.display(),
                self.abstract_socket()
            ),
            "fsync=off".to_owned(),
            "synchronous_commit=off".to_owned(),
            "full_page_writes=off".to_owned(),
            "max_connections=300".to_owned(),
            "shared_buffers=128MB".to_owned(),
            // Names each line's application (see `Cluster::log_path`).
            "log_line_prefix=%m [%p] app=%a: ".to_owned(),
        ];
        if let Some(tls) = &self.tls {
            let (cert, key) = if self.expired_cert {
                (tls.expired_cert(), tls.expired_key())
            } else {
                (tls.server_cert(), tls.server_key())
            };
            settings.extend([
                "ssl=on".to_owned(),
                format!("ssl_cert_file={}", cert.display()),
                format!("ssl_key_file={}", key.display()),
                // Makes the server ask for (and check) client certificates.
                format!("ssl_ca_file={}", tls.ca_cert().display()),
            ]);
        }
        for setting in settings {
            cmd.arg("-c").arg(setting);
        }
        cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
        let command = describe(&cmd);
        let child = cmd
            .spawn()
            .map_err(|e| HarnessError::io(format!("starting `{command}`"), e))?;
        self.server = Some(child);
        Ok(())
    }

    /// (Re)spawns the detached watchdog for the current server process.
    fn spawn_watchdog(&mut self) -> Result<(), HarnessError> {
        self.kill_watchdog();
        let Some(server) = self.server.as_ref() else {
            return Ok(());
        };
        let child = spawn_watchdog(server.id(), &self.dir, &self.data.join("postmaster.pid"))?;
        self.watchdog = Some(child);
        Ok(())
    }

    /// Waits until the server answers queries from its own data directory.
    fn wait_ready(&mut self) -> Result<Readiness, HarnessError> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(server) = self.server.as_mut() {
                let exited = server
                    .try_wait()
                    .map_err(|e| HarnessError::io("checking the server process", e))?;
                if let Some(status) = exited {
                    self.server = None;
                    let log_tail = self.log_tail();
                    if log_tail.contains("could not bind")
                        || log_tail.contains("could not create any TCP/IP sockets")
                    {
                        return Ok(Readiness::PortTaken(format!(
                            "port {} already in use",
                            self.port
                        )));
                    }
                    return Err(HarnessError::StartupFailed {
                        port: self.port,
                        reason: format!("server exited during startup ({status})"),
                        log_tail,
                    });
                }
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                // Make sure it is our server and not someone else's that
                // got the port first.
                if let Ok(out) = run_with_stdin(self.psql_command(3), "SHOW data_directory") {
                    if same_path(Path::new(out.trim()), &self.data) {
                        return Ok(Readiness::Ready);
                    }
                    return Ok(Readiness::PortTaken(format!(
                        "port {} answered by another server (data directory {})",
                        self.port,
                        out.trim()
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::StartupFailed {
                    port: self.port,
                    reason: format!("not ready after {} s", STARTUP_TIMEOUT.as_secs()),
                    log_tail: self.log_tail(),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Creates the password roles, and the TLS roles on a TLS cluster.
    fn create_auth_roles(&self) -> Result<(), HarnessError> {
        let mut script = String::new();
        let tls_roles = [(TLS_SCRAM_USER, TLS_SCRAM_PASSWORD, "scram-sha-256")];
        let tls_roles = if self.tls.is_some() {
            &tls_roles[..]
        } else {
            &[]
        };
        for (user, password, encryption) in AUTH_ROLES.iter().chain(tls_roles) {
            script.push_str(&format!(
                "SET password_encryption = {};\nCREATE ROLE {} LOGIN PASSWORD {};\n",
                sql_literal(encryption),
                sql_ident(user),
                sql_literal(password)
            ));
        }
        if self.tls.is_some() {
            for user in [CERT_USER, NOSSL_USER] {
                script.push_str(&format!("CREATE ROLE {} LOGIN;\n", sql_ident(user)));
            }
        }
        self.psql(&script).map(drop)
    }

    /// Pid of the postmaster, from the first line of `postmaster.pid`.
    fn postmaster_pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Last lines of the server log.
    fn log_tail(&self) -> String {
        match fs::read(&self.log) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(LOG_TAIL_LINES);
                lines[start..].join("\n")
            }
            Err(e) => format!("(could not read {}: {e})", self.log.display()),
        }
    }

    /// Stops the server process if running: SIGINT (fast shutdown) to the
    /// postmaster, then SIGKILL after the grace period.
    fn stop_server(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        let postmaster = self.postmaster_pid();
        // Only the postmaster gets SIGINT: `runuser` would turn it into a
        // SIGTERM (smart shutdown) for its child.
        send_signal("INT", &[postmaster.unwrap_or(server.id())]);
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match server.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    let mut pids = vec![server.id()];
                    pids.extend(postmaster);
                    send_signal("KILL", &pids);
                    let _ = server.wait();
                    break;
                }
            }
        }
        // `runuser` only exits after its child, but be thorough.
        if let Some(pm) = postmaster {
            if pm != server.id() && process_alive(pm) {
                send_signal("KILL", &[pm]);
            }
        }
    }

    /// Kills and reaps the watchdog (its job is done by the caller).
    fn kill_watchdog(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }

    /// Stops the server, dismisses the watchdog and removes the directory.
    fn shutdown(&mut self) -> Result<(), HarnessError> {
        self.stop_server();
        self.kill_watchdog();
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(HarnessError::io(
                format!("removing {}", self.dir.display()),
                e,
            )),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// A detached watchdog ([`WATCHDOG_SCRIPT`]): once this process is gone it stops the process
/// whose pid is in `pidfile` (else `server`) and removes `dir`.
fn spawn_watchdog(server: u32, dir: &Path, pidfile: &Path) -> Result<Child, HarnessError> {
    Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("pgpipe-watchdog")
        .arg(std::process::id().to_string())
        .arg(server.to_string())
        .arg(dir)
        .arg(pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Own process group: a Ctrl-C aimed at the tests must not stop the watchdog before
        // it has cleaned up.
        .process_group(0)
        .spawn()
        .map_err(|e| HarnessError::io("spawning the cleanup watchdog", e))
}

/// Whether two paths name the same file system object.
fn same_path(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A database for tests: either the external server from `PGPIPE_TEST_URL`,
/// or a process-wide throwaway TLS [`Cluster`] started on first use and
/// removed at process exit by its watchdog.
///
/// Obtained through [`shared`].
#[derive(Debug)]
pub struct TestDb {
    inner: TestDbInner,
}

#[derive(Debug)]
enum TestDbInner {
    /// A server given by `PGPIPE_TEST_URL`.
    External {
        /// The URL as given.
        url: String,
        /// The psql used to run SQL against it.
        psql: PathBuf,
    },
    /// A throwaway cluster owned by this process.
    Local(Box<Cluster>),
}

/// The process-wide test database, set up on first use.
///
/// With `PGPIPE_TEST_URL` set, no cluster is started: the URL is used as is,
/// and the password roles ([`MD5_USER`], [`SCRAM_USER`], [`CLEAR_USER`])
/// are created on that server if possible (existing ones get their password
/// reset; failures are reported on stderr and otherwise ignored).
///
/// # Panics
///
/// Panics, on this and every later call, if the database cannot be set up
/// (no server binaries, startup failure, ...).
pub fn shared() -> &'static TestDb {
    static SHARED: OnceLock<Result<TestDb, String>> = OnceLock::new();
    match SHARED.get_or_init(|| TestDb::init().map_err(|e| e.to_string())) {
        Ok(db) => db,
        Err(msg) => panic!("pgpipe-tests: could not set up the test database: {msg}"),
    }
}

impl TestDb {
    /// Sets up the external or local database.
    fn init() -> Result<TestDb, HarnessError> {
        match std::env::var(TEST_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => {
                let psql = find_bin_dir()
                    .map(|bin| psql_in(&bin))
                    .unwrap_or_else(|_| PathBuf::from("psql"));
                let db = TestDb {
                    inner: TestDbInner::External {
                        url: url.trim().to_owned(),
                        psql,
                    },
                };
                db.ensure_external_roles();
                Ok(db)
            }
            _ => Ok(TestDb {
                inner: TestDbInner::Local(Box::new(Cluster::builder().tls(true).start()?)),
            }),
        }
    }

    /// Best-effort creation of the password roles on an external server.
    fn ensure_external_roles(&self) {
        for (user, password, encryption) in AUTH_ROLES {
            let set = format!("SET password_encryption = {};\n", sql_literal(encryption));
            let create = format!(
                "{set}CREATE ROLE {} LOGIN PASSWORD {};\n",
                sql_ident(user),
                sql_literal(password)
            );
            let result = match self.psql(&create) {
                Err(e) if e.to_string().contains("already exists") => {
                    // Make sure the password and its storage match.
                    self.psql(&format!(
                        "{set}ALTER ROLE {} LOGIN PASSWORD {};\n",
                        sql_ident(user),
                        sql_literal(password)
                    ))
                }
                other => other,
            };
            if let Err(e) = result {
                eprintln!(
                    "pgpipe-tests: warning: could not set up role {user} on the {TEST_URL_ENV} server: {e}"
                );
            }
        }
    }

    /// URL of the database as the superuser, in plaintext
    /// (`sslmode=disable`); for an external server: the `PGPIPE_TEST_URL`
    /// value as given.
    pub fn url(&self) -> String {
        match &self.inner {
            TestDbInner::External { url, .. } => url.clone(),
            TestDbInner::Local(cluster) => cluster.url(),
        }
    }

    /// URL of the same database for `user` with `password`, in plaintext
    /// (see [`Cluster::url_for`]). For an external server, the host, port,
    /// database and parameters of `PGPIPE_TEST_URL` are kept and only the
    /// credentials replaced.
    pub fn url_for(&self, user: &str, password: &str) -> String {
        match &self.inner {
            TestDbInner::External { url, .. } => with_credentials(url, user, password),
            TestDbInner::Local(cluster) => cluster.url_for(user, password),
        }
    }

    /// The throwaway cluster, `None` for an external server.
    fn local(&self) -> Option<&Cluster> {
        match &self.inner {
            TestDbInner::External { .. } => None,
            TestDbInner::Local(cluster) => Some(cluster),
        }
    }

    /// Superuser URL over TLS verified against the test CA, for host
    /// `localhost` (see [`Cluster::tls_url_for`]); `None` for an external
    /// server.
    pub fn tls_url(&self) -> Option<String> {
        self.local()?.tls_url()
    }

    /// As [`TestDb::tls_url`], for `user` with `password`.
    pub fn tls_url_for(&self, user: &str, password: &str) -> Option<String> {
        self.local()?.tls_url_for(user, password)
    }

    /// The server's certificates; `None` for an external server.
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.local()?.tls()
    }

    /// As [`TestDb::tls`], but prints on stderr that `test` is skipped
    /// (and why) when there is no TLS material: `let Some(tls) =
    /// shared().tls_or_skip("name") else { return };`.
    pub fn tls_or_skip(&self, test: &str) -> Option<&TlsMaterial> {
        let tls = self.tls();
        if tls.is_none() {
            eprintln!(
                "skipping {test}: {TEST_URL_ENV} names an external server, and TLS tests need \
                 the harness's own cluster and certificates"
            );
        }
        tls
    }

    /// The server's unix socket directory; `None` for an external server.
    pub fn socket_dir(&self) -> Option<&Path> {
        Some(self.local()?.socket_dir())
    }

    /// The server's abstract socket name (`@name`); `None` for an external
    /// server.
    pub fn abstract_socket(&self) -> Option<String> {
        Some(self.local()?.abstract_socket())
    }

    /// Runs `sql` with psql (as the superuser, or the `PGPIPE_TEST_URL`
    /// user) and returns the unaligned, tuples-only output; see
    /// [`Cluster::psql`].
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        match &self.inner {
            TestDbInner::External { url, psql } => {
                let mut cmd = Command::new(psql);
                cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                    .arg("-d")
                    .arg(url)
                    .args(["-f", "-"])
                    .env("PGCONNECT_TIMEOUT", "10");
                run_with_stdin(cmd, sql)
            }
            TestDbInner::Local(cluster) => cluster.psql(sql),
        }
    }

    /// The server log of the throwaway cluster (see [`Cluster::log_path`]);
    /// `None` for an external server.
    pub fn server_log(&self) -> Option<&Path> {
        Some(self.local()?.log_path())
    }

    /// WARNING lines the throwaway cluster logged since any caller last asked (each line is
    /// returned once per process); empty for an external server.
    pub fn new_log_warnings(&self) -> Vec<String> {
        static READER: OnceLock<server_log::LogReader> = OnceLock::new();
        match self.server_log() {
            Some(log) => READER.get_or_init(Default::default).new_warnings(log),
            None => Vec::new(),
        }
    }

    /// Whether this is the external server from `PGPIPE_TEST_URL`.
    pub fn is_external(&self) -> bool {
        matches!(self.inner, TestDbInner::External { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// Set in the child process of `watchdog_cleans_up_after_kill`.
    const CHILD_ENV: &str = "PGPIPE_HARNESS_WATCHDOG_CHILD";

    fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if done() {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        done()
    }

    #[test]
    fn cluster_runs_sql_and_drop_removes_dir() {
        let started = Instant::now();
        let cluster = Cluster::start().expect("start cluster");
        eprintln!("cluster started in {:?}", started.elapsed());

        assert_eq!(cluster.psql("select 1").expect("psql").trim(), "1");
        assert_eq!(
            cluster.url(),
            format!("postgres://postgres@127.0.0.1:{}/postgres", cluster.port())
        );
        let roles = cluster
            .psql(
                "select rolname || ':' || left(rolpassword, 4) from pg_authid \
                 where rolname like 'pgpipe\\_%' order by 1",
            )
            .expect("roles");
        assert_eq!(
            roles.lines().collect::<Vec<_>>(),
            ["pgpipe_clear:SCRA", "pgpipe_md5:md5f", "pgpipe_scram:SCRA"]
        );
        let rules = cluster
            .psql("select count(*), count(error) from pg_hba_file_rules")
            .expect("hba rules");
        assert_eq!(rules.trim(), "7|0");
        assert!(cluster.tls().is_none() && cluster.tls_url().is_none());

        // libpq against a server without TLS.
        let info = format!("host=127.0.0.1 port={} user=postgres", cluster.port());
        let ssl = psql_with(
            &format!("{info} sslmode=prefer"),
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        )
        .expect("prefer");
        assert_eq!(ssl.trim(), "f");
        for mode in ["require", "verify-ca", "verify-full"] {
            let e = libpq_connects(&format!("{info} sslmode={mode}")).expect_err(mode);
            assert!(e.contains("server does not support SSL"), "{mode}: {e}");
        }

        let dir = cluster.dir().to_path_buf();
        let pm = cluster.postmaster_pid().expect("postmaster pid");
        assert!(dir.join("data").is_dir());
        drop(cluster);
        assert!(!dir.exists(), "{} still exists", dir.display());
        assert!(!process_alive(pm), "postmaster {pm} still running");
    }

    #[test]
    fn explicit_stop_removes_dir() {
        let cluster = Cluster::start().expect("start cluster");
        let dir = cluster.dir().to_path_buf();
        let url = cluster.url_for("a b", "p@ss:w/rd");
        assert_eq!(
            url,
            format!(
                "postgres://a%20b:p%40ss%3Aw%2Frd@127.0.0.1:{}/postgres",
                cluster.port()
            )
        );
        cluster.stop().expect("stop");
        assert!(!dir.exists(), "{} still exists", dir.display());
    }

    /// Runs only as the child of `watchdog_cleans_up_after_kill`: starts a
    /// cluster, reports it and waits to be killed.
    #[test]
    fn watchdog_child_helper() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let cluster = Cluster::start().expect("start cluster");
        println!(
            "PGPIPE_CHILD {} {}",
            cluster.postmaster_pid().expect("postmaster pid"),
            cluster.dir().display()
        );
        let _ = io::stdout().flush();
        thread::sleep(Duration::from_secs(120));
        drop(cluster);
    }

    #[test]
    fn watchdog_cleans_up_after_kill() {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "tests::watchdog_child_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child test process");
        let stdout = child.stdout.take().expect("child stdout");
        let mut report = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read child stdout");
            // libtest prints "test NAME ... " on the same line first.
            if let Some((_, rest)) = line.split_once("PGPIPE_CHILD ") {
                report = Some(rest.to_owned());
                break;
            }
        }
        child.kill().expect("kill child");
        let _ = child.wait();
        let report = report.expect("child did not report a cluster");
        let (pm, dir) = report.split_once(' ').expect("malformed report");
        let pm: u32 = pm.parse().expect("postmaster pid");
        let dir = PathBuf::from(dir);
        assert!(
            wait_until(Duration::from_secs(15), || !dir.exists()),
            "watchdog did not remove {}",
            dir.display()
        );
        assert!(
            wait_until(Duration::from_secs(5), || !process_alive(pm)),
            "postmaster {pm} still running"
        );
    }

    #[test]
    fn taken_port_is_detected() {
        let cluster = Cluster::start().expect("start cluster");
        // A second server on the same data-less port must notice that the
        // port belongs to someone else.
        let mut other = Cluster {
            bin: cluster.bin.clone(),
            psql: cluster.psql.clone(),
            dir: create_unique_dir().expect("dir"),
            data: PathBuf::new(),
            log: PathBuf::new(),
            port: cluster.port(),
            as_root: cluster.as_root,
            server: None,
            watchdog: None,
            cleaned: false,
            tls: None,
            expired_cert: false,
        };
        other.data = other.dir.join("data");
        other.log = other.dir.join("server.log");
        other.init().expect("initdb");
        other.spawn_server().expect("spawn");
        match other.wait_ready() {
            Ok(Readiness::PortTaken(reason)) => eprintln!("port taken: {reason}"),
            Ok(Readiness::Ready) => panic!("second server reported ready"),
            Err(e) => panic!("unexpected error: {e}"),
        }
        // The retry loop then finds a free port.
        other.stop_server();
        other.launch().expect("launch on another port");
        assert_ne!(other.port(), cluster.port());
        assert_eq!(other.psql("select 1").expect("psql").trim(), "1");
    }

    #[test]
    fn credentials_are_replaced_in_urls() {
        assert_eq!(
            with_credentials(
                "postgres://old:pw@db.example:6543/app?sslmode=disable",
                "u",
                "p w"
            ),
            "postgres://u:p%20w@db.example:6543/app?sslmode=disable"
        );
        assert_eq!(
            with_credentials("postgresql://localhost", "u", ""),
            "postgresql://u@localhost"
        );
        assert_eq!(
            with_credentials("host=/tmp dbname=x", "u", "it's"),
            "host=/tmp dbname=x user='u' password='it\\'s'"
        );
    }

    #[test]
    fn versions_sort_numerically() {
        assert!(parse_version("15") > parse_version("9.6"));
        assert_eq!(parse_version("main"), None);
    }
}
