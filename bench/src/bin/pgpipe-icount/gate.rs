//! The stages the gate reports, their per-unit figures, and the comparison with the committed
//! baseline.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::grind::Sample;
use crate::workload::Workload;

/// Instructions per unit may grow this much (percent) before the gate fails.
pub const INSTRUCTIONS_TOLERANCE_PCT: f64 = 3.0;
/// Allocations per unit are exact counts: any growth fails. This only absorbs the rounding of
/// the baseline file (six decimals); one allocation more over the extra units of the largest
/// workload is 0.00005 per unit.
const ALLOCATIONS_EPSILON: f64 = 0.000_001;

/// One figure of the report: a marker's count (or a difference of two) per unit of a workload.
pub struct Stage {
    /// Its name in the report and the baseline.
    pub name: &'static str,
    /// The workload it is measured on.
    pub workload: Workload,
    /// Whether the gate fails on its growth (otherwise it is only reported).
    pub gated: bool,
    /// Markers counted in, and counted out.
    plus: &'static [&'static str],
    minus: &'static [&'static str],
}

/// Every stage, in report order.
pub const STAGES: [Stage; 10] = [
    Stage {
        name: "encode",
        workload: Workload::Encode,
        gated: true,
        plus: &["unit"],
        minus: &[],
    },
    Stage {
        name: "drain",
        workload: Workload::Drain,
        gated: true,
        plus: &["unit"],
        minus: &[],
    },
    Stage {
        name: "decode",
        workload: Workload::Decode,
        gated: true,
        plus: &["unit"],
        minus: &[],
    },
    Stage {
        name: "client_caller",
        workload: Workload::Pgpipe,
        gated: true,
        plus: &["caller"],
        minus: &[],
    },
    Stage {
        name: "client_task",
        workload: Workload::Pgpipe,
        gated: true,
        plus: &["task"],
        minus: &["io"],
    },
    Stage {
        name: "client",
        workload: Workload::Pgpipe,
        gated: true,
        plus: &["caller", "task"],
        minus: &["io"],
    },
    Stage {
        name: "client_sim_total",
        workload: Workload::Pgpipe,
        gated: false,
        plus: &["all"],
        minus: &[],
    },
    Stage {
        name: "tokio_postgres_caller",
        workload: Workload::TokioPostgres,
        gated: false,
        plus: &["caller"],
        minus: &[],
    },
    Stage {
        name: "tokio_postgres_task",
        workload: Workload::TokioPostgres,
        gated: false,
        plus: &["task"],
        minus: &["io"],
    },
    Stage {
        name: "tokio_postgres",
        workload: Workload::TokioPostgres,
        gated: false,
        plus: &["caller", "task"],
        minus: &["io"],
    },
];

/// A stage's figures per unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerUnit {
    /// Instructions (callgrind's `Ir`) per unit.
    pub instructions: f64,
    /// Allocations per unit.
    pub allocations: f64,
}

impl Stage {
    /// The stage's figures per unit from two runs of its workload (`small` units, then `large`):
    /// what the extra units cost, so that every constant cost cancels out.
    pub fn per_unit(&self, small: (u32, &Sample), large: (u32, &Sample)) -> PerUnit {
        let count = |s: &Sample, f: fn(&Sample, &str) -> u64| -> i128 {
            let plus: i128 = self.plus.iter().map(|m| i128::from(f(s, m))).sum();
            let minus: i128 = self.minus.iter().map(|m| i128::from(f(s, m))).sum();
            plus - minus
        };
        let units = f64::from(large.0 - small.0);
        let per =
            |f: fn(&Sample, &str) -> u64| (count(large.1, f) - count(small.1, f)) as f64 / units;
        PerUnit {
            instructions: per(Sample::instr),
            allocations: per(Sample::allocs),
        }
    }
}

/// The committed baseline (`bench/baselines/hot_path.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// What the file is, for a reader who finds it.
    pub about: String,
    /// The toolchain and valgrind that measured it: instruction counts depend on both.
    pub rustc: String,
    /// See `rustc`.
    pub valgrind: String,
    /// The C library (its `memcpy`, `malloc` are part of the counts), see `rustc`.
    pub libc: String,
    /// Growth of instructions per unit (percent) that fails the gate.
    pub instructions_tolerance_pct: f64,
    /// Per stage: instructions and allocations per unit.
    pub stages: BTreeMap<String, Entry>,
}

/// A stage in the baseline.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Entry {
    /// Instructions per unit.
    pub instructions: f64,
    /// Allocations per unit.
    pub allocations: f64,
    /// Whether the gate fails on growth of this stage.
    pub gated: bool,
}

const ABOUT: &str = "Instructions (callgrind Ir) and allocations per unit of pgpipe's hot \
path. Measured and compared by `cargo run --release -p pgpipe-bench --bin pgpipe-icount`; \
rewritten by its --update. See docs/BENCHMARKS.md, 'Instruction-count gate'.";

