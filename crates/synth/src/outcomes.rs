//! Recordings in the shape of real agy output: one per case of agy's outcome
//! table (docs/agy-format.md, "Outcomes"), each following a public capture of
//! agy's stream-json, stderr and exit code, which its header names
//! (`provenance.follows`).
//!
//! The values are our own; the shapes are agy's: step indices as real agy
//! numbers them (the prompt at 0; a checkpoint only where a 1.1.x capture
//! shows one), tools as GENERIC (132) steps as agy runs them since 1.1.18
//! (an MCP call as its type-38 step), per-call usage in metadata 9 (what the
//! stream's `usage` reports, a checkpoint's side call included), and the
//! answer text exactly as the `result.response` carries it. They live in
//! `recordings/outcomes/`: some never create a conversation, which the
//! corpus-wide tests (binding, record round trip) cannot take.

use crate::builder::{blob, call, Builder};
use crate::{MODELS_FORMAT_2, WORKSPACE};
use agy_corpus::db::step_write;
mod sessions;
mod v1_3;
use agy_corpus::recording::{Gate, Outcome, Provenance, Recording};
use agy_format::steps::{
    Body, ErrorDetails, GenericTool, Metadata, ModelError, PlannerResponse, RunCommandResult, Step,
    StepStatus, StepType, ToolCall, Usage, UserInput,
};
use agy_format::wire::Encoder;
use serde::Serialize;

const FROM: &str =
    "docs/agy-format.md, \"stream-json\" and \"Outcomes\"; agy 1.2.x schema and field layout";
const PLAYBOOK: &str = "joiomi/playbook-plugin tests/fixtures/agy-1.2.17/";
const MODEL: &str = "gemini-3.8-flash-high";

/// `agy models` stdout of a 1.2/1.3 agy (the progress line is on stderr).
pub const MODELS_1_2: &str = "gemini-3.8-flash-high\tGemini 3.8 Flash (High)\n\
gemini-3.8-flash-medium\tGemini 3.8 Flash (Medium)\n\
gemini-3.8-flash-low\tGemini 3.8 Flash (Low)\n\
gemini-3.1-pro-high\tGemini 3.1 Pro (High)\n\
gemini-3.1-pro-low\tGemini 3.1 Pro (Low)\n\
claude-sonnet-4-6\tClaude Sonnet 4.6 (Thinking)\n\
claude-opus-4-6-thinking\tClaude Opus 4.6 (Thinking)\n\
gpt-oss-120b-medium\tGPT-OSS 120B (Medium)\n";

/// Every recording of this module, by name (under `outcomes/`).
pub fn corpus() -> Vec<(&'static str, Recording)> {
    vec![
        ("outcomes/pong-1.2.17", pong()),
        ("outcomes/tools-1.2.17", tools()),
        ("outcomes/web-1.2.17", web()),
        ("outcomes/denied-1.2.17", denied_1_2_17()),
        ("outcomes/denied-1.1.7", denied_1_1_7()),
        ("outcomes/quota-1.2.17", quota()),
        ("outcomes/print-timeout-1.2.17", print_timeout()),
        ("outcomes/response-timeout-1.2.17", response_timeout()),
        ("outcomes/signed-out-1.1.15", signed_out()),
        ("outcomes/unknown-model-1.2.17", unknown_model_1_2_17()),
        ("outcomes/unknown-model-1.3.1", unknown_model_1_3_1()),
        ("outcomes/model-effort-1.2.17", model_effort()),
        ("outcomes/streaming-1.3.1", streaming()),
        (
            "outcomes/resume-cumulative-1.1.9",
            sessions::resume_cumulative(),
        ),
        (
            "outcomes/resume-unknown-id-1.2.7",
            sessions::resume_unknown_id(),
        ),
        ("outcomes/checkpoint-1.1.9", sessions::checkpoint()),
        ("outcomes/slash-model-1.2.7", sessions::slash_model()),
        ("outcomes/denied-write-1.2.7", sessions::denied_write()),
        (
            "outcomes/denied-write-1.3.1",
            sessions::denied_write_1_3_1(),
        ),
        ("outcomes/mcp-denied-1.2.7", sessions::mcp_denied()),
        ("outcomes/killed-1.2.7", sessions::killed()),
        ("outcomes/denied-1.3.3", v1_3::denied()),
        ("outcomes/no-capacity-1.3.2", v1_3::no_capacity()),
        ("outcomes/input-refused-1.3.3", v1_3::input_refused()),
        ("outcomes/effort-refused-1.3.1", v1_3::effort_refused()),
    ]
}

