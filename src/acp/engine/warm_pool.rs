//! One warm agy per ACP session (`AGY_WARM`, on by default), as pi's
//! `stream --session` keeps one per pi session: a turn on an agy that has
//! started already skips agy's start-up (seconds). An ACP connection has
//! many sessions and no loop per session, so each session's agy is kept
//! between turns by `session::warm_slot::Kept` (let go after
//! `AGY_WARM_IDLE_SECS`, reaped if it exits), and at most [`MAX_WARM`]
//! are kept per connection (an editor makes a session per thread): the one
//! used longest ago goes first.
//!
//! A session's agy is started ahead (`WarmSessions::prewarm`: at
//! `session/new` and `session/load`, when its mode or model changes, and
//! at once after a turn that ended it: a cancel, the watchdog), so the
//! next turn finds it ready; a turn that comes while it is starting waits
//! for it. An agy that cannot
//! be kept warm (too old to read turns on stdin), or that keeps dying
//! before its turn, turns the session cold, said once.

use crate::acp::mcp::EditorServers;
use crate::runner::{self, Prelude, RunConfig, TurnRequest, WarmKey};
use crate::session::gating::GatePlan;
use crate::session::warm_slot::{self as kept, Kept, Launch, Slot};
use crate::state::tmp::PrivateDir;
use agy_format::ids::ConversationId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Warm agy processes kept per connection at most.
pub const MAX_WARM: usize = 4;

/// A session's agy dying without running a turn, in a row, before the
/// session runs cold (an agy that cannot start would be restarted forever).
const MAX_FRUITLESS: u32 = 2;

/// What lives as long as a session's warm agy besides its gate: the
/// editor's MCP configuration on its command line.
pub(crate) type Extra = Option<PrivateDir>;

/// What a session's warm agy is started from, and what a turn must match
/// to run on it.
#[derive(Clone)]
pub(crate) struct Plan {
    pub(crate) cfg: RunConfig,
    /// The turn without its prompt (the session's conversation and cursor).
    pub(crate) req: TurnRequest,
    pub(crate) key: WarmKey,
    pub(crate) gating: Option<GatePlan>,
    /// The editor's MCP servers, on agy's command line for its life.
    pub(crate) mcp: EditorServers,
}

impl Plan {
    /// The plan of a turn `req` under `cfg` with the editor's `mcp`
    /// servers: whether it is gated and which servers it has are on agy's
    /// command line, so they are part of the key.
    pub(crate) fn of(
        cfg: &RunConfig,
        req: &TurnRequest,
        gating: Option<&GatePlan>,
        mcp: &EditorServers,
    ) -> Plan {
        let mut bare = req.clone();
        bare.prompt = String::new();
        let signature = format!("gate:{}|mcp:{:x}", gating.is_some(), mcp.signature());
        Plan {
            key: WarmKey::of(cfg, &bare, &signature),
            cfg: cfg.clone(),
            req: bare,
            gating: gating.cloned(),
            mcp: mcp.clone(),
        }
    }

    /// Whether a turn of this plan can run on `slot`'s agy.
    fn fits(&self, slot: &Slot<Extra>) -> bool {
        slot.warm.fits(
            &self.key,
            self.req.conversation.as_ref(),
            self.req.after_idx,
        )
    }

    /// `slot` if it fits this plan (else it is let go), or a new agy.
    async fn fitting_or_new(
        self,
        slot: Option<Slot<Extra>>,
        cancel: CancellationToken,
    ) -> Result<Slot<Extra>, Unwarm> {
        if let Some(slot) = slot {
            if self.fits(&slot) {
                return Ok(slot);
            }
            tokio::spawn(kept::release(slot));
        }
        start(self, cancel).await
    }

    /// The same plan, continuing `conversation` after step `last_idx`.
    pub(crate) fn continuing(mut self, conversation: Option<&str>, last_idx: Option<i64>) -> Plan {
        if let Some(id) = conversation.and_then(|id| ConversationId::parse(id).ok()) {
            self.req.conversation = Some(id);
            self.req.after_idx = last_idx.or(self.req.after_idx);
        }
        self
    }
}

/// Why a session has no warm agy now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwarm {
    /// The wait for a start was cancelled.
    Cancelled,
    /// This agy cannot be kept warm: the reason.
    Refused(String),
}

/// A warm agy starting in the background (aborted when dropped, its agy
/// going with it), then kept.
type Starting = AbortOnDropHandle<Result<Kept<Extra>, Unwarm>>;

