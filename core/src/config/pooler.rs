//! `pooler`: what stands between the client and the server, as the configuration says it.
//! How a connection writes because of it is `driver/conn/path.rs`.

/// `pooler`: what stands between the client and the server, and so how its connections may
/// pipeline (see `docs/TOPOLOGY.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooler {
    /// Found out: each shared connection's first unit asks whether the backend answering is
    /// the one its startup named. Behind anything that hands out its own backend keys (any
    /// pooler; its pool mode cannot be seen) the client takes [`Pooler::Transaction`]'s rule;
    /// until the answer, and on exclusive connections until some connection has proved its
    /// path direct, too.
    #[default]
    Auto,
    /// Straight to PostgreSQL: no probe, no bound beyond the window.
    None,
    /// A pooler in session mode (one server connection per client connection, for its life):
    /// pipelined as to the server, but no lanes or overflow connections and no half-open check.
    Session,
    /// A pooler in transaction mode (PgBouncer, Supavisor, ...): no connection ever has a
    /// second Sync outstanding while one is unanswered, so the pooler can never hand its
    /// server link to another client with part of a unit forwarded, however the bytes
    /// arrive. Cheap reads still share that one Sync.
    Transaction,
    /// A pooler in transaction mode, pipelined with up to 16 KiB of requests in flight (the
    /// rule before [`Pooler::Transaction`]): faster, and unsafe through PgBouncer before 1.21
    /// when a write reaches it in pieces (a late TCP segment): callers then get each other's
    /// answers and acknowledged writes go missing (measured in `docs/TOPOLOGY.md`). For
    /// poolers that track every message (PgBouncer 1.21 and later), or links that never
    /// deliver a write in pieces.
    TransactionPipelined,
}

impl Pooler {
    /// Whether this says a pooler stands in between (of either mode).
    pub(crate) fn declared(self) -> bool {
        matches!(
            self,
            Pooler::Session | Pooler::Transaction | Pooler::TransactionPipelined
        )
    }
}
