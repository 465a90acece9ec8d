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

pub use crate::agy_version::{parse_version, STREAM_JSON_MIN_VERSION};
use crate::discovery::{self, BindMethod, Binding, ConversationId, Snapshot};
use crate::events::Event;
use crate::poller::{Poll, PollStats, Poller};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// An enum spelled as fixed words on agy's command line and in ours:
/// `as_arg`, `FromStr` (with an error listing the words) and serde as the
/// word.
macro_rules! word_enum {
    ($(#[$m:meta])* $name:ident $what:literal { $($(#[$vm:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vm])* $variant,)+
        }

        impl $name {
            pub fn as_arg(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok($name::$variant),)+
                    other => Err(format!(
                        concat!("unknown ", $what, " {:?} (expected one of: {})"),
                        other,
                        [$($word),+].join(", ")
                    )),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_arg())
            }
        }
    };
}

/// How the runner wakes up to poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeMode {
    /// inotify on the conversations directory, plus the fallback interval.
    Events,
    /// Only the interval (filesystems without notifications; benchmarks).
    PollOnly,
}

word_enum! {
    /// How the conversation id is bound.
    BindMode "bind mode" {
        /// stream-json when `agy --version` says it is supported (>= 1.1.8),
        /// otherwise discovery. Falls back to discovery if no `init` line comes.
        Auto = "auto",
        /// Snapshot/diff, process tree and subagent filter only.
        Discovery = "discovery",
        /// Pass `--output-format stream-json` and take the id from the `init` line.
        StreamJson = "stream-json",
    }
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
        }
    }
}

impl RunConfig {
    /// Defaults with `AGY_BIN`, `AGY_EXTRA_ARGS`, `AGY_CONVERSATIONS_DIR`,
    /// `AGY_BIND` and `AGY_WAKE` applied. Permissions and mode are settings
    /// (`config::Config`, which reads `AGY_SKIP_PERMISSIONS` and `AGY_MODE`).
    pub fn from_env() -> RunConfig {
        let mut cfg = RunConfig::default();
        if let Some(bin) = env_nonempty("AGY_BIN") {
            cfg.agy_bin = PathBuf::from(bin);
        }
        if let Some(extra) = env_nonempty("AGY_EXTRA_ARGS") {
            cfg.extra_args = extra.split_whitespace().map(str::to_string).collect();
        }
        if let Some(Ok(mode)) = env_nonempty("AGY_BIND").map(|v| v.parse()) {
            cfg.bind = mode;
        }
        if env_nonempty("AGY_WAKE").as_deref() == Some("poll") {
            cfg.wake = WakeMode::PollOnly;
        }
        cfg
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

word_enum! {
    /// `--mode`.
    Mode "mode" {
        AcceptEdits = "accept-edits",
        Plan = "plan",
    }
}

word_enum! {
    /// `--effort`, ordered low to high.
    Effort "effort" {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

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
    /// A decoded agy event (serialised as the event itself).
    #[serde(untagged)]
    Agy(Event),
}

/// Why a turn failed, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    #[error(
        "agy is not installed: {bin} was not found (install the Antigravity CLI or set AGY_BIN)"
    )]
    NotInstalled { bin: String },
    #[error("could not start agy ({bin}): {message}")]
    SpawnFailed { bin: String, message: String },
    #[error("agy is not signed in: run `agy` once interactively to sign in, then retry")]
    NotSignedIn,
    #[error("agy hit its model quota (429): {message}")]
    Quota { message: String },
    #[error("could not bind agy's conversation database: {reason}")]
    CouldNotBind { reason: String },
    #[error("agy stalled on a permission prompt for {tool}; print mode cannot answer it (enable --dangerously-skip-permissions, e.g. unset AGY_SKIP_PERMISSIONS=0 or run `agy-bridge config permissions on`)")]
    PermissionStall { tool: String },
    #[error("agy did not finish within the {minutes}-minute timeout and was stopped")]
    TimedOut { minutes: u64 },
    #[error("aborted")]
    Aborted,
    #[error("agy gave up at its print timeout and returned partial output")]
    PrintTimeout,
    #[error("agy failed (exit {code}): {message}")]
    AgyFailed { code: i32, message: String },
    #[error("agy was killed by signal {signal}")]
    Killed { signal: i32 },
}