/// A builder for one of these recordings: agy `version`, following the
/// capture `follows`, answering `answer` (exactly, as `result.response`).
fn start(
    name: &str,
    version: &str,
    follows: &str,
    description: &str,
    prompt: &str,
    answer: &str,
) -> Builder {
    let mut b = Builder::new(name, description, prompt, "");
    let h = b.header();
    h.agy_version = version.into();
    h.version_output = format!("{version}\n");
    h.model = Some(MODEL.into());
    h.models_output = MODELS_1_2.into();
    h.stdout = answer.into();
    h.provenance = Provenance::Synthesized {
        from: FROM.into(),
        follows: Some(follows.into()),
    };
    b
}

/// A run that ended in error after it created its conversation.
fn fail(b: &mut Builder, exit_code: i32, stderr: String, error: &str) {
    let h = b.header();
    h.exit_code = exit_code;
    h.stderr = stderr;
    h.outcome = Some(Outcome {
        status: "ERROR".into(),
        error: Some(error.into()),
        ..Outcome::default()
    });
}

/// A run agy refused before it created a conversation: no commits.
fn refuse(b: &mut Builder, stderr: String, error: &str) {
    fail(b, 1, stderr, error);
    if let Some(o) = b.header().outcome.as_mut() {
        o.before_conversation = true;
    }
}

/// The first commit: the conversation's rows and the prompt at step 0.
fn prompt_step(b: &mut Builder, prompt: &str) {
    let root = b.root();
    let mut writes = b.conversation_rows(&root, None);
    let mut user =
        Step::new(0, StepType::UserInput, StepStatus::Done).with_body(Body::UserInput(UserInput {
            text: prompt.into(),
            workspace_uri: Some(format!("file://{}", WORKSPACE)),
        }));
    user.metadata = Some(b.meta(0, 4));
    writes.push(step_write(&user));
    b.commit(120, writes);
}

/// One model call's tokens: (input, output, thinking).
type Tokens = (u64, u64, u64);

/// The usage stats (metadata 9) of one model call.
fn usage(tokens: Tokens) -> Usage {
    let (input, output, thinking) = tokens;
    Usage {
        model: 1026,
        input_tokens: input,
        output_tokens: output,
        thinking_tokens: thinking,
        response_tokens: output - thinking,
        ..Usage::default()
    }
}

/// One model call at step `idx`, taking `ms`: an empty placeholder with a
/// first thought, `text` growing one piece per commit (the last piece
/// arrives with DONE), then DONE with the `calls` it requests and its usage.
fn model_call(
    b: &mut Builder,
    idx: i64,
    text: &[&str],
    calls: Vec<ToolCall>,
    tokens: Tokens,
    ms: u64,
) {
    model_call_with(b, idx, text, calls, usage(tokens), ms);
}

