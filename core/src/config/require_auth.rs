//! `require_auth` (libpq 16): the authentication methods a server may use. The check runs
//! before any answer to the server's request, so no password, hash or SCRAM proof goes to a
//! server that asked for a method the client does not allow.

use std::fmt;

use crate::Error;

/// An authentication method as `require_auth` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AuthMethod {
    /// A cleartext password (`password`).
    Password = 1,
    /// An MD5 hash of the password (`md5`).
    Md5 = 2,
    /// GSSAPI (`gss`); pgpipe does not implement it, so it is never met.
    Gss = 4,
    /// SSPI (`sspi`); never met either.
    Sspi = 8,
    /// SCRAM-SHA-256, with or without channel binding (`scram-sha-256`).
    ScramSha256 = 16,
    /// No authentication at all: the server accepted the connection without asking (`none`).
    None = 32,
}

const ALL: [(&str, AuthMethod); 6] = [
    ("password", AuthMethod::Password),
    ("md5", AuthMethod::Md5),
    ("gss", AuthMethod::Gss),
    ("sspi", AuthMethod::Sspi),
    ("scram-sha-256", AuthMethod::ScramSha256),
    ("none", AuthMethod::None),
];

impl AuthMethod {
    /// The name `require_auth` uses.
    pub fn name(self) -> &'static str {
        ALL.iter().find(|(_, m)| *m == self).map_or("?", |(n, _)| n)
    }

    /// What the server did, in words, for an error.
    pub(crate) fn requested(self) -> &'static str {
        match self {
            AuthMethod::Password => "asked for a cleartext password",
            AuthMethod::Md5 => "asked for an MD5 password hash",
            AuthMethod::Gss => "asked for GSSAPI authentication",
            AuthMethod::Sspi => "asked for SSPI authentication",
            AuthMethod::ScramSha256 => "asked for SCRAM-SHA-256 authentication",
            AuthMethod::None => "accepted the connection without authentication",
        }
    }
}

/// The methods `require_auth` allows: by default, all of them.
#[derive(Clone, PartialEq, Eq)]
pub struct RequireAuth {
    allowed: u8,
    /// The value as given, for errors (empty: no requirement).
    given: std::sync::Arc<str>,
}

impl Default for RequireAuth {
    fn default() -> Self {
        RequireAuth {
            allowed: u8::MAX,
            given: "".into(),
        }
    }
}

impl fmt::Debug for RequireAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let allowed: Vec<&str> = ALL
            .iter()
            .filter(|(_, m)| self.allows(*m))
            .map(|(n, _)| *n)
            .collect();
        f.debug_struct("RequireAuth")
            .field("allowed", &allowed)
            .finish()
    }
}

impl RequireAuth {
    /// Parses libpq's syntax: methods separated by commas, all of them allowed, or all prefixed
    /// with `!`, all of them refused (`!password,!md5`). Empty: every method.
    pub fn parse(value: &str) -> Result<RequireAuth, Error> {
        let bad = |why: String| Error::Config(format!("require_auth={value:?}: {why}"));
        if value.trim().is_empty() {
            return Ok(RequireAuth::default());
        }
        let (mut listed, mut negated) = (0u8, None);
        for part in value.split(',').map(str::trim) {
            let (neg, name) = match part.strip_prefix('!') {
                Some(n) => (true, n),
                None => (false, part),
            };
            if negated.is_some_and(|n| n != neg) {
                return Err(bad(
                    "negative methods (with `!`) cannot be mixed with positive ones".into(),
                ));
            }
            negated = Some(neg);
            let Some(&(_, method)) = ALL.iter().find(|(n, _)| *n == name) else {
                return Err(bad(format!(
                    "{name:?} is not a method (password, md5, gss, sspi, scram-sha-256, none)"
                )));
            };
            if listed & method as u8 != 0 {
                return Err(bad(format!("{name:?} is named more than once")));
            }
            listed |= method as u8;
        }
        let allowed = match negated {
            Some(true) => !listed,
            _ => listed,
        };
        if allowed & (ALL.iter().fold(0, |a, (_, m)| a | *m as u8)) == 0 {
            return Err(bad("it allows no method at all".into()));
        }
        Ok(RequireAuth {
            allowed,
            given: value.trim().into(),
        })
    }

    /// Whether `method` is allowed.
    pub fn allows(&self, method: AuthMethod) -> bool {
        self.allowed & method as u8 != 0
    }

    /// `Err` (an authentication error saying what the server did) unless `method` is allowed.
    pub(crate) fn check(&self, method: AuthMethod) -> Result<(), Error> {
        if self.allows(method) {
            return Ok(());
        }
        Err(Error::auth(format!(
            "require_auth={}, but the server {} (nothing was sent in answer)",
            self.given,
            method.requested()
        )))
    }
}
