//! The provider-neutral events as ACP session updates, and a finished
//! turn as its stop reason or its JSON-RPC error. Pure: no I/O, no clock,
//! no protocol connection, so every rule here is tested on events decoded
//! from real recordings.
//!
//! - answer text → `agent_message_chunk`, thinking → `agent_thought_chunk`;
//! - a tool call → `tool_call` with its kind, its title (the subject every
//!   view shows: `follow::subject::tool_line`), the locations its
//!   arguments name and its arguments as `rawInput`; its result →
//!   `tool_call_update` (`completed` or `failed`, agy's output or reason as
//!   content); an edit's result is handed to the session ([`Out::Edited`])
//!   to read the file off the runtime and send it as `diff` content;
//! - a call the gate announces before the database has it is one tool call
//!   with the database's (paired by tool and whole subject, as pi pairs
//!   them), so the client sees each call once;
//! - a subagent is a tool call of its own, its answer that call's content;
//! - agy's notes (a permission it asked, a notice, a degraded stream, a
//!   conversation agy did not have, a step this build cannot read) are
//!   thought chunks in the same words `run` and pi use;
//! - the conversation's title is a `session_info_update`.
//!
//! `replay` is the same mapping for `session/load`: the user's prompts
//! become `user_message_chunk`s and no file is read.

use crate::follow::events::{permission_line, Channel, Event};
use crate::follow::subject::{
    self, failure_reason, rule_subject, subagent_ended, subagent_started, FILE_KEYS, WHERE_KEYS,
};
use crate::runner::failure::Failure;
use crate::runner::{
    answer_from_agy_notice, degraded_notice, new_conversation_notice, permission_mode_notice,
    RunEvent, RunResult,
};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, SessionInfoUpdate, SessionUpdate, StopReason, TextContent,
    ToolCall, ToolCallContent, ToolCallId, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use agy_format::edits::Change;
use agy_format::text::same_key;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// The most of one tool's output put in its update (the whole output stays
/// in agy's conversation); longer output is cut with a line saying so.
pub const MAX_OUTPUT_CHARS: usize = 32 * 1024;

/// What one event asks of the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// Send this update.
    Update(Box<SessionUpdate>),
    /// agy is about to edit `path` (a tool call announced): remember what
    /// the file holds now, before agy writes (off the runtime).
    Before { path: PathBuf },
    /// An edit ended well: read `path` now (off the runtime) and send
    /// [`edited_update`] with its diff against what [`Out::Before`] saw
    /// (or, when that look came after agy wrote, against the text `change`
    /// undone: [`crate::acp::diffs`]).
    Edited {
        call: ToolCallId,
        path: PathBuf,
        summary: String,
        /// What agy's call did to the file's text, when it is one of agy's
        /// own file tools.
        change: Option<Change>,
    },
}

/// A tool call the client was told of.
#[derive(Debug, Clone)]
struct Shown {
    name: String,
    /// The file an edit writes, when it is one.
    edit: Option<PathBuf>,
    /// What the edit does to that file's text, when agy's arguments say.
    change: Option<Change>,
}

/// One turn's (or one replay's) mapping state.
#[derive(Debug)]
pub struct TurnMapper {
    cwd: PathBuf,
    replay: bool,
    /// The conversation the turn is bound to (for the decode hint).
    conversation: Option<String>,
    /// agy's call id → the ACP tool call id it was shown under.
    by_agy_id: HashMap<String, ToolCallId>,
    shown: HashMap<ToolCallId, Shown>,
    /// Calls the gate announced that the database has not shown yet, by
    /// tool and whole subject, oldest first.
    from_gate: HashMap<String, VecDeque<ToolCallId>>,
    /// Steps whose failed result was said: agy's error for the same step
    /// is not said again.
    failed_steps: HashSet<i64>,
    next: u64,
}

impl TurnMapper {
    /// A live turn in `cwd` (relative paths resolve against it, titles show
    /// paths inside it relative to it).
    pub fn new(cwd: &Path) -> TurnMapper {
        TurnMapper {
            cwd: cwd.to_path_buf(),
            replay: false,
            conversation: None,
            by_agy_id: HashMap::new(),
            shown: HashMap::new(),
            from_gate: HashMap::new(),
            failed_steps: HashSet::new(),
            next: 0,
        }
    }

