//! The turn-running subcommands of the `agy-bridge` binary: `run`, `demo`,
//! `stream` and `ask`. Each is a thin shell over the library: parse flags,
//! build a runtime, call the runner or the provider, and turn the outcome
//! into an exit code and words a user can act on.

use agy_bridge::discovery::ConversationId;
use agy_bridge::mcp::relay::Control;
use agy_bridge::render::LiveView;
use agy_bridge::runner::{
    self, BindMode, Effort, Mode, RunConfig, RunEvent, TurnRequest, WakeMode,
};
use clap::Args;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// agy model (slug or display name), passed as --model.
    #[arg(long)]
    model: Option<String>,
    /// low, medium or high (Gemini tiers only).
    #[arg(long)]
    effort: Option<Effort>,
    /// plan or accept-edits.
    #[arg(long)]
    mode: Option<Mode>,
    /// Resume this conversation (streams only new steps).
    #[arg(long)]
    conversation: Option<String>,
    /// Working directory for agy.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Our own watchdog, in minutes.
    #[arg(long, default_value_t = 10)]
    timeout_min: u64,
    /// One JSON event per line, then a final result line.
    #[arg(long)]
    json: bool,
    /// How to bind the conversation: auto, discovery or stream-json.
    #[arg(long, default_value = "auto")]
    bind: BindMode,
    /// Wake only on the fallback interval (no inotify).
    #[arg(long)]
    poll_only: bool,
    /// Fallback poll interval in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// The prompt.
    prompt: String,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which bundled recording to replay.
    #[arg(long, default_value = "tools")]
    recording: String,
    /// Replay speed (1 = agy's recorded pace).
    #[arg(long, default_value_t = 2.0)]
    speed: f64,
    /// One JSON event per line instead of the readable view.
    #[arg(long)]
    json: bool,
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// The environment's runner settings, with this binary as agy's guardian
/// (so agy's tree dies with us, however we die).
pub fn run_config() -> RunConfig {
    let mut cfg = RunConfig::from_env();
    cfg.guardian = std::env::current_exe().ok();
    cfg
}

/// Cancel `token` on Ctrl-C, SIGTERM, SIGHUP (the terminal closed, the
/// parent shell died) or SIGQUIT: each ends the turn the same way, terminal
/// event first.
fn cancel_on_signals(token: CancellationToken) {
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
}