/// A started or starting warm agy of one session.
#[derive(Default)]
struct Held {
    kept: Option<Kept<Extra>>,
    /// A start in the background; once started, its agy is kept (its
    /// idle time counting) until a turn takes it.
    launching: Option<Starting>,
    /// Why this session runs cold (said once).
    refused: Option<String>,
    fruitless: u32,
    used: Option<Instant>,
}

/// The warm agy of every session of one connection.
#[derive(Clone)]
pub struct WarmSessions {
    idle: Duration,
    table: Arc<Mutex<HashMap<String, Held>>>,
}

impl std::fmt::Debug for WarmSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmSessions")
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

/// Start a warm agy for `plan`: after the start spacing, with the gate.
pub(crate) async fn start(plan: Plan, cancel: CancellationToken) -> Result<Slot<Extra>, Unwarm> {
    if !runner::spaced_start(&plan.cfg, &cancel).await {
        return Err(Unwarm::Cancelled);
    }
    let prelude = Prelude::new(&plan.cfg).await;
    let mut req = plan.req.clone();
    // Before the gate opens, so the gate keeps agy's tools out of it.
    let mcp = super::editor_mcp_dir(&plan.mcp, &mut req).map_err(Unwarm::Refused)?;
    let launch = Launch {
        cfg: plan.cfg.clone(),
        req,
        key: plan.key.clone(),
        gating: plan.gating.as_ref(),
        own_server: None,
    };
    kept::launch(launch, prelude, None, mcp, &cancel)
        .await
        .map_err(Unwarm::Refused)
}

