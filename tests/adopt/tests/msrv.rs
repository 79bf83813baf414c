//! The declared `rust-version` is one the published crates can build with: no dependency they
//! pull in with default features (as the lock file resolves it) asks for a newer Rust. Only one
//! toolchain is installed here, so this checks the dependencies' own declarations; clippy's
//! `incompatible_msrv` lint (CI runs clippy with warnings denied) checks pgpipe's own code
//! against the same `rust-version`.

use pgpipe_adopt::root;
use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const PUBLISHED: &[&str] = &["pgpipe", "pgpipe-smol", "pgpipe-tokio", "pgpipe-glommio"];

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `1.88` or `1.88.0` as `(1, 88)`.
fn version(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().expect("a number"));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn dependencies_build_with_the_declared_rust_version() {
    let meta: Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--locked"]))
            .expect("cargo metadata");
    let packages = meta["packages"].as_array().expect("packages");
    let declared = packages
        .iter()
        .find(|p| p["name"] == "pgpipe")
        .and_then(|p| p["rust_version"].as_str())
        .expect("pgpipe declares a rust-version");
    let mut args = vec!["tree", "--locked", "-e", "normal,build", "--prefix", "none"];
    for p in PUBLISHED {
        args.extend(["-p", p]);
    }
    // `name vX.Y.Z` per line; a repeated subtree ends in `(*)`.
    let used: BTreeSet<(String, String)> = cargo(&args)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_owned(),
                w.next()?.trim_start_matches('v').to_owned(),
            ))
        })
        .collect();
    assert!(used.len() > 20, "{used:?}");
    let mut newer = Vec::new();
    for p in packages {
        let key = (
            p["name"].as_str().unwrap_or("").to_owned(),
            p["version"].as_str().unwrap_or("").to_owned(),
        );
        if !used.contains(&key) {
            continue;
        }
        if PUBLISHED.contains(&key.0.as_str()) {
            assert_eq!(p["rust_version"].as_str(), Some(declared), "{}", key.0);
        }
        if let Some(v) = p["rust_version"].as_str() {
            if version(v) > version(declared) {
                newer.push(format!("{} {} needs Rust {v}", key.0, key.1));
            }
        }
    }
    assert!(
        newer.is_empty(),
        "rust-version {declared} is declared, but:\n{}",
        newer.join("\n")
    );
}
