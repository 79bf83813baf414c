//! SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677) as PostgreSQL speaks them, without
//! I/O: the caller hands in the server's messages and sends [`Scram::message`]. The client nonce
//! is an argument, so the exchange is checked against RFC 7677's published one (the tests
//! below); [`nonce`] draws a real one from the TLS provider's secure random source.
//!
//! PostgreSQL takes the user from the startup message and sends an empty SCRAM user name; the
//! password is SASLprep-normalized when it can be, and used as given otherwise (PostgreSQL's
//! own rule: its passwords need not be valid SASLprep input).

use std::io;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// How the exchange binds to the TLS channel (the GS2 header's first field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The client does not bind (`n`): no TLS, or `channel_binding=disable`.
    Without,
    /// The client could bind, but the server offered no -PLUS mechanism (`y`): a server that
    /// did offer one detects the downgrade.
    NotOffered,
    /// `tls-server-end-point`: the hash of the server's certificate.
    EndPoint(Vec<u8>),
}

impl Binding {
    fn header(&self) -> &'static str {
        match self {
            Binding::Without => "n,,",
            Binding::NotOffered => "y,,",
            Binding::EndPoint(_) => "p=tls-server-end-point,,",
        }
    }
}

enum Step {
    /// The client's first message is out.
    First {
        salted_input: Vec<u8>,
        client_first_bare: String,
        nonce: String,
        binding: Binding,
    },
    /// The proof is out; the server must prove it knows the password too.
    Proved {
        server_signature: [u8; 32],
    },
    Done,
}

/// One SCRAM exchange from the client's side.
pub(crate) struct Scram {
    message: Vec<u8>,
    step: Step,
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

/// A client nonce: 24 printable characters from a secure random source.
pub(crate) fn nonce() -> Result<String, io::Error> {
    let mut raw = [0u8; 18];
    // Only its random source is used here. rustls 0.23.48 deprecates the ring provider for
    // lacking post-quantum key exchange, which is no concern of a nonce (see `tls/mod.rs`).
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    provider
        .secure_random
        .fill(&mut raw)
        .map_err(|_| io::Error::other("no secure random source for the SCRAM nonce"))?;
    Ok(STANDARD.encode(raw))
}

/// `name` with `=` and `,` escaped, as a SCRAM `saslname`.
fn sasl_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// HMAC-SHA-256 (RFC 2104).
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// `Hi(password, salt, i)`: PBKDF2-HMAC-SHA-256 with one block.
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut u = hmac(password, &[salt, &1u32.to_be_bytes()]);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &[&u]);
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

/// The value of attribute `key` (`key=value`) in a message's comma-separated list.
fn attribute<'a>(parts: &mut std::str::Split<'a, char>, key: char) -> Result<&'a str, io::Error> {
    let part = parts
        .next()
        .ok_or_else(|| bad("a SCRAM message ended early"))?;
    match part.strip_prefix(key).and_then(|p| p.strip_prefix('=')) {
        Some(value) => Ok(value),
        None => Err(bad(&format!("expected the {key}= attribute"))),
    }
}

impl Scram {
    /// Starts an exchange for `user` (PostgreSQL: empty) with `password`, binding and `nonce`.
    pub(crate) fn new(user: &str, password: &[u8], binding: Binding, nonce: String) -> Scram {
        let salted_input = match std::str::from_utf8(password)
            .ok()
            .and_then(|p| stringprep::saslprep(p).ok())
        {
            Some(p) => p.as_bytes().to_vec(),
            None => password.to_vec(),
        };
        let client_first_bare = format!("n={},r={nonce}", sasl_name(user));
        let message = format!("{}{client_first_bare}", binding.header()).into_bytes();
        Scram {
            message,
            step: Step::First {
                salted_input,
                client_first_bare,
                nonce,
                binding,
            },
        }
    }

    /// The message to send now.
    pub(crate) fn message(&self) -> &[u8] {
        &self.message
    }

    /// Takes the server's first message and prepares the proof.
    pub(crate) fn update(&mut self, server_first: &[u8]) -> Result<(), io::Error> {
        let Step::First {
            salted_input,
            client_first_bare,
            nonce,
            binding,
        } = std::mem::replace(&mut self.step, Step::Done)
        else {
            return Err(bad("a server-first message out of turn"));
        };
        let text = std::str::from_utf8(server_first).map_err(|_| bad("not UTF-8"))?;
        let mut parts = text.split(',');
        let server_nonce = attribute(&mut parts, 'r')?;
        let salt = attribute(&mut parts, 's')?;
        let iterations = attribute(&mut parts, 'i')?;
        if parts.next().is_some() {
            return Err(bad("unexpected attributes in the server-first message"));
        }
        if !server_nonce.starts_with(&nonce) || server_nonce.len() == nonce.len() {
            return Err(bad("the server's nonce does not extend the client's"));
        }
        let salt = STANDARD
            .decode(salt)
            .map_err(|_| bad("the salt is not base64"))?;
        let iterations: u32 = iterations
            .parse()
            .ok()
            .filter(|&i| i > 0)
            .ok_or_else(|| bad("invalid iteration count"))?;
        let salted = hi(&salted_input, &salt, iterations);
        let client_key = hmac(&salted, &[b"Client Key"]);
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let mut cbind = binding.header().as_bytes().to_vec();
        if let Binding::EndPoint(hash) = &binding {
            cbind.extend_from_slice(hash);
        }
        let without_proof = format!("c={},r={server_nonce}", STANDARD.encode(cbind));
        let auth = format!("{client_first_bare},{text},{without_proof}");
        let signature = hmac(&stored_key, &[auth.as_bytes()]);
        let mut proof = client_key;
        for (p, s) in proof.iter_mut().zip(signature) {
            *p ^= s;
        }
        let server_key = hmac(&salted, &[b"Server Key"]);
        self.message = format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes();
        self.step = Step::Proved {
            server_signature: hmac(&server_key, &[auth.as_bytes()]),
        };
        Ok(())
    }

