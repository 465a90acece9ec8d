//! Shared harness for end-to-end tests: fake-agy as the agy binary, a
//! temporary HOME, and helpers to compare a live stream with a recording.
#![allow(dead_code)]

use agy_bridge::follow::events::{self, Event};
use agy_bridge::follow::transcript::Transcript;
use agy_bridge::runner::{self, RunConfig, RunEvent, RunResult, TurnRequest};
use agy_corpus::recording::{self, Recording};
use agy_format::steps;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The fake-agy binary built next to this test binary. `cargo test
/// --workspace` builds it; a lone `cargo test --test X` may not.
pub fn fake_agy() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("fake-agy");
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with `cargo test --workspace` (or `cargo build -p fake-agy` first)",
        bin.display()
    );
    bin
}

pub fn load(name: &str) -> Recording {
    let path = recording::resolve(name, &recording::bundled_dir()).expect("recording");
    Recording::load(&path).expect("load")
}

/// A temporary HOME with agy's conversations directory.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn conversations(&self) -> PathBuf {
        self.dir
            .path()
            .join(".gemini/antigravity-cli/conversations")
    }

    /// A runner config that runs fake-agy replaying `recording` at `speed`.
    pub fn config(&self, recording: &str, speed: f64) -> RunConfig {
        RunConfig {
            agy_bin: fake_agy(),
            conversations_dir: self.conversations(),
            env: vec![
                ("HOME".into(), self.dir.path().display().to_string()),
                ("FAKE_AGY_RECORDING".into(), recording.into()),
                ("FAKE_AGY_SPEED".into(), speed.to_string()),
            ],
            timeout: Duration::from_secs(120),
            bind: agy_format::agy_args::BindMode::Discovery,
            ..RunConfig::default()
        }
    }
}

/// Everything a test wants from one run.
pub struct Outcome {
    pub result: RunResult,
    pub events: Vec<(Instant, RunEvent)>,
    pub started: Instant,
}

impl Outcome {
    pub fn agy_events(&self) -> Vec<Event> {
        self.events
            .iter()
            .filter_map(|(_, e)| match e {
                RunEvent::Agy(ev) => Some(ev.clone()),
                _ => None,
            })
            .collect()
    }

    /// The stream's transcript, with subagent ids normalised (a replay
    /// gives every conversation a fresh id, as agy does).
    pub fn transcript(&self) -> Transcript {
        normalise(Transcript::from_events(self.agy_events()))
    }
}

pub async fn run_with(cfg: RunConfig, req: TurnRequest, cancel: CancellationToken) -> Outcome {
    let (tx, mut rx) = runner::event_channel();
    let started = Instant::now();
    let collector = tokio::spawn(async move {
        let mut out = Vec::new();
        while let Some(e) = rx.recv().await {
            out.push((Instant::now(), e));
        }
        out
    });
    let result = runner::run(&cfg, &req, cancel, tx).await;
    let events = collector.await.expect("collector");
    Outcome {
        result,
        events,
        started,
    }
}

pub async fn run(cfg: RunConfig, prompt: &str) -> Outcome {
    let req = TurnRequest {
        prompt: prompt.into(),
        ..TurnRequest::default()
    };
    run_with(cfg, req, CancellationToken::new()).await
}

/// What a full replay of `rec` amounts to: its root database decoded once.
pub fn expected(rec: &Recording) -> Transcript {
    // The bridge runs one turn per agy process, which replays a stdin
    // session recording's first turn only.
    let mut rec = rec.clone();
    rec.commits.retain(|c| c.turn == 0);
    let conn = rec
        .final_database(&rec.header.root_conversation)
        .expect("final db");
    let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
    let decoded: Vec<_> = rows.iter().map(steps::decode).collect();
    normalise(Transcript::from_events(events::decode_all(&decoded)))
}

