//! Bounded cancellation of abandoned work on an exclusive connection.
//!
//! When a session or transaction is released while its statements still run (the holder
//! dropped their futures), the connection task sends the server a CancelRequest for its backend
//! and gives the backend [`CANCEL_BOUND`] to finish the abandoned units. If it does not, the
//! connection is closed, and the pool opens a new one when it is next needed, so the next
//! holder never inherits a busy backend. A CancelRequest names a backend, not a statement:
//! that is why it is sent only after release, when everything queued behind the abandoned
//! units is the release's own reset (whose failure only means the connection is replaced), and
//! never on the shared path, where it would hit a stranger's unit.
//!
//! A cancel is asynchronous on the server: the postmaster signals the backend and then closes
//! the cancel connection. Until that close is seen, the signal may still land on whatever the
//! backend runs next, so the connection task writes nothing new (the next holder's statements
//! wait in the queue) from the moment the request is sent until the server has closed it. A
//! signal that arrives while the backend waits for a command is ignored by the server; one
//! that hits the release's reset fails it, and the connection is replaced.
//!
//! Bounded: at most one cancel per connection at a time, at most [`MAX_CANCELS`] in flight per
//! client, and no reconnect loop (a closed exclusive connection is reopened only on demand).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::rt::{Runtime, Socket, Target};

/// How long an abandoned statement may run after its cancel before the connection is closed.
pub(crate) const CANCEL_BOUND: Duration = Duration::from_secs(2);
/// Cancels one client may have in flight at once (each opens a short connection to the server).
pub(crate) const MAX_CANCELS: usize = 2;
/// The CancelRequest code (1234 in the high half, 5678 in the low half).
const CANCEL_CODE: i32 = 80_877_102;

/// A client-wide count of cancels in flight.
#[derive(Default)]
pub(crate) struct CancelBudget(AtomicUsize);

impl CancelBudget {
    fn take(&self) -> bool {
        self.0
            .fetch_update(Relaxed, Relaxed, |n| (n < MAX_CANCELS).then_some(n + 1))
            .is_ok()
    }
    fn give_back(&self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

enum Step<R: Runtime> {
    Connecting(R::Connect),
    Writing(R::Socket, usize),
    /// Sent: waiting for the server to close the connection, which it does once the backend
    /// has been signalled.
    Acknowledging(R::Socket),
    Closing(R::Socket),
}

/// One CancelRequest on its own short connection; its budget is returned when it is dropped.
pub(crate) struct Cancel<R: Runtime> {
    step: Option<Step<R>>,
    message: [u8; 16],
    budget: Arc<CancelBudget>,
}

impl<R: Runtime> Drop for Cancel<R> {
    fn drop(&mut self) {
        self.budget.give_back();
    }
}

impl<R: Runtime> Cancel<R> {
    /// Starts cancelling backend `pid` (with its secret `key`), if the client's budget allows.
    pub(crate) fn start(
        rt: &R,
        target: &Target,
        (pid, key): (i32, i32),
        budget: &Arc<CancelBudget>,
    ) -> Option<Cancel<R>> {
        if !budget.take() {
            return None;
        }
        let mut message = [0u8; 16];
        message[..4].copy_from_slice(&16i32.to_be_bytes());
        message[4..8].copy_from_slice(&CANCEL_CODE.to_be_bytes());
        message[8..12].copy_from_slice(&pid.to_be_bytes());
        message[12..].copy_from_slice(&key.to_be_bytes());
        Some(Cancel {
            step: Some(Step::Connecting(rt.connect(target))),
            message,
            budget: budget.clone(),
        })
    }

    /// Whether the request may have reached the server (so its signal may still be coming).
    pub(crate) fn sent(&self) -> bool {
        match &self.step {
            None | Some(Step::Connecting(_)) | Some(Step::Writing(_, 0)) => false,
            Some(_) => true,
        }
    }

    /// Drives the request; `Ready` when the server has acknowledged it by closing the
    /// connection (or it could not be sent: the bound still holds).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.step.take() {
                None => return Poll::Ready(()),
                Some(Step::Connecting(mut fut)) => match Pin::new(&mut fut).poll(cx) {
                    Poll::Ready(Ok(sock)) => self.step = Some(Step::Writing(sock, 0)),
                    Poll::Ready(Err(_)) => return Poll::Ready(()),
                    Poll::Pending => {
                        self.step = Some(Step::Connecting(fut));
                        return Poll::Pending;
                    }
                },
                Some(Step::Writing(mut sock, at)) => {
                    match sock.poll_write(cx, &self.message[at..]) {
                        Poll::Ready(Ok(n)) if n > 0 && at + n < self.message.len() => {
                            self.step = Some(Step::Writing(sock, at + n));
                        }
                        Poll::Ready(Ok(n)) if n > 0 => self.step = Some(Step::Acknowledging(sock)),
                        Poll::Ready(_) => return Poll::Ready(()),
                        Poll::Pending => {
                            self.step = Some(Step::Writing(sock, at));
                            return Poll::Pending;
                        }
                    }
                }
                Some(Step::Acknowledging(mut sock)) => {
                    let mut byte = [0u8; 1];
                    match sock.poll_read(cx, &mut byte) {
                        // The server sends nothing back: any byte is read past, EOF or an
                        // error ends the wait.
                        Poll::Ready(Ok(n)) if n > 0 => self.step = Some(Step::Acknowledging(sock)),
                        Poll::Ready(_) => self.step = Some(Step::Closing(sock)),
                        Poll::Pending => {
                            self.step = Some(Step::Acknowledging(sock));
                            return Poll::Pending;
                        }
                    }
                }
                Some(Step::Closing(mut sock)) => match sock.poll_close(cx) {
                    Poll::Pending => {
                        self.step = Some(Step::Closing(sock));
                        return Poll::Pending;
                    }
                    Poll::Ready(_) => return Poll::Ready(()),
                },
            }
        }
    }
}
