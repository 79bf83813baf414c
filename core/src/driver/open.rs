//! Opening one connection: connect, negotiate TLS as `sslmode` says, start up and authenticate.
//!
//! [`Opening`] is polled by the connection task until it yields a ready [`Transport`] and what
//! the server reported. It is a plain state machine over the runtime's connect future and
//! socket; the TLS and startup logic it drives are sans-IO (`crate::tls`, `proto::startup`).
//!
//! Attempts follow libpq: `prefer` tries TLS first and, when the server cannot do TLS or
//! rejects the TLS connection, opens a plaintext one; `allow` does the reverse; `require` and
//! stronger never fall back. A Unix-domain socket never uses TLS (as libpq).

use std::future::Future;
use std::ops::Deref;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use postgres_protocol::message::backend::Message;

use std::sync::Arc;

use super::cancel::CancelBudget;
use super::transport::Transport;
use crate::config::{SslMode, SslNegotiation};
use crate::proto::{Binding, SessionInfo, Startup, Step};
use crate::rt::{Runtime, Socket, Target, TcpOptions};
use crate::tls::{self, TlsConnector};
use crate::{Config, Error};

/// The SSLRequest message: length 8, then the request code 1234/5679.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A service's configuration with what every connection derives from it once: the connect
/// target and the TLS connector (root certificates and keys are loaded once per client).
pub(crate) struct Endpoint {
    config: Config,
    pub(crate) target: Target,
    pub(crate) tls: Option<TlsConnector>,
    /// Cancels in flight for the whole client (see `cancel.rs`).
    pub(crate) cancels: Arc<CancelBudget>,
}

impl Deref for Endpoint {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.config
    }
}

impl Endpoint {
    /// Checks `config` and prepares what connecting needs; fails on unreadable TLS files.
    pub(crate) fn new(config: Config) -> Result<Endpoint, Error> {
        config.validate()?;
        let tls = TlsConnector::new(&config)?;
        Ok(Endpoint {
            target: target_of(&config),
            tls,
            cancels: Arc::default(),
            config,
        })
    }

    /// The configuration this endpoint was made from.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The attempts `sslmode` calls for, in order.
    fn first_attempt(&self) -> Attempt {
        match (&self.tls, self.config.tls.mode) {
            (None, _) | (_, SslMode::Disable | SslMode::Allow) => Attempt::Plain,
            _ => Attempt::Tls,
        }
    }

    /// The attempt after `failed` was refused by the server, if `sslmode` allows one.
    fn fallback(&self, failed: Attempt) -> Option<Attempt> {
        self.tls.as_ref()?;
        match (self.config.tls.mode, failed) {
            (SslMode::Prefer, Attempt::Tls) => Some(Attempt::Plain),
            (SslMode::Allow, Attempt::Plain) => Some(Attempt::Tls),
            _ => None,
        }
    }
}

/// Where to connect for `cfg`: a socket file for a host that is a directory, else TCP.
fn target_of(cfg: &Config) -> Target {
    if let Some(name) = cfg.host.strip_prefix('@') {
        return Target::Abstract(format!("{name}/.s.PGSQL.{}", cfg.port).into_bytes());
    }
    if cfg.host.starts_with('/') {
        return Target::Unix(PathBuf::from(&cfg.host).join(format!(".s.PGSQL.{}", cfg.port)));
    }
    let k = &cfg.keepalives;
    Target::Tcp {
        host: match cfg.hostaddr {
            Some(addr) => addr.to_string(),
            None => cfg.host.clone(),
        },
        port: cfg.port,
        options: TcpOptions {
            keepalive: k.enabled,
            keepalive_idle: k.idle,
            keepalive_interval: k.interval,
            keepalive_count: k.count,
            user_timeout: cfg.tcp_user_timeout,
        },
    }
}

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
    Gone,
}

