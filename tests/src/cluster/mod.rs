//! An owned throwaway PostgreSQL cluster: its options, its URLs and paths, and psql against it.
//! What a fresh cluster is made of is in `setup.rs`, its server process in `server.rs`, a
//! streaming standby of it in `standby.rs`.

mod server;
mod setup;
mod standby;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::binaries::psql_in;
use crate::process::{command_as_postgres, is_root, run_with_stdin};
use crate::quoting::{percent_encode, userinfo};
use crate::scratch::create_unique_dir;
use crate::{find_bin_dir, HarnessError, TlsMaterial, DATABASE, SUPERUSER};

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
    /// creates the password roles ([`MD5_USER`](crate::MD5_USER),
    /// [`SCRAM_USER`](crate::SCRAM_USER), [`CLEAR_USER`](crate::CLEAR_USER)).
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
}

#[cfg(test)]
mod tests {
    use super::server::Readiness;
    use super::*;
    use crate::process::process_alive;
    use crate::{libpq_connects, psql_with};
    use std::io::{self, BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::thread;
    use std::time::{Duration, Instant};

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
                "cluster::tests::watchdog_child_helper",
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
}
