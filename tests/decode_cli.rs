//! `agy-bridge decode PATH [--json]` end to end: databases of both schemas,
//! corrupt rows, bad inputs, a database held open by a writer, and every
//! recording of the corpus.

use agy_bridge::view::decode;
use agy_corpus::recording::{self, Recording};
use agy_format::schema;
use agy_format::steps::{
    Body, ErrorDetails, InteractionAnswer, McpToolResult, Metadata, PermissionRequest,
    PlannerResponse, RunCommandResult, Step, StepRow, StepStatus, StepType, ToolCall, Usage,
    UserInput,
};
use assert_cmd::Command;
use predicates::prelude::*;
use rusqlite::{params, Connection};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn bin() -> Command {
    let mut cmd = Command::cargo_bin("agy-bridge").expect("binary builds");
    cmd.timeout(Duration::from_secs(60));
    cmd
}

const PROMPT: &str = "List the files and think about it";
const ANSWER: &str = "There are two files:\n- a.rs\n- b.rs";
const THINKING: &str = "The user wants a listing.\nRun ls.";

fn call() -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "run_command".into(),
        arguments: r#"{"CommandLine":"ls","Cwd":"/w"}"#.into(),
    }
}

/// A small conversation: prompt, thinking + answer + call, the tool's step.
fn conversation() -> Vec<Step> {
    let user =
        Step::new(0, StepType::UserInput, StepStatus::Done).with_body(Body::UserInput(UserInput {
            text: PROMPT.into(),
            workspace_uri: Some("file:///w".into()),
        }));
    let checkpoint =
        Step::new(1, StepType::Checkpoint, StepStatus::Done).with_body(Body::Checkpoint {
            title: "Listing files\n\nThe user asked for files.".into(),
        });
    let mut planner = Step::new(2, StepType::PlannerResponse, StepStatus::Done).with_body(
        Body::Planner(PlannerResponse {
            text: ANSWER.into(),
            thinking: THINKING.into(),
            tool_calls: vec![call()],
            stop_reason: Some(2),
            ..Default::default()
        }),
    );
    planner.metadata = Some(Metadata {
        usage: Some(Usage {
            input_tokens: 5_000_000_000,
            output_tokens: 12,
            ..Default::default()
        }),
        ..Default::default()
    });
    let tool = Step::new(3, StepType::RunCommand, StepStatus::Done)
        .with_tool_call(call())
        .with_body(Body::RunCommand(RunCommandResult {
            cwd: Some("/w".into()),
            exit_code: Some(0),
            output: "a.rs\nb.rs\n".into(),
            command: Some("ls".into()),
        }));
    vec![user, checkpoint, planner, tool]
}

fn full_db(path: &Path, rows: &[StepRow]) -> Connection {
    let conn = Connection::open(path).expect("create db");
    schema::create(&conn).expect("schema");
    for r in rows {
        conn.execute(
            "INSERT INTO steps (idx, step_type, status, metadata, error_details, step_payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![r.idx, r.step_type, r.status, r.metadata, r.error_details, r.payload],
        )
        .expect("insert");
    }
    conn
}

fn legacy_db(path: &Path, rows: &[StepRow]) -> Connection {
    let conn = Connection::open(path).expect("create db");
    conn.execute(schema::LEGACY_STEPS_DDL, []).expect("schema");
    for r in rows {
        conn.execute(
            "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
            params![r.idx, r.step_type, r.status, r.payload],
        )
        .expect("insert");
    }
    conn
}

fn rows() -> Vec<StepRow> {
    conversation().iter().map(Step::to_row).collect()
}