/// A connection ready to serve, what the server reported during startup, and the bytes it
/// sent after its ReadyForQuery that were read with it (they belong to the connection task:
/// an asynchronous message, or a FATAL, must not be dropped or the stream misaligned).
pub(crate) type Opened<R> = (Transport<<R as Runtime>::Socket>, SessionInfo, BytesMut);

/// One connection being opened, bounded by `connect_timeout` per attempt.
pub(crate) struct Opening<R: Runtime> {
    /// Exclusive connections do not get the shared path's startup settings.
    exclusive: bool,
    attempt: Attempt,
    state: State<R>,
    deadline: R::Sleep,
    rbuf: BytesMut,
    chunk: Box<[u8]>,
}

impl<R: Runtime> Opening<R> {
    pub(crate) fn new(rt: &R, ep: &Endpoint, exclusive: bool) -> Self {
        let attempt = ep.first_attempt();
        Opening {
            exclusive,
            attempt,
            state: State::Connecting(rt.connect(&ep.target)),
            deadline: deadline(rt, ep),
            rbuf: BytesMut::with_capacity(1024),
            chunk: vec![0u8; 8 * 1024].into_boxed_slice(),
        }
    }

    /// Polls the attempt in progress, and starts the fallback attempt when it was refused.
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        rt: &R,
        ep: &Endpoint,
    ) -> Poll<Result<Opened<R>, Error>> {
        loop {
            let err = match self.poll_attempt(cx, ep) {
                Poll::Ready(Ok(done)) => return Poll::Ready(Ok(done)),
                Poll::Ready(Err(e)) => e,
                Poll::Pending => {
                    return match Pin::new(&mut self.deadline).poll(cx) {
                        Poll::Ready(_) => Poll::Ready(Err(timed_out(ep))),
                        Poll::Pending => Poll::Pending,
                    }
                }
            };
            match (err, ep.fallback(self.attempt)) {
                (Failure::Refused(_), Some(next)) => {
                    self.attempt = next;
                    self.state = State::Connecting(rt.connect(&ep.target));
                    self.deadline = deadline(rt, ep);
                    self.rbuf.clear();
                }
                (Failure::Refused(e) | Failure::Fatal(e), _) => return Poll::Ready(Err(e)),
            }
        }
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
                            return Poll::Ready(Err(Failure::Fatal(connect_error(ep, e))))
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    self.state = match (self.attempt, &ep.tls) {
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
                        Poll::Ready(Ok(0)) => {
                            return Poll::Ready(Err(Failure::Refused(Error::Io(
                                std::io::Error::new(
                                    std::io::ErrorKind::UnexpectedEof,
                                    "the server closed the connection after the SSLRequest",
                                ),
                            ))))
                        }
                        Poll::Ready(Ok(n)) => n,
                        Poll::Ready(Err(e)) => {
                            return Poll::Ready(Err(Failure::Fatal(Error::Io(e))))
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    if n > 1 {
                        // Bytes after the answer were not protected by TLS (CVE-2021-23222).
                        return Poll::Ready(Err(Failure::Fatal(Error::Protocol(
                            "the server sent unencrypted data after its answer to the SSLRequest"
                                .into(),
                        ))));
                    }
                    let State::SslRequest { sock, .. } =
                        std::mem::replace(&mut self.state, State::Gone)
                    else {
                        unreachable!("matched above")
                    };
                    self.state = match self.chunk[0] {
                        b'S' => {
                            let tls = ep.tls.as_ref().ok_or_else(|| {
                                Failure::Fatal(Error::Protocol(
                                    "TLS accepted without a connector".into(),
                                ))
                            })?;
                            State::Handshake(Transport::tls(
                                sock,
                                tls.session().map_err(Failure::Fatal)?,
                            ))
                        }
                        b'N' if ep.config().tls.mode == SslMode::Prefer => {
                            // libpq's `prefer`: go on in plaintext on the same connection.
                            self.attempt = Attempt::Plain;
                            self.begin_startup(Transport::Plain(sock), ep)?
                        }
                        b'N' => {
                            return Poll::Ready(Err(Failure::Fatal(Error::Tls(format!(
                                "the server does not support TLS, and sslmode={} requires it: \
                                 enable ssl on the server, or use sslmode=prefer",
                                tls::mode_name(ep.config().tls.mode)
                            )))))
                        }
                        // An ErrorResponse: a server too old to know the SSLRequest.
                        b'E' => {
                            return Poll::Ready(Err(Failure::Refused(Error::Tls(
                                "the server rejected the SSLRequest (it predates TLS support)"
                                    .into(),
                            ))))
                        }
                        other => {
                            return Poll::Ready(Err(Failure::Fatal(Error::Protocol(format!(
                                "unexpected answer {other:#04x} to the SSLRequest"
                            )))))
                        }
                    };
                }
                State::Handshake(transport) => {
                    match transport.poll_handshake(cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => {
                            return Poll::Ready(Err(Failure::Refused(handshake_error(ep, e))))
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
                State::Startup { .. } => return self.poll_startup(cx),
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
            Startup::begin(ep.config(), binding, settings, &mut out).map_err(Failure::Fatal)?,
        );
        self.rbuf.clear();
        Ok(State::Startup {
            transport,
            startup,
            out,
        })
    }

    /// Startup and authentication: write what the state machine asks, read until it is done.
    fn poll_startup(&mut self, cx: &mut Context<'_>) -> Poll<Result<Opened<R>, Failure>> {
        let Opening {
            state, rbuf, chunk, ..
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
            let mut write_blocked = false;
            while !out.is_empty() {
                match transport.poll_write(cx, out) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(io(std::io::ErrorKind::WriteZero.into())))
                    }
                    Poll::Ready(Ok(n)) => out.advance(n),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(io(e))),
                    Poll::Pending => {
                        write_blocked = true;
                        break;
                    }
                }
            }
            if !write_blocked && transport.poll_flush(cx).map_err(io)?.is_pending() {
                write_blocked = true;
            }
            let mut replied = false;
            while let Some(msg) = Message::parse(rbuf)
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
                        return Poll::Ready(Ok((transport, info, std::mem::take(rbuf))));
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

/// How an attempt failed: refused by the server (another attempt may be allowed) or not.
enum Failure {
    Refused(Error),
    Fatal(Error),
}

/// The end of one attempt. "No timeout" is a very long one: a year keeps every runtime's
/// timer in range.
fn deadline<R: Runtime>(rt: &R, ep: &Endpoint) -> R::Sleep {
    let limit = ep.connect_timeout.min(Duration::from_secs(365 * 24 * 3600));
    rt.sleep_until(rt.now() + limit)
}

fn timed_out(ep: &Endpoint) -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "connecting to {} timed out after {:?}",
            ep.target, ep.connect_timeout
        ),
    ))
}

fn connect_error(ep: &Endpoint, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("cannot connect to {}: {e}", ep.target),
    ))
}

/// A failed handshake's `io::Error` carries the `rustls::Error`: explain it.
fn handshake_error(ep: &Endpoint, e: std::io::Error) -> Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls_err) => Error::Tls(tls::explain(tls_err, &ep.host)),
        None if ep
            .tls
            .as_ref()
            .is_some_and(|t| t.negotiation == SslNegotiation::Direct) =>
        {
            Error::Tls(format!(
                "the TLS handshake failed ({e}); sslnegotiation=direct needs PostgreSQL 17 or \
                 later: use sslnegotiation=postgres for older servers"
            ))
        }
        None => Error::Tls(format!("the TLS handshake failed: {e}")),
    }
}

fn transport_error(e: std::io::Error) -> Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls_err) => Error::Tls(format!("TLS error: {tls_err}")),
        None => Error::Io(e),
    }
}
