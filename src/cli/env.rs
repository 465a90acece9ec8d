//! The settings every command that runs or configures agy checks before it
//! acts: a value a variable does not take is one sentence naming the
//! variable and the values it takes, never a default (README's environment
//! table promises that). `main` resolves them once
//! ([`agy_bridge::settings::Settings`]); this module makes sure every such
//! command asks all of them up front, so `run` cannot pass a typo that only
//! `stream` would have caught.

use agy_bridge::settings::Settings;

/// Every variable whose values are words or numbers: the settings, the
/// runner's, the watchdog's, pi's tools', admission's. Reads no file and
/// runs nothing.
pub fn check_words(settings: &Settings) -> Result<(), String> {
    settings.check().map_err(|e| e.to_string())
}

/// [`check_words`], then `AGY_DEFAULT_MODEL` against agy's catalog (loaded
/// only when the variable is set; an `agy models` it runs ends on the
/// command's stop signals).
pub fn check_all(settings: &Settings) -> Result<(), String> {
    agy_bridge::pi::turn::check_settings(settings, agy_bridge::process::caller::stop_token)
}
