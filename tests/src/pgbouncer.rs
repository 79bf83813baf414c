//! A throwaway PgBouncer (Debian's `pgbouncer` package) in front of a [`crate::Cluster`]: its own
//! directory and free port, `auth_type = trust`, started as the `postgres` user when root (it
//! refuses to run as root), and removed when dropped; a watchdog does the same if the test
//! process dies first.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use crate::binaries::{find_tool, tool_or_skip};
use crate::process::{is_root, run, run_with_stdin, send_signal, spawn_quiet, spawn_watchdog};
use crate::scratch::{create_unique_dir, free_port};
use crate::{HarnessError, DATABASE, SUPERUSER};

/// How PgBouncer hands server connections to clients (`pool_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client connection, for the client connection's life.
    Session,
    /// A server connection per transaction (a statement outside a transaction is one).
    Transaction,
}

impl PoolMode {
    fn name(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }
}

/// A running PgBouncer.
#[derive(Debug)]
pub struct PgBouncer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_root: bool,
    child: Option<Child>,
    watchdog: Option<Child>,
    cleaned: bool,
}

/// Where the `pgbouncer` binary is: `PGPIPE_PGBOUNCER`, else the Debian path, else `PATH`.
pub fn find_pgbouncer() -> Result<PathBuf, HarnessError> {
    find_tool("PGPIPE_PGBOUNCER", "/usr/sbin/pgbouncer", "pgbouncer")
        .map_err(|searched| HarnessError::PgBouncerNotFound { searched })
}

/// Whether a test that needs PgBouncer can run: without it the test is skipped with a note,
/// unless `PGPIPE_REQUIRE_PGBOUNCER` (set by CI) is set, which fails it.
pub fn available_or_skip(test: &str) -> bool {
    tool_or_skip(
        test,
        find_pgbouncer(),
        "PGPIPE_REQUIRE_PGBOUNCER",
        "pgbouncer",
    )
}

impl PgBouncer {
    /// Starts PgBouncer in front of the server on 127.0.0.1:`upstream` (a [`crate::Cluster`]'s port)
    /// in `mode`, with `pool_size` server connections per (database, user) pool. Blocks until
    /// it accepts connections.
    pub fn start(
        upstream: u16,
        mode: PoolMode,
        pool_size: usize,
    ) -> Result<PgBouncer, HarnessError> {
        let mut b = PgBouncer {
            bin: find_pgbouncer()?,
            dir: create_unique_dir()?,
            port: free_port()?,
            as_root: is_root(),
            child: None,
            watchdog: None,
            cleaned: false,
        };
        let ini = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={upstream}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/userlist.txt\n\
             admin_users = {SUPERUSER}\n\
             pool_mode = {mode}\n\
             default_pool_size = {pool_size}\n\
             max_client_conn = 5000\n\
             logfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n",
            port = b.port,
            dir = b.dir.display(),
            mode = mode.name(),
        );
        let write = |name: &str, text: &str| {
            let path = b.dir.join(name);
            fs::write(&path, text)
                .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
        };
        write("pgbouncer.ini", &ini)?;
        write("userlist.txt", &format!("\"{SUPERUSER}\" \"\"\n"))?;
        if b.as_root {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:"]).arg(&b.dir);
            run(chown)?;
        }
        b.launch()?;
        Ok(b)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's URL through PgBouncer.
    pub fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// Its log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("pgbouncer.log")
    }

    /// Runs `command` on the admin console (`SHOW POOLS`, ...) and returns psql's unaligned,
    /// tuples-only output.
    pub fn admin(&self, command: &str) -> Result<String, HarnessError> {
        let mut cmd = Command::new(crate::find_bin_dir()?.join("psql"));
        cmd.args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-U",
            SUPERUSER,
            "-d",
            "pgbouncer",
        ])
        .arg("-p")
        .arg(self.port.to_string())
        .args(["-f", "-"])
        .env("PGSSLMODE", "disable")
        .env("PGCONNECT_TIMEOUT", "5");
        run_with_stdin(cmd, command)
    }

    /// Stops PgBouncer at once (SIGTERM: every client and server connection is cut) and starts
    /// it again on the same port. Blocks until it accepts connections.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.stop_process("TERM");
        self.launch()
    }

    fn launch(&mut self) -> Result<(), HarnessError> {
        let mut cmd = crate::process::command_as_postgres(&self.bin, self.as_root);
        cmd.arg(self.dir.join("pgbouncer.ini"))
            .current_dir(&self.dir);
        let child = spawn_quiet(&mut cmd)?;
        let child_pid = child.id();
        self.child = Some(child);
        self.spawn_watchdog(child_pid)?;
        self.wait_ready()
    }

    fn spawn_watchdog(&mut self, child: u32) -> Result<(), HarnessError> {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let w = spawn_watchdog(child, &self.dir, &self.dir.join("pgbouncer.pid"))?;
        self.watchdog = Some(w);
        Ok(())
    }

    fn wait_ready(&mut self) -> Result<(), HarnessError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(HarnessError::StartupFailed {
                        port: self.port,
                        reason: format!("pgbouncer exited during startup ({status})"),
                        log_tail: tail(&self.log_path()),
                    });
                }
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::StartupFailed {
                    port: self.port,
                    reason: "pgbouncer not ready after 30 s".into(),
                    log_tail: tail(&self.log_path()),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pgbouncer process's pid (from its pidfile), or the spawned child's.
    fn pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.dir.join("pgbouncer.pid")).ok();
        text.and_then(|t| t.trim().parse().ok())
            .or_else(|| self.child.as_ref().map(Child::id))
    }

    fn stop_process(&mut self, signal: &str) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = self.pid() {
            send_signal(signal, &[pid]);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    let mut pids = vec![child.id()];
                    pids.extend(self.pid());
                    send_signal("KILL", &pids);
                    let _ = child.wait();
                    break;
                }
            }
        }
        let _ = fs::remove_file(self.dir.join("pgbouncer.pid"));
    }

    fn shutdown(&mut self) {
        self.stop_process("TERM");
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        if !self.cleaned {
            self.cleaned = true;
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
