//! Certificates for TLS tests, generated at test time.
//!
//! Nothing secret is stored in the repository: [`TlsMaterial::generate`]
//! makes fresh ECDSA P-256 keys (rcgen on ring) and writes PEM files into a
//! directory, by default the cluster directory, which is removed with the
//! cluster.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use crate::{HarnessError, CERT_USER};

/// File name of the test CA's certificate.
pub const CA_CERT_FILE: &str = "ca.crt";
/// File name of the server certificate (SANs `localhost` and `127.0.0.1`).
pub const SERVER_CERT_FILE: &str = "server.crt";
/// File name of the server certificate's private key.
pub const SERVER_KEY_FILE: &str = "server.key";
/// File name of the client certificate (CN [`CERT_USER`]).
pub const CLIENT_CERT_FILE: &str = "client.crt";
/// File name of the client certificate's private key.
pub const CLIENT_KEY_FILE: &str = "client.key";
/// File name of an unrelated CA's certificate (it signed nothing we serve).
pub const OTHER_CA_CERT_FILE: &str = "other_ca.crt";
/// File name of a server certificate that expired in 2001.
pub const EXPIRED_CERT_FILE: &str = "expired.crt";
/// File name of the expired certificate's private key.
pub const EXPIRED_KEY_FILE: &str = "expired.key";

/// Host names and addresses the server certificates are valid for.
pub const SERVER_SANS: [&str; 2] = ["localhost", "127.0.0.1"];

/// A test CA, certificates signed by it and an unrelated CA, as PEM files in
/// one directory (see the `*_FILE` constants for the names).
///
/// - `ca.crt`: the CA that signed every certificate below;
/// - `server.crt` / `server.key`: server certificate for [`SERVER_SANS`];
/// - `client.crt` / `client.key`: client certificate whose CN is
///   [`CERT_USER`], for `cert` authentication;
/// - `other_ca.crt`: a second CA, for "wrong CA" tests;
/// - `expired.crt` / `expired.key`: a server certificate for the same SANs,
///   signed by the CA, valid only during the year 2000.
///
/// Keys are PKCS#8 PEM with mode 0600, certificates mode 0644. All files
/// belong to the current user; a [`crate::Cluster`] running its server as
/// `postgres` hands the server keys over to that user itself.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    dir: PathBuf,
    ca_cert: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca_cert: PathBuf,
    expired_cert: PathBuf,
    expired_key: PathBuf,
}

impl TlsMaterial {
    /// Generates fresh keys and certificates and writes them into `dir`,
    /// which must exist. Existing files of the same names are replaced.
    pub fn generate(dir: &Path) -> Result<TlsMaterial, HarnessError> {
        let material = TlsMaterial {
            dir: dir.to_path_buf(),
            ca_cert: dir.join(CA_CERT_FILE),
            server_cert: dir.join(SERVER_CERT_FILE),
            server_key: dir.join(SERVER_KEY_FILE),
            client_cert: dir.join(CLIENT_CERT_FILE),
            client_key: dir.join(CLIENT_KEY_FILE),
            other_ca_cert: dir.join(OTHER_CA_CERT_FILE),
            expired_cert: dir.join(EXPIRED_CERT_FILE),
            expired_key: dir.join(EXPIRED_KEY_FILE),
        };

        let (ca, ca_pem) = new_ca("pgpipe test CA")?;
        write_file(&material.ca_cert, &ca_pem, 0o644)?;
        let (_, other_pem) = new_ca("pgpipe unrelated test CA")?;
        write_file(&material.other_ca_cert, &other_pem, 0o644)?;

        let valid = Validity::Current;
        let server = new_leaf(&ca, "localhost", &SERVER_SANS, Usage::Server, valid)?;
        server.write(&material.server_cert, &material.server_key)?;
        let client = new_leaf(&ca, CERT_USER, &[], Usage::Client, valid)?;
        client.write(&material.client_cert, &material.client_key)?;
        let expired = new_leaf(
            &ca,
            "localhost",
            &SERVER_SANS,
            Usage::Server,
            Validity::Expired,
        )?;
        expired.write(&material.expired_cert, &material.expired_key)?;
        Ok(material)
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `ca.crt`: the CA that signed the server, client and expired
    /// certificates (the server's `ssl_ca_file`, the clients' root).
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// `server.crt`: server certificate for `localhost` and `127.0.0.1`.
    pub fn server_cert(&self) -> &Path {
        &self.server_cert
    }

    /// `server.key`: private key of [`TlsMaterial::server_cert`].
    pub fn server_key(&self) -> &Path {
        &self.server_key
    }

    /// `client.crt`: client certificate with CN [`CERT_USER`].
    pub fn client_cert(&self) -> &Path {
        &self.client_cert
    }

    /// `client.key`: private key of [`TlsMaterial::client_cert`] (mode
    /// 0600, as libpq demands).
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// `other_ca.crt`: a CA that signed nothing the server presents.
    pub fn other_ca_cert(&self) -> &Path {
        &self.other_ca_cert
    }

    /// `expired.crt`: server certificate, signed by the CA, that expired on
    /// 2001-01-01.
    pub fn expired_cert(&self) -> &Path {
        &self.expired_cert
    }

    /// `expired.key`: private key of [`TlsMaterial::expired_cert`].
    pub fn expired_key(&self) -> &Path {
        &self.expired_key
    }

    /// The private keys the server may load, which must belong to the user
    /// running it.
    pub(crate) fn server_keys(&self) -> [&Path; 2] {
        [&self.server_key, &self.expired_key]
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Copy)]
enum Usage {
    Server,
    Client,
}

/// The validity period of a certificate.
#[derive(Clone, Copy)]
enum Validity {
    /// From 2000 to 2100: valid whenever the tests run.
    Current,
    /// The year 2000 only.
    Expired,
}

impl Validity {
    fn apply(self, params: &mut CertificateParams) {
        params.not_before = date_time_ymd(2000, 1, 1);
        params.not_after = match self {
            Validity::Current => date_time_ymd(2100, 1, 1),
            Validity::Expired => date_time_ymd(2001, 1, 1),
        };
    }
}

/// A leaf certificate and its key, PEM encoded.
struct Leaf {
    cert_pem: String,
    key_pem: String,
}

impl Leaf {
    fn write(&self, cert: &Path, key: &Path) -> Result<(), HarnessError> {
        write_file(cert, &self.cert_pem, 0o644)?;
        write_file(key, &self.key_pem, 0o600)
    }
}

fn tls_error(what: &str, e: rcgen::Error) -> HarnessError {
    HarnessError::Tls(format!("{what}: {e}"))
}

fn common_name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "pgpipe tests");
    dn.push(DnType::CommonName, cn);
    dn
}

