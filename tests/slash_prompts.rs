//! A prompt that starts with `/` is the user's text, never an agy slash
//! command (docs/agy-format.md, "Slash commands in the prompt"): with an
//! agy whose `--help` lists `--disable-slash-commands` the bridge passes
//! it; with one that lacks it, the prompt goes with a leading space, which
//! agy does not expand (fake-agy models agy's check: `/` as the first
//! character). The prompt goes on agy's stdin, where whether agy expands a
//! slash command is not known, so the same protection holds there (and
//! fake-agy assumes the worst: it runs a stdin prompt's slash command too).

mod common;

use common::bridge;
use serde_json::Value;

/// `run --json PROMPT` with fake-agy (`env` added); the print invocation's
/// arguments, the prompt agy read on its stdin and the result.
fn run(prompt: &str, env: &[(&str, &str)]) -> (Vec<String>, String, Value) {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("argv.jsonl");
    let stdin_log = home.path().join("stdin.jsonl");
    let mut cmd = bridge("run", home.path(), "hello", "8");
    cmd.args(["--json", prompt])
        .env("FAKE_AGY_ARGV_LOG", &log)
        .env("FAKE_AGY_STDIN_LOG", &stdin_log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let result: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    let argv = std::fs::read_to_string(&log)
        .expect("argv log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
        .find(|a| a.iter().any(|x| x == "-p"))
        .expect("a print invocation");
    let sent = common::stdin_prompts(&stdin_log)
        .pop()
        .expect("a prompt on agy's stdin");
    (argv, sent, result["result"].clone())
}

fn prompt_arg(argv: &[String]) -> &str {
    let i = argv.iter().position(|a| a == "-p").expect("-p");
    argv.get(i + 1).map(String::as_str).unwrap_or("")
}

#[test]
fn with_the_flag_the_prompt_is_sent_as_it_is() {
    let (argv, sent, result) = run("/model is wrong here, why?", &[]);
    assert!(
        argv.iter().any(|a| a == "--disable-slash-commands"),
        "{argv:?}"
    );
    assert_eq!(prompt_arg(&argv), "");
    assert_eq!(sent, "/model is wrong here, why?");
    assert!(result["failure"].is_null(), "{result}");
    assert!(
        result["conversation_id"].is_string(),
        "a real turn: {result}"
    );
    assert_ne!(result["agy_result"]["num_turns"], 0, "{result}");
}

#[test]
fn without_the_flag_a_leading_space_keeps_it_a_prompt() {
    let (argv, sent, result) = run(
        "/clear the cache, then rebuild",
        &[("FAKE_AGY_NO_SLASH_FLAG", "1")],
    );
    assert!(
        !argv.iter().any(|a| a == "--disable-slash-commands"),
        "{argv:?}"
    );
    assert_eq!(prompt_arg(&argv), "");
    assert_eq!(sent, " /clear the cache, then rebuild");
    assert!(
        result["failure"].is_null(),
        "agy's /clear exits 2; this ran a turn: {result}"
    );
    assert!(result["conversation_id"].is_string(), "{result}");
}

/// What the guard prevents, shown on fake-agy itself: the same prompt
/// unshielded, with no flag, is agy's `/model` command.
#[test]
fn unshielded_the_prompt_would_be_agys_command() {
    let out = std::process::Command::new(common::fake_agy())
        .args(["-p", "/model is wrong", "--output-format", "stream-json"])
        .env("FAKE_AGY_RECORDING", "hello")
        .env("FAKE_AGY_NO_SLASH_FLAG", "1")
        .env("HOME", tempfile::tempdir().expect("home").path())
        .output()
        .expect("fake-agy");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"event\":\"command_result\""), "{stdout}");
    assert!(!stdout.contains("\"event\":\"init\""), "{stdout}");
}

/// The same on agy's stdin: fake-agy runs a stdin prompt's slash command
/// when it has no flag, so the shield above is what keeps it a prompt.
#[test]
fn unshielded_on_stdin_the_prompt_would_be_agys_command_too() {
    use std::io::Write;
    let mut child = std::process::Command::new(common::fake_agy())
        .args([
            "--output-format",
            "stream-json",
            "--input-format",
            "stream-json",
            "-p",
            "",
        ])
        .env("FAKE_AGY_RECORDING", "hello")
        .env("FAKE_AGY_NO_SLASH_FLAG", "1")
        .env("HOME", tempfile::tempdir().expect("home").path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("fake-agy");
    let line = agy_format::stream_input::user_line("/model is wrong");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(line.as_bytes())
        .expect("write");
    let out = common::wait_output(child, common::CHILD_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"event\":\"command_result\""), "{stdout}");
}
