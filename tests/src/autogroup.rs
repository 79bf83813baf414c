//! The kernel's autogroup scheduling (`kernel.sched_autogroup_enabled`), and switching it off
//! for the length of a benchmark.
//!
//! With autogroup on, the scheduler shares CPU between sessions (`setsid`) first and between
//! threads of a session second. PostgreSQL makes every child of the postmaster a session leader,
//! so on a machine that also runs the client (and a load generator), each backend competes as a
//! whole session against all of the client's threads. On the web benchmark's 2-core machine that
//! left runnable backends waiting several times as long and put the glommio server's
//! `/fortunes` p99 at 0.6–1.6 s (`docs/BENCHMARKS.md`, "Autogroup"). Where PostgreSQL runs on a
//! machine of its own, or services run in CPU cgroups of their own, nothing schedules that way;
//! the benchmarks can therefore measure without it, and always say which.

use std::fmt;
use std::path::Path;

/// Where Linux keeps the setting.
const SYSCTL: &str = "/proc/sys/kernel/sched_autogroup_enabled";

/// The setting as read; `None` where the file is missing (not Linux, or a kernel built without
/// autogroup) or unreadable.
fn read(path: &Path) -> Option<bool> {
    parse(&std::fs::read_to_string(path).ok()?)
}

/// `"1\n"` is on, `"0\n"` off; anything else is not a value this module understands.
pub fn parse(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// What a run did with the setting, for its report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// On, and left on.
    On,
    /// Off before the run.
    Off,
    /// On before the run, off for it, and put back afterwards.
    OffForRun,
    /// No such setting here.
    Unknown,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::On => "on",
            State::Off => "off",
            State::OffForRun => "off for this run (on before, put back after)",
            State::Unknown => "not present",
        })
    }
}

/// A run's autogroup: switched off for it when asked (put back when this value drops), else
/// as the machine has it; either way [`ForRun::state`] says which, for the report.
#[derive(Debug)]
pub struct ForRun {
    restore: bool,
    state: State,
}

impl ForRun {
    /// Switches autogroup off if `off` and it is on; with `off` false, only reads it. Fails
    /// (needs root) when asked to switch and the setting cannot be written, so a run asked to
    /// measure without autogroup never silently measures with it.
    pub fn start(off: bool) -> Result<ForRun, String> {
        Self::start_at(Path::new(SYSCTL), off)
    }

    fn start_at(path: &Path, off: bool) -> Result<ForRun, String> {
        let kept = |state| {
            Ok(ForRun {
                restore: false,
                state,
            })
        };
        match read(path) {
            None => kept(State::Unknown),
            Some(false) => kept(State::Off),
            Some(true) if !off => kept(State::On),
            Some(true) => {
                std::fs::write(path, "0\n").map_err(|e| {
                    format!(
                        "switching autogroup off ({}): {e}; run as root, or pass \
                         --sched-autogroup keep to measure with it on",
                        path.display()
                    )
                })?;
                let mut run = ForRun {
                    restore: true,
                    state: State::OffForRun,
                };
                // A run stopped by Ctrl-C or a crash never drops this value: a detached shell
                // puts the setting back once this process is gone.
                if let Err(e) = spawn_restorer(std::process::id(), path) {
                    run.restore_at(path);
                    return Err(format!(
                        "starting the watcher that switches autogroup back on: {e}"
                    ));
                }
                Ok(run)
            }
        }
    }

    /// What the run measured under.
    pub fn state(&self) -> State {
        self.state
    }

    fn restore_at(&mut self, path: &Path) {
        if std::mem::take(&mut self.restore) {
            if let Err(e) = std::fs::write(path, "1\n") {
                eprintln!(
                    "could not switch autogroup back on ({}): {e}",
                    path.display()
                );
            }
        }
    }
}

impl Drop for ForRun {
    fn drop(&mut self) {
        self.restore_at(Path::new(SYSCTL));
    }
}

/// Writes 1 to `path` once process `pid` is gone.
fn spawn_restorer(pid: u32, path: &Path) -> std::io::Result<()> {
    let script = r#"echo 1 > "$1""#;
    crate::process::after_exit(
        pid,
        "pgpipe-autogroup-restorer",
        script,
        &[path.as_os_str()],
    )
    .map(drop)
}

/// The value of a `--sched-autogroup` flag: `off` (true) or `keep` (false).
pub fn parse_flag(value: &str) -> Result<bool, String> {
    match value {
        "off" => Ok(true),
        "keep" => Ok(false),
        other => Err(format!(
            "--sched-autogroup takes off or keep, not {other:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that never drops its guard (Ctrl-C, a crash): the watcher puts the setting back
    /// once the process is gone.
    #[test]
    fn the_setting_comes_back_when_the_process_is_gone_without_dropping() {
        let dir = std::env::temp_dir().join(format!("pgpipe-restorer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sched_autogroup_enabled");
        std::fs::write(&file, "0\n").unwrap();
        let mut run = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        spawn_restorer(run.id(), &file).unwrap();
        assert_eq!(read(&file), Some(false), "restored while the process lived");
        run.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while read(&file) != Some(true) {
            assert!(
                std::time::Instant::now() < deadline,
                "not restored 10 s after the process ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flags_parse() {
        assert_eq!(parse_flag("off"), Ok(true));
        assert_eq!(parse_flag("keep"), Ok(false));
        assert!(parse_flag("on").is_err());
    }

    #[test]
    fn values_parse() {
        assert_eq!(parse("1\n"), Some(true));
        assert_eq!(parse("0"), Some(false));
        assert_eq!(parse("2\n"), None);
        assert_eq!(parse(""), None);
    }

    /// On a stand-in file: switched off while held, written back on drop, untouched when it
    /// was off already.
    #[test]
    fn a_switch_restores_what_it_found() {
        let dir = std::env::temp_dir().join(format!("pgpipe-autogroup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sched_autogroup_enabled");

        std::fs::write(&file, "1\n").unwrap();
        let mut off = ForRun::start_at(&file, true).unwrap();
        assert_eq!(off.state(), State::OffForRun);
        assert_eq!(read(&file), Some(false));
        off.restore_at(&file);
        assert_eq!(read(&file), Some(true));
        // A second restore (the drop) writes nothing more.
        std::fs::write(&file, "0\n").unwrap();
        off.restore_at(&file);
        assert_eq!(read(&file), Some(false));

        let mut off = ForRun::start_at(&file, true).unwrap();
        assert_eq!(off.state(), State::Off);
        std::fs::write(&file, "0\n").unwrap();
        off.restore_at(&file);
        assert_eq!(read(&file), Some(false));

        // Kept: read, never written.
        std::fs::write(&file, "1\n").unwrap();
        let kept = ForRun::start_at(&file, false).unwrap();
        assert_eq!(kept.state(), State::On);
        assert_eq!(read(&file), Some(true));

        let missing = ForRun::start_at(&dir.join("absent"), true).unwrap();
        assert_eq!(missing.state(), State::Unknown);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
