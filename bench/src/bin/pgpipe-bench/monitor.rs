//! A side connection to the server, straight to it (never through a delay proxy), on a thread of
//! its own: counts the candidates' backends, samples that count during a run's window, and
//! waits for them to go between runs.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `application_name` of every candidate connection, so the monitor can count them.
pub const APP_NAME: &str = "pgpipe-bench";

enum Req {
    /// Count the candidates' backends (`false`) or every client backend but the monitor's
    /// (`true`).
    Count(bool, mpsc::Sender<Result<i64, String>>),
    /// A simple-protocol query; every row's first column, or (`true`) all its columns joined
    /// by `|`.
    Query(String, bool, mpsc::Sender<Result<Vec<String>, String>>),
}

/// Handle to the monitor thread; cheap to clone, usable from any thread (calls block).
#[derive(Clone)]
pub struct Monitor {
    tx: tokio::sync::mpsc::UnboundedSender<Req>,
    /// Counts every client backend but the monitor's own and the benchmark's setup and monitor
    /// connections (`application_name` `pgpipe-bench-...`), not only the candidates' by name:
    /// behind PgBouncer a server connection carries whatever `application_name` its last
    /// client set, and child processes' backends are counted the same way.
    all_backends: bool,
}

impl Monitor {
    /// Connects to `cfg`'s server and starts the monitor thread.
    pub fn start(cfg: &pgpipe::Config) -> Result<Monitor, String> {
        let mut pg = tokio_postgres::Config::new();
        pg.host(&cfg.host)
            .port(cfg.port)
            .user(&cfg.user)
            .dbname(cfg.database())
            .application_name("pgpipe-bench-monitor");
        if let Some(p) = &cfg.password_for(&cfg.servers()[0]) {
            pg.password(p);
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Req>();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("monitor".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                rt.block_on(async move {
                    let client = match pg.connect(tokio_postgres::NoTls).await {
                        Ok((client, conn)) => {
                            tokio::spawn(async move {
                                let _ = conn.await;
                            });
                            let _ = ready_tx.send(Ok(()));
                            client
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(format!("monitor connection: {e}")));
                            return;
                        }
                    };
                    let count = "SELECT count(*) FROM pg_stat_activity \
                                 WHERE application_name = $1 AND backend_type = 'client backend'";
                    let count_all = "SELECT count(*) FROM pg_stat_activity \
                                     WHERE backend_type = 'client backend' \
                                     AND pid <> pg_backend_pid() \
                                     AND coalesce(application_name, '') NOT LIKE 'pgpipe-bench-%'";
                    while let Some(req) = rx.recv().await {
                        match req {
                            Req::Count(all, reply) => {
                                let r = if all {
                                    client.query_one(count_all, &[]).await
                                } else {
                                    client.query_one(count, &[&APP_NAME]).await
                                };
                                let r =
                                    r.map(|row| row.get::<_, i64>(0)).map_err(|e| e.to_string());
                                let _ = reply.send(r);
                            }
                            Req::Query(sql, all_columns, reply) => {
                                let r = client
                                    .simple_query(&sql)
                                    .await
                                    .map(|msgs| {
                                        msgs.into_iter()
                                            .filter_map(|m| match m {
                                                tokio_postgres::SimpleQueryMessage::Row(r) => {
                                                    let n = if all_columns { r.len() } else { 1 };
                                                    let cols: Vec<&str> = (0..n)
                                                        .map(|i| r.get(i).unwrap_or(""))
                                                        .collect();
                                                    Some(cols.join("|"))
                                                }
                                                _ => None,
                                            })
                                            .collect()
                                    })
                                    .map_err(|e| e.to_string());
                                let _ = reply.send(r);
                            }
                        }
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        ready_rx
            .recv()
            .map_err(|_| "monitor thread died".to_string())??;
        Ok(Monitor {
            tx,
            all_backends: false,
        })
    }

    /// A monitor with no connection (a child process of a many-process run, whose parent
    /// counts): counts are -1 (unknown), queries fail.
    pub fn none() -> Monitor {
        let (tx, _) = tokio::sync::mpsc::unbounded_channel::<Req>();
        Monitor {
            tx,
            all_backends: false,
        }
    }

    /// The same monitor counting every client backend but its own (see `all_backends`).
    pub fn all_backends(&self) -> Monitor {
        Monitor {
            tx: self.tx.clone(),
            all_backends: true,
        }
    }

    /// Client backends opened by the candidates right now; -1 if the monitor failed.
    pub fn connections(&self) -> i64 {
        let (tx, rx) = mpsc::channel();
        if self.tx.send(Req::Count(self.all_backends, tx)).is_err() {
            return -1;
        }
        rx.recv().ok().and_then(|r| r.ok()).unwrap_or(-1)
    }

    /// The first column of every row `sql` returns (simple protocol).
    pub fn query(&self, sql: &str) -> Result<Vec<String>, String> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Req::Query(sql.into(), false, tx))
            .map_err(|_| "monitor gone".to_string())?;
        rx.recv().map_err(|_| "monitor gone".to_string())?
    }

    /// Every row `sql` returns, its columns joined by `|` (simple protocol; also what
    /// PgBouncer's admin console speaks).
    pub fn query_rows(&self, sql: &str) -> Result<Vec<String>, String> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Req::Query(sql.into(), true, tx))
            .map_err(|_| "monitor gone".to_string())?;
        rx.recv().map_err(|_| "monitor gone".to_string())?
    }

