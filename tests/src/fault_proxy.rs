//! A TCP proxy that fails on command, for the fault tests: it stalls the links open at that
//! moment (it keeps reading, so the peer's TCP sees every byte acknowledged, and forwards
//! nothing: a half-open peer), or cuts them, at once or after a number of bytes from the server
//! (a connection lost mid-message). Links opened later are forwarded normally, as a new
//! connection through a recovered network would be.
//!
//! Threads and blocking sockets: two pumps per link, which is all a test needs.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How often a blocked pump looks at its link's orders.
const TICK: Duration = Duration::from_millis(10);

/// The orders one link follows.
#[derive(Default)]
struct Link {
    stalled: AtomicBool,
    frozen: AtomicBool,
    cut: AtomicBool,
    /// Bytes the server may still send before the link is cut; negative: no limit.
    budget: AtomicI64,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    links: Mutex<Vec<Arc<Link>>>,
    accepted: AtomicUsize,
    cancels: AtomicUsize,
}

/// A running proxy to one upstream address; dropping it stops accepting and cuts every link.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and forwards each connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || accept_loop(listener, upstream, &s))?;
        Ok(FaultProxy { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far (sessions, cancel requests and anything else).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(SeqCst)
    }

    /// Of those, connections that carried a CancelRequest (not a session: the server signals a
    /// backend and closes them).
    pub fn cancels(&self) -> usize {
        self.shared.cancels.load(SeqCst)
    }

    /// Every link open now goes silent in both directions, its sockets kept open.
    pub fn stall(&self) {
        for link in self.current() {
            link.stalled.store(true, SeqCst);
        }
    }

    /// Every link open now stops reading in both directions: once the socket buffers fill,
    /// each sender blocks (a server sending a large answer waits in ClientWrite).
    pub fn freeze(&self) {
        for link in self.current() {
            link.frozen.store(true, SeqCst);
        }
    }

    /// Every link open now is closed at once.
    pub fn cut(&self) {
        for link in self.current() {
            link.cut.store(true, SeqCst);
        }
    }

    /// Every link open now forwards `bytes` more bytes from the server, then is closed: the
    /// client sees the connection end in the middle of whatever message those bytes start.
    pub fn cut_after(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        for link in self.current() {
            link.budget.store(bytes, SeqCst);
        }
    }

    fn current(&self) -> Vec<Arc<Link>> {
        let mut links = self.shared.links.lock().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| !l.cut.load(SeqCst));
        links.clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        self.cut();
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: &Arc<Shared>) {
    while !shared.stop.load(SeqCst) {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(TICK);
                continue;
            }
            Err(_) => return,
        };
        let Ok(server) = TcpStream::connect(upstream) else {
            continue;
        };
        shared.accepted.fetch_add(1, SeqCst);
        let link = Arc::new(Link {
            budget: AtomicI64::new(-1),
            ..Link::default()
        });
        shared
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(link.clone());
        let _ = start_pumps(client, server, link, shared.clone());
    }
}

fn start_pumps(
    client: TcpStream,
    server: TcpStream,
    link: Arc<Link>,
    shared: Arc<Shared>,
) -> io::Result<()> {
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(TICK))?;
    }
    let (c2, s2) = (client.try_clone()?, server.try_clone()?);
    let l2 = link.clone();
    thread::spawn(move || pump(client, server, &link, Some(&shared)));
    thread::spawn(move || pump(s2, c2, &l2, None));
    Ok(())
}

/// Copies `from` to `to` under the link's orders. The client's direction gets `shared`, to
/// count CancelRequests by their first packet; the server's bytes count against the budget.
fn pump(mut from: TcpStream, mut to: TcpStream, link: &Link, shared: Option<&Shared>) {
    const CANCEL_CODE: [u8; 4] = 80_877_102i32.to_be_bytes();
    let from_server = shared.is_none();
    let mut first = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if link.cut.load(SeqCst) {
            break;
        }
        if link.frozen.load(SeqCst) {
            thread::sleep(TICK);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let (Some(shared), true) = (shared, first) {
            first = false;
            if n >= 8 && buf[4..8] == CANCEL_CODE {
                shared.cancels.fetch_add(1, SeqCst);
            }
        }
        // Stalled: what was read is swallowed (acknowledged by TCP, never delivered).
        if link.stalled.load(SeqCst) {
            continue;
        }
        let mut take = n;
        if from_server {
            let budget = link.budget.load(SeqCst);
            if budget >= 0 {
                take = n.min(usize::try_from(budget).unwrap_or(0));
                link.budget.fetch_sub(take as i64, SeqCst);
            }
        }
        if to.write_all(&buf[..take]).is_err() {
            break;
        }
        if take < n {
            link.cut.store(true, SeqCst);
            break;
        }
    }
    link.cut.store(true, SeqCst);
    // Linger 0 would be a reset; a shutdown is enough for the peer to see the end.
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