/// [`model_call`] with the whole usage message (cache reads too).
fn model_call_with(
    b: &mut Builder,
    idx: i64,
    text: &[&str],
    calls: Vec<ToolCall>,
    stats: Usage,
    ms: u64,
) {
    let mut p = PlannerResponse {
        thinking: "Working out what the user needs.".into(),
        ..PlannerResponse::default()
    };
    let pieces = text.len().max(1) as u64;
    let gap = ms / (pieces + 1);
    let growing = text.len().saturating_sub(1);
    let step = b.planner_step(idx, StepStatus::Generating, p.clone());
    b.step(gap, step);
    for piece in &text[..growing] {
        p.text.push_str(piece);
        let step = b.planner_step(idx, StepStatus::Generating, p.clone());
        b.step(gap, step);
    }
    if let Some(last) = text.last() {
        p.text.push_str(last);
    }
    p.tool_calls = calls;
    p.stop_reason = Some(2);
    let mut done = b.planner_step(idx, StepStatus::Done, p);
    if let Some(m) = done.metadata.as_mut() {
        m.usage = Some(stats);
    }
    b.step(gap, done);
}

/// A GENERIC (132) tool step for `call`: RUNNING, then DONE after `ms` with
/// the call's arguments and `result`.
fn generic_tool(b: &mut Builder, idx: i64, call: ToolCall, result: Option<&str>, ms: u64) {
    let args = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect();
    let body = Body::Generic(GenericTool {
        args,
        result: result.map(str::to_string),
    });
    b.tool(
        idx,
        StepType::GenericTool,
        call,
        Some(body),
        StepStatus::Done,
        ms,
    );
}

/// How agy ends a tool step it auto-denied: the step's status, the error
/// text stream-json shows for it when the row holds none, and the body the
/// ended row carries (agy 1.3.1's records the call's arguments).
struct Denial<'a> {
    status: StepStatus,
    stream_error: Option<&'a str>,
    body: Option<Body>,
}

/// agy asking for `kind` permission on `target` for the tool step `idx`
/// (gate `permission`), then, on the denied path, the step ending without
/// output as `denial` says (gate `denied`).
fn ask_then_deny(
    b: &mut Builder,
    idx: i64,
    step_type: StepType,
    call: &ToolCall,
    (kind, target): (&str, &str),
    denial: Denial,
) {
    let mut waiting = Step::new(idx, step_type, StepStatus::Waiting).with_tool_call(call.clone());
    waiting
        .metadata
        .get_or_insert_with(Metadata::default)
        .source = Some(2);
    let mut write = step_write(&waiting);
    let mut perm = Encoder::new();
    perm.message(2, |r| {
        r.message(1, |i| {
            i.string(1, kind).string(2, target);
        });
    });
    write
        .values
        .insert("permissions".into(), blob(perm.finish()));
    b.commit_gated(60, vec![write], Some(Gate::Permission));
    let mut ended = waiting;
    ended.status = denial.status;
    ended.body = denial.body;
    let mut write = step_write(&ended);
    write.stream_error = denial.stream_error.map(str::to_string);
    b.commit_gated(16, vec![write], Some(Gate::Denied));
}

const PONG: &str = "READY\n";

fn pong() -> Recording {
    let prompt = "Answer with the single word READY.";
    let mut b = start(
        "outcomes/pong-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}success-pong.stdout"),
        "agy 1.2.17, a one-word answer: the whole text comes as one text_delta on the DONE update.",
        prompt,
        PONG,
    );
    prompt_step(&mut b, prompt);
    model_call(
        &mut b,
        1,
        &["READY", "\n"],
        vec![],
        (12_480, 190, 176),
        2_400,
    );
    b.finish()
}

const TOOLS_ANSWER: &str = "NAME=agy-bridge\nSUM=54\n";
const VERSION_FILE: &str = "name = agy-bridge\nversion = 0.1.0\nedition = 2021\n";

