//! A warm agy as a session keeps it, whoever the session's user is: the
//! agy process ([`crate::runner`]'s `WarmAgy`) with what must live exactly
//! as long as it does (the permission gate whose directory is on its
//! command line, and the front end's own part: pi's tool server, an
//! editor's MCP configuration), started one way for every front end
//! ([`launch`]), and kept between turns by a task of its own ([`Kept`])
//! for a front end that has no session loop to watch it.
//!
//! Why the gate is part of the slot: agy reads its hooks from an
//! `--add-dir` once, at start, so a warm agy must keep the gate it started
//! with; each turn only sets that gate's policy (its rules, its UI) and
//! reads its questions. Why the front end's part is too: the MCP servers
//! agy was given are on its command line in the same way.

use crate::gate::Gate;
use crate::process::standby::Standby;
use crate::runner::{self, Prelude, RunConfig, TurnRequest, WarmAgy, WarmKey};
use crate::session::gating::{self, GatePlan};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// How long a released agy may take to end at its input's end before its
/// tree is ended.
const RELEASE_GRACE: Duration = Duration::from_secs(2);
/// How long a stopped agy (its session gone) gets after SIGTERM.
const STOP_GRACE: Duration = Duration::from_millis(300);

/// A warm agy and what lives as long as it does.
pub(crate) struct Slot<T> {
    /// The agy process, between turns.
    pub(crate) warm: WarmAgy,
    /// `ask` mode: the gate agy's hook reaches (its directory is on agy's
    /// command line).
    pub(crate) gate: Option<Gate>,
    /// Why an `ask` session's agy runs without its gate (as `deny`): said
    /// at the slot's first turn.
    pub(crate) gate_note: Option<String>,
    /// The front end's part: dropped only after agy is gone.
    pub(crate) extra: T,
}

/// How a warm agy is started: the runner's settings and the turn without
/// its prompt (the front end's own `--add-dir`s already in it, so the gate
/// keeps them private), the key a later turn must match, and the gate's
/// plan in `ask` mode.
pub(crate) struct Launch<'a> {
    /// The runner's settings.
    pub(crate) cfg: RunConfig,
    /// The turn agy starts for, without a prompt.
    pub(crate) req: TurnRequest,
    /// What a turn must match to run on it.
    pub(crate) key: WarmKey,
    /// `ask` mode: the gate's plan.
    pub(crate) gating: Option<&'a GatePlan>,
    /// The front end's own MCP server, whose calls the gate lets through.
    pub(crate) own_server: Option<&'a str>,
}

/// Start a warm agy for `launch`: its gate opened (a gate that cannot be
/// proven or started leaves agy as `deny`, still warm, with the reason in
/// [`Slot::gate_note`]), under `standby` when the front end forked one.
/// `Err` says why this agy cannot be kept warm; `extra` is dropped then.
pub(crate) async fn launch<T>(
    launch: Launch<'_>,
    prelude: Prelude,
    standby: Option<Standby>,
    extra: T,
    cancel: &CancellationToken,
) -> Result<Slot<T>, String> {
    let Launch {
        mut cfg,
        mut req,
        key,
        gating,
        own_server,
    } = launch;
    let (gate, gate_note) = match gating {
        Some(plan) => match gating::open_gate(plan, &mut cfg, &mut req, own_server, cancel).await {
            Ok(gate) => (Some(gate), None),
            Err(line) => (None, line),
        },
        None => (None, None),
    };
    if let Some(standby) = standby {
        cfg.guardian = cfg.guardian.map(|g| g.with_standby(standby));
    }
    let warm = runner::start_warm(&cfg, &req, prelude, key).await?;
    Ok(Slot {
        warm,
        gate,
        gate_note,
        extra,
    })
}

/// Let a warm agy go: its input closes, its tree is ended after a grace,
/// and its front-end part goes once agy is gone.
pub(crate) async fn release<T>(slot: Slot<T>) {
    slot.warm.release(RELEASE_GRACE).await;
    drop(slot.extra);
}

/// End a warm agy's tree now (its session is gone).
pub(crate) async fn stop<T>(slot: Slot<T>) {
    slot.warm.stop(STOP_GRACE).await;
    drop(slot.extra);
}

/// The gate's questions lent to one turn: forwarded to `to` until
/// [`Lent::give_back`], which returns them to the gate for the next turn.
pub(crate) struct Lent {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<mpsc::Receiver<crate::gate::Question>>,
}

/// Forward `gate`'s questions to `to` for one turn.
pub(crate) fn lend_questions(gate: &mut Gate, to: mpsc::Sender<crate::gate::Question>) -> Lent {
    let (_, closed) = mpsc::channel(1);
    let mut asked = std::mem::replace(&mut gate.questions, closed);
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                q = asked.recv() => match q {
                    Some(q) => {
                        if to.send(q).await.is_err() {
                            break;
                        }
                    }
                    None => break,
                },
                _ = stopped.cancelled() => break,
            }
        }
        asked
    });
    Lent { stop, task }
}

impl Lent {
    /// The turn is over: the questions go back to `gate`.
    pub(crate) async fn give_back(self, gate: &mut Gate) {
        self.stop.cancel();
        if let Ok(asked) = self.task.await {
            gate.questions = asked;
        }
    }
}

/// A warm agy kept between a session's turns on a task of its own: let go
/// after `idle`, reaped when it exits on its own, stopped when the `Kept`
/// is dropped (the session, or the whole front end, is gone).
pub(crate) struct Kept<T> {
    take: mpsc::Sender<oneshot::Sender<Slot<T>>>,
}

/// What ended a kept slot's wait.
enum Woke<T> {
    Taken(oneshot::Sender<Slot<T>>),
    Dropped,
    Exited,
    Idle,
}

impl<T: Send + 'static> Kept<T> {
    /// Keep `slot` until it is taken, idle for `idle` (a huge `idle` is
    /// never), exits, or the `Kept` is dropped.
    pub(crate) fn keep(mut slot: Slot<T>, idle: Duration) -> Kept<T> {
        let (take, mut takers) = mpsc::channel::<oneshot::Sender<Slot<T>>>(1);
        tokio::spawn(async move {
            let idle_at = tokio::time::Instant::now().checked_add(idle);
            let woke = tokio::select! {
                biased;
                taker = takers.recv() => match taker {
                    Some(taker) => Woke::Taken(taker),
                    None => Woke::Dropped,
                },
                _ = slot.warm.exited() => Woke::Exited,
                _ = sleep_until(idle_at) => Woke::Idle,
            };
            match woke {
                Woke::Taken(taker) => {
                    if let Err(slot) = taker.send(slot) {
                        release(slot).await;
                    }
                }
                Woke::Dropped => stop(slot).await,
                Woke::Exited => {
                    eprintln!(
                        "agy-bridge: the warm agy (pid {}) exited between turns; the next turn starts another",
                        slot.warm.pid()
                    );
                    release(slot).await;
                }
                Woke::Idle => release(slot).await,
            }
        });
        Kept { take }
    }

    /// The slot, unless it was let go meanwhile (idle, exited).
    pub(crate) async fn take(self) -> Option<Slot<T>> {
        let (tx, rx) = oneshot::channel();
        self.take.send(tx).await.ok()?;
        rx.await.ok()
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
