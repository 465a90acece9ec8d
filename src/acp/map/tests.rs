//! The mapping on events decoded from the corpus's recordings (their final
//! databases through one tracker, as a live turn streams them).

use super::*;
use crate::follow::events::Tracker;
use agy_corpus::recording::{bundled_dir, resolve, Recording};
use agy_format::steps;

/// Every event of recording `name`'s root conversation.
fn events_of(name: &str) -> Vec<Event> {
    let path = resolve(name, &bundled_dir()).expect("recording");
    let rec = Recording::load(&path).expect("load");
    let conn = rec
        .final_database(&rec.header.root_conversation)
        .expect("final db");
    let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
    let mut tracker = Tracker::new();
    rows.iter()
        .flat_map(|row| tracker.observe(&steps::decode(row)))
        .collect()
}

fn mapped(name: &str, cwd: &str) -> Vec<Out> {
    let mut mapper = TurnMapper::new(Path::new(cwd));
    events_of(name)
        .iter()
        .flat_map(|e| mapper.event(e))
        .collect()
}

fn updates(outs: &[Out]) -> Vec<&SessionUpdate> {
    outs.iter()
        .filter_map(|o| match o {
            Out::Update(u) => Some(u),
            _ => None,
        })
        .collect()
}

fn calls(outs: &[Out]) -> Vec<&ToolCall> {
    updates(outs)
        .into_iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn call_updates(outs: &[Out]) -> Vec<&ToolCallUpdate> {
    updates(outs)
        .into_iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn chunk_text(c: &ContentChunk) -> &str {
    match &c.content {
        ContentBlock::Text(t) => &t.text,
        _ => "",
    }
}

/// The concatenated text of every chunk of one kind.
fn said(outs: &[Out], thought: bool) -> String {
    updates(outs)
        .into_iter()
        .filter_map(|u| match (u, thought) {
            (SessionUpdate::AgentThoughtChunk(c), true)
            | (SessionUpdate::AgentMessageChunk(c), false) => Some(chunk_text(c)),
            _ => None,
        })
        .collect()
}

fn content_text(fields: &ToolCallUpdateFields) -> String {
    fields
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn tools_are_calls_with_kind_title_locations_and_results() {
    let outs = mapped("tools", "/home/dev/project");
    let shown = calls(&outs);
    let summary: Vec<(&str, ToolKind, &str)> = shown
        .iter()
        .map(|c| (&*c.tool_call_id.0, c.kind, c.title.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("call-view-1", ToolKind::Read, "view_file src/lib.rs:1-20"),
            ("call-grep-1", ToolKind::Search, "grep_search sum_to"),
            ("call-list-1", ToolKind::Read, "list_dir ."),
            ("call-run-1", ToolKind::Execute, "run_command cargo test"),
            (
                "call-edit-1",
                ToolKind::Edit,
                "replace_file_content src/lib.rs"
            ),
            ("call-run-2", ToolKind::Execute, "run_command ./deploy.sh"),
        ],
    );
    assert!(shown.iter().all(|c| c.status == ToolCallStatus::InProgress));
    let view = shown[0];
    assert_eq!(view.locations.len(), 1);
    assert_eq!(
        view.locations[0].path,
        Path::new("/home/dev/project/src/lib.rs")
    );
    assert_eq!(view.locations[0].line, Some(1));
    assert_eq!(
        view.raw_input
            .as_ref()
            .and_then(|v| v["StartLine"].as_u64()),
        Some(1)
    );

    let ends = call_updates(&outs);
    let status: Vec<(&str, Option<ToolCallStatus>)> = ends
        .iter()
        .map(|u| (&*u.tool_call_id.0, u.fields.status))
        .collect();
    assert_eq!(
        status,
        [
            ("call-view-1", Some(ToolCallStatus::Completed)),
            ("call-grep-1", Some(ToolCallStatus::Completed)),
            ("call-list-1", Some(ToolCallStatus::Completed)),
            ("call-run-1", Some(ToolCallStatus::Failed)),
            ("call-run-2", Some(ToolCallStatus::Failed)),
        ],
        "the edit's end is the session's (it reads the file): {ends:#?}"
    );
    assert!(content_text(&ends[0].fields).contains("pub fn sum_to"));
    assert!(content_text(&ends[3].fields).contains("test result: FAILED"));
    assert_eq!(
        ends[3]
            .fields
            .raw_output
            .as_ref()
            .map(|r| r["summary"].clone()),
        Some(json!("cargo test exited 101"))
    );
    // The failure's reason once, without the tool's own name; agy's error
    // line for the same step is not said again.
    assert_eq!(
        content_text(&ends[4].fields),
        "./deploy.sh: No such file or directory"
    );
    assert!(
        !said(&outs, true).contains("deploy.sh"),
        "{}",
        said(&outs, true)
    );
}

#[test]
fn an_edit_is_snapshotted_before_and_diffed_after() {
    let outs = mapped("tools", "/home/dev/project");
    let lib = PathBuf::from("/home/dev/project/src/lib.rs");
    let before = outs
        .iter()
        .position(|o| o == &Out::Before { path: lib.clone() });
    let edited = outs.iter().position(|o| matches!(o, Out::Edited { call, path, .. } if &*call.0 == "call-edit-1" && path == &lib));
    assert!(
        before.is_some() && edited.is_some() && before < edited,
        "{outs:#?}"
    );
    let Some(Out::Edited { call, summary, .. }) = edited.map(|i| &outs[i]) else {
        unreachable!()
    };
    let diff = Diff::new(&lib, "new\n").old_text(Some("old\n".to_string()));
    let SessionUpdate::ToolCallUpdate(done) = edited_update(call, summary, Some(diff)) else {
        panic!("an update")
    };
    assert_eq!(done.fields.status, Some(ToolCallStatus::Completed));
    let content = done.fields.content.expect("content");
    assert!(
        matches!(&content[0], ToolCallContent::Diff(d) if d.old_text.as_deref() == Some("old\n"))
    );
    assert_eq!(content.len(), 2, "the diff, then agy's summary");
}

#[test]
fn text_and_thinking_are_message_and_thought_chunks_in_order() {
    let outs = mapped("thinking", "/w");
    let events = events_of("thinking");
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            Event::Thinking { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!thinking.is_empty() && !text.is_empty());
    assert_eq!(said(&outs, true), thinking);
    assert_eq!(said(&outs, false), text);
    // The prompt is the client's own: not echoed in a live turn.
    assert!(!updates(&outs)
        .iter()
        .any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))));
}