    /// A conversation's history replayed (`session/load`).
    pub fn replay(cwd: &Path, conversation: &str) -> TurnMapper {
        TurnMapper {
            replay: true,
            conversation: Some(conversation.to_string()),
            ..TurnMapper::new(cwd)
        }
    }

    /// What the runner reported, as updates.
    pub fn run_event(&mut self, e: &RunEvent) -> Vec<Out> {
        let note = match e {
            RunEvent::Agy(ev) => return self.event(ev),
            RunEvent::Bound {
                conversation_id, ..
            } => {
                self.conversation = Some(conversation_id.clone());
                return Vec::new();
            }
            RunEvent::ConversationReplaced {
                requested,
                conversation_id,
            } => {
                self.conversation = Some(conversation_id.clone());
                new_conversation_notice(requested, conversation_id)
            }
            RunEvent::Degraded { reason } => degraded_notice(reason),
            RunEvent::AnswerFromAgy { reason } => answer_from_agy_notice(reason),
            RunEvent::PermissionMode { reported, expected } => {
                permission_mode_notice(reported, expected)
            }
            RunEvent::Started { .. } | RunEvent::Aborted | RunEvent::TimedOut => return Vec::new(),
        };
        vec![thought(&format!("[{note}]\n"))]
    }

    /// One agy event as updates.
    pub fn event(&mut self, e: &Event) -> Vec<Out> {
        match e {
            Event::Text { text, .. } => vec![message(text)],
            Event::Thinking { text, .. } => vec![thought(text)],
            Event::UserInput { text, .. } if self.replay => {
                vec![out(SessionUpdate::UserMessageChunk(chunk(text)))]
            }
            Event::UserInput { .. } => Vec::new(),
            Event::Rewrite { channel, text, .. } => rewrite(*channel, text),
            Event::ToolCall {
                id,
                name,
                arguments,
                ..
            } => self.tool_call(id, name, arguments),
            Event::ToolResult {
                idx,
                id,
                name,
                ok,
                summary,
                output,
                exit_code,
                ..
            } => {
                let result = ToolResult {
                    ok: *ok,
                    summary,
                    output: output.as_deref(),
                    exit_code: *exit_code,
                };
                self.tool_result(*idx, id, name, result)
            }
            Event::Title { title, .. } => vec![out(SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(title.as_str()),
            ))],
            Event::Error { idx, message } => self.error(*idx, message),
            Event::Subagent {
                conversation_id,
                role,
                task,
                ..
            } => vec![subagent_call(conversation_id, role.as_deref(), task.as_deref())],
            Event::SubagentEnded {
                conversation_id,
                role,
                ok,
                answer,
                error,
                ..
            } => {
                let words = subagent_ended(role.as_deref(), *ok, answer.as_deref(), error.as_deref());
                vec![update(
                    subagent_id(conversation_id),
                    ToolCallUpdateFields::new()
                        .status(if *ok { ToolCallStatus::Completed } else { ToolCallStatus::Failed })
                        .content(vec![text_content(&words)]),
                )]
            }
            Event::Notice { text, .. } => vec![thought(&format!("[agy: {}]\n", subject::sentence(text)))],
            Event::Permission {
                action,
                target,
                decision,
                ..
            } => vec![thought(&format!("[{}]\n", permission_line(action, target, *decision)))],
            Event::Unknown { idx, step_type } => vec![thought(&format!(
                "[agy-bridge: agy wrote a step of a type this build does not know ({step_type}, step {idx}); `agy-bridge drift {}` shows what changed]\n",
                self.database_hint()
            ))],
            Event::DecodeError { idx, message } => vec![thought(&format!(
                "[agy-bridge: step {idx} could not be read ({message}); `agy-bridge decode {}` shows it]\n",
                self.database_hint()
            ))],
        }
    }

    /// The gate heard of a call before agy ran it: shown now, pending, and
    /// paired with the database's showing of it when that comes. Returns
    /// the id the permission request names.
    pub fn gate_call(&mut self, name: &str, arguments: &str) -> (ToolCallId, Vec<Out>) {
        let id = self.fresh_id("gate");
        let out = self.show(&id, name, arguments, ToolCallStatus::Pending);
        self.from_gate
            .entry(identity(name, arguments))
            .or_default()
            .push_back(id.clone());
        (id, out)
    }

    /// The tool call `id` as a permission request shows it.
    pub fn permission_subject(
        &self,
        id: &ToolCallId,
        name: &str,
        arguments: &str,
    ) -> ToolCallUpdate {
        let fields = ToolCallUpdateFields::new()
            .title(subject::tool_line(name, arguments, Some(&self.cwd)).text())
            .kind(tool_kind(name, arguments))
            .status(ToolCallStatus::Pending)
            .raw_input(raw_input(arguments));
        ToolCallUpdate::new(id.clone(), fields)
    }

    fn tool_call(&mut self, agy_id: &str, name: &str, arguments: &str) -> Vec<Out> {
        if let Some(id) = self
            .from_gate
            .get_mut(&identity(name, arguments))
            .and_then(VecDeque::pop_front)
        {
            if !agy_id.is_empty() {
                self.by_agy_id.insert(agy_id.to_string(), id.clone());
            }
            return vec![update(
                id,
                ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
            )];
        }
        let id = if agy_id.is_empty() || self.shown.contains_key(&ToolCallId::new(agy_id)) {
            self.fresh_id("call")
        } else {
            ToolCallId::new(agy_id)
        };
        if !agy_id.is_empty() {
            self.by_agy_id.insert(agy_id.to_string(), id.clone());
        }
        self.show(&id, name, arguments, ToolCallStatus::InProgress)
    }

    /// The `tool_call` for `id`, and the file an edit is about to change.
    fn show(
        &mut self,
        id: &ToolCallId,
        name: &str,
        arguments: &str,
        status: ToolCallStatus,
    ) -> Vec<Out> {
        let edit = (!self.replay)
            .then(|| super::diffs::edit_path(name, arguments, &self.cwd))
            .flatten();
        let call = ToolCall::new(
            id.clone(),
            subject::tool_line(name, arguments, Some(&self.cwd)).text(),
        )
        .kind(tool_kind(name, arguments))
        .status(status)
        .locations(locations(arguments, &self.cwd))
        .raw_input(raw_input(arguments));
        let change = edit
            .as_ref()
            .and_then(|_| super::diffs::edit_change(name, arguments));
        self.shown.insert(
            id.clone(),
            Shown {
                name: name.to_string(),
                edit: edit.clone(),
                change,
            },
        );
        let mut out = vec![out(SessionUpdate::ToolCall(call))];
        if let Some(path) = edit {
            out.push(Out::Before { path });
        }
        out
    }

    fn tool_result(&mut self, idx: i64, agy_id: &str, name: &str, r: ToolResult<'_>) -> Vec<Out> {
        let mut out = Vec::new();
        let id = match self.by_agy_id.get(agy_id) {
            Some(id) => id.clone(),
            None => {
                // A result whose call was never shown (a stream that
                // began after it): shown now, then ended.
                let id = self.fresh_id("call");
                out.extend(self.show(&id, name, "{}", ToolCallStatus::InProgress));
                id
            }
        };
        let shown_name = self
            .shown
            .get(&id)
            .map_or(name, |s| s.name.as_str())
            .to_string();
        if !r.ok {
            self.failed_steps.insert(idx);
            let reason = failure_reason(&shown_name, r.summary);
            let mut content = vec![text_content(&reason)];
            if let Some(output) = r.output.filter(|o| !o.trim().is_empty()) {
                content.push(text_content(&cut(output)));
            }
            out.push(update(
                id,
                ToolCallUpdateFields::new()
                    .status(ToolCallStatus::Failed)
                    .content(content)
                    .raw_output(r.raw()),
            ));
            return out;
        }
        let edited = self
            .shown
            .get(&id)
            .and_then(|s| Some((s.edit.clone()?, s.change.clone())));
        if let Some((path, change)) = edited {
            out.push(Out::Edited {
                call: id,
                path,
                summary: r.summary.to_string(),
                change,
            });
            return out;
        }
        let body = match r.output.filter(|o| !o.trim().is_empty()) {
            Some(output) => cut(output),
            None => r.summary.to_string(),
        };
        let content = if body.trim().is_empty() {
            Vec::new()
        } else {
            vec![text_content(&body)]
        };
        out.push(update(
            id,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::Completed)
                .content(content)
                .raw_output(r.raw()),
        ));
        out
    }

    /// agy's error line, unless it repeats a failed tool's reason.
    fn error(&mut self, idx: i64, message: &str) -> Vec<Out> {
        if self.failed_steps.contains(&idx) {
            return Vec::new();
        }
        vec![thought(&format!(
            "[agy error: {}]\n",
            subject::sentence(message)
        ))]
    }

    fn fresh_id(&mut self, prefix: &str) -> ToolCallId {
        self.next += 1;
        ToolCallId::new(format!("agy-bridge-{prefix}-{}", self.next))
    }

    fn database_hint(&self) -> String {
        match &self.conversation {
            Some(id) => format!("~/.gemini/antigravity-cli/conversations/{id}.db"),
            None => "DB".to_string(),
        }
    }
}

