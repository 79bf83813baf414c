//! A TCP delay proxy: simulated round-trip time on one machine, which has no netem.
//!
//! [`DelayProxy::start`] listens on `127.0.0.1:0` and forwards every accepted connection to an
//! upstream address, in both directions. Each chunk read from one side is released to the other
//! side at its read time + `delay`, so a request/response pair pays `2 × delay` on top of the
//! real round trip, and a pipelined burst pays it once, as on a real network. Order is
//! preserved (one FIFO per direction; release times never decrease) and bytes are forwarded
//! unchanged. Every socket gets TCP_NODELAY, so the proxy adds no Nagle delay of its own.
//!
//! All connections are served by one thread running a `ppoll` loop over non-blocking std
//! sockets: no runtime, no allocation beyond one buffer per chunk, and the thread's CPU time is
//! readable ([`DelayProxy::cpu_time`]) so the benchmark can keep it out of the client's figure.
//! A direction holding more than [`MAX_QUEUED`] bytes stops reading, which lets TCP flow control
//! push back on the sender instead of growing memory.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sys::{self, ThreadCpuClock};

/// Bytes a direction may hold before the proxy stops reading from its source.
pub const MAX_QUEUED: usize = 4 << 20;
/// Largest single read.
const READ_BUF: usize = 64 << 10;
/// Longest sleep of the loop, so a stop request is noticed without a wake-up channel.
const IDLE_TICK: Duration = Duration::from_millis(20);

/// A running delay proxy; dropping it stops the thread and closes every connection.
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    delay: Duration,
    stop: Arc<AtomicBool>,
    counters: Arc<ProxyCounters>,
    cpu: ThreadCpuClock,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct ProxyCounters {
    accepted: AtomicU64,
    chunks: AtomicU64,
    bytes: AtomicU64,
    /// Largest delay beyond its due time with which a chunk started going out, in µs.
    late_max_us: AtomicU64,
}