fn json_lines(path: &Path) -> Vec<Value> {
    let out = bin()
        .args(["decode", "--json"])
        .arg(path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out)
        .expect("utf-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn text_output(path: &Path) -> String {
    let out = bin()
        .arg("decode")
        .arg(path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).expect("utf-8 output")
}

fn events_of<'a>(line: &'a Value, kind: &str) -> Vec<&'a Value> {
    line["events"]
        .as_array()
        .expect("events array")
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn check_conversation_json(lines: &[Value]) {
    assert_eq!(lines.len(), 4, "{lines:#?}");
    for (i, line) in lines.iter().enumerate() {
        for key in [
            "idx",
            "step_type",
            "step_type_label",
            "status",
            "status_label",
            "events",
            "unknown_fields",
            "error",
        ] {
            assert!(line.get(key).is_some(), "line {i} lacks {key}: {line}");
        }
        assert_eq!(line["idx"], i as i64);
        assert!(line["error"].is_null(), "{line}");
        assert_eq!(line["unknown_fields"], serde_json::json!([]), "{line}");
        assert_eq!(line["status"], 3);
        assert_eq!(line["status_label"], "done");
    }
    // The prompt is user input, never thinking.
    assert_eq!(lines[0]["step_type"], 14);
    assert_eq!(lines[0]["step_type_label"], "user input");
    assert_eq!(
        lines[0]["events"],
        serde_json::json!([{"kind": "user_input", "idx": 0, "text": PROMPT}])
    );
    assert_eq!(
        lines[1]["events"],
        serde_json::json!([{"kind": "title", "idx": 1, "title": "Listing files"}])
    );
    assert_eq!(lines[2]["step_type"], 15);
    assert_eq!(
        lines[2]["events"],
        serde_json::json!([
            {"kind": "thinking", "idx": 2, "text": THINKING},
            {"kind": "text", "idx": 2, "text": ANSWER},
            {"kind": "tool_call", "idx": 2, "id": "call-1", "name": "run_command",
             "arguments": call().arguments},
        ])
    );
    // The tool step's own call (same id) is not repeated; its result follows.
    assert_eq!(lines[3]["step_type"], 21);
    assert!(events_of(&lines[3], "tool_call").is_empty(), "{}", lines[3]);
    let results = events_of(&lines[3], "tool_result");
    assert_eq!(results.len(), 1, "{}", lines[3]);
    assert_eq!(results[0]["name"], "run_command");
    assert_eq!(results[0]["id"], "call-1");
    assert_eq!(results[0]["exit_code"], 0);
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[0]["output"], "a.rs\nb.rs\n");
    // Thinking appears only where agy put it.
    let thinking: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !events_of(l, "thinking").is_empty())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(thinking, vec![2]);
}

fn check_conversation_text(text: &str) {
    assert!(
        text.contains("#0 user input [14] done\n  user: List the files"),
        "{text}"
    );
    assert!(
        text.contains(&format!("\n{ANSWER}\n")),
        "answer verbatim:\n{text}"
    );
    assert!(
        text.contains("  thinking: The user wants a listing.\n  thinking: Run ls.\n"),
        "{text}"
    );
    assert!(
        text.contains("  → run_command ls\n      args: {\"CommandLine\":\"ls\""),
        "{text}"
    );
    assert!(text.contains("  ← run_command: ls exited 0"), "{text}");
    assert!(text.contains("  title: Listing files\n"), "{text}");
    assert!(!text.contains("thinking: List the files"), "{text}");
    assert!(text.contains("== summary ==\nsteps: 4\n"), "{text}");
    assert!(text.contains("  14 user input: 1\n"), "{text}");
    assert!(text.contains("  15 planner response: 1\n"), "{text}");
    assert!(text.contains("decode errors: 0\n"), "{text}");
    assert!(text.contains("unknown fields: none\n"), "{text}");
}

#[test]
fn decodes_a_full_schema_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conv.db");
    drop(full_db(&path, &rows()));
    check_conversation_json(&json_lines(&path));
    check_conversation_text(&text_output(&path));
}

#[test]
fn decodes_a_legacy_four_column_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("legacy.db");
    drop(legacy_db(&path, &rows()));
    check_conversation_json(&json_lines(&path));
    check_conversation_text(&text_output(&path));
}

#[test]
fn a_corrupt_payload_is_an_error_on_that_step_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let mut rows = rows();
    rows.insert(
        2,
        StepRow {
            idx: 7,
            step_type: 15,
            status: 3,
            // 20 (len) claiming 127 bytes that are not there.
            payload: Some(vec![0xa2, 0x01, 0x7f, b'x']),
            ..StepRow::default()
        },
    );
    // A side column that does not parse is reported the same way.
    rows.push(StepRow {
        idx: 9,
        step_type: 15,
        status: 3,
        payload: Step::new(9, StepType::PlannerResponse, StepStatus::Done)
            .with_body(Body::Planner(PlannerResponse {
                text: "still here".into(),
                ..Default::default()
            }))
            .to_row()
            .payload,
        metadata: Some(vec![0x0b]),
        error_details: None,
        ..StepRow::default()
    });
    drop(full_db(&path, &rows));

    let lines = json_lines(&path);
    assert_eq!(lines.len(), 6);
    let by_idx = |i: i64| {
        lines
            .iter()
            .find(|l| l["idx"] == i)
            .unwrap_or_else(|| panic!("no idx {i}"))
    };
    let bad = by_idx(7);
    let message = bad["error"].as_str().expect("error string on the bad step");
    assert!(message.contains("step_payload"), "{message}");
    assert_eq!(
        events_of(bad, "decode_error").len(),
        1,
        "decode error event: {bad}"
    );
    let side = by_idx(9);
    assert!(
        side["error"].as_str().unwrap_or("").contains("metadata"),
        "{side}"
    );
    assert_eq!(events_of(side, "text")[0]["text"], "still here");
    // Everything else decodes as before.
    let good: Vec<Value> = lines
        .iter()
        .filter(|l| l["idx"] != 7 && l["idx"] != 9)
        .cloned()
        .collect();
    check_conversation_json(&good);

    let text = text_output(&path);
    assert!(text.contains("decode errors: 2 (idx 7, 9)"), "{text}");
    assert!(text.contains("  decode error: step_payload: "), "{text}");
    assert!(text.contains(&format!("\n{ANSWER}\n")), "{text}");
}

