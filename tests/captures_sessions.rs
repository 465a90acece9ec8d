//! Real agy sessions, replayed: resume, usage, slash commands, denials, tool
//! errors, kills and hooks, as published by other projects
//! (docs/agy-format.md, "More real agy" and "Sources").
//!
//! The captures are read from `AGY_CAPTURES_DIR` (`stream-json-more/` and
//! `hooks-1.1.7/`), never copied into this repository; without it every
//! test says it was skipped. Lines starting with `#` are the publisher's
//! header (command, stdin, exit code, stderr): the replay prints the rest
//! as agy's stdout, the header's stderr as its stderr, and exits with the
//! header's code, through the real runner.

mod common;

use agy_bridge::follow::discovery::BindMethod;
use agy_bridge::follow::events::Event;
use agy_bridge::runner::failure::{self, AgyReport, Failure};
use agy_bridge::runner::{RunEvent, RunResult, TurnRequest};
use agy_format::features::AgyFeatures;
use agy_format::hooks::ToolPayload;
use agy_format::ids::ConversationId;
use agy_format::stream_json::{Line, TurnResult, Usage};
use common::text_of;
use std::path::{Path, PathBuf};

const MORE: &str = "stream-json-more";

fn captures() -> PathBuf {
    common::captures_dir()
}

/// One capture: agy's stdout lines, and what its header says.
struct Capture {
    lines: Vec<String>,
    stderr: String,
    exit: i32,
}

/// Exit codes the jdiaz files' publisher states outside the file (its
/// fixtures have no header): the print-timeout run exited 1, the rest 0.
fn read_capture(dir: &Path, name: &str) -> Capture {
    let text = std::fs::read_to_string(dir.join(MORE).join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut cap = Capture {
        lines: Vec::new(),
        stderr: String::new(),
        exit: if name.contains("print-timeout") { 1 } else { 0 },
    };
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("# ") {
            if let Some(rest) = head.strip_prefix("exit: ") {
                cap.exit = rest
                    .split_whitespace()
                    .next()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or_else(|| panic!("{name}: exit line {rest:?}"));
            } else if let Some(rest) = head.strip_prefix("stderr: ") {
                cap.stderr = format!("{rest}\n");
            }
        } else if !line.trim().is_empty() && !line.starts_with('#') {
            cap.lines.push(line.to_string());
        }
    }
    cap
}

fn parsed(cap: &Capture) -> Vec<Line> {
    cap.lines.iter().map(|l| Line::parse(l)).collect()
}

fn results(cap: &Capture) -> Vec<TurnResult> {
    parsed(cap)
        .into_iter()
        .filter_map(|l| match l {
            Line::Result(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// Every file in `stream-json-more/`, sorted.
fn more_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join(MORE))
        .expect("stream-json-more")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") || n.ends_with(".ndjson"))
        .collect();
    v.sort();
    v
}

/// A stand-in agy that prints a capture as agy did and exits with its code.
fn replay_script(tmp: &Path, cap: &Capture) -> PathBuf {
    let out = tmp.join("stdout");
    std::fs::write(&out, cap.lines.join("\n") + "\n").expect("stdout");
    let err = tmp.join("stderr");
    std::fs::write(&err, &cap.stderr).expect("stderr");
    let script = tmp.join("agy");
    let body = format!(
        "#!/bin/sh\ncat '{}' >&2\ncat '{}'\nexit {}\n",
        err.display(),
        out.display(),
        cap.exit
    );
    std::fs::write(&script, body).expect("script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// Replay `name` through the runner, resuming `conversation` if given.
async fn replay(name: &str, conversation: Option<&str>) -> (RunResult, Vec<RunEvent>) {
    let dir = captures();
    let cap = read_capture(&dir, name);
    let tmp = tempfile::tempdir().expect("tmp");
    let req = TurnRequest {
        prompt: "replay".into(),
        conversation: conversation.map(|c| ConversationId::parse(c).expect("id")),
        ..TurnRequest::default()
    };
    let agy = replay_script(tmp.path(), &cap);
    common::run_stand_in(agy, tmp.path().join("conversations"), req).await
}

/// (name, ok, summary) of each tool result event.
fn tool_results(events: &[RunEvent]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::ToolResult {
                name, ok, summary, ..
            }) => Some((name.clone(), *ok, summary.clone())),
            _ => None,
        })
        .collect()
}

fn tool_calls(events: &[RunEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::ToolCall {
                name, arguments, ..
            }) => Some((name.clone(), arguments.clone())),
            _ => None,
        })
        .collect()
}