impl Baseline {
    /// Reads the baseline at `path`.
    pub fn load(path: &Path) -> Result<Baseline, String> {
        let text = fs::read_to_string(path)
            .map_err(|e| format!("cannot read the baseline {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("cannot parse the baseline {}: {e}", path.display()))
    }

    /// `old` with the measured stages replaced (stages not measured this time are kept).
    pub fn updated(
        old: Option<Baseline>,
        env: &Toolchain,
        measured: &[(&Stage, PerUnit)],
    ) -> Baseline {
        let mut stages = old.map(|b| b.stages).unwrap_or_default();
        for (stage, m) in measured {
            stages.insert(
                stage.name.to_owned(),
                Entry {
                    instructions: (m.instructions * 10.0).round() / 10.0,
                    allocations: (m.allocations * 1e6).round() / 1e6,
                    gated: stage.gated,
                },
            );
        }
        Baseline {
            about: ABOUT.to_owned(),
            rustc: env.rustc.clone(),
            valgrind: env.valgrind.clone(),
            libc: env.libc.clone(),
            instructions_tolerance_pct: INSTRUCTIONS_TOLERANCE_PCT,
            stages,
        }
    }

    /// Writes the baseline to `path`.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let mut text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        text.push('\n');
        fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// What the counts depend on besides the code: the compiler, valgrind and the C library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// `rustc -V`.
    pub rustc: String,
    /// `valgrind --version`.
    pub valgrind: String,
    /// `getconf GNU_LIBC_VERSION`.
    pub libc: String,
}

impl Toolchain {
    /// Whether `b` was measured with this toolchain.
    pub fn matches(&self, b: &Baseline) -> bool {
        self.rustc == b.rustc && self.valgrind == b.valgrind && self.libc == b.libc
    }
}

/// How a measured stage compares with its baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Within the tolerance.
    Same,
    /// Grew beyond the tolerance (a failure when the stage is gated).
    Grew(String),
    /// Dropped: the baseline may be lowered.
    Dropped(String),
    /// Not in the baseline yet.
    New,
}

/// Compares a measurement with its baseline entry.
pub fn compare(m: PerUnit, base: Option<&Entry>, tolerance_pct: f64) -> Verdict {
    let Some(b) = base else {
        return Verdict::New;
    };
    let pct = if b.instructions > 0.0 {
        (m.instructions - b.instructions) / b.instructions * 100.0
    } else {
        0.0
    };
    let mut grew = Vec::new();
    let mut dropped = Vec::new();
    if pct > tolerance_pct {
        grew.push(format!("instructions +{pct:.1}% (> {tolerance_pct}%)"));
    } else if pct < -tolerance_pct {
        dropped.push(format!("instructions {pct:.1}%"));
    }
    if m.allocations > b.allocations + ALLOCATIONS_EPSILON {
        grew.push(format!(
            "allocations {:.4} -> {:.4}",
            b.allocations, m.allocations
        ));
    } else if m.allocations < b.allocations - ALLOCATIONS_EPSILON {
        dropped.push(format!(
            "allocations {:.4} -> {:.4}",
            b.allocations, m.allocations
        ));
    }
    match (grew.is_empty(), dropped.is_empty()) {
        (false, _) => Verdict::Grew(grew.join(", ")),
        (true, false) => Verdict::Dropped(dropped.join(", ")),
        (true, true) => Verdict::Same,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(instructions: f64, allocations: f64) -> Entry {
        Entry {
            instructions,
            allocations,
            gated: true,
        }
    }

    fn m(instructions: f64, allocations: f64) -> PerUnit {
        PerUnit {
            instructions,
            allocations,
        }
    }

    #[test]
    fn verdicts() {
        let b = entry(1000.0, 2.0);
        assert_eq!(compare(m(1029.0, 2.0), Some(&b), 3.0), Verdict::Same);
        assert_eq!(compare(m(971.0, 2.0), Some(&b), 3.0), Verdict::Same);
        assert!(matches!(
            compare(m(1031.0, 2.0), Some(&b), 3.0),
            Verdict::Grew(_)
        ));
        assert!(matches!(
            compare(m(1000.0, 2.01), Some(&b), 3.0),
            Verdict::Grew(_)
        ));
        assert!(matches!(
            compare(m(960.0, 2.0), Some(&b), 3.0),
            Verdict::Dropped(_)
        ));
        assert!(matches!(
            compare(m(1000.0, 1.5), Some(&b), 3.0),
            Verdict::Dropped(_)
        ));
        // Growth wins over a drop elsewhere.
        assert!(matches!(
            compare(m(900.0, 3.0), Some(&b), 3.0),
            Verdict::Grew(_)
        ));
        assert_eq!(compare(m(1.0, 0.0), None, 3.0), Verdict::New);
    }

    #[test]
    fn per_unit_is_the_difference() {
        let stage = &STAGES[4]; // client_task: task - io
        let sample = |task: u64, io: u64, allocs: u64| Sample {
            total: 0,
            instructions: [("task", task), ("io", io)].into_iter().collect(),
            allocations: [("task", allocs), ("io", 0)].into_iter().collect(),
        };
        let (a, b) = (sample(10_000, 1_000, 50), sample(30_000, 3_000, 250));
        let p = stage.per_unit((100, &a), (200, &b));
        assert_eq!(p, m(180.0, 2.0));
    }
}
