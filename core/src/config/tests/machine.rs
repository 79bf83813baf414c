//! What parsing takes from the machine: environment, socket directories, home files, the
//! password file; and that passwords stay out of errors.

use super::*;

#[test]
fn environment_supplies_what_the_string_leaves_unset() {
    let vars = [
        ("USER", "osuser"),
        ("PGHOST", "envhost"),
        ("PGPORT", "6000"),
        ("PGUSER", "envuser"),
        ("PGPASSWORD", "envpw"),
        ("PGDATABASE", "envdb"),
        ("PGAPPNAME", "envapp"),
        ("PGOPTIONS", "-c work_mem=64MB"),
        ("PGCONNECT_TIMEOUT", "7"),
        ("PGSSLMODE", "require"),
        ("PGSSLROOTCERT", "/env/ca.pem"),
        ("PGSSLCERT", "/env/c.pem"),
        ("PGSSLKEY", "/env/k.pem"),
        ("PGSSLSNI", "0"),
        ("PGSSLNEGOTIATION", "direct"),
        ("PGSSLMINPROTOCOLVERSION", "TLSv1.3"),
        ("PGSSLMAXPROTOCOLVERSION", "TLSv1.3"),
        ("PGCHANNELBINDING", "require"),
        ("PGCLIENTENCODING", "UTF8"),
        ("PGTARGETSESSIONATTRS", "any"),
        ("PGLOADBALANCEHOSTS", "disable"),
        ("PGGSSENCMODE", "disable"),
        ("PGHOSTADDR", "192.0.2.1"),
    ];
    let c = parse_env("", &vars).expect("parse");
    assert_eq!(
        (c.host.as_str(), c.port, c.user.as_str(), c.dbname.as_str()),
        ("envhost", 6000, "envuser", "envdb")
    );
    assert_eq!(c.password.as_deref(), Some("envpw"));
    assert_eq!(c.application_name.as_deref(), Some("envapp"));
    assert_eq!(c.options.as_deref(), Some("-c work_mem=64MB"));
    assert_eq!(c.connect_timeout, secs(7));
    assert_eq!(c.hostaddr, Some("192.0.2.1".parse().expect("ip")));
    assert_eq!(c.tls.mode, SslMode::Require);
    assert_eq!(c.tls.root_cert, Some(RootCert::File("/env/ca.pem".into())));
    assert_eq!(
        (c.tls.cert.is_some(), c.tls.key.is_some(), c.tls.sni),
        (true, true, false)
    );
    assert_eq!(c.tls.negotiation, SslNegotiation::Direct);
    assert_eq!(
        (c.tls.min_version, c.tls.max_version),
        (TlsVersion::Tls13, Some(TlsVersion::Tls13))
    );
    assert_eq!(c.channel_binding, ChannelBinding::Require);

    // The string wins over the environment, in both forms; an empty value in the string
    // counts as set (libpq), so the environment does not fill it and the default applies.
    let c = parse_env("host=h user=u password=p dbname=d port=1 sslmode=disable channel_binding=prefer sslnegotiation=postgres", &vars).expect("kv");
    assert_eq!(
        (c.host.as_str(), c.user.as_str(), c.dbname.as_str(), c.port),
        ("h", "u", "d", 1)
    );
    assert_eq!(
        (c.password.as_deref(), c.tls.mode),
        (Some("p"), SslMode::Disable)
    );
    let c = parse_env(
        "postgres://u:p@h:1/d?sslmode=disable&channel_binding=prefer&sslnegotiation=postgres",
        &vars,
    )
    .expect("url");
    assert_eq!(
        (c.host.as_str(), c.user.as_str(), c.dbname.as_str(), c.port),
        ("h", "u", "d", 1)
    );
    let c = parse_env(
        "host='' hostaddr='' port=''",
        &[("PGHOST", "envhost"), ("PGPORT", "6000")],
    )
    .expect("empty");
    assert_eq!((c.host.as_str(), c.port), ("localhost", 5432));
    // An empty variable counts as unset.
    let c = parse_env("", &[("PGHOST", ""), ("PGPORT", "")]).expect("empty vars");
    assert_eq!((c.host.as_str(), c.port), ("localhost", 5432));
}

#[test]
fn environment_errors_name_the_variable() {
    let e = parse_env("", &[("PGSSLMODE", "bogus")])
        .expect_err("bad PGSSLMODE")
        .to_string();
    assert!(
        e.contains("sslmode=\"bogus\" is not valid")
            && e.contains("(from the environment variable PGSSLMODE)"),
        "{e}"
    );
    let e = parse_env("", &[("PGSERVICE", "svc")])
        .expect_err("PGSERVICE")
        .to_string();
    assert!(
        e.contains("service files are not supported") && e.contains("PGSERVICE"),
        "{e}"
    );
    let e = parse_env("", &[("PGSSLCRL", "/crl.pem")])
        .expect_err("PGSSLCRL")
        .to_string();
    assert!(e.contains("revocation") && e.contains("PGSSLCRL"), "{e}");
    // Variables libpq does not read for a keyword are not read.
    assert!(parse_env("", &[("PGKEEPALIVES", "bogus"), ("PGSERVICEFILE", "/x")]).is_ok());
}

