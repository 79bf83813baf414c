//! What runs: candidates, workloads, load models, delays, and the default and quick plans.

use std::fmt;
use std::time::Duration;

/// pgpipe's runtime adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Adapter {
    Smol,
    Tokio,
    Glommio,
}

/// The client library of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Pgpipe(Adapter),
    TokioPostgres,
    Deadpool,
    /// PostgreSQL's own `pgbench` running the transactions workload's script (`N` clients):
    /// what the server does with the classic client of each connection.
    Pgbench,
}

/// One client configuration. Its name is its spec: `pgpipe-smol-4`, `pgpipe-tokio-4-w256`
/// (max_in_flight 256), `pgpipe-tokio-4-m4` (max_connections 4: no elasticity),
/// `pgpipe-tokio-4-nofair` (`Config::fair_lanes` off), `pgpipe-tokio-4-nocoalesce`
/// (`Config::sync_coalescing` off),
/// `tokio-postgres-2`, `deadpool-16`; `-tls` on any of them connects over TLS with the server
/// certificate verified (`pgpipe-tokio-4-tls`, `tokio-postgres-4-tls`, `deadpool-16-tls`);
/// without it a candidate is plaintext (`sslmode=disable`). A `#2` suffix enters the same
/// configuration again as a separate candidate (the A/A control).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// The spec as given (`pgpipe-tokio-4-w256#2`).
    pub name: String,
    /// The library (and runtime).
    pub kind: Kind,
    /// pipeline_size, connections, or pool size.
    pub conns: usize,
    /// pgpipe only (`-wM`): `Config::max_in_flight`; None = the library's default.
    pub max_in_flight: Option<usize>,
    /// pgpipe only (`-mK`): `Config::max_connections`, the upper bound of pipelined connections
    /// the service may open on demand; None = the library's default. At most `conns` disables
    /// elasticity.
    pub max_connections: Option<usize>,
    /// `-tls`: over TLS, verifying the server's certificate chain and name against the root
    /// certificate (pgpipe `sslmode=verify-full`, tokio-postgres and deadpool through
    /// tokio-postgres-rustls). Otherwise plaintext.
    pub tls: bool,
    /// pgpipe only (`-nofair`): `Config::fair_lanes` off (on by default).
    pub no_fair: bool,
    /// pgpipe only (`-nocoalesce`): `Config::sync_coalescing` off (on by default).
    pub no_coalesce: bool,
    /// pgpipe only (`-batch`): the transactions workload runs as an atomic batch on the
    /// shared path (`Client::batch`) instead of an interactive `transaction()`.
    pub batch: bool,
    /// 1, or the copy number of an A/A duplicate.
    pub copy: u32,
}

impl Candidate {
    /// Parses a candidate spec: `pgpipe-{smol,tokio,glommio}-N[-wM][-mK][-nofair]` (options in
    /// any order, each at most once), `tokio-postgres-N` or `deadpool-N`, each optionally
    /// with `-tls` among its options, optionally followed by `#K`.
    pub fn parse(spec: &str) -> Result<Candidate, String> {
        let bad = || {
            format!(
                "bad candidate {spec:?}: expected pgpipe-{{smol,tokio,glommio}}-N[-wM][-mK][-nofair][-nocoalesce][-batch][-tls], \
                 tokio-postgres-N[-tls], deadpool-N[-tls] or pgbench-N, optionally followed by #K"
            )
        };
        let (base, copy) = match spec.split_once('#') {
            Some((b, k)) => (b, k.parse::<u32>().map_err(|_| bad())?),
            None => (spec, 1),
        };
        let (kind, rest) = if let Some(r) = base.strip_prefix("pgpipe-smol-") {
            (Kind::Pgpipe(Adapter::Smol), r)
        } else if let Some(r) = base.strip_prefix("pgpipe-tokio-") {
            (Kind::Pgpipe(Adapter::Tokio), r)
        } else if let Some(r) = base.strip_prefix("pgpipe-glommio-") {
            (Kind::Pgpipe(Adapter::Glommio), r)
        } else if let Some(r) = base.strip_prefix("tokio-postgres-") {
            (Kind::TokioPostgres, r)
        } else if let Some(r) = base.strip_prefix("deadpool-") {
            (Kind::Deadpool, r)
        } else if let Some(r) = base.strip_prefix("pgbench-") {
            (Kind::Pgbench, r)
        } else {
            return Err(bad());
        };
        // `N`, then `-tls` (any kind) and pgpipe's options `-wM` / `-mK`, in any order, each at
        // most once.
        let mut parts = rest.split('-');
        let conns = parts
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(bad)?;
        let (mut window, mut max_conns, mut tls, mut no_fair) = (None, None, false, false);
        let (mut no_coalesce, mut batch) = (false, false);
        for opt in parts {
            if kind == Kind::Pgbench {
                return Err(bad());
            }
            if opt == "tls" {
                if tls {
                    return Err(bad());
                }
                tls = true;
                continue;
            }
            if !matches!(kind, Kind::Pgpipe(_)) {
                return Err(bad());
            }
            if opt == "nofair" {
                if no_fair {
                    return Err(bad());
                }
                no_fair = true;
                continue;
            }
            if opt == "nocoalesce" {
                if no_coalesce {
                    return Err(bad());
                }
                no_coalesce = true;
                continue;
            }
            if opt == "batch" {
                if batch {
                    return Err(bad());
                }
                batch = true;
                continue;
            }
            let slot = match opt.as_bytes().first() {
                Some(b'w') => &mut window,
                Some(b'm') => &mut max_conns,
                _ => return Err(bad()),
            };
            if slot.is_some() {
                return Err(bad());
            }
            *slot = Some(opt[1..].parse::<usize>().map_err(|_| bad())?);
        }
        if conns == 0 || copy == 0 || window == Some(0) || max_conns == Some(0) {
            return Err(bad());
        }
        Ok(Candidate {
            name: spec.to_owned(),
            kind,
            conns,
            max_in_flight: window,
            max_connections: max_conns,
            tls,
            no_fair,
            no_coalesce,
            batch,
            copy,
        })
    }

