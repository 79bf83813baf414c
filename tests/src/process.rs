//! The processes the harness runs: commands to completion (as `postgres` when root), signals,
//! and the detached watchdog that cleans up after a test process that died.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::thread;

use crate::HarnessError;

/// Shell script of the watchdog's cleanup, run once the test process is gone ([`after_exit`]).
///
/// Arguments: pid of the spawned server process (the postmaster, or `runuser` when running as
/// root), cluster directory and the path of `postmaster.pid`. The postmaster pid is read when
/// cleanup starts, so the script also covers a server that was still starting up.
const WATCHDOG_SCRIPT: &str = r#"server=$1; dir=$2; pidfile=$3
pm=$(head -n 1 "$pidfile" 2>/dev/null)
case "$pm" in ''|*[!0-9]*) pm="" ;; esac
if [ -n "$pm" ]; then kill -INT "$pm" 2>/dev/null; else kill -INT "$server" 2>/dev/null; fi
i=0
while [ "$i" -lt 20 ] && kill -0 "${pm:-$server}" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -KILL $pm "$server" 2>/dev/null
rm -rf "$dir"
"#;

/// Whether the effective uid of this process is 0.
pub(crate) fn is_root() -> bool {
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

/// Renders a command line for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
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
pub(crate) fn run(mut cmd: Command) -> Result<String, HarnessError> {
    let command = describe(&cmd);
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HarnessError::io(format!("running `{command}`"), e))?;
    check_output(command, output)
}

/// Runs `cmd` to completion feeding `input` on stdin and returns its stdout.
pub(crate) fn run_with_stdin(mut cmd: Command, input: &str) -> Result<String, HarnessError> {
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
pub(crate) fn send_signal(signal: &str, pids: &[u32]) {
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

/// Starts `cmd` in the background with no stdin and its output discarded (the tool logs
/// elsewhere, or nothing worth keeping); the error names the command line.
pub(crate) fn spawn_quiet(cmd: &mut Command) -> Result<Child, HarnessError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let command = describe(cmd);
    cmd.spawn()
        .map_err(|e| HarnessError::io(format!("starting `{command}`"), e))
}

/// Whether a process with this pid exists (`kill -0`).
pub(crate) fn process_alive(pid: u32) -> bool {
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

/// A detached watchdog ([`WATCHDOG_SCRIPT`]): once this process is gone it stops the process
/// whose pid is in `pidfile` (else `server`) and removes `dir`.
pub(crate) fn spawn_watchdog(
    server: u32,
    dir: &Path,
    pidfile: &Path,
) -> Result<Child, HarnessError> {
    let server = server.to_string();
    after_exit(
        std::process::id(),
        "pgpipe-watchdog",
        WATCHDOG_SCRIPT,
        &[server.as_ref(), dir.as_os_str(), pidfile.as_os_str()],
    )
    .map_err(|e| HarnessError::io("spawning the cleanup watchdog", e))
}

/// Runs the shell `script` (with `args` as `$1`, `$2`, ...) once process `pid` is gone, in a
/// detached shell named `name`: what must happen after a test or benchmark process ends,
/// however it ends. Its own process group, so a Ctrl-C aimed at that process does not stop it.
pub(crate) fn after_exit(
    pid: u32,
    name: &str,
    script: &str,
    args: &[&OsStr],
) -> std::io::Result<Child> {
    let script =
        format!("pid=$1; shift\nwhile kill -0 \"$pid\" 2>/dev/null; do sleep 0.5; done\n{script}");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(name)
        .arg(pid.to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
}