#[test]
fn unknown_fields_and_types_are_reported_with_wire_types() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("unknown.db");
    let mut e = agy_format::wire::Encoder::new();
    e.varint(1, 15).varint(4, 3);
    e.message(20, |m| {
        m.string(1, "known text").fixed32(99, 7);
    });
    e.fixed64(777, 1);
    let rows = vec![
        StepRow {
            idx: 0,
            step_type: 15,
            status: 3,
            payload: Some(e.finish()),
            error_details: Some({
                let mut d = agy_format::wire::Encoder::new();
                d.string(1, "boom").varint(9, 1);
                d.finish()
            }),
            ..StepRow::default()
        },
        StepRow {
            idx: 1,
            step_type: 4242,
            status: 77,
            payload: None,
            ..StepRow::default()
        },
    ];
    drop(full_db(&path, &rows));
    let lines = json_lines(&path);
    assert_eq!(
        lines[0]["unknown_fields"],
        serde_json::json!([
            {"path": "20.99", "wire_type": "i32"},
            {"path": "777", "wire_type": "i64"},
            {"path": "error_details.9", "wire_type": "varint"},
        ])
    );
    assert_eq!(events_of(&lines[0], "text")[0]["text"], "known text");
    assert_eq!(events_of(&lines[0], "error")[0]["message"], "boom");
    assert_eq!(lines[1]["step_type"], 4242);
    assert_eq!(lines[1]["step_type_label"], "unknown");
    assert_eq!(lines[1]["status"], 77);
    assert_eq!(
        lines[1]["events"],
        serde_json::json!([{"kind": "unknown", "idx": 1, "step_type": 4242}])
    );
    let text = text_output(&path);
    assert!(
        text.contains("  20.99 i32: 1\n  777 i64: 1\n  error_details.9 varint: 1\n"),
        "{text}"
    );
    assert!(text.contains("  4242 unknown: 1\n"), "{text}");
    assert!(text.contains("unknown step type 4242"), "{text}");
}

#[test]
fn error_steps_show_their_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("err.db");
    let mut step = Step::new(0, StepType::ErrorMessage, StepStatus::Done);
    step.errors.push(ErrorDetails {
        message: "quota exhausted".into(),
        ..Default::default()
    });
    drop(full_db(&path, &[step.to_row()]));
    let lines = json_lines(&path);
    assert_eq!(
        lines[0]["events"],
        serde_json::json!([{"kind": "error", "idx": 0, "message": "quota exhausted"}])
    );
    assert!(text_output(&path).contains("  error: quota exhausted\n"));
}

fn assert_clean_failure(path: &Path, expect: &str) {
    let out = bin().arg("decode").arg(path).assert().failure();
    let output = out.get_output();
    assert!(output.stdout.is_empty(), "nothing on stdout");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stderr.starts_with("agy-bridge: error: "), "{stderr:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.contains(expect),
        "{stderr:?} should mention {expect:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr:?}");
    // --json fails the same way.
    bin()
        .args(["decode", "--json"])
        .arg(path)
        .assert()
        .failure()
        .stderr(predicate::str::starts_with("agy-bridge: error: "));
}

#[test]
fn missing_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nope.db");
    assert_clean_failure(&path, "no such file");
    assert!(!path.exists(), "decode must not create the database");
}

