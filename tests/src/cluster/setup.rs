//! What a fresh cluster is made of: initdb, the harness's pg_hba.conf, the TLS material and
//! the login roles of each password method.

use std::fs;
use std::process::Command;

use super::Cluster;
use crate::process::run;
use crate::quoting::{sql_ident, sql_literal};
use crate::{
    HarnessError, TlsMaterial, AUTH_ROLES, CERT_USER, NOSSL_USER, SUPERUSER, TLS_SCRAM_PASSWORD,
    TLS_SCRAM_USER,
};

/// The `pg_hba.conf` written into every cluster (replacing initdb's); a TLS
/// cluster gets [`PG_HBA_TLS`] before the last line.
const PG_HBA: &str = "\
local all all trust
local replication all trust
host replication all 127.0.0.1/32 trust
host all pgpipe_md5 127.0.0.1/32 md5
host all pgpipe_scram 127.0.0.1/32 scram-sha-256
host all pgpipe_clear 127.0.0.1/32 password
host all all 127.0.0.1/32 trust
";

/// The rules of the TLS roles. They come before the final `trust` line,
/// which would otherwise let them in any way.
const PG_HBA_TLS: &str = "\
hostssl all pgpipe_tls_scram 127.0.0.1/32 scram-sha-256
hostnossl all pgpipe_tls_scram 127.0.0.1/32 reject
hostssl all pgpipe_cert 127.0.0.1/32 cert
hostnossl all pgpipe_cert 127.0.0.1/32 reject
hostnossl all pgpipe_nossl 127.0.0.1/32 trust
hostssl all pgpipe_nossl 127.0.0.1/32 reject
";

impl Cluster {
    /// Runs initdb and installs the harness's pg_hba.conf.
    pub(super) fn init(&mut self) -> Result<(), HarnessError> {
        if self.as_root {
            let mut chown = Command::new("chown");
            // `postgres:` is the postgres user and its login group.
            chown.args(["-R", "postgres:"]).arg(&self.dir);
            run(chown)?;
        }
        let mut initdb = self.server_command("initdb");
        initdb
            .arg("-D")
            .arg(&self.data)
            .args(["-A", "trust", "-U", SUPERUSER, "--no-sync"])
            .args(["-E", "UTF8", "--locale=C"]);
        run(initdb)?;
        self.write_hba()
    }

    /// Installs the harness's pg_hba.conf, with the TLS rules on a TLS
    /// cluster.
    fn write_hba(&self) -> Result<(), HarnessError> {
        let mut text = PG_HBA.to_owned();
        if self.tls.is_some() {
            // Before the last line, the catch-all `trust`.
            let last = text.trim_end().rfind('\n').map_or(0, |i| i + 1);
            text.insert_str(last, PG_HBA_TLS);
        }
        // Overwriting keeps the owner initdb gave the file.
        let hba = self.data.join("pg_hba.conf");
        fs::write(&hba, text).map_err(|e| HarnessError::io(format!("writing {}", hba.display()), e))
    }

    /// Generates the certificates into `dir/tls`, gives the server keys to
    /// the user running the server (it refuses keys that others can read or
    /// that belong to someone else) and adds the TLS rules to pg_hba.conf.
    pub(super) fn setup_tls(&mut self) -> Result<(), HarnessError> {
        let dir = self.dir.join("tls");
        fs::create_dir(&dir)
            .map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
        let tls = TlsMaterial::generate(&dir)?;
        if self.as_root {
            let mut chown = Command::new("chown");
            chown.arg("postgres:").args(tls.server_keys());
            run(chown)?;
        }
        self.tls = Some(tls);
        self.write_hba()
    }

    /// Creates the password roles, and the TLS roles on a TLS cluster.
    pub(super) fn create_auth_roles(&self) -> Result<(), HarnessError> {
        let mut script = String::new();
        let tls_roles = [(TLS_SCRAM_USER, TLS_SCRAM_PASSWORD, "scram-sha-256")];
        let tls_roles = if self.tls.is_some() {
            &tls_roles[..]
        } else {
            &[]
        };
        for (user, password, encryption) in AUTH_ROLES.iter().chain(tls_roles) {
            script.push_str(&format!(
                "SET password_encryption = {};\nCREATE ROLE {} LOGIN PASSWORD {};\n",
                sql_literal(encryption),
                sql_ident(user),
                sql_literal(password)
            ));
        }
        if self.tls.is_some() {
            for user in [CERT_USER, NOSSL_USER] {
                script.push_str(&format!("CREATE ROLE {} LOGIN;\n", sql_ident(user)));
            }
        }
        self.psql(&script).map(drop)
    }
}
