//! A scripted PostgreSQL server for the hostile-server tests. It speaks enough of the protocol
//! to be a correct server on its own (a trusted or password startup, the answer to the
//! connection's catalog question, and well-formed answers to pipelined extended-protocol
//! units of `SELECT 1`), and a [`Script`] bends what it sends: cut at a byte, a byte
//! corrupted, messages put before or after, another authentication than the client expects.
//! It records every password message it receives, so a test can tell whether a secret was
//! sent to a server that did not earn it.
//!
//! Threads and blocking sockets, one connection at a time per accept: all a test needs.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How the server asks the client to authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// AuthenticationOk at once.
    Trust,
    /// A cleartext password request.
    Cleartext,
    /// An MD5 request (any salt).
    Md5,
    /// SCRAM-SHA-256 that ends with a server signature the client cannot verify.
    ScramWrongSignature,
    /// SCRAM-SHA-256 begun, then AuthenticationOk without the server's final message.
    ScramSkipFinal,
}

/// What the server does to the bytes it would honestly send at one phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bend {
    /// Sends them as they are.
    Honest,
    /// Sends the first `n` bytes, then closes the connection.
    CutAt(usize),
    /// Sends them with byte `n` replaced by `value`, goes on serving honestly for
    /// [`AFTER_CORRUPTION`] (a harmless corruption is then served to the end), then closes the
    /// connection (a corrupted length would otherwise leave both sides waiting).
    Corrupt(usize, u8),
    /// Sends `bytes` before the honest answer.
    Before(Vec<u8>),
    /// Sends `bytes` instead of the honest answer, then closes the connection.
    Instead(Vec<u8>),
    /// Sends `bytes` instead of the honest answer and keeps the connection open, reading and
    /// discarding, so that only what `bytes` say can end the client's attempt.
    Stall(Vec<u8>),
}

/// What a fake server plays on every connection it accepts.
#[derive(Clone, Debug)]
pub struct Script {
    /// The authentication it asks for.
    pub auth: Auth,
    /// Applied to everything after the authentication exchange up to the first ReadyForQuery
    /// (ParameterStatus, BackendKeyData, ReadyForQuery; AuthenticationOk too under `Trust`).
    pub startup: Bend,
    /// Applied to the answer to the first extended-protocol batch (up to its Sync) of the
    /// connection; later ones are honest.
    pub reply: Bend,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            auth: Auth::Trust,
            startup: Bend::Honest,
            reply: Bend::Honest,
        }
    }
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    accepted: AtomicUsize,
    passwords: Mutex<Vec<Vec<u8>>>,
}