impl WarmSessions {
    /// Sessions' agy kept warm, each let go after `idle` unused.
    pub fn new(idle: Duration) -> WarmSessions {
        WarmSessions {
            idle,
            table: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        // Every change below is a single assignment: a panic leaves the
        // table whole.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Why `session` runs cold, if it does.
    pub(crate) fn refused(&self, session: &str) -> Option<String> {
        self.lock().get(session).and_then(|h| h.refused.clone())
    }

    /// `session` runs cold from now on; `true` the first time (say it).
    pub(crate) fn refuse(&self, session: &str, why: String) -> bool {
        let mut table = self.lock();
        let held = table.entry(session.to_string()).or_default();
        let first = held.refused.is_none();
        held.refused.get_or_insert(why);
        first
    }

    /// Have `session`'s agy ready for `plan`, in the background: the one
    /// kept (or the one starting, once up) stays if it fits, else it goes
    /// and another starts; nothing happens for a session that runs cold.
    /// Called when a session is made or loaded, when its mode or model
    /// changes, and after a turn that ended its agy.
    pub(crate) fn prewarm(&self, session: &str, plan: Plan) {
        let mut table = self.lock();
        let held = table.entry(session.to_string()).or_default();
        if held.refused.is_some() {
            return;
        }
        let (kept, starting) = (held.kept.take(), held.launching.take());
        let idle = self.idle;
        let task = tokio::spawn(async move {
            let ready = match (kept, starting) {
                (Some(kept), _) => kept.take().await,
                (None, Some(starting)) => match starting.await {
                    Ok(Ok(kept)) => kept.take().await,
                    _ => None,
                },
                (None, None) => None,
            };
            let slot = plan.fitting_or_new(ready, CancellationToken::new()).await?;
            Ok(Kept::keep(slot, idle))
        });
        held.launching = Some(AbortOnDropHandle::new(task));
        held.used = Some(Instant::now());
        drop(table);
        self.evict();
    }

    /// `session`'s agy, if one is kept (or is starting: waited for, unless
    /// `cancel` fires first, when it stays starting).
    pub(crate) async fn take(
        &self,
        session: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<Slot<Extra>>, Unwarm> {
        let (kept, launching) = {
            let mut table = self.lock();
            match table.get_mut(session) {
                Some(held) => (held.kept.take(), held.launching.take()),
                None => (None, None),
            }
        };
        if let Some(kept) = kept {
            return Ok(kept.take().await);
        }
        let Some(mut launching) = launching else {
            return Ok(None);
        };
        tokio::select! {
            started = &mut launching => match started {
                Ok(Ok(kept)) => Ok(kept.take().await),
                Ok(Err(Unwarm::Cancelled)) | Err(_) => Ok(None),
                Ok(Err(refused)) => Err(refused),
            },
            _ = cancel.cancelled() => {
                if let Some(held) = self.lock().get_mut(session) {
                    held.launching.get_or_insert(launching);
                }
                Err(Unwarm::Cancelled)
            }
        }
    }

    /// Keep `slot` for `session`'s next turn.
    pub(crate) fn put(&self, session: &str, slot: Slot<Extra>) {
        let mut table = self.lock();
        let held = table.entry(session.to_string()).or_default();
        held.fruitless = 0;
        held.used = Some(Instant::now());
        // A slot started meanwhile (a prewarm racing the turn) is let go.
        held.launching = None;
        held.kept = Some(Kept::keep(slot, self.idle));
        drop(table);
        self.evict();
    }

    /// `session`'s agy went before its turn began; `true` while the
    /// session should keep trying warm agy.
    pub(crate) fn died_before_turn(&self, session: &str) -> bool {
        let mut table = self.lock();
        let held = table.entry(session.to_string()).or_default();
        held.fruitless += 1;
        held.fruitless <= MAX_FRUITLESS
    }

    /// Past [`MAX_WARM`] sessions with an agy: the ones used longest ago
    /// let theirs go (dropping a [`Kept`] stops its agy; dropping a start
    /// aborts it, its agy going with it).
    fn evict(&self) {
        let mut table = self.lock();
        let mut live: Vec<(Option<Instant>, String)> = table
            .iter()
            .filter(|(_, h)| h.kept.is_some() || h.launching.is_some())
            .map(|(k, h)| (h.used, k.clone()))
            .collect();
        if live.len() <= MAX_WARM {
            return;
        }
        live.sort();
        for (_, key) in live.iter().take(live.len() - MAX_WARM) {
            if let Some(held) = table.get_mut(key) {
                held.kept = None;
                held.launching = None;
            }
        }
    }

    /// The connection is over: every warm agy's tree ends now.
    pub(crate) async fn shutdown(&self) {
        let held: Vec<Held> = self.lock().drain().map(|(_, h)| h).collect();
        for h in held {
            drop(h.launching);
            if let Some(slot) = match h.kept {
                Some(kept) => kept.take().await,
                None => None,
            } {
                kept::stop(slot).await;
            }
        }
    }
}

impl super::RunnerEngine {
    /// The turn on the session's warm agy: the one kept (or starting) if it
    /// fits the turn, else a new one. `None`: the turn runs cold (warm agy
    /// off, refused for this session, or gone before the turn began).
    pub(super) async fn warm_turn(
        &self,
        spec: &super::TurnSpec,
        req: &TurnRequest,
        ask: Option<tokio::sync::mpsc::Sender<crate::gate::Question>>,
        tx: &tokio::sync::mpsc::Sender<runner::RunEvent>,
        cancel: &CancellationToken,
        note: &(dyn Fn(String) + Sync),
    ) -> Option<runner::RunResult> {
        let warm = self.warm.as_ref()?;
        let session = spec.session_key.as_str();
        if warm.refused(session).is_some() {
            return None;
        }
        let gating = self.gating_for(spec);
        let plan = Plan::of(&self.cfg, req, gating.as_ref(), &spec.mcp_servers);
        let ready = match warm.take(session, cancel).await {
            Ok(ready) => plan.clone().fitting_or_new(ready, cancel.clone()).await,
            Err(unwarm) => Err(unwarm),
        };
        let slot = match ready {
            Ok(slot) => slot,
            Err(Unwarm::Cancelled) => return Some(runner::RunResult::aborted_before_start()),
            Err(Unwarm::Refused(why)) => return self.cold_from_now(session, why, note),
        };
        let turn = WarmTurn {
            session,
            plan,
            gating: gating.as_ref(),
            ask,
            tx,
            cancel,
            note,
        };
        self.run_on(slot, req, turn).await
    }

    /// This session's turns run on an agy of their own from now on, said
    /// once; `None`: this turn too.
    fn cold_from_now(
        &self,
        session: &str,
        why: String,
        note: &(dyn Fn(String) + Sync),
    ) -> Option<runner::RunResult> {
        if let Some(warm) = &self.warm {
            if warm.refuse(session, why.clone()) {
                note(format!(
                    "[agy-bridge: agy is not kept warm for this session ({why}); each turn starts its own]\n"
                ));
            }
        }
        None
    }

    /// Run the turn on `slot`: its gate set to this turn's policy and its
    /// questions lent to the turn; agy kept for the next turn if it can
    /// take one, else started again at once (a cancel, the watchdog).
    async fn run_on(
        &self,
        slot: Slot<Extra>,
        req: &TurnRequest,
        turn: WarmTurn<'_>,
    ) -> Option<runner::RunResult> {
        let warm = self.warm.as_ref()?;
        let Slot {
            warm: agy,
            mut gate,
            gate_note,
            extra,
        } = slot;
        if let Some(line) = gate_note {
            (turn.note)(format!("[agy-bridge: {line}]\n"));
        }
        let lent = match (gate.as_mut(), turn.ask, turn.gating) {
            (Some(g), Some(ask), Some(plan)) => {
                g.set_policy(crate::session::gating::policy(plan, req, None));
                Some(kept::lend_questions(g, ask))
            }
            _ => None,
        };
        let cancel = turn.cancel.clone();
        let run = runner::run_warm(&self.cfg, req, agy, cancel, turn.tx.clone()).await;
        if let (Some(lent), Some(g)) = (lent, gate.as_mut()) {
            lent.give_back(g).await;
        }
        match run {
            runner::WarmRun::Ran(result, Some(agy)) => {
                let slot = Slot {
                    warm: agy,
                    gate,
                    gate_note: None,
                    extra,
                };
                warm.put(turn.session, slot);
                Some(result)
            }
            runner::WarmRun::Ran(result, None) => {
                drop((gate, extra));
                let next = turn
                    .plan
                    .continuing(result.conversation_id.as_deref(), result.last_idx);
                warm.prewarm(turn.session, next);
                Some(result)
            }
            runner::WarmRun::Gone(why) => {
                eprintln!("agy-bridge: {why}; this turn starts agy afresh");
                drop((gate, extra));
                if !warm.died_before_turn(turn.session) {
                    // The death that went past the limit counts too.
                    let times = MAX_FRUITLESS + 1;
                    let why =
                        format!("agy exited {times} times in a row before its turn when kept warm");
                    return self.cold_from_now(turn.session, why, turn.note);
                }
                None
            }
        }
    }
}

/// One warm turn's context.
struct WarmTurn<'a> {
    session: &'a str,
    plan: Plan,
    gating: Option<&'a GatePlan>,
    ask: Option<tokio::sync::mpsc::Sender<crate::gate::Question>>,
    tx: &'a tokio::sync::mpsc::Sender<runner::RunEvent>,
    cancel: &'a CancellationToken,
    note: &'a (dyn Fn(String) + Sync),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// A start that never ends, and a receiver that errs once it is
    /// aborted (its sender dropped with the task).
    fn pending_start() -> (Starting, oneshot::Receiver<()>) {
        let (alive, aborted) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _alive = alive;
            std::future::pending::<Result<Kept<Extra>, Unwarm>>().await
        });
        (AbortOnDropHandle::new(task), aborted)
    }

