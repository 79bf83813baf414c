//! A fake PostgreSQL server speaking the v3 protocol for the subset pgpipe uses here.
//!
//! Startup with trust auth; the extended protocol (Parse, Bind, Describe, Execute, Sync, Close,
//! Flush) with PostgreSQL's rules that an error skips to the next Sync and that the Executes
//! before a Sync outside a transaction block form one implicit transaction (committed at the
//! Sync, rolled back by an error); BEGIN / COMMIT / ROLLBACK in either protocol (a simple text
//! may start with `BEGIN; `); simple Query for the exclusive connections' reset; Terminate. It
//! logs every statement it executes (connection, kind, parameter, transaction), so the checker
//! can tell "ran" from "did not run", and which transactions committed. Faults it injects between messages: a reset, or a FATAL 57P01
//! termination followed by a close; and a slow reader.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

pub use crate::db::{Db, Executed, Kind};
use crate::executor::Sim;
use crate::net::SimSocket;

struct Conn {
    sim: Sim,
    pid: u32,
    sock: SimSocket,
    db: Rc<RefCell<Db>>,
    out: Vec<u8>,
    /// Parameters executed since the last ReadyForQuery was written.
    unanswered: Vec<i64>,
    statements: HashMap<String, Stmt>,
    portal: Option<Portal>,
    /// The implicit transaction of the Executes since the last Sync (outside a transaction
    /// block), and whether an error rolled it back.
    implicit: Option<u64>,
    implicit_failed: bool,
    /// An error happened: skip to Sync.
    skipping: bool,
    /// `b'I'`, `b'T'` or `b'E'`.
    status: u8,
    tx: Option<u64>,
}

/// A statement the server knows: one of the SQL subset's, or transaction control.
#[derive(Clone)]
enum Stmt {
    Query(Kind),
    Control(String),
}

/// A bound statement: a query with its first parameter and result format, or control.
enum Portal {
    Query(Kind, Option<i64>, bool),
    Control(String),
}

const CONTROL: [&str; 3] = ["BEGIN", "COMMIT", "ROLLBACK"];

/// Serves one connection until the client terminates or closes it, or a fault ends it.
pub(crate) async fn serve(sim: Sim, pid: u32, sock: SimSocket, db: Rc<RefCell<Db>>) {
    let mut c = Conn {
        sim,
        pid,
        sock,
        db,
        out: Vec::new(),
        unanswered: Vec::new(),
        statements: HashMap::new(),
        portal: None,
        implicit: None,
        implicit_failed: false,
        skipping: false,
        status: b'I',
        tx: None,
    };
    let end = c.run().await;
    c.sim.log(|| {
        let how = match end {
            Ok(()) => "ended",
            Err(Stop::Io) => "stopped: I/O error",
            Err(Stop::Done) => "stopped: EOF",
        };
        format!("server {pid}: {how}")
    });
}

/// Why serving stopped early.
enum Stop {
    Io,
    Done,
}

impl From<std::io::Error> for Stop {
    fn from(_: std::io::Error) -> Stop {
        Stop::Io
    }
}

