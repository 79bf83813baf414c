//! TLS settings turned into a rustls client configuration, once per client.
//!
//! rustls is sans-IO, so TLS lives in the core and every adapter gets it without code of its
//! own: the connection task feeds the socket's bytes through a [`rustls::ClientConnection`]
//! (see `driver/transport.rs`). This module decides *what* is verified, with libpq's meaning
//! of each `sslmode`; [`explain`] turns a failed check into a sentence that says what to do.

mod end_point;
mod verify;

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::config::{RootCert, SslMode, SslNegotiation, TlsConfig, TlsVersion};
use crate::{Config, Error};

pub(crate) use end_point::end_point_hash;

/// ALPN protocol name PostgreSQL 17 servers expect (required with direct TLS negotiation).
const ALPN_POSTGRESQL: &[u8] = b"postgresql";

/// What a connection needs to start TLS: the shared rustls configuration and the name the
/// server's certificate is checked against.
#[derive(Clone)]
pub(crate) struct TlsConnector {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// The effective mode (`require` with a root certificate verifies like `verify-ca`).
    pub(crate) mode: SslMode,
    pub(crate) negotiation: SslNegotiation,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("negotiation", &self.negotiation)
            .finish()
    }
}

impl TlsConnector {
    /// Builds the connector for `cfg`, or `None` when TLS is never used (`sslmode=disable`, or
    /// a Unix-domain socket, where libpq does not use TLS either). Loads certificate and key
    /// files now, so a missing or unreadable file fails `connect()` with its path.
    pub(crate) fn new(cfg: &Config) -> Result<Option<TlsConnector>, Error> {
        let tls = &cfg.tls;
        if tls.mode == SslMode::Disable || is_socket_host(&cfg.host) {
            return Ok(None);
        }
        let mode = effective_mode(tls);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions = versions(tls)?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| tls_error(format!("no usable TLS version: {e}")))?;
        let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = match mode {
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(load_roots(tls)?);
                let webpki =
                    rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                        .build()
                        .map_err(|e| tls_error(format!("cannot use the root certificates: {e}")))?;
                if mode == SslMode::VerifyCa {
                    Arc::new(verify::IgnoreName(webpki))
                } else {
                    webpki
                }
            }
            _ => Arc::new(verify::SignaturesOnly(provider)),
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&tls.cert, &tls.key) {
            (Some(cert), key) => {
                let key = key.as_deref().ok_or_else(|| {
                    tls_error(format!(
                        "sslcert {} is set but no sslkey: set sslkey to its private key",
                        cert.display()
                    ))
                })?;
                builder
                    .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                    .map_err(|e| {
                        tls_error(format!(
                            "the client certificate {} and key {} do not fit together: {e}",
                            cert.display(),
                            key.display()
                        ))
                    })?
            }
            (None, Some(key)) => {
                return Err(tls_error(format!(
                    "sslkey {} is set but no sslcert: set sslcert to the client certificate",
                    key.display()
                )))
            }
            (None, None) => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![ALPN_POSTGRESQL.to_vec()];
        // The TLS name is the host; a numeric `hostaddr` only says where to connect.
        let host = match (cfg.host.is_empty(), cfg.hostaddr) {
            (true, Some(addr)) => addr.to_string(),
            _ => cfg.host.clone(),
        };
        let name = match host.parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => match ServerName::try_from(host.clone()) {
                Ok(name) => name,
                Err(_) if mode != SslMode::VerifyFull => {
                    // Nothing checks the name below verify-full: any valid placeholder works,
                    // and it must not be sent as SNI.
                    config.enable_sni = false;
                    ServerName::try_from("invalid.invalid").map_err(|e| tls_error(e.to_string()))?
                }
                Err(e) => {
                    return Err(tls_error(format!(
                        "sslmode=verify-full needs a host name or IP address to check the \
                         certificate against; {host:?} is not one ({e})"
                    )))
                }
            },
        };
        config.enable_sni &= tls.sni && matches!(name, ServerName::DnsName(_));
        Ok(Some(TlsConnector {
            config: Arc::new(config),
            name,
            mode,
            negotiation: tls.negotiation,
        }))
    }

    /// A new client-side TLS session for one connection.
    pub(crate) fn session(&self) -> Result<rustls::ClientConnection, Error> {
        rustls::ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(|e| tls_error(format!("cannot start TLS: {e}")))
    }
}

