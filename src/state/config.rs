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
//! | `permissions`     | `"ask"`, `"allow"`, `"deny"`    | `ask`          | `AGY_PERMISSIONS`       |
//! | `skipPermissions` | `true` (allow), `false` (deny)  | (legacy)       | `AGY_SKIP_PERMISSIONS`  |
//! | `allow`           | rule strings (`"TOOL: GLOB"`)   | `[]`           | `AGY_ALLOW`             |
//! | `defaultModel`    | a model alias (`"flash"`, ...)  | `flash`        | `AGY_DEFAULT_MODEL`     |
//! | `defaultThinking` | `"low"`, `"medium"`, `"high"`   | `medium`       | `AGY_DEFAULT_THINKING`  |
//!
//! **Permissions** ([`PermissionMode`]): `allow` lets agy run every tool
//! unseen (`--dangerously-skip-permissions`), `deny` lets agy's print mode
//! deny every tool that needs permission, `ask` makes each of agy's tool
//! calls wait for pi's decision (where pi has no UI, the allow rules
//! decide). `skipPermissions` is the TypeScript bridge's on/off switch: it
//! is read only when `permissions` is absent (and the status then names it
//! as the key); a change is always saved as `permissions`, leaving
//! `skipPermissions` as it is. Likewise `AGY_SKIP_PERMISSIONS` (on is
//! allow, off is deny) counts only when `AGY_PERMISSIONS` is unset; when
//! both are set and disagree, `AGY_PERMISSIONS` wins and a
//! [`StateWarning::Env`] says the other was ignored.
//!
//! **Allow rules** ([`crate::state::rules`]): `allow` is the user's list, each
//! entry a rule string; an invalid entry is a [`StateWarning::SkippedRule`]
//! and is skipped (and kept in the file). `AGY_ALLOW` (rules separated by
//! `;` or newlines) replaces the file's list; an invalid rule in it is an
//! error. The gate uses [`Config::allow_list`]: the built-in read-only
//! tools ([`crate::state::rules::DEFAULT_ALLOW`]) and the user's rules.
//!
//! Every other key (the TypeScript bridge's `engine`, `acp`, `askTool`, `bridgeTools`,
//! `digest`, `systemPrompt`, `patchCleanupNotified`, ...) is kept as it is
//! when we save.
//!
//! Environment variables win over the file. An empty variable counts as
//! unset (as in the runner). Differences from the TypeScript bridge, on purpose:
//! - an invalid `AGY_MODE`, `AGY_PERMISSIONS`, `AGY_SKIP_PERMISSIONS`,
//!   `AGY_ALLOW`, `AGY_DEFAULT_THINKING` or `AGY_DEFAULT_MODEL` is an error
//!   ([`StateError::Env`]) naming the variable and the values it takes, never a default: a typo in
//!   `AGY_MODE=plna` must not quietly let agy edit files, and a user who set
//!   a variable meant it;
//! - `AGY_PERMISSIONS` takes `ask`, `allow`, `deny` and, like
//!   `AGY_SKIP_PERMISSIONS`, the old switch words: `1`, `true`, `on`, `yes`
//!   are allow and `0`, `false`, `off`, `no` are deny (any case);
//! - an invalid value in the file is reported and the default used (the file
//!   is ours to repair with `agy-bridge config`).
//!
//! **Saving never writes a value that came from the environment:**
//! [`ConfigStore::save_change`] and [`ConfigStore::edit_allow`] re-read the
//! file under the lock, change only the one key and write the file back.

use super::rules::{self, Rule, DEFAULT_ALLOW};
use agy_format::agy_args::{Effort, Mode};
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
/// The session bindings file's name (see [`crate::state::sessions`]).
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

