//! The bridge's settings (`config.json`) and the plumbing shared by every
//! state file the bridge keeps.
//!
//! # Where state lives
//!
//! `$HOME/.pi/agent/antigravity-bridge/`, the directory the TypeScript
//! original uses, so existing users keep their settings and sessions. When
//! pi's own `PI_CODING_AGENT_DIR` moves pi's agent directory, the bridge's
//! state moves with it (`$PI_CODING_AGENT_DIR/antigravity-bridge`), so one
//! pi setup never reads another's sessions. The environment variable
//! `AGY_BRIDGE_STATE_DIR` replaces the whole path and wins over both (tests
//! point it at a temporary directory). The directory is created with mode
//! 0700 the first time something is written.
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
//! # config.json
//!
//! Compatible with the file of the TypeScript bridge
//! ([EstebanForge/pi-antigravity-bridge](https://github.com/EstebanForge/pi-antigravity-bridge)). The keys we use:
//!
//! | key               | values                          | default        | env override            |
//! |-------------------|---------------------------------|----------------|-------------------------|
//! | `mode`            | `"accept-edits"`, `"plan"`      | `accept-edits` | `AGY_MODE`              |
//! | `skipPermissions` | `true`, `false`                 | `true`         | `AGY_SKIP_PERMISSIONS`  |
//! | `defaultModel`    | a model alias (`"flash"`, ...)  | `flash`        | `AGY_DEFAULT_MODEL`     |
//! | `defaultThinking` | `"low"`, `"medium"`, `"high"`   | `medium`       | `AGY_DEFAULT_THINKING`  |
//!
//! Every other key (the TypeScript bridge's `engine`, `acp`, `askTool`, `bridgeTools`,
//! `digest`, `systemPrompt`, `patchCleanupNotified`, ...) is kept as it is
//! when we save.
//!
//! Environment variables win over the file. An empty variable counts as
//! unset (as in the runner). Differences from the TypeScript bridge, on purpose:
//! - an invalid `AGY_MODE`, `AGY_SKIP_PERMISSIONS`, `AGY_DEFAULT_THINKING`
//!   or `AGY_DEFAULT_MODEL` is an error ([`StateError::Env`]) naming the
//!   variable and the values it takes, never a default: a typo in
//!   `AGY_MODE=plna` must not quietly let agy edit files, and a user who set
//!   a variable meant it;
//! - `AGY_SKIP_PERMISSIONS` is on for `1`, `true`, `on`, `yes` and off for
//!   `0`, `false`, `off`, `no` (any case);
//! - an invalid value in the file is reported and the default used (the file
//!   is ours to repair with `agy-bridge config`).
//!
//! **Saving never writes a value that came from the environment:**
//! [`ConfigStore::save_change`] re-reads the file under the lock, sets only
//! the one key being changed and writes the file back.

use crate::format::agy_args::{Effort, Mode};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Replaces the state directory (default `$HOME/.pi/agent/antigravity-bridge`).
pub const STATE_DIR_ENV: &str = "AGY_BRIDGE_STATE_DIR";
/// The settings file's name inside the state directory.
pub const CONFIG_FILE: &str = "config.json";
/// The session bindings file's name (see [`crate::sessions`]).
pub const SESSIONS_FILE: &str = "sessions.json";

/// A state file larger than this is treated as corrupt rather than read.
const MAX_STATE_FILE: u64 = 64 << 20;

/// pi's agent directory variable (pi's default is `~/.pi/agent`).
pub const PI_AGENT_DIR_ENV: &str = "PI_CODING_AGENT_DIR";

/// The state directory: `$AGY_BRIDGE_STATE_DIR`, else
/// `$PI_CODING_AGENT_DIR/antigravity-bridge`, else
/// `$HOME/.pi/agent/antigravity-bridge`.
pub fn state_dir() -> Result<PathBuf, StateError> {
    if let Some(dir) = env_nonempty(STATE_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env_nonempty(PI_AGENT_DIR_ENV) {
        return Ok(PathBuf::from(dir).join("antigravity-bridge"));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home)
            .join(".pi")
            .join("agent")
            .join("antigravity-bridge")),
        None => Err(StateError::NoHome),
    }
}

/// The environment variable `name`, unless unset, not UTF-8 or blank; also
/// the process environment as [`ConfigStore::load_with_env`] wants it.
pub fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// An environment variable holding a value it does not take. Every
/// variable the bridge reads is checked into one of these rather than
/// ignored: a user who set a variable meant it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?} is not valid: it takes {takes}; unset it or give one of those")]
pub struct BadEnv {
    pub var: &'static str,
    pub value: String,
    /// The values the variable takes, in words.
    pub takes: &'static str,
}

