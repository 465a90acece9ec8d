//! What the benches share: finding the workspace's own binaries.

use std::path::{Path, PathBuf};

/// A binary of this workspace next to the bench (release or debug).
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench exe");
    let profile = exe.parent().and_then(Path::parent).expect("profile dir");
    let target = profile.parent().expect("target dir");
    [
        profile.join(name),
        target.join("release").join(name),
        target.join("debug").join(name),
    ]
    .into_iter()
    .find(|c| c.is_file())
    .unwrap_or_else(|| panic!("{name} not built: run `cargo build --release --workspace` first"))
}

/// fake-agy, as agy.
#[allow(dead_code)]
pub fn fake_agy() -> PathBuf {
    workspace_bin("fake-agy")
}
