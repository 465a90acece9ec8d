//! One agy turn, live: spawn `agy -p`, bind its conversation database, follow
//! it while agy writes, and end cleanly on success, failure, abort or timeout.
//!
//! The runner owns agy's process tree and the wake-up policy. It never decodes
//! anything itself: the [`Poller`] turns commits into events, and
//! [`discovery`] binds the database. Wake-ups are driven by inotify on the
//! conversations directory (which also reports writes to `<id>.db-wal`), with
//! a fallback interval so that a missed notification can never stall a turn;
//! once bound, the reader and its wake-ups run on a thread of their own
//! (`follower`), the turn hearing only of what a poll found. Whatever
//! happens, [`run`] returns a [`RunResult`]; it never panics or returns
//! early on an agy failure.
//!
//! This file holds what callers use (the configuration, the request, the
//! events and the result, the entry points) and the turn's state; the
//! turn's parts live by concept in private submodules: `args` (agy's
//! command line), `agy` (its process and output readers), `bind` (which
//! conversation), `follow` (the loop while agy runs), `follower` (the
//! reader's thread) and `changes` (what wakes it), `wake` (when to look
//! before binding), `merge` (the two sources), `outbox` (delivery with
//! back-pressure), `finish` (the end and its classification) and `warm`
//! (an agy kept between turns).

