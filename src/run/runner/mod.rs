//! One agy turn, live: spawn `agy -p`, bind its conversation database, follow
//! it while agy writes, and end cleanly on success, failure, abort or timeout.
//!
//! The runner owns agy's process tree and the wake-up policy. It never decodes
//! anything itself: the [`Poller`] turns commits into events, and
//! [`discovery`] binds the database. Wake-ups are driven by inotify on the
//! conversations directory (which also reports writes to `<id>.db-wal`), with
//! a fallback interval so that a missed notification can never stall a turn.
//! Whatever happens, [`run`] returns a [`RunResult`]; it never panics or
//! returns early on an agy failure.

use crate::follow::discovery::{self, BindMethod, Binding, Snapshot};
use crate::follow::events::Event;
use crate::follow::poller::{Poll, PollStats, Poller};
use crate::run::agy_input::AgyInput;
use crate::run::agy_stream::{AgyStream, TextDigest};
use crate::run::failure::AgyReport;
use crate::run::failure::Failure;
use crate::run::launch::Launch;
use crate::run::standby::{Guardian, Spawned};
use agy_format::agy_args::{BindMode, Effort, Mode};
use agy_format::database::ReadError;
use agy_format::features::{shield_slash, AgyFeatures, DISABLE_SLASH_COMMANDS};
use agy_format::ids::ConversationId;
use merge::Held;
use outbox::Halted;

mod merge;
mod outbox;
mod warm;
use agy_format::stream_json::{Line, ParseStats, TurnResult, Usage};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
pub use warm::{run_warm, run_warm_observed, start_warm, WarmAgy, WarmKey, WarmRun, WARM_MAX_AGE};

/// How the runner wakes up to poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeMode {
    /// inotify on the conversations directory, plus the fallback interval.
    Events,
    /// Only the interval (filesystems without notifications; benchmarks).
    PollOnly,
}

/// Process-wide settings: where agy is, how to wake, how long to wait.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub agy_bin: PathBuf,
    pub conversations_dir: PathBuf,
    /// Extra arguments for every agy run (`AGY_EXTRA_ARGS`, whitespace-split).
    pub extra_args: Vec<String>,
    /// Pass `--dangerously-skip-permissions` (print mode stalls without it).
    pub skip_permissions: bool,
    pub wake: WakeMode,
    /// The fallback interval (and the only one in poll-only mode).
    pub poll_interval: Duration,
    pub trailing_polls: u32,
    pub trailing_interval: Duration,
    /// SIGTERM to SIGKILL.
    pub kill_grace: Duration,
    /// Our own watchdog; agy's `--print-timeout` is set a minute longer.
    pub timeout: Duration,
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
    /// The guardian agy runs under ([`crate::run::guard`], started by
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
    pub usage: Option<crate::run::quota::UsageLoader>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            agy_bin: PathBuf::from("agy"),
            conversations_dir: discovery::default_conversations_dir()
                .unwrap_or_else(|| PathBuf::from(".gemini/antigravity-cli/conversations")),
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
            guardian: None,
            admission: None,
            usage: None,
        }
    }
}

impl RunConfig {
    /// Defaults with `AGY_BIN`, `AGY_EXTRA_ARGS`, `AGY_CONVERSATIONS_DIR`,
    /// `AGY_BIND` and `AGY_WAKE` applied. Permissions and mode are settings
    /// (`config::Config`, which reads `AGY_SKIP_PERMISSIONS` and `AGY_MODE`).
    /// A word these variables do not know is an error naming the variable and
    /// the words it takes: ignoring it would run the turn some other way than
    /// the user asked.
    pub fn from_env() -> Result<RunConfig, EnvError> {
        let mut cfg = RunConfig::default();
        if let Some(bin) = env_nonempty("AGY_BIN") {
            cfg.agy_bin = PathBuf::from(bin);
        }
        if let Some(extra) = env_nonempty("AGY_EXTRA_ARGS") {
            cfg.extra_args = extra.split_whitespace().map(str::to_string).collect();
            if let Some((flag, hint)) = cfg.extra_args.iter().find_map(|a| bridge_flag(a)) {
                return Err(EnvError::ExtraArgs { flag, hint });
            }
        }
        if let Some(value) = env_nonempty("AGY_BIND") {
            cfg.bind = value.trim().parse().map_err(|_| EnvError::Bind { value })?;
        }
        if let Some(value) = env_nonempty("AGY_WAKE") {
            cfg.wake = match value.trim() {
                "events" => WakeMode::Events,
                "poll" => WakeMode::PollOnly,
                _ => return Err(EnvError::Wake { value }),
            };
        }
        Ok(cfg)
    }
}

/// An environment variable of [`RunConfig::from_env`] holding a word it
/// does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("AGY_BIND={value:?} is not a bind mode; use one of: auto, discovery, stream-json")]
    Bind { value: String },
    #[error("AGY_WAKE={value:?} is not a wake mode; use one of: events, poll")]
    Wake { value: String },
    #[error("AGY_EXTRA_ARGS holds {flag}, which the bridge sets itself on every turn; remove it ({hint})")]
    ExtraArgs { flag: String, hint: &'static str },
}

/// The flags of agy's command line the bridge must decide itself (the
/// prompt, how agy prints, which conversation, and the settings it reports
/// and stores), each with where the user sets it instead. Any other flag in
/// `AGY_EXTRA_ARGS` is agy's to take; one the bridge also passes
/// (`--print-timeout`) is left to the user's value by [`agy_args`].
const BRIDGE_FLAGS: &[(&[&str], &str)] = &[
    (
        &["p", "print", "prompt", "i", "prompt-interactive"],
        "the prompt is the bridge's argument",
    ),
    (
        &["output-format"],
        "the bridge reads agy's output in the format it asks for; AGY_BIND chooses",
    ),
    (
        &["input-format"],
        "the bridge gives agy the prompt on its stdin itself, when agy can read it there",
    ),
    (
        &["conversation"],
        "use --conversation of run or ask; stream resumes pi's session itself",
    ),
    (
        &["model", "effort"],
        "use --model/--effort of run, ask's --model, AGY_DEFAULT_MODEL or pi's model picker",
    ),
    (&["mode"], "use AGY_MODE or `agy-bridge config mode`"),
];

/// A flag's name without its dashes or `=value` (agy parses flags the Go
/// way: `-x`, `--x` and `--x=v` are one flag); `None` for a non-flag.
fn flag_name(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let name = name.split('=').next().unwrap_or(name);
    (!name.is_empty()).then_some(name)
}