#[test]
fn a_replay_gives_the_prompt_back_and_reads_no_file() {
    let mut mapper = TurnMapper::replay(Path::new("/home/dev/project"), "c0ffee");
    let outs: Vec<Out> = events_of("tools")
        .iter()
        .flat_map(|e| mapper.event(e))
        .collect();
    let first = updates(&outs).into_iter().find_map(|u| match u {
        SessionUpdate::UserMessageChunk(c) => Some(chunk_text(c).to_string()),
        _ => None,
    });
    assert_eq!(first.as_deref(), Some("Fix the failing test"));
    assert!(!outs
        .iter()
        .any(|o| matches!(o, Out::Before { .. } | Out::Edited { .. })));
    // Without a diff, the edit still ends.
    assert!(call_updates(&outs)
        .iter()
        .any(|u| &*u.tool_call_id.0 == "call-edit-1"
            && u.fields.status == Some(ToolCallStatus::Completed)));
}

#[test]
fn the_title_is_session_info() {
    let outs = mapped("tools", "/w");
    let title = updates(&outs).into_iter().find_map(|u| match u {
        SessionUpdate::SessionInfoUpdate(i) => Some(serde_json::to_value(i).expect("json")),
        _ => None,
    });
    assert_eq!(
        title.map(|t| t["title"].clone()),
        Some(json!("Fixing a failing test"))
    );
}

#[test]
fn a_subagent_is_a_call_its_answer_the_content() {
    let outs = mapped("subagent", "/w");
    let sub = calls(&outs)
        .into_iter()
        .find(|c| c.tool_call_id.0.starts_with("agy-subagent-"))
        .expect("the subagent's call");
    assert!(sub.title.starts_with("subagent"), "{}", sub.title);
    let end = call_updates(&outs)
        .into_iter()
        .find(|u| u.tool_call_id == sub.tool_call_id)
        .expect("its end");
    assert_eq!(end.fields.status, Some(ToolCallStatus::Completed));
    // The answer is the poller's to read from the subagent's own
    // database; the final database alone says it finished.
    assert!(
        content_text(&end.fields).starts_with("subagent researcher"),
        "{:?}",
        end.fields
    );
}

