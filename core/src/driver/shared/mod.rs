//! The state one connection shares between callers and its task: the mailbox of encoded units,
//! the statement cache, the coalesced wakeup of the task, and the counters.
//!
//! Callers encode their unit directly into the mailbox buffer while holding its lock (no
//! per-query buffer). The task moves whole units from the mailbox into its write buffer.
//!
//! Here: the connection's status and role, its lifecycle flags and notifications. Submission
//! and backpressure live in `mailbox.rs`, prepared statements and their estimates in
//! `statements.rs`.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};

use crate::driver::types::TypeCache;
use std::task::Waker;

use bytes::BytesMut;
use event_listener::Event;

pub(crate) use crate::proto::timing::{nanos, DEFAULT_COST_NS};
use crate::proto::{StatementCache, UnitKind};
use crate::row::Row;
use crate::sched::{lock, DeferredWakes, Waiter};
use crate::stats::Counters;
use crate::{Error, Reason};

pub(crate) use mailbox::SpaceWaiter;
pub(crate) use statements::{CacheEntry, CostTable, Prepare, PrepareError, Statement};

mod mailbox;
mod statements;

/// The result of one executed unit.
#[derive(Debug)]
pub(crate) struct QueryResult {
    /// Rows returned.
    pub rows: Vec<Row>,
    /// Rows affected according to the command tag.
    pub affected: u64,
    /// The command tag's first word.
    pub verb: crate::proto::pipeline::Verb,
}

pub(crate) type QueryWaiter = Waiter<Result<QueryResult, Error>>;

/// Who is waiting for a unit.
pub(crate) enum Token {
    Query(Arc<QueryWaiter>),
    Prepare(Arc<Prepare>),
    Stream(Arc<crate::driver::sinks::RowSink>),
    CopyOut(Arc<crate::driver::sinks::Sink<bytes::Bytes>>),
    CopyIn(Arc<crate::driver::sinks::CopyInShared>),
    /// COPY data: written and never answered, so nobody waits on it.
    Data,
}

pub(crate) struct Queued {
    pub(crate) len: usize,
    pub(crate) token: Token,
    pub(crate) kind: UnitKind,
    pub(crate) closes: bool,
    /// The estimate this unit added to the connection's pending cost.
    pub(crate) cost: u64,
    /// The statement executed, whose estimate the completion updates.
    pub(crate) stmt: Option<Arc<Statement>>,
}

#[derive(Clone)]
pub(crate) enum Status {
    Open,
    /// An on-demand connection closing because it sat unused: callers that still reach it get
    /// `NotDispatched` with [`Reason::retired`] and go elsewhere.
    Retiring,
    Closing,
    Closed,
    Dead(Reason),
}

/// What a pipelined connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Role {
    /// One of the `pipeline_size` connections, kept open (reconnected when it dies).
    Base = 0,
    /// Opened on demand for statements estimated slow.
    Lane = 1,
    /// Opened on demand when queued server work saturates the base connections.
    Overflow = 2,
}

pub(crate) struct State {
    /// Encoded units not yet taken by the task; only `..committed` is valid.
    pub(crate) buf: BytesMut,
    pub(crate) committed: usize,
    pub(crate) queue: VecDeque<Queued>,
    pub(crate) statements: StatementCache<CacheEntry>,
    next_statement: u64,
    pub(crate) task_waker: Option<Waker>,
    pub(crate) wake_pending: bool,
    pub(crate) status: Status,
    /// Callers waiting for mailbox room, oldest first.
    pub(crate) space_waiters: VecDeque<Arc<SpaceWaiter>>,
    /// Slots granted to waiters that have not pushed their unit yet.
    pub(crate) reserved: usize,
}

/// A NOTIFY delivered to a session that LISTENs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Process id of the notifying backend.
    pub process_id: i32,
    /// Channel name.
    pub channel: String,
    /// Payload (empty when none was given).
    pub payload: String,
}

/// Notifications not yet taken by the session; bounded, the oldest dropped first.
#[derive(Default)]
pub(crate) struct Notifications {
    pub(crate) items: VecDeque<Notification>,
    pub(crate) waker: Option<Waker>,
    pub(crate) dropped: u64,
}

/// Notifications kept per session before the oldest is dropped.
pub(crate) const NOTIFICATION_BACKLOG: usize = 10_000;

