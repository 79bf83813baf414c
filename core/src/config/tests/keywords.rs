//! Every keyword, in both forms, and the errors for bad values.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use super::*;
use crate::config::options::KEYWORDS;
use crate::guard::Mode;

type Check = fn(&Config) -> bool;

/// `keyword=value` strings and what they must set. Each is also parsed as a URL query
/// parameter (`postgres://?keyword=value`, percent-encoded).
const ACCEPTED: &[(&str, Check)] = &[
    ("host=db.example", |c| c.host == "db.example"),
    ("host=/var/run/postgresql", |c| {
        c.host == "/var/run/postgresql"
    }),
    ("host=@abstract", |c| c.host == "@abstract"),
    ("hostaddr=10.1.2.3", |c| {
        c.hostaddr == Some(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3))) && c.host == "10.1.2.3"
    }),
    ("hostaddr=::1", |c| {
        c.hostaddr == Some(IpAddr::V6(Ipv6Addr::LOCALHOST))
    }),
    ("host=db hostaddr=10.0.0.9", |c| {
        c.host == "db" && c.hostaddr.is_some()
    }),
    ("port=6543", |c| c.port == 6543),
    ("port=' 6543 '", |c| c.port == 6543),
    ("user=alice", |c| c.user == "alice" && c.dbname == "alice"),
    ("password=pw", |c| c.password.as_deref() == Some("pw")),
    ("password=''", |c| c.password.is_none()),
    ("passfile=/nonexistent/pgpass", |c| {
        c.password.is_none() && c.passfile() == Some(std::path::Path::new("/nonexistent/pgpass"))
    }),
    ("dbname=app", |c| c.dbname == "app" && c.user == "tester"),
    ("connect_timeout=30", |c| c.connect_timeout == secs(30)),
    ("connect_timeout=1", |c| c.connect_timeout == secs(2)),
    ("connect_timeout=0", |c| {
        c.connect_timeout == Config::NO_CONNECT_TIMEOUT
    }),
    ("connect_timeout=-5", |c| {
        c.connect_timeout == Config::NO_CONNECT_TIMEOUT
    }),
    ("connect_timeout=''", |c| {
        c.connect_timeout == Config::NO_CONNECT_TIMEOUT
    }),
    ("application_name=app", |c| {
        c.application_name.as_deref() == Some("app")
    }),
    ("fallback_application_name=fb", |c| {
        c.application_name.as_deref() == Some("fb")
    }),
    ("application_name=app fallback_application_name=fb", |c| {
        c.application_name.as_deref() == Some("app")
    }),
    ("application_name='' fallback_application_name=fb", |c| {
        c.application_name.as_deref() == Some("fb")
    }),
    ("options='-c search_path=app'", |c| {
        c.options.as_deref() == Some("-c search_path=app")
    }),
    ("client_encoding=UTF8", |_| true),
    ("client_encoding=utf-8", |_| true),
    ("client_encoding=unicode", |_| true),
    ("sslmode=disable", |c| c.tls.mode == SslMode::Disable),
    ("sslmode=allow", |c| c.tls.mode == SslMode::Allow),
    ("sslmode=prefer", |c| c.tls.mode == SslMode::Prefer),
    ("sslmode=require", |c| c.tls.mode == SslMode::Require),
    ("sslmode=verify-ca", |c| c.tls.mode == SslMode::VerifyCa),
    ("sslmode=verify-full", |c| c.tls.mode == SslMode::VerifyFull),
    ("requiressl=1", |c| c.tls.mode == SslMode::Require),
    ("requiressl=0", |c| c.tls.mode == SslMode::Prefer),
    ("requiressl=1 sslmode=verify-ca", |c| {
        c.tls.mode == SslMode::VerifyCa
    }),
    ("sslrootcert=/ca.pem", |c| {
        c.tls.root_cert == Some(RootCert::File("/ca.pem".into()))
    }),
    ("sslrootcert=system", |c| {
        c.tls.root_cert == Some(RootCert::System) && c.tls.mode == SslMode::VerifyFull
    }),
    ("sslrootcert=system sslmode=verify-full", |c| {
        c.tls.mode == SslMode::VerifyFull
    }),
    ("sslcert=/c.pem sslkey=/k.pem", |c| {
        c.tls.cert == Some(PathBuf::from("/c.pem")) && c.tls.key == Some(PathBuf::from("/k.pem"))
    }),
    ("sslpassword=''", |_| true),
    ("sslcertmode=allow", |_| true),
    ("sslnegotiation=postgres", |c| {
        c.tls.negotiation == SslNegotiation::Postgres
    }),
    ("sslnegotiation=direct sslmode=require", |c| {
        c.tls.negotiation == SslNegotiation::Direct
    }),
    ("sslsni=0", |c| !c.tls.sni),
    ("sslsni=1", |c| c.tls.sni),
    ("sslcompression=1", |_| true),
    ("ssl_min_protocol_version=TLSv1.3", |c| {
        c.tls.min_version == TlsVersion::Tls13
    }),
    ("ssl_max_protocol_version=tlsv1.2", |c| {
        c.tls.max_version == Some(TlsVersion::Tls12)
    }),
    ("channel_binding=disable", |c| {
        c.channel_binding == ChannelBinding::Disable
    }),
    ("channel_binding=prefer", |c| {
        c.channel_binding == ChannelBinding::Prefer
    }),
    ("channel_binding=require", |c| {
        c.channel_binding == ChannelBinding::Require
    }),
    ("require_auth=scram-sha-256", |c| {
        use crate::config::AuthMethod as M;
        c.require_auth.allows(M::ScramSha256) && !c.require_auth.allows(M::Md5)
    }),
    ("require_auth=!password,!none", |c| {
        use crate::config::AuthMethod as M;
        let r = &c.require_auth;
        !r.allows(M::Password) && !r.allows(M::None) && r.allows(M::Md5)
    }),
    ("keepalives=0", |c| !c.keepalives.enabled),
    ("keepalives=1", |c| c.keepalives.enabled),
    ("keepalives_idle=60", |c| {
        c.keepalives.idle == Some(secs(60))
    }),
    ("keepalives_idle=0", |c| c.keepalives.idle.is_none()),
    ("keepalives_interval=5", |c| {
        c.keepalives.interval == Some(secs(5))
    }),
    ("keepalives_count=3", |c| c.keepalives.count == Some(3)),
    ("tcp_user_timeout=2500", |c| {
        c.tcp_user_timeout == Some(Duration::from_millis(2500))
    }),
    ("tcp_user_timeout=0", |c| c.tcp_user_timeout.is_none()),
    ("target_session_attrs=any", |c| {
        c.target_session_attrs == TargetSessionAttrs::Any
    }),
    ("target_session_attrs=read-write", |c| {
        c.target_session_attrs == TargetSessionAttrs::ReadWrite
    }),
    ("target_session_attrs=read-only", |c| {
        c.target_session_attrs == TargetSessionAttrs::ReadOnly
    }),
    ("target_session_attrs=primary", |c| {
        c.target_session_attrs == TargetSessionAttrs::Primary
    }),
    ("target_session_attrs=standby", |c| {
        c.target_session_attrs == TargetSessionAttrs::Standby
    }),
    ("target_session_attrs=prefer-standby", |c| {
        c.target_session_attrs == TargetSessionAttrs::PreferStandby
    }),
    ("named_statements=off", |c| !c.named_statements),
    ("pooler=transaction", |c| {
        c.pooler == crate::config::Pooler::Transaction
    }),
    ("pooler=transaction-pipelined", |c| {
        c.pooler == crate::config::Pooler::TransactionPipelined
    }),
    ("pooler=none", |c| c.pooler == crate::config::Pooler::None),
    ("fair_lanes=off", |c| !c.fair_lanes),
    ("spare_cpu_pct=0", |c| c.spare_cpu_pct == 0),
    ("spare_cpu_pct=100", |c| c.spare_cpu_pct == 100),
    ("trace_sql=on", |c| c.trace_sql),
    ("max_message_size=65536", |c| c.max_message_size == 65536),
    ("sync_coalescing=off", |c| !c.sync_coalescing),
    ("named_statements=1", |c| c.named_statements),
    ("load_balance_hosts=disable", |c| {
        c.load_balance_hosts == LoadBalanceHosts::Disable
    }),
    ("load_balance_hosts=random", |c| {
        c.load_balance_hosts == LoadBalanceHosts::Random
    }),
    ("host=a,b,c", |c| {
        c.host == "a"
            && c.other_hosts == [Server::new("b", 5432), Server::new("c", 5432)]
            && c.servers().len() == 3
    }),
    ("host=a,b port=6000", |c| {
        c.port == 6000 && c.other_hosts == [Server::new("b", 6000)]
    }),
    ("host=a,b port=6000,6001", |c| {
        c.port == 6000 && c.other_hosts == [Server::new("b", 6001)]
    }),
    ("host=a,b port=,6001", |c| {
        c.port == 5432 && c.other_hosts == [Server::new("b", 6001)]
    }),
    ("host=a,b hostaddr=10.0.0.1,10.0.0.2", |c| {
        c.hostaddr == Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
            && c.other_hosts[0].host == "b"
            && c.other_hosts[0].hostaddr == Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))
    }),
    ("hostaddr=10.0.0.1,10.0.0.2 port=1,2", |c| {
        c.host == "10.0.0.1"
            && c.port == 1
            && c.other_hosts[0].host == "10.0.0.2"
            && c.other_hosts[0].port == 2
    }),
    ("gssencmode=disable", |_| true),
    ("gssencmode=prefer", |_| true),
    ("krbsrvname=postgres gsslib=gssapi gssdelegation=0", |_| {
        true
    }),
    ("replication=0", |_| true),
    // An empty value is "not set", so even refused keywords pass with one.
    (
        "sslcrl='' sslcrldir='' service='' servicefile='' require_auth='' requirepeer=''",
        |_| true,
    ),
    ("pipeline_size=2", |c| c.pipeline_size == 2),
    ("max_in_flight=8", |c| c.max_in_flight == 8),
    ("mailbox_size=9", |c| c.mailbox_size == 9),
    ("statement_cache_size=10", |c| c.statement_cache_size == 10),
    ("query_timeout=250", |c| {
        c.query_timeout == Some(Duration::from_millis(250))
    }),
    ("query_timeout=0", |c| c.query_timeout.is_none()),
    ("retry_not_dispatched=false", |c| !c.retry_not_dispatched),
    ("retry_not_dispatched=0", |c| !c.retry_not_dispatched),
    ("dispatch_timeout_ms=0", |c| c.dispatch_timeout.is_zero()),
    ("guard_allow_functions=my_fn,Other_Fn", |c| {
        c.guard_allow_functions == ["my_fn", "Other_Fn"]
    }),
    ("dispatch_timeout_ms=2500", |c| {
        c.dispatch_timeout == Duration::from_millis(2500)
    }),
    ("pinned_size=3", |c| c.pinned_size == 3),
    ("release_reset=always", |c| {
        c.release_reset == crate::config::ReleaseReset::Always
    }),
    ("guard=strict", |c| c.guard == Mode::Strict),
    ("max_connections=6", |c| c.max_connections == 6),
    ("slow_threshold_us=500", |c| {
        c.slow_threshold == Duration::from_micros(500)
    }),
    ("max_queue_work_us=900", |c| {
        c.max_queue_work == Duration::from_micros(900)
    }),
    ("idle_timeout_ms=50", |c| {
        c.idle_timeout == Duration::from_millis(50)
    }),
    ("checkout_timeout_ms=250", |c| {
        c.checkout_timeout == Some(Duration::from_millis(250))
    }),
    ("shared_statement_timeout_ms=1500", |c| {
        c.shared_statement_timeout == Some(Duration::from_millis(1500))
    }),
    ("health_check_ms=750", |c| {
        c.health_check == Some(Duration::from_millis(750))
    }),
    ("health_check_ms=0", |c| c.health_check.is_none()),
];

