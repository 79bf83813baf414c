//! libpq as the reference client: `psql` run with a given connection string.
//!
//! Tests compare pgpipe's behaviour with libpq's on the same server and the
//! same keywords (sslmode, sslrootcert, channel_binding, ...). The psql
//! process gets an environment without any `PG*` variable from ours, and
//! libpq's per-user files (`~/.pgpass`, `~/.postgresql/*`) are pointed at a
//! path that does not exist, so only what the test passes takes part.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::binaries::psql_in;
use crate::find_bin_dir;

/// Where libpq would otherwise look for per-user files; never exists.
const NO_USER_FILE: &str = "/nonexistent/pgpipe-tests/no-user-file";

/// The psql next to the server binaries, else `psql` on `PATH`.
fn psql_program() -> &'static PathBuf {
    static PSQL: OnceLock<PathBuf> = OnceLock::new();
    PSQL.get_or_init(|| {
        find_bin_dir()
            .map(|bin| psql_in(&bin))
            .unwrap_or_else(|_| PathBuf::from("psql"))
    })
}

/// Whether libpq (through psql) can connect with `conninfo` and run
/// `select 1`. `Err` carries psql's standard error: libpq's message.
///
/// `conninfo` is a keyword/value string (`host=localhost sslmode=require`)
/// or a `postgres://` URL.
pub fn libpq_connects(conninfo: &str) -> Result<(), String> {
    psql_with(conninfo, "select 1").map(drop)
}

/// Runs `sql` through psql connected with `conninfo` and returns the
/// unaligned, tuples-only output (`-A -t`), or psql's standard error.
///
/// Apart from `conninfo`, libpq sees only `PGCONNECT_TIMEOUT=10` (a
/// `connect_timeout` keyword wins over it) and the per-user file defaults
/// described in the module docs; messages are in English (`LC_ALL=C`).
pub fn psql_with(conninfo: &str, sql: &str) -> Result<String, String> {
    psql_with_env(conninfo, sql, &[])
}

/// As [`psql_with`], with extra environment variables (`PGSSLMODE`, ...)
/// set for libpq after the cleaning.
pub fn psql_with_env(conninfo: &str, sql: &str, env: &[(&str, &str)]) -> Result<String, String> {
    let mut cmd = Command::new(psql_program());
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .arg("-d")
        .arg(conninfo);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            cmd.env_remove(key);
        }
    }
    cmd.env("PGCONNECT_TIMEOUT", "10")
        .env("LC_ALL", "C")
        .env("PGPASSFILE", NO_USER_FILE)
        .env("PGSERVICEFILE", NO_USER_FILE)
        .env("PGSSLCERT", NO_USER_FILE)
        .env("PGSSLKEY", NO_USER_FILE)
        .env("PGSSLROOTCERT", NO_USER_FILE);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", psql_program().display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!(
            "psql failed ({}): {}",
            output.status,
            stderr.trim()
        ))
    }
}
