//! Recordings in which agy calls one of pi's tools over MCP (type-38 steps;
//! docs/agy-format.md, "MCP"). They live in `recordings/mcp/`, apart from
//! the corpus-wide tests: replaying one needs an MCP server to call (the
//! bridge's, in `agy-bridge stream` with tools), and the type-38 step holds
//! whatever that server answered, which no recording can know.
//!
//! The server's name is passed in ([`corpus`]'s `server`) rather than read
//! from agy-bridge: the name is the bridge's choice (`pi::mcp::SERVER_NAME`,
//! what it registers in agy's MCP config), and this crate must not depend
//! on the bridge (it is only a dev-dependency of it). The test that checks
//! these recordings (`tests/mcp_stream.rs`) passes the bridge's constant, so
//! a renamed server shows up there as recordings that no longer match.
//!
//! One more, [`editor_tool`], calls an ACP editor's server
//! ([`EDITOR_SERVER`]): a name the editor gives, not the bridge, so it is
//! this crate's own, and the recording is one of the corpus
//! ([`crate::corpus`], checked and snapshotted by `tests/corpus.rs`);
//! `tests/acp_sdk.rs` replays it against a server of the test's.

use crate::builder::{call, Builder};
use agy_corpus::recording::{McpCall, Recording};
use serde_json::json;

/// The tool these recordings call (the tests' pi extension registers it).
pub const PROBE_TOOL: &str = "pi_probe";
const PROBE_ANSWER: &str = "pi ran pi_probe for me; its result is in the step above.";

/// Every recording of this module, by name (under `mcp/`), calling the MCP
/// server named `server` (the bridge's `pi::mcp::SERVER_NAME`).
pub fn corpus(server: &str) -> Vec<(&'static str, Recording)> {
    vec![
        ("mcp/pi-tool", pi_tool(server)),
        ("mcp/pi-tools-parallel", parallel(server)),
        ("mcp/pi-tools-sequential", sequential(server)),
    ]
}

/// The planner's `call_mcp_tool` for `tool` on the bridge's server.
fn mcp_call(
    server: &str,
    id: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> agy_format::steps::ToolCall {
    call(
        id,
        "call_mcp_tool",
        json!({"ServerName": server, "ToolName": tool, "Arguments": arguments}),
    )
}

/// `dt_ms` later, agy calls `tool(arguments)`, which becomes step `idx`
/// (calls at the same time go out together).
fn then_call(
    b: &mut Builder,
    server: &str,
    dt_ms: u64,
    idx: i64,
    tool: &str,
    arguments: serde_json::Value,
) {
    b.commit(dt_ms, Vec::new());
    if let Some(c) = b.commits.last_mut() {
        c.mcp_call = Some(McpCall {
            server: server.into(),
            tool: tool.into(),
            arguments,
            idx,
        });
    }
}

fn start(name: &str, description: &str, prompt: &str) -> Builder {
    start_titled(name, description, prompt, (PROBE_ANSWER, "Asking pi"))
}

/// A recording's first turn, with its final answer and agy's title.
fn start_titled(
    name: &str,
    description: &str,
    prompt: &str,
    (answer, title): (&str, &str),
) -> Builder {
    let mut b = Builder::new(name, description, prompt, answer);
    let h = b.header();
    h.agy_version = "1.2.17".into();
    h.version_output = "1.2.17\n".into();
    b.open_turn(0, prompt, title, true);
    b
}

fn pi_tool(server: &str) -> Recording {
    let prompt = "Ask pi for a probe value";
    let mut b = start(
        "mcp/pi-tool",
        "agy calls pi's tool pi_probe over MCP, waits for pi's result (type-38 step 3), then answers.",
        prompt,
    );
    let args = json!({"question": "what is the probe value?"});
    b.planner(
        2,
        &["pi has a tool for this."],
        &[],
        vec![mcp_call(server, "call-probe-1", PROBE_TOOL, args.clone())],
        120,
    );
    then_call(&mut b, server, 40, 3, PROBE_TOOL, args);
    b.planner(4, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}

fn parallel(server: &str) -> Recording {
    let prompt = "Ask pi for two probe values";
    let mut b = start(
        "mcp/pi-tools-parallel",
        "agy calls pi_probe twice in one model response; both calls reach pi as one message.",
        prompt,
    );
    let a = json!({"question": "first"});
    let c = json!({"question": "second"});
    b.planner(
        2,
        &["Two questions for pi."],
        &[],
        vec![
            mcp_call(server, "call-probe-1", PROBE_TOOL, a.clone()),
            mcp_call(server, "call-probe-2", PROBE_TOOL, c.clone()),
        ],
        120,
    );
    then_call(&mut b, server, 40, 3, PROBE_TOOL, a);
    then_call(&mut b, server, 0, 4, PROBE_TOOL, c);
    b.planner(5, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}

fn sequential(server: &str) -> Recording {
    let prompt = "Ask pi twice, the second question after the first answer";
    let mut b = start(
        "mcp/pi-tools-sequential",
        "agy calls pi_probe, waits for its result, then calls it again: two pi messages ending in toolUse, one after the other.",
        prompt,
    );
    let a = json!({"question": "first"});
    let c = json!({"question": "second"});
    b.planner(
        2,
        &["One question first."],
        &[],
        vec![mcp_call(server, "call-probe-1", PROBE_TOOL, a.clone())],
        120,
    );
    then_call(&mut b, server, 40, 3, PROBE_TOOL, a);
    b.planner(
        4,
        &["Now the second."],
        &[],
        vec![mcp_call(server, "call-probe-2", PROBE_TOOL, c.clone())],
        120,
    );
    then_call(&mut b, server, 40, 5, PROBE_TOOL, c);
    b.planner(6, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}

/// The MCP server an ACP editor names in `session/new` for
/// [`editor_tool`].
pub const EDITOR_SERVER: &str = "editor";
/// The tool [`editor_tool`] calls on it.
pub const EDITOR_TOOL: &str = "editor_lookup";
/// The arguments of that call.
pub fn editor_tool_arguments() -> serde_json::Value {
    json!({"symbol": "parse_config", "scope": "workspace"})
}
const EDITOR_ANSWER: &str = "The editor found parse_config; its answer is in the step above.";

/// agy calls the editor's tool once (the editor's MCP server, given to agy
/// by `agy-bridge acp`), waits for its result, then answers.
pub fn editor_tool() -> Recording {
    let prompt = "Ask the editor where parse_config is defined";
    let mut b = start_titled(
        "mcp/editor-tool",
        "agy calls editor_lookup on the ACP editor's MCP server `editor` (call_mcp_tool, then type-38 step 3 with the server's result), then answers.",
        prompt,
        (EDITOR_ANSWER, "Asking the editor"),
    );
    let args = editor_tool_arguments();
    b.planner(
        2,
        &["The editor can look this up."],
        &[],
        vec![mcp_call(
            EDITOR_SERVER,
            "call-editor-1",
            EDITOR_TOOL,
            args.clone(),
        )],
        120,
    );
    then_call(&mut b, EDITOR_SERVER, 40, 3, EDITOR_TOOL, args);
    b.planner(4, &[], &[EDITOR_ANSWER], vec![], 120);
    b.finish()
}
