//! pi's tools for agy: agy calls a tool of pi's over MCP, pi runs it as it
//! runs any model's tool call, and the result goes back to agy, which waits.
//!
//! For one `agy-bridge stream` turn with tools in its request, `ToolBridge`
//! serves them (`server`, over `http`) on loopback and writes the
//! private `<dir>/.agents/mcp_config.json` that agy reads for each
//! `--add-dir` directory (docs/agy-format.md, "MCP"); `park` holds each
//! call until pi answers it; `relay` is the pi side: it ends the current
//! assistant message with the calls as pi `toolCall`s (stop reason
//! `toolUse`), waits for the extension's `tool_result` lines and then
//! streams the rest of agy's turn as a new message. Everything here lives as
//! long as the turn: dropping the `ToolBridge` closes the port, removes the
//! directory and answers every call still waiting.

pub(crate) mod http;
pub(crate) mod park;
pub(crate) mod relay;
pub(crate) mod server;

use crate::pi::provider::PiTool;
pub(crate) use park::{ToolCall, ToolOutcome};

use crate::state::tmp::PrivateDir;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The MCP server name agy sees (its calls show as `mcp:pi/TOOL`).
pub(crate) const SERVER_NAME: &str = "pi";

/// pi's tools agy does not get: agy has its own file, shell and search
/// tools, and AskAntigravity would have agy delegate to itself.
pub const NATIVE_TOOLS: &[&str] = &[
    "read",
    "bash",
    "edit",
    "write",
    "grep",
    "find",
    "ls",
    "AskAntigravity",
];

/// `AGY_PI_TOOLS=off` (or `0`, `false`, `no`) offers agy none of pi's
/// tools ([`crate::settings::Settings::pi_tools`] is what it says).
pub const ENV_SWITCH: &str = crate::settings::vars::PI_TOOLS_ENV;

/// The tools agy is offered: pi's, minus those agy has natively, minus
/// duplicates and nameless entries.
pub(crate) fn offered_tools(tools: &[PiTool]) -> Vec<PiTool> {
    let mut out: Vec<PiTool> = Vec::new();
    for t in tools {
        let name = t.name.trim();
        if name.is_empty() || NATIVE_TOOLS.contains(&name) || out.iter().any(|o| o.name == name) {
            continue;
        }
        out.push(t.clone());
    }
    out
}

/// Whether an agy tool event is a call agy made through the bridge (its
/// type-38 step `mcp:pi/TOOL`, or the planner's `call_mcp_tool` naming the
/// server): pi shows those as its own tool calls already.
pub(crate) fn is_bridge_call(name: &str, arguments: &str) -> bool {
    if let Some(rest) = name.strip_prefix("mcp:") {
        return rest.split('/').next() == Some(SERVER_NAME);
    }
    name == "call_mcp_tool"
        && serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| {
                v.get("ServerName")
                    .and_then(Value::as_str)
                    .map(|s| s == SERVER_NAME)
            })
            .unwrap_or(false)
}

/// A private directory (see [`crate::runner::mcp_config`]) holding
/// `.agents/mcp_config.json` that names the server at `url`.
pub(crate) fn mcp_config_dir(url: &str, token: &str) -> std::io::Result<PrivateDir> {
    let mut servers = serde_json::Map::new();
    servers.insert(
        SERVER_NAME.to_string(),
        json!({"serverUrl": url, "headers": {server::TOKEN_HEADER: token}}),
    );
    crate::runner::mcp_config::config_dir(servers)
}

/// agy's tool calls waiting for the relay. Each call holds one of the
/// server's connections until pi answers it, so no more than the server
/// serves at once can ever wait; a full queue makes the next call's
/// connection wait, as it waits for its answer anyway.
pub(crate) const CALL_CAPACITY: usize = 32;

/// pi's tools, served to agy for one turn.
pub(crate) struct ToolBridge {
    /// The `--add-dir` directory that carries the MCP config.
    pub dir: PrivateDir,
    /// The server agy calls; held for its lifetime, since dropping it
    /// closes the port.
    #[allow(dead_code)]
    pub server: server::McpServer,
    /// Calls agy made, in order.
    pub calls: mpsc::Receiver<ToolCall>,
}

impl ToolBridge {
    /// Serve `tools` (already filtered); `None` when there are none.
    pub(crate) async fn start(tools: Vec<PiTool>) -> std::io::Result<Option<ToolBridge>> {
        if tools.is_empty() {
            return Ok(None);
        }
        let (tx, calls) = mpsc::channel(CALL_CAPACITY);
        let server = server::McpServer::start(tools, tx).await?;
        let dir = mcp_config_dir(&server.url(), &server.token)?;
        Ok(Some(ToolBridge { dir, server, calls }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> PiTool {
        PiTool {
            name: name.into(),
            description: String::new(),
            parameters: Value::Null,
        }
    }

    #[test]
    fn natives_and_duplicates_are_left_out() {
        let tools = [
            tool("read"),
            tool("memory_search"),
            tool("bash"),
            tool("AskAntigravity"),
            tool("memory_search"),
            tool(" "),
        ];
        let names: Vec<String> = offered_tools(&tools).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["memory_search"]);
    }

    #[test]
    fn bridge_calls_are_recognised() {
        assert!(is_bridge_call("mcp:pi/echo", "{}"));
        assert!(!is_bridge_call("mcp:github/echo", "{}"));
        assert!(is_bridge_call(
            "call_mcp_tool",
            r#"{"ServerName":"pi","ToolName":"echo","Arguments":{}}"#
        ));
        assert!(!is_bridge_call(
            "call_mcp_tool",
            r#"{"ServerName":"other"}"#
        ));
        assert!(!is_bridge_call("view_file", "{}"));
    }

    #[test]
    fn private_dir_is_private_and_goes_away() {
        // Modes and removal are `PrivateDir`'s own tests (state::tmp).
        let dir = mcp_config_dir("http://127.0.0.1:1/mcp", "tok").expect("dir");
        let root = dir.path().to_path_buf();
        let file = root.join(".agents/mcp_config.json");
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default())
                .unwrap_or(Value::Null);
        assert_eq!(
            config,
            json!({"mcpServers":{"pi":{"serverUrl":"http://127.0.0.1:1/mcp","headers":{"x-token":"tok"}}}})
        );
        drop(dir);
        assert!(!root.exists());
    }
}
