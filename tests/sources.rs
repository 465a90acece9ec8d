//! The turn's two sources disagreeing, end to end: fake-agy writes the
//! database, and a filter between it and the runner changes what agy
//! "prints" on stdout, so the database and stream-json tell different
//! stories. The runner must never let the shorter one win silently.

mod common;

use agy_bridge::follow::events::Event;
use agy_bridge::runner::RunEvent;
use agy_format::agy_args::BindMode;
use common::*;
use std::path::{Path, PathBuf};

/// An agy that is fake-agy with its stdout passed through `sed` `script`,
/// line by line (`-u`), as agy prints: a `result` line held in sed's buffer
/// would never reach the runner, which keeps agy's stdin open until it does.
fn filtered_agy(dir: &Path, script: &str) -> PathBuf {
    let path = dir.join("agy-filtered");
    let body = format!(
        "#!/bin/sh\n'{}' \"$@\" | sed -u -e '{}'\n",
        fake_agy().display(),
        script
    );
    std::fs::write(&path, body).expect("script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// agy printed more than its database holds: the user gets the database's
/// text live, then a notice and agy's whole answer, never the shorter alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_shorter_than_agys_answer_is_followed_by_agys_answer() {
    let home = Home::new();
    let mut cfg = home.config("hello", 8.0);
    cfg.bind = BindMode::StreamJson;
    cfg.agy_bin = filtered_agy(
        home.dir.path(),
        r#"s/\("text_delta":"[^"]*\)"/\1 AND THE REST"/"#,
    );
    let out = run(cfg, "Say hello").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    let db_answer = load("hello").header.stdout;
    let events: Vec<&RunEvent> = out.events.iter().map(|(_, e)| e).collect();
    let notice = events
        .iter()
        .position(|e| matches!(e, RunEvent::AnswerFromAgy { .. }))
        .expect("a notice that the database held less");
    let after: String = events[notice..]
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::Text { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(after.contains("AND THE REST"), "{after:?}");
    assert!(
        after.starts_with(db_answer.trim_end()),
        "agy's whole answer, not only the missing part: {after:?}"
    );
    // agy's own answer is what `run --json` reports as its response.
    let response = &out.result.agy_result.as_ref().expect("result").response;
    assert!(response.contains("AND THE REST"), "{response:?}");
}

/// When the two agree, nothing is said and nothing is repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agreeing_sources_add_nothing_and_the_response_is_kept() {
    let home = Home::new();
    let mut cfg = home.config("hello", 8.0);
    cfg.bind = BindMode::StreamJson;
    let out = run(cfg, "Say hello").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    assert!(!out.events.iter().any(|(_, e)| matches!(
        e,
        RunEvent::AnswerFromAgy { .. } | RunEvent::Degraded { .. }
    )));
    assert_eq!(out.transcript(), expected(&load("hello")));
    let response = &out.result.agy_result.as_ref().expect("result").response;
    assert_eq!(
        response.trim_end(),
        load("hello").header.stdout.trim_end(),
        "run --json reports agy's answer, not an empty string"
    );
}

/// A tool step the database ends in ERROR without agy's words, while agy's
/// stream-json gives the reason: the tool line carries agy's reason,
/// whether the row has no words (`denied-write-1.2.7`, `mcp-denied-1.2.7`)
/// or words of its own (`denied-write-1.3.1`: its arguments,
/// `TargetFile=...`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tool_without_words_in_the_database_gets_agys_reason() {
    for (recording, tool, words) in [
        (
            "outcomes/denied-write-1.2.7",
            "write_to_file",
            "permission check failed for write_file",
        ),
        (
            "outcomes/mcp-denied-1.2.7",
            "mcp",
            "permission check failed for mcp",
        ),
        (
            "outcomes/denied-write-1.3.1",
            "write_to_file",
            "permission check failed for write_file",
        ),
    ] {
        let home = Home::new();
        let mut cfg = home.config(recording, 8.0);
        cfg.bind = BindMode::StreamJson;
        cfg.skip_permissions = false;
        let out = run(cfg, "go").await;
        let failed: Vec<(String, String)> = out
            .agy_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::ToolResult {
                    name,
                    ok: false,
                    summary,
                    ..
                } => Some((name, summary)),
                _ => None,
            })
            .collect();
        assert_eq!(failed.len(), 1, "{recording}: {failed:?}");
        assert!(failed[0].0.contains(tool), "{recording}: {failed:?}");
        assert!(
            failed[0].1.starts_with(words),
            "{recording}: {:?}",
            failed[0].1
        );
    }
}
