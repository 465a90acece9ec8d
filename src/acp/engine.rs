//! What runs a turn for ACP, behind a trait of its own ([`TurnEngine`]) so
//! the protocol side can be tested without agy; and [`RunnerEngine`], the
//! engine `agy-bridge acp` runs: agy through the library's runner (the
//! session's warm agy when it has one, see [`warm_pool`]), around which it uses
//! the session core pi's turns use
//! ([`crate::session`]): the session's turn lock across processes
//! (`wait_turn_lock`), the binding read under it and saved before it is
//! let go (`SessionStore::record_turn`, as pi's turn end saves it), an
//! account seat ([`crate::session::seat::wait_seat`]) and, with `ask`, the
//! permission gate (`gating::open_gate`, the client being the one asked).
//!
//! A turn is a stream of the runner's events, the gate's questions (each
//! answered through [`Question::answer`]), notes for the user, and its
//! [`RunResult`]; cancelling the token given to [`TurnEngine::start`] ends
//! agy's tree as pi's Esc does.

use super::mcp::EditorServers;
use crate::gate::Question;
use crate::runner::failure::Failure;
use crate::runner::{self, RunConfig, RunEvent, RunResult, TurnRequest};
use crate::session::gating::{self, GatePlan};
use crate::session::turn_lock::{wait_turn_lock, TurnWait};
use crate::state::sessions::{SessionEntry, SessionStore};
use crate::state::tmp::PrivateDir;
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub mod warm_pool;

/// The gate's questions waiting for the relay at most.
const QUESTIONS: usize = 16;

/// One turn to run for a session.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// The session's key in `sessions.json` (its turn lock's too).
    pub session_key: String,
    /// The prompt, as agy's text.
    pub prompt: String,
    /// The session's working directory: agy's workspace.
    pub cwd: PathBuf,
    /// agy's `--mode`.
    pub mode: Mode,
    /// agy's model (a slug or name from its catalog); `None`: agy's default.
    pub model: Option<String>,
    /// `--effort`, for a model with tiers.
    pub effort: Option<agy_format::agy_args::Effort>,
    /// The conversation the session is bound to, as this connection knows
    /// it (a binding saved since, by any process, wins).
    pub resume: Option<ConversationId>,
    /// The last step the session streamed (new steps only are streamed).
    pub after_idx: Option<i64>,
    /// The session's "allow always" rules, read by the gate.
    pub grants: crate::gate::Grants,
    /// The editor's MCP servers, given to agy for the turn.
    pub mcp_servers: EditorServers,
}

/// A turn that started.
pub struct TurnHandle {
    /// The runner's events, bounded (`runner::EVENT_CAPACITY`): a slow
    /// reader makes the runner wait, never queue.
    pub events: mpsc::Receiver<RunEvent>,
    /// The gate's questions; `None` when agy runs without the gate.
    pub questions: Option<mpsc::Receiver<Question>>,
    /// Sentences for the user about the turn itself (a turn or a seat
    /// waited for, a gate that could not open).
    pub notes: mpsc::UnboundedReceiver<String>,
    /// The turn's end, once agy's tree is gone and the binding is saved.
    pub done: JoinHandle<RunResult>,
}

/// Runs turns for ACP sessions.
pub trait TurnEngine: Send + Sync + 'static {
    /// Start `spec`; cancelling `cancel` ends it (its result then says
    /// aborted). `Err` is a sentence: nothing was started.
    fn start(
        &self,
        spec: TurnSpec,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnHandle, String>>;

    /// Where agy keeps its conversations (read for `session/load`).
    fn conversations_dir(&self) -> PathBuf;

    /// Have agy ready for `spec`'s session (its prompt is empty): a
    /// session just made or loaded. Nothing by default.
    fn prewarm(&self, spec: TurnSpec) {
        let _ = spec;
    }

    /// The connection is over: whatever the engine keeps running for its
    /// sessions ends. Nothing by default.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The engine of `agy-bridge acp`: a session's warm agy, or one of the
/// turn's own, through the runner, inside the session core's lock, seat
/// and gate.
#[derive(Debug, Clone)]
pub struct RunnerEngine {
    /// The runner's settings (agy, its guardian, the watchdog, the
    /// start spacing, permissions).
    pub cfg: RunConfig,
    /// Permissions are `ask`: what the gate decides with
    /// ([`gating::gate_plan`] with a person to ask).
    pub gating: Option<GatePlan>,
    /// Where bindings are kept, and the turn locks beside them (`None`: no
    /// state directory; turns then take no lock and save nothing).
    pub store: Option<Arc<SessionStore>>,
    /// One agy kept warm per session (`None`: `AGY_WARM=off`).
    pub warm: Option<warm_pool::WarmSessions>,
}

impl TurnEngine for RunnerEngine {
    fn start(
        &self,
        spec: TurnSpec,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnHandle, String>> {
        let (say, notes) = mpsc::unbounded_channel();
        let (tx, events) = runner::event_channel();
        let (ask, questions) = match self.gating {
            Some(_) => {
                let (ask, questions) = mpsc::channel(QUESTIONS);
                (Some(ask), Some(questions))
            }
            None => (None, None),
        };
        let engine = self.clone();
        let done = tokio::spawn(async move {
            let turn = Turn { say, ask, tx };
            engine.run_turn(spec, cancel, turn).await
        });
        Box::pin(std::future::ready(Ok(TurnHandle {
            events,
            questions,
            notes,
            done,
        })))
    }

    fn conversations_dir(&self) -> PathBuf {
        self.cfg.conversations_dir.clone()
    }

    fn prewarm(&self, spec: TurnSpec) {
        if let Some(warm) = &self.warm {
            let req = request(&spec, spec.resume.clone(), spec.after_idx);
            let gating = self.gating_for(&spec);
            let plan = warm_pool::Plan::of(&self.cfg, &req, gating.as_ref(), &spec.mcp_servers);
            warm.prewarm(&spec.session_key, plan);
        }
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(warm) = &self.warm {
                warm.shutdown().await;
            }
        })
    }
}

