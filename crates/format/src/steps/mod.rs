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

/// A [`StepRow`] borrowed: the same columns, where they were read. The
/// live poller decodes a row in SQLite's own buffer ([`decode_row`]), not
/// a copy of it: a growing answer's blob is rewritten whole on every commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepRowRef<'a> {
    pub idx: i64,
    pub step_type: i64,
    pub status: i64,
    pub payload: Option<&'a [u8]>,
    pub metadata: Option<&'a [u8]>,
    pub error_details: Option<&'a [u8]>,
    pub permissions: Option<&'a [u8]>,
    pub task_details: Option<&'a [u8]>,
}

impl StepRow {
    pub fn borrowed(&self) -> StepRowRef<'_> {
        StepRowRef {
            idx: self.idx,
            step_type: self.step_type,
            status: self.status,
            payload: self.payload.as_deref(),
            metadata: self.metadata.as_deref(),
            error_details: self.error_details.as_deref(),
            permissions: self.permissions.as_deref(),
            task_details: self.task_details.as_deref(),
        }
    }

    /// The side columns this row has, in [`SIDE_COLUMNS`] order, each with
    /// its known-field tree.
    pub fn side_columns(&self) -> impl Iterator<Item = (&'static str, &[u8], &'static [Known])> {
        self.borrowed().side_columns()
    }
}

impl<'a> StepRowRef<'a> {
    pub fn to_owned_row(&self) -> StepRow {
        StepRow {
            idx: self.idx,
            step_type: self.step_type,
            status: self.status,
            payload: self.payload.map(<[u8]>::to_vec),
            metadata: self.metadata.map(<[u8]>::to_vec),
            error_details: self.error_details.map(<[u8]>::to_vec),
            permissions: self.permissions.map(<[u8]>::to_vec),
            task_details: self.task_details.map(<[u8]>::to_vec),
        }
    }

    /// The side columns this row has, in [`SIDE_COLUMNS`] order, each with
    /// its known-field tree.
    pub fn side_columns(&self) -> impl Iterator<Item = (&'static str, &'a [u8], &'static [Known])> {
        let blobs = [
            self.metadata,
            self.error_details,
            self.permissions,
            self.task_details,
        ];
        SIDE_COLUMNS
            .iter()
            .zip(blobs)
            .filter_map(|((column, tree), blob)| Some((*column, blob?, *tree)))
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

mod decode;
mod encode;
mod known;

pub use decode::{decode, decode_row};
pub use encode::{encode_body, encode_step};
pub use known::{
    column_tree, path_order, walk_paths, FieldPath, Kind, Known, LOAD_BEARING, METADATA,
    SIDE_COLUMNS, STEP, USAGE,
};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished step's row at idx 0 with only a payload.
    fn done_row(step_type: i64, payload: Vec<u8>) -> StepRow {
        StepRow {
            idx: 0,
            step_type,
            status: 3,
            payload: Some(payload),
            ..Default::default()
        }
    }

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
        let row = done_row(8, e.finish());
        let step = decode(&row);
        assert_eq!(step.tool_call().map(|c| c.name.as_str()), Some("view_file"));
    }

    #[test]
    fn invalid_utf8_in_a_text_is_replaced_not_refused() {
        let mut e = Encoder::new();
        e.varint(1, 15);
        e.message(20, |m| {
            m.bytes(1, b"caf\xc3 ok \xff");
        });
        let row = done_row(15, e.finish());
        match decode(&row).body {
            Some(Body::Planner(p)) => assert_eq!(p.text, "caf\u{fffd} ok \u{fffd}"),
            other => panic!("not a planner response: {other:?}"),
        }
    }

    #[test]
    fn garbage_payload_is_a_decode_error_not_a_panic() {
        let row = done_row(15, vec![0x0a, 0xff]);
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
        let row = done_row(15, e.finish());
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