/// Run one turn, printing events as they come; returns the exit code.
async fn drive(
    cfg: RunConfig,
    req: TurnRequest,
    json: bool,
) -> io::Result<(ExitCode, runner::RunResult)> {
    let cancel = CancellationToken::new();
    cancel_on_signals(cancel.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let printer = tokio::spawn(async move {
        let stdout = io::stdout();
        let color = stdout.is_terminal();
        let mut view = LiveView::new(stdout, color);
        while let Some(ev) = rx.recv().await {
            let r = if json {
                serde_json::to_string(&ev)
                    .map_err(io::Error::other)
                    .and_then(|line| {
                        let mut out = io::stdout().lock();
                        writeln!(out, "{line}").and_then(|_| out.flush())
                    })
            } else {
                view.event(&ev)
            };
            if r.is_err() {
                break;
            }
        }
        view
    });
    let result = runner::run(&cfg, &req, cancel, tx).await;
    let mut view = printer.await.map_err(io::Error::other)?;
    if json {
        let line = serde_json::json!({"kind": "result", "result": &result});
        println!("{line}");
    } else {
        view.summary(&result)?;
    }
    let code = match &result.failure {
        None => ExitCode::SUCCESS,
        Some(f) => {
            eprintln!("agy-bridge: error: {f}");
            ExitCode::FAILURE
        }
    };
    Ok((code, result))
}

/// The saved settings merged with the environment, warnings on stderr.
fn settings() -> agy_bridge::config::Config {
    match agy_bridge::config::Config::load() {
        Ok(status) => {
            for w in &status.warnings {
                eprintln!("agy-bridge: warning: {w}");
            }
            status.config
        }
        Err(e) => {
            eprintln!("agy-bridge: warning: using default settings: {e}");
            agy_bridge::config::Config::default()
        }
    }
}

pub fn cmd_run(args: RunArgs) -> CmdResult {
    let settings = settings();
    let mut cfg = run_config();
    cfg.skip_permissions = settings.skip_permissions;
    cfg.timeout = Duration::from_secs(args.timeout_min.max(1) * 60);
    cfg.bind = args.bind;
    cfg.poll_interval = Duration::from_millis(args.poll_ms.max(10));
    if args.poll_only {
        cfg.wake = WakeMode::PollOnly;
    }
    let conversation = args
        .conversation
        .as_deref()
        .map(ConversationId::parse)
        .transpose()?;
    let workspace = args.cwd.clone().or_else(|| std::env::current_dir().ok());
    let req = TurnRequest {
        prompt: args.prompt,
        cwd: args.cwd,
        add_dirs: workspace.into_iter().collect(),
        model: args.model,
        effort: args.effort,
        mode: Some(args.mode.unwrap_or(settings.mode)),
        conversation,
        ..TurnRequest::default()
    };
    let rt = runtime()?;
    let (code, _) = rt.block_on(drive(cfg, req, args.json))?;
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
    let recording =
        agy_bridge::recording::resolve(&args.recording, &agy_bridge::recording::bundled_dir())?;
    let rec = agy_bridge::recording::Recording::load(&recording)?;
    let home = tempfile_dir()?;
    let conversations = home.join(".gemini/antigravity-cli/conversations");
    if !args.json {
        println!(
            "agy-bridge demo: replaying recording {:?} ({}) with the bundled fake agy at {}x; no real agy, no network.\nprompt: {}\n",
            args.recording, rec.header.description, args.speed, rec.header.prompt
        );
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
    let outcome = rt.block_on(drive(cfg, req, args.json));
    let _ = std::fs::remove_dir_all(&home);
    Ok(outcome?.0)
}

/// A private temporary directory (removed by the caller).
fn tempfile_dir() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("agy-bridge-demo-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

// ---------------------------------------------------------------------------
// stream: the pi boundary.
// ---------------------------------------------------------------------------

#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Our own watchdog per turn, in minutes.
    #[arg(long, env = "AGY_TIMEOUT_MIN", default_value_t = 10)]
    timeout_min: u64,
}

/// Read stdin lines on a plain thread: the first is the request; later
/// ones are `{"type":"abort"}` (cancels at once) or the control lines of
/// pi's tool results (see [`agy_bridge::mcp::relay::Control`]).
fn stdin_reader(
    cancel: CancellationToken,
) -> (
    tokio::sync::oneshot::Receiver<Option<String>>,
    tokio::sync::mpsc::UnboundedReceiver<Control>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (control_tx, control) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = io::stdin().lock().lines();
        let first = lines.next().and_then(Result::ok);
        let _ = tx.send(first);
        for line in lines {
            let Ok(line) = line else { break };
            let is_abort = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(|t| t == "abort"))
                .unwrap_or(false);
            if is_abort {
                cancel.cancel();
            } else if let Some(c) = Control::parse(&line) {
                let _ = control_tx.send(c);
            }
        }
        let _ = control_tx.send(Control::Closed);
    });
    (rx, control)
}

