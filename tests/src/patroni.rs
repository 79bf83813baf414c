//! A throwaway high-availability PostgreSQL as deployments run it: Debian's `patroni` managing
//! PostgreSQL nodes on 127.0.0.1, one `etcd` as its consensus store, all in one directory and
//! on free ports, removed when dropped (a watchdog does the same if the test process dies
//! first). HAProxy in front of it is [`crate::HaProxy::start_for_patroni`].
//!
//! The timings are short so that a test sees a leader crash through in seconds: Patroni's loop
//! every second, a leader key that lives 6 s, PostgreSQL with `fsync` off. Node 0 initialises
//! the cluster and leads; the others are streaming replicas made by Patroni (`pg_basebackup`).
//! With `synchronous` on, Patroni's `synchronous_mode` makes one replica synchronous and
//! promotes only it, so that no acknowledged commit is lost in a failover.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::binaries::{find_bin_dir, find_tool, tool_or_skip};
use crate::process::{after_exit, command_as_postgres, is_root, run, send_signal};
use crate::scratch::{create_unique_dir, free_port};
use crate::{HarnessError, DATABASE, SUPERUSER};

/// Kills every process started for the cluster in `$1` (their command lines name it), then
/// removes it.
const CLEANUP_SCRIPT: &str = r#"dir=$1
pkill -KILL -f "$dir" 2>/dev/null
sleep 0.2
pkill -KILL -f "$dir" 2>/dev/null
rm -rf "$dir"
"#;

/// A running Patroni cluster and its etcd.
#[derive(Debug)]
pub struct Patroni {
    dir: PathBuf,
    etcd: Option<Child>,
    nodes: Vec<Node>,
    watchdog: Option<Child>,
}

/// One PostgreSQL node and the Patroni that manages it.
#[derive(Debug)]
struct Node {
    name: String,
    pg_port: u16,
    rest_port: u16,
    config: PathBuf,
    data: PathBuf,
    log: PathBuf,
    patroni: Option<Child>,
}

fn find_patroni() -> Result<PathBuf, HarnessError> {
    find_tool("PGPIPE_PATRONI", "/usr/bin/patroni", "patroni").map_err(|searched| {
        HarnessError::HaToolNotFound {
            tool: "patroni",
            package: "patroni",
            searched,
        }
    })
}

fn find_etcd() -> Result<PathBuf, HarnessError> {
    find_tool("PGPIPE_ETCD", "/usr/bin/etcd", "etcd").map_err(|searched| {
        HarnessError::HaToolNotFound {
            tool: "etcd",
            package: "etcd-server",
            searched,
        }
    })
}

/// Whether a test that needs Patroni can run: without `patroni` or `etcd` the test is skipped
/// with a note, unless `PGPIPE_REQUIRE_PATRONI` (set by CI) is set, which fails it.
pub fn available_or_skip(test: &str) -> bool {
    tool_or_skip(test, find_etcd(), "PGPIPE_REQUIRE_PATRONI", "etcd-server")
        && tool_or_skip(test, find_patroni(), "PGPIPE_REQUIRE_PATRONI", "patroni")
}

impl Patroni {
    /// Starts etcd and `nodes` PostgreSQL nodes under Patroni (node 0 the leader), with
    /// Patroni's `synchronous_mode` when `synchronous`. Blocks until every replica streams
    /// (and, when `synchronous`, one is the synchronous standby).
    pub fn start(nodes: usize, synchronous: bool) -> Result<Patroni, HarnessError> {
        let patroni = find_patroni()?;
        let etcd = find_etcd()?;
        let bin_dir = find_bin_dir()?;
        let dir = create_unique_dir()?;
        let mut cluster = Patroni {
            watchdog: Some(
                after_exit(
                    std::process::id(),
                    "pgpipe-patroni-watchdog",
                    CLEANUP_SCRIPT,
                    &[dir.as_os_str()],
                )
                .map_err(|e| HarnessError::io("spawning the cleanup watchdog", e))?,
            ),
            dir,
            etcd: None,
            nodes: Vec::new(),
        };
        let (client, peer) = (free_port()?, free_port()?);
        cluster.start_etcd(&etcd, client, peer)?;
        for i in 0..nodes {
            let node = cluster.write_node(i, client, &bin_dir, synchronous)?;
            cluster.nodes.push(node);
        }
        if is_root() {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:"]).arg(&cluster.dir);
            run(chown)?;
        }
        for i in 0..nodes {
            cluster.start_node(i, &patroni)?;
            let ready = if i == 0 { "/primary" } else { "/replica" };
            cluster.wait_for(i, ready, Duration::from_secs(60))?;
        }
        if synchronous && nodes > 1 {
            cluster.wait_for_sync_standby(Duration::from_secs(60))?;
        }
        Ok(cluster)
    }

