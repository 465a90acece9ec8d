//! The turn-running subcommands of the `agy-bridge` binary: `run`, `demo`,
//! `stream` and `ask`. Each is a thin shell over the library: parse flags,
//! build a runtime, call the runner or the provider, and turn the outcome
//! into an exit code and words a user can act on.

use agy_bridge::pi::mcp::relay::Control;
use agy_bridge::run::runner::{self, RunConfig, RunEvent, TurnRequest, WakeMode};
use agy_bridge::view::render::LiveView;
use agy_format::agy_args::BindMode;
use agy_format::agy_args::Effort;
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use clap::Args;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// What every turn-running command shares: the mode, the conversation to
/// continue, agy's directory, the watchdog and the prompt.
#[derive(Debug, Args)]
pub struct TurnOpts {
    /// plan or accept-edits (default: the configured mode).
    #[arg(long)]
    mode: Option<Mode>,
    /// Continue this conversation (only its new steps stream).
    #[arg(long)]
    conversation: Option<String>,
    /// Working directory for agy.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Our own watchdog, in minutes (default: AGY_TIMEOUT_MIN, else 10).
    #[arg(long)]
    timeout_min: Option<u64>,
    /// The prompt: the task or question (`-` reads it from stdin, for a
    /// prompt longer than a command line takes, or one other users of this
    /// machine must not see in this command line; agy never gets it in its
    /// own).
    prompt: String,
}

/// A turn's runner settings and request from the shared options: the
/// environment, this binary as agy's guardian, the configured permissions
/// and mode, the watchdog; agy's workspace is the turn's directory.
pub fn turn_setup(
    opts: &TurnOpts,
    settings: &agy_bridge::state::config::Config,
) -> Result<(RunConfig, TurnRequest), String> {
    let mut cfg = configured(settings)?;
    cfg.skip_permissions = settings.permissions == agy_bridge::state::config::PermissionMode::Allow;
    let minutes = match opts.timeout_min {
        Some(m) => m,
        None => super::env::whole_number(super::env::TIMEOUT_MIN, "minutes")?
            .unwrap_or(TIMEOUT_MIN_DEFAULT),
    };
    cfg.timeout = watchdog(minutes);
    let conversation = opts
        .conversation
        .as_deref()
        .map(ConversationId::parse)
        .transpose()
        .map_err(|e| e.to_string())?;
    let workspace = opts.cwd.clone().or_else(|| std::env::current_dir().ok());
    let prompt = match opts.prompt.as_str() {
        "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            text
        }
        p => p.to_string(),
    };
    let turn = TurnRequest {
        prompt,
        cwd: opts.cwd.clone(),
        add_dirs: workspace.into_iter().collect(),
        mode: Some(opts.mode.unwrap_or(settings.mode)),
        conversation,
        ..TurnRequest::default()
    };
    Ok((cfg, turn))
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// agy model (slug or display name), passed as --model.
    #[arg(long)]
    model: Option<String>,
    /// low, medium or high (Gemini tiers only).
    #[arg(long)]
    effort: Option<Effort>,
    #[command(flatten)]
    turn: TurnOpts,
    /// One JSON event per line, then a final result line.
    #[arg(long)]
    json: bool,
    /// How to bind the conversation: auto, discovery or stream-json
    /// (default: AGY_BIND, else auto).
    #[arg(long)]
    bind: Option<BindMode>,
    /// Wake only on the fallback interval (no inotify).
    #[arg(long)]
    poll_only: bool,
    /// Fallback poll interval in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which bundled recording to replay.
    #[arg(long, default_value = "tools")]
    recording: String,
    /// Replay speed (1 = agy's recorded pace, 2 = twice as fast).
    #[arg(long, default_value_t = 2.0, value_parser = parse_speed, allow_negative_numbers = true)]
    speed: f64,
    /// One JSON event per line instead of the readable view.
    #[arg(long)]
    json: bool,
}

pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// `--speed`: a replay speed is a finite number above 0 (0 would never
/// replay anything, a negative or infinite pace has no meaning).
fn parse_speed(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "a replay speed is a number above 0 (1 = agy's recorded pace, 2 = twice as fast), not {s:?}"
        )),
    }
}

/// The environment's runner settings, with this binary as agy's guardian
/// (so agy's tree dies with us, however we die).
pub fn run_config() -> Result<RunConfig, runner::EnvError> {
    let mut cfg = RunConfig::from_env()?;
    cfg.guardian = std::env::current_exe()
        .ok()
        .map(agy_bridge::run::standby::Guardian::new);
    cfg.admission = super::admission::admission();
    cfg.usage = Some(agy_bridge::run::quota::UsageLoader {
        agy_bin: cfg.agy_bin.clone(),
        ..agy_bridge::run::quota::UsageLoader::from_env()
    });
    Ok(cfg)
}

/// [`run_config`] with the configured permissions: every command that runs
/// agy (run, ask, stream, record) starts here.
pub fn configured(settings: &agy_bridge::state::config::Config) -> Result<RunConfig, String> {
    let mut cfg = run_config().map_err(|e| e.to_string())?;
    cfg.skip_permissions = settings.permissions == agy_bridge::state::config::PermissionMode::Allow;
    Ok(cfg)
}

/// The watchdog for `minutes` (at least one), saturating instead of
/// overflowing: a huge value means "no limit worth speaking of".
fn watchdog(minutes: u64) -> Duration {
    Duration::from_secs(minutes.max(1).saturating_mul(60))
}

/// Cancel `token` on Ctrl-C, SIGTERM, SIGHUP (the terminal closed, the
/// parent shell died) or SIGQUIT: each ends the turn the same way, terminal
/// event first.
pub fn cancel_on_signals(token: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
        SignalKind::quit(),
    ] {
        let Ok(mut sig) = signal(kind) else { continue };
        let token = token.clone();
        tokio::spawn(async move {
            if sig.recv().await.is_some() {
                token.cancel();
            }
        });
    }
    // Ctrl-Z stops agy's tree with the bridge, `fg` resumes both.
    super::caller::forward_job_control();
    // One that came before these handlers existed was noted, not lost.
    if super::caller::stopped_early() {
        token.cancel();
    }
}

