//! Where the PostgreSQL binaries are: `PGPIPE_PG_BIN`, `pg_config --bindir` or the highest
//! `/usr/lib/postgresql/*/bin`, and the `psql` beside them; where an optional tool is
//! (PgBouncer, HAProxy), and whether a test that needs one runs or skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{HarnessError, PG_BIN_ENV};

/// Conventional location of Debian/Ubuntu server packages, one directory per
/// major version.
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

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
pub(crate) fn psql_in(bin: &Path) -> PathBuf {
    let psql = bin.join("psql");
    if psql.is_file() {
        psql
    } else {
        PathBuf::from("psql")
    }
}

/// An optional tool's binary: the path in the environment variable `env`, else `debian` (where
/// Debian's package puts it), else `name` on `PATH`; or every place looked at.
pub(crate) fn find_tool(env: &str, debian: &str, name: &str) -> Result<PathBuf, Vec<String>> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os(env) {
        candidates.push(p.into());
    }
    candidates.push(debian.into());
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(name)));
    }
    let mut searched = Vec::new();
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        searched.push(format!("{}: not found", c.display()));
    }
    Err(searched)
}

/// Whether a test that needs an optional tool can run, given where it was `found`. Without it
/// the test prints a one-line note naming the Debian `package` and returns false (it passes as
/// skipped), so the README's test command runs to the end on a machine with only PostgreSQL;
/// the environment variable `require` (set by CI) turns the skip into a failure.
pub(crate) fn tool_or_skip(
    test: &str,
    found: Result<PathBuf, HarnessError>,
    require: &str,
    package: &str,
) -> bool {
    match found {
        Ok(_) => true,
        Err(e) if std::env::var_os(require).is_some() => {
            panic!("{test}: {require} is set, but {e}")
        }
        Err(_) => {
            crate::report_skip(
                test,
                &format!("{package} is not installed (apt-get install -y {package})"),
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_numerically() {
        assert!(parse_version("15") > parse_version("9.6"));
        assert_eq!(parse_version("main"), None);
    }
}
