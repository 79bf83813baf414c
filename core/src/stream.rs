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

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::time::Instant;

use postgres_types::ToSql;

use crate::driver::shared::sinks::{RowSink, Source};
use crate::driver::shared::{ConnShared, Framing};
use crate::rt::{with_deadline, Runtime};
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
        framing: &Framing<'_>,
    ) -> Result<RowStream<'a>, Error> {
        let rt = self.runtime();
        // In turn before the prepare (see `Client::run_on`).
        with_deadline(rt, deadline, framing.my_turn_or_error()).await?;
        let stmt = with_deadline(rt, deadline, conn.statement(sql)).await?;
        with_deadline(rt, deadline, self.complete_types(conn, &stmt, deadline)).await?;
        stmt.check_param_count(params.len())?;
        let sink = Arc::new(RowSink::new(conn.clone(), STREAM_CAPACITY));
        with_deadline(
            rt,
            deadline,
            conn.submit_stream(&stmt, params, &sink, framing),
        )
        .await?;
        framing.was_queued(conn);
        Ok(RowStream::new(sink))
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