    /// The option suffixes in their canonical order: `-wM`, `-mK`, `-nofair`, `-nocoalesce`,
    /// `-tls`, then `#K`.
    fn suffix(&self) -> String {
        let mut s = String::new();
        if let Some(w) = self.max_in_flight {
            s.push_str(&format!("-w{w}"));
        }
        if let Some(m) = self.max_connections {
            s.push_str(&format!("-m{m}"));
        }
        if self.no_fair {
            s.push_str("-nofair");
        }
        if self.no_coalesce {
            s.push_str("-nocoalesce");
        }
        if self.batch {
            s.push_str("-batch");
        }
        if self.tls {
            s.push_str("-tls");
        }
        if self.copy > 1 {
            s.push_str(&format!("#{}", self.copy));
        }
        s
    }

    /// The library and runtime without the size, with the options: `pgpipe-smol`,
    /// `pgpipe-tokio-w256-m32`, `tokio-postgres`, `tokio-postgres-tls`, `deadpool`.
    pub fn family(&self) -> String {
        format!("{}{}", self.library(), self.suffix())
    }

    fn library(&self) -> &'static str {
        match self.kind {
            Kind::Pgpipe(Adapter::Smol) => "pgpipe-smol",
            Kind::Pgpipe(Adapter::Tokio) => "pgpipe-tokio",
            Kind::Pgpipe(Adapter::Glommio) => "pgpipe-glommio",
            Kind::TokioPostgres => "tokio-postgres",
            Kind::Deadpool => "deadpool",
            Kind::Pgbench => "pgbench",
        }
    }

    /// The same candidate with another size (for the pool-ceiling sweep); options are kept and
    /// the name is written in the canonical order.
    pub fn sized(&self, conns: usize) -> Candidate {
        Candidate {
            name: format!("{}-{conns}{}", self.library(), self.suffix()),
            conns,
            ..self.clone()
        }
    }

    /// Whether the candidate is a pgpipe client (any adapter).
    pub fn is_pgpipe(&self) -> bool {
        matches!(self.kind, Kind::Pgpipe(_))
    }
}

/// What each operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `SELECT abalance FROM accounts WHERE aid = $1`, random aid.
    Point,
    /// `SELECT aid, abalance FROM accounts WHERE aid = $1`, random aid, the returned aid
    /// checked against the one asked for (a wrong answer is an error): the point select of the
    /// PgBouncer scenarios, where a result handed to the wrong caller must not go unnoticed.
    PointId,
    /// `SELECT 1`.
    Select1,
    /// `UPDATE ... SET abalance = abalance + $1 WHERE aid = $2`, then the point select of it.
    ReadWrite,
    /// `SELECT pg_sleep(0.005)` (pool ceiling).
    Sleep,
    /// Head-of-line: 99% point selects, 1% `SELECT pg_sleep(0.02)`, drawn from each op's
    /// seeded generator; fast and slow ops' latencies are also recorded apart.
    Hol,
    /// `COPY ... FROM STDIN (FORMAT binary)` of generated (int8, text, float8) rows.
    CopyIn,
    /// `COPY ... TO STDOUT (FORMAT binary)` of such rows, every row decoded.
    CopyOut,
    /// The same rows as a streamed `SELECT` on an exclusive connection, every row decoded.
    Stream,
    /// A transaction per op: `BEGIN; UPDATE ... SET abalance = abalance + 1 WHERE aid = $1;
    /// SELECT abalance ... WHERE aid = $1; COMMIT`, random aid; every balance checked at the
    /// end against the transactions committed.
    Tx,
}

