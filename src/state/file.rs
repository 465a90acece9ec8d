//! The state directory and the files the bridge keeps in it: where the
//! directory is, the errors and warnings every state file can produce, the
//! `flock` that serialises updates, and `StateFile`, the locked, atomic
//! JSON object every store (settings, sessions, caches) is built on. Kept
//! apart from the settings because sessions, caches and admission share it
//! without caring what `config.json` holds.
//!
//! # Where state lives
//!
//! `$HOME/.pi/agent/antigravity-bridge/`, the directory the TypeScript
//! original uses, so existing users keep their settings and sessions. When
//! pi's own `PI_CODING_AGENT_DIR` moves pi's agent directory, the bridge's
//! state moves with it (`$PI_CODING_AGENT_DIR/antigravity-bridge`), so one
//! pi setup never reads another's sessions. The environment variable
//! `AGY_BRIDGE_STATE_DIR` replaces the whole path and wins over both (tests
//! point it at a temporary directory). [`crate::settings`] resolves which
//! directory that is; every store here is opened on a directory it is
//! given. The directory is created with mode 0700 the first time
//! something is written.
//!
//! # How state files are handled
//!
//! - **Writes** go to a temporary file in the same directory, are fsynced and
//!   renamed over the target, mode 0600. A reader sees the old file or the new
//!   one, never half of one.
//! - **Updates** are read-modify-write under an exclusive `flock` on
//!   `<name>.lock`, re-reading the file inside the lock, so concurrent
//!   processes changing different keys lose nothing.
//! - **A corrupt file** (not JSON, not a JSON object, not UTF-8, over 64 MiB)
//!   is renamed to `<name>.corrupt-<unix-seconds>` (under the lock, after
//!   re-checking) and reported as a [`StateWarning`]; the caller carries on
//!   with an empty file. Nothing here panics on what it reads.
//!

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Replaces the state directory (default `$HOME/.pi/agent/antigravity-bridge`).
pub(crate) const STATE_DIR_ENV: &str = "AGY_BRIDGE_STATE_DIR";
/// The session bindings file's name (see [`crate::state::sessions`]).
pub(crate) const SESSIONS_FILE: &str = "sessions.json";

/// A state file larger than this is treated as corrupt rather than read.
const MAX_STATE_FILE: u64 = 64 << 20;

