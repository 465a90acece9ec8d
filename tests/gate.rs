//! The permission gate end to end at its own boundary: the real
//! `agy-bridge hook PreToolUse --gate FILE` process, fed agy's payload (the
//! shape of the real capture), against a live gate. Whatever goes wrong on
//! the way, the hook prints an explicit denial.

use agy_bridge::gate::{Gate, Policy, Verdict};
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
        cwd: Some("/w".into()),
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
        ("run_command", Verdict::Ask(None), 16)
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
    let socket = config["socket"].as_str().expect("socket").to_string();
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
    let mut raw = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
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
    use agy_bridge::pi::provider::stream::PiStream;
    use agy_bridge::pi::testing::{Answer, Asks, EventMapper};
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
    assert_eq!(request["sessionRule"], "run_command: cargo build *");
    let id = request["id"].as_str().expect("id").to_string();
    let line = serde_json::json!({"type": "permission", "id": id, "decision": "allow", "scope": "session"});
    let answer = Answer::from_value(&line).expect("an answer");
    let said = asks.answer(answer.clone(), &mut mapper);
    assert!(
        said[0].contains("allowed for this session (run_command: cargo build *)"),
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
    assert_eq!(q.verdict, Verdict::Ask(None));
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

/// What the gate made of one call, as the hook saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Allowed,
    /// A person was asked (the test answers no).
    Asked,
    /// Refused without asking; the reason holds this.
    Denied(&'static str),
}

/// The reason the test's stand-in for pi's dialog gives.
const ASKED: &str = "asked, and the test said no";

/// A workspace for the hostile table: `ws/docs`, a symlink out of it
/// (`ws/docs/link`), one to the gate's directory (`ws/gatelink`), and a
/// home of its own.
struct Scene {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    ws: std::path::PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().canonicalize().expect("canonical");
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
        std::fs::create_dir_all(root.join("outside")).expect("mkdir");
        std::fs::create_dir_all(root.join("home/.ssh")).expect("mkdir");
        std::os::unix::fs::symlink(root.join("outside"), ws.join("docs/link")).expect("link");
        Scene {
            _tmp: tmp,
            root,
            ws,
        }
    }

    fn policy(&self, can_ask: bool) -> Policy {
        let mut rules = agy_bridge::testing::state::DEFAULT_ALLOW
            .iter()
            .map(|r| Rule::parse(r).expect("rule"))
            .collect::<Vec<_>>();
        rules.push(Rule::parse("run_command: cargo test*").expect("rule"));
        rules.push(Rule::parse("write_to_file: docs/*").expect("rule"));
        Policy {
            rules,
            can_ask,
            cwd: Some(self.ws.clone()),
            home: Some(self.root.join("home")),
            ..Policy::default()
        }
    }
}

/// agy's payload as it sends it: the arguments as raw JSON text.
fn raw_payload(tool: &str, args_json: &str, workspace: &Path) -> String {
    format!(
        r#"{{"artifactDirectoryPath":"/tmp/a","conversationId":"c","modelName":"m","stepIdx":3,"toolCall":{{"args":{args_json},"name":"{tool}"}},"transcriptPath":"/tmp/t","workspacePaths":[{}]}}"#,
        serde_json::Value::String(workspace.display().to_string())
    )
}

/// Run the real hook for one call against a live gate whose questions a
/// task answers with a no, and say what happened.
async fn outcome(gate_file: &Path, stdin: String) -> Decision {
    let hook = run_hook(gate_file, stdin);
    tokio::task::spawn_blocking(move || hook.join().expect("hook").0)
        .await
        .expect("joined")
}

fn judged(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allowed".into(),
        Decision::Deny { reason } if reason == ASKED => "asked".into(),
        Decision::Deny { reason } => format!("denied: {reason}"),
    }
}