/// One connection as callers see it.
pub(crate) struct ConnShared {
    pub(crate) state: Mutex<State>,
    pub(crate) counters: Counters,
    /// Signalled when the task has exited.
    pub(crate) exited: Event,
    pub(crate) exited_flag: AtomicBool,
    /// The client's cost estimates, shared by its connections.
    costs: Arc<CostTable>,
    /// Types resolved from the server, shared by the client's connections.
    types: Arc<TypeCache>,
    /// Mirrors `status == Open` so routing never takes the lock.
    open_flag: AtomicBool,
    /// Set by `abort()`: the task fails everything at its next tick.
    pub(crate) abort_flag: AtomicBool,
    /// Transaction status from the last ReadyForQuery (`b'I'`, `b'T'`, `b'E'`).
    pub(crate) tx_status: AtomicU8,
    /// An exclusive connection was released with work still running: cancel it, bounded.
    pub(crate) cancel_abandoned: AtomicBool,
    /// Units ever queued here; each gets one ReadyForQuery (`counters.ready_received`).
    pushed: AtomicU64,
    /// `pushed` just after the last ROLLBACK queued by [`ConnShared::submit_rollback_now`].
    rollback_mark: AtomicU64,
    pub(crate) notifications: Mutex<Notifications>,
    pub(crate) mailbox_size: usize,
    /// A [`Role`]; set when an on-demand connection is opened.
    role: AtomicU8,
    /// The task's last pump stopped at the in-flight work limit with units still queued: the
    /// backend has a full share of server work and more is waiting (the overflow signal).
    pub(crate) work_bound: AtomicBool,
    /// A session/transaction connection (set at creation).
    exclusive: bool,
    /// Makes this connection's statement names its own (see `start_prepare`).
    nonce: u64,
    /// On-demand slots: the client's gate of held fast units, released by this connection's
    /// completions.
    pub(crate) gate: Option<Arc<Gate>>,
}

impl ConnShared {
    pub(crate) fn new(
        mailbox_size: usize,
        cache_size: usize,
        costs: Arc<CostTable>,
        types: Arc<TypeCache>,
        exclusive: bool,
    ) -> ConnShared {
        ConnShared {
            costs,
            types,
            state: Mutex::new(State {
                buf: BytesMut::with_capacity(8 * 1024),
                committed: 0,
                queue: VecDeque::with_capacity(mailbox_size.min(1024)),
                statements: StatementCache::new(cache_size),
                next_statement: 0,
                task_waker: None,
                wake_pending: false,
                status: Status::Dead("not connected yet".into()),
                space_waiters: VecDeque::new(),
                reserved: 0,
            }),
            counters: Counters::default(),
            exited: Event::new(),
            exited_flag: AtomicBool::new(false),
            open_flag: AtomicBool::new(false),
            abort_flag: AtomicBool::new(false),
            tx_status: AtomicU8::new(b'I'),
            cancel_abandoned: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            rollback_mark: AtomicU64::new(u64::MAX),
            notifications: Mutex::new(Notifications::default()),
            mailbox_size,
            role: AtomicU8::new(Role::Base as u8),
            work_bound: AtomicBool::new(false),
            exclusive,
            // 48 bits: names stay short, and connections of different clients behind one
            // pooler practically never meet the same one.
            nonce: fastrand::u64(..) & 0xffff_ffff_ffff,
            gate: None,
        }
    }

    /// A slot for an on-demand connection: no task, closed until [`ConnShared::reserve`].
    /// Its completions release the units `gate` holds.
    pub(crate) fn parked(
        mailbox_size: usize,
        cache_size: usize,
        costs: Arc<CostTable>,
        types: Arc<TypeCache>,
        gate: Arc<Gate>,
    ) -> Self {
        let mut c = ConnShared::new(mailbox_size, cache_size, costs, types, false);
        c.gate = Some(gate);
        // A caller racing with a retirement may still reach the slot: it must be retried.
        c.set_status(&mut lock(&c.state), Status::Dead(Reason::retired()));
        c.exited_flag.store(true, Release);
        c
    }

    /// Whether server work, not round trips, limits this connection (see `work_bound`).
    pub(crate) fn is_work_bound(&self) -> bool {
        self.work_bound.load(Relaxed)
    }

    /// What this connection is for.
    pub(crate) fn role(&self) -> Role {
        match self.role.load(Relaxed) {
            1 => Role::Lane,
            2 => Role::Overflow,
            _ => Role::Base,
        }
    }

    /// Claims a parked slot for a new connection task with `role`. `false` if the slot is in
    /// use (its task has not exited) or the service is closing (checked under the slot's lock,
    /// so `close()` either sees the claim and waits for the task, or the claim sees the close).
    pub(crate) fn reserve(&self, role: Role, service_closing: &AtomicBool) -> bool {
        let mut st = lock(&self.state);
        if !self.has_exited() || service_closing.load(Acquire) {
            return false;
        }
        self.role.store(role as u8, Relaxed);
        self.exited_flag.store(false, Release);
        self.set_status(&mut st, Status::Dead("opening".into()));
        true
    }

    /// Estimated server work queued and in flight on this connection, in ns.
    pub(crate) fn pending_cost(&self) -> u64 {
        self.counters.est_pending_ns.load(Relaxed)
    }

