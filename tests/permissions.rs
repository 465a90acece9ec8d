//! Permissions end to end, through `agy-bridge stream` and fake-agy running
//! agy's hooks (issue 19): in `ask` mode nothing runs that was not allowed,
//! and fake-agy's tool log (`FAKE_AGY_TOOL_LOG`, a line per tool that really
//! ran) is the mark that shows it. The recording `tools` reads files, then
//! runs `cargo test`.

mod common;

use common::{argvs, bridge, stream_output};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// What fake-agy ran, as `NAME COMMAND`.
fn ran(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .map(|t| {
            format!(
                "{} {}",
                t["name"].as_str().unwrap_or(""),
                t["args"]["CommandLine"].as_str().unwrap_or("")
            )
            .trim()
            .to_string()
        })
        .collect()
}

fn stream(home: &Path, mode: &str) -> Command {
    stream_of(home, mode, "tools")
}

fn stream_of(home: &Path, mode: &str, recording: &str) -> Command {
    let mut c = bridge("stream", home, recording, "20");
    c.env("AGY_PERMISSIONS", mode)
        .env("FAKE_AGY_TOOL_LOG", home.join("tools.log"))
        .env("FAKE_AGY_ARGV_LOG", home.join("argv.log"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn request(home: &Path, ui: bool) -> String {
    request_for("gemini-3.7-flash", home, ui)
}

/// `model`: one the recording's `agy models` lists.
fn request_for(model: &str, home: &Path, ui: bool) -> String {
    json!({"model": model, "cwd": home, "ui": ui,
           "messages": [{"role": "user", "content": "Fix the failing test"}]})
    .to_string()
}

/// The deltas (thinking and text) of a stream's stdout.
fn deltas(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["delta"].as_str().map(str::to_string))
        .collect()
}

/// Whether an agy command line runs a turn (`-p ""` or a prompt), not
/// `--version`, `--help` or one of agy's own commands (`-p /hooks`).
fn is_turn(argv: &[String]) -> bool {
    let prompt = argv
        .iter()
        .position(|w| w == "-p")
        .and_then(|i| argv.get(i + 1));
    prompt.is_some_and(|p| !p.starts_with('/'))
}

/// The argv of agy's turn.
fn turn_argv(home: &Path) -> Vec<String> {
    argvs(&home.join("argv.log"))
        .into_iter()
        .find(|a| is_turn(a))
        .expect("agy's turn")
}

#[test]
fn without_a_ui_the_rules_pass_reads_and_the_command_is_denied_with_how_to_allow_it() {
    let home = tempfile::tempdir().expect("tmp");
    let child = stream(home.path(), "ask").spawn().expect("stream");
    let out = stream_output(child, &request(home.path(), false));
    let text = deltas(&out.stdout);
    let log = home.path().join("tools.log");
    assert_eq!(
        ran(&log),
        ["view_file", "grep_search", "list_dir"],
        "{text}"
    );
    assert!(
        text.contains("[agy tool: run_command] cargo test"),
        "{text}"
    );
    assert!(
        text.contains("denied: run_command needs the user's permission"),
        "{text}"
    );
    // The reason reached agy: fake-agy's answer states the step's error.
    assert!(
        text.contains("tool call denied by pre-tool hook: run_command needs"),
        "{text}"
    );
    assert!(
        text.contains("run_command: cargo test *"),
        "the rule that would allow it: {text}"
    );
    let argv = turn_argv(home.path());
    assert!(
        argv.iter().any(|a| a == "--dangerously-skip-permissions"),
        "{argv:?}"
    );
    assert!(
        argv.iter().any(|a| a.contains("agy-bridge-gate-")),
        "{argv:?}"
    );
    // Each tool is one line, from whichever source came first.
    assert_eq!(text.matches("[agy tool: view_file]").count(), 1, "{text}");
}

#[test]
fn an_unproven_hook_runs_the_turn_as_deny_and_says_why() {
    // agy 1.2.17 auto-denies `ls -la /srv` without the flag (the recording's
    // denied path); with it, the command runs.
    let home = tempfile::tempdir().expect("tmp");
    let mut cmd = stream_of(home.path(), "ask", "outcomes/denied-1.2.17");
    cmd.env("FAKE_AGY_IGNORE_HOOKS", "1");
    let req = request_for("gemini-3.8-flash", home.path(), true);
    let out = stream_output(cmd.spawn().expect("stream"), &req);
    let text = deltas(&out.stdout);
    assert!(text.contains("this turn runs as deny"), "{text}");
    assert!(text.contains("did not list"), "{text}");
    let argv = turn_argv(home.path());
    assert!(
        !argv.iter().any(|a| a == "--dangerously-skip-permissions"),
        "never skip-permissions unproven: {argv:?}"
    );
    assert!(!ran(&home.path().join("tools.log"))
        .iter()
        .any(|t| t.starts_with("run_command")));
}

#[test]
fn allow_and_deny_are_the_old_on_and_off() {
    for (mode, skip) in [("allow", true), ("deny", false)] {
        let home = tempfile::tempdir().expect("tmp");
        let out = stream_output(
            stream(home.path(), mode).spawn().expect("stream"),
            &request(home.path(), true),
        );
        assert!(out.status.success(), "{mode}");
        let argv = turn_argv(home.path());
        assert_eq!(
            argv.iter().any(|a| a == "--dangerously-skip-permissions"),
            skip,
            "{mode}: {argv:?}"
        );
        assert!(
            !argv.iter().any(|a| a.contains("agy-bridge-gate-")),
            "{mode}: no gate: {argv:?}"
        );
        let hooks = argvs(&home.path().join("argv.log"))
            .iter()
            .any(|a| a.iter().any(|w| w == "/hooks"));
        assert!(!hooks, "{mode}: nothing to prove");
    }
}

/// A stream whose questions are answered by `answer` (the extension's part;
/// `None` aborts): each turn's deltas, and every question asked.
fn answered(home: &Path, answer: impl Fn(&Value) -> Option<Value>) -> (String, Vec<Value>) {
    let (mut turns, asked) = session(home, &[String::new()], answer);
    (turns.remove(0), asked)
}

/// `turns` pi prompts on one `stream --session` (one on plain `stream`
/// when there is a single empty one).
fn session(
    home: &Path,
    turns: &[String],
    answer: impl Fn(&Value) -> Option<Value>,
) -> (Vec<String>, Vec<Value>) {
    session_with(stream(home, "ask"), home, turns, answer)
}

fn session_with(
    mut cmd: Command,
    home: &Path,
    turns: &[String],
    answer: impl Fn(&Value) -> Option<Value>,
) -> (Vec<String>, Vec<Value>) {
    let warm = turns.len() > 1;
    if warm {
        cmd.arg("--session");
    }
    let mut child: Child = cmd.spawn().expect("stream");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut texts, mut asked) = (Vec::new(), Vec::new());
    let mut messages = Vec::new();
    for prompt in turns {
        messages.push(json!({"role": "user", "content": if prompt.is_empty() { "Fix the failing test" } else { prompt }}));
        let req = json!({"model": "gemini-3.7-flash", "cwd": home, "ui": true, "sessionId": "s1", "messages": messages});
        writeln!(stdin, "{req}").expect("request");
        let mut lines = Vec::new();
        for line in stdout.by_ref() {
            let line = line.expect("line");
            let v: Value = serde_json::from_str(&line).expect("json");
            if v["type"] == "permission_request" {
                asked.push(v.clone());
                let reply = answer(&v).unwrap_or_else(|| json!({"type": "abort"}));
                writeln!(stdin, "{reply}").expect("answer");
            }
            let end = v["type"] == "error" || (v["type"] == "done" && v["reason"] == "stop");
            lines.push(line);
            if end {
                break;
            }
        }
        texts.push(deltas(lines.join("\n").as_bytes()));
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "done"}]}));
    }
    drop(stdin);
    let _ = common::wait_status(&mut child, std::time::Duration::from_secs(30));
    (texts, asked)
}

