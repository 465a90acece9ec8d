//! The settings every command that runs or configures agy checks before it
//! acts: a value a variable does not take is one sentence naming the
//! variable and the values it takes, never a default (README's environment
//! table promises that). `main` resolves them once
//! ([`agy_bridge::settings::Settings`]); this module makes sure every such
//! command asks all of them up front, so `run` cannot pass a typo that only
//! `stream` would have caught, and checks the default model against agy's
//! catalog.

use agy_bridge::settings::Settings;

/// AskAntigravity's default model alias.
const DEFAULT_MODEL: &str = "AGY_DEFAULT_MODEL";

/// Every variable whose values are words or numbers: the settings, the
/// runner's, the watchdog's, pi's tools', admission's. Reads no file and
/// runs nothing.
pub fn check_words(settings: &Settings) -> Result<(), String> {
    settings.check().map_err(|e| e.to_string())
}

/// `AGY_DEFAULT_MODEL` against agy's catalog (as `stream` resolves models:
/// the cache, else `agy models`, else the built-in catalog): an alias no
/// model answers to is an error naming the ones there are.
pub fn check_default_model(
    settings: &Settings,
    catalog: &agy_bridge::pi::models::Catalog,
) -> Result<(), String> {
    let Some(alias) = settings.config_var(DEFAULT_MODEL) else {
        return Ok(());
    };
    catalog
        .resolve_alias(alias, None)
        .map(drop)
        .map_err(|e| format!("{DEFAULT_MODEL}={alias:?} is not valid: {e}"))
}

/// [`check_words`], then [`check_default_model`] (which loads the catalog
/// only when the variable is set; an `agy models` it runs ends on the
/// command's stop signals).
pub fn check_all(settings: &Settings) -> Result<(), String> {
    check_words(settings)?;
    if settings.config_var(DEFAULT_MODEL).is_some() {
        let stop = super::caller::stop_token();
        check_default_model(settings, &agy_bridge::pi::models::catalog(settings, &stop))?;
    }
    Ok(())
}
