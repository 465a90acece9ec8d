//! Provider-neutral events, and the tracker that turns successive views of
//! the same steps into them.
//!
//! agy rewrites rows in place, so a step is seen many times as it grows. The
//! [`Tracker`] remembers what it already emitted for every step and emits only
//! what is new: text and thinking as deltas, everything else once. Decoding a
//! finished database is the same tracker fed the final rows once, so a live
//! stream and an after-the-fact decode agree by construction ([`Transcript`]).
//!
//! It also owns [`tool_subject`], the one place that says what a tool call
//! acted on, so every readable view (pi's thinking line, `run`, `decode`)
//! names it the same way.

use crate::format::text::{one_line, shorten};
use crate::steps::{Body, InteractionAnswer, Step, StepStatus, StepType, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// Which growing channel a delta or rewrite belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Text,
    Thinking,
}

/// One thing agy did, in a form no provider owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The user's prompt as agy recorded it (type 14). Never thinking.
    UserInput {
        idx: i64,
        text: String,
    },
    /// Answer text; consecutive events for one idx concatenate.
    Text {
        idx: i64,
        text: String,
    },
    /// Thinking (20.3); consecutive events for one idx concatenate.
    Thinking {
        idx: i64,
        text: String,
    },
    ToolCall {
        idx: i64,
        id: String,
        name: String,
        arguments: String,
    },
    ToolResult {
        idx: i64,
        id: String,
        name: String,
        status: String,
        ok: bool,
        summary: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        output: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        exit_code: Option<i64>,
    },
    Title {
        idx: i64,
        title: String,
    },
    Error {
        idx: i64,
        message: String,
    },
    Subagent {
        idx: i64,
        conversation_id: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        role: Option<String>,
    },
    /// A system message agy wrote into the conversation (type 101): its own
    /// notes and its subagents' reports. Neither answer nor thinking.
    Notice {
        idx: i64,
        text: String,
    },
    /// A permission agy asked for before running a tool (56.21), with the
    /// answer it got (147), once the answer is known or the step ended.
    Permission {
        idx: i64,
        action: String,
        target: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<String>,
        decision: PermissionDecision,
    },
    /// A step type this build does not know: carried, never dropped.
    Unknown {
        idx: i64,
        step_type: i64,
    },
    DecodeError {
        idx: i64,
        message: String,
    },
    /// agy rewrote already-emitted content into something that does not
    /// extend it; `text` is the whole new content of the channel.
    Rewrite {
        idx: i64,
        channel: Channel,
        text: String,
    },
}

/// How a permission request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionDecision {
    Allowed,
    Denied,
    TimedOut,
    /// The step ended without an answer being recorded.
    NoAnswer,
}

impl PermissionDecision {
    /// The newest answer's verdict (a timeout wins over the flag).
    fn from_answers(answers: &[InteractionAnswer]) -> Option<Self> {
        let last = answers.last()?;
        Some(if last.timed_out {
            PermissionDecision::TimedOut
        } else if last.allow {
            PermissionDecision::Allowed
        } else {
            PermissionDecision::Denied
        })
    }

    /// Words for people: "allowed", "denied", "timed out", "no answer".
    pub fn label(self) -> &'static str {
        match self {
            PermissionDecision::Allowed => "allowed",
            PermissionDecision::Denied => "denied",
            PermissionDecision::TimedOut => "timed out",
            PermissionDecision::NoAnswer => "no answer",
        }
    }
}

/// How every readable view words a permission, in one line:
/// `agy asked permission for command rm -rf build: denied`.
pub fn permission_line(action: &str, target: &str, decision: PermissionDecision) -> String {
    let what = format!("{} {}", action.trim(), target.trim());
    let what = shorten(&one_line(what.trim()), SUBJECT_MAX_CHARS);
    format!("agy asked permission for {what}: {}", decision.label())
}

/// Characters of a tool's subject shown on one line.
pub const SUBJECT_MAX_CHARS: usize = 80;

/// Argument keys naming what a tool acts on, best first (compared without
/// case). `toolSummary` is agy's own description and wins over all of them.
const SUBJECT_KEYS: &[&str] = &[
    "CommandLine",
    "AbsolutePath",
    "TargetFile",
    "Query",
    "Url",
    "SearchPath",
    "DirectoryPath",
    "SearchDirectory",
    "File",
    "Path",
];