    /// Load used for routing: units queued plus in flight.
    pub(crate) fn load(&self) -> u64 {
        self.counters.queued.load(Relaxed) + self.counters.in_flight.load(Relaxed)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open_flag.load(Relaxed)
    }

    /// Why the connection is down, while it is (reconnecting or dead).
    pub(crate) fn down_reason(&self) -> Option<Reason> {
        match &lock(&self.state).status {
            Status::Dead(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Changes the status (the caller holds the state lock).
    pub(crate) fn set_status(&self, st: &mut State, status: Status) {
        let open = matches!(status, Status::Open);
        if self.open_flag.swap(open, Relaxed) != open {
            crate::observe::connection_open(self.role_name(), open);
        }
        st.status = status;
    }

    /// What the connection is for, as metrics and traces name it.
    pub(crate) fn role_name(&self) -> &'static str {
        match (self.exclusive, self.role()) {
            (true, _) => "exclusive",
            (false, Role::Base) => "base",
            (false, Role::Lane) => "lane",
            (false, Role::Overflow) => "overflow",
        }
    }

    pub(crate) fn has_exited(&self) -> bool {
        self.exited_flag.load(Acquire)
    }

    pub(crate) fn mark_exited(&self) {
        self.exited_flag.store(true, Release);
        self.exited.notify(usize::MAX);
    }

    /// Stops accepting work; the task drains what was accepted, then closes.
    pub(crate) fn begin_close(&self) {
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            // A connection that is reconnecting must stop trying too.
            if matches!(st.status, Status::Open | Status::Retiring | Status::Dead(_)) {
                self.set_status(&mut st, Status::Closing);
            }
            // Callers waiting for room must see the new status.
            self.wake_waiters(&mut st, &mut wakes);
            if let Some(w) = st.task_waker.take() {
                wakes.push(w);
            }
        }
        wakes.wake_all();
    }

    /// Wakes the connection task (a streaming consumer made room, or went away).
    pub(crate) fn wake_task(&self) {
        let w = lock(&self.state).task_waker.clone();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Fails everything at once: the task fails sent units as `Indeterminate` and queued ones as
    /// `NotDispatched` at its next tick, then closes the socket.
    pub(crate) fn abort(&self) {
        self.abort_flag.store(true, Release);
        let mut wakes = DeferredWakes::default();
        {
            let mut st = lock(&self.state);
            if matches!(st.status, Status::Open | Status::Retiring | Status::Closing) {
                self.set_status(&mut st, Status::Closing);
            }
            // Callers waiting for room must see the new status.
            self.wake_waiters(&mut st, &mut wakes);
            if let Some(w) = st.task_waker.take() {
                wakes.push(w);
            }
        }
        wakes.wake_all();
    }

    /// Whether this connection may be in a transaction once its queued units have run: the
    /// last ReadyForQuery says so, or units are still outstanding whose outcome could open one
    /// (a dropped future's unit) — unless the last unit queued is a ROLLBACK, which ends any.
    /// Meant for the holder of an exclusive connection, the only one queueing units on it.
    pub(crate) fn may_be_in_transaction(&self) -> bool {
        let pushed = self.pushed.load(Relaxed);
        if self.rollback_mark.load(Relaxed) == pushed {
            return false;
        }
        // A count that includes the last ReadyForQuery implies its status (stored first).
        let ready = self.counters.ready_received.load(Acquire);
        ready != pushed || self.tx_status.load(Relaxed) != b'I'
    }
}

/// Fast units held back while every lane has slow work queued (see `Client::hold_while_lanes_queue`),
/// and their release: when a lane finishes a unit and has nothing queued behind it any more.
#[derive(Default)]
pub(crate) struct Gate {
    held: Mutex<Vec<Arc<Waiter<()>>>>,
}

impl Gate {
    /// Holds a unit: the returned waiter is unblocked by the next release.
    pub(crate) fn hold(&self) -> Arc<Waiter<()>> {
        let w = Arc::new(Waiter::new());
        lock(&self.held).push(w.clone());
        w
    }

    /// Lets every held unit go (their wakeups deferred into `wakes`).
    pub(crate) fn release_all(&self, wakes: &mut DeferredWakes) {
        let held = std::mem::take(&mut *lock(&self.held));
        for w in held {
            w.unblock((), wakes);
        }
    }
}

fn status_check(s: &Status) -> Result<(), Error> {
    match s {
        Status::Open => Ok(()),
        Status::Retiring => Err(Error::NotDispatched {
            reason: Reason::retired(),
        }),
        Status::Closing | Status::Closed => Err(Error::Closed),
        Status::Dead(reason) => Err(Error::NotDispatched {
            reason: reason.clone(),
        }),
    }
}
