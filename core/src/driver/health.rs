//! The half-open check: asking the server, from a second connection, whether a silent
//! connection's backend is still working on its units.
//!
//! A connection whose peer went silent (a dropped NAT entry, a stalled middlebox, a partition)
//! can look healthy to TCP for a long time: keepalives and `tcp_user_timeout` catch a peer that
//! stops acknowledging, not one that acknowledges and never answers. On a pipelined connection
//! silence alone proves nothing, since a long statement is silent too. So when a connection has
//! had units in flight and heard nothing for `health_check` (`proto::timing::Silence`), the
//! task opens a short connection (same target, TLS and credentials) and reads the backend's
//! state from `pg_stat_activity`:
//! - `active`: the backend is working; the connection lives, and the wait starts over; unless
//!   it is blocked sending us its answer (`wait_event` ClientWrite) while we have read nothing
//!   for the whole interval (a paused stream is never checked): the answer is not arriving, and
//!   the connection must go;
//! - gone, or idle (in a transaction or not) for at least half the interval: the server waits
//!   for us while we wait for it, so what we sent or what it answered was lost; the connection
//!   is half-open and must go (a backend idle for less may just have answered: the server
//!   reports idle a moment before it flushes its answer, so that is not a verdict);
//! - the check cannot reach the server at all (connect or I/O failure, or no answer within
//!   `connect_timeout`): the path to the server is down; the connection goes too;
//! - the server answers but refuses the check (too many connections, authentication, no
//!   permission to see the state): nothing is known; the wait starts over.
//!
//! - the check's own connection reached a backend other than the one its startup named (its
//!   `pg_backend_pid()` differs from its BackendKeyData): a pooler such as PgBouncer is in
//!   between, and the server's backends are not the client's connections; checks stop for
//!   the connection (keepalives and `tcp_user_timeout` remain).
//!
//! Every verdict that closes the connection is one the server stated or one that the network
//! forced: a slow statement is never mistaken for a dead connection.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use crate::driver::open::{Endpoint, Opened, Opening};
use crate::driver::transport::Transport;
use crate::error::HalfOpen;
use crate::proto::frame::{next_message, SHORT_MESSAGE_MAX};
use crate::rt::Runtime;
use crate::Error;

/// What the server said about a silent connection's backend.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Still running its statement: keep waiting.
    Alive,
    /// The connection is half-open: close it, with this reason.
    HalfOpen(HalfOpen),
    /// The check got no usable answer; try again after another interval.
    Unknown,
    /// The check's own connection reached a backend other than the one its startup named: a
    /// pooler (PgBouncer, ...) stands between client and server, so the server's view of a
    /// backend says nothing about a client connection. Checks stop for this connection.
    Pooled,
}

enum Step<R: Runtime> {
    Opening(Box<Opening<R>>),
    Asking {
        sock: Transport<R::Socket>,
        out: BytesMut,
        rbuf: BytesMut,
        /// Once the row arrived: what the server says of the backend.
        row: Option<Seen>,
        failed: bool,
    },
    /// The verdict is in; say Terminate (once) and close.
    Closing {
        sock: Transport<R::Socket>,
        verdict: Verdict,
        said: bool,
    },
}

/// One check in progress, on its own connection; dropping it closes that connection.
pub(crate) struct Probe<R: Runtime> {
    step: Option<Step<R>>,
    pid: i32,
    /// The backend pid the check's own connection was given at startup.
    own_key: Option<i32>,
    settled: Duration,
    /// When the check gives up: the owner wakes the task by then ([`Probe::deadline`]).
    deadline: Instant,
}

impl<R: Runtime> Probe<R> {
    /// Starts checking backend `pid` through a new connection to `server` of `ep` (the one
    /// the checked connection is on); an idle state counts only once it has held for `settled`.
    pub(crate) fn start(rt: &R, ep: &Endpoint, server: usize, pid: i32, settled: Duration) -> Self {
        let limit = ep.connect_timeout.min(Duration::from_secs(365 * 24 * 3600));
        Probe {
            step: Some(Step::Opening(Box::new(Opening::to(rt, ep, server, true)))),
            pid,
            own_key: None,
            settled,
            deadline: rt.now() + limit,
        }
    }

    /// When the check must be polled again at the latest (its own bound, or its connection's).
    pub(crate) fn deadline(&self) -> Instant {
        match &self.step {
            Some(Step::Opening(o)) => o.deadline().min(self.deadline),
            _ => self.deadline,
        }
    }

