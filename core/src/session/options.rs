//! A transaction's modes (isolation level, access, deferrability), set before it starts: they
//! ride in its BEGIN, which still travels with its first statement.

use crate::{Adapter, Client, Error, Transaction};

/// A transaction's isolation level (PostgreSQL's `ISOLATION LEVEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IsolationLevel {
    /// `READ UNCOMMITTED` (PostgreSQL runs it as READ COMMITTED).
    ReadUncommitted,
    /// `READ COMMITTED`, the server's default unless configured otherwise.
    ReadCommitted,
    /// `REPEATABLE READ`.
    RepeatableRead,
    /// `SERIALIZABLE`.
    Serializable,
}

/// Starts a transaction with modes: from `Client::build_transaction`, then
/// [`TransactionBuilder::start`]. Modes left unset are the server's defaults.
#[must_use = "a builder does nothing until `start()`"]
pub struct TransactionBuilder<'a, R: Adapter> {
    client: &'a Client<R>,
    /// `PendingBegin`'s encoding (`driver/shared/framing.rs`).
    modes: u8,
}

impl<'a, R: Adapter> TransactionBuilder<'a, R> {
    pub(super) fn new(client: &'a Client<R>) -> Self {
        TransactionBuilder { client, modes: 0 }
    }

    /// The isolation level.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        let code = match level {
            IsolationLevel::ReadUncommitted => 1,
            IsolationLevel::ReadCommitted => 2,
            IsolationLevel::RepeatableRead => 3,
            IsolationLevel::Serializable => 4,
        };
        self.modes = self.modes & !7 | code;
        self
    }

    /// `READ ONLY` (`true`) or `READ WRITE` (`false`).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.modes = self.modes & !(3 << 3) | if read_only { 2 << 3 } else { 1 << 3 };
        self
    }

    /// `DEFERRABLE` (`true`) or `NOT DEFERRABLE` (`false`); it matters only for a
    /// serializable, read-only transaction.
    pub fn deferrable(mut self, deferrable: bool) -> Self {
        self.modes = self.modes & !(3 << 5) | if deferrable { 2 << 5 } else { 1 << 5 };
        self
    }

    /// Checks out an exclusive connection for the transaction, as `Client::transaction`
    /// does. Nothing is sent yet: the BEGIN, with these modes, goes out with its first
    /// statement.
    pub async fn start(self) -> Result<Transaction<R>, Error> {
        self.client.transaction_with_modes(self.modes).await
    }
}

impl<R: Adapter> std::fmt::Debug for TransactionBuilder<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionBuilder")
            .field("begin", &crate::driver::shared::begin_text(self.modes))
            .finish()
    }
}
