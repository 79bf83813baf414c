//! Where the connection task delivers what streams in: a bounded [`Sink`] of rows or COPY
//! chunks with its consumer's [`Source`], and the state of a COPY-in unit. The task fills them
//! inside its drain; the session-side handles (`stream.rs`, `copy.rs`) read them. When a sink
//! is full the drain pauses and the task stops reading, so TCP holds the server back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::driver::shared::ConnShared;
use crate::sched::{lock, DeferredWakes};
use crate::{Error, Row};

/// The connection task's end of a stream of rows.
pub(crate) type RowSink = Sink<Row>;

/// The connection task's end of a stream of `T` (rows, or COPY data).
pub(crate) struct Sink<T> {
    state: Mutex<SinkState<T>>,
    conn: Arc<ConnShared>,
    capacity: usize,
}

struct SinkState<T> {
    rows: VecDeque<T>,
    /// The unit's end: the affected-row count, or why it failed.
    end: Option<Result<u64, Error>>,
    consumer: Option<Waker>,
    /// The consumer went away: rows are dropped as they come, so the unit still completes.
    abandoned: bool,
    /// Most rows held at once (for tests and stats).
    peak: usize,
}

impl<T> Sink<T> {
    pub(crate) fn new(conn: Arc<ConnShared>, capacity: usize) -> Sink<T> {
        Sink {
            state: Mutex::new(SinkState {
                rows: VecDeque::with_capacity(capacity.min(1024)),
                end: None,
                consumer: None,
                abandoned: false,
                peak: 0,
            }),
            conn,
            capacity: capacity.max(1),
        }
    }

    /// Whether the task may hand over one more row.
    pub(crate) fn has_room(&self) -> bool {
        let st = lock(&self.state);
        st.abandoned || st.rows.len() < self.capacity
    }

    /// A row, from inside the drain; the consumer's wakeup is deferred.
    pub(crate) fn push(&self, row: T, wakes: &mut DeferredWakes) {
        let mut st = lock(&self.state);
        if st.abandoned {
            return;
        }
        st.rows.push_back(row);
        st.peak = st.peak.max(st.rows.len());
        if let Some(w) = st.consumer.take() {
            wakes.push(w);
        }
    }

    /// The unit ended (at its ReadyForQuery, or with its connection).
    pub(crate) fn finish(&self, end: Result<u64, Error>, wakes: &mut DeferredWakes) {
        let mut st = lock(&self.state);
        st.end = Some(end);
        if let Some(w) = st.consumer.take() {
            wakes.push(w);
        }
    }
}

/// The consumer's end of a [`Sink`]: yields items, then the unit's end.
pub(crate) struct Source<T> {
    sink: Arc<Sink<T>>,
    affected: Option<u64>,
    /// The end (or the error) was returned: nothing more comes.
    done: bool,
}

impl<T> Source<T> {
    pub(crate) fn new(sink: Arc<Sink<T>>) -> Self {
        Source {
            sink,
            affected: None,
            done: false,
        }
    }

    pub(crate) fn affected(&self) -> Option<u64> {
        self.affected
    }

    pub(crate) fn peak(&self) -> usize {
        lock(&self.sink.state).peak
    }

    pub(crate) fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut st = lock(&self.sink.state);
        if let Some(item) = st.rows.pop_front() {
            let was_full = st.rows.len() + 1 == self.sink.capacity;
            drop(st);
            if was_full {
                // The task may have stopped at a full sink: let it drain again.
                self.sink.conn.wake_task();
            }
            return Poll::Ready(Some(Ok(item)));
        }
        match st.end.take() {
            Some(Ok(n)) => {
                self.affected = Some(n);
                self.done = true;
                Poll::Ready(None)
            }
            Some(Err(e)) => {
                self.done = true;
                Poll::Ready(Some(Err(e)))
            }
            None => {
                st.consumer = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for Source<T> {
    fn drop(&mut self) {
        let mut st = lock(&self.sink.state);
        if self.done || st.end.is_some() {
            return;
        }
        st.abandoned = true;
        st.rows.clear();
        drop(st);
        self.sink.conn.wake_task();
    }
}

/// The connection task's view of a COPY-in unit.
#[derive(Default)]
pub(crate) struct CopyInShared {
    state: Mutex<CopyInState>,
}

#[derive(Default)]
struct CopyInState {
    /// The server answered CopyInResponse: it waits for data.
    ready: bool,
    end: Option<Result<u64, Error>>,
    waker: Option<Waker>,
}

impl CopyInShared {
    pub(crate) fn ready(&self, wakes: &mut DeferredWakes) {
        let mut st = lock(&self.state);
        st.ready = true;
        if let Some(w) = st.waker.take() {
            wakes.push(w);
        }
    }

    pub(crate) fn finish(&self, end: Result<u64, Error>, wakes: &mut DeferredWakes) {
        let mut st = lock(&self.state);
        st.end = Some(end);
        if let Some(w) = st.waker.take() {
            wakes.push(w);
        }
    }

    /// Ready once the server waits for data (`Ok(false)`) or the unit ended (`Ok(true)`).
    pub(crate) fn poll_started(&self, cx: &mut Context<'_>) -> Poll<Result<bool, Error>> {
        let mut st = lock(&self.state);
        match &st.end {
            Some(Err(_)) => match st.end.take() {
                Some(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Ready(Ok(true)),
            },
            Some(Ok(_)) => Poll::Ready(Ok(true)),
            None if st.ready => Poll::Ready(Ok(false)),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    pub(crate) fn poll_end(&self, cx: &mut Context<'_>) -> Poll<Result<u64, Error>> {
        let mut st = lock(&self.state);
        match st.end.take() {
            Some(end) => Poll::Ready(end),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// An error that ended the unit early (the server rejected a row, or the connection died).
    pub(crate) fn failed(&self) -> Option<Error> {
        let mut st = lock(&self.state);
        match st.end.take() {
            Some(Err(e)) => Some(e),
            other => {
                st.end = other;
                None
            }
        }
    }
}
