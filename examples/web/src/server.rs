//! The four variants as HTTP servers on 127.0.0.1, started on threads of the calling process
//! ([`start`]) or for good ([`serve_forever`], the `serve` subcommand of the binaries).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use glommio::{CpuSet, LocalExecutorPoolBuilder, PoolPlacement};
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};

use crate::app::{self, Db, Endpoint, Reply};
use crate::db::PgShared;
use crate::glommio_io::HyperIo;

/// Which stack serves the endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One glommio executor and one pgpipe client per core, each with its own SO_REUSEPORT
    /// listener; hyper 1.x HTTP/1 on glommio sockets. Nothing shared across cores.
    PgpipeGlommio,
    /// One pgpipe client on a multi-threaded tokio runtime, axum.
    PgpipeTokio,
    /// axum with a deadpool-postgres pool; a request holds one pooled connection.
    Deadpool,
    /// axum with a few tokio-postgres clients, requests round-robin over them.
    TokioPostgres,
}

impl Variant {
    /// Every variant, in the benchmark's order.
    pub const ALL: [Variant; 4] = [
        Variant::PgpipeGlommio,
        Variant::PgpipeTokio,
        Variant::Deadpool,
        Variant::TokioPostgres,
    ];

    /// The variant's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::PgpipeGlommio => "pgpipe-glommio",
            Variant::PgpipeTokio => "pgpipe-tokio-axum",
            Variant::Deadpool => "axum-deadpool",
            Variant::TokioPostgres => "axum-tokio-postgres",
        }
    }

    /// Server connections the variant opens by default on `threads` cores: pgpipe on glommio
    /// 2 per core (its `pipeline_size` per executor), pgpipe on tokio 4 (pgpipe's default
    /// `pipeline_size`), deadpool 16 (a classic pool's size, the main benchmark's
    /// `deadpool-16`), tokio-postgres 2 per core.
    pub fn default_connections(self, threads: usize) -> usize {
        match self {
            Variant::PgpipeGlommio => 2,
            Variant::PgpipeTokio => 4,
            Variant::Deadpool => 16,
            Variant::TokioPostgres => 2 * threads,
        }
    }
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(s: &str) -> Result<Variant, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Variant::ALL.iter().map(|v| v.name()).collect();
                format!("unknown variant {s:?}; one of {}", names.join(", "))
            })
    }
}

/// How to run a variant.
#[derive(Clone, Debug)]
pub struct Options {
    /// The stack.
    pub variant: Variant,
    /// The database: a libpq URL or keyword/value string without pgpipe's own keys (the
    /// tokio-postgres variants parse it too).
    pub url: String,
    /// Where to listen; port 0 picks a free one.
    pub addr: SocketAddr,
    /// Cores: glommio executors, or tokio worker threads.
    pub threads: usize,
    /// pgpipe: `pipeline_size` (per executor on glommio); deadpool: `max_size`;
    /// tokio-postgres: clients.
    pub connections: usize,
    /// pgpipe's `max_connections` (per executor on glommio); `None`: pgpipe's default.
    pub max_connections: Option<usize>,
    /// `application_name` of every server connection, so they can be counted.
    pub application_name: String,
    /// glommio only: pin each executor to a CPU of its own (`MaxSpread`, the thread-per-core
    /// default) or let the kernel place them (`Unbound`).
    pub pin: bool,
    /// glommio only: how long an executor with nothing to run polls its rings before it
    /// sleeps (glommio's `spin_before_park`; pinned executors only). `None`: it sleeps at once.
    pub spin_before_park: Option<Duration>,
    /// More pgpipe options for the pgpipe variants, `key=value&key=value`, applied on top of
    /// the URL's (none by default: pgpipe's defaults); `pipeline_size` and `max_connections`
    /// come from `connections` and `max_connections`.
    pub pgpipe_options: Option<String>,
    /// [`serve_forever`] returns once its standard input reaches end of file: a parent that
    /// holds the other end of a pipe takes the server with it when it dies, however it dies.
    pub exit_on_stdin_eof: bool,
}

impl Options {
    /// The defaults for `variant`: 127.0.0.1 on a free port, one thread per core.
    pub fn new(variant: Variant, url: &str) -> Options {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Options {
            variant,
            url: url.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads,
            connections: variant.default_connections(threads),
            max_connections: None,
            application_name: format!("pgpipe-web-{}", variant.name()),
            pin: true,
            spin_before_park: None,
            pgpipe_options: None,
            exit_on_stdin_eof: false,
        }
    }