/// The four settings variables checked against what they take, without
/// reading any file: `Err` names the first one that holds a bad value.
pub fn check_env_settings() -> Result<(), StateError> {
    for setting in Setting::ALL {
        env_setting(setting, &env_nonempty)?;
    }
    Ok(())
}

/// What can go wrong reading or writing state. Bad *content* is never an
/// error (it becomes a [`StateWarning`]); these are about the filesystem and
/// about invalid values handed to us by a caller.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot find the state directory: HOME is not set (set HOME or {STATE_DIR_ENV})")]
    NoHome,
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cannot lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: Errno },
    #[error(transparent)]
    InvalidConversationId(#[from] crate::format::ids::InvalidId),
    #[error("invalid model alias {0:?}: {1}")]
    InvalidModel(String, &'static str),
    /// A settings variable holds a value it does not take.
    #[error("{var}={value:?} is not valid: {reason}; unset it or give one of the values it takes")]
    Env {
        var: &'static str,
        value: String,
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
        path: PathBuf,
        moved_to: Option<PathBuf>,
        reason: String,
    },
    /// One entry of the sessions file was invalid and was dropped (it is
    /// left out when the file is next written).
    DroppedEntry {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// A setting in the config file was invalid; the default is used (the
    /// value itself stays in the file untouched).
    InvalidSetting {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// An environment variable had a value we do not understand.
    Env {
        var: String,
        value: String,
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
            StateWarning::Env { var, value, reason } => write!(f, "{var}={value:?}: {reason}"),
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

// ---------------------------------------------------------------------------
// Settings.

/// The effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// agy's `--mode`.
    pub mode: Mode,
    /// Pass `--dangerously-skip-permissions` (print mode stalls without it).
    pub skip_permissions: bool,
    /// AskAntigravity's default model alias.
    pub default_model: String,
    /// AskAntigravity's default thinking tier when the alias names none.
    pub default_thinking: Effort,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::AcceptEdits,
            skip_permissions: true,
            default_model: "flash".to_string(),
            default_thinking: Effort::Medium,
        }
    }
}

impl Config {
    /// The settings from the default state directory merged with the process
    /// environment. See [`ConfigStatus`] for where each value came from.
    pub fn load() -> Result<ConfigStatus, StateError> {
        ConfigStore::open_default()?.load()
    }

    /// Save one change to the default state directory's file and return the
    /// new status.
    pub fn save_change(change: ConfigChange) -> Result<ConfigStatus, StateError> {
        ConfigStore::open_default()?.save_change(change)
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Default,
    File,
    Env,
}

/// One of the settings we manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    Mode,
    Permissions,
    Model,
    Thinking,
}

impl Setting {
    pub const ALL: [Setting; 4] = [
        Setting::Mode,
        Setting::Permissions,
        Setting::Model,
        Setting::Thinking,
    ];

    /// The CLI's word (`agy-bridge config <name> VALUE`).
    pub fn name(self) -> &'static str {
        match self {
            Setting::Mode => "mode",
            Setting::Permissions => "permissions",
            Setting::Model => "model",
            Setting::Thinking => "thinking",
        }
    }

    /// The key in config.json.
    pub fn file_key(self) -> &'static str {
        match self {
            Setting::Mode => "mode",
            Setting::Permissions => "skipPermissions",
            Setting::Model => "defaultModel",
            Setting::Thinking => "defaultThinking",
        }
    }

    /// The environment variable that overrides it.
    pub fn env_var(self) -> &'static str {
        match self {
            Setting::Mode => "AGY_MODE",
            Setting::Permissions => "AGY_SKIP_PERMISSIONS",
            Setting::Model => "AGY_DEFAULT_MODEL",
            Setting::Thinking => "AGY_DEFAULT_THINKING",
        }
    }
}

/// One explicit change by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    Mode(Mode),
    SkipPermissions(bool),
    DefaultModel(String),
    DefaultThinking(Effort),
}

impl ConfigChange {
    pub fn setting(&self) -> Setting {
        match self {
            ConfigChange::Mode(_) => Setting::Mode,
            ConfigChange::SkipPermissions(_) => Setting::Permissions,
            ConfigChange::DefaultModel(_) => Setting::Model,
            ConfigChange::DefaultThinking(_) => Setting::Thinking,
        }
    }

    fn json_value(&self) -> Value {
        match self {
            ConfigChange::Mode(m) => Value::from(m.as_arg()),
            ConfigChange::SkipPermissions(b) => Value::from(*b),
            ConfigChange::DefaultModel(m) => Value::from(m.trim()),
            ConfigChange::DefaultThinking(e) => Value::from(e.as_arg()),
        }
    }
}

