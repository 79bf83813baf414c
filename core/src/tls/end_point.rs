//! `tls-server-end-point` channel binding data (RFC 5929): a hash of the server's certificate,
//! with the hash function of the certificate's own signature (SHA-256 for MD5 and SHA-1).
//!
//! Only the signature algorithm is needed from the certificate, so a few lines of DER reading
//! replace an X.509 parser.

use sha2::{Digest, Sha256, Sha384, Sha512};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

/// The channel binding data for the server certificate `der`, or `None` when its signature
/// algorithm defines none (Ed25519, for example) or the certificate cannot be read.
pub(crate) fn end_point_hash(der: &[u8]) -> Option<Vec<u8>> {
    Some(match signature_hash(der)? {
        Hash::Sha256 => Sha256::digest(der).to_vec(),
        Hash::Sha384 => Sha384::digest(der).to_vec(),
        Hash::Sha512 => Sha512::digest(der).to_vec(),
    })
}

const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;

/// Reads one DER element at the start of `b`: (tag, contents, rest).
fn element(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&first, mut b) = b.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let (bytes, rest) = b.split_at(n);
        b = rest;
        bytes
            .iter()
            .fold(0usize, |acc, &x| (acc << 8) | usize::from(x))
    };
    if b.len() < len {
        return None;
    }
    let (contents, rest) = b.split_at(len);
    Some((tag, contents, rest))
}

/// `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm AlgorithmIdentifier, ... }`.
fn signature_hash(der: &[u8]) -> Option<Hash> {
    let (tag, cert, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _tbs, rest) = element(cert)?;
    let (tag, alg, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, oid, params) = element(alg)?;
    if tag != OID {
        return None;
    }
    match oid {
        // md5WithRSA, sha1WithRSA, ecdsa-with-SHA1, sha256WithRSA, sha224WithRSA, ecdsa-with-SHA256:
        // RFC 5929 maps MD5 and SHA-1 to SHA-256.
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x04 | 0x05 | 0x0b | 0x0e]
        | [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01]
        | [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x01 | 0x02] => Some(Hash::Sha256),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c]
        | [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03] => Some(Hash::Sha384),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d]
        | [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04] => Some(Hash::Sha512),
        // RSASSA-PSS: the hash is in the parameters (SHA-1 when absent).
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a] => pss_hash(params),
        _ => None,
    }
}

/// `RSASSA-PSS-params ::= SEQUENCE { hashAlgorithm [0] AlgorithmIdentifier DEFAULT sha1, ... }`.
fn pss_hash(params: &[u8]) -> Option<Hash> {
    let (tag, seq, _) = element(params)?;
    if tag != SEQUENCE {
        return None;
    }
    let Some((0xa0, explicit, _)) = element(seq) else {
        return Some(Hash::Sha256); // default SHA-1, mapped to SHA-256
    };
    let (_, alg, _) = element(explicit)?;
    let (tag, oid, _) = element(alg)?;
    if tag != OID {
        return None;
    }
    match oid {
        [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01] => Some(Hash::Sha256),
        [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02] => Some(Hash::Sha384),
        [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03] => Some(Hash::Sha512),
        [0x2b, 0x0e, 0x03, 0x02, 0x1a] => Some(Hash::Sha256),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate skeleton: SEQUENCE { SEQUENCE {} (tbs), SEQUENCE { OID }, BIT STRING }.
    fn cert_with(oid: &[u8], params: &[u8]) -> Vec<u8> {
        let mut alg = vec![OID, oid.len() as u8];
        alg.extend_from_slice(oid);
        alg.extend_from_slice(params);
        let mut body = vec![SEQUENCE, 0];
        body.extend_from_slice(&[SEQUENCE, alg.len() as u8]);
        body.extend_from_slice(&alg);
        body.extend_from_slice(&[0x03, 0x01, 0x00]);
        let mut der = vec![SEQUENCE, 0x81, body.len() as u8];
        der.extend_from_slice(&body);
        der
    }

    #[test]
    fn hash_follows_the_signature_algorithm() {
        let ecdsa256 = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
        let ecdsa384 = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
        let rsa512 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
        let rsa_sha1 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
        let ed25519 = [0x2b, 0x65, 0x70];
        assert_eq!(
            signature_hash(&cert_with(&ecdsa256, &[])),
            Some(Hash::Sha256)
        );
        assert_eq!(
            signature_hash(&cert_with(&ecdsa384, &[])),
            Some(Hash::Sha384)
        );
        assert_eq!(signature_hash(&cert_with(&rsa512, &[])), Some(Hash::Sha512));
        assert_eq!(
            signature_hash(&cert_with(&rsa_sha1, &[])),
            Some(Hash::Sha256)
        );
        assert_eq!(signature_hash(&cert_with(&ed25519, &[])), None);
        let der = cert_with(&ecdsa384, &[]);
        assert_eq!(end_point_hash(&der).map(|h| h.len()), Some(48));
    }

    #[test]
    fn pss_reads_its_hash_parameter() {
        let pss = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
        let sha384 = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02];
        // SEQUENCE { [0] { SEQUENCE { OID sha384 } } }
        let mut alg = vec![SEQUENCE, 2 + sha384.len() as u8, OID, sha384.len() as u8];
        alg.extend_from_slice(&sha384);
        let mut explicit = vec![0xa0, alg.len() as u8];
        explicit.extend_from_slice(&alg);
        let mut params = vec![SEQUENCE, explicit.len() as u8];
        params.extend_from_slice(&explicit);
        assert_eq!(
            signature_hash(&cert_with(&pss, &params)),
            Some(Hash::Sha384)
        );
        assert_eq!(
            signature_hash(&cert_with(&pss, &[SEQUENCE, 0])),
            Some(Hash::Sha256)
        );
    }

    #[test]
    fn malformed_input_is_none() {
        assert_eq!(end_point_hash(&[]), None);
        assert_eq!(end_point_hash(&[SEQUENCE, 0x85, 1, 2, 3, 4, 5]), None);
        assert_eq!(end_point_hash(&[SEQUENCE, 10, 0]), None);
        assert_eq!(end_point_hash(&[0x02, 0]), None);
    }
}