/// The settings variables (the four settings, the legacy
/// `AGY_SKIP_PERMISSIONS`, `AGY_ALLOW`) checked against what they take, without
/// reading any file: `Err` names the first one that holds a bad value.
pub fn check_env_settings() -> Result<(), StateError> {
    check_env_with(&env_nonempty)
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
    InvalidConversationId(#[from] agy_format::ids::InvalidId),
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
    /// One entry of the config file's `allow` list was not a rule and is
    /// skipped (it stays in the file).
    SkippedRule {
        path: PathBuf,
        entry: String,
        reason: String,
    },
    /// An environment variable had a value we do not understand, or was
    /// ignored because another one wins.
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
            StateWarning::SkippedRule {
                path,
                entry,
                reason,
            } => write!(
                f,
                "{}: skipping the allow rule {entry}: {reason}",
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

/// Who decides whether agy may run a tool that needs permission.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// Each of agy's tool calls waits for pi's decision; with no UI, the
    /// allow rules decide and everything else is denied.
    #[default]
    Ask,
    /// agy runs every tool unseen (`--dangerously-skip-permissions`).
    Allow,
    /// agy's print mode denies every tool that needs permission.
    Deny,
}

impl PermissionMode {
    pub const ALL: [PermissionMode; 3] = [
        PermissionMode::Ask,
        PermissionMode::Allow,
        PermissionMode::Deny,
    ];

    /// The setting's word: `ask`, `allow` or `deny`.
    pub fn as_word(self) -> &'static str {
        match self {
            PermissionMode::Ask => "ask",
            PermissionMode::Allow => "allow",
            PermissionMode::Deny => "deny",
        }
    }

    /// What the mode means for safety, in one sentence.
    pub fn meaning(self) -> &'static str {
        match self {
            PermissionMode::Ask => {
                "each agy tool call waits for your decision in pi; read-only tools and your allow rules pass without asking, and where pi has no UI (pi -p, JSON mode) only those pass and the rest is denied"
            }
            PermissionMode::Allow => {
                "agy runs any command, writes any file and calls any MCP tool with your user's rights, without anyone seeing it first (--dangerously-skip-permissions)"
            }
            PermissionMode::Deny => {
                "agy's print mode refuses every tool that needs permission, so the turn is mostly reading, and it names what was denied"
            }
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_word())
    }
}

impl std::str::FromStr for PermissionMode {
    type Err = String;
    /// `ask`, `allow`, `deny`, or the old switch's words (`on`, `1`,
    /// `true`, `yes` are allow; `off`, `0`, `false`, `no` deny), any case.
    fn from_str(s: &str) -> Result<PermissionMode, String> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "ask" => Ok(PermissionMode::Ask),
            "allow" => Ok(PermissionMode::Allow),
            "deny" => Ok(PermissionMode::Deny),
            other => legacy_switch(other).map_err(|_| {
                format!("unknown permissions value {t:?} (expected ask, allow or deny; the old on/off also work: on is allow, off is deny)")
            }),
        }
    }
}

/// The old on/off switch (`skipPermissions`, `AGY_SKIP_PERMISSIONS`):
/// on is allow, off is deny.
fn legacy_switch(text: &str) -> Result<PermissionMode, String> {
    let t = text.trim();
    match t.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(PermissionMode::Allow),
        "0" | "false" | "off" | "no" => Ok(PermissionMode::Deny),
        _ => Err(format!(
            "unknown switch value {t:?} (expected on or off; also 1/0, true/false, yes/no)"
        )),
    }
}

