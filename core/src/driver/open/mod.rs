//! Opening one connection: connect, negotiate TLS as `sslmode` says, start up and authenticate.
//!
//! [`Opening`] is polled by the connection task until it yields a ready [`Transport`] and what
//! the server reported. It is a plain state machine over the runtime's connect future and
//! socket; the TLS and startup logic it drives are sans-IO (`crate::tls`, `proto::startup`),
//! and so is its plan of attempts (`attempts.rs`: which server and attempt next, by when).
//!
//! Attempts follow libpq: `prefer` tries TLS first and, when the server cannot do TLS or
//! rejects the TLS connection, opens a plaintext one; `allow` does the reverse; `require` and
//! stronger never fall back. A Unix-domain socket never uses TLS (as libpq).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, BytesMut};

use super::transport::Transport;
use crate::config::SslNegotiation;
use crate::proto::frame::next_message;
use crate::proto::role;
use crate::proto::{Binding, SessionInfo, Startup, Step};
use crate::rt::{Runtime, Socket};
use crate::tls;
use crate::Error;

mod asking;
mod attempts;
mod endpoint;
mod reached;

use asking::Question;
use attempts::{Attempts, Next, SslAnswer};
pub(crate) use endpoint::Endpoint;
pub(crate) use reached::Reached;

/// The SSLRequest message: length 8, then the request code 1234/5679.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Plain,
    Tls,
}

enum State<R: Runtime> {
    Connecting(R::Connect),
    /// SSLRequest sent (or being sent); waiting for the one-byte answer.
    SslRequest {
        sock: R::Socket,
        sent: usize,
    },
    Handshake(Transport<R::Socket>),
    Startup {
        transport: Transport<R::Socket>,
        startup: Box<Startup>,
        out: BytesMut,
    },
    /// Started up; asking the server a question before serving (its role, the extension
    /// functions), whose answer is read before anything else.
    Asking {
        transport: Transport<R::Socket>,
        info: SessionInfo,
        out: BytesMut,
        question: Question,
    },
    Gone,
}

/// A connection ready to serve: the transport, what the server reported during startup, the
/// bytes it sent after its ReadyForQuery that were read with it (they belong to the connection
/// task: an asynchronous message, or a FATAL, must not be dropped or the stream misaligned),
/// and which server of the host list it is connected to.
pub(crate) struct Opened<R: Runtime> {
    pub(crate) transport: Transport<R::Socket>,
    pub(crate) info: SessionInfo,
    pub(crate) rest: BytesMut,
    pub(crate) server: usize,
}

/// One connection being opened: the servers of the host list in turn, each attempt bounded by
/// `connect_timeout`, until one accepts the connection and has the role
/// `target_session_attrs` asks for.
pub(crate) struct Opening<R: Runtime> {
    /// Exclusive connections do not get the shared path's startup settings.
    exclusive: bool,
    /// Which server and attempt, by when, and what comes after a failure (no I/O).
    plan: Attempts,
    /// Whether the server's role is checked (not for a health check's connection, which goes
    /// to the server it checks whatever its role).
    check_role: bool,
    /// Whether the extension functions are read once started (shared connections).
    ask_extensions: bool,
    state: State<R>,
    rbuf: BytesMut,
    chunk: Box<[u8]>,
}

impl<R: Runtime> Opening<R> {
    /// A connection to the first usable server of the host list.
    pub(crate) fn new(rt: &R, ep: &Endpoint, exclusive: bool) -> Self {
        let mut o = Self::over(rt, ep, exclusive, ep.order(), true);
        o.ask_extensions = !exclusive && !ep.extensions.all_allowed();
        o
    }

    /// A connection to `server` of the host list, whatever its role.
    pub(crate) fn to(rt: &R, ep: &Endpoint, server: usize, exclusive: bool) -> Self {
        Self::over(rt, ep, exclusive, vec![server], false)
    }

    fn over(rt: &R, ep: &Endpoint, exclusive: bool, order: Vec<usize>, check_role: bool) -> Self {
        let plan = Attempts::new(ep, order, rt.now());
        Opening {
            exclusive,
            state: State::Connecting(rt.connect(&ep.servers[plan.server()].target)),
            plan,
            check_role: check_role && role::needed(ep.target_session_attrs),
            ask_extensions: false,
            rbuf: BytesMut::with_capacity(1024),
            chunk: vec![0u8; 8 * 1024].into_boxed_slice(),
        }
    }

