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

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};

use crate::driver::shared::sinks::{CopyInShared, Sink, Source};
use crate::driver::shared::{ConnShared, Framing, Ticket, Token};
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
        // The turn is not passed here: the COPY keeps it until its end (`CopyIn::keep_turn`).
        framing.my_turn().await;
        conn.submit_copy(sql, UnitKind::CopyIn, token, framing)
            .await?;
        // From here a drop (of this future, or of the writer) sends CopyFail, so the server
        // never waits for data nobody will send.
        let mut copy = CopyIn {
            conn: conn.clone(),
            shared,
            buf: BytesMut::with_capacity(CHUNK + 5),
            finished: false,
            rest: Bytes::new(),
            sending: None,
            ending: None,
            done_queued: Arc::default(),
            copied: None,
            failure: None,
            turn: None,
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
        framing.was_queued(conn);
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
    /// As a [`futures_sink::Sink`]: what of the last item did not fit in `buf` yet, the
    /// message on its way into the mailbox, and the end once asked for.
    rest: Bytes,
    sending: Option<Pending<()>>,
    ending: Option<Pending<u64>>,
    /// Set once `ending` has queued CopyDone (a drop after that must not send CopyFail).
    done_queued: Arc<std::sync::atomic::AtomicBool>,
    /// The server's count, once the COPY ended through `Sink::poll_close`.
    copied: Option<u64>,
    /// The error that ended the COPY, as every later call returns it (the server's answer
    /// was taken by the first).
    failure: Option<Error>,
    /// A session's turn (`driver/shared/order.rs`): held until CopyDone or CopyFail is
    /// queued, so no statement of the holder lands between the COPY and its data.
    turn: Option<Ticket<'a>>,
    _holder: PhantomData<&'a ()>,
}

/// The error a COPY ended with, once more for a later call.
fn again(e: &Error) -> Error {
    match e {
        Error::Db(d) => Error::Db(d.clone()),
        other => Error::Protocol(format!("the COPY already failed: {other}")),
    }
}

/// A step of a [`CopyIn`] used as a sink, owning what it sends. In a `Mutex` only so that
/// `CopyIn` stays `Sync`: it is reached through `&mut` alone, so never locked.
type Pending<T> = std::sync::Mutex<Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>>;

/// Polls a sink step.
fn poll_step<T>(step: &mut Pending<T>, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
    let fut = match step.get_mut() {
        Ok(f) => f,
        Err(poisoned) => poisoned.into_inner(),
    };
    fut.as_mut().poll(cx)
}