/// A tool's result as the update needs it.
struct ToolResult<'a> {
    ok: bool,
    summary: &'a str,
    output: Option<&'a str>,
    exit_code: Option<i64>,
}

impl ToolResult<'_> {
    fn raw(&self) -> Value {
        let mut raw = json!({ "summary": self.summary });
        if let Some(code) = self.exit_code {
            raw["exitCode"] = json!(code);
        }
        raw
    }
}

/// The gate (or the user) refused call `id`: it failed, with why.
pub fn refused(id: &ToolCallId, reason: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.clone(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![text_content(&format!("denied: {reason}"))]),
    ))
}

/// The update that ends an edit: `completed`, the diff (when the file
/// could be read as text) and agy's summary.
pub fn edited_update(call: &ToolCallId, summary: &str, diff: Option<Diff>) -> SessionUpdate {
    let mut content: Vec<ToolCallContent> = diff.into_iter().map(ToolCallContent::Diff).collect();
    if !summary.trim().is_empty() {
        content.push(text_content(summary));
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call.clone(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .content(content)
            .raw_output(json!({ "summary": summary })),
    ))
}

/// What ACP hears of a finished turn: a stop reason, with a sentence the
/// user should read first; or the failure as a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Stop {
        reason: StopReason,
        /// Said as an agent message before the turn's response.
        say: Option<String>,
    },
    Failed(TurnFailure),
}

