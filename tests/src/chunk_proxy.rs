//! A TCP proxy that hands the client's bytes to the server in pieces, as a real network can:
//! a write split at arbitrary bytes, cut between the messages of one unit, a segment arriving
//! late (a retransmission holds back everything behind it, since TCP delivers in order), or
//! several writes arriving together. The server's bytes pass unchanged.
//!
//! Placed between a client and PgBouncer in transaction mode it reproduces PgBouncer 1.18's
//! race (its issue 759): PgBouncer forwards the start of a unit, the server answers the Sync
//! before it, and PgBouncer hands the server link to another client while the rest of the
//! unit is still on its way. Placed between a client and PostgreSQL it is the control:
//! PostgreSQL reads a stream, so pieces change nothing there.
//!
//! Threads and blocking sockets, two per link. A pause is a sleep of the client's pump between
//! two pieces, each piece one write with TCP_NODELAY, so the receiver reads them apart.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How often an idle pump looks at the stop flag.
const TICK: Duration = Duration::from_millis(10);

/// How the client's bytes are cut into pieces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Chunking {
    /// Forwarded as read: the control.
    Pass,
    /// Each read, with probability `p`, cut at 1 to 3 random bytes (inside messages, too),
    /// with `pause` between the pieces.
    SplitBytes {
        /// Probability that a read is cut.
        p: f64,
        /// Time between two pieces.
        pause: Duration,
    },
    /// Between two messages of one unit (after a Parse, Bind, Describe, Execute or Close: the
    /// rest of the unit, up to its Sync, arrives later), with probability `p` per such point.
    CutUnits {
        /// Probability of a cut at each point inside a unit.
        p: f64,
        /// Time between two pieces.
        pause: Duration,
    },
    /// The stream in segments of `mss` bytes; each segment, with probability `p`, arrives
    /// `delay` late, and everything behind it with it (a retransmission).
    LateSegments {
        /// Segment size (1,448 bytes on an Ethernet path with timestamps).
        mss: usize,
        /// Probability that a segment is late.
        p: f64,
        /// How late.
        delay: Duration,
    },
    /// Reads gathered for `hold` and forwarded as one write (pieces put together).
    Coalesce {
        /// How long bytes are held.
        hold: Duration,
    },
    /// Each read takes one of the cuttings above at random (`Pass` included).
    Mix,
}

/// What the proxy did to the client's bytes, summed over its links.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChunkStats {
    /// Client bytes forwarded.
    pub bytes: u64,
    /// Writes to the server.
    pub pieces: u64,
    /// Pauses between two pieces (cuts and late segments).
    pub pauses: u64,
    /// Of those, pauses at a point inside a unit (after a message that is not a Sync, a
    /// Query or a Terminate, or inside a message): the pooler's race needs one.
    pub inside_units: u64,
}

#[derive(Default)]
struct Counters {
    bytes: AtomicU64,
    pieces: AtomicU64,
    pauses: AtomicU64,
    inside_units: AtomicU64,
}

struct Shared {
    stop: AtomicBool,
    chunking: Chunking,
    seed: AtomicU64,
    counters: Counters,
    links: Mutex<Vec<TcpStream>>,
}

/// A running proxy; dropping it stops accepting and closes every link.
pub struct ChunkProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ChunkProxy {
    /// Listens on a free port of 127.0.0.1 and forwards each connection to `upstream`, cutting
    /// the client's bytes as `chunking` says; `seed` makes the cuts repeatable per link order.
    pub fn start(upstream: SocketAddr, chunking: Chunking, seed: u64) -> io::Result<ChunkProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            chunking,
            seed: AtomicU64::new(seed | 1),
            counters: Counters::default(),
            links: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        thread::Builder::new()
            .name("chunk-proxy".into())
            .spawn(move || accept_loop(listener, upstream, &s))?;
        Ok(ChunkProxy { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has done so far.
    pub fn stats(&self) -> ChunkStats {
        let c = &self.shared.counters;
        ChunkStats {
            bytes: c.bytes.load(Relaxed),
            pieces: c.pieces.load(Relaxed),
            pauses: c.pauses.load(Relaxed),
            inside_units: c.inside_units.load(Relaxed),
        }
    }
}

impl Drop for ChunkProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        let links = self.shared.links.lock().unwrap_or_else(|e| e.into_inner());
        for s in links.iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: &Arc<Shared>) {
    while !shared.stop.load(Relaxed) {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(_) => return,
        };
        let Ok(server) = TcpStream::connect(upstream) else {
            continue;
        };
        // Each link its own random stream, from the proxy's seed.
        let seed = shared.seed.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed);
        let _ = start_link(client, server, seed, shared.clone());
    }
}