    fn start_etcd(&mut self, bin: &Path, client: u16, peer: u16) -> Result<(), HarnessError> {
        let log = self.dir.join("etcd.log");
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(bin);
        cmd.args(["--name", "etcd0", "--data-dir"])
            .arg(self.dir.join("etcd"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("etcd0={peer_url}")])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"]);
        logged(&mut cmd, &log)?;
        let child = cmd
            .spawn()
            .map_err(|e| HarnessError::io("starting etcd", e))?;
        self.etcd = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while http(client, "GET", "/health", "").map(|(s, _)| s) != Some(200) {
            if Instant::now() >= deadline {
                return Err(self.failed(0, "etcd not healthy after 30 s", &log));
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn write_node(
        &self,
        i: usize,
        etcd: u16,
        bin_dir: &Path,
        synchronous: bool,
    ) -> Result<Node, HarnessError> {
        let node = Node {
            name: format!("n{i}"),
            pg_port: free_port()?,
            rest_port: free_port()?,
            config: self.dir.join(format!("n{i}.yml")),
            data: self.dir.join(format!("n{i}")),
            log: self.dir.join(format!("n{i}.log")),
            patroni: None,
        };
        // Patroni requires loop_wait + 2 * retry_timeout <= ttl.
        let config = format!(
            "scope: pgpipe\n\
             name: {name}\n\
             restapi:\n  listen: 127.0.0.1:{rest}\n  connect_address: 127.0.0.1:{rest}\n\
             etcd3:\n  hosts: 127.0.0.1:{etcd}\n\
             bootstrap:\n  dcs:\n    ttl: 6\n    loop_wait: 1\n    retry_timeout: 2\n\
             \x20   synchronous_mode: {synchronous}\n\
             \x20   postgresql:\n      parameters:\n        max_connections: 300\n\
             \x20       fsync: 'off'\n\
             \x20 initdb:\n  - encoding: UTF8\n  - auth: trust\n\
             \x20 pg_hba:\n  - local all all trust\n  - host all all 127.0.0.1/32 trust\n\
             \x20 - host replication all 127.0.0.1/32 trust\n\
             postgresql:\n  listen: 127.0.0.1:{pg}\n  connect_address: 127.0.0.1:{pg}\n\
             \x20 data_dir: {data}\n  bin_dir: {bin}\n\
             \x20 authentication:\n    replication:\n      username: {SUPERUSER}\n\
             \x20   superuser:\n      username: {SUPERUSER}\n\
             \x20 parameters:\n    unix_socket_directories: {dir}\n",
            name = node.name,
            rest = node.rest_port,
            pg = node.pg_port,
            data = node.data.display(),
            bin = bin_dir.display(),
            dir = self.dir.display(),
        );
        fs::write(&node.config, config)
            .map_err(|e| HarnessError::io(format!("writing {}", node.config.display()), e))?;
        Ok(node)
    }

    fn start_node(&mut self, i: usize, bin: &Path) -> Result<(), HarnessError> {
        let node = &mut self.nodes[i];
        let mut cmd = command_as_postgres(bin, is_root());
        cmd.arg(&node.config).current_dir(&self.dir);
        logged(&mut cmd, &node.log)?;
        let child = cmd
            .spawn()
            .map_err(|e| HarnessError::io("starting patroni", e))?;
        node.patroni = Some(child);
        Ok(())
    }

    /// Waits until node `i`'s REST API answers `path` (`/primary`, `/replica`, `/sync`) with 200.
    fn wait_for(&self, i: usize, path: &str, within: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + within;
        while http(self.nodes[i].rest_port, "GET", path, "").map(|(s, _)| s) != Some(200) {
            if Instant::now() >= deadline {
                let why = format!("node {i} not {path} after {within:?}");
                return Err(self.failed(self.nodes[i].pg_port, &why, &self.nodes[i].log));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Waits until some node is Patroni's synchronous standby (`/sync` answers 200): until then
    /// Patroni would promote no node if the leader crashed.
    pub fn wait_for_sync_standby(&self, within: Duration) -> Result<usize, HarnessError> {
        let deadline = Instant::now() + within;
        loop {
            for (i, n) in self.nodes.iter().enumerate() {
                if http(n.rest_port, "GET", "/sync", "").map(|(s, _)| s) == Some(200) {
                    return Ok(i);
                }
            }
            if Instant::now() >= deadline {
                let log = &self.nodes[0].log;
                return Err(self.failed(0, "no synchronous standby", log));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Each node's (PostgreSQL port, REST API port), for [`crate::HaProxy::start_for_patroni`].
    pub fn ports(&self) -> Vec<(u16, u16)> {
        self.nodes
            .iter()
            .map(|n| (n.pg_port, n.rest_port))
            .collect()
    }

    /// The PostgreSQL port of node `i`.
    pub fn pg_port(&self, i: usize) -> u16 {
        self.nodes[i].pg_port
    }

    /// A URL listing every node, with `target_session_attrs=read-write`: the libpq way to
    /// follow the primary without a proxy.
    pub fn host_list_url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.pg_port))
            .collect();
        format!(
            "postgres://{SUPERUSER}@{}/{DATABASE}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// A libpq connection string for node `i` alone.
    pub fn conninfo(&self, i: usize) -> String {
        format!(
            "host=127.0.0.1 port={} user={SUPERUSER} dbname={DATABASE} connect_timeout=1",
            self.nodes[i].pg_port
        )
    }

    /// The node whose REST API says it is the primary, if one does.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            http(self.nodes[i].rest_port, "GET", "/primary", "").map(|(s, _)| s) == Some(200)
        })
    }

    /// A planned switchover from the current leader to node `to`, through Patroni's REST API;
    /// returns once Patroni reports it done.
    pub fn switchover(&self, to: usize) -> Result<(), HarnessError> {
        let from = self
            .leader()
            .ok_or_else(|| self.failed(0, "no leader", &self.dir))?;
        let body = format!(
            "{{\"leader\": \"{}\", \"candidate\": \"{}\"}}",
            self.nodes[from].name, self.nodes[to].name
        );
        match http(self.nodes[from].rest_port, "POST", "/switchover", &body) {
            Some((200, _)) => Ok(()),
            other => Err(self.failed(
                self.nodes[from].pg_port,
                &format!("switchover to {to} refused: {other:?}"),
                &self.nodes[from].log,
            )),
        }
    }

    /// A crash of node `i`'s machine, as far as the others can tell: its Patroni and its
    /// postmaster killed at once (SIGKILL); the leader key it held expires after the ttl.
    pub fn crash(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut pids = Vec::new();
        if let Some(pm) = postmaster_pid(&node.data) {
            pids.push(pm);
        }
        if let Some(child) = node.patroni.as_ref() {
            pids.push(child.id());
        }
        // As root the child is runuser; Patroni is its child, named by its configuration.
        kill_matching(&node.config);
        send_signal("KILL", &pids);
        if let Some(mut child) = node.patroni.take() {
            let _ = child.wait();
        }
    }

    /// Kills node `i`'s postmaster alone (SIGKILL); its Patroni starts PostgreSQL again.
    pub fn kill_postmaster(&self, i: usize) {
        if let Some(pm) = postmaster_pid(&self.nodes[i].data) {
            send_signal("KILL", &[pm]);
        }
    }

    fn failed(&self, port: u16, reason: &str, log: &Path) -> HarnessError {
        let text = fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        HarnessError::StartupFailed {
            port,
            reason: format!("Patroni cluster in {}: {reason}", self.dir.display()),
            log_tail: tail,
        }
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            kill_matching(&node.config);
            if let Some(pm) = postmaster_pid(&node.data) {
                send_signal("KILL", &[pm]);
            }
            if let Some(mut child) = node.patroni.take() {
                send_signal("KILL", &[child.id()]);
                let _ = child.wait();
            }
        }
        if let Some(mut etcd) = self.etcd.take() {
            let _ = etcd.kill();
            let _ = etcd.wait();
        }
        // Backends of a killed postmaster exit on their own; anything left names the directory.
        kill_matching(&self.dir);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Sends `cmd`'s output, both streams, to a new file at `log`; stdin closed.
fn logged(cmd: &mut Command, log: &Path) -> Result<(), HarnessError> {
    let out = fs::File::create(log)
        .map_err(|e| HarnessError::io(format!("creating {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| HarnessError::io(format!("duplicating {}", log.display()), e))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    Ok(())
}

/// The postmaster's pid, from the first line of `postmaster.pid`.
fn postmaster_pid(data: &Path) -> Option<u32> {
    let text = fs::read_to_string(data.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// SIGKILL to every process whose command line contains `path`.
fn kill_matching(path: &Path) {
    let _ = Command::new("pkill")
        .args(["-KILL", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// One HTTP/1.0 request to 127.0.0.1:`port`: the status and body, or `None` when it could not
/// be made or read (a node that is down).
fn http(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let status = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Some((status, body))
}