/// Run one turn, printing events as they come; returns the exit code. A
/// reader that closes stdout ends the turn (nobody sees the rest) and the
/// command quietly, exit 0 (see `super::out`).
async fn drive(
    mut cfg: RunConfig,
    mut req: TurnRequest,
    gating: Option<super::gate::GatePlan>,
    json: bool,
) -> io::Result<(ExitCode, runner::RunResult)> {
    use super::out;
    let cancel = CancellationToken::new();
    cancel_on_signals(cancel.clone());
    let Ok(_seat) = super::admission::admit_one_shot(&cancel).await else {
        eprintln!(
            "agy-bridge: error: {}",
            agy_bridge::run::failure::Failure::Aborted
        );
        return Ok((ExitCode::FAILURE, runner::RunResult::aborted_before_start()));
    };
    let (tx, rx) = runner::event_channel();
    // Writing to stdout blocks while its reader is slow: on a thread of its
    // own, so the runner waits (its channel full), not a runtime worker.
    let printing = cancel.clone();
    let printer = tokio::task::spawn_blocking(move || print_events(rx, json, printing));
    let _gate = super::gate::open_unattended(gating.as_ref(), &mut cfg, &mut req).await;
    let result = runner::run(&cfg, &req, cancel, tx).await;
    let (mut view, gone) = printer.await.map_err(io::Error::other)?;
    let written = if gone {
        Ok(())
    } else if json {
        let line = serde_json::json!({"kind": "result", "result": &result});
        out::print(&format!("{line}\n"))
    } else {
        view.summary(&result)
    };
    match written {
        Err(e) if out::reader_gone(&e) => return Ok((ExitCode::SUCCESS, result)),
        Err(e) => return Err(e),
        Ok(()) if gone => return Ok((ExitCode::SUCCESS, result)),
        Ok(()) => {}
    }
    // The failure's sentence goes to stderr, once; the summary line only
    // says "failed".
    let code = match &result.failure {
        None => ExitCode::SUCCESS,
        Some(f) => {
            eprintln!("agy-bridge: error: {f}");
            ExitCode::FAILURE
        }
    };
    Ok((code, result))
}

/// Print the turn's events as they come (blocking: a thread of its own);
/// when stdout's reader is gone, cancel the turn and say so (`true`).
fn print_events(
    mut rx: tokio::sync::mpsc::Receiver<RunEvent>,
    json: bool,
    cancel: CancellationToken,
) -> (LiveView<io::Stdout>, bool) {
    let stdout = io::stdout();
    let color = stdout.is_terminal();
    let mut view = LiveView::new(stdout, color);
    while let Some(ev) = rx.blocking_recv() {
        let r = if json {
            serde_json::to_string(&ev)
                .map_err(io::Error::other)
                .and_then(|line| super::out::print(&format!("{line}\n")))
        } else {
            view.event(&ev)
        };
        match r {
            Ok(()) => {}
            Err(e) if super::out::reader_gone(&e) => {
                cancel.cancel();
                return (view, true);
            }
            Err(_) => break,
        }
    }
    (view, false)
}

/// The saved settings merged with the environment, warnings on stderr. A
/// settings variable with a value it does not take is an error (the turn
/// must not run in a mode nobody asked for); a state directory that cannot
/// be read only costs the file's values.
pub fn settings() -> Result<agy_bridge::state::config::Config, String> {
    use agy_bridge::state::config::{Config, StateError};
    match Config::load() {
        Ok(status) => {
            for w in &status.warnings {
                eprintln!("agy-bridge: warning: {w}");
            }
            Ok(status.config)
        }
        Err(e @ StateError::Env { .. }) => Err(e.to_string()),
        Err(e) => {
            eprintln!("agy-bridge: warning: using default settings: {e}");
            Ok(Config::default())
        }
    }
}

pub fn cmd_run(args: RunArgs) -> CmdResult {
    super::env::check_all()?;
    let settings = settings()?;
    let (mut cfg, mut req) = turn_setup(&args.turn, &settings)?;
    let gating = super::gate::gate_plan(&settings, false);
    req.model = args.model;
    req.effort = args.effort;
    if let Some(bind) = args.bind {
        cfg.bind = bind;
    }
    cfg.poll_interval = Duration::from_millis(args.poll_ms.max(10));
    if args.poll_only {
        cfg.wake = WakeMode::PollOnly;
    }
    let rt = runtime()?;
    let (code, _) = rt.block_on(drive(cfg, req, gating, args.json))?;
    Ok(code)
}

/// The workspace's fake-agy: next to this binary (cargo puts both in
/// target/<profile>/), or `$FAKE_AGY_BIN`.
fn find_fake_agy() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("FAKE_AGY_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let beside = exe.with_file_name("fake-agy");
    if beside.is_file() {
        return Ok(beside);
    }
    Err(format!(
        "the demo needs the workspace's fake-agy next to {} (build it with `cargo build --workspace`, or set FAKE_AGY_BIN)",
        exe.display()
    ))
}

pub fn cmd_demo(args: DemoArgs) -> CmdResult {
    let fake = find_fake_agy()?;
    let recording = resolve_demo_recording(&args.recording)?;
    let rec = agy_corpus::recording::Recording::load(&recording)?;
    let home = tempfile_dir()?;
    let conversations = home.join(".gemini/antigravity-cli/conversations");
    if !args.json {
        // Not the recording's description: it is written for developers
        // (step types, field numbers).
        let intro = format!(
            "agy-bridge demo: replaying recording {:?} with the bundled fake agy at {}x; no real agy, no network.\nprompt: {}\n\n",
            args.recording, args.speed, rec.header.prompt
        );
        if let Err(e) = super::out::print(&intro) {
            let _ = std::fs::remove_dir_all(&home);
            return super::out::finish(Err(e), ExitCode::SUCCESS);
        }
    }
    let cfg = RunConfig {
        agy_bin: fake,
        conversations_dir: conversations,
        env: vec![
            ("HOME".into(), home.display().to_string()),
            ("FAKE_AGY_RECORDING".into(), recording.display().to_string()),
            ("FAKE_AGY_SPEED".into(), args.speed.to_string()),
        ],
        ..RunConfig::default()
    };
    let req = TurnRequest {
        prompt: rec.header.prompt.clone(),
        ..TurnRequest::default()
    };
    let rt = runtime()?;
    let outcome = rt.block_on(drive(cfg, req, None, args.json));
    let _ = std::fs::remove_dir_all(&home);
    Ok(outcome?.0)
}

/// The recording `name` names (a bundled name or a file); when there is
/// none, the error lists the bundled ones.
fn resolve_demo_recording(name: &str) -> Result<PathBuf, String> {
    use agy_corpus::recording;
    let dir = recording::bundled_dir();
    recording::resolve(name, &dir).map_err(|e| match recording::list(&dir) {
        Ok(names) if !names.is_empty() => format!(
            "no recording named {name:?}; the bundled recordings are: {} (or give the path of a .jsonl recording)",
            names.join(", ")
        ),
        _ => format!("{e}; no bundled recordings were found in {}", dir.display()),
    })
}

