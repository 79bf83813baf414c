//! A deterministic simulation of pgpipe: a single-threaded executor with a virtual clock and a
//! seeded scheduler, in-memory sockets with seeded faults, and a fake PostgreSQL server. Each
//! seed runs a scenario through pgpipe's public API and checks its properties against the
//! server's log (see `docs/SIMULATION.md`).
//!
//! `run_seed(seed)` runs one seed; the same seed gives the same run, bit for bit (its
//! [`Report::trace`] hash covers the poll order, the server's log and the callers' outcomes).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
pub mod db;
pub mod executor;
pub mod net;
pub mod rng;
pub mod scenario;
pub mod server;

pub use check::Report;
pub use scenario::run_seed;

/// Seeds that once failed and now pass: run on every test run, one comment per bug.
/// A seed names a plan through `scenario::Plan::of`: a change to how plans are drawn maps
/// seeds to other runs, so then re-derive these (undo each fix, note which seeds fail).
pub const REGRESSION_SEEDS: &[u64] = &[
    // A close arriving in the tick where the connection died was overwritten by the death
    // (Closing -> Dead): the task reconnected and close() waited forever.
    21, 47, 1512,
    // A server that answered and then closed (FATAL 57P01): the read hit EOF and the task died
    // before draining what it had read, so finished units came back Indeterminate.
    4, 112, 147,
    // A transaction() whose future was dropped while its exclusive connection was being
    // opened (or reset) leaked the pool slot and the connection: the connection outlived
    // close(), and with every slot leaked the next transaction() waited forever.
    98, 105, 115,
    // A protocol violation after a unit completed in the same drain: the completed units never
    // left the in-flight gauge (stats showed work in flight after close).
    224, 564, 658,
    // Bytes the server sent right after its startup ReadyForQuery, read in the same read,
    // were dropped when the task took over: the stream was misaligned and the connection
    // waited forever for a message of garbage length (found in 100,000 seeds).
    25048, 80616,
    // A ROLLBACK that handed its connection on timed out; its cancel was sent while the next
    // holder's BEGIN and statement were already behind it on the wire, and cancelled those.
    11969,
    // Four texts in a cache of two, one unit in flight: each text's statement was evicted by
    // the others' prepares before its execution was queued, prepared again, evicted again
    // (a livelock; found in 300,000 seeds).
    306280,
    // A unit skipped behind a failure in its Sync was sent again by its statement's name
    // after a later prepare had closed that statement (evicted): 26000.
    235769,
    // A session statement past its deadline asked for a cancel of itself while an earlier
    // cancel was in flight or its work still ran: the task looped without waiting (the request
    // stayed pending and re-armed the pass), or waited for a wake that only the held units
    // could give.
    435, 3496, 3788, 7239, 8522, 9239,
];