fn tools() -> Recording {
    let prompt = "Read /home/dev/project/VERSION, compute 6*9 with python3, and reply NAME=<name> and SUM=<result>.";
    let mut b = start(
        "outcomes/tools-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}success-tools.stdout"),
        "agy 1.2.17 with permissions skipped: view_file, then run_command (GENERIC 132 steps), then the answer.",
        prompt,
        TOOLS_ANSWER,
    );
    prompt_step(&mut b, prompt);
    let view = call(
        "call-view-v",
        "view_file",
        serde_json::json!({"AbsolutePath": "/home/dev/project/VERSION"}),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![view.clone()],
        (12_530, 4_200, 4_150),
        9_000,
    );
    generic_tool(&mut b, 2, view, Some(VERSION_FILE), 40);
    let run = call(
        "call-run-s",
        "run_command",
        serde_json::json!({"CommandLine": "python3 -c 'print(6*9)'"}),
    );
    model_call(&mut b, 3, &[], vec![run.clone()], (18_700, 310, 260), 2_200);
    generic_tool(&mut b, 4, run, Some("54\r\n"), 60);
    model_call(
        &mut b,
        5,
        &["NAME=agy-bridge\n", "SUM=54\n"],
        vec![],
        (19_150, 240, 221),
        2_500,
    );
    b.finish()
}

const WEB_ANSWER: &str = "RUST=1.95.0\n";

fn web() -> Recording {
    let prompt = "Search the web for the current stable Rust release and reply RUST=<version>.";
    let mut b = start(
        "outcomes/web-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}web-tool.stdout"),
        "agy 1.2.17: search_web (no output in its step_update), then the answer.",
        prompt,
        WEB_ANSWER,
    );
    prompt_step(&mut b, prompt);
    let search = call(
        "call-web-r",
        "search_web",
        serde_json::json!({"query": "current stable Rust release"}),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![search.clone()],
        (12_560, 450, 410),
        3_000,
    );
    generic_tool(
        &mut b,
        2,
        search,
        Some("Rust 1.95.0 is the current stable release of the Rust programming language."),
        3_100,
    );
    model_call(&mut b, 3, &[WEB_ANSWER], vec![], (13_880, 255, 247), 3_100);
    b.finish()
}

const LISTING: &str = "total 8\r\ndrwxr-xr-x  2 root root 4096 Jan  1 00:00 .\r\ndrwxr-xr-x 20 root root 4096 Jan  1 00:00 ..\r\n";

/// `ls -la /srv` (the call `run`, step `idx`) auto-denied as print mode
/// denies a command (ACTIVE, then DONE without output), and on the allowed
/// path run: an empty directory's listing.
fn srv_listing_denied(b: &mut Builder, idx: i64, run: ToolCall) {
    ask_then_deny(
        b,
        idx,
        StepType::GenericTool,
        &run,
        ("command", "ls -la /srv"),
        Denial {
            status: StepStatus::Done,
            stream_error: None,
            body: None,
        },
    );
    generic_tool(b, idx, run, Some(LISTING), 30);
}
const DENIED_ANSWER: &str = "/srv is empty.\n";

fn denied_1_2_17() -> Recording {
    let prompt = "List the files in /srv with ls -la.";
    let mut b = start(
        "outcomes/denied-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}denied-command.stdout"),
        "agy 1.2.17 without --dangerously-skip-permissions: run_command is auto-denied (ACTIVE, then DONE without output), the turn ends SUCCESS with an empty response and denied_actions. With the flag the command runs and agy answers.",
        prompt,
        DENIED_ANSWER,
    );
    prompt_step(&mut b, prompt);
    let run = call(
        "call-run-d",
        "run_command",
        serde_json::json!({"CommandLine": "ls -la /srv"}),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![run.clone()],
        (12_590, 1_700, 1_650),
        6_600,
    );
    srv_listing_denied(&mut b, 2, run);
    model_call(
        &mut b,
        3,
        &[DENIED_ANSWER],
        vec![],
        (13_020, 120, 104),
        1_800,
    );
    b.finish()
}

const DU_ANSWER: &str = "/var uses 1.2G.";