/// What a tool call acted on, from its arguments JSON, in one line cut with
/// an ellipsis at [`SUBJECT_MAX_CHARS`]: agy's `toolSummary`, else the main
/// argument (command line, path, query, URL; a path inside `cwd` is shown
/// relative to it), else for `call_mcp_tool` the `SERVER/TOOL` it calls.
/// `None` when the arguments are not a JSON object or name nothing.
pub fn tool_subject(arguments: &str, cwd: Option<&Path>) -> Option<String> {
    let value: Value = serde_json::from_str(arguments).ok()?;
    let args = value.as_object()?;
    let text = |key: &str| {
        args.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.as_str())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let subject = if let Some(summary) = text("toolSummary") {
        summary.to_string()
    } else if let (Some(server), Some(tool)) = (text("ServerName"), text("ToolName")) {
        format!("{server}/{tool}")
    } else {
        let raw = SUBJECT_KEYS.iter().find_map(|k| text(k))?;
        relative_to(raw, cwd)
    };
    Some(shorten(&one_line(&subject), SUBJECT_MAX_CHARS))
}

/// A path argument shown relative to `cwd` when it lies inside it.
fn relative_to(raw: &str, cwd: Option<&Path>) -> String {
    let path = Path::new(raw.strip_prefix("file://").unwrap_or(raw));
    match cwd.and_then(|c| path.strip_prefix(c).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Some(rel) if path.is_absolute() => rel.display().to_string(),
        _ => raw.to_string(),
    }
}

impl Event {
    pub fn idx(&self) -> i64 {
        match self {
            Event::UserInput { idx, .. }
            | Event::Text { idx, .. }
            | Event::Thinking { idx, .. }
            | Event::ToolCall { idx, .. }
            | Event::ToolResult { idx, .. }
            | Event::Title { idx, .. }
            | Event::Error { idx, .. }
            | Event::Subagent { idx, .. }
            | Event::Notice { idx, .. }
            | Event::Permission { idx, .. }
            | Event::Unknown { idx, .. }
            | Event::DecodeError { idx, .. }
            | Event::Rewrite { idx, .. } => *idx,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Event::UserInput { .. } => "user_input",
            Event::Text { .. } => "text",
            Event::Thinking { .. } => "thinking",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolResult { .. } => "tool_result",
            Event::Title { .. } => "title",
            Event::Error { .. } => "error",
            Event::Subagent { .. } => "subagent",
            Event::Notice { .. } => "notice",
            Event::Permission { .. } => "permission",
            Event::Unknown { .. } => "unknown",
            Event::DecodeError { .. } => "decode_error",
            Event::Rewrite { .. } => "rewrite",
        }
    }
}

#[derive(Debug, Default)]
struct StepState {
    text: Emitted,
    thinking: Emitted,
    user_input: bool,
    title: String,
    tool_call: bool,
    result: bool,
    errors: Vec<String>,
    unknown: bool,
    decode_error: Option<String>,
    subagent: bool,
    notice: bool,
    permission: bool,
    finished: bool,
    waiting: bool,
    tool_name: Option<String>,
}

/// Remembers what was emitted per step; see the module comment.
#[derive(Debug, Default)]
pub struct Tracker {
    steps: HashMap<i64, StepState>,
    call_ids: HashSet<String>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `idx` has reached a terminal status.
    pub fn is_finished(&self, idx: i64) -> bool {
        self.steps.get(&idx).map(|s| s.finished).unwrap_or(false)
    }

