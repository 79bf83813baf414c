//! A throwaway HAProxy (Debian's `haproxy` package) in TCP mode in front of a
//! [`crate::Cluster`], as deployments put it in front of PostgreSQL: its own directory and free
//! port, removed when dropped (a watchdog does the same if the test process dies first).
//!
//! Its health check is PostgreSQL's (`option pgsql-check`) every 100 ms, one failure marking
//! the server down and one success up again. While the server is down HAProxy still accepts
//! connections and closes them at once, which a client sees as a server that closed the
//! connection during startup: the fault behind a proxy that a client must not take for a
//! server down for long.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use crate::binaries::{find_tool, tool_or_skip};
use crate::process::{send_signal, spawn_quiet, spawn_watchdog};
use crate::scratch::{create_unique_dir, free_port};
use crate::{HarnessError, DATABASE, SUPERUSER};

/// A running HAProxy.
#[derive(Debug)]
pub struct HaProxy {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    watchdog: Option<Child>,
}

/// Where the `haproxy` binary is: `PGPIPE_HAPROXY`, else the Debian path, else `PATH`.
pub fn find_haproxy() -> Result<PathBuf, HarnessError> {
    find_tool("PGPIPE_HAPROXY", "/usr/sbin/haproxy", "haproxy")
        .map_err(|searched| HarnessError::HaProxyNotFound { searched })
}

/// Whether a test that needs HAProxy can run: without it the test is skipped with a note,
/// unless `PGPIPE_REQUIRE_HAPROXY` (set by CI) is set, which fails it.
pub fn available_or_skip(test: &str) -> bool {
    tool_or_skip(test, find_haproxy(), "PGPIPE_REQUIRE_HAPROXY", "haproxy")
}

impl HaProxy {
    /// Starts HAProxy in front of the server on 127.0.0.1:`upstream` (a [`crate::Cluster`]'s
    /// port). Blocks until it accepts connections.
    pub fn start(upstream: u16) -> Result<HaProxy, HarnessError> {
        let backend = format!(
            "\x20   option pgsql-check user {SUPERUSER}\n\
             \x20   default-server inter 100ms fall 1 rise 1\n\
             \x20   server pg 127.0.0.1:{upstream} check\n"
        );
        Self::launch(&backend)
    }

    /// Starts HAProxy in front of Patroni's nodes, each given as (PostgreSQL port, REST API
    /// port), as Patroni's documentation sets it up: it routes to the node whose REST API
    /// answers `/primary` with 200, checked every 100 ms, and closes the sessions of a node
    /// marked down; with `retries 0` (`docs/TOPOLOGY.md` says why). Blocks until it accepts
    /// connections.
    pub fn start_for_patroni(nodes: &[(u16, u16)]) -> Result<HaProxy, HarnessError> {
        // No retries: HAProxy waits up to a second before trying a server that refused
        // again, holding the client's attempt meanwhile; the client retries by itself.
        let mut backend = String::from(
            "\x20   retries 0\n\
             \x20   option httpchk OPTIONS /primary\n\
             \x20   http-check expect status 200\n\
             \x20   default-server inter 100ms fall 1 rise 1 on-marked-down shutdown-sessions\n",
        );
        for (i, (pg, rest)) in nodes.iter().enumerate() {
            backend.push_str(&format!(
                "\x20   server n{i} 127.0.0.1:{pg} check port {rest}\n"
            ));
        }
        Self::launch(&backend)
    }

    /// Starts HAProxy with `backend` (its health check and servers) under `listen postgres`.
    fn launch(backend: &str) -> Result<HaProxy, HarnessError> {
        let bin = find_haproxy()?;
        let mut h = HaProxy {
            dir: create_unique_dir()?,
            port: free_port()?,
            child: None,
            watchdog: None,
        };
        // Idle client and server sides are never timed out: pooled connections idle for long.
        let config = format!(
            "global\n\
             \x20   maxconn 4096\n\
             \x20   stats socket {stats}\n\
             defaults\n\
             \x20   mode tcp\n\
             \x20   timeout connect 1s\n\
             \x20   timeout client 1h\n\
             \x20   timeout server 1h\n\
             \x20   timeout check 1s\n\
             listen postgres\n\
             \x20   bind 127.0.0.1:{port}\n\
             {backend}",
            port = h.port,
            stats = h.dir.join("stats.sock").display(),
        );
        let path = h.dir.join("haproxy.cfg");
        fs::write(&path, config)
            .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))?;
        let mut cmd = Command::new(bin);
        cmd.arg("-db").arg("-f").arg(&path).current_dir(&h.dir);
        let child = spawn_quiet(&mut cmd)?;
        let pid = child.id();
        h.child = Some(child);
        h.watchdog = Some(spawn_watchdog(pid, &h.dir, &h.dir.join("haproxy.pid"))?);
        h.wait_ready()?;
        Ok(h)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's URL through HAProxy.
    pub fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{DATABASE}", self.port)
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
                        reason: format!("haproxy exited during startup ({status})"),
                        log_tail: String::new(),
                    });
                }
            }
            // HAProxy counts a server up until its first check says otherwise: ready once
            // every server has been checked, so that no connection reaches a wrong one.
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && self.every_server_checked()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::StartupFailed {
                    port: self.port,
                    reason: "haproxy not ready after 30 s".into(),
                    log_tail: String::new(),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl HaProxy {
    /// Whether every server has a check result, read from `show stat` on the stats socket.
    fn every_server_checked(&self) -> bool {
        let Ok(mut s) = UnixStream::connect(self.dir.join("stats.sock")) else {
            return false;
        };
        let mut text = String::new();
        if s.write_all(b"show stat\n").is_err() || s.read_to_string(&mut text).is_err() {
            return false;
        }
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let (Some(name), Some(check)) = (
            header.iter().position(|h| *h == "svname"),
            header.iter().position(|h| *h == "check_status"),
        ) else {
            return false;
        };
        lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > check && !matches!(f[name], "FRONTEND" | "BACKEND"))
            .all(|f| !f[check].is_empty() && !f[check].starts_with("INI"))
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            send_signal("KILL", &[child.id()]);
            let _ = child.wait();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
