//! What runs a turn for ACP, behind a trait of its own ([`TurnEngine`]) so
//! the protocol side can be tested without agy; and [`RunnerEngine`], the
//! engine `agy-bridge acp` runs: one agy per turn through the library's
//! runner, around which it uses the session core pi's turns use
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
}

/// The engine of `agy-bridge acp`: a cold agy per turn through the runner,
/// inside the session core's lock, seat and gate.
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
    /// seat, the gate, agy, and the binding saved before the lock goes.
    async fn run_turn(&self, spec: TurnSpec, cancel: CancellationToken, turn: Turn) -> RunResult {
        let Turn { say, ask, tx } = turn;
        let note = |words: String| {
            let _ = say.send(words);
        };
        let mut store = self.store.clone();
        let mut cfg = self.cfg.clone();
        let _lock = match &store {
            Some(s) => match wait_turn_lock(s, &spec.session_key, &cancel, cfg.timeout).await {
                Ok(lock) => Some(lock),
                Err(TurnWait::Aborted) => return RunResult::aborted_before_start(),
                Err(TurnWait::Failed(_)) => {
                    return failed(format!(
                        "another turn of this session was still running after {} minutes; try again when it has finished",
                        cfg.timeout.as_secs() / 60
                    ))
                }
                Err(TurnWait::Unavailable(why)) => {
                    note(format!("[agy-bridge: the session state cannot be written ({why}); this turn runs without it: load after a restart will not find it]\n"));
                    store = None;
                    None
                }
            },
            None => None,
        };
        let saved = match &store {
            Some(s) => binding(s.clone(), spec.session_key.clone(), &cfg).await,
            None => None,
        };
        let (resume, after_idx) = match saved {
            Some((entry, cursor)) => (Some(entry.conversation_id), Some(cursor)),
            None => (spec.resume.clone(), spec.after_idx),
        };
        let mut req = TurnRequest {
            prompt: spec.prompt,
            cwd: Some(spec.cwd.clone()),
            add_dirs: vec![spec.cwd.clone()],
            mode: Some(spec.mode),
            model: spec.model,
            effort: spec.effort,
            conversation: resume,
            after_idx,
            ..TurnRequest::default()
        };
        // Held until the turn ends: dropping it removes the config.
        let _mcp = editor_mcp_dir(&spec.mcp_servers, &mut req).unwrap_or_else(|words| {
            note(words);
            None
        });
        let Ok(_seat) = crate::session::seat::wait_seat(cfg.admission.as_ref(), &cancel, |words| {
            note(words.to_string())
        })
        .await
        else {
            return RunResult::aborted_before_start();
        };
        let mut gate = None;
        if let (Some(plan), Some(ask)) = (&self.gating, ask) {
            let plan = GatePlan {
                can_ask: true,
                grants: spec.grants.clone(),
                ..plan.clone()
            };
            match gating::open_gate(&plan, &mut cfg, &mut req, None, &cancel).await {
                Ok(mut g) => {
                    let (_, closed) = mpsc::channel(1);
                    let mut asked = std::mem::replace(&mut g.questions, closed);
                    // Ends when the gate does (its senders go with it).
                    tokio::spawn(async move {
                        while let Some(q) = asked.recv().await {
                            if ask.send(q).await.is_err() {
                                break;
                            }
                        }
                    });
                    gate = Some(g);
                }
                Err(Some(line)) => note(format!("[agy-bridge: {line}]\n")),
                Err(None) => {}
            }
        }
        let mut result = runner::run(&cfg, &req, cancel, tx).await;
        // The gate (and every question still open) closes with the turn.
        drop(gate);
        if let Some(store) = store {
            if let Err(e) = save(store, &spec.session_key, &req, &result).await {
                result.notices.push(format!(
                    "agy-bridge: could not save which agy conversation this session continues ({e}); the next turn may begin a new conversation"
                ));
            }
        }
        result
    }
}

/// The editor's MCP servers for this turn's agy: the private directory of
/// their config, added to `req` as an `--add-dir` and as private (the
/// guardian removes it with agy's tree, the gate keeps agy's tools out of
/// it); `None` without servers. `Err` is the sentence for the user: the
/// turn then runs without them.
fn editor_mcp_dir(
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
