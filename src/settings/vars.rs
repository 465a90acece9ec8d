//! Each variable's name, what it takes and the sentence for a value it does
//! not take: the one place a user's typo becomes words. A bad value is
//! never a default: a user who set a variable meant it.

use super::env::Env;
use crate::state::file::{on_off, BadEnv, StateError};
use agy_format::agy_args::BindMode;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The agy binary: a path or a name on PATH (default `agy`).
pub const AGY_BIN_ENV: &str = "AGY_BIN";
/// Extra arguments for every agy run, whitespace-split.
pub const EXTRA_ARGS_ENV: &str = "AGY_EXTRA_ARGS";
/// agy's conversations directory.
pub const CONVERSATIONS_DIR_ENV: &str = "AGY_CONVERSATIONS_DIR";
/// How a turn binds its conversation.
pub const BIND_ENV: &str = "AGY_BIND";
/// How the runner wakes up to poll.
pub const WAKE_ENV: &str = "AGY_WAKE";
/// The watchdog, in minutes.
pub const TIMEOUT_MIN_ENV: &str = "AGY_TIMEOUT_MIN";
/// How long `stream` waits for its request line, in seconds.
pub const REQUEST_TIMEOUT_ENV: &str = "AGY_REQUEST_TIMEOUT_SECS";
/// `AGY_WARM=off` runs every turn on an agy of its own.
pub const WARM_ENV: &str = "AGY_WARM";
/// How long an idle session keeps its agy, in seconds.
pub const WARM_IDLE_ENV: &str = "AGY_WARM_IDLE_SECS";
/// `AGY_PI_TOOLS=off` (or `0`, `false`, `no`) offers agy none of pi's tools.
pub const PI_TOOLS_ENV: &str = "AGY_PI_TOOLS";
/// How long after agy's first tool call further calls join its message.
pub const TOOL_BATCH_ENV: &str = "AGY_PI_TOOL_BATCH_MS";
/// Replaces the state directory (wins over [`PI_AGENT_DIR_ENV`]).
pub const STATE_DIR_ENV: &str = crate::state::file::STATE_DIR_ENV;
/// pi's agent directory (pi's default is `~/.pi/agent`).
pub const PI_AGENT_DIR_ENV: &str = "PI_CODING_AGENT_DIR";
/// The old on/off permissions switch, no longer read (a warning says so).
pub const SKIP_PERMISSIONS_ENV: &str = "AGY_SKIP_PERMISSIONS";
/// The fake agy `agy-bridge demo` runs (default: next to this binary).
pub const FAKE_AGY_BIN_ENV: &str = "FAKE_AGY_BIN";

/// The watchdog's default, in minutes.
pub const TIMEOUT_MIN_DEFAULT: u64 = 10;
/// How long `stream` waits for its request line by default, in seconds.
pub const REQUEST_TIMEOUT_SECS_DEFAULT: u64 = 30;
/// How long an idle session keeps its warm agy by default.
pub const WARM_IDLE_DEFAULT: Duration = Duration::from_secs(600);
/// The tool batch window when [`TOOL_BATCH_ENV`] is unset (calls agy sends
/// together reach the loopback server within microseconds of each other;
/// every millisecond here is added to each tool round trip, see
/// benches/tool_roundtrip.rs).
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(2);

/// How the runner wakes up to poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeMode {
    /// inotify on the conversations directory, plus the fallback interval.
    Events,
    /// Only the interval (filesystems without notifications; benchmarks).
    PollOnly,
}

/// A variable holding a value it does not take: the sentence naming it
/// and the values it takes, as every command says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A setting of `config.json`'s (`AGY_MODE`, `AGY_PERMISSIONS`,
    /// `AGY_ALLOW`, `AGY_DEFAULT_MODEL`, `AGY_DEFAULT_THINKING`), in
    /// [`StateError::Env`]'s words.
    #[error("{var}={value:?} is not valid: {reason}; unset it or give one of the values it takes")]
    Config {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it is not valid.
        reason: String,
    },
    /// A switch or a bounded number.
    #[error(transparent)]
    Bad(#[from] BadEnv),
    /// `AGY_BIND` is not a bind mode.
    #[error("AGY_BIND={value:?} is not a bind mode; use one of: auto, discovery, stream-json")]
    Bind {
        /// Its value.
        value: String,
    },
    /// `AGY_WAKE` is not a wake mode.
    #[error("AGY_WAKE={value:?} is not a wake mode; use one of: events, poll")]
    Wake {
        /// Its value.
        value: String,
    },
    /// `AGY_EXTRA_ARGS` holds a flag the bridge sets itself.
    #[error("AGY_EXTRA_ARGS holds {flag}, which the bridge sets itself on every turn; remove it ({hint})")]
    ExtraArgs {
        /// The flag.
        flag: String,
        /// Where to set it instead.
        hint: &'static str,
    },
    /// A variable that takes a whole number holds something else.
    #[error("{var}={value:?} is not a whole number of {unit}; unset it or give e.g. {var}=10")]
    WholeNumber {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What the number counts.
        unit: &'static str,
    },
    /// `AGY_WARM` is not a switch.
    #[error("AGY_WARM={value:?} is not on or off (also 1/0, true/false, yes/no)")]
    Warm {
        /// Its value.
        value: String,
    },
}