impl Workload {
    /// Parses a `--workloads` item.
    pub fn parse(s: &str) -> Result<Workload, String> {
        match s {
            "point" => Ok(Workload::Point),
            "point-id" => Ok(Workload::PointId),
            "select1" => Ok(Workload::Select1),
            "rw" => Ok(Workload::ReadWrite),
            "ceiling" | "sleep" => Ok(Workload::Sleep),
            "hol" => Ok(Workload::Hol),
            "copy-in" => Ok(Workload::CopyIn),
            "copy-out" => Ok(Workload::CopyOut),
            "stream" => Ok(Workload::Stream),
            "tx" => Ok(Workload::Tx),
            _ => Err(format!(
                "unknown workload {s:?} (point, point-id, select1, rw, ceiling, hol, copy-in, copy-out, stream, tx)"
            )),
        }
    }
    /// The name in scenario ids and `--workloads`.
    pub fn label(self) -> &'static str {
        match self {
            Workload::Point => "point",
            Workload::PointId => "point-id",
            Workload::Select1 => "select1",
            Workload::ReadWrite => "rw",
            Workload::Sleep => "ceiling",
            Workload::Hol => "hol",
            Workload::CopyIn => "copy-in",
            Workload::CopyOut => "copy-out",
            Workload::Stream => "stream",
            Workload::Tx => "tx",
        }
    }
    /// The bulk workloads (COPY and streaming): one run moves a fixed number of rows
    /// ([`Load::Rows`]) on one exclusive connection.
    pub fn is_bulk(self) -> bool {
        matches!(
            self,
            Workload::CopyIn | Workload::CopyOut | Workload::Stream
        )
    }
    /// Statements per op (a transaction's BEGIN and COMMIT not counted).
    pub fn statements(self) -> u32 {
        if matches!(self, Workload::ReadWrite | Workload::Tx) {
            2
        } else {
            1
        }
    }

    /// Whether candidate `c` runs this workload: the bulk ones need a client of their own
    /// connection (not deadpool), transactions need one that can hold a transaction
    /// (not the shared tokio-postgres connections), pgbench runs only transactions, and
    /// `-batch` means something only for them.
    pub fn runs(self, c: &Candidate) -> bool {
        match self {
            w if w.is_bulk() => c.kind != Kind::Deadpool && c.kind != Kind::Pgbench,
            Workload::Tx => c.kind != Kind::TokioPostgres,
            _ => c.kind != Kind::Pgbench && !c.batch,
        }
    }
}

/// How load is offered.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// `tasks` concurrent tasks, each issuing its next op when the last completes.
    Closed { tasks: usize },
    /// Arrivals at a fixed rate per second, latency from each scheduled time.
    Open { rate: f64 },
    /// A fixed batch of `queries` concurrent ops; the figure is the time to finish them all.
    Ceiling { queries: usize },
    /// Bulk workloads: `rows` rows moved by one caller; the figure is rows per second.
    Rows { rows: u64 },
}

impl Load {
    pub fn label(&self) -> String {
        match self {
            Load::Closed { tasks } => format!("closed-{tasks}"),
            Load::Open { rate } => format!("open-{}", *rate as u64),
            Load::Ceiling { queries } => format!("batch-{queries}"),
            Load::Rows { rows } => format!("rows-{rows}"),
        }
    }
}

/// Simulated one-way delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Delay {
    /// Straight to the server, no proxy.
    Direct,
    /// Through the delay proxy with this one-way delay (0 = the proxy's own cost).
    Proxy(Duration),
}

impl Delay {
    pub fn parse(s: &str) -> Result<Delay, String> {
        if s == "direct" {
            return Ok(Delay::Direct);
        }
        let ms: f64 = s
            .trim_end_matches("ms")
            .parse()
            .map_err(|_| format!("bad delay {s:?}: `direct` or milliseconds such as 0, 1, 5"))?;
        if !(0.0..=10_000.0).contains(&ms) {
            return Err(format!("bad delay {s:?}"));
        }
        Ok(Delay::Proxy(Duration::from_secs_f64(ms / 1000.0)))
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delay::Direct => f.write_str("direct"),
            Delay::Proxy(d) => {
                let ms = d.as_secs_f64() * 1000.0;
                if ms.fract() == 0.0 {
                    write!(f, "{}ms", ms as u64)
                } else {
                    write!(f, "{ms}ms")
                }
            }
        }
    }
}

/// Where the candidates connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// To the server (straight, or through the delay proxy).
    Server,
    /// Through PgBouncer in transaction mode with [`PGBOUNCER_POOL`] server connections
    /// (`default_pool_size`). Every candidate runs its statements without names there.
    PgBouncer,
}

/// PgBouncer's `default_pool_size` in the PgBouncer scenarios.
pub const PGBOUNCER_POOL: usize = 16;

/// A workload under a load model at a delay, with the candidates that run it.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Names a scenario of the default set that repeats another's workload, load and delay
    /// with other candidates (`tls`, `pgbouncer`, ...); it prefixes the id.
    pub tag: Option<&'static str>,
    pub workload: Workload,
    pub load: Load,
    pub delay: Delay,
    /// To the server, or through PgBouncer.
    pub via: Via,
    /// Client processes per run: 1 runs the candidate on a thread of the benchmark itself;
    /// more start that many child processes of the benchmark binary, each running the
    /// candidate with its share of the closed loop's tasks, at once, and add up their counts.
    pub procs: usize,
    pub candidates: Vec<Candidate>,
}

impl Scenario {
    /// `point-closed-1000-direct`, or with a tag `tls-point-closed-1000-direct`.
    pub fn id(&self) -> String {
        let base = format!(
            "{}-{}-{}",
            self.workload.label(),
            self.load.label(),
            self.delay
        );
        match self.tag {
            Some(t) => format!("{t}-{base}"),
            None => base,
        }
    }

