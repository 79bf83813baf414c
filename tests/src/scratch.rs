//! The scratch space a server gets: a fresh, uniquely named directory and a free port.

use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::HarnessError;

/// Creates a fresh, uniquely named directory under the system temp dir.
pub(crate) fn create_unique_dir() -> Result<PathBuf, HarnessError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let mut last_err = None;
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("pgpipe-{}-{n}-{nanos:x}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => {
                return Err(HarnessError::io(
                    format!("creating cluster directory {}", dir.display()),
                    e,
                ))
            }
        }
    }
    Err(HarnessError::io(
        format!("creating a unique directory under {}", base.display()),
        last_err.unwrap_or_else(|| io::Error::other("no attempt made")),
    ))
}

/// Asks the kernel for a currently free TCP port on 127.0.0.1.
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to pick a free port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| HarnessError::io("reading the address of the port probe", e))?
        .port();
    Ok(port)
}