fn denied_1_1_7() -> Recording {
    let prompt = "Show the disk usage of /var with du -sh.";
    let mut b = start(
        "outcomes/denied-1.1.7",
        "1.1.7",
        "GobbyAI/gobby README, record 1.1.7 (last stdout line and stderr of a headless run without skip-permissions)",
        "agy 1.1.7 without --dangerously-skip-permissions: run_command is auto-denied; the result is CANCELED and stderr carries the `jetski: ... auto-denied` line, exit 0. With the flag the command runs.",
        prompt,
        &format!("{DU_ANSWER}\n"),
    );
    {
        let h = b.header();
        h.model = Some("gemini-3.6-flash-high".into());
        h.models_output = MODELS_FORMAT_2.into();
    }
    prompt_step(&mut b, prompt);
    let du = call(
        "call-du-1",
        "run_command",
        serde_json::json!({"CommandLine": "du -sh /var"}),
    );
    model_call(&mut b, 1, &[], vec![du.clone()], (15_690, 820, 660), 4_700);
    ask_then_deny(
        &mut b,
        2,
        StepType::RunCommand,
        &du,
        ("command", "du -sh /var"),
        Denial {
            status: StepStatus::Canceled,
            stream_error: None,
            body: None,
        },
    );
    b.tool(
        2,
        StepType::RunCommand,
        du,
        Some(Body::RunCommand(RunCommandResult {
            cwd: Some(WORKSPACE.into()),
            exit_code: Some(0),
            output: "1.2G\t/var\n".into(),
            command: Some("du -sh /var".into()),
        })),
        StepStatus::Done,
        200,
    );
    model_call(&mut b, 3, &[DU_ANSWER], vec![], (16_100, 90, 70), 1_500);
    b.finish()
}

/// agy's `AGY_ERROR:` stderr object, keys in agy's order.
#[derive(Serialize)]
struct AgyError<'a> {
    short_error: String,
    status: &'a str,
    error_code: u32,
    code_kind: &'a str,
    retryable: bool,
    error_id: &'a str,
}

const QUOTA: &str = "Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 12m40s.";

fn quota() -> Recording {
    let prompt = "Audit every module for unsafe code and summarise the findings.";
    let mut b = start(
        "outcomes/quota-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}quota-exhausted.stdout and quota-exhausted.stderr"),
        "agy 1.2.17 hits the quota mid-turn: an error_message step (type 17, field 24), result ERROR with agy's human sentence, exit 3, stderr `error: ...` then `AGY_ERROR: {json}`.",
        prompt,
        "",
    );
    prompt_step(&mut b, prompt);
    let grep = call(
        "call-grep-q",
        "grep_search",
        serde_json::json!({"Query": "unsafe", "SearchPath": WORKSPACE}),
    );
    model_call(
        &mut b,
        1,
        &[],
        vec![grep.clone()],
        (12_700, 900, 850),
        5_000,
    );
    generic_tool(
        &mut b,
        2,
        grep,
        Some("src/wire.rs:12: // no unsafe here\n"),
        80,
    );
    let view = call(
        "call-view-q",
        "view_file",
        serde_json::json!({"AbsolutePath": "/home/dev/project/src/wire.rs"}),
    );
    model_call(
        &mut b,
        3,
        &[],
        vec![view.clone()],
        (14_100, 600, 560),
        3_000,
    );
    generic_tool(&mut b, 4, view, Some("//! Wire format.\n"), 30);
    let short = format!("RESOURCE_EXHAUSTED (code 429): {QUOTA}");
    let err = Step::new(5, StepType::ErrorMessage, StepStatus::Done).with_body(Body::ModelError(
        ModelError {
            summary: Some(short.clone()),
            user_message: Some(QUOTA.into()),
            ..ModelError::default()
        },
    ));
    b.step(1_200, err);
    let agy_error = AgyError {
        short_error: short,
        status: "RESOURCE_EXHAUSTED",
        error_code: 429,
        code_kind: "http",
        retryable: true,
        error_id: "5d0c8a21-7e4b-4f1a-9c3e-2b6f0d9e4a17-5",
    };
    let json = serde_json::to_string(&agy_error).unwrap_or_default();
    fail(
        &mut b,
        3,
        format!("error: {QUOTA}\nAGY_ERROR: {json}\n"),
        QUOTA,
    );
    b.finish()
}