/// The sum of the step updates' usage, checkpoints included.
fn step_usage(cap: &Capture) -> Usage {
    let mut sum = Usage::default();
    for line in parsed(cap) {
        if let Line::StepUpdate(u) = line {
            if let Some(usage) = u.usage {
                sum += &usage;
            }
        }
    }
    sum
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn every_line_is_understood_and_round_trips_byte_for_byte() {
    let dir = captures();
    for name in more_files(&dir) {
        let cap = read_capture(&dir, &name);
        assert!(!cap.lines.is_empty(), "{name}: no lines");
        for line in &cap.lines {
            let parsed = Line::parse(line);
            assert!(
                !matches!(parsed, Line::NotJson(_)),
                "{name}: not JSON: {line}"
            );
            if matches!(parsed, Line::UnknownEvent { .. }) {
                continue;
            }
            assert_eq!(parsed.to_json(), *line, "{name}");
        }
    }
}

/// `--conversation` with an id agy does not have: agy warns, starts a new
/// conversation, and the turn follows the new one and says so once.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_of_an_unknown_id_rebinds_and_says_so_once() {
    const ASKED: &str = "00000000-0000-4000-8000-000000000000";
    let (result, events) = replay("crt-1.2.7-win-resume-unknown-id.jsonl", Some(ASKED)).await;
    const NEW: &str = "6df6342c-b2eb-4740-a447-bc7e5c6d4f81";
    assert_eq!(result.conversation_id.as_deref(), Some(NEW));
    assert_eq!(result.lost_conversation.as_deref(), Some(ASKED));
    assert_eq!(result.bind_method, Some(BindMethod::StreamJson));
    let replaced: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ConversationReplaced {
                requested,
                conversation_id,
            } => Some((requested.as_str(), conversation_id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(replaced, [(ASKED, NEW)]);
    assert!(result.failure.is_none(), "{:?}", result.failure);
    assert_eq!(text_of(&events), "hi\n");
    let json = serde_json::to_value(&result).expect("json");
    assert_eq!(json["lost_conversation"], ASKED);
}

/// The same without agy's stderr line (1.1.9's publisher kept none): the
/// init line alone tells; usage is the answer call's, not the checkpoint's.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_fallback_is_caught_from_the_init_line_alone() {
    const ASKED: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let (result, _) = replay("jdiaz-1.1.9-resume-fallback.ndjson", Some(ASKED)).await;
    assert_eq!(
        result.conversation_id.as_deref(),
        Some("dbf4949e-4897-4735-ba30-efa865b105a2")
    );
    assert_eq!(result.lost_conversation.as_deref(), Some(ASKED));
    let usage = result.usage.expect("usage");
    assert_eq!(
        usage.last_call.input_tokens, 14440,
        "not the checkpoint's 99"
    );
    assert_eq!(usage.last_call.cache_read_tokens, 8151);
    // A fresh conversation: the turn's sum is agy's result, exactly.
    assert_eq!(Some(usage.turn), usage.conversation);
}

/// A resumed turn's `result.usage` is the conversation's, not the turn's.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_usage_is_the_turns_own_and_the_cumulative_is_named_so() {
    const ID: &str = "a4425612-2b6c-4e0c-a9b5-e7600418be81";
    let dir = captures();
    let cap = read_capture(&dir, "jdiaz-1.1.9-resume-cumulative.ndjson");
    let (result, events) = replay("jdiaz-1.1.9-resume-cumulative.ndjson", Some(ID)).await;
    assert_eq!(result.conversation_id.as_deref(), Some(ID));
    assert_eq!(result.lost_conversation, None);
    assert!(!events
        .iter()
        .any(|e| matches!(e, RunEvent::ConversationReplaced { .. })));
    let usage = result.usage.expect("usage");
    let cumulative = results(&cap)[0].usage.expect("result usage");
    assert_eq!(usage.turn, step_usage(&cap));
    assert_ne!(usage.turn, cumulative, "the capture's point: they differ");
    assert!(usage.turn.input_tokens < cumulative.input_tokens);
    assert_eq!(usage.conversation, Some(cumulative));
    let json = serde_json::to_value(result.usage).expect("json");
    assert_eq!(
        json["conversation_total"]["input_tokens"],
        cumulative.input_tokens
    );
    assert_eq!(json["turn"]["input_tokens"], usage.turn.input_tokens);
}

