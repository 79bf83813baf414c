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
use crate::proto::StatementCache;
use crate::row::Row;
use crate::sched::{lock, DeferredWakes, Waiter};
use crate::stats::Counters;
use crate::{DbError, Error, Reason};

pub(crate) use framing::{begin_text, Framing, PendingBegin};
pub(crate) use mailbox::SpaceWaiter;
pub(crate) use order::{Order, Ticket};
pub(crate) use queued::Queued;
pub(crate) use statements::{CacheEntry, CostTable, Prepare, PrepareError, Statement};

mod framing;
mod mailbox;
mod order;
mod queued;
pub(crate) mod sinks;
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

/// Each statement's result of an atomic batch, or the batch's error.
pub(crate) type BatchWaiter = Waiter<Result<Vec<QueryResult>, Error>>;

/// An atomic batch in flight: its statements' results as they complete, and its caller.
pub(crate) struct BatchUnit {
    pub(crate) done: Mutex<Vec<QueryResult>>,
    pub(crate) waiter: BatchWaiter,
}

impl BatchUnit {
    /// A batch of `n` statements.
    pub(crate) fn new(n: usize) -> BatchUnit {
        BatchUnit {
            done: Mutex::new(Vec::with_capacity(n)),
            waiter: BatchWaiter::new(),
        }
    }
}