    /// Whether `--scenarios` item `sel` names this scenario: its id, its tag, `copy` for
    /// every bulk scenario (COPY in and out, streaming), `pgbouncer` for every scenario
    /// through PgBouncer and every many-process one (the direct one is their baseline),
    /// `procs` for the many-process ones.
    pub fn selected_by(&self, sel: &str) -> bool {
        self.id() == sel
            || self.tag == Some(sel)
            || (sel == "copy" && self.workload.is_bulk())
            || (sel == "pgbouncer" && (self.via == Via::PgBouncer || self.procs > 1))
            || (sel == "procs" && self.procs > 1)
            || (sel == "transactions" && self.workload == Workload::Tx)
    }
}

fn cands(names: &[&str]) -> Vec<Candidate> {
    names
        .iter()
        .map(|n| Candidate::parse(n).expect("built-in candidate names parse"))
        .collect()
}

/// The A/A control: the configuration entered twice.
pub const AA: [&str; 2] = ["pgpipe-tokio-4", "pgpipe-tokio-4#2"];

/// Every candidate kind at its usual sizes, plus the A/A duplicate.
pub fn all_candidates() -> Vec<Candidate> {
    cands(&[
        "pgpipe-smol-1",
        "pgpipe-smol-2",
        "pgpipe-smol-4",
        "pgpipe-tokio-1",
        "pgpipe-tokio-2",
        AA[0],
        "pgpipe-glommio-1",
        "pgpipe-glommio-2",
        "pgpipe-glommio-4",
        "tokio-postgres-1",
        "tokio-postgres-2",
        "tokio-postgres-4",
        "deadpool-8",
        "deadpool-16",
        "deadpool-32",
        AA[1],
    ])
}

/// Families of the pool-ceiling sweep and its sizes (`--quick` adds tokio-postgres, trims sizes).
pub const CEILING_FAMILIES: [&str; 2] = ["pgpipe-tokio-1", "deadpool-1"];
pub const CEILING_SIZES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Each family at each size. pgpipe's sizes are fixed (`-mN`): the ceiling compares N
/// pipelined connections with a pool of N, so none may be opened on demand.
fn ceiling_candidates(families: &[Candidate], sizes: &[usize]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for f in families {
        for &n in sizes {
            let mut c = f.clone();
            if c.is_pgpipe() {
                c.max_connections = Some(n);
            }
            out.push(c.sized(n));
        }
    }
    out
}

/// Knobs of a plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settings {
    /// Rounds over all candidates.
    pub rounds: usize,
    /// Warm-up per run (connect excluded), all workloads but hol.
    pub warmup: Duration,
    /// Measured window per run, all workloads but hol.
    pub window: Duration,
    /// Warm-up of hol runs.
    pub hol_warmup: Duration,
    /// Measured window of hol runs: longer, because p99.99 of the fast queries needs samples.
    pub hol_window: Duration,
    /// Warm-up of transaction runs (every task's first checkout queues).
    pub tx_warmup: Duration,
    /// Measured window of transaction runs directly, and through the delay proxy: long enough
    /// that every one of 1,000 tasks completes several transactions (the fairness figure).
    pub tx_window: Duration,
    pub tx_delayed_window: Duration,
    /// Closed-loop concurrency.
    pub tasks: usize,
    /// Open-loop arrivals per second.
    pub rate: f64,
    /// Rows of the accounts table.
    pub rows: i32,
    /// Queries of the pool-ceiling batch.
    pub ceiling_queries: usize,
    /// Rows of each COPY and streaming run.
    pub copy_rows: u64,
}

#[cfg(test)]
impl Settings {
    /// The plan's shape with nothing to wait for: zero windows, one round, tiny tables.
    pub(crate) fn tiny() -> Settings {
        Settings {
            rounds: 1,
            warmup: Duration::ZERO,
            window: Duration::ZERO,
            hol_warmup: Duration::ZERO,
            hol_window: Duration::ZERO,
            tx_warmup: Duration::ZERO,
            tx_window: Duration::ZERO,
            tx_delayed_window: Duration::ZERO,
            tasks: 1000,
            rate: 100.0,
            rows: 10,
            ceiling_queries: 6,
            copy_rows: 100,
        }
    }
}

impl Settings {
    /// Warm-up and measured window of a run of `w` at `delay`.
    pub fn timing(&self, w: Workload, delay: Delay) -> (Duration, Duration) {
        match (w, delay) {
            (Workload::Hol, _) => (self.hol_warmup, self.hol_window),
            (Workload::Tx, Delay::Direct) => (self.tx_warmup, self.tx_window),
            (Workload::Tx, Delay::Proxy(_)) => (self.tx_warmup, self.tx_delayed_window),
            _ => (self.warmup, self.window),
        }
    }
}

/// The candidates of the default hol scenarios: tokio-postgres and deadpool at their usual
/// sizes, pgpipe elastic (defaults), pgpipe fixed at 4 connections (`-m4`: what elasticity
/// changes), another runtime, and the A/A duplicate.
pub const HOL_CANDIDATES: [&str; 9] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-m4",
    "pgpipe-smol-4",
    "tokio-postgres-1",
    "tokio-postgres-2",
    "tokio-postgres-4",
    "deadpool-16",
    "deadpool-32",
    "pgpipe-tokio-4#2",
];