/// `arg` as one of [`BRIDGE_FLAGS`], with its hint.
fn bridge_flag(arg: &str) -> Option<(String, &'static str)> {
    let name = flag_name(arg)?;
    BRIDGE_FLAGS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, hint)| (arg.to_string(), *hint))
}

use crate::state::file::env_nonempty;

/// One turn to run.
#[derive(Debug, Clone, Default)]
pub struct TurnRequest {
    pub prompt: String,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub effort: Option<Effort>,
    pub mode: Option<Mode>,
    /// Resume this conversation.
    pub conversation: Option<ConversationId>,
    /// Stream steps after this idx. With `conversation` and no cursor, the
    /// current last idx is used, so a resumed turn streams only new steps.
    pub after_idx: Option<i64>,
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
    Started {
        pid: u32,
    },
    Bound {
        conversation_id: String,
        method: BindMethod,
    },
    /// Sent the moment an abort is requested, before agy is reaped.
    Aborted,
    /// Sent the moment the watchdog fires.
    TimedOut,
    /// The database cannot be followed; from here on the answer text and
    /// tool steps come from agy's stream-json alone (no thinking or edits).
    Degraded {
        reason: String,
    },
    /// agy did not have the conversation the turn resumed (`requested`) and
    /// began a new one without its earlier context; the turn follows the
    /// new one. Sent once, when it is bound.
    ConversationReplaced {
        requested: String,
        conversation_id: String,
    },
    /// The database gave less (or other) answer text than agy printed;
    /// agy's own answer follows as text events.
    AnswerFromAgy {
        reason: String,
    },
    /// A decoded agy event (serialised as the event itself).
    #[serde(untagged)]
    Agy(Event),
}

/// The one sentence for a turn that runs degraded.
pub fn degraded_notice(reason: &str) -> String {
    format!("agy-bridge: cannot follow agy's conversation database ({reason}); the answer and tool steps come from agy's stream-json output alone, without thinking or edits")
}

/// The one sentence for a resumed conversation agy did not have; callers
/// add what happens next where they are (pi, the command line).
pub fn new_conversation_notice(requested: &str, new: &str) -> String {
    format!("agy-bridge: agy did not have conversation {requested} (expired, deleted, or from another machine) and began a new one, {new}, without the earlier context")
}

/// The one sentence for an answer the database gave only part of.
pub fn answer_from_agy_notice(reason: &str) -> String {
    format!("agy-bridge: {reason}; agy's own answer follows in full")
}

/// Everything known about a finished turn.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub conversation_id: Option<String>,
    pub bind_method: Option<BindMethod>,
    /// The conversation this turn asked to resume, which agy did not have:
    /// it began `conversation_id` instead, without the earlier context.
    pub lost_conversation: Option<String>,
    pub last_idx: Option<i64>,
    pub aborted: bool,
    pub timed_out: bool,
    pub stderr_tail: String,
    /// agy's stdout (its final answer in text mode), capped.
    pub stdout: String,
    pub duration_ms: u64,
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
    /// Things the user should know about a turn that still succeeded.
    pub notices: Vec<String>,
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

    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Settle re-checks after a file notification. A WAL write notifies before
/// the commit is visible to readers (SQLite writes the WAL, then publishes
/// the commit in shared memory, which notifies nobody). The poll that a
/// notification starts keeps looking for [`SETTLE_FINE`] on its blocking
/// thread ([`Poller::poll_settling`]), which catches the usual commit within
/// a fraction of a millisecond; a slower one (an fsync, a long write) is
/// caught by the re-checks 2, 4, … 64 ms later. Each look is one
/// `PRAGMA data_version`.
const SETTLE_FINE: Duration = Duration::from_micros(1500);
const SETTLE_FIRST: Duration = Duration::from_millis(2);
const SETTLE_LAST: Duration = Duration::from_millis(64);

async fn settle_sleep(settle: Option<(tokio::time::Instant, Duration)>) {
    match settle {
        Some((since, delay)) => tokio::time::sleep_until(since + delay).await,
        None => std::future::pending().await,
    }
}

/// How long to wait for the stream-json `init` line before falling back to
/// discovery.
const STREAM_JSON_GRACE: Duration = Duration::from_secs(3);
const STDERR_TAIL: usize = 16 * 1024;
/// agy's stream-json lines parsed and waiting for the runner. The reader
/// waits when they are full, so agy's stdout pipe fills and agy itself
/// waits on its next write: a runner held up by a slow consumer never
/// queues agy's output (a line can hold a whole step's text).
const LINE_CAPACITY: usize = 16;
/// `conversation not found` warnings waiting (one is all a turn acts on).
const NOT_FOUND_CAPACITY: usize = 4;
const STDOUT_CAP: usize = 4 * 1024 * 1024;

/// The longest duration Go's `time.ParseDuration` accepts, in whole hours
/// (its limit is about 2562047h47m).
const GO_DURATION_MAX: Duration = Duration::from_secs(2_562_047 * 3600);

/// Format a duration as Go does for `--print-timeout` (e.g. `11m0s`),
/// capped at what Go can parse: a longer watchdog must not make agy reject
/// its own flag.
pub fn go_duration(d: Duration) -> String {
    let secs = d.min(GO_DURATION_MAX).as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// How a turn's agy is driven: what this agy offers
/// ([`agy_format::features`]), whether the turn reads its stream-json,
/// and whether agy reads the prompt on its stdin ([`crate::run::prompt_file`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Surface {
    pub stream_json: bool,
    pub stdin_input: bool,
    pub features: AgyFeatures,
}

/// The prompt as agy gets it, on its stdin or on its command line: a
/// prompt is never an agy slash command. With `--disable-slash-commands`
/// (where agy has it) it goes as it is; else a prompt starting with `/`
/// gets one leading space, which agy does not expand.
pub fn agy_prompt(prompt: &str, features: AgyFeatures) -> std::borrow::Cow<'_, str> {
    match (!features.disable_slash_commands)
        .then(|| shield_slash(prompt))
        .flatten()
    {
        Some(shielded) => shielded.into(),
        None => prompt.into(),
    }
}

