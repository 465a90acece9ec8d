//! A turn's permission gate as a session opens it (`ask` mode; see
//! `crate::gate`): agy must first have shown that it loads the
//! bridge's hook from an `--add-dir` (`crate::gate::proof`, asked
//! once per agy binary); only then does agy get the gate's directory and
//! `--dangerously-skip-permissions`. If it cannot be shown, the turn runs
//! as `deny`, and says why once per process (once per pi session).

use crate::gate::{Gate, Grants, Policy};
use crate::runner::{RunConfig, TurnRequest};
use crate::settings::Settings;
use crate::state::config::{Config, PermissionMode};
use crate::state::rules::Rule;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::gate::proof::{Unproven, PROOF_TIMEOUT};

/// What an `ask` turn's gate decides with.
#[derive(Debug, Clone)]
pub struct GatePlan {
    /// The rules that pass a call without asking.
    pub rules: Vec<Rule>,
    /// A person can be asked (pi has a UI).
    pub can_ask: bool,
    /// The pi session's grants (a `stream --session` sets its own).
    pub grants: Grants,
    /// The user's home: agy's own MCP descriptions are under it.
    pub home: Option<PathBuf>,
    /// Where the hook's proof is remembered per agy binary.
    pub state_dir: Option<PathBuf>,
}

/// The plan for a turn under `config`; `None` unless permissions are
/// `ask`. `ui`: pi can show a dialog.
pub fn gate_plan(config: &Config, ui: bool, settings: &Settings) -> Option<GatePlan> {
    (config.permissions == PermissionMode::Ask).then(|| GatePlan {
        rules: config.allow_list(),
        can_ask: ui,
        grants: Grants::default(),
        home: settings.home.clone(),
        state_dir: settings.state_dir.clone(),
    })
}

/// The standing policy of a gate for `plan`: the workspace is the turn's
/// directory (agy's own), else this process's.
pub fn policy(plan: &GatePlan, turn: &TurnRequest, own_server: Option<&str>) -> Policy {
    let home = plan.home.clone();
    Policy {
        rules: plan.rules.clone(),
        private: turn.private_dirs.clone(),
        own_server: own_server.map(str::to_string),
        can_ask: plan.can_ask,
        granted: plan.grants.clone(),
        cwd: turn.cwd.clone().or_else(|| std::env::current_dir().ok()),
        agy_dirs: home
            .iter()
            .map(|h| h.join(".gemini/antigravity-cli/mcp"))
            .collect(),
        home,
    }
}

/// Open the gate for a turn about to start agy: prove the hook, start the
/// gate, give agy its directory and `--dangerously-skip-permissions`.
/// `Err` is the line to show when it cannot (`None`: said before in this
/// process, agy is not installed, which the turn says itself, or `cancel`
/// stopped the proof, which ends the turn too); agy then runs without the
/// flag, as `deny`.
pub(crate) async fn open_gate(
    plan: &GatePlan,
    cfg: &mut RunConfig,
    turn: &mut TurnRequest,
    own_server: Option<&str>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Gate, Option<String>> {
    cfg.skip_permissions = false;
    let (bin, env, cancel) = (cfg.agy_bin.clone(), cfg.env.clone(), cancel.clone());
    let state_dir = plan.state_dir.clone();
    let proof = tokio::task::spawn_blocking(move || {
        // An agy known to predate slash commands would take `/hooks` as a
        // prompt for its model: not asked.
        let features = crate::runner::version::features_remembered(state_dir.as_deref(), &bin);
        if let Some((a, b, c)) = features
            .filter(|f| !f.slash_commands())
            .and_then(|f| f.version)
        {
            return Err(Some(format!(
                "agy {a}.{b}.{c} predates agy's slash commands, so it cannot list its hooks"
            )));
        }
        let proof =
            crate::gate::proof::prove(state_dir.as_deref(), &bin, &env, PROOF_TIMEOUT, &cancel);
        proof.map_err(|e| match e {
            Unproven::NotInstalled { .. } | Unproven::Canceled => None,
            other => Some(other.to_string()),
        })
    })
    .await
    .unwrap_or_else(|e| Err(Some(format!("the check failed ({e})"))));
    if let Err(why) = proof {
        // No agy at all: the turn itself says so, once.
        let Some(why) = why else { return Err(None) };
        return Err(say_once(&cfg.agy_bin, format!(
            "permissions are ask, but agy was not shown to load agy-bridge's permission hook ({why}); this turn runs as deny: agy's tools that need permission are refused. `/agy permissions allow` lets agy run them unseen instead"
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Some(format!("agy-bridge cannot name its own binary for the permission hook ({e}); this turn runs as deny")))?;
    let gate = Gate::start(policy(plan, turn, own_server), &exe)
        .await
        .map_err(|e| {
            Some(format!(
                "agy-bridge cannot start its permission gate ({e}); this turn runs as deny"
            ))
        })?;
    turn.add_dirs.push(gate.dir().to_path_buf());
    turn.private_dirs.push(gate.dir().to_path_buf());
    cfg.skip_permissions = true;
    Ok(gate)
}

/// `line` the first time this process says it about `bin`.
fn say_once(bin: &std::path::Path, line: String) -> Option<String> {
    static SAID: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut said = SAID.lock().ok()?;
    said.get_or_insert_with(HashSet::new)
        .insert(bin.to_path_buf())
        .then_some(line)
}

/// The gate of a turn nobody is asked in (`run`, AskAntigravity): the
/// rules decide, and the turn's own steps show the denials. `None` when
/// there is no gate (its line said on stderr when it could not be opened).
pub async fn open_unattended(
    plan: Option<&GatePlan>,
    cfg: &mut RunConfig,
    turn: &mut TurnRequest,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<Gate> {
    let plan = GatePlan {
        can_ask: false,
        ..plan?.clone()
    };
    match open_gate(&plan, cfg, turn, None, cancel).await {
        Ok(gate) => Some(gate),
        Err(line) => {
            if let Some(line) = line {
                eprintln!("agy-bridge: {line}");
            }
            None
        }
    }
}