    /// Steps whose last view was WAITING (agy wants user interaction, which
    /// print mode can never give).
    pub fn waiting_steps(&self) -> impl Iterator<Item = i64> + '_ {
        self.steps
            .iter()
            .filter(|(_, s)| s.waiting)
            .map(|(idx, _)| *idx)
    }

    /// The tool a step runs, from its own call (5.4) or its type.
    pub fn tool_name(&self, idx: i64) -> Option<&str> {
        self.steps.get(&idx).and_then(|s| s.tool_name.as_deref())
    }

    /// Feed one view of a step; returns what is new since the last view.
    pub fn observe(&mut self, step: &Step) -> Vec<Event> {
        let mut out = Vec::new();
        let own_call = step_call(step);
        let state = self.steps.entry(step.idx).or_default();
        state.finished = step.is_finished();
        state.waiting = step.status == StepStatus::Waiting;
        if let Some(name) = own_call
            .as_ref()
            .map(|c| c.name.as_str())
            .or_else(|| step.step_type.tool_name())
        {
            state.tool_name = Some(name.to_string());
        }
        state.problems(step, &mut out);
        state.content(step, &mut out);
        // Requested calls in a planner response, then the tool step's own call.
        if let Some(Body::Planner(p)) = &step.body {
            for call in &p.tool_calls {
                if !call.name.is_empty() && remember_call(&mut self.call_ids, step.idx, call) {
                    out.push(call_event(step.idx, call));
                }
            }
        }
        if !state.tool_call {
            if let Some(call) = tool_step_call(step, own_call) {
                state.tool_call = true;
                if remember_call(&mut self.call_ids, step.idx, &call) {
                    out.push(call_event(step.idx, &call));
                }
            }
        }
        state.permission(step, &mut out);
        state.result(step, &mut out);
        state.errors(step, &mut out);
        out
    }
}

impl StepState {
    /// A payload that did not decode, and a step type this build does not know.
    fn problems(&mut self, step: &Step, out: &mut Vec<Event>) {
        let idx = step.idx;
        if let Some(msg) = &step.decode_error {
            if self.decode_error.as_ref() != Some(msg) {
                self.decode_error = Some(msg.clone());
                out.push(Event::DecodeError {
                    idx,
                    message: msg.clone(),
                });
            }
        }
        if !step.step_type.is_known() && !self.unknown {
            self.unknown = true;
            out.push(Event::Unknown {
                idx,
                step_type: step.step_type.raw(),
            });
        }
    }

    /// What the body says: the prompt, text and thinking, a title, a
    /// subagent, a system message.
    fn content(&mut self, step: &Step, out: &mut Vec<Event>) {
        let idx = step.idx;
        match &step.body {
            Some(Body::UserInput(u)) if !self.user_input && !u.text.is_empty() => {
                self.user_input = true;
                out.push(Event::UserInput {
                    idx,
                    text: u.text.clone(),
                });
            }
            Some(Body::Planner(p)) => {
                let thinking = if p.thinking.is_empty() {
                    p.raw_thinking.as_deref().unwrap_or("")
                } else {
                    &p.thinking
                };
                grow(out, idx, Channel::Thinking, &mut self.thinking, thinking);
                let text = if p.text.is_empty() {
                    p.modified_response.as_deref().unwrap_or("")
                } else {
                    &p.text
                };
                grow(out, idx, Channel::Text, &mut self.text, text);
            }
            Some(Body::Checkpoint { title }) => {
                let title = title.split("\n\n").next().unwrap_or("").trim();
                if !title.is_empty() && self.title != title {
                    self.title = title.to_string();
                    out.push(Event::Title {
                        idx,
                        title: title.to_string(),
                    });
                }
            }
            Some(Body::Subagent(s)) if !self.subagent && !s.child_conversation_id.is_empty() => {
                self.subagent = true;
                out.push(Event::Subagent {
                    idx,
                    conversation_id: s.child_conversation_id.clone(),
                    role: s.role.clone(),
                });
            }
            Some(Body::SystemMessage { message }) if !self.notice && !message.trim().is_empty() => {
                self.notice = true;
                out.push(Event::Notice {
                    idx,
                    text: message.clone(),
                });
            }
            _ => {}
        }
    }

    /// A permission request, once its answer is known or the step ended.
    fn permission(&mut self, step: &Step, out: &mut Vec<Event>) {
        let Some(request) = step
            .permission_request
            .as_ref()
            .filter(|_| !self.permission)
        else {
            return;
        };
        let decision = PermissionDecision::from_answers(&step.answers)
            .or_else(|| step.is_finished().then_some(PermissionDecision::NoAnswer));
        if let Some(decision) = decision {
            self.permission = true;
            out.push(Event::Permission {
                idx: step.idx,
                action: request.action.clone(),
                target: request.target.clone(),
                reason: request.reason.clone(),
                decision,
            });
        }
    }

