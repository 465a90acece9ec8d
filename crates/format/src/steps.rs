//! agy's step model: one `steps` row decoded into typed Rust data, and the
//! same types encoded back into payloads.
//!
//! This module owns the field numbers of docs/agy-format.md ("Step status",
//! "Step types", "Step bodies", "Metadata") and nothing else:
//! it knows what a step *is*, not how it changes over time (that is
//! agy-bridge's `follow::events`) or where it comes from (that is agy-bridge's `follow::poller`).
//! Decoding is total: any bytes give a [`Step`], with a `decode_error` when
//! the payload is malformed, and every field path the decoder did not
//! recognise is kept, because the drift tool reports them.

use crate::ids::ConversationId;
use crate::wire::{self, Encoder, Field, Value, WireError, WireType};
use serde::Serialize;
use std::fmt;

macro_rules! numbered_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $num:expr => $label:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($variant,)*
            /// A number this build does not know; the raw value is kept.
            Unknown(i64),
        }

        impl $name {
            pub fn from_raw(n: i64) -> Self {
                match n {
                    $($num => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }

            pub fn raw(self) -> i64 {
                match self {
                    $($name::$variant => $num,)*
                    $name::Unknown(n) => n,
                }
            }

            /// A short lower-case label for reports.
            pub fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)*
                    $name::Unknown(_) => "unknown",
                }
            }

            pub fn is_known(self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} ({})", self.raw(), self.label())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_i64(self.raw())
            }
        }
    };
}

numbered_enum!(
    /// `steps.step_type` (also payload field 1). docs/agy-format.md, "Step types".
    StepType {
        FileEdit = 5 => "file edit",
        GrepSearch = 7 => "grep_search",
        ViewFile = 8 => "view_file",
        ListDirectory = 9 => "list_directory",
        UserInput = 14 => "user input",
        PlannerResponse = 15 => "planner response",
        ErrorMessage = 17 => "error message",
        RunCommand = 21 => "run_command",
        Checkpoint = 23 => "checkpoint",
        ReadUrl = 31 => "read_url_content",
        SearchWeb = 33 => "search_web",
        McpTool = 38 => "mcp tool",
        Ephemeral = 90 => "ephemeral message",
        ConversationHistory = 98 => "conversation history",
        SystemMessage = 101 => "system message",
        InvokeSubagent = 127 => "invoke_subagent",
        GenericTool = 132 => "generic tool",
        AskQuestion = 138 => "ask_question",
    }
);

numbered_enum!(
    /// `CortexStepStatus`, exact from agy's descriptors. docs/agy-format.md, "Step status".
    StepStatus {
        Unspecified = 0 => "unspecified",
        Pending = 1 => "pending",
        Running = 2 => "running",
        Done = 3 => "done",
        Invalid = 4 => "invalid",
        Cleared = 5 => "cleared",
        Canceled = 6 => "canceled",
        Error = 7 => "error",
        Generating = 8 => "generating",
        Waiting = 9 => "waiting",
        Queued = 11 => "queued",
        Interrupted = 12 => "interrupted",
    }
);

impl StepType {
    /// The tool name a step of this type stands for, used when the step's
    /// metadata does not name its tool.
    pub fn tool_name(self) -> Option<&'static str> {
        Some(match self {
            StepType::FileEdit => "write_to_file",
            StepType::GrepSearch => "grep_search",
            StepType::ViewFile => "view_file",
            StepType::ListDirectory => "list_dir",
            StepType::RunCommand => "run_command",
            StepType::ReadUrl => "read_url_content",
            StepType::SearchWeb => "search_web",
            StepType::McpTool => "mcp_tool",
            StepType::InvokeSubagent => "invoke_subagent",
            StepType::GenericTool => "generic_tool",
            StepType::AskQuestion => "ask_question",
            _ => return None,
        })
    }
}

impl StepStatus {
    /// A terminal status: agy will not change this step again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            StepStatus::Done
                | StepStatus::Invalid
                | StepStatus::Cleared
                | StepStatus::Canceled
                | StepStatus::Error
                | StepStatus::Interrupted
        )
    }
}

/// One row of `steps`, as read from a database. Only the first four columns
/// exist in the legacy schema; the others are `None` there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StepRow {
    pub idx: i64,
    pub step_type: i64,
    pub status: i64,
    pub payload: Option<Vec<u8>>,
    pub metadata: Option<Vec<u8>>,
    pub error_details: Option<Vec<u8>>,
    pub permissions: Option<Vec<u8>>,
    pub task_details: Option<Vec<u8>>,
}

impl StepRow {
    /// The side columns this row has, in [`SIDE_COLUMNS`] order, each with
    /// its known-field tree.
    pub fn side_columns(&self) -> impl Iterator<Item = (&'static str, &[u8], &'static [Known])> {
        let blobs = [
            &self.metadata,
            &self.error_details,
            &self.permissions,
            &self.task_details,
        ];
        SIDE_COLUMNS
            .iter()
            .zip(blobs)
            .filter_map(|((column, tree), blob)| Some((*column, blob.as_deref()?, *tree)))
    }
}

/// The child conversations the subagent steps among `rows` name (payload
/// field 127.1), in step order, without repeats; a child id that is not a
/// conversation id is skipped.
pub fn subagent_children<'a>(rows: impl IntoIterator<Item = &'a StepRow>) -> Vec<ConversationId> {
    let mut children: Vec<ConversationId> = Vec::new();
    for row in rows {
        if let Some(Body::Subagent(sub)) = decode(row).body {
            if let Ok(child) = ConversationId::parse(sub.child_conversation_id.trim()) {
                if !children.contains(&child) {
                    children.push(child);
                }
            }
        }
    }
    children
}

// ---------------------------------------------------------------------------
// The known-field tree. Everything the decoder reads is listed here; any other
// field path is "unknown" and reported. Drift fingerprints use the same tree
// to decide which length-delimited fields are messages worth descending into.
// ---------------------------------------------------------------------------

/// What a known field holds.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Varint,
    Str,
    Bytes,
    Fixed64,
    Msg(&'static [Known]),
}

