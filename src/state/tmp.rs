//! The temporary directory the bridge makes its private directories in (a
//! long prompt's file, the config that serves pi's tools, the demo's HOME).
//!
//! `std::env::temp_dir()` is `$TMPDIR` as it is: a relative `TMPDIR` would
//! hand agy a relative `--add-dir` that agy resolves against another
//! directory (so it finds no MCP server, and nothing says so), and a
//! `TMPDIR` that does not exist fails the turn. Here a relative one is
//! resolved against the current directory, and one that is not a directory
//! gives `/tmp`, with one warning per process on stderr.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where everything falls back to.
const FALLBACK: &str = "/tmp";

/// The bridge's temporary directory: absolute, and a directory (else
/// `/tmp`). Decided once per process.
pub fn temp_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cwd = std::env::current_dir().ok();
        match resolve(&std::env::temp_dir(), cwd.as_deref()) {
            Ok(dir) => dir,
            Err(reason) => {
                eprintln!("agy-bridge: warning: {reason}; using {FALLBACK}");
                PathBuf::from(FALLBACK)
            }
        }
    })
    .clone()
}

/// `raw` made absolute against `cwd`, if it is a directory; otherwise why
/// not, naming it.
pub fn resolve(raw: &Path, cwd: Option<&Path>) -> Result<PathBuf, String> {
    let abs = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        match cwd {
            Some(cwd) => cwd.join(raw),
            None => {
                return Err(format!(
                    "TMPDIR={:?} is relative and the current directory is unknown",
                    raw.display().to_string()
                ))
            }
        }
    };
    if abs.is_dir() {
        Ok(abs)
    } else if abs.exists() {
        Err(format!(
            "TMPDIR={:?} is not a directory",
            raw.display().to_string()
        ))
    } else {
        Err(format!(
            "TMPDIR={:?} does not exist",
            raw.display().to_string()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_is_resolved_and_missing_or_file_is_refused() {
        let cwd = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(cwd.path().join("rel")).expect("mkdir");
        std::fs::write(cwd.path().join("file"), "").expect("write");
        assert_eq!(
            resolve(Path::new("rel"), Some(cwd.path())),
            Ok(cwd.path().join("rel"))
        );
        assert_eq!(resolve(cwd.path(), None), Ok(cwd.path().to_path_buf()));
        let missing = resolve(Path::new("/nonexistent"), Some(cwd.path()));
        assert_eq!(
            missing,
            Err("TMPDIR=\"/nonexistent\" does not exist".into())
        );
        let file = resolve(Path::new("file"), Some(cwd.path()));
        assert_eq!(file, Err("TMPDIR=\"file\" is not a directory".into()));
    }
}
