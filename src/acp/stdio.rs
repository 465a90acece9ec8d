//! The agent as `agy-bridge acp` runs it: assembled from the settings (the
//! runner's configuration, the gate with the editor as the one asked, the
//! session store) and served on stdin/stdout until the editor closes it or
//! the stop fires.

use super::agent::{serve, AgentSetup, ModelChoice};
use super::engine::warm_pool::WarmSessions;
use super::engine::RunnerEngine;
use crate::session::{gating, setup};
use crate::settings::Settings;
use crate::state::config::Config;
use crate::state::sessions::SessionStore;
use agy_format::agy_args::Effort;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One model of agy's catalog as the agent offers it: its slug and name,
/// and its efforts with each tier's slug (both empty for a fixed model).
pub struct CatalogModel {
    /// agy's `--model`.
    pub slug: String,
    /// The name agy gives it.
    pub name: String,
    /// The efforts it takes.
    pub efforts: Vec<Effort>,
    /// Each effort's tier slug, in the same order.
    pub tier_slugs: Vec<String>,
    /// Its context window in tokens.
    pub context_window: u64,
}

/// The model option's choices: a fixed model once, a model with efforts
/// once per tier (agy's tier slug, `--model` the base slug with
/// `--effort`).
pub fn model_choices(models: impl IntoIterator<Item = CatalogModel>) -> Vec<ModelChoice> {
    let mut choices = Vec::new();
    for model in models {
        if model.efforts.is_empty() || model.tier_slugs.len() != model.efforts.len() {
            choices.push(ModelChoice {
                id: model.slug.clone(),
                name: model.name,
                model: model.slug,
                effort: None,
                context_window: Some(model.context_window),
            });
            continue;
        }
        for (effort, tier) in model.efforts.iter().zip(&model.tier_slugs) {
            choices.push(ModelChoice {
                id: tier.clone(),
                name: format!("{} ({})", model.name, effort.as_arg()),
                model: model.slug.clone(),
                effort: Some(*effort),
                context_window: Some(model.context_window),
            });
        }
    }
    choices
}

/// The agent for `settings` and the settings file's `config`, offering
/// `models` (a new session on `default_model`, a choice's id, when it is
/// one of them): turns on the runner under this binary's guardian, `ask`
/// permissions put to the editor, bindings in the state directory.
pub fn agent_setup(
    settings: &Settings,
    config: &Config,
    models: Vec<ModelChoice>,
    default_model: Option<String>,
) -> AgentSetup {
    let store = settings
        .state_dir
        .as_ref()
        .map(|dir| Arc::new(SessionStore::open(dir)));
    let engine = RunnerEngine {
        cfg: setup::configured(config, settings),
        gating: gating::gate_plan(config, true, settings),
        store: store.clone(),
        warm: settings.warm.then(|| WarmSessions::new(settings.warm_idle)),
    };
    let default_model = default_model.filter(|m| models.iter().any(|c| &c.id == m));
    AgentSetup {
        engine: Arc::new(engine),
        store,
        default_mode: config.mode,
        models,
        default_model,
    }
}

/// Serve `setup` on stdin/stdout until the editor closes it (`Ok`) or
/// `stop` fires (`Ok` too: the caller says why).
pub async fn serve_stdio(setup: AgentSetup, stop: CancellationToken) -> Result<(), String> {
    let engine = setup.engine.clone();
    let served = tokio::select! {
        served = serve(setup, agent_client_protocol::Stdio::new()) => served.map_err(|e| e.to_string()),
        _ = stop.cancelled() => Ok(()),
    };
    // The sessions' warm agy end with the connection, not at some later
    // drop.
    engine.shutdown().await;
    served
}