/// The effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// agy's `--mode`.
    pub mode: Mode,
    /// Who decides on agy's tools that need permission.
    pub permissions: PermissionMode,
    /// The user's allow rules (the file's `allow`, or `AGY_ALLOW`), without
    /// the built-in ones: see [`Config::allow_list`].
    pub allow_rules: Vec<Rule>,
    /// AskAntigravity's default model alias.
    pub default_model: String,
    /// AskAntigravity's default thinking tier when the alias names none.
    pub default_thinking: Effort,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::AcceptEdits,
            permissions: PermissionMode::Ask,
            allow_rules: Vec::new(),
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

    /// The rules the permission gate lets through without asking: the
    /// built-in read-only tools ([`DEFAULT_ALLOW`]), then the user's.
    pub fn allow_list(&self) -> Vec<Rule> {
        let mut list = rules::default_allow();
        list.extend(self.allow_rules.iter().cloned());
        list
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

    /// The key in config.json (the one a change is saved under).
    pub fn file_key(self) -> &'static str {
        match self {
            Setting::Mode => "mode",
            Setting::Permissions => "permissions",
            Setting::Model => "defaultModel",
            Setting::Thinking => "defaultThinking",
        }
    }

    /// The TypeScript bridge's key for the same setting, read only when
    /// [`Setting::file_key`] is absent (`skipPermissions`).
    pub fn legacy_file_key(self) -> Option<&'static str> {
        (self == Setting::Permissions).then_some("skipPermissions")
    }

    /// The environment variable that overrides it.
    pub fn env_var(self) -> &'static str {
        match self {
            Setting::Mode => "AGY_MODE",
            Setting::Permissions => "AGY_PERMISSIONS",
            Setting::Model => "AGY_DEFAULT_MODEL",
            Setting::Thinking => "AGY_DEFAULT_THINKING",
        }
    }

    /// The older variable for the same setting, read only when
    /// [`Setting::env_var`] is unset (`AGY_SKIP_PERMISSIONS`).
    pub fn legacy_env_var(self) -> Option<&'static str> {
        (self == Setting::Permissions).then_some("AGY_SKIP_PERMISSIONS")
    }
}

/// The variable of the user's allow rules (`;` or newline separated).
pub const ALLOW_ENV: &str = "AGY_ALLOW";
/// The config.json key of the user's allow rules.
pub const ALLOW_KEY: &str = "allow";

/// One explicit change by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    Mode(Mode),
    Permissions(PermissionMode),
    DefaultModel(String),
    DefaultThinking(Effort),
}

impl ConfigChange {
    pub fn setting(&self) -> Setting {
        match self {
            ConfigChange::Mode(_) => Setting::Mode,
            ConfigChange::Permissions(_) => Setting::Permissions,
            ConfigChange::DefaultModel(_) => Setting::Model,
            ConfigChange::DefaultThinking(_) => Setting::Thinking,
        }
    }

    fn json_value(&self) -> Value {
        match self {
            ConfigChange::Mode(m) => Value::from(m.as_arg()),
            ConfigChange::Permissions(p) => Value::from(p.as_word()),
            ConfigChange::DefaultModel(m) => Value::from(m.trim()),
            ConfigChange::DefaultThinking(e) => Value::from(e.as_arg()),
        }
    }
}

/// A change to the user's allow rules in config.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowEdit {
    /// Append the rule unless the file has it already.
    Add(Rule),
    /// Drop every entry that is this rule.
    Remove(Rule),
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
    /// The config.json key the file's value was read from (a legacy key
    /// such as `skipPermissions` when that is where it was).
    pub key: &'static str,
    /// The effective value, as a JSON value of the file's type.
    pub value: Value,
    pub source: Source,
    /// The variable the value came from when `source` is `env` (a legacy
    /// one such as `AGY_SKIP_PERMISSIONS` when that is where it was),
    /// otherwise the one that would override it.
    pub env_var: &'static str,
    /// The valid value the file holds, even when the environment wins.
    pub file_value: Option<Value>,
}

impl SettingStatus {
    /// The value as shown to people.
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

/// The user's allow rules and where they came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowStatus {
    /// The effective user rules (the built-in ones are not among them).
    pub rules: Vec<Rule>,
    pub source: Source,
    pub env_var: &'static str,
    /// The file's valid rules, even when `AGY_ALLOW` wins.
    pub file_rules: Option<Vec<Rule>>,
}

/// The effective settings, where each came from, and the files involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigStatus {
    pub config: Config,
    /// In [`Setting::ALL`] order.
    pub settings: Vec<SettingStatus>,
    /// The user's allow rules (also in `config.allow_rules`).
    pub allow: AllowStatus,
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
    /// key names (as the TypeScript bridge's config object; the user's allow
    /// rules under `allow`), `settings` with each one's source, `allowRules`
    /// with theirs, the paths and the warnings as text.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        for s in &self.settings {
            obj.insert(s.setting.file_key().to_string(), s.value.clone());
        }
        obj.insert(ALLOW_KEY.into(), json!(self.allow.rules));
        obj.insert("settings".into(), json!(self.settings));
        obj.insert("allowRules".into(), json!(self.allow));
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