impl CopyIn<'_> {
    /// Adds `data` to the COPY. Data is sent in chunks; when the connection's mailbox is full
    /// this waits for it to send, so a fast producer never buffers without bound. Fails early
    /// if the server already rejected the COPY (a malformed row, a constraint).
    pub async fn write(&mut self, mut data: &[u8]) -> Result<(), Error> {
        if let Some(e) = self.ended() {
            return Err(e);
        }
        // Whatever the sink side left on its way goes first.
        if self.sending.is_some() || !self.rest.is_empty() {
            futures_lite::future::poll_fn(|cx| self.poll_sent(cx)).await?;
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

    /// Ends the data (CopyDone) and waits for the server's count of rows copied (after
    /// `Sink::close`, the count it got).
    pub async fn finish(mut self) -> Result<u64, Error> {
        if let Some(n) = self.copied {
            return Ok(n);
        }
        if let Some(e) = &self.failure {
            return Err(again(e));
        }
        if self.ending.is_some() {
            // A `Sink::close` under way: let it end.
            futures_lite::future::poll_fn(|cx| {
                futures_sink::Sink::<Bytes>::poll_close(Pin::new(&mut self), cx)
            })
            .await?;
            return Ok(self.copied.unwrap_or(0));
        }
        futures_lite::future::poll_fn(|cx| self.poll_sent(cx)).await?;
        if !self.buf.is_empty() {
            self.send_chunk().await?;
        }
        self.conn.submit_data(&[b'c', 0, 0, 0, 4]).await?;
        self.finished = true;
        self.turn = None;
        futures_lite::future::poll_fn(|cx| self.shared.poll_end(cx)).await
    }

    async fn send_chunk(&mut self) -> Result<(), Error> {
        let len = (self.buf.len() - 1) as u32;
        self.buf[1..5].copy_from_slice(&len.to_be_bytes());
        // The mailbox copies the message: the buffer is reused for the next one, not
        // reallocated per chunk.
        if let Err(e) = self.conn.submit_data(&self.buf).await {
            return Err(self.fail(e));
        }
        self.buf.clear();
        Ok(())
    }
}

impl<'a> CopyIn<'a> {
    /// Keeps the session's `turn` until the COPY's end is queued.
    pub(crate) fn keep_turn(&mut self, turn: Ticket<'a>) {
        self.turn = Some(turn);
    }

    /// The COPY ended with `e`: every later call returns it too.
    fn fail(&mut self, e: Error) -> Error {
        self.finished = true;
        self.failure = Some(again(&e));
        e
    }

    /// Whether the COPY has ended (failed, or its end queued): the error to return then.
    fn ended(&mut self) -> Option<Error> {
        if let Some(e) = &self.failure {
            return Some(again(e));
        }
        if let Some(e) = self.shared.failed() {
            return Some(self.fail(e));
        }
        (self.finished || self.done_queued.load(std::sync::atomic::Ordering::Relaxed))
            .then(|| Error::Protocol("the COPY has ended: no more data".into()))
    }
}

impl CopyIn<'_> {
    /// Drives the sink's message on its way, then starts the next one while a whole message
    /// (or a remainder) is waiting: `Ready` when nothing is on its way.
    fn poll_sent(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        loop {
            if let Some(f) = self.sending.as_mut() {
                let r = std::task::ready!(poll_step(f, cx));
                self.sending = None;
                if let Err(e) = r {
                    return Poll::Ready(Err(self.fail(e)));
                }
            }
            if !self.rest.is_empty() && self.buf.len() < CHUNK + 5 {
                if self.buf.is_empty() {
                    self.buf.put_u8(b'd');
                    self.buf.put_u32(0);
                }
                let n = (CHUNK + 5 - self.buf.len()).min(self.rest.len());
                self.buf.extend_from_slice(&self.rest.split_to(n));
            }
            if self.buf.len() < CHUNK + 5 {
                return Poll::Ready(Ok(()));
            }
            self.send_buffered();
        }
    }

    /// Sends what `buf` holds as one CopyData message, by a future that owns it.
    fn send_buffered(&mut self) {
        let len = (self.buf.len() - 1) as u32;
        self.buf[1..5].copy_from_slice(&len.to_be_bytes());
        let msg = self.buf.split().freeze();
        let conn = self.conn.clone();
        let send = async move { conn.submit_data(&msg).await };
        self.sending = Some(std::sync::Mutex::new(Box::pin(send)));
    }
}

/// A COPY's data as a sink of chunks (`futures::SinkExt::send_all` and the like): the same
/// bounded path as [`CopyIn::write`]. `close` ends the data and waits for the server's answer;
/// [`CopyIn::finish`] then returns the count of rows copied.
impl futures_sink::Sink<Bytes> for CopyIn<'_> {
    type Error = Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        if let Some(e) = this.ended() {
            return Poll::Ready(Err(e));
        }
        this.poll_sent(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), Error> {
        let this = self.get_mut();
        if !this.rest.is_empty() {
            return Err(Error::Protocol(
                "CopyIn: start_send without poll_ready (the sink protocol)".into(),
            ));
        }
        this.rest = item;
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_sent(cx))?;
        if this.buf.len() > 5 {
            this.send_buffered();
            return this.poll_sent(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.copied.is_some() {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = &self.failure {
            return Poll::Ready(Err(again(e)));
        }
        if self.ending.is_none() {
            std::task::ready!(self.as_mut().poll_flush(cx))?;
            let this = self.as_mut().get_mut();
            let (conn, shared) = (this.conn.clone(), this.shared.clone());
            let queued = this.done_queued.clone();
            let end = async move {
                conn.submit_data(&[b'c', 0, 0, 0, 4]).await?;
                queued.store(true, std::sync::atomic::Ordering::Relaxed);
                futures_lite::future::poll_fn(|cx| shared.poll_end(cx)).await
            };
            this.ending = Some(std::sync::Mutex::new(Box::pin(end)));
        }
        let this = self.get_mut();
        let Some(ending) = this.ending.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = std::task::ready!(poll_step(ending, cx));
        this.ending = None;
        this.turn = None;
        match r {
            Ok(n) => {
                this.finished = true;
                this.copied = Some(n);
                Poll::Ready(Ok(()))
            }
            Err(e) => Poll::Ready(Err(this.fail(e))),
        }
    }
}

impl Drop for CopyIn<'_> {
    fn drop(&mut self) {
        if self.finished || self.done_queued.load(std::sync::atomic::Ordering::Relaxed) {
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
