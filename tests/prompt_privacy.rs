//! The prompt never appears in agy's argv, which every local user can read
//! in `/proc/PID/cmdline` (issue 17): an agy that reads stream-json input
//! (1.1.15 and later) gets it on its stdin, of any length and with no file;
//! an older one (or one of unknown version) in a private 0600 file, even a
//! short prompt. The guardian's argv never holds it either.
//!
//! agy here is a script in front of fake-agy that notes its parent's (the
//! guardian's) command line, copies a private prompt directory aside (it is
//! gone by the time a test can look) and, when told to, answers
//! `--version` as an older agy.

mod common;

use common::{argvs, bridge, fake_agy, stdin_prompts};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

struct Agy {
    dir: tempfile::TempDir,
}

impl Agy {
    /// `version`: what `--version` answers (else fake-agy's recording's).
    fn new(version: Option<&str>) -> Agy {
        let dir = tempfile::tempdir().expect("tmp");
        let answer = version
            .map(|v| format!("if [ \"$1\" = \"--version\" ]; then echo \"{v}\"; exit 0; fi"))
            .unwrap_or_default();
        let script = format!(
            r#"#!/bin/sh
{answer}
tr '\0' ' ' < /proc/$PPID/cmdline >> "{parents}"; echo >> "{parents}"
prev=""
for a in "$@"; do
  if [ "$prev" = "--add-dir" ]; then
    case "$a" in
      */agy-bridge-prompt-*)
        cp -r "$a" "{copy}"
        stat -c %a "$a"/* > "{copy}.file-mode" ;;
    esac
  fi
  prev="$a"
done
exec "{fake}" "$@"
"#,
            parents = dir.path().join("parents.log").display(),
            copy = dir.path().join("copy").display(),
            fake = fake_agy().display()
        );
        let path = dir.path().join("agy");
        std::fs::write(&path, script).expect("script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Agy { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `agy-bridge SUBCOMMAND` running this agy, with its logs on.
    fn bridge(&self, subcommand: &str, home: &Path) -> std::process::Command {
        let mut cmd = bridge(subcommand, home, "hello", "8");
        cmd.env("AGY_BIN", self.path("agy"))
            .env("FAKE_AGY_ARGV_LOG", self.path("argv.jsonl"))
            .env("FAKE_AGY_STDIN_LOG", self.path("stdin.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Nothing agy was started with, nor its parent's (the guardian's, or
    /// the bridge's for `--version`) command line, holds `secret`.
    fn assert_no_argv_holds(&self, secret: &str) {
        let all = argvs(&self.path("argv.jsonl"));
        assert!(all.iter().any(|a| a.iter().any(|x| x == "-p")), "{all:?}");
        for argv in &all {
            assert!(
                !argv.iter().any(|a| a.contains(secret)),
                "agy's argv: {argv:?}"
            );
        }
        let parents = std::fs::read_to_string(self.path("parents.log")).expect("parents");
        assert!(parents.contains("agy-bridge"), "{parents}");
        assert!(!parents.contains(secret), "a parent's argv: {parents}");
    }

    /// The print invocation's `-p` value.
    fn p_value(&self) -> String {
        let all = argvs(&self.path("argv.jsonl"));
        let argv = all
            .iter()
            .find(|a| a.iter().any(|x| x == "-p"))
            .expect("a print invocation");
        let at = argv.iter().position(|a| a == "-p").expect("-p");
        argv.get(at + 1).cloned().unwrap_or_default()
    }
}

/// `run -` with `prompt` on the bridge's stdin (so not in its argv either).
fn run(agy: &Agy, home: &Path, prompt: &str) {
    let mut child = agy.bridge("run", home).arg("-").spawn().expect("run");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(prompt.as_bytes()).expect("prompt");
    drop(stdin);
    let out = common::wait_output(child, common::CHILD_LIMIT);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `stream` turn with `message`; returns pi's events.
fn stream(agy: &Agy, home: &Path, tmp: &Path, message: &str) -> Vec<Value> {
    let child = agy
        .bridge("stream", home)
        .env("TMPDIR", tmp)
        .spawn()
        .expect("stream");
    let request = json!({
        "model": "gemini-3.7-flash",
        "sessionId": "private",
        "cwd": home,
        "messages": [{"role": "user", "content": [{"type": "text", "text": message}]}],
    });
    let out = common::stream_output(child, &request.to_string());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn secret() -> String {
    format!("the pangolin's password is {}", std::process::id())
}

#[test]
fn run_sends_the_prompt_on_stdin_and_in_no_argv() {
    let home = tempfile::tempdir().expect("home");
    let agy = Agy::new(None);
    let secret = secret();
    run(&agy, home.path(), &secret);
    agy.assert_no_argv_holds(&secret);
    assert_eq!(agy.p_value(), "");
    assert_eq!(stdin_prompts(&agy.path("stdin.jsonl")), [secret]);
}

#[test]
fn stream_sends_the_prompt_on_stdin_and_in_no_argv() {
    let home = tempfile::tempdir().expect("home");
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let agy = Agy::new(None);
    let secret = secret();
    let events = stream(&agy, home.path(), tmp.path(), &secret);
    assert_eq!(events.last().expect("events")["type"], "done", "{events:?}");
    agy.assert_no_argv_holds(&secret);
    assert_eq!(agy.p_value(), "");
    assert_eq!(stdin_prompts(&agy.path("stdin.jsonl")), [secret]);
}

#[test]
fn a_300_kib_prompt_goes_on_stdin_with_no_file() {
    let home = tempfile::tempdir().expect("home");
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let agy = Agy::new(None);
    let mut message = String::new();
    for i in 0.. {
        if message.len() >= 300 * 1024 {
            break;
        }
        message.push_str(&format!("line {i}: \"quoted\" \\ and \u{e9}\n"));
    }
    message.push_str("THE END");
    let events = stream(&agy, home.path(), tmp.path(), &message);
    assert_eq!(events.last().expect("events")["type"], "done", "{events:?}");
    assert_eq!(stdin_prompts(&agy.path("stdin.jsonl")), [message.clone()]);
    assert!(!agy.path("copy").exists(), "a private prompt file was made");
    for argv in argvs(&agy.path("argv.jsonl")) {
        assert!(
            !argv.iter().any(|a| a.contains("agy-bridge-prompt-")),
            "{argv:?}"
        );
        assert!(!argv.iter().any(|a| a.contains("THE END")), "{argv:?}");
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).expect("tmp").collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn an_old_agy_gets_even_a_short_prompt_in_a_private_file() {
    let home = tempfile::tempdir().expect("home");
    let agy = Agy::new(Some("1.1.9"));
    let secret = secret();
    run(&agy, home.path(), &secret);
    agy.assert_no_argv_holds(&secret);
    let note = agy.p_value();
    assert!(note.contains("user-message.md"), "{note}");
    let seen = std::fs::read_to_string(agy.path("copy/user-message.md")).expect("the file");
    assert_eq!(seen, secret);
    let mode = std::fs::read_to_string(agy.path("copy.file-mode")).expect("mode");
    assert_eq!(mode.trim(), "600");
    assert!(
        stdin_prompts(&agy.path("stdin.jsonl")).is_empty(),
        "an old agy reads no stdin"
    );
    let argv = argvs(&agy.path("argv.jsonl"));
    assert!(
        !argv.iter().flatten().any(|a| a == "--input-format"),
        "{argv:?}"
    );
}

/// Through the library, with and without a guardian (the runner's two ways
/// to agy's stdin): agy reads the prompt on stdin, its argv holds none, and
/// the turn ends once agy's input is closed after its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_sends_the_prompt_on_stdin_with_and_without_a_guardian() {
    for guardian in [false, true] {
        let home = common::Home::new();
        let logs = tempfile::tempdir().expect("logs");
        let mut cfg = home.config("hello", 8.0);
        cfg.bind = agy_format::agy_args::BindMode::Auto;
        for (var, file) in [
            ("FAKE_AGY_ARGV_LOG", "argv.jsonl"),
            ("FAKE_AGY_STDIN_LOG", "stdin.jsonl"),
        ] {
            cfg.env
                .push((var.into(), logs.path().join(file).display().to_string()));
        }
        if guardian {
            cfg.guardian = Some(agy_bridge::process::standby::Guardian::new(env!(
                "CARGO_BIN_EXE_agy-bridge"
            )));
        }
        let secret = secret();
        let outcome = common::run(cfg, &secret).await;
        assert!(
            outcome.result.ok(),
            "guardian={guardian}: {:?}",
            outcome.result.failure
        );
        assert_eq!(
            stdin_prompts(&logs.path().join("stdin.jsonl")),
            std::slice::from_ref(&secret),
            "guardian={guardian}"
        );
        for argv in argvs(&logs.path().join("argv.jsonl")) {
            assert!(!argv.iter().any(|a| a.contains(&secret)), "{argv:?}");
        }
    }
}