/// Everything known about a finished turn.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub conversation_id: Option<String>,
    pub bind_method: Option<BindMethod>,
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
    pub failure: Option<Failure>,
}

impl RunResult {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Settle re-checks after a file notification: 1, 2, 4, … 64 ms later. A
/// WAL write notifies before the commit is visible to readers (SQLite syncs
/// the WAL, then publishes the commit in shared memory, which notifies
/// nobody); each re-check is one `PRAGMA data_version`.
const SETTLE_FIRST: Duration = Duration::from_millis(1);
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
const STDOUT_CAP: usize = 4 * 1024 * 1024;

/// Format a duration as Go does for `--print-timeout` (e.g. `11m0s`).
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// The argument list for one turn (agy-format.md §7, seed-ARCHITECTURE.md).
pub fn agy_args(cfg: &RunConfig, req: &TurnRequest, stream_json: bool) -> Vec<String> {
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
    args.push("--print-timeout".into());
    args.push(go_duration(cfg.timeout + Duration::from_secs(60)));
    if stream_json {
        args.push("--output-format".into());
        args.push("stream-json".into());
    }
    args.push("-p".into());
    args.push(req.prompt.clone());
    args
}

/// Whether this agy prints its conversation id with stream-json, by
/// `agy --version`, remembered on disk per binary (see [`crate::agy_version`]).
pub async fn supports_stream_json(bin: &Path) -> bool {
    crate::agy_version::stream_json_supported(bin).await
}

/// The highest idx in a conversation database, if it can be read.
fn current_last_idx(path: &Path) -> Option<i64> {
    let conn = crate::poller::open_read_only(path).ok()?;
    conn.query_row("SELECT MAX(idx) FROM steps", [], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .ok()
    .flatten()
}

/// Wake-up source: inotify on the conversations directory.
struct Watcher {
    _inner: notify::RecommendedWatcher,
    rx: mpsc::UnboundedReceiver<PathBuf>,
}

fn watch(dir: &Path) -> Option<Watcher> {
    use notify::Watcher as _;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            for path in event.paths {
                let _ = tx.send(path);
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

/// Signal agy's whole tree: its process group, the groups of descendants that
/// made their own (agy's run_command children do), and each descendant.
fn signal_tree(root: u32, sig: nix::sys::signal::Signal) {
    use nix::sys::signal::{kill, killpg};
    use nix::unistd::{getpgid, getpgrp, Pid};
    let own = getpgrp();
    let mut pids = discovery::process_tree(root);
    if !pids.contains(&root) {
        pids.push(root);
    }
    let mut groups: Vec<Pid> = vec![Pid::from_raw(root as i32)];
    for pid in &pids {
        if let Ok(g) = getpgid(Some(Pid::from_raw(*pid as i32))) {
            if g != own && !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    for g in groups {
        if g != own && g.as_raw() > 1 {
            let _ = killpg(g, sig);
        }
    }
    for pid in pids {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
}

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
}

/// Something that wants to look at the bound database on every wake-up, as
/// the poller does (the recorder captures whole tables this way). Called on
/// the runner's task right after each poll, including the trailing polls.
pub trait Observer: Send {
    /// `db` is the bound conversation database; `dir` the conversations
    /// directory (subagent databases live there too).
    fn wake(&mut self, dir: &Path, db: &Path);
}

/// Run one turn. Events go to `events` as they happen; the result comes back
/// when agy's tree is gone. Cancel `cancel` to abort.
pub async fn run(
    cfg: &RunConfig,
    req: &TurnRequest,
    cancel: CancellationToken,
    events: mpsc::UnboundedSender<RunEvent>,
) -> RunResult {
    run_observed(cfg, req, cancel, events, None).await
}

/// [`run`], with an [`Observer`] woken alongside the poller.
pub async fn run_observed(
    cfg: &RunConfig,
    req: &TurnRequest,
    cancel: CancellationToken,
    events: mpsc::UnboundedSender<RunEvent>,
    mut observer: Option<&mut dyn Observer>,
) -> RunResult {
    let started = Instant::now();
    let mut result = RunResult {
        exit_code: None,
        signal: None,
        conversation_id: None,
        bind_method: None,
        last_idx: None,
        aborted: false,
        timed_out: false,
        stderr_tail: String::new(),
        stdout: String::new(),
        duration_ms: 0,
        events: 0,
        poll_stats: PollStats::default(),
        failure: None,
    };
    let dir = cfg.conversations_dir.clone();
    // agy creates this directory itself; creating it first lets us watch it.
    let _ = std::fs::create_dir_all(&dir);

    let stream_json = match cfg.bind {
        BindMode::Discovery => false,
        BindMode::StreamJson => true,
        BindMode::Auto => supports_stream_json(&cfg.agy_bin).await,
    };

    // Bind up front when resuming; otherwise snapshot before spawning.
    let before: Snapshot = discovery::snapshot(&dir).unwrap_or_default();
    let mut followed: Option<Followed> = req.conversation.as_ref().map(|id| {
        let after = req
            .after_idx
            .or_else(|| current_last_idx(&discovery::db_path(&dir, id)));
        Followed::bind(
            &dir,
            id.clone(),
            after,
            BindMethod::Given,
            &mut result,
            &events,
        )
    });

    let mut watcher = match cfg.wake {
        WakeMode::Events => watch(&dir),
        WakeMode::PollOnly => None,
    };

    let mut cmd = Command::new(&cfg.agy_bin);
    cmd.args(agy_args(cfg, req, stream_json))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Real agy ignores this; fake-agy writes where we look.
        .env("AGY_CONVERSATIONS_DIR", &cfg.conversations_dir)
        .envs(cfg.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .process_group(0)
        .kill_on_drop(false);
    if let Some(cwd) = &req.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let bin = cfg.agy_bin.display().to_string();
            result.failure = Some(if e.kind() == std::io::ErrorKind::NotFound {
                Failure::NotInstalled { bin }
            } else {
                Failure::SpawnFailed {
                    bin,
                    message: e.to_string(),
                }
            });
            result.duration_ms = started.elapsed().as_millis() as u64;
            return result;
        }
    };
    let pid = child.id().unwrap_or(0);
    let _ = events.send(RunEvent::Started { pid });

    // Readers: a bounded stderr tail, stdout (and the stream-json init line).
    let tails = Tails {
        stderr: Arc::new(Mutex::new(VecDeque::new())),
        stdout: Arc::new(Mutex::new(Vec::new())),
    };
    let (init_tx, mut init_rx) = mpsc::unbounded_channel::<String>();
    let mut readers = Vec::new();
    if let Some(mut err) = child.stderr.take() {
        let tail = tails.stderr.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = tail.lock() {
                    t.extend(&buf[..n]);
                    while t.len() > STDERR_TAIL {
                        t.pop_front();
                    }
                }
            }
        }));
    }
    if let Some(out) = child.stdout.take() {
        let sink = tails.stdout.clone();
        readers.push(tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            let mut first = true;
            while let Ok(Some(line)) = lines.next_line().await {
                if first && stream_json {
                    if let Some(id) = init_conversation_id(&line) {
                        let _ = init_tx.send(id);
                    }
                }
                first = false;
                if let Ok(mut s) = sink.lock() {
                    if s.len() < STDOUT_CAP {
                        s.extend_from_slice(line.as_bytes());
                        s.push(b'\n');
                    }
                }
            }
        }));
    }

    let deadline = tokio::time::Instant::now() + cfg.timeout;
    let mut tick = tokio::time::interval(cfg.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut exit_status: Option<std::process::ExitStatus> = None;
    let mut ambiguous_since: Option<Instant> = None;
    let mut last_ambiguity: Vec<String> = Vec::new();
    let mut waiting_since: Option<(i64, Instant)> = None;
    // After a file notification: (since, delay) of the next settle re-check.
    let mut settle: Option<(tokio::time::Instant, Duration)> = None;
    let mut stall: Option<Failure> = None;
    let mut bind_failure: Option<Failure> = None;
    let mut error_messages: Vec<String> = Vec::new();

    // Poll once, forwarding events; returns false when the turn must stop.
    macro_rules! poll_once {
        () => {{
            if let Some(p) = followed.as_mut().map(|f| &mut f.poller) {
                if let Poll::Ready(evs) = p.poll() {
                    for ev in evs {
                        match &ev {
                            Event::Error { message, .. } => error_messages.push(message.clone()),
                            _ => {}
                        }
                        result.events += 1;
                        let _ = events.send(RunEvent::Agy(ev));
                    }
                }
                result.last_idx = p.last_idx();
                if let Some(o) = observer.as_mut() {
                    o.wake(&dir, p.path());
                }
            }
        }};
    }

    loop {
        // Bind if we have not yet.
        if followed.is_none() {
            match init_id(&mut init_rx) {
                Some(id) => {
                    followed = Some(Followed::bind(
                        &dir,
                        id,
                        None,
                        BindMethod::StreamJson,
                        &mut result,
                        &events,
                    ));
                }
                // With stream-json the init line is authoritative; discovery
                // is only the fallback when it does not come.
                None if stream_json && started.elapsed() < STREAM_JSON_GRACE => {}
                None => match discovery::decide(&dir, &before, Some(pid)) {
                    Ok(Binding::Bound { id, how }) => {
                        followed = Some(Followed::bind(&dir, id, None, how, &mut result, &events));
                    }
                    Ok(Binding::Ambiguous { candidates }) => {
                        last_ambiguity =
                            candidates.iter().map(|c| c.as_str().to_string()).collect();
                        let since = *ambiguous_since.get_or_insert_with(Instant::now);
                        if since.elapsed() > cfg.ambiguity_budget {
                            bind_failure = Some(Failure::CouldNotBind {
                                reason: format!(
                                    "{} new conversation databases could belong to this run ({}); refusing to guess",
                                    last_ambiguity.len(),
                                    last_ambiguity.join(", ")
                                ),
                            });
                            break;
                        }
                    }
                    Ok(Binding::Waiting) | Err(_) => {}
                },
            }
        }
        poll_once!();

        // A step stuck in WAITING: print mode can never answer it.
        if let Some(idx) = followed.as_ref().and_then(|f| f.poller.waiting_step()) {
            match waiting_since {
                Some((w, since)) if w == idx => {
                    if since.elapsed() >= cfg.permission_stall {
                        stall = Some(Failure::PermissionStall {
                            tool: followed
                                .as_ref()
                                .and_then(|f| f.poller.tool_name(idx))
                                .map(str::to_string)
                                .unwrap_or_else(|| format!("step {idx}")),
                        });
                        break;
                    }
                }
                _ => waiting_since = Some((idx, Instant::now())),
            }
        } else {
            waiting_since = None;
        }

        // Wait for a reason to poll: a relevant file change, the fallback
        // tick, agy's exit, an abort or the watchdog.
        let stop = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    result.aborted = true;
                    let _ = events.send(RunEvent::Aborted);
                    break true;
                }
                _ = tokio::time::sleep_until(deadline) => {
                    result.timed_out = true;
                    let _ = events.send(RunEvent::TimedOut);
                    break true;
                }
                status = child.wait() => {
                    exit_status = status.ok();
                    break true;
                }
                Some(id) = init_rx.recv(), if followed.is_none() => {
                    if let Ok(id) = ConversationId::parse(&id) {
                        followed = Some(Followed::bind(&dir, id, None, BindMethod::StreamJson, &mut result, &events));
                    }
                    break false;
                }
                Some(path) = recv_path(&mut watcher) => {
                    let mut wake = relevant(&path, followed.as_ref().map(|f| &f.id));
                    // Coalesce a burst of notifications into one poll.
                    if let Some(w) = watcher.as_mut() {
                        while let Ok(p) = w.rx.try_recv() {
                            wake |= relevant(&p, followed.as_ref().map(|f| &f.id));
                        }
                    }
                    if wake {
                        // The write we were told about becomes visible only
                        // once agy's commit (and its fsync) completes, which
                        // sends no notification: re-check a few times soon.
                        settle = Some((tokio::time::Instant::now(), SETTLE_FIRST));
                        break false;
                    }
                }
                _ = settle_sleep(settle), if settle.is_some() => {
                    settle = settle.and_then(|(_, step)| {
                        let next = step * 2;
                        (next <= SETTLE_LAST).then(|| (tokio::time::Instant::now(), next))
                    });
                    break false;
                }
                _ = tick.tick() => break false,
            }
        };
        if stop {
            break;
        }
    }

    let stopping = result.aborted || result.timed_out || stall.is_some() || bind_failure.is_some();
    if stopping {
        terminate(&mut child, pid, cfg.kill_grace).await;
        exit_status = None;
    } else {
        // agy exited on its own: catch the last flush, then bind if we still
        // could not (a fast run may exit before the first wake-up).
        for i in 0..=cfg.trailing_polls {
            if followed.is_none() {
                // agy's own word first: its init line may still be in the pipe.
                if let Some(id) = init_id(&mut init_rx) {
                    followed = Some(Followed::bind(
                        &dir,
                        id,
                        None,
                        BindMethod::StreamJson,
                        &mut result,
                        &events,
                    ));
                }
            }
            if followed.is_none() {
                let decided = discovery::decide(&dir, &before, None);
                if let Ok(Binding::Bound { id, how }) = decided {
                    followed = Some(Followed::bind(&dir, id, None, how, &mut result, &events));
                } else if let Ok(Binding::Ambiguous { candidates }) = &decided {
                    // agy is gone, so its open files cannot settle it; its
                    // own record of our prompt can, if it is unique.
                    if let Some(id) = discovery::match_prompt(&dir, candidates, &req.prompt) {
                        followed = Some(Followed::bind(
                            &dir,
                            id,
                            None,
                            BindMethod::PromptMatch,
                            &mut result,
                            &events,
                        ));
                    } else {
                        last_ambiguity =
                            candidates.iter().map(|c| c.as_str().to_string()).collect();
                    }
                }
            }
            poll_once!();
            if i < cfg.trailing_polls {
                tokio::time::sleep(cfg.trailing_interval).await;
            }
        }
        // Leftovers in agy's group (background work) die with the turn.
        signal_tree(pid, nix::sys::signal::Signal::SIGTERM);
    }
    if let Some(status) = exit_status {
        use std::os::unix::process::ExitStatusExt;
        result.exit_code = status.code();
        result.signal = status.signal();
    }

    // Grandchildren can hold the pipes open; do not wait on them for long.
    for r in readers {
        // On timeout the reader is abandoned; its task ends when the pipe closes.
        let _ = tokio::time::timeout(Duration::from_millis(500), r).await;
    }
    if let Some(f) = &followed {
        result.poll_stats = f.poller.stats();
    }
    result.stderr_tail = tails.stderr();
    result.stdout = tails.stdout();
    result.duration_ms = started.elapsed().as_millis() as u64;

    result.failure = classify(
        &result,
        cfg,
        stall,
        bind_failure,
        followed.is_some(),
        &error_messages,
        &last_ambiguity,
    );
    result
}

