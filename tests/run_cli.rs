//! `agy-bridge run` and `agy-bridge demo` as a user sees them, with
//! fake-agy as agy.

mod common;

use assert_cmd::Command;
use common::{alive, bridge, load};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

fn run_cmd(home: &tempfile::TempDir, recording: &str) -> Command {
    Command::from_std(bridge("run", home.path(), recording, "10"))
}

#[test]
fn readable_view_shows_text_thinking_tools_and_a_summary() {
    let home = tempfile::tempdir().expect("tmp");
    let out = run_cmd(&home, "tools")
        .arg("Fix the failing test")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for needle in [
        "thinking: Let me look at the code and the tests first.",
        "→ view_file",
        "← grep_search: 2 hit(s) for \"sum_to\"",
        "✗ run_command: cargo test exited 101",
        "✗ run_command: ./deploy.sh: No such file or directory\n",
        "`cargo test` failed before the fix (1 failing test)",
        "── ok · conversation ",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    // The failed step's reason is its line, not a second error line.
    assert_eq!(
        stdout.matches("No such file or directory").count(),
        1,
        "{stdout}"
    );
    // No colour codes when stdout is not a terminal.
    assert!(!stdout.contains('\u{1b}'));
}

#[test]
fn json_mode_prints_one_event_per_line_then_the_result() {
    let home = tempfile::tempdir().expect("tmp");
    let out = run_cmd(&home, "thinking")
        .args(["--json", "What is the capital of Australia?"])
        .assert()
        .success();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|v| v["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"started"));
    assert!(kinds.contains(&"bound"));
    assert_eq!(kinds.last(), Some(&"result"));
    let first_thinking = kinds
        .iter()
        .position(|k| *k == "thinking")
        .expect("thinking");
    let first_text = kinds.iter().position(|k| *k == "text").expect("text");
    assert!(first_thinking < first_text);
    let result = &lines.last().expect("result")["result"];
    assert_eq!(result["exit_code"], 0);
    assert!(result["failure"].is_null());
    assert_eq!(result["last_idx"], 2);
}

#[test]
fn failures_exit_non_zero_with_words_a_user_can_act_on() {
    let home = tempfile::tempdir().expect("tmp");
    let cases: Vec<(Command, &str)> = vec![
        {
            let mut c = run_cmd(&home, "quota-error");
            c.arg("Refactor the parser");
            (c, "agy quota exceeded: You have exhausted your capacity")
        },
        {
            let mut c = run_cmd(&home, "hello");
            c.env("AGY_BIN", home.path().join("no-agy")).arg("hi");
            (c, "agy is not installed")
        },
        {
            // Without agy's init line, nothing can say which database is ours.
            let mut c = run_cmd(&home, "hello");
            c.env("FAKE_AGY_NO_DB", "1")
                .env("AGY_BIND", "discovery")
                .arg("hi");
            (c, "could not bind agy's conversation database")
        },
        {
            let mut c = run_cmd(&home, "permission");
            c.env("AGY_PERMISSIONS", "deny").arg("Run the tests");
            (c, "stopped to ask permission for run_command")
        },
    ];
    for (mut cmd, want) in cases {
        let out = cmd.assert().failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains(want), "want {want:?}, got:\n{stderr}");
        // Said once: agy's own error line is not printed beside it.
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let said = stdout.matches("exhausted your capacity").count()
            + stderr.matches("exhausted your capacity").count();
        assert!(said <= 1, "said {said} times:\n{stdout}\n{stderr}");
    }
}

#[test]
fn ctrl_c_stops_agy_and_its_process_group() {
    let home = tempfile::tempdir().expect("tmp");
    let pidfile = home.path().join("grandchild.pid");
    let mut child = bridge("run", home.path(), "long-answer", "0.3")
        .args(["--json", "Write a long report"])
        .env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let watchdog = common::Watchdog::new(&child, common::CHILD_LIMIT);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        if line.expect("line").contains("\"kind\":\"text\"") {
            break;
        }
    }
    let asked = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    drop(watchdog);
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    assert!(!status.success());
    assert!(asked.elapsed() < Duration::from_secs(10));
    assert!(
        rest.iter().any(|l| l.contains("\"kind\":\"aborted\"")),
        "{rest:?}"
    );
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        common::eventually(Duration::from_secs(10), || !alive(grandchild)),
        "agy's grandchild survived Ctrl-C"
    );
}

#[test]
fn demo_runs_the_whole_pipeline_without_agy() {
    let out = Command::new(env!("CARGO_BIN_EXE_agy-bridge"))
        .args(["demo", "--speed", "10"])
        .env_remove("AGY_BIN")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("no real agy, no network"));
    let answer = load("tools").header.stdout;
    assert!(stdout.contains(answer.trim()), "{stdout}");
    assert!(stdout.contains("── ok"));
}

/// agy's database cannot be followed (here: it is never written where we
/// look), but agy printed its stream-json: the turn says so once and still
/// streams agy's answer.
#[test]
fn an_unreadable_database_degrades_to_stream_json_text() {
    let home = tempfile::tempdir().expect("tmp");
    let out = run_cmd(&home, "hello")
        .env("FAKE_AGY_NO_DB", "1")
        .env("AGY_BIND", "stream-json")
        .arg("hi")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(
        stdout
            .matches("cannot follow agy's conversation database")
            .count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("Hello! I'm agy, running in print mode."),
        "{stdout}"
    );
}