    /// A tool step's result, once the step is finished.
    fn result(&mut self, step: &Step, out: &mut Vec<Event>) {
        let has_result_body = step
            .body
            .as_ref()
            .map(Body::is_tool_result)
            .unwrap_or(false);
        if (has_result_body || step.step_type.tool_name().is_some())
            && step.is_finished()
            && !self.result
        {
            self.result = true;
            out.push(result_event(step));
        }
    }

    /// agy's error messages (model errors, error details), each once.
    fn errors(&mut self, step: &Step, out: &mut Vec<Event>) {
        let mut errors: Vec<String> = Vec::new();
        if let Some(Body::ModelError(e)) = &step.body {
            errors.push(e.message());
        }
        errors.extend(
            step.errors
                .iter()
                .filter(|e| !e.message.is_empty())
                .map(|e| e.message.clone()),
        );
        for message in errors {
            if !self.errors.contains(&message) {
                self.errors.push(message.clone());
                out.push(Event::Error {
                    idx: step.idx,
                    message,
                });
            }
        }
    }
}

/// The call a tool step announces itself: its own call, or once finished
/// the call its type stands for. Planner and user steps announce none.
fn tool_step_call(step: &Step, own_call: Option<ToolCall>) -> Option<ToolCall> {
    let is_tool_step = step.step_type.tool_name().is_some()
        || step
            .body
            .as_ref()
            .map(Body::is_tool_result)
            .unwrap_or(false)
        || step.tool_call().is_some();
    if !is_tool_step
        || matches!(
            step.step_type,
            StepType::PlannerResponse | StepType::UserInput
        )
    {
        return None;
    }
    match own_call {
        Some(c) => Some(c),
        None if step.is_finished() => step.step_type.tool_name().map(|n| ToolCall {
            name: n.to_string(),
            arguments: generic_arguments(step).unwrap_or_default(),
            ..ToolCall::default()
        }),
        None => None,
    }
}

fn remember_call(ids: &mut HashSet<String>, idx: i64, call: &ToolCall) -> bool {
    let key = if call.id.is_empty() {
        format!("{idx}\u{0}{}\u{0}{}", call.name, call.arguments)
    } else {
        call.id.clone()
    };
    ids.insert(key)
}

fn call_event(idx: i64, call: &ToolCall) -> Event {
    Event::ToolCall {
        idx,
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    }
}

/// What was emitted on one channel, without keeping it: its length and a
/// hash of it. agy rewrites a growing step whole on every commit, so keeping
/// the text would hold one more copy of the longest answer for the whole
/// turn; the hash is enough to tell growth (the old text is a prefix of the
/// new one) from a rewrite.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Emitted {
    len: usize,
    hash: u64,
}

impl Emitted {
    fn of(text: &str) -> Emitted {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(text.as_bytes());
        Emitted {
            len: text.len(),
            hash,
        }
    }

    /// The part of `new` after what was emitted, if `new` extends it.
    fn rest_of<'a>(&self, new: &'a str) -> Option<&'a str> {
        if self.len == 0 {
            return Some(new);
        }
        let (head, rest) = (new.get(..self.len)?, new.get(self.len..)?);
        (Emitted::of(head) == *self).then_some(rest)
    }
}

/// Emit the part of `new` that extends `emitted`, or a rewrite.
fn grow(out: &mut Vec<Event>, idx: i64, channel: Channel, emitted: &mut Emitted, new: &str) {
    if let Some(delta) = emitted.rest_of(new) {
        if delta.is_empty() {
            return;
        }
        let text = delta.to_string();
        *emitted = Emitted::of(new);
        out.push(match channel {
            Channel::Text => Event::Text { idx, text },
            Channel::Thinking => Event::Thinking { idx, text },
        });
    } else {
        *emitted = Emitted::of(new);
        out.push(Event::Rewrite {
            idx,
            channel,
            text: new.to_string(),
        });
    }
}

