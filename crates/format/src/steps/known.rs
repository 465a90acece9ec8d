//! The known-field tree: every field path the decoder reads, by number
//! and kind. Any other path is "unknown" and reported; drift fingerprints
//! use the same tree to decide which length-delimited fields to descend into.

use super::*;

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
pub(crate) const TOOL_CALL: &[Known] = &[
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
pub(crate) const ERROR_DETAILS: &[Known] = &[
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
pub(crate) const PERMISSIONS: &[Known] = &[k(2, "request", Msg(PERMISSION))];
/// `steps.task_details`.
pub(crate) const TASK_DETAILS: &[Known] = &[
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
