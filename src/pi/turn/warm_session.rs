//! `stream --session`: one agy-bridge process per pi session, serving its
//! turns one after another, with a warm agy kept between them.
//!
//! A cold turn pays agy's start-up (seconds) before agy does anything; a
//! turn on a warm agy ([`crate::runner::WarmAgy`]) does not. pi's
//! extension keeps one of these children per pi session (it already kept
//! `stream`'s child across tool calls), so the warm agy lives exactly as
//! long as the pi session does: the guardian covers it, pi's death ends
//! it (`PR_SET_PDEATHSIG`, stdin's end), and no daemon or socket outlives
//! pi. Each turn still takes the session's turn lock, so two pi processes
//! on one session never mix turns; a warm agy whose conversation someone
//! else wrote to since is replaced, not used.
//!
//! stdin carries, besides each turn's request line and its control lines
//! (`abort`, `tool_result`, `release`), `{"type":"warm",…}` (the request's
//! fields without `messages`): start agy now, so even the first turn finds
//! it ready. The turn's events on stdout are `stream`'s, exactly.

use super::cold::ColdTurn;
use super::prepare::PreparedTurn;
use crate::pi::mcp::relay::{Control, CONTROL_CAPACITY};
use crate::pi::provider::stream::PiStream;
use crate::pi::provider::StreamRequest;
use crate::process::standby::Standby;
use crate::runner::{self, RunConfig, TurnRequest, WarmKey, WarmRun};
use crate::session::gating::GatePlan;
use crate::settings::vars::WARM_ENV;
use crate::settings::Settings;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Replacements of a warm agy that died without running a turn, in a row,
/// before the session stops replacing it (an agy that cannot start would
/// otherwise be restarted forever).
const MAX_FRUITLESS_STARTS: u32 = 2;

/// What stdin brings the session.
pub(super) enum Msg {
    /// A turn's request line, with the turn's own abort token and control
    /// lines (made when the line was read, so an abort right behind it
    /// reaches this turn).
    Turn {
        line: String,
        cancel: CancellationToken,
        control: mpsc::Receiver<Control>,
    },
    /// `{"type":"warm",…}`.
    Warm(String),
}

/// The turn stdin's abort and control lines go to: the last request's.
pub(super) struct Current {
    pub(super) cancel: CancellationToken,
    pub(super) control: mpsc::Sender<Control>,
}

/// Read pi's input (stdin) on a plain thread for the whole session. Its end
/// means pi is gone: the current turn is aborted (a parked call hears why)
/// and `gone` is cancelled.
fn session_input<R: Read + Send + 'static>(
    input: R,
    gone: CancellationToken,
) -> mpsc::Receiver<Msg> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let (control, _) = mpsc::channel(1);
        let current = Arc::new(Mutex::new(Current {
            cancel: gone.child_token(),
            control,
        }));
        let mut stdin = BufReader::new(input);
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if let Some(msg) = classify(&line, &current, &gone) {
                if tx.blocking_send(msg).is_err() {
                    break;
                }
            }
        }
        if let Ok(c) = current.lock() {
            let _ = c.control.try_send(Control::Closed);
            c.cancel.cancel();
        }
        gone.cancel();
    });
    rx
}

/// One stdin line: an abort or a control line is handled here (for the
/// current turn); a request or a warm line goes to the session.
pub(super) fn classify(
    line: &[u8],
    current: &Mutex<Current>,
    gone: &CancellationToken,
) -> Option<Msg> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return None;
    }
    if super::input::is_abort_line(line) {
        if let Ok(c) = current.lock() {
            c.cancel.cancel();
        }
        return None;
    }
    let kind = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
    match kind.as_deref() {
        Some("warm") => Some(Msg::Warm(text.to_string())),
        Some(kind) if kind != "request" => {
            if let (Some(c), Ok(cur)) = (Control::parse(text), current.lock()) {
                super::input::keep_control(&cur.control, c);
            }
            None
        }
        // `{"type":"request",…}`, or no `type` (or not JSON): a request; a
        // bad one is the turn's error.
        _ => {
            let cancel = gone.child_token();
            let (control_tx, control) = mpsc::channel(CONTROL_CAPACITY);
            if let Ok(mut c) = current.lock() {
                *c = Current {
                    cancel: cancel.clone(),
                    control: control_tx,
                };
            }
            Some(Msg::Turn {
                line: text.to_string(),
                cancel,
                control,
            })
        }
    }
}