    #[tokio::test]
    async fn past_max_warm_the_sessions_used_longest_ago_let_theirs_go() {
        let warm = WarmSessions::new(Duration::from_secs(600));
        let base = Instant::now();
        let mut watchers = Vec::new();
        for n in 0..MAX_WARM + 2 {
            let (start, aborted) = pending_start();
            watchers.push(aborted);
            let held = Held {
                launching: Some(start),
                used: Some(base + Duration::from_secs(n as u64)),
                ..Held::default()
            };
            warm.lock().insert(format!("s{n}"), held);
        }
        warm.evict();
        let mut live: Vec<String> = warm
            .lock()
            .iter()
            .filter(|(_, h)| h.launching.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        live.sort();
        assert_eq!(live, ["s2", "s3", "s4", "s5"]);
        for aborted in watchers.drain(..2) {
            assert!(aborted.await.is_err(), "an evicted start is aborted");
        }
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_start_running_for_the_next_turn() {
        let warm = WarmSessions::new(Duration::from_secs(600));
        let (start, mut aborted) = pending_start();
        warm.lock().insert(
            "s".into(),
            Held {
                launching: Some(start),
                ..Held::default()
            },
        );
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(matches!(
            warm.take("s", &cancel).await,
            Err(Unwarm::Cancelled)
        ));
        assert!(warm.lock().get("s").is_some_and(|h| h.launching.is_some()));
        assert!(aborted
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Empty));
    }

    #[test]
    fn a_refused_session_is_said_once_and_stays_cold() {
        let warm = WarmSessions::new(Duration::from_secs(600));
        assert!(warm.refuse("s", "too old".into()));
        assert!(!warm.refuse("s", "again".into()));
        assert_eq!(warm.refused("s").as_deref(), Some("too old"));
        assert_eq!(warm.refused("other"), None);
    }

    #[test]
    fn a_session_tries_warm_again_until_its_agy_died_too_often() {
        let warm = WarmSessions::new(Duration::from_secs(600));
        let tries: Vec<bool> = (0..MAX_FRUITLESS + 1)
            .map(|_| warm.died_before_turn("s"))
            .collect();
        assert_eq!(tries.iter().filter(|t| **t).count() as u32, MAX_FRUITLESS);
        assert_eq!(tries.last(), Some(&false));
    }
}
