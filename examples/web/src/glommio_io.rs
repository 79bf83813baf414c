//! hyper 1.x on glommio sockets: `hyper::rt::Read`/`Write` over any futures-io stream
//! (glommio's `TcpStream` is one).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_lite::{AsyncRead, AsyncWrite};

/// Bytes read per call at most: requests are small, and hyper asks again when there is more.
const READ_CHUNK: usize = 8 * 1024;

/// A futures-io stream seen through hyper's I/O traits.
pub struct HyperIo<S> {
    io: S,
    /// Initialized memory to read into, once per connection: a buffer on the stack would be
    /// zeroed on every call, the ones that find nothing to read included.
    chunk: Box<[u8]>,
}

impl<S> HyperIo<S> {
    /// Wraps `io` (one allocation of 8 KiB for its reads).
    pub fn new(io: S) -> HyperIo<S> {
        HyperIo {
            io,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

impl<S: AsyncRead + Unpin> hyper::rt::Read for HyperIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // Read into initialized memory and copy: filling hyper's uninitialized buffer directly
        // would take `unsafe`, and a copy of a request's few hundred bytes costs next to nothing.
        let this = &mut *self;
        let want = buf.remaining().min(this.chunk.len());
        match Pin::new(&mut this.io).poll_read(cx, &mut this.chunk[..want]) {
            Poll::Ready(Ok(n)) => {
                buf.put_slice(&this.chunk[..n]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_close(cx)
    }
}