impl DelayProxy {
    /// Starts a proxy to `upstream` that delays each direction by `delay`.
    pub fn start(upstream: SocketAddr, delay: Duration) -> io::Result<DelayProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(ProxyCounters::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = {
            let stop = stop.clone();
            let counters = counters.clone();
            std::thread::Builder::new()
                .name(format!("delay-proxy-{}ms", delay.as_millis()))
                .spawn(move || {
                    sys::set_timer_slack(1);
                    let _ = tx.send(ThreadCpuClock::current());
                    let mut lp = Loop {
                        listener,
                        upstream,
                        delay,
                        links: Vec::new(),
                        counters,
                        buf: vec![0; READ_BUF],
                    };
                    lp.run(&stop);
                })?
        };
        let cpu = rx
            .recv()
            .map_err(|_| io::Error::other("delay proxy thread died at start"))?;
        Ok(DelayProxy {
            addr,
            delay,
            stop,
            counters,
            cpu,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The one-way delay applied to each direction.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// CPU time the proxy thread has used so far.
    pub fn cpu_time(&self) -> Duration {
        self.cpu.read().unwrap_or_default()
    }

    /// The proxy thread's CPU clock (for reading from another thread).
    pub fn cpu_clock(&self) -> ThreadCpuClock {
        self.cpu
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Relaxed)
    }

    /// The largest lateness so far: how long after its due time a chunk was first offered to
    /// the destination socket (the proxy's own scheduling error, not the socket's back-pressure).
    pub fn late_max(&self) -> Duration {
        Duration::from_micros(self.counters.late_max_us.load(Relaxed))
    }

    /// Resets [`DelayProxy::late_max`].
    pub fn reset_late_max(&self) {
        self.counters.late_max_us.store(0, Relaxed);
    }

    /// Chunks and bytes forwarded so far (both directions).
    pub fn forwarded(&self) -> (u64, u64) {
        (
            self.counters.chunks.load(Relaxed),
            self.counters.bytes.load(Relaxed),
        )
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Chunk {
    due: Instant,
    data: Vec<u8>,
}

/// One direction of a link: bytes read from `src` wait in `queue` until due, then go to the
/// other socket.
#[derive(Default)]
struct Dir {
    queue: VecDeque<Chunk>,
    queued: usize,
    /// Bytes of the head chunk already written.
    head_off: usize,
    /// Leading chunks already offered to a write call (their lateness is recorded).
    offered: usize,
    /// The source reached end of stream.
    eof: bool,
    /// The destination's write side has been shut down (after `eof` and an empty queue).
    shut: bool,
}

impl Dir {
    fn head_due(&self) -> Option<Instant> {
        self.queue.front().map(|c| c.due)
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.queued < MAX_QUEUED
    }
}

struct Link {
    client: TcpStream,
    server: TcpStream,
    /// client → server
    up: Dir,
    /// server → client
    down: Dir,
    dead: bool,
}

struct Loop {
    listener: TcpListener,
    upstream: SocketAddr,
    delay: Duration,
    links: Vec<Link>,
    counters: Arc<ProxyCounters>,
    buf: Vec<u8>,
}

const IN: i16 = libc::POLLIN;
const OUT: i16 = libc::POLLOUT;

impl Loop {
    fn run(&mut self, stop: &AtomicBool) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        while !stop.load(Relaxed) {
            let now = Instant::now();
            fds.clear();
            fds.push(pollfd(&self.listener, IN));
            let mut timeout = IDLE_TICK;
            for l in &self.links {
                let mut ce = 0;
                let mut se = 0;
                if l.up.wants_read() {
                    ce |= IN;
                }
                if l.down.wants_read() {
                    se |= IN;
                }
                // Write interest only for chunks already due (a write attempt that would block
                // left them there); a chunk still in the future sets the timeout instead.
                for (dir, events) in [(&l.up, &mut se), (&l.down, &mut ce)] {
                    if let Some(due) = dir.head_due() {
                        if due <= now {
                            *events |= OUT;
                        } else {
                            timeout = timeout.min(due - now);
                        }
                    }
                }
                fds.push(pollfd(&l.client, ce));
                fds.push(pollfd(&l.server, se));
            }
            if let Err(e) = sys::ppoll(&mut fds, Some(timeout)) {
                eprintln!("delay proxy: ppoll failed: {e}");
                return;
            }
            if fds[0].revents != 0 {
                self.accept_all();
            }
            for (i, l) in self.links.iter_mut().enumerate() {
                // Links accepted in this iteration have no pollfd yet; they are served next time.
                let Some(pair) = fds.get(1 + 2 * i..3 + 2 * i) else {
                    break;
                };
                let (cr, sr) = (pair[0].revents, pair[1].revents);
                let readable = IN | libc::POLLHUP | libc::POLLERR;
                let c = &self.counters;
                if cr & readable != 0 && l.up.wants_read() {
                    read_side(
                        &mut l.client,
                        &mut l.up,
                        self.delay,
                        &mut self.buf,
                        c,
                        &mut l.dead,
                    );
                }
                if sr & readable != 0 && l.down.wants_read() {
                    read_side(
                        &mut l.server,
                        &mut l.down,
                        self.delay,
                        &mut self.buf,
                        c,
                        &mut l.dead,
                    );
                }
                // Always try due chunks: with no delay this forwards in the same iteration.
                let now = Instant::now();
                write_due(&mut l.server, &mut l.up, now, c, &mut l.dead);
                write_due(&mut l.client, &mut l.down, now, c, &mut l.dead);
                if l.up.eof && l.down.eof && l.up.shut && l.down.shut {
                    l.dead = true;
                }
            }
            self.links.retain(|l| !l.dead);
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((client, _)) => match self.link(client) {
                    Ok(l) => {
                        self.counters.accepted.fetch_add(1, Relaxed);
                        self.links.push(l);
                    }
                    Err(e) => eprintln!("delay proxy: connecting upstream failed: {e}"),
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("delay proxy: accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn link(&self, client: TcpStream) -> io::Result<Link> {
        // A blocking connect to a local server is a sub-millisecond stall of the loop, paid once
        // per connection, outside any measured window.
        let server = TcpStream::connect_timeout(&self.upstream, Duration::from_secs(5))?;
        for s in [&client, &server] {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
        }
        Ok(Link {
            client,
            server,
            up: Dir::default(),
            down: Dir::default(),
            dead: false,
        })
    }
}

fn pollfd(s: &impl AsRawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd: s.as_raw_fd(),
        events,
        revents: 0,
    }
}

/// Reads what is available from `src` (until it would block or the queue is full); each read
/// becomes one chunk due at its read time + `delay`.
fn read_side(
    src: &mut TcpStream,
    dir: &mut Dir,
    delay: Duration,
    buf: &mut [u8],
    counters: &ProxyCounters,
    dead: &mut bool,
) {
    while dir.wants_read() {
        match src.read(buf) {
            Ok(0) => {
                dir.eof = true;
                return;
            }
            Ok(n) => {
                dir.queue.push_back(Chunk {
                    due: Instant::now() + delay,
                    data: buf[..n].to_vec(),
                });
                dir.queued += n;
                counters.chunks.fetch_add(1, Relaxed);
                counters.bytes.fetch_add(n as u64, Relaxed);
                if n < buf.len() {
                    // A short read almost always means the socket is drained; skip the
                    // would-block read that would only confirm it.
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                *dead = true;
                return;
            }
        }
    }
}

/// Most chunks handed to one `writev`.
const MAX_IOV: usize = 64;

/// Writes every chunk of `dir` that is due by `now`, in order, until the socket would block;
/// shuts `dst`'s write side once the source ended and everything was delivered. Due chunks go
/// out in one `writev` (each write to a loopback socket also pays for the receiver's side, so
/// fewer calls is most of the proxy's cost).
fn write_due(
    dst: &mut TcpStream,
    dir: &mut Dir,
    now: Instant,
    counters: &ProxyCounters,
    dead: &mut bool,
) {
    while let Some(c) = dir.queue.get(dir.offered) {
        if c.due > now {
            break;
        }
        let late = (now - c.due).as_micros() as u64;
        counters.late_max_us.fetch_max(late, Relaxed);
        dir.offered += 1;
    }
    loop {
        let mut iov: [io::IoSlice<'_>; MAX_IOV] = [io::IoSlice::new(&[]); MAX_IOV];
        let mut n_iov = 0;
        for (i, c) in dir.queue.iter().enumerate().take(MAX_IOV) {
            if c.due > now {
                break;
            }
            let from = if i == 0 { dir.head_off } else { 0 };
            iov[n_iov] = io::IoSlice::new(&c.data[from..]);
            n_iov += 1;
        }
        if n_iov == 0 {
            break;
        }
        match dst.write_vectored(&iov[..n_iov]) {
            Ok(mut n) => {
                // Retire fully written chunks; a partial one keeps its offset.
                while n > 0 {
                    let head = dir
                        .queue
                        .front()
                        .expect("written bytes belong to queued chunks");
                    let rest = head.data.len() - dir.head_off;
                    if n >= rest {
                        n -= rest;
                        dir.queued -= head.data.len();
                        dir.head_off = 0;
                        dir.queue.pop_front();
                        dir.offered = dir.offered.saturating_sub(1);
                    } else {
                        dir.head_off += n;
                        n = 0;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                *dead = true;
                return;
            }
        }
    }
    if dir.eof && dir.queue.is_empty() && !dir.shut {
        dir.shut = true;
        let _ = dst.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::thread;

    /// An upstream that timestamps each line it receives and answers with the same line.
    fn echo_lines() -> (SocketAddr, mpsc::Receiver<Instant>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let mut w = s.try_clone().unwrap();
            for line in BufReader::new(s).lines() {
                let line = line.unwrap();
                let _ = tx.send(Instant::now());
                w.write_all(format!("{line}\n").as_bytes()).unwrap();
            }
        });
        (addr, rx)
    }

    #[test]
    fn each_direction_is_delayed() {
        let delay = Duration::from_millis(30);
        let (up, arrivals) = echo_lines();
        let proxy = DelayProxy::start(up, delay).unwrap();
        let s = TcpStream::connect(proxy.addr()).unwrap();
        s.set_nodelay(true).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        for i in 0..5 {
            let sent = Instant::now();
            w.write_all(format!("ping {i}\n").as_bytes()).unwrap();
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let back = Instant::now();
            let at_server = arrivals.recv().unwrap();
            assert_eq!(line, format!("ping {i}\n"));
            let there = at_server - sent;
            let home = back - at_server;
            assert!(there >= delay, "client→server took {there:?}");
            assert!(home >= delay, "server→client took {home:?}");
            // Generous ceiling: the proxy must not add much beyond the delay.
            assert!(there < delay * 3 && home < delay * 3, "{there:?} {home:?}");
        }
        assert_eq!(proxy.accepted(), 1);
        assert!(proxy.late_max() < delay, "late by {:?}", proxy.late_max());
    }

    /// An upstream that echoes raw bytes until the client closes, then closes.
    fn echo_bytes() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let mut w = s.try_clone().unwrap();
            io::copy(&mut s, &mut w).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        addr
    }

    #[test]
    fn bytes_and_order_survive_and_eof_propagates() {
        let proxy = DelayProxy::start(echo_bytes(), Duration::from_millis(2)).unwrap();
        let s = TcpStream::connect(proxy.addr()).unwrap();
        s.set_nodelay(true).unwrap();
        // 3 MiB of a position-dependent pattern in uneven writes: any loss, duplication or
        // reordering changes what comes back. More than MAX_QUEUED in flight exercises the
        // back-pressure path too.
        let total = 3 << 20;
        let data: Vec<u8> = (0..total as u64)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let mut w = s.try_clone().unwrap();
        let to_send = data.clone();
        let writer = thread::spawn(move || {
            let mut off = 0;
            let mut step = 1;
            while off < to_send.len() {
                let end = (off + step).min(to_send.len());
                w.write_all(&to_send[off..end]).unwrap();
                off = end;
                step = step * 7 % 100_003 + 1;
            }
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        let mut r = s;
        r.read_to_end(&mut back).unwrap(); // ends only if EOF made it through both ways
        writer.join().unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data, "bytes differ");
        let (_, bytes) = proxy.forwarded();
        assert_eq!(bytes, 2 * total as u64);
    }

    #[test]
    fn zero_delay_forwards_immediately() {
        let (up, _arrivals) = echo_lines();
        let proxy = DelayProxy::start(up, Duration::ZERO).unwrap();
        let s = TcpStream::connect(proxy.addr()).unwrap();
        s.set_nodelay(true).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut best = Duration::MAX;
        for _ in 0..50 {
            let t = Instant::now();
            w.write_all(b"x\n").unwrap();
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            best = best.min(t.elapsed());
        }
        assert!(best < Duration::from_millis(5), "best round trip {best:?}");
    }
}