/// A private temporary directory (removed by the caller).
fn tempfile_dir() -> io::Result<PathBuf> {
    let dir = agy_bridge::state::tmp::temp_dir()
        .join(format!("agy-bridge-demo-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

// ---------------------------------------------------------------------------
// stream: the pi boundary.
// ---------------------------------------------------------------------------

#[derive(Debug, Args)]
#[command(
    after_help = "Environment: AGY_TIMEOUT_MIN, the watchdog in minutes when --timeout-min \
is not given (default 10); AGY_REQUEST_TIMEOUT_SECS, how long to wait for the request line on \
stdin (default 30, at least 1): the request is one JSON object followed by a newline, or by the end of \
stdin. Every error, a bad flag or variable included, is reported as pi's `start` event followed \
by one `error` event."
)]
pub struct StreamArgs {
    /// Our own watchdog per turn, in minutes (default: AGY_TIMEOUT_MIN,
    /// else 10).
    #[arg(long)]
    timeout_min: Option<u64>,
    /// Serve every turn of one pi session, one request line after another,
    /// keeping agy warm between them (AGY_WARM=off: one agy per turn).
    /// stdin's end ends the session.
    #[arg(long)]
    session: bool,
}

/// How long `stream` waits for its request line when
/// `AGY_REQUEST_TIMEOUT_SECS` is not set.
const REQUEST_TIMEOUT_SECS: u64 = 30;

/// The watchdog's default, in minutes.
const TIMEOUT_MIN_DEFAULT: u64 = 10;

/// The first stdin line, or why there is none.
type RequestLine = Result<String, String>;

/// Read stdin on a plain thread: the first line is the request (or, without
/// a newline, everything up to the end of stdin); later lines are
/// `{"type":"abort"}` (cancels at once) or the control lines of pi's tool
/// results (see [`agy_bridge::pi::mcp::relay::Control`]). The end of stdin
/// cancels the turn: the caller is gone.
fn stdin_reader(
    cancel: CancellationToken,
) -> (
    tokio::sync::oneshot::Receiver<RequestLine>,
    tokio::sync::mpsc::Receiver<Control>,
) {
    use agy_bridge::pi::mcp::relay::CONTROL_CAPACITY;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (control_tx, control) = tokio::sync::mpsc::channel(CONTROL_CAPACITY);
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut stdin = io::stdin().lock();
        let mut buf = Vec::new();
        let first = match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => Err("no request line on stdin (it closed before any input)".to_string()),
            Ok(_) => request_text(buf),
            Err(e) => Err(format!("cannot read the request from stdin: {e}")),
        };
        let _ = tx.send(first);
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if is_abort_line(&line) => cancel.cancel(),
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    if let Some(c) = Control::parse(text.trim_end()) {
                        keep_control(&control_tx, c);
                    }
                }
            }
        }
        // pi keeps stdin open for the whole turn (tool results come on it):
        // its end means pi is gone, and the turn is aborted. A parked tool
        // call hears why first, if the queue has room; never waited for:
        // with pi's tools off nothing reads the queue, and the abort must
        // not wait on it.
        let _ = control_tx.try_send(Control::Closed);
        cancel.cancel();
    });
    (rx, control)
}

/// Queue a control line for the relay without waiting: this thread must go
/// on reading stdin (an abort may follow), so a line beyond
/// [`agy_bridge::pi::mcp::relay::CONTROL_CAPACITY`] is dropped, and said.
pub(super) fn keep_control(control: &tokio::sync::mpsc::Sender<Control>, line: Control) {
    use tokio::sync::mpsc::error::TrySendError;
    if let Err(TrySendError::Full(_)) = control.try_send(line) {
        eprintln!(
            "agy-bridge: warning: a control line was dropped: more came than the turn has tool calls"
        );
    }
}

/// The request line's text, without its line ending.
fn request_text(mut line: Vec<u8>) -> RequestLine {
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err("the request line is empty; send one JSON object".into());
    }
    String::from_utf8(line).map_err(|e| {
        format!(
            "the request line is not UTF-8 text (invalid byte at offset {}); send one JSON object in UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

pub(super) fn is_abort_line(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(|t| t == "abort"))
        .unwrap_or(false)
}

/// Report a `stream` failure that comes before any turn: pi's `start`, then
/// one `error` naming what was wrong.
pub fn stream_fails_early(message: &str) -> ExitCode {
    let mut pi = agy_bridge::pi::provider::stream::PiStream::new(io::stdout());
    pi.start();
    pi.fail(false, message);
    ExitCode::FAILURE
}

/// `standby`: agy's guardian, forked by `main` before anything else.
pub fn cmd_stream(
    args: StreamArgs,
    standby: Option<agy_bridge::run::standby::Standby>,
) -> CmdResult {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            return Ok(stream_fails_early(&format!(
                "agy-bridge: cannot start: {e}"
            )))
        }
    };
    // The turn's first blocking job (preparing it) finds a thread started
    // while the request was on its way.
    drop(rt.spawn_blocking(|| ()));
    let ok = if args.session {
        rt.block_on(stream_session(args, standby))
    } else {
        rt.block_on(stream_turn(args, standby))
    };
    // The stdin thread may still be blocked reading; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `stream --session`: its limits checked first, as `stream`'s are.
async fn stream_session(
    args: StreamArgs,
    standby: Option<agy_bridge::run::standby::Standby>,
) -> bool {
    match stream_limits(&args) {
        Ok((timeout, _)) => super::session::serve(timeout, standby).await,
        Err(message) => {
            let mut pi = agy_bridge::pi::provider::stream::PiStream::new(io::stdout());
            pi.start();
            pi.fail(false, &format!("agy-bridge: {message}"));
            false
        }
    }
}

/// The watchdog and the request-line wait from flags and environment.
pub(super) fn stream_limits(args: &StreamArgs) -> Result<(Duration, Duration), String> {
    use super::env;
    let minutes = match args.timeout_min {
        Some(m) => m,
        None => env::whole_number(env::TIMEOUT_MIN, "minutes")?.unwrap_or(TIMEOUT_MIN_DEFAULT),
    };
    let request_secs =
        env::whole_number(env::REQUEST_TIMEOUT_SECS, "seconds")?.unwrap_or(REQUEST_TIMEOUT_SECS);
    // Every other variable too, before pi's request is even read.
    env::check_words()?;
    Ok((watchdog(minutes), Duration::from_secs(request_secs.max(1))))
}

/// Wait for the request line: it, or the sentence pi shows instead.
async fn read_request(
    request_line: tokio::sync::oneshot::Receiver<RequestLine>,
    wait: Duration,
    cancel: &CancellationToken,
) -> Result<String, (bool, String)> {
    let bad = |e: String| (false, format!("agy-bridge: bad request: {e}"));
    tokio::select! {
        // A line that is there wins over a timer that is also done.
        biased;
        line = request_line => match line {
            Ok(line) => line.map_err(bad),
            Err(_) => Err(bad("stdin could not be read".into())),
        },
        _ = tokio::time::sleep(wait) => Err(bad(format!(
            "no complete request line on stdin after {} s: the request is one JSON object followed by a newline (or the end of stdin); AGY_REQUEST_TIMEOUT_SECS sets how long to wait",
            wait.as_secs()
        ))),
        _ = cancel.cancelled() => Err((true, "Operation aborted".into())),
    }
}

/// Flushed chunks (one pi event each, mostly) waiting for the stdout
/// thread. When pi reads slowly they fill and the next flush waits (on the
/// thread driving `stream`, or in the relay's `block_in_place`, never on a
/// runtime worker), the relay stops taking the runner's events, and the
/// runner stops reading agy's database: pi's pace is the turn's, and the
/// bridge holds no more than these few chunks of it.
const STDOUT_QUEUE: usize = 8;

/// stdout written by a thread of its own: each flushed line is handed over
/// (at most [`STDOUT_QUEUE`] waiting) and written there, so a reader that is
/// slow never blocks the runtime and one that is gone is noticed. A write
/// error there makes the next write here fail, which is how `PiStream`
/// learns that pi went away. Dropping it waits for everything handed over
/// to be written.
pub(super) struct StdoutThread {
    buf: Vec<u8>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    broken: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StdoutThread {
    pub(super) fn spawn() -> StdoutThread {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(STDOUT_QUEUE);
        let broken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = broken.clone();
        let thread = std::thread::spawn(move || {
            let mut out = io::stdout().lock();
            for chunk in rx {
                if out.write_all(&chunk).and_then(|_| out.flush()).is_err() {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            }
        });
        StdoutThread {
            buf: Vec::new(),
            tx: Some(tx),
            broken,
            thread: Some(thread),
        }
    }

    fn check(&self) -> io::Result<()> {
        if self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdout closed"));
        }
        Ok(())
    }
}

impl Write for StdoutThread {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.buf);
        match &self.tx {
            Some(tx) if tx.send(chunk).is_ok() => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdout closed")),
        }
    }
}

