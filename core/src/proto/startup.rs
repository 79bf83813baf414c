//! Startup and authentication as a state machine: feed it backend messages, it writes the
//! replies into a caller-owned buffer. Supports trust, cleartext, md5 and SCRAM-SHA-256.

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl;

use super::scram::{self, Binding as ScramBinding, Scram};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use crate::config::ChannelBinding as BindingMode;
use crate::config::{AuthMethod, RequireAuth};
use crate::proto::pipeline::parse_error_fields;
use crate::{Config, Error};

/// What the transport offers for SCRAM channel binding.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    /// `channel_binding` from the configuration.
    pub mode: BindingMode,
    /// `tls-server-end-point` data when the connection runs over TLS (a hash of the server's
    /// certificate); `None` in plaintext, or when the certificate's algorithm defines none.
    pub end_point: Option<Vec<u8>>,
}

/// What the connection knows after a successful startup.
#[derive(Debug, Clone, Default)]
pub struct SessionInfo {
    /// Server parameters reported by ParameterStatus (`server_version`, `standard_conforming_strings`, ...).
    pub parameters: Vec<(String, String)>,
    /// Backend process id and secret key, for CancelRequest and diagnostics.
    pub backend_key: Option<(i32, i32)>,
}

fn unsupported_method() -> Error {
    Error::auth(
        "the server asks for an authentication method pgpipe does not support (GSSAPI, SSPI, \
         Kerberos or SCM credentials): allow password, md5 or scram-sha-256 for this user in \
         pg_hba.conf",
    )
}

/// Distinct server parameters a connection keeps: PostgreSQL reports about fifteen, and a
/// server that reports more names than this is refused rather than let grow without bound.
pub const MAX_PARAMETERS: usize = 256;

impl SessionInfo {
    /// Records a ParameterStatus: `Ok(true)` if it changed what was known. A value for a name
    /// already known replaces it, so a flood of reports costs no memory; more than
    /// [`MAX_PARAMETERS`] distinct names is an error.
    pub fn set_parameter(&mut self, name: &str, value: &str) -> Result<bool, Error> {
        if let Some((_, v)) = self.parameters.iter_mut().find(|(k, _)| k == name) {
            if v == value {
                return Ok(false);
            }
            v.clear();
            v.push_str(value);
            return Ok(true);
        }
        if self.parameters.len() >= MAX_PARAMETERS {
            return Err(Error::Protocol(format!(
                "the server reported more than {MAX_PARAMETERS} distinct parameters"
            )));
        }
        self.parameters.push((name.to_owned(), value.to_owned()));
        Ok(true)
    }

    /// A reported server parameter.
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Progress of [`Startup::handle`].
#[derive(Debug)]
pub enum Step {
    /// Keep reading; anything to send is in the output buffer.
    Continue,
    /// ReadyForQuery arrived: the session is ready.
    Done(SessionInfo),
}

/// The startup exchange of one connection.
pub struct Startup {
    user: String,
    password: Option<String>,
    scram: Option<Scram>,
    binding: Binding,
    /// SCRAM-SHA-256-PLUS was used, so `channel_binding=require` is met.
    bound: bool,
    /// The server answered with an ErrorResponse (as opposed to a failure found here).
    rejected: bool,
    info: SessionInfo,
    /// `require_auth`.
    require: RequireAuth,
    /// The method the server asked for, once it asked.
    asked: Option<AuthMethod>,
}

impl Startup {
    /// Writes the StartupMessage for `cfg` into `out` and returns the state machine that
    /// answers with `password` when the server asks for one. `settings` are further server
    /// settings for this connection only (`statement_timeout` of the shared path, for example).
    pub fn begin(
        cfg: &Config,
        password: Option<&str>,
        binding: Binding,
        settings: &[(&str, &str)],
        out: &mut BytesMut,
    ) -> Result<Startup, Error> {
        let mut params: Vec<(&str, &str)> = vec![
            ("user", cfg.user.as_str()),
            ("database", cfg.database()),
            ("client_encoding", "UTF8"),
        ];
        if let Some(app) = &cfg.application_name {
            params.push(("application_name", app.as_str()));
        }
        if let Some(options) = &cfg.options {
            params.push(("options", options.as_str()));
        }
        params.extend_from_slice(settings);
        frontend::startup_message(params.iter().copied(), out)
            .map_err(|e| Error::Config(format!("cannot encode startup message: {e}")))?;
        Ok(Startup {
            user: cfg.user.clone(),
            password: password.map(str::to_owned),
            scram: None,
            binding,
            bound: false,
            rejected: false,
            info: SessionInfo::default(),
            require: cfg.require_auth.clone(),
            asked: None,
        })
    }

