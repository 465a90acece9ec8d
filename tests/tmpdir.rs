//! The bridge's temporary directory: a relative `TMPDIR` is made absolute
//! (agy resolves a relative `--add-dir` elsewhere and would find no MCP
//! server), and one that does not exist gives `/tmp` with one warning.

mod common;

use common::bridge;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

/// The `--add-dir` values of every agy run in `FAKE_AGY_ARGV_LOG`.
fn add_dirs(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut dirs = Vec::new();
    for argv in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
    {
        for pair in argv.windows(2) {
            if pair[0] == "--add-dir" {
                dirs.push(pair[1].clone());
            }
        }
    }
    dirs
}

#[test]
fn a_relative_tmpdir_still_serves_pi_tools_to_agy() {
    let home = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(home.path().join("rel-tmp")).expect("mkdir");
    let log = home.path().join("argv.log");
    let mut cmd = bridge("stream", home.path(), "mcp/pi-tool", "8");
    cmd.env("FAKE_AGY_ARGV_LOG", &log)
        .env("TMPDIR", "rel-tmp")
        .env_remove("AGY_PI_TOOLS")
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let request = json!({
        "model": "gemini-3.7-flash",
        "sessionId": "tmpdir",
        "cwd": home.path(),
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Ask pi"}]}],
        "tools": [{"name": "pi_probe", "description": "d", "parameters": {"type": "object"}}],
    });
    writeln!(stdin, "{request}").expect("request");
    let out = child.stdout.take().expect("stdout");
    let mut saw_tool_call = false;
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        let v: Value = serde_json::from_str(&line).expect("JSON");
        if v["type"] == "toolcall_start" {
            saw_tool_call = true;
        }
        if matches!(v["type"].as_str(), Some("done" | "error")) {
            break;
        }
    }
    drop(stdin);
    common::wait_status(&mut child, common::CHILD_LIMIT);
    let dirs = add_dirs(&log);
    assert!(
        dirs.iter().any(|d| d.contains("agy-bridge-mcp-")),
        "{dirs:?}"
    );
    for d in &dirs {
        assert!(Path::new(d).is_absolute(), "relative --add-dir {d:?}");
    }
    assert!(saw_tool_call, "agy found no MCP server: {dirs:?}");
}

#[test]
fn a_missing_tmpdir_falls_back_to_tmp_with_one_warning() {
    let home = tempfile::tempdir().expect("tmp");
    let log = home.path().join("argv.log");
    // A turn that does not read agy's stream-json sends its prompt through
    // a private file (not agy's stdin), which goes in the temporary
    // directory.
    let prompt = "word ".repeat(40_000);
    let mut cmd = bridge("run", home.path(), "hello", "10");
    cmd.env("FAKE_AGY_ARGV_LOG", &log)
        .env("AGY_BIND", "discovery")
        .env("TMPDIR", "/nonexistent")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(prompt.as_bytes()).expect("prompt");
    drop(stdin);
    let out = common::wait_output(child, common::CHILD_LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("agy-bridge: warning: TMPDIR=\"/nonexistent\" does not exist; using /tmp")
            .count(),
        1,
        "{stderr}"
    );
    let dirs = add_dirs(&log);
    assert!(
        dirs.iter()
            .any(|d| d.starts_with("/tmp/agy-bridge-prompt-")),
        "{dirs:?}"
    );
}
