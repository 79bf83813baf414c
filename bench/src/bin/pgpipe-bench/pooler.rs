//! The PgBouncer of the PgBouncer scenarios: the tests' harness's, started by the benchmark in
//! front of its throwaway cluster (transaction mode, `default_pool_size` = [`PGBOUNCER_POOL`]),
//! or one named by [`URL_VAR`] in front of a given server.

use std::sync::{Arc, Mutex};

use pgpipe_tests::{PgBouncer, PoolMode};

use crate::engine::{ClientCount, PoolerCpu};
use crate::monitor::Monitor;
use crate::plan::PGBOUNCER_POOL;

/// Names a PgBouncer (transaction mode) in front of the server given by `--url` /
/// `DATABASE_URL`; without it, the PgBouncer scenarios are skipped against a given server.
pub const URL_VAR: &str = "PGPIPE_BENCH_PGBOUNCER_URL";

/// Where the PgBouncer scenarios connect.
pub struct Bouncer {
    /// The URL candidates use (user, password, database; host and port of PgBouncer).
    pub url: String,
    /// That URL parsed.
    pub base: pgpipe::Config,
    /// The benchmark's own PgBouncer (restarted between runs, asked for its clients); None
    /// for one named by [`URL_VAR`].
    own: Option<Arc<Mutex<PgBouncer>>>,
    /// A connection to its admin console (database `pgbouncer`), kept open so that counting
    /// clients costs one query, not a process; reopened after every restart.
    admin: Arc<Mutex<Option<Monitor>>>,
}

impl Bouncer {
    /// Starts the harness's PgBouncer in front of the throwaway cluster on `upstream`.
    pub fn start(upstream: u16) -> Result<Bouncer, String> {
        let b = PgBouncer::start(upstream, PoolMode::Transaction, PGBOUNCER_POOL)
            .map_err(|e| e.to_string())?;
        let url = b.url();
        let bouncer = Bouncer {
            base: pgpipe::Config::parse(&url).map_err(|e| e.to_string())?,
            url,
            own: Some(Arc::new(Mutex::new(b))),
            admin: Arc::new(Mutex::new(None)),
        };
        bouncer.connect_admin();
        Ok(bouncer)
    }

    /// (Re)opens the admin console connection of the benchmark's own PgBouncer; on failure
    /// client counts are left out (–) until the next try.
    fn connect_admin(&self) {
        if self.own.is_none() {
            return;
        }
        let url = format!(
            "postgres://{}@{}:{}/pgbouncer",
            self.base.user, self.base.host, self.base.port
        );
        let m = pgpipe::Config::parse(&url)
            .map_err(|e| e.to_string())
            .and_then(|c| Monitor::start(&c));
        if let Err(e) = &m {
            eprintln!("\npgpipe-bench: PgBouncer's admin console: {e}");
        }
        if let Ok(mut slot) = self.admin.lock() {
            *slot = m.ok();
        }
    }

    /// A PgBouncer someone else runs, by URL.
    pub fn external(url: String) -> Result<Bouncer, String> {
        Ok(Bouncer {
            base: pgpipe::Config::parse(&url).map_err(|e| format!("{URL_VAR}: {e}"))?,
            url,
            own: None,
            admin: Arc::new(Mutex::new(None)),
        })
    }

    /// Whether the benchmark started it (and can restart it and read its console).
    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }

    /// Counts the clients connected to the pooled database (admin console `SHOW CLIENTS`);
    /// None for a PgBouncer the benchmark did not start.
    pub fn client_count(&self) -> Option<ClientCount> {
        self.own.as_ref()?;
        let admin = self.admin.clone();
        Some(Arc::new(move || {
            let mut slot = admin.lock().ok()?;
            let rows = slot.as_ref()?.query_rows("SHOW CLIENTS");
            match rows {
                Ok(rows) => Some(count_clients(&rows.join("\n"))),
                Err(_) => {
                    *slot = None;
                    None
                }
            }
        }))
    }

    /// A reader of the benchmark's own PgBouncer's CPU time (user + system, from its pidfile
    /// and `/proc`); None for one it did not start.
    pub fn cpu_clock(&self) -> Option<PoolerCpu> {
        let own = self.own.clone()?;
        let pidfile = own.lock().ok()?.log_path().with_file_name("pgbouncer.pid");
        Some(Arc::new(move || {
            let pid = std::fs::read_to_string(&pidfile)
                .ok()?
                .trim()
                .parse()
                .ok()?;
            pgpipe_bench::sys::pid_cpu(pid)
        }))
    }

    /// Between runs: restarts the benchmark's own PgBouncer, so that every run starts with an
    /// empty pool (its server connections closed) and no client left over.
    pub fn reset(&self) -> Result<(), String> {
        let Some(b) = &self.own else {
            return Ok(());
        };
        // The console connection dies with the old process.
        if let Ok(mut slot) = self.admin.lock() {
            *slot = None;
        }
        b.lock()
            .map_err(|_| "PgBouncer lock poisoned".to_string())?
            .restart()
            .map_err(|e| e.to_string())?;
        self.connect_admin();
        Ok(())
    }
}

/// Client connections in `SHOW CLIENTS` rows (columns joined by `|`: `type|user|database|
/// state|...`, one row a line), the admin console's own (database `pgbouncer`) left out.
pub fn count_clients(show_clients: &str) -> i64 {
    show_clients
        .lines()
        .filter(|l| {
            let mut f = l.split('|');
            f.next().map(str::trim) == Some("C")
                && f.nth(1).map(str::trim).is_some_and(|db| db != "pgbouncer")
        })
        .count() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_clients_but_the_console() {
        let out = "\
C|postgres|postgres|active|127.0.0.1|40000|127.0.0.1|6432|2024-01-01 00:00:00 UTC|2024-01-01 00:00:00 UTC|0|0|0|0x1|0x2|0|
C|postgres|postgres|waiting|127.0.0.1|40002|127.0.0.1|6432|x|x|0|0|0|0x3||0|
C|postgres|pgbouncer|active|127.0.0.1|40004|127.0.0.1|6432|x|x|0|0|0|0x4||0|
garbage
|||
";
        assert_eq!(count_clients(out), 2);
        assert_eq!(count_clients(""), 0);
        assert_eq!(count_clients("C"), 0);
    }
}
