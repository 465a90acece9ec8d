//! `agy-bridge stream`, the pi boundary, as transcripts: one JSON request in,
//! pi's events out. Every path ends in exactly one terminal event.

mod common;

use common::bridge;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().expect("tmp"),
        }
    }

    fn command(&self, recording: &str) -> Command {
        let mut c = bridge("stream", self.home.path(), recording, "8");
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn sessions(&self) -> Value {
        common::sessions_json(self.home.path())
    }
}

fn request(prompt: &str, session: &str, messages_before: Vec<Value>) -> String {
    let mut messages = messages_before;
    messages.push(json!({"role": "user", "content": [{"type": "text", "text": prompt}]}));
    json!({
        "model": "gemini-3.7-flash",
        "reasoning": "medium",
        "sessionId": session,
        "cwd": "/tmp",
        "messages": messages,
    })
    .to_string()
}

/// Run one turn to the end; return the event lines.
fn transcript(env: &Env, recording: &str, input: &str) -> Vec<Value> {
    let child = env.command(recording).spawn().expect("spawn");
    let out = common::stream_output(child, input);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The event types with consecutive deltas folded: the shape of a stream.
fn shape(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let t = e["type"].as_str().unwrap_or("?").to_string();
        if t.ends_with("_delta") && out.last() == Some(&t) {
            continue;
        }
        out.push(t);
    }
    out
}

fn terminal_count(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e["type"].as_str(), Some("done") | Some("error")))
        .count()
}

#[test]
fn a_turn_streams_thinking_then_text_then_done() {
    let env = Env::new();
    let events = transcript(
        &env,
        "thinking",
        &request("What is the capital of Australia?", "s1", vec![]),
    );
    assert_eq!(
        shape(&events),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "done"
        ]
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(text.starts_with("The capital of Australia is **Canberra**"));
    let text_end = events
        .iter()
        .find(|e| e["type"] == "text_end")
        .expect("text_end");
    // The block's text is the deltas' (the extension fills pi's `content`
    // from them): the bridge sends no second copy of the answer.
    assert!(text_end.get("content").is_none(), "{text_end}");
    assert_eq!(events.last().expect("last")["reason"], "stop");
    // No partial message on the wire, no tool calls ever.
    assert!(events.iter().all(|e| e.get("partial").is_none()));
    assert!(!events
        .iter()
        .any(|e| e["type"].as_str().unwrap_or("").starts_with("toolcall")));
}

#[test]
fn tools_become_thinking_lines_and_never_pi_tool_calls() {
    let env = Env::new();
    let events = transcript(
        &env,
        "tools",
        &request("Fix the failing test", "s1", vec![]),
    );
    let thinking: String = events
        .iter()
        .filter(|e| e["type"] == "thinking_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(thinking.contains("[agy tool: view_file]"), "{thinking}");
    assert!(thinking.contains("[agy tool: run_command]"));
    // The edit is announced as an edit (the file is outside any repo here).
    assert!(thinking.contains("[agy edit: "), "{thinking}");
    // A failed step is one line in agy's words, not a second error line.
    assert!(
        thinking
            .contains("\n[agy tool failed: run_command: ./deploy.sh: No such file or directory]\n"),
        "{thinking}"
    );
    assert_eq!(
        thinking.matches("deploy.sh: No such file").count(),
        1,
        "{thinking}"
    );
    assert_eq!(terminal_count(&events), 1);
    assert_eq!(events.last().expect("last")["type"], "done");
}

#[test]
fn bad_requests_end_in_one_error() {
    let env = Env::new();
    for (input, needle) in [
        ("this is not json".to_string(), "bad request"),
        (
            json!({"model": "gemini-3.7-flash", "messages": []}).to_string(),
            "no user message",
        ),
        (
            json!({"model": "gemini-3.7-flash", "messages": [{"role": "assistant", "content": []}]})
                .to_string(),
            "no user message",
        ),
        (
            json!({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]})
                .to_string(),
            "unknown model",
        ),
    ] {
        let events = transcript(&env, "hello", &input);
        assert_eq!(shape(&events), ["start", "error"], "{input}");
        let msg = events[1]["errorMessage"].as_str().unwrap_or("");
        assert!(msg.contains(needle), "{input}: {msg}");
        assert_eq!(events[1]["reason"], "error");
    }
}