impl Kind {
    pub fn wire_type(self) -> WireType {
        match self {
            Kind::Varint => WireType::Varint,
            Kind::Fixed64 => WireType::Fixed64,
            Kind::Str | Kind::Bytes | Kind::Msg(_) => WireType::Len,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub number: u32,
    pub name: &'static str,
    pub kind: Kind,
}

const fn k(number: u32, name: &'static str, kind: Kind) -> Known {
    Known { number, name, kind }
}

use Kind::{Bytes, Msg, Str, Varint};

const TIMESTAMP: &[Known] = &[k(1, "seconds", Varint), k(2, "nanos", Varint)];
pub const TOOL_CALL: &[Known] = &[
    k(1, "id", Str),
    k(2, "name", Str),
    k(3, "arguments", Str),
    k(9, "name_alt", Str),
];
pub const USAGE: &[Known] = &[
    k(1, "model", Varint),
    k(2, "input_tokens", Varint),
    k(3, "output_tokens", Varint),
    k(4, "cache_write_tokens", Varint),
    k(5, "cache_read_tokens", Varint),
    k(9, "thinking_tokens", Varint),
    k(10, "response_tokens", Varint),
];
const STEP_REF: &[Known] = &[
    k(1, "trajectory_id", Str),
    k(2, "step_index", Varint),
    k(4, "cascade_id", Str),
];
const MODEL_INFO: &[Known] = &[k(1, "name", Str), k(2, "display_name", Str)];
/// `CortexStepMetadata`. 11 and 13 are model enums (varints); 13 has also been
/// seen described as a message, which decodes but is reported as unknown.
pub const METADATA: &[Known] = &[
    k(1, "created_at", Msg(TIMESTAMP)),
    k(3, "source", Varint),
    k(4, "tool_call", Msg(TOOL_CALL)),
    k(8, "completed_at", Msg(TIMESTAMP)),
    k(9, "usage", Msg(USAGE)),
    k(11, "generator_model", Varint),
    k(12, "execution_id", Str),
    k(13, "requested_model", Varint),
    k(20, "step_ref", Msg(STEP_REF)),
    k(21, "generation_version", Varint),
    k(24, "model_info", Msg(MODEL_INFO)),
];
pub const ERROR_DETAILS: &[Known] = &[
    k(1, "message", Str),
    k(2, "detail", Str),
    k(3, "stack", Str),
];
const PLANNER: &[Known] = &[
    k(1, "text", Str),
    k(3, "thinking", Str),
    k(5, "thinking_redacted", Varint),
    k(7, "tool_calls", Msg(TOOL_CALL)),
    k(8, "modified_response", Str),
    k(12, "stop_reason", Varint),
    k(16, "raw_thinking", Str),
];
const USER_TEXT: &[Known] = &[k(1, "text", Str)];
const USER_CONTEXT: &[Known] = &[k(12, "workspace_uri", Str)];
const USER_INPUT: &[Known] = &[
    k(2, "text", Str),
    k(3, "items", Msg(USER_TEXT)),
    k(12, "context", Msg(USER_CONTEXT)),
];
const WRITE: &[Known] = &[k(26, "summary", Str)];
const GREP_HIT: &[Known] = &[
    k(1, "path", Str),
    k(2, "line", Varint),
    k(3, "text", Str),
    k(4, "abs_path", Str),
];
const GREP: &[Known] = &[
    k(1, "query", Str),
    k(2, "include", Str),
    k(3, "output", Str),
    k(4, "hits", Msg(GREP_HIT)),
    k(10, "command", Str),
    k(11, "cwd", Str),
];
const VIEW: &[Known] = &[
    k(1, "uri", Str),
    k(2, "start", Varint),
    k(3, "end", Varint),
    k(4, "content", Str),
    k(11, "next_line", Varint),
    k(12, "total", Varint),
];
const DIR_ENTRY: &[Known] = &[
    k(1, "name", Str),
    k(2, "is_dir", Varint),
    k(4, "size", Varint),
];
const LIST_DIR: &[Known] = &[k(1, "dir", Str), k(3, "entries", Msg(DIR_ENTRY))];
const MODEL_ERROR_INNER: &[Known] = &[
    k(2, "summary", Str),
    k(3, "diagnostic", Str),
    k(5, "response_json", Str),
    k(6, "id", Str),
    k(9, "user_message", Str),
];
const MODEL_ERROR: &[Known] = &[k(3, "error", Msg(MODEL_ERROR_INNER))];
/// 28.21: the command's output as a message, not raw bytes (what once looked
/// like leading control bytes were this message's tag and length). Real agy
/// writes only this form; raw text here (which only this project's old
/// synthesiser wrote) does not parse as the message and is reported as a
/// decode error rather than guessed at.
const RUN_OUTPUT: &[Known] = &[k(1, "full", Str), k(2, "truncated", Str)];
const RUN_COMMAND: &[Known] = &[
    k(2, "cwd", Str),
    k(6, "exit_code", Varint),
    k(21, "output", Msg(RUN_OUTPUT)),
    k(23, "command", Str),
    k(25, "command_alt", Str),
];
const CHECKPOINT: &[Known] = &[k(4, "title", Str)];
const READ_URL_DOC: &[Known] = &[k(4, "title", Str), k(7, "description", Str)];
const READ_URL: &[Known] = &[
    k(1, "url", Str),
    k(2, "doc", Msg(READ_URL_DOC)),
    k(3, "url_alt", Str),
    k(6, "content_path", Str),
];
const SEARCH_WEB: &[Known] = &[k(1, "query", Str), k(5, "summary", Str)];
/// Body of a type-101 system message (agy's notes, subagent reports).
const SYSTEM_MESSAGE: &[Known] = &[k(1, "message", Str)];
const MCP_TOOL: &[Known] = &[
    k(1, "server_name", Str),
    k(2, "tool_call", Msg(TOOL_CALL)),
    k(3, "result", Str),
    k(7, "user_rejected", Varint),
];
const PERMISSION_TARGET: &[Known] = &[k(1, "action", Str), k(2, "target", Str)];
const PERMISSION_REQUEST: &[Known] = &[
    k(1, "target", Msg(PERMISSION_TARGET)),
    k(4, "reason", Str),
    k(5, "action_description", Str),
];
/// Field 56. A question (22) is known to exist; its layout is not, so it is
/// carried, not decoded.
const REQUESTED_INTERACTION: &[Known] = &[
    k(21, "permission", Msg(PERMISSION_REQUEST)),
    k(22, "question", Bytes),
];
/// One entry of field 147. The numbers inside are not confirmed by a
/// capture (docs/agy-format.md, "Step bodies"): a different layout shows up as
/// unknown `147.N` paths in `decode` and `drift`.
const COMPLETED_INTERACTION: &[Known] = &[
    k(1, "allow", Varint),
    k(2, "scope", Varint),
    k(3, "timed_out", Varint),
];
const SUBAGENT: &[Known] = &[
    k(1, "child_conversation_id", Str),
    k(2, "log_uri", Str),
    k(3, "role", Str),
    k(4, "type", Str),
];
const GENERIC_ARG: &[Known] = &[k(1, "key", Str), k(2, "value", Str)];
const GENERIC_RESULT: &[Known] = &[k(1, "result", Str)];
const GENERIC: &[Known] = &[
    k(1, "args", Msg(GENERIC_ARG)),
    k(2, "result", Msg(GENERIC_RESULT)),
];

/// The top level of `step_payload` (message `Step`).
pub const STEP: &[Known] = &[
    k(1, "type", Varint),
    k(4, "status", Varint),
    k(5, "metadata", Msg(METADATA)),
    k(10, "write_result", Msg(WRITE)),
    k(13, "grep_result", Msg(GREP)),
    k(14, "view_file_result", Msg(VIEW)),
    k(15, "list_directory_result", Msg(LIST_DIR)),
    k(19, "user_input", Msg(USER_INPUT)),
    k(20, "planner_response", Msg(PLANNER)),
    k(24, "model_error", Msg(MODEL_ERROR)),
    k(28, "run_command_result", Msg(RUN_COMMAND)),
    k(30, "checkpoint", Msg(CHECKPOINT)),
    k(31, "error_details", Msg(ERROR_DETAILS)),
    k(40, "read_url_result", Msg(READ_URL)),
    k(42, "search_web_result", Msg(SEARCH_WEB)),
    k(47, "mcp_tool", Msg(MCP_TOOL)),
    k(56, "requested_interaction", Msg(REQUESTED_INTERACTION)),
    k(114, "system_message", Msg(SYSTEM_MESSAGE)),
    k(127, "subagent", Msg(SUBAGENT)),
    k(140, "generic_tool", Msg(GENERIC)),
    k(147, "completed_interactions", Msg(COMPLETED_INTERACTION)),
];

const PERMISSION_ITEM: &[Known] = &[k(1, "kind", Str), k(2, "value", Str)];
const PERMISSION: &[Known] = &[k(1, "item", Msg(PERMISSION_ITEM)), k(2, "decision", Varint)];
/// `steps.permissions`.
pub const PERMISSIONS: &[Known] = &[k(2, "request", Msg(PERMISSION))];
/// `steps.task_details`.
pub const TASK_DETAILS: &[Known] = &[
    k(1, "task_id", Str),
    k(2, "log_uri", Str),
    k(4, "description", Str),
];

/// The blob columns of `steps` beside `step_payload`, with their known-field
/// trees (`render_info` has none).
pub const SIDE_COLUMNS: &[(&str, &[Known])] = &[
    ("metadata", METADATA),
    ("error_details", ERROR_DETAILS),
    ("permissions", PERMISSIONS),
    ("task_details", TASK_DETAILS),
];

/// The known-field tree of a blob column of `steps`, if the decoder has one.
pub fn column_tree(column: &str) -> Option<&'static [Known]> {
    if column == "step_payload" {
        return Some(STEP);
    }
    SIDE_COLUMNS
        .iter()
        .find(|(c, _)| *c == column)
        .map(|(_, tree)| *tree)
}

/// Sort key for a field path: numeric segments compare as numbers (`20.3`
/// before `20.12`), and a named segment (a side column's, `metadata.4.7`)
/// after all numbers.
pub fn path_order(path: &str) -> Vec<(u8, u64, &str)> {
    path.split('.')
        .map(|seg| match seg.parse::<u64>() {
            Ok(n) => (0, n, ""),
            Err(_) => (1, 0, seg),
        })
        .collect()
}

/// The field paths the decoder depends on. If one of these disappears from a
/// new agy, pi users would silently get less: drift calls that breaking.
pub const LOAD_BEARING: &[(&str, WireType)] = &[
    ("20.1", WireType::Len),
    ("20.3", WireType::Len),
    ("20.7.2", WireType::Len),
    ("5.4.2", WireType::Len),
    ("5.4.3", WireType::Len),
    ("19.2", WireType::Len),
    ("24.3.9", WireType::Len),
    ("28.21", WireType::Len),
    ("30.4", WireType::Len),
    ("127.1", WireType::Len),
];

/// One field path seen in a blob, e.g. `20.1` (len) or `5.4.2` (len).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FieldPath {
    pub path: String,
    #[serde(serialize_with = "ser_wire")]
    pub wire_type: WireType,
    /// Whether the known-field tree lists this path with this wire type.
    #[serde(skip)]
    pub known: bool,
}