/// The call a tool step stands for: an MCP step's own call (47.2, named
/// `mcp:SERVER/TOOL`, keeping the metadata call's id so that it deduplicates
/// with the planner's `call_mcp_tool`), else its metadata call (5.4).
fn step_call(step: &Step) -> Option<ToolCall> {
    let meta = step.tool_call().filter(|c| !c.name.is_empty());
    if let Some(Body::McpTool(m)) = &step.body {
        if let Some(call) = &m.call {
            return Some(ToolCall {
                id: meta
                    .map(|c| c.id.clone())
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| call.id.clone()),
                name: m.display_name(),
                arguments: call.arguments.clone(),
            });
        }
    }
    meta.cloned()
}

/// A GENERIC step's arguments (140.1) as a JSON object, for a step whose
/// metadata carries no call. Values that are JSON stay JSON.
fn generic_arguments(step: &Step) -> Option<String> {
    let Some(Body::Generic(g)) = &step.body else {
        return None;
    };
    let args: Map<String, Value> = g
        .args
        .iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            (k.clone(), value)
        })
        .collect();
    Some(Value::Object(args).to_string())
}

/// The first non-empty line of `text`, cut for a summary.
fn first_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    shorten(line.unwrap_or(""), RESULT_SUMMARY_MAX_CHARS)
}

/// Characters of a result summary taken from free text (a search summary,
/// an MCP or generic tool's result).
const RESULT_SUMMARY_MAX_CHARS: usize = 120;

fn result_event(step: &Step) -> Event {
    let call = step_call(step);
    let name = call
        .as_ref()
        .map(|c| c.name.clone())
        .or_else(|| step.step_type.tool_name().map(str::to_string))
        .unwrap_or_else(|| format!("step_type_{}", step.step_type.raw()));
    let (summary, output, exit_code) = body_summary(step.body.as_ref());
    let rejected = matches!(&step.body, Some(Body::McpTool(m)) if m.user_rejected);
    let ok =
        step.status == StepStatus::Done && exit_code.map(|c| c == 0).unwrap_or(true) && !rejected;
    // A failed step's own error says why (e.g. "tool call denied by pre-tool
    // hook: ..."); a result with nothing else still says how the step ended.
    let error = step
        .errors
        .iter()
        .map(|e| e.message.as_str())
        .find(|m| !m.is_empty());
    let summary = match error {
        Some(message) if step.status != StepStatus::Done => message.to_string(),
        _ if summary.is_empty() => step.status.label().to_string(),
        _ => summary,
    };
    Event::ToolResult {
        idx: step.idx,
        id: call.map(|c| c.id).unwrap_or_default(),
        name,
        status: step.status.label().to_string(),
        ok,
        summary,
        output,
        exit_code,
    }
}

/// A tool result body's summary, output and exit code.
fn body_summary(body: Option<&Body>) -> (String, Option<String>, Option<i64>) {
    match body {
        Some(Body::Write { summary }) => (summary.clone(), None, None),
        Some(Body::Grep(g)) => (
            format!("{} hit(s) for {:?}", g.hits.len(), g.query),
            Some(g.output.clone()),
            None,
        ),
        Some(Body::ViewFile(v)) => {
            let range = match (v.start, v.end) {
                (Some(s), Some(e)) => format!(" lines {s}-{e}"),
                _ => String::new(),
            };
            (format!("{}{range}", v.uri), Some(v.content.clone()), None)
        }
        Some(Body::ListDirectory(l)) => {
            let names: Vec<String> = l
                .entries
                .iter()
                .map(|e| {
                    if e.is_dir {
                        format!("{}/", e.name)
                    } else {
                        e.name.clone()
                    }
                })
                .collect();
            (
                format!("{} ({} entries)", l.dir, l.entries.len()),
                Some(names.join("\n")),
                None,
            )
        }
        Some(Body::RunCommand(r)) => (
            format!(
                "{} exited {}",
                r.command.as_deref().unwrap_or("command"),
                r.exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "?".into())
            ),
            Some(r.output.clone()),
            r.exit_code,
        ),
        Some(Body::ReadUrl(r)) => (
            r.title.clone().unwrap_or_else(|| r.url.clone()),
            r.description.clone(),
            None,
        ),
        // 42.5 is agy's summary of the search: the result's own words.
        Some(Body::SearchWeb(s)) => match s.summary.as_deref().filter(|t| !t.trim().is_empty()) {
            Some(text) => (first_line(text), Some(text.to_string()), None),
            None => (format!("search {:?}", s.query), None, None),
        },
        Some(Body::McpTool(m)) if m.user_rejected => {
            ("the user rejected this call".into(), m.result.clone(), None)
        }
        Some(Body::McpTool(m)) => (
            first_line(m.result.as_deref().unwrap_or("")),
            m.result.clone(),
            None,
        ),
        Some(Body::Generic(g)) => {
            let summary = match g.result.as_deref().map(first_line) {
                Some(line) if !line.is_empty() => line,
                _ => g
                    .args
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            (summary, g.result.clone(), None)
        }
        _ => (String::new(), None, None),
    }
}

