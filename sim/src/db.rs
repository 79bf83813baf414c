//! The fake server's SQL subset and its shared state: the log of what ran, the committed
//! transactions, and the facts the checks need about each connection.

/// What a statement of the SQL subset does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `SELECT $1::int8`: returns its parameter.
    Echo,
    /// `SELECT $1::int8 * 2`: returns twice its parameter.
    Double,
    /// `SELECT $1::int8 FROM pg_sleep(0.003)`: sleeps 3 ms (virtual), returns its parameter;
    /// a CancelRequest meanwhile fails it with 57014 (and it does not count as run).
    Sleep,
    /// `SELECT $1::int8 / 0`: fails with SQLSTATE 22012.
    Fail,
}

impl Kind {
    /// Every kind, for seeded choices.
    pub const ALL: [Kind; 4] = [Kind::Echo, Kind::Double, Kind::Sleep, Kind::Fail];

    /// The SQL text of this kind.
    pub fn sql(self) -> &'static str {
        match self {
            Kind::Echo => "SELECT $1::int8",
            Kind::Double => "SELECT $1::int8 * 2",
            Kind::Sleep => "SELECT $1::int8 FROM pg_sleep(0.003)",
            Kind::Fail => "SELECT $1::int8 / 0",
        }
    }

    pub(crate) fn of(sql: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.sql() == sql)
    }

    /// The value a successful run returns for parameter `p`.
    pub fn result(self, p: i64) -> Option<i64> {
        match self {
            Kind::Echo | Kind::Sleep => Some(p),
            Kind::Double => Some(p.wrapping_mul(2)),
            Kind::Fail => None,
        }
    }
}

/// One statement the server executed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Executed {
    /// The connection (backend process id).
    pub conn: u32,
    /// What ran.
    pub kind: Kind,
    /// Its parameter (the unit's unique tag).
    pub param: i64,
    /// The transaction it ran in (explicit BEGIN), if any.
    pub tx: Option<u64>,
    /// Outside one: the implicit transaction of the Executes before its Sync.
    pub implicit: Option<u64>,
}

/// The server's shared state: the execution log and transaction outcomes.
#[derive(Debug, Default)]
pub struct Db {
    /// Every executed statement, in execution order.
    pub log: Vec<Executed>,
    /// Transactions that committed.
    pub committed: Vec<u64>,
    /// Implicit transactions that committed (their Sync came with no error before it).
    pub implicit_committed: std::collections::HashSet<u64>,
    /// Messages the server handled (all connections), for the trace hash.
    pub messages: u64,
    /// Connections that ended by a fault (reset or termination).
    pub faults: u32,
    /// Parameters whose whole answer (through ReadyForQuery) was written to the client.
    pub answered: std::collections::HashSet<i64>,
    /// Connections the server reset (their unread bytes are lost) or sent a message that
    /// makes the client drop them: answers on these may be lost.
    pub lossy: std::collections::HashSet<u32>,
    /// Backends running `pg_sleep` now, and those a CancelRequest reached while they did.
    pub(crate) sleeping: std::collections::HashSet<u32>,
    pub(crate) cancelled: std::collections::HashSet<u32>,
    /// CancelRequests received, and those that interrupted a statement.
    pub cancel_requests: u32,
    /// See `cancel_requests`.
    pub cancels_hit: u32,
    pub(crate) next_tx: u64,
}