    fn pgpipe_config(&self) -> Result<pgpipe::Config, String> {
        let url = match self.pgpipe_options.as_deref().filter(|o| !o.is_empty()) {
            None => self.url.clone(),
            Some(o) if self.url.contains("://") => {
                let sep = if self.url.contains('?') { '&' } else { '?' };
                format!("{}{sep}{o}", self.url)
            }
            Some(o) => format!("{} {}", self.url, o.replace('&', " ")),
        };
        let mut cfg = pgpipe::Config::parse(&url).map_err(|e| e.to_string())?;
        cfg.pipeline_size = self.connections.max(1);
        if let Some(k) = self.max_connections {
            cfg.max_connections = k;
        }
        cfg.application_name = Some(self.application_name.clone());
        Ok(cfg)
    }

    fn tokio_postgres_config(&self) -> Result<tokio_postgres::Config, String> {
        let mut cfg: tokio_postgres::Config = self.url.parse().map_err(|e| format!("{e}"))?;
        cfg.application_name(&self.application_name);
        Ok(cfg)
    }
}

/// Starts the server on threads of this process and returns its address once every thread
/// listens and has connected to the database. The threads run until the process exits.
pub fn start(opts: Options) -> Result<SocketAddr, String> {
    match opts.variant {
        Variant::PgpipeGlommio => start_glommio(opts),
        _ => start_tokio(opts),
    }
}

/// [`start`], then blocks for good (until the process is killed). Prints `listening on ADDR`
/// on stdout first, which is what `web-bench` waits for.
pub fn serve_forever(opts: Options) -> Result<(), String> {
    let exit_on_eof = opts.exit_on_stdin_eof;
    let addr = start(opts)?;
    println!("listening on {addr}");
    // The parent reads this line through a pipe: make sure it is not stuck in a buffer.
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    if exit_on_eof {
        // Returning ends the process, the server's threads with it.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        return Ok(());
    }
    loop {
        std::thread::park();
    }
}

fn reply_to_http(r: Reply) -> hyper::Response<Full<Bytes>> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(r.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    resp.headers_mut()
        .insert(SERVER, HeaderValue::from_static(app::SERVER_NAME));
    resp
}

// ---- pgpipe on glommio, thread-per-core ----

/// The port every executor binds (the first one's, when asked for port 0).
type PortSlot = Arc<(Mutex<Option<Result<u16, String>>>, Condvar)>;

fn start_glommio(opts: Options) -> Result<SocketAddr, String> {
    pgpipe_glommio::check_io_uring().map_err(|e| e.to_string())?;
    let cfg = opts.pgpipe_config()?;
    let shards = opts.threads.max(1);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<SocketAddr, String>>();
    let rank = Arc::new(AtomicUsize::new(0));
    let port: PortSlot = Arc::new((Mutex::new(None), Condvar::new()));
    let addr = opts.addr;
    let placement = if opts.pin {
        PoolPlacement::MaxSpread(shards, CpuSet::online().ok())
    } else {
        PoolPlacement::Unbound(shards)
    };
    let mut builder = LocalExecutorPoolBuilder::new(placement);
    if let Some(spin) = opts.spin_before_park {
        builder = builder.spin_before_park(spin);
    }
    let pool = builder
        .on_all_shards(move || {
            let (cfg, ready, rank, port) = (cfg.clone(), ready_tx.clone(), rank.clone(), port);
            async move {
                let me = rank.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = glommio_shard(cfg, addr, me, &port, &ready).await {
                    let _ = ready.send(Err(e));
                }
            }
        })
        .map_err(|e| format!("cannot build the glommio executors: {e}"))?;
    // Joining blocks until the executors end, which they do not: park that on a thread.
    std::thread::spawn(move || drop(pool.join_all()));
    let mut bound = None;
    for _ in 0..shards {
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(a)) => bound = Some(a),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("the glommio executors did not start in 30 s".into()),
        }
    }
    bound.ok_or_else(|| "no executor started".into())
}