/// Decode a whole set of rows at once: the tracker fed each step one time.
pub fn decode_all<'a>(steps: impl IntoIterator<Item = &'a Step>) -> Vec<Event> {
    let mut tracker = Tracker::new();
    steps.into_iter().flat_map(|s| tracker.observe(s)).collect()
}

/// Join adjacent text and thinking deltas of the same step. Snapshots use
/// this form so that poll timing cannot change them.
pub fn merge(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for event in events {
        match (out.last_mut(), &event) {
            (Some(Event::Text { idx: a, text }), Event::Text { idx: b, text: more })
            | (Some(Event::Thinking { idx: a, text }), Event::Thinking { idx: b, text: more })
                if a == b =>
            {
                text.push_str(more);
            }
            _ => out.push(event),
        }
    }
    out
}

/// What a stream amounts to once every delta and rewrite is applied: per
/// step, its items in order, with each channel's final content in the place it
/// first appeared. A live stream and a one-shot decode of the final rows have
/// equal transcripts whenever agy only ever grew its content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Transcript {
    pub steps: BTreeMap<i64, Vec<Event>>,
}

impl Transcript {
    pub fn from_events(events: impl IntoIterator<Item = Event>) -> Transcript {
        let mut t = Transcript::default();
        for event in events {
            let items = t.steps.entry(event.idx()).or_default();
            let channel = match &event {
                Event::Text { .. } => Some(Channel::Text),
                Event::Thinking { .. } => Some(Channel::Thinking),
                Event::Rewrite { channel, .. } => Some(*channel),
                _ => None,
            };
            let Some(channel) = channel else {
                items.push(event);
                continue;
            };
            let (idx, piece, replace) = match event {
                Event::Text { idx, text } | Event::Thinking { idx, text } => (idx, text, false),
                Event::Rewrite { idx, text, .. } => (idx, text, true),
                _ => continue,
            };
            let slot = items.iter_mut().find_map(|e| match (e, channel) {
                (Event::Text { text, .. }, Channel::Text)
                | (Event::Thinking { text, .. }, Channel::Thinking) => Some(text),
                _ => None,
            });
            match slot {
                Some(text) if replace => *text = piece,
                Some(text) => text.push_str(&piece),
                None => items.push(match channel {
                    Channel::Text => Event::Text { idx, text: piece },
                    Channel::Thinking => Event::Thinking { idx, text: piece },
                }),
            }
        }
        t
    }