/// A self-signed CA: the issuer that signs leaves, and its certificate.
fn new_ca(cn: &str) -> Result<(Issuer<'static, KeyPair>, String), HarnessError> {
    let key = KeyPair::generate().map_err(|e| tls_error("generating a CA key", e))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Validity::Current.apply(&mut params);
    let cert = params
        .self_signed(&key)
        .map_err(|e| tls_error("self-signing a CA certificate", e))?;
    Ok((Issuer::new(params, key), cert.pem()))
}

/// A certificate for `cn` and `sans`, signed by `ca`, with a fresh key.
fn new_leaf(
    ca: &Issuer<'_, KeyPair>,
    cn: &str,
    sans: &[&str],
    usage: Usage,
    validity: Validity,
) -> Result<Leaf, HarnessError> {
    let key = KeyPair::generate().map_err(|e| tls_error("generating a key", e))?;
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(sans).map_err(|e| tls_error("certificate names", e))?;
    params.distinguished_name = common_name(cn);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![match usage {
        Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
        Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    params.use_authority_key_identifier_extension = true;
    validity.apply(&mut params);
    let cert = params
        .signed_by(&key, ca)
        .map_err(|e| tls_error(&format!("signing the certificate of {cn}"), e))?;
    Ok(Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Writes `contents` to `path` with `mode`; a key is never readable by
/// others, not even between creating and restricting it.
fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), HarnessError> {
    let err = |e| HarnessError::io(format!("writing {}", path.display()), e);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    // `mode` only applies to a file that did not exist yet.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(err)?;
    file.write_all(contents.as_bytes()).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::create_unique_dir;

    #[test]
    fn material_is_written_with_private_keys() {
        let dir = create_unique_dir().unwrap();
        let tls = TlsMaterial::generate(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for key in [tls.server_key(), tls.client_key(), tls.expired_key()] {
            assert_eq!(mode(key), 0o600, "{}", key.display());
            let pem = fs::read_to_string(key).unwrap();
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
        }
        let certs = [
            tls.ca_cert(),
            tls.server_cert(),
            tls.client_cert(),
            tls.other_ca_cert(),
            tls.expired_cert(),
        ];
        for cert in certs {
            assert_eq!(mode(cert), 0o644, "{}", cert.display());
            assert_eq!(cert.parent(), Some(tls.dir()));
            let pem = fs::read_to_string(cert).unwrap();
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        assert_ne!(
            fs::read(tls.ca_cert()).unwrap(),
            fs::read(tls.other_ca_cert()).unwrap()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