/// A warm agy and what lives as long as it does: its gate, and pi's tools
/// served to it for its whole life (they are on its command line).
type Slot = crate::session::warm_slot::Slot<Option<crate::pi::mcp::ToolBridge>>;

/// What the last warm agy was started for: a replacement (after an abort,
/// agy's death) starts the same.
#[derive(Clone)]
struct Plan {
    cfg: RunConfig,
    req: TurnRequest,
    key: WarmKey,
    tools: Vec<crate::pi::provider::PiTool>,
    gating: Option<GatePlan>,
}

struct Session {
    /// pi is gone: nothing more starts.
    gone: CancellationToken,
    out: Output,
    timeout: Duration,
    /// The environment's settings (`AGY_WARM`, `AGY_WARM_IDLE_SECS`, ...).
    settings: Settings,
    standby: Option<Standby>,
    slot: Option<Slot>,
    plan: Option<Plan>,
    /// Why this session's agy cannot be warm, once known (said once).
    refused: Option<String>,
    said: bool,
    last_use: Instant,
    fruitless: u32,
    /// What the user allowed "for this session": every gate of the
    /// session (each warm agy's, each cold turn's) shares it.
    grants: crate::gate::Grants,
}

/// Where each turn's events go: a fresh [`PiStream`] per turn (pi's stdout
/// in the binary, a buffer in tests).
pub type Output = Box<dyn FnMut() -> PiStream<Box<dyn Write>>>;

/// `stream --session`: every turn of one pi session, read from `input`,
/// each turn's events to a fresh stream from `out`, under `settings` (the
/// binary's, checked before, its flags applied: each turn's watchdog is
/// [`Settings::watchdog`]; `AGY_WARM` and `AGY_WARM_IDLE_SECS` say whether
/// and how long agy is kept warm). `gone` is pi's end (the caller
/// cancels it on a stop signal, pi's death, stdout's reader gone; the end
/// of `input` cancels it too).
pub async fn serve_session<R: Read + Send + 'static>(
    input: R,
    out: Output,
    settings: &Settings,
    standby: Option<Standby>,
    gone: CancellationToken,
) {
    let mut msgs = session_input(input, gone.clone());
    let mut session = Session {
        gone: gone.clone(),
        out,
        timeout: settings.watchdog(),
        settings: settings.clone(),
        standby,
        slot: None,
        plan: None,
        refused: None,
        said: false,
        last_use: Instant::now(),
        fruitless: 0,
        grants: Default::default(),
    };
    while let Some(next) = session.next(&mut msgs, &gone).await {
        match next {
            Msg::Turn {
                line,
                cancel,
                control,
            } => {
                session.turn(&line, control, &cancel).await;
            }
            Msg::Warm(line) => session.prewarm(&line, &gone).await,
        }
        session.last_use = Instant::now();
    }
    session.shutdown().await;
}