/// A valid conversation id from the stream-json `init` line, if it came.
fn init_id(rx: &mut mpsc::UnboundedReceiver<String>) -> Option<ConversationId> {
    rx.try_recv()
        .ok()
        .and_then(|id| ConversationId::parse(&id).ok())
}

fn init_conversation_id(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("type")?.as_str()? != "init" {
        return None;
    }
    Some(v.get("conversation_id")?.as_str()?.to_string())
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
    poller: Poller,
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
        events: &mpsc::UnboundedSender<RunEvent>,
    ) -> Followed {
        result.conversation_id = Some(id.as_str().to_string());
        result.bind_method = Some(how);
        let _ = events.send(RunEvent::Bound {
            conversation_id: id.as_str().to_string(),
            method: how,
        });
        Followed {
            poller: Poller::new(discovery::db_path(dir, &id), after_idx),
            id,
        }
    }
}

/// SIGTERM the tree, wait up to `grace`, then SIGKILL, and reap.
async fn terminate(child: &mut tokio::process::Child, pid: u32, grace: Duration) {
    use nix::sys::signal::Signal;
    signal_tree(pid, Signal::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_tree(pid, Signal::SIGKILL);
        let _ = child.wait().await;
    } else {
        // agy is gone; anything left in its groups is not wanted either.
        signal_tree(pid, Signal::SIGKILL);
    }
}