/// Where a running turn's output goes.
struct Turn {
    say: mpsc::UnboundedSender<String>,
    ask: Option<mpsc::Sender<Question>>,
    tx: mpsc::Sender<RunEvent>,
}

impl RunnerEngine {
    /// The turn, as pi's runs: the session's turn lock (waiting for the
    /// turn before, within the watchdog), the binding read under it, a
    /// seat, then agy: the session's warm one when it fits, else one of
    /// the turn's own with its gate; the binding saved before the lock goes.
    async fn run_turn(&self, spec: TurnSpec, cancel: CancellationToken, turn: Turn) -> RunResult {
        let Turn { say, ask, tx } = turn;
        let note = |words: String| {
            let _ = say.send(words);
        };
        let (store, _lock) = match self.lock_turn(&spec, &cancel, &note).await {
            Ok(locked) => locked,
            Err(result) => return *result,
        };
        let saved = match &store {
            Some(s) => binding(s.clone(), spec.session_key.clone(), &self.cfg).await,
            None => None,
        };
        let req = match saved {
            Some((entry, cursor)) => request(&spec, Some(entry.conversation_id), Some(cursor)),
            None => request(&spec, spec.resume.clone(), spec.after_idx),
        };
        let Ok(_seat) =
            crate::session::seat::wait_seat(self.cfg.admission.as_ref(), &cancel, |words| {
                note(words.to_string())
            })
            .await
        else {
            return RunResult::aborted_before_start();
        };
        let warm = self
            .warm_turn(&spec, &req, ask.clone(), &tx, &cancel, &note)
            .await;
        let mut result = match warm {
            Some(result) => result,
            None => {
                self.cold_turn(&spec, req.clone(), ask, tx, cancel, &note)
                    .await
            }
        };
        if let Some(store) = store {
            if let Err(e) = save(store, &spec.session_key, &req, &result).await {
                result.notices.push(format!(
                    "agy-bridge: could not save which agy conversation this session continues ({e}); the next turn may begin a new conversation"
                ));
            }
        }
        result
    }

    /// The session's turn lock, waited for within the watchdog; a store
    /// that cannot be written is dropped for this turn (said). `Err`: the
    /// turn's result without running it.
    async fn lock_turn(
        &self,
        spec: &TurnSpec,
        cancel: &CancellationToken,
        note: &(dyn Fn(String) + Sync),
    ) -> Result<
        (
            Option<Arc<SessionStore>>,
            Option<crate::state::sessions::TurnLock>,
        ),
        Box<RunResult>,
    > {
        let Some(store) = self.store.clone() else {
            return Ok((None, None));
        };
        let timeout = self.cfg.timeout;
        match wait_turn_lock(&store, &spec.session_key, cancel, timeout).await {
            Ok(lock) => Ok((Some(store), Some(lock))),
            Err(TurnWait::Aborted) => Err(Box::new(RunResult::aborted_before_start())),
            Err(TurnWait::Failed(_)) => Err(Box::new(failed(format!(
                "another turn of this session was still running after {} minutes; try again when it has finished",
                timeout.as_secs() / 60
            )))),
            Err(TurnWait::Unavailable(why)) => {
                note(format!("[agy-bridge: the session state cannot be written ({why}); this turn runs without it: load after a restart will not find it]\n"));
                Ok((None, None))
            }
        }
    }