/// The argument list for one turn (docs/agy-format.md, "CLI surface").
pub fn agy_args(cfg: &RunConfig, req: &TurnRequest, surface: Surface) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for dir in &req.add_dirs {
        args.push("--add-dir".into());
        args.push(dir.display().to_string());
    }
    args.extend(cfg.extra_args.iter().cloned());
    if let Some(model) = &req.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    if let Some(effort) = req.effort {
        args.push("--effort".into());
        args.push(effort.as_arg().into());
    }
    if let Some(mode) = req.mode {
        args.push("--mode".into());
        args.push(mode.as_arg().into());
    }
    if cfg.skip_permissions {
        args.push("--dangerously-skip-permissions".into());
    }
    if let Some(id) = &req.conversation {
        args.push("--conversation".into());
        args.push(id.as_str().into());
    }
    // The user's own --print-timeout in AGY_EXTRA_ARGS wins: agy would
    // take the later flag, ours, and the user's would silently do nothing.
    let users_timeout = cfg
        .extra_args
        .iter()
        .any(|a| flag_name(a) == Some("print-timeout"));
    if !users_timeout {
        args.push("--print-timeout".into());
        args.push(go_duration(
            cfg.timeout.saturating_add(Duration::from_secs(60)),
        ));
    }
    if surface.stream_json {
        args.push("--output-format".into());
        args.push("stream-json".into());
    }
    // A prompt is never an agy slash command (see `agy_prompt`); the flag
    // covers a prompt on stdin too.
    if surface.features.disable_slash_commands {
        args.push(DISABLE_SLASH_COMMANDS.into());
    }
    // The prompt itself comes on stdin (the capture's command line:
    // `--input-format stream-json --print ""`), else `req.prompt` is the
    // private file's note (`crate::run::prompt_file`).
    if surface.stdin_input {
        args.extend(["--input-format".into(), "stream-json".into()]);
        args.extend(["-p".into(), String::new()]);
    } else {
        args.push("-p".into());
        args.push(agy_prompt(&req.prompt, surface.features).into_owned());
    }
    args
}

/// Whether this agy prints its conversation id with stream-json, by
/// `agy --version`, remembered on disk per binary (see [`crate::run::agy_version`]).
pub async fn supports_stream_json(bin: &Path) -> bool {
    crate::run::agy_version::stream_json_supported(bin).await
}

/// The turn's [`Surface`], from what is known of agy's features.
fn surface_of(cfg: &RunConfig, features: AgyFeatures) -> Surface {
    let stream_json = match cfg.bind {
        BindMode::Discovery => false,
        BindMode::StreamJson => true,
        BindMode::Auto => features.stream_json_output(),
    };
    Surface {
        stream_json,
        stdin_input: crate::run::prompt_file::uses_stdin(features, stream_json),
        features,
    }
}

/// Wake-up source: inotify on the conversations directory.
struct Watcher {
    _inner: notify::RecommendedWatcher,
    rx: mpsc::Receiver<PathBuf>,
}

/// File notifications waiting for the runner. A notification is only a
/// reason to poll, and the runner drains every waiting one per wake-up
/// ([`Wake::on_change`]), so a full queue already holds a wake-up: one that
/// does not fit is dropped rather than queued while the runner waits for a
/// slow consumer (agy's WAL writes notify on every commit), and the
/// fallback tick covers the rare relevant one lost behind others.
const WAKE_CAPACITY: usize = 64;

fn watch(dir: &Path) -> Option<Watcher> {
    use notify::Watcher as _;
    let (tx, rx) = mpsc::channel(WAKE_CAPACITY);
    let mut inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            for path in event.paths {
                // Full: a wake-up is waiting already (see WAKE_CAPACITY).
                let _ = tx.try_send(path);
            }
        }
    })
    .ok()?;
    inner.watch(dir, notify::RecursiveMode::NonRecursive).ok()?;
    Some(Watcher { _inner: inner, rx })
}

/// Whether a change to `path` can matter: before binding, a conversation
/// database appearing (`*.db`; the WAL writes of concurrent runs would only
/// make every waiting runner re-run discovery); after, only ours (`<id>.db`,
/// `-wal`, `-shm`).
fn relevant(path: &Path, bound: Option<&ConversationId>) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    match bound {
        Some(id) => name.starts_with(id.as_str()),
        None => name.ends_with(".db"),
    }
}

use crate::run::process::ChildPid;

struct Tails {
    stderr: Arc<Mutex<VecDeque<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
}

