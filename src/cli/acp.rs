//! `agy-bridge acp`: agy as an Agent Client Protocol agent over stdio, for
//! ACP editors (Zed's `agent_servers`, ...). A thin shell over the
//! library's `acp` layer ([`agy_bridge::acp::stdio`]), handed agy's model
//! catalog (pi's module, which this binary may use and the `acp` layer may
//! not) as the session's model choices. Nothing but ACP's
//! JSON lines goes to stdout; warnings go to stderr.

use agy_bridge::acp::agent::ModelChoice;
use agy_bridge::acp::stdio;
use agy_bridge::settings::{Flags, Settings};
use clap::Args;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Speaks ACP protocol version 1 as JSON lines on stdin and stdout. Permissions \
come from the settings (`agy-bridge config`): with `ask`, agy's tool calls are put to the editor \
(session/request_permission). Sessions are kept in sessions.json beside pi's, so session/load \
finds them after a restart."
)]
pub struct AcpArgs {
    /// Our own watchdog per turn, in minutes (default: AGY_TIMEOUT_MIN, else 10).
    #[arg(long)]
    timeout_min: Option<u64>,
}

pub fn cmd_acp(args: AcpArgs, settings: &Settings) -> CmdResult {
    super::checks::check_all(settings)?;
    let settings = settings.clone().with_flags(Flags {
        timeout_min: args.timeout_min,
        ..Flags::default()
    });
    let config = agy_bridge::session::setup::config(&settings)?;
    let stop = agy_bridge::process::caller::stop_token();
    let (models, default_model) = model_choices(&settings, &config, &stop);
    let setup = stdio::agent_setup(&settings, &config, models, default_model);
    let rt = super::turn::runtime()?;
    let served = rt.block_on(stdio::serve_stdio(setup, stop));
    // Turns still running end with the runtime: their agy trees are
    // stopped by the runner's drop guards and the guardians' lifelines.
    rt.shutdown_timeout(std::time::Duration::from_secs(3));
    if let Some(code) = agy_bridge::process::caller::stopped_exit() {
        return Ok(code);
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

/// agy's catalog (cached, refreshed in the background when stale) as the
/// model option's choices, and the one a new session starts on: the
/// settings' default model (`flash` unless set), resolved as
/// AskAntigravity resolves it.
fn model_choices(
    settings: &Settings,
    config: &agy_bridge::state::config::Config,
    stop: &CancellationToken,
) -> (Vec<ModelChoice>, Option<String>) {
    use agy_bridge::pi::models::{Loader, Policy};
    let loader = Loader::from_settings(settings);
    let loaded = loader.load(Policy::CacheFirst, stop);
    if loaded.stale {
        if let Ok(exe) = std::env::current_exe() {
            loader.spawn_refresh(&exe);
        }
    }
    let catalog = loaded.catalog;
    let default = catalog
        .resolve_alias(&config.default_model, Some(config.default_thinking))
        .ok();
    let choices = stdio::model_choices(catalog.models.into_iter().map(|m| stdio::CatalogModel {
        context_window: m.context_window(),
        slug: m.slug,
        name: m.name,
        efforts: m.efforts,
        tier_slugs: m.tier_slugs,
    }));
    let default_id = default.and_then(|r| {
        choices
            .iter()
            .find(|c| c.model == r.model && c.effort == r.effort)
            .map(|c| c.id.clone())
    });
    (choices, default_id)
}