/// The candidates of the default `tls` scenario (point selects, closed loop, direct): pgpipe
/// plaintext and over TLS on the same configuration, another runtime over TLS, tokio-postgres
/// over TLS on 1 and 4 connections and plaintext on 4 (its own TLS cost), and the A/A
/// duplicate of pgpipe over TLS.
pub const TLS_CANDIDATES: [&str; 7] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-tls",
    "pgpipe-glommio-4-tls",
    "tokio-postgres-1-tls",
    "tokio-postgres-4-tls",
    "tokio-postgres-4",
    "pgpipe-tokio-4-tls#2",
];

/// `--quick`'s `tls` scenario: a TLS candidate of every kind and runtime, the plaintext twin of
/// pgpipe's and an A/A duplicate, so that every ratio of the report is computed.
pub const TLS_QUICK_CANDIDATES: [&str; 7] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-tls",
    "pgpipe-smol-2-tls",
    "pgpipe-glommio-2-tls",
    "tokio-postgres-1-tls",
    "deadpool-8-tls",
    "pgpipe-tokio-2-tls#2",
];

/// The candidates of the bulk scenarios (COPY in and out, streaming): pgpipe on each runtime
/// (the bulk work runs on a session, an exclusive connection; `-1` keeps the shared path to one
/// idle connection), tokio-postgres on one connection, and the A/A duplicate.
pub const COPY_CANDIDATES: [&str; 5] = [
    "pgpipe-smol-1",
    "pgpipe-tokio-1",
    "pgpipe-glommio-1",
    "tokio-postgres-1",
    "pgpipe-tokio-1#2",
];

/// The candidates of the `pgbouncer` scenario (point selects through PgBouncer in transaction
/// mode, pool of 16): pgpipe on 4 pipelined connections (elastic as by default, and fixed at 4
/// with `-m4`), tokio-postgres and deadpool with one client connection per server connection
/// of PgBouncer's pool, deadpool with more clients than the pool (they queue inside
/// PgBouncer), and the A/A duplicate.
pub const PGBOUNCER_CANDIDATES: [&str; 6] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-m4",
    "tokio-postgres-16",
    "deadpool-16",
    "deadpool-64",
    "pgpipe-tokio-4#2",
];

/// `--quick`'s `pgbouncer` scenario: each kind once.
pub const PGBOUNCER_QUICK_CANDIDATES: [&str; 3] =
    ["pgpipe-tokio-2", "tokio-postgres-4", "deadpool-8"];

/// The candidates of the 8-process scenario straight to the server (each per process):
/// pgpipe on 2 pipelined connections (elastic as by default, and fixed with `-m2`), deadpool
/// with a pool of 16, the A/A duplicate.
pub const PROCS_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-m2",
    "deadpool-16",
    "pgpipe-tokio-2#2",
];

/// The same through PgBouncer, plus pgpipe fixed at its 2 connections (`-m2`, no elastic
/// ones) and deadpool with as many client connections as that.
pub const PROCS_PGBOUNCER_CANDIDATES: [&str; 5] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-m2",
    "deadpool-2",
    "deadpool-16",
    "pgpipe-tokio-2#2",
];

/// `--quick`'s many-process scenario (2 processes through PgBouncer).
pub const PROCS_QUICK_CANDIDATES: [&str; 2] = ["pgpipe-tokio-2", "deadpool-8"];

/// The candidates of the transaction scenarios (1,000 tasks, a transaction per op): pgpipe's
/// interactive transactions and its atomic batch on 4 pipelined connections (elastic as by
/// default), deadpool at 16 and 32, pgbench with the same script (the server's own rate with
/// a classic client per connection), and the A/A duplicate.
pub const TX_CANDIDATES: [&str; 6] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-batch",
    "deadpool-16",
    "deadpool-32",
    "pgbench-16",
    "pgpipe-tokio-4#2",
];

/// `--quick`'s transaction scenario: each kind once.
pub const TX_QUICK_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-batch",
    "deadpool-8",
    "pgbench-4",
];

/// The bulk scenarios: COPY in, COPY out, streamed read, direct, `copy_rows` rows each.
fn copy_scenarios(s: &Settings) -> Vec<Scenario> {
    [Workload::CopyIn, Workload::CopyOut, Workload::Stream]
        .into_iter()
        .map(|workload| Scenario {
            tag: None,
            workload,
            load: Load::Rows { rows: s.copy_rows },
            delay: Delay::Direct,
            via: Via::Server,
            procs: 1,
            candidates: cands(&COPY_CANDIDATES),
        })
        .collect()
}

