//! Reading a server log for what pgpipe must never make a server say: WARNINGs (a ROLLBACK or
//! COMMIT outside a transaction, a BEGIN inside one). Each line is reported once, by the first
//! reader to reach it, so tests running in parallel against one server share the log.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;

/// A log read incrementally: each call sees the complete lines written since the last one.
#[derive(Debug, Default)]
pub struct LogReader {
    /// Bytes of the log already looked at (whole lines only).
    offset: Mutex<u64>,
}

impl LogReader {
    /// The WARNING lines of `path` not returned before, whoever wrote them.
    pub fn new_warnings(&self, path: &Path) -> Vec<String> {
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(mut file) = fs::File::open(path) else {
            return Vec::new();
        };
        let mut text = Vec::new();
        if file.seek(SeekFrom::Start(*offset)).is_err() || file.read_to_end(&mut text).is_err() {
            return Vec::new();
        }
        // A line still being written is read next time.
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        *offset += complete as u64;
        String::from_utf8_lossy(&text[..complete])
            .lines()
            .filter(|l| is_warning(l))
            .map(str::to_owned)
            .collect()
    }
}

/// A server log line at WARNING level (the prefix is `time [pid] app=name: `).
pub fn is_warning(line: &str) -> bool {
    line.split_once(": ")
        .is_some_and(|(_, rest)| rest.starts_with("WARNING:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warning_is_reported_once_and_partial_lines_wait() {
        let dir = std::env::temp_dir().join(format!("pgpipe-log-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("server.log");
        fs::write(
            &log,
            "t [1] app=a: LOG:  hello\nt [2] app=b: WARNING:  there is no transaction in progress\nt [3] app=c: WARN",
        )
        .unwrap();
        let r = LogReader::default();
        assert_eq!(
            r.new_warnings(&log),
            ["t [2] app=b: WARNING:  there is no transaction in progress"]
        );
        assert!(r.new_warnings(&log).is_empty());
        let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut f, b"ING:  late\n").unwrap();
        assert_eq!(r.new_warnings(&log), ["t [3] app=c: WARNING:  late"]);
        assert!(!is_warning(
            "t [4] app=d: LOG:  statement: SELECT 'WARNING: no'"
        ));
        fs::remove_dir_all(&dir).unwrap();
    }
}