impl Shared {
    /// The password messages received (a panicking connection thread cannot lose them).
    fn passwords(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.passwords.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running fake server; dropping it stops accepting (open connections end with the client).
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeServer {
    /// Listens on a free port of 127.0.0.1 and plays `script` on each connection.
    pub fn start(script: Script) -> io::Result<FakeServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            while !s.stop.load(SeqCst) {
                match listener.accept() {
                    Ok((sock, _)) => {
                        s.accepted.fetch_add(1, SeqCst);
                        let (s, script) = (s.clone(), script.clone());
                        thread::spawn(move || {
                            let _ = serve(sock, &script, &s);
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(2))
                    }
                    Err(_) => return,
                }
            }
        });
        Ok(FakeServer { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A keyword/value connection string to this server for `user`, plaintext, one attempt.
    pub fn conninfo(&self, user: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname=fake sslmode=disable",
            self.addr.port()
        )
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(SeqCst)
    }

    /// The bodies of the password messages clients sent (cleartext passwords, MD5 hashes,
    /// SASL responses).
    pub fn passwords(&self) -> Vec<Vec<u8>> {
        self.shared.passwords().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
    }
}

/// A backend message.
pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(5 + body.len());
    m.push(tag);
    m.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// An authentication request (`R`) with its code and data.
pub fn auth_request(code: i32, data: &[u8]) -> Vec<u8> {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(data);
    message(b'R', &body)
}

/// A ParameterStatus.
pub fn parameter_status(name: &str, value: &str) -> Vec<u8> {
    message(b'S', format!("{name}\0{value}\0").as_bytes())
}

/// An ErrorResponse or NoticeResponse (`tag`) with these fields (type byte, value).
pub fn error_fields(tag: u8, fields: &[(u8, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (t, v) in fields {
        body.push(*t);
        body.extend_from_slice(v);
        body.push(0);
    }
    body.push(0);
    message(tag, &body)
}

/// A DataRow of these values (`None`: NULL).
pub fn data_row(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut body = (values.len() as i16).to_be_bytes().to_vec();
    for v in values {
        match v {
            Some(v) => {
                body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                body.extend_from_slice(v);
            }
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    message(b'D', &body)
}

/// A RowDescription of one `text` column named `v`.
pub fn row_description() -> Vec<u8> {
    let mut body = 1i16.to_be_bytes().to_vec();
    body.extend_from_slice(b"v\0");
    body.extend_from_slice(&0i32.to_be_bytes()); // table
    body.extend_from_slice(&0i16.to_be_bytes()); // column
    body.extend_from_slice(&25i32.to_be_bytes()); // text
    body.extend_from_slice(&(-1i16).to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes()); // text format
    message(b'T', &body)
}

/// The honest rest of a startup after authentication.
pub fn startup_tail() -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in [
        ("server_version", "15.0"),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("standard_conforming_strings", "on"),
        ("integer_datetimes", "on"),
        ("DateStyle", "ISO, MDY"),
        ("TimeZone", "UTC"),
        ("in_hot_standby", "off"),
        ("default_transaction_read_only", "off"),
    ] {
        out.extend(parameter_status(k, v));
    }
    let mut key = 4242i32.to_be_bytes().to_vec();
    key.extend_from_slice(&77i32.to_be_bytes());
    out.extend(message(b'K', &key));
    out.extend(message(b'Z', b"I"));
    out
}

/// Reads one frontend message: (tag, body). `None` at the end of the stream.
fn read_message(sock: &mut TcpStream) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    match sock.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidData)?;
    let mut body = vec![0u8; len.saturating_sub(4)];
    sock.read_exact(&mut body)?;
    Ok(Some((head[0], body)))
}

/// How long a server goes on after a [`Bend::Corrupt`] before it hangs up.
pub const AFTER_CORRUPTION: Duration = Duration::from_millis(300);

/// What the connection does after a phase was sent.
enum Next {
    Serve,
    HangUp,
    Stall,
    /// Serve until then, and hang up.
    ServeUntil(Instant),
}

/// Sends `honest` as `bend` says.
fn send(sock: &mut TcpStream, honest: Vec<u8>, bend: &Bend) -> io::Result<Next> {
    match bend {
        Bend::Honest => {
            sock.write_all(&honest)?;
            Ok(Next::Serve)
        }
        Bend::CutAt(n) => {
            sock.write_all(&honest[..(*n).min(honest.len())])?;
            Ok(Next::HangUp)
        }
        Bend::Corrupt(n, value) => {
            let mut bytes = honest;
            if let Some(b) = bytes.get_mut(*n) {
                *b = *value;
            }
            sock.write_all(&bytes)?;
            Ok(Next::ServeUntil(Instant::now() + AFTER_CORRUPTION))
        }
        Bend::Before(extra) => {
            sock.write_all(extra)?;
            sock.write_all(&honest)?;
            Ok(Next::Serve)
        }
        Bend::Instead(bytes) => {
            sock.write_all(bytes)?;
            Ok(Next::HangUp)
        }
        Bend::Stall(bytes) => {
            sock.write_all(bytes)?;
            Ok(Next::Stall)
        }
    }
}

/// Reads and discards until the client goes.
fn stall(mut sock: TcpStream) -> io::Result<()> {
    let mut sink = [0u8; 4096];
    while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

/// Ends the connection after a bent phase: the client sees the end of the stream once it
/// has read what was sent.
fn hang_up(mut sock: TcpStream) -> io::Result<()> {
    sock.flush()?;
    let _ = sock.shutdown(Shutdown::Write);
    // Drain what the client still sends so that the close is a clean FIN, not a reset that
    // could discard bytes the client has not read yet.
    let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
    let mut sink = [0u8; 4096];
    while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

fn serve(mut sock: TcpStream, script: &Script, shared: &Shared) -> io::Result<()> {
    sock.set_nodelay(true)?;
    // The startup packet: length, then protocol and parameters.
    let mut len = [0u8; 4];
    sock.read_exact(&mut len)?;
    let mut rest = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
    sock.read_exact(&mut rest)?;
    let mut tail = Vec::new();
    match &script.auth {
        Auth::Trust => tail.extend(auth_request(0, b"")),
        other => {
            let request = match other {
                Auth::Cleartext => auth_request(3, b""),
                Auth::Md5 => auth_request(5, b"salt"),
                _ => auth_request(10, b"SCRAM-SHA-256\0\0"),
            };
            sock.write_all(&request)?;
            let Some((b'p', first)) = read_message(&mut sock)? else {
                return Ok(());
            };
            shared.passwords().push(first.clone());
            if matches!(other, Auth::ScramWrongSignature | Auth::ScramSkipFinal) {
                // The client-first message: mechanism, length, "n,,n=,r=<nonce>".
                let text = String::from_utf8_lossy(&first);
                let nonce = text.split("r=").nth(1).unwrap_or("").trim_end_matches('\0');
                let server_first = format!("r={nonce}fakeserver,s=c2FsdHNhbHQ=,i=4096");
                sock.write_all(&auth_request(11, server_first.as_bytes()))?;
                let Some((b'p', last)) = read_message(&mut sock)? else {
                    return Ok(());
                };
                shared.passwords().push(last);
                if *other == Auth::ScramWrongSignature {
                    let v = b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
                    sock.write_all(&auth_request(12, v))?;
                }
            }
            tail.extend(auth_request(0, b""));
        }
    }
    tail.extend(startup_tail());
    let mut until = match send(&mut sock, tail, &script.startup)? {
        Next::HangUp => return hang_up(sock),
        Next::Stall => return stall(sock),
        Next::Serve => None,
        Next::ServeUntil(t) => Some(t),
    };
    let mut first_batch = true;
    let mut answer = Vec::new();
    loop {
        if let Some(t) = until {
            let left = t.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return hang_up(sock);
            }
            sock.set_read_timeout(Some(left))?;
        }
        let (tag, body) = match read_message(&mut sock) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return hang_up(sock)
            }
            Err(e) => return Err(e),
        };
        match tag {
            b'Q' => {
                // The catalog question, or a reset: one NULL row, then ready.
                let sql = String::from_utf8_lossy(&body);
                if sql.starts_with("SELECT") {
                    answer.extend(row_description());
                    answer.extend(data_row(&[None]));
                    answer.extend(message(b'C', b"SELECT 1\0"));
                } else {
                    answer.extend(message(b'C', b"SET\0"));
                }
                answer.extend(message(b'Z', b"I"));
                sock.write_all(&std::mem::take(&mut answer))?;
            }
            b'P' => answer.extend(message(b'1', b"")),
            b'B' => answer.extend(message(b'2', b"")),
            b'C' => answer.extend(message(b'3', b"")),
            b'D' => {
                if body.first() == Some(&b'S') {
                    answer.extend(message(b't', &0i16.to_be_bytes()));
                }
                answer.extend(row_description());
            }
            b'E' => {
                answer.extend(data_row(&[Some(b"1")]));
                answer.extend(message(b'C', b"SELECT 1\0"));
            }
            b'S' => {
                answer.extend(message(b'Z', b"I"));
                let honest = std::mem::take(&mut answer);
                let bend = match first_batch {
                    true => &script.reply,
                    false => &Bend::Honest,
                };
                first_batch = false;
                match send(&mut sock, honest, bend)? {
                    Next::HangUp => return hang_up(sock),
                    Next::Stall => return stall(sock),
                    Next::Serve => {}
                    Next::ServeUntil(t) => until = Some(until.map_or(t, |u| u.min(t))),
                }
            }
            b'H' => sock.write_all(&std::mem::take(&mut answer))?,
            b'X' => return Ok(()),
            _ => {}
        }
    }
}