fn start_link(
    client: TcpStream,
    server: TcpStream,
    seed: u64,
    shared: Arc<Shared>,
) -> io::Result<()> {
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(TICK))?;
    }
    {
        let mut links = shared.links.lock().unwrap_or_else(|e| e.into_inner());
        links.push(client.try_clone()?);
        links.push(server.try_clone()?);
    }
    let (c2, s2) = (client.try_clone()?, server.try_clone()?);
    let sh = shared.clone();
    thread::spawn(move || {
        let mut cutter = Cutter::new(shared.chunking, seed);
        client_pump(client, server, &mut cutter, &shared);
    });
    thread::spawn(move || server_pump(s2, c2, &sh));
    Ok(())
}

/// The server's bytes, unchanged.
fn server_pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    while !shared.stop.load(Relaxed) {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if is_retry(&e) => continue,
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// The client's bytes, in the pieces the cutter chooses.
fn client_pump(mut from: TcpStream, mut to: TcpStream, cutter: &mut Cutter, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut held: Vec<u8> = Vec::new();
    let c = &shared.counters;
    'outer: while !shared.stop.load(Relaxed) {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_retry(&e) => continue,
            Err(_) => break,
        };
        held.clear();
        held.extend_from_slice(&buf[..n]);
        let mode = cutter.mode();
        if let Chunking::Coalesce { hold } = mode {
            // Whatever else arrives within `hold` goes out with it.
            let until = Instant::now() + hold;
            let _ = from.set_read_timeout(Some(hold.max(Duration::from_micros(100))));
            while Instant::now() < until {
                match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(m) => held.extend_from_slice(&buf[..m]),
                    Err(e) if is_retry(&e) => {}
                    Err(_) => break,
                }
            }
            let _ = from.set_read_timeout(Some(TICK));
        }
        let plan = cutter.plan(&held, mode);
        let mut at = 0;
        for cut in plan {
            if cut.at > at {
                if to.write_all(&held[at..cut.at]).is_err() {
                    break 'outer;
                }
                c.pieces.fetch_add(1, Relaxed);
                at = cut.at;
            }
            c.pauses.fetch_add(1, Relaxed);
            if cut.inside_unit {
                c.inside_units.fetch_add(1, Relaxed);
            }
            thread::sleep(cut.pause);
        }
        if at < held.len() {
            if to.write_all(&held[at..]).is_err() {
                break;
            }
            c.pieces.fetch_add(1, Relaxed);
        }
        c.bytes.fetch_add(held.len() as u64, Relaxed);
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// A pause before byte `at` of a read.
#[derive(Debug)]
struct Cut {
    at: usize,
    pause: Duration,
    inside_unit: bool,
}

/// Chooses the cuts, following the frontend messages across reads.
struct Cutter {
    chunking: Chunking,
    rng: u64,
    frames: Frames,
    /// Bytes of the stream so far (segments count from its start).
    offset: u64,
}

impl Cutter {
    fn new(chunking: Chunking, seed: u64) -> Cutter {
        Cutter {
            chunking,
            rng: seed | 1,
            frames: Frames::default(),
            offset: 0,
        }
    }

