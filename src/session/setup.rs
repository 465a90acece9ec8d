//! What every command that runs agy starts from: the runner's settings
//! with this binary as agy's guardian, the settings file merged with the
//! variables that win over it. All of it from the [`Settings`] the binary
//! resolved once (the watchdog is [`Settings::watchdog`]).

use crate::runner::RunConfig;
use crate::settings::Settings;

/// The runner settings of `settings`, with this binary as agy's guardian
/// (so agy's tree dies with us, however we die), the account's admission
/// and agy's quota for a failed turn.
pub fn run_config(settings: &Settings) -> RunConfig {
    let mut cfg = RunConfig::from_settings(settings);
    cfg.guardian = std::env::current_exe()
        .ok()
        .map(crate::process::standby::Guardian::new);
    cfg.admission = super::seat::admission(settings);
    cfg.usage = Some(crate::runner::quota::UsageLoader::from_settings(settings));
    cfg
}

/// [`run_config`] with the configured permissions: every command that runs
/// agy (run, ask, stream, record) starts here.
pub fn configured(config: &crate::state::config::Config, settings: &Settings) -> RunConfig {
    let mut cfg = run_config(settings);
    cfg.skip_permissions = config.permissions == crate::state::config::PermissionMode::Allow;
    cfg
}

/// `config.json` merged with the variables that win over it (as
/// `settings` holds them), read now, warnings on stderr. A settings
/// variable with a value it does not take is an error (the turn must not
/// run in a mode nobody asked for); a state directory that cannot be read
/// only costs the file's values.
pub fn config(settings: &Settings) -> Result<crate::state::config::Config, String> {
    use crate::state::config::Config;
    use crate::state::file::StateError;
    match settings.load_config() {
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

/// A one-shot turn (`run`, `ask`, `record`): `prompt` in `cwd` (else this
/// process's directory, which is then agy's workspace too), in `mode`,
/// continuing `conversation` if given.
pub fn one_shot_turn(
    prompt: String,
    cwd: Option<std::path::PathBuf>,
    mode: agy_format::agy_args::Mode,
    conversation: Option<agy_format::ids::ConversationId>,
) -> crate::runner::TurnRequest {
    let workspace = cwd.clone().or_else(|| std::env::current_dir().ok());
    crate::runner::TurnRequest {
        prompt,
        cwd,
        add_dirs: workspace.into_iter().collect(),
        mode: Some(mode),
        conversation,
        ..crate::runner::TurnRequest::default()
    }
}
