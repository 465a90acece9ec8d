//! Outcome recordings of agy 1.1.9 and 1.2.7 beyond one plain turn: a
//! resumed conversation (its result counts every turn), `--conversation`
//! with an id agy does not have, a checkpoint's side call, a slash command,
//! tool denials whose error text only stream-json shows, and a killed run.
//!
//! Each follows one public capture (jdiazromeral/agy-plugin-cc, agy 1.1.9
//! and 1.2.7 on macOS; simv/crt, agy 1.2.7 on Windows), named in its
//! header; what fake-agy derives rather than reads (the `warning:` line of
//! an unknown id, the `/model` answer, the `jetski:` line of a denial, the
//! cumulative result) is its emulation of agy's command line, tested in
//! `fake-agy/tests/stream_json.rs`.

use super::{
    ask_then_deny, generic_tool, model_call, model_call_with, prompt_step, start, usage, Denial,
    Tokens,
};
use crate::builder::{call, Builder};
use crate::{MODELS_FORMAT_2, WORKSPACE};
use agy_corpus::recording::{Outcome, Recording};
use agy_format::steps::{
    Body, GenericTool, McpToolResult, PlannerResponse, Step, StepStatus, StepType, ToolCall, Usage,
    UserInput,
};

const JDIAZ: &str = "jdiazromeral/agy-plugin-cc tests/fixtures/";
const CRT: &str = "simv/crt packages/server/test/providers/fixtures/antigravity/";

/// A user turn's prompt at step `idx` of a conversation that exists already.
fn user_turn(b: &mut Builder, idx: i64, prompt: &str) {
    let mut user = Step::new(idx, StepType::UserInput, StepStatus::Done).with_body(
        Body::UserInput(UserInput {
            text: prompt.into(),
            workspace_uri: Some(format!("file://{WORKSPACE}")),
        }),
    );
    user.metadata = Some(b.meta(idx, 4));
    b.step(120, user);
}

/// A 1.1.x checkpoint at step `idx`, `ms` after the answer: a small side
/// call (it names the conversation: `title`) whose usage agy reports on the
/// checkpoint's step and counts in the result.
fn checkpoint_call(b: &mut Builder, idx: i64, title: &str, tokens: Tokens, ms: u64) {
    let mut step =
        Step::new(idx, StepType::Checkpoint, StepStatus::Done).with_body(Body::Checkpoint {
            title: title.into(),
        });
    let mut meta = b.meta(idx, 2);
    meta.usage = Some(usage(tokens));
    step.metadata = Some(meta);
    b.step(ms, step);
}

/// A step agy 1.1.9's stream calls `unknown` (right after the prompt, in
/// some runs): here an ephemeral message (type 90), a bookkeeping step the
/// stream names no better.
fn bookkeeping(b: &mut Builder, idx: i64) {
    let mut step = Step::new(idx, StepType::Ephemeral, StepStatus::Done);
    step.metadata = Some(b.meta(idx, 2));
    b.step(1, step);
}

/// One earlier 1.1.9 turn from `idx`: prompt, bookkeeping step, answer,
/// checkpoint (four steps, as `resume_fallback`'s capture numbers them).
fn earlier_turn(b: &mut Builder, idx: i64, prompt: &str, answer: &str, tokens: Tokens) {
    if idx == 0 {
        prompt_step(b, prompt);
    } else {
        user_turn(b, idx, prompt);
    }
    bookkeeping(b, idx + 1);
    model_call(b, idx + 2, &[answer], vec![], tokens, 1_800);
    checkpoint_call(b, idx + 3, "Reviewing calc.py", (99, 4, 0), 420);
}

pub(super) const RESUME_ANSWER: &str =
    "The bug is in `calc.py`: `add` returns `a - b` instead of `a + b`.\n";

