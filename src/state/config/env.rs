//! The settings variables that win over the file (`AGY_MODE`,
//! `AGY_PERMISSIONS`, `AGY_DEFAULT_MODEL`, `AGY_DEFAULT_THINKING`,
//! `AGY_ALLOW`), looked up through a function the caller gives
//! ([`crate::settings`] gives its snapshot's): a bad one is an error, never
//! a default, so the checks live together where every caller (loading,
//! saving, the up-front check) shares them.

use super::{parse_text, Setting, ALLOW_ENV};
use crate::state::file::StateError;
use crate::state::rules::{self, Rule};
use serde_json::Value;

/// Every settings variable checked against what it takes, through `env`
/// (a lookup returning non-empty values): `Err` names the first one that
/// holds a bad value.
pub fn check_env_with(env: &dyn Fn(&str) -> Option<String>) -> Result<(), StateError> {
    for setting in Setting::ALL {
        env_setting(setting, env)?;
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
/// it takes when it is not one.
pub(super) fn env_setting(
    setting: Setting,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(Value, &'static str)>, StateError> {
    let var = setting.env_var();
    let own = env_value(var, env, |t| parse_text(setting, t))?;
    Ok(own.map(|(v, _)| (v, var)))
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