fn classify(
    r: &RunResult,
    cfg: &RunConfig,
    stall: Option<Failure>,
    bind_failure: Option<Failure>,
    bound: bool,
    errors: &[String],
    ambiguity: &[String],
) -> Option<Failure> {
    if r.aborted {
        return Some(Failure::Aborted);
    }
    if let Some(s) = stall {
        return Some(s);
    }
    if r.timed_out {
        return Some(Failure::TimedOut {
            minutes: cfg.timeout.as_secs().div_ceil(60),
        });
    }
    if let Some(b) = bind_failure {
        return Some(b);
    }
    let stderr = &r.stderr_tail;
    if stderr.contains("Please sign in") || stderr.contains("Waiting for authentication") {
        return Some(Failure::NotSignedIn);
    }
    let is_quota = |m: &str| {
        let l = m.to_ascii_lowercase();
        l.contains("429")
            || l.contains("quota")
            || l.contains("resource_exhausted")
            || l.contains("exhausted your capacity")
            || l.contains("rate limit")
    };
    if let Some(m) = errors.iter().find(|m| is_quota(m)) {
        return Some(Failure::Quota { message: m.clone() });
    }
    if let Some(signal) = r.signal {
        return Some(Failure::Killed { signal });
    }
    if let Some(code) = r.exit_code.filter(|c| *c != 0) {
        if is_quota(stderr) {
            return Some(Failure::Quota {
                message: last_line(stderr),
            });
        }
        let message = errors
            .last()
            .cloned()
            .or_else(|| Some(last_line(stderr)).filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "no error message".into());
        return Some(Failure::AgyFailed { code, message });
    }
    if !bound {
        return Some(Failure::CouldNotBind {
            reason: if ambiguity.is_empty() {
                "agy exited without creating a conversation database".into()
            } else {
                format!(
                    "{} candidate databases ({}); refusing to guess",
                    ambiguity.len(),
                    ambiguity.join(", ")
                )
            },
        });
    }
    if stderr.contains("print timeout after") {
        return Some(Failure::PrintTimeout);
    }
    None
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(660)), "11m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.2.8\n"), Some((1, 2, 8)));
        assert_eq!(parse_version("agy version v1.1.14"), Some((1, 1, 14)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("1.1.7").map(|v| v >= STREAM_JSON_MIN_VERSION) == Some(false));
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
        let args = agy_args(&cfg, &req, false);
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
