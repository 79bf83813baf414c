//! A streaming standby of a cluster, and its promotion.

use std::process::Command;

use super::Cluster;
use crate::process::run;
use crate::scratch::create_unique_dir;
use crate::{HarnessError, SUPERUSER};

impl Cluster {
    /// A streaming standby of this cluster (`pg_basebackup -R`, hot standby)
    /// in a directory and on a port of its own, started and answering
    /// queries. It has the primary's roles and data; without TLS.
    pub fn standby(&self) -> Result<Cluster, HarnessError> {
        let dir = create_unique_dir()?;
        let mut standby = Cluster {
            psql: self.psql.clone(),
            bin: self.bin.clone(),
            data: dir.join("data"),
            log: dir.join("server.log"),
            dir,
            port: 0,
            as_root: self.as_root,
            server: None,
            watchdog: None,
            cleaned: false,
            tls: None,
            expired_cert: false,
        };
        if standby.as_root {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:"]).arg(&standby.dir);
            run(chown)?;
        }
        let mut backup = standby.server_command("pg_basebackup");
        backup
            .arg("-D")
            .arg(&standby.data)
            .args(["-R", "-X", "stream", "--no-sync", "-c", "fast"])
            .args(["-h", "127.0.0.1", "-U", SUPERUSER, "-p"])
            .arg(self.port.to_string());
        run(backup)?;
        standby.launch()?;
        Ok(standby)
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    pub fn promote(&self) -> Result<(), HarnessError> {
        self.psql("SELECT pg_catalog.pg_promote(true, 60)")
            .map(drop)
    }

    /// Whether the server is in hot standby (`pg_is_in_recovery()`).
    pub fn is_standby(&self) -> Result<bool, HarnessError> {
        Ok(self.psql("SELECT pg_catalog.pg_is_in_recovery()")?.trim() == "t")
    }
}
