//! A cluster's server process: started on a free port and waited for, restarted, halted and
//! resumed, stopped (with its directory removed) by hand, on drop or by its watchdog.

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use super::Cluster;
use crate::process::{describe, process_alive, run_with_stdin, send_signal, spawn_watchdog};
use crate::scratch::free_port;
use crate::HarnessError;

/// How long to wait for a freshly started server to accept queries.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take before the server is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How many ports to try when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 5;
/// Number of server log lines quoted in startup errors.
const LOG_TAIL_LINES: usize = 40;

/// Result of one attempt to bring the server up on a port.
pub(super) enum Readiness {
    /// The server answers queries.
    Ready,
    /// The port is in use by someone else; try another one.
    PortTaken(String),
}

impl Cluster {
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

    /// Starts the server on a free port, retrying with other ports if the
    /// chosen one turns out to be taken.
    pub(super) fn launch(&mut self) -> Result<(), HarnessError> {
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
    pub(super) fn spawn_server(&mut self) -> Result<(), HarnessError> {
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
    pub(super) fn wait_ready(&mut self) -> Result<Readiness, HarnessError> {
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

    /// Pid of the postmaster, from the first line of `postmaster.pid`.
    pub(super) fn postmaster_pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Last lines of the server log.
    pub(crate) fn log_tail(&self) -> String {
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
    pub(super) fn stop_server(&mut self) {
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

/// Whether two paths name the same file system object.
fn same_path(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