/// Who is waiting for a unit.
pub(crate) enum Token {
    Query(Arc<QueryWaiter>),
    Batch(Arc<BatchUnit>),
    Prepare(Arc<Prepare>),
    Stream(Arc<crate::driver::shared::sinks::RowSink>),
    CopyOut(Arc<crate::driver::shared::sinks::Sink<bytes::Bytes>>),
    CopyIn(Arc<crate::driver::shared::sinks::CopyInShared>),
    /// COPY data: written and never answered, so nobody waits on it.
    Data,
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
    /// An exclusive connection parked idle in its pool: its task retires it once it has been
    /// unused for `idle_timeout`.
    pub(crate) pooled: bool,
    /// The server this connection is open to (host, port), for the spans of the units queued
    /// here: with a host list it need not be the first.
    #[cfg(feature = "tracing")]
    pub(crate) server: Option<(Arc<str>, u16)>,
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

/// Notices (NoticeResponse: `RAISE NOTICE`, the server's warnings) an exclusive connection's
/// holder has not taken; bounded, the oldest dropped first.
#[derive(Default)]
pub(crate) struct Notices {
    pub(crate) items: VecDeque<DbError>,
    pub(crate) dropped: u64,
    /// The holder's first unit (by queue position): notices of earlier units (a previous
    /// holder's COMMIT, answered after the connection was handed on) are not its own.
    pub(crate) from: u64,
}

/// Notices kept per holder before the oldest is dropped.
pub(crate) const NOTICE_BACKLOG: usize = 1_000;

/// One connection as callers see it.
pub(crate) struct ConnShared {
    pub(crate) state: Mutex<State>,
    pub(crate) counters: Counters,
    /// Signalled when the task has exited.
    pub(crate) exited: Event,
    /// Signalled when the connection opens (or reopens), and when the service closes: units
    /// waiting for a live connection look again (`Client::wait_for_live`).
    pub(crate) live: Event,
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
    /// An exclusive connection was released with work still running: cancel it, bounded
    /// (see [`ConnShared::request_cancel`])...
    pub(crate) cancel_abandoned: AtomicBool,
    /// ...the units from this one on (those before it belong to earlier holders: a previous
    /// holder's COMMIT must not be cancelled)...
    pub(crate) cancel_after: AtomicU64,
    /// ...up to this one (excluded): units after it, a later holder's, wait in the mailbox
    /// until the cancel is acknowledged, so it cannot reach them.
    pub(crate) cancel_until: AtomicU64,
    /// Units ever queued here that the server answers with a ReadyForQuery (all but COPY
    /// data): on an exclusive connection, where no unit shares a Sync, equal to
    /// `counters.ready_received` once every one is answered.
    pushed: AtomicU64,
    /// An exclusive connection ran something that may have changed session state (see
    /// `Client::note_statement`), or the server reported a changed parameter: its release
    /// resets the session.
    pub(crate) session_changed: AtomicBool,
    pub(crate) notifications: Mutex<Notifications>,
    pub(crate) notices: Mutex<Notices>,
    pub(crate) mailbox_size: usize,
    /// A [`Role`]; set when an on-demand connection is opened.
    role: AtomicU8,
    /// The task's last pump stopped at the in-flight work limit with units still queued: the
    /// backend has a full share of server work and more is waiting (the overflow signal).
    pub(crate) work_bound: AtomicBool,
    /// The task's last pump left units queued behind the one Sync this connection may have
    /// outstanding (behind a transaction pooler: `driver/conn/path.rs`): another client
    /// connection to the pooler would carry them now (the overflow signal there).
    pub(crate) sync_bound: AtomicBool,
    /// A session/transaction connection (set at creation).
    exclusive: bool,
    /// Makes this connection's statement names its own (see `start_prepare`).
    nonce: u64,
    /// On-demand slots: the client's gate of held fast units, released by this connection's
    /// completions.
    pub(crate) gate: Option<Arc<Gate>>,
    /// Called when the task exits: the client's budget of connections has room again.
    pub(crate) on_exit: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
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
                status: Status::Dead(Reason::from(crate::error::Fault::NotConnected)),
                space_waiters: VecDeque::new(),
                reserved: 0,
                pooled: false,
                #[cfg(feature = "tracing")]
                server: None,
            }),
            counters: Counters::default(),
            exited: Event::new(),
            live: Event::new(),
            exited_flag: AtomicBool::new(false),
            open_flag: AtomicBool::new(false),
            abort_flag: AtomicBool::new(false),
            tx_status: AtomicU8::new(b'I'),
            cancel_abandoned: AtomicBool::new(false),
            cancel_after: AtomicU64::new(0),
            cancel_until: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
            session_changed: AtomicBool::new(false),
            notifications: Mutex::new(Notifications::default()),
            notices: Mutex::new(Notices::default()),
            mailbox_size,
            role: AtomicU8::new(Role::Base as u8),
            work_bound: AtomicBool::new(false),
            sync_bound: AtomicBool::new(false),
            exclusive,
            // 48 bits: names stay short, and connections of different clients behind one
            // pooler practically never meet the same one.
            nonce: fastrand::u64(..) & 0xffff_ffff_ffff,
            gate: None,
            on_exit: std::sync::OnceLock::new(),
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

    /// Whether this client's connections may sit behind a transaction-mode pooler, as far as
    /// the client knows: statements are not kept by name, or a connection's probe found a
    /// pooler (`driver/conn/path.rs`).
    pub(crate) fn pooler_known(&self) -> bool {
        self.costs.pooler_known()
    }

    /// Whether a connection of this client proved its path to the server direct.
    pub(crate) fn direct_seen(&self) -> bool {
        self.costs.direct_seen()
    }

    /// Records that this connection's probe proved its path direct.
    pub(crate) fn found_direct(&self) {
        self.costs.found_direct();
    }

    /// Records that this connection found a pooler in between; `true` the first time for
    /// the client.
    pub(crate) fn found_pooler(&self) -> bool {
        self.costs.found_pooler()
    }

    /// Whether server work, not round trips, limits this connection (see `work_bound`).
    pub(crate) fn is_work_bound(&self) -> bool {
        self.work_bound.load(Relaxed)
    }

    /// Whether units wait behind this connection's one outstanding Sync (see `sync_bound`).
    pub(crate) fn is_sync_bound(&self) -> bool {
        self.sync_bound.load(Relaxed)
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
        self.set_status(
            &mut st,
            Status::Dead(Reason::from(crate::error::Fault::Opening)),
        );
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
        if let Some(hook) = self.on_exit.get() {
            hook();
        }
    }

    /// Parks an exclusive connection idle in its pool; its task may now retire it (and arms
    /// its idle timer when woken through `wakes`).
    pub(crate) fn pool_idle(&self, wakes: &mut DeferredWakes) {
        let mut st = lock(&self.state);
        st.pooled = true;
        if let Some(w) = st.task_waker.clone() {
            wakes.push(w);
        }
    }

    /// Takes an idle exclusive connection from its pool for a holder; `false` if it retired
    /// (or died) meanwhile. Under the connection's lock, as the task's retirement is.
    pub(crate) fn unpool(&self) -> bool {
        let mut st = lock(&self.state);
        st.pooled = false;
        matches!(st.status, Status::Open)
    }

    /// Stops accepting work; the task drains what was accepted, then closes.
    pub(crate) fn begin_close(&self) {
        let mut wakes = DeferredWakes::default();
        self.begin_close_into(&mut wakes);
        wakes.wake_all();
    }

    /// [`ConnShared::begin_close`], the wakeups deferred into `wakes`.
    pub(crate) fn begin_close_into(&self, wakes: &mut DeferredWakes) {
        {
            let mut st = lock(&self.state);
            // A connection that is reconnecting must stop trying too.
            if matches!(st.status, Status::Open | Status::Retiring | Status::Dead(_)) {
                self.set_status(&mut st, Status::Closing);
            }
            // Callers waiting for room must see the new status.
            self.wake_waiters(&mut st, wakes);
            if let Some(w) = st.task_waker.take() {
                wakes.push(w);
            }
        }
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

    /// Units queued here that the server answers with a ReadyForQuery, ever.
    pub(crate) fn units_pushed(&self) -> u64 {
        self.pushed.load(Relaxed)
    }

    /// Asks the task to cancel the units `from..until` (by queue position) of an exclusive
    /// connection, bounded (`driver/cancel.rs`): abandoned by their holder. Widens a request
    /// already pending. The task's wakeup goes to `wakes`.
    pub(crate) fn request_cancel(&self, from: u64, until: u64, wakes: &mut DeferredWakes) {
        if self.cancel_abandoned.load(Acquire) {
            self.cancel_after.fetch_min(from, Relaxed);
            self.cancel_until.fetch_max(until, Relaxed);
        } else {
            self.cancel_after.store(from, Relaxed);
            self.cancel_until.store(until, Relaxed);
        }
        self.cancel_abandoned.store(true, Release);
        if let Some(w) = lock(&self.state).task_waker.clone() {
            wakes.push(w);
        }
    }

    /// A new holder takes the exclusive connection: the notifications and notices the previous
    /// one left untaken were its own, and go.
    pub(crate) fn forget_previous_holder(&self) {
        {
            let mut q = lock(&self.notifications);
            q.items.clear();
            q.dropped = 0;
            q.waker = None;
        }
        *lock(&self.notices) = Notices {
            from: self.units_pushed(),
            ..Notices::default()
        };
    }

    /// Units queued and not yet answered by their ReadyForQuery (exclusive connections).
    pub(crate) fn units_unanswered(&self) -> u64 {
        let pushed = self.pushed.load(Relaxed);
        pushed.saturating_sub(self.counters.ready_received.load(Acquire))
    }

    /// The server's transaction status (`b'I'`, `b'T'`, `b'E'`) after every unit queued so
    /// far, if each of them has been answered; `None` while some are outstanding. Meant for
    /// the holder of an exclusive connection, the only one queueing units on it (no unit
    /// there shares a Sync, so each has its own ReadyForQuery).
    pub(crate) fn settled_tx_status(&self) -> Option<u8> {
        let pushed = self.pushed.load(Relaxed);
        // A count that includes the last ReadyForQuery implies its status (stored first).
        let ready = self.counters.ready_received.load(Acquire);
        (ready == pushed).then(|| self.tx_status.load(Relaxed))
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