fn ser_wire<S: serde::Serializer>(w: &WireType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(w.name())
}

/// Walk `buf` against `schema`, calling `visit` for every field path seen
/// (known or not), descending into fields the tree marks as messages.
pub fn walk_paths(
    buf: &[u8],
    schema: &[Known],
    prefix: &str,
    visit: &mut dyn FnMut(FieldPath),
) -> Result<(), PathError> {
    for field in wire::fields(buf) {
        let field = field.map_err(|source| PathError {
            path: prefix.to_string(),
            source,
        })?;
        let path = if prefix.is_empty() {
            field.number.to_string()
        } else {
            format!("{prefix}.{}", field.number)
        };
        let wt = field.value.wire_type();
        let known = schema.iter().find(|kf| kf.number == field.number);
        let matches = known.map(|kf| kf.kind.wire_type() == wt).unwrap_or(false);
        visit(FieldPath {
            path: path.clone(),
            wire_type: wt,
            known: matches,
        });
        if let (
            Some(Known {
                kind: Kind::Msg(sub),
                ..
            }),
            Value::Len(bytes),
        ) = (known, field.value)
        {
            walk_paths(bytes, sub, &path, visit)?;
        }
    }
    Ok(())
}

/// A malformed blob, with the field path of the message that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed protobuf{}: {source}", if path.is_empty() { String::new() } else { format!(" inside field {path}") })]
pub struct PathError {
    pub path: String,
    pub source: WireError,
}