impl Drop for StdoutThread {
    fn drop(&mut self) {
        let _ = self.flush();
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Everything `stream` has before agy starts: the request, its watchdog,
/// the session's turn lock, the prepared turn.
pub(super) struct StreamStart {
    pub(super) req: agy_bridge::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    /// The runner's [`runner::Prelude`], computed while preparing.
    pub(super) prelude: runner::Prelude,
    pub(super) _turn_lock: Option<agy_bridge::state::sessions::TurnLock>,
}

/// Read and check the request, take the session's turn lock (waiting for a
/// turn before it) and prepare the turn; the sentence pi shows otherwise,
/// and whether it was an abort.
async fn stream_start(
    args: &StreamArgs,
    request_line: tokio::sync::oneshot::Receiver<RequestLine>,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let (timeout, request_wait) =
        stream_limits(args).map_err(|message| (false, format!("agy-bridge: {message}")))?;
    let line = read_request(request_line, request_wait, cancel).await?;
    start_from_line(&line, timeout, cancel).await
}

/// [`stream_start`] once the request line is in: parse it, take the
/// session's turn lock, prepare the turn.
pub(super) async fn start_from_line(
    line: &str,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let req: agy_bridge::pi::provider::StreamRequest =
        serde_json::from_str(line).map_err(|e| (false, format!("agy-bridge: bad request: {e}")))?;
    // One turn per session at a time: wait for the one before (within our
    // watchdog) so this one resumes the conversation it left.
    let (session_key, store) = session_of(&req);
    let mut store = store;
    let mut state_note = None;
    let turn_lock = match &store {
        Some(s) => match wait_turn_lock(s, &session_key, cancel, timeout).await {
            Ok(lock) => Some(lock),
            Err(TurnWait::Aborted) => return Err((true, "Operation aborted".into())),
            Err(TurnWait::Failed(message)) => return Err((false, message)),
            // A read-only or full state directory: the turn runs, without
            // session memory, and says so.
            Err(TurnWait::Unavailable(why)) => {
                state_note = Some(format!(
                    "\n[agy-bridge: the session state cannot be written ({why}); this turn runs without session memory: agy begins a new conversation, and pi's record of the earlier turns goes with the prompt]\n"
                ));
                store = None;
                None
            }
        },
        None => None,
    };
    // Settings, sessions and the model catalog are files (and at worst an
    // `agy models` run): resolved on a blocking thread, before the turn,
    // with what the runner reads before agy starts (the session is ours
    // now, so nothing of it can appear unseen).
    let for_prepare = req.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let prepared = prepare_turn(&for_prepare, timeout, session_key, store)?;
        let prelude = runner::Prelude::blocking(&prepared.cfg);
        Ok::<_, String>((prepared, prelude))
    })
    .await
    .map_err(|e| (false, format!("agy-bridge: preparing the turn failed: {e}")))?;
    let (mut prepared, prelude) = prepared.map_err(|m| (false, m))?;
    prepared.notes.extend(state_note);
    Ok(StreamStart {
        req,
        prepared,
        prelude,
        _turn_lock: turn_lock,
    })
}

/// One `stream` turn; `standby` is agy's guardian, already started.
async fn stream_turn(args: StreamArgs, standby: Option<agy_bridge::run::standby::Standby>) -> bool {
    use agy_bridge::pi::provider::stream::PiStream;
    let cancel = CancellationToken::new();
    // The request is read on a thread of its own, from the start: the rest
    // of the set-up happens while it comes.
    let (request_line, control) = stdin_reader(cancel.clone());
    // pi may be slow to read: writes wait on their own thread, never on a
    // runtime worker.
    let mut pi = PiStream::new(StdoutThread::spawn());
    pi.start();
    cancel_on_signals(cancel.clone());
    // pi gone (killed, or no longer reading) ends the turn and agy's tree.
    super::caller::stop_with_parent();
    super::caller::cancel_when_stdout_closes(cancel.clone());
    let start = match stream_start(&args, request_line, &cancel).await {
        Ok(start) => start,
        Err((aborted, message)) => {
            pi.fail(aborted, &message);
            return false;
        }
    };
    run_cold(start, standby, control, &mut pi, &cancel).await
}

/// A turn ready to run: its request, preparation and [`runner::Prelude`],
/// the [`agy_bridge::pi::provider::mapper::EventMapper`] its events go
/// through, and what it holds to its end (the session's turn lock, an
/// account seat).
pub(super) struct Begun {
    pub(super) req: agy_bridge::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    pub(super) prelude: runner::Prelude,
    pub(super) mapper: agy_bridge::pi::provider::mapper::EventMapper,
    /// Bind it (`held: _held`) to keep both to the end of the turn.
    pub(super) held: Held,
}

/// What a turn holds while it runs.
pub(super) struct Held {
    _turn_lock: Option<agy_bridge::state::sessions::TurnLock>,
    _seat: Option<agy_bridge::state::admission::Seat>,
}