/// agy 1.1.9 resuming a conversation of two earlier turns (`pre` commits,
/// steps 0 to 7): the prompt at 8, a system message, the answer streamed.
/// Its result counts the whole conversation: the earlier turns' usage
/// (answers and checkpoints), `num_turns` 3, their duration.
pub(super) fn resume_cumulative() -> Recording {
    let prompt = "So where exactly is the bug? One sentence.";
    let mut b = start(
        "outcomes/resume-cumulative-1.1.9",
        "1.1.9",
        &format!("{JDIAZ}resume/2026-08-02-run1.ndjson"),
        "agy 1.1.9 resumed (--conversation) on a conversation with two earlier turns (pre commits, steps 0-7, each with a checkpoint): step_index continues at 8, a system_message step, the answer streamed; result usage, num_turns (3) and duration_seconds are cumulative over the conversation.",
        prompt,
        RESUME_ANSWER,
    );
    {
        let h = b.header();
        h.model = None;
        h.models_output = MODELS_FORMAT_2.into();
    }
    b.pre(true);
    earlier_turn(
        &mut b,
        0,
        "Review the change to calc.py.",
        "The change to `add` looks wrong.\n",
        (9_800, 1_300, 1_100),
    );
    earlier_turn(
        &mut b,
        4,
        "Are you sure?",
        "Yes: `add` now subtracts.\n",
        (10_100, 420, 380),
    );
    b.pre(false);
    // The run's own clock starts at 0, whatever the earlier turns took.
    b.t_ms = 0;
    user_turn(&mut b, 8, prompt);
    let mut note =
        Step::new(9, StepType::SystemMessage, StepStatus::Done).with_body(Body::SystemMessage {
            message: "The conversation was resumed.".into(),
        });
    note.metadata = Some(b.meta(9, 2));
    b.step(30, note);
    let (first, rest) = RESUME_ANSWER.split_at(28);
    let stats = Usage {
        cache_read_tokens: 12_300,
        ..usage((3_200, 450, 240))
    };
    model_call_with(&mut b, 10, &[first, rest], vec![], stats, 1_350);
    b.finish()
}

/// agy 1.2.7 run with `--conversation` and an id it does not have: a plain
/// new conversation (the warning and the new id are fake-agy's, from the
/// command line).
pub(super) fn resume_unknown_id() -> Recording {
    let prompt = "Reply with exactly: fresh";
    let mut b = start(
        "outcomes/resume-unknown-id-1.2.7",
        "1.2.7",
        &format!("{CRT}resume-unknown-id.jsonl"),
        "agy 1.2.7: a one-line answer streamed as text_deltas (ACTIVE, then DONE). Run with --conversation and an id agy does not have: stderr `warning: conversation \"ID\" not found`, init with a new id, steps from 0, exit 0.",
        prompt,
        "fresh\n",
    );
    b.header().model = None;
    prompt_step(&mut b, prompt);
    model_call(&mut b, 1, &["fresh", "\n"], vec![], (11_820, 24, 22), 2_700);
    b.finish()
}

const REVIEW: &str = "{\n  \"findings\": [\n    {\n      \"title\": \"[P1] add subtracts\",\n      \"priority\": 1\n    }\n  ],\n  \"overall_correctness\": \"patch is incorrect\"\n}\n";

/// agy 1.1.9 answering, then writing a checkpoint that carries a small side
/// call's usage; the result's usage is the answer's plus the checkpoint's.
pub(super) fn checkpoint() -> Recording {
    let prompt = "Review the staged change to calc.py and reply with JSON findings.";
    let mut b = start(
        "outcomes/checkpoint-1.1.9",
        "1.1.9",
        &format!("{JDIAZ}stream_events/2026-08-02-run1.ndjson"),
        "agy 1.1.9 (run with --agent agy-review): the answer streamed, then a checkpoint step (type 23) with its own usage (a small side call); result.usage = answer call + checkpoint call.",
        prompt,
        REVIEW,
    );
    {
        let h = b.header();
        h.model = None;
        h.models_output = MODELS_FORMAT_2.into();
    }
    prompt_step(&mut b, prompt);
    let (first, rest) = REVIEW.split_at(40);
    model_call(
        &mut b,
        1,
        &[first, rest],
        vec![],
        (12_100, 1_400, 1_200),
        2_500,
    );
    checkpoint_call(&mut b, 2, "Review of calc.py", (220, 4, 0), 460);
    b.finish()
}

