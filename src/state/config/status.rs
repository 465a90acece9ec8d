//! What `agy-bridge config` (and the `/agy` settings commands) show: each
//! setting's effective value with where it came from, the user's allow
//! rules, the files involved and the warnings met while loading. Separate
//! from the loading itself so the wording of the report is found in one
//! place.

use super::{Config, Setting, Source, ALLOW_KEY};
use crate::state::file::StateWarning;
use crate::state::rules::{Rule, DEFAULT_ALLOW};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::fmt;
use std::path::PathBuf;

/// A setting's value and provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingStatus {
    /// Which setting.
    pub setting: Setting,
    /// The config.json key the file's value was read from (a legacy key
    /// such as `skipPermissions` when that is where it was).
    pub key: &'static str,
    /// The effective value, as a JSON value of the file's type.
    pub value: Value,
    /// Where the value came from.
    pub source: Source,
    /// The variable the value came from when `source` is `env`, otherwise
    /// the one that would override it.
    pub env_var: &'static str,
    /// The valid value the file holds, even when the environment wins.
    pub file_value: Option<Value>,
}

impl SettingStatus {
    /// The value as shown to people.
    pub(crate) fn display_value(&self) -> String {
        display_json(&self.value)
    }

    /// The file's value as shown to people, if the file has a valid one.
    pub fn display_file_value(&self) -> Option<String> {
        self.file_value.as_ref().map(display_json)
    }
}

pub(super) fn display_json(v: &Value) -> String {
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
    /// Where the rules came from.
    pub source: Source,
    /// The variable that holds them, or would override the file's.
    pub env_var: &'static str,
    /// The file's valid rules, even when `AGY_ALLOW` wins.
    pub file_rules: Option<Vec<Rule>>,
}

/// The effective settings, where each came from, and the files involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigStatus {
    /// The effective settings.
    pub config: Config,
    /// In `Setting::ALL` order.
    pub settings: Vec<SettingStatus>,
    /// The user's allow rules (also in `config.allow_rules`).
    pub allow: AllowStatus,
    /// The `config.json` read.
    pub config_path: PathBuf,
    /// The sessions file beside it.
    pub sessions_path: PathBuf,
    /// Problems found while loading (also worth printing on stderr).
    pub warnings: Vec<StateWarning>,
}

impl ConfigStatus {
    /// One setting's status.
    pub fn setting(&self, setting: Setting) -> Option<&SettingStatus> {
        self.settings.iter().find(|s| s.setting == setting)
    }

    /// Where one setting's value came from.
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
pub(crate) fn rules_count(n: usize) -> String {
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
