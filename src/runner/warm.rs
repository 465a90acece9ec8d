//! A warm agy: one agy process kept between the turns of a pi session, so
//! its start-up (seconds: `init` comes 2.4 s after start in a public 1.2.14
//! capture) is paid once and off the turn's path, not on every turn.
//!
//! agy ≥ 1.1.15 started with `--input-format stream-json` reads one user
//! line per turn on its stdin and runs every turn in the same conversation
//! and process, printing a `result` after each (docs/agy-format.md, "stdin
//! sessions"). So a warm turn is an ordinary [`Turn`] over a borrowed
//! [`Agy`]: its prompt goes as one line, it ends at agy's `result` instead
//! of agy's exit, and agy is handed back for the next turn. Everything a
//! turn does otherwise (binding, both sources merged, back-pressure, abort,
//! the watchdog) is the cold turn's, unchanged. What cannot go on in the
//! same process (an abort, the watchdog, agy's exit) ends the warm agy; the
//! caller starts another.
//!
//! Which settings need a new process is [`WarmKey`]'s: everything on agy's
//! command line except the conversation, plus the working directory, the
//! environment and what the caller adds (pi's offered tools).

use super::agy::terminate;
use super::*;

/// The oldest a warm agy may be when a turn starts on it. agy's own
/// `--print-timeout` might count from its start rather than per turn (not
/// known), so a warm agy gets one this long past the watchdog and is
/// replaced before it could expire.
pub(crate) const WARM_MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// Everything that, changed between turns, needs a new agy process: its
/// command line without the conversation (model, effort, mode, permissions,
/// add-dirs, extra arguments), its binary, working directory, environment
/// and conversations directory, and the caller's own part (`extra`: pi's
/// offered tool set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WarmKey {
    args: Vec<String>,
    bin: PathBuf,
    dir: PathBuf,
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
    timeout: Duration,
    extra: String,
}

impl WarmKey {
    /// The key of `req` under `cfg` (its prompt and conversation are not
    /// part of it).
    pub(crate) fn of(cfg: &RunConfig, req: &TurnRequest, extra: &str) -> WarmKey {
        let bare = TurnRequest {
            prompt: String::new(),
            conversation: None,
            after_idx: None,
            ..req.clone()
        };
        WarmKey {
            args: agy_args(cfg, &bare, Surface::default()),
            bin: cfg.agy_bin.clone(),
            dir: cfg.conversations_dir.clone(),
            cwd: req.cwd.clone(),
            env: cfg.env.clone(),
            timeout: cfg.timeout,
            extra: extra.to_string(),
        }
    }
}

/// A warm turn's own state, inside its [`Turn`].
#[derive(Debug, Default)]
pub(super) struct WarmTurn {
    /// agy's cumulative usage after the turn before (its results count
    /// the whole process): this turn's usage is the difference.
    pub(super) before: Option<Usage>,
    /// agy printed this turn's `result`.
    pub(super) ended: bool,
}

/// An agy process waiting for its next turn on its stdin.
pub(crate) struct WarmAgy {
    agy: Agy,
    key: WarmKey,
    surface: Surface,
    started: Instant,
    /// The conversations that existed when it started: a first turn that
    /// must bind by discovery needs them.
    before: Snapshot,
    /// The conversation it writes, once a turn was bound to it (or the one
    /// it was started on).
    conversation: Option<ConversationId>,
    /// The conversation's last step after the last turn: a database that
    /// has more was written by someone else since (another process's turn),
    /// which this agy does not know about.
    last_idx: Option<i64>,
    /// agy's cumulative usage, from its last `result`.
    total: Option<Usage>,
    turns: u32,
}

/// How a turn on a warm agy went. (One per turn, moved once: its size
/// does not matter.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum WarmRun {
    /// The turn ran (to its end, a failure, or an abort); the agy is handed
    /// back while it can take another turn.
    Ran(RunResult, Option<WarmAgy>),
    /// The agy was gone before the turn began (it exited between turns, or
    /// at once with nothing said): nothing of the turn happened; run it on
    /// a new agy. The words say what was seen.
    Gone(String),
}

