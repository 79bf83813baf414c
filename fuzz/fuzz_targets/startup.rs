//! The server's side of startup and authentication, as a hostile or broken server could send
//! it: the bytes are cut into messages by the frame check (`next_message`, as the driver's
//! `poll_startup` does) and each goes to `Startup::handle` until it is done or fails.
//!
//! Input layout (see `fuzz/seeds.py`):
//! - byte 0: bits 0-1 the password (none, ASCII, non-ASCII, empty); bits 2-3 `channel_binding`
//!   (disable, prefer, require); bit 4 a TLS certificate hash to bind to; bit 5 the shared
//!   path's `statement_timeout` setting; bit 6 an `application_name`; bit 7 `options`;
//! - byte 1: how the stream is cut into reads (0: one read; else chunks of 1..=byte bytes);
//! - the rest: the server's bytes.
//!
//! SCRAM's client nonce is random, so no input could echo it: the harness puts it after the
//! `r=` of each complete AuthenticationSASLContinue before the frame check sees the message, so
//! the server-first-message is parsed, the proof computed and the server signature checked.
//! Inputs asking for more than 4,096 PBKDF2 iterations (PostgreSQL's default; postgres-protocol
//! refuses over 100,000) stop there, to keep the fuzzer fast.
//!
//! Properties: no panic; an error comes with `rejected()` exactly when the server sent an
//! ErrorResponse.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pgpipe::internals::{next_message, Binding, Startup, Step};
use pgpipe::{ChannelBinding, Config};

const MAX_ITERATIONS: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let [flags, chunking, stream @ ..] = data else {
        return;
    };
    let mut cfg = Config::default();
    cfg.user = "fuzz".into();
    cfg.dbname = "app".into();
    if flags & 0x40 != 0 {
        cfg.application_name = Some("pgpipe-fuzz".into());
    }
    if flags & 0x80 != 0 {
        cfg.options = Some("-c search_path=public".into());
    }
    let password = match flags & 3 {
        0 => None,
        1 => Some("secret"),
        2 => Some("pässwörd ☃"),
        _ => Some(""),
    };
    let binding = Binding {
        mode: match (flags >> 2) & 3 {
            0 => ChannelBinding::Disable,
            1 | 3 => ChannelBinding::Prefer,
            _ => ChannelBinding::Require,
        },
        end_point: (flags & 0x10 != 0).then(|| vec![0xa5; 32]),
    };
    let settings: &[(&str, &str)] = if flags & 0x20 != 0 {
        &[("statement_timeout", "30000ms")]
    } else {
        &[]
    };
    let mut out = BytesMut::new();
    let mut startup = Startup::begin(&cfg, password, binding, settings, &mut out)
        .expect("a plain configuration encodes");
    assert!(out.len() > 8, "a StartupMessage was written");
    out.clear();

    let mut nonce: Option<Vec<u8>> = None;
    let mut rbuf = BytesMut::new();
    let mut at = 0;
    while at < stream.len() {
        let take = match chunking {
            0 => stream.len() - at,
            &n => (1 + (at * 7 + usize::from(n)) % usize::from(n)).min(stream.len() - at),
        };
        rbuf.extend_from_slice(&stream[at..at + take]);
        at += take;
        loop {
            if let Some(nonce) = &nonce {
                if !splice_nonce(&mut rbuf, nonce) {
                    return;
                }
            }
            let tag = rbuf.first().copied();
            let msg = match next_message(&mut rbuf, pgpipe_max()) {
                Ok(Some(msg)) => msg,
                Ok(None) => break,
                Err(e) => {
                    let _ = e.len();
                    return;
                }
            };
            match startup.handle(msg, &mut out) {
                Ok(Step::Continue) => {
                    if let Some(n) = client_nonce(&out) {
                        nonce = Some(n);
                    }
                    out.clear();
                }
                Ok(Step::Done(info)) => {
                    if debug() {
                        eprintln!("startup done: {:?}", info.parameter("server_version"));
                    }
                    return;
                }
                Err(e) => {
                    let e = e.to_string();
                    if debug() {
                        eprintln!("startup failed: {e}");
                    }
                    assert_eq!(
                        startup.rejected(),
                        tag == Some(b'E'),
                        "rejected() must be the server's ErrorResponse: {e}"
                    );
                    return;
                }
            }
        }
    }
});

/// `PGPIPE_FUZZ_DEBUG` set: print how each input's startup ended (for running seeds by hand).
fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("PGPIPE_FUZZ_DEBUG").is_some())
}

/// The driver's default `max_message_size`.
fn pgpipe_max() -> usize {
    pgpipe::Config::default().max_message_size
}

/// The client nonce of a SASLInitialResponse in `out` (`p`, length, mechanism, length,
/// client-first-message `<gs2 header>n=,r=<nonce>`).
fn client_nonce(out: &[u8]) -> Option<Vec<u8>> {
    if out.first() != Some(&b'p') {
        return None;
    }
    let at = out.windows(3).rposition(|w| w == b",r=")? + 3;
    Some(out[at..].to_vec())
}

/// If `rbuf` starts with a whole AuthenticationSASLContinue, puts `nonce` after the first `r=`
/// of its data and fixes its length. Returns `false` for an iteration count over
/// [`MAX_ITERATIONS`] (the input is skipped).
fn splice_nonce(rbuf: &mut BytesMut, nonce: &[u8]) -> bool {
    if rbuf.len() < 9 || rbuf[0] != b'R' || rbuf[5..9] != 11u32.to_be_bytes() {
        return true;
    }
    let len = u32::from_be_bytes([rbuf[1], rbuf[2], rbuf[3], rbuf[4]]) as usize;
    if len < 8 || rbuf.len() < len + 1 {
        return true;
    }
    let body = &rbuf[9..len + 1];
    if let Some(i) = body.windows(3).position(|w| w == b",i=") {
        let digits = body[i + 3..].iter().take_while(|b| b.is_ascii_digit());
        let mut count: u64 = 0;
        for &d in digits {
            count = count.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        }
        if count > MAX_ITERATIONS {
            return false;
        }
    }
    let Some(r) = body.windows(2).position(|w| w == b"r=") else {
        return true;
    };
    let insert = 9 + r + 2;
    let Ok(new_len) = u32::try_from(len + nonce.len()) else {
        return true;
    };
    let tail = rbuf.split_off(insert);
    rbuf.extend_from_slice(nonce);
    rbuf.extend_from_slice(&tail);
    rbuf[1..5].copy_from_slice(&new_len.to_be_bytes());
    true
}
