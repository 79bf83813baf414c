//! Streaming a large result with bounded memory, on an exclusive connection.
//!
//! The rows of a streaming unit go into a [`RowSink`] of fixed capacity as the connection task
//! drains them. When it is full, the drain stops before the next row and the task reads no
//! more from the socket, so TCP flow control holds the server back: memory stays bounded by
//! the sink, the read buffer and the socket buffers, whatever the result's size. Taking a row
//! from a full sink wakes the task again.
//!
//! Not on the shared path: a paused stream holds up every unit queued behind it on its
//! connection, which is acceptable only on a connection its caller has to itself.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use std::time::Instant;

use postgres_types::ToSql;

use crate::client::with_deadline;
use crate::driver::shared::ConnShared;
use crate::rt::Runtime;
use crate::sched::{lock, DeferredWakes};
use crate::{Client, Error, Row};

/// Rows a stream buffers before the connection stops reading.
const STREAM_CAPACITY: usize = 256;

impl<R: Runtime> Client<R> {
    /// Starts streaming `sql` on `conn` (an exclusive connection: see the module docs).
    pub(crate) async fn stream_on<'a>(
        &self,
        conn: &Arc<ConnShared>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Option<Instant>,
    ) -> Result<RowStream<'a>, Error> {
        let rt = self.runtime();
        loop {
            let stmt = with_deadline(rt, deadline, conn.statement(sql)).await?;
            with_deadline(rt, deadline, self.complete_types(conn, &stmt, deadline)).await?;
            if stmt.params().len() != params.len() {
                return Err(Error::ParamCount {
                    expected: stmt.params().len(),
                    given: params.len(),
                });
            }
            let sink = Arc::new(RowSink::new(conn.clone(), STREAM_CAPACITY));
            if with_deadline(rt, deadline, conn.submit_stream(&stmt, params, &sink)).await? {
                return Ok(RowStream::new(sink));
            }
            // Evicted between lookup and submit: prepare again.
        }
    }
}

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

    fn peak(&self) -> usize {
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

/// The rows of one statement, as they arrive: see [`crate::Session::query_stream`]. Memory
/// stays bounded however large the result: at most a few hundred rows are buffered, and the
/// connection stops reading while they are not taken.
///
/// Dropping the stream before its end discards the remaining rows as they arrive; the
/// connection serves its holder's next statement once the server has sent them.
pub struct RowStream<'a> {
    source: Source<Row>,
    _holder: PhantomData<&'a ()>,
}

impl RowStream<'_> {
    pub(crate) fn new(sink: Arc<RowSink>) -> Self {
        RowStream {
            source: Source::new(sink),
            _holder: PhantomData,
        }
    }

    /// The next row; `None` at the end; an error ends the stream (rows before it were valid).
    pub async fn next(&mut self) -> Option<Result<Row, Error>> {
        futures_lite::future::poll_fn(|cx| self.source.poll_item(cx)).await
    }

    /// The command's affected-row count, once the stream has ended.
    pub fn rows_affected(&self) -> Option<u64> {
        self.source.affected()
    }

    /// Most rows the stream held buffered at once.
    pub fn peak_buffered(&self) -> usize {
        self.source.peak()
    }
}

impl futures_lite::Stream for RowStream<'_> {
    type Item = Result<Row, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().source.poll_item(cx)
    }
}