/// From a started turn to one ready to run: agy's features asked (once
/// per binary, then remembered: they decide what the turn may use, pi's
/// tools among it), the turn's notes shown, an account seat taken (pi
/// told when it waits). `None`: pi aborted the wait (pi has its `error`).
pub(super) async fn begin_turn<W: Write>(
    start: StreamStart,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Begun> {
    let StreamStart {
        req,
        prepared,
        mut prelude,
        _turn_lock,
    } = start;
    if prelude.features().is_none() {
        let features = agy_bridge::run::agy_version::agy_features(&prepared.cfg.agy_bin).await;
        prelude.set_features(features);
    }
    for note in &prepared.notes {
        pi.thinking(note);
    }
    let mut mapper = agy_bridge::pi::provider::mapper::EventMapper::new(&prepared.cwd);
    mapper.set_conversations_dir(&prepared.cfg.conversations_dir);
    let seat = take_seat(pi, cancel).await?;
    Some(Begun {
        req,
        prepared,
        prelude,
        mapper,
        held: Held {
            _turn_lock,
            _seat: seat,
        },
    })
}

/// A prepared turn on an agy of its own (one process per turn), with pi's
/// tools served for this turn only; `control` is pi's control lines.
pub(super) async fn run_cold<W: Write>(
    start: StreamStart,
    standby: Option<agy_bridge::run::standby::Standby>,
    control: tokio::sync::mpsc::Receiver<Control>,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> bool {
    let Some(Begun {
        req,
        prepared,
        prelude,
        mut mapper,
        held: _held,
    }) = begin_turn(start, pi, cancel).await
    else {
        return false;
    };
    let cold = ColdTurn {
        req: &req,
        prepared: &prepared,
        prelude,
    };
    run_cold_prepared(cold, &mut mapper, standby, control, pi, cancel).await
}

/// One of the account's seats for this turn (held by the caller to the
/// turn's end), pi told when it waits; `None` when pi aborted the wait
/// (pi has its `error` already).
async fn take_seat<W: Write>(
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Option<agy_bridge::state::admission::Seat>> {
    match super::admission::wait_seat(cancel, |words| pi.thinking(words)).await {
        Ok(seat) => Some(seat),
        Err(()) => {
            pi.fail(true, "Operation aborted");
            None
        }
    }
}

/// A turn past its prologue, to run on an agy of its own.
pub(super) struct ColdTurn<'a> {
    pub(super) req: &'a agy_bridge::pi::provider::StreamRequest,
    pub(super) prepared: &'a PreparedTurn,
    pub(super) prelude: runner::Prelude,
}

/// [`run_cold`] after [`turn_prologue`].
pub(super) async fn run_cold_prepared<W: Write>(
    cold: ColdTurn<'_>,
    mapper: &mut agy_bridge::pi::provider::mapper::EventMapper,
    standby: Option<agy_bridge::run::standby::Standby>,
    control: tokio::sync::mpsc::Receiver<Control>,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> bool {
    let ColdTurn {
        req,
        prepared,
        prelude,
    } = cold;
    let mut turn = prepared.turn.clone();
    let mut cfg = prepared.cfg.clone();
    let served = offer_pi_tools(req, prepared, &prelude, &mut turn, mapper, pi).await;
    let bridge = match served {
        Ok(b) => b,
        Err(message) => {
            pi.fail(false, &message);
            return false;
        }
    };
    let mut bridge = bridge;
    let own_server = bridge.as_ref().map(|_| agy_bridge::pi::mcp::SERVER_NAME);
    let mut gate = open_turn_gate(prepared, &mut cfg, &mut turn, own_server, pi).await;
    let mut side = tool_side(bridge.as_mut(), gate.as_mut(), control);

    let (tx, mut rx) = runner::event_channel();
    // This binary as agy's guardian (`run_config`), already started.
    cfg.guardian = cfg.guardian.map(|guardian| match standby {
        Some(standby) => guardian.with_standby(standby),
        None => guardian,
    });
    let run_cancel = cancel.clone();
    let runner =
        tokio::spawn(async move { runner::run_with(&cfg, &turn, prelude, run_cancel, tx).await });
    agy_bridge::pi::mcp::relay::relay(&mut rx, side.as_mut().ok(), pi, mapper, cancel).await;
    let result = runner.await;
    // The turn is over: close the ports, remove the configs, answer any
    // call and any question.
    drop((side, bridge, gate));
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            pi.fail(
                false,
                &format!("agy-bridge failed while running the turn: {e}"),
            );
            return false;
        }
    };
    end_turn(pi, prepared, req, &result)
}

/// The gate of an `ask` turn, opened (its line said when it cannot be,
/// and the turn runs as `deny`).
pub(super) async fn open_turn_gate<W: Write>(
    prepared: &PreparedTurn,
    cfg: &mut RunConfig,
    turn: &mut TurnRequest,
    own_server: Option<&str>,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
) -> Option<agy_bridge::run::gate::Gate> {
    let plan = prepared.gating.as_ref()?;
    match super::gate::open_gate(plan, cfg, turn, own_server).await {
        Ok(gate) => Some(gate),
        Err(line) => {
            if let Some(line) = line {
                eprintln!("agy-bridge: {line}");
                pi.thinking(&format!("\n[agy-bridge: {line}]\n"));
            }
            None
        }
    }
}

/// The turn's tool side, when agy may call pi's tools or the turn has a
/// gate: pi's control lines with agy's calls (lent from the MCP server) and
/// the gate's questions (lent from the gate). [`give_back`] returns them.
pub(super) fn tool_side(
    bridge: Option<&mut agy_bridge::pi::mcp::ToolBridge>,
    gate: Option<&mut agy_bridge::run::gate::Gate>,
    control: tokio::sync::mpsc::Receiver<Control>,
) -> Result<agy_bridge::pi::mcp::relay::ToolLines, tokio::sync::mpsc::Receiver<Control>> {
    use tokio::sync::mpsc::channel;
    if bridge.is_none() && gate.is_none() {
        return Err(control);
    }
    let calls = match bridge {
        Some(b) => std::mem::replace(&mut b.calls, channel(1).1),
        None => channel(1).1,
    };
    let asks = gate.map(|g| {
        let questions = std::mem::replace(&mut g.questions, channel(1).1);
        agy_bridge::pi::ask::Asks::new(questions, g.grants())
    });
    Ok(
        agy_bridge::pi::mcp::relay::ToolLines::new(calls, control, tool_batch_window())
            .with_asks(asks),
    )
}

/// What [`tool_side`] lent, back to its owners (questions still open are
/// denied); pi's control lines back to the caller.
pub(super) fn give_back(
    side: Result<agy_bridge::pi::mcp::relay::ToolLines, tokio::sync::mpsc::Receiver<Control>>,
    bridge: Option<&mut agy_bridge::pi::mcp::ToolBridge>,
    gate: Option<&mut agy_bridge::run::gate::Gate>,
) -> tokio::sync::mpsc::Receiver<Control> {
    let mut lines = match side {
        Ok(lines) => lines,
        Err(control) => return control,
    };
    if let Some(b) = bridge {
        b.calls = std::mem::replace(&mut lines.calls, tokio::sync::mpsc::channel(1).1);
    }
    if let (Some(g), Some(asks)) = (gate, lines.asks.take()) {
        g.questions = asks.into_questions();
    }
    lines.control
}

/// pi's tools, served to agy for this turn only (dropped with it), when
/// this agy can reach them. Only a known older version is held back (said
/// once per pi session): an agy that does not say its version is offered
/// the tools as before.
pub(super) async fn offer_pi_tools<W: Write>(
    req: &agy_bridge::pi::provider::StreamRequest,
    prepared: &PreparedTurn,
    prelude: &runner::Prelude,
    turn: &mut TurnRequest,
    mapper: &mut agy_bridge::pi::provider::mapper::EventMapper,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
) -> Result<Option<agy_bridge::pi::mcp::ToolBridge>, String> {
    if let Some(old) = too_old_for_pi_tools(prelude) {
        if prepared.first_turn && !req.tools.is_empty() {
            pi.thinking(&no_pi_tools_note(old));
        }
        return Ok(None);
    }
    serve_pi_tools(req, turn, mapper).await
}

/// This agy, when it is known to be too old to reach pi's tools (an agy
/// that does not say its version is offered them).
pub(super) fn too_old_for_pi_tools(
    prelude: &runner::Prelude,
) -> Option<agy_format::features::AgyFeatures> {
    prelude
        .features()
        .filter(|f| f.version.is_some() && !f.mcp_from_add_dir())
}

/// `AGY_PI_TOOL_BATCH_MS`, already checked in `stream_limits` (a bad value
/// never gets this far).
pub(super) fn tool_batch_window() -> Duration {
    use agy_bridge::pi::mcp::relay;
    relay::batch_window().unwrap_or(relay::DEFAULT_BATCH_WINDOW)
}

/// Save the session's binding and end pi's message with the turn's outcome.
pub(super) fn end_turn<W: Write>(
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    prepared: &PreparedTurn,
    req: &agy_bridge::pi::provider::StreamRequest,
    result: &runner::RunResult,
) -> bool {
    use agy_bridge::pi::provider;
    // Remember where this conversation is, unless the run failed to bind.
    if let Some(store) = &prepared.store {
        // A new conversation (agy did not have ours) has no earlier cursor.
        let lost = result.lost_conversation.is_some();
        let before = prepared.turn.after_idx.filter(|_| !lost);
        let last = result.last_idx.or(before).unwrap_or(-1);
        if let Err(e) = store.record_turn(
            &prepared.session_key,
            result.conversation_id.as_deref(),
            last,
            req.messages.len() as u64,
            lost,
        ) {
            eprintln!("agy-bridge: warning: could not save the session binding: {e}");
            pi.thinking(&format!(
                "\n[agy-bridge: could not save which agy conversation this pi session continues ({e}); the next turn may begin a new conversation, with pi's record of the earlier turns]\n"
            ));
        }
    }
    for notice in &result.notices {
        pi.thinking(&format!("\n[{notice}]\n"));
    }
    if result.failure.is_none() {
        pi.done(result.usage.as_ref().map(provider::PiUsage::from_turn));
        true
    } else {
        let (aborted, message) = provider::mapper::error_message(result);
        pi.fail(aborted, &message);
        false
    }
}

/// Serve the request's tools (those agy lacks) to agy for this turn: the
/// private MCP config directory joins the turn's `--add-dir`s.
async fn serve_pi_tools(
    req: &agy_bridge::pi::provider::StreamRequest,
    turn: &mut TurnRequest,
    mapper: &mut agy_bridge::pi::provider::mapper::EventMapper,
) -> Result<Option<agy_bridge::pi::mcp::ToolBridge>, String> {
    use agy_bridge::pi::mcp;
    if mcp::disabled_by_env().map_err(|e| format!("agy-bridge: {e}"))? {
        return Ok(None);
    }
    let bridge = mcp::ToolBridge::start(mcp::offered_tools(&req.tools))
        .await
        .map_err(|e| format!("agy-bridge: cannot serve pi's tools to agy: {e}"))?;
    if let Some(b) = &bridge {
        turn.add_dirs.push(b.dir.path().to_path_buf());
        turn.private_dirs.push(b.dir.path().to_path_buf());
        mapper.hide_bridge_calls();
    }
    Ok(bridge)
}

/// The request's working directory: pi's, else ours.
pub(super) fn request_cwd(req: &agy_bridge::pi::provider::StreamRequest) -> PathBuf {
    req.cwd
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The request's session key and the session store (if it can be opened).
pub(super) fn session_of(
    req: &agy_bridge::pi::provider::StreamRequest,
) -> (String, Option<agy_bridge::state::sessions::SessionStore>) {
    use agy_bridge::state::sessions::{SessionKey, SessionStore};
    let key = SessionKey::for_request(req.session_id.as_deref(), &request_cwd(req));
    let store = match SessionStore::open_default() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("agy-bridge: warning: sessions are not saved: {e}");
            None
        }
    };
    (key, store)
}

