//! Connecting where users' databases are: every `sslmode` and `channel_binding` against a TLS
//! and a plaintext server, compared with libpq itself on the same strings; certificate checks
//! and their messages; client certificates; Unix-domain sockets; keyword/value strings, `PG*`
//! variables and the password file; one failed login per `connect()`.
//!
//! These run on smol, tokio and glommio (not on the `tokio_tls` instance, which forces TLS).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use pgpipe::{Config, Error};
use pgpipe_tests::{
    libpq_connects, psql_with, shared, Cluster, CERT_USER, MD5_PASSWORD, MD5_USER, NOSSL_USER,
    SCRAM_PASSWORD, SCRAM_USER, SUPERUSER, TLS_SCRAM_PASSWORD, TLS_SCRAM_USER,
};

use crate::Harness;

/// One test at a time counts failed logins in the plaintext server's log.
static SERVER_LOG: Mutex<()> = Mutex::new(());

/// Failed password logins `server` has logged so far (it writes the line before it sends the
/// error, so the count is final once a connect has failed).
fn failed_logins(server: &Cluster) -> usize {
    std::fs::read_to_string(server.dir().join("server.log"))
        .unwrap_or_default()
        .matches("password authentication failed")
        .count()
}

/// A plaintext server (no `ssl`), shared by the instances of these tests.
fn plaintext_server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| Cluster::start().expect("plaintext cluster"))
}

/// A TLS server whose certificate has expired.
fn expired_server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| {
        Cluster::builder()
            .expired_server_cert(true)
            .start()
            .expect("cluster with an expired certificate")
    })
}

fn shared_port() -> u16 {
    Config::parse(&shared().url()).expect("test URL").port
}

fn ca() -> PathBuf {
    shared()
        .tls()
        .expect("TLS material")
        .ca_cert()
        .to_path_buf()
}

/// Parses `conninfo` with an empty environment, as the libpq reference runs with one.
fn parse(conninfo: &str) -> Result<Config, Error> {
    Config::parse_with_env(conninfo, |_| None)
}

/// Connects with one connection of each kind, and says whether it runs over TLS.
async fn pgpipe_ssl<H: Harness>(conninfo: &str) -> Result<bool, Error> {
    let mut cfg = parse(conninfo)?;
    cfg.pipeline_size = 1;
    cfg.max_connections = 1;
    cfg.pinned_size = 1;
    cfg.connect_timeout = std::time::Duration::from_secs(10);
    let db = H::connect(cfg).await?;
    let tls = db.stats().total.tls_handshakes > 0;
    db.close().await;
    Ok(tls)
}

/// What libpq does with `conninfo`: connected (and whether over TLS), or why not.
fn libpq_ssl(conninfo: &str) -> Result<bool, String> {
    psql_with(
        conninfo,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    )
    .map(|out| out.trim() == "t")
}

const MODES: [&str; 6] = [
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// The connection strings of the sslmode matrix: TLS server over TCP and over its socket,
/// plaintext server; roles with trust, SCRAM, TLS-only SCRAM and plaintext-only access; each
/// mode with and without a root certificate.
fn sslmode_matrix() -> Vec<String> {
    let ca = ca();
    let servers = [
        format!("host=localhost port={}", shared_port()),
        format!(
            "host={} port={}",
            shared().socket_dir().expect("socket dir").display(),
            shared_port()
        ),
        format!("host=localhost port={}", plaintext_server().port()),
    ];
    let roles = [
        format!("user={SUPERUSER}"),
        format!("user={SCRAM_USER} password={SCRAM_PASSWORD}"),
        format!("user={TLS_SCRAM_USER} password={TLS_SCRAM_PASSWORD}"),
        format!("user={NOSSL_USER}"),
    ];
    let mut out = Vec::new();
    for server in &servers {
        for role in &roles {
            for mode in MODES {
                for root in [format!(" sslrootcert={}", ca.display()), String::new()] {
                    out.push(format!(
                        "{server} {role} dbname=postgres sslmode={mode}{root}"
                    ));
                }
            }
        }
    }
    out
}

/// libpq's answers, computed once for all instances.
fn libpq_answers(strings: &[String]) -> &'static HashMap<String, Result<bool, String>> {
    static ANSWERS: OnceLock<HashMap<String, Result<bool, String>>> = OnceLock::new();
    ANSWERS.get_or_init(|| strings.iter().map(|s| (s.clone(), libpq_ssl(s))).collect())
}