    /// All answer text, steps in order.
    pub fn text(&self) -> String {
        self.steps
            .values()
            .flatten()
            .filter_map(|e| match e {
                Event::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The final answer as agy prints it: the text of the last step whose
    /// answer text is not blank.
    pub fn last_answer(&self) -> Option<&str> {
        self.steps.values().rev().find_map(|items| {
            items.iter().find_map(|e| match e {
                Event::Text { text, .. } if !text.trim().is_empty() => Some(text.as_str()),
                _ => None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(args: serde_json::Value, cwd: Option<&str>) -> Option<String> {
        tool_subject(&args.to_string(), cwd.map(Path::new))
    }

    #[test]
    fn tool_summary_wins_over_the_main_argument() {
        let args =
            serde_json::json!({"CommandLine": "cargo test --all", "toolSummary": "run the tests"});
        assert_eq!(subject(args, None).as_deref(), Some("run the tests"));
    }

    #[test]
    fn main_arguments_name_the_subject() {
        for (args, want) in [
            (
                serde_json::json!({"CommandLine": "cargo test", "Cwd": "/w"}),
                "cargo test",
            ),
            (
                serde_json::json!({"AbsolutePath": "/elsewhere/a.rs"}),
                "/elsewhere/a.rs",
            ),
            (serde_json::json!({"query": "rust 1.95"}), "rust 1.95"),
            (
                serde_json::json!({"Query": "sum_to", "SearchPath": "/w"}),
                "sum_to",
            ),
            (
                serde_json::json!({"Url": "https://example.com/x"}),
                "https://example.com/x",
            ),
            (serde_json::json!({"DirectoryPath": "/w/src"}), "src"),
            (
                serde_json::json!({"TargetFile": "file:///w/src/lib.rs", "CodeContent": "x"}),
                "src/lib.rs",
            ),
            (serde_json::json!({"SearchPath": "/w"}), "."),
            (
                serde_json::json!({"ServerName": "github", "ToolName": "create_issue", "Arguments": {"title": "x"}}),
                "github/create_issue",
            ),
        ] {
            assert_eq!(
                subject(args.clone(), Some("/w")).as_deref(),
                Some(want),
                "{args}"
            );
        }
    }

    #[test]
    fn relative_arguments_are_not_rewritten() {
        let args = serde_json::json!({"AbsolutePath": "src/lib.rs"});
        assert_eq!(subject(args, Some("src")).as_deref(), Some("src/lib.rs"));
    }

    #[test]
    fn subject_is_one_line_cut_with_an_ellipsis() {
        let args = serde_json::json!({"CommandLine": format!("echo a\necho {}", "b".repeat(100))});
        let got = subject(args, None).expect("a subject");
        assert!(got.starts_with("echo a echo bbb"), "{got}");
        assert!(got.ends_with('…'), "{got}");
        assert_eq!(got.chars().count(), SUBJECT_MAX_CHARS + 1);
    }

    #[test]
    fn nothing_to_name_is_none() {
        assert_eq!(tool_subject("not json", None), None);
        assert_eq!(tool_subject("[1,2]", None), None);
        assert_eq!(
            subject(serde_json::json!({"Other": "x", "CommandLine": "  "}), None),
            None
        );
    }

    #[test]
    fn permission_subject_and_decision_read_as_words() {
        assert_eq!(
            permission_line("command", " rm -rf build ", PermissionDecision::Allowed),
            "agy asked permission for command rm -rf build: allowed"
        );
        assert_eq!(PermissionDecision::TimedOut.label(), "timed out");
        let answers = [InteractionAnswer {
            allow: true,
            timed_out: true,
            scope: None,
        }];
        assert_eq!(
            PermissionDecision::from_answers(&answers),
            Some(PermissionDecision::TimedOut)
        );
        assert_eq!(PermissionDecision::from_answers(&[]), None);
    }

    fn feed(emitted: &mut Emitted, new: &str) -> Vec<Event> {
        let mut out = Vec::new();
        grow(&mut out, 1, Channel::Text, emitted, new);
        out
    }

    #[test]
    fn growth_is_a_delta_and_anything_else_a_rewrite_without_keeping_the_text() {
        let mut e = Emitted::default();
        assert_eq!(feed(&mut e, ""), vec![]);
        let text = |t: &str| Event::Text {
            idx: 1,
            text: t.into(),
        };
        assert_eq!(feed(&mut e, "Hello"), vec![text("Hello")]);
        assert_eq!(feed(&mut e, "Hello"), vec![]);
        assert_eq!(feed(&mut e, "Hello, wörld"), vec![text(", wörld")]);
        // Same length, different content; then shorter: both rewrites.
        let rewrite = |t: &str| Event::Rewrite {
            idx: 1,
            channel: Channel::Text,
            text: t.into(),
        };
        assert_eq!(feed(&mut e, "Jello, wörld"), vec![rewrite("Jello, wörld")]);
        assert_eq!(feed(&mut e, "Jello"), vec![rewrite("Jello")]);
        // A cut inside a multi-byte char cannot be a prefix.
        let mut e = Emitted::of("wö");
        assert_eq!(feed(&mut e, "wx"), vec![rewrite("wx")]);
        assert_eq!(e, Emitted::of("wx"));
    }
}