/// Check a model alias: non-empty, at most 200 characters, no control
/// characters. Which aliases exist is for the model resolver to say.
pub fn validate_model_alias(alias: &str) -> Result<&str, StateError> {
    let trimmed = alias.trim();
    let problem = if trimmed.is_empty() {
        Some("it is empty")
    } else if trimmed.chars().count() > 200 {
        Some("it is longer than 200 characters")
    } else if trimmed.chars().any(char::is_control) {
        Some("it contains control characters")
    } else {
        None
    };
    match problem {
        Some(p) => Err(StateError::InvalidModel(
            trimmed.chars().take(64).collect(),
            p,
        )),
        None => Ok(trimmed),
    }
}

/// A setting's value and provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingStatus {
    pub setting: Setting,
    /// The config.json key.
    pub key: &'static str,
    /// The effective value, as a JSON value of the file's type.
    pub value: Value,
    pub source: Source,
    pub env_var: &'static str,
    /// The valid value the file holds, even when the environment wins.
    pub file_value: Option<Value>,
}

impl SettingStatus {
    /// The value as shown to people (`on`/`off` for permissions).
    pub fn display_value(&self) -> String {
        display_json(&self.value)
    }

    /// The file's value as shown to people, if the file has a valid one.
    pub fn display_file_value(&self) -> Option<String> {
        self.file_value.as_ref().map(display_json)
    }
}

fn display_json(v: &Value) -> String {
    match v {
        Value::Bool(true) => "on".to_string(),
        Value::Bool(false) => "off".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The effective settings, where each came from, and the files involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigStatus {
    pub config: Config,
    /// In [`Setting::ALL`] order.
    pub settings: Vec<SettingStatus>,
    pub config_path: PathBuf,
    pub sessions_path: PathBuf,
    /// Problems found while loading (also worth printing on stderr).
    pub warnings: Vec<StateWarning>,
}

impl ConfigStatus {
    pub fn setting(&self, setting: Setting) -> Option<&SettingStatus> {
        self.settings.iter().find(|s| s.setting == setting)
    }

    pub fn source(&self, setting: Setting) -> Option<Source> {
        self.setting(setting).map(|s| s.source)
    }

    /// The status as one JSON object: the effective values under the file's
    /// key names (as the TypeScript bridge's config object), `settings` with each
    /// one's source, the paths and the warnings as text.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        for s in &self.settings {
            obj.insert(s.key.to_string(), s.value.clone());
        }
        obj.insert("settings".into(), json!(self.settings));
        obj.insert("configPath".into(), json!(self.config_path));
        obj.insert("sessionsPath".into(), json!(self.sessions_path));
        obj.insert(
            "warnings".into(),
            json!(self
                .warnings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()),
        );
        Value::Object(obj)
    }
}

impl fmt::Display for ConfigStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.settings {
            let source = match s.source {
                Source::Default => "default".to_string(),
                Source::File => "file".to_string(),
                Source::Env => match &s.file_value {
                    Some(fv) => format!("env {} (file has {})", s.env_var, display_json(fv)),
                    None => format!("env {}", s.env_var),
                },
            };
            writeln!(
                f,
                "{:<12} {:<13} {source}",
                s.setting.name(),
                s.display_value()
            )?;
        }
        writeln!(f, "config file:   {}", self.config_path.display())?;
        write!(f, "sessions file: {}", self.sessions_path.display())
    }
}

/// config.json in one state directory.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    file: StateFile,
}

impl ConfigStore {
    /// The store in `dir`. Touches nothing until used.
    pub fn open(dir: impl AsRef<Path>) -> ConfigStore {
        ConfigStore {
            file: StateFile::new(dir.as_ref(), CONFIG_FILE),
        }
    }

