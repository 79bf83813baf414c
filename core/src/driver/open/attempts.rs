//! Which attempt an opening connection makes next, without I/O: the servers of the host list
//! in turn, TLS or plaintext as `sslmode` says, the other one after the server refused the
//! first, libpq's second round for `prefer-standby`, each attempt's deadline, and the error
//! once every server failed. The answer to the SSLRequest is read here too. [`super::Opening`]
//! does the connecting, the handshake and the startup, and asks this plan what comes next.

use std::time::{Duration, Instant};

use super::{Attempt, Endpoint, Failure};
use crate::config::{SslMode, TargetSessionAttrs};
use crate::{tls, Error};

/// The attempts of one opening connection, and where it is in them.
pub(super) struct Attempts {
    /// The servers to try, in order; `next` indexes it.
    order: Vec<usize>,
    next: usize,
    /// The server of the attempt in progress.
    server: usize,
    attempt: Attempt,
    /// `prefer-standby` went through the list without finding a standby: any server will do.
    any_role: bool,
    /// Why each server tried so far could not be used.
    failures: Vec<(String, Error)>,
    /// The end of the attempt in progress.
    deadline: Instant,
}

/// What comes after a failed attempt.
#[derive(Debug)]
pub(super) enum Next {
    /// Connect again: to [`Attempts::server`], as [`Attempts::attempt`] says, by
    /// [`Attempts::deadline`].
    Connect,
    /// Every server failed: the error to report.
    GiveUp(Error),
}

impl Attempts {
    /// The first attempt at `order[0]`, starting `now`. `order` is not empty.
    pub(super) fn new(ep: &Endpoint, order: Vec<usize>, now: Instant) -> Attempts {
        let server = order[0];
        Attempts {
            order,
            next: 1,
            server,
            attempt: ep.first_attempt(server),
            any_role: false,
            failures: Vec::new(),
            deadline: deadline(ep, now),
        }
    }

    /// The server of the attempt in progress (an index into the endpoint's servers).
    pub(super) fn server(&self) -> usize {
        self.server
    }

    /// TLS or plaintext, for the attempt in progress.
    pub(super) fn attempt(&self) -> Attempt {
        self.attempt
    }

    /// Whether any role is acceptable now (the second round of `prefer-standby`).
    pub(super) fn any_role(&self) -> bool {
        self.any_role
    }

    /// The end of the attempt in progress (`connect_timeout` after it began).
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the attempt in progress ran out of time at `now`.
    pub(super) fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// The server declined TLS and `sslmode=prefer` goes on in plaintext on the same
    /// connection: still the same attempt, with the same deadline.
    pub(super) fn go_plain(&mut self) {
        self.attempt = Attempt::Plain;
    }

    /// The attempt in progress failed at `now`: the other attempt at the same server when the
    /// server refused this one and `sslmode` allows another, else the next server; after the
    /// last, `prefer-standby` goes round once more for any role, and then it gives up.
    pub(super) fn failed(&mut self, ep: &Endpoint, failure: Failure, now: Instant) -> Next {
        let e = match (failure, ep.fallback(self.server, self.attempt)) {
            (Failure::Refused(_), Some(next)) => {
                self.attempt = next;
                self.deadline = deadline(ep, now);
                return Next::Connect;
            }
            (Failure::Refused(e) | Failure::Fatal(e), _) => e,
        };
        self.failures
            .push((ep.servers[self.server].name.clone(), e));
        if self.next == self.order.len()
            && ep.target_session_attrs == TargetSessionAttrs::PreferStandby
            && !self.any_role
        {
            // libpq's prefer-standby: no standby anywhere, so go round again for any server.
            self.any_role = true;
            self.next = 0;
        }
        let Some(&server) = self.order.get(self.next) else {
            return Next::GiveUp(self.all_failed());
        };
        self.next += 1;
        self.server = server;
        self.attempt = ep.first_attempt(server);
        self.deadline = deadline(ep, now);
        Next::Connect
    }

    /// The error once every server failed: a single server's own, else all of them.
    fn all_failed(&mut self) -> Error {
        let mut attempts = std::mem::take(&mut self.failures);
        if attempts.len() == 1 {
            if let Some((_, e)) = attempts.pop() {
                return e;
            }
        }
        Error::NoServer { attempts }
    }
}

