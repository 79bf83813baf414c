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
        // ring, not aws-lc-rs: it builds with only a C compiler (no cmake, no assembler), as
        // the workspace's Cargo.toml says. rustls 0.23.48 deprecates it for lacking
        // post-quantum key exchange (X25519MLKEM768); the classical groups remain, and
        // PostgreSQL's own TLS (OpenSSL) offers those too.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions = versions(tls)?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| Error::tls_from(format!("no usable TLS version: {e}"), e))?;
        let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = match mode {
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(load_roots(tls)?);
                let webpki =
                    rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                        .build()
                        .map_err(|e| {
                            Error::tls_from(format!("cannot use the root certificates: {e}"), e)
                        })?;
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
                        let message = format!(
                            "the client certificate {} and key {} do not fit together: {e}",
                            cert.display(),
                            key.display()
                        );
                        Error::tls_from(message, e)
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
            .map_err(|e| Error::tls_from(format!("cannot start TLS: {e}"), e))
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
            let message = format!("cannot read certificates from {}: {e}", path.display());
            Error::tls_from(message, e)
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
        let message = format!(
            "cannot read a private key from {} (PEM, unencrypted): {e}",
            path.display()
        );
        Error::tls_from(message, e)
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
    Error::tls(reason)
}

/// A failed TLS handshake, explained in one sentence: which check failed and what to do.
pub(crate) fn explain(err: &rustls::Error, host: &str) -> String {
    use rustls::CertificateError as C;
    let cert = match err {
        rustls::Error::InvalidCertificate(cert) => cert,
        rustls::Error::AlertReceived(alert) => {
            return format!(
                "the server aborted the TLS handshake ({}); if it asks for a client \
                 certificate, set sslcert and sslkey",
                words(&format!("{alert:?}"))
            )
        }
        other => return format!("the TLS handshake failed: {other}"),
    };
    match cert {
        C::UnknownIssuer => "the server's certificate is not signed by a trusted CA: point \
            sslrootcert at the CA that issued it (or use sslmode=require to encrypt without \
            verifying)"
            .to_owned(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            let names = match cert {
                C::NotValidForNameContext { presented, .. } if presented.is_empty() => {
                    " (it names no host)".to_owned()
                }
                C::NotValidForNameContext { presented, .. } => {
                    format!(" (it names {})", presented.join(", "))
                }
                _ => String::new(),
            };
            format!(
                "the server's certificate is not valid for the host name {host:?}{names}: \
                 connect with a name the certificate lists, or use sslmode=verify-ca to check \
                 only the CA"
            )
        }
        C::Expired | C::ExpiredContext { .. } => {
            let ago = match cert {
                C::ExpiredContext { time, not_after } => {
                    format!(
                        " {} ago",
                        span(time.as_secs().saturating_sub(not_after.as_secs()))
                    )
                }
                _ => String::new(),
            };
            format!("the server's certificate expired{ago}: the server needs a renewed certificate")
        }
        C::NotValidYet | C::NotValidYetContext { .. } => {
            let when = match cert {
                C::NotValidYetContext { time, not_before } => format!(
                    " for another {}",
                    span(not_before.as_secs().saturating_sub(time.as_secs()))
                ),
                _ => String::new(),
            };
            format!(
                "the server's certificate is not valid yet{when}: check the clocks of client \
                 and server"
            )
        }
        C::Revoked => "the server's certificate has been revoked".to_owned(),
        C::BadSignature => "the server's certificate is not correctly signed by its issuer".into(),
        C::BadEncoding => "the server's certificate is not correctly encoded".to_owned(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "the server's certificate is not issued for TLS servers (its extended key usage)"
                .to_owned()
        }
        other => format!(
            "the server's certificate was rejected: {}",
            words(&other.to_string())
        ),
    }
}

/// `CertificateRequired` as `certificate required`: rustls names some errors only by their
/// variant.
fn words(debug: &str) -> String {
    let mut out = String::with_capacity(debug.len() + 4);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push(' ');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A number of seconds as people say it.
fn span(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs} seconds"),
        120..=7199 => format!("{} minutes", secs / 60),
        7200..=172_799 => format!("{} hours", secs / 3600),
        _ => format!("{} days", secs / 86_400),
    }
}

#[cfg(test)]
mod explain_tests {
    use super::{explain, span, words};
    use rustls::pki_types::{ServerName, UnixTime};
    use rustls::CertificateError as C;
    use std::time::Duration;

    fn bad(cert: C) -> String {
        explain(&rustls::Error::InvalidCertificate(cert), "db.example")
    }

    #[test]
    fn handshake_failures_read_as_one_sentence() {
        let name = bad(C::NotValidForNameContext {
            expected: ServerName::try_from("db.example").unwrap(),
            presented: vec!["localhost".into(), "127.0.0.1".into()],
        });
        assert!(
            name.contains("\"db.example\" (it names localhost, 127.0.0.1)"),
            "{name}"
        );
        let expired = bad(C::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(10 * 86_400)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(7 * 86_400)),
        });
        assert!(expired.contains("expired 3 days ago"), "{expired}");
        let alert = explain(
            &rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired),
            "h",
        );
        assert!(alert.contains("(certificate required)"), "{alert}");
        // No Debug dump of rustls' structures in any of them.
        for text in [
            name,
            expired,
            alert,
            bad(C::BadSignature),
            bad(C::UnknownIssuer),
        ] {
            assert!(!text.contains('{') && !text.contains("Context"), "{text}");
        }
        assert_eq!(words("HandshakeFailure"), "handshake failure");
        assert_eq!(span(90), "90 seconds");
        assert_eq!(span(3 * 3600), "3 hours");
    }
}