/// `sslmode` as libpq applies it: `require` with a root certificate file verifies the chain
/// (`verify-ca`), and `sslrootcert=system` always verifies the name too.
fn effective_mode(tls: &TlsConfig) -> SslMode {
    match (&tls.root_cert, tls.mode) {
        (Some(RootCert::System), SslMode::Disable) => SslMode::Disable,
        (Some(RootCert::System), _) => SslMode::VerifyFull,
        (Some(RootCert::File(_)), SslMode::Require) => SslMode::VerifyCa,
        (_, mode) => mode,
    }
}

/// A host that names a Unix-domain socket directory (or abstract socket).
pub(crate) fn is_socket_host(host: &str) -> bool {
    host.starts_with('/') || host.starts_with('@')
}

fn versions(tls: &TlsConfig) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, Error> {
    let max = tls.max_version.unwrap_or(TlsVersion::Tls13);
    let all = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ];
    let chosen: Vec<_> = all
        .iter()
        .filter(|(v, _)| *v >= tls.min_version && *v <= max)
        .map(|(_, p)| *p)
        .collect();
    if chosen.is_empty() {
        return Err(tls_error(format!(
            "ssl_min_protocol_version ({:?}) is above ssl_max_protocol_version ({max:?})",
            tls.min_version
        )));
    }
    Ok(chosen)
}

fn load_roots(tls: &TlsConfig) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    match &tls.root_cert {
        Some(RootCert::File(path)) => {
            let certs = load_certs(path)?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(tls_error(format!(
                    "sslrootcert {} holds no usable CA certificate",
                    path.display()
                )));
            }
        }
        Some(RootCert::System) => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(tls_error(format!(
                    "sslrootcert=system found no trusted root certificates on this system ({} \
                     errors while loading them)",
                    found.errors.len()
                )));
            }
        }
        None => {
            return Err(tls_error(format!(
                "sslmode={} verifies the server's certificate, but no root certificate is \
                 configured: set sslrootcert to the CA's PEM file (or `system`), or use \
                 sslmode=require to encrypt without verifying",
                mode_name(tls.mode)
            )))
        }
    }
    Ok(roots)
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            tls_error(format!(
                "cannot read certificates from {}: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "{} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        tls_error(format!(
            "cannot read a private key from {} (PEM, unencrypted): {e}",
            path.display()
        ))
    })
}

/// The libpq spelling of a mode, for messages.
pub(crate) fn mode_name(mode: SslMode) -> &'static str {
    match mode {
        SslMode::Disable => "disable",
        SslMode::Allow => "allow",
        SslMode::Prefer => "prefer",
        SslMode::Require => "require",
        SslMode::VerifyCa => "verify-ca",
        SslMode::VerifyFull => "verify-full",
    }
}

pub(crate) fn tls_error(reason: String) -> Error {
    Error::Tls(reason)
}

/// A failed TLS handshake, explained: which check failed and what to do about it.
pub(crate) fn explain(err: &rustls::Error, host: &str) -> String {
    use rustls::CertificateError as C;
    match err {
        rustls::Error::InvalidCertificate(cert) => match cert {
            C::UnknownIssuer => "the server's certificate is not signed by a trusted CA: point \
                sslrootcert at the CA that issued it (or use sslmode=require to encrypt without \
                verifying)"
                .to_owned(),
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the server's certificate is not valid for the host name {host:?}: connect with a \
                 name the certificate lists, or use sslmode=verify-ca to check only the CA ({cert:?})"
            ),
            C::Expired | C::ExpiredContext { .. } => format!(
                "the server's certificate has expired ({cert:?}): the server needs a renewed \
                 certificate"
            ),
            C::NotValidYet | C::NotValidYetContext { .. } => format!(
                "the server's certificate is not valid yet ({cert:?}): check the clocks of \
                 client and server"
            ),
            C::Revoked => "the server's certificate has been revoked".to_owned(),
            other => format!("the server's certificate was rejected: {other:?}"),
        },
        rustls::Error::AlertReceived(alert) => format!(
            "the server aborted the TLS handshake ({alert:?}); if it asks for a client \
             certificate, set sslcert and sslkey"
        ),
        other => format!("TLS handshake failed: {other}"),
    }
}