    /// Drives the check to its verdict.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, rt: &R, ep: &Endpoint) -> Poll<Verdict> {
        match self.advance(cx, rt, ep) {
            Poll::Ready(v) => Poll::Ready(v),
            Poll::Pending if rt.now() >= self.deadline => {
                Poll::Ready(Verdict::HalfOpen(HalfOpen::NoAnswer(ep.connect_timeout)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn advance(&mut self, cx: &mut Context<'_>, rt: &R, ep: &Endpoint) -> Poll<Verdict> {
        loop {
            match self.step.take() {
                None => return Poll::Ready(Verdict::Unknown),
                Some(Step::Opening(mut opening)) => match opening.poll(cx, rt, ep) {
                    Poll::Pending => {
                        self.step = Some(Step::Opening(opening));
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(open_failed(e)),
                    // Bytes read past the startup's ReadyForQuery belong to the answer.
                    Poll::Ready(Ok(Opened {
                        transport: sock,
                        rest,
                        info,
                        ..
                    })) => {
                        self.own_key = info.backend_key.map(|(pid, _)| pid);
                        let mut out = BytesMut::with_capacity(128);
                        // One row whether or not the backend is there; the check's own
                        // backend pid tells a pooler in between.
                        let sql = format!(
                            "SELECT pg_catalog.pg_backend_pid(), a.pid IS NOT NULL, a.state, \
                             clock_timestamp() - a.state_change >= make_interval(secs => {}), \
                             a.wait_event = 'ClientWrite' FROM (VALUES (1)) AS one \
                             LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = {}",
                            self.settled.as_secs_f64(),
                            self.pid
                        );
                        if frontend::query(&sql, &mut out).is_err() {
                            return Poll::Ready(Verdict::Unknown);
                        }
                        self.step = Some(Step::Asking {
                            sock,
                            out,
                            rbuf: rest,
                            row: None,
                            failed: false,
                        });
                    }
                },
                Some(Step::Asking {
                    mut sock,
                    mut out,
                    mut rbuf,
                    mut row,
                    mut failed,
                }) => match ask(&mut sock, cx, &mut out, &mut rbuf, &mut row, &mut failed) {
                    Poll::Pending => {
                        self.step = Some(Step::Asking {
                            sock,
                            out,
                            rbuf,
                            row,
                            failed,
                        });
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => {
                        return Poll::Ready(Verdict::HalfOpen(HalfOpen::Lost(e)))
                    }
                    Poll::Ready(Ok(())) => {
                        self.step = Some(Step::Closing {
                            sock,
                            verdict: judge(self.pid, self.own_key, failed, row),
                            said: false,
                        });
                    }
                },
                Some(Step::Closing {
                    mut sock,
                    verdict,
                    said,
                }) => {
                    // Terminate is a courtesy: the verdict stands whatever the close does.
                    if !said {
                        let mut bye = BytesMut::with_capacity(5);
                        frontend::terminate(&mut bye);
                        let _ = sock.poll_write(cx, &bye);
                    }
                    return match sock.poll_close(cx) {
                        Poll::Pending => {
                            self.step = Some(Step::Closing {
                                sock,
                                verdict,
                                said: true,
                            });
                            Poll::Pending
                        }
                        Poll::Ready(_) => Poll::Ready(verdict),
                    };
                }
            }
        }
    }
}

/// Writes the query, then reads until ReadyForQuery. `Ok` once the answer is complete.
fn ask<S: crate::rt::Socket>(
    sock: &mut Transport<S>,
    cx: &mut Context<'_>,
    out: &mut BytesMut,
    rbuf: &mut BytesMut,
    row: &mut Option<Seen>,
    failed: &mut bool,
) -> Poll<std::io::Result<()>> {
    use bytes::Buf;
    while !out.is_empty() {
        match sock.poll_write(cx, out) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => out.advance(n),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
    if let Poll::Ready(Err(e)) = sock.poll_flush(cx) {
        return Poll::Ready(Err(e));
    }
    let mut chunk = [0u8; 512];
    loop {
        while let Some(msg) = next_message(rbuf, SHORT_MESSAGE_MAX)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?
        {
            match msg {
                Message::DataRow(body) => {
                    let mut ranges = body.ranges();
                    let mut text = || match ranges.next() {
                        Ok(Some(Some(r))) => {
                            Some(String::from_utf8_lossy(&body.buffer()[r]).into_owned())
                        }
                        _ => None,
                    };
                    *row = Some(Seen {
                        own_pid: text().and_then(|t| t.parse().ok()),
                        found: text().as_deref() == Some("t"),
                        state: text(),
                        settled: text().as_deref() == Some("t"),
                        sending: text().as_deref() == Some("t"),
                    });
                }
                Message::ErrorResponse(_) => *failed = true,
                Message::ReadyForQuery(_) => return Poll::Ready(Ok(())),
                _ => {}
            }
        }
        match sock.poll_read(cx, &mut chunk) {
            Poll::Ready(Ok(0)) => {
                return Poll::Ready(Err(std::io::ErrorKind::UnexpectedEof.into()))
            }
            Poll::Ready(Ok(n)) => rbuf.extend_from_slice(&chunk[..n]),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// A backend as `pg_stat_activity` shows it.
#[derive(Debug)]
struct Seen {
    /// `pg_backend_pid()` of the check's own connection.
    own_pid: Option<i32>,
    /// The backend is listed at all.
    found: bool,
    /// `state`; `None`: NULL (not allowed to see it).
    state: Option<String>,
    /// The state has held for at least half the interval.
    settled: bool,
    /// Blocked sending to the client (`wait_event` ClientWrite).
    sending: bool,
}

/// The verdict on the backend's state as `pg_stat_activity` reported it.
fn judge(pid: i32, own_key: Option<i32>, failed: bool, row: Option<Seen>) -> Verdict {
    if let Some(r) = &row {
        if r.own_pid.is_some() && r.own_pid != own_key {
            return Verdict::Pooled;
        }
    }
    let row = row.and_then(|r| r.found.then_some((r.state, r.settled, r.sending)));
    match (failed, row) {
        (true, _) => Verdict::Unknown,
        (false, None) => Verdict::HalfOpen(HalfOpen::Gone(pid)),
        (false, Some((Some(state), _, true))) if state == "active" => {
            Verdict::HalfOpen(HalfOpen::BlockedSending(pid))
        }
        (false, Some((Some(state), _, false))) if state == "active" => Verdict::Alive,
        (false, Some((Some(state), true, _))) if state.starts_with("idle") => {
            Verdict::HalfOpen(HalfOpen::IdleWhileWaiting { pid, state })
        }
        // Idle only just now, NULL (not allowed to see it), "fastpath function call", ...
        (false, Some(_)) => Verdict::Unknown,
    }
}

/// A check that could not open its connection: the server's refusal tells nothing about the
/// silent connection; a failure to reach the server says the path to it is down.
fn open_failed(e: Error) -> Verdict {
    match e {
        Error::Io(e) => Verdict::HalfOpen(HalfOpen::Unreachable(e)),
        _ => Verdict::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stated_or_forced_loss_condemns_the_connection() {
        let judge = |pid, failed, row| judge(pid, Some(99), failed, row);
        let seen = |state: &str, settled| {
            Some(Seen {
                own_pid: Some(99),
                found: true,
                state: Some(state.to_owned()),
                settled,
                sending: false,
            })
        };
        assert!(matches!(
            judge(7, false, seen("active", true)),
            Verdict::Alive
        ));
        assert!(matches!(
            judge(7, false, seen("active", false)),
            Verdict::Alive
        ));
        let stuck = Seen {
            own_pid: Some(99),
            found: true,
            state: Some("active".into()),
            settled: false,
            sending: true,
        };
        assert!(
            matches!(judge(7, false, Some(stuck)), Verdict::HalfOpen(r) if r.to_string().contains("sending"))
        );
        for state in [
            "idle",
            "idle in transaction",
            "idle in transaction (aborted)",
        ] {
            let v = judge(7, false, seen(state, true));
            assert!(
                matches!(&v, Verdict::HalfOpen(r) if r.to_string().contains(state)),
                "{v:?}"
            );
            // Idle only just now: it may have answered a moment ago.
            assert!(matches!(
                judge(7, false, seen(state, false)),
                Verdict::Unknown
            ));
        }
        assert!(
            matches!(judge(7, false, None), Verdict::HalfOpen(r) if r.to_string().contains("pid 7"))
        );
        let gone = Seen {
            own_pid: Some(99),
            found: false,
            state: None,
            settled: false,
            sending: false,
        };
        assert!(
            matches!(judge(7, false, Some(gone)), Verdict::HalfOpen(r) if r.to_string().contains("no longer"))
        );
        // Through a pooler the check's backend is not the one its startup named.
        let pooled = Seen {
            own_pid: Some(1234),
            found: false,
            state: None,
            settled: false,
            sending: false,
        };
        assert!(matches!(judge(7, false, Some(pooled)), Verdict::Pooled));
        // Not allowed to see the state, a refused query, a state that is neither.
        let hidden = Seen {
            own_pid: Some(99),
            found: true,
            state: None,
            settled: true,
            sending: false,
        };
        assert!(matches!(judge(7, false, Some(hidden)), Verdict::Unknown));
        assert!(matches!(judge(7, true, None), Verdict::Unknown));
        assert!(matches!(
            judge(7, false, seen("fastpath function call", true)),
            Verdict::Unknown
        ));
        assert!(matches!(open_failed(Error::auth("no")), Verdict::Unknown));
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(matches!(open_failed(Error::Io(io)), Verdict::HalfOpen(_)));
    }
}
