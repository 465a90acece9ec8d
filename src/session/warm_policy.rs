//! Whether a session keeps one agy warm between its turns, and for how
//! long when idle: `AGY_WARM` and `AGY_WARM_IDLE_SECS`.

use crate::state::file::env_nonempty;
use std::time::Duration;

/// `AGY_WARM=off` runs every turn on an agy of its own, as before.
pub const WARM_ENV: &str = "AGY_WARM";
/// How long an idle session keeps its agy, in seconds (default 600).
pub const WARM_IDLE_ENV: &str = "AGY_WARM_IDLE_SECS";
const WARM_IDLE_DEFAULT: Duration = Duration::from_secs(600);
/// Whether warm sessions are on, and how long an idle one keeps its agy.
#[derive(Debug, Clone, Copy)]
pub struct WarmPolicy {
    /// A session keeps one agy warm between its turns.
    pub on: bool,
    /// How long an idle session keeps it.
    pub idle: Duration,
}

/// `AGY_WARM` and `AGY_WARM_IDLE_SECS`, or the sentence naming a bad value.
pub fn warm_policy() -> Result<WarmPolicy, String> {
    let on = match env_nonempty(WARM_ENV) {
        None => true,
        Some(v) => crate::state::file::on_off(&v).ok_or_else(|| {
            format!("{WARM_ENV}={v:?} is not on or off (also 1/0, true/false, yes/no)")
        })?,
    };
    let idle = match env_nonempty(WARM_IDLE_ENV) {
        None => WARM_IDLE_DEFAULT,
        Some(v) => v.trim().parse::<u64>().map(Duration::from_secs).map_err(|_| {
            format!(
                "{WARM_IDLE_ENV}={v:?} is not a whole number of seconds; unset it or give e.g. {WARM_IDLE_ENV}=10"
            )
        })?,
    };
    Ok(WarmPolicy { on, idle })
}
