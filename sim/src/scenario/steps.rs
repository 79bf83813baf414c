//! A caller's steps, each through pgpipe's public API: a shared-path query, a statement on a
//! session, a transaction (with its COMMIT or after it), an atomic batch; and dropping a
//! step's future mid-flight.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use pgpipe::Client;

use crate::check::{BatchGot, Got, TxEnd, TxRecord};
use crate::executor::Sim;
use crate::server::Kind;

/// `fut`, or `None` once `sleep` fires first (then `fut` is dropped mid-flight).
pub(super) async fn or_drop<T>(
    fut: impl Future<Output = T>,
    sleep: impl Future<Output = ()>,
) -> Option<T> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(sleep);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// One shared-path query, dropped mid-flight after `drop_after` if `Some`.
pub(super) async fn query(
    client: &Client<Sim>,
    sim: &Sim,
    kind: Kind,
    param: i64,
    drop_after: Option<Duration>,
) -> Got {
    let params: [&(dyn pgpipe::types::ToSql + Sync); 1] = [&param];
    let fut = client.query_one(kind.sql(), &params);
    match drop_after {
        Some(d) => match or_drop(fut, sim.sleep(d)).await {
            Some(r) => Got::of(r),
            None => Got::Dropped,
        },
        None => Got::of(fut.await),
    }
}

/// One statement on a session; the session is released (and reset) at the end.
pub(super) async fn on_session(client: &Client<Sim>, kind: Kind, param: i64) -> Got {
    match client.session().await {
        Ok(s) => Got::of(s.query_one(kind.sql(), &[&param]).await),
        Err(e) => Got::NotRun(format!("session(): {e}")),
    }
}

/// BEGIN, one statement, COMMIT or ROLLBACK on an exclusive connection.
pub(super) async fn transaction(
    client: &Client<Sim>,
    kind: Kind,
    param: i64,
    commit: bool,
) -> TxRecord {
    let mut t = TxRecord {
        param,
        commit,
        got: Got::Dropped,
        end: TxEnd::NotReached,
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            t.got = Got::Other(format!("BEGIN: {e}"));
            return t;
        }
    };
    t.got = Got::of(tx.query_one(kind.sql(), &[&param]).await);
    let end = if commit {
        tx.commit().await
    } else {
        tx.rollback().await
    };
    t.end = match end {
        Ok(()) => TxEnd::Ok,
        Err(pgpipe::Error::RolledBack) => TxEnd::RolledBack,
        Err(pgpipe::Error::IndeterminateCommit { .. }) => TxEnd::IndeterminateCommit,
        Err(pgpipe::Error::Timeout) => TxEnd::Timeout,
        Err(e) => TxEnd::Failed(e.to_string()),
    };
    t
}

/// A transaction whose one statement carries its COMMIT.
pub(super) async fn transaction_commit_with(
    client: &Client<Sim>,
    kind: Kind,
    param: i64,
) -> TxRecord {
    let mut t = TxRecord {
        param,
        commit: true,
        got: Got::Dropped,
        end: TxEnd::NotReached,
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            t.got = Got::Other(format!("checkout: {e}"));
            return t;
        }
    };
    match tx.query_and_commit(kind.sql(), &[&param]).await {
        Ok(rows) => {
            t.got = match rows.first().map(|r| r.try_get::<_, i64>(0)) {
                Some(Ok(v)) => Got::Value(v),
                other => Got::Other(format!("rows: {other:?}")),
            };
            t.end = TxEnd::Ok;
        }
        Err(pgpipe::Error::IndeterminateCommit { .. }) => {
            t.got = Got::Indeterminate;
            t.end = TxEnd::IndeterminateCommit;
        }
        Err(pgpipe::Error::RolledBack) => t.end = TxEnd::RolledBack,
        Err(pgpipe::Error::CommitFailed(e)) => {
            t.end = TxEnd::Failed(format!("COMMIT failed: {e}"));
        }
        Err(e) => t.got = Got::of(Err(e)),
    }
    t
}

/// An atomic batch of two statements on the shared path.
pub(super) async fn batch(client: &Client<Sim>, kinds: [Kind; 2], params: [i64; 2]) -> BatchGot {
    let mut b = client.batch();
    b.add(kinds[0].sql(), &[&params[0]]);
    b.add(kinds[1].sql(), &[&params[1]]);
    match b.run().await {
        Ok(results) => {
            let value = |i: usize| -> Option<i64> {
                results.get(i)?.rows().first()?.try_get::<_, i64>(0).ok()
            };
            match (results.len(), value(0), value(1)) {
                (2, Some(a), Some(b)) => BatchGot::Values([a, b]),
                _ => BatchGot::Other(format!("results: {results:?}")),
            }
        }
        Err(pgpipe::Error::BatchFailed { index, source }) => BatchGot::Failed {
            index,
            code: source.code().as_str().to_owned(),
        },
        Err(e) => match Got::of(Err(e)) {
            Got::NotDispatched => BatchGot::NotDispatched,
            Got::NoConnection | Got::Closed => BatchGot::NotDispatched,
            Got::Indeterminate => BatchGot::Indeterminate,
            Got::Timeout => BatchGot::Timeout,
            other => BatchGot::Other(format!("{other:?}")),
        },
    }
}