    /// Whether the server refused the connection (an ErrorResponse during startup), which is
    /// what lets libpq's `sslmode=prefer` / `allow` try again the other way.
    pub fn rejected(&self) -> bool {
        self.rejected
    }

    fn password(&self) -> Result<&[u8], Error> {
        self.password
            .as_deref()
            .map(str::as_bytes)
            .ok_or_else(|| Error::auth("the server asked for a password and none was configured"))
    }

    /// The server asks for `method`: refused unless `require_auth` allows it, and (for a
    /// password or its hash) unless `channel_binding=require` is off, before anything of the
    /// secret is written.
    fn asked_for(&mut self, method: AuthMethod) -> Result<(), Error> {
        if self.asked.is_some_and(|m| m != method) {
            return Err(Error::Protocol(format!(
                "the server {} after it had {}",
                method.requested(),
                self.asked.map_or("", AuthMethod::requested)
            )));
        }
        self.asked = Some(method);
        self.require.check(method)?;
        if matches!(method, AuthMethod::Password | AuthMethod::Md5)
            && self.binding.mode == BindingMode::Require
        {
            return Err(Error::auth(format!(
                "channel_binding=require, but the server {} instead of SCRAM with channel \
                 binding (nothing was sent in answer)",
                method.requested()
            )));
        }
        Ok(())
    }