#[test]
fn requiressl_and_sslmode_precedence() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], SslMode);
    let table: &[Case<'_>] = &[
        ("", &[("PGREQUIRESSL", "1")], SslMode::Require),
        ("", &[("PGREQUIRESSL", "0")], SslMode::Prefer),
        (
            "",
            &[("PGREQUIRESSL", "1"), ("PGSSLMODE", "disable")],
            SslMode::Disable,
        ),
        (
            "requiressl=1",
            &[("PGSSLMODE", "disable")],
            SslMode::Require,
        ),
        ("sslmode=allow", &[("PGREQUIRESSL", "1")], SslMode::Allow),
        ("sslmode=verify-ca requiressl=1", &[], SslMode::VerifyCa),
        ("", &[("PGSSLROOTCERT", "system")], SslMode::VerifyFull),
    ];
    for (s, vars, want) in table {
        let c = parse_env(s, vars).unwrap_or_else(|e| panic!("{s:?} {vars:?}: {e}"));
        assert_eq!(c.tls.mode, *want, "{s:?} {vars:?}");
    }
    let e = parse_env("sslrootcert=system", &[("PGSSLMODE", "require")])
        .expect_err("weak")
        .to_string();
    assert!(e.contains("too weak for sslrootcert=system"), "{e}");
}

#[test]
fn default_user_host_and_database() {
    for (vars, user) in [
        (&[("USER", "u1"), ("LOGNAME", "l1")][..], "u1"),
        (&[("LOGNAME", "l1")][..], "l1"),
        (&[][..], "postgres"),
        (&[("USER", "u1"), ("PGUSER", "pg")][..], "pg"),
    ] {
        let c = parse_env("", vars).expect("parse");
        assert_eq!(
            (c.user.as_str(), c.dbname.as_str()),
            (user, user),
            "{vars:?}"
        );
    }
    // The socket directory holding `.s.PGSQL.<port>` is the default host, the first one wins.
    let a = crate::config::test_dir("sock-a");
    let b = crate::config::test_dir("sock-b");
    std::fs::write(b.join(".s.PGSQL.5432"), "").expect("socket stand-in");
    std::fs::write(a.join(".s.PGSQL.6000"), "").expect("socket stand-in");
    std::fs::write(b.join(".s.PGSQL.6000"), "").expect("socket stand-in");
    let (sa, sb) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let host = |s: &str| parse_dirs(s, &[], &[sa, sb]).expect("parse").host;
    assert_eq!(host(""), sb);
    assert_eq!(host("port=6000"), sa);
    assert_eq!(host("port=7000"), "localhost");
    assert_eq!(host("host=db"), "db");
    assert_eq!(host("hostaddr=192.0.2.7"), "192.0.2.7");
    for d in [a, b] {
        std::fs::remove_dir_all(d).ok();
    }
}

#[test]
fn tls_files_from_the_home_directory() {
    let home = crate::config::test_dir("home-tls");
    let dir = home.join(".postgresql");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let h = home.to_str().expect("utf-8");
    let tls = |s: &str| parse_env(s, &[("HOME", h)]).expect("parse").tls;
    assert_eq!(
        (tls("").root_cert, tls("").cert, tls("").key),
        (None, None, None)
    );
    std::fs::write(dir.join("postgresql.key"), "k").expect("write");
    assert_eq!(tls("").key, None, "a key alone is not used");
    for f in ["root.crt", "postgresql.crt"] {
        std::fs::write(dir.join(f), "x").expect("write");
    }
    let t = tls("sslmode=verify-ca");
    assert_eq!(t.root_cert, Some(RootCert::File(dir.join("root.crt"))));
    assert_eq!(
        (t.cert, t.key),
        (
            Some(dir.join("postgresql.crt")),
            Some(dir.join("postgresql.key"))
        )
    );
    let t = tls("sslrootcert=/mine.pem sslcert=/c.pem");
    assert_eq!(t.root_cert, Some(RootCert::File("/mine.pem".into())));
    assert_eq!(
        (t.cert, t.key),
        (Some("/c.pem".into()), Some(dir.join("postgresql.key")))
    );
    assert_eq!(
        tls("sslmode=disable").root_cert,
        None,
        "not looked up without TLS"
    );
    std::fs::remove_dir_all(home).ok();
}

