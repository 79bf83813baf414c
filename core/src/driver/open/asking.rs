//! The questions an opening connection asks the server after its startup, before it serves:
//! its role when it did not report it (`proto::role`, judged against `target_session_attrs`),
//! then the volatile functions of its extensions for the guard (`proto::catalog`).

use std::task::{Context, Poll};

use bytes::BytesMut;

use super::{send, transport_error, Endpoint, Failure, Opened, Opening, State};
use crate::proto::catalog;
use crate::proto::role::{self, Role};
use crate::rt::Runtime;
use crate::Error;

/// What an opening connection asks the server after its startup, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Question {
    /// Its role, when it did not report it (`proto::role`).
    Role,
    /// The volatile functions of its extensions, for the guard (`proto::catalog`).
    Extensions,
}

impl Question {
    fn what(self) -> &'static str {
        match self {
            Question::Role => "its role",
            Question::Extensions => "its extension functions",
        }
    }
}

impl<R: Runtime> Opening<R> {
    /// Started up: done, unless the server's role must be checked and it did not report it
    /// (`Ok(None)`: asking it now).
    pub(super) fn started(
        &mut self,
        done: Opened<R>,
        ep: &Endpoint,
    ) -> Result<Option<Opened<R>>, Failure> {
        if !self.check_role {
            return self.accepted(done);
        }
        let Some(found) = Role::reported(&done.info) else {
            self.ask(done, Question::Role)?;
            return Ok(None);
        };
        self.judge(found, ep)?;
        self.accepted(done)
    }

    /// Started up with an acceptable role: done, unless the extension functions are to be
    /// read (`Ok(None)`: asking now).
    pub(super) fn accepted(&mut self, done: Opened<R>) -> Result<Option<Opened<R>>, Failure> {
        if !self.ask_extensions {
            return Ok(Some(done));
        }
        self.ask(done, Question::Extensions)?;
        Ok(None)
    }

    /// Puts `question` to the server of `done` (sent by [`Opening::poll_asking`]).
    fn ask(&mut self, done: Opened<R>, question: Question) -> Result<(), Failure> {
        let mut out = BytesMut::with_capacity(1024);
        match question {
            Question::Role => role::ask(&mut out),
            Question::Extensions => catalog::ask(&mut out),
        }
        .map_err(Failure::Fatal)?;
        self.rbuf = done.rest;
        self.state = State::Asking {
            transport: done.transport,
            info: done.info,
            out,
            question,
        };
        Ok(())
    }

    /// `Err` when `target_session_attrs` refuses the server.
    fn judge(&self, found: Role, ep: &Endpoint) -> Result<(), Failure> {
        match found.refused_by(ep.target_session_attrs, self.plan.any_role()) {
            None => Ok(()),
            Some(why) => Err(Failure::Fatal(Error::WrongRole {
                server: ep.servers[self.plan.server()].name.clone(),
                why,
            })),
        }
    }

    /// Sends the question and reads its answer. The role is judged (and the extension
    /// functions asked next, if they are to be); the extension functions are published for
    /// the guard (a server that cannot answer leaves the guard to its fixed list, and the
    /// connection serves).
    pub(super) fn poll_asking(
        &mut self,
        cx: &mut Context<'_>,
        ep: &Endpoint,
    ) -> Poll<Result<Opened<R>, Failure>> {
        loop {
            let State::Asking {
                transport,
                out,
                question,
                ..
            } = &mut self.state
            else {
                return Poll::Ready(Err(Failure::Fatal(Error::Protocol(
                    "a question without a connection".into(),
                ))));
            };
            let question = *question;
            if send(transport, cx, out)
                .map_err(|e| Failure::Fatal(Error::Io(e)))?
                .is_pending()
            {
                return Poll::Pending;
            }
            let answered = match question {
                Question::Role => Role::from_answer(&mut self.rbuf).map(|found| found.map(Some)),
                Question::Extensions => catalog::from_answer(&mut self.rbuf).map(|a| {
                    a.map(|answer| {
                        match answer {
                            catalog::Answer::Routines(routines) => ep.extensions.publish(routines),
                            catalog::Answer::Failed(_message) => {
                                #[cfg(feature = "tracing")]
                                tracing::warn!(
                                    message = %_message,
                                    "the server did not list its extension functions; the \
                                     guard refuses only its own list"
                                );
                            }
                        }
                        None
                    })
                }),
            };
            let role = match answered {
                Err(e) => return Poll::Ready(Err(Failure::Fatal(e))),
                Ok(Some(role)) => role,
                Ok(None) => match transport.poll_read(cx, &mut self.chunk) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(Failure::Fatal(Error::Io(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!(
                                "the server closed the connection while asked for {}",
                                question.what()
                            ),
                        )))))
                    }
                    Poll::Ready(Ok(n)) => {
                        self.rbuf.extend_from_slice(&self.chunk[..n]);
                        continue;
                    }
                    Poll::Ready(Err(e)) => {
                        return Poll::Ready(Err(Failure::Fatal(transport_error(e))))
                    }
                    Poll::Pending => return Poll::Pending,
                },
            };
            if let Some(found) = role {
                self.judge(found, ep)?;
            }
            let State::Asking {
                transport, info, ..
            } = std::mem::replace(&mut self.state, State::Gone)
            else {
                unreachable!("matched above")
            };
            let done = Opened {
                transport,
                info,
                rest: std::mem::take(&mut self.rbuf),
                server: self.plan.server(),
            };
            match question {
                Question::Role => match self.accepted(done)? {
                    Some(done) => return Poll::Ready(Ok(done)),
                    // The next question, sent at the top of the loop.
                    None => continue,
                },
                Question::Extensions => return Poll::Ready(Ok(done)),
            }
        }
    }
}
