//! The temporary directory the bridge makes its private directories in (a
//! long prompt's file, the MCP config of pi's tools or of an ACP editor's servers,
//! the demo's HOME).
//!
//! `std::env::temp_dir()` is `$TMPDIR` as it is: a relative `TMPDIR` would
//! hand agy a relative `--add-dir` that agy resolves against another
//! directory (so it finds no MCP server, and nothing says so), and a
//! `TMPDIR` that does not exist fails the turn. Here a relative one is
//! resolved against the current directory, and one that is not a directory
//! gives `/tmp`, with one warning per process on stderr.
//!
//! [`PrivateDir`] is every private directory the bridge makes there: mode
//! 0700, files 0600 created fresh (never an existing one followed), removed
//! with its contents when dropped.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
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
pub(crate) fn resolve(raw: &Path, cwd: Option<&Path>) -> Result<PathBuf, String> {
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

/// A private directory, removed with its contents when dropped
/// ([`tempfile::TempDir`] underneath: a fresh name, created exclusively).
#[derive(Debug)]
pub struct PrivateDir {
    dir: tempfile::TempDir,
}

impl PrivateDir {
    /// A fresh directory `agy-bridge-<what>-<random>` (mode 0700) under
    /// `parent`, by its canonical path (agy is told absolute paths,
    /// whatever TMPDIR looks like); never an existing one.
    pub fn create(parent: &Path, what: &str) -> std::io::Result<PrivateDir> {
        let parent = std::fs::canonicalize(parent)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("agy-bridge-{what}-"))
            .rand_bytes(16)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?;
        Ok(PrivateDir { dir })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write `text` to a new file (mode 0600) at `rel` inside the
    /// directory, making its own directories (0700) on the way.
    pub(crate) fn write(&self, rel: &str, text: &str) -> std::io::Result<PathBuf> {
        let file = self.path().join(rel);
        if let Some(parent) = file.parent().filter(|p| *p != self.path()) {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(parent)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)?;
        f.write_all(text.as_bytes())?;
        f.flush()?;
        Ok(file)
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

    #[test]
    fn private_dirs_are_0700_with_0600_files_and_go_when_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().expect("tmp");
        let dir = PrivateDir::create(parent.path(), "test").expect("create");
        let file = dir.write(".agents/x.json", "{}").expect("write");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&dir.path().join(".agents")), 0o700);
        assert_eq!(mode(&file), 0o600);
        assert!(
            dir.write(".agents/x.json", "again").is_err(),
            "never overwrites"
        );
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }
}