#[test]
fn with_a_ui_pi_decides_and_only_what_it_allowed_runs() {
    let home = tempfile::tempdir().expect("tmp");
    let (text, asked) = answered(home.path(), |q| {
        Some(json!({"type": "permission", "id": q["id"], "decision": "allow", "scope": "once"}))
    });
    assert_eq!(asked[0]["tool"], "run_command", "{asked:?}");
    assert_eq!(asked[0]["detail"], "cargo test");
    assert!(ran(&home.path().join("tools.log")).contains(&"run_command cargo test".to_string()));
    assert!(
        text.contains("[agy tool run_command cargo test: allowed once]"),
        "{text}"
    );

    let home = tempfile::tempdir().expect("tmp");
    let (text, _) = answered(home.path(), |q| {
        Some(
            json!({"type": "permission", "id": q["id"], "decision": "deny", "reason": "not on this branch"}),
        )
    });
    assert!(!ran(&home.path().join("tools.log"))
        .iter()
        .any(|t| t.starts_with("run_command")));
    assert!(
        text.contains("denied by the user: not on this branch"),
        "{text}"
    );
    assert!(
        text.contains("tool call denied by pre-tool hook: not on this branch"),
        "agy got the reason: {text}"
    );
}

#[test]
fn an_abort_while_pi_is_asked_denies_and_nothing_runs() {
    let home = tempfile::tempdir().expect("tmp");
    let (text, asked) = answered(home.path(), |_| None);
    assert_eq!(asked.len(), 1, "{text}");
    assert!(
        !ran(&home.path().join("tools.log"))
            .iter()
            .any(|t| t.starts_with("run_command")),
        "{text}"
    );
}