/// Two turns in one process: the second result is cumulative, so a turn's
/// own usage is the difference of two results, which equals its steps' sum.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn a_turns_usage_is_the_difference_of_cumulative_results() {
    let dir = captures();
    let cap = read_capture(&dir, "crt-1.2.7-win-loop-two-turns.jsonl");
    let rs = results(&cap);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].conversation_id, rs[1].conversation_id);
    assert_eq!((rs[0].num_turns, rs[1].num_turns), (1, 2));
    let (first, second) = (rs[0].usage.expect("u1"), rs[1].usage.expect("u2"));
    let mut steps_of_second = Usage::default();
    let mut seen_first_result = false;
    for line in parsed(&cap) {
        match line {
            Line::Result(_) => seen_first_result = true,
            Line::StepUpdate(u) if seen_first_result => {
                if let Some(usage) = u.usage {
                    steps_of_second += &usage;
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        second.input_tokens - first.input_tokens,
        steps_of_second.input_tokens
    );
    assert_eq!(
        second.output_tokens - first.output_tokens,
        steps_of_second.output_tokens
    );
}

/// 1.1.x's checkpoint side call is counted but never pi's context.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_usage_is_summed_but_never_the_context() {
    let dir = captures();
    for name in [
        "jdiaz-1.1.9-review-checkpoint.ndjson",
        "jdiaz-1.1.8-adversarial-tools-checkpoint.ndjson",
    ] {
        let cap = read_capture(&dir, name);
        let (result, _) = replay(name, None).await;
        let usage = result.usage.expect("usage");
        let last_answer = parsed(&cap)
            .into_iter()
            .rev()
            .find_map(|l| match l {
                Line::StepUpdate(u) if u.step_type == "agent_response" => u.usage,
                _ => None,
            })
            .expect("an answer call");
        assert_eq!(usage.last_call, last_answer, "{name}");
        assert_eq!(Some(usage.turn), results(&cap)[0].usage, "{name}");
        assert!(
            usage.turn.input_tokens > usage.last_call.input_tokens,
            "{name}"
        );
    }
}

/// Without a database (degraded), the tools still show, from stream-json:
/// find_by_name with its pattern, view_file with its path.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degraded_turns_show_tools_from_stream_json() {
    let (result, events) = replay("jdiaz-1.1.8-adversarial-tools-checkpoint.ndjson", None).await;
    assert!(result.degraded.is_some());
    let calls = tool_calls(&events);
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["find_by_name", "view_file"]);
    assert!(
        calls[0].1.contains("\"Pattern\":\"calc.py\""),
        "{}",
        calls[0].1
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|(_, ok, _)| *ok));
    // Each tool line comes before the answer, in step order.
    let first_text = events
        .iter()
        .position(|e| matches!(e, RunEvent::Agy(Event::Text { .. })))
        .expect("text");
    let last_tool = events
        .iter()
        .rposition(|e| matches!(e, RunEvent::Agy(Event::ToolResult { .. })))
        .expect("tool");
    assert!(last_tool < first_text);
}

