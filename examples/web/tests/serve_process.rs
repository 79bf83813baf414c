//! The `serve` subcommand as web-bench runs it: a child process that must not outlive the
//! benchmark, however the benchmark ends.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// With `--exit-on-stdin-eof`, the server serves while its parent holds the pipe, and exits
/// once the parent's end closes (as it does when the parent is killed).
#[test]
fn a_served_child_exits_when_its_parent_end_of_stdin_closes() {
    let admin = pgpipe_tests::shared().url();
    let url = pgpipe_web::schema::recreate_database(&admin, "pgpipe_web_test_serve_process")
        .expect("create database");
    pgpipe_web::schema::load(&url).expect("load tables");
    let mut child = Command::new(env!("CARGO_BIN_EXE_web-bench"))
        .args(["serve", "--variant", "pgpipe-tokio-axum", "--url", &url])
        .args([
            "--addr",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--exit-on-stdin-eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn web-bench serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the address");
    assert!(line.starts_with("listening on "), "got {line:?}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "exited while its stdin was open"
    );

    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            assert!(status.success(), "exit status {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running 10 s after its stdin closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
