//! Real agy output, replayed: the judge of everything that reads agy.
//!
//! The captures are published by other projects (docs/agy-format.md,
//! "Sources") and are not copied into this repository: these tests read them
//! from the directory `AGY_CAPTURES_DIR` names (`.ci/run` sets it when the
//! captures are beside the checkout); they are `#[ignore]`d in a plain
//! `cargo test` and fail, naming the variable, when run without it.
//!
//! Three kinds of check: every stream-json line round-trips byte for byte
//! through our types (so fake-agy prints exactly agy's shape); the whole
//! outcome table classifies as docs/agy-format.md, "Outcomes" says, with
//! sentences pi retries exactly when a retry can help; and each capture
//! replayed as agy's own output through the real runner binds on its init
//! line and streams its answer.

mod common;

use agy_bridge::follow::discovery::BindMethod;
use agy_bridge::runner::failure::{self, AgyReport, Failure};
use agy_bridge::runner::{self, RunEvent, TurnRequest};
use agy_format::stream_json::{Line, TurnResult};
use common::{pi_retries, text_of};
use std::path::{Path, PathBuf};

fn captures() -> PathBuf {
    common::captures_dir()
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn read_opt(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_default()
}

/// The `result` line of a capture's stdout.
fn result_of(stdout: &str) -> Option<TurnResult> {
    stdout.lines().find_map(|l| match Line::parse(l) {
        Line::Result(r) => Some(r),
        _ => None,
    })
}

/// One row of the outcome table: a capture, its exit code (from the
/// capture's source), and the failure it must classify as.
struct Case {
    name: &'static str,
    stdout: &'static str,
    stderr: &'static str,
    exit: i32,
    check: fn(Option<Failure>),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "success",
            stdout: "stream-json-1.2.17/success-pong.stdout",
            stderr: "",
            exit: 0,
            check: |f| assert_eq!(f, None),
        },
        Case {
            name: "success with tools",
            stdout: "stream-json-1.2.17/success-tools.stdout",
            stderr: "",
            exit: 0,
            check: |f| assert_eq!(f, None),
        },
        Case {
            name: "web tool",
            stdout: "stream-json-1.2.17/web-tool.stdout",
            stderr: "",
            exit: 0,
            check: |f| assert_eq!(f, None),
        },
        Case {
            name: "tool auto-denied (1.2.17)",
            stdout: "stream-json-1.2.17/denied-command.stdout",
            stderr: "",
            exit: 0,
            check: |f| match f {
                Some(Failure::Denied { actions }) => {
                    assert_eq!(actions.len(), 1);
                    assert_eq!(actions[0].display_name, "RunCommand");
                    assert_eq!(actions[0].action, "command");
                }
                other => panic!("{other:?}"),
            },
        },
        Case {
            name: "tool auto-denied (1.1.7)",
            stdout: "other/1.1.7-noflags.stdout-lastline",
            stderr: "other/1.1.7-noflags.stderr",
            exit: 0,
            check: |f| match f {
                Some(Failure::Denied { actions }) => assert_eq!(actions[0].action, "command"),
                other => panic!("{other:?}"),
            },
        },
        Case {
            name: "quota exhausted",
            stdout: "stream-json-1.2.17/quota-exhausted.stdout",
            stderr: "stream-json-1.2.17/quota-exhausted.stderr",
            exit: 3,
            check: |f| {
                match f {
                Some(Failure::QuotaExceeded { message, .. }) => assert_eq!(
                    message,
                    "Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 34m13s."
                ),
                other => panic!("{other:?}"),
            }
            },
        },
        Case {
            name: "print timeout",
            stdout: "stream-json-1.2.17/print-timeout.stdout",
            stderr: "stream-json-1.2.17/print-timeout.stderr",
            exit: 0,
            check: |f| assert_eq!(f, Some(Failure::PrintTimeout)),
        },
        Case {
            name: "not signed in",
            stdout: "other/1.1.15-foreign-home.stdout",
            stderr: "other/1.1.15-foreign-home.stderr",
            exit: 1,
            check: |f| assert_eq!(f, Some(Failure::NotSignedIn)),
        },
        Case {
            name: "unknown model",
            stdout: "",
            stderr: "stream-json-1.2.17/error-model-rejected.stderr",
            exit: 1,
            check: |f| match f {
                Some(Failure::UnknownModel { model, available }) => {
                    assert_eq!(model, "gemini-9.9-nope");
                    assert_eq!(available.len(), 18, "{available:?}");
                    assert_eq!(available[0], "Gemini 3.8 Flash (High)");
                    assert_eq!(available[17], "GPT-OSS 120B (Medium)");
                }
                other => panic!("{other:?}"),
            },
        },
        Case {
            name: "model/effort conflict",
            stdout: "stream-json-1.2.17/error-model-effort-conflict.stdout",
            stderr: "stream-json-1.2.17/error-model-effort-conflict.stderr",
            exit: 1,
            check: |f| match f {
                Some(Failure::ModelSelection { message }) => assert_eq!(
                    message,
                    "--model gemini-3.8-flash-low conflicts with --effort=high"
                ),
                other => panic!("{other:?}"),
            },
        },
        Case {
            name: "malformed stdin message",
            stdout: "stream-json-1.2.17/error-missing-event.stdout",
            stderr: "",
            exit: 1,
            check: |f| match f {
                Some(Failure::InputRefused { message }) => {
                    assert_eq!(
                        message,
                        "stream input message is missing the \"event\" field"
                    )
                }
                other => panic!("{other:?}"),
            },
        },
    ]
}

