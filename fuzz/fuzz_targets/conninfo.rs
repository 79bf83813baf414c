//! Connection strings (`Config::parse`, both libpq forms) and the password file's lines.
//!
//! Input: byte 0 picks what the rest (as UTF-8, invalid sequences replaced) is:
//! - 0, 1: a connection string, as given, or after `postgresql://` (the URL form);
//! - 2, 3: a password file; its first line, split at `:` without escapes, names the host, port,
//!   database and user looked up (an IP address as host is taken as `hostaddr` with no host).
//!
//! The password file is reached as an application reaches it, through `Config::passfile` and
//! `Config::password_for`, so each input is written to a scratch file (mode 0600) first.
//!
//! Properties: no panic; a parsed configuration's servers, per-server configurations and
//! debug output are computable; a password from the file never spans a line.
#![no_main]

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pgpipe::Config;

/// A fixed environment, so results do not depend on the machine (`HOME` has no `.pgpass` and
/// no `.postgresql/`).
fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/nonexistent/pgpipe-fuzz-home".into()),
        "USER" | "LOGNAME" => Some("fuzz".into()),
        _ => None,
    }
}

fn exercise(cfg: &Config) {
    let _ = format!("{cfg:?}");
    let _ = cfg.database();
    for server in cfg.servers() {
        let one = cfg.for_server(&server);
        assert!(one.other_hosts.is_empty());
        let _ = one.database();
    }
}

fn conninfo(s: &str) {
    if let Ok(cfg) = Config::parse_with_env(s, env) {
        exercise(&cfg);
    }
    // With the process environment too, as applications call it.
    if let Ok(cfg) = Config::parse(s) {
        exercise(&cfg);
    }
}

fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("pgpipe-fuzz-pgpass-{}", std::process::id()))
    })
}

fn pgpass(text: &str) {
    let path = scratch();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("scratch password file");
    f.write_all(text.as_bytes())
        .expect("write the password file");
    drop(f);

    let first = text.lines().next().unwrap_or("");
    let mut fields = first.split(':');
    let mut cfg = Config::default();
    let host = fields.next().unwrap_or("");
    match host.parse() {
        Ok(ip) => {
            cfg.hostaddr = Some(ip);
            cfg.host = String::new();
        }
        Err(_) => cfg.host = host.to_owned(),
    }
    cfg.port = fields.next().and_then(|p| p.parse().ok()).unwrap_or(5432);
    cfg.dbname = fields.next().unwrap_or("").to_owned();
    cfg.user = fields.next().unwrap_or("").to_owned();
    cfg.password = None;
    cfg.set_passfile(Some(path.clone()));
    for server in cfg.servers() {
        if let Some(pw) = cfg.password_for(&server) {
            assert!(!pw.contains('\n'), "a password spans lines: {pw:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [which, rest @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which & 3 {
        0 => conninfo(&text),
        1 => conninfo(&format!("postgresql://{text}")),
        _ => pgpass(&text),
    }
});