impl Tails {
    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .map(|t| {
                let (a, b) = t.as_slices();
                let mut v = a.to_vec();
                v.extend_from_slice(b);
                String::from_utf8_lossy(&v).into_owned()
            })
            .unwrap_or_default()
    }

    fn stdout(&self) -> String {
        self.stdout
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    /// Forget what earlier turns of a warm agy printed.
    fn clear(&self) {
        if let Ok(mut t) = self.stderr.lock() {
            t.clear();
        }
        if let Ok(mut s) = self.stdout.lock() {
            s.clear();
        }
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
pub const EVENT_CAPACITY: usize = 64;

/// The channel a turn's events go on ([`EVENT_CAPACITY`]).
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
        let features = crate::run::agy_version::features_remembered(&cfg.agy_bin);
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
    pub async fn new(cfg: &RunConfig) -> Prelude {
        prelude(cfg).await
    }

    /// What this agy offers, when it is remembered (no agy run).
    pub fn features(&self) -> Option<AgyFeatures> {
        self.features
    }

    /// Set what this agy offers, asked of it since (the turn then does not
    /// ask again).
    pub fn set_features(&mut self, features: AgyFeatures) {
        self.features = Some(features);
    }

    /// The turn's [`Surface`] (asking agy its features if they are not
    /// remembered) and the conversations that existed before it.
    async fn surface(self, cfg: &RunConfig) -> (Surface, Snapshot) {
        let features = match self.features {
            Some(known) => known,
            None => crate::run::agy_version::agy_features(&cfg.agy_bin).await,
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
    let (surface, before) = prelude.surface(cfg).await;
    // Owns the private prompt file, if any: it goes when the turn does.
    let staged = match crate::run::prompt_file::stage(cfg, req, surface) {
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
    if !spaced_start(cfg, &cancel).await {
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
pub async fn spaced_start(cfg: &RunConfig, cancel: &CancellationToken) -> bool {
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

/// agy's process (or the guardian running it) and the readers of its
/// output. Dropped before it is reaped (a dropped turn, a panic), it takes
/// the whole tree down.
struct Agy {
    child: Spawned,
    /// agy's stdin. Under a guardian it holds the guardian's stdin: closing
    /// that (our death included) kills agy's tree.
    input: AgyInput,
    pid: ChildPid,
    tails: Tails,
    /// agy's stdout lines, parsed, when it prints stream-json.
    lines: mpsc::Receiver<Line>,
    lines_open: bool,
    /// Ids agy said it does not have (`warning: conversation "ID" not found`).
    not_found: mpsc::Receiver<String>,
    not_found_open: bool,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Agy {
    /// `private`: directories of this turn's own (the prompt file's) that the
    /// guardian removes once agy's tree is gone, even if we were killed.
    async fn spawn(
        cfg: &RunConfig,
        req: &TurnRequest,
        surface: Surface,
        private: &[&Path],
    ) -> Result<Agy, Failure> {
        let stream_json = surface.stream_json;
        let bin = cfg.agy_bin.display().to_string();
        if !is_installed(&cfg.agy_bin) {
            return Err(Failure::NotInstalled { bin });
        }
        let launch = Launch {
            program: cfg.agy_bin.clone().into_os_string(),
            args: agy_args(cfg, req, surface)
                .into_iter()
                .map(Into::into)
                .collect(),
            // Real agy ignores AGY_CONVERSATIONS_DIR; fake-agy writes where
            // we look.
            env: std::iter::once(("AGY_CONVERSATIONS_DIR", cfg.conversations_dir.as_os_str()))
                .chain(cfg.env.iter().map(|(k, v)| (k.as_str(), v.as_ref())))
                .map(|(k, v)| (k.into(), v.to_os_string()))
                .collect(),
            cwd: req.cwd.clone(),
            remove_after: private.iter().map(|p| p.to_path_buf()).collect(),
            stdin_piped: surface.stdin_input,
        };
        let spawned = match &cfg.guardian {
            Some(guardian) => guardian
                .launch(&launch)
                .await
                .map_err(|e| Failure::SpawnFailed {
                    bin: bin.clone(),
                    message: format!(
                        "its guardian ({}) did not start: {e}",
                        guardian.bin().display()
                    ),
                }),
            None => spawn_unguarded(&launch).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Failure::NotInstalled { bin: bin.clone() }
                } else {
                    Failure::SpawnFailed {
                        bin: bin.clone(),
                        message: e.to_string(),
                    }
                }
            }),
        };
        let mut child = spawned?;
        let pid = child.id();
        let input = match (&cfg.guardian, child.stdin.take()) {
            (Some(_), Some(lifeline)) => AgyInput::through_guardian(lifeline),
            (_, stdin) => AgyInput::direct(stdin),
        };
        let tails = Tails {
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            stdout: Arc::new(Mutex::new(Vec::new())),
        };
        let (tx, lines) = mpsc::channel(LINE_CAPACITY);
        let (not_found_tx, not_found) = mpsc::channel(NOT_FOUND_CAPACITY);
        let mut readers = Vec::new();
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(read_stderr(
                err,
                tails.stderr.clone(),
                not_found_tx,
            )));
        }
        if let Some(out) = child.stdout.take() {
            let sink = tails.stdout.clone();
            readers.push(tokio::spawn(read_stdout(
                out,
                sink,
                stream_json.then_some(tx),
            )));
        }
        Ok(Agy {
            input,
            child,
            pid,
            tails,
            lines,
            lines_open: stream_json,
            not_found,
            not_found_open: true,
            readers,
        })
    }
}

/// Whether `bin` can be run: a path that exists, or a name found on PATH.
fn is_installed(bin: &Path) -> bool {
    crate::run::process::find_program(bin).is_some()
}

/// agy as our own child, in a process group of its own, as the guardian
/// would have started it.
fn spawn_unguarded(launch: &Launch) -> std::io::Result<Spawned> {
    let mut cmd = launch.command();
    cmd.stdin(if launch.stdin_piped {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    die_with_parent(&mut cmd);
    let child = crate::run::process::retry_while_busy(|| cmd.spawn())?;
    // Dropped on error, `child` would be neither killed nor reaped: this
    // cannot fail inside a runtime, and if it did the process dies with
    // its pipes closed.
    Spawned::from_std(child)
}

/// Without a guardian, agy at least dies with the thread that spawned it
/// (Linux); its own children are then the drop guard's and the tree kill's.
fn die_with_parent(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// agy's stderr: its tail, kept for the end of the turn, and the lines that
/// matter while it runs ([`agy_format::stderr`]), sent on at once.
async fn read_stderr(
    mut err: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<u8>>>,
    not_found: mpsc::Sender<String>,
) {
    let mut buf = [0u8; 4096];
    // The line being read: only its start matters, so it is capped.
    let mut line: Vec<u8> = Vec::new();
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line);
                if let Some(id) = agy_format::stderr::conversation_not_found(&text) {
                    // Full: the warning is waiting already; stderr is
                    // never held up for it.
                    let _ = not_found.try_send(id.to_string());
                }
                line.clear();
            } else if line.len() < 512 {
                line.push(b);
            }
        }
        if let Ok(mut t) = tail.lock() {
            t.extend(&buf[..n]);
            while t.len() > STDERR_TAIL {
                t.pop_front();
            }
        }
    }
}

/// agy's stdout: with stream-json, each line parsed and sent on (only lines
/// that are not JSON are kept as text); otherwise the text, capped. Once
/// agy has streamed its answer as `text_delta`s (which the runner keeps), a
/// `result` line's copy of it is blanked before it is parsed, so a long
/// answer is never held twice; the runner puts it back from the deltas.
async fn read_stdout(
    out: tokio::process::ChildStdout,
    sink: Arc<Mutex<Vec<u8>>>,
    lines: Option<mpsc::Sender<Line>>,
) {
    let mut reader = BufReader::new(out);
    let mut buf = Vec::new();
    let mut saw_text = false;
    loop {
        // One huge line (a long answer's `result`) must not keep its buffer.
        if buf.capacity() > 1 << 20 {
            buf = Vec::new();
        }
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if lines.is_some() && saw_text {
            agy_format::stream_json::blank_response(&mut buf);
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(tx) = &lines {
            let line = Line::parse(text);
            saw_text |= matches!(&line, Line::StepUpdate(u) if u.text_delta.as_deref().is_some_and(|d| !d.is_empty()));
            // A warm agy's next turn starts with nothing streamed.
            saw_text &= !matches!(line, Line::Result(_));
            let keep = matches!(line, Line::NotJson(_));
            // Waits while the runner waits for its consumer: the pipe then
            // fills and agy waits too (see LINE_CAPACITY).
            let _ = tx.send(line).await;
            if !keep {
                continue;
            }
        }
        if let Ok(mut s) = sink.lock() {
            if s.len() < STDOUT_CAP {
                s.extend_from_slice(text.as_bytes());
                s.push(b'\n');
            }
        }
    }
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

/// How long the database may stay unreadable after agy's stream-json has
/// reported steps before the turn streams from stream-json alone.
const DEGRADE_AFTER: Duration = Duration::from_secs(2);

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

    fn bind(&mut self, id: ConversationId, after_idx: Option<i64>, how: BindMethod) {
        if let Some(requested) = self.lost.take().filter(|r| *r != id) {
            self.announce_new_conversation(&requested, &id);
        }
        self.followed = Some(Followed::bind(
            &self.dir,
            id,
            after_idx,
            how,
            &mut self.result,
            &mut self.outbox,
        ));
    }

    fn send(&mut self, event: Event) {
        self.result.events += 1;
        self.emit(RunEvent::Agy(event));
    }

    /// Poll the database once, forwarding what is new; right after a file
    /// notification (`notified`), wait briefly for the commit it announced.
    /// SQLite reads block, so the poll runs on a blocking thread, never on a
    /// runtime worker.
    async fn poll(&mut self, notified: bool) {
        let Some(f) = self.followed.as_mut() else {
            return;
        };
        let Some(mut poller) = f.reader.take() else {
            return;
        };
        let joined = tokio::task::spawn_blocking(move || {
            let polled = if notified {
                poller.poll_settling(SETTLE_FINE)
            } else {
                poller.poll()
            };
            (poller, polled)
        })
        .await;
        let Ok((poller, polled)) = joined else {
            // The reader panicked (a decoder bug): the turn goes on from
            // stream-json alone.
            self.db.last_problem = Some("the database reader failed".into());
            return;
        };
        self.result.last_idx = poller.last_idx();
        let path = poller.path().to_path_buf();
        f.reader = Some(poller);
        match polled {
            Poll::Ready(evs) => {
                self.db.ready = true;
                for ev in evs {
                    self.on_db_event(ev);
                }
            }
            Poll::NotReady(ReadError::Locked { .. }) => {}
            Poll::NotReady(e) => self.db.last_problem = Some(e.to_string()),
        }
        if let Some(o) = self.observer.as_mut() {
            // The recorder reads whole tables; it borrows the turn's state,
            // so it blocks here, the worker's other tasks moved away.
            let dir = &self.dir;
            crate::run::blocking::in_place(|| o.wake(dir, &path));
        }
    }

    /// Switch to stream-json as the text source, saying so once.
    fn degrade(&mut self, reason: String) {
        if self.result.degraded.is_some() {
            return;
        }
        self.emit(RunEvent::Degraded {
            reason: reason.clone(),
        });
        self.result.degraded = Some(reason);
        // Tools from stream-json only where the database showed none.
        self.stream_tools = !self.db.tools;
        let stream_tools = self.stream_tools;
        for ev in self.agy.unstreamed(stream_tools) {
            self.send(ev);
        }
    }

    /// The database has stayed unreadable while agy reports steps.
    fn check_degraded(&mut self) {
        let late = self
            .agy
            .first_step
            .is_some_and(|t| t.elapsed() >= DEGRADE_AFTER);
        if late && !self.db.ready && self.result.degraded.is_none() {
            let why = match (&self.followed, &self.db.last_problem) {
                (None, _) => "agy's conversation database could not be identified".to_string(),
                (Some(_), Some(p)) => p.clone(),
                (Some(f), None) => format!("{} was not readable", f.path.display()),
            };
            self.degrade(why);
        }
    }
}

impl Turn<'_> {
    /// Bind by discovery when agy's own word has not come (or cannot).
    async fn try_bind(&mut self, pid: u32) {
        if self.followed.is_some()
            || (self.stream_json && self.started.elapsed() < STREAM_JSON_GRACE)
        {
            return;
        }
        match self.decide(Some(pid)).await {
            Ok(Binding::Bound { id, how }) => self.bind(id, None, how),
            Ok(Binding::Ambiguous { candidates }) => {
                self.last_ambiguity = candidates.iter().map(|c| c.as_str().to_string()).collect();
                let since = *self.ambiguous_since.get_or_insert_with(Instant::now);
                if since.elapsed() > self.cfg.ambiguity_budget {
                    self.stop_reason = Some(Failure::CouldNotBind {
                        reason: format!(
                            "{} new conversation databases could belong to this run ({}); refusing to guess",
                            self.last_ambiguity.len(),
                            self.last_ambiguity.join(", ")
                        ),
                    });
                }
            }
            Ok(Binding::Waiting) | Err(_) => {}
        }
    }

    /// A step stuck in WAITING: print mode can never answer it.
    fn check_stall(&mut self) {
        let Some(f) = self.followed.as_ref() else {
            return;
        };
        let Some(poller) = f.reader.as_ref() else {
            return;
        };
        let Some(idx) = poller.waiting_step() else {
            self.waiting_since = None;
            return;
        };
        match self.waiting_since {
            Some((w, since)) if w == idx => {
                if since.elapsed() >= self.cfg.permission_stall {
                    let tool = poller
                        .tool_name(idx)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("step {idx}"));
                    self.stop_reason = Some(Failure::PermissionStall { tool });
                }
            }
            _ => self.waiting_since = Some((idx, Instant::now())),
        }
    }

    /// Follow agy until it exits or we stop it; returns its exit status if
    /// it exited on its own (left unreaped for [`Turn::finish`]).
    async fn follow(&mut self, agy: &mut Agy, cancel: &CancellationToken) {
        let mut wake = Wake::new(self.cfg, &self.dir);
        let mut notified = false;
        loop {
            self.try_bind(agy.pid.get()).await;
            self.poll(notified).await;
            self.release_held(false);
            self.check_stall();
            self.check_degraded();
            // Nothing more is read while the consumer has no room.
            if !self.deliver_or_stop(cancel).await || self.stop_reason.is_some() {
                return;
            }
            match self.wait(agy, &mut wake, cancel).await {
                Waited::Exited | Waited::Stop => return,
                Waited::TurnEnded => {
                    if let Some(w) = self.warm.as_mut() {
                        w.ended = true;
                    }
                    return;
                }
                Waited::Poll { notified: n } => notified = n,
            }
        }
    }

    /// Wait for a reason to poll: a stream-json line, a relevant file
    /// change, the fallback tick, agy's exit, an abort or the watchdog; at
    /// once when the last poll stopped at its row limit.
    async fn wait(&mut self, agy: &mut Agy, wake: &mut Wake, cancel: &CancellationToken) -> Waited {
        let behind = self.behind();
        let deadline = self.deadline;
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    self.halt(Halted::Aborted);
                    return Waited::Stop;
                }
                _ = tokio::time::sleep_until(deadline) => {
                    self.halt(Halted::TimedOut);
                    return Waited::Stop;
                }
                _ = std::future::ready(()), if behind => return Waited::Poll { notified: false },
                line = agy.lines.recv(), if agy.lines_open => match line {
                    Some(line) => {
                        let ended = matches!(line, Line::Result(_));
                        if ended && self.warm.is_none() {
                            // The turn is over: agy ends at the end of its
                            // input. Not closed before: whether an early end
                            // cancels a real agy's turn is not known. (A
                            // warm agy keeps its input for the next turn.)
                            let _ = agy.input.close();
                        }
                        let was_bound = self.followed.is_some();
                        self.on_line(line);
                        if !self.deliver_or_stop(cancel).await {
                            return Waited::Stop;
                        }
                        if ended && self.warm.is_some() {
                            return Waited::TurnEnded;
                        }
                        if !was_bound && self.followed.is_some() {
                            return Waited::Poll { notified: false };
                        }
                    }
                    None => agy.lines_open = false,
                },
                id = agy.not_found.recv(), if agy.not_found_open => match id {
                    Some(id) => {
                        self.on_not_found(&id);
                        return Waited::Poll { notified: false };
                    }
                    None => agy.not_found_open = false,
                },
                _ = agy.child.exited() => return Waited::Exited,
                Some(path) = recv_path(&mut wake.watcher) => {
                    if wake.on_change(&path, self.followed.as_ref().map(|f| &f.id)) {
                        return Waited::Poll { notified: true };
                    }
                }
                _ = settle_sleep(wake.settle), if wake.settle.is_some() => {
                    wake.next_settle();
                    return Waited::Poll { notified: false };
                }
                _ = wake.tick.tick() => return Waited::Poll { notified: false },
            }
        }
    }

    /// After agy exited on its own: its last stream-json lines, the last
    /// flush of the database, and a binding if we still have none (a fast
    /// run may exit before the first wake-up). Delivered as it goes, so an
    /// abort or the watchdog can still cut in while the consumer is slow.
    async fn trailing(&mut self, agy: &mut Agy, cancel: &CancellationToken) -> Result<(), Halted> {
        // The pipe closes when agy (and whatever holds its stdout) is gone;
        // a grandchild holding it open gets 500 ms of silence.
        let silence = Duration::from_millis(500);
        while let Ok(Some(line)) = tokio::time::timeout(silence, agy.lines.recv()).await {
            self.on_line(line);
            self.deliver(cancel).await?;
        }
        while let Ok(id) = agy.not_found.try_recv() {
            self.on_not_found(&id);
        }
        for i in 0..=self.cfg.trailing_polls {
            if self.followed.is_none() {
                self.bind_after_exit().await;
            }
            self.poll_through(cancel).await?;
            if i < self.cfg.trailing_polls {
                tokio::time::sleep(self.cfg.trailing_interval).await;
            }
        }
        Ok(())
    }

    /// [`discovery::decide`] (directory and `/proc` scans) on a blocking
    /// thread.
    async fn decide(&mut self, pid: Option<u32>) -> std::io::Result<Binding> {
        let (dir, before) = (self.dir.clone(), self.before.clone());
        tokio::task::spawn_blocking(move || discovery::decide(&dir, &before, pid))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    async fn bind_after_exit(&mut self) {
        match self.decide(None).await {
            Ok(Binding::Bound { id, how }) => self.bind(id, None, how),
            Ok(Binding::Ambiguous { candidates }) => {
                // agy is gone, so its open files cannot settle it; its own
                // record of our prompt can, if it is unique.
                let (dir, prompt, asked) = (
                    self.dir.clone(),
                    self.req.prompt.clone(),
                    candidates.clone(),
                );
                let matched = tokio::task::spawn_blocking(move || {
                    discovery::match_prompt(&dir, &asked, &prompt)
                })
                .await
                .unwrap_or(None);
                match matched {
                    Some(id) => self.bind(id, None, BindMethod::PromptMatch),
                    None => {
                        self.last_ambiguity =
                            candidates.iter().map(|c| c.as_str().to_string()).collect()
                    }
                }
            }
            Ok(Binding::Waiting) | Err(_) => {}
        }
    }

    /// Reap agy, settle the text source, and classify the turn.
    async fn finish(mut self, mut agy: Agy, cancel: &CancellationToken) -> RunResult {
        let stopping = self.result.aborted || self.result.timed_out || self.stop_reason.is_some();
        if stopping {
            // An abort or timeout is said at once, before agy is reaped, to
            // a consumer with room; one that is not reading does not hold it
            // up. (Our own stop's events wait for room in `deliver_last`.)
            if self.result.aborted || self.result.timed_out {
                self.deliver_now();
            }
            terminate(&mut agy.child, self.cfg.kill_grace).await;
        } else {
            // agy has exited and is not reaped yet: as a zombie it keeps
            // its pid and its process group, so what its tree left in that
            // group (background work; under a guardian nothing, unless the
            // guardian itself was killed) can be ended without any risk of
            // reaching a stranger. Then it is reaped, and never signalled
            // again.
            agy.child.signal_group(nix::sys::signal::Signal::SIGTERM);
            if let Ok(status) = agy.child.wait().await {
                use std::os::unix::process::ExitStatusExt;
                self.result.exit_code = status.code();
                self.result.signal = status.signal();
            }
            if let Err(why) = self.trailing(&mut agy, cancel).await {
                self.halt(why);
            }
        }
        // Nothing reads agy's lines from here: a reader waiting for room
        // gives up and drains the pipe to its end.
        agy.lines.close();
        // Grandchildren can hold the pipes open; do not wait on them for long.
        for r in agy.readers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_millis(500), r).await;
        }
        self.conclude(&agy.tails, !stopping, cancel).await
    }

    /// The end of every turn, once agy has said all it will: its output's
    /// tails kept, held events released, the two sources settled (unless
    /// the turn was stopped: `settle`), the last events handed over, and
    /// the turn classified.
    async fn conclude(
        mut self,
        tails: &Tails,
        settle: bool,
        cancel: &CancellationToken,
    ) -> RunResult {
        self.result.stderr_tail = tails.stderr();
        self.result.stdout = tails.stdout();
        self.release_held(true);
        if settle {
            self.fill_missing_text();
            self.check_answer();
        }
        self.deliver_last(cancel).await;
        self.settle_result();
        self.name_quota(cancel).await;
        self.restore_response();
        self.result
    }

    /// A turn that failed on agy's quota names the empty bucket and when it
    /// refills ([`RunConfig::usage`]). Only a failed turn waits for this.
    async fn name_quota(&mut self, cancel: &CancellationToken) {
        let cfg = self.cfg;
        let Some(loader) = &cfg.usage else {
            return;
        };
        if let Some(failure) = self.result.failure.as_mut().filter(|f| f.wants_quota()) {
            failure.set_quota(loader.quota_failure_words(cancel).await);
        }
    }

    /// The turn's last events: waited for as any (a turn that ended on its
    /// own still gives its consumer everything), unless the turn is being
    /// stopped or an abort or the watchdog cuts in now.
    async fn deliver_last(&mut self, cancel: &CancellationToken) {
        if !(self.result.aborted || self.result.timed_out) {
            if let Err(why) = self.deliver(cancel).await {
                self.halt(why);
            }
        }
        self.deliver_now();
    }

    /// The database gave no answer text although agy answered: stream the
    /// answer from stream-json, saying why.
    fn fill_missing_text(&mut self) {
        if self.db.text() || self.result.degraded.is_some() {
            return;
        }
        // No conversation at all (a slash command's output): nothing to
        // stream as an answer; the failure says what happened.
        let no_conversation = self
            .agy
            .result
            .as_ref()
            .is_some_and(|r| r.conversation_id.is_empty());
        if no_conversation && !self.agy.saw_init {
            return;
        }
        let response = self
            .agy
            .result
            .as_ref()
            .map(|r| r.response.clone())
            .unwrap_or_default();
        if !self.agy.has_texts() && !response.is_empty() {
            let idx = self.result.last_idx.unwrap_or(0);
            self.agy.set_text(idx, response);
        }
        // Tool steps only stream-json saw (no database to read) are shown
        // too, even when agy gave no answer (a denial).
        let unseen_tools = self.agy.ran_tools && !self.db.tools;
        if self.agy.has_texts() || unseen_tools {
            let why = match &self.db.last_problem {
                Some(p) if !self.db.ready => p.clone(),
                None if !self.db.ready => match &self.followed {
                    Some(f) => format!("{} was not readable", f.path.display()),
                    None => "agy's conversation database could not be identified".into(),
                },
                _ if self.agy.has_texts() => {
                    "agy's database held no answer text for this turn".into()
                }
                _ => "agy's database held none of this turn's tool steps".into(),
            };
            self.degrade(why);
        }
    }

    fn settle_result(&mut self) {
        if let Some(f) = &self.followed {
            if let Some(p) = &f.reader {
                self.result.poll_stats = p.stats();
            }
        }
        self.result.usage = self.usage();
        self.result.stream_stats = self.agy.stats.clone();
        self.result.agy_result = self.agy.result.take();
        self.result.duration_ms = self.started.elapsed().as_millis() as u64;
        let report = AgyReport {
            exit_code: self.result.exit_code,
            signal: self.result.signal,
            stderr: &self.result.stderr_tail,
            result: self.result.agy_result.as_ref(),
            db_errors: &self.db.errors,
            ran_tools: self.db.tools || self.agy.ran_tools,
            answered: self.db.text()
                || self.agy.had_text
                || self
                    .result
                    .agy_result
                    .as_ref()
                    .is_some_and(|r| !r.response.is_empty()),
            model: self.req.model.as_deref(),
            features: self.features,
            conversation_began: self.conversation_began(),
        };
        let agy_failure = crate::run::failure::classify(&report);
        let notice = crate::run::failure::denial_notice(&report);
        self.result.notices.extend(notice);
        self.result.failure = self.our_failure().or(agy_failure).or_else(|| {
            (self.followed.is_none() && self.result.degraded.is_none())
                .then(|| self.unbound_failure())
        });
    }

    /// Whether agy began (or resumed) a conversation this turn: its init
    /// line, a database it created, or steps read from the resumed one.
    fn conversation_began(&self) -> bool {
        let created = self
            .followed
            .as_ref()
            .is_some_and(|f| f.how != BindMethod::Given);
        self.agy.saw_init || created || self.db.events
    }

    /// Our own reasons, which win over anything agy said.
    fn our_failure(&mut self) -> Option<Failure> {
        if self.result.aborted {
            return Some(Failure::Aborted);
        }
        if let Some(f) = self.stop_reason.take() {
            return Some(f);
        }
        self.result.timed_out.then(|| Failure::TimedOut {
            minutes: self.cfg.timeout.as_secs().div_ceil(60),
        })
    }

    fn unbound_failure(&self) -> Failure {
        Failure::CouldNotBind {
            reason: if self.last_ambiguity.is_empty() {
                "agy exited without creating a conversation database".into()
            } else {
                format!(
                    "{} candidate databases ({}); refusing to guess",
                    self.last_ambiguity.len(),
                    self.last_ambiguity.join(", ")
                )
            },
        }
    }
}

