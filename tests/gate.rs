//! The permission gate end to end at its own boundary: the real
//! `agy-bridge hook PreToolUse --gate FILE` process, fed agy's payload (the
//! shape of the real capture), against a live gate. Whatever goes wrong on
//! the way, the hook prints an explicit denial.

use agy_bridge::run::gate::{Gate, Policy, Verdict};
use agy_bridge::state::rules::Rule;
use agy_format::hooks::{Decision, HookEvent};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn payload(tool: &str, args: serde_json::Value) -> String {
    serde_json::json!({
        "artifactDirectoryPath": "/tmp/a",
        "conversationId": "22222222-2222-4222-8222-222222222222",
        "modelName": "gemini-3.5-flash-low",
        "stepIdx": 16,
        "toolCall": {"args": args, "name": tool},
        "transcriptPath": "/tmp/t",
        "workspacePaths": []
    })
    .to_string()
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_agy-bridge"))
}

/// Run the hook as agy would (from the hooks.json agy loads), in a thread:
/// its decision and its exit status.
fn run_hook(gate_file: &Path, stdin: String) -> std::thread::JoinHandle<(Decision, bool)> {
    let gate_file = gate_file.to_path_buf();
    std::thread::spawn(move || {
        let mut child = Command::new(exe())
            .args(["hook", "PreToolUse", "--gate"])
            .arg(&gate_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("hook");
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.as_bytes()).expect("payload");
        drop(input);
        let out = child.wait_with_output().expect("hook output");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(text.lines().count(), 1, "one decision line: {text:?}");
        (
            Decision::from_hook_output(&text, out.status.success()),
            out.status.success(),
        )
    })
}

fn policy() -> Policy {
    Policy {
        rules: vec![Rule::parse("view_file: *").expect("rule")],
        can_ask: true,
        own_server: Some("pi".into()),
        ..Policy::default()
    }
}