/// The curated default plan (or `--quick`'s). Sized to finish in about five minutes on a
/// 2-core machine: every candidate kind on the headline scenario (point select, direct), each
/// family's usual best elsewhere.
pub fn default_plan(s: &Settings, quick: bool) -> Vec<Scenario> {
    let closed = Load::Closed { tasks: s.tasks };
    let ms = |n: u64| Delay::Proxy(Duration::from_millis(n));
    let sc = |workload, load, delay, candidates| Scenario {
        tag: None,
        workload,
        load,
        delay,
        via: Via::Server,
        procs: 1,
        candidates,
    };
    // Through PgBouncer (transaction mode, pool of PGBOUNCER_POOL), and many processes.
    let pooled = |tag, via, procs, names: &[&str]| Scenario {
        tag: Some(tag),
        via,
        procs,
        ..sc(Workload::PointId, closed, Delay::Direct, cands(names))
    };
    // TLS side by side: the headline's workload, load and delay, plaintext and TLS interleaved.
    let tls = |names: &[&str]| Scenario {
        tag: Some("tls"),
        ..sc(Workload::Point, closed, Delay::Direct, cands(names))
    };
    let ceiling = |families: &[&str], sizes: &[usize]| {
        sc(
            Workload::Sleep,
            Load::Ceiling {
                queries: s.ceiling_queries,
            },
            Delay::Direct,
            ceiling_candidates(&cands(families), sizes),
        )
    };
    if quick {
        let few = cands(&["pgpipe-smol-2", "tokio-postgres-1", "deadpool-8"]);
        let mut plan = vec![
            sc(Workload::Point, closed, Delay::Direct, all_candidates()),
            tls(&TLS_QUICK_CANDIDATES),
            sc(Workload::Point, closed, ms(1), few.clone()),
            sc(Workload::Select1, closed, Delay::Direct, few.clone()),
            sc(Workload::ReadWrite, closed, Delay::Direct, few.clone()),
            sc(Workload::Point, Load::Open { rate: s.rate }, ms(0), few),
            sc(
                Workload::Hol,
                Load::Open { rate: s.rate },
                Delay::Direct,
                cands(&["pgpipe-tokio-4", "tokio-postgres-4", "deadpool-16"]),
            ),
            ceiling(
                &["pgpipe-tokio-1", "tokio-postgres-1", "deadpool-1"],
                &[1, 4],
            ),
            pooled("pgbouncer", Via::PgBouncer, 1, &PGBOUNCER_QUICK_CANDIDATES),
            pooled(
                "pgbouncer-procs2",
                Via::PgBouncer,
                2,
                &PROCS_QUICK_CANDIDATES,
            ),
            sc(
                Workload::Tx,
                closed,
                Delay::Direct,
                cands(&TX_QUICK_CANDIDATES),
            ),
        ];
        plan.extend(copy_scenarios(s));
        return plan;
    }
    let best_of_each = cands(&[
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-glommio-4",
        "tokio-postgres-4",
        "deadpool-16",
    ]);
    // At 5 ms the default max_in_flight (64 per connection) caps a connection at 64 units per
    // round trip; the -w256 candidates show what a wider window does.
    let delayed = cands(&[
        "pgpipe-smol-1",
        "pgpipe-smol-2",
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-tokio-4-w256",
        "pgpipe-glommio-4-w256",
        "tokio-postgres-1",
        "tokio-postgres-4",
        "deadpool-8",
        "deadpool-16",
        "deadpool-32",
    ]);
    let latency = cands(&[
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-glommio-4",
        "tokio-postgres-1",
        "tokio-postgres-4",
        "deadpool-16",
        "deadpool-32",
    ]);
    let mut plan = vec![
        sc(Workload::Point, closed, Delay::Direct, all_candidates()),
        tls(&TLS_CANDIDATES),
        sc(
            Workload::Point,
            closed,
            ms(1),
            cands(&[
                "pgpipe-smol-4",
                "pgpipe-tokio-4",
                "pgpipe-glommio-4",
                "tokio-postgres-4",
                "deadpool-16",
                "deadpool-32",
            ]),
        ),
        sc(Workload::Point, closed, ms(5), delayed),
        sc(
            Workload::Select1,
            closed,
            Delay::Direct,
            best_of_each.clone(),
        ),
        sc(Workload::ReadWrite, closed, Delay::Direct, best_of_each),
        sc(
            Workload::Point,
            Load::Open { rate: s.rate },
            Delay::Direct,
            latency,
        ),
        sc(
            Workload::Hol,
            Load::Open { rate: s.rate },
            Delay::Direct,
            cands(&HOL_CANDIDATES),
        ),
        sc(Workload::Hol, closed, Delay::Direct, cands(&HOL_CANDIDATES)),
        ceiling(&CEILING_FAMILIES, &CEILING_SIZES),
        sc(Workload::Tx, closed, Delay::Direct, cands(&TX_CANDIDATES)),
        sc(Workload::Tx, closed, ms(5), cands(&TX_CANDIDATES)),
    ];
    plan.extend(copy_scenarios(s));
    plan.extend([
        pooled("pgbouncer", Via::PgBouncer, 1, &PGBOUNCER_CANDIDATES),
        pooled("procs8", Via::Server, 8, &PROCS_CANDIDATES),
        pooled(
            "pgbouncer-procs8",
            Via::PgBouncer,
            8,
            &PROCS_PGBOUNCER_CANDIDATES,
        ),
    ]);
    plan
}