/// The database's usage stats (metadata 9) in stream-json's terms.
fn usage_of(u: &agy_format::steps::Usage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        thinking_tokens: u.thinking_tokens,
        cache_read_tokens: u.cache_read_tokens,
        total_tokens: u.input_tokens + u.output_tokens,
    }
}

enum Waited {
    /// `notified`: woken by a change to the database's files.
    Poll {
        notified: bool,
    },
    /// agy (or its guardian) exited; not reaped yet.
    Exited,
    Stop,
    /// A warm agy printed the turn's `result`: the turn is over, agy is not.
    TurnEnded,
}

/// The wake-up policy: file notifications with settle re-checks and the
/// fallback tick.
struct Wake {
    watcher: Option<Watcher>,
    tick: tokio::time::Interval,
    /// After a file notification: (since, delay) of the next settle re-check.
    settle: Option<(tokio::time::Instant, Duration)>,
}

impl Wake {
    fn new(cfg: &RunConfig, dir: &Path) -> Wake {
        let mut tick = tokio::time::interval(cfg.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Wake {
            watcher: match cfg.wake {
                WakeMode::Events => watch(dir),
                WakeMode::PollOnly => None,
            },
            tick,
            settle: None,
        }
    }

    /// A file changed: whether to poll now (coalescing a burst into one).
    fn on_change(&mut self, path: &Path, bound: Option<&ConversationId>) -> bool {
        let mut wake = relevant(path, bound);
        if let Some(w) = self.watcher.as_mut() {
            while let Ok(p) = w.rx.try_recv() {
                wake |= relevant(&p, bound);
            }
        }
        if wake {
            // The write we were told about becomes visible only once agy's
            // commit (and its fsync) completes, which sends no notification:
            // re-check a few times soon.
            self.settle = Some((tokio::time::Instant::now(), SETTLE_FIRST));
        }
        wake
    }

    fn next_settle(&mut self) {
        self.settle = self.settle.and_then(|(_, step)| {
            let next = step * 2;
            (next <= SETTLE_LAST).then(|| (tokio::time::Instant::now(), next))
        });
    }
}

/// `now + d`, saturating far in the future instead of overflowing.
fn deadline_after(d: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

async fn recv_path(w: &mut Option<Watcher>) -> Option<PathBuf> {
    match w {
        Some(w) => w.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The conversation this turn follows, once bound.
struct Followed {
    id: ConversationId,
    how: BindMethod,
    path: PathBuf,
    /// Out on a blocking thread while a poll runs; gone if it panicked.
    reader: Option<Poller>,
}

impl Followed {
    /// Follow `id` from after `after_idx`, recording how it was bound in the
    /// result and telling the caller.
    fn bind(
        dir: &Path,
        id: ConversationId,
        after_idx: Option<i64>,
        how: BindMethod,
        result: &mut RunResult,
        outbox: &mut VecDeque<RunEvent>,
    ) -> Followed {
        result.conversation_id = Some(id.as_str().to_string());
        result.bind_method = Some(how);
        outbox.push_back(RunEvent::Bound {
            conversation_id: id.as_str().to_string(),
            method: how,
        });
        let path = discovery::db_path(dir, &id);
        Followed {
            reader: Some(Poller::new(&path, after_idx)),
            path,
            id,
            how,
        }
    }
}

/// The last step a conversation's database holds now (a SQLite read, on a
/// blocking thread).
async fn last_idx_off_thread(db: PathBuf) -> Option<i64> {
    tokio::task::spawn_blocking(move || crate::follow::poller::last_idx(&db))
        .await
        .unwrap_or(None)
}

/// SIGTERM the tree, wait up to `grace`, then SIGKILL, and reap. Every
/// signal goes out before the reap, while the pid and group are its own.
async fn terminate(child: &mut Spawned, grace: Duration) {
    use nix::sys::signal::Signal;
    child.signal_tree(Signal::SIGTERM).await;
    if tokio::time::timeout(grace, child.exited()).await.is_err() {
        child.signal_tree(Signal::SIGKILL).await;
    } else {
        // What is left of its group is not wanted either.
        child.signal_group(Signal::SIGKILL);
    }
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::agy_version::{parse_version, STREAM_JSON_MIN_VERSION};

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(660)), "11m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
        assert_eq!(go_duration(Duration::MAX), "2562047h0m0s");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.2.8\n"), Some((1, 2, 8)));
        assert_eq!(parse_version("agy version v1.1.14"), Some((1, 1, 14)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("1.1.7").map(|v| v >= STREAM_JSON_MIN_VERSION) == Some(false));
    }

    #[test]
    fn a_prompt_starting_with_a_slash_stays_a_prompt() {
        let cfg = RunConfig::default();
        let req = TurnRequest {
            prompt: "/model is wrong here, why?".into(),
            ..TurnRequest::default()
        };
        let with_flag = Surface {
            stream_json: true,
            stdin_input: false,
            features: AgyFeatures {
                version: Some((1, 2, 14)),
                disable_slash_commands: true,
            },
        };
        let args = agy_args(&cfg, &req, with_flag);
        assert!(args.contains(&"--disable-slash-commands".to_string()));
        assert_eq!(
            args.last().map(String::as_str),
            Some("/model is wrong here, why?")
        );
        let without = Surface {
            stream_json: true,
            stdin_input: false,
            features: AgyFeatures {
                version: Some((1, 1, 9)),
                disable_slash_commands: false,
            },
        };
        let args = agy_args(&cfg, &req, without);
        assert!(!args.contains(&"--disable-slash-commands".to_string()));
        assert_eq!(
            args.last().map(String::as_str),
            Some(" /model is wrong here, why?")
        );
        // Any other prompt is sent as it is.
        let plain = TurnRequest {
            prompt: "a /path".into(),
            ..TurnRequest::default()
        };
        assert_eq!(
            agy_args(&cfg, &plain, without).last().map(String::as_str),
            Some("a /path")
        );
        // On stdin the same rule holds: the flag where agy has it, else the
        // leading space.
        assert_eq!(agy_prompt(&req.prompt, with_flag.features), req.prompt);
        assert_eq!(
            agy_prompt(&req.prompt, without.features),
            " /model is wrong here, why?"
        );
    }

    #[test]
    fn a_stdin_turn_has_no_prompt_on_the_command_line() {
        let req = TurnRequest {
            prompt: "secret words".into(),
            ..TurnRequest::default()
        };
        let surface = surface_of(
            &RunConfig::default(),
            AgyFeatures {
                version: Some((1, 2, 7)),
                disable_slash_commands: false,
            },
        );
        assert!(surface.stdin_input && surface.stream_json);
        let args = agy_args(&RunConfig::default(), &req, surface);
        assert!(!args.iter().any(|a| a.contains("secret")), "{args:?}");
        let tail: Vec<&str> = args[args.len() - 6..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--output-format",
                "stream-json",
                "--input-format",
                "stream-json",
                "-p",
                ""
            ]
        );
    }

    #[test]
    fn args_follow_agy_surface() {
        let cfg = RunConfig {
            extra_args: vec!["--sandbox".into()],
            timeout: Duration::from_secs(600),
            ..RunConfig::default()
        };
        let req = TurnRequest {
            prompt: "-not a flag".into(),
            model: Some("gemini-3.7-flash".into()),
            effort: Some(Effort::High),
            mode: Some(Mode::Plan),
            conversation: ConversationId::parse("0f8fad5b-d9cb-469f-a165-70867728950e").ok(),
            add_dirs: vec![PathBuf::from("/tmp/x")],
            ..TurnRequest::default()
        };
        let args = agy_args(&cfg, &req, Surface::default());
        assert_eq!(
            args,
            [
                "--add-dir",
                "/tmp/x",
                "--sandbox",
                "--model",
                "gemini-3.7-flash",
                "--effort",
                "high",
                "--mode",
                "plan",
                "--dangerously-skip-permissions",
                "--conversation",
                "0f8fad5b-d9cb-469f-a165-70867728950e",
                "--print-timeout",
                "11m0s",
                "-p",
                "-not a flag"
            ]
        );
    }
}