    /// Takes the server's final message: `Ok` only when it proves the server knows the
    /// password.
    pub(crate) fn finish(&mut self, server_final: &[u8]) -> Result<(), io::Error> {
        let Step::Proved { server_signature } = std::mem::replace(&mut self.step, Step::Done)
        else {
            return Err(bad("a server-final message out of turn"));
        };
        let text = std::str::from_utf8(server_final).map_err(|_| bad("not UTF-8"))?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(bad(&format!("the server refused: {e}")));
        }
        let verifier = text
            .strip_prefix("v=")
            .ok_or_else(|| bad("expected the v= attribute"))?;
        let verifier = verifier.split(',').next().unwrap_or_default();
        let verifier = STANDARD
            .decode(verifier)
            .map_err(|_| bad("the server signature is not base64"))?;
        // Compared in full whatever differs first: the signature is secret until it matches.
        let same = verifier.len() == server_signature.len()
            && verifier
                .iter()
                .zip(server_signature)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        match same {
            true => Ok(()),
            false => Err(bad("invalid server signature")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3: user "user", password "pencil".
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    #[test]
    fn the_exchange_of_rfc_7677_is_reproduced() {
        let mut s = Scram::new("user", b"pencil", Binding::Without, NONCE.into());
        assert_eq!(s.message(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        s.update(SERVER_FIRST.as_bytes())
            .expect("the RFC's server-first");
        assert_eq!(std::str::from_utf8(s.message()).ok(), Some(CLIENT_FINAL));
        s.finish(SERVER_FINAL.as_bytes())
            .expect("the RFC's server signature");
    }

    #[test]
    fn a_wrong_server_signature_or_nonce_is_refused() {
        let mut s = Scram::new("user", b"pencil", Binding::Without, NONCE.into());
        s.update(SERVER_FIRST.as_bytes()).expect("server-first");
        let forged = "v=6rriTRBi23WpRR/wtuq+mMhUZUn/dB5nLTJRsjl95G4=";
        assert!(s.finish(forged.as_bytes()).is_err());
        let mut s = Scram::new("user", b"pencil", Binding::Without, NONCE.into());
        let other = SERVER_FIRST.replace("rOprNG", "xOprNG");
        assert!(
            s.update(other.as_bytes()).is_err(),
            "a nonce not extending ours"
        );
        let mut s = Scram::new("user", b"pencil", Binding::Without, NONCE.into());
        let ext = format!("{SERVER_FIRST},m=x");
        assert!(s.update(ext.as_bytes()).is_err(), "a mandatory extension");
        let mut s = Scram::new("user", b"pencil", Binding::Without, NONCE.into());
        assert!(
            s.finish(SERVER_FINAL.as_bytes()).is_err(),
            "final before first"
        );
    }

    #[test]
    fn a_wrong_password_gives_a_different_proof() {
        let mut s = Scram::new("user", b"pencil2", Binding::Without, NONCE.into());
        s.update(SERVER_FIRST.as_bytes()).expect("server-first");
        assert_ne!(std::str::from_utf8(s.message()).ok(), Some(CLIENT_FINAL));
        assert!(s.finish(SERVER_FINAL.as_bytes()).is_err());
    }

    #[test]
    fn channel_binding_goes_into_the_header_and_the_proof() {
        let s = Scram::new(
            "",
            b"pencil",
            Binding::EndPoint(vec![1, 2, 3]),
            NONCE.into(),
        );
        assert_eq!(
            s.message(),
            b"p=tls-server-end-point,,n=,r=rOprNGfwEbeRWgbNEkqO"
        );
        let mut s = Scram::new(
            "",
            b"pencil",
            Binding::EndPoint(vec![1, 2, 3]),
            NONCE.into(),
        );
        s.update(SERVER_FIRST.as_bytes()).expect("server-first");
        let c = STANDARD.encode(b"p=tls-server-end-point,,\x01\x02\x03");
        assert!(std::str::from_utf8(s.message()).is_ok_and(|m| m.starts_with(&format!("c={c},"))));
        let y = Scram::new("", b"pencil", Binding::NotOffered, NONCE.into());
        assert_eq!(y.message(), b"y,,n=,r=rOprNGfwEbeRWgbNEkqO");
    }

    #[test]
    fn names_are_escaped_and_nonces_differ() {
        assert_eq!(sasl_name("a=b,c"), "a=3Db=2Cc");
        let (a, b) = (nonce().expect("random"), nonce().expect("random"));
        assert_eq!(a.len(), 24);
        assert_ne!(a, b);
    }
}
