//! A side connection to the server, straight to it (never through a delay proxy), on a thread of
//! its own: counts the candidates' backends and waits for them to go between runs.

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `application_name` of every candidate connection, so the monitor can count them.
pub const APP_NAME: &str = "pgpipe-bench";

enum Req {
    Count(mpsc::Sender<Result<i64, String>>),
    Query(String, mpsc::Sender<Result<Vec<String>, String>>),
}

/// Handle to the monitor thread; cheap to clone, usable from any thread (calls block).
#[derive(Clone)]
pub struct Monitor {
    tx: tokio::sync::mpsc::UnboundedSender<Req>,
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
        if let Some(p) = &cfg.password {
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
                    while let Some(req) = rx.recv().await {
                        match req {
                            Req::Count(reply) => {
                                let r = client
                                    .query_one(count, &[&APP_NAME])
                                    .await
                                    .map(|row| row.get::<_, i64>(0))
                                    .map_err(|e| e.to_string());
                                let _ = reply.send(r);
                            }
                            Req::Query(sql, reply) => {
                                let r = client
                                    .simple_query(&sql)
                                    .await
                                    .map(|msgs| {
                                        msgs.into_iter()
                                            .filter_map(|m| match m {
                                                tokio_postgres::SimpleQueryMessage::Row(r) => {
                                                    Some(r.get(0).unwrap_or("").to_owned())
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
        Ok(Monitor { tx })
    }

    /// Client backends opened by the candidates right now; -1 if the monitor failed.
    pub fn connections(&self) -> i64 {
        let (tx, rx) = mpsc::channel();
        if self.tx.send(Req::Count(tx)).is_err() {
            return -1;
        }
        rx.recv().ok().and_then(|r| r.ok()).unwrap_or(-1)
    }

    /// The first column of every row `sql` returns (simple protocol).
    pub fn query(&self, sql: &str) -> Result<Vec<String>, String> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Req::Query(sql.into(), tx))
            .map_err(|_| "monitor gone".to_string())?;
        rx.recv().map_err(|_| "monitor gone".to_string())?
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