impl Session {
    /// The next message, meanwhile releasing an idle agy and noticing one
    /// that died (replaced in the background); `None` when pi is gone.
    async fn next(
        &mut self,
        msgs: &mut mpsc::Receiver<Msg>,
        gone: &CancellationToken,
    ) -> Option<Msg> {
        loop {
            // A huge idle time is "never": no deadline at all.
            let idle_at = self.last_use.checked_add(self.settings.warm_idle);
            let idle = async {
                match idle_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let warm_left = self.slot.is_some();
            let exited = async {
                match self.slot.as_mut() {
                    Some(s) => s.warm.exited().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = gone.cancelled() => return None,
                msg = msgs.recv() => return msg,
                _ = exited => self.on_warm_exit(gone).await,
                _ = idle, if warm_left => self.release_idle(),
            }
        }
    }

    /// agy died between turns: noticed now, replaced now (unless it keeps
    /// dying without a turn), so the next turn finds a warm agy again and
    /// never reports this as its failure.
    async fn on_warm_exit(&mut self, gone: &CancellationToken) {
        let Some(slot) = self.slot.take() else { return };
        eprintln!(
            "agy-bridge: the warm agy (pid {}) exited between turns; starting another",
            slot.warm.pid()
        );
        slot.warm.release(Duration::ZERO).await;
        if self.died_again() {
            return;
        }
        if let Some(plan) = self.plan.clone() {
            self.start_slot(plan, gone).await;
        }
    }

    /// One more warm agy gone without a turn; `true` when that was one too
    /// many and the session runs cold from now on (an agy that rejects its
    /// stdin, or cannot start, would otherwise be restarted forever).
    fn died_again(&mut self) -> bool {
        self.fruitless += 1;
        if self.fruitless <= MAX_FRUITLESS_STARTS {
            return false;
        }
        self.refuse(format!(
            "agy exited {} times without running a turn when kept warm",
            self.fruitless
        ));
        true
    }

    /// This session's agy cannot be warm: from now on every turn runs on an
    /// agy of its own; said at once if the choice was said already.
    fn refuse(&mut self, why: String) {
        if self.said && self.refused.is_none() {
            eprintln!("agy-bridge: warm agy: off from now on: {why}; one agy process per turn");
        }
        self.refused = Some(why);
    }

    /// The session sat idle: its agy goes (the next turn starts one).
    fn release_idle(&mut self) {
        if let Some(slot) = self.slot.take() {
            tokio::spawn(crate::session::warm_slot::release(slot));
        }
    }

    /// Say once per session how its turns run.
    fn say_choice(&mut self) {
        if self.said {
            return;
        }
        self.said = true;
        let how = match (&self.refused, self.settings.warm) {
            (_, false) => format!("off ({WARM_ENV}=off): one agy process per turn"),
            (Some(why), true) => format!("off: {why}; one agy process per turn"),
            (None, true) => format!(
                "on: one agy process kept between this session's turns (released after {} s idle)",
                self.settings.warm_idle.as_secs()
            ),
        };
        eprintln!("agy-bridge: warm agy: {how}");
    }

    fn warm_possible(&self) -> bool {
        self.settings.warm && self.refused.is_none()
    }

    /// pi is gone: the warm agy's tree goes at once.
    async fn shutdown(&mut self) {
        if let Some(slot) = self.slot.take() {
            crate::session::warm_slot::stop(slot).await;
        }
    }
}

impl Session {
    /// One turn: `stream`'s, on the warm agy when it fits.
    async fn turn(
        &mut self,
        line: &str,
        control: mpsc::Receiver<Control>,
        cancel: &CancellationToken,
    ) -> bool {
        let mut pi = (self.out)();
        pi.start();
        let start =
            match super::start::start_from_line(line, self.timeout, &self.settings, cancel).await {
                Ok(start) => start,
                Err((aborted, message)) => {
                    pi.fail(aborted, &message);
                    return false;
                }
            };
        // The turn lock and the seat are held to the end of the turn.
        let Some(super::start::Begun {
            req,
            mut prepared,
            prelude,
            mut mapper,
            held: _held,
        }) = super::start::begin_turn(start, &mut pi, cancel).await
        else {
            return false;
        };
        self.share_grants(&mut prepared);
        if self.warm_possible() {
            let too_old = super::tools::too_old_for_pi_tools(&prelude);
            if let Some(old) = too_old.filter(|_| prepared.first_turn && !req.tools.is_empty()) {
                pi.thinking(&super::tools::no_pi_tools_note(old));
            }
            let plan = plan_for(&req, &prepared, &prelude);
            if let Some(slot) = self
                .slot_for(&plan, &prepared, prelude.clone(), cancel)
                .await
            {
                self.say_choice();
                return self
                    .warm_turn(
                        slot,
                        plan,
                        &req,
                        &prepared,
                        &mut mapper,
                        control,
                        &mut pi,
                        cancel,
                    )
                    .await;
            }
        }
        self.say_choice();
        let cold = ColdTurn {
            req: &req,
            prepared: &prepared,
            prelude,
        };
        let standby = self.standby.take();
        super::cold::run_cold_prepared(cold, &mut mapper, standby, control, &mut pi, cancel).await
    }
}

/// The warm agy a turn of `req` needs: its settings, pi's tools as this
/// turn offers them, the session's conversation and cursor.
fn plan_for(req: &StreamRequest, prepared: &PreparedTurn, prelude: &runner::Prelude) -> Plan {
    let tools = offered_tools(req, prelude, prepared.settings.pi_tools);
    // Whether agy is gated is on its command line (the gate's directory
    // and skip-permissions), so it is part of the key.
    let signature = format!(
        "{}|gate:{}",
        serde_json::to_string(&tools).unwrap_or_default(),
        prepared.gating.is_some()
    );
    let mut warm_req = prepared.turn.clone();
    warm_req.prompt = String::new();
    Plan {
        key: WarmKey::of(&prepared.cfg, &warm_req, &signature),
        cfg: prepared.cfg.clone(),
        req: warm_req,
        tools,
        gating: prepared.gating.clone(),
    }
}

/// pi's tools agy is offered: none when they are switched off or this agy
/// is known to be too old to reach them.
fn offered_tools(
    req: &StreamRequest,
    prelude: &runner::Prelude,
    on: bool,
) -> Vec<crate::pi::provider::PiTool> {
    let too_old = super::tools::too_old_for_pi_tools(prelude).is_some();
    if too_old || !on {
        return Vec::new();
    }
    crate::pi::mcp::offered_tools(&req.tools)
}

impl Session {
    /// The warm agy for `plan`: the one kept, if it fits the turn, else a
    /// new one (the old one goes in the background). `None`: this turn
    /// runs cold (the reason was said once).
    async fn slot_for(
        &mut self,
        plan: &Plan,
        prepared: &PreparedTurn,
        prelude: runner::Prelude,
        cancel: &CancellationToken,
    ) -> Option<Slot> {
        let conversation = prepared.turn.conversation.as_ref();
        if let Some(slot) = self.slot.take() {
            if slot
                .warm
                .fits(&plan.key, conversation, prepared.turn.after_idx)
            {
                return Some(slot);
            }
            tokio::spawn(crate::session::warm_slot::release(slot));
        }
        self.plan = Some(plan.clone());
        self.launch(plan.clone(), prelude, cancel).await
    }

    /// Start a warm agy for `plan` now (after the start interval), with
    /// pi's tools served to it for its whole life. `None` when this agy
    /// cannot be warm (said once, and the session runs cold from then on)
    /// or the wait was cancelled.
    async fn launch(
        &mut self,
        plan: Plan,
        prelude: runner::Prelude,
        cancel: &CancellationToken,
    ) -> Option<Slot> {
        let Plan {
            cfg,
            mut req,
            key,
            tools,
            gating,
        } = plan;
        if !runner::spaced_start(&cfg, cancel).await {
            return None;
        }
        let tools = match crate::pi::mcp::ToolBridge::start(tools).await {
            Ok(tools) => tools,
            Err(e) => {
                self.refuse(format!("pi's tools cannot be served to agy ({e})"));
                return None;
            }
        };
        if let Some(bridge) = &tools {
            req.add_dirs.push(bridge.dir.path().to_path_buf());
            req.private_dirs.push(bridge.dir.path().to_path_buf());
        }
        let own_server = tools.as_ref().map(|_| crate::pi::mcp::SERVER_NAME);
        let launch = crate::session::warm_slot::Launch {
            cfg,
            req,
            key,
            gating: gating.as_ref(),
            own_server,
        };
        let standby = self.standby.take();
        match crate::session::warm_slot::launch(launch, prelude, standby, tools, cancel).await {
            Ok(slot) => Some(slot),
            Err(why) => {
                self.refuse(why);
                None
            }
        }
    }

    /// Start the session's agy again from its plan (after an abort, a
    /// death, the watchdog), in the background of the session: the next
    /// turn finds it warm.
    async fn start_slot(&mut self, plan: Plan, cancel: &CancellationToken) {
        let prelude = runner::Prelude::new(&plan.cfg).await;
        self.slot = self.launch(plan, prelude, cancel).await;
    }

    /// `{"type":"warm",…}`: have agy ready before the session's next turn.
    async fn prewarm(&mut self, line: &str, gone: &CancellationToken) {
        if !self.warm_possible() {
            return;
        }
        let req: StreamRequest = match serde_json::from_str(line) {
            Ok(req) => req,
            Err(e) => {
                eprintln!("agy-bridge: warning: ignored a warm line that is not a request ({e})");
                return;
            }
        };
        let (timeout, stop, env) = (self.timeout, gone.clone(), self.settings.clone());
        let prepared = tokio::task::spawn_blocking(move || {
            prepare_warm(&req, timeout, &env, &stop).map(|p| (req, p))
        })
        .await;
        let (req, (mut prepared, prelude)) = match prepared {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                eprintln!("agy-bridge: warning: agy was not started ahead: {e}");
                return;
            }
            Err(_) => return,
        };
        self.share_grants(&mut prepared);
        let plan = plan_for(&req, &prepared, &prelude);
        let fits = self.slot.as_ref().is_some_and(|s| {
            s.warm.fits(
                &plan.key,
                prepared.turn.conversation.as_ref(),
                prepared.turn.after_idx,
            )
        });
        if !fits {
            if let Some(old) = self.slot.take() {
                tokio::spawn(crate::session::warm_slot::release(old));
            }
            self.plan = Some(plan.clone());
            self.slot = self.launch(plan, prelude, gone).await;
        }
        self.say_choice();
    }
}

/// A warm line's turn, without a prompt: the settings it resolves to and
/// the session's conversation and cursor, as the next turn will see them
/// (blocking: files, at worst `agy models`).
fn prepare_warm(
    req: &StreamRequest,
    timeout: Duration,
    env: &Settings,
    cancel: &CancellationToken,
) -> Result<(PreparedTurn, runner::Prelude), String> {
    let cwd = super::prepare::request_cwd(req);
    let resolved = super::prepare::resolve_agy(req, timeout, env, cancel)?;
    let (session_key, store) = super::prepare::session_of(req, env);
    let entry = store
        .as_ref()
        .and_then(|s| s.get(&session_key).ok().flatten())
        .filter(|e| {
            crate::follow::discovery::db_path(&resolved.cfg.conversations_dir, &e.conversation_id)
                .is_file()
        });
    let prepared = PreparedTurn {
        turn: super::prepare::session_turn(String::new(), &cwd, &resolved, entry.as_ref()),
        gating: crate::session::gating::gate_plan(&resolved.settings, req.ui, env),
        cfg: resolved.cfg,
        cwd,
        session_key,
        store,
        notes: Vec::new(),
        first_turn: entry.is_none(),
        replaces: None,
        settings: env.clone(),
    };
    let prelude = runner::Prelude::blocking(&prepared.cfg);
    Ok((prepared, prelude))
}

impl Session {
    /// The turn's gate uses the session's grants.
    fn share_grants(&self, prepared: &mut PreparedTurn) {
        if let Some(plan) = prepared.gating.as_mut() {
            plan.grants = self.grants.clone();
        }
    }

