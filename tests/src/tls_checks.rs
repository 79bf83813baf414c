//! The TLS material at work: the shared cluster's TLS URLs and `pg_hba.conf` rules, checked
//! through libpq (verify-full, client certificates, the expired certificate). Apart from
//! `tls.rs`, which the cluster uses to make its material: these checks use the cluster.

#[cfg(test)]
mod tests {
    use crate::quoting::conninfo_quote;
    use crate::{
        libpq_connects, psql_with, shared, Cluster, CERT_USER, NOSSL_USER, SCRAM_PASSWORD,
        SCRAM_USER, TLS_SCRAM_PASSWORD, TLS_SCRAM_USER,
    };
    use std::path::Path;
    use std::time::Instant;

    const SSL_IN_USE: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

    /// The shared TLS cluster, or `None` (saying why) for an external one.
    fn cluster(test: &str) -> Option<&'static Cluster> {
        let db = shared();
        db.tls_or_skip(test)?;
        db.local()
    }

    /// A keyword/value connection string for `user` on `host`.
    fn conninfo(cluster: &Cluster, host: &str, user: &str, extra: &str) -> String {
        format!(
            "host={} port={} dbname=postgres user={} {extra}",
            conninfo_quote(host),
            cluster.port(),
            conninfo_quote(user)
        )
    }

    fn quote(path: &Path) -> String {
        conninfo_quote(&path.to_string_lossy())
    }

    /// Whether the connection made with `conninfo` uses TLS.
    fn ssl_in_use(conninfo: &str) -> bool {
        match psql_with(conninfo, SSL_IN_USE) {
            Ok(out) => out.trim() == "t",
            Err(e) => panic!("{conninfo}: {e}"),
        }
    }

    /// Asserts that libpq refuses `conninfo` with a message containing
    /// `needle`.
    fn refused(conninfo: &str, needle: &str) {
        match libpq_connects(conninfo) {
            Ok(()) => panic!("{conninfo}: connected, expected a failure ({needle})"),
            Err(e) => assert!(e.contains(needle), "{conninfo}: {e}\nexpected: {needle}"),
        }
    }

    #[test]
    fn shared_cluster_urls_are_plaintext_by_default_and_verified_tls() {
        let Some(c) = cluster("shared_cluster_urls_are_plaintext_by_default_and_verified_tls")
        else {
            return;
        };
        let db = shared();
        let tls = db.tls().unwrap();
        assert!(db.url().ends_with("?sslmode=disable"), "{}", db.url());
        assert!(!ssl_in_use(&db.url()));
        assert!(!ssl_in_use(&db.url_for(SCRAM_USER, SCRAM_PASSWORD)));

        let url = db.tls_url().unwrap();
        let ca = percent_encoded(tls.ca_cert());
        assert_eq!(
            url,
            format!(
                "postgres://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={ca}",
                c.port()
            )
        );
        assert!(ssl_in_use(&url));
        assert!(ssl_in_use(
            &db.tls_url_for(SCRAM_USER, SCRAM_PASSWORD).unwrap()
        ));
        assert_eq!(db.socket_dir(), Some(c.dir()));
        let rules = db
            .psql("select count(*), count(error) from pg_hba_file_rules")
            .unwrap();
        assert_eq!(rules.trim(), "13|0");
    }

    fn percent_encoded(path: &Path) -> String {
        let text = crate::quoting::percent_encode(&path.to_string_lossy());
        assert!(text.starts_with("%2F") && !text.contains('/'), "{text}");
        text
    }

    #[test]
    fn verify_full_checks_the_ca_and_the_host_name() {
        let Some(c) = cluster("verify_full_checks_the_ca_and_the_host_name") else {
            return;
        };
        let tls = c.tls().unwrap();
        let ca = format!("sslrootcert={}", quote(tls.ca_cert()));
        let other = format!("sslrootcert={}", quote(tls.other_ca_cert()));
        let full = |host: &str, extra: &str| {
            conninfo(c, host, "postgres", &format!("sslmode=verify-full {extra}"))
        };

        assert!(ssl_in_use(&full("localhost", &ca)));
        assert!(ssl_in_use(&full("127.0.0.1", &ca)));
        refused(&full("localhost", &other), "certificate verify failed");
        // A name the certificate does not carry, at the right address.
        let wrong_name = format!("{ca} hostaddr=127.0.0.1");
        refused(
            &full("wrong.example", &wrong_name),
            "does not match host name \"wrong.example\"",
        );
        // verify-ca checks the chain only.
        let verify_ca = conninfo(c, "wrong.example", "postgres", "sslmode=verify-ca");
        assert!(ssl_in_use(&format!("{verify_ca} {wrong_name}")));
        refused(
            &format!("{verify_ca} hostaddr=127.0.0.1 {other}"),
            "certificate verify failed",
        );
    }

    #[test]
    fn cert_role_needs_the_client_certificate() {
        let Some(c) = cluster("cert_role_needs_the_client_certificate") else {
            return;
        };
        let tls = c.tls().unwrap();
        let base = conninfo(c, "localhost", CERT_USER, "sslmode=require");
        let with_cert = format!(
            "{base} sslcert={} sslkey={}",
            quote(tls.client_cert()),
            quote(tls.client_key())
        );
        let who = psql_with(&with_cert, "SELECT current_user").unwrap();
        assert_eq!(who.trim(), CERT_USER);
        refused(&base, "connection requires a valid client certificate");
        let plain = conninfo(c, "localhost", CERT_USER, "sslmode=disable");
        refused(&plain, "no encryption");
    }

    #[test]
    fn tls_scram_role_needs_tls_and_binds_the_channel() {
        let Some(c) = cluster("tls_scram_role_needs_tls_and_binds_the_channel") else {
            return;
        };
        let pw = format!("password={}", conninfo_quote(TLS_SCRAM_PASSWORD));
        let user = |mode: &str| conninfo(c, "localhost", TLS_SCRAM_USER, &format!("{pw} {mode}"));
        refused(&user("sslmode=disable"), "no encryption");
        assert!(ssl_in_use(&user("sslmode=require")));
        assert!(ssl_in_use(&user("sslmode=require channel_binding=require")));
        // allow starts in plaintext and retries with TLS when refused.
        assert!(ssl_in_use(&user("sslmode=allow")));

        // Channel binding cannot be had without TLS.
        let scram = format!("password={}", conninfo_quote(SCRAM_PASSWORD));
        let plain = conninfo(c, "localhost", SCRAM_USER, &scram);
        refused(
            &format!("{plain} sslmode=disable channel_binding=require"),
            "channel binding required",
        );
        assert!(!ssl_in_use(&format!("{plain} sslmode=disable")));
    }

    #[test]
    fn nossl_role_falls_back_to_plaintext() {
        let Some(c) = cluster("nossl_role_falls_back_to_plaintext") else {
            return;
        };
        let user = |mode: &str| conninfo(c, "localhost", NOSSL_USER, mode);
        assert!(!ssl_in_use(&user("sslmode=prefer")));
        assert!(!ssl_in_use(&user("sslmode=allow")));
        assert!(!ssl_in_use(&user("sslmode=disable")));
        refused(&user("sslmode=require"), "SSL encryption");
    }

    #[test]
    fn unix_socket_connects() {
        let Some(c) = cluster("unix_socket_connects") else {
            return;
        };
        let dir = shared().socket_dir().unwrap();
        let socket = conninfo(c, &dir.to_string_lossy(), "postgres", "");
        let out = psql_with(&socket, "SELECT inet_server_addr() IS NULL").unwrap();
        assert_eq!(out.trim(), "t");
        // libpq never uses TLS on a unix socket, and `require` accepts that.
        assert!(!ssl_in_use(&format!("{socket} sslmode=require")));
        // Every role is trusted on the socket.
        let scram = conninfo(c, &dir.to_string_lossy(), TLS_SCRAM_USER, "");
        assert_eq!(psql_with(&scram, "SELECT 1").unwrap().trim(), "1");
    }

    #[test]
    fn expired_server_certificate_fails_verification() {
        let started = Instant::now();
        let c = Cluster::builder()
            .expired_server_cert(true)
            .start()
            .unwrap();
        eprintln!(
            "expired-certificate cluster started in {:?}",
            started.elapsed()
        );
        let tls = c.tls().unwrap();
        let ca = format!("sslrootcert={}", quote(tls.ca_cert()));
        for mode in ["verify-ca", "verify-full"] {
            let info = conninfo(&c, "localhost", "postgres", &format!("sslmode={mode} {ca}"));
            refused(&info, "certificate verify failed");
        }
        // libpq does not say why; the alert it sends to the server does.
        let log = c.log_tail();
        assert!(log.contains("certificate expired"), "server log:\n{log}");
        // Without verification the same server is reachable over TLS.
        assert!(ssl_in_use(&conninfo(
            &c,
            "localhost",
            "postgres",
            "sslmode=require"
        )));
    }
}
