//! The progress line and its remaining-time estimate.
//!
//! The estimate starts from the plan: every run's planned wall time (warm-up, measured window,
//! and what it costs around them: connecting, draining, closing, waiting for the server to let
//! go of the connections, restarting PgBouncer, starting client processes). Scenarios differ a
//! lot (a hol run takes five times a point run, the pool ceiling depends on the pool size, bulk
//! runs on the rows), so extrapolating from the runs done so far is badly wrong in the first
//! round, which always starts with the short scenarios. As runs complete, the plan is scaled by
//! how long the completed runs really took against their planned time, so that a slower (or
//! busier) machine is accounted for.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::plan::{Candidate, Load, Scenario, Settings, Via, Workload};

/// Per run, outside the warm-up and the window: the host probe before it (about 0.6 s), a
/// fresh thread and runtime, connecting, the drain after the window, closing, and the monitor
/// waiting for the backends to go (about 0.05 s in `--quick`'s runs of 200 tasks, more with
/// 1000 tasks and a loaded server).
const RUN_OVERHEAD: Duration = Duration::from_millis(720);
/// Extra per run over TLS: the handshakes of every connection.
const TLS_OVERHEAD: Duration = Duration::from_millis(50);
/// Extra per run through the PgBouncer the benchmark started: it is restarted after each run
/// so the next one starts with an empty pool.
const PGBOUNCER_RESTART: Duration = Duration::from_millis(250);
/// Extra per many-process run after the window: the children drain, close, and report.
const PROCS_REPORT: Duration = Duration::from_millis(200);
/// hol runs: the slow statements queued when the window ends are waited for (in a closed loop
/// they pile up behind the lanes; a client that fell behind an open loop drains its backlog).
const HOL_DRAIN: Duration = Duration::from_millis(500);
/// The pool ceiling's batch takes this much longer than the ideal (measured: 1.05–1.17x).
const CEILING_SLACK: f64 = 1.12;
/// Rows per second of each bulk workload, roughly as measured on 1,000,000 rows; the run's
/// time is the rows over this.
fn bulk_rows_per_second(w: Workload) -> f64 {
    match w {
        Workload::CopyIn => 1.5e6,
        _ => 2.5e6,
    }
}
/// How much planned time the correction needs before it trusts the measured ratio half: early
/// on a single slow connect must not swing the estimate.
const PRIOR: Duration = Duration::from_secs(20);

/// How long one run of `cand` in `sc` is planned to take, everything around its window
/// included.
pub fn planned_run(s: &Settings, sc: &Scenario, cand: &Candidate) -> Duration {
    let (warmup, window) = s.timing(sc.workload, sc.delay);
    let mut d = RUN_OVERHEAD;
    d += match sc.load {
        Load::Closed { .. } | Load::Open { .. } if sc.procs > 1 => {
            // The children connect and warm up within the lead, then run the window.
            crate::procs::LEAD + window + PROCS_REPORT
        }
        Load::Closed { .. } | Load::Open { .. } => warmup + window,
        Load::Ceiling { queries } => Duration::from_secs_f64(
            queries as f64 * crate::engine::SLEEP_SECONDS / cand.conns.max(1) as f64
                * CEILING_SLACK,
        ),
        Load::Rows { rows } => {
            Duration::from_secs_f64(rows as f64 / bulk_rows_per_second(sc.workload))
        }
    };
    if sc.workload == Workload::Hol {
        d += HOL_DRAIN;
    }
    if cand.tls {
        d += TLS_OVERHEAD;
    }
    if sc.via == Via::PgBouncer {
        d += PGBOUNCER_RESTART;
    }
    d
}

/// Every run of the plan over all rounds, planned.
pub fn planned_total(s: &Settings, plan: &[Scenario]) -> Duration {
    let round: Duration = plan
        .iter()
        .flat_map(|sc| sc.candidates.iter().map(move |c| planned_run(s, sc, c)))
        .sum();
    round * s.rounds as u32
}

/// A duration for people, one format everywhere the benchmark prints one: `4.2 s`, `37 s`,
/// `12 min 05 s`, `1 h 02 min`.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 10.0 {
        return format!("{secs:.1} s");
    }
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, s % 3600 / 60)
    }
}

/// The progress line on stderr: rewritten in place on a terminal, one line per update
/// otherwise.
pub struct Progress {
    tty: bool,
    start: Instant,
    total: usize,
    done: usize,
    planned_total: Duration,
    planned_done: Duration,
    /// Wall time from the start to the end of the last completed run.
    elapsed_done: Duration,
}