    /// A turn on `slot`'s warm agy. If that agy turns out to be gone before
    /// the turn began, the turn runs cold instead (nothing of it happened
    /// yet) and the session starts another warm agy.
    #[allow(clippy::too_many_arguments)]
    async fn warm_turn<W: Write>(
        &mut self,
        slot: Slot,
        plan: Plan,
        req: &StreamRequest,
        prepared: &PreparedTurn,
        mapper: &mut crate::pi::provider::mapper::EventMapper,
        control: mpsc::Receiver<Control>,
        pi: &mut PiStream<W>,
        cancel: &CancellationToken,
    ) -> bool {
        let Slot {
            warm,
            extra: mut tools,
            mut gate,
            gate_note,
        } = slot;
        if let Some(line) = gate_note {
            eprintln!("agy-bridge: {line}");
            pi.thinking(&format!("\n[agy-bridge: {line}]\n"));
        }
        if tools.is_some() {
            mapper.hide_bridge_calls(crate::pi::mcp::is_bridge_call);
        }
        if let (Some(g), Some(plan)) = (&gate, &prepared.gating) {
            // This turn's rules and UI; the session's grants stay.
            let own = tools.as_ref().map(|_| crate::pi::mcp::SERVER_NAME);
            g.set_policy(crate::session::gating::policy(plan, &prepared.turn, own));
        }
        let window = prepared.settings.tool_batch;
        let mut side = super::tools::tool_side(tools.as_mut(), gate.as_mut(), control, window);
        let (tx, mut rx) = runner::event_channel();
        let (cfg, turn_req) = (prepared.cfg.clone(), prepared.turn.clone());
        let run_cancel = cancel.clone();
        let task =
            tokio::spawn(
                async move { runner::run_warm(&cfg, &turn_req, warm, run_cancel, tx).await },
            );
        crate::pi::mcp::relay::relay(&mut rx, side.as_mut().ok(), pi, mapper, cancel).await;
        let outcome = task.await;
        let control = super::tools::give_back(side, tools.as_mut(), gate.as_mut());
        match outcome {
            Ok(WarmRun::Ran(result, warm)) => {
                self.fruitless = 0;
                self.slot = warm.map(|warm| Slot {
                    warm,
                    extra: tools,
                    gate,
                    gate_note: None,
                });
                let ok = super::end::end_turn(pi, prepared, req, &result);
                self.after_turn(plan, &result, cancel).await;
                ok
            }
            Ok(WarmRun::Gone(why)) => {
                eprintln!("agy-bridge: {why}; this turn starts agy afresh");
                drop((tools, gate));
                let again = !self.died_again();
                let prelude = runner::Prelude::new(&prepared.cfg).await;
                let cold = ColdTurn {
                    req,
                    prepared,
                    prelude,
                };
                let ok =
                    super::cold::run_cold_prepared(cold, mapper, None, control, pi, cancel).await;
                if again && !self.gone.is_cancelled() {
                    let gone = self.gone.clone();
                    self.start_slot(plan, &gone).await;
                }
                ok
            }
            Err(e) => {
                pi.fail(
                    false,
                    &format!("agy-bridge failed while running the turn: {e}"),
                );
                false
            }
        }
    }

    /// After a warm turn: the plan follows the conversation, and an agy the
    /// turn ended (abort, watchdog, agy's exit) is replaced at once, on the
    /// same conversation, while pi has its answer already.
    async fn after_turn(
        &mut self,
        mut plan: Plan,
        result: &runner::RunResult,
        cancel: &CancellationToken,
    ) {
        if let Some(id) = result
            .conversation_id
            .as_deref()
            .and_then(|id| agy_format::ids::ConversationId::parse(id).ok())
        {
            plan.req.conversation = Some(id);
            plan.req.after_idx = result.last_idx.or(plan.req.after_idx);
        }
        self.plan = Some(plan.clone());
        if self.slot.is_none() {
            // An abort cancelled `cancel`: the replacement waits on the
            // session's token instead.
            let _ = cancel;
            if !self.gone.is_cancelled() {
                let gone = self.gone.clone();
                self.start_slot(plan, &gone).await;
            }
        }
    }
}