#[test]
fn quota_error_is_not_retryable_wording() {
    let env = Env::new();
    let events = transcript(
        &env,
        "quota-error",
        &request("Refactor the parser", "s1", vec![]),
    );
    let last = events.last().expect("last");
    assert_eq!(last["type"], "error");
    let msg = last["errorMessage"].as_str().unwrap_or("");
    assert!(
        msg.contains("quota exceeded") && msg.contains("exhausted your capacity"),
        "{msg}"
    );
    assert_eq!(terminal_count(&events), 1);
    // agy's error step says what the failure says: pi shows it once.
    let said: usize = events
        .iter()
        .filter_map(|e| e["delta"].as_str().or(e["errorMessage"].as_str()))
        .map(|t| t.matches("exhausted your capacity").count())
        .sum();
    assert_eq!(said, 1, "{events:?}");
}

#[test]
fn abort_line_on_stdin_stops_agy_promptly() {
    let env = Env::new();
    let mut cmd = env.command("long-answer");
    cmd.env("FAKE_AGY_SPEED", "0.5");
    let mut child = cmd.spawn().expect("spawn");
    let watchdog = common::Watchdog::new(&child, common::CHILD_LIMIT);
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request("Write a long report", "s1", vec![])).expect("request");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    // Wait for the first answer text, then abort.
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        let is_text = v["type"] == "text_delta";
        seen.push(v);
        if is_text {
            break;
        }
    }
    let asked = Instant::now();
    writeln!(stdin, "{{\"type\":\"abort\"}}").expect("abort line");
    let mut aborted_after = None;
    for line in lines {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        if v["type"] == "error" {
            aborted_after = Some(asked.elapsed());
        }
        seen.push(v);
    }
    drop(watchdog);
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    let last = seen.last().expect("events");
    assert_eq!(last["type"], "error");
    assert_eq!(last["reason"], "aborted");
    assert_eq!(terminal_count(&seen), 1);
    assert!(aborted_after.expect("error event") < Duration::from_secs(2));
    assert!(!status.success());
    // The conversation stays bound for the next turn (agy saw the prompt).
    let sessions = env.sessions();
    assert!(
        sessions["sid:s1"]["conversationId"].is_string(),
        "{sessions}"
    );
}

#[test]
fn sigterm_aborts_too() {
    let env = Env::new();
    let mut cmd = env.command("long-answer");
    cmd.env("FAKE_AGY_SPEED", "0.5");
    let mut child = cmd.spawn().expect("spawn");
    let watchdog = common::Watchdog::new(&child, common::CHILD_LIMIT);
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request("Write a long report", "s1", vec![])).expect("request");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        if line.expect("line").contains("text_delta") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill");
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect();
    drop(watchdog);
    common::wait_status(&mut child, common::CHILD_LIMIT);
    let last = rest.last().expect("terminal event");
    assert_eq!(
        (last["type"].as_str(), last["reason"].as_str()),
        (Some("error"), Some("aborted"))
    );
    assert_eq!(terminal_count(&rest), 1);
}