// ---------------------------------------------------------------------------
// Typed step data.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    pub model: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_write_tokens: u64,
    pub cache_read_tokens: u64,
    pub thinking_tokens: u64,
    pub response_tokens: u64,
}

/// Turn totals: the sum of each model call's counts (`model`, which names
/// the model, is left as it is).
impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, u: &Usage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cache_write_tokens += u.cache_write_tokens;
        self.cache_read_tokens += u.cache_read_tokens;
        self.thinking_tokens += u.thinking_tokens;
        self.response_tokens += u.response_tokens;
    }
}

/// Metadata 24: the model agy ran, by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Metadata {
    pub created_at: Option<(u64, u64)>,
    pub completed_at: Option<(u64, u64)>,
    pub source: Option<u64>,
    pub tool_call: Option<ToolCall>,
    pub usage: Option<Usage>,
    /// agy's model enum value (metadata 11).
    pub generator_model: Option<u64>,
    /// The model enum the user asked for (metadata 13).
    pub requested_model: Option<u64>,
    pub model_info: Option<ModelInfo>,
    pub execution_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PlannerResponse {
    pub text: String,
    pub thinking: String,
    pub thinking_redacted: bool,
    pub tool_calls: Vec<ToolCall>,
    pub modified_response: Option<String>,
    pub raw_thinking: Option<String>,
    pub stop_reason: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct UserInput {
    pub text: String,
    pub workspace_uri: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct GrepHit {
    pub path: String,
    pub line: u64,
    pub text: String,
    pub abs_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct GrepResult {
    pub query: String,
    pub include: Option<String>,
    pub output: String,
    pub hits: Vec<GrepHit>,
    pub command: Option<String>,
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ViewFileResult {
    pub uri: String,
    pub start: Option<u64>,
    pub end: Option<u64>,
    pub content: String,
    pub next_line: Option<u64>,
    pub total: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ListDirResult {
    pub dir: String,
    pub entries: Vec<DirEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ModelError {
    pub summary: Option<String>,
    pub diagnostic: Option<String>,
    pub response_json: Option<String>,
    pub id: Option<String>,
    pub user_message: Option<String>,
}

impl ModelError {
    /// The most useful one-line message: agy's user-facing text first.
    pub fn message(&self) -> String {
        self.user_message
            .clone()
            .or_else(|| self.summary.clone())
            .or_else(|| self.diagnostic.clone())
            .unwrap_or_else(|| "agy reported a model error without a message".to_string())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RunCommandResult {
    pub cwd: Option<String>,
    pub exit_code: Option<i64>,
    pub output: String,
    pub command: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ReadUrlResult {
    pub url: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub content_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SearchWebResult {
    pub query: String,
    /// agy's summary of what the search found (42.5).
    pub summary: Option<String>,
}

/// A type-38 step: one call of a tool on an MCP server (field 47).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct McpToolResult {
    pub server: String,
    pub call: Option<ToolCall>,
    pub result: Option<String>,
    pub user_rejected: bool,
}

impl McpToolResult {
    /// The name a person reads: `mcp:SERVER/TOOL`.
    pub fn display_name(&self) -> String {
        let tool = self.call.as_ref().map(|c| c.name.as_str()).unwrap_or("");
        format!("mcp:{}/{}", self.server, tool)
    }
}

/// What agy asked permission for (56.21).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PermissionRequest {
    pub action: String,
    pub target: String,
    pub reason: Option<String>,
    pub action_description: Option<String>,
}

/// One answer to a requested interaction (an entry of field 147). proto3
/// omits false flags, so an absent `allow` is a denial.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct InteractionAnswer {
    pub allow: bool,
    pub scope: Option<u64>,
    pub timed_out: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Subagent {
    pub child_conversation_id: String,
    pub log_uri: Option<String>,
    pub role: Option<String>,
    pub kind: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct GenericTool {
    pub args: Vec<(String, String)>,
    pub result: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ErrorDetails {
    pub message: String,
    pub detail: Option<String>,
    pub stack: Option<String>,
}

/// The step body: a oneof keyed by field number (docs/agy-format.md, "Step bodies").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "body", rename_all = "snake_case")]
pub enum Body {
    Planner(PlannerResponse),
    UserInput(UserInput),
    Write {
        summary: String,
    },
    Grep(GrepResult),
    ViewFile(ViewFileResult),
    ListDirectory(ListDirResult),
    ModelError(ModelError),
    RunCommand(RunCommandResult),
    Checkpoint {
        title: String,
    },
    ReadUrl(ReadUrlResult),
    SearchWeb(SearchWebResult),
    McpTool(McpToolResult),
    /// A type-101 system message: agy's own note or a subagent's report.
    SystemMessage {
        message: String,
    },
    Subagent(Subagent),
    Generic(GenericTool),
}

impl Body {
    /// Whether this body is the result of a tool run.
    pub fn is_tool_result(&self) -> bool {
        matches!(
            self,
            Body::Write { .. }
                | Body::Grep(_)
                | Body::ViewFile(_)
                | Body::ListDirectory(_)
                | Body::RunCommand(_)
                | Body::ReadUrl(_)
                | Body::SearchWeb(_)
                | Body::McpTool(_)
                | Body::Generic(_)
        )
    }
}

/// A decoded step. Built by [`decode`] from any [`StepRow`], never failing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub idx: i64,
    pub step_type: StepType,
    pub status: StepStatus,
    pub body: Option<Body>,
    pub metadata: Option<Metadata>,
    /// Error details from payload field 31 and the `error_details` column.
    pub errors: Vec<ErrorDetails>,
    /// A permission agy asked for before running this step's tool (56.21).
    pub permission_request: Option<PermissionRequest>,
    /// Answers to this step's requested interactions (147), oldest first.
    pub answers: Vec<InteractionAnswer>,
    /// Every field path the known-field tree does not list (payload and side
    /// columns, the latter prefixed with the column name).
    pub unknown_fields: Vec<FieldPath>,
    pub decode_error: Option<String>,
}

impl Step {
    pub fn is_finished(&self) -> bool {
        self.status.is_terminal()
    }

    /// The tool call this step carries in its metadata (5.4).
    pub fn tool_call(&self) -> Option<&ToolCall> {
        self.metadata.as_ref().and_then(|m| m.tool_call.as_ref())
    }
}

/// A message's fields, collected once so accessors can pick by number.
struct Message<'a> {
    fields: Vec<Field<'a>>,
}

impl<'a> Message<'a> {
    /// Lenient: keeps the fields that parsed before any error.
    fn parse(buf: &'a [u8]) -> Message<'a> {
        Message {
            fields: wire::fields(buf).map_while(Result::ok).collect(),
        }
    }

    fn lens(&self, n: u32) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.fields.iter().filter_map(move |f| match f.value {
            Value::Len(b) if f.number == n => Some(b),
            _ => None,
        })
    }

    fn len(&self, n: u32) -> Option<&'a [u8]> {
        self.fields.iter().rev().find_map(|f| match f.value {
            Value::Len(b) if f.number == n => Some(b),
            _ => None,
        })
    }

    fn string(&self, n: u32) -> Option<String> {
        self.len(n).map(|b| String::from_utf8_lossy(b).into_owned())
    }

    fn text(&self, n: u32) -> String {
        self.string(n).unwrap_or_default()
    }

    fn varint(&self, n: u32) -> Option<u64> {
        self.fields.iter().rev().find_map(|f| match f.value {
            Value::Varint(v) if f.number == n => Some(v),
            _ => None,
        })
    }

    fn msg(&self, n: u32) -> Option<Message<'a>> {
        self.len(n).map(Message::parse)
    }

    fn msgs(&self, n: u32) -> impl Iterator<Item = Message<'a>> + '_ {
        self.lens(n).map(Message::parse)
    }
}

fn decode_tool_call(m: &Message<'_>) -> ToolCall {
    ToolCall {
        id: m.text(1),
        name: m
            .string(2)
            .filter(|s| !s.is_empty())
            .or_else(|| m.string(9))
            .unwrap_or_default(),
        arguments: m.text(3),
    }
}

fn decode_usage(m: &Message<'_>) -> Usage {
    let v = |n| m.varint(n).unwrap_or(0);
    Usage {
        model: v(1),
        input_tokens: v(2),
        output_tokens: v(3),
        cache_write_tokens: v(4),
        cache_read_tokens: v(5),
        thinking_tokens: v(9),
        response_tokens: v(10),
    }
}

/// Decode a `CortexStepMetadata` message (payload field 5, or the
/// `steps.metadata` column).
pub fn decode_metadata(buf: &[u8]) -> Metadata {
    let m = Message::parse(buf);
    let timestamp = |t: Message<'_>| (t.varint(1).unwrap_or(0), t.varint(2).unwrap_or(0));
    Metadata {
        created_at: m.msg(1).map(timestamp),
        completed_at: m.msg(8).map(timestamp),
        source: m.varint(3),
        tool_call: m.msg(4).map(|t| decode_tool_call(&t)),
        usage: m.msg(9).map(|u| decode_usage(&u)),
        generator_model: m.varint(11),
        // An enum; tolerated as a message whose field 1 is the enum.
        requested_model: m.varint(13).or_else(|| m.msg(13).and_then(|r| r.varint(1))),
        model_info: m.msg(24).map(|i| ModelInfo {
            name: i.text(1),
            display_name: i.string(2),
        }),
        execution_id: m.string(12),
    }
}

/// The permission request inside a requested interaction (56.21), if that
/// is what agy asked for.
fn decode_permission_request(buf: &[u8]) -> Option<PermissionRequest> {
    let p = Message::parse(buf).msg(21)?;
    let target = p.msg(1);
    Some(PermissionRequest {
        action: target.as_ref().map(|t| t.text(1)).unwrap_or_default(),
        target: target.as_ref().map(|t| t.text(2)).unwrap_or_default(),
        reason: p.string(4),
        action_description: p.string(5),
    })
}

fn decode_answer(buf: &[u8]) -> InteractionAnswer {
    let m = Message::parse(buf);
    InteractionAnswer {
        allow: m.varint(1).unwrap_or(0) != 0,
        scope: m.varint(2),
        timed_out: m.varint(3).unwrap_or(0) != 0,
    }
}

fn decode_error_details(buf: &[u8]) -> ErrorDetails {
    let m = Message::parse(buf);
    ErrorDetails {
        message: m.text(1),
        detail: m.string(2),
        stack: m.string(3),
    }
}

/// Decode the body carried by `Step` field `number` (None for a field that
/// carries no body).
fn decode_body(number: u32, buf: &[u8]) -> Option<Body> {
    let m = Message::parse(buf);
    Some(match number {
        20 => Body::Planner(PlannerResponse {
            text: m.text(1),
            thinking: m.text(3),
            thinking_redacted: m.varint(5).unwrap_or(0) != 0,
            tool_calls: m.msgs(7).map(|t| decode_tool_call(&t)).collect(),
            modified_response: m.string(8),
            raw_thinking: m.string(16),
            stop_reason: m.varint(12),
        }),
        19 => Body::UserInput(UserInput {
            text: m
                .string(2)
                .filter(|s| !s.is_empty())
                .or_else(|| {
                    let parts: Vec<String> = m.msgs(3).filter_map(|i| i.string(1)).collect();
                    (!parts.is_empty()).then(|| parts.join("\n"))
                })
                .unwrap_or_default(),
            workspace_uri: m.msg(12).and_then(|c| c.string(12)),
        }),
        24 => {
            let inner = m.msg(3).unwrap_or(Message { fields: Vec::new() });
            Body::ModelError(ModelError {
                summary: inner.string(2),
                diagnostic: inner.string(3),
                response_json: inner.string(5),
                id: inner.string(6),
                user_message: inner.string(9),
            })
        }
        30 => Body::Checkpoint { title: m.text(4) },
        114 => Body::SystemMessage { message: m.text(1) },
        127 => Body::Subagent(Subagent {
            child_conversation_id: m.text(1),
            log_uri: m.string(2),
            role: m.string(3),
            kind: m.string(4),
        }),
        _ => return decode_tool_body(number, &m),
    })
}

/// The bodies tools write: their results.
fn decode_tool_body(number: u32, m: &Message<'_>) -> Option<Body> {
    Some(match number {
        10 => Body::Write {
            summary: m.text(26),
        },
        13 => Body::Grep(GrepResult {
            query: m.text(1),
            include: m.string(2),
            output: m.text(3),
            hits: m
                .msgs(4)
                .map(|h| GrepHit {
                    path: h.text(1),
                    line: h.varint(2).unwrap_or(0),
                    text: h.text(3),
                    abs_path: h.string(4),
                })
                .collect(),
            command: m.string(10),
            cwd: m.string(11),
        }),
        14 => Body::ViewFile(ViewFileResult {
            uri: m.text(1),
            start: m.varint(2),
            end: m.varint(3),
            content: m.text(4),
            next_line: m.varint(11),
            total: m.varint(12),
        }),
        15 => Body::ListDirectory(ListDirResult {
            dir: m.text(1),
            entries: m
                .msgs(3)
                .map(|e| DirEntry {
                    name: e.text(1),
                    is_dir: e.varint(2).unwrap_or(0) != 0,
                    size: e.varint(4),
                })
                .collect(),
        }),
        28 => Body::RunCommand(RunCommandResult {
            cwd: m.string(2),
            exit_code: m.varint(6).map(|v| v as i64),
            // The full output, else what agy kept of it.
            output: m
                .msg(21)
                .and_then(|o| {
                    o.string(1)
                        .filter(|s| !s.is_empty())
                        .or_else(|| o.string(2))
                })
                .unwrap_or_default(),
            command: m.string(23).or_else(|| m.string(25)),
        }),
        40 => {
            let doc = m.msg(2);
            Body::ReadUrl(ReadUrlResult {
                url: m.string(1).or_else(|| m.string(3)).unwrap_or_default(),
                title: doc.as_ref().and_then(|d| d.string(4)),
                description: doc.as_ref().and_then(|d| d.string(7)),
                content_path: m.string(6),
            })
        }
        42 => Body::SearchWeb(SearchWebResult {
            query: m.text(1),
            summary: m.string(5),
        }),
        47 => Body::McpTool(McpToolResult {
            server: m.text(1),
            call: m.msg(2).map(|c| decode_tool_call(&c)),
            result: m.string(3),
            user_rejected: m.varint(7).unwrap_or(0) != 0,
        }),
        140 => Body::Generic(GenericTool {
            args: m.msgs(1).map(|a| (a.text(1), a.text(2))).collect(),
            result: m.msg(2).and_then(|r| r.string(1)),
        }),
        _ => return None,
    })
}

/// Collect unknown paths of one blob into `out`, returning a walk error.
/// Same walk as [`walk_paths`], but a path string is built only for unknown
/// fields and for messages it descends into: this runs on every decode.
fn collect_unknown(
    buf: &[u8],
    schema: &[Known],
    prefix: &str,
    out: &mut Vec<FieldPath>,
) -> Result<(), PathError> {
    let join = |n: u32| {
        if prefix.is_empty() {
            n.to_string()
        } else {
            format!("{prefix}.{n}")
        }
    };
    for field in wire::fields(buf) {
        let field = field.map_err(|source| PathError {
            path: prefix.to_string(),
            source,
        })?;
        let wt = field.value.wire_type();
        match schema.iter().find(|kf| kf.number == field.number) {
            Some(kf) if kf.kind.wire_type() == wt => {
                if let (Kind::Msg(sub), Value::Len(bytes)) = (kf.kind, field.value) {
                    collect_unknown(bytes, sub, &join(field.number), out)?;
                }
            }
            _ => {
                let p = FieldPath {
                    path: join(field.number),
                    wire_type: wt,
                    known: false,
                };
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    Ok(())
}

/// Decode one row. Total: malformed payloads give `decode_error`, never a panic.
pub fn decode(row: &StepRow) -> Step {
    let mut step = Step {
        idx: row.idx,
        step_type: StepType::from_raw(row.step_type),
        status: StepStatus::from_raw(row.status),
        body: None,
        metadata: None,
        errors: Vec::new(),
        permission_request: None,
        answers: Vec::new(),
        unknown_fields: Vec::new(),
        decode_error: None,
    };
    let mut problems: Vec<String> = Vec::new();

    if let Some(payload) = row.payload.as_deref() {
        if let Err(e) = collect_unknown(payload, STEP, "", &mut step.unknown_fields) {
            problems.push(format!("step_payload: {e}"));
        }
        let top = Message::parse(payload);
        for field in &top.fields {
            match (field.number, field.value) {
                (5, Value::Len(b)) => step.metadata = Some(decode_metadata(b)),
                (31, Value::Len(b)) => step.errors.push(decode_error_details(b)),
                (56, Value::Len(b)) => step.permission_request = decode_permission_request(b),
                (147, Value::Len(b)) => step.answers.push(decode_answer(b)),
                (n, Value::Len(b)) => {
                    if let Some(body) = decode_body(n, b) {
                        step.body = Some(body);
                    }
                }
                _ => {}
            }
        }
    }
    // The side columns repeat or extend the payload; decode them when present.
    if step.metadata.is_none() {
        if let Some(meta) = row.metadata.as_deref() {
            step.metadata = Some(decode_metadata(meta));
        }
    }
    for (column, blob, schema) in row.side_columns() {
        if let Err(e) = collect_unknown(blob, schema, column, &mut step.unknown_fields) {
            problems.push(format!("{column}: {e}"));
        }
    }
    if let Some(details) = row.error_details.as_deref() {
        let details = decode_error_details(details);
        if !details.message.is_empty() && !step.errors.contains(&details) {
            step.errors.push(details);
        }
    }
    if !problems.is_empty() {
        step.decode_error = Some(problems.join("; "));
    }
    step
}

// ---------------------------------------------------------------------------
// Encoding: the inverse of `decode`, for fake-agy, the synthesiser and tests.
// ---------------------------------------------------------------------------

fn encode_tool_call(e: &mut Encoder, call: &ToolCall) {
    if !call.id.is_empty() {
        e.string(1, &call.id);
    }
    e.string(2, &call.name);
    e.string(3, &call.arguments);
}

/// Encode a metadata message (payload field 5 / `steps.metadata`).
pub fn encode_metadata(meta: &Metadata) -> Vec<u8> {
    let mut e = Encoder::new();
    if let Some((s, ns)) = meta.created_at {
        e.message(1, |t| {
            t.varint(1, s).varint(2, ns);
        });
    }
    if let Some(source) = meta.source {
        e.varint(3, source);
    }
    if let Some(call) = &meta.tool_call {
        e.message(4, |t| encode_tool_call(t, call));
    }
    if let Some((s, ns)) = meta.completed_at {
        e.message(8, |t| {
            t.varint(1, s).varint(2, ns);
        });
    }
    if let Some(u) = &meta.usage {
        e.message(9, |t| {
            t.varint(1, u.model)
                .varint(2, u.input_tokens)
                .varint(3, u.output_tokens)
                .varint(4, u.cache_write_tokens)
                .varint(5, u.cache_read_tokens)
                .varint(9, u.thinking_tokens)
                .varint(10, u.response_tokens);
        });
    }
    opt_varint(&mut e, 11, meta.generator_model);
    opt_str(&mut e, 12, &meta.execution_id);
    opt_varint(&mut e, 13, meta.requested_model);
    if let Some(info) = &meta.model_info {
        e.message(24, |i| {
            i.string(1, &info.name);
            opt_str(i, 2, &info.display_name);
        });
    }
    e.finish()
}

fn opt_str(e: &mut Encoder, n: u32, v: &Option<String>) {
    if let Some(v) = v {
        e.string(n, v);
    }
}

fn opt_varint(e: &mut Encoder, n: u32, v: Option<u64>) {
    if let Some(v) = v {
        e.varint(n, v);
    }
}

/// Encode a body as the field of `Step` that carries it.
pub fn encode_body(e: &mut Encoder, body: &Body) {
    match body {
        Body::Planner(p) => e.message(20, |m| {
            if !p.text.is_empty() {
                m.string(1, &p.text);
            }
            if !p.thinking.is_empty() {
                m.string(3, &p.thinking);
            }
            if p.thinking_redacted {
                m.varint(5, 1);
            }
            for call in &p.tool_calls {
                m.message(7, |t| encode_tool_call(t, call));
            }
            opt_str(m, 8, &p.modified_response);
            opt_varint(m, 12, p.stop_reason);
            opt_str(m, 16, &p.raw_thinking);
        }),
        Body::UserInput(u) => e.message(19, |m| {
            m.string(2, &u.text);
            m.message(3, |i| {
                i.string(1, &u.text);
            });
            if let Some(uri) = &u.workspace_uri {
                m.message(12, |c| {
                    c.string(12, uri);
                });
            }
        }),
        Body::ModelError(err) => e.message(24, |m| {
            m.message(3, |i| {
                opt_str(i, 2, &err.summary);
                opt_str(i, 3, &err.diagnostic);
                opt_str(i, 5, &err.response_json);
                opt_str(i, 6, &err.id);
                opt_str(i, 9, &err.user_message);
            });
        }),
        Body::Checkpoint { title } => e.message(30, |m| {
            m.string(4, title);
        }),
        Body::SystemMessage { message } => e.message(114, |m| {
            m.string(1, message);
        }),
        Body::Subagent(s) => e.message(127, |m| {
            m.string(1, &s.child_conversation_id);
            opt_str(m, 2, &s.log_uri);
            opt_str(m, 3, &s.role);
            opt_str(m, 4, &s.kind);
        }),
        tool => {
            encode_tool_body(e, tool);
            e
        }
    };
}

/// Encode a tool's result body; other bodies are [`encode_body`]'s.
fn encode_tool_body(e: &mut Encoder, body: &Body) {
    match body {
        Body::Write { summary } => e.message(10, |m| {
            m.string(26, summary);
        }),
        Body::Grep(g) => e.message(13, |m| {
            m.string(1, &g.query);
            opt_str(m, 2, &g.include);
            m.string(3, &g.output);
            for h in &g.hits {
                m.message(4, |hm| {
                    hm.string(1, &h.path).varint(2, h.line).string(3, &h.text);
                    opt_str(hm, 4, &h.abs_path);
                });
            }
            opt_str(m, 10, &g.command);
            opt_str(m, 11, &g.cwd);
        }),
        Body::ViewFile(v) => e.message(14, |m| {
            m.string(1, &v.uri);
            opt_varint(m, 2, v.start);
            opt_varint(m, 3, v.end);
            m.string(4, &v.content);
            opt_varint(m, 11, v.next_line);
            opt_varint(m, 12, v.total);
        }),
        Body::ListDirectory(l) => e.message(15, |m| {
            m.string(1, &l.dir);
            for entry in &l.entries {
                m.message(3, |em| {
                    em.string(1, &entry.name).varint(2, entry.is_dir as u64);
                    opt_varint(em, 4, entry.size);
                });
            }
        }),
        Body::RunCommand(r) => e.message(28, |m| {
            opt_str(m, 2, &r.cwd);
            if let Some(code) = r.exit_code {
                m.varint(6, code as u64);
            }
            m.message(21, |o| {
                o.string(1, &r.output);
            });
            opt_str(m, 23, &r.command);
        }),
        Body::ReadUrl(r) => e.message(40, |m| {
            m.string(1, &r.url);
            if r.title.is_some() || r.description.is_some() {
                m.message(2, |d| {
                    opt_str(d, 4, &r.title);
                    opt_str(d, 7, &r.description);
                });
            }
            opt_str(m, 6, &r.content_path);
        }),
        Body::SearchWeb(s) => e.message(42, |m| {
            m.string(1, &s.query);
            opt_str(m, 5, &s.summary);
        }),
        Body::McpTool(t) => e.message(47, |m| {
            m.string(1, &t.server);
            if let Some(call) = &t.call {
                m.message(2, |c| encode_tool_call(c, call));
            }
            opt_str(m, 3, &t.result);
            if t.user_rejected {
                m.varint(7, 1);
            }
        }),
        Body::Generic(g) => e.message(140, |m| {
            for (key, value) in &g.args {
                m.message(1, |a| {
                    a.string(1, key).string(2, value);
                });
            }
            if let Some(result) = &g.result {
                m.message(2, |r| {
                    r.string(1, result);
                });
            }
        }),
        _ => e,
    };
}

/// Encode a whole step payload: type, status, metadata, body and errors.
pub fn encode_step(step: &Step) -> Vec<u8> {
    let mut e = Encoder::new();
    e.varint(1, step.step_type.raw() as u64);
    e.varint(4, step.status.raw() as u64);
    if let Some(meta) = &step.metadata {
        e.bytes(5, &encode_metadata(meta));
    }
    if let Some(body) = &step.body {
        encode_body(&mut e, body);
    }
    for err in &step.errors {
        e.message(31, |m| {
            m.string(1, &err.message);
            opt_str(m, 2, &err.detail);
            opt_str(m, 3, &err.stack);
        });
    }
    if let Some(p) = &step.permission_request {
        e.message(56, |i| {
            i.message(21, |r| {
                r.message(1, |t| {
                    t.string(1, &p.action).string(2, &p.target);
                });
                opt_str(r, 4, &p.reason);
                opt_str(r, 5, &p.action_description);
            });
        });
    }
    for a in &step.answers {
        e.message(147, |m| {
            if a.allow {
                m.varint(1, 1);
            }
            opt_varint(m, 2, a.scope);
            if a.timed_out {
                m.varint(3, 1);
            }
        });
    }
    e.finish()
}

impl Step {
    /// A step with no body, for building.
    pub fn new(idx: i64, step_type: StepType, status: StepStatus) -> Step {
        Step {
            idx,
            step_type,
            status,
            body: None,
            metadata: None,
            errors: Vec::new(),
            permission_request: None,
            answers: Vec::new(),
            unknown_fields: Vec::new(),
            decode_error: None,
        }
    }

    pub fn with_body(mut self, body: Body) -> Step {
        self.body = Some(body);
        self
    }

    pub fn with_tool_call(mut self, call: ToolCall) -> Step {
        self.metadata
            .get_or_insert_with(Metadata::default)
            .tool_call = Some(call);
        self
    }

    /// The row this step would be written as (payload and metadata column).
    pub fn to_row(&self) -> StepRow {
        StepRow {
            idx: self.idx,
            step_type: self.step_type.raw(),
            status: self.status.raw(),
            payload: Some(encode_step(self)),
            metadata: self.metadata.as_ref().map(encode_metadata),
            ..StepRow::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planner_text_and_thinking_round_trip() {
        let step = Step::new(2, StepType::PlannerResponse, StepStatus::Done).with_body(
            Body::Planner(PlannerResponse {
                text: "hello".into(),
                thinking: "hmm".into(),
                ..Default::default()
            }),
        );
        let decoded = decode(&step.to_row());
        assert_eq!(decoded.body, step.body);
        assert!(
            decoded.unknown_fields.is_empty(),
            "{:?}",
            decoded.unknown_fields
        );
        assert!(decoded.decode_error.is_none());
    }

    #[test]
    fn tool_call_name_falls_back_to_field_9() {
        let mut e = Encoder::new();
        e.message(5, |m| {
            m.message(4, |t| {
                t.string(1, "c1").string(9, "view_file").string(3, "{}");
            });
        });
        let row = StepRow {
            idx: 0,
            step_type: 8,
            status: 3,
            payload: Some(e.finish()),
            ..Default::default()
        };
        let step = decode(&row);
        assert_eq!(step.tool_call().map(|c| c.name.as_str()), Some("view_file"));
    }

    #[test]
    fn garbage_payload_is_a_decode_error_not_a_panic() {
        let row = StepRow {
            idx: 0,
            step_type: 15,
            status: 3,
            payload: Some(vec![0x0a, 0xff]),
            ..Default::default()
        };
        let step = decode(&row);
        assert!(step.decode_error.is_some());
    }

    #[test]
    fn unknown_fields_keep_their_paths() {
        let mut e = Encoder::new();
        e.varint(1, 15);
        e.message(20, |m| {
            m.string(1, "hi").fixed32(99, 7);
        });
        e.fixed64(777, 1);
        let row = StepRow {
            idx: 0,
            step_type: 15,
            status: 3,
            payload: Some(e.finish()),
            ..Default::default()
        };
        let step = decode(&row);
        let paths: Vec<_> = step
            .unknown_fields
            .iter()
            .map(|p| format!("{}:{}", p.path, p.wire_type))
            .collect();
        assert_eq!(paths, vec!["20.99:i32", "777:i64"]);
    }

    #[test]
    fn turn_totals_add_every_count_but_the_model() {
        let call = |n: u64| Usage {
            model: 7,
            input_tokens: n,
            output_tokens: 2 * n,
            cache_write_tokens: 3 * n,
            cache_read_tokens: 4 * n,
            thinking_tokens: 5 * n,
            response_tokens: 6 * n,
        };
        let mut turn = call(1);
        turn += &call(10);
        assert_eq!(turn, call(11));
    }
}