/// Every hostile class of issue 49 through the real hook binary, with the
/// benign calls that must still pass unasked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_calls_never_pass_and_benign_ones_do() {
    let scene = Scene::new();
    let mut gate = Gate::start(scene.policy(true), exe()).await.expect("gate");
    let gate_dir = gate.dir().to_path_buf();
    std::os::unix::fs::symlink(&gate_dir, scene.ws.join("gatelink")).expect("link");
    let gate_file = gate_dir.join("gate.json");
    let mut questions = std::mem::replace(&mut gate.questions, tokio::sync::mpsc::channel(1).1);
    tokio::spawn(async move {
        while let Some(q) = questions.recv().await {
            if q.waits() {
                q.answer(Decision::deny(ASKED));
            }
        }
    });
    let (ws, root) = (&scene.ws, &scene.root);
    let tmp = gate_dir.parent().expect("the gate's parent");
    let gate_name = gate_dir.file_name().expect("name").to_string_lossy();
    let js = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let cmd = |line: &str| format!(r#"{{"CommandLine":{},"Cwd":"."}}"#, js(line));
    let path = |key: &str, p: &str| format!(r#"{{{}:{}}}"#, js(key), js(p));
    let private = Outcome::Denied("private");
    let ambiguous = Outcome::Denied("cannot be read one way");
    let mut rows: Vec<(String, &str, String, Outcome)> = vec![
        // Shell computing hidden behind an allowed prefix.
        (
            "${x@P}".into(),
            "run_command",
            cmd(r"cargo test ${x:=$'\x24\x28touch /tmp/p\x29'} ${x@P}"),
            Outcome::Asked,
        ),
        (
            "array subscript".into(),
            "run_command",
            cmd(r"cargo test ${x:=$'a[\x24\x28touch /tmp/p\x29]'} ${y[x]}"),
            Outcome::Asked,
        ),
        (
            "Cwd outside".into(),
            "run_command",
            r#"{"CommandLine":"cargo test","Cwd":"/"}"#.into(),
            Outcome::Asked,
        ),
        (
            "Cwd climbing out".into(),
            "run_command",
            r#"{"CommandLine":"cargo test","Cwd":"docs/../.."}"#.into(),
            Outcome::Asked,
        ),
        // Keys agy reads as one.
        (
            "keys equal but for case".into(),
            "run_command",
            r#"{"CommandLine":"cargo test","commandline":"touch /tmp/p"}"#.into(),
            ambiguous.clone(),
        ),
        (
            "keys equal".into(),
            "run_command",
            r#"{"CommandLine":"cargo test","CommandLine":"touch /tmp/p"}"#.into(),
            Outcome::Denied("cannot be read one way"),
        ),
        (
            "keys equal by Unicode folding".into(),
            "view_file",
            "{\"AbsolutePath\":\"docs/a.md\",\"Ab\u{17F}olutePath\":\"/etc/shadow\"}".into(),
            ambiguous.clone(),
        ),
        (
            "a list for a command line".into(),
            "run_command",
            r#"{"CommandLine":["cargo","test"]}"#.into(),
            ambiguous.clone(),
        ),
        // Paths that lead out of the workspace.
        (
            "write through a symlink out".into(),
            "write_to_file",
            path(
                "TargetFile",
                &ws.join("docs/link/evil").display().to_string(),
            ),
            Outcome::Asked,
        ),
        (
            "relative write climbing out".into(),
            "write_to_file",
            path("TargetFile", "docs/../../outside/x"),
            Outcome::Asked,
        ),
        (
            "read through a symlink out".into(),
            "view_file",
            path("AbsolutePath", "docs/link/secret"),
            Outcome::Asked,
        ),
        (
            "/etc/shadow".into(),
            "view_file",
            path("AbsolutePath", "/etc/shadow"),
            Outcome::Asked,
        ),
        (
            "~/.ssh/id_rsa".into(),
            "view_file",
            path("AbsolutePath", "~/.ssh/id_rsa"),
            Outcome::Asked,
        ),
        (
            "a file:// address".into(),
            "view_file",
            path("AbsolutePath", "file:///etc/passwd"),
            Outcome::Asked,
        ),
        (
            "a JSON-quoted path".into(),
            "view_file",
            path("AbsolutePath", "\"/etc/passwd\""),
            Outcome::Asked,
        ),
        (
            "listing outside".into(),
            "list_dir",
            path("DirectoryPath", &root.join("outside").display().to_string()),
            Outcome::Asked,
        ),
        // The gate's own files, however spelt.
        (
            "gate file with //".into(),
            "view_file",
            path(
                "AbsolutePath",
                &format!("{}//{gate_name}/gate.json", tmp.display()),
            ),
            private.clone(),
        ),
        (
            "gate file with /./".into(),
            "view_file",
            path(
                "AbsolutePath",
                &format!("{}/./{gate_name}/gate.json", tmp.display()),
            ),
            private.clone(),
        ),
        (
            "gate file through a symlink".into(),
            "view_file",
            path("AbsolutePath", "gatelink/gate.json"),
            private.clone(),
        ),
        (
            "gate file in a command".into(),
            "run_command",
            cmd(&format!("cat {}//{gate_name}/gate.json", tmp.display())),
            private.clone(),
        ),
        (
            "a search over the gate's parent".into(),
            "grep_search",
            format!(
                r#"{{"Query":"token","SearchPath":{}}}"#,
                js(&tmp.display().to_string())
            ),
            private.clone(),
        ),
        (
            "a listing of the gate".into(),
            "list_dir",
            path("DirectoryPath", &gate_dir.display().to_string()),
            private.clone(),
        ),
        (
            "find_by_name from above".into(),
            "find_by_name",
            format!(r#"{{"Pattern":"gate.json","SearchDirectory":{}}}"#, js("/")),
            private.clone(),
        ),
        (
            "a write into the gate".into(),
            "write_to_file",
            path(
                "TargetFile",
                &gate_dir.join(".agents/hooks.json").display().to_string(),
            ),
            private.clone(),
        ),
        // Benign calls pass unasked.
        (
            "cargo test".into(),
            "run_command",
            cmd("cargo test"),
            Outcome::Allowed,
        ),
        (
            "cargo test with words".into(),
            "run_command",
            cmd("cargo test --lib -- 'a b' \"c\" HEAD~1"),
            Outcome::Allowed,
        ),
        (
            "cargo test in docs".into(),
            "run_command",
            r#"{"CommandLine":"cargo test","Cwd":"docs"}"#.into(),
            Outcome::Allowed,
        ),
        (
            "write under docs/*".into(),
            "write_to_file",
            path("TargetFile", &ws.join("docs/a.md").display().to_string()),
            Outcome::Allowed,
        ),
        (
            "relative write under docs/*".into(),
            "write_to_file",
            path("TargetFile", "docs/new/b.md"),
            Outcome::Allowed,
        ),
        (
            "read inside".into(),
            "view_file",
            path("AbsolutePath", &ws.join("src/lib.rs").display().to_string()),
            Outcome::Allowed,
        ),
        (
            "listing inside".into(),
            "list_dir",
            path("DirectoryPath", &ws.display().to_string()),
            Outcome::Allowed,
        ),
        (
            "search inside".into(),
            "grep_search",
            format!(
                r#"{{"Query":"token","SearchPath":{}}}"#,
                js(&ws.display().to_string())
            ),
            Outcome::Allowed,
        ),
        (
            "find inside".into(),
            "find_by_name",
            r#"{"Pattern":"*.rs","SearchDirectory":"."}"#.into(),
            Outcome::Allowed,
        ),
        // Not allowed by any rule: asked, as ever.
        (
            "write outside docs".into(),
            "write_to_file",
            path("TargetFile", "src/x.rs"),
            Outcome::Asked,
        ),
        (
            "another program".into(),
            "run_command",
            cmd("cargo build"),
            Outcome::Asked,
        ),
    ];
    // Each character class that makes the shell compute, behind the allowed prefix.
    for bad in [
        "$HOME",
        "`id`",
        ";id",
        "&id",
        "|id",
        "<x",
        ">x",
        "(id)",
        "{a,b}",
        "*",
        "?",
        "[ab]",
        "~/x",
        "a\\ b",
        "\nid",
        "\rid",
        "\u{85}id",
        "\u{2028}id",
        "\u{2029}id",
    ] {
        rows.push((
            format!("{bad:?}"),
            "run_command",
            cmd(&format!("cargo test {bad}")),
            Outcome::Asked,
        ));
    }
    let mut wrong = Vec::new();
    for (name, tool, args, want) in &rows {
        let decision = outcome(&gate_file, raw_payload(tool, args, ws)).await;
        let got = judged(&decision);
        let ok = match want {
            Outcome::Allowed => got == "allowed",
            Outcome::Asked => got == "asked",
            Outcome::Denied(why) => got.starts_with("denied") && got.contains(why),
        };
        if !ok {
            wrong.push(format!("{name}: want {want:?}, got {got}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} rows wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// With nobody to ask, what would be asked is denied, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_ui_asked_calls_are_denied_with_the_reason() {
    let scene = Scene::new();
    let gate = Gate::start(scene.policy(false), exe()).await.expect("gate");
    let gate_file = gate.dir().join("gate.json");
    let ws = &scene.ws;
    for (tool, args, why) in [
        (
            "view_file",
            r#"{"AbsolutePath":"/etc/shadow"}"#,
            "outside the workspace: /etc/shadow",
        ),
        (
            "run_command",
            r#"{"CommandLine":"cargo test; touch /tmp/p"}"#,
            "nobody can be asked",
        ),
    ] {
        let decision = outcome(&gate_file, raw_payload(tool, args, ws)).await;
        assert!(
            matches!(decision, Decision::Deny { ref reason } if reason.contains(why)),
            "{tool} {args}: {decision:?}"
        );
    }
    let inside = format!(r#"{{"AbsolutePath":"{}/a.rs"}}"#, ws.display());
    let decision = outcome(&gate_file, raw_payload("view_file", &inside, ws)).await;
    assert_eq!(decision, Decision::Allow);
}

/// Strangers holding connections open without the token do not keep the
/// real hook out: a slot is held only once the token matched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_starve_the_gate() {
    let scene = Scene::new();
    let gate = Gate::start(scene.policy(false), exe()).await.expect("gate");
    let gate_file = gate.dir().join("gate.json");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gate_file).expect("read")).expect("json");
    let socket = config["socket"].as_str().expect("a socket").to_string();
    assert!(config.get("addr").is_none(), "no TCP port: {config}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(gate.dir()).expect("meta").permissions(),
    );
    assert_eq!(
        mode & 0o777,
        0o700,
        "the socket's directory is the user's alone"
    );
    let idle: Vec<std::os::unix::net::UnixStream> = (0..40)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).expect("connect"))
        .collect();
    let inside = format!(r#"{{"AbsolutePath":"{}/a.rs"}}"#, scene.ws.display());
    for _ in 0..3 {
        let decision = outcome(&gate_file, raw_payload("view_file", &inside, &scene.ws)).await;
        assert_eq!(decision, Decision::Allow, "the real hook is served");
    }
    drop(idle);
}