    /// The gate's plan for this session's turns: the editor is asked, the
    /// session's "allow always" rules apply.
    fn gating_for(&self, spec: &TurnSpec) -> Option<GatePlan> {
        self.gating.as_ref().map(|plan| GatePlan {
            can_ask: true,
            grants: spec.grants.clone(),
            ..plan.clone()
        })
    }

    /// A turn on an agy of its own, with its own gate.
    async fn cold_turn(
        &self,
        spec: &TurnSpec,
        mut req: TurnRequest,
        ask: Option<mpsc::Sender<Question>>,
        tx: mpsc::Sender<RunEvent>,
        cancel: CancellationToken,
        note: &(dyn Fn(String) + Sync),
    ) -> RunResult {
        let mut cfg = self.cfg.clone();
        // Held until the turn ends: dropping it removes the config. Added
        // before the gate opens, so the gate keeps agy's tools out of it.
        let _mcp = editor_mcp_dir(&spec.mcp_servers, &mut req).unwrap_or_else(|words| {
            note(words);
            None
        });
        let mut gate = None;
        if let (Some(plan), Some(ask)) = (self.gating_for(spec), ask) {
            match gating::open_gate(&plan, &mut cfg, &mut req, None, &cancel).await {
                Ok(mut g) => {
                    // Lent for good: the forwarding ends when the gate does
                    // (its senders go with it).
                    drop(crate::session::warm_slot::lend_questions(&mut g, ask));
                    gate = Some(g);
                }
                Err(Some(line)) => note(format!("[agy-bridge: {line}]\n")),
                Err(None) => {}
            }
        }
        let result = runner::run(&cfg, &req, cancel, tx).await;
        // The gate (and every question still open) closes with the turn.
        drop(gate);
        result
    }
}

/// The turn's request: the session's directory as agy's workspace, its
/// mode and model, continuing `conversation` after `after_idx`.
fn request(
    spec: &TurnSpec,
    conversation: Option<ConversationId>,
    after_idx: Option<i64>,
) -> TurnRequest {
    TurnRequest {
        prompt: spec.prompt.clone(),
        cwd: Some(spec.cwd.clone()),
        add_dirs: vec![spec.cwd.clone()],
        mode: Some(spec.mode),
        model: spec.model.clone(),
        effort: spec.effort,
        conversation,
        after_idx,
        ..TurnRequest::default()
    }
}

/// The editor's MCP servers for this turn's agy: the private directory of
/// their config, added to `req` as an `--add-dir` and as private (the
/// guardian removes it with agy's tree, the gate keeps agy's tools out of
/// it); `None` without servers. `Err` is the sentence for the user: the
/// turn then runs without them.
pub(crate) fn editor_mcp_dir(
    servers: &EditorServers,
    req: &mut TurnRequest,
) -> Result<Option<PrivateDir>, String> {
    let dir = servers.config_dir().map_err(|e| {
        format!("[agy-bridge: the editor's MCP servers could not be given to agy ({e}); this turn runs without them]\n")
    })?;
    if let Some(dir) = &dir {
        req.add_dirs.push(dir.path().to_path_buf());
        req.private_dirs.push(dir.path().to_path_buf());
    }
    Ok(dir)
}

/// The session's saved binding and where its new steps start (after the
/// last step its database holds now), read off the runtime.
async fn binding(
    store: Arc<SessionStore>,
    key: String,
    cfg: &RunConfig,
) -> Option<(SessionEntry, i64)> {
    let dir = cfg.conversations_dir.clone();
    tokio::task::spawn_blocking(move || {
        let entry = store.get(&key).ok().flatten()?;
        let db = crate::follow::discovery::db_path(&dir, &entry.conversation_id);
        let cursor = crate::follow::poller::last_idx(&db)
            .map_or(entry.last_step_idx, |now| now.max(entry.last_step_idx));
        Some((entry, cursor))
    })
    .await
    .ok()
    .flatten()
}

/// The turn's binding saved as pi's turn end saves it: nothing when agy
/// bound no conversation; a conversation agy replaced starts from its own
/// steps.
async fn save(
    store: Arc<SessionStore>,
    key: &str,
    req: &TurnRequest,
    result: &RunResult,
) -> Result<(), String> {
    let lost = result.lost_conversation.is_some();
    let before = req.after_idx.filter(|_| !lost);
    let last = result.last_idx.or(before).unwrap_or(-1);
    let (key, id) = (key.to_string(), result.conversation_id.clone());
    tokio::task::spawn_blocking(move || store.record_turn(&key, id.as_deref(), last, 0, lost))
        .await
        .map_err(|e| e.to_string())?
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A turn that could not start, with the bridge's sentence.
fn failed(message: String) -> RunResult {
    let mut result = RunResult::aborted_before_start();
    result.failure = Some(Failure::SpawnFailed {
        bin: "agy".into(),
        message,
    });
    result
}
