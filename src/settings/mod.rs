//! **settings** (beside [`crate::state`], at the bottom of the code map): owns every environment
//! variable the bridge reads and what each takes. The binary's `main` takes
//! one snapshot of the environment ([`Env`]), resolves it into one typed
//! [`Settings`], applies the command's flags ([`Flags`]) and passes it
//! down; nothing else in the library reads the environment
//! (`tests/structure.rs` checks it). `config.json` is read through
//! [`Settings::load_config`], with the variables that win over it, each
//! time a turn starts (pi's `/agy` changes it between turns).
//!
//! A value a variable does not take is never a default: resolution keeps
//! its sentence ([`SettingsError`], naming the variable and the values it
//! takes), and [`Settings::check`] gives the first one; every command that
//! runs or configures agy calls it before it acts. Spawned programs (agy,
//! fake-agy) get the environment they need from the caller, explicitly.
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::state`].

pub mod agy_flags;
pub mod env;
pub mod vars;

pub use env::Env;
pub use vars::{SettingsError, WakeMode};

use crate::state::config::status::ConfigStatus;
use crate::state::config::{AllowEdit, ConfigChange, ConfigStore};
use crate::state::file::StateError;
use agy_format::agy_args::BindMode;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vars::*;

/// Everything the bridge takes from its environment, typed and checked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The agy binary (`AGY_BIN`, default `agy`).
    pub agy_bin: PathBuf,
    /// Extra arguments for every agy run (`AGY_EXTRA_ARGS`).
    pub extra_args: Vec<String>,
    /// agy's conversations directory (`AGY_CONVERSATIONS_DIR`, else under
    /// HOME); `None` without either.
    pub conversations_dir: Option<PathBuf>,
    /// The user's home (`HOME`), where agy keeps its own files.
    pub home: Option<PathBuf>,
    /// The bridge's state directory (`AGY_BRIDGE_STATE_DIR`, else
    /// `PI_CODING_AGENT_DIR`'s, else under HOME); `None` without any.
    pub state_dir: Option<PathBuf>,
    /// How a turn binds its conversation (`AGY_BIND`, `run --bind`).
    pub bind: BindMode,
    /// How the runner wakes up (`AGY_WAKE`, `run --poll-only`).
    pub wake: WakeMode,
    /// The per-turn watchdog in minutes (`AGY_TIMEOUT_MIN`, `--timeout-min`).
    pub timeout_min: u64,
    /// How long `stream` waits for its request line
    /// (`AGY_REQUEST_TIMEOUT_SECS`, at least 1 s).
    pub request_timeout: Duration,
    /// Whether a pi session keeps its agy warm between turns (`AGY_WARM`).
    pub warm: bool,
    /// How long an idle session keeps its warm agy (`AGY_WARM_IDLE_SECS`).
    pub warm_idle: Duration,
    /// agy turns of this user at once (`AGY_SEATS`).
    pub seats: u32,
    /// The least time between two agy starts (`AGY_START_INTERVAL_MS`).
    pub start_interval: Duration,
    /// Whether agy is offered pi's tools by default (`AGY_PI_TOOLS`).
    pub pi_tools: bool,
    /// How long further tool calls join the first's message
    /// (`AGY_PI_TOOL_BATCH_MS`).
    pub tool_batch: Duration,
    /// The fake agy `demo` runs (`FAKE_AGY_BIN`).
    pub fake_agy_bin: Option<PathBuf>,
    /// The values of the variables that win over `config.json`, as set.
    config_vars: BTreeMap<&'static str, String>,
    /// Every variable holding a value it does not take, in check order.
    problems: Vec<SettingsError>,
    /// What the user should hear once (a variable no longer read).
    notices: Vec<String>,
}

/// The command-line flags that win over a variable.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags {
    /// `--timeout-min`, over `AGY_TIMEOUT_MIN`.
    pub timeout_min: Option<u64>,
    /// `run --bind`, over `AGY_BIND`.
    pub bind: Option<BindMode>,
    /// `run --poll-only`, over `AGY_WAKE`.
    pub poll_only: bool,
}

/// The variables of `config.json`'s settings (see [`crate::state::config`]).
const CONFIG_VARS: [&str; 5] = [
    "AGY_MODE",
    "AGY_PERMISSIONS",
    "AGY_DEFAULT_MODEL",
    "AGY_DEFAULT_THINKING",
    "AGY_ALLOW",
];

/// Each bad value's sentence, kept; the value stands at its default.
fn keep<T>(problems: &mut Vec<SettingsError>, value: Result<T, SettingsError>, default: T) -> T {
    value.unwrap_or_else(|e| {
        problems.push(e);
        default
    })
}

impl Settings {
    /// The settings of `env`. Never fails: a bad value is kept as its
    /// sentence (see [`Settings::check`]) and the setting keeps its default.
    pub fn resolve(env: &Env) -> Settings {
        let mut problems = Vec::new();
        let config_vars: BTreeMap<&'static str, String> = CONFIG_VARS
            .iter()
            .filter_map(|&var| env.text(var).map(|v| (var, v)))
            .collect();
        let lookup = |name: &str| config_vars.get(name).cloned();
        if let Err(e) = crate::state::config::overrides::check_env_with(&lookup) {
            problems.push(SettingsError::from(e));
        }
        let p = &mut problems;
        let extra_args = keep(p, extra_args(env), Vec::new());
        let bind = keep(p, bind(env), BindMode::Auto);
        let wake = keep(p, wake(env), WakeMode::Events);
        let timeout_min = keep(p, whole_number(env, TIMEOUT_MIN_ENV, "minutes"), None)
            .unwrap_or(TIMEOUT_MIN_DEFAULT);
        let request_secs = keep(p, whole_number(env, REQUEST_TIMEOUT_ENV, "seconds"), None)
            .unwrap_or(REQUEST_TIMEOUT_SECS_DEFAULT);
        let pi_tools = keep(p, pi_tools(env), true);
        let warm = keep(p, warm(env), true);
        let warm_idle = keep(p, whole_number(env, WARM_IDLE_ENV, "seconds"), None)
            .map(Duration::from_secs)
            .unwrap_or(WARM_IDLE_DEFAULT);
        let tool_batch = keep(p, tool_batch(env), DEFAULT_BATCH_WINDOW);
        let limits = crate::state::admission::limits(
            env.text(crate::state::admission::SEATS_ENV).as_deref(),
            env.text(crate::state::admission::START_INTERVAL_ENV)
                .as_deref(),
        )
        .map_err(SettingsError::from);
        let (seats, start_interval) = keep(p, limits, crate::state::admission::DEFAULT_LIMITS);
        let notices = env
            .is_set(SKIP_PERMISSIONS_ENV)
            .then(|| {
                "AGY_SKIP_PERMISSIONS is no longer read; set AGY_PERMISSIONS=allow|deny|ask"
                    .to_string()
            })
            .into_iter()
            .collect();
        Settings {
            agy_bin: env
                .text(AGY_BIN_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("agy")),
            extra_args,
            conversations_dir: conversations_dir(env),
            home: env.path("HOME"),
            state_dir: state_dir(env),
            bind,
            wake,
            timeout_min,
            request_timeout: Duration::from_secs(request_secs.max(1)),
            warm,
            warm_idle,
            seats,
            start_interval,
            pi_tools,
            tool_batch,
            fake_agy_bin: env.path(FAKE_AGY_BIN_ENV),
            config_vars,
            problems,
            notices,
        }
    }

    /// The settings of the process's environment, now ([`Env::process`]).
    pub fn from_process() -> Settings {
        Settings::resolve(&Env::process())
    }

    /// These settings with the command's flags applied: a flag wins over
    /// its variable.
    pub fn with_flags(mut self, flags: Flags) -> Settings {
        if let Some(minutes) = flags.timeout_min {
            self.timeout_min = minutes;
        }
        if let Some(bind) = flags.bind {
            self.bind = bind;
        }
        if flags.poll_only {
            self.wake = WakeMode::PollOnly;
        }
        self
    }

    /// The first variable holding a value it does not take, as its
    /// sentence; `Ok` when every one is good.
    pub fn check(&self) -> Result<(), &SettingsError> {
        self.problems.first().map_or(Ok(()), Err)
    }

    /// The sentence for `var`, when it holds a value it does not take.
    pub fn problem(&self, var: &str) -> Option<&SettingsError> {
        self.problems.iter().find(|p| p.var() == var)
    }

    /// What the user should hear once, whatever the command (a variable
    /// that is no longer read).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// The per-turn watchdog: [`Settings::timeout_min`] minutes (at least
    /// one), saturating: a huge value means "no limit worth speaking of".
    pub fn watchdog(&self) -> Duration {
        watchdog(self.timeout_min)
    }

    /// The state directory, or why there is none.
    pub fn state_dir(&self) -> Result<&Path, StateError> {
        self.state_dir.as_deref().ok_or(StateError::NoHome)
    }

    /// The value of one of `config.json`'s variables, as set (`None`:
    /// unset or blank).
    pub fn config_var(&self, var: &str) -> Option<&str> {
        self.config_vars.get(var).map(String::as_str)
    }

    /// `config.json` in the state directory.
    pub fn config_store(&self) -> Result<ConfigStore, StateError> {
        Ok(ConfigStore::open(self.state_dir()?))
    }

    /// `config.json` merged with the variables that win over it, read now.
    pub fn load_config(&self) -> Result<ConfigStatus, StateError> {
        self.config_store()?.load_with_env(&self.config_lookup())
    }

    /// Save one change to `config.json` (never a variable's value) and
    /// return the new status.
    pub fn save_config(&self, change: ConfigChange) -> Result<ConfigStatus, StateError> {
        self.config_store()?
            .save_change_with_env(change, &self.config_lookup())
    }

    /// Change `config.json`'s allow list; the new status and whether the
    /// file changed.
    pub fn edit_allow(&self, edit: &AllowEdit) -> Result<(ConfigStatus, bool), StateError> {
        self.config_store()?
            .edit_allow_with_env(edit, &self.config_lookup())
    }

    /// `config.json`'s variables as the state layer looks them up.
    pub fn config_lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |name| self.config_vars.get(name).cloned()
    }

    /// The sessions file's store in the state directory.
    pub fn session_store(&self) -> Result<crate::state::sessions::SessionStore, StateError> {
        Ok(crate::state::sessions::SessionStore::open(
            self.state_dir()?,
        ))
    }

    /// The account-wide admission over the state directory; `None` without one.
    pub fn admission(&self) -> Option<crate::state::admission::Admission> {
        let dir = self.state_dir.as_deref()?;
        Some(crate::state::admission::Admission::new(
            dir,
            self.seats,
            self.start_interval,
        ))
    }
}

/// The watchdog for `minutes` (at least one), saturating instead of
/// overflowing.
pub fn watchdog(minutes: u64) -> Duration {
    Duration::from_secs(minutes.max(1).saturating_mul(60))
}

/// PATH as exec reads it, now: not a setting but the search path the OS
/// uses to start a program by name, which a program started by name (agy)
/// is found with, so a lookup agrees with the start that follows it.
pub fn exec_search_path() -> Option<OsString> {
    std::env::var_os("PATH")
}

#[cfg(test)]
mod tests;
