//! The root task of a run: connects, spawns the callers (each running its steps), then closes
//! the client (gracefully once every caller is done, or with `close_within` while they work)
//! and leaves the outcome for the checks.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use pgpipe::Client;

use super::stats::{coalescing, end_stats, open_stats};
use super::steps::{batch, on_session, or_drop, query, transaction, transaction_commit_with};
use super::{Outcome, Plan, Step};
use crate::check::{BatchGot, BatchRecord, Got, Record, TxEnd, TxRecord};
use crate::executor::Sim;

/// Counts finished callers and wakes the waiter when all are done.
#[derive(Default)]
struct Join {
    left: usize,
    waiter: Option<Waker>,
}

pub(super) async fn root(sim: Sim, plan: Plan, out: Rc<RefCell<Outcome>>) {
    sim.log(|| format!("plan: {plan:?}"));
    let client = match Client::connect(sim.clone(), plan.config.clone()).await {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            out.borrow_mut().end_checks = Some(
                if plan.early_faults_on
                    && matches!(e, pgpipe::Error::Io(_) | pgpipe::Error::NoConnection { .. })
                {
                    Ok(())
                } else {
                    Err(format!("connect failed without a connect fault: {msg}"))
                },
            );
            out.borrow_mut().connect_error = Some(msg);
            return;
        }
    };
    sim.st.borrow_mut().net.faults_on = true;
    out.borrow_mut().client = Some(client.clone());
    let join = Rc::new(RefCell::new(Join {
        left: plan.callers.len(),
        waiter: None,
    }));
    for (i, units) in plan.callers.iter().enumerate() {
        let (client, sim, out, join) = (client.clone(), sim.clone(), out.clone(), join.clone());
        let units = units.clone();
        sim.clone().spawn_task(async move {
            for (j, step) in units.into_iter().enumerate() {
                let param = (i as i64 + 1) * 1000 + j as i64;
                match step {
                    Step::Query(kind, drop_after) => {
                        let got = query(&client, &sim, kind, param, drop_after).await;
                        sim.log(|| format!("caller {i}: unit {param} ({kind:?}) got {got:?}"));
                        let shared = true;
                        out.borrow_mut().records.push(Record {
                            param,
                            kind,
                            got,
                            shared,
                        });
                    }
                    Step::Session(kind, drop_after) => {
                        let work = on_session(&client, kind, param);
                        let got = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(Got::Dropped),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: session unit {param} got {got:?}"));
                        let shared = false;
                        out.borrow_mut().records.push(Record {
                            param,
                            kind,
                            got,
                            shared,
                        });
                    }
                    Step::Tx(kind, commit, drop_after) => {
                        let work = transaction(&client, kind, param, commit);
                        let t = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(TxRecord {
                                param,
                                commit,
                                got: Got::Dropped,
                                end: TxEnd::NotReached,
                            }),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: transaction {t:?}"));
                        out.borrow_mut().txs.push(t);
                    }
                    Step::TxCommitWith(kind, drop_after) => {
                        let work = transaction_commit_with(&client, kind, param);
                        let t = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d)).await.unwrap_or(TxRecord {
                                param,
                                commit: true,
                                got: Got::Dropped,
                                end: TxEnd::NotReached,
                            }),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: transaction with its commit {t:?}"));
                        out.borrow_mut().txs.push(t);
                    }
                    Step::Batch(kinds, drop_after) => {
                        let params = [param, param + 500];
                        let work = batch(&client, kinds, params);
                        let got = match drop_after {
                            Some(d) => or_drop(work, sim.sleep(d))
                                .await
                                .unwrap_or(BatchGot::Dropped),
                            None => work.await,
                        };
                        sim.log(|| format!("caller {i}: batch {params:?} got {got:?}"));
                        out.borrow_mut()
                            .batches
                            .push(BatchRecord { params, kinds, got });
                    }
                }
            }
            let mut j = join.borrow_mut();
            j.left -= 1;
            if j.left == 0 {
                if let Some(w) = j.waiter.take() {
                    w.wake();
                }
            }
        });
    }
    let all_done = || {
        std::future::poll_fn(|cx| {
            let mut j = join.borrow_mut();
            if j.left == 0 {
                Poll::Ready(())
            } else {
                j.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    };
    if let Some((after, limit)) = plan.early_close {
        // Close while callers may still be working: what is in flight when the limit passes
        // fails with typed errors, later calls get `Closed`.
        let done = or_drop(all_done(), sim.sleep(after)).await.is_some();
        let open = open_stats(&client, &plan.config);
        sim.log(|| format!("close_within({limit:?}), callers done: {done}"));
        let graceful = client.close_within(limit).await;
        sim.log(|| format!("closed (graceful: {graceful})"));
        all_done().await;
        let mut o = out.borrow_mut();
        o.closed = true;
        o.aborted = !graceful;
        o.client = None;
        o.coalescing = coalescing(&client);
        let end = open.and_then(|()| end_stats(&client, &plan.config, 0, 0));
        o.end_checks = Some(end);
        return;
    }
    all_done().await;
    let open = open_stats(&client, &plan.config);
    sim.log(|| "callers done; closing".into());
    client.close().await;
    sim.log(|| "closed".into());
    let mut o = out.borrow_mut();
    o.closed = true;
    o.client = None;
    o.coalescing = coalescing(&client);
    let answered = |f: fn(&Got) -> bool| {
        let shared = o.records.iter().filter(|r| r.shared);
        shared.filter(|r| f(&r.got)).count() as u64
    };
    let (values, db_errors) = (
        answered(|g| matches!(g, Got::Value(_))),
        answered(|g| matches!(g, Got::Db(_))),
    );
    let end = open.and_then(|()| end_stats(&client, &plan.config, values, db_errors));
    o.end_checks = Some(end);
}
