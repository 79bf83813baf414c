//! The properties every seed must satisfy, checked against the fake server's log.

use std::collections::HashMap;

use crate::server::{Db, Kind};

/// What a caller saw for one unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Got {
    /// A row with this value.
    Value(i64),
    /// The server's error, by SQLSTATE.
    Db(String),
    /// `Error::NotDispatched`.
    NotDispatched,
    /// `Error::Indeterminate`.
    Indeterminate,
    /// `Error::Timeout` (the caller's deadline).
    Timeout,
    /// `Error::NoConnection`.
    NoConnection,
    /// `Error::Closed`.
    Closed,
    /// The caller dropped the future before it resolved.
    Dropped,
    /// An error before the unit could be submitted (checking out a session failed): it must
    /// not have run.
    NotRun(String),
    /// Anything else, with its text.
    Other(String),
}

impl Got {
    /// Classifies a query's result.
    pub fn of(r: Result<pgpipe::Row, pgpipe::Error>) -> Got {
        match r {
            Ok(row) => match row.try_get::<_, i64>(0) {
                Ok(v) => Got::Value(v),
                Err(e) => Got::Other(format!("decode: {e}")),
            },
            Err(pgpipe::Error::Db(e)) => Got::Db(e.code().as_str().to_string()),
            Err(pgpipe::Error::NotDispatched { .. }) => Got::NotDispatched,
            Err(pgpipe::Error::Indeterminate { .. }) => Got::Indeterminate,
            Err(pgpipe::Error::Timeout) => Got::Timeout,
            Err(pgpipe::Error::NoConnection { .. }) => Got::NoConnection,
            Err(pgpipe::Error::Closed) => Got::Closed,
            Err(e) => Got::Other(e.to_string()),
        }
    }
}

/// How a transaction's end (commit or rollback) came out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TxEnd {
    /// It returned `Ok`.
    Ok,
    /// `Error::RolledBack` (COMMIT found the transaction failed).
    RolledBack,
    /// `Error::IndeterminateCommit`.
    IndeterminateCommit,
    /// `Error::Timeout`: the caller stopped waiting; COMMIT may still run.
    Timeout,
    /// Any other error (the connection failed before COMMIT was sent, ...), with its text.
    Failed(String),
    /// Not reached: BEGIN or the statement failed, or the caller dropped the transaction.
    NotReached,
}

/// A transaction a caller ran: BEGIN, one statement, then COMMIT or ROLLBACK.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TxRecord {
    /// The statement's unique parameter.
    pub param: i64,
    /// Whether the caller asked to commit (else roll back).
    pub commit: bool,
    /// What the statement got (`Dropped` if the whole transaction was dropped; `Other` with
    /// the error if BEGIN failed).
    pub got: Got,
    /// How the end came out.
    pub end: TxEnd,
}

/// What a caller saw for an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BatchGot {
    /// Every statement's value.
    Values([i64; 2]),
    /// `Error::BatchFailed`: the statement at `index` failed with SQLSTATE `code`.
    Failed {
        /// The statement that failed.
        index: usize,
        /// Its SQLSTATE.
        code: String,
    },
    /// Never sent (`NotDispatched`, `NoConnection`, `Closed`).
    NotDispatched,
    /// `Error::Indeterminate`.
    Indeterminate,
    /// `Error::Timeout`.
    Timeout,
    /// The caller dropped the future.
    Dropped,
    /// Anything else.
    Other(String),
}

/// An atomic batch a caller ran: two statements, their parameters, what it got.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BatchRecord {
    /// Each statement's unique parameter.
    pub params: [i64; 2],
    /// The statements.
    pub kinds: [Kind; 2],
    /// The outcome.
    pub got: BatchGot,
}