/// A turn that failed: the bridge's sentence, and the typed failure as
/// the error's data.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct TurnFailure {
    pub message: String,
    pub data: Option<Value>,
}

impl TurnFailure {
    /// A failure the bridge says in its own words (no agy failure behind it).
    pub fn said(message: impl Into<String>) -> TurnFailure {
        TurnFailure {
            message: message.into(),
            data: None,
        }
    }
}

/// How a finished turn ends for ACP. `cancelled`: the client sent
/// `session/cancel` for it (the protocol's `cancelled`, whatever the
/// runner saw). agy's print time limit is `max_tokens` (its work is kept,
/// a new prompt continues it); tools agy refused without asking anyone
/// are a `refusal`; every other failure is an error with its sentence.
pub fn ending(result: &RunResult, cancelled: bool) -> Ending {
    if cancelled {
        return stop(StopReason::Cancelled, None);
    }
    match &result.failure {
        None => stop(StopReason::EndTurn, None),
        Some(Failure::Aborted) => stop(StopReason::Cancelled, None),
        Some(f @ Failure::PrintTimeout) => stop(StopReason::MaxTokens, Some(f.to_string())),
        Some(f @ Failure::Denied { .. }) => stop(StopReason::Refusal, Some(f.to_string())),
        Some(f) => Ending::Failed(TurnFailure {
            message: f.to_string(),
            data: serde_json::to_value(f).ok(),
        }),
    }
}

fn stop(reason: StopReason, say: Option<String>) -> Ending {
    Ending::Stop { reason, say }
}

/// The ACP kind of a tool, from its name (agy's tools) and, for tools
/// seen only by name, its argument keys.
pub fn tool_kind(name: &str, arguments: &str) -> ToolKind {
    if subject::mcp_target(name, arguments).is_some() {
        return ToolKind::Other;
    }
    let n = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| n.contains(w));
    if has(&[
        "run_command",
        "send_command",
        "command_status",
        "shell",
        "exec",
    ]) {
        ToolKind::Execute
    } else if has(&["delete", "remove"]) {
        ToolKind::Delete
    } else if has(&["move", "rename"]) {
        ToolKind::Move
    } else if has(&["url", "browser", "fetch", "web"]) && !has(&["search"]) {
        ToolKind::Fetch
    } else if has(&["search", "grep", "find"]) {
        ToolKind::Search
    } else if has(&["view", "read", "list", "outline"]) {
        ToolKind::Read
    } else if has(&["write", "replace", "edit", "create_file"])
        || super::diffs::is_edit(name, arguments)
    {
        ToolKind::Edit
    } else if has(&["subagent", "task", "plan", "think"]) {
        ToolKind::Think
    } else {
        ToolKind::Other
    }
}

