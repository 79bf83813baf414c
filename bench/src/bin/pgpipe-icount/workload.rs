//! The measured workloads, each a fixed amount of work that runs the same way every time.
//!
//! - `encode`, `drain`, `decode`: the sans-IO fixtures of `pgpipe_bench::hot` in a loop inside
//!   [`marker::unit`].
//! - `pgpipe`: point selects end to end through [`pgpipe::Client`] on the deterministic
//!   simulation (`pgpipe-sim`: its single-threaded executor, in-memory sockets and fake server,
//!   faults off): [`CALLERS`] callers share one pipelined connection, each running its share of
//!   the units one after another (`query_one`, then reading the value).
//! - `tokio-postgres`: the same units through tokio-postgres (one connection, a statement
//!   prepared once, `query_one` on it), on the same executor, sockets and server.
//!
//! Callers run inside [`marker::caller`], connection tasks inside [`marker::task`]. The fake
//! server and the executor are not marked: their work is the simulation's, not the client's.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::hint::black_box;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use pgpipe::rt::{Runtime, Spawn, Target, TcpOptions};
use pgpipe::{Client, Config, SslMode};
use pgpipe_bench::hot::{decode, sample_row, DrainFixture, EncodeFixture, BATCH};
use pgpipe_sim::executor::{End, Sim, Sleep};
use pgpipe_sim::net::{Faults, Net};
use pgpipe_sim::server::{Db, Kind};

use crate::meter::{marker, Marked, PgSocket, TokioSocket};

/// Concurrent callers of the client workloads: enough that units pipeline (several in flight
/// on the one connection), few enough that every caller runs many units.
pub const CALLERS: u32 = 16;
/// The point select, one the fake server knows (`SELECT $1::int8`: returns its parameter).
const KIND: Kind = Kind::Echo;
/// The simulation's seed: it orders the ready tasks, so it fixes how units batch.
const SEED: u64 = 1;

/// A workload of the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Encode an Execute unit (sans-IO).
    Encode,
    /// Drain a unit's answer through the pipeline FIFO (sans-IO).
    Drain,
    /// Read a row's two values (sans-IO).
    Decode,
    /// Point selects through `pgpipe::Client` on the simulation.
    Pgpipe,
    /// The same point selects through tokio-postgres on the simulation.
    TokioPostgres,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 5] = [
        Workload::Encode,
        Workload::Drain,
        Workload::Decode,
        Workload::Pgpipe,
        Workload::TokioPostgres,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Encode => "encode",
            Workload::Drain => "drain",
            Workload::Decode => "decode",
            Workload::Pgpipe => "pgpipe",
            Workload::TokioPostgres => "tokio-postgres",
        }
    }

    /// The workload named `name`.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The two sizes (units) whose difference the gate measures: the constant costs (process
    /// start, connecting, preparing, warming buffers up, closing) cancel out.
    pub fn sizes(self) -> (u32, u32) {
        match self {
            Workload::Encode | Workload::Decode => (20_000, 40_000),
            Workload::Drain => (200 * BATCH, 400 * BATCH),
            Workload::Pgpipe | Workload::TokioPostgres => (100 * CALLERS, 200 * CALLERS),
        }
    }

    /// Whether a number of units is a whole number of this workload's steps.
    pub fn valid_units(self, units: u32) -> bool {
        match self {
            Workload::Drain => units.is_multiple_of(BATCH),
            Workload::Pgpipe | Workload::TokioPostgres => units.is_multiple_of(CALLERS),
            _ => true,
        }
    }

    /// Runs `units` units.
    pub fn run(self, units: u32) {
        match self {
            Workload::Encode => {
                let mut fx = EncodeFixture::new();
                let len = fx.run();
                marker::unit(|| {
                    for _ in 0..units {
                        black_box(fx.run());
                    }
                });
                assert_eq!(fx.run(), len);
            }
            Workload::Drain => {
                let mut fx = DrainFixture::new();
                fx.check();
                let done = marker::unit(|| {
                    let mut done = 0;
                    for _ in 0..units / BATCH {
                        done += black_box(fx.run());
                    }
                    done
                });
                assert_eq!(done, units as usize);
            }
            Workload::Decode => {
                let row = sample_row();
                let want = decode(&row);
                marker::unit(|| {
                    for _ in 0..units {
                        assert_eq!(black_box(decode(black_box(&row))), want);
                    }
                });
            }
            Workload::Pgpipe => simulate(units, |sim, per_caller, checksum| {
                pgpipe_root(sim, per_caller, checksum)
            }),
            Workload::TokioPostgres => simulate(units, |sim, per_caller, checksum| {
                tokio_postgres_root(sim, per_caller, checksum)
            }),
        }
    }
}