/// A transcript with what depends on more than the root database made
/// equal: subagents' conversation ids, and their answers, which a live run
/// reads from the child's database beside the root's and a decode of the
/// root alone cannot know.
pub fn normalise(mut t: Transcript) -> Transcript {
    for items in t.steps.values_mut() {
        for e in items.iter_mut() {
            match e {
                Event::Subagent {
                    conversation_id, ..
                } => *conversation_id = "<child conversation>".into(),
                Event::SubagentEnded {
                    conversation_id,
                    answer,
                    ..
                } => {
                    *conversation_id = "<child conversation>".into();
                    *answer = None;
                }
                _ => {}
            }
        }
    }
    t
}

/// The fields of `/proc/PID/stat` after the command name: the state
/// first, then the parent's pid, ….
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// A process's state letter (`T`: stopped, `Z`: a zombie).
pub fn state_of(pid: u32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// A process's parent.
pub fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    state_of(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `agy-bridge SUBCOMMAND` with fake-agy as agy, replaying `recording` at
/// `speed`, in the temporary `home`, and none of the caller's own agy-bridge
/// settings leaking in from the environment. Permissions are `allow` (the
/// default before `ask`): these tests are about everything but the
/// permission gate, which tests/permissions.rs and tests/gate.rs cover (set
/// `AGY_PERMISSIONS` again to choose).
pub fn bridge(
    subcommand: &str,
    home: &Path,
    recording: &str,
    speed: &str,
) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_agy-bridge"));
    c.arg(subcommand)
        .env("HOME", home)
        .env("AGY_BIN", fake_agy())
        .env("FAKE_AGY_RECORDING", recording)
        .env("FAKE_AGY_SPEED", speed);
    for var in [
        "AGY_BRIDGE_STATE_DIR",
        "PI_CODING_AGENT_DIR",
        "AGY_CONVERSATIONS_DIR",
        "AGY_MODE",
        "AGY_SKIP_PERMISSIONS",
        "AGY_PERMISSIONS",
        "AGY_ALLOW",
        "AGY_DEFAULT_MODEL",
        "AGY_DEFAULT_THINKING",
        "AGY_EXTRA_ARGS",
        "AGY_BIND",
        "AGY_WAKE",
    ] {
        c.env_remove(var);
    }
    c.env("AGY_PERMISSIONS", "allow");
    c
}

/// A process's command line, its arguments joined by spaces ("" once it
/// is gone).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// Live pids whose command line contains `marker` (never this process).
pub fn pids_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && alive(*pid) && cmdline(*pid).contains(marker))
        .collect()
}

/// `template` (a [`bridge`] command) run by `sh -c script`, with the
/// template's environment: sh stays the bridge's parent, as pi would be, so
/// killing sh is killing pi. `script` names the bridge as `{bridge}`.
pub fn under_sh(template: &std::process::Command, script: &str) -> std::process::Child {
    let mut parent = std::process::Command::new("sh");
    let bridge = format!("'{}'", template.get_program().to_string_lossy());
    parent.arg("-c").arg(script.replace("{bridge}", &bridge));
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => parent.env(k, v),
            None => parent.env_remove(k),
        };
    }
    parent.spawn().expect("sh")
}

/// How long a test lets a child process run before it is killed and the
/// test fails: generous, since the machine may be busy, but a bound.
pub const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// Wait for `child` to exit, at most `limit`; on expiry it is killed and
/// the test fails, so a test never hangs on a child.
pub fn wait_status(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {} did not exit within {limit:?}; killed", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`std::process::Child::wait_with_output`] with [`wait_status`]'s bound:
/// the pipes are read on threads while the child is waited for.
pub fn wait_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    fn read_all(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    }
    let stdout = child.stdout.take().map(read_all);
    let stderr = child.stderr.take().map(read_all);
    let status = wait_status(&mut child, limit);
    let join = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.map(|h| h.join().expect("pipe reader"))
            .unwrap_or_default()
    };
    std::process::Output {
        status,
        stdout: join(stdout),
        stderr: join(stderr),
    }
}

/// Kills a child that is still running `limit` after this was made, unless
/// dropped first: bounds a test that reads a child's output line by line.
/// Drop it before reaping the child (with [`wait_status`]), so its pid
/// cannot have been reused when it fires.
pub struct Watchdog {
    disarm: Option<std::sync::mpsc::Sender<()>>,
}

