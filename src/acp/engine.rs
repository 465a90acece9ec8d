//! What runs a turn for ACP, behind a trait of its own ([`TurnEngine`]) so
//! the session core both front ends will share can be plugged in without
//! touching the protocol side; and [`RunnerEngine`], today's engine: one
//! agy per turn through the library's runner ([`crate::run::runner::run`],
//! as `agy-bridge run` drives it), resumed on the session's conversation,
//! with the permission gate when permissions are `ask` and an account seat
//! shared with every other agy turn of the user.
//!
//! A turn is a stream of the runner's events, the gate's questions (each
//! answered through [`Question::answer`]), notes for the user, and its
//! [`RunResult`]; cancelling the token given to [`TurnEngine::start`] ends
//! agy's tree as pi's Esc does.

use crate::run::gate::{Gate, Grants, Policy, Question};
use crate::run::hook_proof::{prove, Unproven, PROOF_TIMEOUT};
use crate::run::runner::{self, RunConfig, RunEvent, RunResult, TurnRequest};
use crate::state::admission::{Admission, AdmissionError, SEATS_ENV};
use crate::state::rules::Rule;
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use futures::future::BoxFuture;
use std::path::PathBuf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One turn to run for a session.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    pub prompt: String,
    /// The session's working directory: agy's workspace.
    pub cwd: PathBuf,
    pub mode: Mode,
    /// agy's model (a slug or name from its catalog); `None`: agy's default.
    pub model: Option<String>,
    /// `--effort`, for a model with tiers.
    pub effort: Option<agy_format::agy_args::Effort>,
    /// The conversation the session is bound to.
    pub resume: Option<ConversationId>,
    /// The last step the session streamed (new steps only are streamed).
    pub after_idx: Option<i64>,
    /// The session's "allow always" rules, read by the gate.
    pub grants: Grants,
}

/// A turn that started.
pub struct TurnHandle {
    /// The runner's events, bounded ([`runner::EVENT_CAPACITY`]): a slow
    /// reader makes the runner wait, never queue.
    pub events: mpsc::Receiver<RunEvent>,
    /// The gate's questions; `None` when agy runs without the gate.
    pub questions: Option<mpsc::Receiver<Question>>,
    /// Sentences for the user about the turn itself (a seat waited for, a
    /// gate that could not open).
    pub notes: mpsc::UnboundedReceiver<String>,
    /// The turn's end, once agy's tree is gone.
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

/// Today's engine: a cold agy per turn through the runner.
#[derive(Debug, Clone)]
pub struct RunnerEngine {
    /// The runner's settings (agy, its guardian, the watchdog, the
    /// start spacing, permissions).
    pub cfg: RunConfig,
    /// Permissions are `ask`: the rules that pass a call unasked.
    pub ask: Option<Vec<Rule>>,
    /// This binary, for the gate's hook (`agy-bridge hook`).
    pub exe: PathBuf,
    /// The account's seats (`None`: no state directory, no limit).
    pub admission: Option<Admission>,
}

impl TurnEngine for RunnerEngine {
    fn start(
        &self,
        spec: TurnSpec,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnHandle, String>> {
        Box::pin(self.start_turn(spec, cancel))
    }

    fn conversations_dir(&self) -> PathBuf {
        self.cfg.conversations_dir.clone()
    }
}

impl RunnerEngine {
    async fn start_turn(
        &self,
        spec: TurnSpec,
        cancel: CancellationToken,
    ) -> Result<TurnHandle, String> {
        let mut cfg = self.cfg.clone();
        let mut req = TurnRequest {
            prompt: spec.prompt,
            cwd: Some(spec.cwd.clone()),
            add_dirs: vec![spec.cwd.clone()],
            mode: Some(spec.mode),
            model: spec.model,
            effort: spec.effort,
            conversation: spec.resume,
            after_idx: spec.after_idx,
            ..TurnRequest::default()
        };
        let (say, notes) = mpsc::unbounded_channel();
        let mut gate = None;
        if let Some(rules) = &self.ask {
            match self
                .open_gate(rules, &spec.grants, &mut cfg, &mut req, &cancel)
                .await
            {
                Ok(g) => gate = Some(g),
                Err(Some(line)) => {
                    let _ = say.send(format!("[agy-bridge: {line}]\n"));
                }
                Err(None) => {}
            }
        }
        let questions = gate.as_mut().map(|g| {
            let (_, closed) = mpsc::channel(1);
            std::mem::replace(&mut g.questions, closed)
        });
        let (tx, events) = runner::event_channel();
        let admission = self.admission.clone();
        let done = tokio::spawn(async move {
            let Ok(_seat) = seat(admission.as_ref(), &cancel, &say).await else {
                return RunResult::aborted_before_start();
            };
            let result = runner::run(&cfg, &req, cancel, tx).await;
            // The gate (and every question still open) closes with the turn.
            drop(gate);
            result
        });
        Ok(TurnHandle {
            events,
            questions,
            notes,
            done,
        })
    }