/// `N rules` / `1 rule`.
pub fn rules_count(n: usize) -> String {
    if n == 1 {
        "1 rule".into()
    } else {
        format!("{n} rules")
    }
}

impl fmt::Display for ConfigStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.settings {
            let source = match s.source {
                Source::Default => "default".to_string(),
                Source::File if s.key != s.setting.file_key() => format!("file ({})", s.key),
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
        let a = &self.allow;
        let source = match (a.source, &a.file_rules) {
            (Source::Env, Some(fr)) => {
                format!("env {} (file has {})", a.env_var, rules_count(fr.len()))
            }
            (Source::Env, None) => format!("env {}", a.env_var),
            (Source::File, _) => "file".into(),
            (Source::Default, _) => "default".into(),
        };
        writeln!(
            f,
            "{:<12} {:<13} {source}, after {} built-in read-only tools",
            "allow",
            rules_count(a.rules.len()),
            DEFAULT_ALLOW.len()
        )?;
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
        check_env_with(env)?;
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

    /// Add a rule to the file's `allow` list or remove one from it, under
    /// the lock, and return the new status and whether the file changed
    /// (adding a rule it has, or removing one it lacks, changes nothing).
    /// Entries that are not valid rules stay as they are; an `allow` that
    /// is not an array is replaced. `AGY_ALLOW` is never written.
    pub fn edit_allow(&self, edit: &AllowEdit) -> Result<(ConfigStatus, bool), StateError> {
        self.edit_allow_with_env(edit, &env_nonempty)
    }

    pub fn edit_allow_with_env(
        &self,
        edit: &AllowEdit,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ConfigStatus, bool), StateError> {
        check_env_with(env)?;
        let mut warnings = Vec::new();
        let (map, changed) = {
            let lock = self.file.lock()?;
            let mut map = self.file.read(Some(&lock), &mut warnings)?;
            let mut list = match map.get(ALLOW_KEY) {
                Some(Value::Array(list)) => list.clone(),
                _ => Vec::new(),
            };
            let is = |v: &Value, rule: &Rule| {
                v.as_str().and_then(|t| Rule::parse(t).ok()).as_ref() == Some(rule)
            };
            let before = list.len();
            let changed = match edit {
                AllowEdit::Add(rule) if list.iter().any(|v| is(v, rule)) => false,
                AllowEdit::Add(rule) => {
                    list.push(Value::from(rule.to_string()));
                    true
                }
                AllowEdit::Remove(rule) => {
                    list.retain(|v| !is(v, rule));
                    list.len() != before
                }
            };
            if changed {
                map.insert(ALLOW_KEY.to_string(), Value::Array(list));
                self.file.write(&lock, &map)?;
            }
            (map, changed)
        };
        Ok((self.resolve(&map, env, warnings)?, changed))
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
            let file = self.file_setting(setting, map, &mut warnings);
            let from_env = env_setting(setting, env, &mut warnings)?;
            let (value, source, key, env_var) = match (from_env, &file) {
                (Some((v, var)), _) => (v, Source::Env, None, var),
                (None, Some((v, key))) => (v.clone(), Source::File, Some(*key), setting.env_var()),
                (None, None) => (
                    default_value(setting),
                    Source::Default,
                    None,
                    setting.env_var(),
                ),
            };
            apply(&mut config, setting, &value);
            let file_key = file.as_ref().map(|(_, k)| *k);
            settings.push(SettingStatus {
                setting,
                key: key.or(file_key).unwrap_or(setting.file_key()),
                value,
                source,
                env_var,
                file_value: file.map(|(v, _)| v),
            });
        }
        let allow = self.resolve_allow(map, env, &mut warnings)?;
        config.allow_rules = allow.rules.clone();
        Ok(ConfigStatus {
            config,
            settings,
            allow,
            config_path: self.file.path().to_path_buf(),
            sessions_path: self.file.dir.join(SESSIONS_FILE),
            warnings,
        })
    }

