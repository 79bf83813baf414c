//! The runner thread of a run: a fresh thread and single-threaded runtime (smol, tokio or
//! glommio) per run, the candidates' configurations from the job, the client connected, driven
//! and closed.

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::candidates::{DeadpoolDb, PgpipeDb, TpgConn, TpgDb};
use super::load::drive;
use super::{err, Job, LocalRt, Measurement};
use crate::plan::{Adapter, Kind};

// ---------------------------------------------------------------------------------------------
// Runtimes.

#[derive(Clone)]
struct TokioLocal;

impl LocalRt for TokioLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        drop(tokio::task::spawn_local(f));
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await
    }
}

#[derive(Clone)]
struct SmolLocal(Rc<async_executor::LocalExecutor<'static>>);

impl LocalRt for SmolLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        self.0.spawn(f).detach();
    }
    async fn sleep(&self, d: Duration) {
        async_io::Timer::after(d).await;
    }
}

#[derive(Clone)]
struct GlommioLocal;

impl LocalRt for GlommioLocal {
    fn spawn<F: Future<Output = ()> + 'static>(&self, f: F) {
        glommio::spawn_local(f).detach();
    }
    async fn sleep(&self, d: Duration) {
        glommio::timer::sleep(d).await
    }
}

// ---------------------------------------------------------------------------------------------
// Runner threads.

impl Job {
    fn pgpipe_config(&self) -> pgpipe::Config {
        let mut c = self.base.clone();
        c.host = self.host.clone();
        c.port = self.port;
        // Explicit either way: the default (`prefer`) would use TLS wherever the server offers it.
        if self.cand.tls {
            c.tls.mode = pgpipe::SslMode::VerifyFull;
            c.tls.root_cert = self.root_cert.clone().map(pgpipe::RootCert::File);
        } else {
            c.tls.mode = pgpipe::SslMode::Disable;
        }
        c.pipeline_size = self.cand.conns;
        c.application_name = Some(crate::monitor::APP_NAME.into());
        if self.unnamed {
            // Set explicitly; pgpipe would also detect the pooler on the first vanished
            // statement and switch by itself.
            c.named_statements = false;
        }
        if let Some(w) = self.cand.max_in_flight {
            c.max_in_flight = w;
        }

        if let Some(m) = self.cand.max_connections {
            c.max_connections = m;
        }
        if self.cand.no_fair {
            c.fair_lanes = false;
        }
        if self.cand.no_coalesce {
            c.sync_coalescing = false;
        }
        if self.cand.pipelined {
            c.pooler = pgpipe::Pooler::TransactionPipelined;
        }
        c
    }

    fn tpg_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.host)
            .port(self.port)
            .user(&self.base.user)
            .dbname(self.base.database())
            .application_name(crate::monitor::APP_NAME)
            // TLS must happen (`require`); the rustls configuration verifies chain and name.
            .ssl_mode(if self.cand.tls {
                tokio_postgres::config::SslMode::Require
            } else {
                tokio_postgres::config::SslMode::Disable
            });
        if let Some(p) = &self.base.password_for(&self.base.servers()[0]) {
            c.password(p);
        }
        c
    }

    /// tokio-postgres' TLS connector for a `-tls` candidate: rustls with the ring provider,
    /// the root certificate as the only trusted root (chain and host name verified, as
    /// pgpipe's `verify-full`). None for a plaintext candidate.
    fn tpg_tls(&self) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>, String> {
        if !self.cand.tls {
            return Ok(None);
        }
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let path = self
            .root_cert
            .as_ref()
            .ok_or("a TLS candidate needs a root certificate (--sslrootcert)")?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in
            CertificateDer::pem_file_iter(path).map_err(|e| format!("{}: {e}", path.display()))?
        {
            roots
                .add(cert.map_err(|e| format!("{}: {e}", path.display()))?)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        // The same provider as the client's (deprecated by rustls 0.23.48: no post-quantum
        // key exchange; see core/src/tls/mod.rs).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
    }
}

/// Runs `job` on a fresh thread and runtime; returns its measurement or why it failed.
pub fn run(job: Job) -> Result<Measurement, String> {
    // Bulk runs measure the heap: counted from before the runner thread exists, so that
    // everything its runtime and client allocate is in the figure.
    let bulk = job.workload.is_bulk();
    if bulk {
        pgpipe_bench::alloc::track(true);
    }
    let r = run_thread(job);
    if bulk {
        pgpipe_bench::alloc::track(false);
    }
    r
}

