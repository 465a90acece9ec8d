//! The bridge's settings, kept in `config.json` in the state directory
//! ([`crate::state::file`] says where that is and how the file is written,
//! locked and recovered): what each setting is, where its value comes from,
//! and how one change is saved. Reading the settings variables is in
//! [`env`](mod@env), the status `agy-bridge config` prints in [`status`].
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
//! | `skipPermissions` | `true` (allow), `false` (deny)  | (legacy)       |                         |
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
//! `skipPermissions` as it is. The old variable `AGY_SKIP_PERMISSIONS` is
//! no longer read ([`crate::settings`] warns when it is set).
//!
//! **Allow rules** ([`crate::state::rules`]): `allow` is the user's list, each
//! entry a rule string; an invalid entry is a [`StateWarning::SkippedRule`]
//! and is skipped (and kept in the file). `AGY_ALLOW` (rules separated by
//! `;` or newlines) replaces the file's list; an invalid rule in it is an
//! error. The gate uses `Config::allow_list`: the built-in read-only
//! tools (`crate::state::rules::DEFAULT_ALLOW`) and the user's rules.
//!
//! Every other key (the TypeScript bridge's `engine`, `acp`, `askTool`, `bridgeTools`,
//! `digest`, `systemPrompt`, `patchCleanupNotified`, ...) is kept as it is
//! when we save.
//!
//! Environment variables win over the file; every function here takes them
//! as a lookup (`env`), [`crate::settings`]' snapshot. An empty variable counts as
//! unset (as in the runner). Differences from the TypeScript bridge, on purpose:
//! - an invalid `AGY_MODE`, `AGY_PERMISSIONS`, `AGY_ALLOW`, `AGY_DEFAULT_THINKING` or `AGY_DEFAULT_MODEL` is an error
//!   ([`StateError::Env`]) naming the variable and the values it takes, never a default: a typo in
//!   `AGY_MODE=plna` must not quietly let agy edit files, and a user who set
//!   a variable meant it;
//! - `AGY_PERMISSIONS` takes `ask`, `allow`, `deny` and the old switch
//!   words: `1`, `true`, `on`, `yes`
//!   are allow and `0`, `false`, `off`, `no` are deny (any case);
//! - an invalid value in the file is reported and the default used (the file
//!   is ours to repair with `agy-bridge config`).
//!
//! **Saving never writes a value that came from the environment:**
//! [`ConfigStore::save_change_with_env`] and [`ConfigStore::edit_allow_with_env`] re-read the
//! file under the lock, change only the one key and write the file back.

pub mod env;
pub mod status;

use self::env::{check_env_with, env_allow, env_setting};
pub use self::status::{AllowStatus, ConfigStatus, SettingStatus};
use crate::state::file::{json_kind, StateError, StateFile, StateWarning, SESSIONS_FILE};
use crate::state::rules::{self, Rule};
use agy_format::agy_args::{Effort, Mode};
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;
use std::path::Path;

/// The settings file's name inside the state directory.
pub(crate) const CONFIG_FILE: &str = "config.json";

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
    /// Every mode, in the order the CLI lists them.
    pub const ALL: [PermissionMode; 3] = [
        PermissionMode::Ask,
        PermissionMode::Allow,
        PermissionMode::Deny,
    ];

    /// The setting's word: `ask`, `allow` or `deny`.
    pub(crate) fn as_word(self) -> &'static str {
        match self {
            PermissionMode::Ask => "ask",
            PermissionMode::Allow => "allow",
            PermissionMode::Deny => "deny",
        }
    }

    /// What the mode means for safety, in one sentence.
    pub(crate) fn meaning(self) -> &'static str {
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

