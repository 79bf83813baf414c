//! One crate is enough: every public item of the core that a program names is reachable
//! through every adapter. The list below is checked at compile time (a `use` of each name from
//! each adapter) and, at run time, against the public items the core's `lib.rs` declares, so a
//! new core item that an adapter does not re-export fails here.

use std::path::Path;

/// Core items a program never names through an adapter, and why.
const CORE_ONLY: &[(&str, &str)] = &[
    ("rt", "the runtime surface, for writing an adapter"),
    (
        "Adapter",
        "the bound for code generic over the runtime, which names the core",
    ),
    ("adapter_api", "the macro the adapters expand"),
    (
        "ConnTask",
        "the opaque future an adapter's Spawn runs, named by Adapter's bound",
    ),
    (
        "internals",
        "the project's own benchmarks and tests (feature `internals`)",
    ),
];

macro_rules! reachable {
    ($($name:ident),* $(,)?) => {
        const NAMES: &[&str] = &[$(stringify!($name)),*];
        #[allow(unused_imports)]
        mod through_smol { use pgpipe_smol::{$($name),*}; }
        #[allow(unused_imports)]
        mod through_tokio { use pgpipe_tokio::{$($name),*}; }
        #[allow(unused_imports)]
        mod through_glommio { use pgpipe_glommio::{$($name),*}; }
    };
}

reachable!(
    binary_copy,
    guard,
    types,
    Batch,
    BoxError,
    CancelToken,
    ChannelBinding,
    Client,
    Column,
    Config,
    ConnStats,
    CopyIn,
    CopyOut,
    DbError,
    Error,
    ErrorKind,
    ExclusiveStats,
    GenericClient,
    GenericTransaction,
    IsolationLevel,
    Keepalives,
    LoadBalanceHosts,
    Notification,
    Portal,
    Reason,
    ReleaseReset,
    RootCert,
    Row,
    RowIndex,
    RowStream,
    Savepoint,
    Server,
    Session,
    SimpleQueryMessage,
    SimpleQueryRow,
    SqlState,
    SslMode,
    SslNegotiation,
    Statement,
    StatementResult,
    Stats,
    TargetSessionAttrs,
    TlsConfig,
    TlsVersion,
    ToStatement,
    Transaction,
    TransactionBuilder,
    config,
    error,
    row,
    stats,
);

/// The names `lib.rs` makes public at the core's root: `pub mod`, `pub use` (braced lists
/// and `as` renames) and exported macros.
fn core_root_names() -> Vec<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("core/src/lib.rs");
    let mut names = Vec::new();
    let mut macro_next = false;
    let mut statement = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t == "#[macro_export]" {
            macro_next = true;
            continue;
        }
        if macro_next {
            if let Some(rest) = t.strip_prefix("macro_rules! ") {
                names.push(rest.trim_end_matches(" {").to_owned());
            }
            macro_next = false;
        }
        // Only items at the root: indented lines belong to a module or a macro body.
        if !statement.is_empty() || (line.starts_with("pub use ") || line.starts_with("pub mod ")) {
            statement.push_str(t);
            statement.push(' ');
            if !t.ends_with(';') && !t.ends_with('{') {
                continue;
            }
            let s = std::mem::take(&mut statement);
            if let Some(m) = s.strip_prefix("pub mod ") {
                names.push(m.trim_end_matches([';', '{', ' ']).trim().to_owned());
            } else if let Some(u) = s.strip_prefix("pub use ") {
                let u = u.trim().trim_end_matches(';');
                if let Some((_, renamed)) = u.split_once(" as ") {
                    names.push(renamed.trim().to_owned());
                } else if let Some((_, list)) = u.split_once('{') {
                    for n in list.trim_end_matches('}').split(',') {
                        let n = n.trim();
                        if !n.is_empty() {
                            names.push(n.rsplit("::").next().unwrap_or(n).to_owned());
                        }
                    }
                } else {
                    names.push(u.rsplit("::").next().unwrap_or(u).to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn every_public_core_item_is_reachable_through_every_adapter() {
    let core = core_root_names();
    assert!(
        core.len() > 20,
        "parsed too few names from lib.rs: {core:?}"
    );
    let missing: Vec<&String> = core
        .iter()
        .filter(|n| !NAMES.contains(&n.as_str()) && !CORE_ONLY.iter().any(|(c, _)| c == n))
        .collect();
    assert!(
        missing.is_empty(),
        "core items no adapter re-exports (add them to `adapter_api!` and to this test, or to \
         CORE_ONLY with the reason): {missing:?}"
    );
    for (name, _) in CORE_ONLY {
        assert!(
            core.iter().any(|n| n == name),
            "CORE_ONLY names {name}, which the core lacks"
        );
    }
}