impl Watchdog {
    pub fn new(child: &std::process::Child, limit: Duration) -> Watchdog {
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("child {pid} still running after {limit:?}; killing it");
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        });
        Watchdog { disarm: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.disarm.take() {
            let _ = tx.send(());
        }
    }
}

/// Poll `holds` until it is true or `limit` passes; whether it became
/// true. For checks that something stopped (a process is gone): poll to a
/// deadline instead of sleeping and looking once.
pub fn eventually(limit: Duration, mut holds: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if holds() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// pi's automatic retry, as pi matches an error message: never the
/// non-retryable words, otherwise any transient word.
pub fn pi_retries(message: &str) -> bool {
    let never = regex::Regex::new(
        r"(?i)usage limit reached|available balance|insufficient_quota|out of budget|quota exceeded|billing",
    )
    .expect("regex");
    let transient = regex::Regex::new(
        r"(?i)overloaded|rate.?limit|too many requests|\b(?:429|500|502|503|504|524)\b|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|connection.?refused|connection.?lost|fetch failed|socket hang up|timed? out|timeout|terminated",
    )
    .expect("regex");
    !never.is_match(message) && transient.is_match(message)
}

/// One turn of `agy_bin` (a stand-in agy that prints real captures) through
/// the runner with stream-json binding; its result and every event.
pub async fn run_stand_in(
    agy_bin: PathBuf,
    conversations_dir: PathBuf,
    req: TurnRequest,
) -> (RunResult, Vec<RunEvent>) {
    let cfg = RunConfig {
        agy_bin,
        conversations_dir,
        bind: agy_format::agy_args::BindMode::StreamJson,
        timeout: Duration::from_secs(60),
        ..RunConfig::default()
    };
    let (tx, mut rx) = runner::event_channel();
    // Read while the turn runs: a bounded channel nobody reads holds the
    // turn up.
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    let result = runner::run(&cfg, &req, CancellationToken::new(), tx).await;
    let events = collector.await.expect("collector");
    (result, events)
}

/// The answer text among the runner's events.
pub fn text_of(events: &[RunEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::Text { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The thinking text among pi's events (where the bridge's lines go).
pub fn pi_thinking(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "thinking_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

/// The bridge's `sessions.json` in a test HOME (`null` when absent).
pub fn sessions_json(home: &Path) -> serde_json::Value {
    let path = home.join(".pi/agent/antigravity-bridge/sessions.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The directory of real agy captures `AGY_CAPTURES_DIR` names. The tests
/// that read it are `#[ignore = "needs AGY_CAPTURES_DIR ..."]`, so a plain
/// `cargo test` lists them as ignored; run with `--include-ignored` (as
/// `.ci/run` does) they fail, never pass, without it.
pub fn captures_dir() -> PathBuf {
    match std::env::var_os("AGY_CAPTURES_DIR") {
        Some(d) if Path::new(&d).is_dir() => PathBuf::from(d),
        other => panic!(
            "this test reads real agy captures: set AGY_CAPTURES_DIR to their directory (it is {other:?})"
        ),
    }
}

/// The prompts fake-agy read on its stdin (`FAKE_AGY_STDIN_LOG`), in order;
/// none when the log was never written.
pub fn stdin_prompts(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON string per line"))
        .collect()
}

/// Every command line fake-agy was started with (`FAKE_AGY_ARGV_LOG`), in
/// order.
pub fn argvs(log: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON array per line"))
        .collect()
}

/// One `stream` turn as pi runs it: the request line, then stdin held open
/// to the end of the turn (its end would mean pi is gone, and abort the
/// turn), closed once the bridge has exited. `child` has piped stdio.
pub fn stream_output(mut child: std::process::Child, request: &str) -> std::process::Output {
    use std::io::Write;
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("request");
    let out = wait_output(child, CHILD_LIMIT);
    drop(stdin);
    out
}