/// A switch's word as every on/off setting of the bridge takes it (any
/// case, spaces around ignored): `on`, `1`, `true`, `yes` are on; `off`,
/// `0`, `false`, `no` are off; anything else is `None`.
pub fn on_off(word: &str) -> Option<bool> {
    match word.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Some(true),
        "off" | "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// An environment variable holding a value it does not take. Every
/// variable the bridge reads is checked into one of these rather than
/// ignored: a user who set a variable meant it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?} is not valid: it takes {takes}; unset it or give one of those")]
pub struct BadEnv {
    /// The variable.
    pub var: &'static str,
    /// The value it holds.
    pub value: String,
    /// The values the variable takes, in words.
    pub takes: &'static str,
}

/// What can go wrong reading or writing state. Bad *content* is never an
/// error (it becomes a [`StateWarning`]); these are about the filesystem and
/// about invalid values handed to us by a caller.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Neither `HOME` nor the state directory's variable is set.
    #[error("cannot find the state directory: HOME is not set (set HOME or {STATE_DIR_ENV})")]
    NoHome,
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A file's lock could not be taken.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The operating system's error.
        source: Errno,
    },
    /// A conversation id handed in is not one.
    #[error(transparent)]
    InvalidConversationId(#[from] agy_format::ids::InvalidId),
    /// A model alias handed in is not one: the alias and why.
    #[error("invalid model alias {0:?}: {1}")]
    InvalidModel(String, &'static str),
    /// A settings variable holds a value it does not take.
    #[error("{var}={value:?} is not valid: {reason}; unset it or give one of the values it takes")]
    Env {
        /// The variable.
        var: &'static str,
        /// The value it holds.
        value: String,
        /// Why it is not valid.
        reason: String,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StateError {
    let path = path.to_path_buf();
    move |source| StateError::Io {
        action,
        path,
        source,
    }
}

/// Something wrong with what was read, reported and recovered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StateWarning {
    /// The file was unreadable as a whole and was renamed to `moved_to`
    /// (`moved_to` is `None` if even that failed; its content was ignored).
    SetAside {
        /// The file.
        path: PathBuf,
        /// Where it was moved.
        moved_to: Option<PathBuf>,
        /// Why it could not be read.
        reason: String,
    },
    /// One entry of the sessions file was invalid and was dropped (it is
    /// left out when the file is next written).
    DroppedEntry {
        /// The sessions file.
        path: PathBuf,
        /// The entry's key.
        key: String,
        /// Why it was invalid.
        reason: String,
    },
    /// A setting in the config file was invalid; the default is used (the
    /// value itself stays in the file untouched).
    InvalidSetting {
        /// The config file.
        path: PathBuf,
        /// The setting's key.
        key: String,
        /// Why it was invalid.
        reason: String,
    },
    /// One entry of the config file's `allow` list was not a rule and is
    /// skipped (it stays in the file).
    SkippedRule {
        /// The config file.
        path: PathBuf,
        /// The entry's text.
        entry: String,
        /// Why it is not a rule.
        reason: String,
    },
}

impl fmt::Display for StateWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateWarning::SetAside {
                path,
                moved_to: Some(to),
                reason,
            } => write!(
                f,
                "{} is corrupt ({reason}); moved it to {} and started from an empty file",
                path.display(),
                to.display()
            ),
            StateWarning::SetAside {
                path,
                moved_to: None,
                reason,
            } => write!(f, "{} is corrupt ({reason}); ignoring it", path.display()),
            StateWarning::DroppedEntry { path, key, reason } => {
                write!(f, "{}: dropped entry {key:?}: {reason}", path.display())
            }
            StateWarning::InvalidSetting { path, key, reason } => write!(
                f,
                "{}: ignoring {key:?}: {reason}; using the default",
                path.display()
            ),
            StateWarning::SkippedRule {
                path,
                entry,
                reason,
            } => write!(
                f,
                "{}: skipping the allow rule {entry}: {reason}",
                path.display()
            ),
        }
    }
}