#[cfg(unix)]
#[test]
fn password_file_is_read_when_no_password_is_given() {
    use std::os::unix::fs::PermissionsExt;
    let home = crate::config::test_dir("home-pgpass");
    let h = home.to_str().expect("utf-8").to_owned();
    let pgpass = home.join(".pgpass");
    let write = |path: &std::path::Path, text: &str, mode: u32| {
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    write(
        &pgpass,
        "db:5432:app:alice:home-pw\nlocalhost:*:*:*:local-pw\n",
        0o600,
    );
    let other = home.join("other");
    write(&other, "*:*:*:*:other-pw\n", 0o600);
    let pw = |s: &str, extra: &[(&str, &str)]| {
        let mut vars = vec![("HOME", h.as_str()), ("USER", "alice")];
        vars.extend_from_slice(extra);
        let cfg = parse_env(s, &vars).expect("parse");
        cfg.password_for(&cfg.servers()[0])
    };
    assert_eq!(pw("host=db dbname=app", &[]).as_deref(), Some("home-pw"));
    assert_eq!(
        pw("postgres://alice@db/app", &[]).as_deref(),
        Some("home-pw")
    );
    assert_eq!(
        pw("host=db dbname=app password=given", &[]).as_deref(),
        Some("given")
    );
    assert_eq!(
        pw("host=db dbname=app", &[("PGPASSWORD", "env")]).as_deref(),
        Some("env")
    );
    assert_eq!(pw("host=db dbname=other", &[]), None);
    assert_eq!(
        pw("host=/var/run/postgresql", &[]).as_deref(),
        Some("local-pw")
    );
    assert_eq!(pw("", &[]).as_deref(), Some("local-pw"));
    let of = other.to_str().expect("utf-8");
    assert_eq!(
        pw(&format!("host=db passfile={of}"), &[]).as_deref(),
        Some("other-pw")
    );
    assert_eq!(
        pw("host=db", &[("PGPASSFILE", of)]).as_deref(),
        Some("other-pw")
    );
    assert_eq!(
        pw(&format!("host=db dbname=app passfile={of}"), &[]).as_deref(),
        Some("other-pw")
    );
    // Each server of a host list is matched on its own host and port.
    write(
        &pgpass,
        "db:5432:app:alice:home-pw\nlocalhost:*:*:*:local-pw\nb:5433:*:*:b-pw\n",
        0o600,
    );
    let cfg = parse_env(
        "host=a,b,db port=5432,5433,5432 dbname=app",
        &[("HOME", &h), ("USER", "alice")],
    )
    .expect("parse");
    let each: Vec<Option<String>> = cfg.servers().iter().map(|s| cfg.password_for(s)).collect();
    assert_eq!(each, [None, Some("b-pw".into()), Some("home-pw".into())]);
    // Group- or world-readable: ignored without an error, as libpq (which only warns).
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(pw("host=db dbname=app", &[]), None);
    std::fs::remove_dir_all(home).ok();
}

#[test]
fn passwords_stay_out_of_errors_and_debug() {
    const SECRET: &str = "Sup3rS3cret";
    let bad = [
        "postgres://u:Sup3rS3cret@h:badport/db",
        "postgres://u:Sup3rS3cret@h/db?bogus=1",
        "postgres://u:Sup3rS3cret%zz@h/db",
        "postgres://u:Sup3rS3cret/x@h/db",
        "postgres://u:Sup3rS3cret?x@h/db",
        "postgres://u:Sup3/rS3cret@h/db",
        "postgres://u:Sup3rS3cret@a,,b/db",
        "postgres://u:Sup3rS3cret@a,b:x/db",
        "postgres://h/db?password=Sup3rS3cret%zz",
        "postgres://h/db?password=Sup3rS3&cret",
        "postgres://u:Sup3rS3cret@h/db?sslmode=verify",
        "user=u password=Sup3rS3cret port=x",
        "user=u password=Sup3rS3cret bogus=1",
        "password=Sup3r S3cret",
        "password='Sup3rS3cret",
        "password='Sup3r'S3cret'",
        "password=Sup3rS3cret sslpassword=Sup3rS3cret",
        "password=Sup3rS3cret pipeline_size=0",
    ];
    for s in bad {
        let e = parse_env(s, &[]).expect_err(s);
        for text in [e.to_string(), format!("{e:?}")] {
            assert!(
                !text.contains(SECRET) && !text.contains("S3cret") && !text.contains("Sup3"),
                "{s:?}: {text}"
            );
        }
    }
    let e = parse_env("", &[("PGPASSWORD", SECRET), ("PGSSLMODE", "x")]).expect_err("PGSSLMODE");
    assert!(!e.to_string().contains(SECRET), "{e}");
    let c = parse_env("postgres://u:Sup3rS3cret@h/db", &[]).expect("parse");
    assert_eq!(c.password.as_deref(), Some(SECRET));
    assert!(!format!("{c:?}").contains(SECRET));
}
