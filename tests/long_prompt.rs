//! An agy that cannot read its prompt on stdin (before 1.1.15) gets every
//! message through a file in a private directory, here one longer than a
//! command-line argument can hold (Linux caps one at 128 KiB): agy gets
//! `--add-dir <dir>` and a short `-p` naming the file, the file holds the
//! whole message while agy runs, and the directory is gone when the turn
//! ends, aborted or not. (A newer agy reads it on stdin: tests/prompt_privacy.rs.)
//!
//! agy here is a script in front of fake-agy that answers `--version` as
//! agy 1.1.9 and copies the private directory (with its modes) aside before
//! handing over, since the directory itself is gone by the time a test can
//! look.

mod common;

use agy_bridge::runner::{self, RunEvent, TurnRequest};
use common::{bridge, fake_agy, Home};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio_util::sync::CancellationToken;

/// 200 KiB of text no argument could carry, with a recognisable end.
fn long_message() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 200 * 1024 {
        s.push_str(&format!(
            "line {i}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    s.push_str("THE END");
    s
}

/// A temporary dir holding the agy script and what it saw.
struct Spy {
    dir: tempfile::TempDir,
}

impl Spy {
    fn new() -> Spy {
        let dir = tempfile::tempdir().expect("tmp");
        let script = dir.path().join("agy");
        std::fs::write(
            &script,
            format!(
                r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "1.1.9"; exit 0; fi
prev=""
for a in "$@"; do
  if [ "$prev" = "--add-dir" ]; then
    case "$a" in
      */agy-bridge-prompt-*)
        cp -r "$a" "{copy}"
        stat -c %a "$a" > "{copy}.dir-mode"
        stat -c %a "$a"/* > "{copy}.file-mode" ;;
    esac
  fi
  prev="$a"
done
exec "{fake}" "$@"
"#,
                copy = dir.path().join("copy").display(),
                fake = fake_agy().display()
            ),
        )
        .expect("script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Spy { dir }
    }

    fn agy(&self) -> PathBuf {
        self.dir.path().join("agy")
    }

    fn argv_log(&self) -> PathBuf {
        self.dir.path().join("argv.jsonl")
    }

    /// The print invocation's arguments (not `--version`).
    fn print_argv(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.argv_log()).expect("argv log");
        let line = log
            .lines()
            .find(|l| l.contains("\"-p\""))
            .unwrap_or_else(|| panic!("no print invocation in {log}"));
        serde_json::from_str(line).expect("argv json")
    }

    /// Check what agy got and saw; returns the private directory.
    fn assert_delivered(&self, message: &str) -> PathBuf {
        let argv = self.print_argv();
        let value_of = |flag: &str| -> Vec<&String> {
            argv.windows(2)
                .filter(|w| w[0] == flag)
                .map(|w| &w[1])
                .collect()
        };
        let dir = value_of("--add-dir")
            .into_iter()
            .find(|d| d.contains("agy-bridge-prompt-"))
            .unwrap_or_else(|| panic!("no private --add-dir in {argv:?}"));
        let prompt = value_of("-p");
        let prompt = prompt.first().expect("-p");
        assert!(
            prompt.len() < 1024,
            "-p is not short: {} bytes",
            prompt.len()
        );
        let file = Path::new(dir).join("user-message.md");
        assert!(
            prompt.contains(&file.display().to_string()),
            "-p does not name the file: {prompt}"
        );
        let copy = self.dir.path().join("copy/user-message.md");
        let seen = std::fs::read_to_string(&copy).expect("agy saw the file");
        assert_eq!(seen.len(), message.len());
        assert!(seen == message, "the file does not hold the whole message");
        let mode = |name: &str| {
            std::fs::read_to_string(self.dir.path().join(name))
                .expect("mode")
                .trim()
                .to_string()
        };
        assert_eq!(mode("copy.dir-mode"), "700");
        assert_eq!(mode("copy.file-mode"), "600");
        PathBuf::from(dir)
    }
}

#[test]
fn stream_sends_a_200_kib_message_through_a_private_file() {
    let home = tempfile::tempdir().expect("home");
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let spy = Spy::new();
    let message = long_message();
    let mut cmd = bridge("stream", home.path(), "hello", "8");
    cmd.env("AGY_BIN", spy.agy())
        .env("FAKE_AGY_ARGV_LOG", spy.argv_log())
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let request = json!({
        "model": "gemini-3.7-flash",
        "sessionId": "long",
        "cwd": home.path(),
        "messages": [{"role": "user", "content": [{"type": "text", "text": message}]}],
    });
    let out = common::stream_output(child, &request.to_string());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let last = events.last().expect("events");
    assert_eq!(
        last["type"],
        "done",
        "{last}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = spy.assert_delivered(&message);
    assert!(dir.starts_with(std::fs::canonicalize(tmp.path()).expect("tmp")));
    assert!(!dir.exists(), "{} outlived the turn", dir.display());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).expect("tmp").collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// Run a turn through the library; with `abort`, cancel at the first text.
async fn run_long(spy: &Spy, recording: &str, speed: f64, abort: bool) -> runner::RunResult {
    let home = Home::new();
    let mut cfg = home.config(recording, speed);
    cfg.agy_bin = spy.agy();
    cfg.env.push((
        "FAKE_AGY_ARGV_LOG".into(),
        spy.argv_log().display().to_string(),
    ));
    let req = TurnRequest {
        prompt: long_message(),
        ..TurnRequest::default()
    };
    let cancel = CancellationToken::new();
    let (tx, mut rx) = runner::event_channel();
    let canceller = cancel.clone();
    let watcher = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if abort
                && matches!(
                    ev,
                    RunEvent::Agy(agy_bridge::follow::events::Event::Text { .. })
                )
            {
                canceller.cancel();
            }
        }
    });
    let result = runner::run(&cfg, &req, cancel, tx).await;
    watcher.await.expect("watcher");
    result
}

#[tokio::test]
async fn run_sends_a_200_kib_message_through_a_private_file() {
    let spy = Spy::new();
    let result = run_long(&spy, "hello", 8.0, false).await;
    assert!(result.ok(), "{:?}", result.failure);
    let dir = spy.assert_delivered(&long_message());
    assert!(!dir.exists(), "{} outlived the turn", dir.display());
}

#[tokio::test]
async fn an_aborted_turn_removes_the_private_directory_too() {
    let spy = Spy::new();
    let result = run_long(&spy, "long-answer", 0.5, true).await;
    assert!(result.aborted, "{:?}", result.failure);
    let dir = spy.assert_delivered(&long_message());
    assert!(!dir.exists(), "{} outlived the aborted turn", dir.display());
}

/// `run -` takes the prompt from stdin: a message longer than the bridge's
/// own command line could carry still reaches agy whole.
#[test]
fn cli_run_reads_a_long_prompt_from_stdin() {
    let home = tempfile::tempdir().expect("home");
    let spy = Spy::new();
    let message = long_message();
    let mut child = bridge("run", home.path(), "hello", "8")
        .env("AGY_BIN", spy.agy())
        .env("FAKE_AGY_ARGV_LOG", spy.argv_log())
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(message.as_bytes())
        .expect("prompt");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    spy.assert_delivered(&message);
}
