//! What fake-agy's integration tests share: a fake-agy command that
//! inherits none of fake-agy's knobs from the test's environment (a knob
//! set for the whole `cargo test` would change what every test replays),
//! whichever knobs exist now or are added later.

use std::process::Command;

/// `fake-agy` with every `FAKE_AGY_*` variable and `AGY_CONVERSATIONS_DIR`
/// removed from its environment.
pub fn fake_agy() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fake-agy"));
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("FAKE_AGY_") || name == "AGY_CONVERSATIONS_DIR" {
            cmd.env_remove(&key);
        }
    }
    cmd
}