impl WarmAgy {
    /// Whether a turn of `key` on `conversation`, whose database's last
    /// step is `last_idx`, can run on this agy: the same settings, the same
    /// conversation (none yet, for a new session), no step written since
    /// this agy's last turn, and not too old.
    pub(crate) fn fits(
        &self,
        key: &WarmKey,
        conversation: Option<&ConversationId>,
        last_idx: Option<i64>,
    ) -> bool {
        let same_conversation = match (&self.conversation, conversation) {
            (Some(ours), Some(theirs)) => ours == theirs,
            (None, None) => self.turns == 0,
            _ => false,
        };
        // Nothing to compare for a new conversation; agy may have read a
        // resumed one at its start, so even a first turn checks.
        let unchanged = conversation.is_none() || last_idx <= self.last_idx;
        self.key == *key && same_conversation && unchanged && self.started.elapsed() < WARM_MAX_AGE
    }

    /// agy's pid (or its guardian's).
    pub(crate) fn pid(&self) -> u32 {
        self.agy.pid.get()
    }

    /// Resolves when agy (or its guardian) has exited, without reaping it.
    pub(crate) async fn exited(&mut self) {
        self.agy.child.exited().await
    }

    /// Whether agy has exited already (not reaped). tokio's `timeout`
    /// polls the future before its timer, so zero asks without waiting.
    async fn has_exited(&mut self) -> bool {
        tokio::time::timeout(Duration::ZERO, self.agy.child.exited())
            .await
            .is_ok()
    }

    /// End agy's tree now (pi is gone): SIGTERM, SIGKILL after `grace`,
    /// reaped.
    pub(crate) async fn stop(mut self, grace: Duration) {
        terminate(&mut self.agy.child, grace).await;
    }

    /// Let agy go: its input closes (agy ends at the end of its input),
    /// and after `grace` its tree is ended; always reaped.
    pub(crate) async fn release(mut self, grace: Duration) {
        let _ = self.agy.input.close();
        if tokio::time::timeout(grace, self.agy.child.exited())
            .await
            .is_ok()
        {
            self.agy
                .child
                .signal_group(nix::sys::signal::Signal::SIGTERM);
            let _ = self.agy.child.wait().await;
        } else {
            terminate(&mut self.agy.child, grace).await;
        }
    }
}

/// Start agy for the turns of `key`, resuming `req.conversation` if any,
/// without a prompt: agy starts up while nobody waits, and the next turn
/// finds `init` done. `Err` says why this agy cannot be kept warm (too old
/// to read turns on stdin, a turn bound by discovery, not startable); the
/// caller then runs its turns one process each, as before.
pub(crate) async fn start_warm(
    cfg: &RunConfig,
    req: &TurnRequest,
    prelude: Prelude,
    key: WarmKey,
) -> Result<WarmAgy, String> {
    let prelude = if prelude.fits(cfg) {
        prelude
    } else {
        super::prelude(cfg).await
    };
    // Not cancelled from here: a caller that gives up drops this future,
    // which ends any agy program it was asking.
    let (surface, before) = prelude.surface(cfg, &CancellationToken::new()).await;
    if !(surface.stream_json && surface.stdin_input) {
        let version = surface
            .features
            .version
            .map(|(a, b, c)| format!("agy {a}.{b}.{c}"))
            .unwrap_or_else(|| "an agy that does not say its version".into());
        return Err(format!(
            "{version} does not read turns on its stdin (that needs agy 1.1.15 or later and stream-json binding)"
        ));
    }
    // agy's own print timeout must not end a long-lived agy: it gets one
    // past the oldest a warm agy may be plus the watchdog.
    let mut spawn_cfg = cfg.clone();
    spawn_cfg.timeout = cfg.timeout.saturating_add(WARM_MAX_AGE);
    let private: Vec<&Path> = req.private_dirs.iter().map(PathBuf::as_path).collect();
    let agy = Agy::spawn(&spawn_cfg, req, surface, &private)
        .await
        .map_err(|f| f.to_string())?;
    Ok(WarmAgy {
        agy,
        key,
        surface,
        started: Instant::now(),
        before,
        conversation: req.conversation.clone(),
        last_idx: req.after_idx,
        total: None,
        turns: 0,
    })
}

/// Run one turn on `warm`: its prompt goes as one line on agy's stdin, and
/// the turn ends at agy's `result` for it. `req`'s conversation and cursor
/// are the session's (the caller checked [`WarmAgy::fits`]).
pub(crate) async fn run_warm(
    cfg: &RunConfig,
    req: &TurnRequest,
    warm: WarmAgy,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
) -> WarmRun {
    run_warm_observed(cfg, req, warm, cancel, events, None).await
}