#[test]
fn a_permission_agy_asked_is_a_thought_line() {
    let mut mapper = TurnMapper::new(Path::new("/w"));
    let outs = mapper.event(&Event::Permission {
        idx: 3,
        action: "command".into(),
        target: "rm -rf build".into(),
        reason: None,
        decision: crate::follow::events::PermissionDecision::Denied,
    });
    assert!(
        said(&outs, true).contains("agy asked permission for"),
        "{}",
        said(&outs, true)
    );
}

#[test]
fn the_gates_call_and_the_databases_are_one_call() {
    let mut mapper = TurnMapper::new(Path::new("/home/dev/project"));
    let args = r#"{"CommandLine":"cargo test","Cwd":"/home/dev/project"}"#;
    let (id, outs) = mapper.gate_call("run_command", args);
    assert_eq!(calls(&outs)[0].status, ToolCallStatus::Pending);
    let db = Event::ToolCall {
        idx: 6,
        id: "call-run-1".into(),
        name: "run_command".into(),
        arguments:
            r#"{"CommandLine":"cargo test","Cwd":"/home/dev/project","toolSummary":"cargo test"}"#
                .into(),
    };
    let outs = mapper.event(&db);
    assert!(calls(&outs).is_empty(), "shown once: {outs:#?}");
    assert_eq!(call_updates(&outs)[0].tool_call_id, id);
    let result = Event::ToolResult {
        idx: 7,
        id: "call-run-1".into(),
        name: "run_command".into(),
        status: "done".into(),
        ok: true,
        summary: "ok".into(),
        output: Some("1 passed".into()),
        exit_code: Some(0),
    };
    let outs = mapper.event(&result);
    assert_eq!(
        call_updates(&outs)[0].tool_call_id,
        id,
        "the result ends the gate's call"
    );
    let subject = mapper.permission_subject(&id, "run_command", args);
    assert_eq!(
        subject.fields.title.as_deref(),
        Some("run_command cargo test")
    );
    assert_eq!(subject.fields.kind, Some(ToolKind::Execute));
}

fn result_with(failure: Option<Failure>) -> RunResult {
    let mut r = RunResult::aborted_before_start();
    r.aborted = false;
    r.failure = failure;
    r
}

#[test]
fn stop_reasons_and_failures() {
    let stop = |e: Ending| match e {
        Ending::Stop { reason, .. } => Some(reason),
        Ending::Failed(_) => None,
    };
    assert_eq!(
        stop(ending(&result_with(None), false)),
        Some(StopReason::EndTurn)
    );
    assert_eq!(
        stop(ending(&result_with(None), true)),
        Some(StopReason::Cancelled)
    );
    assert_eq!(
        stop(ending(&result_with(Some(Failure::Aborted)), false)),
        Some(StopReason::Cancelled)
    );
    assert_eq!(
        stop(ending(&result_with(Some(Failure::PrintTimeout)), false)),
        Some(StopReason::MaxTokens)
    );
    let denied = Failure::Denied {
        actions: Vec::new(),
    };
    assert_eq!(
        stop(ending(&result_with(Some(denied)), false)),
        Some(StopReason::Refusal)
    );
    let failed = ending(&result_with(Some(Failure::NotSignedIn)), false);
    let Ending::Failed(f) = failed else {
        panic!("a failure is an error")
    };
    assert_eq!(f.message, Failure::NotSignedIn.to_string());
    assert!(f.data.is_some());
}

#[test]
fn kinds_by_name_and_keys() {
    assert_eq!(tool_kind("read_url_content", "{}"), ToolKind::Fetch);
    assert_eq!(tool_kind("search_web", "{}"), ToolKind::Search);
    assert_eq!(
        tool_kind("write_to_file", r#"{"TargetFile":"a","CodeContent":"b"}"#),
        ToolKind::Edit
    );
    assert_eq!(tool_kind("invoke_subagent", "{}"), ToolKind::Think);
    assert_eq!(
        tool_kind("call_mcp_tool", r#"{"ServerName":"pi","ToolName":"read"}"#),
        ToolKind::Other
    );
}
