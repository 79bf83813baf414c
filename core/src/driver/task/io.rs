//! The task's socket work: reading what is available into the connection's buffer and writing
//! what it has to transmit, with the counters the metrics read.

use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use super::ConnTask;
use crate::driver::transport::MAX_RECORD;
use crate::error::Fault;
use crate::rt::Runtime;

/// Bytes read per tick before yielding to the executor, so one busy connection cannot starve it.
const READ_BUDGET: usize = 1 << 20;
/// The size of one read call.
pub(super) const READ_CHUNK: usize = 64 * 1024;

impl<R: Runtime> ConnTask<R> {
    /// The socket reached its end (`None`: EOF) or failed. What was read before it still
    /// completes its units: a server that answers and then closes (a FATAL after the last
    /// ReadyForQuery) must not turn finished units into `Indeterminate` ones.
    pub(super) fn read_ended(&mut self, end: Option<Fault>) -> Poll<()> {
        let (rt, now) = (&self.rt, self.rt.now());
        if let Err(fault) = self.conn.received(now, true, || rt.cpu_sample()) {
            return self.die(fault);
        }
        // After the drain, so a FATAL the server sent before closing names the reason.
        let fault = end.unwrap_or_else(|| self.conn.closed());
        self.die(fault)
    }

    /// Reads until the socket would block or the budget is spent: `Ok((budget spent, got
    /// bytes))`; `Err(None)`: EOF; `Err(Some(fault))`: the read failed.
    pub(super) fn read(&mut self, cx: &mut Context<'_>) -> Result<(bool, bool), Option<Fault>> {
        let mut total = 0usize;
        let Some(sock) = self.socket.as_mut() else {
            return Err(Some(Fault::Read(std::io::ErrorKind::NotConnected.into())));
        };
        let rbuf = self.conn.read_buf();
        let result = loop {
            match sock.poll_read(cx, &mut self.chunk) {
                Poll::Ready(Ok(0)) => break Err(None),
                Poll::Ready(Ok(n)) => {
                    rbuf.extend_from_slice(&self.chunk[..n]);
                    total += n;
                    if total >= READ_BUDGET {
                        break Ok(true);
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => break Err(Some(Fault::Read(e))),
                Poll::Pending => break Ok(false),
            }
        };
        if total > 0 {
            let c = &self.shared.counters;
            c.inc(&c.readable_events);
            c.bytes_in.fetch_add(total as u64, Relaxed);
        }
        result.map(|more| (more, total > 0))
    }

    pub(super) fn write(&mut self, cx: &mut Context<'_>) -> Result<(), Fault> {
        let c = &self.shared.counters;
        let Some(sock) = self.socket.as_mut() else {
            return Err(Fault::Write(std::io::ErrorKind::NotConnected.into()));
        };
        while !self.conn.transmit().is_empty() {
            match sock.poll_write(cx, self.conn.transmit()) {
                Poll::Ready(Ok(0)) => {
                    return Err(Fault::Write(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => {
                    c.inc(&c.write_calls);
                    c.bytes_out.fetch_add(n as u64, Relaxed);
                    if sock.is_tls() {
                        c.tls_records_out
                            .fetch_add(n.div_ceil(MAX_RECORD) as u64, Relaxed);
                    }
                    self.conn.wrote(n);
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => return Err(Fault::Write(e)),
                Poll::Pending => break,
            }
        }
        match sock.poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(Fault::Write(e)),
            _ => Ok(()),
        }
    }
}