/// Checks every batch: it ran as one implicit transaction, committed all or nothing, and what
/// its caller was told matches.
pub fn batches(batches: &[BatchRecord], db: &Db) -> Result<(), String> {
    for b in batches {
        let bad = |why: &str| Err(format!("batch {b:?}: {why}"));
        let mut runs = [None, None];
        for e in db.log.iter() {
            if let Some(i) = b.params.iter().position(|&p| p == e.param) {
                if runs[i].is_some() {
                    return bad("a statement ran more than once");
                }
                if e.tx.is_some() || e.implicit.is_none() {
                    return bad("a statement ran in an explicit transaction");
                }
                runs[i] = Some(e);
            }
        }
        let ids: Vec<u64> = runs.iter().flatten().filter_map(|e| e.implicit).collect();
        if ids.windows(2).any(|w| w[0] != w[1]) {
            return bad("its statements ran in different transactions");
        }
        let committed = ids
            .first()
            .is_some_and(|id| db.implicit_committed.contains(id));
        if committed && runs.iter().any(Option::is_none) {
            return bad("it committed without every statement");
        }
        if committed && b.kinds.contains(&Kind::Fail) {
            return bad("it committed a statement that fails");
        }
        match &b.got {
            BatchGot::Values(v) => {
                if !committed {
                    return bad("it returned values but did not commit");
                }
                let expected = b.kinds.iter().zip(b.params).map(|(k, p)| k.result(p));
                if !v.iter().zip(expected).all(|(&v, e)| Some(v) == e) {
                    return bad("wrong value");
                }
            }
            BatchGot::Failed { index, code } => {
                if committed {
                    return bad("it failed but committed");
                }
                let Some(&kind) = b.kinds.get(*index) else {
                    return bad("no such statement");
                };
                let ran = runs[*index].is_some();
                match code.as_str() {
                    "22012" if kind == Kind::Fail && ran => {}
                    // Injected before the statement runs.
                    "40001" if !ran => {}
                    _ => return bad("its statement cannot fail that way"),
                }
                if runs[index + 1..].iter().any(Option::is_some) {
                    return bad("a statement after the failed one ran");
                }
                if runs[..*index].iter().any(Option::is_none) {
                    return bad("a statement before the failed one did not run");
                }
            }
            BatchGot::NotDispatched => {
                if runs.iter().any(Option::is_some) {
                    return bad("it ran although the error says it was not sent");
                }
            }
            BatchGot::Indeterminate | BatchGot::Timeout | BatchGot::Dropped => {}
            BatchGot::Other(_) => return bad("no such outcome is expected"),
        }
    }
    Ok(())
}

/// One unit a caller issued and what it got.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// The unit's unique parameter.
    pub param: i64,
    /// The statement.
    pub kind: Kind,
    /// The outcome.
    pub got: Got,
    /// On the shared path (else on a session).
    pub shared: bool,
}

/// What a seed's run produced, for the determinism check and the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Hash of the poll order, the server's log and the callers' outcomes.
    pub trace: u64,
    /// Units issued.
    pub units: usize,
    /// Statements the server executed.
    pub executed: usize,
    /// Units that returned their value.
    pub ok: usize,
    /// Units that failed because a connection died (NotDispatched, Indeterminate, NoConnection).
    pub lost: usize,
    /// Connections the server accepted.
    pub connections: u32,
    /// Connections the server ended by a fault (reset or FATAL termination).
    pub faults: u32,
    /// Transactions that committed.
    pub committed: usize,
    /// Units whose caller dropped the future, or got `Timeout`.
    pub abandoned: usize,
    /// CancelRequests the server received (exclusive connections' abandoned work).
    pub cancels: u32,
    /// Units that shared a later unit's Sync and completed at their CommandComplete.
    pub coalesced: u64,
    /// Units the server skipped after an earlier unit of their Sync failed, sent again.
    pub resent: u64,
    /// Transactions that handed their connection on with their COMMIT still unanswered.
    pub early_handovers: u64,
    /// Atomic batches that committed, and that failed at one of their statements.
    pub batches_committed: usize,
    /// See `batches_committed`.
    pub batches_failed: usize,
    /// Virtual time the run took.
    pub elapsed_us: u64,
}