impl SettingsError {
    /// The variable the sentence is about.
    pub fn var(&self) -> &'static str {
        match self {
            SettingsError::Config { var, .. } => var,
            SettingsError::Bad(b) => b.var,
            SettingsError::Bind { .. } => BIND_ENV,
            SettingsError::Wake { .. } => WAKE_ENV,
            SettingsError::ExtraArgs { .. } => EXTRA_ARGS_ENV,
            SettingsError::WholeNumber { var, .. } => var,
            SettingsError::Warm { .. } => WARM_ENV,
        }
    }
}

impl From<StateError> for SettingsError {
    /// [`crate::state::config`]'s check of its variables, which fails only
    /// with [`StateError::Env`].
    fn from(e: StateError) -> SettingsError {
        match e {
            StateError::Env { var, value, reason } => SettingsError::Config { var, value, reason },
            other => SettingsError::Config {
                var: "",
                value: String::new(),
                reason: other.to_string(),
            },
        }
    }
}

/// A whole number from `var`: `None` when unset or blank.
pub(super) fn whole_number(
    env: &Env,
    var: &'static str,
    unit: &'static str,
) -> Result<Option<u64>, SettingsError> {
    let Some(text) = env.lossy(var) else {
        return Ok(None);
    };
    text.trim()
        .parse::<u64>()
        .map(Some)
        .map_err(|_| SettingsError::WholeNumber {
            var,
            value: text,
            unit,
        })
}

/// `AGY_EXTRA_ARGS`, whitespace-split; one the bridge sets itself is refused.
pub(super) fn extra_args(env: &Env) -> Result<Vec<String>, SettingsError> {
    let Some(extra) = env.text(EXTRA_ARGS_ENV) else {
        return Ok(Vec::new());
    };
    let args: Vec<String> = extra.split_whitespace().map(str::to_string).collect();
    match args.iter().find_map(|a| super::agy_flags::bridge_flag(a)) {
        Some((flag, hint)) => Err(SettingsError::ExtraArgs { flag, hint }),
        None => Ok(args),
    }
}

/// `AGY_BIND` (default `auto`).
pub(super) fn bind(env: &Env) -> Result<BindMode, SettingsError> {
    match env.text(BIND_ENV) {
        None => Ok(BindMode::Auto),
        Some(value) => value
            .trim()
            .parse()
            .map_err(|_| SettingsError::Bind { value }),
    }
}

/// `AGY_WAKE` (default `events`).
pub(super) fn wake(env: &Env) -> Result<WakeMode, SettingsError> {
    match env.text(WAKE_ENV) {
        None => Ok(WakeMode::Events),
        Some(value) => match value.trim() {
            "events" => Ok(WakeMode::Events),
            "poll" => Ok(WakeMode::PollOnly),
            _ => Err(SettingsError::Wake { value }),
        },
    }
}

/// `AGY_WARM` (default on).
pub(super) fn warm(env: &Env) -> Result<bool, SettingsError> {
    match env.text(WARM_ENV) {
        None => Ok(true),
        Some(value) => on_off(&value).ok_or(SettingsError::Warm { value }),
    }
}

/// `AGY_PI_TOOLS` (default on): any word but the switch's is an error,
/// since guessing either way would surprise whoever typed it.
pub(super) fn pi_tools(env: &Env) -> Result<bool, SettingsError> {
    let Some(value) = env.text(PI_TOOLS_ENV) else {
        return Ok(true);
    };
    on_off(&value).ok_or(SettingsError::Bad(BadEnv {
        var: PI_TOOLS_ENV,
        value,
        takes: "on or off (also 1/0, true/false, yes/no)",
    }))
}

/// `AGY_PI_TOOL_BATCH_MS`: a whole number of milliseconds up to 1000 (a
/// longer window would hold every tool call that long).
pub(super) fn tool_batch(env: &Env) -> Result<Duration, SettingsError> {
    let Some(value) = env.text(TOOL_BATCH_ENV) else {
        return Ok(DEFAULT_BATCH_WINDOW);
    };
    match value.trim().parse::<u64>() {
        Ok(ms) if ms <= 1000 => Ok(Duration::from_millis(ms)),
        _ => Err(SettingsError::Bad(BadEnv {
            var: TOOL_BATCH_ENV,
            value,
            takes: "a whole number of milliseconds from 0 to 1000 (default 2)",
        })),
    }
}

/// The conversations directory: `$AGY_CONVERSATIONS_DIR` when set and
/// non-empty, else `$HOME/.gemini/antigravity-cli/conversations`; `None`
/// when neither is available.
pub(super) fn conversations_dir(env: &Env) -> Option<PathBuf> {
    if let Some(dir) = env.path(CONVERSATIONS_DIR_ENV) {
        return Some(dir);
    }
    Some(
        env.path("HOME")?
            .join(".gemini")
            .join("antigravity-cli")
            .join("conversations"),
    )
}

