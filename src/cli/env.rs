//! The environment variables every command that runs or configures agy
//! reads, checked before it acts: a value a variable does not take is one
//! sentence naming the variable and the values it takes, never a default
//! (README's environment table promises that). Each variable is parsed where
//! it is used (the runner, the settings, pi's tools), the binary's own (the
//! watchdog's, the warm session's) here; this module makes sure every
//! command asks all of them up front, so `run` cannot pass a typo that only
//! `stream` would have caught.

use agy_bridge::state::file::env_nonempty;

/// The watchdog's variable, in minutes.
pub const TIMEOUT_MIN: &str = "AGY_TIMEOUT_MIN";
/// How long `stream` waits for its request line, in seconds.
pub const REQUEST_TIMEOUT_SECS: &str = "AGY_REQUEST_TIMEOUT_SECS";
/// AskAntigravity's default model alias.
const DEFAULT_MODEL: &str = "AGY_DEFAULT_MODEL";

/// A whole number from the environment variable `name`: `None` when unset
/// or empty, an error naming the variable and its value otherwise.
pub fn whole_number(name: &str, unit: &str) -> Result<Option<u64>, String> {
    let Some(raw) = std::env::var_os(name) else {
        return Ok(None);
    };
    let text = raw.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(None);
    }
    text.trim().parse::<u64>().map(Some).map_err(|_| {
        format!("{name}={text:?} is not a whole number of {unit}; unset it or give e.g. {name}=10")
    })
}

/// Every variable whose values are words or numbers: the settings, the
/// runner's, the watchdog's, pi's tools', admission's. Reads no file and runs nothing.
pub fn check_words() -> Result<(), String> {
    agy_bridge::state::config::env::check_env_settings().map_err(|e| e.to_string())?;
    agy_bridge::runner::RunConfig::from_env().map_err(|e| e.to_string())?;
    whole_number(TIMEOUT_MIN, "minutes")?;
    whole_number(REQUEST_TIMEOUT_SECS, "seconds")?;
    agy_bridge::pi::mcp::disabled_by_env().map_err(|e| e.to_string())?;
    agy_bridge::session::warm_policy::warm_policy()?;
    agy_bridge::pi::mcp::relay::batch_window().map_err(|e| e.to_string())?;
    // Reads only the variables: the path is kept, never touched, so no
    // state directory (or HOME) is needed to check them.
    agy_bridge::state::admission::Admission::from_env(std::path::Path::new(""))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// [`check_words`], then `AGY_DEFAULT_MODEL` against the catalog (which loads the catalog
/// only when the variable is set; an `agy models` it runs ends on the
/// command's stop signals).
pub fn check_all() -> Result<(), String> {
    check_words()?;
    if env_nonempty(DEFAULT_MODEL).is_some() {
        let stop = agy_bridge::process::caller::stop_token();
        agy_bridge::pi::turn::check_default_model(&agy_bridge::pi::models::catalog(&stop))?;
    }
    Ok(())
}