    fn next(&mut self) -> u64 {
        // xorshift64*: enough for choosing cuts.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// The cutting for the next read.
    fn mode(&mut self) -> Chunking {
        match self.chunking {
            Chunking::Mix => match self.below(5) {
                0 => Chunking::Pass,
                1 => Chunking::SplitBytes {
                    p: 0.3,
                    pause: Duration::from_micros(500 + self.below(1500) as u64),
                },
                2 => Chunking::CutUnits {
                    p: 0.2,
                    pause: Duration::from_micros(500 + self.below(1500) as u64),
                },
                3 => Chunking::LateSegments {
                    mss: 1448,
                    p: 0.05,
                    delay: Duration::from_millis(1 + self.below(10) as u64),
                },
                _ => Chunking::Coalesce {
                    hold: Duration::from_micros(200 + self.below(800) as u64),
                },
            },
            other => other,
        }
    }

    /// The cuts of one read `data` under `mode`, in order.
    fn plan(&mut self, data: &[u8], mode: Chunking) -> Vec<Cut> {
        let ends = self.frames.feed(data);
        let start = self.offset;
        self.offset += data.len() as u64;
        // The startup packet stays whole, as one small segment does on a real network
        // (PgBouncer 1.18 refuses one that arrives in pieces: "partial pkt in startup phase").
        let first = match self.frames.startup_end {
            Some(end) => end.saturating_sub(start) as usize,
            None => return Vec::new(),
        };
        let inside = |at: usize, ends: &[(usize, u8)]| -> bool {
            match ends.iter().find(|(end, _)| *end == at) {
                Some((_, tag)) => !matches!(tag, b'S' | b'Q' | b'X' | 0),
                // Not at a message's end: inside a message.
                None => true,
            }
        };
        let mut cuts = self.cuts(data, mode, start, &ends, inside);
        cuts.retain(|c| c.at > first);
        cuts
    }

    /// [`Cutter::plan`]'s cuts before the startup packet is left out.
    fn cuts(
        &mut self,
        data: &[u8],
        mode: Chunking,
        start: u64,
        ends: &[(usize, u8)],
        inside: impl Fn(usize, &[(usize, u8)]) -> bool,
    ) -> Vec<Cut> {
        let mut cuts = Vec::new();
        match mode {
            Chunking::Pass | Chunking::Coalesce { .. } | Chunking::Mix => {}
            Chunking::SplitBytes { p, pause } => {
                if data.len() > 1 && self.chance(p) {
                    let mut points: Vec<usize> = (0..1 + self.below(3))
                        .map(|_| 1 + self.below(data.len() - 1))
                        .collect();
                    points.sort_unstable();
                    points.dedup();
                    for at in points {
                        cuts.push(Cut {
                            at,
                            pause,
                            inside_unit: inside(at, ends),
                        });
                    }
                }
            }
            Chunking::CutUnits { p, pause } => {
                for &(end, tag) in ends {
                    let mid_unit = !matches!(tag, b'S' | b'Q' | b'X' | 0);
                    if mid_unit && end < data.len() && self.chance(p) {
                        cuts.push(Cut {
                            at: end,
                            pause,
                            inside_unit: true,
                        });
                    }
                }
            }
            Chunking::LateSegments { mss, p, delay } => {
                let mss = mss.max(1) as u64;
                // Segment starts inside this read (the first byte of the read may start one).
                let mut seg = start.div_ceil(mss) * mss;
                while seg < self.offset {
                    let at = (seg - start) as usize;
                    if at > 0 && self.chance(p) {
                        cuts.push(Cut {
                            at,
                            pause: delay,
                            inside_unit: inside(at, ends),
                        });
                    }
                    seg += mss;
                }
            }
        }
        cuts
    }
}

/// Frontend message boundaries across reads: the startup phase (untagged messages: SSL or GSS
/// requests, the startup packet, a CancelRequest) and then tagged messages.
#[derive(Default)]
struct Frames {
    tagged: bool,
    /// Where in the stream the startup packet ended.
    startup_end: Option<u64>,
    /// Bytes fed so far.
    fed: u64,
    /// The header read so far (8 bytes untagged: length and code; 5 tagged: tag and length).
    header: Vec<u8>,
    /// Bytes of the current message's body still to come.
    remaining: usize,
    tag: u8,
}

impl Frames {
    /// Feeds a read; returns where in it messages end, with their tags (0 for untagged).
    fn feed(&mut self, data: &[u8]) -> Vec<(usize, u8)> {
        let mut ends = Vec::new();
        let mut i = 0;
        while i < data.len() {
            if self.remaining > 0 {
                let take = self.remaining.min(data.len() - i);
                self.remaining -= take;
                i += take;
                if self.remaining == 0 {
                    ends.push((i, self.tag));
                }
                continue;
            }
            let need = if self.tagged { 5 } else { 8 };
            let take = (need - self.header.len()).min(data.len() - i);
            self.header.extend_from_slice(&data[i..i + take]);
            i += take;
            if self.header.len() < need {
                break;
            }
            let (tag, len, rest) = if self.tagged {
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]) as usize;
                (self.header[0], len, len.saturating_sub(4))
            } else {
                let len = u32::from_be_bytes([
                    self.header[0],
                    self.header[1],
                    self.header[2],
                    self.header[3],
                ]) as usize;
                let code = u32::from_be_bytes([
                    self.header[4],
                    self.header[5],
                    self.header[6],
                    self.header[7],
                ]);
                // SSLRequest and GSSENCRequest keep the startup phase; anything else (the
                // startup packet) ends it.
                if code != 80_877_103 && code != 80_877_104 {
                    self.tagged = true;
                    let end = self.fed + (i + len.saturating_sub(8)) as u64;
                    self.startup_end = Some(end);
                }
                (0, len, len.saturating_sub(8))
            };
            let _ = len;
            self.header.clear();
            self.tag = tag;
            self.remaining = rest;
            if rest == 0 {
                ends.push((i, tag));
            }
        }
        self.fed += data.len() as u64;
        ends
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn startup() -> Vec<u8> {
        let mut m = Vec::new();
        let body = b"\0\x03\0\0user\0postgres\0\0";
        m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn frames_are_found_across_reads() {
        let mut stream = startup();
        let unit: Vec<u8> = [
            msg(b'P', b"\0SELECT 1\0\0\0"),
            msg(b'B', b"\0\0\0\0\0\0\0\0"),
            msg(b'E', b"\0\0\0\0\0"),
            msg(b'S', b""),
        ]
        .concat();
        stream.extend_from_slice(&unit);
        stream.extend_from_slice(&unit);
        // Fed one byte at a time, the same ends come out as fed whole.
        let mut whole = Frames::default();
        let ends: Vec<u8> = whole.feed(&stream).into_iter().map(|(_, t)| t).collect();
        assert_eq!(ends, b"\0PBESPBES");
        let mut bytewise = Frames::default();
        let mut tags = Vec::new();
        for b in &stream {
            tags.extend(
                bytewise
                    .feed(std::slice::from_ref(b))
                    .into_iter()
                    .map(|(_, t)| t),
            );
        }
        assert_eq!(tags, ends);
    }

    #[test]
    fn unit_cuts_fall_between_messages_of_one_unit() {
        let mut c = Cutter::new(
            Chunking::CutUnits {
                p: 1.0,
                pause: Duration::ZERO,
            },
            7,
        );
        let _ = c.plan(&startup(), Chunking::Pass);
        let unit: Vec<u8> = [
            msg(b'B', b"\0\0\0\0\0\0\0\0"),
            msg(b'E', b"\0\0\0\0\0"),
            msg(b'S', b""),
        ]
        .concat();
        let two = [unit.clone(), unit.clone()].concat();
        let cuts = c.plan(&two, c.chunking);
        let at: Vec<usize> = cuts.iter().map(|c| c.at).collect();
        let b = msg(b'B', b"\0\0\0\0\0\0\0\0").len();
        let e = msg(b'E', b"\0\0\0\0\0").len();
        // After each Bind and Execute, never after a Sync.
        assert_eq!(at, vec![b, b + e, unit.len() + b, unit.len() + b + e]);
        assert!(cuts.iter().all(|c| c.inside_unit));
    }

    #[test]
    fn the_startup_packet_stays_whole() {
        let mut c = Cutter::new(
            Chunking::SplitBytes {
                p: 1.0,
                pause: Duration::ZERO,
            },
            11,
        );
        let mut stream = startup();
        let at = stream.len();
        stream.extend(msg(b'Q', b"SELECT 1\0"));
        for _ in 0..100 {
            let mut fresh = Cutter::new(c.chunking, c.next());
            let cuts = fresh.plan(&stream, fresh.chunking);
            assert!(cuts.iter().all(|cut| cut.at > at), "{cuts:?}");
        }
    }

    #[test]
    fn late_segments_fall_on_segment_starts() {
        let mut c = Cutter::new(
            Chunking::LateSegments {
                mss: 100,
                p: 1.0,
                delay: Duration::ZERO,
            },
            3,
        );
        let data = vec![b'x'; 250];
        c.frames.tagged = true;
        c.frames.startup_end = Some(0);
        c.frames.remaining = 10_000;
        let at: Vec<usize> = c.plan(&data, c.chunking).iter().map(|c| c.at).collect();
        assert_eq!(at, vec![100, 200]);
        let at: Vec<usize> = c.plan(&data, c.chunking).iter().map(|c| c.at).collect();
        // The stream is at 250: the next segments start at 300 and 400.
        assert_eq!(at, vec![50, 150]);
    }
}
