//! A reader that closes stdout early (`agy-bridge run x | head -1`) ends
//! every command quietly: no panic, no "Broken pipe" error, exit 0.

mod common;

use common::bridge;
use std::io::Read;
use std::process::{Command, Stdio};

/// Run `cmd` with its stdout a pipe whose reader is already gone (or, with
/// `read_first`, gone after the first line); its stderr and exit code.
fn with_stdout_closed(mut cmd: Command, read_first: bool) -> (String, Option<i32>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agy-bridge");
    let stdout = child.stdout.take().expect("stdout");
    if read_first {
        let mut byte = [0u8; 1];
        let mut reader = stdout;
        while reader
            .read(&mut byte)
            .map(|n| n == 1 && byte[0] != b'\n')
            .unwrap_or(false)
        {}
        drop(reader);
    } else {
        drop(stdout);
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    (stderr, status.code())
}

#[test]
fn every_command_stops_quietly_when_stdout_is_closed() {
    let home = tempfile::tempdir().expect("tmp");
    let state = home.path().join("state");
    let recording = agy_corpus::recording::resolve("tools", &agy_corpus::recording::bundled_dir())
        .expect("bundled recording");
    let cases: Vec<(&str, Vec<String>, bool)> = vec![
        ("run", vec!["hi".into()], false),
        ("run", vec!["hi".into()], true),
        ("run", vec!["--json".into(), "hi".into()], true),
        ("ask", vec!["hi".into()], false),
        ("ask", vec!["--json".into(), "hi".into()], false),
        ("demo", vec![], false),
        ("config", vec![], false),
        ("sessions", vec![], false),
        ("models", vec![], false),
        ("decode", vec![recording.display().to_string()], false),
        ("drift", vec![recording.display().to_string()], false),
    ];
    for (sub, args, read_first) in cases {
        let mut cmd = bridge(sub, home.path(), "tools", "20");
        cmd.args(&args).env("AGY_BRIDGE_STATE_DIR", &state);
        let (stderr, code) = with_stdout_closed(cmd, read_first);
        let what = format!("{sub} {args:?} (first line read: {read_first})");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{what}: {stderr}");
        assert_eq!(code, Some(0), "{what}: {stderr}");
    }
}
