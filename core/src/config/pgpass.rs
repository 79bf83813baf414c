//! The password file (`~/.pgpass`, `passfile`, `PGPASSFILE`) in libpq's format:
//! `hostname:port:database:username:password` per line, `*` matching anything, `\:` and `\\`
//! escapes, `#` comment lines, first match wins.

use std::path::Path;

use super::Config;

/// What a line is matched against.
pub(crate) struct Target<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) dbname: &'a str,
    pub(crate) user: &'a str,
}

/// The password for `cfg` from the file at `path`, if the file is usable and a line matches.
pub(crate) fn lookup(path: &Path, cfg: &Config) -> Option<String> {
    let text = read(path)?;
    let host = cfg
        .hostaddr
        .filter(|_| cfg.host.is_empty())
        .map(|a| a.to_string());
    let target = Target {
        host: host.as_deref().unwrap_or(&cfg.host),
        port: cfg.port,
        dbname: cfg.database(),
        user: &cfg.user,
    };
    find(&text, &target)
}

/// The file's text, or `None` (silently, as libpq but for its warning) when it is missing,
/// unreadable, not a plain file, or (on Unix) readable or writable by group or others.
pub(crate) fn read(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return None;
        }
    }
    std::fs::read_to_string(path).ok()
}

/// The password of the first line of `text` that matches `t`.
pub(crate) fn find(text: &str, t: &Target<'_>) -> Option<String> {
    let port = t.port.to_string();
    // A Unix socket has no host name. libpq matches its default socket directory as
    // `localhost` and any other directory by its path; pgpipe has two default directories and
    // takes other local setups alike, so every socket matches `localhost` and its own path.
    let local = t.host.starts_with('/') || t.host.starts_with('@') || t.host.is_empty();
    let hosts: &[&str] = if t.host.is_empty() {
        &["localhost"]
    } else if local {
        &[t.host, "localhost"]
    } else {
        &[t.host]
    };
    text.lines().find_map(|line| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let rest = hosts.iter().find_map(|h| field(line, h))?;
        let rest = field(rest, &port)?;
        let rest = field(rest, t.dbname)?;
        let rest = field(rest, t.user)?;
        Some(unescape(rest))
    })
}

/// libpq's `pwdfMatchesString`: if the field at the start of `line` is `*` or equals `token`
/// (with `\` taking the next character literally), the text after its `:`.
fn field<'a>(line: &'a str, token: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut tok = token.chars();
    let mut it = line.char_indices();
    while let Some((i, c)) = it.next() {
        let (c, escaped) = match c {
            '\\' => match it.next() {
                Some((_, n)) => (n, true),
                None => return None,
            },
            c => (c, false),
        };
        if c == ':' && !escaped {
            return tok.next().is_none().then(|| &line[i + 1..]);
        }
        if tok.next() != Some(c) {
            return None;
        }
    }
    None
}

/// The password field: up to an unescaped `:` or the end, with escapes removed.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            ':' => break,
            '\\' => match it.next() {
                Some(n) => out.push(n),
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<'a>(host: &'a str, port: u16, dbname: &'a str, user: &'a str) -> Target<'a> {
        Target {
            host,
            port,
            dbname,
            user,
        }
    }

    const FILE: &str = "\
# comment: h:1:d:u:nope
db.example:5432:app:alice:pw-exact
db.example:*:*:bob:pw-bob
*:6000:*:*:pw-port-6000
weird\\:host:5432:d\\\\b:u\\:x:pw\\:with\\\\escapes:ignored
localhost:5432:*:carol:pw-local\r
/srv/sock:5432:*:dave:pw-dir
*:*:*:alice:pw-alice-anywhere
*:*:*:trail:ends-with-backslash\\
";

    #[test]
    fn matches_like_libpq() {
        let table = [
            (t("db.example", 5432, "app", "alice"), Some("pw-exact")),
            (
                t("db.example", 5432, "other", "alice"),
                Some("pw-alice-anywhere"),
            ),
            (t("db.example", 9999, "x", "bob"), Some("pw-bob")),
            (t("db.example", 6000, "x", "bob"), Some("pw-bob")),
            (t("elsewhere", 6000, "x", "zed"), Some("pw-port-6000")),
            (
                t("weird:host", 5432, "d\\b", "u:x"),
                Some("pw:with\\escapes"),
            ),
            (t("weird:host", 5432, "db", "u:x"), None),
            (t("localhost", 5432, "any", "carol"), Some("pw-local")),
            (
                t("/var/run/postgresql", 5432, "any", "carol"),
                Some("pw-local"),
            ),
            (t("/tmp", 5432, "any", "carol"), Some("pw-local")),
            (t("", 5432, "any", "carol"), Some("pw-local")),
            (t("/srv/sock", 5432, "x", "carol"), Some("pw-local")),
            (t("/srv/sock", 5432, "x", "dave"), Some("pw-dir")),
            (t("localhost", 5432, "x", "dave"), None),
            (t("127.0.0.1", 5432, "any", "carol"), None),
            (t("db.example", 5432, "app", "al"), None),
            (t("db.example", 5432, "app", "alicex"), None),
            (t("h", 1, "d", "u"), None),
            (t("h", 1, "d", "trail"), Some("ends-with-backslash\\")),
            (t("h", 1, "d", "nobody"), None),
        ];
        for (target, want) in table {
            assert_eq!(
                find(FILE, &target).as_deref(),
                want,
                "{}:{}:{}:{}",
                target.host,
                target.port,
                target.dbname,
                target.user
            );
        }
    }

    #[test]
    fn short_and_odd_lines_never_match() {
        for text in [
            "",
            "h",
            "h:1",
            "h:1:d",
            "h:1:d:u",
            "\\",
            "h\\",
            "#h:1:d:u:pw",
        ] {
            assert_eq!(find(text, &t("h", 1, "d", "u")), None, "{text:?}");
        }
        assert_eq!(find("h:1:d:u:", &t("h", 1, "d", "u")).as_deref(), Some(""));
        assert_eq!(
            find("h:1:d:u:pw:extra", &t("h", 1, "d", "u")).as_deref(),
            Some("pw")
        );
    }

    #[cfg(unix)]
    #[test]
    fn file_permissions_rule() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::config::test_dir("pgpass");
        let path = dir.join("pgpass");
        std::fs::write(&path, "*:*:*:*:from-file\n").expect("write");
        let mut cfg = Config::default();
        for (mode, want) in [
            (0o600, Some("from-file")),
            (0o644, None),
            (0o640, None),
            (0o400, Some("from-file")),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(lookup(&path, &cfg).as_deref(), want, "mode {mode:o}");
        }
        // A directory is not a password file; a missing file is no error.
        assert_eq!(read(&dir), None);
        assert_eq!(read(&dir.join("missing")), None);
        // The passfile keyword names the file; a set password wins over it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let file = path.to_str().expect("utf-8 path");
        cfg.set("passfile", file).expect("passfile");
        let first = &cfg.servers()[0];
        assert_eq!(cfg.password, None);
        assert_eq!(cfg.password_for(first).as_deref(), Some("from-file"));
        cfg.password = Some("given".into());
        assert_eq!(cfg.password_for(first).as_deref(), Some("given"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
