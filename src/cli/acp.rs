//! `agy-bridge acp`: agy as an Agent Client Protocol agent over stdio, for
//! ACP editors (Zed's `agent_servers`, ...). A thin shell over the
//! library's `acp` layer: the settings and runner configuration every turn
//! command uses (`session::setup`), the gate's plan with the editor as the
//! one asked, agy's model catalog as the session's model choices (the
//! catalog is pi's module, which this binary may use and the `acp` layer
//! may not), then the protocol on stdin/stdout
//! until the editor closes it or a stop signal ends it. Nothing but ACP's
//! JSON lines goes to stdout; warnings go to stderr.

use agy_bridge::acp::agent::{serve, AgentSetup, ModelChoice};
use agy_bridge::acp::engine::RunnerEngine;
use agy_bridge::settings::{Flags, Settings};
use agy_bridge::state::sessions::SessionStore;
use clap::Args;
use std::process::ExitCode;
use std::sync::Arc;

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
    super::env::check_all(settings)?;
    let settings = settings.clone().with_flags(Flags {
        timeout_min: args.timeout_min,
        ..Flags::default()
    });
    let config = agy_bridge::session::setup::config(&settings)?;
    let cfg = agy_bridge::session::setup::configured(&config, &settings);
    let stop = agy_bridge::process::caller::stop_token();
    let models = model_choices(&settings, &stop);
    let store = settings
        .state_dir
        .as_ref()
        .map(|dir| Arc::new(SessionStore::open(dir)));
    let engine = RunnerEngine {
        cfg,
        gating: agy_bridge::session::gating::gate_plan(&config, true, &settings),
        store: store.clone(),
    };
    let default_model =
        Some(config.default_model.clone()).filter(|m| models.iter().any(|c| &c.id == m));
    let setup = AgentSetup {
        engine: Arc::new(engine),
        store,
        default_mode: config.mode,
        models,
        default_model,
    };
    let rt = super::turn::runtime()?;
    let served = rt.block_on(async move {
        tokio::select! {
            served = serve(setup, agent_client_protocol::Stdio::new()) => served.map_err(|e| e.to_string()),
            _ = stop.cancelled() => Ok(()),
        }
    });
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
/// model option's choices: a fixed model once, a model with efforts once
/// per tier (agy's tier slug, `--model` the base slug with `--effort`).
fn model_choices(
    settings: &Settings,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<ModelChoice> {
    use agy_bridge::pi::models::{Loader, Policy};
    let loader = Loader::from_settings(settings);
    let loaded = loader.load(Policy::CacheFirst, stop);
    if loaded.stale {
        if let Ok(exe) = std::env::current_exe() {
            loader.spawn_refresh(&exe);
        }
    }
    let mut choices = Vec::new();
    for model in &loaded.catalog.models {
        if model.efforts.is_empty() || model.tier_slugs.len() != model.efforts.len() {
            choices.push(ModelChoice {
                id: model.slug.clone(),
                name: model.name.clone(),
                model: model.slug.clone(),
                effort: None,
            });
            continue;
        }
        for (effort, tier) in model.efforts.iter().zip(&model.tier_slugs) {
            choices.push(ModelChoice {
                id: tier.clone(),
                name: format!("{} ({})", model.name, effort.as_arg()),
                model: model.slug.clone(),
                effort: Some(*effort),
            });
        }
    }
    choices
}