/// agy 1.2.7 given the prompt `/model`: its slash command, no turn.
pub(super) fn slash_model() -> Recording {
    let model = "gemini-3.8-flash-medium";
    let mut b = start(
        "outcomes/slash-model-1.2.7",
        "1.2.7",
        &format!("{JDIAZ}command_result/2026-09-20-run1.ndjson"),
        "agy 1.2.7 with the prompt `/model` (run with --model gemini-3.8-flash-medium): the slash command runs instead of a turn: no init, no database, a command_result event, then a result with conversation_id \"\" and num_turns 0, exit 0. With --disable-slash-commands the prompt would be text.",
        "/model",
        &format!("{model}\tGemini 3.8 Flash (Medium)\n"),
    );
    let h = b.header();
    h.model = Some(model.into());
    h.outcome = Some(Outcome {
        status: "SUCCESS".into(),
        before_conversation: true,
        ..Outcome::default()
    });
    b.finish()
}

/// agy 1.2.7's tool error for a denied permission, as its stream shows it.
fn denial_text(action: &str, target: &str) -> String {
    format!(
        "permission check failed for {action} \"{target}\": user denied permission for {action}({target})\n\
         Do not attempt to circumvent this denial by rephrasing the command, using alternative \
         tools/scripts (e.g. python, sh, curl), or accessing the same target resource. Proceed \
         without performing this action."
    )
}

/// agy 1.2.7 without `--dangerously-skip-permissions`: write_to_file is
/// auto-denied, its step ends in ERROR with the permission error, which
/// only stream-json carries (the row has no error details).
pub(super) fn denied_write() -> Recording {
    denied_write_as(
        "outcomes/denied-write-1.2.7",
        "1.2.7",
        &format!("{JDIAZ}denied_actions/2026-09-20-run1.ndjson"),
        "agy 1.2.7 without --dangerously-skip-permissions: write_to_file is auto-denied: the tool step goes ERROR with tool_info.error (TOOL_ERROR, `permission check failed for write_file ...`: text in stream-json only, the row has none); result SUCCESS, response \"\", denied_actions [write_file/WriteToFile], the jetski line on stderr, exit 0. With the flag the file is written and agy answers.",
        ("Create NOTES.md with a one-line summary of this project.", "NOTES.md"),
        false,
    )
}

/// agy 1.3.1 without `--dangerously-skip-permissions`, as 1.2.7, but the
/// ended row records the call's arguments (a generic body with no result),
/// so the database's own summary is `TargetFile=...`: agy's reason is still
/// only in stream-json, and it must win.
pub(super) fn denied_write_1_3_1() -> Recording {
    denied_write_as(
        "outcomes/denied-write-1.3.1",
        "1.3.1",
        "a held-out agy 1.3.1 capture of a write denied in print mode (issue 50): the tool step's row records its arguments, stream-json carries `permission check failed for write_file ...`",
        "agy 1.3.1 without --dangerously-skip-permissions: write_to_file is auto-denied: the step goes ERROR; its row records the call's arguments (TargetFile=...) and no error text; stream-json's tool_info.error has agy's reason. With the flag the file is written and agy answers.",
        ("Write the answer, 42, to answer.txt.", "answer.txt"),
        true,
    )
}

/// A write of `file` (asked for by `prompt`) auto-denied in print mode, as
/// `version` ends it; `records_args`: the ended row carries the call's
/// arguments.
fn denied_write_as(
    name: &str,
    version: &str,
    follows: &str,
    description: &str,
    (prompt, file): (&str, &str),
    records_args: bool,
) -> Recording {
    let target = format!("{WORKSPACE}/{file}");
    let answer = format!("Wrote {file}.\n");
    let mut b = start(name, version, follows, description, prompt, &answer);
    b.header().model = None;
    prompt_step(&mut b, prompt);
    let write = call(
        "call-write-n",
        "write_to_file",
        serde_json::json!({ "TargetFile": target }),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![write.clone()],
        (18_400, 380, 230),
        1_900,
    );
    let error = denial_text("write_file", &target);
    let body = records_args.then(|| {
        Body::Generic(GenericTool {
            args: vec![("TargetFile".to_string(), target.clone())],
            result: None,
        })
    });
    ask_then_deny(
        &mut b,
        2,
        StepType::GenericTool,
        &write,
        ("write_file", target.as_str()),
        Denial {
            status: StepStatus::Error,
            stream_error: Some(error.as_str()),
            body,
        },
    );
    let created = format!("Created file {file}");
    generic_tool(&mut b, 2, write, Some(&created), 70);
    model_call(
        &mut b,
        3,
        &[answer.as_str()],
        vec![],
        (18_900, 60, 48),
        1_200,
    );
    b.finish()
}

