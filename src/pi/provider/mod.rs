//! agy as a pi model provider: one pi turn in, pi's streaming events out.
//!
//! This is the only library module that knows pi. It turns pi's request (the
//! model id, reasoning level, session and `messages`) into one agy turn, and
//! the runner's events into pi's `AssistantMessageEvent` protocol as JSON
//! lines (deltas only; the extension owns the partial message). Its two
//! promises to pi: `start` goes out at once, and exactly one terminal event
//! (`done` or `error`) ends every stream, whatever happens.
//!
//! This file holds pi's side of the protocol (the request, the events, the
//! usage); the work is in [`context`] (pi's messages to agy's prompt),
//! [`mapper`] (the runner's events to pi's) and [`stream`] (the writer that
//! keeps pi's invariants).

use crate::runner::TurnUsage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod context;
pub mod mapper;
pub mod pipe;
pub mod stream;

/// The provider id pi knows us by; assistant turns from it are agy's own.
pub const PROVIDER_ID: &str = "antigravity";

/// The one request `agy-bridge stream` reads from stdin:
/// `{"type":"request",…}` (the extension tags it, as every other line; a
/// line without `type` is a request too).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamRequest {
    /// pi's model id (a slug from `agy-bridge models --json`).
    pub model: String,
    /// pi's thinking level (`minimal` ... `xhigh`), if any.
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// pi's `context.messages`, as pi serialises them: since pi 0.86 a
    /// transcript whose system messages carry pi's prompt and tools (see
    /// [`context`]).
    #[serde(default)]
    pub messages: Vec<Value>,
    /// pi's current tools (`getCurrentTools(context.messages)`), offered to
    /// agy over MCP (see [`crate::pi::mcp`]).
    #[serde(default)]
    pub tools: Vec<PiTool>,
    /// pi can show a dialog (it has a UI): in `ask` mode agy's tool calls
    /// are put to the user; without one, only the rules pass them.
    #[serde(default)]
    pub ui: bool,
}

/// A pi `AssistantMessageEvent` without `partial` (see ARCHITECTURE.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PiEvent {
    Start,
    TextStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    TextDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    /// Ends a text block. pi's own event also carries the block's whole
    /// text; the extension fills it in from the deltas it applied, so the
    /// bridge never keeps a second copy of a growing answer.
    TextEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    /// Ends a thinking block (its text as for [`PiEvent::TextEnd`]).
    ThinkingEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ToolcallStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
    },
    ToolcallDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    ToolcallEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        #[serde(rename = "toolCall")]
        tool_call: Value,
    },
    Done {
        reason: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<PiUsage>,
    },
    Error {
        reason: &'static str,
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    /// Not a message event: agy waits for the user's decision on a tool
    /// call (`ask` mode). The extension asks with pi's dialog and answers
    /// with a `permission` line; it may come between messages.
    PermissionRequest {
        id: String,
        tool: String,
        title: String,
        detail: String,
        #[serde(rename = "sessionRule")]
        session_rule: String,
    },
}

/// pi's `Usage` (without cost, which pi computes from the model's prices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// pi's sum of the four (agy's own total leaves out cache reads).
    pub total_tokens: u64,
}

impl PiUsage {
    /// agy's last model call of the turn: what pi's context meter shows.
    pub fn from_turn(usage: &TurnUsage) -> PiUsage {
        let u = &usage.last_call;
        PiUsage {
            input: u.input_tokens,
            output: u.output_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: 0,
            total_tokens: u.input_tokens + u.output_tokens + u.cache_read_tokens,
        }
    }
}

/// One tool of pi's, as the request lists it (pi's `context.tools`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct PiTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (pi's TypeBox schema, serialised).
    #[serde(default)]
    pub parameters: Value,
}

/// The JSON lines a [`stream::PiStream`] wrote into `buf` (for the tests of
/// what it and the [`mapper::EventMapper`] write).
#[cfg(test)]
fn json_lines(buf: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(buf)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}