    /// The user's allow rules: `AGY_ALLOW`, else the file's, else none.
    fn resolve_allow(
        &self,
        map: &Map<String, Value>,
        env: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<StateWarning>,
    ) -> Result<AllowStatus, StateError> {
        let file_rules = self.file_allow(map, warnings);
        let (rules, source) = match (env_allow(env)?, &file_rules) {
            (Some(rules), _) => (rules, Source::Env),
            (None, Some(rules)) => (rules.clone(), Source::File),
            (None, None) => (Vec::new(), Source::Default),
        };
        Ok(AllowStatus {
            rules,
            source,
            env_var: ALLOW_ENV,
            file_rules,
        })
    }

    /// The file's `allow` list: its valid rules (each invalid entry a
    /// warning), `None` when the key is absent or not an array.
    fn file_allow(
        &self,
        map: &Map<String, Value>,
        warnings: &mut Vec<StateWarning>,
    ) -> Option<Vec<Rule>> {
        let path = || self.file.path().to_path_buf();
        let list = match map.get(ALLOW_KEY) {
            None | Some(Value::Null) => return None,
            Some(Value::Array(list)) => list,
            Some(other) => {
                warnings.push(StateWarning::InvalidSetting {
                    path: path(),
                    key: ALLOW_KEY.into(),
                    reason: format!(
                        "expected an array of rule strings, found {}",
                        json_kind(other)
                    ),
                });
                return None;
            }
        };
        let mut rules = Vec::with_capacity(list.len());
        for entry in list {
            let parsed = match entry {
                Value::String(text) => Rule::parse(text)
                    .map_err(|e| format!("{} (a rule is TOOL or TOOL: PATTERN)", e.reason)),
                other => Err(format!("expected a string, found {}", json_kind(other))),
            };
            match parsed {
                Ok(rule) => rules.push(rule),
                Err(reason) => warnings.push(StateWarning::SkippedRule {
                    path: path(),
                    entry: entry.to_string().chars().take(200).collect(),
                    reason,
                }),
            }
        }
        Some(rules)
    }