impl Conn {
    async fn read_exact(&mut self, buf: &mut Vec<u8>, n: usize) -> Result<(), Stop> {
        let mut chunk = [0u8; 512];
        while buf.len() < n {
            let slow = self.sim.st.borrow().net.faults.slow_read;
            if !slow.is_zero() && self.sim.below(4) == 0 {
                let d = Duration::from_micros(self.sim.below(slow.as_micros() as u64 + 1));
                self.sim.sleep(d).await;
            }
            let want = (n - buf.len()).min(chunk.len());
            let got = self.sock.read(&mut chunk[..want]).await?;
            if got == 0 {
                return Err(Stop::Done);
            }
            buf.extend_from_slice(&chunk[..got]);
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Stop> {
        let out = std::mem::take(&mut self.out);
        self.sock.write_all(&out).await?;
        Ok(())
    }

    fn msg(&mut self, tag: u8, body: &[u8]) {
        self.out.push(tag);
        self.out
            .extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        self.out.extend_from_slice(body);
    }

    fn error(&mut self, severity: &str, code: &str, message: &str) {
        let mut b = Vec::new();
        for (f, v) in [
            (b'S', severity),
            (b'V', severity),
            (b'C', code),
            (b'M', message),
        ] {
            b.push(f);
            b.extend_from_slice(v.as_bytes());
            b.push(0);
        }
        b.push(0);
        self.msg(b'E', &b);
        if severity == "ERROR" {
            self.skipping = true;
            self.implicit_failed = true;
            if self.status == b'T' {
                self.status = b'E';
            }
        }
    }

    fn complete(&mut self, tag: &str) {
        let mut b = tag.as_bytes().to_vec();
        b.push(0);
        self.msg(b'C', &b);
    }

    fn ready(&mut self) {
        self.skipping = false;
        let s = self.status;
        self.msg(b'Z', &[s]);
    }

    fn row_description(&mut self, binary: bool) {
        let mut b = 1u16.to_be_bytes().to_vec();
        b.extend_from_slice(b"int8\0");
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&20u32.to_be_bytes());
        b.extend_from_slice(&8i16.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&(binary as u16).to_be_bytes());
        self.msg(b'T', &b);
    }

    async fn run(&mut self) -> Result<(), Stop> {
        self.startup().await?;
        let mut buf = Vec::new();
        loop {
            // Faults between two messages: a reset, or the backend terminated by an admin.
            let (reset, terminate, garbage) = {
                let st = self.sim.st.borrow();
                let f = &st.net.faults;
                match st.net.faults_on {
                    true => (f.reset, f.terminate, f.garbage),
                    false => (0, 0, 0),
                }
            };
            if self.sim.st.borrow_mut().rng.chance(garbage) {
                self.db.borrow_mut().lossy.insert(self.pid);
                if self.sim.below(2) == 0 {
                    self.sim
                        .log(|| format!("server {}: unknown message type", self.pid));
                    self.msg(b'!', b"junk");
                } else {
                    self.sim
                        .log(|| format!("server {}: ParameterStatus change", self.pid));
                    self.msg(b'S', b"TimeZone\0Mars/Olympus_Mons\0");
                }
                self.flush().await?;
            }
            if self.sim.st.borrow_mut().rng.chance(reset) {
                self.sim.log(|| format!("server {}: reset", self.pid));
                self.db.borrow_mut().faults += 1;
                self.db.borrow_mut().lossy.insert(self.pid);
                self.sock.reset();
                return Ok(());
            }
            if self.sim.st.borrow_mut().rng.chance(terminate) {
                self.sim
                    .log(|| format!("server {}: FATAL 57P01 and close", self.pid));
                self.db.borrow_mut().faults += 1;
                self.error(
                    "FATAL",
                    "57P01",
                    "terminating connection due to administrator command",
                );
                self.flush().await?;
                self.sock.shutdown();
                return Ok(());
            }
            buf.clear();
            self.read_exact(&mut buf, 5).await?;
            let tag = buf[0];
            let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if !(4..1 << 20).contains(&len) {
                return Err(Stop::Io);
            }
            self.read_exact(&mut buf, len + 1).await?;
            self.db.borrow_mut().messages += 1;
            let body = buf[5..].to_vec();
            self.sim
                .log(|| format!("server {}: got {:?} ({} bytes)", self.pid, tag as char, len));
            if tag == b'X' {
                return Ok(());
            }
            self.handle(tag, &body).await?;
        }
    }

    async fn startup(&mut self) -> Result<(), Stop> {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            self.read_exact(&mut buf, 4).await?;
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if !(8..10_000).contains(&len) {
                return Err(Stop::Io);
            }
            self.read_exact(&mut buf, len).await?;
            let code = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
            match code {
                // CancelRequest: like PostgreSQL, it interrupts the backend's statement only
                // if one is running (here: a pg_sleep), and is ignored otherwise.
                80_877_102 => {
                    let pid = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
                    let key = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
                    let mut db = self.db.borrow_mut();
                    db.cancel_requests += 1;
                    if key == pid ^ 0x5a5a && db.sleeping.contains(&pid) {
                        db.cancelled.insert(pid);
                    }
                    drop(db);
                    self.sim
                        .log(|| format!("server {}: CancelRequest for {pid}", self.pid));
                    return Err(Stop::Done);
                }
                // SSLRequest: no TLS here.
                80_877_103 => {
                    self.out.push(b'N');
                    self.flush().await?;
                }
                196_608 => break,
                _ => return Err(Stop::Io),
            }
        }
        self.msg(b'R', &0u32.to_be_bytes());
        for (k, v) in [
            ("server_version", "16.0"),
            ("server_encoding", "UTF8"),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("integer_datetimes", "on"),
            ("TimeZone", "UTC"),
            ("standard_conforming_strings", "on"),
        ] {
            let mut b = Vec::new();
            for s in [k, v] {
                b.extend_from_slice(s.as_bytes());
                b.push(0);
            }
            self.msg(b'S', &b);
        }
        let mut key = self.pid.to_be_bytes().to_vec();
        key.extend_from_slice(&(self.pid ^ 0x5a5a).to_be_bytes());
        self.msg(b'K', &key);
        self.ready();
        self.flush().await
    }