pub async fn sslmode_matrix_matches_libpq<H: Harness>() {
    if shared()
        .tls_or_skip("sslmode_matrix_matches_libpq")
        .is_none()
    {
        return;
    }
    let strings = sslmode_matrix();
    let libpq = libpq_answers(&strings);
    let mut mismatches = Vec::new();
    let (mut tls_ok, mut plain_ok, mut failed) = (0, 0, 0);
    for s in &strings {
        let ours = pgpipe_ssl::<H>(s).await;
        let theirs = &libpq[s];
        match (&ours, theirs) {
            (Ok(a), Ok(b)) if a == b => {
                if *a {
                    tls_ok += 1
                } else {
                    plain_ok += 1
                }
            }
            (Err(_), Err(_)) => failed += 1,
            _ => mismatches.push(format!("{s}\n  pgpipe: {ours:?}\n  libpq:  {theirs:?}")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} strings differ from libpq:\n{}",
        mismatches.len(),
        strings.len(),
        mismatches.join("\n")
    );
    // The matrix must exercise all three outcomes.
    assert!(
        tls_ok > 0 && plain_ok > 0 && failed > 0,
        "{tls_ok} {plain_ok} {failed}"
    );
}

pub async fn channel_binding_matches_libpq<H: Harness>() {
    if shared()
        .tls_or_skip("channel_binding_matches_libpq")
        .is_none()
    {
        return;
    }
    let port = shared_port();
    let mut mismatches = Vec::new();
    for role in [
        format!("user={SUPERUSER}"),
        format!("user={SCRAM_USER} password={SCRAM_PASSWORD}"),
        format!("user={TLS_SCRAM_USER} password={TLS_SCRAM_PASSWORD}"),
        format!("user={MD5_USER} password={MD5_PASSWORD}"),
    ] {
        for mode in ["disable", "require"] {
            for binding in ["disable", "prefer", "require"] {
                let s = format!(
                    "host=localhost port={port} {role} dbname=postgres sslmode={mode} \
                     channel_binding={binding}"
                );
                let ours = pgpipe_ssl::<H>(&s).await;
                let theirs = libpq_connects(&s);
                if ours.is_ok() != theirs.is_ok() {
                    mismatches.push(format!("{s}\n  pgpipe: {ours:?}\n  libpq:  {theirs:?}"));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Over TLS, SCRAM binds the channel: required binding is met.
    let s = format!(
        "host=localhost port={port} user={SCRAM_USER} password={SCRAM_PASSWORD} \
         dbname=postgres sslmode=require channel_binding=require"
    );
    assert!(pgpipe_ssl::<H>(&s).await.expect("SCRAM-SHA-256-PLUS"));
    // In plaintext it cannot be.
    let s = format!(
        "host=localhost port={} user={SCRAM_USER} password={SCRAM_PASSWORD} \
         dbname=postgres sslmode=prefer channel_binding=require",
        plaintext_server().port()
    );
    let e = pgpipe_ssl::<H>(&s).await.expect_err("no TLS, no binding");
    assert!(matches!(e, Error::Auth { .. }), "{e}");
}

fn tls_string(extra: &str) -> String {
    format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslrootcert={} {extra}",
        shared_port(),
        ca().display()
    )
}

/// A TLS error whose message holds `needle` and reads as a sentence (no Debug dump of the TLS
/// library's structures); returns it for further checks.
fn assert_tls_error(r: Result<bool, Error>, needle: &str) -> Error {
    match r {
        Err(e @ Error::Tls { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
            assert!(
                !msg.contains('{') && !msg.contains("Context"),
                "a Debug dump in {msg:?}"
            );
            e
        }
        other => panic!("expected a TLS error with {needle:?}, got {other:?}"),
    }
}

pub async fn certificate_checks_say_which_failed<H: Harness>() {
    let Some(tls) = shared().tls_or_skip("certificate_checks_say_which_failed") else {
        return;
    };
    // The right CA and name: verified, encrypted.
    assert!(pgpipe_ssl::<H>(&tls_string("sslmode=verify-full"))
        .await
        .unwrap());
    let ip = tls_string("sslmode=verify-full").replace("host=localhost", "host=127.0.0.1");
    assert!(
        pgpipe_ssl::<H>(&ip).await.unwrap(),
        "the certificate lists 127.0.0.1"
    );
    // A CA that did not issue it.
    let other = format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslmode=verify-full sslrootcert={}",
        shared_port(),
        tls.other_ca_cert().display()
    );
    assert_tls_error(pgpipe_ssl::<H>(&other).await, "not signed by a trusted CA");
    // A name it does not list; verify-ca does not check names.
    let wrong = tls_string("hostaddr=127.0.0.1 sslmode=verify-full")
        .replace("host=localhost", "host=wrong.example");
    let e = assert_tls_error(pgpipe_ssl::<H>(&wrong).await, "not valid for the host name");
    assert!(e.to_string().contains("(it names "), "{e}");
    // The TLS library's error stays reachable as the source.
    assert!(std::error::Error::source(&e).is_some(), "{e:?}");
    let ca_only = wrong.replace("verify-full", "verify-ca");
    assert!(pgpipe_ssl::<H>(&ca_only).await.unwrap());
    // `require` with a root certificate verifies the chain, as libpq does.
    let req_other = other.replace("verify-full", "require");
    assert_tls_error(
        pgpipe_ssl::<H>(&req_other).await,
        "not signed by a trusted CA",
    );
    // verify-full with no root certificate at all.
    let no_root = format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslmode=verify-full",
        shared_port()
    );
    assert_tls_error(pgpipe_ssl::<H>(&no_root).await, "no root certificate");
    // A server without TLS.
    let plain = format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslmode=require",
        plaintext_server().port()
    );
    assert_tls_error(pgpipe_ssl::<H>(&plain).await, "does not support TLS");
    // An expired certificate: verification says so, `require` still encrypts.
    let expired = expired_server();
    let exp = format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslrootcert={} sslmode=verify-ca",
        expired.port(),
        expired.tls().expect("TLS material").ca_cert().display()
    );
    assert_tls_error(pgpipe_ssl::<H>(&exp).await, "expired");
    let exp_req = format!(
        "host=localhost port={} user={SUPERUSER} dbname=postgres sslmode=require",
        expired.port()
    );
    assert!(pgpipe_ssl::<H>(&exp_req).await.unwrap());
    // Direct TLS negotiation is PostgreSQL 17's; this server is older.
    let direct = tls_string("sslmode=verify-full sslnegotiation=direct");
    assert_tls_error(pgpipe_ssl::<H>(&direct).await, "sslnegotiation=direct");
}

pub async fn client_certificates_log_in<H: Harness>() {
    let Some(tls) = shared().tls_or_skip("client_certificates_log_in") else {
        return;
    };
    let base = format!(
        "host=localhost port={} user={CERT_USER} dbname=postgres sslmode=verify-full sslrootcert={}",
        shared_port(),
        tls.ca_cert().display()
    );
    let with_cert = format!(
        "{base} sslcert={} sslkey={}",
        tls.client_cert().display(),
        tls.client_key().display()
    );
    assert!(pgpipe_ssl::<H>(&with_cert)
        .await
        .expect("certificate login"));
    let e = pgpipe_ssl::<H>(&base).await.expect_err("no certificate");
    assert!(e.is_auth(), "{e}");
    assert_eq!(e.code().map(|c| c.class()), Some("28"), "{e}");
    // A certificate without its key is a configuration error that names both keywords.
    let half = format!("{base} sslcert={}", tls.client_cert().display());
    let e = pgpipe_ssl::<H>(&half).await.expect_err("no key");
    assert!(e.to_string().contains("sslkey"), "{e}");
}

pub async fn unix_sockets_in_both_string_forms<H: Harness>() {
    let Some(dir) = shared().socket_dir() else {
        pgpipe_tests::report_skip("unix_sockets_in_both_string_forms", "external server");
        return;
    };
    let port = shared_port();
    let kv = format!(
        "host={} port={port} user={SUPERUSER} dbname=postgres",
        dir.display()
    );
    let url = format!(
        "postgres://{SUPERUSER}@{}:{port}/postgres",
        percent_encode_path(dir)
    );
    let query = format!(
        "postgres:///postgres?host={}&port={port}&user={SUPERUSER}",
        dir.display()
    );
    for s in [kv, url, query] {
        let mut cfg = parse(&s).unwrap_or_else(|e| panic!("{s}: {e}"));
        cfg.pipeline_size = 2;
        let db = H::connect(cfg).await.unwrap_or_else(|e| panic!("{s}: {e}"));
        let row = db
            .query_one("SELECT inet_server_addr() IS NULL", &[])
            .await
            .unwrap();
        assert!(row.get::<_, bool>(0), "{s} did not use the socket");
        assert_eq!(db.stats().total.tls_handshakes, 0, "no TLS over a socket");
        db.close().await;
    }
    // The Linux abstract namespace (glommio's API cannot open such a socket, and says so).
    let abstract_host = shared().abstract_socket().expect("local cluster");
    let s = format!("host={abstract_host} port={port} user={SUPERUSER} dbname=postgres");
    match (H::name(), pgpipe_ssl::<H>(&s).await) {
        ("glommio", Err(e)) => assert!(e.to_string().contains("abstract"), "{e}"),
        (_, r) => assert!(!r.expect("abstract socket"), "no TLS over a socket"),
    }
    // A directory with no server socket names the socket file it tried.
    let missing = format!("host=/nonexistent port={port} user={SUPERUSER}");
    let e = pgpipe_ssl::<H>(&missing).await.expect_err("no socket");
    assert!(e.to_string().contains("/nonexistent/.s.PGSQL."), "{e}");
}

fn percent_encode_path(p: &Path) -> String {
    p.display().to_string().replace('/', "%2F")
}

pub async fn environment_and_password_file<H: Harness>() {
    if shared()
        .tls_or_skip("environment_and_password_file")
        .is_none()
    {
        return;
    }
    let port = shared_port().to_string();
    let dir = tempdir();
    let passfile = dir.join("pgpass");
    std::fs::write(
        &passfile,
        format!("# test\nlocalhost:{port}:*:{SCRAM_USER}:{SCRAM_PASSWORD}\n"),
    )
    .unwrap();
    set_mode(&passfile, 0o600);
    let ca = ca().display().to_string();
    let pass = passfile.display().to_string();
    let env: HashMap<&str, &str> = [
        ("PGHOST", "localhost"),
        ("PGPORT", port.as_str()),
        ("PGUSER", SCRAM_USER),
        ("PGDATABASE", "postgres"),
        ("PGPASSFILE", pass.as_str()),
        ("PGSSLMODE", "verify-full"),
        ("PGSSLROOTCERT", ca.as_str()),
        ("PGAPPNAME", "pgpipe-env-test"),
    ]
    .into_iter()
    .collect();
    let mut cfg = Config::parse_with_env("", |k| env.get(k).map(|v| v.to_string())).unwrap();
    assert_eq!(cfg.password, None, "the file is read per server");
    assert_eq!(
        cfg.password_for(&cfg.servers()[0]).as_deref(),
        Some(SCRAM_PASSWORD),
        "from the password file"
    );
    cfg.pipeline_size = 1;
    let db = H::connect(cfg).await.expect("connect from the environment");
    let row = db
        .query_one(
            "SELECT current_user::text, current_setting('application_name')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), SCRAM_USER);
    assert_eq!(row.get::<_, String>(1), "pgpipe-env-test");
    assert_eq!(db.stats().total.tls_handshakes, 1);
    db.close().await;
    // In a host list each server has its own line: the first server (refused at once) has
    // none, the second gets its own, not the first server's nothing.
    let list = format!("host=127.0.0.1,localhost port=1,{port}");
    let mut cfg = Config::parse_with_env(&list, |k| env.get(k).map(|v| v.to_string())).unwrap();
    let servers = cfg.servers();
    assert_eq!(cfg.password_for(&servers[0]), None);
    assert_eq!(
        cfg.password_for(&servers[1]).as_deref(),
        Some(SCRAM_PASSWORD)
    );
    cfg.pipeline_size = 1;
    let db = H::connect(cfg)
        .await
        .expect("the second server's password-file line");
    let row = db
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), SCRAM_USER);
    db.close().await;
    // A password file others can read is ignored, as libpq ignores it.
    set_mode(&passfile, 0o644);
    let cfg = Config::parse_with_env("", |k| env.get(k).map(|v| v.to_string())).unwrap();
    assert_eq!(cfg.password_for(&cfg.servers()[0]), None);
    let e = H::connect(cfg).await.map(|_| ()).expect_err("no password");
    assert!(matches!(e, Error::Auth { .. }), "{e}");
    // `options` sets a startup parameter on every connection alike.
    let s = format!(
        "host=localhost port={port} user={SUPERUSER} dbname=postgres sslmode=disable \
         options='-c statement_timeout=4321'"
    );
    let mut cfg = parse(&s).unwrap();
    cfg.pipeline_size = 2;
    let db = H::connect(cfg).await.unwrap();
    for _ in 0..4 {
        let row = db
            .query_one("SELECT current_setting('statement_timeout')", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "4321ms");
    }
    db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("pgpipe-conn-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A wrong password costs the server one failed login per `connect()`, however many
/// connections the service would open, and neither errors nor `Debug` show the password.
// Each instance runs on its own thread and runtime; the lock only keeps them from counting
// each other's log lines.
#[allow(clippy::await_holding_lock)]
pub async fn a_wrong_password_fails_once_and_stays_secret<H: Harness>() {
    let _one = SERVER_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let server = plaintext_server();
    let failures = || failed_logins(server);
    let before = failures();
    let secret = "not-the-Passw0rd";
    let s = format!(
        "host=127.0.0.1 port={} user={MD5_USER} password={secret} dbname=postgres \
         sslmode=disable pipeline_size=4",
        server.port()
    );
    let cfg = parse(&s).unwrap();
    assert!(
        !format!("{cfg:?}").contains(secret),
        "Debug shows the password"
    );
    let e = H::connect(cfg)
        .await
        .map(|_| ())
        .expect_err("wrong password");
    assert!(matches!(e, Error::AuthRejected(_)), "{e}");
    assert_eq!(e.code(), Some(&pgpipe::SqlState::INVALID_PASSWORD), "{e}");
    assert!(
        !e.to_string().contains(secret),
        "the error shows the password: {e}"
    );
    // The server writes its log line before it sends the error, so the count is final here.
    assert_eq!(failures() - before, 1, "failed logins for one connect()");
    // The same holds for a URL with the password in it.
    let url = format!(
        "postgres://{MD5_USER}:{secret}@127.0.0.1:{}/postgres?sslmode=disable",
        server.port()
    );
    let e = H::connect(parse(&url).unwrap())
        .await
        .map(|_| ())
        .expect_err("wrong password");
    assert!(!e.to_string().contains(secret), "{e}");
}

/// A failed connection says why in a form a program can act on: the OS error of a refused
/// connect stays in the source chain, an unknown database and a wrong password carry the
/// server's SQLSTATE (through a host list too).
pub async fn connection_errors_keep_their_cause<H: Harness>() {
    let port = shared_port();
    let refused = pgpipe_ssl::<H>("host=127.0.0.1 port=1 user=x dbname=x sslmode=disable")
        .await
        .expect_err("nothing listens on port 1");
    match &refused {
        Error::Io(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
            assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
            let os = std::error::Error::source(e)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .and_then(std::io::Error::raw_os_error);
            assert!(os.is_some(), "the OS error is kept: {e:?}");
        }
        other => panic!("a refused connect: {other:?}"),
    }
    let unknown =
        format!("host=localhost port={port} user={SUPERUSER} dbname=no_such_db sslmode=disable");
    let e = pgpipe_ssl::<H>(&unknown)
        .await
        .expect_err("no such database");
    assert_eq!(
        e.code(),
        Some(&pgpipe::SqlState::INVALID_CATALOG_NAME),
        "{e}"
    );
    // Through a host list whose first server refuses: the last attempt's code.
    let list = format!(
        "host=127.0.0.1,localhost port=1,{port} user={SCRAM_USER} password=wrong dbname=postgres \
         sslmode=disable"
    );
    let e = pgpipe_ssl::<H>(&list).await.expect_err("wrong password");
    assert_eq!(e.code(), Some(&pgpipe::SqlState::INVALID_PASSWORD), "{e}");
    assert!(e.is_auth(), "{e}");
}

/// `require_auth` as libpq 16 means it, against the server's real methods: the connection
/// fails at the server's request when the method is not allowed, and the password is never
/// sent (the server logs no failed login for a wrong one: it never saw it).
// The lock as above.
#[allow(clippy::await_holding_lock)]
pub async fn require_auth_allows_only_the_methods_named<H: Harness>() {
    let _one = SERVER_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let server = plaintext_server();
    let connect = |user: &str, password: &str, require: &str| {
        let s = format!(
            "host=127.0.0.1 port={} user={user} password={password} dbname=postgres \
             sslmode=disable pipeline_size=1 require_auth={require}",
            server.port()
        );
        H::connect(parse(&s).expect("parses"))
    };
    let md5 = (MD5_USER, MD5_PASSWORD);
    let scram = (SCRAM_USER, SCRAM_PASSWORD);
    let clear = (pgpipe_tests::CLEAR_USER, pgpipe_tests::CLEAR_PASSWORD);
    let trusted = (SUPERUSER, "unused");
    for ((user, password), require) in [
        (md5, "md5"),
        (md5, "password,md5"),
        (md5, "!password,!scram-sha-256"),
        (scram, "scram-sha-256"),
        (scram, "!md5"),
        (clear, "password"),
        (trusted, "none"),
        (trusted, "none,scram-sha-256"),
    ] {
        let db = connect(user, password, &format!("'{require}'"))
            .await
            .unwrap_or_else(|e| panic!("{user} with require_auth={require}: {e}"));
        db.close().await;
    }
    let failures = || failed_logins(server);
    let before = failures();
    for ((user, _), require, needle) in [
        (md5, "scram-sha-256", "MD5 password hash"),
        (md5, "!md5", "MD5 password hash"),
        (scram, "md5", "SCRAM-SHA-256"),
        (clear, "md5,scram-sha-256", "cleartext password"),
        (trusted, "scram-sha-256", "without authentication"),
        (trusted, "!none", "without authentication"),
    ] {
        // A wrong password: had it been sent, the server would log a failed login.
        let e = connect(user, "wrong-password", &format!("'{require}'"))
            .await
            .map(|_| ())
            .expect_err("a method require_auth does not allow");
        assert!(e.is_auth(), "{user}, require_auth={require}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("require_auth={require}")) && msg.contains(needle),
            "{user}, require_auth={require}: {msg}"
        );
    }
    assert_eq!(failures(), before, "a password went to the server");
}