impl Progress {
    /// Starts the clock for `total` runs planned to take `planned_total`.
    pub fn new(total: usize, planned_total: Duration) -> Progress {
        Progress {
            tty: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            start: Instant::now(),
            total,
            done: 0,
            planned_total,
            planned_done: Duration::ZERO,
            elapsed_done: Duration::ZERO,
        }
    }

    /// Records a completed run that was planned to take `planned`.
    pub fn run_done(&mut self, planned: Duration) {
        self.done += 1;
        self.planned_done += planned;
        self.elapsed_done = self.start.elapsed();
    }

    /// The remaining runs' planned time, scaled by how long the completed runs took against
    /// their plan (with `PRIOR` of planned time weighing for the plan itself).
    pub fn left(&self) -> Duration {
        let rest = self.planned_total.saturating_sub(self.planned_done);
        let k =
            (self.elapsed_done + PRIOR).as_secs_f64() / (self.planned_done + PRIOR).as_secs_f64();
        rest.mul_f64(k)
    }

    /// Shows `what` with the run count, the time elapsed and the time left.
    pub fn show(&self, what: &str) {
        let line = format!(
            "[{:>3}/{}] {what} · {} elapsed · about {} left",
            self.done.min(self.total),
            self.total,
            human(self.start.elapsed()),
            human(self.left())
        );
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(e, "{line}");
        }
        let _ = e.flush();
    }

    /// Ends the line on a terminal.
    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::default_plan;

    fn settings(quick: bool) -> Settings {
        let ms = Duration::from_millis;
        Settings {
            rounds: if quick { 1 } else { 3 },
            warmup: ms(if quick { 200 } else { 400 }),
            window: ms(if quick { 300 } else { 1000 }),
            hol_warmup: ms(if quick { 300 } else { 1000 }),
            hol_window: ms(if quick { 1000 } else { 5000 }),
            tx_warmup: ms(if quick { 300 } else { 1000 }),
            tx_window: ms(if quick { 500 } else { 3000 }),
            tx_delayed_window: ms(if quick { 500 } else { 8000 }),
            tasks: if quick { 200 } else { 1000 },
            rate: if quick { 1000.0 } else { 10_000.0 },
            rows: 10,
            ceiling_queries: if quick { 60 } else { 600 },
            copy_rows: if quick { 100_000 } else { 1_000_000 },
        }
    }

    #[test]
    fn durations_read_alike() {
        assert_eq!(human(Duration::from_millis(4200)), "4.2 s");
        assert_eq!(human(Duration::from_secs(37)), "37 s");
        assert_eq!(human(Duration::from_secs(725)), "12 min 05 s");
        assert_eq!(human(Duration::from_secs(3720)), "1 h 02 min");
    }

    #[test]
    fn the_plan_weighs_each_scenario() {
        let s = settings(false);
        let plan = default_plan(&s, false);
        let of = |id: &str| {
            let sc = plan.iter().find(|x| x.id() == id).unwrap();
            planned_run(&s, sc, &sc.candidates[0])
        };
        let point = of("point-closed-1000-direct");
        assert!(of("hol-open-10000-direct") > point * 2);
        assert!(of("procs8-point-id-closed-1000-direct") > point);
        assert!(of("pgbouncer-point-id-closed-1000-direct") > point);
        // The ceiling's first candidate is one connection: 600 × 5 ms at least.
        assert!(of("ceiling-batch-600-direct") >= Duration::from_secs(3));
        // The default set took 10 min 43 s for its first 240 runs, about a minute of which
        // was start-up; with the TLS, COPY and PgBouncer scenarios added since, the plan
        // must come to well over that. Its 387 runs took 17.5 min before the host probe,
        // which adds about 0.6 s to each.
        let total = planned_total(&s, &plan);
        assert!(
            total > Duration::from_secs(1000) && total < Duration::from_secs(1500),
            "{}",
            human(total)
        );
        let quick = settings(true);
        let q = planned_total(&quick, &default_plan(&quick, true));
        assert!(
            q > Duration::from_secs(20) && q < Duration::from_secs(150),
            "{}",
            human(q)
        );
    }

    #[test]
    fn the_estimate_follows_the_runs() {
        let mut p = Progress::new(4, Duration::from_secs(40));
        assert_eq!(p.left(), Duration::from_secs(40));
        // Runs that take twice their plan pull the estimate up, by more as they add up.
        p.run_done(Duration::from_secs(10));
        p.elapsed_done = Duration::from_secs(20);
        let one = p.left();
        assert!(one > Duration::from_secs(30) && one < Duration::from_secs(60));
        p.run_done(Duration::from_secs(10));
        p.elapsed_done = Duration::from_secs(40);
        assert!(p.left() > one.mul_f64(20.0 / 30.0));
        assert!(p.left() < Duration::from_secs(40));
    }
}
