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
//! usage); the work is in `context` (pi's messages to agy's prompt),
//! `mapper` (the runner's events to pi's) and [`stream`] (the writer that
//! keeps pi's invariants).

use crate::runner::TurnUsage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) mod context;
pub(crate) mod mapper;
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
    /// pi's session id, which keys the warm agy and the saved conversation binding; none for a
    /// one-off turn.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The directory pi runs in: agy's workspace for the turn.
    #[serde(default)]
    pub cwd: Option<String>,
    /// pi's `context.messages`, as pi serialises them: since pi 0.86 a
    /// transcript whose system messages carry pi's prompt and tools (see
    /// `context`).
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
    /// Opens the assistant message; always the first event of a stream.
    Start,
    /// Opens text block `content_index`.
    TextStart {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Appends `delta` to text block `content_index`.
    TextDelta {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The text to append.
        delta: String,
    },
    /// Ends a text block. pi's own event also carries the block's whole
    /// text; the extension fills it in from the deltas it applied, so the
    /// bridge never keeps a second copy of a growing answer.
    TextEnd {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Opens thinking block `content_index` (agy's reasoning and tool notes).
    ThinkingStart {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Appends `delta` to thinking block `content_index`.
    ThinkingDelta {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The thinking text to append.
        delta: String,
    },
    /// Ends a thinking block (its text as for [`PiEvent::TextEnd`]).
    ThinkingEnd {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Opens a tool call block: agy called one of pi's tools.
    ToolcallStart {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The call's id, which pi's tool result quotes back.
        id: String,
        /// The pi tool called.
        #[serde(rename = "toolName")]
        tool_name: String,
    },
    /// Appends `delta` to the tool call's JSON arguments.
    ToolcallDelta {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// A piece of the arguments' JSON text.
        delta: String,
    },
    /// Closes a tool call block with the whole call.
    ToolcallEnd {
        /// Position of the block in the assistant message.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// pi's `ToolCall` object: id, name and parsed arguments.
        #[serde(rename = "toolCall")]
        tool_call: Value,
    },
    /// The message ended normally; the stream's last event.
    Done {
        /// pi's stop reason: `stop`, or `toolUse` when the message ends with calls to pi's tools.
        reason: &'static str,
        /// Token counts of the turn, when agy reported them.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<PiUsage>,
    },
    /// The message ended in failure; the stream's last event.
    Error {
        /// pi's stop reason: `error` or `aborted`.
        reason: &'static str,
        /// The sentence pi shows the user.
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    /// Not a message event: agy waits for the user's decision on a tool
    /// call (`ask` mode). The extension asks with pi's dialog and answers
    /// with a `permission` line; it may come between messages.
    PermissionRequest {
        /// The id the `permission` answer line quotes back.
        id: String,
        /// The agy tool asking to run.
        tool: String,
        /// A one-line summary for the dialog's title.
        title: String,
        /// What the call would do, in full.
        detail: String,
        /// The rule an "allow for this session" answer would add.
        #[serde(rename = "sessionRule")]
        session_rule: String,
    },
}

/// pi's `Usage` (without cost, which pi computes from the model's prices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiUsage {
    /// Input tokens of agy's last model call.
    pub input: u64,
    /// Output tokens of agy's last model call.
    pub output: u64,
    /// Input tokens agy's last model call read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the cache; agy does not report them, so always 0.
    pub cache_write: u64,
    /// pi's sum of the four (agy's own total leaves out cache reads).
    pub total_tokens: u64,
}

impl PiUsage {
    /// agy's last model call of the turn: what pi's context meter shows.
    pub(crate) fn from_turn(usage: &TurnUsage) -> PiUsage {
        let u = &usage.last_call;
        PiUsage {
            input: u.input_tokens,
            output: u.output_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: 0,
            total_tokens: usage.context_tokens(),
        }
    }
}

/// One tool of pi's, as the request lists it (pi's `context.tools`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct PiTool {
    /// The tool's name as pi and the model call it.
    pub name: String,
    /// What the tool does, shown to agy.
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