/// One core: bind (SO_REUSEPORT, which glommio's `TcpListener::bind` sets), connect its own
/// pgpipe client, then accept and serve connections on this executor only.
async fn glommio_shard(
    cfg: pgpipe::Config,
    addr: SocketAddr,
    rank: usize,
    port: &PortSlot,
    ready: &mpsc::Sender<Result<SocketAddr, String>>,
) -> Result<(), String> {
    let listener = if rank == 0 {
        let bound = glommio::net::TcpListener::bind(addr)
            .and_then(|l| l.local_addr().map(|a| (l, a)))
            .map_err(|e| format!("bind {addr}: {e}"));
        let (lock, cv) = &**port;
        if let Ok(mut slot) = lock.lock() {
            *slot = Some(bound.as_ref().map(|(_, a)| a.port()).map_err(Clone::clone));
        }
        cv.notify_all();
        bound?.0
    } else {
        // Wait for the first executor's port (a blocking wait, before this executor has any
        // other work), so that every core binds the same one.
        let (lock, cv) = &**port;
        let mut slot = lock.lock().map_err(|e| e.to_string())?;
        while slot.is_none() {
            slot = cv.wait(slot).map_err(|e| e.to_string())?;
        }
        let p = slot.clone().unwrap_or(Err("no port".into()))?;
        drop(slot);
        let mine = SocketAddr::new(addr.ip(), p);
        glommio::net::TcpListener::bind(mine).map_err(|e| format!("bind {mine}: {e}"))?
    };
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let db = Rc::new(
        pgpipe_glommio::connect_with(cfg)
            .await
            .map_err(|e| format!("pgpipe connect: {e}"))?,
    );
    let _ = ready.send(Ok(local));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("pgpipe-web: accept: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let db = db.clone();
        glommio::spawn_local(async move {
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let db = db.clone();
                    async move {
                        let reply = match Endpoint::from_path(req.uri().path()) {
                            Some(ep) => app::handle(&*db, ep, req.uri().query()).await,
                            None => Reply::not_found(),
                        };
                        Ok::<_, Infallible>(reply_to_http(reply))
                    }
                });
            let mut http = hyper::server::conn::http1::Builder::new();
            // No hyper timer on glommio: no header read timeout either.
            http.header_read_timeout(None);
            // A client that goes away mid-request is routine under load; nothing to report.
            let _ = http.serve_connection(HyperIo::new(stream), svc).await;
        })
        .detach();
    }
}

// ---- the axum variants, on a multi-threaded tokio runtime ----

async fn axum_reply<D: Db>(
    db: &D,
    ep: Endpoint,
    query: Option<String>,
) -> axum::response::Response {
    let r = app::handle(db, ep, query.as_deref()).await;
    let (parts, body) = reply_to_http(r).into_parts();
    axum::response::Response::from_parts(parts, axum::body::Body::new(body))
}

async fn axum_db<D: Db>(State(db): State<Arc<D>>) -> axum::response::Response {
    axum_reply(&*db, Endpoint::Db, None).await
}

async fn axum_queries<D: Db>(
    State(db): State<Arc<D>>,
    RawQuery(q): RawQuery,
) -> axum::response::Response {
    axum_reply(&*db, Endpoint::Queries, q).await
}

async fn axum_updates<D: Db>(
    State(db): State<Arc<D>>,
    RawQuery(q): RawQuery,
) -> axum::response::Response {
    axum_reply(&*db, Endpoint::Updates, q).await
}

async fn axum_fortunes<D: Db>(State(db): State<Arc<D>>) -> axum::response::Response {
    axum_reply(&*db, Endpoint::Fortunes, None).await
}

/// The axum app for a concrete `Db` (a macro, not a generic function: axum needs `Send`
/// handler futures, which the compiler proves only for concrete types).
macro_rules! axum_app {
    ($ty:ty, $db:expr) => {
        Router::new()
            .route("/db", get(axum_db::<$ty>))
            .route("/queries", get(axum_queries::<$ty>))
            .route("/updates", get(axum_updates::<$ty>))
            .route("/fortunes", get(axum_fortunes::<$ty>))
            .with_state(Arc::new($db))
    };
}