/// Denials keep agy's words: write_file and mcp end ERROR with the reason.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_tools_show_agys_reason_and_the_denial_is_named() {
    for (name, tool, words, action) in [
        (
            "jdiaz-1.2.7-denied-write.ndjson",
            "write_to_file",
            "permission check failed for write_file \"",
            "write_file",
        ),
        (
            "crt-1.2.7-win-mcp-denied-headless.jsonl",
            "call_mcp_tool",
            "permission check failed for mcp \"crt_crt/crt_ping\": user denied permission for mcp(crt_crt/crt_ping)",
            "mcp",
        ),
    ] {
        let (result, events) = replay(name, None).await;
        let failed: Vec<_> = tool_results(&events)
            .into_iter()
            .filter(|(_, ok, _)| !ok)
            .collect();
        assert_eq!(failed.len(), 1, "{name}: {failed:?}");
        assert_eq!(failed[0].0, tool, "{name}");
        assert!(failed[0].2.starts_with(words), "{name}: {}", failed[0].2);
        assert!(
            !failed[0].2.contains("Do not attempt"),
            "{name}: advice to the model stays out of the line"
        );
        match result.failure {
            Some(Failure::Denied { actions }) => assert_eq!(actions[0].action, action),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// A pre-tool hook's denial, and an MCP call's output, from stream-json.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_denials_and_mcp_output_keep_their_words() {
    let (result, events) = replay("crt-1.2.7-win-first-turn-mcp-hook.jsonl", None).await;
    assert!(result.failure.is_none(), "{:?}", result.failure);
    let results = tool_results(&events);
    let by = |tool: &str| {
        results
            .iter()
            .find(|(n, _, _)| n == tool)
            .unwrap_or_else(|| panic!("{tool}: {results:?}"))
    };
    assert!(by("call_mcp_tool").1);
    let run = by("run_command");
    assert!(!run.1);
    assert!(
        run.2
            .starts_with("tool call denied by pre-tool hook: CRT intake session"),
        "{}",
        run.2
    );
    assert!(!by("write_to_file").1);
}

/// `/model` as a prompt: agy ran its slash command, no conversation.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_result_is_named_not_a_binding_failure() {
    let (result, _) = replay("jdiaz-1.2.7-command-result-model.ndjson", None).await;
    assert_eq!(result.conversation_id, None);
    match &result.failure {
        Some(f @ Failure::NoConversation { .. }) => {
            let s = f.to_string();
            assert!(s.contains("starts with '/'"), "{s}");
            assert!(!f.retryable());
            assert!(!common::pi_retries(&s), "{s}");
        }
        other => panic!("{other:?}"),
    }
}

/// Killed 9 s in: init and the user's step only, exit 1, no result.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_from_outside_says_it_can_be_resumed() {
    let (result, _) = replay("crt-1.2.7-win-killed.jsonl", None).await;
    assert_eq!(
        result.conversation_id.as_deref(),
        Some("2e4133c8-449b-4de2-982b-a6d6252ed327")
    );
    let f = result.failure.expect("failure");
    assert_eq!(
        f,
        Failure::Stopped {
            how: "exit 1 without a result".into()
        }
    );
    assert!(f.to_string().contains("resume"), "{f}");
    assert!(!f.retryable());
    assert!(!common::pi_retries(&f.to_string()), "{f}");
}

/// An image block on stdin: agy's own sentence, exit 1; the refusal of
/// the bridge's own input, not the user's fault.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_error_is_agys_sentence() {
    let (result, _) = replay("crt-1.2.7-win-input-error-image-block.jsonl", None).await;
    assert_eq!(result.exit_code, Some(1));
    match result.failure {
        Some(Failure::InputRefused { message }) => assert_eq!(
            message,
            "stream input content block type \"image\" is not supported (only \"text\")"
        ),
        other => panic!("{other:?}"),
    }
}