/// The MCP server and tool of [`mcp_denied`].
const SERVER: &str = "notes";
const TOOL: &str = "add_note";

/// agy 1.2.7 without `--dangerously-skip-permissions`: the model reads the
/// MCP tool's schema, calls it, and the call is auto-denied (ERROR, the
/// text in stream-json only).
pub(super) fn mcp_denied() -> Recording {
    let prompt =
        "Call the add_note MCP tool once with the message \"hello\" and report its result.";
    let mut b = start(
        "outcomes/mcp-denied-1.2.7",
        "1.2.7",
        &format!("{CRT}mcp-denied-headless.jsonl"),
        "agy 1.2.7 without --dangerously-skip-permissions: view_file of the MCP tool's schema, then call_mcp_tool (a type-38 step) auto-denied: ERROR with tool_info.error (`permission check failed for mcp \"notes/add_note\"`, stream-json only); result SUCCESS, response \"\", denied_actions [mcp/CallMcpTool], the jetski line on stderr, exit 0. With the flag the call returns and agy answers.",
        prompt,
        "add_note returned: Note saved.\n",
    );
    b.header().model = None;
    prompt_step(&mut b, prompt);
    let schema_path = format!("/home/dev/.gemini/antigravity-cli/mcp/{SERVER}/{TOOL}.json");
    let view = call(
        "call-view-m",
        "view_file",
        serde_json::json!({ "AbsolutePath": schema_path }),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![view.clone()],
        (12_700, 250, 180),
        2_900,
    );
    let schema = r#"{"name":"add_note","description":"Save a note.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}"#;
    generic_tool(&mut b, 2, view, Some(&format!("{schema}\n")), 50);
    let arguments = serde_json::json!({ "message": "hello" });
    let mcp = call(
        "call-mcp-n",
        "call_mcp_tool",
        serde_json::json!({ "Arguments": arguments, "ServerName": SERVER, "ToolName": TOOL }),
    );
    model_call(&mut b, 3, &[], vec![mcp.clone()], (13_250, 220, 160), 2_000);
    let target = format!("{SERVER}/{TOOL}");
    let error = denial_text("mcp", &target);
    ask_then_deny(
        &mut b,
        4,
        StepType::McpTool,
        &mcp,
        ("mcp", target.as_str()),
        Denial {
            status: StepStatus::Error,
            stream_error: Some(error.as_str()),
            body: None,
        },
    );
    let result = Body::McpTool(McpToolResult {
        server: SERVER.into(),
        call: Some(ToolCall {
            id: "call-mcp-n".into(),
            name: TOOL.into(),
            arguments: arguments.to_string(),
        }),
        result: Some("Note saved.".into()),
        user_rejected: false,
    });
    b.tool(
        4,
        StepType::McpTool,
        mcp,
        Some(result),
        StepStatus::Done,
        140,
    );
    model_call(
        &mut b,
        5,
        &["add_note returned: Note saved.\n"],
        vec![],
        (13_600, 40, 30),
        1_400,
    );
    b.finish()
}

/// agy 1.2.7 killed 9 s into a long answer: the prompt's step, the model
/// still thinking, then nothing: no answer, no result, exit 1 (what
/// `taskkill /T /F` gave on Windows).
pub(super) fn killed() -> Recording {
    let prompt = "Write a 400-word essay about herons.";
    let mut b = start(
        "outcomes/killed-1.2.7",
        "1.2.7",
        &format!("{CRT}killed.jsonl"),
        "agy 1.2.7 (run with --dangerously-skip-permissions) killed 9 s into its first turn: init and the user_input step only, the model still thinking; no result, exit 1.",
        prompt,
        "",
    );
    prompt_step(&mut b, prompt);
    let mut p = PlannerResponse::default();
    for (gap, thought) in [
        (1_500, "An essay about herons. "),
        (2_500, "Habitat, hunting, nesting. "),
        (2_500, "Four paragraphs of about 100 words. "),
        (2_500, "Start with the grey heron standing still."),
    ] {
        p.thinking.push_str(thought);
        let step = b.planner_step(1, StepStatus::Generating, p.clone());
        b.step(gap, step);
    }
    let h = b.header();
    h.exit_code = 1;
    h.outcome = Some(Outcome {
        killed: true,
        ..Outcome::default()
    });
    b.finish()
}