#[test]
fn garbage_files_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("garbage.txt");
    std::fs::write(&text, "this is not a database\n").expect("write");
    assert_clean_failure(
        &text,
        "neither a SQLite database nor an agy-bridge recording",
    );

    let binary = dir.path().join("garbage.bin");
    std::fs::write(&binary, [0xff, 0x00, 0x13, 0x37, 0x80, 0x81]).expect("write");
    assert_clean_failure(
        &binary,
        "neither a SQLite database nor an agy-bridge recording",
    );

    let json = dir.path().join("other.jsonl");
    std::fs::write(&json, "{\"kind\":\"something\"}\n").expect("write");
    assert_clean_failure(
        &json,
        "neither a SQLite database nor an agy-bridge recording",
    );

    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").expect("write");
    assert_clean_failure(
        &empty,
        "neither a SQLite database nor an agy-bridge recording",
    );

    assert_clean_failure(dir.path(), "not a regular file");
}

#[test]
fn corrupt_databases_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The SQLite magic followed by garbage.
    let corrupt = dir.path().join("corrupt.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..8192u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
    std::fs::write(&corrupt, &bytes).expect("write");
    assert_clean_failure(&corrupt, "not a readable conversation database");

    // A real database from someone else: no steps table.
    let other = dir.path().join("other.db");
    Connection::open(&other)
        .and_then(|c| c.execute("CREATE TABLE t (a)", []))
        .expect("db");
    assert_clean_failure(&other, "no `steps` table");

    // A truncated copy of a real conversation database.
    let good = dir.path().join("good.db");
    drop(full_db(&good, &rows()));
    let full = std::fs::read(&good).expect("read");
    let truncated = dir.path().join("truncated.db");
    std::fs::write(&truncated, &full[..full.len().min(4096 + 100)]).expect("write");
    bin()
        .arg("decode")
        .arg(&truncated)
        .assert()
        .failure()
        .stderr(predicate::str::starts_with("agy-bridge: error: "));
}

fn wal_files(db: &Path) -> (PathBuf, PathBuf) {
    let name = db.file_name().expect("name").to_string_lossy().into_owned();
    (
        db.with_file_name(format!("{name}-wal")),
        db.with_file_name(format!("{name}-shm")),
    )
}

#[test]
fn decodes_a_database_a_writer_holds_open_without_disturbing_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("live.db");
    let writer = Connection::open(&path).expect("open");
    let mode: String = writer
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    // agy leaves checkpointing to SQLite's default; make sure nothing here
    // checkpoints behind the test's back.
    writer
        .pragma_update(None, "wal_autocheckpoint", 0)
        .expect("no autocheckpoint");
    schema::create(&writer).expect("schema");
    for r in rows() {
        writer
            .execute(
                "INSERT INTO steps (idx, step_type, status, metadata, step_payload) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.idx, r.step_type, r.status, r.metadata, r.payload],
            )
            .expect("insert");
    }
    // An open write transaction with an uncommitted step, as while agy is
    // generating.
    writer.execute_batch("BEGIN IMMEDIATE").expect("begin");
    let pending = Step::new(4, StepType::PlannerResponse, StepStatus::Generating)
        .with_body(Body::Planner(PlannerResponse {
            text: "UNCOMMITTED".into(),
            ..Default::default()
        }))
        .to_row();
    writer
        .execute(
            "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
            params![
                pending.idx,
                pending.step_type,
                pending.status,
                pending.payload
            ],
        )
        .expect("insert pending");

    let (wal, shm) = wal_files(&path);
    let wal_before = std::fs::metadata(&wal).expect("wal exists").len();
    let db_before = std::fs::metadata(&path).expect("db").len();
    assert!(wal_before > 0, "the committed rows live in the WAL");

    let started = std::time::Instant::now();
    let lines = json_lines(&path);
    check_conversation_json(&lines);
    let text = text_output(&path);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "decode must not wait for the writer"
    );
    assert!(!text.contains("UNCOMMITTED"), "only committed data is read");
    check_conversation_text(&text);

    // Nothing was checkpointed or removed.
    assert_eq!(
        std::fs::metadata(&wal).expect("wal still there").len(),
        wal_before
    );
    assert_eq!(std::fs::metadata(&path).expect("db").len(), db_before);
    assert!(shm.exists(), "-shm still there");

    // The writer was not disturbed: it can still commit.
    writer
        .execute_batch("COMMIT")
        .expect("writer commits after decode");
    let lines = json_lines(&path);
    assert_eq!(lines.len(), 5);
    assert_eq!(events_of(&lines[4], "text")[0]["text"], "UNCOMMITTED");
}

