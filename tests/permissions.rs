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

/// The argv of agy's turn (not `--version`, `--help` or `-p /hooks`).
fn turn_argv(home: &Path) -> Vec<String> {
    argvs(&home.join("argv.log"))
        .into_iter()
        .find(|a| a.iter().any(|w| w == "-p") && !a.iter().any(|w| w == "/hooks"))
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
        text.contains("run_command: cargo test*"),
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

/// A stream whose questions are answered by `answer` (the extension's part).
fn answered(home: &Path, answer: impl Fn(&Value) -> Option<Value>) -> (String, Vec<Value>) {
    let mut child: Child = stream(home, "ask").spawn().expect("stream");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request(home, true)).expect("request");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    let mut asked = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        let v: Value = serde_json::from_str(&line).expect("json");
        if v["type"] == "permission_request" {
            asked.push(v.clone());
            match answer(&v) {
                Some(reply) => writeln!(stdin, "{reply}").expect("answer"),
                None => writeln!(stdin, "{}", json!({"type": "abort"})).expect("abort"),
            }
        }
        let end = v["type"] == "error" || (v["type"] == "done" && v["reason"] == "stop");
        lines.push(line);
        if end {
            break;
        }
    }
    drop(stdin);
    let _ = common::wait_status(&mut child, std::time::Duration::from_secs(30));
    (deltas(lines.join("\n").as_bytes()), asked)
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