const DESIGN: &str = "# Plugin system\n\nPlugins are loaded from a manifest.\n";

fn print_timeout() -> Recording {
    let prompt = "Write a detailed design document for a plugin system.";
    let mut b = start(
        "outcomes/print-timeout-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}print-timeout.stdout and print-timeout.stderr"),
        "agy 1.2.17 thinking for 24 s: run with --print-timeout 8s it prints the prompt's step_update, then a SUCCESS result with an empty response, the `[agy] print timeout after 8s ...` stderr line, exit 0.",
        prompt,
        DESIGN,
    );
    prompt_step(&mut b, prompt);
    let mut p = PlannerResponse::default();
    for (gap, thought) in [
        (3_000, "Plugins need a manifest. "),
        (4_000, "Loading order matters. "),
        (5_000, "Versioning the API. "),
        (6_000, "Sandboxing is out of scope."),
    ] {
        p.thinking.push_str(thought);
        let s = b.planner_step(1, StepStatus::Generating, p.clone());
        b.step(gap, s);
    }
    p.text = DESIGN.into();
    p.stop_reason = Some(2);
    let mut done = b.planner_step(1, StepStatus::Done, p);
    if let Some(m) = done.metadata.as_mut() {
        m.usage = Some(Usage {
            model: 1026,
            input_tokens: 12_610,
            output_tokens: 9_800,
            thinking_tokens: 9_760,
            response_tokens: 40,
            ..Usage::default()
        });
    }
    b.step(6_000, done);
    b.finish()
}

const RESPONSE_TIMEOUT: &str = "timeout waiting for response";

fn response_timeout() -> Recording {
    let prompt = "Summarise the changelog in three bullet points.";
    let mut b = start(
        "outcomes/response-timeout-1.2.17",
        "1.2.17",
        "docs/agy-format.md, \"Outcomes\": the model's response timed out (exit 1, `Error: timeout waiting for response`; no stream-json capture of it)",
        "agy 1.2.17 gives up on the model's response: the agent_response step ends in ERROR, result ERROR `timeout waiting for response`, exit 1.",
        prompt,
        "",
    );
    prompt_step(&mut b, prompt);
    let mut waiting = b.planner_step(1, StepStatus::Generating, PlannerResponse::default());
    b.step(400, waiting.clone());
    waiting.status = StepStatus::Error;
    waiting.errors.push(ErrorDetails {
        message: RESPONSE_TIMEOUT.into(),
        detail: None,
        stack: None,
    });
    b.step(30_000, waiting);
    fail(
        &mut b,
        1,
        format!("Error: {RESPONSE_TIMEOUT}\n"),
        RESPONSE_TIMEOUT,
    );
    b.finish()
}

fn signed_out() -> Recording {
    let prompt = "Say hello from a fresh home directory.";
    let mut b = start(
        "outcomes/signed-out-1.1.15",
        "1.1.15",
        "GobbyAI/gobby command-captures.json, record \"1.1.15 foreign HOME\" (json mode stdout and stderr)",
        "agy 1.1.15 with nobody signed in: it waits for a sign-in, gives up, and prints a bare ERROR result with conversation_id \"\", exit 1. No conversation is created.",
        prompt,
        "",
    );
    {
        let h = b.header();
        h.model = None;
        h.models_output = MODELS_FORMAT_2.into();
    }
    refuse(
        &mut b,
        "Waiting for authentication (timeout 60s)...\n\
         Or, paste the authorization=<REDACTED> here and press Enter:\n\
         Error: authentication timed out.\n"
            .into(),
        "authentication failed or timed out",
    );
    b.finish()
}

