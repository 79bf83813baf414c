//! This crate's tests are the point (`tests/`); see its manifest for why it depends on the
//! adapters alone. The library holds only what those tests share.

use std::path::{Path, PathBuf};

/// The repository root, where the documentation, the API listings and the workspace manifest
/// the tests read live.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/adopt is two levels down")
        .to_path_buf()
}
