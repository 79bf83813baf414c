//! Tests of parsing as a whole: both forms, every keyword, the environment, defaults, files.

use std::time::Duration;

use super::env::Sources;
use super::parse::parse_in;
use super::*;

mod keywords;
mod machine;

/// Parses with exactly these environment variables and no socket directory to probe.
fn parse_env(s: &str, vars: &[(&str, &str)]) -> Result<Config, Error> {
    parse_dirs(s, vars, &[])
}

fn parse_dirs(s: &str, vars: &[(&str, &str)], dirs: &[&str]) -> Result<Config, Error> {
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    parse_in(
        s,
        &Sources {
            var: &var,
            socket_dirs: dirs,
        },
    )
}

/// Parses with `USER=tester` as the only variable.
fn ok(s: &str) -> Config {
    parse_env(s, &[("USER", "tester")]).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn err(s: &str) -> String {
    match parse_env(s, &[("USER", "tester")]) {
        Ok(c) => panic!("{s:?} parsed: {c:?}"),
        Err(e) => e.to_string(),
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