/// The files and directories a call's arguments name (a file with the
/// line it starts at), absolute against `cwd`.
pub fn locations(arguments: &str, cwd: &Path) -> Vec<ToolCallLocation> {
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
        return Vec::new();
    };
    let line = number(&args, "StartLine").and_then(|n| u32::try_from(n).ok());
    if let Some(file) = text(&args, FILE_KEYS) {
        let mut location = ToolCallLocation::new(absolute(&file, cwd));
        location.line = line;
        return vec![location];
    }
    text(&args, WHERE_KEYS)
        .map(|dir| vec![ToolCallLocation::new(absolute(&dir, cwd))])
        .unwrap_or_default()
}

fn text(args: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| {
        let (_, v) = args.iter().find(|(k, _)| same_key(k, key))?;
        let s = v.as_str()?.trim();
        (!s.is_empty()).then(|| s.to_string())
    })
}

fn number(args: &Map<String, Value>, key: &str) -> Option<u64> {
    let (_, v) = args.iter().find(|(k, _)| same_key(k, key))?;
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A path argument made absolute (agy writes `file://` URIs too).
fn absolute(raw: &str, cwd: &Path) -> PathBuf {
    let path = Path::new(raw.strip_prefix("file://").unwrap_or(raw));
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// A call's identity across the gate and the database: the tool and the
/// whole subject a rule would match (the call ids differ, or are absent).
fn identity(name: &str, arguments: &str) -> String {
    format!("{name}\u{0}{}", rule_subject(name, arguments))
}

fn raw_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

fn subagent_id(conversation_id: &str) -> ToolCallId {
    ToolCallId::new(format!("agy-subagent-{conversation_id}"))
}

fn subagent_call(conversation_id: &str, role: Option<&str>, task: Option<&str>) -> Out {
    let call = ToolCall::new(subagent_id(conversation_id), subagent_started(role, task))
        .kind(ToolKind::Think)
        .status(ToolCallStatus::InProgress)
        .raw_input(json!({ "role": role, "task": task, "conversationId": conversation_id }));
    out(SessionUpdate::ToolCall(call))
}

/// ACP cannot take back streamed text: the revision is said, then given in
/// full, as pi does.
fn rewrite(channel: Channel, text: &str) -> Vec<Out> {
    match channel {
        Channel::Text => vec![
            thought("[agy revised its answer; the revised text follows]\n"),
            message(text),
        ],
        Channel::Thinking => vec![thought("[agy revised its thinking]\n"), thought(text)],
    }
}

fn cut(output: &str) -> String {
    if output.chars().count() <= MAX_OUTPUT_CHARS {
        return output.to_string();
    }
    let kept: String = output.chars().take(MAX_OUTPUT_CHARS).collect();
    format!("{kept}\n… (cut at {MAX_OUTPUT_CHARS} characters; the whole output is in agy's conversation)")
}

fn out(update: SessionUpdate) -> Out {
    Out::Update(Box::new(update))
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

fn message(text: &str) -> Out {
    out(SessionUpdate::AgentMessageChunk(chunk(text)))
}

fn thought(text: &str) -> Out {
    out(SessionUpdate::AgentThoughtChunk(chunk(text)))
}

fn text_content(text: &str) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))
}

fn update(id: ToolCallId, fields: ToolCallUpdateFields) -> Out {
    out(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id, fields,
    )))
}

#[cfg(test)]
mod tests {
    // The mapping on events decoded from the corpus's recordings (their final
    // databases through one tracker, as a live turn streams them).

    use super::*;
    use crate::follow::events::Tracker;
    use agy_corpus::recording::{bundled_dir, resolve, Recording};
    use agy_format::steps;