enum TurnWait {
    Aborted,
    Failed(String),
    /// The lock file cannot be made (the state directory is read-only or
    /// full): there is no session state to protect either.
    Unavailable(String),
}

/// Take the session's turn lock, waiting (cancellably, at most `wait`) for
/// another process's turn of the same session to end.
///
/// The wait is a blocking `flock` on a thread of its own (not the runtime's
/// blocking pool, whose shutdown would wait for it): the lock is taken the
/// moment the other turn lets go, with no polling. Abandoned (abort,
/// timeout), the thread finds nobody to hand the lock to when it gets it,
/// and lets go at once.
async fn wait_turn_lock(
    store: &agy_bridge::state::sessions::SessionStore,
    key: &str,
    cancel: &CancellationToken,
    wait: Duration,
) -> Result<agy_bridge::state::sessions::TurnLock, TurnWait> {
    use agy_bridge::state::sessions::TurnLock;
    match store.try_lock_turn(key) {
        Ok(Some(lock)) => return Ok(lock),
        Ok(None) => {}
        Err(e) => return Err(TurnWait::Unavailable(e.to_string())),
    }
    let path = store.turn_lock_path(key);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let waiter = std::thread::Builder::new()
        .name("turn-lock".into())
        .spawn(move || {
            // Nobody to take it (abandoned): dropping it lets go.
            let _ = tx.send(TurnLock::wait_at(&path));
        });
    if let Err(e) = waiter {
        return Err(TurnWait::Unavailable(format!(
            "cannot start a thread to wait for the turn lock: {e}"
        )));
    }
    let timeout = async {
        match std::time::Instant::now().checked_add(wait) {
            Some(_) => tokio::time::sleep(wait).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = cancel.cancelled() => Err(TurnWait::Aborted),
        _ = timeout => Err(TurnWait::Failed(format!(
            "agy-bridge: another turn of this pi session was still running after {} minutes; try again when it has finished",
            wait.as_secs() / 60
        ))),
        taken = rx => match taken {
            Ok(Ok(lock)) => Ok(lock),
            Ok(Err(e)) => Err(TurnWait::Unavailable(e.to_string())),
            Err(_) => Err(TurnWait::Unavailable("the turn lock's waiting thread ended without an answer".into())),
        },
    }
}

pub(super) struct PreparedTurn {
    pub(super) cfg: RunConfig,
    pub(super) turn: TurnRequest,
    pub(super) cwd: PathBuf,
    pub(super) session_key: String,
    pub(super) store: Option<agy_bridge::state::sessions::SessionStore>,
    /// Thinking lines to show before agy starts.
    pub(super) notes: Vec<String>,
    /// The pi session has no agy conversation yet: things said once per
    /// session are said now.
    pub(super) first_turn: bool,
    /// `ask` mode: the gate agy's tool calls go through.
    pub(super) gating: Option<super::gate::GatePlan>,
}

/// Where a resumed turn's new steps start: after the last step the
/// database holds now, never before it. A binding whose save failed keeps
/// an older cursor, which would replay the previous turn's answer.
/// (Blocking: a SQLite read, on the thread that prepares the turn.)
pub(super) fn resume_cursor(
    entry: &agy_bridge::state::sessions::SessionEntry,
    conversations_dir: &std::path::Path,
) -> i64 {
    let db = agy_bridge::follow::discovery::db_path(conversations_dir, &entry.conversation_id);
    agy_bridge::follow::poller::last_idx(&db)
        .map_or(entry.last_step_idx, |now| now.max(entry.last_step_idx))
}

/// The one sentence for an agy too old to reach pi's tools.
pub(super) fn no_pi_tools_note(features: agy_format::features::AgyFeatures) -> String {
    let version = features
        .version
        .map(|(a, b, c)| format!(" {a}.{b}.{c}"))
        .unwrap_or_default();
    format!(
        "\n[agy-bridge: pi's tools are not offered to agy{version}: it loads MCP servers from --add-dir only from 1.2.0 on. Update agy (`agy update`) to let it call them.]\n"
    )
}

/// pi's `reasoning`, if any. A level we do not know is the caller's
/// mistake, not "no preference": guessing would run agy at an effort nobody
/// asked for.
pub(super) fn thinking_level(
    reasoning: Option<&str>,
) -> Result<Option<agy_bridge::pi::models::ThinkingLevel>, String> {
    reasoning
        .filter(|r| !r.trim().is_empty())
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("agy-bridge: bad request: reasoning: {e}"))
}