fn start_tokio(opts: Options) -> Result<SocketAddr, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let (ready_tx, ready_rx) = mpsc::channel::<Result<SocketAddr, String>>();
    std::thread::spawn(move || {
        rt.block_on(async move {
            let served = async {
                let app = match opts.variant {
                    Variant::PgpipeTokio => {
                        let db = pgpipe_tokio::connect_with(opts.pgpipe_config()?)
                            .await
                            .map_err(|e| format!("pgpipe connect: {e}"))?;
                        axum_app!(pgpipe_tokio::Client, db)
                    }
                    Variant::Deadpool => {
                        let mgr = deadpool_postgres::Manager::from_config(
                            opts.tokio_postgres_config()?,
                            tokio_postgres::NoTls,
                            deadpool_postgres::ManagerConfig {
                                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
                            },
                        );
                        let pool = deadpool_postgres::Pool::builder(mgr)
                            .max_size(opts.connections.max(1))
                            .build()
                            .map_err(|e| format!("deadpool: {e}"))?;
                        // One checkout now, so that a bad URL fails at start, not per request.
                        drop(pool.get().await.map_err(|e| format!("deadpool: {e}"))?);
                        axum_app!(deadpool_postgres::Pool, pool)
                    }
                    Variant::TokioPostgres => {
                        let cfg = opts.tokio_postgres_config()?;
                        let db = PgShared::connect(&cfg, opts.connections)
                            .await
                            .map_err(|e| format!("tokio-postgres: {e}"))?;
                        axum_app!(PgShared, db)
                    }
                    Variant::PgpipeGlommio => return Err("not a tokio variant".to_string()),
                };
                let listener = tokio::net::TcpListener::bind(opts.addr)
                    .await
                    .map_err(|e| format!("bind {}: {e}", opts.addr))?;
                let local = listener.local_addr().map_err(|e| e.to_string())?;
                let _ = ready_tx.send(Ok(local));
                use axum::serve::ListenerExt as _;
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, app)
                    .await
                    .map_err(|e| format!("serve: {e}"))
            };
            if let Err(e) = served.await {
                let _ = ready_tx.send(Err(e));
            }
        })
    });
    match ready_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(r) => r,
        Err(_) => Err("the server did not start in 30 s".into()),
    }
}

/// Parses the `serve` subcommand's flags: `--variant NAME --url URL [--addr IP:PORT]
/// [--threads N] [--connections N] [--max-connections N] [--application-name NAME]
/// [--pgpipe-options k=v&k=v] [--unpinned] [--spin-before-park MICROSECONDS]
/// [--exit-on-stdin-eof]`.
/// Without `--url`, `DATABASE_URL`.
pub fn parse_serve_args(args: &[String]) -> Result<Options, String> {
    let mut variant = None;
    let mut url = std::env::var("DATABASE_URL").ok();
    let (mut addr, mut threads, mut connections, mut max_connections, mut app_name) =
        (None, None, None, None, None);
    let (mut pgpipe_options, mut pin, mut exit_on_stdin_eof) = (None, true, false);
    let mut spin = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag} needs a number, not {v:?}"))
        };
        match flag.as_str() {
            "--variant" => variant = Some(value()?.parse::<Variant>()?),
            "--url" => url = Some(value()?),
            "--addr" => {
                let v = value()?;
                addr = Some(
                    v.parse::<SocketAddr>()
                        .map_err(|e| format!("--addr {v}: {e}"))?,
                )
            }
            "--threads" => threads = Some(number(value()?)?),
            "--connections" => connections = Some(number(value()?)?),
            "--max-connections" => max_connections = Some(number(value()?)?),
            "--application-name" => app_name = Some(value()?),
            "--pgpipe-options" => pgpipe_options = Some(value()?),
            "--unpinned" => pin = false,
            "--spin-before-park" => spin = Some(Duration::from_micros(number(value()?)? as u64)),
            "--exit-on-stdin-eof" => exit_on_stdin_eof = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let variant = variant.ok_or("--variant is required")?;
    let url = url.ok_or("--url (or DATABASE_URL) is required")?;
    let mut opts = Options::new(variant, &url);
    if let Some(a) = addr {
        opts.addr = a;
    }
    if let Some(t) = threads {
        opts.threads = t;
        opts.connections = variant.default_connections(t);
    }
    if let Some(c) = connections {
        opts.connections = c;
    }
    opts.max_connections = max_connections.or(opts.max_connections);
    if let Some(n) = app_name {
        opts.application_name = n;
    }
    opts.pin = pin;
    opts.spin_before_park = spin;
    opts.exit_on_stdin_eof = exit_on_stdin_eof;
    if pgpipe_options.is_some() {
        opts.pgpipe_options = pgpipe_options;
    }
    Ok(opts)
}