/// The plan of explicit selections: every workload × load × delay asked for, each with
/// `candidates` (the ceiling workload sweeps the candidates' families over `CEILING_SIZES`; the
/// bulk workloads move `copy_rows` rows at each delay, whatever the loads, deadpool left out).
pub fn custom_plan(
    s: &Settings,
    workloads: &[Workload],
    loads: &[Load],
    delays: &[Delay],
    candidates: &[Candidate],
) -> Vec<Scenario> {
    let mut out = Vec::new();
    for &w in workloads {
        if w == Workload::Sleep {
            let mut fams: Vec<Candidate> = Vec::new();
            for c in candidates {
                if !fams.iter().any(|f| f.family() == c.family()) {
                    fams.push(c.sized(1));
                }
            }
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load: Load::Ceiling {
                        queries: s.ceiling_queries,
                    },
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: ceiling_candidates(&fams, &CEILING_SIZES),
                });
            }
            continue;
        }
        if w.is_bulk() {
            let candidates: Vec<Candidate> =
                candidates.iter().filter(|c| w.runs(c)).cloned().collect();
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load: Load::Rows { rows: s.copy_rows },
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: candidates.clone(),
                });
            }
            continue;
        }
        for &load in loads {
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load,
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: candidates.iter().filter(|c| w.runs(c)).cloned().collect(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names() {
        let c = Candidate::parse("pgpipe-glommio-4-w256#2").unwrap();
        assert_eq!(c.kind, Kind::Pgpipe(Adapter::Glommio));
        assert_eq!((c.conns, c.max_in_flight, c.copy), (4, Some(256), 2));
        assert_eq!(c.sized(8).name, "pgpipe-glommio-8-w256#2");
        let d = Candidate::parse("deadpool-16").unwrap();
        assert_eq!((d.kind, d.conns), (Kind::Deadpool, 16));
        assert_eq!(
            Candidate::parse("tokio-postgres-2").unwrap().family(),
            "tokio-postgres"
        );
        for bad in [
            "pgpipe-4",
            "deadpool-0",
            "deadpool-8-w4",
            "deadpool-8-m4",
            "tokio-postgres-2-m4",
            "tokio-postgres-x",
            "x#y",
            "pgpipe-tokio-4-m0",
            "pgpipe-tokio-4-w0",
            "pgpipe-tokio-4-m",
            "pgpipe-tokio-4-",
            "pgpipe-tokio-4-x8",
            "pgpipe-tokio-4-m4-m8",
            "pgpipe-tokio-4-w8-w8",
            "pgpipe-tokio-4-m4x",
        ] {
            assert!(Candidate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_connections_suffix() {
        let fixed = Candidate::parse("pgpipe-tokio-4-m4").unwrap();
        assert_eq!(
            (fixed.conns, fixed.max_in_flight, fixed.max_connections),
            (4, None, Some(4))
        );
        assert_eq!(fixed.family(), "pgpipe-tokio-m4");
        assert_eq!(fixed.sized(8).name, "pgpipe-tokio-8-m4");
        let plain = Candidate::parse("pgpipe-tokio-4").unwrap();
        assert_eq!(plain.max_connections, None);
        assert_ne!(plain.family(), fixed.family());
        // -w and -m in either order mean the same configuration, written canonically.
        let a = Candidate::parse("pgpipe-tokio-4-w256-m32").unwrap();
        let b = Candidate::parse("pgpipe-tokio-4-m32-w256").unwrap();
        assert_eq!((a.max_in_flight, a.max_connections), (Some(256), Some(32)));
        assert_eq!(
            (b.max_in_flight, b.max_connections),
            (a.max_in_flight, a.max_connections)
        );
        assert_eq!(a.family(), "pgpipe-tokio-w256-m32");
        assert_eq!(b.family(), a.family());
        assert_eq!(b.sized(4).name, "pgpipe-tokio-4-w256-m32");
        let c = Candidate::parse("pgpipe-smol-2-m8#2").unwrap();
        assert_eq!((c.conns, c.max_connections, c.copy), (2, Some(8), 2));
        assert_eq!(c.family(), "pgpipe-smol-m8#2");
        assert_eq!(c.sized(2).name, "pgpipe-smol-2-m8#2");
        assert_eq!(Candidate::parse(&c.sized(16).name).unwrap(), c.sized(16));
    }

    #[test]
    fn tls_suffix() {
        let t = Candidate::parse("pgpipe-tokio-4-tls").unwrap();
        assert!(t.tls && t.is_pgpipe());
        assert_eq!(t.family(), "pgpipe-tokio-tls");
        assert_ne!(
            t.family(),
            Candidate::parse("pgpipe-tokio-4").unwrap().family()
        );
        assert!(!Candidate::parse("pgpipe-tokio-4").unwrap().tls);
        // Any kind; among pgpipe's options in any order, written canonically.
        let a = Candidate::parse("pgpipe-glommio-4-tls-w256#2").unwrap();
        assert_eq!((a.tls, a.max_in_flight, a.copy), (true, Some(256), 2));
        assert_eq!(a.sized(8).name, "pgpipe-glommio-8-w256-tls#2");
        let p = Candidate::parse("tokio-postgres-4-tls").unwrap();
        assert_eq!((p.kind, p.conns, p.tls), (Kind::TokioPostgres, 4, true));
        assert_eq!(p.family(), "tokio-postgres-tls");
        let d = Candidate::parse("deadpool-16-tls").unwrap();
        assert_eq!((d.kind, d.conns, d.tls), (Kind::Deadpool, 16, true));
        assert_eq!(d.sized(8).name, "deadpool-8-tls");
        for bad in [
            "pgpipe-tokio-4-tls-tls",
            "tokio-postgres-tls",
            "deadpool-16-tls-w4",
            "pgpipe-tokio-tls-4",
            "pgpipe-tokio-4-TLS",
        ] {
            assert!(Candidate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tls_scenario() {
        let s = Settings::tiny();
        for quick in [false, true] {
            let plan = default_plan(&s, quick);
            let tls: Vec<&Scenario> = plan.iter().filter(|s| s.tag == Some("tls")).collect();
            assert_eq!(tls.len(), 1);
            let t = tls[0];
            assert_eq!(t.id(), "tls-point-closed-1000-direct");
            assert!(t.selected_by("tls") && t.selected_by("tls-point-closed-1000-direct"));
            assert_eq!((t.workload, t.delay), (Workload::Point, Delay::Direct));
            // Plaintext pgpipe next to its TLS twin, TLS of every kind (--quick: every
            // runtime too), and an A/A duplicate over TLS.
            let has = |f: &dyn Fn(&Candidate) -> bool| t.candidates.iter().any(f);
            assert!(has(&|c| c.is_pgpipe() && !c.tls));
            assert!(has(&|c| c.kind == Kind::TokioPostgres && c.tls));
            assert!(has(&|c| c.tls && c.copy == 2));
            if quick {
                for k in [
                    Kind::Pgpipe(Adapter::Smol),
                    Kind::Pgpipe(Adapter::Tokio),
                    Kind::Pgpipe(Adapter::Glommio),
                    Kind::TokioPostgres,
                    Kind::Deadpool,
                ] {
                    assert!(has(&|c| c.kind == k && c.tls), "{k:?}");
                }
            }
            // No other scenario has TLS candidates; the headline's id stays as it was.
            assert!(plan
                .iter()
                .filter(|s| s.tag.is_none())
                .all(|s| s.candidates.iter().all(|c| !c.tls)));
            assert!(plan.iter().any(|s| s.id() == "point-closed-1000-direct"));
        }
    }

    #[test]
    fn hol_workload() {
        assert_eq!(Workload::parse("hol").unwrap(), Workload::Hol);
        assert_eq!(Workload::Hol.label(), "hol");
        assert_eq!(Workload::Hol.statements(), 1);
        for n in HOL_CANDIDATES {
            Candidate::parse(n).unwrap();
        }
    }

    #[test]
    fn pgbouncer_scenarios() {
        let s = Settings::tiny();
        assert_eq!(Workload::parse("point-id").unwrap(), Workload::PointId);
        for quick in [false, true] {
            let plan = default_plan(&s, quick);
            let picked: Vec<&Scenario> =
                plan.iter().filter(|s| s.selected_by("pgbouncer")).collect();
            let ids: Vec<String> = picked.iter().map(|s| s.id()).collect();
            if quick {
                assert_eq!(
                    ids,
                    [
                        "pgbouncer-point-id-closed-1000-direct",
                        "pgbouncer-procs2-point-id-closed-1000-direct"
                    ]
                );
            } else {
                assert_eq!(
                    ids,
                    [
                        "pgbouncer-point-id-closed-1000-direct",
                        "procs8-point-id-closed-1000-direct",
                        "pgbouncer-procs8-point-id-closed-1000-direct"
                    ]
                );
                assert!(picked[0].candidates.iter().any(|c| c.copy == 2));
                assert_eq!(picked[1].procs, 8);
                assert_eq!(picked[1].via, Via::Server);
                assert!(picked[1].selected_by("procs"));
            }
            assert!(picked.iter().all(|s| s.workload == Workload::PointId));
            // Nothing else goes through PgBouncer or runs in several processes.
            assert!(plan
                .iter()
                .filter(|s| !s.selected_by("pgbouncer"))
                .all(|s| s.via == Via::Server && s.procs == 1));
        }
    }

    #[test]
    fn delays() {
        assert_eq!(Delay::parse("direct").unwrap(), Delay::Direct);
        assert_eq!(Delay::parse("5").unwrap().to_string(), "5ms");
        assert_eq!(Delay::parse("0.5ms").unwrap().to_string(), "0.5ms");
        assert!(Delay::parse("fast").is_err());
    }

    #[test]
    fn plans_cover_every_kind() {
        let s = Settings {
            tasks: 10,
            ..Settings::tiny()
        };
        let quick_hol: Vec<_> = default_plan(&s, true)
            .into_iter()
            .filter(|s| s.workload == Workload::Hol)
            .collect();
        assert_eq!(quick_hol.len(), 1, "one small hol scenario in --quick");
        assert!(matches!(quick_hol[0].load, Load::Open { .. }));
        let hol: Vec<_> = default_plan(&s, false)
            .into_iter()
            .filter(|s| s.workload == Workload::Hol)
            .collect();
        assert!(hol.iter().any(|s| matches!(s.load, Load::Open { .. })));
        assert!(hol.iter().any(|s| matches!(s.load, Load::Closed { .. })));
        for quick in [true, false] {
            let p = default_plan(&s, quick);
            let all: Vec<&Candidate> = p.iter().flat_map(|s| &s.candidates).collect();
            for fam in [
                "pgpipe-smol",
                "pgpipe-tokio",
                "pgpipe-glommio",
                "tokio-postgres",
                "deadpool",
            ] {
                assert!(all.iter().any(|c| c.family() == fam), "{fam}");
            }
            assert!(p.iter().any(|s| s.delay != Delay::Direct), "a proxy run");
            assert!(p.iter().any(|s| matches!(s.load, Load::Open { .. })));
            assert!(p.iter().any(|s| matches!(s.load, Load::Ceiling { .. })));
            assert!(all.iter().any(|c| c.copy == 2), "A/A control");
        }
    }
}
