//! What every command that runs agy starts from: the runner's settings
//! with this binary as agy's guardian, the settings file merged with the
//! environment, the watchdog, and the runtimes a turn runs on.

use crate::runner::{self, RunConfig};
use std::time::Duration;

/// The environment's runner settings, with this binary as agy's guardian
/// (so agy's tree dies with us, however we die).
pub fn run_config() -> Result<RunConfig, runner::EnvError> {
    let mut cfg = RunConfig::from_env()?;
    cfg.guardian = std::env::current_exe()
        .ok()
        .map(crate::process::standby::Guardian::new);
    cfg.admission = super::seat::admission();
    cfg.usage = Some(crate::runner::quota::UsageLoader {
        agy_bin: cfg.agy_bin.clone(),
        ..crate::runner::quota::UsageLoader::from_env()
    });
    Ok(cfg)
}

/// [`run_config`] with the configured permissions: every command that runs
/// agy (run, ask, stream, record) starts here.
pub fn configured(settings: &crate::state::config::Config) -> Result<RunConfig, String> {
    let mut cfg = run_config().map_err(|e| e.to_string())?;
    cfg.skip_permissions = settings.permissions == crate::state::config::PermissionMode::Allow;
    Ok(cfg)
}

/// The watchdog for `minutes` (at least one), saturating instead of
/// overflowing: a huge value means "no limit worth speaking of".
pub fn watchdog(minutes: u64) -> Duration {
    Duration::from_secs(minutes.max(1).saturating_mul(60))
}

/// The saved settings merged with the environment, warnings on stderr. A
/// settings variable with a value it does not take is an error (the turn
/// must not run in a mode nobody asked for); a state directory that cannot
/// be read only costs the file's values.
pub fn settings() -> Result<crate::state::config::Config, String> {
    use crate::state::config::Config;
    use crate::state::file::StateError;
    match Config::load() {
        Ok(status) => {
            for w in &status.warnings {
                eprintln!("agy-bridge: warning: {w}");
            }
            Ok(status.config)
        }
        Err(e @ StateError::Env { .. }) => Err(e.to_string()),
        Err(e) => {
            eprintln!("agy-bridge: warning: using default settings: {e}");
            Ok(Config::default())
        }
    }
}

/// The watchdog's default, in minutes.
pub const TIMEOUT_MIN_DEFAULT: u64 = 10;