    /// The store in [`state_dir`].
    pub fn open_default() -> Result<ConfigStore, StateError> {
        Ok(ConfigStore::open(state_dir()?))
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The file merged with the process environment.
    pub fn load(&self) -> Result<ConfigStatus, StateError> {
        self.load_with_env(&env_nonempty)
    }

    /// The file merged with `env` (a lookup returning non-empty values).
    pub fn load_with_env(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ConfigStatus, StateError> {
        let mut warnings = Vec::new();
        let map = self.file.read(None, &mut warnings)?;
        self.resolve(&map, env, warnings)
    }

    /// Save one change: re-read the file under the lock, set that one key,
    /// write it back (other keys, known or not, untouched; nothing from the
    /// environment), then return the new status.
    pub fn save_change(&self, change: ConfigChange) -> Result<ConfigStatus, StateError> {
        self.save_change_with_env(change, &env_nonempty)
    }

    pub fn save_change_with_env(
        &self,
        change: ConfigChange,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ConfigStatus, StateError> {
        if let ConfigChange::DefaultModel(alias) = &change {
            validate_model_alias(alias)?;
        }
        // A bad variable fails before anything is written.
        for setting in Setting::ALL {
            env_setting(setting, env)?;
        }
        let mut warnings = Vec::new();
        let map = {
            let lock = self.file.lock()?;
            let mut map = self.file.read(Some(&lock), &mut warnings)?;
            map.insert(change.setting().file_key().to_string(), change.json_value());
            self.file.write(&lock, &map)?;
            map
        };
        self.resolve(&map, env, warnings)
    }

    fn resolve(
        &self,
        map: &Map<String, Value>,
        env: &dyn Fn(&str) -> Option<String>,
        mut warnings: Vec<StateWarning>,
    ) -> Result<ConfigStatus, StateError> {
        let mut config = Config::default();
        let mut settings = Vec::with_capacity(4);
        for setting in Setting::ALL {
            let file_value = self.file_setting(setting, map, &mut warnings);
            let env_value = env_setting(setting, env)?;
            let default = default_value(setting);
            let (value, source) = match (&env_value, &file_value) {
                (Some(v), _) => (v.clone(), Source::Env),
                (None, Some(v)) => (v.clone(), Source::File),
                (None, None) => (default, Source::Default),
            };
            apply(&mut config, setting, &value);
            settings.push(SettingStatus {
                setting,
                key: setting.file_key(),
                value,
                source,
                env_var: setting.env_var(),
                file_value,
            });
        }
        Ok(ConfigStatus {
            config,
            settings,
            config_path: self.file.path().to_path_buf(),
            sessions_path: self.file.dir.join(SESSIONS_FILE),
            warnings,
        })
    }

    /// The file's valid value for `setting` (normalised), if any.
    fn file_setting(
        &self,
        setting: Setting,
        map: &Map<String, Value>,
        warnings: &mut Vec<StateWarning>,
    ) -> Option<Value> {
        let key = setting.file_key();
        let raw = match map.get(key) {
            None | Some(Value::Null) => return None,
            Some(v) => v,
        };
        let parsed = match (setting, raw) {
            (Setting::Permissions, Value::Bool(b)) => Ok(Some(Value::Bool(*b))),
            (Setting::Permissions, other) => Err(format!(
                "expected true or false, found {}",
                json_kind(other)
            )),
            // An empty model means "the default", as in the TypeScript bridge.
            (Setting::Model, Value::String(s)) if s.trim().is_empty() => Ok(None),
            (_, Value::String(s)) => parse_text(setting, s).map(Some),
            (_, other) => Err(format!("expected a string, found {}", json_kind(other))),
        };
        match parsed {
            Ok(v) => v,
            Err(reason) => {
                warnings.push(StateWarning::InvalidSetting {
                    path: self.file.path().to_path_buf(),
                    key: key.to_string(),
                    reason,
                });
                None
            }
        }
    }
}

/// Parse a textual value (file string or environment variable) of a
/// setting into its normalised JSON value.
fn parse_text(setting: Setting, text: &str) -> Result<Value, String> {
    let t = text.trim();
    match setting {
        Setting::Mode => t
            .to_ascii_lowercase()
            .parse::<Mode>()
            .map(|m| Value::from(m.as_arg())),
        Setting::Thinking => t
            .to_ascii_lowercase()
            .parse::<Effort>()
            .map(|e| Value::from(e.as_arg())),
        Setting::Model => validate_model_alias(t)
            .map(Value::from)
            .map_err(|e| e.to_string()),
        Setting::Permissions => match t.to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => Ok(Value::Bool(true)),
            "0" | "false" | "off" | "no" => Ok(Value::Bool(false)),
            _ => Err(format!(
                "unknown switch value {t:?} (expected on or off; also 1/0, true/false, yes/no)"
            )),
        },
    }
}

/// The environment's value for `setting`: `None` when unset or blank, an
/// error naming the variable and the values it takes when it is not one.
fn env_setting(
    setting: Setting,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Value>, StateError> {
    let var = setting.env_var();
    let Some(raw) = env(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    parse_text(setting, &raw)
        .map(Some)
        .map_err(|reason| StateError::Env {
            var,
            value: raw,
            reason,
        })
}

fn default_value(setting: Setting) -> Value {
    let d = Config::default();
    match setting {
        Setting::Mode => Value::from(d.mode.as_arg()),
        Setting::Permissions => Value::Bool(d.skip_permissions),
        Setting::Model => Value::from(d.default_model),
        Setting::Thinking => Value::from(d.default_thinking.as_arg()),
    }
}

/// Put an already-normalised value into `config`.
fn apply(config: &mut Config, setting: Setting, value: &Value) {
    match (setting, value) {
        (Setting::Mode, Value::String(s)) => {
            if let Ok(m) = s.parse() {
                config.mode = m;
            }
        }
        (Setting::Permissions, Value::Bool(b)) => config.skip_permissions = *b,
        (Setting::Model, Value::String(s)) => config.default_model = s.clone(),
        (Setting::Thinking, Value::String(s)) => {
            if let Ok(e) = s.parse() {
                config.default_thinking = e;
            }
        }
        _ => {}
    }
}