pub fn cmd_stream(args: StreamArgs) -> CmdResult {
    let rt = runtime()?;
    let ok = rt.block_on(stream_turn(args));
    // The stdin thread may still be blocked reading; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn stream_turn(args: StreamArgs) -> bool {
    use agy_bridge::provider::{EventMapper, PiStream, StreamRequest};
    let mut pi = PiStream::new(io::stdout());
    pi.start();
    let cancel = CancellationToken::new();
    cancel_on_signals(cancel.clone());
    let (request_line, control) = stdin_reader(cancel.clone());

    let line = tokio::select! {
        line = request_line => line.ok().flatten(),
        _ = cancel.cancelled() => {
            pi.fail(true, "Operation aborted");
            return false;
        }
    };
    let Some(line) = line else {
        pi.fail(false, "agy-bridge: bad request: no request line on stdin");
        return false;
    };
    let req: StreamRequest = match serde_json::from_str(&line) {
        Ok(r) => r,
        Err(e) => {
            pi.fail(false, &format!("agy-bridge: bad request: {e}"));
            return false;
        }
    };
    // One turn per session at a time: wait for the one before (within our
    // watchdog) so this one resumes the conversation it left.
    let (session_key, store) = session_of(&req);
    let wait = Duration::from_secs(args.timeout_min.max(1).saturating_mul(60));
    let _turn_lock = match &store {
        Some(store) => match wait_turn_lock(store, &session_key, &cancel, wait).await {
            Ok(lock) => Some(lock),
            Err(TurnWait::Aborted) => {
                pi.fail(true, "Operation aborted");
                return false;
            }
            Err(TurnWait::Failed(message)) => {
                pi.fail(false, &message);
                return false;
            }
        },
        None => None,
    };
    let prepared = match prepare_turn(&req, args.timeout_min, session_key, store) {
        Ok(p) => p,
        Err(message) => {
            pi.fail(false, &message);
            return false;
        }
    };
    for note in &prepared.notes {
        pi.thinking(note);
    }
    let mut mapper = EventMapper::new(&prepared.cwd);
    let mut turn = prepared.turn.clone();
    // pi's tools, served to agy for this turn only (dropped with it).
    let bridge = match serve_pi_tools(&req, &mut turn, &mut mapper).await {
        Ok(b) => b,
        Err(message) => {
            pi.fail(false, &message);
            return false;
        }
    };
    let mut tool_lines = bridge.map(|b| {
        let lines = agy_bridge::mcp::relay::ToolLines {
            calls: b.calls,
            control,
            window: agy_bridge::mcp::relay::batch_window(),
        };
        (b.server, b.dir, lines)
    });

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let cfg = prepared.cfg.clone();
    let run_cancel = cancel.clone();
    let runner = tokio::spawn(async move { runner::run(&cfg, &turn, run_cancel, tx).await });
    let tools = tool_lines.as_mut().map(|(_, _, lines)| lines);
    agy_bridge::mcp::relay::relay(&mut rx, tools, &mut pi, &mut mapper, &cancel).await;
    let result = runner.await;
    // The turn is over: close the port, remove the config, answer any call.
    drop(tool_lines);
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
    end_turn(&mut pi, &prepared, &req, &result)
}

/// Save the session's binding and end pi's message with the turn's outcome.
fn end_turn<W: Write>(
    pi: &mut agy_bridge::provider::PiStream<W>,
    prepared: &PreparedTurn,
    req: &agy_bridge::provider::StreamRequest,
    result: &runner::RunResult,
) -> bool {
    use agy_bridge::provider;
    // Remember where this conversation is, unless the run failed to bind.
    if let Some(store) = &prepared.store {
        let last = result.last_idx.or(prepared.turn.after_idx).unwrap_or(-1);
        if let Err(e) = store.update_if_bound(
            &prepared.session_key,
            result.conversation_id.as_deref(),
            last,
            req.messages.len() as u64,
        ) {
            eprintln!("agy-bridge: warning: could not save the session binding: {e}");
        }
    }
    for notice in &result.notices {
        pi.thinking(&format!("\n[{notice}]\n"));
    }
    if result.failure.is_none() {
        pi.done(result.usage.as_ref().map(provider::PiUsage::from_turn));
        true
    } else {
        let (aborted, message) = provider::error_message(result);
        pi.fail(aborted, &message);
        false
    }
}

/// Serve the request's tools (those agy lacks) to agy for this turn: the
/// private MCP config directory joins the turn's `--add-dir`s.
async fn serve_pi_tools(
    req: &agy_bridge::provider::StreamRequest,
    turn: &mut TurnRequest,
    mapper: &mut agy_bridge::provider::EventMapper,
) -> Result<Option<agy_bridge::mcp::ToolBridge>, String> {
    use agy_bridge::mcp;
    if mcp::disabled_by_env() {
        return Ok(None);
    }
    let bridge = mcp::ToolBridge::start(mcp::offered_tools(&req.tools))
        .await
        .map_err(|e| format!("agy-bridge: cannot serve pi's tools to agy: {e}"))?;
    if let Some(b) = &bridge {
        turn.add_dirs.push(b.dir.path().to_path_buf());
        mapper.hide_bridge_calls();
    }
    Ok(bridge)
}

