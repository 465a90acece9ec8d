//! The settings read from the environment (`AGY_MODE`, `AGY_PERMISSIONS`
//! and its legacy `AGY_SKIP_PERMISSIONS`, `AGY_DEFAULT_MODEL`,
//! `AGY_DEFAULT_THINKING`, `AGY_ALLOW`). A variable wins over the file and
//! a bad one is an error, never a default, so the checks live together
//! where every caller (loading, saving, the up-front check) shares them.

use super::status::display_json;
use super::{legacy_switch, parse_text, Setting, ALLOW_ENV};
use crate::state::file::{env_nonempty, StateError, StateWarning};
use crate::state::rules::{self, Rule};
use serde_json::Value;

/// The settings variables (the four settings, the legacy
/// `AGY_SKIP_PERMISSIONS`, `AGY_ALLOW`) checked against what they take, without
/// reading any file: `Err` names the first one that holds a bad value.
pub fn check_env_settings() -> Result<(), StateError> {
    check_env_with(&env_nonempty)
}

/// Every settings variable checked against what it takes, through `env`.
pub(super) fn check_env_with(env: &dyn Fn(&str) -> Option<String>) -> Result<(), StateError> {
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
pub(super) fn env_setting(
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
pub(super) fn env_allow(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Vec<Rule>>, StateError> {
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
