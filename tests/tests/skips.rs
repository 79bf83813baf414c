//! A skipped test says so where a newcomer looks: on the terminal of `cargo test`, not only in
//! the captured output the harness shows for failures.

use std::process::Command;

/// Set in the child run: the probe below then skips.
const PROBE: &str = "PGPIPE_SKIP_PROBE";

#[test]
fn a_probe_that_skips() {
    if std::env::var_os(PROBE).is_some() {
        pgpipe_tests::report_skip("a_probe_that_skips", "the probe's reason");
    }
}

#[test]
fn a_skip_reaches_the_terminal_past_the_capture() {
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "a_probe_that_skips", "--test-threads=1"])
        .env(PROBE, "1")
        .output()
        .expect("run the probe");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SKIPPED a_probe_that_skips: the probe's reason"),
        "stderr: {stderr}"
    );
    // eprintln! in the same place would not have shown: the harness captures it.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("test a_probe_that_skips ... ok"),
        "{stdout}"
    );
}