#[test]
fn second_turn_resumes_and_a_failed_bind_keeps_the_binding() {
    let env = Env::new();
    let first = transcript(&env, "hello", &request("Say hello", "s1", vec![]));
    assert_eq!(first.last().expect("last")["type"], "done");
    let bound = env.sessions()["sid:s1"].clone();
    let conversation = bound["conversationId"].as_str().expect("bound").to_string();
    assert_eq!(bound["lastStepIdx"], 2);
    assert_eq!(bound["lastMessageCount"], 1);

    // Turn two: pi's history has our own answer (skipped by the digest) and
    // a turn by another provider (digested).
    let history = vec![
        json!({"role": "user", "content": "Say hello"}),
        json!({"role": "assistant", "provider": "antigravity", "content": [{"type": "text", "text": "Hello!"}]}),
        json!({"role": "user", "content": "and you, claude?"}),
        json!({"role": "assistant", "provider": "anthropic", "content": [{"type": "text", "text": "Hi from Claude"}]}),
    ];
    let argv_log = env.home.path().join("argv.jsonl");
    let stdin_log = env.home.path().join("stdin.jsonl");
    let second = {
        let mut cmd = env.command("resume");
        cmd.env("FAKE_AGY_ARGV_LOG", &argv_log)
            .env("FAKE_AGY_STDIN_LOG", &stdin_log);
        let child = cmd.spawn().expect("spawn");
        let out = common::stream_output(child, &request("Any suggestions?", "s1", history));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect::<Vec<_>>()
    };
    assert_eq!(second.last().expect("last")["type"], "done");
    let text: String = second
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(text.contains("proptest"), "{text}");
    assert!(
        !text.contains("Hello! I'm agy"),
        "old steps re-streamed: {text}"
    );
    let after = env.sessions()["sid:s1"].clone();
    assert_eq!(
        after["conversationId"].as_str(),
        Some(conversation.as_str())
    );
    assert_eq!(after["lastStepIdx"], 5);
    assert_eq!(after["lastMessageCount"], 5);

    // agy was resumed on the same conversation, with the digest of what it
    // did not see (Claude's turn) and without its own earlier answer.
    let argv: Vec<String> = std::fs::read_to_string(&argv_log)
        .expect("argv log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
        .find(|a| a.iter().any(|x| x == "-p"))
        .expect("a print invocation");
    let flag = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1))
            .cloned()
    };
    assert_eq!(
        flag("--conversation").as_deref(),
        Some(conversation.as_str())
    );
    assert_eq!(flag("--model").as_deref(), Some("gemini-3.7-flash"));
    assert_eq!(flag("--effort").as_deref(), Some("medium"));
    assert_eq!(
        flag("--add-dir").as_deref(),
        Some("/tmp"),
        "the workspace is pi's cwd"
    );
    // The prompt came on agy's stdin, not in its argv.
    assert_eq!(flag("-p").as_deref(), Some(""));
    let prompt = common::stdin_prompts(&stdin_log)
        .pop()
        .expect("a prompt on stdin");
    assert!(
        prompt.contains("[assistant turn from anthropic]\nHi from Claude"),
        "{prompt}"
    );
    assert!(
        prompt.contains("[earlier user message]\nand you, claude?"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("Hello!"),
        "agy's own turn was digested: {prompt}"
    );
    assert!(prompt.ends_with("Any suggestions?"), "{prompt}");
    // Both turns are in the one conversation database.
    let db = env.home.path().join(format!(
        ".gemini/antigravity-cli/conversations/{conversation}.db"
    ));
    let decoded = agy_bridge::view::decode::transcript(&db).expect("decode");
    let prompts: Vec<String> = decoded
        .steps
        .values()
        .flatten()
        .filter_map(|e| match e {
            agy_bridge::follow::events::Event::UserInput { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");

    // A run that never binds writes no binding and leaves others alone
    // (`SessionStore::update_if_bound`; overwrite protection itself is in
    // tests/sessions_config.rs).
    let mut cmd = env.command("hello");
    cmd.env("FAKE_AGY_NO_DB", "1").env("AGY_BIND", "discovery");
    let child = cmd.spawn().expect("spawn");
    let out = common::stream_output(child, &request("again", "s3", vec![]));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let last = events.last().expect("last");
    assert_eq!(last["type"], "error");
    assert!(
        last["errorMessage"]
            .as_str()
            .unwrap_or("")
            .contains("could not bind agy's conversation database"),
        "{last}"
    );
    let sessions = env.sessions();
    assert!(sessions.get("sid:s3").is_none(), "{sessions}");
    assert_eq!(sessions["sid:s1"], after);
}

#[test]
fn file_edits_show_as_numbered_diffs_against_git_head() {
    use agy_format::steps::{Body, StepStatus, StepType, ToolCall};
    use agy_synth::builder::Builder;
    let env = Env::new();
    // A repo whose HEAD has the old line; the working tree has agy's edit.
    let repo = env.home.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).expect("mkdir");
    let file = repo.join("src/lib.rs");
    std::fs::write(
        &file,
        "pub fn sum_to(n: u32) -> u32 {\n    (0..n).sum()\n}\n",
    )
    .expect("write");
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    std::fs::write(
        &file,
        "pub fn sum_to(n: u32) -> u32 {\n    (0..=n).sum()\n}\n",
    )
    .expect("edit");

    // A recording whose edit targets that file.
    let mut b = Builder::new("edit-e2e", "edit", "fix it", "Fixed.");
    b.open_turn(0, "fix it", "Fixing", true);
    let call = ToolCall {
        id: "e1".into(),
        name: "replace_file_content".into(),
        arguments: json!({"TargetFile": file.display().to_string(), "ReplacementContent": "    (0..=n).sum()", "toolSummary": "include n"}).to_string(),
    };
    b.planner(2, &[], &["Fixing the range."], vec![call.clone()], 50);
    b.tool(
        3,
        StepType::FileEdit,
        call,
        Some(Body::Write {
            summary: "edited".into(),
        }),
        StepStatus::Done,
        50,
    );
    b.planner(4, &[], &["Fixed."], vec![], 50);
    let rec_path = env.home.path().join("edit.jsonl");
    b.finish().save(&rec_path).expect("save");

    let mut req: Value = serde_json::from_str(&request("fix it", "s1", vec![])).expect("req");
    req["cwd"] = Value::from(repo.display().to_string());
    let events = transcript(&env, &rec_path.display().to_string(), &req.to_string());
    let thinking: String = events
        .iter()
        .filter(|e| e["type"] == "thinking_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(
        thinking.contains("[agy edit: src/lib.rs (include n)]"),
        "{thinking}"
    );
    assert!(thinking.contains("\n-2     (0..n).sum()\n"), "{thinking}");
    assert!(thinking.contains("\n+2     (0..=n).sum()\n"), "{thinking}");
    assert!(!thinking.contains("[agy tool: replace_file_content]"));
    assert_eq!(events.last().expect("last")["type"], "done");
}

/// The text a stream's events carry.
fn streamed_text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

/// Two turns of one pi session at once (two processes, the same
/// sessionId): the second waits for the first and then resumes the
/// conversation it left; each streams only its own text.
#[test]
fn same_session_turns_take_turns_and_never_mix() {
    let env = Env::new();
    let argv_log = env.home.path().join("argv.log");
    let first = transcript(&env, "hello", &request("hello there", "same", vec![]));
    assert_eq!(first.last().expect("last")["type"], "done");
    let conversation = env.sessions()["sid:same"]["conversationId"]
        .as_str()
        .expect("bound")
        .to_string();

    let start = |recording: &str, prompt: &str| {
        let mut cmd = env.command(recording);
        cmd.env("FAKE_AGY_SPEED", "2")
            .env("FAKE_AGY_ARGV_LOG", &argv_log);
        let mut child = cmd.spawn().expect("spawn");
        // Held open to the end of the turn, as pi does.
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{}", request(prompt, "same", vec![])).expect("request");
        (child, stdin)
    };
    let a = start("long-answer", "first of two");
    let b = start("unicode", "second of two");
    let collect = |(child, stdin): (std::process::Child, std::process::ChildStdin)| -> Vec<Value> {
        let out = common::wait_output(child, common::CHILD_LIMIT);
        drop(stdin);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let (a, b) = (collect(a), collect(b));
    for events in [&a, &b] {
        assert_eq!(terminal_count(events), 1);
        assert_eq!(events.last().expect("last")["type"], "done", "{events:?}");
    }
    let want = |name: &str| common::expected(&common::load(name)).text();
    let (text_a, text_b) = (streamed_text(&a), streamed_text(&b));
    let (want_a, want_b) = (want("long-answer"), want("unicode"));
    // Whichever ran second streams only its own steps.
    assert!(
        (text_a == want_a && text_b == want_b),
        "mixed streams:\nA: {:?}…\nB: {:?}…",
        text_a.chars().take(80).collect::<String>(),
        text_b.chars().take(80).collect::<String>()
    );
    // Both resumed the session's one conversation.
    let log = std::fs::read_to_string(&argv_log).expect("argv log");
    assert_eq!(log.matches(&conversation).count(), 2, "{log}");
}

/// Whether `pid` comes to wait (within 30 s) for a `flock` on `path`: a
/// blocked request in `/proc/locks` (`N: -> FLOCK ADVISORY WRITE PID
/// MAJ:MIN:INODE ...`), the kernel's word that it is queued for the lock.
fn waits_on_flock(pid: u32, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path)
        .expect("the lock file")
        .ino()
        .to_string();
    common::eventually(Duration::from_secs(30), || {
        let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        locks.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"->")
                && f.get(2) == Some(&"FLOCK")
                && f.get(5) == Some(&pid.to_string().as_str())
                && f.get(6).and_then(|d| d.rsplit(':').next()) == Some(inode.as_str())
        })
    })
}