#[test]
fn a_warm_session_keeps_its_gate_and_what_was_allowed_for_the_session() {
    let home = tempfile::tempdir().expect("tmp");
    let turns = ["Fix the failing test".to_string(), "Once more".to_string()];
    let (texts, asked) = session(home.path(), &turns, |q| {
        Some(json!({"type": "permission", "id": q["id"], "decision": "allow", "scope": "session"}))
    });
    let tools: Vec<&str> = asked.iter().filter_map(|q| q["tool"].as_str()).collect();
    assert_eq!(
        tools,
        ["run_command", "replace_file_content", "run_command"],
        "asked in turn 1 only: {asked:?}"
    );
    assert!(
        texts[0].contains("allowed for this session (run_command: cargo test *)"),
        "{}",
        texts[0]
    );
    let ran = ran(&home.path().join("tools.log"));
    assert_eq!(
        ran.iter()
            .filter(|t| *t == "run_command cargo test")
            .count(),
        2,
        "both turns ran it: {ran:?}"
    );
    assert!(
        texts[1].contains("[agy tool: run_command] cargo test"),
        "{}",
        texts[1]
    );
    let turn_agys = argvs(&home.path().join("argv.log"))
        .into_iter()
        .filter(|a| is_turn(a))
        .count();
    assert_eq!(turn_agys, 1, "one warm agy, its gate kept between turns");
}

#[test]
fn a_cold_session_keeps_what_was_allowed_for_the_session_across_its_agys() {
    let home = tempfile::tempdir().expect("tmp");
    let mut cmd = stream(home.path(), "ask");
    cmd.env("AGY_WARM", "off");
    let turns = ["Fix the failing test".to_string(), "Once more".to_string()];
    let (_, asked) = session_with(cmd, home.path(), &turns, |q| {
        Some(json!({"type": "permission", "id": q["id"], "decision": "allow", "scope": "session"}))
    });
    assert_eq!(asked.len(), 3, "asked in turn 1 only: {asked:?}");
    let turn_agys = argvs(&home.path().join("argv.log"))
        .into_iter()
        .filter(|a| is_turn(a))
        .count();
    assert_eq!(turn_agys, 2, "one agy (and one gate) per turn");
}

/// agy's `init` says which permission mode it runs in; when agy's own
/// settings chose another than the bridge's flags ask for (fake-agy's
/// `permission-mode` fault reports the other one), pi and `run` say so
/// once, naming both. An agy that reports what was asked says nothing.
#[test]
fn a_permission_mode_agy_chose_itself_is_said_once_naming_both() {
    for (mode, reported, expected) in [
        ("allow", "request-review", "always-proceed"),
        ("deny", "always-proceed", "request-review"),
    ] {
        let home = tempfile::tempdir().expect("tmp");
        let mut cmd = stream_of(home.path(), mode, "hello");
        cmd.env("FAKE_AGY_FAULT", "permission-mode");
        let out = stream_output(cmd.spawn().expect("stream"), &request(home.path(), true));
        let text = deltas(&out.stdout);
        let said = format!("agy runs in permission mode \"{reported}\"");
        assert_eq!(text.matches(&said).count(), 1, "{mode}: {text}");
        assert!(
            text.contains(&format!("not the \"{expected}\" agy-bridge asked for")),
            "{mode}: {text}"
        );
        assert!(text.contains("Hello! I'm agy"), "the turn goes on: {text}");

        let run = bridge("run", home.path(), "hello", "20")
            .env("AGY_PERMISSIONS", mode)
            .env("FAKE_AGY_FAULT", "permission-mode")
            .arg("Say hello")
            .output()
            .expect("run");
        let printed = String::from_utf8_lossy(&run.stdout);
        assert_eq!(printed.matches(&said).count(), 1, "{mode}: {printed}");
    }
    let home = tempfile::tempdir().expect("tmp");
    let out = stream_output(
        stream_of(home.path(), "allow", "hello")
            .spawn()
            .expect("stream"),
        &request(home.path(), true),
    );
    let text = deltas(&out.stdout);
    assert!(!text.contains("permission mode"), "{text}");
}
