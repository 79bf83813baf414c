//! Connection tasks: starting the base and exclusive ones, and opening on-demand (lane and
//! overflow) connections on parked slots, with a pause after one fails to open.

use std::sync::Arc;
use std::time::Instant;

use super::{Adapter, Client, Opened};
use crate::driver::open::Endpoint;
use crate::driver::shared::{ConnShared, CostTable, Role};
use crate::driver::types::TypeCache;
use crate::driver::ConnTask;
use crate::rt::with_deadline;
use crate::rt::Runtime;
use crate::sched::Waiter;
use crate::Error;

/// How long on-demand connections are not tried after one failed to open.
pub(super) const OPEN_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

impl<R: Runtime> Client<R> {
    /// Opens an on-demand connection and waits until it serves; `None` if no slot is free or
    /// it could not be opened (the server may be at its own connection limit).
    pub(super) async fn open_and_wait(
        &self,
        role: Role,
        deadline: Option<Instant>,
    ) -> Option<&Arc<ConnShared>> {
        let rt = &self.inner.rt;
        if crate::sched::lock(&self.inner.open_paused_until).is_some_and(|t| rt.now() < t) {
            return None;
        }
        let (c, opened) = self.open_slot(role)?;
        let ready = with_deadline(
            rt,
            deadline,
            futures_lite::future::poll_fn(|cx| opened.poll_block(cx)),
        )
        .await;
        match ready {
            Ok(()) => Some(c),
            // The caller's deadline, not the connection: it keeps opening for the next caller.
            Err(Error::Timeout) => None,
            Err(_) => {
                *crate::sched::lock(&self.inner.open_paused_until) =
                    Some(rt.now() + OPEN_RETRY_PAUSE);
                None
            }
        }
    }

    /// Claims a parked on-demand slot and starts its connection task.
    pub(super) fn open_slot(&self, role: Role) -> Option<(&Arc<ConnShared>, Opened)> {
        let inner = &*self.inner;
        // Exclusive connections share the budget: lanes and overflow leave them their reserve.
        let c = inner.pinned.admit_on_demand(|| {
            inner
                .on_demand()
                .iter()
                .find(|c| c.reserve(role, &inner.closing))
        })?;
        c.counters.inc(&c.counters.opened_on_demand);
        crate::observe::on_demand_opened(c.role_name());
        Some((c, (inner.open_fn)(&inner.rt, &inner.cfg, c, false)))
    }
}

/// Starts a connection task; the returned waiter reports when it is serving (or why not).
pub(super) fn spawn_connection<R: Adapter>(
    rt: &R,
    cfg: &Arc<Endpoint>,
    exclusive: bool,
    costs: &Arc<CostTable>,
    types: &Arc<TypeCache>,
) -> (Arc<ConnShared>, Arc<Waiter<Result<(), Error>>>) {
    let shared = new_connection(cfg, exclusive, costs, types);
    let opened = start_task(rt, cfg, &shared, exclusive);
    (shared, opened)
}

/// A connection's shared state, before its task is started.
pub(super) fn new_connection(
    cfg: &Arc<Endpoint>,
    exclusive: bool,
    costs: &Arc<CostTable>,
    types: &Arc<TypeCache>,
) -> Arc<ConnShared> {
    Arc::new(ConnShared::new(
        cfg.mailbox_size,
        cfg.statement_cache_size,
        costs.clone(),
        types.clone(),
        exclusive,
    ))
}

pub(super) fn start_task<R: Adapter>(
    rt: &R,
    cfg: &Arc<Endpoint>,
    shared: &Arc<ConnShared>,
    exclusive: bool,
) -> Arc<Waiter<Result<(), Error>>> {
    let opened = Arc::new(Waiter::new());
    rt.spawn(ConnTask::new(
        rt.clone(),
        cfg.clone(),
        shared.clone(),
        exclusive,
        opened.clone(),
    ));
    opened
}
