//! A throughput ratio of medians judged against its goal with the scenario's A/A spread as the
//! noise ([`Ratio`], [`Status`]): what the TLS and bulk comparisons are made of.

use serde::Serialize;

use super::CandidateResult;

/// How a ratio of medians stands against its goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// At or above the goal by more than the A/A spread (or no A/A control to judge by).
    Met,
    /// Below the goal by more than the A/A spread.
    NotMet,
    /// Closer to the goal than the A/A spread, on either side: the run cannot tell.
    ParityWithinNoise,
    /// No goal: a figure for context.
    Info,
}

impl Status {
    /// How the printed notes name the status.
    pub(super) fn label(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::NotMet => "NOT met",
            Status::ParityWithinNoise => "parity within noise",
            Status::Info => "for context",
        }
    }
}

/// One throughput ratio of medians (TLS and bulk scenarios).
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// `pgpipe-tokio-4-tls / pgpipe-tokio-4`.
    pub what: String,
    /// The goal (`ratio >= goal`), None for a figure given for context.
    pub goal: Option<f64>,
    pub ratio: f64,
    /// The two medians, ops/s.
    pub numerator: f64,
    pub denominator: f64,
    /// Whether the medians alone meet the goal.
    pub met_by_medians: Option<bool>,
    /// Judged with the scenario's A/A throughput spread as the noise.
    pub status: Status,
}

/// `a`'s median throughput over `b`'s against `goal` (None: for context), judged with the A/A
/// throughput spread `noise` (percent).
pub(super) fn judge(
    a: &CandidateResult,
    b: &CandidateResult,
    what: String,
    goal: Option<f64>,
    noise: Option<f64>,
) -> Ratio {
    let (x, y) = (a.summary.throughput.median, b.summary.throughput.median);
    let r = x / y;
    let status = match (goal, noise) {
        (None, _) => Status::Info,
        (Some(g), Some(n)) if ((r - g) / g).abs() * 100.0 <= n => Status::ParityWithinNoise,
        (Some(g), _) if r >= g => Status::Met,
        _ => Status::NotMet,
    };
    Ratio {
        what,
        goal,
        ratio: r,
        numerator: x,
        denominator: y,
        met_by_medians: goal.map(|g| r >= g),
        status,
    }
}