/// Checks every transaction against the server's log and its committed transactions.
pub fn transactions(txs: &[TxRecord], db: &Db) -> Result<(), String> {
    for t in txs {
        let runs: Vec<_> = db.log.iter().filter(|e| e.param == t.param).collect();
        let bad = |why: &str| Err(format!("transaction {t:?}: {why}"));
        if runs.len() > 1 {
            return bad("the statement ran more than once");
        }
        let Some(run) = runs.first() else {
            // COMMIT may succeed without the statement (it timed out before it was sent).
            if matches!(t.got, Got::Value(_) | Got::Db(_)) {
                return bad("the server never ran the statement");
            }
            continue;
        };
        let Some(id) = run.tx else {
            return bad("the statement ran outside a transaction");
        };
        let committed = db.committed.contains(&id);
        match (&t.got, t.commit, &t.end) {
            (Got::NotDispatched | Got::NoConnection, ..) => {
                return bad("the statement ran although the error says it was not sent")
            }
            (Got::Value(v), ..) if Some(*v) != run.kind.result(t.param) => {
                return bad("wrong value")
            }
            (_, true, TxEnd::Ok) if !committed => {
                return bad("COMMIT returned Ok but it did not commit")
            }
            (_, true, TxEnd::RolledBack | TxEnd::Failed(_)) | (_, false, _) if committed => {
                return bad(
                    "it committed although the caller was told it did not (or asked to roll back)",
                )
            }
            _ => {}
        }
        if committed && !(t.commit || t.got == Got::Dropped) {
            return bad("committed without a COMMIT");
        }
    }
    Ok(())
}

/// Checks every outcome against the server's log; `Err` names the first violation. `aborted`:
/// the client aborted its work (`close_within` ran out of time), so answers the server sent
/// may be unread.
pub fn outcomes(
    records: &[Record],
    batched: &std::collections::HashSet<i64>,
    db: &Db,
    aborted: bool,
) -> Result<(), String> {
    let mut runs: HashMap<i64, Vec<Kind>> = HashMap::new();
    let mut conn_of = HashMap::new();
    for e in &db.log {
        runs.entry(e.param).or_default().push(e.kind);
        conn_of.insert(e.param, e.conn);
    }
    let issued: HashMap<i64, Kind> = records.iter().map(|r| (r.param, r.kind)).collect();
    if issued.len() != records.len() {
        return Err("a parameter was issued twice (simulation bug)".into());
    }
    for e in &db.log {
        match (issued.get(&e.param), e.tx) {
            (Some(&k), None) if k == e.kind => {}
            // Transactions' statements are checked by `transactions`, batches' by `batches`.
            (None, Some(_)) => {}
            (None, None) if batched.contains(&e.param) => {}
            _ => return Err(format!("the server ran a unit nobody issued there: {e:?}")),
        }
    }
    for r in records {
        let n = runs.get(&r.param).map_or(0, Vec::len);
        let bad = |why: &str| {
            Err(format!(
                "unit {} ({:?}) got {:?} but {why}",
                r.param, r.kind, r.got
            ))
        };
        if n > 1 {
            return bad(&format!("the server ran it {n} times"));
        }
        match &r.got {
            Got::Value(v) => {
                if n != 1 {
                    return bad("the server never ran it");
                }
                if r.kind.result(r.param) != Some(*v) {
                    return bad("that is not its value");
                }
            }
            // The server's injected error comes before the statement runs.
            Got::Db(code) if code == "40001" => {
                if n != 0 {
                    return bad("the server ran it");
                }
            }
            Got::Db(code) => {
                if r.kind != Kind::Fail || code != "22012" {
                    return bad("the statement cannot fail that way");
                }
                if n != 1 {
                    return bad("the server never ran it");
                }
            }
            Got::NotDispatched | Got::NoConnection | Got::Closed | Got::NotRun(_) => {
                if n != 0 {
                    return bad("the server ran it");
                }
            }
            // The whole answer reached the client before the server closed gracefully (no
            // reset discarded it, no bad message made the client drop the connection): the
            // client read it, so the unit's outcome is known.
            Got::Indeterminate
                if !aborted
                    && db.answered.contains(&r.param)
                    && !conn_of.get(&r.param).is_some_and(|c| db.lossy.contains(c)) =>
            {
                return bad("its whole answer was delivered before the connection closed");
            }
            // May or may not have run; at most once is checked above.
            Got::Indeterminate | Got::Timeout | Got::Dropped => {}
            Got::Other(_) => return bad("no such outcome is expected here"),
        }
    }
    Ok(())
}
