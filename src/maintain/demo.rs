//! `agy-bridge demo`: a bundled recording replayed by the workspace's
//! fake agy into a private home, so the whole pipeline runs with no agy
//! and no network.

use crate::runner::{RunConfig, TurnRequest};
use agy_corpus::recording::{self, Recording};
use std::path::PathBuf;

/// A demo turn ready to run; its private home goes when it is dropped.
pub struct Demo {
    /// fake-agy, replaying the recording into the private home.
    pub cfg: RunConfig,
    /// The recording's prompt.
    pub req: TurnRequest,
    _home: tempfile::TempDir,
}

impl Demo {
    /// The demo of the recording `name` (a bundled name or a file) at
    /// `speed`, run by the fake agy at `fake`.
    pub fn prepare(name: &str, speed: f64, fake: PathBuf) -> Result<Demo, String> {
        let path = resolve_recording(name)?;
        let rec = Recording::load(&path).map_err(|e| e.to_string())?;
        let home = tempfile::Builder::new()
            .prefix("agy-bridge-demo-")
            .tempdir_in(crate::state::tmp::temp_dir())
            .map_err(|e| format!("cannot make the demo's home: {e}"))?;
        let cfg = RunConfig {
            agy_bin: fake,
            conversations_dir: home.path().join(".gemini/antigravity-cli/conversations"),
            env: vec![
                ("HOME".into(), home.path().display().to_string()),
                ("FAKE_AGY_RECORDING".into(), path.display().to_string()),
                ("FAKE_AGY_SPEED".into(), speed.to_string()),
            ],
            ..RunConfig::default()
        };
        let req = TurnRequest {
            prompt: rec.header.prompt.clone(),
            ..TurnRequest::default()
        };
        Ok(Demo {
            cfg,
            req,
            _home: home,
        })
    }
}

/// The recording `name` names (a bundled name or a file); when there is
/// none, the error lists the bundled ones.
fn resolve_recording(name: &str) -> Result<PathBuf, String> {
    let dir = recording::bundled_dir();
    recording::resolve(name, &dir).map_err(|e| match recording::list(&dir) {
        Ok(names) if !names.is_empty() => format!(
            "no recording named {name:?}; the bundled recordings are: {} (or give the path of a .jsonl recording)",
            names.join(", ")
        ),
        _ => format!("{e}; no bundled recordings were found in {}", dir.display()),
    })
}