/// The request's working directory: pi's, else ours.
fn request_cwd(req: &agy_bridge::provider::StreamRequest) -> PathBuf {
    req.cwd
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The request's session key and the session store (if it can be opened).
fn session_of(
    req: &agy_bridge::provider::StreamRequest,
) -> (String, Option<agy_bridge::sessions::SessionStore>) {
    use agy_bridge::sessions::{SessionKey, SessionStore};
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
}

/// Take the session's turn lock, waiting (cancellably, at most `wait`) for
/// another process's turn of the same session to end.
async fn wait_turn_lock(
    store: &agy_bridge::sessions::SessionStore,
    key: &str,
    cancel: &CancellationToken,
    wait: Duration,
) -> Result<agy_bridge::sessions::TurnLock, TurnWait> {
    let deadline = std::time::Instant::now().checked_add(wait);
    loop {
        match store.try_lock_turn(key) {
            Ok(Some(lock)) => return Ok(lock),
            Ok(None) => {}
            Err(e) => return Err(TurnWait::Failed(format!("agy-bridge: {e}"))),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(TurnWait::Failed(format!(
                "agy-bridge: another turn of this pi session was still running after {} minutes; try again when it has finished",
                wait.as_secs() / 60
            )));
        }
        tokio::select! {
            _ = cancel.cancelled() => return Err(TurnWait::Aborted),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

struct PreparedTurn {
    cfg: RunConfig,
    turn: TurnRequest,
    cwd: PathBuf,
    session_key: String,
    store: Option<agy_bridge::sessions::SessionStore>,
    /// Thinking lines to show before agy starts.
    notes: Vec<String>,
}

/// Everything between pi's request and agy's command line; errors are the
/// message pi shows.
fn prepare_turn(
    req: &agy_bridge::provider::StreamRequest,
    timeout_min: u64,
    session_key: String,
    store: Option<agy_bridge::sessions::SessionStore>,
) -> Result<PreparedTurn, String> {
    use agy_bridge::models::{self, ThinkingLevel};
    use agy_bridge::provider::{self, DIGEST_MAX_CHARS};

    let prompt = provider::extract_prompt(&req.messages).map_err(|e| format!("agy-bridge: {e}"))?;
    let cwd = request_cwd(req);
    let settings = settings();
    let thinking = req
        .reasoning
        .as_deref()
        .and_then(|r| r.parse::<ThinkingLevel>().ok());
    let resolved = models::catalog()
        .resolve(&req.model, thinking)
        .map_err(|e| format!("agy-bridge: {e}"))?;

    let mut cfg = run_config();
    cfg.skip_permissions = settings.skip_permissions;
    cfg.timeout = Duration::from_secs(timeout_min.max(1) * 60);

    let mut notes = Vec::new();
    let mut existing = match store.as_ref().map(|s| s.get(&session_key)) {
        Some(Ok(entry)) => entry,
        Some(Err(e)) => {
            eprintln!("agy-bridge: warning: cannot read the session binding: {e}");
            None
        }
        None => None,
    };
    if let Some(entry) = &existing {
        let db = agy_bridge::discovery::db_path(&cfg.conversations_dir, &entry.conversation_id);
        if !db.is_file() {
            notes.push(format!(
                "[agy-bridge: conversation {} is gone from {}; starting a new one]\n",
                entry.conversation_id,
                cfg.conversations_dir.display()
            ));
            existing = None;
        }
    }
    let watermark = existing
        .as_ref()
        .map(|e| e.message_count as usize)
        .unwrap_or(0);
    let digest = provider::context_digest(&req.messages, watermark, DIGEST_MAX_CHARS);
    if prompt.dropped_images > 0 {
        notes.push(format!(
            "[agy-bridge: {} image(s) not sent: agy -p takes text only]\n",
            prompt.dropped_images
        ));
    }
    let turn = TurnRequest {
        prompt: provider::compose_prompt(&prompt, &digest),
        cwd: Some(cwd.clone()),
        model: Some(resolved.model),
        effort: resolved.effort,
        mode: Some(settings.mode),
        conversation: existing.as_ref().map(|e| e.conversation_id.clone()),
        after_idx: existing.as_ref().map(|e| e.last_step_idx),
        // agy's workspace: the directory pi works in.
        add_dirs: vec![cwd.clone()],
    };
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
    /// plan or accept-edits (default: the configured mode).
    #[arg(long)]
    mode: Option<Mode>,
    /// Continue an earlier conversation (its id is in the footer).
    #[arg(long)]
    conversation: Option<String>,
    /// Working directory for agy.
    #[arg(long)]
    cwd: Option<PathBuf>,
    #[arg(long, default_value_t = 10)]
    timeout_min: u64,
    /// Print {"answer", "conversationId", ...} as one JSON object.
    #[arg(long)]
    json: bool,
    /// The provider of the model calling this tool; `antigravity` refuses
    /// (agy delegating to itself would recurse).
    #[arg(long)]
    caller_provider: Option<String>,
    /// The task or question.
    prompt: String,
}

pub fn cmd_ask(args: AskArgs) -> CmdResult {
    let json = args.json;
    let report_with = |answer: &str,
                       id: Option<&str>,
                       error: Option<String>,
                       model: Option<&str>,
                       notices: &[String]| {
        if json {
            let v = serde_json::json!({
                "answer": answer,
                "conversationId": id,
                "model": model,
                "ok": error.is_none(),
                "error": error,
                "notices": notices,
            });
            println!("{v}");
        } else {
            if !answer.is_empty() {
                println!("{answer}");
            }
            if let Some(id) = id {
                println!("\n[agy conversation: {id}; continue with --conversation {id}]");
            }
            for notice in notices {
                eprintln!("agy-bridge: note: {notice}");
            }
            if let Some(e) = &error {
                eprintln!("agy-bridge: error: {e}");
            }
        }
        if error.is_some() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    };
    let report = |answer: &str, id: Option<&str>, error: Option<String>, model: Option<&str>| {
        report_with(answer, id, error, model, &[])
    };
    if args.caller_provider.as_deref() == Some(agy_bridge::provider::PROVIDER_ID) {
        return Ok(report(
            "",
            None,
            Some("AskAntigravity is not available while the current model is itself antigravity: agy would be delegating to itself".into()),
            None,
        ));
    }
    let settings = settings();
    let alias = args
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let resolved = match agy_bridge::models::catalog()
        .resolve_alias(&alias, Some(settings.default_thinking))
    {
        Ok(r) => r,
        Err(e) => return Ok(report("", None, Some(e.to_string()), None)),
    };
    let conversation = match args
        .conversation
        .as_deref()
        .map(ConversationId::parse)
        .transpose()
    {
        Ok(c) => c,
        Err(e) => return Ok(report("", None, Some(e.to_string()), None)),
    };
    let mut cfg = run_config();
    cfg.skip_permissions = settings.skip_permissions;
    cfg.timeout = Duration::from_secs(args.timeout_min.max(1) * 60);
    // A delegated run gets the workspace and nothing else: no directory of
    // the bridge's own reaches it, so it cannot call back into pi.
    cfg.extra_args = strip_add_dirs(&cfg.extra_args);
    let workspace = args.cwd.clone().or_else(|| std::env::current_dir().ok());
    let turn = TurnRequest {
        prompt: args.prompt.clone(),
        cwd: args.cwd.clone(),
        add_dirs: workspace.into_iter().collect(),
        model: Some(resolved.model.clone()),
        effort: resolved.effort,
        mode: Some(args.mode.unwrap_or(settings.mode)),
        conversation,
        ..TurnRequest::default()
    };
    let rt = runtime()?;
    let (result, events) = rt.block_on(async {
        let cancel = CancellationToken::new();
        cancel_on_signals(cancel.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let collect = tokio::spawn(async move {
            let mut v = Vec::new();
            while let Some(RunEvent::Agy(e)) = rx.recv().await {
                v.push(e);
            }
            // Drain the rest (non-agy events end the loop above early).
            while let Some(ev) = rx.recv().await {
                if let RunEvent::Agy(e) = ev {
                    v.push(e);
                }
            }
            v
        });
        let result = runner::run(&cfg, &turn, cancel, tx).await;
        (result, collect.await.unwrap_or_default())
    });
    let answer = final_answer(&result, &events);
    let label = match resolved.effort {
        Some(e) => format!("{} ({})", resolved.model, e.as_arg()),
        None => resolved.model.clone(),
    };
    let mut notices = result.notices.clone();
    if let Some(reason) = &result.degraded {
        notices.push(runner::degraded_notice(reason));
    }
    Ok(report_with(
        &answer,
        result.conversation_id.as_deref(),
        result.failure.as_ref().map(|f| f.to_string()),
        Some(&label),
        &notices,
    ))
}

/// agy's answer: its stream-json `result.response` when it printed one,
/// else the last planner step's text, else its plain stdout.
fn final_answer(result: &runner::RunResult, events: &[agy_bridge::events::Event]) -> String {
    if let Some(r) = result
        .agy_result
        .as_ref()
        .filter(|r| !r.response.is_empty())
    {
        return r.response.trim_end().to_string();
    }
    let t = agy_bridge::events::Transcript::from_events(events.iter().cloned());
    let last = t.steps.values().rev().find_map(|items| {
        items.iter().find_map(|e| match e {
            agy_bridge::events::Event::Text { text, .. } if !text.trim().is_empty() => {
                Some(text.clone())
            }
            _ => None,
        })
    });
    last.unwrap_or_else(|| result.stdout.trim().to_string())
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