/// The end of an attempt begun at `now`. "No timeout" is a very long one: a year keeps every
/// runtime's timer in range.
fn deadline(ep: &Endpoint, now: Instant) -> Instant {
    now + ep.connect_timeout.min(Duration::from_secs(365 * 24 * 3600))
}

/// What the server's answer to the SSLRequest says: go on over TLS, or in plaintext on the
/// same connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SslAnswer {
    Tls,
    Plain,
}

/// Reads the server's answer to the SSLRequest: `read` is everything one read returned after
/// it (empty: the server closed the connection).
pub(super) fn ssl_answer(read: &[u8], mode: SslMode) -> Result<SslAnswer, Failure> {
    let answer = match read {
        [] => {
            return Err(Failure::Refused(Error::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection after the SSLRequest",
            ))))
        }
        [one] => *one,
        // Bytes after the answer were not protected by TLS (CVE-2021-23222).
        _ => {
            return Err(Failure::Fatal(Error::Protocol(
                "the server sent unencrypted data after its answer to the SSLRequest".into(),
            )))
        }
    };
    match answer {
        b'S' => Ok(SslAnswer::Tls),
        // libpq's `prefer`: go on in plaintext on the same connection.
        b'N' if mode == SslMode::Prefer => Ok(SslAnswer::Plain),
        b'N' => Err(Failure::Fatal(Error::tls(format!(
            "the server does not support TLS, and sslmode={} requires it: enable ssl on the \
             server, or use sslmode=prefer",
            tls::mode_name(mode)
        )))),
        // An ErrorResponse: a server too old to know the SSLRequest.
        b'E' => Err(Failure::Refused(Error::tls(
            "the server rejected the SSLRequest (it predates TLS support)",
        ))),
        other => Err(Failure::Fatal(Error::Protocol(format!(
            "unexpected answer {other:#04x} to the SSLRequest"
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn endpoint(conninfo: &str) -> Endpoint {
        let config = Config::parse_with_env(conninfo, |_| None).expect("a valid conninfo");
        Endpoint::new(config).expect("an endpoint")
    }

    fn refused() -> Failure {
        Failure::Refused(Error::Protocol("refused".into()))
    }

    fn fatal(what: &str) -> Failure {
        Failure::Fatal(Error::Protocol(what.into()))
    }

    /// The (server, attempt) of every attempt until the plan gives up, each failing as `fail`
    /// says, and the error it gave up with.
    fn run(
        ep: &Endpoint,
        order: Vec<usize>,
        mut fail: impl FnMut(usize, Attempt) -> Failure,
    ) -> (Vec<(usize, Attempt)>, Error) {
        let t0 = Instant::now();
        let mut plan = Attempts::new(ep, order, t0);
        let mut seen = Vec::new();
        for i in 0..100u32 {
            seen.push((plan.server(), plan.attempt()));
            let now = t0 + Duration::from_secs(u64::from(i));
            match plan.failed(ep, fail(plan.server(), plan.attempt()), now) {
                Next::Connect => assert_eq!(plan.deadline(), now + ep.connect_timeout),
                Next::GiveUp(e) => return (seen, e),
            }
        }
        panic!("the plan never gave up: {seen:?}");
    }

    #[test]
    fn each_server_in_turn_then_every_failure_named() {
        let ep = endpoint("host=a,b,c sslmode=disable connect_timeout=5");
        let (seen, e) = run(&ep, ep.order(), |s, _| fatal(&format!("server {s}")));
        let plain = Attempt::Plain;
        assert_eq!(seen, vec![(0, plain), (1, plain), (2, plain)]);
        match e {
            Error::NoServer { attempts } => {
                let names: Vec<&str> = attempts.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(names, ["a:5432", "b:5432", "c:5432"]);
            }
            other => panic!("expected NoServer, got {other:?}"),
        }
    }

    #[test]
    fn one_server_reports_its_own_error() {
        let ep = endpoint("host=a sslmode=disable");
        let (_, e) = run(&ep, ep.order(), |_, _| fatal("its own"));
        assert!(matches!(&e, Error::Protocol(m) if m == "its own"), "{e:?}");
    }

    #[test]
    fn prefer_falls_back_to_plaintext_only_when_refused() {
        let ep = endpoint("host=a,b sslmode=prefer");
        let (seen, _) = run(&ep, ep.order(), |_, _| refused());
        let (tls, plain) = (Attempt::Tls, Attempt::Plain);
        assert_eq!(seen, vec![(0, tls), (0, plain), (1, tls), (1, plain)]);
        // A failure that is not a refusal (a timeout, a bad certificate) moves on to the next
        // server without trying plaintext.
        let (seen, _) = run(&ep, ep.order(), |_, _| fatal("timed out"));
        assert_eq!(seen, vec![(0, tls), (1, tls)]);
    }

    #[test]
    fn allow_tries_plaintext_first_and_require_never_falls_back() {
        let ep = endpoint("host=a sslmode=allow");
        let (seen, _) = run(&ep, ep.order(), |_, _| refused());
        assert_eq!(seen, vec![(0, Attempt::Plain), (0, Attempt::Tls)]);
        let ep = endpoint("host=a sslmode=require");
        let (seen, _) = run(&ep, ep.order(), |_, _| refused());
        assert_eq!(seen, vec![(0, Attempt::Tls)]);
    }

    #[test]
    fn prefer_standby_goes_round_again_for_any_role() {
        let ep = endpoint("host=a,b sslmode=disable target_session_attrs=prefer-standby");
        let t0 = Instant::now();
        let mut plan = Attempts::new(&ep, ep.order(), t0);
        let mut seen = vec![(plan.server(), plan.any_role())];
        while let Next::Connect = plan.failed(&ep, fatal("not a standby"), t0) {
            seen.push((plan.server(), plan.any_role()));
        }
        assert_eq!(seen, vec![(0, false), (1, false), (0, true), (1, true)]);
        // Any other target_session_attrs goes round once.
        let ep = endpoint("host=a,b sslmode=disable target_session_attrs=primary");
        let (seen, _) = run(&ep, ep.order(), |_, _| fatal("a standby"));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn each_attempt_gets_its_own_deadline() {
        let ep = endpoint("host=a,b sslmode=prefer connect_timeout=3");
        let t0 = Instant::now();
        let mut plan = Attempts::new(&ep, ep.order(), t0);
        assert_eq!(plan.deadline(), t0 + Duration::from_secs(3));
        assert!(!plan.expired(t0 + Duration::from_millis(2999)));
        assert!(plan.expired(t0 + Duration::from_secs(3)));
        // Declining TLS on the same connection keeps the attempt's deadline.
        plan.go_plain();
        assert_eq!(plan.deadline(), t0 + Duration::from_secs(3));
        let t1 = t0 + Duration::from_secs(2);
        assert!(matches!(plan.failed(&ep, fatal("x"), t1), Next::Connect));
        assert_eq!((plan.server(), plan.attempt()), (1, Attempt::Tls));
        assert_eq!(plan.deadline(), t1 + Duration::from_secs(3));
        // No connect_timeout: a deadline a year away, not an overflow.
        let ep = endpoint("host=a sslmode=disable connect_timeout=0");
        let plan = Attempts::new(&ep, ep.order(), t0);
        assert!(plan.deadline() >= t0 + Duration::from_secs(365 * 24 * 3600));
    }

    #[test]
    fn the_answer_to_the_sslrequest() {
        assert_eq!(
            ssl_answer(b"S", SslMode::Require).ok(),
            Some(SslAnswer::Tls)
        );
        assert_eq!(
            ssl_answer(b"N", SslMode::Prefer).ok(),
            Some(SslAnswer::Plain)
        );
        let fatal = |r: Result<SslAnswer, Failure>| matches!(r, Err(Failure::Fatal(_)));
        let refused = |r: Result<SslAnswer, Failure>| matches!(r, Err(Failure::Refused(_)));
        assert!(fatal(ssl_answer(b"N", SslMode::Require)));
        assert!(fatal(ssl_answer(b"N", SslMode::VerifyFull)));
        // Bytes after the answer could be injected by anyone on the path (CVE-2021-23222).
        assert!(fatal(ssl_answer(b"S\x16\x03", SslMode::Require)));
        assert!(fatal(ssl_answer(b"NR", SslMode::Prefer)));
        assert!(fatal(ssl_answer(b"X", SslMode::Prefer)));
        // A server that predates TLS, or closes: refused, so `prefer` may try plaintext.
        assert!(refused(ssl_answer(b"E", SslMode::Prefer)));
        assert!(refused(ssl_answer(b"", SslMode::Prefer)));
    }
}