    /// A connection sampler for one run: a plain thread, so the run's own thread never waits
    /// for the server; it counts the candidate's backends every `every` between
    /// [`ConnSampler::start`] and [`ConnSampler::stop`].
    pub fn sampler(&self, every: Duration) -> ConnSampler {
        let (tx, rx) = mpsc::channel::<()>();
        let monitor = self.clone();
        let thread = std::thread::Builder::new()
            .name("conn-sampler".into())
            .spawn(move || {
                let mut counts = Vec::new();
                // Wait for the window (or for the sampler to be dropped unstarted).
                if rx.recv().is_err() {
                    return counts;
                }
                loop {
                    let t = Instant::now();
                    let n = monitor.connections();
                    if n >= 0 {
                        counts.push(n);
                    }
                    match rx.recv_timeout(every.saturating_sub(t.elapsed())) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        // Stopped, or the handle is gone.
                        _ => return counts,
                    }
                }
            })
            .ok();
        ConnSampler {
            tx: Some(tx),
            thread,
        }
    }

    /// Waits until no candidate backend is left (they exit asynchronously after a client
    /// closes), so one run's teardown does not overlap the next run's window.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let t = Instant::now();
        loop {
            if self.connections() <= 0 {
                return true;
            }
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Mean and maximum of the sampled backend counts of one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnStats {
    /// Mean count; None if no sample succeeded.
    pub avg: Option<f64>,
    /// Largest count; None if no sample succeeded.
    pub max: Option<i64>,
    /// Successful samples.
    pub samples: u64,
}

impl ConnStats {
    fn of(counts: &[i64]) -> ConnStats {
        if counts.is_empty() {
            return ConnStats::default();
        }
        ConnStats {
            avg: Some(counts.iter().sum::<i64>() as f64 / counts.len() as f64),
            max: counts.iter().copied().max(),
            samples: counts.len() as u64,
        }
    }
}

/// A run's connection sampler (see [`Monitor::sampler`]). Dropping it unfinished lets its
/// thread end by itself.
pub struct ConnSampler {
    tx: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Vec<i64>>>,
}

impl ConnSampler {
    /// Starts sampling: the first sample at once, then one every period. Does not block.
    pub fn start(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(());
        }
    }

    /// Stops sampling (at the latest after a sample in progress). Does not block.
    pub fn stop(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(());
        }
    }

    /// Waits for the sampler thread and summarizes its samples (empty if it never started or
    /// could not be spawned). Call after `stop`, off the measured window: it may block for one
    /// monitor query.
    pub fn finish(mut self) -> ConnStats {
        self.tx = None;
        let counts = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        ConnStats::of(&counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_stats() {
        let s = ConnStats::of(&[4, 6, 5, 9]);
        assert_eq!((s.avg, s.max, s.samples), (Some(6.0), Some(9), 4));
        let e = ConnStats::of(&[]);
        assert_eq!((e.avg, e.max, e.samples), (None, None, 0));
    }
}
