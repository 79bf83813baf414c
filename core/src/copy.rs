//! COPY on exclusive connections: [`CopyIn`] writes data into `COPY ... FROM STDIN`,
//! [`CopyOut`] reads the chunks of `COPY ... TO STDOUT`, in any format the statement names
//! (text, CSV or binary; `crate::binary_copy` encodes and decodes binary rows).
//!
//! Both are bounded end to end. Copy-out rows go through the same bounded buffer as streamed
//! rows (`stream.rs`): when the consumer lags, the connection stops reading and TCP holds the
//! server. Copy-in data is queued in the connection's mailbox in chunks of [`CHUNK`] bytes, at
//! most `COPY_DATA_QUEUED` (4) of them at once: past that, [`CopyIn::write`] waits for the
//! connection to send, so a COPY in holds a few hundred KiB of data in the client, not a
//! mailbox full of chunks.
//! COPY on the shared path is refused by the guard (it is not a plain statement).

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};

use crate::driver::shared::sinks::{CopyInShared, Sink, Source};
use crate::driver::shared::{ConnShared, Framing, Token};
use crate::proto::UnitKind;
use crate::rt::Runtime;
use crate::{Client, Error};

/// Copy-in data is sent in CopyData messages of about this size.
pub(crate) const CHUNK: usize = 64 * 1024;
/// CopyData messages a copy-out buffers before the connection stops reading.
const COPY_OUT_CAPACITY: usize = 256;

impl<R: Runtime> Client<R> {
    /// Starts `COPY ... FROM STDIN` on `conn`, returning once the server waits for data.
    pub(crate) async fn copy_in_on<'a>(
        &self,
        conn: &Arc<ConnShared>,
        sql: &str,
        framing: &Framing<'_>,
    ) -> Result<CopyIn<'a>, Error> {
        let shared = Arc::new(CopyInShared::default());
        let token = Token::CopyIn(shared.clone());
        framing.my_turn().await;
        conn.submit_copy(sql, UnitKind::CopyIn, token, framing)
            .await?;
        framing.was_queued();
        // From here a drop (of this future, or of the writer) sends CopyFail, so the server
        // never waits for data nobody will send.
        let mut copy = CopyIn {
            conn: conn.clone(),
            shared,
            buf: BytesMut::with_capacity(CHUNK + 5),
            finished: false,
            _holder: PhantomData,
        };
        let shared = copy.shared.clone();
        let started = futures_lite::future::poll_fn(|cx| shared.poll_started(cx)).await;
        match started {
            Ok(false) => Ok(copy),
            Ok(true) => {
                copy.finished = true;
                Err(Error::Protocol(
                    "the statement ended without asking for COPY data: copy_in() takes a \
                     COPY ... FROM STDIN statement"
                        .into(),
                ))
            }
            Err(e) => {
                copy.finished = true;
                Err(e)
            }
        }
    }

    /// Starts `COPY ... TO STDOUT` on `conn`.
    pub(crate) async fn copy_out_on<'a>(
        &self,
        conn: &Arc<ConnShared>,
        sql: &str,
        framing: &Framing<'_>,
    ) -> Result<CopyOut<'a>, Error> {
        let sink = Arc::new(Sink::new(conn.clone(), COPY_OUT_CAPACITY));
        let token = Token::CopyOut(sink.clone());
        framing.my_turn().await;
        conn.submit_copy(sql, UnitKind::CopyOut, token, framing)
            .await?;
        framing.was_queued();
        Ok(CopyOut {
            source: Source::new(sink),
            _holder: PhantomData,
        })
    }
}

/// Data for a `COPY ... FROM STDIN`, from [`crate::Session::copy_in`]. Write the data in the
/// format the statement names, then call [`CopyIn::finish`]. Dropping it unfinished aborts
/// the COPY (nothing is copied) and leaves the connection usable.
pub struct CopyIn<'a> {
    conn: Arc<ConnShared>,
    shared: Arc<CopyInShared>,
    /// The CopyData message being filled: a 5-byte header, then data.
    buf: BytesMut,
    finished: bool,
    _holder: PhantomData<&'a ()>,
}

impl CopyIn<'_> {
    /// Adds `data` to the COPY. Data is sent in chunks; when the connection's mailbox is full
    /// this waits for it to send, so a fast producer never buffers without bound. Fails early
    /// if the server already rejected the COPY (a malformed row, a constraint).
    pub async fn write(&mut self, mut data: &[u8]) -> Result<(), Error> {
        if let Some(e) = self.shared.failed() {
            self.finished = true;
            return Err(e);
        }
        while !data.is_empty() {
            if self.buf.is_empty() {
                self.buf.put_u8(b'd');
                self.buf.put_u32(0);
            }
            let room = CHUNK + 5 - self.buf.len();
            let n = room.min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK + 5 {
                self.send_chunk().await?;
            }
        }
        Ok(())
    }

    /// Ends the data (CopyDone) and waits for the server's count of rows copied.
    pub async fn finish(mut self) -> Result<u64, Error> {
        if !self.buf.is_empty() {
            self.send_chunk().await?;
        }
        self.conn.submit_data(&[b'c', 0, 0, 0, 4]).await?;
        self.finished = true;
        futures_lite::future::poll_fn(|cx| self.shared.poll_end(cx)).await
    }

    async fn send_chunk(&mut self) -> Result<(), Error> {
        let len = (self.buf.len() - 1) as u32;
        self.buf[1..5].copy_from_slice(&len.to_be_bytes());
        // The mailbox copies the message: the buffer is reused for the next one, not
        // reallocated per chunk.
        self.conn.submit_data(&self.buf).await?;
        self.buf.clear();
        Ok(())
    }
}

impl Drop for CopyIn<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // CopyFail: the server aborts the COPY and answers with an error nobody waits for.
        let mut msg = BytesMut::with_capacity(32);
        let reason = b"COPY abandoned by the client\0";
        msg.put_u8(b'f');
        msg.put_u32(4 + reason.len() as u32);
        msg.extend_from_slice(reason);
        self.conn.submit_data_now(&msg);
    }
}

/// The data of a `COPY ... TO STDOUT`, from [`crate::Session::copy_out`]: one chunk per
/// CopyData message (a row, in text and CSV). Bounded like [`crate::RowStream`]; dropping it
/// early discards the rest as it arrives.
pub struct CopyOut<'a> {
    source: Source<Bytes>,
    _holder: PhantomData<&'a ()>,
}

impl CopyOut<'_> {
    /// The next chunk; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<Bytes, Error>> {
        futures_lite::future::poll_fn(|cx| self.source.poll_item(cx)).await
    }

    /// Rows copied, once the data has ended.
    pub fn rows_copied(&self) -> Option<u64> {
        self.source.affected()
    }
}

impl futures_lite::Stream for CopyOut<'_> {
    type Item = Result<Bytes, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().source.poll_item(cx)
    }
}