    /// Polls the attempt in progress; starts the fallback attempt when it was refused, and the
    /// next server when this one cannot be used.
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        rt: &R,
        ep: &Endpoint,
    ) -> Poll<Result<Opened<R>, Error>> {
        loop {
            let failure = match self.poll_attempt(cx, ep) {
                Poll::Ready(Ok(done)) => return Poll::Ready(Ok(done)),
                Poll::Ready(Err(e)) => e,
                Poll::Pending if self.plan.expired(rt.now()) => {
                    Failure::Fatal(timed_out(ep, self.plan.server()))
                }
                Poll::Pending => return Poll::Pending,
            };
            match self.plan.failed(ep, failure, rt.now()) {
                Next::Connect => {
                    self.state =
                        State::Connecting(rt.connect(&ep.servers[self.plan.server()].target));
                    self.rbuf.clear();
                }
                Next::GiveUp(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// When the attempt in progress times out: poll again by then.
    pub(crate) fn deadline(&self) -> Instant {
        self.plan.deadline()
    }

    fn poll_attempt(
        &mut self,
        cx: &mut Context<'_>,
        ep: &Endpoint,
    ) -> Poll<Result<Opened<R>, Failure>> {
        loop {
            match &mut self.state {
                State::Connecting(fut) => {
                    let sock = match Pin::new(fut).poll(cx) {
                        Poll::Ready(Ok(sock)) => sock,
                        Poll::Ready(Err(e)) => {
                            return Poll::Ready(Err(Failure::Fatal(connect_error(
                                ep,
                                self.plan.server(),
                                e,
                            ))))
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    self.state = match (self.plan.attempt(), &ep.servers[self.plan.server()].tls) {
                        (Attempt::Tls, Some(tls)) if tls.negotiation == SslNegotiation::Direct => {
                            State::Handshake(Transport::tls(
                                sock,
                                tls.session().map_err(Failure::Fatal)?,
                            ))
                        }
                        (Attempt::Tls, Some(_)) => State::SslRequest { sock, sent: 0 },
                        _ => self.begin_startup(Transport::Plain(sock), ep)?,
                    };
                }
                State::SslRequest { sock, sent } => {
                    while *sent < SSL_REQUEST.len() {
                        match sock.poll_write(cx, &SSL_REQUEST[*sent..]) {
                            Poll::Ready(Ok(0)) => {
                                return Poll::Ready(Err(Failure::Fatal(Error::Io(
                                    std::io::ErrorKind::WriteZero.into(),
                                ))))
                            }
                            Poll::Ready(Ok(n)) => *sent += n,
                            Poll::Ready(Err(e)) => {
                                return Poll::Ready(Err(Failure::Fatal(Error::Io(e))))
                            }
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    // Read exactly what is there: the server sends one byte and waits for us.
                    let n = match sock.poll_read(cx, &mut self.chunk) {
                        Poll::Ready(Ok(n)) => n,
                        Poll::Ready(Err(e)) => {
                            return Poll::Ready(Err(Failure::Fatal(Error::Io(e))))
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    let answer = attempts::ssl_answer(&self.chunk[..n], ep.config().tls.mode)?;
                    let State::SslRequest { sock, .. } =
                        std::mem::replace(&mut self.state, State::Gone)
                    else {
                        unreachable!("matched above")
                    };
                    self.state = match answer {
                        SslAnswer::Tls => {
                            let tls =
                                ep.servers[self.plan.server()].tls.as_ref().ok_or_else(|| {
                                    Failure::Fatal(Error::Protocol(
                                        "TLS accepted without a connector".into(),
                                    ))
                                })?;
                            State::Handshake(Transport::tls(
                                sock,
                                tls.session().map_err(Failure::Fatal)?,
                            ))
                        }
                        SslAnswer::Plain => {
                            self.plan.go_plain();
                            self.begin_startup(Transport::Plain(sock), ep)?
                        }
                    };
                }
                State::Handshake(transport) => {
                    match transport.poll_handshake(cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => {
                            return Poll::Ready(Err(Failure::Refused(handshake_error(
                                ep,
                                self.plan.server(),
                                e,
                            ))))
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                    let State::Handshake(transport) =
                        std::mem::replace(&mut self.state, State::Gone)
                    else {
                        unreachable!("matched above")
                    };
                    self.state = self.begin_startup(transport, ep)?;
                }
                State::Startup { .. } => match self.poll_startup(cx, ep.max_message_size) {
                    Poll::Ready(Ok(done)) => {
                        if let Some(done) = self.started(done, ep)? {
                            return Poll::Ready(Ok(done));
                        }
                    }
                    other => return other,
                },
                State::Asking { .. } => return self.poll_asking(cx, ep),
                State::Gone => {
                    return Poll::Ready(Err(Failure::Fatal(Error::Protocol(
                        "connection attempt polled after it ended".into(),
                    ))))
                }
            }
        }
    }

    fn begin_startup(
        &mut self,
        transport: Transport<R::Socket>,
        ep: &Endpoint,
    ) -> Result<State<R>, Failure> {
        let binding = Binding {
            mode: ep.channel_binding,
            end_point: transport.peer_certificate().and_then(tls::end_point_hash),
        };
        let mut out = BytesMut::with_capacity(512);
        let timeout = match (self.exclusive, ep.shared_statement_timeout) {
            (false, Some(t)) => Some(format!("{}ms", t.as_millis())),
            _ => None,
        };
        let settings: &[(&str, &str)] = match &timeout {
            Some(t) => &[("statement_timeout", t.as_str())],
            None => &[],
        };
        let startup = Box::new(
            Startup::begin(
                ep.config(),
                ep.servers[self.plan.server()].password.as_deref(),
                binding,
                settings,
                &mut out,
            )
            .map_err(Failure::Fatal)?,
        );
        self.rbuf.clear();
        Ok(State::Startup {
            transport,
            startup,
            out,
        })
    }

    /// Startup and authentication: write what the state machine asks, read until it is done.
    fn poll_startup(
        &mut self,
        cx: &mut Context<'_>,
        max_message: usize,
    ) -> Poll<Result<Opened<R>, Failure>> {
        let Opening {
            state,
            rbuf,
            chunk,
            plan,
            ..
        } = self;
        let State::Startup {
            transport,
            startup,
            out,
        } = state
        else {
            return Poll::Ready(Err(Failure::Fatal(Error::Protocol(
                "startup without a connection".into(),
            ))));
        };
        let io = |e: std::io::Error| Failure::Fatal(Error::Io(e));
        loop {
            let write_blocked = send(transport, cx, out).map_err(io)?.is_pending();
            let mut replied = false;
            while let Some(msg) = next_message(rbuf, max_message)
                .map_err(|e| Failure::Fatal(Error::Protocol(format!("during startup: {e}"))))?
            {
                let before = out.len();
                match startup.handle(msg, out) {
                    Ok(Step::Done(info)) => {
                        let State::Startup { transport, .. } =
                            std::mem::replace(state, State::Gone)
                        else {
                            unreachable!("matched above")
                        };
                        return Poll::Ready(Ok(Opened {
                            transport,
                            info,
                            rest: std::mem::take(rbuf),
                            server: plan.server(),
                        }));
                    }
                    Ok(Step::Continue) => {}
                    // The server said no: `sslmode` may allow another attempt.
                    Err(e) if startup.rejected() => return Poll::Ready(Err(Failure::Refused(e))),
                    Err(e) => return Poll::Ready(Err(Failure::Fatal(e))),
                }
                replied |= out.len() > before;
            }
            if replied && !write_blocked {
                // Send the reply before waiting for the server's next message.
                continue;
            }
            match transport.poll_read(cx, chunk) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(Failure::Refused(Error::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the server closed the connection during startup",
                    )))))
                }
                Poll::Ready(Ok(n)) => rbuf.extend_from_slice(&chunk[..n]),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(Failure::Fatal(transport_error(e)))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Writes `out` and flushes. `Ready(Ok)` once all of it is out; `Pending` while the socket
/// pushes back (what was written is taken from `out`).
fn send<S: crate::rt::Socket>(
    transport: &mut Transport<S>,
    cx: &mut Context<'_>,
    out: &mut BytesMut,
) -> Result<Poll<()>, std::io::Error> {
    while !out.is_empty() {
        match transport.poll_write(cx, out) {
            Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => out.advance(n),
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(Poll::Pending),
        }
    }
    match transport.poll_flush(cx) {
        Poll::Ready(r) => r.map(Poll::Ready),
        Poll::Pending => Ok(Poll::Pending),
    }
}

/// How an attempt failed: refused by the server (another attempt may be allowed) or not.
enum Failure {
    Refused(Error),
    Fatal(Error),
}

fn timed_out(ep: &Endpoint, server: usize) -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "connecting to {} timed out after {:?}",
            ep.servers[server].target, ep.connect_timeout
        ),
    ))
}

fn connect_error(ep: &Endpoint, server: usize, e: std::io::Error) -> Error {
    let kind = e.kind();
    let failed = ConnectFailed {
        target: ep.servers[server].target.to_string(),
        source: e,
    };
    Error::Io(std::io::Error::new(kind, failed))
}

/// A failed connect, naming where to: its `source()` is the socket's own error, so the chain
/// keeps the OS error (`raw_os_error`) for a program to act on.
#[derive(Debug)]
struct ConnectFailed {
    target: String,
    source: std::io::Error,
}

impl std::fmt::Display for ConnectFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot connect to {}: {}", self.target, self.source)
    }
}

impl std::error::Error for ConnectFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A failed handshake's `io::Error` carries the `rustls::Error`: explain it.
fn handshake_error(ep: &Endpoint, server: usize, e: std::io::Error) -> Error {
    let server = &ep.servers[server];
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls_err) => Error::tls_from(tls::explain(tls_err, &server.host), e),
        None if server
            .tls
            .as_ref()
            .is_some_and(|t| t.negotiation == SslNegotiation::Direct) =>
        {
            let message = format!(
                "the TLS handshake failed ({e}); sslnegotiation=direct needs PostgreSQL 17 or \
                 later: use sslnegotiation=postgres for older servers"
            );
            Error::tls_from(message, e)
        }
        None => Error::tls_from(format!("the TLS handshake failed: {e}"), e),
    }
}

fn transport_error(e: std::io::Error) -> Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls_err) => Error::tls_from(format!("the TLS session failed: {tls_err}"), e),
        None => Error::Io(e),
    }
}