/// What a request's words resolve to: the run configuration, the
/// settings, agy's model and effort.
pub(super) struct Resolved {
    pub(super) cfg: RunConfig,
    pub(super) settings: agy_bridge::state::config::Config,
    pub(super) model: agy_bridge::pi::models::Resolved,
}

/// Resolve the request's model and thinking level and the settings
/// (files, at worst an `agy models` run: blocking).
pub(super) fn resolve_agy(
    req: &agy_bridge::pi::provider::StreamRequest,
    timeout: Duration,
) -> Result<Resolved, String> {
    let settings = settings().map_err(|e| format!("agy-bridge: {e}"))?;
    let thinking = thinking_level(req.reasoning.as_deref())?;
    let catalog = agy_bridge::pi::models::catalog();
    super::env::check_default_model(&catalog).map_err(|e| format!("agy-bridge: {e}"))?;
    let model = catalog
        .resolve(&req.model, thinking)
        .map_err(|e| format!("agy-bridge: {e}"))?;
    let mut cfg = configured(&settings).map_err(|e| format!("agy-bridge: {e}"))?;
    cfg.timeout = timeout;
    Ok(Resolved {
        cfg,
        settings,
        model,
    })
}

/// A pi session's turn as agy gets it: `prompt` in `cwd` (agy's workspace:
/// the directory pi works in), resuming the session's conversation after
/// the last step its database holds. A warm agy is started from the same
/// request without a prompt, so both agree on agy's command line.
pub(super) fn session_turn(
    prompt: String,
    cwd: &std::path::Path,
    resolved: &Resolved,
    existing: Option<&agy_bridge::state::sessions::SessionEntry>,
) -> TurnRequest {
    TurnRequest {
        prompt,
        cwd: Some(cwd.to_path_buf()),
        model: Some(resolved.model.model.clone()),
        effort: resolved.model.effort,
        mode: Some(resolved.settings.mode),
        conversation: existing.map(|e| e.conversation_id.clone()),
        after_idx: existing.map(|e| resume_cursor(e, &resolved.cfg.conversations_dir)),
        add_dirs: vec![cwd.to_path_buf()],
        private_dirs: Vec::new(),
    }
}

/// Everything between pi's request and agy's command line; errors are the
/// message pi shows.
fn prepare_turn(
    req: &agy_bridge::pi::provider::StreamRequest,
    timeout: Duration,
    session_key: String,
    store: Option<agy_bridge::state::sessions::SessionStore>,
) -> Result<PreparedTurn, String> {
    use agy_bridge::pi::provider::context::{
        compose_prompt_for, context_digest_for, extract_prompt, has_own_turns, AgyContext,
        DIGEST_MAX_CHARS, LOST_DIGEST_MAX_CHARS,
    };

    let prompt = extract_prompt(&req.messages).map_err(|e| format!("agy-bridge: {e}"))?;
    let cwd = request_cwd(req);
    let Resolved {
        cfg,
        settings,
        model: resolved,
    } = resolve_agy(req, timeout)?;

    let mut notes = Vec::new();
    let mut existing = match store.as_ref().map(|s| s.get(&session_key)) {
        Some(Ok(entry)) => entry,
        Some(Err(e)) => {
            eprintln!("agy-bridge: warning: cannot read the session binding: {e}");
            None
        }
        None => None,
    };
    let mut context = AgyContext::Kept;
    if let Some(entry) = &existing {
        let db =
            agy_bridge::follow::discovery::db_path(&cfg.conversations_dir, &entry.conversation_id);
        if !db.is_file() {
            notes.push(format!(
                "[agy-bridge: conversation {} is gone from {}; starting a new one with pi's record of the earlier turns]\n",
                entry.conversation_id,
                cfg.conversations_dir.display()
            ));
            existing = None;
            context = AgyContext::Lost;
        } else if entry.context_lost {
            context = AgyContext::Lost;
        }
    } else if has_own_turns(&req.messages) {
        // Earlier agy turns with no conversation to resume (a cleared
        // binding): agy has none of them.
        context = AgyContext::Lost;
    }
    let (watermark, cap) = match context {
        AgyContext::Lost => (0, LOST_DIGEST_MAX_CHARS),
        AgyContext::Kept => (
            existing
                .as_ref()
                .map(|e| e.message_count as usize)
                .unwrap_or(0),
            DIGEST_MAX_CHARS,
        ),
    };
    let digest = context_digest_for(&req.messages, watermark, cap, context);
    if prompt.dropped_images > 0 {
        notes.push(format!(
            "[agy-bridge: {} image(s) not sent: agy -p takes text only]\n",
            prompt.dropped_images
        ));
    }
    let gating = super::gate::gate_plan(&settings, req.ui);
    let turn = session_turn(
        compose_prompt_for(&prompt, &digest, context),
        &cwd,
        &Resolved {
            cfg: cfg.clone(),
            settings,
            model: resolved,
        },
        existing.as_ref(),
    );
    for w in store
        .as_ref()
        .map(|s| s.take_warnings())
        .unwrap_or_default()
    {
        eprintln!("agy-bridge: warning: {w}");
    }
    Ok(PreparedTurn {
        cfg,
        turn,
        cwd,
        session_key,
        store,
        notes,
        first_turn: existing.is_none(),
        gating,
    })
}