/// What the report of a capture looks like to the classifier.
fn classify(dir: &Path, case: &Case) -> Option<Failure> {
    let stdout = if case.stdout.is_empty() {
        String::new()
    } else {
        read(dir, case.stdout)
    };
    let stderr = read_opt(dir, case.stderr);
    let result = result_of(&stdout);
    let ran_tools = stdout.contains("\"step_type\":\"tool\"");
    let answered = result.as_ref().is_some_and(|r| !r.response.is_empty());
    failure::classify(&AgyReport {
        exit_code: Some(case.exit),
        stderr: &stderr,
        result: result.as_ref(),
        ran_tools,
        answered,
        ..AgyReport::default()
    })
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn outcome_table_classifies_as_documented() {
    let dir = captures();
    for case in cases() {
        let failure = classify(&dir, &case);
        eprintln!("{}: {:?}", case.name, failure);
        if let Some(f) = &failure {
            let sentence = f.to_string();
            assert!(
                !sentence.contains("AGY_ERROR") && !sentence.contains('{'),
                "{}: a person is shown machine output: {sentence}",
                case.name
            );
            assert_eq!(
                pi_retries(&sentence),
                f.retryable(),
                "{}: pi's retry disagrees with retryable() for: {sentence}",
                case.name
            );
        }
        (case.check)(failure);
    }
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn failure_sentences_are_plain_and_name_the_way_out() {
    let dir = captures();
    let by_name = |name: &str| {
        let case = cases().into_iter().find(|c| c.name == name).expect("case");
        classify(&dir, &case).expect("a failure").to_string()
    };
    let quota = by_name("quota exhausted");
    assert!(
        quota.starts_with("agy quota exceeded: Individual quota reached."),
        "{quota}"
    );
    assert!(quota.ends_with("Resets in 34m13s."), "{quota}");
    let denied = by_name("tool auto-denied (1.2.17)");
    for needle in [
        "RunCommand",
        "/agy permissions allow",
        "AGY_PERMISSIONS=allow",
    ] {
        assert!(denied.contains(needle), "{needle} not in: {denied}");
    }
    let unknown = by_name("unknown model");
    assert!(
        unknown.contains("gemini-9.9-nope") && unknown.contains("Claude Sonnet 5.5 (High)"),
        "{unknown}"
    );
    let signed_out = by_name("not signed in");
    assert!(!pi_retries(&signed_out), "{signed_out}");
}

#[test]
fn model_timeout_is_retried_only_without_tools() {
    // agy's "timeout waiting for response" (docs/agy-format.md, "Outcomes").
    let result = TurnResult {
        status: "ERROR".into(),
        error: Some("timeout waiting for response".into()),
        ..TurnResult::default()
    };
    for ran_tools in [false, true] {
        let f = failure::classify(&AgyReport {
            exit_code: Some(1),
            result: Some(&result),
            ran_tools,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(f, Failure::ModelTimeout { ran_tools });
        assert_eq!(f.retryable(), !ran_tools);
        assert_eq!(pi_retries(&f.to_string()), !ran_tools, "{f}");
    }
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn every_stream_json_line_round_trips_byte_for_byte() {
    let dir = captures();
    // Byte for byte only where the bytes are agy's own: the 1.1.7 line's
    // publisher replaced its id with a `<CONVERSATION_ID>` placeholder.
    let exact = stream_json_files(&dir);
    let mut files: Vec<(PathBuf, bool)> = exact.into_iter().map(|f| (f, true)).collect();
    files.push((dir.join("other/1.1.7-noflags.stdout-lastline"), false));
    files.push((dir.join("other/1.1.15-foreign-home.stdout"), true));
    for (file, byte_exact) in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for line in text.lines() {
            let parsed = Line::parse(line);
            assert!(
                !matches!(parsed, Line::UnknownEvent { .. } | Line::NotJson(_)),
                "{}: not understood: {line}",
                file.display()
            );
            assert!(
                parsed.unknown_fields().is_empty(),
                "{}: unknown fields {:?}",
                file.display(),
                parsed.unknown_fields()
            );
            if byte_exact && line.contains("\"event\"") {
                assert_eq!(parsed.to_json(), line, "{}", file.display());
            }
        }
    }
}

fn stream_json_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("stream-json-1.2.17"))
        .expect("stream-json dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "stdout"))
        .collect();
    v.sort();
    v
}

/// Every capture file is read by some test; a new capture must get one.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn every_capture_file_is_covered() {
    let dir = captures();
    let mut covered: Vec<String> = Vec::new();
    for c in cases() {
        covered.extend([c.stdout, c.stderr].iter().map(|s| s.to_string()));
    }
    covered.extend(
        [
            // tests/decoder_real.rs and tests/drift.rs
            "other/real-user-input-step.json",
            // tests/models.rs
            "models/signed-out-1.1.20.stderr",
            "models/gobby-1.1.18.stderr",
            "models/gobby-1.1.18.stdout",
            "models/gobby-1.0.10-display.stdout",
            "models/v1.1.24-merged.stdout",
            // this file: the interactive prompt and `agy mcp list`
            "other/permission-prompt-1.1.18.txt",
            "other/mcp-list-1.1.18.stdout",
            "README.md",
        ]
        .map(String::from),
    );
    let mut missing = Vec::new();
    for sub in ["", "stream-json-1.2.17", "models", "other"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let rel = Path::new(sub).join(e.file_name());
            let rel = rel.to_string_lossy().trim_start_matches('/').to_string();
            if e.path().is_file() && !covered.contains(&rel) {
                missing.push(rel);
            }
        }
    }
    assert!(missing.is_empty(), "captures no test reads: {missing:?}");
}

/// The interactive prompt is what print mode cannot show: agy's headless
/// runs deny instead, and our denial sentence names the same way out (an
/// allow rule or skipping permissions) the prompt offers.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn interactive_prompt_offers_what_the_denial_sentence_names() {
    let dir = captures();
    let prompt = read(&dir, "other/permission-prompt-1.1.18.txt");
    assert!(prompt.contains("Requesting permission for:"));
    assert!(prompt.contains("Persist to settings.json"));
    assert!(
        agy_bridge::testing::runner::HOW_TO_ALLOW.contains("print mode cannot ask for permission")
    );
}

