//! Runs a workload under callgrind and reads what it counted: the marker functions' inclusive
//! instruction counts from callgrind's output file, the allocations from the workload's report.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workload::Workload;

/// What one run of a workload counted.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Instructions of the whole process.
    pub total: u64,
    /// Instructions inside each marker (`unit`, `caller`, `task`, `io`), what they call included.
    pub instructions: HashMap<&'static str, u64>,
    /// Allocations inside each marker.
    pub allocations: HashMap<&'static str, u64>,
}

/// The markers, by the name of their function in `meter::marker`.
pub const MARKERS: [&str; 4] = ["unit", "caller", "task", "io"];
/// What a workload's report line carries: allocations per marker, and `all`, the whole
/// process's.
const REPORTED: [&str; 5] = ["unit", "caller", "task", "io", "all"];

impl Sample {
    /// Instructions of marker `m` (`all`: the whole process).
    pub fn instr(&self, m: &str) -> u64 {
        match m {
            "all" => self.total,
            _ => self.instructions.get(m).copied().unwrap_or(0),
        }
    }

    /// Allocations of marker `m` (`all`: the whole process).
    pub fn allocs(&self, m: &str) -> u64 {
        self.allocations.get(m).copied().unwrap_or(0)
    }
}

/// The line a workload run prints for the gate: its allocations per marker.
pub fn report_line(units: u32, allocations: &[(&str, u64)]) -> String {
    let mut line = format!("ICOUNT units={units}");
    for (m, n) in allocations {
        line.push_str(&format!(" {m}={n}"));
    }
    line
}

/// Why a measurement could not be made.
#[derive(Debug)]
pub struct GrindError(pub String);

impl std::fmt::Display for GrindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The installed valgrind's version line, or why there is none.
pub fn valgrind_version() -> Result<String, GrindError> {
    let out = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|e| {
            GrindError(format!(
                "cannot run valgrind ({e}); install it (apt-get install valgrind)"
            ))
        })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs `exe run <workload> <units>` under callgrind, with its output file in `dir`.
pub fn measure(exe: &Path, dir: &Path, w: Workload, units: u32) -> Result<Sample, GrindError> {
    let out_file: PathBuf = dir.join(format!("callgrind.{}.{units}.out", w.name()));
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("-q")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        // Names and positions written out in full: a line-by-line read needs no tables.
        .arg("--compress-strings=no")
        .arg("--compress-pos=no")
        .arg(exe)
        .arg("run")
        .arg(w.name())
        .arg(units.to_string())
        .output()
        .map_err(|e| GrindError(format!("cannot run valgrind: {e}")))?;
    if !out.status.success() {
        return Err(GrindError(format!(
            "{} {units} failed under callgrind ({}):\n{}{}",
            w.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut sample = Sample {
        allocations: parse_report(&stdout, units)?,
        ..Sample::default()
    };
    let text = fs::read_to_string(&out_file)
        .map_err(|e| GrindError(format!("cannot read {}: {e}", out_file.display())))?;
    let _ = fs::remove_file(&out_file);
    let (total, inclusive) = parse_callgrind(&text)?;
    sample.total = total;
    sample.instructions = inclusive;
    Ok(sample)
}

/// The allocations of a workload's `ICOUNT` line.
fn parse_report(stdout: &str, units: u32) -> Result<HashMap<&'static str, u64>, GrindError> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ICOUNT "))
        .ok_or_else(|| {
            GrindError(format!(
                "no ICOUNT line in the workload's output:\n{stdout}"
            ))
        })?;
    let mut allocations = HashMap::new();
    for field in line.split_whitespace().skip(1) {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| GrindError(format!("bad field {field:?} in {line:?}")))?;
        let value: u64 = value
            .parse()
            .map_err(|_| GrindError(format!("bad number in {field:?}")))?;
        if key == "units" {
            if value != u64::from(units) {
                return Err(GrindError(format!("ran {value} units, asked {units}")));
            }
        } else if let Some(m) = REPORTED.iter().find(|m| **m == key) {
            allocations.insert(*m, value);
        }
    }
    Ok(allocations)
}

/// The marker a function name of callgrind's output is, if any: `…::meter::marker::<name>`,
/// with or without a symbol hash after it.
fn marker_of(name: &str) -> Option<&'static str> {
    let at = name.find("meter::marker::")?;
    let rest = &name[at + "meter::marker::".len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    MARKERS.iter().copied().find(|m| *m == &rest[..end])
}

/// Reads an uncompressed callgrind output file (one event, `Ir`): the total, and each marker's
/// inclusive count. In a function's block every cost line counts toward its inclusive cost:
/// lines of its own instructions, and the line after each `calls=`, which is the whole cost of
/// that call. A marker never calls itself, so nothing is counted twice.
fn parse_callgrind(text: &str) -> Result<(u64, HashMap<&'static str, u64>), GrindError> {
    let mut total = None;
    let mut inclusive: HashMap<&'static str, u64> = HashMap::new();
    let mut current: Option<&'static str> = None;
    let mut events_ok = false;
    for line in text.lines() {
        if let Some(events) = line.strip_prefix("events:") {
            events_ok = events.split_whitespace().next() == Some("Ir");
        } else if let Some(name) = line.strip_prefix("fn=") {
            current = marker_of(name);
        } else if let Some(t) = line
            .strip_prefix("totals:")
            .or_else(|| line.strip_prefix("summary:"))
        {
            let v = t.split_whitespace().next().and_then(|v| v.parse().ok());
            total = total.or(v);
        } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
            let Some(m) = current else { continue };
            let cost = line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| GrindError(format!("bad cost line {line:?}")))?;
            *inclusive.entry(m).or_default() += cost;
        }
    }
    if !events_ok {
        return Err(GrindError("callgrind output without an Ir event".into()));
    }
    let total = total.ok_or_else(|| GrindError("callgrind output without a total".into()))?;
    Ok((total, inclusive))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inclusive_costs_of_markers() {
        let text = "\
version: 1
events: Ir
fl=src/main.rs
fn=pgpipe_icount::meter::marker::caller
10 5
cfl=core/src/client/mod.rs
cfn=pgpipe::client::Client<R>::query_one
calls=1 20
11 100
fn=pgpipe::client::Client<R>::query_one
20 100
fn=pgpipe_icount::meter::marker::io::h0123456789abcdef
30 7
fn=pgpipe_icount::meter::marker::caller
10 1
summary: 213
totals: 213
";
        let (total, inc) = parse_callgrind(text).unwrap();
        assert_eq!(total, 213);
        assert_eq!(inc["caller"], 106);
        assert_eq!(inc["io"], 7);
        assert!(!inc.contains_key("task"));
        assert_eq!(marker_of("x::meter::marker::unit<u8>"), Some("unit"));
        assert_eq!(marker_of("x::meter::marker::units"), None);
    }

    #[test]
    fn reads_the_report_line() {
        let line = report_line(32, &[("caller", 5), ("task", 7)]);
        let a = parse_report(&format!("noise\n{line}\n"), 32).unwrap();
        assert_eq!((a["caller"], a["task"]), (5, 7));
        assert!(parse_report(&line, 33).is_err());
    }
}