/// Runs a client workload's root task on a fresh simulation until every task has ended, and
/// checks that every unit returned its own parameter.
fn simulate<F>(units: u32, root: impl FnOnce(Sim, u32, Rc<Cell<i64>>) -> F)
where
    F: Future<Output = ()> + 'static,
{
    // pgpipe draws its statement-name nonces from fastrand's thread-local generator: seeded,
    // the names (and the bytes encoded per unit) are the same in every run.
    fastrand::seed(SEED);
    let faults = Faults {
        // No fault; a pipe holds everything written to it (the writer never waits).
        capacity: 1 << 30,
        ..Faults::default()
    };
    let sim = Sim::new(SEED, Net::new(faults, Rc::new(RefCell::new(Db::default()))));
    let checksum = Rc::new(Cell::new(0i64));
    let per_caller = units / CALLERS;
    sim.spawn_task(root(sim.clone(), per_caller, checksum.clone()));
    // Nothing waits for virtual time (no delays, no faults): a timer left when no task is
    // ready means the run is stuck.
    let end = sim.run(Duration::ZERO, u64::MAX);
    sim.clear();
    assert_eq!(end, End::Quiescent, "the simulation did not finish");
    let units = i64::from(units);
    assert_eq!(checksum.get(), units * (units - 1) / 2, "wrong answers");
}

/// The parameter of unit `i` of caller `c`: every unit of the run gets its own, 0..units.
fn param(c: u32, per_caller: u32, i: u32) -> i64 {
    i64::from(c) * i64::from(per_caller) + i64::from(i)
}

/// Counts callers still running, and wakes the root when the last one ends.
#[derive(Default)]
struct Join {
    left: u32,
    waiter: Option<Waker>,
}

impl Join {
    fn new(left: u32) -> Rc<RefCell<Join>> {
        Rc::new(RefCell::new(Join { left, waiter: None }))
    }

    fn done(join: &RefCell<Join>) {
        let mut j = join.borrow_mut();
        j.left -= 1;
        if j.left == 0 {
            if let Some(w) = j.waiter.take() {
                w.wake();
            }
        }
    }