fn run_thread(job: Job) -> Result<Measurement, String> {
    let name = format!("run-{}", job.cand.name);
    let t = std::thread::Builder::new()
        .name(name)
        .spawn(move || match job.cand.kind {
            Kind::Pgpipe(Adapter::Smol) => run_smol(&job),
            Kind::Pgpipe(Adapter::Tokio) => run_tokio(&job, TokioClient::Pgpipe),
            Kind::Pgpipe(Adapter::Glommio) => run_glommio(&job),
            Kind::TokioPostgres => run_tokio(&job, TokioClient::TokioPostgres),
            Kind::Deadpool => run_tokio(&job, TokioClient::Deadpool),
            Kind::Pgbench => crate::engine::pgbench::run(&job),
        })
        .map_err(err)?;
    match t.join() {
        Ok(r) => r,
        Err(p) => Err(format!(
            "runner panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// How long a client may take to close after the run.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

async fn close_within<S: LocalRt, R: pgpipe::rt::Runtime>(rt: &S, c: &pgpipe::Client<R>) {
    futures_lite::future::or(c.close(), rt.sleep(CLOSE_LIMIT)).await
}

fn run_smol(job: &Job) -> Result<Measurement, String> {
    // One LocalExecutor runs the connection tasks and the benchmark's tasks alike, driven by
    // this thread's block_on (which also polls async-io's reactor): smol's single-thread setup.
    let local = Rc::new(async_executor::LocalExecutor::new());
    let rt = SmolLocal(local.clone());
    async_io::block_on(local.run(async {
        crate::engine::bulk::runtime_ready();
        let client = pgpipe::Client::connect(
            pgpipe_smol::SmolLocalRuntime::on(local.clone()),
            job.pgpipe_config(),
        )
        .await
        .map_err(err)?;
        let m = drive(PgpipeDb::new(&client, job), rt.clone(), job).await;
        close_within(&rt, &client).await;
        Ok(m)
    }))
}

fn run_glommio(job: &Job) -> Result<Measurement, String> {
    pgpipe_glommio::check_io_uring().map_err(err)?;
    let ex = glommio::LocalExecutorBuilder::default()
        .make()
        .map_err(err)?;
    ex.run(async {
        crate::engine::bulk::runtime_ready();
        let client = pgpipe_glommio::connect_with(job.pgpipe_config())
            .await
            .map_err(err)?;
        let m = drive(PgpipeDb::new(&client, job), GlommioLocal, job).await;
        close_within(&GlommioLocal, &client).await;
        Ok(m)
    })
}

enum TokioClient {
    Pgpipe,
    TokioPostgres,
    Deadpool,
}

fn run_tokio(job: &Job, which: TokioClient) -> Result<Measurement, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(err)?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        crate::engine::bulk::runtime_ready();
        match which {
            TokioClient::Pgpipe => {
                let client = pgpipe::Client::connect(
                    pgpipe_tokio::TokioRuntime::current(),
                    job.pgpipe_config(),
                )
                .await
                .map_err(err)?;
                let m = drive(PgpipeDb::new(&client, job), TokioLocal, job).await;
                close_within(&TokioLocal, &client).await;
                Ok(m)
            }
            TokioClient::TokioPostgres => {
                let cfg = job.tpg_config();
                let tls = job.tpg_tls()?;
                let mut conns = Vec::with_capacity(job.cand.conns);
                for _ in 0..job.cand.conns {
                    conns.push(TpgConn::connect(&cfg, tls.as_ref(), job.unnamed).await?);
                }
                let db = TpgDb {
                    conns: Rc::new(conns),
                    mine: 0,
                };
                Ok(drive(db, TokioLocal, job).await)
            }
            TokioClient::Deadpool => {
                let mgr_config = || deadpool_postgres::ManagerConfig {
                    recycling_method: deadpool_postgres::RecyclingMethod::Fast,
                };
                let mgr = match job.tpg_tls()? {
                    None => deadpool_postgres::Manager::from_config(
                        job.tpg_config(),
                        tokio_postgres::NoTls,
                        mgr_config(),
                    ),
                    Some(tls) => {
                        deadpool_postgres::Manager::from_config(job.tpg_config(), tls, mgr_config())
                    }
                };
                let pool = deadpool_postgres::Pool::builder(mgr)
                    .max_size(job.cand.conns)
                    .build()
                    .map_err(err)?;
                let m = drive(DeadpoolDb(pool.clone(), job.unnamed), TokioLocal, job).await;
                pool.close();
                Ok(m)
            }
        }
    })
}