// ---------------------------------------------------------------------------
// ask: AskAntigravity, one-shot delegation.
// ---------------------------------------------------------------------------

#[derive(Debug, Args)]
pub struct AskArgs {
    /// Model alias: flash, pro, gemini, sonnet, opus, gpt-oss, or e.g.
    /// "3.5 flash low" (default: the configured default model).
    #[arg(long)]
    model: Option<String>,
    #[command(flatten)]
    turn: TurnOpts,
    /// Print {"answer", "conversationId", ...} as one JSON object.
    #[arg(long)]
    json: bool,
    /// The provider of the model calling this tool; `antigravity` refuses
    /// (agy delegating to itself would recurse).
    #[arg(long)]
    caller_provider: Option<String>,
}

/// What `ask` tells its caller: the answer, the conversation to continue,
/// the model, notices and the failure, as text or one JSON object.
struct AskReport<'a> {
    answer: &'a str,
    id: Option<&'a str>,
    error: Option<String>,
    model: Option<&'a str>,
    notices: &'a [String],
}

impl AskReport<'_> {
    fn failed(error: String) -> AskReport<'static> {
        AskReport {
            answer: "",
            id: None,
            error: Some(error),
            model: None,
            notices: &[],
        }
    }

    /// Print the report; a reader gone from stdout is not reported (the
    /// exit code still says whether agy succeeded).
    fn print(&self, json: bool) -> ExitCode {
        let mut text = String::new();
        if json {
            let v = serde_json::json!({
                "answer": self.answer,
                "conversationId": self.id,
                "model": self.model,
                "ok": self.error.is_none(),
                "error": self.error,
                "notices": self.notices,
            });
            text = format!("{v}\n");
        } else {
            if !self.answer.is_empty() {
                text.push_str(&format!("{}\n", self.answer));
            }
            if let Some(id) = self.id {
                text.push_str(&format!(
                    "\n[agy conversation: {id}; continue with --conversation {id}]\n"
                ));
            }
        }
        match super::out::print(&text) {
            Err(e) if !super::out::reader_gone(&e) => {
                eprintln!("agy-bridge: error: cannot write output: {e}");
            }
            _ => {}
        }
        if !json {
            for notice in self.notices {
                eprintln!("agy-bridge: note: {notice}");
            }
            if let Some(e) = &self.error {
                eprintln!("agy-bridge: error: {e}");
            }
        }
        if self.error.is_some() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// The delegated turn `ask` runs: the workspace and nothing else, so it
/// cannot call back into pi.
fn ask_turn(args: &AskArgs) -> Result<AskTurn, String> {
    super::env::check_all()?;
    let settings = settings()?;
    let alias = args
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let resolved = agy_bridge::pi::models::catalog()
        .resolve_alias(&alias, Some(settings.default_thinking))
        .map_err(|e| e.to_string())?;
    let (mut cfg, mut turn) = turn_setup(&args.turn, &settings)?;
    cfg.extra_args = strip_add_dirs(&cfg.extra_args);
    let label = match resolved.effort {
        Some(e) => format!("{} ({})", resolved.model, e.as_arg()),
        None => resolved.model.clone(),
    };
    turn.model = Some(resolved.model);
    turn.effort = resolved.effort;
    Ok(AskTurn {
        cfg,
        turn,
        label,
        gating: super::gate::gate_plan(&settings, false),
    })
}

/// AskAntigravity's turn: agy's settings and request, the model as the
/// answer names it, and its gate (nobody is asked: the rules decide).
struct AskTurn {
    cfg: RunConfig,
    turn: TurnRequest,
    label: String,
    gating: Option<super::gate::GatePlan>,
}

pub fn cmd_ask(args: AskArgs) -> CmdResult {
    if args.caller_provider.as_deref() == Some(agy_bridge::pi::provider::PROVIDER_ID) {
        return Ok(AskReport::failed(
            "AskAntigravity is not available while the current model is itself antigravity: agy would be delegating to itself".into(),
        )
        .print(args.json));
    }
    let AskTurn {
        cfg,
        turn,
        label,
        gating,
    } = match ask_turn(&args) {
        Ok(t) => t,
        Err(e) => return Ok(AskReport::failed(e).print(args.json)),
    };
    let (result, events) = runtime()?.block_on(run_collecting(cfg, turn, gating));
    let answer = final_answer(&result, &events);
    let mut notices = result.notices.clone();
    if let Some(reason) = &result.degraded {
        notices.push(runner::degraded_notice(reason));
    }
    if let (Some(lost), Some(id)) = (&result.lost_conversation, &result.conversation_id) {
        notices.push(runner::new_conversation_notice(lost, id));
    }
    Ok(AskReport {
        answer: &answer,
        id: result.conversation_id.as_deref(),
        error: result.failure.as_ref().map(|f| f.to_string()),
        model: Some(&label),
        notices: &notices,
    }
    .print(args.json))
}

/// Run one turn to the end, keeping agy's events (Ctrl-C and the other
/// signals abort it).
async fn run_collecting(
    mut cfg: RunConfig,
    mut turn: TurnRequest,
    gating: Option<super::gate::GatePlan>,
) -> (runner::RunResult, Vec<agy_bridge::follow::events::Event>) {
    let cancel = CancellationToken::new();
    cancel_on_signals(cancel.clone());
    let Ok(_seat) = super::admission::admit_one_shot(&cancel).await else {
        return (runner::RunResult::aborted_before_start(), Vec::new());
    };
    let (tx, mut rx) = runner::event_channel();
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let RunEvent::Agy(e) = ev {
                v.push(e);
            }
        }
        v
    });
    let _gate = super::gate::open_unattended(gating.as_ref(), &mut cfg, &mut turn).await;
    let result = runner::run(&cfg, &turn, cancel, tx).await;
    (result, collect.await.unwrap_or_default())
}

/// agy's answer: its stream-json `result.response` when it printed one,
/// else the last planner step's text, else its plain stdout.
fn final_answer(
    result: &runner::RunResult,
    events: &[agy_bridge::follow::events::Event],
) -> String {
    if let Some(r) = result
        .agy_result
        .as_ref()
        .filter(|r| !r.response.is_empty())
    {
        return r.response.trim_end().to_string();
    }
    let t = agy_bridge::follow::transcript::Transcript::from_events(events.iter().cloned());
    t.last_answer()
        .map(str::to_string)
        .unwrap_or_else(|| result.stdout.trim().to_string())
}

fn strip_add_dirs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--add-dir" {
            skip = true;
            continue;
        }
        if a.starts_with("--add-dir=") {
            continue;
        }
        out.push(a.clone());
    }
    out
}
