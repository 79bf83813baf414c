//! Where a run's results go (a directory of the run's own under `target/`, or the committed
//! report), how their paths are shown, and writing them.

use std::path::{Path, PathBuf};

use crate::args::Args;

/// Where a run's results go.
pub(crate) struct Outputs {
    /// The JSON document: every round of every candidate.
    pub(crate) json: PathBuf,
    /// The Markdown report: what the run printed (tables, goals, legend).
    pub(crate) md: PathBuf,
    /// The SVG charts' directory; None with `--no-svg`.
    pub(crate) charts: Option<PathBuf>,
    /// `--update-docs`: the committed report (charts in docs/bench, JSON and Markdown in
    /// bench/results) instead of a directory of this run's own.
    pub(crate) docs: bool,
}

impl Outputs {
    /// By default everything goes to `target/pgpipe-bench/<UTC time>[-quick]/` (`results.json`,
    /// `results.md`, `charts/`), which git ignores, so that running the benchmark leaves the
    /// working tree as it was; `--update-docs` writes the committed report instead. `--out`
    /// and `--svg-dir` override either.
    pub(crate) fn new(a: &Args, root: &Path, started_unix: u64) -> Outputs {
        let (json, charts) = if a.update_docs {
            (
                root.join("bench")
                    .join("results")
                    .join(format!("pgpipe-bench-{started_unix}.json")),
                root.join("docs").join("bench"),
            )
        } else {
            let dir = root.join("target").join("pgpipe-bench").join(format!(
                "{}{}",
                utc_stamp(started_unix),
                if a.quick { "-quick" } else { "" }
            ));
            (dir.join("results.json"), dir.join("charts"))
        };
        let json = a.out.clone().unwrap_or(json);
        Outputs {
            md: json.with_extension("md"),
            json,
            charts: (!a.no_svg).then(|| a.svg_dir.clone().unwrap_or(charts)),
            docs: a.update_docs,
        }
    }

    /// The directories written to, for the line before the runs.
    pub(crate) fn places(&self) -> String {
        let json_dir = self
            .json
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        match &self.charts {
            Some(c) if !c.starts_with(json_dir) => {
                format!("{} and {}", shown(json_dir), shown(c))
            }
            _ => shown(json_dir),
        }
    }

    /// The line that introduces the list of files written.
    pub(crate) fn written(&self, root: &Path) -> String {
        let ignored = root.join("target");
        let all = [Some(&self.json), self.charts.as_ref()];
        if self.docs {
            "refreshed the committed report:".into()
        } else if all.iter().flatten().all(|p| p.starts_with(&ignored)) {
            "results written under target/ (git ignores it; --update-docs refreshes the committed report):".into()
        } else {
            "results written:".into()
        }
    }
}

/// `path` relative to the current directory when it is under it (as a user would type it),
/// else as it is.
pub(crate) fn shown(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// `YYYYMMDD-HHMMSS` in UTC: a run directory's name, sorting in time order.
pub(crate) fn utc_stamp(unix: u64) -> String {
    let (days, secs) = ((unix / 86_400) as i64, unix % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Writes `text` to `path`, creating its directory first.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::args;

    #[test]
    fn results_stay_out_of_the_tree_unless_asked() {
        let root = Path::new("/repo");
        let o = Outputs::new(&args(""), root, 1_796_102_764);
        let dir = root.join("target/pgpipe-bench/20261201-052604");
        assert_eq!(o.json, dir.join("results.json"));
        assert_eq!(o.md, dir.join("results.md"));
        assert_eq!(o.charts, Some(dir.join("charts")));
        assert!(!o.docs);
        let q = Outputs::new(&args("--quick --no-svg"), root, 1_796_102_764);
        assert_eq!(
            q.json,
            root.join("target/pgpipe-bench/20261201-052604-quick/results.json")
        );
        assert_eq!(q.charts, None);
        let d = Outputs::new(&args("--update-docs"), root, 1_796_102_764);
        assert_eq!(
            d.json,
            root.join("bench/results/pgpipe-bench-1796102764.json")
        );
        assert_eq!(d.md, root.join("bench/results/pgpipe-bench-1796102764.md"));
        assert_eq!(d.charts, Some(root.join("docs/bench")));
        assert!(d.docs);
        let own = Outputs::new(&args("--out /tmp/x.json --svg-dir /tmp/c"), root, 0);
        assert_eq!(own.md, Path::new("/tmp/x.md"));
        assert_eq!(own.charts.as_deref(), Some(Path::new("/tmp/c")));
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }
}