    /// The file's valid value for `setting` (normalised), if any, and the
    /// key it was read from.
    fn file_setting(
        &self,
        setting: Setting,
        map: &Map<String, Value>,
        warnings: &mut Vec<StateWarning>,
    ) -> Option<(Value, &'static str)> {
        let present = |key: &str| map.get(key).filter(|v| !v.is_null());
        let (key, raw) = match (present(setting.file_key()), setting.legacy_file_key()) {
            (Some(raw), _) => (setting.file_key(), raw),
            (None, Some(legacy)) => (legacy, present(legacy)?),
            (None, None) => return None,
        };
        let parsed = match (setting, raw) {
            (Setting::Permissions, Value::Bool(b)) if key != setting.file_key() => {
                let mode = if *b {
                    PermissionMode::Allow
                } else {
                    PermissionMode::Deny
                };
                Ok(Some(Value::from(mode.as_word())))
            }
            (Setting::Permissions, other) if key != setting.file_key() => Err(format!(
                "expected true or false, found {}",
                json_kind(other)
            )),
            // An empty model means "the default", as in the TypeScript bridge.
            (Setting::Model, Value::String(s)) if s.trim().is_empty() => Ok(None),
            (_, Value::String(s)) => parse_text(setting, s).map(Some),
            (_, other) => Err(format!("expected a string, found {}", json_kind(other))),
        };
        match parsed {
            Ok(v) => v.map(|v| (v, key)),
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
        Setting::Permissions => t
            .parse::<PermissionMode>()
            .map(|p| Value::from(p.as_word())),
    }
}

/// Every settings variable checked against what it takes, through `env`.
fn check_env_with(env: &dyn Fn(&str) -> Option<String>) -> Result<(), StateError> {
    let mut ignored = Vec::new();
    for setting in Setting::ALL {
        env_setting(setting, env, &mut ignored)?;
    }
    env_allow(env).map(drop)
}

/// One variable: `None` when unset or blank, an error naming it and the
/// values it takes when `parse` refuses it.
fn env_value(
    var: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
    parse: impl Fn(&str) -> Result<Value, String>,
) -> Result<Option<(Value, String)>, StateError> {
    let Some(raw) = env(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match parse(&raw) {
        Ok(v) => Ok(Some((v, raw))),
        Err(reason) => Err(StateError::Env {
            var,
            value: raw,
            reason,
        }),
    }
}

/// The environment's value for `setting` and the variable it came from:
/// `None` when unset or blank, an error naming the variable and the values
/// it takes when it is not one. A legacy variable counts only when the
/// setting's own is unset; when both are set and disagree, a warning says
/// the legacy one was ignored.
fn env_setting(
    setting: Setting,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<StateWarning>,
) -> Result<Option<(Value, &'static str)>, StateError> {
    let var = setting.env_var();
    let own = env_value(var, env, |t| parse_text(setting, t))?;
    let Some(legacy) = setting.legacy_env_var() else {
        return Ok(own.map(|(v, _)| (v, var)));
    };
    let old = env_value(legacy, env, |t| {
        legacy_switch(t).map(|p| Value::from(p.as_word()))
    })?;
    Ok(match (own, old) {
        (Some((v, raw)), Some((old_v, old_raw))) => {
            if v != old_v {
                warnings.push(StateWarning::Env {
                    var: legacy.to_string(),
                    value: old_raw,
                    reason: format!(
                        "ignored: {var}={raw:?} is set and wins (permissions {}); unset {legacy}",
                        display_json(&v)
                    ),
                });
            }
            Some((v, var))
        }
        (Some((v, _)), None) => Some((v, var)),
        (None, Some((v, _))) => Some((v, legacy)),
        (None, None) => None,
    })
}

/// `AGY_ALLOW`'s rules: `None` when unset or blank, an error naming the
/// variable and the rule that is not one.
fn env_allow(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Vec<Rule>>, StateError> {
    let Some(raw) = env(ALLOW_ENV).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    rules::parse_list(&raw)
        .map(Some)
        .map_err(|e| StateError::Env {
            var: ALLOW_ENV,
            value: raw,
            reason: format!("{e}; separate rules with ; or newlines"),
        })
}

fn default_value(setting: Setting) -> Value {
    let d = Config::default();
    match setting {
        Setting::Mode => Value::from(d.mode.as_arg()),
        Setting::Permissions => Value::from(d.permissions.as_word()),
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
        (Setting::Permissions, Value::String(s)) => {
            if let Ok(p) = s.parse() {
                config.permissions = p;
            }
        }
        (Setting::Model, Value::String(s)) => config.default_model = s.clone(),
        (Setting::Thinking, Value::String(s)) => {
            if let Ok(e) = s.parse() {
                config.default_thinking = e;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(file: &str) -> (tempfile::TempDir, ConfigStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        if !file.is_empty() {
            fs::write(dir.path().join(CONFIG_FILE), file).expect("write");
        }
        let store = ConfigStore::open(dir.path());
        (dir, store)
    }

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn file_json(store: &ConfigStore) -> Value {
        serde_json::from_str(&fs::read_to_string(store.path()).expect("read")).expect("json")
    }

    #[test]
    fn permission_words() {
        for (text, mode) in [
            ("ask", PermissionMode::Ask),
            (" ALLOW ", PermissionMode::Allow),
            ("deny", PermissionMode::Deny),
            ("on", PermissionMode::Allow),
            ("1", PermissionMode::Allow),
            ("true", PermissionMode::Allow),
            ("Yes", PermissionMode::Allow),
            ("off", PermissionMode::Deny),
            ("0", PermissionMode::Deny),
            ("false", PermissionMode::Deny),
            ("no", PermissionMode::Deny),
        ] {
            assert_eq!(text.parse::<PermissionMode>(), Ok(mode), "{text}");
        }
        let err = "maybe".parse::<PermissionMode>().unwrap_err();
        assert!(err.contains("expected ask, allow or deny"), "{err}");
        for mode in PermissionMode::ALL {
            assert_eq!(mode.to_string().parse::<PermissionMode>(), Ok(mode));
            assert_eq!(mode.to_string(), mode.as_word());
        }
        assert_eq!(PermissionMode::default(), PermissionMode::Ask);
        assert_eq!(Config::default().permissions, PermissionMode::Ask);
    }

    #[test]
    fn the_legacy_key_is_read_when_permissions_is_absent() {
        let (_d, s) = store(r#"{ "skipPermissions": true }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Allow);
        let p = st.setting(Setting::Permissions).unwrap();
        assert_eq!((p.key, p.source), ("skipPermissions", Source::File));
        assert_eq!(p.value, json!("allow"));
        assert!(st
            .to_string()
            .contains("permissions  allow         file (skipPermissions)"));
        let (_d, s) = store(r#"{ "skipPermissions": false }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Deny);
        let (_d, s) = store("{}");
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Ask);
        assert_eq!(st.source(Setting::Permissions), Some(Source::Default));
    }

    #[test]
    fn the_new_key_wins_over_the_legacy_one() {
        let (_d, s) = store(r#"{ "permissions": "ask", "skipPermissions": true }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Ask);
        let p = st.setting(Setting::Permissions).unwrap();
        assert_eq!((p.key, p.source), ("permissions", Source::File));
        assert_eq!(st.warnings, vec![]);
        // An invalid new key is reported; the legacy one does not stand in.
        let (_d, s) = store(r#"{ "permissions": "sometimes", "skipPermissions": true }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Ask);
        assert_eq!(st.warnings.len(), 1);
        assert!(st.warnings[0].to_string().contains("\"permissions\""));
        let (_d, s) = store(r#"{ "permissions": 3 }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert!(st.warnings[0].to_string().contains("expected a string"));
    }

    #[test]
    fn the_new_variable_wins_and_a_disagreeing_old_one_is_a_warning() {
        let (_d, s) = store(r#"{ "permissions": "deny" }"#);
        let st = s
            .load_with_env(&env_of(&[("AGY_SKIP_PERMISSIONS", "on")]))
            .unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Allow);
        let p = st.setting(Setting::Permissions).unwrap();
        assert_eq!(p.env_var, "AGY_SKIP_PERMISSIONS");
        assert_eq!(p.file_value, Some(json!("deny")));
        assert_eq!(st.warnings, vec![]);

        let env = env_of(&[("AGY_PERMISSIONS", "ask"), ("AGY_SKIP_PERMISSIONS", "1")]);
        let st = s.load_with_env(&env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Ask);
        let p = st.setting(Setting::Permissions).unwrap();
        assert_eq!((p.env_var, p.source), ("AGY_PERMISSIONS", Source::Env));
        let shown: Vec<String> = st.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["AGY_SKIP_PERMISSIONS=\"1\": ignored: AGY_PERMISSIONS=\"ask\" is set and wins (permissions ask); unset AGY_SKIP_PERMISSIONS"]
        );
        // Agreeing variables are no news.
        let env = env_of(&[
            ("AGY_PERMISSIONS", "allow"),
            ("AGY_SKIP_PERMISSIONS", "yes"),
        ]);
        assert_eq!(s.load_with_env(&env).unwrap().warnings, vec![]);
        // The old words work in the new variable too.
        let env = env_of(&[("AGY_PERMISSIONS", "off")]);
        let st = s.load_with_env(&env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Deny);
    }

    #[test]
    fn invalid_variables_are_errors_naming_them() {
        let (_d, s) = store("");
        for (vars, named, takes) in [
            (
                &[("AGY_PERMISSIONS", "maybe")][..],
                "AGY_PERMISSIONS=\"maybe\"",
                "expected ask, allow or deny",
            ),
            (
                &[("AGY_PERMISSIONS", "ask"), ("AGY_SKIP_PERMISSIONS", "ask")][..],
                "AGY_SKIP_PERMISSIONS=\"ask\"",
                "expected on or off",
            ),
            (
                &[("AGY_ALLOW", "run_command: cargo test*; bad tool")][..],
                "AGY_ALLOW=",
                "the tool name contains whitespace",
            ),
        ] {
            let env = |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            };
            let err = s.load_with_env(&env).unwrap_err().to_string();
            assert!(err.starts_with(named) && err.contains(takes), "{err}");
            let err = s
                .save_change_with_env(ConfigChange::Permissions(PermissionMode::Deny), &env)
                .unwrap_err();
            assert!(err.to_string().starts_with(named), "{err}");
            assert!(!s.path().exists(), "nothing written");
        }
    }

    #[test]
    fn saving_writes_permissions_and_leaves_skip_permissions() {
        let (_d, s) = store(r#"{ "skipPermissions": true, "engine": "x" }"#);
        let st = s
            .save_change_with_env(ConfigChange::Permissions(PermissionMode::Deny), &no_env)
            .unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Deny);
        assert_eq!(st.setting(Setting::Permissions).unwrap().key, "permissions");
        assert_eq!(
            file_json(&s),
            json!({ "skipPermissions": true, "engine": "x", "permissions": "deny" })
        );
        assert_eq!(st.to_json()["permissions"], json!("deny"));
    }

    #[test]
    fn allow_rules_from_the_file_and_the_environment() {
        let (_d, s) = store(
            r#"{ "allow": ["run_command: cargo test*", "bad tool: x", 7, "write_to_file: docs/*"] }"#,
        );
        let st = s.load_with_env(&no_env).unwrap();
        let shown: Vec<String> = st
            .config
            .allow_rules
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["run_command: cargo test*", "write_to_file: docs/*"]);
        assert_eq!(st.allow.source, Source::File);
        let warned: Vec<String> = st.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(warned.len(), 2, "{warned:?}");
        assert!(
            warned[0].contains(
                "skipping the allow rule \"bad tool: x\": the tool name contains whitespace"
            ),
            "{warned:?}"
        );
        assert!(
            warned[1].contains("skipping the allow rule 7: expected a string"),
            "{warned:?}"
        );
        let list = st.config.allow_list();
        assert_eq!(list.len(), DEFAULT_ALLOW.len() + 2);
        assert!(list[..DEFAULT_ALLOW.len()].iter().all(Rule::is_default));
        assert!(list
            .iter()
            .any(|r| r.matches("run_command", "cargo test --lib")));

        let env = env_of(&[("AGY_ALLOW", "view_file\nrun_command: make ;")]);
        let st = s.load_with_env(&env).unwrap();
        let shown: Vec<String> = st
            .config
            .allow_rules
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["view_file: *", "run_command: make"]);
        assert_eq!(st.allow.source, Source::Env);
        assert_eq!(st.allow.file_rules.as_ref().map(Vec::len), Some(2));
        assert!(st
            .to_string()
            .contains("allow        2 rules       env AGY_ALLOW (file has 2 rules)"));

        let (_d, s) = store(r#"{ "allow": "view_file" }"#);
        let st = s.load_with_env(&no_env).unwrap();
        assert_eq!(st.allow.source, Source::Default);
        assert!(st.warnings[0]
            .to_string()
            .contains("expected an array of rule strings"));
    }

    #[test]
    fn editing_allow_rules_keeps_the_rest_of_the_file() {
        let (_d, s) = store(r#"{ "allow": ["bad tool: x"], "mode": "plan" }"#);
        let rule = Rule::parse("run_command: cargo test*").unwrap();
        let (st, changed) = s
            .edit_allow_with_env(&AllowEdit::Add(rule.clone()), &no_env)
            .unwrap();
        assert!(changed);
        assert_eq!(st.config.allow_rules, vec![rule.clone()]);
        let (_, changed) = s
            .edit_allow_with_env(
                &AllowEdit::Add(Rule::parse("run_command:cargo test*").unwrap()),
                &no_env,
            )
            .unwrap();
        assert!(!changed, "the same rule, written differently");
        assert_eq!(
            file_json(&s),
            json!({ "allow": ["bad tool: x", "run_command: cargo test*"], "mode": "plan" })
        );
        // AGY_ALLOW is never written; the edit still goes to the file.
        let env = env_of(&[("AGY_ALLOW", "view_file")]);
        let (st, changed) = s
            .edit_allow_with_env(&AllowEdit::Remove(rule.clone()), &env)
            .unwrap();
        assert!(changed);
        assert_eq!(st.allow.source, Source::Env);
        assert_eq!(
            file_json(&s),
            json!({ "allow": ["bad tool: x"], "mode": "plan" })
        );
        let (_, changed) = s
            .edit_allow_with_env(&AllowEdit::Remove(rule), &no_env)
            .unwrap();
        assert!(!changed);
    }
}