/// agy's model-validation error for `--model model --effort effort`.
fn invalid_model(model: &str, effort: &str, why: &str) -> String {
    format!("invalid model selection (--model \"{model}\" --effort \"{effort}\"): {why}")
}

/// The display names `MODELS_1_2` lists, as agy's error lists them.
fn available_models() -> String {
    let mut out = String::from("Available models:\n");
    for line in MODELS_1_2.lines() {
        if let Some((_, name)) = line.split_once('\t') {
            out.push_str(&format!("  {name}\n"));
        }
    }
    out
}

const NO_SUCH_MODEL: &str = "gemini-9.0-ultra";

fn unknown_model_1_2_17() -> Recording {
    let prompt = "Explain borrow checking with model gemini-9.0-ultra.";
    let mut b = start(
        "outcomes/unknown-model-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}error-model-rejected.stderr"),
        "agy 1.2.17 with an unknown --model: stderr names the error and lists the models' display names; the result carries the error; exit 1, no conversation.",
        prompt,
        "",
    );
    b.header().model = Some(NO_SUCH_MODEL.into());
    let error = invalid_model(
        NO_SUCH_MODEL,
        "",
        &format!(
            "model {NO_SUCH_MODEL} is not recognized as a known model or custom model in settings"
        ),
    );
    refuse(
        &mut b,
        format!("error: {error}\n{}", available_models()),
        &error,
    );
    b.finish()
}

fn unknown_model_1_3_1() -> Recording {
    let prompt = "Explain lifetimes with model gemini-9.0-ultra, agy 1.3.1.";
    let mut b = start(
        "outcomes/unknown-model-1.3.1",
        "1.3.1",
        "docs/agy-format.md, \"Outcomes\": agy 1.3.1 reports an unknown model in the result (no capture file of it)",
        "agy 1.3.1 with an unknown --model: the result's error names it and lists the models; exit 1, no conversation.",
        prompt,
        "",
    );
    b.header().model = Some(NO_SUCH_MODEL.into());
    let error = format!(
        "{}\n{}",
        invalid_model(
            NO_SUCH_MODEL,
            "",
            &format!(
                "model {NO_SUCH_MODEL} is not recognized as a known model or custom model in settings"
            ),
        ),
        available_models().trim_end()
    );
    refuse(&mut b, String::new(), &error);
    b.finish()
}

fn model_effort() -> Recording {
    let prompt = "Plan a refactor with a low-effort medium model.";
    let mut b = start(
        "outcomes/model-effort-1.2.17",
        "1.2.17",
        &format!("{PLAYBOOK}error-model-effort-conflict.stdout and error-model-effort-conflict.stderr"),
        "agy 1.2.17 with --model gemini-3.8-flash-medium --effort low: the result (conversation_id \"\") and stderr name the conflict, exit 1.",
        prompt,
        "",
    );
    let model = "gemini-3.8-flash-medium";
    b.header().model = Some(model.into());
    let error = invalid_model(
        model,
        "low",
        &format!("--model {model} conflicts with --effort=low"),
    );
    refuse(&mut b, format!("error: {error}\n"), &error);
    b.finish()
}

const COLOURS: &[&str] = &["Red\n", "Yellow\n", "Blue\n"];

fn streaming() -> Recording {
    let prompt = "Name three primary colours, one per line.";
    let mut b = start(
        "outcomes/streaming-1.3.1",
        "1.3.1",
        &format!("{PLAYBOOK}success-pong.stdout (shape; agy 1.3.1 streams text_deltas on ACTIVE updates)"),
        "agy 1.3.1: the answer streams as text_deltas on ACTIVE updates while it grows, the last piece on DONE.",
        prompt,
        &COLOURS.concat(),
    );
    prompt_step(&mut b, prompt);
    model_call(&mut b, 1, COLOURS, vec![], (12_500, 230, 215), 2_800);
    b.finish()
}