/// The keyword/value string as URL query parameters.
fn as_url(kv: &str) -> String {
    let pairs = crate::config::keyword::split(kv).expect("split");
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    format!("postgres://?{}", query.join("&"))
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn every_keyword_in_both_forms() {
    for (kv, check) in ACCEPTED {
        let c = ok(kv);
        assert!(check(&c), "{kv:?}: {c:?}");
        let url = as_url(kv);
        assert_eq!(ok(&url), c, "{url:?} differs from {kv:?}");
    }
    // The table covers every keyword.
    for k in KEYWORDS {
        assert!(
            ACCEPTED
                .iter()
                .any(|(kv, _)| kv.contains(&format!("{}=", k.name))),
            "{} untested",
            k.name
        );
    }
}

#[test]
fn defaults_as_libpq() {
    let c = ok("");
    assert_eq!(
        (c.host.as_str(), c.port, c.user.as_str(), c.dbname.as_str()),
        ("localhost", 5432, "tester", "tester")
    );
    assert_eq!(c.password, None);
    assert_eq!(c.application_name.as_deref(), Some("pgpipe"));
    assert_eq!(c.connect_timeout, secs(10));
    assert_eq!(c.tls, TlsConfig::default());
    assert_eq!(c.pipeline_size, Config::default().pipeline_size);
    assert_eq!(ok("postgres://"), c);
    assert_eq!(ok("postgresql:///"), c);
    assert_eq!(ok("  "), c);
}

#[test]
fn url_and_keyword_forms_agree() {
    let table = [
        (
            "postgres://al%40ice:p%20w@db.example:6543/app?sslmode=require&pipeline_size=2",
            "user=al@ice password='p w' host=db.example port=6543 dbname=app sslmode=require pipeline_size=2",
        ),
        ("postgresql://[::1]:5433/db", "host=::1 port=5433 dbname=db"),
        ("postgres://a:5432,b:5433/db", "host=a,b port=5432,5433 dbname=db"),
        ("postgres://a,b:5433/db", "host=a,b port=,5433 dbname=db"),
        ("postgres://a,[::1]/db?target_session_attrs=primary", "host=a,::1 dbname=db target_session_attrs=primary"),
        ("postgres:///db?host=/var/run/postgresql", "host=/var/run/postgresql dbname=db"),
        ("postgres://%2Fvar%2Frun%2Fpostgresql/db", "dbname=db host=/var/run/postgresql"),
        ("postgres://h/db?host=other&port=7", "host=h dbname=db host=other port=7"),
        ("postgres://h?ssl=true", "host=h sslmode=require"),
        ("postgres://u@h/db?options=-c%20statement_timeout%3D5s", "user=u host=h dbname=db options='-c statement_timeout=5s'"),
    ];
    for (url, kv) in table {
        assert_eq!(ok(url), ok(kv), "{url:?} vs {kv:?}");
    }
    // Config::from_url takes URLs only; Config::parse takes both.
    assert!(Config::from_url("host=h").is_err());
    assert!(Config::from_url("postgres://u@h/db?sslmode=disable").is_ok());
    assert!(Config::parse("host=h user=u dbname=db sslmode=disable").is_ok());
}

#[test]
fn errors_name_the_keyword_value_and_what_is_accepted() {
    let table = [
        ("pipline_size=2", "unknown keyword \"pipline_size\" (did you mean \"pipeline_size\"?)"),
        ("postgres://h/db?bogus=1", "unknown keyword \"bogus\""),
        ("host=a,,b", "host=\"a,,b\" has an empty entry"),
        // libpq's rules for the lists, with its messages.
        ("host=a,b,c port=1,2", "could not match 2 port numbers to 3 hosts"),
        ("host=localhost port=5432,5433", "could not match 2 port numbers to 1 hosts"),
        ("host=a,b hostaddr=10.0.0.1,10.0.0.2,10.0.0.3", "could not match 2 host names to 3 hostaddr values"),
        ("hostaddr=127.0.0.1,127.0.0.2 host=localhost", "could not match 1 host names to 2 hostaddr values"),
        // Without host, the addresses are the servers.
        ("hostaddr=127.0.0.1,127.0.0.2 port=1,2,3", "could not match 3 port numbers to 2 hosts"),
        ("postgres://h/db?port=1,2", "could not match 2 port numbers to 1 hosts"),
        ("hostaddr=db.example", "hostaddr=\"db.example\" is not an IP address"),
        ("port=0", "port=\"0\" is not a port number (1 to 65535)"),
        ("port=70000", "port=\"70000\" is not a port number"),
        ("connect_timeout=soon", "connect_timeout=\"soon\" is not an integer"),
        ("client_encoding=LATIN1", "client_encoding=\"LATIN1\" is not supported: pgpipe exchanges text as UTF-8"),
        ("sslmode=verify", "sslmode=\"verify\" is not valid; expected one of disable, allow, prefer, require, verify-ca, verify-full"),
        ("sslrootcert=system sslmode=require", "sslmode=require is too weak for sslrootcert=system"),
        ("sslpassword=x", "sslpassword is not supported: encrypted client keys"),
        ("sslcrl=/crl.pem", "sslcrl=\"/crl.pem\": certificate revocation lists are not supported"),
        ("sslcrldir=/crl", "sslcrldir=\"/crl\": certificate revocation lists are not supported"),
        ("sslcertmode=require", "sslcertmode=\"require\" is not supported yet"),
        ("sslnegotiation=direct", "sslnegotiation=direct needs sslmode require, verify-ca or verify-full (sslmode is prefer)"),
        ("sslnegotiation=fast", "sslnegotiation=\"fast\" is not valid; expected one of postgres, direct"),
        ("sslsni=maybe", "sslsni=\"maybe\" is not a boolean"),
        ("ssl_min_protocol_version=TLSv1.1", "not supported: pgpipe speaks TLSv1.2 and TLSv1.3 only"),
        ("ssl_max_protocol_version=TLSv1", "not supported"),
        ("ssl_min_protocol_version=SSLv3", "expected TLSv1.2 or TLSv1.3"),
        ("ssl_min_protocol_version=TLSv1.3 ssl_max_protocol_version=TLSv1.2", "ssl_max_protocol_version is lower"),
        ("channel_binding=require sslmode=disable", "channel_binding=require needs TLS"),
        ("channel_binding=always", "expected one of disable, prefer, require"),
        ("keepalives=sometimes", "keepalives=\"sometimes\" is not a boolean"),
        ("keepalives_count=9999999999", "keepalives_count=\"9999999999\" is too large"),
        ("tcp_user_timeout=1s", "tcp_user_timeout=\"1s\" is not an integer"),
        ("target_session_attrs=master", "target_session_attrs=\"master\" is not valid; expected one of any, read-write"),
        ("load_balance_hosts=roundrobin", "is not valid"),
        ("gssencmode=require", "gssencmode=\"require\" is not supported yet (pgpipe does not implement GSSAPI)"),
        ("service=mydb", "service=\"mydb\": connection service files are not supported"),
        ("servicefile=/s.conf", "connection service files are not supported"),
        ("replication=database", "replication connections are not supported"),
        ("replication=1", "replication connections are not supported"),
        ("require_auth=scram,md5", "\"scram\" is not a method"),
        ("require_auth=md5,!password", "cannot be mixed"),
        ("require_auth=md5,md5", "named more than once"),
        ("require_auth=!password,!md5,!gss,!sspi,!scram-sha-256,!none", "allows no method"),
        ("requirepeer=postgres", "requirepeer=\"postgres\" is not supported yet"),
        ("pipeline_size=0", "pipeline_size must be at least 1"),
        ("pipeline_size=-1", "pipeline_size=\"-1\" is not a valid non-negative number"),
        ("guard=lax", "guard=\"lax\" is not valid; expected one of default, strict"),
        ("retry_not_dispatched=maybe", "retry_not_dispatched=\"maybe\" is not a boolean"),
        ("=x", "unknown keyword \"\""),
        ("host", "missing \"=\" after \"host\""),
        ("options='-c x", "unterminated quoted string in the value of \"options\""),
    ];
    for (s, want) in table {
        let e = err(s);
        assert!(e.contains(want), "{s:?}:\n  got  {e}\n  want {want}");
    }
}

#[test]
fn set_applies_one_keyword() {
    let mut c = Config::default();
    c.set("sslmode", "verify-full").expect("sslmode");
    c.set("pipeline_size", "3").expect("pipeline_size");
    c.set("host", "").expect("empty is no change");
    assert_eq!(
        (c.tls.mode, c.pipeline_size, c.host.as_str()),
        (SslMode::VerifyFull, 3, "127.0.0.1")
    );
    assert!(c.set("nope", "1").is_err());
    assert!(c.set("nope", "").is_err());
    assert!(c.set("spare_cpu_pct", "101").is_err(), "a share above 100%");
}

/// A documented default as the code would print it: `none` is a timeout that is off (`0`),
/// `true`/`false` are switches.
fn normal(doc: &str) -> String {
    match doc.trim().trim_matches('`') {
        "none" => "0".to_owned(),
        "empty" => String::new(),
        "true" => "on".to_owned(),
        "false" => "off".to_owned(),
        other => other.to_owned(),
    }
}

/// docs/CONNECTING.md's table of pgpipe's options and README's list of them name every option
/// with the code's default; neither can drift from `Config::default()`.
#[test]
fn documented_defaults_of_pgpipe_options_are_the_codes() {
    let base = Config::default();
    let connecting = include_str!("../../../../docs/CONNECTING.md");
    let readme = include_str!("../../../../README.md");
    // docs/ROUTING.md's table of the routing knobs: keyword, field, default (with its unit).
    let routing = include_str!("../../../../docs/ROUTING.md");
    let mut routed = 0;
    for row in routing.lines().filter(|l| l.starts_with("| `")) {
        let key = row.split('`').nth(1).expect("a keyword");
        if let Some(code) = base.pgpipe_option(key) {
            let default = row.split('|').nth(3).expect("a Default column");
            let value = default.split_whitespace().next().unwrap_or("");
            assert_eq!(normal(value), code, "docs/ROUTING.md's default of {key}");
            routed += 1;
        }
    }
    assert!(
        routed >= 7,
        "docs/ROUTING.md's table of routing knobs: {routed} rows"
    );
    for key in crate::config::pgpipe_keywords() {
        let code = base.pgpipe_option(key).expect("readable");
        let row = connecting
            .lines()
            .find(|l| l.starts_with(&format!("| `{key}` |")))
            .unwrap_or_else(|| panic!("docs/CONNECTING.md has no table row for {key}"));
        let default = row.split('|').nth(2).expect("a Default column");
        assert_eq!(
            normal(default),
            code,
            "docs/CONNECTING.md's default of {key}"
        );
        // README: "`key` (default" (a line break may come before the parenthesis); the
        // default runs up to `,`, `;` or `)`.
        let named = format!("`{key}`");
        let rest = readme
            .match_indices(&named)
            .find_map(|(at, _)| readme[at + named.len()..].trim_start().strip_prefix('('))
            .unwrap_or_else(|| panic!("README.md does not list {key} with its default"));
        let end = rest.find([',', ';', ')']).expect("a closed default");
        assert_eq!(normal(&rest[..end]), code, "README.md's default of {key}");
    }
}

#[test]
fn every_keyword_and_variable_is_documented() {
    let doc = include_str!("../../../../docs/CONNECTING.md");
    for k in KEYWORDS {
        assert!(
            doc.contains(&format!("`{}`", k.name)),
            "{} missing from docs/CONNECTING.md",
            k.name
        );
        if let Some(var) = k.env {
            assert!(
                doc.contains(&format!("`{var}`")),
                "{var} missing from docs/CONNECTING.md"
            );
        }
    }
}