/// Every corpus recording decodes; the JSON text events are the transcript's
/// text, and a successful run's stdout appears verbatim in the readable view.
#[test]
fn every_corpus_recording_decodes_to_its_text() {
    let dir = recording::bundled_dir();
    let names = recording::list(&dir)
        .unwrap_or_else(|e| panic!("cannot list recordings in {}: {e}", dir.display()));
    assert!(
        !names.is_empty(),
        "no recordings in {}: this test needs the corpus",
        dir.display()
    );
    let mut checked_stdout = 0;
    for name in &names {
        let path = dir.join(format!("{name}.jsonl"));
        let rec = Recording::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));

        let lines = json_lines(&path);
        assert!(!lines.is_empty(), "{name}: no steps decoded");
        let json_text: String = lines
            .iter()
            .flat_map(|l| events_of(l, "text"))
            .map(|e| e["text"].as_str().expect("text is a string").to_string())
            .collect();
        let transcript = decode::transcript(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            json_text,
            transcript.text(),
            "{name}: JSON text vs transcript"
        );
        for line in &lines {
            assert!(line["error"].is_null(), "{name}: decode error {line}");
        }

        let text = text_output(&path);
        let stdout = rec.header.stdout.trim();
        if rec.header.exit_code == 0 && !stdout.is_empty() {
            assert!(
                text.contains(stdout),
                "{name}: readable decode lacks stdout {stdout:?}\n--- decode:\n{text}"
            );
            assert!(
                transcript.text().contains(stdout),
                "{name}: transcript lacks stdout"
            );
            checked_stdout += 1;
        }
    }
    assert!(checked_stdout > 0, "no recording with a successful stdout");
}

#[test]
fn no_subcommand_or_unknown_flag_is_a_usage_error() {
    bin().assert().failure().code(2);
    bin()
        .args(["decode", "--bogus", "x"])
        .assert()
        .failure()
        .code(2);
}

/// What real agy writes beyond the basics: a system message, an MCP tool
/// step, a permission request with its answer, a hook's denial.
fn real_agy_steps() -> Vec<StepRow> {
    let note =
        Step::new(0, StepType::SystemMessage, StepStatus::Done).with_body(Body::SystemMessage {
            message: "Subagent finished: 2 files changed".into(),
        });
    let mcp =
        Step::new(1, StepType::McpTool, StepStatus::Done).with_body(Body::McpTool(McpToolResult {
            server: "github".into(),
            call: Some(ToolCall {
                id: "m1".into(),
                name: "create_issue".into(),
                arguments: r#"{"title":"flaky test"}"#.into(),
            }),
            result: Some("created issue #12".into()),
            user_rejected: false,
        }));
    let rm = ToolCall {
        id: "c2".into(),
        name: "run_command".into(),
        arguments: r#"{"CommandLine":"rm -rf build","toolSummary":"rm -rf build"}"#.into(),
    };
    let mut asked = Step::new(2, StepType::RunCommand, StepStatus::Error).with_tool_call(rm);
    asked.permission_request = Some(PermissionRequest {
        action: "command".into(),
        target: "rm -rf build".into(),
        reason: Some("cleanup".into()),
        action_description: None,
    });
    asked.answers = vec![InteractionAnswer::default()];
    asked.errors = vec![ErrorDetails {
        message: "tool call denied by pre-tool hook: not in CI".into(),
        ..Default::default()
    }];
    vec![note.to_row(), mcp.to_row(), asked.to_row()]
}

#[test]
fn text_view_shows_notices_mcp_tools_permissions_and_denials() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("real.db");
    drop(full_db(&path, &real_agy_steps()));
    let text = text_output(&path);
    for needle in [
        "#0 system message [101] done\n  notice: Subagent finished: 2 files changed\n",
        "#1 mcp tool [38] done\n  → mcp:github/create_issue flaky test\n      args: {\"title\":\"flaky test\"}\n  ← mcp:github/create_issue: created issue #12\n",
        "  → run_command rm -rf build\n",
        "  agy asked permission for command rm -rf build: denied (reason: cleanup)\n",
        "  ← run_command: tool call denied by pre-tool hook: not in CI [error]\n",
        "decode errors: 0\nunknown fields: none\n",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let kinds: Vec<String> = json_lines(&path)
        .iter()
        .flat_map(|l| l["events"].as_array().cloned().unwrap_or_default())
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "notice",
            "tool_call",
            "tool_result",
            "tool_call",
            "permission",
            "tool_result",
            "error"
        ]
    );
}