    /// Open the gate for a turn about to start agy: agy must first have
    /// shown that it loads a hook from an `--add-dir` (asked once per
    /// binary); then agy gets the gate's directory and
    /// `--dangerously-skip-permissions`. `Err`: the line to say (`None`:
    /// nothing to say: agy is missing, which the turn says, or `cancel`),
    /// and the turn runs as `deny`.
    async fn open_gate(
        &self,
        rules: &[Rule],
        grants: &Grants,
        cfg: &mut RunConfig,
        req: &mut TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<Gate, Option<String>> {
        cfg.skip_permissions = false;
        let (bin, env, stop) = (cfg.agy_bin.clone(), cfg.env.clone(), cancel.clone());
        let proof = tokio::task::spawn_blocking(move || prove(&bin, &env, PROOF_TIMEOUT, &stop))
            .await
            .map_err(|e| Some(format!("the hook check stopped ({e})")))?;
        match proof {
            Ok(_) => {}
            Err(Unproven::NotInstalled { .. } | Unproven::Canceled) => return Err(None),
            Err(why) => return Err(Some(format!(
                "permissions are ask, but agy was not shown to load agy-bridge's permission hook ({why}); this turn runs as deny: agy's tools that need permission are refused"
            ))),
        }
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let policy = Policy {
            rules: rules.to_vec(),
            private: req.private_dirs.clone(),
            own_server: None,
            can_ask: true,
            granted: grants.clone(),
            cwd: req.cwd.clone(),
            agy_dirs: home
                .iter()
                .map(|h| h.join(".gemini/antigravity-cli/mcp"))
                .collect(),
            home,
        };
        let gate = Gate::start(policy, &self.exe).await.map_err(|e| {
            Some(format!(
                "agy-bridge cannot start its permission gate ({e}); this turn runs as deny"
            ))
        })?;
        req.add_dirs.push(gate.dir().to_path_buf());
        req.private_dirs.push(gate.dir().to_path_buf());
        cfg.skip_permissions = true;
        Ok(gate)
    }
}

/// One of the account's seats, its wait said. `Err(())`: cancelled while
/// waiting. A state directory that cannot hold the locks costs the limit,
/// never the turn.
async fn seat(
    admission: Option<&Admission>,
    cancel: &CancellationToken,
    say: &mpsc::UnboundedSender<String>,
) -> Result<Option<crate::state::admission::Seat>, ()> {
    let Some(admission) = admission else {
        return Ok(None);
    };
    let waiting = |seats: u32| {
        let _ = say.send(format!(
            "[agy-bridge: waiting for an agy seat: all {seats} are in use by other agy turns of this user ({SEATS_ENV})]\n"
        ));
    };
    match admission.wait_seat(cancel, waiting).await {
        Ok(seat) => Ok(Some(seat)),
        Err(AdmissionError::Cancelled) => Err(()),
        Err(e) => {
            let _ = say.send(format!(
                "[agy-bridge: agy starts are not limited across processes ({e})]\n"
            ));
            Ok(None)
        }
    }
}