/// The old on/off switch (`skipPermissions`): on is allow, off is deny.
fn legacy_switch(text: &str) -> Result<PermissionMode, String> {
    let t = text.trim();
    match crate::state::file::on_off(t) {
        Some(true) => Ok(PermissionMode::Allow),
        Some(false) => Ok(PermissionMode::Deny),
        None => Err(format!(
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
    /// the built-in ones: see `Config::allow_list`.
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
    /// The rules the permission gate lets through without asking: the
    /// built-in read-only tools ([`DEFAULT_ALLOW`](rules::DEFAULT_ALLOW)), then the user's.
    pub(crate) fn allow_list(&self) -> Vec<Rule> {
        let mut list = rules::default_allow();
        list.extend(self.allow_rules.iter().cloned());
        list
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Nothing set it: the built-in default.
    Default,
    /// The state directory's `config.json`.
    File,
    /// An environment variable, which wins over the file.
    Env,
}

/// One of the settings we manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// agy's mode (`AGY_MODE`).
    Mode,
    /// Who decides on agy's tools (`AGY_PERMISSIONS`).
    Permissions,
    /// The default model (`AGY_DEFAULT_MODEL`).
    Model,
    /// The default thinking effort (`AGY_DEFAULT_THINKING`).
    Thinking,
}

impl Setting {
    pub(crate) const ALL: [Setting; 4] = [
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
    pub(crate) fn legacy_file_key(self) -> Option<&'static str> {
        (self == Setting::Permissions).then_some("skipPermissions")
    }

    /// The environment variable that overrides it.
    pub(crate) fn env_var(self) -> &'static str {
        match self {
            Setting::Mode => "AGY_MODE",
            Setting::Permissions => "AGY_PERMISSIONS",
            Setting::Model => "AGY_DEFAULT_MODEL",
            Setting::Thinking => "AGY_DEFAULT_THINKING",
        }
    }
}

/// The variable of the user's allow rules (`;` or newline separated).
pub(crate) const ALLOW_ENV: &str = "AGY_ALLOW";
/// The config.json key of the user's allow rules.
pub(crate) const ALLOW_KEY: &str = "allow";

/// One explicit change by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Set agy's mode.
    Mode(Mode),
    /// Set who decides on agy's tools.
    Permissions(PermissionMode),
    /// Set the default model, by its alias.
    DefaultModel(String),
    /// Set the default thinking effort.
    DefaultThinking(Effort),
}

impl ConfigChange {
    /// The setting it changes.
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
pub(crate) fn validate_model_alias(alias: &str) -> Result<&str, StateError> {
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

    /// The `config.json` it reads and writes.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The file merged with `env` (a lookup returning non-empty values).
    pub(crate) fn load_with_env(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ConfigStatus, StateError> {
        let mut warnings = Vec::new();
        let map = self.file.read(None, &mut warnings)?;
        self.resolve(&map, env, warnings)
    }

    /// Save one change: re-read the file under the lock, set that one key,
    /// write it back (other keys, known or not, untouched; nothing from the
    /// environment), then return the new status merged with `env`.
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
            let from_env = env_setting(setting, env)?;
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
            sessions_path: self.file.dir().join(SESSIONS_FILE),
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
    use crate::state::rules::DEFAULT_ALLOW;
    use serde_json::json;
    use std::fs;

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
    fn the_old_variable_is_not_read_and_the_new_one_takes_the_old_words() {
        let (_d, s) = store(r#"{ "permissions": "deny" }"#);
        let st = s
            .load_with_env(&env_of(&[("AGY_SKIP_PERMISSIONS", "on")]))
            .unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Deny);
        let p = st.setting(Setting::Permissions).unwrap();
        assert_eq!((p.env_var, p.source), ("AGY_PERMISSIONS", Source::File));
        assert_eq!(st.warnings, vec![]);
        // A value the old variable never took is no error either.
        let env = env_of(&[("AGY_PERMISSIONS", "ask"), ("AGY_SKIP_PERMISSIONS", "ask")]);
        let st = s.load_with_env(&env).unwrap();
        assert_eq!(st.config.permissions, PermissionMode::Ask);
        assert_eq!(st.warnings, vec![]);
        // The old words work in the new variable.
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