/// [`run_warm`] with an [`Observer`] woken after every poll of the turn
/// (conformance records a warm agy's turns this way).
pub(crate) async fn run_warm_observed<'a>(
    cfg: &RunConfig,
    req: &TurnRequest,
    mut warm: WarmAgy,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
    observer: Option<&'a mut (dyn Observer + 'a)>,
) -> WarmRun {
    if warm.has_exited().await {
        let status = warm.agy.child.wait().await;
        return WarmRun::Gone(format!(
            "the warm agy had exited between turns ({})",
            exit_words(status)
        ));
    }
    let staged = match crate::runner::prompt_file::stage(cfg, req, warm.surface) {
        Ok(staged) => staged,
        Err(f) => return failed_early(cfg, req, events, warm, f).await,
    };
    if let Some(failure) = refused(req, nul_at(&req.prompt)) {
        return failed_early(cfg, req, events, warm, failure).await;
    }
    let Some(line) = staged.stdin_line() else {
        return WarmRun::Gone("the prompt cannot go on agy's stdin".into());
    };
    warm.agy.tails.clear();
    let observer = observer.map(|o| &mut *o as &mut dyn Observer);
    let mut turn = Turn::new(
        cfg,
        req,
        events,
        observer,
        warm.surface,
        warm.before.clone(),
    )
    .await;
    turn.warm = Some(WarmTurn {
        before: warm.total,
        ended: false,
    });
    if warm.agy.input.send_line(line).is_err() {
        let status = warm.agy.child.wait().await;
        return WarmRun::Gone(format!(
            "the warm agy's input had closed ({})",
            exit_words(status)
        ));
    }
    turn.emit(RunEvent::Started { pid: warm.pid() });
    turn.follow(&mut warm.agy, &cancel).await;
    if turn.warm.as_ref().is_some_and(|w| w.ended) {
        let result = turn.finish_warm(&mut warm.agy, &cancel).await;
        warm.after_turn(&result);
        return WarmRun::Ran(result, Some(warm));
    }
    if turn.died_unheard() {
        let status = warm.agy.child.wait().await;
        return WarmRun::Gone(format!(
            "the warm agy exited before it began the turn ({})",
            exit_words(status)
        ));
    }
    // Aborted, timed out, stopped by us, or agy exited mid-turn: this agy
    // is done (an abort has no in-band form); the turn ends as a cold one.
    WarmRun::Ran(turn.finish(warm.agy, &cancel).await, None)
}

/// A turn refused before anything reached agy: agy stays warm.
async fn failed_early(
    cfg: &RunConfig,
    req: &TurnRequest,
    events: mpsc::Sender<RunEvent>,
    warm: WarmAgy,
    failure: Failure,
) -> WarmRun {
    let turn = Turn::new(cfg, req, events, None, warm.surface, Snapshot::default()).await;
    WarmRun::Ran(turn.fail_early(failure), Some(warm))
}

fn exit_words(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("its status is unknown: {e}"),
    }
}

impl WarmAgy {
    /// What the turn left for the next one.
    fn after_turn(&mut self, result: &RunResult) {
        self.turns += 1;
        if let Some(id) = result
            .conversation_id
            .as_deref()
            .and_then(|id| ConversationId::parse(id).ok())
        {
            self.conversation = Some(id);
        }
        self.last_idx = result.last_idx.or(self.last_idx);
        if let Some(total) = result.agy_result.as_ref().and_then(|r| r.usage) {
            self.total = Some(total);
        }
    }
}

impl Turn<'_> {
    /// agy exited on its own before saying or writing anything of this turn.
    fn died_unheard(&self) -> bool {
        !(self.result.aborted || self.result.timed_out || self.stop_reason.is_some())
            && self.result.events == 0
            && self.agy.first_step.is_none()
            && self.agy.result.is_none()
    }

    /// The end of a warm turn: agy printed its `result` and waits for the
    /// next line. The database's last commits are read (they may land just
    /// after the result), the two sources settled, and the turn classified
    /// as a cold turn's would be, without an exit code.
    async fn finish_warm(mut self, agy: &mut Agy, cancel: &CancellationToken) -> RunResult {
        if let Err(why) = self.trailing_reads(cancel, false).await {
            self.halt(why);
        }
        let settle = !(self.result.aborted || self.result.timed_out);
        self.conclude(&agy.tails, settle, cancel).await
    }
}