//!
//! Beside the turn itself: why a turn failed ([`failure`]); agy's two
//! sources besides the database, its stream-json lines (`stream_json`);
//! the prompt, never in agy's argv: on agy's stdin (`stdin`) or, for an
//! agy that cannot read it there, in a private file (`prompt_file`);
//! agy's version ([`version`]) and quota ([`quota`]), each cached per binary;
//! the private `--add-dir` directory that gives agy MCP servers
//! ([`mcp_config`]).
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::state`],
//! [`crate::settings`], [`crate::process`].

use crate::follow::discovery::{self, BindMethod, Snapshot};
use crate::follow::events::Event;
use crate::follow::poller::{PollStats, Poller};
use crate::process::standby::Guardian;
use crate::runner::failure::Failure;
use crate::runner::stream_json::{AgyStream, TextDigest};
use agy::Agy;
use agy_format::agy_args::{BindMode, Effort, Mode};
use agy_format::features::AgyFeatures;
use agy_format::ids::ConversationId;
use args::surface_of;
use bind::{last_idx_off_thread, Followed};
use merge::Held;
use outbox::Halted;

mod agy;
mod args;
mod bind;
mod changes;
pub mod failure;
mod finish;
mod follow;
mod follower;
pub mod mcp_config;
mod merge;
mod outbox;
pub(crate) mod prompt_file;
pub mod quota;
pub(crate) mod stdin;
pub(crate) mod stream_json;
pub mod version;
mod wake;
mod warm;
use agy_format::stream_json::{Line, ParseStats, TurnResult, Usage};
pub(crate) use args::{agy_args, agy_prompt, Surface};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
pub(crate) use warm::run_warm_observed;
pub(crate) use warm::{run_warm, start_warm, WarmAgy, WarmKey, WarmRun};

pub use crate::settings::WakeMode;

/// Process-wide settings: where agy is, how to wake, how long to wait.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The agy binary to run.
    pub agy_bin: PathBuf,
    /// The directory agy keeps its conversation databases in.
    pub conversations_dir: PathBuf,
    /// Extra arguments for every agy run (`AGY_EXTRA_ARGS`, whitespace-split).
    pub extra_args: Vec<String>,
    /// Pass `--dangerously-skip-permissions` (print mode stalls without it).
    pub skip_permissions: bool,
    /// How the follower learns of new steps.
    pub wake: WakeMode,
    /// The fallback interval (and the only one in poll-only mode).
    pub poll_interval: Duration,
    /// Reads of the database after agy's exit, `trailing_interval` apart,
    /// while another process still holds its write lock or the turn is not
    /// bound yet (after the first read otherwise); a warm turn's end reads
    /// them all, since agy is still running.
    pub trailing_polls: u32,
    /// The pause between those trailing reads.
    pub trailing_interval: Duration,
    /// SIGTERM to SIGKILL.
    pub kill_grace: Duration,
    /// Our own watchdog; agy's `--print-timeout` is set a minute longer.
    pub timeout: Duration,
    /// How the turn finds its conversation: agy's stream-json, the database directory, or both.
    pub bind: BindMode,
    /// How long a step may sit in WAITING before the turn is declared stalled
    /// on a permission prompt (print mode can never answer one).
    pub permission_stall: Duration,
    /// How long discovery may stay ambiguous (several candidates of ours)
    /// before giving up. Waiting for agy to create its database is not
    /// ambiguity and does not count.
    pub ambiguity_budget: Duration,
    /// Extra environment for agy (on top of ours).
    pub env: Vec<(String, String)>,
    /// The bridge's state directory, where agy's version and features are
    /// remembered per binary ([`version`]); `None`: asked of agy each turn.
    pub state_dir: Option<PathBuf>,
    /// The guardian agy runs under ([`crate::process::guard`], started by
    /// [`Guardian`]). With it, agy's tree dies with the bridge however the
    /// bridge dies; without, only agy itself does (Linux).
    pub guardian: Option<Guardian>,
    /// The account-wide spacing of agy starts ([`crate::state::admission`]):
    /// a turn waits for it just before agy starts, after the request's own
    /// checks. `None`: no spacing (a library caller's default).
    pub admission: Option<crate::state::admission::Admission>,
    /// Asks agy's `/usage` (through its cache) when a turn fails on quota,
    /// so the failure names the empty bucket and its reset time. `None`:
    /// the failure gives agy's own words alone (a library caller's
    /// default).
    pub usage: Option<crate::runner::quota::UsageLoader>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            agy_bin: PathBuf::from("agy"),
            conversations_dir: PathBuf::from(".gemini/antigravity-cli/conversations"),
            extra_args: Vec::new(),
            skip_permissions: true,
            wake: WakeMode::Events,
            poll_interval: Duration::from_millis(250),
            trailing_polls: 3,
            trailing_interval: Duration::from_millis(100),
            kill_grace: Duration::from_secs(2),
            timeout: Duration::from_secs(600),
            bind: BindMode::Auto,
            permission_stall: Duration::from_secs(5),
            ambiguity_budget: Duration::from_secs(10),
            env: Vec::new(),
            state_dir: None,
            guardian: None,
            admission: None,
            usage: None,
        }
    }
}

impl RunConfig {
    /// Defaults with the settings' agy binary, extra arguments,
    /// conversations directory, bind and wake modes, watchdog and state
    /// directory applied. Permissions and mode are `config.json`'s
    /// ([`crate::state::config::Config`]); admission, quota and the
    /// guardian are the caller's to add.
    pub fn from_settings(settings: &crate::settings::Settings) -> RunConfig {
        let defaults = RunConfig::default();
        RunConfig {
            agy_bin: settings.agy_bin.clone(),
            extra_args: settings.extra_args.clone(),
            conversations_dir: settings
                .conversations_dir
                .clone()
                .unwrap_or(defaults.conversations_dir),
            bind: settings.bind,
            wake: settings.wake,
            timeout: settings.watchdog(),
            state_dir: settings.state_dir.clone(),
            ..RunConfig::default()
        }
    }
}

/// One turn to run.
#[derive(Debug, Clone, Default)]
pub struct TurnRequest {
    /// The user's message.
    pub prompt: String,
    /// Where agy runs; `None` keeps the bridge's working directory.
    pub cwd: Option<PathBuf>,
    /// The model to ask for; `None` leaves agy's default.
    pub model: Option<String>,
    /// The thinking effort to ask for.
    pub effort: Option<Effort>,
    /// agy's mode (plan, accept edits, ...).
    pub mode: Option<Mode>,
    /// Resume this conversation.
    pub conversation: Option<ConversationId>,
    /// Stream steps after this idx. With `conversation` and no cursor, the
    /// current last idx is used, so a resumed turn streams only new steps.
    pub after_idx: Option<i64>,
    /// Directories agy may read and write besides `cwd` (`--add-dir`).
    pub add_dirs: Vec<PathBuf>,
    /// Directories the bridge made for this turn alone (e.g. the MCP
    /// config of pi's tools), also in `add_dirs`: the guardian removes them
    /// once agy's tree is gone, even if the bridge was killed.
    pub private_dirs: Vec<PathBuf>,
}

/// What the runner reports while the turn runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunEvent {
    /// agy started.
    Started {
        /// agy's pid (or its guardian's).
        pid: u32,
    },
    /// The turn found its conversation.
    Bound {
        /// The conversation.
        conversation_id: String,
        /// How it was found.
        method: BindMethod,
    },
    /// Sent the moment an abort is requested, before agy is reaped.
    Aborted,
    /// Sent the moment the watchdog fires.
    TimedOut,
    /// The database cannot be followed; from here on the answer text and
    /// tool steps come from agy's stream-json alone (no thinking or edits).
    Degraded {
        /// Why the database cannot be followed.
        reason: String,
    },
    /// agy did not have the conversation the turn resumed (`requested`) and
    /// began a new one without its earlier context; the turn follows the
    /// new one. Sent once, when it is bound.
    ConversationReplaced {
        /// The conversation the turn asked for.
        requested: String,
        /// The new conversation agy began instead.
        conversation_id: String,
    },
    /// The database gave less (or other) answer text than agy printed;
    /// agy's own answer follows as text events.
    AnswerFromAgy {
        /// Why the database's answer is not used.
        reason: String,
    },
    /// agy's `init` reports another permission mode (`reported`) than its
    /// command line asks for (`expected`): agy's own settings may decide
    /// for it. Sent once per agy process, when its `init` arrives.
    PermissionMode {
        /// The mode agy's `init` reported.
        reported: String,
        /// The mode the command line asked for.
        expected: String,
    },
    /// A decoded agy event (serialised as the event itself).
    #[serde(untagged)]
    Agy(Event),
}

/// The one sentence for a turn that runs degraded.
pub fn degraded_notice(reason: &str) -> String {
    format!("agy-bridge: cannot follow agy's conversation database ({reason}); the answer and tool steps come from agy's stream-json output alone, without thinking or edits")
}

/// The one sentence for a resumed conversation agy did not have (or whose
/// database is gone before the turn); callers add what happens next where
/// they are (pi, the command line). The likeliest reason comes first: agy
/// keeps about 500 conversations and drops the oldest (docs/agy-format.md,
/// "Conversations agy keeps").
pub fn new_conversation_notice(requested: &str, new: &str) -> String {
    format!("agy-bridge: agy did not have conversation {requested} (agy keeps about 500 conversations and drops the oldest; or it was deleted, or is from another machine) and began a new one, {new}, without the earlier context")
}

/// The one sentence for an agy whose `init` reports another permission
/// mode than the bridge's flags ask for, naming both.
pub(crate) fn permission_mode_notice(reported: &str, expected: &str) -> String {
    use agy_format::stream_json::{ALWAYS_PROCEED, REQUEST_REVIEW};
    let meaning = |mode: &str| match mode {
        ALWAYS_PROCEED => "every tool runs without asking",
        REQUEST_REVIEW => "a tool that needs permission is denied, as print mode cannot ask",
        _ => "a mode agy-bridge does not know",
    };
    let flag = if expected == ALWAYS_PROCEED {
        "it passed --dangerously-skip-permissions"
    } else {
        "it did not pass --dangerously-skip-permissions"
    };
    format!("agy-bridge: agy runs in permission mode {reported:?} ({}), not the {expected:?} agy-bridge asked for ({flag}, so {}); agy's own settings may have chosen it", meaning(reported), meaning(expected))
}

/// The one sentence for an answer the database gave only part of.
pub(crate) fn answer_from_agy_notice(reason: &str) -> String {
    format!("agy-bridge: {reason}; agy's own answer follows in full")
}

/// Everything known about a finished turn.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// agy's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended agy, if one did.
    pub signal: Option<i32>,
    /// The conversation the turn ran in, once bound.
    pub conversation_id: Option<String>,
    /// How that conversation was found.
    pub bind_method: Option<BindMethod>,
    /// The conversation this turn asked to resume, which agy did not have:
    /// it began `conversation_id` instead, without the earlier context.
    pub lost_conversation: Option<String>,
    /// The last step idx the turn streamed.
    pub last_idx: Option<i64>,
    /// Whether the turn was aborted.
    pub aborted: bool,
    /// Whether the bridge's watchdog stopped it.
    pub timed_out: bool,
    /// The end of agy's stderr.
    pub stderr_tail: String,
    /// agy's stdout (its final answer in text mode), capped.
    pub stdout: String,
    /// How long the turn took.
    pub duration_ms: u64,
    /// How many events it streamed.
    pub events: u64,
    /// The poller's counters (row SELECTs, version checks) for this turn.
    pub poll_stats: PollStats,
    /// Token usage: agy's last model call (what a context meter needs) and
    /// the turn's totals, from stream-json or else the database.
    pub usage: Option<TurnUsage>,
    /// agy's stream-json `result`, when it printed one.
    pub agy_result: Option<TurnResult>,
    /// Lines of agy's stream-json this build did not fully understand.
    pub stream_stats: ParseStats,
    /// Why the turn streamed from stream-json alone, if it did.
    pub degraded: Option<String>,
    /// The permission mode agy's `init` reported (a warm agy's later turns
    /// have none: its `init` came with its first).
    pub permission_mode: Option<String>,
    /// Things the user should know about a turn that still succeeded.
    pub notices: Vec<String>,
    /// Why the turn failed; `None` when it succeeded.
    pub failure: Option<Failure>,
}

/// Token usage of a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TurnUsage {
    /// agy's last model call of the turn (never a `checkpoint` side call):
    /// the context in use.
    pub last_call: Usage,
    /// The sum over this turn's own model calls.
    pub turn: Usage,
    /// agy's `result.usage`: the sum over the whole conversation so far
    /// (docs/agy-format.md, "Usage and turns"), when agy printed it.
    #[serde(rename = "conversation_total", skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Usage>,
}

impl TurnUsage {
    /// The tokens in the model's context after the turn: agy's last model
    /// call's input, output and cache reads (agy's own total leaves out
    /// cache reads).
    pub fn context_tokens(&self) -> u64 {
        let u = &self.last_call;
        u.input_tokens + u.output_tokens + u.cache_read_tokens
    }
}

impl RunResult {
    fn empty() -> RunResult {
        RunResult {
            exit_code: None,
            signal: None,
            conversation_id: None,
            bind_method: None,
            lost_conversation: None,
            last_idx: None,
            aborted: false,
            timed_out: false,
            stderr_tail: String::new(),
            stdout: String::new(),
            duration_ms: 0,
            events: 0,
            poll_stats: PollStats::default(),
            usage: None,
            agy_result: None,
            stream_stats: ParseStats::default(),
            degraded: None,
            permission_mode: None,
            notices: Vec::new(),
            failure: None,
        }
    }

    /// A turn aborted before agy started (while it waited its turn).
    pub fn aborted_before_start() -> RunResult {
        RunResult {
            aborted: true,
            failure: Some(Failure::Aborted),
            ..RunResult::empty()
        }
    }

    /// Whether the turn succeeded.
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Something that wants to look at the bound database on every wake-up, as
/// the poller does (the recorder captures whole tables this way). Called on
/// the runner's task right after each poll, including the trailing polls.
pub trait Observer: Send {
    /// `db` is the bound conversation database; `dir` the conversations
    /// directory (subagent databases live there too).
    fn wake(&mut self, dir: &Path, db: &Path);
}

/// How many events may wait between the runner and its consumer. The
/// database is the buffer: when the consumer is slow (pi stops reading the
/// bridge's stdout), the runner stops polling once this many wait, and
/// resumes where its cursor is when there is room, instead of queueing
/// events in memory. A few dozen absorb the bursts of one poll (a step's
/// call, result and text) without making the runner wait on every event.
pub(crate) const EVENT_CAPACITY: usize = 64;

/// The channel a turn's events go on (`EVENT_CAPACITY`).
pub fn event_channel() -> (mpsc::Sender<RunEvent>, mpsc::Receiver<RunEvent>) {
    mpsc::channel(EVENT_CAPACITY)
}

/// Run one turn. Events go to `events` as they happen, as fast as its
/// receiver takes them (a full channel makes the runner wait, never queue);
/// the result comes back when agy's tree is gone. Cancel `cancel` to abort:
/// an abort or the watchdog ends the turn even while nobody reads `events`.
pub async fn run(
    cfg: &RunConfig,
    req: &TurnRequest,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
) -> RunResult {
    run_observed(cfg, req, cancel, events, None).await
}

/// What a turn learns from its configuration alone before agy starts:
/// whether this agy prints stream-json (by its version, cached on disk) and
/// which conversations exist already (discovery's "before"). It is blocking
/// file I/O ([`Prelude::blocking`]), which `stream` does on the thread that
/// prepares its turn, in the same hop ([`run_with`]).
#[derive(Debug, Clone)]
pub struct Prelude {
    /// `None`: agy's features are not remembered; the turn asks agy (every
    /// turn needs them: they decide how the prompt reaches agy).
    features: Option<AgyFeatures>,
    before: Snapshot,
    /// What it was computed for (see [`Prelude::fits`]).
    agy_bin: PathBuf,
    dir: PathBuf,
    bind: BindMode,
}

impl Prelude {
    /// Compute it (blocking: for a blocking thread). Take it after the
    /// session's turn lock (a turn before ours may still create databases)
    /// and before agy starts.
    pub fn blocking(cfg: &RunConfig) -> Prelude {
        let features =
            crate::runner::version::features_remembered(cfg.state_dir.as_deref(), &cfg.agy_bin);
        // agy creates this directory itself; creating it first lets us watch it.
        let _ = std::fs::create_dir_all(&cfg.conversations_dir);
        let before = discovery::snapshot(&cfg.conversations_dir).unwrap_or_default();
        Prelude::of(cfg, features, before)
    }

    fn of(cfg: &RunConfig, features: Option<AgyFeatures>, before: Snapshot) -> Prelude {
        Prelude {
            features,
            before,
            agy_bin: cfg.agy_bin.clone(),
            dir: cfg.conversations_dir.clone(),
            bind: cfg.bind,
        }
    }

    /// [`Prelude::blocking`] on a blocking thread.
    pub(crate) async fn new(cfg: &RunConfig) -> Prelude {
        prelude(cfg).await
    }

    /// What this agy offers, when it is remembered (no agy run).
    pub(crate) fn features(&self) -> Option<AgyFeatures> {
        self.features
    }

    /// Set what this agy offers, asked of it since (the turn then does not
    /// ask again).
    pub(crate) fn set_features(&mut self, features: AgyFeatures) {
        self.features = Some(features);
    }

    /// The turn's [`Surface`] (asking agy its features if they are not
    /// remembered; `cancel` stops the asking) and the conversations that
    /// existed before it.
    async fn surface(self, cfg: &RunConfig, cancel: &CancellationToken) -> (Surface, Snapshot) {
        let features = match self.features {
            Some(known) => known,
            None => {
                crate::runner::version::agy_features(cfg.state_dir.as_deref(), &cfg.agy_bin, cancel)
                    .await
            }
        };
        (surface_of(cfg, features), self.before)
    }

    fn fits(&self, cfg: &RunConfig) -> bool {
        self.agy_bin == cfg.agy_bin && self.dir == cfg.conversations_dir && self.bind == cfg.bind
    }
}

/// [`Prelude::blocking`] on a blocking thread.
async fn prelude(cfg: &RunConfig) -> Prelude {
    let for_thread = cfg.clone();
    match tokio::task::spawn_blocking(move || Prelude::blocking(&for_thread)).await {
        Ok(prelude) => prelude,
        // It panicked: whatever it was, the turn asks agy and has no snapshot.
        Err(_) => Prelude::of(cfg, None, Snapshot::default()),
    }
}

/// [`run`] with its [`Prelude`] computed already (again if it was computed
/// for another agy, directory or bind mode).
pub async fn run_with(
    cfg: &RunConfig,
    req: &TurnRequest,
    prelude: Prelude,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
) -> RunResult {
    let prelude = if prelude.fits(cfg) {
        prelude
    } else {
        self::prelude(cfg).await
    };
    run_after(cfg, req, prelude, cancel, events, None).await
}

/// [`run`], with an [`Observer`] woken alongside the poller.
pub async fn run_observed<'a>(
    cfg: &'a RunConfig,
    req: &'a TurnRequest,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
    observer: Option<&'a mut (dyn Observer + 'a)>,
) -> RunResult {
    let prelude = prelude(cfg).await;
    run_after(cfg, req, prelude, cancel, events, observer).await
}

async fn run_after<'a>(
    cfg: &'a RunConfig,
    req: &'a TurnRequest,
    prelude: Prelude,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
    observer: Option<&'a mut (dyn Observer + 'a)>,
) -> RunResult {
    let (surface, before) = prelude.surface(cfg, &cancel).await;
    // Owns the private prompt file, if any: it goes when the turn does.
    let staged = match crate::runner::prompt_file::stage(cfg, req, surface) {
        Ok(staged) => staged,
        Err(f) => {
            return Turn::new(cfg, req, events, observer, surface, before)
                .await
                .fail_early(f)
        }
    };
    // Checked on the user's prompt, whichever way it then goes (stdin or a
    // file), so every agy version refuses the same prompts.
    let nul = nul_at(&req.prompt);
    let req = staged.request();
    let observer = observer.map(|o| &mut *o as &mut dyn Observer);
    let mut turn = Turn::new(cfg, req, events, observer, surface, before).await;
    if let Some(failure) = refused(req, nul) {
        return turn.fail_early(failure);
    }
    let private: Vec<&Path> = staged
        .dir()
        .into_iter()
        .chain(req.private_dirs.iter().map(PathBuf::as_path))
        .collect();
    // Stopped while agy's features were asked (or before): agy is not
    // started for nobody. A missing agy is still said as such (a turn goes
    // on to its own checks, as the admission's wait does).
    let stopped = cancel.is_cancelled() && agy::is_installed(&cfg.agy_bin);
    if stopped || !spaced_start(cfg, &cancel).await {
        turn.result.aborted = true;
        return turn.fail_early(Failure::Aborted);
    }
    let spawned = Agy::spawn(cfg, req, surface, &private).await;
    let mut agy = match spawned {
        Ok(agy) => agy,
        Err(failure) => return turn.fail_early(failure),
    };
    if let Some(line) = staged.stdin_line() {
        // Refused only when agy's input is already gone: agy's exit, which
        // the turn reads next, says why.
        let _ = agy.input.send_line(line);
    }
    turn.emit(RunEvent::Started { pid: agy.pid.get() });
    turn.follow(&mut agy, &cancel).await;
    turn.finish(agy, &cancel).await
}

/// Wait for the account's start spacing ([`RunConfig::admission`]);
/// `false` when `cancel` fired while waiting. Lock files that cannot be
/// used never stop a turn.
pub(crate) async fn spaced_start(cfg: &RunConfig, cancel: &CancellationToken) -> bool {
    use crate::state::admission::AdmissionError;
    match &cfg.admission {
        Some(admission) => !matches!(
            admission.wait_start(cancel, |_| {}).await,
            Err(AdmissionError::Cancelled)
        ),
        None => true,
    }
}

/// Why a turn cannot start at all, whatever agy: a working directory that
/// is not one, a prompt with a NUL byte (`nul`: how many characters came
/// before it).
fn refused(req: &TurnRequest, nul: Option<usize>) -> Option<Failure> {
    if let Some(cwd) = req.cwd.as_deref().filter(|d| !d.is_dir()) {
        let dir = cwd.display().to_string();
        return Some(if cwd.exists() {
            Failure::WorkingDirNotADirectory { dir }
        } else {
            Failure::NoWorkingDir { dir }
        });
    }
    nul.map(|before| Failure::PromptHasNul { before })
}

/// How many characters of `prompt` come before its first NUL byte.
fn nul_at(prompt: &str) -> Option<usize> {
    prompt.find('\0').map(|at| prompt[..at].chars().count())
}

/// What the database gave this turn, for classification and the fallback.
#[derive(Debug, Default)]
struct DbSeen {
    /// The database gave events this turn.
    events: bool,
    /// Answer text came from the database.
    text: bool,
    /// The database's answer per step, as a digest (see [`TextDigest`]).
    texts: BTreeMap<i64, TextDigest>,
    tools: bool,
    errors: Vec<String>,
    /// The database answered a poll at least once.
    ready: bool,
    last_problem: Option<String>,
}

impl DbSeen {
    fn text(&self) -> bool {
        self.text
    }
}

/// The state of one turn between spawn and result.
struct Turn<'a> {
    cfg: &'a RunConfig,
    req: &'a TurnRequest,
    dir: PathBuf,
    events: mpsc::Sender<RunEvent>,
    /// Events made since the last delivery, in order: at most one poll's
    /// (or one stream-json line's) worth, handed to `events` as it has
    /// room ([`Turn::deliver`]).
    outbox: VecDeque<RunEvent>,
    /// The watchdog's: when the turn is stopped, also while it waits for
    /// its consumer.
    deadline: tokio::time::Instant,
    observer: Option<&'a mut dyn Observer>,
    started: Instant,
    stream_json: bool,
    features: AgyFeatures,
    result: RunResult,
    before: Snapshot,
    followed: Option<Followed>,
    agy: AgyStream,
    db: DbSeen,
    /// The conversation this turn asked to resume, once agy said it does not
    /// have it; announced (and taken) when the new one is bound.
    lost: Option<ConversationId>,
    /// Database events waiting, in order, behind a failed tool result that
    /// has no words yet (stream-json may bring agy's error text).
    held: VecDeque<Held>,
    /// Tool events come from stream-json (degraded): the database's are
    /// then not repeated.
    stream_tools: bool,
    ambiguous_since: Option<Instant>,
    last_ambiguity: Vec<String>,
    waiting_since: Option<(i64, Instant)>,
    /// Our own reason to stop agy (a stall or a binding we cannot make).
    stop_reason: Option<Failure>,
    /// The turn runs on a warm agy ([`warm`]): it ends at agy's `result`.
    warm: Option<warm::WarmTurn>,
}

impl<'a> Turn<'a> {
    async fn new(
        cfg: &'a RunConfig,
        req: &'a TurnRequest,
        events: mpsc::Sender<RunEvent>,
        observer: Option<&'a mut dyn Observer>,
        surface: Surface,
        before: Snapshot,
    ) -> Turn<'a> {
        let mut turn = Turn {
            cfg,
            req,
            before,
            dir: cfg.conversations_dir.clone(),
            events,
            outbox: VecDeque::new(),
            deadline: deadline_after(cfg.timeout),
            observer,
            started: Instant::now(),
            stream_json: surface.stream_json,
            features: surface.features,
            result: RunResult::empty(),
            followed: None,
            agy: AgyStream::default(),
            db: DbSeen::default(),
            lost: None,
            held: VecDeque::new(),
            stream_tools: false,
            ambiguous_since: None,
            last_ambiguity: Vec::new(),
            waiting_since: None,
            stop_reason: None,
            warm: None,
        };
        // Resuming binds up front; a fresh run binds once agy shows its id.
        if let Some(id) = &req.conversation {
            let after = match req.after_idx {
                Some(after) => Some(after),
                None => last_idx_off_thread(discovery::db_path(&turn.dir, id)).await,
            };
            turn.bind(id.clone(), after, BindMethod::Given);
        }
        turn
    }

    fn fail_early(mut self, failure: Failure) -> RunResult {
        self.result.failure = Some(failure);
        self.result.duration_ms = self.started.elapsed().as_millis() as u64;
        self.result
    }

    fn send(&mut self, event: Event) {
        self.result.events += 1;
        self.emit(RunEvent::Agy(event));
    }
}

/// `now + d`, saturating far in the future instead of overflowing.
fn deadline_after(d: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}