/// `agy mcp list` names each server with its transport; the bridge's own
/// MCP server (when it runs) must be listed as agy lists servers.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn mcp_list_has_name_type_status_columns() {
    let dir = captures();
    let list = read(&dir, "other/mcp-list-1.1.18.stdout");
    let header: Vec<&str> = list
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "TYPE", "STATUS", "COMMAND/URL"]);
}

/// A stand-in agy that prints a capture's stdout and stderr and exits with
/// its code: the real bytes through the real runner.
fn replay_script(dir: &Path, tmp: &Path, stdout: &str, stderr: &str, exit: i32) -> PathBuf {
    let script = tmp.join("agy");
    let quote = |p: PathBuf| format!("'{}'", p.display());
    let mut body = String::from("#!/bin/sh\n");
    if !stdout.is_empty() {
        body.push_str(&format!("cat {}\n", quote(dir.join(stdout))));
    }
    if !stderr.is_empty() {
        body.push_str(&format!("cat {} >&2\n", quote(dir.join(stderr))));
    }
    body.push_str(&format!("exit {exit}\n"));
    std::fs::write(&script, body).expect("script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

async fn replay(stdout: &str, stderr: &str, exit: i32) -> (runner::RunResult, Vec<RunEvent>) {
    let dir = captures();
    let tmp = tempfile::tempdir().expect("tmp");
    let req = TurnRequest {
        prompt: "replay".into(),
        ..TurnRequest::default()
    };
    let agy = replay_script(&dir, tmp.path(), stdout, stderr, exit);
    common::run_stand_in(agy, tmp.path().join("conversations"), req).await
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_success_binds_on_init_and_streams_degraded_without_a_database() {
    let (result, events) = replay("stream-json-1.2.17/success-tools.stdout", "", 0).await;
    assert_eq!(
        result.conversation_id.as_deref(),
        Some("1e9ea07f-4f78-4018-9988-7bc8cb67cb64")
    );
    assert_eq!(result.bind_method, Some(BindMethod::StreamJson));
    assert!(result.failure.is_none(), "{:?}", result.failure);
    // No database exists here: the answer comes from stream-json, said once.
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, RunEvent::Degraded { .. }))
            .count(),
        1
    );
    assert_eq!(text_of(&events), "CODE=HERON-5518\nCMD=42\n");
    let usage = result.usage.expect("usage");
    assert_eq!(usage.last_call.input_tokens, 19280);
    assert_eq!(usage.last_call.output_tokens, 261);
    assert_eq!(usage.turn.total_tokens, 57398);
    assert_eq!(result.stream_stats.unknown_fields, 0);
    assert_eq!(result.stream_stats.unknown_events, 0);
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_quota_replay_fails_with_the_human_sentence() {
    let (result, _) = replay(
        "stream-json-1.2.17/quota-exhausted.stdout",
        "stream-json-1.2.17/quota-exhausted.stderr",
        3,
    )
    .await;
    let f = result.failure.expect("failure");
    assert!(matches!(f, Failure::QuotaExceeded { .. }), "{f:?}");
    assert!(!f.to_string().contains("AGY_ERROR"));
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_conflict_replay_fails_before_any_conversation() {
    let (result, _) = replay(
        "stream-json-1.2.17/error-model-effort-conflict.stdout",
        "stream-json-1.2.17/error-model-effort-conflict.stderr",
        1,
    )
    .await;
    assert_eq!(result.conversation_id, None);
    assert!(
        matches!(result.failure, Some(Failure::ModelSelection { .. })),
        "{:?}",
        result.failure
    );
}

/// The stdin lines real agy read (the publisher's `# stdin:` headers) are
/// what the bridge writes and fake-agy reads: a string turn is written byte
/// for byte as agy got it, and a turn of text blocks reads as its text.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn stdin_turns_are_written_and_read_as_real_agy_got_them() {
    use agy_format::stream_input::{read_user_line, user_line};
    let dir = captures();
    let capture = read(&dir, "stream-json-more/crt-1.2.7-win-loop-two-turns.jsonl");
    let stdin: Vec<&str> = capture
        .lines()
        .filter_map(|l| l.strip_prefix("# stdin: "))
        .collect();
    assert_eq!(stdin.len(), 2, "{capture}");
    let first = read_user_line(stdin[0]).expect("a string turn");
    assert_eq!(
        first,
        "My favourite colour is teal. Reply with exactly: noted"
    );
    assert_eq!(user_line(&first), format!("{}\n", stdin[0]));
    assert_eq!(
        read_user_line(stdin[1]).as_deref(),
        Ok("What is my favourite colour? One word.")
    );
    let command = capture
        .lines()
        .find_map(|l| l.strip_prefix("# command: "))
        .expect("the command line");
    assert!(
        command.ends_with("--output-format stream-json --input-format stream-json --print \"\""),
        "{command}"
    );
}
