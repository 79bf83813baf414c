//! The byte stream under the protocol: the runtime's socket, plain or through TLS.
//!
//! rustls is itself sans-IO: ciphertext read from the socket is fed in, plaintext comes out,
//! and plaintext written goes out as ciphertext. So TLS sits here, between the connection task
//! and the adapter's socket, and every runtime gets it with no adapter code. The task's
//! batching carries over: one pumped batch becomes one `write` into rustls, i.e. as few TLS
//! records (of up to 16 KiB) as the batch needs, and one socket write.

use std::io::{self, Read, Write};
use std::task::{ready, Context, Poll};

use crate::rt::Socket;

/// Ciphertext read from the socket per call: enough for a few full TLS records.
const CIPHER_CHUNK: usize = 64 * 1024;
/// A TLS record carries at most this much plaintext (the figure behind `tls_records_out`).
pub(crate) const MAX_RECORD: usize = 16 * 1024;

/// A connection's stream: plaintext, or TLS over the socket.
pub(crate) enum Transport<S> {
    Plain(S),
    Tls(Box<Tls<S>>),
}

/// A TLS session over a socket, with its ciphertext staged in both directions.
pub(crate) struct Tls<S> {
    sock: S,
    conn: rustls::ClientConnection,
    /// Ciphertext received and not yet handed to rustls (it takes what it has room for).
    cin: Vec<u8>,
    cin_pos: usize,
    /// Ciphertext produced and not yet written to the socket.
    cout: Vec<u8>,
    cout_pos: usize,
    /// The peer's end of stream was seen on the socket.
    eof: bool,
}

impl<S: Socket> Transport<S> {
    /// Starts TLS over `sock`; the handshake runs in [`Transport::poll_handshake`].
    pub(crate) fn tls(sock: S, conn: rustls::ClientConnection) -> Self {
        Transport::Tls(Box::new(Tls {
            sock,
            conn,
            cin: Vec::with_capacity(CIPHER_CHUNK),
            cin_pos: 0,
            cout: Vec::with_capacity(CIPHER_CHUNK),
            cout_pos: 0,
            eof: false,
        }))
    }

    /// Whether the stream is encrypted.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// The server's end-entity certificate (DER), once a TLS handshake is done.
    pub(crate) fn peer_certificate(&self) -> Option<&[u8]> {
        match self {
            Transport::Tls(t) => t.conn.peer_certificates()?.first().map(|c| c.as_ref()),
            Transport::Plain(_) => None,
        }
    }

    /// Drives the TLS handshake to its end (immediately ready for a plain stream). A failed
    /// certificate check comes back as an `io::Error` wrapping the `rustls::Error`.
    pub(crate) fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Transport::Tls(t) = self else {
            return Poll::Ready(Ok(()));
        };
        loop {
            t.encrypt_pending()?;
            let flushed = t.poll_flush_cipher(cx)?.is_ready();
            if !t.conn.is_handshaking() {
                return if flushed {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                };
            }
            if !t.conn.wants_read() {
                if flushed {
                    continue;
                }
                return Poll::Pending;
            }
            if !ready!(t.poll_feed(cx))? {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                )));
            }
        }
    }

    /// Reads plaintext; `Ok(0)` is the end of the stream.
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Plain(s) => s.poll_read(cx, buf),
            Transport::Tls(t) => t.poll_read(cx, buf),
        }
    }

    /// Writes plaintext. For TLS, `Ready(n)` means `n` bytes were encrypted and queued; what the
    /// socket did not take yet goes out with the next write, read or [`Transport::poll_flush`].
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Plain(s) => s.poll_write(cx, buf),
            Transport::Tls(t) => t.poll_write(cx, buf),
        }
    }

    /// Pushes queued ciphertext to the socket (a no-op for a plain stream, which queues nothing).
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Plain(_) => Poll::Ready(Ok(())),
            Transport::Tls(t) => t.poll_flush_cipher(cx),
        }
    }

    /// Sends TLS close_notify (best effort) and shuts the socket down.
    pub(crate) fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Plain(s) => s.poll_close(cx),
            Transport::Tls(t) => {
                if !t.eof {
                    t.conn.send_close_notify();
                    t.encrypt_pending()?;
                    ready!(t.poll_flush_cipher(cx))?;
                    t.eof = true;
                }
                t.sock.poll_close(cx)
            }
        }
    }
}

impl<S: Socket> Tls<S> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // Alerts and key updates must go out even while nothing else is written.
            self.encrypt_pending()?;
            let _ = self.poll_flush_cipher(cx)?;
            if !ready!(self.poll_feed(cx))? {
                // The socket ended without close_notify: a truncated stream.
                return Poll::Ready(Ok(0));
            }
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // Backpressure: accept more only when the previous ciphertext is on its way.
        ready!(self.poll_flush_cipher(cx))?;
        let n = self.conn.writer().write(buf)?;
        self.encrypt_pending()?;
        let _ = self.poll_flush_cipher(cx)?;
        Poll::Ready(Ok(n))
    }

    /// Moves everything rustls wants to send into the ciphertext buffer.
    fn encrypt_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.cout)?;
        }
        Ok(())
    }

    fn poll_flush_cipher(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.cout_pos < self.cout.len() {
            match ready!(self.sock.poll_write(cx, &self.cout[self.cout_pos..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.cout_pos += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.cout.clear();
        self.cout_pos = 0;
        Poll::Ready(Ok(()))
    }

    /// Gives rustls more ciphertext: staged bytes first, else a socket read. `Ready(false)` at
    /// the end of the socket's stream.
    fn poll_feed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if self.cin_pos == self.cin.len() {
            if self.eof {
                return Poll::Ready(Ok(false));
            }
            self.cin_pos = 0;
            self.cin.resize(CIPHER_CHUNK, 0);
            let n = match self.sock.poll_read(cx, &mut self.cin) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => {
                    self.cin.clear();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {
                    self.cin.clear();
                    return Poll::Pending;
                }
            };
            self.cin.truncate(n);
            if n == 0 {
                self.eof = true;
                // Let rustls see the end, so a close_notify already received reads as a clean end.
                let _ = self.conn.read_tls(&mut io::empty());
                return Poll::Ready(Ok(false));
            }
        }
        let mut staged = &self.cin[self.cin_pos..];
        let before = staged.len();
        self.conn.read_tls(&mut staged)?;
        self.cin_pos += before - staged.len();
        if let Err(e) = self.conn.process_new_packets() {
            // Tell the server why (the alert rustls queued), then fail.
            let _ = self.encrypt_pending();
            let _ = self.poll_flush_cipher(cx);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(true))
    }
}