    async fn handle(&mut self, tag: u8, body: &[u8]) -> Result<(), Stop> {
        if self.skipping && !matches!(tag, b'S' | b'Q') {
            return Ok(());
        }
        let mut r = Reader(body);
        match tag {
            b'P' => {
                let name = r.cstr();
                let sql = r.cstr();
                // As PostgreSQL: in a failed transaction only its end may be parsed or bound.
                if self.status == b'E' && !matches!(sql.as_str(), "COMMIT" | "ROLLBACK") {
                    self.error("ERROR", "25P02", "current transaction is aborted");
                    return Ok(());
                }
                let stmt = match Kind::of(&sql) {
                    Some(k) => Some(Stmt::Query(k)),
                    None if CONTROL.contains(&sql.as_str()) => Some(Stmt::Control(sql.clone())),
                    None => None,
                };
                match stmt {
                    Some(stmt) => {
                        self.statements.insert(name, stmt);
                        self.msg(b'1', &[]);
                    }
                    None => self.error("ERROR", "42601", &format!("unknown statement: {sql}")),
                }
            }
            b'B' => {
                let _portal = r.cstr();
                let name = r.cstr();
                let formats: Vec<u16> = (0..r.u16()).map(|_| r.u16()).collect();
                let n = r.u16();
                let mut param = None;
                for i in 0..n as usize {
                    let len = r.u32() as i32;
                    if len < 0 {
                        continue;
                    }
                    let v = r.take(len as usize);
                    let binary = formats.get(i).or(formats.first()).copied() == Some(1);
                    if i == 0 {
                        param = if binary && v.len() == 8 {
                            Some(i64::from_be_bytes(v.try_into().expect("8 bytes")))
                        } else {
                            std::str::from_utf8(v).ok().and_then(|s| s.parse().ok())
                        };
                    }
                }
                let results: Vec<u16> = (0..r.u16()).map(|_| r.u16()).collect();
                let binary = results.first() == Some(&1);
                match self.statements.get(&name) {
                    Some(Stmt::Query(_)) if self.status == b'E' => {
                        self.error("ERROR", "25P02", "current transaction is aborted");
                    }
                    Some(Stmt::Query(k)) => {
                        self.portal = Some(Portal::Query(*k, param, binary));
                        self.msg(b'2', &[]);
                    }
                    Some(Stmt::Control(sql)) => {
                        self.portal = Some(Portal::Control(sql.clone()));
                        self.msg(b'2', &[]);
                    }
                    None => self.error("ERROR", "26000", "prepared statement does not exist"),
                }
            }
            b'D' => {
                let what = r.u8();
                let name = r.cstr();
                if what == b'S' {
                    if self.statements.contains_key(&name) {
                        let mut b = 1u16.to_be_bytes().to_vec();
                        b.extend_from_slice(&20u32.to_be_bytes());
                        self.msg(b't', &b);
                        self.row_description(false);
                    } else {
                        self.error("ERROR", "26000", "prepared statement does not exist");
                    }
                } else {
                    match self.portal {
                        Some(Portal::Query(_, _, binary)) => self.row_description(binary),
                        Some(Portal::Control(_)) => self.msg(b'n', &[]),
                        None => self.error("ERROR", "34000", "portal does not exist"),
                    }
                }
            }
            b'E' => self.execute().await?,
            b'S' => {
                if let Some(id) = self.implicit.take() {
                    if !std::mem::take(&mut self.implicit_failed) {
                        self.db.borrow_mut().implicit_committed.insert(id);
                    }
                }
                self.implicit_failed = false;
                self.ready();
                self.flush().await?;
                let answered = std::mem::take(&mut self.unanswered);
                self.db.borrow_mut().answered.extend(answered);
            }
            b'H' => self.flush().await?,
            b'C' => {
                let what = r.u8();
                let name = r.cstr();
                if what == b'S' {
                    self.statements.remove(&name);
                }
                self.msg(b'3', &[]);
            }
            b'Q' => {
                let sql = r.cstr();
                match sql.strip_prefix("BEGIN; ") {
                    Some(rest) => {
                        self.simple("BEGIN");
                        if !self.skipping {
                            self.simple(rest);
                        }
                    }
                    None => self.simple(&sql),
                }
                self.ready();
                self.flush().await?;
            }
            _ => {
                self.error("FATAL", "08P01", "unexpected message");
                self.flush().await?;
                return Err(Stop::Done);
            }
        }
        Ok(())
    }