/// agy's hook command, as the gate wrote it into hooks.json.
fn hook_command(gate: &Gate) -> String {
    let text = std::fs::read_to_string(gate.hooks_file()).expect("hooks.json");
    let hooks = agy_format::hooks::parse_hooks_file(&text).expect("parses");
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].event, HookEvent::PreToolUse);
    assert_eq!(hooks[0].matcher.as_deref(), Some("*"));
    assert!(hooks[0].timeout_secs >= 600, "a long timeout");
    hooks[0].command.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_calls_wait_for_the_answer_and_ruled_ones_do_not() {
    let mut gate = Gate::start(policy(), exe()).await.expect("gate");
    let command = hook_command(&gate);
    assert!(command.contains(" hook PreToolUse --gate "), "{command}");
    let gate_file = gate.dir().join("gate.json");

    // A rule passes view_file at once; the stream still hears of it.
    let read = run_hook(
        &gate_file,
        payload("view_file", serde_json::json!({"AbsolutePath": "/w/a.rs"})),
    );
    assert_eq!(read.join().expect("hook").0, Decision::Allow);
    let shown = gate.questions.recv().await.expect("shown");
    assert!(matches!(shown.verdict, Verdict::Allow(_)) && !shown.waits());

    // run_command is asked: the hook waits until the answer comes.
    let cmd = run_hook(
        &gate_file,
        payload(
            "run_command",
            serde_json::json!({"CommandLine": "touch mark"}),
        ),
    );
    let q = gate.questions.recv().await.expect("asked");
    assert_eq!(
        (q.tool(), q.verdict.clone(), q.payload.step_idx),
        ("run_command", Verdict::Ask, 16)
    );
    assert!(q.arguments().contains("touch mark"));
    assert!(!cmd.is_finished(), "the hook waits for the decision");
    assert!(q.answer(Decision::deny("not today")));
    let (decision, exited_ok) = cmd.join().expect("hook");
    assert_eq!(decision, Decision::deny("not today"));
    assert!(
        exited_ok,
        "the decision line, not an exit code, carries the denial"
    );

    // Writing into the gate's own directory is never allowed, nor asked,
    // even under a later turn's policy that names no private directory.
    gate.set_policy(Policy {
        can_ask: true,
        ..Policy::default()
    });
    let private = serde_json::json!({"TargetFile": gate.hooks_file()});
    let (decision, _) = run_hook(&gate_file, payload("write_to_file", private))
        .join()
        .expect("hook");
    assert!(
        matches!(decision, Decision::Deny { ref reason } if reason.contains("private")),
        "{decision:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_question_is_denied_when_the_gate_closes() {
    let mut gate = Gate::start(policy(), exe()).await.expect("gate");
    let gate_file = gate.dir().join("gate.json");
    let copy = tempfile::tempdir().expect("tmp");
    let kept = copy.path().join("gate.json");
    std::fs::copy(&gate_file, &kept).expect("copy the gate file");
    let cmd = run_hook(
        &gate_file,
        payload(
            "run_command",
            serde_json::json!({"CommandLine": "rm -rf x"}),
        ),
    );
    let q = gate.questions.recv().await.expect("asked");
    assert!(q.waits());
    // The turn ends (pi aborted): the gate goes, and the hook hears no.
    drop(gate);
    let (decision, _) = cmd.join().expect("hook");
    assert!(
        matches!(decision, Decision::Deny { ref reason } if reason.contains("turn ended")),
        "{decision:?}"
    );
    assert!(!q.answer(Decision::Allow), "too late: nobody waits");

    // The bridge is gone: its port refuses, its directory is gone.
    let (decision, _) = run_hook(
        &kept,
        payload("run_command", serde_json::json!({"CommandLine": "ls"})),
    )
    .join()
    .expect("hook");
    assert!(
        matches!(decision, Decision::Deny { ref reason } if reason.contains("cannot be reached")),
        "{decision:?}"
    );
    let (decision, _) = run_hook(
        &gate_file,
        payload("run_command", serde_json::json!({"CommandLine": "ls"})),
    )
    .join()
    .expect("hook");
    assert!(
        matches!(decision, Decision::Deny { ref reason } if reason.contains("bridge may be gone")),
        "{decision:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_garbage_or_silence_is_denied() {
    let gate = Gate::start(policy(), exe()).await.expect("gate");
    let gate_file = gate.dir().join("gate.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gate_file).expect("read")).expect("json");
    let addr = config["addr"].as_str().expect("addr").to_string();
    config["token"] = "0".repeat(64).into();
    let forged = tempfile::tempdir().expect("tmp");
    let forged_file = forged.path().join("gate.json");
    std::fs::write(&forged_file, config.to_string()).expect("write");
    let (decision, _) = run_hook(&forged_file, payload("view_file", serde_json::json!({})))
        .join()
        .expect("hook");
    assert!(
        matches!(decision, Decision::Deny { ref reason } if reason.contains("wrong token")),
        "{decision:?}"
    );
    let (decision, _) = run_hook(&gate_file, "not json".into())
        .join()
        .expect("hook");
    assert!(matches!(decision, Decision::Deny { .. }));
    // A connection that never sends its token is answered no, not held.
    let started = std::time::Instant::now();
    let mut raw = std::net::TcpStream::connect(&addr).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    raw.write_all(&[b'x'; 300]).expect("send");
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut raw, &mut answer).expect("answer");
    assert!(answer.contains("deny"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(50));
    // A hook for another event is refused by its own command.
    let out = Command::new(exe())
        .args(["hook", "PostToolUse", "--gate"])
        .arg(&gate_file)
        .stdin(Stdio::null())
        .output()
        .expect("hook");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"deny\"") && text.contains("PostToolUse"),
        "{text}"
    );
}

/// The pi side: a waiting call becomes one `permission_request` line, the
/// answer reaches the hook, the stream says the decision, and "allow for
/// this session" passes the next call like it without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_is_asked_and_a_session_grant_passes_the_next_call_like_it() {
    use agy_bridge::pi::ask::{Answer, Asks};
    use agy_bridge::pi::provider::mapper::EventMapper;
    use agy_bridge::pi::provider::stream::PiStream;
    let mut gate = Gate::start(policy(), exe()).await.expect("gate");
    let gate_file = gate.dir().join("gate.json");
    let questions = std::mem::replace(&mut gate.questions, tokio::sync::mpsc::channel(1).1);
    let mut asks = Asks::new(questions, gate.grants());
    let mut mapper = EventMapper::new(Path::new("/w"));
    let mut out = Vec::new();

    let first = run_hook(
        &gate_file,
        payload(
            "run_command",
            serde_json::json!({"CommandLine": "cargo build --release"}),
        ),
    );
    let q = asks.questions.recv().await.expect("asked");
    let lines = {
        let mut pi = PiStream::new(&mut out);
        asks.question(q, &mut mapper, &mut pi)
    };
    assert_eq!(lines.len(), 1, "the tool's line, at once: {lines:?}");
    assert!(
        lines[0].contains("[agy tool: run_command] cargo build --release"),
        "{lines:?}"
    );
    let request: serde_json::Value =
        serde_json::from_slice(out.split(|b| *b == b'\n').next().expect("a line")).expect("json");
    assert_eq!(request["type"], "permission_request");
    assert_eq!(request["tool"], "run_command");
    assert_eq!(request["detail"], "cargo build --release");
    assert_eq!(request["sessionRule"], "run_command: cargo build*");
    let id = request["id"].as_str().expect("id").to_string();
    let line = serde_json::json!({"type": "permission", "id": id, "decision": "allow", "scope": "session"});
    let answer = Answer::from_value(&line).expect("an answer");
    let said = asks.answer(answer.clone(), &mut mapper);
    assert!(
        said[0].contains("allowed for this session (run_command: cargo build*)"),
        "{said:?}"
    );
    assert_eq!(first.join().expect("hook").0, Decision::Allow);
    assert!(
        asks.answer(answer, &mut mapper)[0].contains("not open"),
        "a second answer is refused"
    );

    // The grant passes `cargo build` again without asking; not `cargo run`.
    let again = run_hook(
        &gate_file,
        payload(
            "run_command",
            serde_json::json!({"CommandLine": "cargo build"}),
        ),
    );
    assert_eq!(again.join().expect("hook").0, Decision::Allow);
    let shown = asks.questions.recv().await.expect("shown");
    assert!(
        matches!(shown.verdict, Verdict::Allow(ref why) if why.contains("this session")),
        "{:?}",
        shown.verdict
    );
    let other = run_hook(
        &gate_file,
        payload(
            "run_command",
            serde_json::json!({"CommandLine": "cargo run"}),
        ),
    );
    let q = asks.questions.recv().await.expect("asked");
    assert_eq!(q.verdict, Verdict::Ask);
    let denied = {
        let mut pi = PiStream::new(&mut out);
        let _ = asks.question(q, &mut mapper, &mut pi);
        let id = format!("agy-gate-{}", 2);
        let line = serde_json::json!({"type": "permission", "id": id, "decision": "deny", "reason": "use the test suite"});
        asks.answer(Answer::from_value(&line).expect("answer"), &mut mapper)
    };
    assert!(
        denied[0].contains("denied by the user: use the test suite"),
        "{denied:?}"
    );
    assert_eq!(
        other.join().expect("hook").0,
        Decision::deny("use the test suite")
    );
}
