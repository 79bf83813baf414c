//! Startup and authentication as a state machine: feed it backend messages, it writes the
//! replies into a caller-owned buffer. Supports trust, cleartext, md5 and SCRAM-SHA-256.

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{self, ChannelBinding, ScramSha256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use crate::config::ChannelBinding as BindingMode;
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

impl SessionInfo {
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
    scram: Option<ScramSha256>,
    binding: Binding,
    /// SCRAM-SHA-256-PLUS was used, so `channel_binding=require` is met.
    bound: bool,
    /// The server answered with an ErrorResponse (as opposed to a failure found here).
    rejected: bool,
    info: SessionInfo,
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

    /// Handles one backend message, writing any reply into `out`.
    pub fn handle(&mut self, msg: Message, out: &mut BytesMut) -> Result<Step, Error> {
        let enc = |e: std::io::Error| Error::Protocol(format!("cannot encode auth reply: {e}"));
        match msg {
            Message::AuthenticationOk => {
                if self.binding.mode == BindingMode::Require && !self.bound {
                    return Err(Error::auth(
                        "channel_binding=require, but the server authenticated this connection \
                         without channel binding (it needs SCRAM-SHA-256 over TLS)",
                    ));
                }
            }
            Message::AuthenticationCleartextPassword => {
                let pw = self.password()?;
                frontend::password_message(pw, out).map_err(enc)?;
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = md5_hash(self.user.as_bytes(), self.password()?, body.salt());
                frontend::password_message(hash.as_bytes(), out).map_err(enc)?;
            }
            Message::AuthenticationSasl(body) => {
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
                    Some(data) if has_plus => (
                        sasl::SCRAM_SHA_256_PLUS,
                        ChannelBinding::tls_server_end_point(data),
                    ),
                    _ if self.binding.mode == BindingMode::Require => {
                        return Err(Error::auth(
                            "channel_binding=require, but SCRAM-SHA-256-PLUS is not possible \
                             here (it needs TLS, a server that offers it and a certificate \
                             signed with RSA or ECDSA)",
                        ))
                    }
                    // We could bind but the server did not offer it: say so ('y'), so a
                    // server that did offer it can detect a downgrade.
                    Some(_) if has_scram => (sasl::SCRAM_SHA_256, ChannelBinding::unrequested()),
                    _ if has_scram => (sasl::SCRAM_SHA_256, ChannelBinding::unsupported()),
                    _ => {
                        return Err(Error::auth(
                            "the server offers no SASL mechanism pgpipe supports",
                        ))
                    }
                };
                self.bound = mechanism == sasl::SCRAM_SHA_256_PLUS;
                let scram = ScramSha256::new(self.password()?, binding);
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
            Message::AuthenticationGss
            | Message::AuthenticationSspi
            | Message::AuthenticationKerberosV5
            | Message::AuthenticationScmCredential
            | Message::AuthenticationGssContinue(_) => {
                return Err(Error::auth(
                    "the server asks for an authentication method pgpipe does not support \
                     (GSSAPI, SSPI, Kerberos or SCM credentials): allow password, md5 or \
                     scram-sha-256 for this user in pg_hba.conf",
                ))
            }
            Message::ParameterStatus(body) => {
                let bad =
                    |e: std::io::Error| Error::Protocol(format!("malformed ParameterStatus: {e}"));
                self.info.parameters.push((
                    body.name().map_err(bad)?.to_owned(),
                    body.value().map_err(bad)?.to_owned(),
                ));
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