    async fn execute(&mut self) -> Result<(), Stop> {
        let (kind, param, binary) = match self.portal.take() {
            Some(Portal::Query(k, p, b)) => (k, p, b),
            Some(Portal::Control(sql)) => {
                self.simple(&sql);
                return Ok(());
            }
            None => {
                self.error("ERROR", "34000", "portal does not exist");
                return Ok(());
            }
        };
        if self.status == b'E' {
            self.error(
                "ERROR",
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            );
            return Ok(());
        }
        let Some(p) = param else {
            self.error("ERROR", "22P02", "bad parameter");
            return Ok(());
        };
        let errors = self.sim.st.borrow().net.server_errors;
        if errors > 0 && self.tx.is_none() && self.sim.st.borrow_mut().rng.chance(errors) {
            self.sim
                .log(|| format!("server {}: statement {p} fails (40001)", self.pid));
            self.error("ERROR", "40001", "could not serialize access (injected)");
            return Ok(());
        }
        if kind == Kind::Sleep {
            // In steps, so a CancelRequest can interrupt it.
            self.db.borrow_mut().sleeping.insert(self.pid);
            let mut cancelled = false;
            for _ in 0..6 {
                self.sim.sleep(Duration::from_micros(500)).await;
                if self.db.borrow_mut().cancelled.remove(&self.pid) {
                    cancelled = true;
                    break;
                }
            }
            let mut db = self.db.borrow_mut();
            db.sleeping.remove(&self.pid);
            if cancelled {
                db.cancels_hit += 1;
                drop(db);
                self.sim
                    .log(|| format!("server {}: statement {p} cancelled", self.pid));
                self.error("ERROR", "57014", "canceling statement due to user request");
                return Ok(());
            }
        }
        self.unanswered.push(p);
        let implicit = match self.tx {
            Some(_) => None,
            None => Some(*self.implicit.get_or_insert_with(|| {
                let mut db = self.db.borrow_mut();
                db.next_tx += 1;
                db.next_tx
            })),
        };
        self.db.borrow_mut().log.push(Executed {
            conn: self.pid,
            kind,
            param: p,
            tx: self.tx,
            implicit,
        });
        match kind.result(p) {
            Some(v) => {
                let text;
                let bytes: &[u8] = if binary {
                    text = v.to_be_bytes().to_vec();
                    &text
                } else {
                    text = v.to_string().into_bytes();
                    &text
                };
                let mut b = 1u16.to_be_bytes().to_vec();
                b.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                b.extend_from_slice(bytes);
                self.msg(b'D', &b);
                self.complete("SELECT 1");
            }
            None => self.error("ERROR", "22012", "division by zero"),
        }
        Ok(())
    }

    fn simple(&mut self, sql: &str) {
        match sql {
            "BEGIN" if self.status == b'E' => {
                self.error("ERROR", "25P02", "current transaction is aborted");
            }
            "BEGIN" => {
                if self.status == b'I' {
                    let mut db = self.db.borrow_mut();
                    db.next_tx += 1;
                    self.tx = Some(db.next_tx);
                    self.status = b'T';
                }
                self.complete("BEGIN");
            }
            "COMMIT" => {
                let committed = self.status == b'T';
                if committed {
                    if let Some(tx) = self.tx {
                        self.db.borrow_mut().committed.push(tx);
                    }
                }
                self.status = b'I';
                self.tx = None;
                self.complete(if committed { "COMMIT" } else { "ROLLBACK" });
            }
            "ROLLBACK" => {
                self.status = b'I';
                self.tx = None;
                self.complete("ROLLBACK");
            }
            // A shared connection's probe of its path: this backend is the one it names.
            _ if sql.starts_with("SELECT WHERE pg_catalog.pg_backend_pid() = ") => {
                let named = sql.rsplit(' ').next().and_then(|p| p.parse().ok());
                let tag = if named == Some(self.pid) {
                    "SELECT 1"
                } else {
                    "SELECT 0"
                };
                self.complete(tag);
            }
            _ if sql.starts_with("CLOSE ALL;") => {
                for tag in [
                    "CLOSE ALL",
                    "SET",
                    "RESET",
                    "UNLISTEN",
                    "SELECT 1",
                    "DISCARD TEMP",
                ] {
                    self.complete(tag);
                }
                for tag in ["DISCARD SEQUENCES", "DISCARD PLANS", "DO"] {
                    self.complete(tag);
                }
            }
            _ => self.error(
                "ERROR",
                "42601",
                &format!("unsupported simple query: {sql}"),
            ),
        }
    }
}

/// Reads a message body; malformed input reads as zeros and empty strings.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        let b = self.take(2);
        if b.len() == 2 {
            u16::from_be_bytes([b[0], b[1]])
        } else {
            0
        }
    }
    fn u32(&mut self) -> u32 {
        let b = self.take(4);
        if b.len() == 4 {
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        } else {
            0
        }
    }
    fn cstr(&mut self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        let s = String::from_utf8_lossy(&self.0[..end]).into_owned();
        self.0 = &self.0[(end + 1).min(self.0.len())..];
        s
    }
}
