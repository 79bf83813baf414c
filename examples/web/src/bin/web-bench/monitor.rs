//! The monitor: the server's connections (and their backends' pids) read from
//! `pg_stat_activity` through a tokio-postgres connection of its own.

use std::time::{Duration, Instant};

/// Server connections and their CPU, read through a tokio-postgres connection of its own.
pub(crate) struct Monitor {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Monitor {
    /// Connects to `url` as `pgpipe-web-monitor`, on a current-thread tokio runtime of its own.
    pub(crate) fn connect(url: &str) -> Result<Monitor, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let client = rt.block_on(async {
            let mut cfg: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
            cfg.application_name("pgpipe-web-monitor");
            let (client, conn) = cfg
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("monitor connect: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<_, String>(client)
        })?;
        Ok(Monitor { rt, client })
    }

    /// Backend pids with this application_name.
    pub(crate) fn backends(&self, app: &str) -> Vec<i32> {
        self.rt
            .block_on(self.client.query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            ))
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default()
    }

    /// The first column of `sql`'s one row, as text; None if it fails.
    pub(crate) fn scalar(&self, sql: &str) -> Option<String> {
        self.rt
            .block_on(self.client.query_one(sql, &[]))
            .ok()
            .and_then(|r| r.try_get::<_, String>(0).ok())
    }

    /// Waits until no backend of `app` is left (the previous server's, after it was killed).
    pub(crate) fn wait_gone(&self, app: &str) {
        let until = Instant::now() + Duration::from_secs(10);
        while !self.backends(app).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