    async fn all(join: &RefCell<Join>) {
        std::future::poll_fn(|cx| {
            let mut j = join.borrow_mut();
            if j.left == 0 {
                Poll::Ready(())
            } else {
                j.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// pgpipe's runtime for the measured client: the simulation's executor, clock and network,
/// with the connection tasks it spawns marked as tasks and the sockets it opens marked as I/O.
#[derive(Clone)]
struct Metered(Sim);

impl Runtime for Metered {
    type Socket = PgSocket;
    type Sleep = Sleep;
    type Connect = Pin<Box<dyn Future<Output = io::Result<PgSocket>>>>;

    fn connect(&self, target: &Target) -> Self::Connect {
        let connecting = self.0.connect(target);
        Box::pin(async move { connecting.await.map(PgSocket) })
    }

    fn now(&self) -> Instant {
        self.0.now()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        self.0.sleep_until(deadline)
    }

    fn cpu_sample(&self) -> Option<pgpipe::rt::CpuSample> {
        self.0.cpu_sample()
    }
}

impl<F: Future<Output = ()> + 'static> Spawn<F> for Metered {
    fn spawn(&self, fut: F) {
        self.0.spawn_task(Marked::task(fut));
    }
}

/// The client's settings: the defaults, on the simulated server, with one pipelined
/// connection and no on-demand ones (so all units share one FIFO, whatever the estimates).
fn config() -> Config {
    let mut config = Config::default();
    config.host = "sim".into();
    config.user = "sim".into();
    config.dbname = "sim".into();
    config.tls.mode = SslMode::Disable;
    config.pipeline_size = 1;
    config.max_connections = 1;
    config
}

async fn pgpipe_root(sim: Sim, per_caller: u32, checksum: Rc<Cell<i64>>) {
    let client = Client::connect(Metered(sim.clone()), config())
        .await
        .expect("connect");
    // Prepares the statement on the connection: every measured unit is then Bind/Execute/Sync.
    let row = client
        .query_one(KIND.sql(), &[&-1i64])
        .await
        .expect("warm-up");
    assert_eq!(row.get::<_, i64>(0), -1);
    // What each waiting caller holds (created, never polled).
    let params: [&(dyn pgpipe::types::ToSql + Sync); 1] = [&0i64];
    let future_bytes = std::mem::size_of_val(&client.query_one(KIND.sql(), &params));
    let join = Join::new(CALLERS);
    for c in 0..CALLERS {
        let (client, join, checksum) = (client.clone(), join.clone(), checksum.clone());
        sim.spawn_task(Marked::caller(async move {
            for i in 0..per_caller {
                let p = param(c, per_caller, i);
                let row = client.query_one(KIND.sql(), &[&p]).await.expect("query");
                let v: i64 = row.get(0);
                checksum.set(checksum.get() + v);
            }
            Join::done(&join);
        }));
    }
    Join::all(&join).await;
    client.close().await;
    // How the units batched (fixed by the seed): printed for the record, not compared.
    let s = client.stats();
    println!(
        "pgpipe: {} units, {:.2} units per read, {:.3} writes per unit, in flight at most {}, \
         query_one's future {future_bytes} bytes",
        s.total.units_completed,
        s.total.units_per_readable(),
        s.total.writes_per_unit(),
        s.total.in_flight_peak
    );
}

async fn tokio_postgres_root(sim: Sim, per_caller: u32, checksum: Rc<Cell<i64>>) {
    let target = Target::Tcp {
        host: "sim".into(),
        port: 5432,
        options: TcpOptions::default(),
    };
    let socket = sim.connect(&target).await.expect("connect");
    let mut config = tokio_postgres::Config::new();
    config.user("sim").dbname("sim");
    let (client, connection) = config
        .connect_raw(TokioSocket(socket), tokio_postgres::NoTls)
        .await
        .expect("startup");
    sim.spawn_task(Marked::task(async move {
        connection.await.expect("connection");
    }));
    let client = Rc::new(client);
    // Prepared once, as a tokio-postgres user would: every unit is then Bind/Execute/Sync.
    let statement = client.prepare(KIND.sql()).await.expect("prepare");
    let join = Join::new(CALLERS);
    for c in 0..CALLERS {
        let (client, statement) = (client.clone(), statement.clone());
        let (join, checksum) = (join.clone(), checksum.clone());
        sim.spawn_task(Marked::caller(async move {
            for i in 0..per_caller {
                let p = param(c, per_caller, i);
                let row = client.query_one(&statement, &[&p]).await.expect("query");
                let v: i64 = row.get(0);
                checksum.set(checksum.get() + v);
            }
            Join::done(&join);
        }));
    }
    Join::all(&join).await;
    // The last handle: dropping it ends the connection (Terminate), then the server.
    drop(statement);
    drop(client);
}