    /// Handles one backend message, writing any reply into `out`.
    pub fn handle(&mut self, msg: Message, out: &mut BytesMut) -> Result<Step, Error> {
        let enc = |e: std::io::Error| Error::Protocol(format!("cannot encode auth reply: {e}"));
        match msg {
            Message::AuthenticationOk => {
                // A server that ends SCRAM before its final message never proved it knows
                // the password: the exchange's mutual authentication would be skipped.
                if self.scram.is_some() {
                    return Err(Error::auth(
                        "the server accepted the connection before completing SCRAM (it never \
                         proved it knows the password)",
                    ));
                }
                if self.asked.is_none() {
                    self.require.check(AuthMethod::None)?;
                }
                if self.binding.mode == BindingMode::Require && !self.bound {
                    return Err(Error::auth(
                        "channel_binding=require, but the server authenticated this connection \
                         without channel binding (it needs SCRAM-SHA-256 over TLS)",
                    ));
                }
            }
            Message::AuthenticationCleartextPassword => {
                self.asked_for(AuthMethod::Password)?;
                let pw = self.password()?;
                frontend::password_message(pw, out).map_err(enc)?;
            }
            Message::AuthenticationMd5Password(body) => {
                self.asked_for(AuthMethod::Md5)?;
                let hash = md5_hash(self.user.as_bytes(), self.password()?, body.salt());
                frontend::password_message(hash.as_bytes(), out).map_err(enc)?;
            }
            Message::AuthenticationSasl(body) => {
                self.asked_for(AuthMethod::ScramSha256)?;
                if self.scram.is_some() {
                    return Err(Error::Protocol("SASL started twice".into()));
                }
                let (mut has_scram, mut has_plus) = (false, false);
                let mut it = body.mechanisms();
                while let Some(m) = fallible_iterator::FallibleIterator::next(&mut it)
                    .map_err(|e| Error::Protocol(format!("malformed SASL mechanisms: {e}")))?
                {
                    has_scram |= m == sasl::SCRAM_SHA_256;
                    has_plus |= m == sasl::SCRAM_SHA_256_PLUS;
                }
                let end_point = match self.binding.mode {
                    BindingMode::Disable => None,
                    _ => self.binding.end_point.clone(),
                };
                let (mechanism, binding) = match end_point {
                    Some(data) if has_plus => {
                        (sasl::SCRAM_SHA_256_PLUS, ScramBinding::EndPoint(data))
                    }
                    _ if self.binding.mode == BindingMode::Require => {
                        return Err(Error::auth(
                            "channel_binding=require, but SCRAM-SHA-256-PLUS is not possible \
                             here (it needs TLS, a server that offers it and a certificate \
                             signed with RSA or ECDSA)",
                        ))
                    }
                    // We could bind but the server did not offer it: say so ('y'), so a
                    // server that did offer it can detect a downgrade.
                    Some(_) if has_scram => (sasl::SCRAM_SHA_256, ScramBinding::NotOffered),
                    _ if has_scram => (sasl::SCRAM_SHA_256, ScramBinding::Without),
                    _ => {
                        return Err(Error::auth(
                            "the server offers no SASL mechanism pgpipe supports",
                        ))
                    }
                };
                self.bound = mechanism == sasl::SCRAM_SHA_256_PLUS;
                let nonce = scram::nonce().map_err(Error::Io)?;
                // PostgreSQL takes the user from the startup message, not from SCRAM.
                let scram = Scram::new("", self.password()?, binding, nonce);
                frontend::sasl_initial_response(mechanism, scram.message(), out).map_err(enc)?;
                self.scram = Some(scram);
            }
            Message::AuthenticationSaslContinue(body) => {
                let scram = self
                    .scram
                    .as_mut()
                    .ok_or_else(|| Error::Protocol("SASL continue without SASL start".into()))?;
                scram
                    .update(body.data())
                    .map_err(|e| Error::auth_from(format!("SCRAM: {e}"), e))?;
                frontend::sasl_response(scram.message(), out).map_err(enc)?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let mut scram = self
                    .scram
                    .take()
                    .ok_or_else(|| Error::Protocol("SASL final without SASL start".into()))?;
                scram
                    .finish(body.data())
                    .map_err(|e| {
                        Error::auth_from(
                            format!("the server's SCRAM signature is wrong (is it the server you meant?): {e}"),
                            e,
                        )
                    })?;
            }
            Message::AuthenticationGss | Message::AuthenticationGssContinue(_) => {
                self.asked_for(AuthMethod::Gss)?;
                return Err(unsupported_method());
            }
            Message::AuthenticationSspi => {
                self.asked_for(AuthMethod::Sspi)?;
                return Err(unsupported_method());
            }
            Message::AuthenticationKerberosV5 | Message::AuthenticationScmCredential => {
                return Err(unsupported_method())
            }
            Message::ParameterStatus(body) => {
                let bad =
                    |e: std::io::Error| Error::Protocol(format!("malformed ParameterStatus: {e}"));
                self.info
                    .set_parameter(body.name().map_err(bad)?, body.value().map_err(bad)?)?;
            }
            Message::BackendKeyData(body) => {
                self.info.backend_key = Some((body.process_id(), body.secret_key()));
            }
            Message::NoticeResponse(_) => {}
            Message::ErrorResponse(body) => {
                self.rejected = true;
                let mut raw = Vec::new();
                let mut it = body.fields();
                while let Ok(Some(f)) = fallible_iterator::FallibleIterator::next(&mut it) {
                    raw.push(f.type_());
                    raw.extend_from_slice(f.value_bytes());
                    raw.push(0);
                }
                raw.push(0);
                let err = parse_error_fields(&raw);
                // 28P01 invalid_password, 28000 invalid_authorization_specification.
                return Err(if err.code.class() == "28" {
                    Error::AuthRejected(Box::new(err))
                } else {
                    Error::from(err)
                });
            }
            Message::ReadyForQuery(_) => return Ok(Step::Done(std::mem::take(&mut self.info))),
            _ => return Err(Error::Protocol("unexpected message during startup".into())),
        }
        Ok(Step::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    /// A backend message from its tag and body.
    fn message(tag: u8, body: &[u8]) -> Message {
        let mut b = BytesMut::new();
        b.put_u8(tag);
        b.put_i32(4 + body.len() as i32);
        b.put_slice(body);
        Message::parse(&mut b).expect("parses").expect("whole")
    }

    fn auth(code: i32, rest: &[u8]) -> Message {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice(rest);
        message(b'R', &body)
    }

    /// A started exchange for `conninfo` (user and password given) and its output so far.
    fn start(conninfo: &str) -> (Startup, BytesMut) {
        let cfg = Config::parse(&format!("user=u password=secret {conninfo}")).unwrap();
        let mut out = BytesMut::new();
        let binding = Binding {
            mode: cfg.channel_binding,
            end_point: None,
        };
        let s = Startup::begin(&cfg, Some("secret"), binding, &[], &mut out).unwrap();
        out.clear();
        (s, out)
    }

    #[test]
    fn require_auth_refuses_before_anything_is_sent() {
        let cleartext = || auth(3, b"");
        let md5 = || auth(5, b"salt");
        let sasl = || auth(10, b"SCRAM-SHA-256\0\0");
        for (conninfo, request, needle) in [
            (
                "require_auth=scram-sha-256",
                cleartext(),
                "cleartext password",
            ),
            ("require_auth=scram-sha-256", md5(), "MD5"),
            ("require_auth=password,md5", sasl(), "SCRAM"),
            ("require_auth=!md5", md5(), "MD5"),
            (
                "sslmode=require channel_binding=require",
                cleartext(),
                "channel_binding=require",
            ),
            (
                "sslmode=require channel_binding=require",
                md5(),
                "channel_binding=require",
            ),
        ] {
            let (mut s, mut out) = start(conninfo);
            let e = s.handle(request, &mut out).unwrap_err();
            assert!(e.is_auth(), "{conninfo}: {e:?}");
            assert!(e.to_string().contains(needle), "{conninfo}: {e}");
            assert!(out.is_empty(), "{conninfo}: sent {out:?}");
        }
        // Allowed: the answer goes out.
        let (mut s, mut out) = start("require_auth=password");
        s.handle(cleartext(), &mut out).unwrap();
        assert!(out.windows(6).any(|w| w == b"secret"));
        let (mut s, mut out) = start("require_auth=md5,scram-sha-256");
        s.handle(sasl(), &mut out).unwrap();
        assert!(!out.is_empty());
    }

    #[test]
    fn authentication_skipped_or_cut_short_is_refused() {
        // No authentication at all (trust): only `none` allows it.
        let (mut s, mut out) = start("require_auth=md5");
        let e = s.handle(auth(0, b""), &mut out).unwrap_err();
        assert!(e.to_string().contains("without authentication"), "{e}");
        let (mut s, mut out) = start("require_auth=none");
        s.handle(auth(0, b""), &mut out).unwrap();
        let (mut s, mut out) = start("require_auth=!none");
        assert!(s.handle(auth(0, b""), &mut out).is_err());
        // SCRAM begun, then AuthenticationOk without the server's proof.
        let (mut s, mut out) = start("");
        s.handle(auth(10, b"SCRAM-SHA-256\0\0"), &mut out).unwrap();
        let e = s.handle(auth(0, b""), &mut out).unwrap_err();
        assert!(e.to_string().contains("before completing SCRAM"), "{e}");
        // Another method after one was begun.
        let (mut s, mut out) = start("");
        s.handle(auth(5, b"salt"), &mut out).unwrap();
        out.clear();
        assert!(s.handle(auth(3, b""), &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn parameters_are_bounded_by_names_not_reports() {
        let mut info = SessionInfo::default();
        assert!(info.set_parameter("TimeZone", "UTC").unwrap());
        for i in 0..100_000 {
            info.set_parameter("TimeZone", if i % 2 == 0 { "UTC" } else { "CET" })
                .unwrap();
        }
        assert_eq!(info.parameters.len(), 1);
        assert!(!info.set_parameter("TimeZone", "CET").unwrap());
        for i in 1..MAX_PARAMETERS {
            info.set_parameter(&format!("p{i}"), "v").unwrap();
        }
        assert_eq!(info.parameters.len(), MAX_PARAMETERS);
        let e = info.set_parameter("one_more", "v").unwrap_err();
        assert!(e.to_string().contains("more than 256"), "{e}");
        assert_eq!(info.parameter("p7"), Some("v"));
    }
}