/// The state directory: `$AGY_BRIDGE_STATE_DIR`, else
/// `$PI_CODING_AGENT_DIR/antigravity-bridge`, else
/// `$HOME/.pi/agent/antigravity-bridge`; `None` without any of them.
pub(super) fn state_dir(env: &Env) -> Option<PathBuf> {
    if let Some(dir) = env.text(STATE_DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = env.text(PI_AGENT_DIR_ENV) {
        return Some(PathBuf::from(dir).join("antigravity-bridge"));
    }
    Some(
        env.path("HOME")?
            .join(".pi")
            .join("agent")
            .join("antigravity-bridge"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::from_vars(vars.iter().copied())
    }

    #[test]
    fn the_conversations_dir_prefers_its_variable() {
        let dir = |vars: &[(&str, &str)]| conversations_dir(&env(vars));
        assert_eq!(
            dir(&[(CONVERSATIONS_DIR_ENV, "/c"), ("HOME", "/h")]),
            Some(PathBuf::from("/c"))
        );
        let under_home = Some(PathBuf::from("/h/.gemini/antigravity-cli/conversations"));
        assert_eq!(
            dir(&[(CONVERSATIONS_DIR_ENV, ""), ("HOME", "/h")]),
            under_home
        );
        assert_eq!(dir(&[("HOME", "/h")]), under_home);
        assert_eq!(dir(&[("HOME", "")]), None);
        assert_eq!(dir(&[]), None);
    }

    #[test]
    fn the_state_dir_is_the_variable_then_pis_then_home() {
        let dir = |vars: &[(&str, &str)]| state_dir(&env(vars));
        let all = [
            (STATE_DIR_ENV, "/s"),
            (PI_AGENT_DIR_ENV, "/p"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&all), Some(PathBuf::from("/s")));
        assert_eq!(dir(&all[1..]), Some(PathBuf::from("/p/antigravity-bridge")));
        assert_eq!(
            dir(&all[2..]),
            Some(PathBuf::from("/h/.pi/agent/antigravity-bridge"))
        );
        assert_eq!(dir(&[(STATE_DIR_ENV, " "), ("HOME", "")]), None);
    }

    #[test]
    fn words_and_numbers_name_the_variable_and_what_it_takes() {
        let e = |var: &str, value: &str| env(&[(var, value)]);
        assert_eq!(
            bind(&e(BIND_ENV, "bogus")).unwrap_err().to_string(),
            "AGY_BIND=\"bogus\" is not a bind mode; use one of: auto, discovery, stream-json"
        );
        assert_eq!(
            bind(&e(BIND_ENV, " discovery ")).ok(),
            Some(BindMode::Discovery)
        );
        assert_eq!(
            wake(&e(WAKE_ENV, "bogus")).unwrap_err().to_string(),
            "AGY_WAKE=\"bogus\" is not a wake mode; use one of: events, poll"
        );
        assert_eq!(wake(&e(WAKE_ENV, "poll")).ok(), Some(WakeMode::PollOnly));
        assert_eq!(
            whole_number(&e(TIMEOUT_MIN_ENV, "abc"), TIMEOUT_MIN_ENV, "minutes")
                .unwrap_err()
                .to_string(),
            "AGY_TIMEOUT_MIN=\"abc\" is not a whole number of minutes; unset it or give e.g. AGY_TIMEOUT_MIN=10"
        );
        assert_eq!(
            warm(&e(WARM_ENV, "maybe")).unwrap_err().to_string(),
            "AGY_WARM=\"maybe\" is not on or off (also 1/0, true/false, yes/no)"
        );
        assert_eq!(warm(&e(WARM_ENV, "OFF")).ok(), Some(false));
        let err = pi_tools(&e(PI_TOOLS_ENV, "bogus")).unwrap_err();
        assert_eq!(err.var(), PI_TOOLS_ENV);
        assert!(err
            .to_string()
            .starts_with("AGY_PI_TOOLS=\"bogus\" is not valid: it takes on or off"));
        assert_eq!(pi_tools(&e(PI_TOOLS_ENV, " No ")).ok(), Some(false));
        for bad in ["abc", "-5", "1001"] {
            let err = tool_batch(&e(TOOL_BATCH_ENV, bad)).unwrap_err().to_string();
            assert!(err.contains("milliseconds from 0 to 1000"), "{err}");
        }
        assert_eq!(
            tool_batch(&e(TOOL_BATCH_ENV, "0")).ok(),
            Some(Duration::ZERO)
        );
        let err = extra_args(&e(EXTRA_ARGS_ENV, "--yolo --model=x")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("AGY_EXTRA_ARGS holds --model=x, which the bridge sets itself"),
            "{err}"
        );
        assert_eq!(
            extra_args(&e(EXTRA_ARGS_ENV, " --a  b ")).ok(),
            Some(vec!["--a".to_string(), "b".to_string()])
        );
    }
}