/// An exclusive `flock` on `path` (created 0600, its directory 0700 if
/// missing). `wait`: block until other holders let go; otherwise `None` when
/// someone holds it. The lock goes with the returned guard, and with the
/// process: a crashed holder never leaves a stale lock behind, which is why
/// lock files are never removed (removing one would let two holders lock
/// two different files).
pub(crate) fn lock_file(path: &Path, wait: bool) -> Result<Option<StateLock>, StateError> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err("create directory", dir))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(io_err("open lock file", path))?;
    let arg = if wait {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockExclusiveNonblock
    };
    loop {
        match Flock::lock(file, arg) {
            Ok(flock) => return Ok(Some(StateLock { flock })),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, Errno::EWOULDBLOCK)) if !wait => return Ok(None),
            Err((_, source)) => {
                return Err(StateError::Lock {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
}

// ---------------------------------------------------------------------------
// State files: locked read-modify-write, atomic writes, corrupt files set aside.

/// One JSON-object file in the state directory.
#[derive(Debug, Clone)]
pub(crate) struct StateFile {
    dir: PathBuf,
    name: &'static str,
    path: PathBuf,
}

/// An exclusive lock on a state file; released when dropped.
pub(crate) struct StateLock {
    flock: Flock<File>,
}

impl StateLock {
    /// The locked file itself, for a lock file that also holds a small
    /// value read and written only under its own lock (admission's last
    /// start time), so no second file and no second lock is needed.
    pub(crate) fn file(&self) -> &File {
        &self.flock
    }
}

enum ReadOutcome {
    Missing,
    Object(Map<String, Value>),
    Corrupt(String),
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl StateFile {
    pub(crate) fn new(dir: &Path, name: &'static str) -> StateFile {
        StateFile {
            dir: dir.to_path_buf(),
            name,
            path: dir.join(name),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The state directory the file is in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join(format!("{}.lock", self.name))
    }

    /// Take the exclusive lock, waiting for other holders.
    pub(crate) fn lock(&self) -> Result<StateLock, StateError> {
        let path = self.lock_path();
        match lock_file(&path, true)? {
            Some(lock) => Ok(lock),
            // A waiting flock does not come back empty; should it ever, it is
            // the same failure as a refused lock.
            None => Err(StateError::Lock {
                path,
                source: Errno::EWOULDBLOCK,
            }),
        }
    }

    fn try_read(&self) -> Result<ReadOutcome, StateError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadOutcome::Missing),
            Err(e) => return Err(io_err("read", &self.path)(e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_STATE_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io_err("read", &self.path))?;
        if bytes.len() as u64 > MAX_STATE_FILE {
            return Ok(ReadOutcome::Corrupt(format!(
                "larger than {} MiB",
                MAX_STATE_FILE >> 20
            )));
        }
        Ok(match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => ReadOutcome::Object(map),
            Ok(other) => ReadOutcome::Corrupt(format!(
                "expected a JSON object, found {}",
                json_kind(&other)
            )),
            Err(e) => ReadOutcome::Corrupt(format!("not valid JSON: {e}")),
        })
    }

    /// The file's object: empty if it does not exist, and empty (with a
    /// warning, the file renamed aside) if it is corrupt. `held` says the
    /// caller holds the lock already; otherwise it is taken only to set a
    /// corrupt file aside, after checking again that it still is corrupt.
    pub(crate) fn read(
        &self,
        held: Option<&StateLock>,
        warnings: &mut Vec<StateWarning>,
    ) -> Result<Map<String, Value>, StateError> {
        let reason = match self.try_read()? {
            ReadOutcome::Missing => return Ok(Map::new()),
            ReadOutcome::Object(map) => return Ok(map),
            ReadOutcome::Corrupt(reason) => reason,
        };
        let (_guard, reason) = if held.is_some() {
            (None, reason)
        } else {
            match self.lock() {
                Ok(guard) => match self.try_read()? {
                    // Someone replaced it meanwhile.
                    ReadOutcome::Missing => return Ok(Map::new()),
                    ReadOutcome::Object(map) => return Ok(map),
                    ReadOutcome::Corrupt(reason) => (Some(guard), reason),
                },
                Err(e) => {
                    warnings.push(StateWarning::SetAside {
                        path: self.path.clone(),
                        moved_to: None,
                        reason: format!("{reason}; could not set it aside: {e}"),
                    });
                    return Ok(Map::new());
                }
            }
        };
        let (moved_to, reason) = match self.set_aside() {
            Ok(to) => (Some(to), reason),
            Err(e) => (None, format!("{reason}; could not set it aside: {e}")),
        };
        warnings.push(StateWarning::SetAside {
            path: self.path.clone(),
            moved_to,
            reason,
        });
        Ok(Map::new())
    }

    fn set_aside(&self) -> io::Result<PathBuf> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let base = format!("{}.corrupt-{secs}", self.name);
        for n in 0..1000u32 {
            let name = if n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let to = self.dir.join(name);
            match fs::symlink_metadata(&to) {
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::rename(&self.path, &to)?;
                    return Ok(to);
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "too many set-aside copies",
        ))
    }

    /// Replace the file with `map` (pretty JSON and a newline, like the
    /// original): temporary file, fsync, rename, mode 0600.
    pub(crate) fn write(
        &self,
        _lock: &StateLock,
        map: &Map<String, Value>,
    ) -> Result<(), StateError> {
        let mut text = serde_json::to_string_pretty(map)
            .map_err(|e| io_err("serialise", &self.path)(io::Error::other(e)))?;
        text.push('\n');
        let tmp = self.dir.join(format!(
            "{}.{}.{}.tmp",
            self.name,
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            // The umask can only remove bits; make it exactly 0600.
            f.set_permissions(fs::Permissions::from_mode(0o600))?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            drop(f);
            fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_err("write", &self.path)(e));
        }
        // Make the rename durable; not every filesystem can sync a directory.
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
