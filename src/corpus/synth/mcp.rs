//! Recordings in which agy calls one of pi's tools over MCP (type-38 steps;
//! docs/agy-format.md, "MCP"). They live in `recordings/mcp/`, apart from
//! the corpus-wide tests: replaying one needs an MCP server to call (the
//! bridge's, in `agy-bridge stream` with tools), and the type-38 step holds
//! whatever that server answered, which no recording can know.

use super::{call, Builder};
use crate::corpus::recording::{McpCall, Recording};
use serde_json::json;

/// The tool these recordings call (the tests' pi extension registers it).
pub const PROBE_TOOL: &str = "pi_probe";
const PROBE_ANSWER: &str = "pi ran pi_probe for me; its result is in the step above.";

/// Every recording of this module, by name (under `mcp/`).
pub fn corpus() -> Vec<(&'static str, Recording)> {
    vec![
        ("mcp/pi-tool", pi_tool()),
        ("mcp/pi-tools-parallel", parallel()),
        ("mcp/pi-tools-sequential", sequential()),
    ]
}

/// The planner's `call_mcp_tool` for `tool` on the bridge's server.
fn mcp_call(id: &str, tool: &str, arguments: serde_json::Value) -> agy_format::steps::ToolCall {
    call(
        id,
        "call_mcp_tool",
        json!({"ServerName": crate::pi::mcp::SERVER_NAME, "ToolName": tool, "Arguments": arguments}),
    )
}

/// `dt_ms` later, agy calls `tool(arguments)`, which becomes step `idx`
/// (calls at the same time go out together).
fn then_call(b: &mut Builder, dt_ms: u64, idx: i64, tool: &str, arguments: serde_json::Value) {
    b.commit(dt_ms, Vec::new());
    if let Some(c) = b.commits.last_mut() {
        c.mcp_call = Some(McpCall {
            server: crate::pi::mcp::SERVER_NAME.into(),
            tool: tool.into(),
            arguments,
            idx,
        });
    }
}

fn start(name: &str, description: &str, prompt: &str) -> Builder {
    let mut b = Builder::new(name, description, prompt, PROBE_ANSWER);
    let h = b.header();
    h.agy_version = "1.2.17".into();
    h.version_output = "1.2.17\n".into();
    b.open_turn(0, prompt, "Asking pi", true);
    b
}

fn pi_tool() -> Recording {
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
        vec![mcp_call("call-probe-1", PROBE_TOOL, args.clone())],
        120,
    );
    then_call(&mut b, 40, 3, PROBE_TOOL, args);
    b.planner(4, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}

fn parallel() -> Recording {
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
            mcp_call("call-probe-1", PROBE_TOOL, a.clone()),
            mcp_call("call-probe-2", PROBE_TOOL, c.clone()),
        ],
        120,
    );
    then_call(&mut b, 40, 3, PROBE_TOOL, a);
    then_call(&mut b, 0, 4, PROBE_TOOL, c);
    b.planner(5, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}

fn sequential() -> Recording {
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
        vec![mcp_call("call-probe-1", PROBE_TOOL, a.clone())],
        120,
    );
    then_call(&mut b, 40, 3, PROBE_TOOL, a);
    b.planner(
        4,
        &["Now the second."],
        &[],
        vec![mcp_call("call-probe-2", PROBE_TOOL, c.clone())],
        120,
    );
    then_call(&mut b, 40, 5, PROBE_TOOL, c);
    b.planner(6, &[], &[PROBE_ANSWER], vec![], 120);
    b.finish()
}
