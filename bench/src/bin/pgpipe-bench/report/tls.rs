//! The TLS scenarios' comparisons ([`TlsReport`]): pgpipe over TLS against its own plaintext and
//! against tokio-postgres over TLS, what each candidate negotiated, and the notes printed under
//! their table.

use std::fmt::Write as _;

use serde::Serialize;

use super::ratio::{judge, Ratio, Status};
use super::{CandidateResult, ScenarioResult};
use crate::plan::{Candidate, Kind};

/// The TLS comparisons of a scenario with `-tls` candidates, from the medians.
#[derive(Debug, Clone, Serialize)]
pub struct TlsReport {
    pub ratios: Vec<Ratio>,
    /// The A/A control's throughput spread in percent (the noise the statuses use).
    pub aa_throughput_pct: Option<f64>,
    /// Each candidate's TLS backends (pg_stat_ssl) against its connections, and what it
    /// negotiated, as `name: versions and ciphers` (from its last round).
    pub negotiated: Vec<String>,
}

/// pgpipe over TLS against its own plaintext (goal >= 0.9) and against the best
/// tokio-postgres over TLS (goal >= 1.0); tokio-postgres' and deadpool's TLS against their
/// plaintext for context. The A/A duplicates are never a side of a ratio.
pub(super) fn tls_report(s: &ScenarioResult) -> TlsReport {
    let noise = s.aa.as_ref().map(|a| a.throughput_pct);
    let ok: Vec<&CandidateResult> = s.ok().filter(|c| c.candidate.copy == 1).collect();
    let twin = |c: &Candidate| {
        ok.iter().copied().find(|p| {
            !p.candidate.tls
                && (p.candidate.kind, p.candidate.conns) == (c.kind, c.conns)
                && (p.candidate.max_in_flight, p.candidate.max_connections)
                    == (c.max_in_flight, c.max_connections)
        })
    };
    let ratio = |a: &CandidateResult, b: &CandidateResult, what: String, goal: Option<f64>| {
        judge(a, b, what, goal, noise)
    };
    let mut ratios = Vec::new();
    let best_tpg = s.best(|c| c.tls && c.kind == Kind::TokioPostgres && c.copy == 1);
    for c in ok
        .iter()
        .filter(|c| c.candidate.tls && c.candidate.is_pgpipe())
    {
        if let Some(p) = twin(&c.candidate) {
            let what = format!("{} / {}", c.candidate.name, p.candidate.name);
            ratios.push(ratio(c, p, what, Some(0.9)));
        }
        if let Some(t) = best_tpg {
            let what = format!(
                "{} / {}, the best tokio-postgres over TLS",
                c.candidate.name, t.candidate.name
            );
            ratios.push(ratio(c, t, what, Some(1.0)));
        }
    }
    for c in ok
        .iter()
        .filter(|c| c.candidate.tls && !c.candidate.is_pgpipe())
    {
        if let Some(p) = twin(&c.candidate) {
            let what = format!("{} / {}", c.candidate.name, p.candidate.name);
            ratios.push(ratio(c, p, what, None));
        }
    }
    let negotiated = s
        .ok()
        .map(|c| {
            let last = c.runs.last();
            let tls = last.and_then(|m| m.tls_backends);
            let cipher = last.and_then(|m| m.tls_cipher.clone());
            format!(
                "{}: {} of {} server connections over TLS{}",
                c.candidate.name,
                tls.map_or_else(|| "?".into(), |n| n.to_string()),
                last.and_then(|m| m.backends_checked)
                    .map_or_else(|| "?".into(), |n| n.to_string()),
                cipher.map_or_else(String::new, |c| format!(" ({c})"))
            )
        })
        .collect();
    TlsReport {
        ratios,
        aa_throughput_pct: noise,
        negotiated,
    }
}

/// Under a table with `-tls` candidates: what the fill columns mean for each library, which
/// transport each candidate's backends used, and the ratios against the goals.
pub(super) fn tls_notes(t: &mut String, r: &TlsReport) {
    let _ = writeln!(
        t,
        "\nbytes/write = plaintext bytes per write call of pgpipe's connection task (over TLS each \
         such write is sealed into records and sent at once); bytes/TLS record = plaintext bytes per \
         TLS record (ConnStats::bytes_per_tls_record; the core counts the records each write makes, \
         one per 16 KiB of plaintext), TLS records/unit = records per query. \
         tokio-postgres and deadpool (–): their writes happen inside tokio-postgres and tokio-rustls \
         and are not observable from outside, so no figure is given for them."
    );
    let _ = writeln!(
        t,
        "\nTransport, checked on the server (pg_stat_ssl) after each window; last round: {}.",
        r.negotiated.join("; ")
    );
    if r.ratios.is_empty() {
        return;
    }
    let noise = r.aa_throughput_pct.map_or_else(
        || "no A/A control in this scenario".into(),
        |p| format!("A/A throughput spread {p:.1}%"),
    );
    let _ = writeln!(
        t,
        "\nTLS ratios (throughput medians; a ratio closer to its goal than the A/A spread is \
         parity within noise; {noise}):\n"
    );
    for x in &r.ratios {
        let goal = x
            .goal
            .map_or_else(String::new, |g| format!(" (goal >= {g:.1})"));
        let medians = match (x.status, x.met_by_medians) {
            (Status::ParityWithinNoise, Some(m)) => {
                format!(
                    "; by the medians alone {}",
                    if m { "met" } else { "not met" }
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            t,
            "- {}{goal}: {:.2}x ({:.0} ops/s vs {:.0} ops/s) — **{}**{medians}",
            x.what,
            x.ratio,
            x.numerator,
            x.denominator,
            x.status.label()
        );
    }
}