    /// Every event of recording `name`'s root conversation.
    fn events_of(name: &str) -> Vec<Event> {
        let path = resolve(name, &bundled_dir()).expect("recording");
        let rec = Recording::load(&path).expect("load");
        let conn = rec
            .final_database(&rec.header.root_conversation)
            .expect("final db");
        let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
        let mut tracker = Tracker::new();
        rows.iter()
            .flat_map(|row| tracker.observe(&steps::decode(row)))
            .collect()
    }

    fn mapped(name: &str, cwd: &str) -> Vec<Out> {
        let mut mapper = TurnMapper::new(Path::new(cwd));
        events_of(name)
            .iter()
            .flat_map(|e| mapper.event(e))
            .collect()
    }

    fn updates(outs: &[Out]) -> Vec<&SessionUpdate> {
        outs.iter()
            .filter_map(|o| match o {
                Out::Update(u) => Some(&**u),
                _ => None,
            })
            .collect()
    }

    fn calls(outs: &[Out]) -> Vec<&ToolCall> {
        updates(outs)
            .into_iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn call_updates(outs: &[Out]) -> Vec<&ToolCallUpdate> {
        updates(outs)
            .into_iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCallUpdate(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn chunk_text(c: &ContentChunk) -> &str {
        match &c.content {
            ContentBlock::Text(t) => &t.text,
            _ => "",
        }
    }

    /// The concatenated text of every chunk of one kind.
    fn said(outs: &[Out], thought: bool) -> String {
        updates(outs)
            .into_iter()
            .filter_map(|u| match (u, thought) {
                (SessionUpdate::AgentThoughtChunk(c), true)
                | (SessionUpdate::AgentMessageChunk(c), false) => Some(chunk_text(c)),
                _ => None,
            })
            .collect()
    }

    fn content_text(fields: &ToolCallUpdateFields) -> String {
        fields
            .content
            .iter()
            .flatten()
            .filter_map(|c| match c {
                ToolCallContent::Content(c) => match &c.content {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn tools_are_calls_with_kind_title_locations_and_results() {
        let outs = mapped("tools", "/home/dev/project");
        let shown = calls(&outs);
        let summary: Vec<(&str, ToolKind, &str)> = shown
            .iter()
            .map(|c| (&*c.tool_call_id.0, c.kind, c.title.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("call-view-1", ToolKind::Read, "view_file src/lib.rs:1-20"),
                ("call-grep-1", ToolKind::Search, "grep_search sum_to"),
                ("call-list-1", ToolKind::Read, "list_dir ."),
                ("call-run-1", ToolKind::Execute, "run_command cargo test"),
                (
                    "call-edit-1",
                    ToolKind::Edit,
                    "replace_file_content src/lib.rs"
                ),
                ("call-run-2", ToolKind::Execute, "run_command ./deploy.sh"),
            ],
        );
        assert!(shown.iter().all(|c| c.status == ToolCallStatus::InProgress));
        let view = shown[0];
        assert_eq!(view.locations.len(), 1);
        assert_eq!(
            view.locations[0].path,
            Path::new("/home/dev/project/src/lib.rs")
        );
        assert_eq!(view.locations[0].line, Some(1));
        assert_eq!(
            view.raw_input
                .as_ref()
                .and_then(|v| v["StartLine"].as_u64()),
            Some(1)
        );

        let ends = call_updates(&outs);
        let status: Vec<(&str, Option<ToolCallStatus>)> = ends
            .iter()
            .map(|u| (&*u.tool_call_id.0, u.fields.status))
            .collect();
        assert_eq!(
            status,
            [
                ("call-view-1", Some(ToolCallStatus::Completed)),
                ("call-grep-1", Some(ToolCallStatus::Completed)),
                ("call-list-1", Some(ToolCallStatus::Completed)),
                ("call-run-1", Some(ToolCallStatus::Failed)),
                ("call-run-2", Some(ToolCallStatus::Failed)),
            ],
            "the edit's end is the session's (it reads the file): {ends:#?}"
        );
        assert!(content_text(&ends[0].fields).contains("pub fn sum_to"));
        assert!(content_text(&ends[3].fields).contains("test result: FAILED"));
        assert_eq!(
            ends[3]
                .fields
                .raw_output
                .as_ref()
                .map(|r| r["summary"].clone()),
            Some(json!("cargo test exited 101"))
        );
        // The failure's reason once, without the tool's own name; agy's error
        // line for the same step is not said again.
        assert_eq!(
            content_text(&ends[4].fields),
            "./deploy.sh: No such file or directory"
        );
        assert!(
            !said(&outs, true).contains("deploy.sh"),
            "{}",
            said(&outs, true)
        );
    }

    #[test]
    fn an_edit_is_snapshotted_before_and_diffed_after() {
        let outs = mapped("tools", "/home/dev/project");
        let lib = PathBuf::from("/home/dev/project/src/lib.rs");
        let before = outs
            .iter()
            .position(|o| o == &Out::Before { path: lib.clone() });
        let edited = outs.iter().position(|o| matches!(o, Out::Edited { call, path, .. } if &*call.0 == "call-edit-1" && path == &lib));
        assert!(
            before.is_some() && edited.is_some() && before < edited,
            "{outs:#?}"
        );
        let Some(Out::Edited {
            call,
            summary,
            change,
            ..
        }) = edited.map(|i| &outs[i])
        else {
            unreachable!()
        };
        // agy's arguments go with it, for a look that came too late.
        assert!(
            matches!(change, Some(Change::Replace(c)) if c[0].replacement == "    (0..=n).sum()"),
            "{change:?}"
        );
        let diff = Diff::new(&lib, "new\n").old_text(Some("old\n".to_string()));
        let SessionUpdate::ToolCallUpdate(done) = edited_update(call, summary, Some(diff)) else {
            panic!("an update")
        };
        assert_eq!(done.fields.status, Some(ToolCallStatus::Completed));
        let content = done.fields.content.expect("content");
        assert!(
            matches!(&content[0], ToolCallContent::Diff(d) if d.old_text.as_deref() == Some("old\n"))
        );
        assert_eq!(content.len(), 2, "the diff, then agy's summary");
    }

    #[test]
    fn text_and_thinking_are_message_and_thought_chunks_in_order() {
        let outs = mapped("thinking", "/w");
        let events = events_of("thinking");
        let thinking: String = events
            .iter()
            .filter_map(|e| match e {
                Event::Thinking { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Event::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(!thinking.is_empty() && !text.is_empty());
        assert_eq!(said(&outs, true), thinking);
        assert_eq!(said(&outs, false), text);
        // The prompt is the client's own: not echoed in a live turn.
        assert!(!updates(&outs)
            .iter()
            .any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))));
    }

    #[test]
    fn a_replay_gives_the_prompt_back_and_reads_no_file() {
        let mut mapper = TurnMapper::replay(Path::new("/home/dev/project"), "c0ffee");
        let outs: Vec<Out> = events_of("tools")
            .iter()
            .flat_map(|e| mapper.event(e))
            .collect();
        let first = updates(&outs).into_iter().find_map(|u| match u {
            SessionUpdate::UserMessageChunk(c) => Some(chunk_text(c).to_string()),
            _ => None,
        });
        assert_eq!(first.as_deref(), Some("Fix the failing test"));
        assert!(!outs
            .iter()
            .any(|o| matches!(o, Out::Before { .. } | Out::Edited { .. })));
        // Without a diff, the edit still ends.
        assert!(call_updates(&outs)
            .iter()
            .any(|u| &*u.tool_call_id.0 == "call-edit-1"
                && u.fields.status == Some(ToolCallStatus::Completed)));
    }

    #[test]
    fn the_title_is_session_info() {
        let outs = mapped("tools", "/w");
        let title = updates(&outs).into_iter().find_map(|u| match u {
            SessionUpdate::SessionInfoUpdate(i) => Some(serde_json::to_value(i).expect("json")),
            _ => None,
        });
        assert_eq!(
            title.map(|t| t["title"].clone()),
            Some(json!("Fixing a failing test"))
        );
    }

    #[test]
    fn a_subagent_is_a_call_its_answer_the_content() {
        let outs = mapped("subagent", "/w");
        let sub = calls(&outs)
            .into_iter()
            .find(|c| c.tool_call_id.0.starts_with("agy-subagent-"))
            .expect("the subagent's call");
        assert!(sub.title.starts_with("subagent"), "{}", sub.title);
        let end = call_updates(&outs)
            .into_iter()
            .find(|u| u.tool_call_id == sub.tool_call_id)
            .expect("its end");
        assert_eq!(end.fields.status, Some(ToolCallStatus::Completed));
        // The answer is the poller's to read from the subagent's own
        // database; the final database alone says it finished.
        assert!(
            content_text(&end.fields).starts_with("subagent researcher"),
            "{:?}",
            end.fields
        );
    }

    #[test]
    fn a_permission_agy_asked_is_a_thought_line() {
        let mut mapper = TurnMapper::new(Path::new("/w"));
        let outs = mapper.event(&Event::Permission {
            idx: 3,
            action: "command".into(),
            target: "rm -rf build".into(),
            reason: None,
            decision: crate::follow::events::PermissionDecision::Denied,
        });
        assert!(
            said(&outs, true).contains("agy asked permission for"),
            "{}",
            said(&outs, true)
        );
    }

    #[test]
    fn the_gates_call_and_the_databases_are_one_call() {
        let mut mapper = TurnMapper::new(Path::new("/home/dev/project"));
        let args = r#"{"CommandLine":"cargo test","Cwd":"/home/dev/project"}"#;
        let (id, outs) = mapper.gate_call("run_command", args);
        assert_eq!(calls(&outs)[0].status, ToolCallStatus::Pending);
        let db = Event::ToolCall {
            idx: 6,
            id: "call-run-1".into(),
            name: "run_command".into(),
            arguments:
                r#"{"CommandLine":"cargo test","Cwd":"/home/dev/project","toolSummary":"cargo test"}"#
                    .into(),
        };
        let outs = mapper.event(&db);
        assert!(calls(&outs).is_empty(), "shown once: {outs:#?}");
        assert_eq!(call_updates(&outs)[0].tool_call_id, id);
        let result = Event::ToolResult {
            idx: 7,
            id: "call-run-1".into(),
            name: "run_command".into(),
            status: "done".into(),
            ok: true,
            summary: "ok".into(),
            output: Some("1 passed".into()),
            exit_code: Some(0),
        };
        let outs = mapper.event(&result);
        assert_eq!(
            call_updates(&outs)[0].tool_call_id,
            id,
            "the result ends the gate's call"
        );
        let subject = mapper.permission_subject(&id, "run_command", args);
        assert_eq!(
            subject.fields.title.as_deref(),
            Some("run_command cargo test")
        );
        assert_eq!(subject.fields.kind, Some(ToolKind::Execute));
    }

    fn result_with(failure: Option<Failure>) -> RunResult {
        let mut r = RunResult::aborted_before_start();
        r.aborted = false;
        r.failure = failure;
        r
    }

    #[test]
    fn stop_reasons_and_failures() {
        let stop = |e: Ending| match e {
            Ending::Stop { reason, .. } => Some(reason),
            Ending::Failed(_) => None,
        };
        assert_eq!(
            stop(ending(&result_with(None), false)),
            Some(StopReason::EndTurn)
        );
        assert_eq!(
            stop(ending(&result_with(None), true)),
            Some(StopReason::Cancelled)
        );
        assert_eq!(
            stop(ending(&result_with(Some(Failure::Aborted)), false)),
            Some(StopReason::Cancelled)
        );
        assert_eq!(
            stop(ending(&result_with(Some(Failure::PrintTimeout)), false)),
            Some(StopReason::MaxTokens)
        );
        let denied = Failure::Denied {
            actions: Vec::new(),
        };
        assert_eq!(
            stop(ending(&result_with(Some(denied)), false)),
            Some(StopReason::Refusal)
        );
        let failed = ending(&result_with(Some(Failure::NotSignedIn)), false);
        let Ending::Failed(f) = failed else {
            panic!("a failure is an error")
        };
        assert_eq!(f.message, Failure::NotSignedIn.to_string());
        assert!(f.data.is_some());
    }

    #[test]
    fn kinds_by_name_and_keys() {
        assert_eq!(tool_kind("read_url_content", "{}"), ToolKind::Fetch);
        assert_eq!(tool_kind("search_web", "{}"), ToolKind::Search);
        assert_eq!(
            tool_kind("write_to_file", r#"{"TargetFile":"a","CodeContent":"b"}"#),
            ToolKind::Edit
        );
        assert_eq!(tool_kind("invoke_subagent", "{}"), ToolKind::Think);
        assert_eq!(
            tool_kind("call_mcp_tool", r#"{"ServerName":"pi","ToolName":"read"}"#),
            ToolKind::Other
        );
    }
}
