//! The cells every scenario's table is made of: figures as text (milliseconds, thousands, a
//! median with its range over rounds) and the row of a candidate that has no runs to show.

use std::fmt::Write as _;

use super::{CandidateResult, Figure};

/// Microseconds as milliseconds, with fewer decimals the larger the figure.
pub(super) fn ms(us: f64) -> String {
    let v = us / 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `x` rounded, its thousands separated by commas.
pub(super) fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The median, then the min–max over rounds in parentheses when they differ.
pub(super) fn range(f: &Figure, fmt: impl Fn(f64) -> String) -> String {
    if f.min == f.max {
        fmt(f.median)
    } else {
        format!("{} ({}–{})", fmt(f.median), fmt(f.min), fmt(f.max))
    }
}

/// A table row for a candidate none of whose runs completed (`gap`: cells before the reason);
/// `false` when it has runs to show.
pub(super) fn failed_row(t: &mut String, c: &CandidateResult, gap: &str) -> bool {
    if !c.runs.is_empty() {
        return false;
    }
    let _ = writeln!(
        t,
        "| {} |{gap} failed: {} |",
        c.candidate.name,
        c.failures.first().map(String::as_str).unwrap_or("?")
    );
    true
}