/// A turn waiting for its session's turn lock (another process holds it)
/// ends at once on an abort line, and agy never starts; a turn of the same
/// session started while the lock is held takes it the moment it is let go.
#[test]
fn a_turn_waiting_for_the_session_lock_can_be_aborted_and_takes_it_when_let_go() {
    use agy_bridge::state::sessions::SessionStore;
    use agy_bridge::testing::state::SessionStoreTurnLock;
    let env = Env::new();
    let argv_log = env.home.path().join("argv.log");
    let store = SessionStore::open(env.home.path().join(".pi/agent/antigravity-bridge"));
    let held = store
        .try_lock_turn("sid:locked")
        .expect("lock file")
        .expect("free");
    let lock_path = store.turn_lock_path("sid:locked");

    // Aborted while it waits.
    let mut cmd = env.command("hello");
    cmd.env("FAKE_AGY_ARGV_LOG", &argv_log);
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request("hello", "locked", vec![])).expect("request");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first: Value =
        serde_json::from_str(&lines.next().expect("start").expect("line")).expect("json");
    assert_eq!(first["type"], "start", "{first}");
    assert!(
        waits_on_flock(child.id(), &lock_path),
        "the bridge never waited for the session lock"
    );
    writeln!(stdin, "{{\"type\":\"abort\"}}").expect("abort line");
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect();
    common::wait_status(&mut child, common::CHILD_LIMIT);
    let last = rest.last().expect("an ending event");
    assert_eq!(
        (&last["type"], &last["reason"]),
        (&Value::from("error"), &Value::from("aborted")),
        "{rest:?}"
    );
    assert!(!argv_log.exists(), "agy started while the lock was held");

    // Waiting while held, running once let go.
    let mut cmd = env.command("hello");
    cmd.env("FAKE_AGY_ARGV_LOG", &argv_log);
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request("hello", "locked", vec![])).expect("request");
    // Blocked on the lock, the bridge cannot start agy until it is let
    // go (agy starts after the lock is taken): the kernel's list of blocked
    // lock requests shows it there, where a bridge that did not wait would
    // already have started agy.
    assert!(
        waits_on_flock(child.id(), &lock_path),
        "the bridge never waited for the session lock"
    );
    assert!(!argv_log.exists(), "agy started while the lock was held");
    drop(held);
    let out = common::wait_output(child, common::CHILD_LIMIT);
    drop(stdin);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(events.last().expect("last")["type"], "done", "{events:?}");
    assert!(argv_log.exists());
}