/// 1.1.9's `timeout waiting for response` was its print timeout; on later
/// agy the same words are the model's.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn the_1_1_9_timeout_is_the_print_limit_by_version() {
    let dir = captures();
    let cap = read_capture(&dir, "jdiaz-1.1.9-print-timeout-error.ndjson");
    let result = results(&cap).remove(0);
    let report = |version| AgyReport {
        exit_code: Some(cap.exit),
        result: Some(&result),
        features: AgyFeatures {
            version: Some(version),
            disable_slash_commands: false,
        },
        conversation_began: true,
        ..AgyReport::default()
    };
    let old = failure::classify(&report((1, 1, 9))).expect("failure");
    assert_eq!(old, Failure::PrintTimeout);
    assert!(!old.retryable());
    assert!(!common::pi_retries(&old.to_string()), "{old}");
    let new = failure::classify(&report((1, 2, 17))).expect("failure");
    assert_eq!(new, Failure::ModelTimeout { ran_tools: false });
    assert!(common::pi_retries(&new.to_string()), "{new}");
    assert!(
        new.to_string().contains("switch to another agy model"),
        "{new}"
    );
}

/// agy's hook payloads: camelCase, no event name, tool events with the
/// step index and the full call (docs/agy-format.md, "Hooks").
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn hook_payloads_have_the_documented_shape() {
    let dir = captures();
    let hooks = dir.join("hooks-1.1.7");
    for name in [
        "pre-tool-use.json",
        "post-tool-use.json",
        "pre-invocation.json",
        "post-invocation.json",
        "stop.json",
        "session-start.json",
    ] {
        let text = std::fs::read_to_string(hooks.join(name)).expect("payload");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("{name}: not an object"));
        assert!(obj.contains_key("conversationId"), "{name}");
        assert!(
            !obj.contains_key("event") && !obj.contains_key("hookEventName"),
            "{name}"
        );
        assert!(
            obj.keys().all(|k| !k.contains('_')),
            "{name}: camelCase keys {:?}",
            obj.keys().collect::<Vec<_>>()
        );
        if name.contains("tool-use") {
            assert!(obj["stepIdx"].is_number(), "{name}");
            assert!(obj["toolCall"]["name"].is_string(), "{name}");
            assert!(obj["toolCall"]["args"].is_object(), "{name}");
            // The library's payload reads every field and writes agy's
            // shape back: what the gate reads and fake-agy writes.
            let payload = ToolPayload::parse(&text).expect("a tool payload");
            assert!(payload.extra.is_empty(), "{name}: {:?}", payload.extra);
            assert_eq!(payload.tool_call.name, "run_command", "{name}");
            assert_eq!(payload.step_idx, 16, "{name}");
            assert_eq!(serde_json::to_value(&payload).expect("json"), v, "{name}");
            assert_eq!(
                serde_json::to_string_pretty(&payload).expect("json"),
                text.trim_end(),
                "{name}: agy's field order"
            );
        }
    }
}

/// Every file of the newer captures is read by a test here.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn every_session_capture_is_covered() {
    let dir = captures();
    let source = include_str!("captures_sessions.rs");
    let mut missing: Vec<String> = more_files(&dir)
        .into_iter()
        .filter(|n| !source.contains(n.as_str()))
        .collect();
    for e in std::fs::read_dir(dir.join("hooks-1.1.7"))
        .expect("hooks")
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        if !source.contains(&n) {
            missing.push(format!("hooks-1.1.7/{n}"));
        }
    }
    assert!(missing.is_empty(), "captures no test reads: {missing:?}");
}

/// `--agent` with a name agy does not know (1.1.9): echoed in init, an
/// `unknown` step, and the answer all the same.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_step_and_an_echoed_agent_change_nothing() {
    let (result, events) = replay("jdiaz-1.1.9-agent-fallback-unknown-step.ndjson", None).await;
    assert!(result.failure.is_none(), "{:?}", result.failure);
    assert_eq!(text_of(&events), "Hello! How can I help?\n");
    assert_eq!(result.stream_stats.unknown_fields, 0, "init.agent is known");
    let init = Some(captures())
        .map(|d| read_capture(&d, "jdiaz-1.1.9-agent-fallback-unknown-step.ndjson"))
        .and_then(|c| {
            parsed(&c).into_iter().find_map(|l| match l {
                Line::Init { init, .. } => init.agent,
                _ => None,
            })
        });
    assert_eq!(init.as_deref(), Some("definitely-nonexistent-agent-xyz"));
}
