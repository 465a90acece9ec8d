//! Provider-neutral events, and the tracker that turns successive views of
//! the same steps into them.
//!
//! agy rewrites rows in place, so a step is seen many times as it grows. The
//! [`Tracker`] remembers what it already emitted for every step and emits only
//! what is new: text and thinking as deltas, everything else once. Decoding a
//! finished database is the same tracker fed the final rows once, so a live
//! stream and an after-the-fact decode agree by construction ([`Transcript`](crate::follow::transcript::Transcript)).
//!
//! One MCP call is one tool call here however agy records it (its
//! planner's `call_mcp_tool` and its type-38 step, whose result goes under
//! the planner's call id), and a subagent is
//! announced with its role and task and ends with its own event, so that
//! every view can show each once. What a tool call acted on is worded in
//! `super::subject`.

use super::calls::{step_call, tool_step_call};
use super::subject::SUBJECT_MAX_CHARS;
use super::text_hash::TextHash;
use agy_format::steps::{Body, InteractionAnswer, Step, StepStatus, ToolCall};
use agy_format::text::{one_line, shorten};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Which growing channel a delta or rewrite belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// The answer the model writes for the user.
    Text,
    /// The model's thinking, shown apart from the answer.
    Thinking,
}

/// One thing agy did, in a form no provider owns.
///
/// Every event carries `idx`: the step of agy's conversation it comes from,
/// so events of one step can be grouped and a view can say where each began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The user's prompt as agy recorded it (type 14). Never thinking.
    UserInput {
        /// The step it comes from.
        idx: i64,
        /// The prompt, as agy stored it.
        text: String,
    },
    /// Answer text; consecutive events for one idx concatenate.
    Text {
        /// The step it comes from.
        idx: i64,
        /// The new text, a delta to append.
        text: String,
    },
    /// Thinking (20.3); consecutive events for one idx concatenate.
    Thinking {
        /// The step it comes from.
        idx: i64,
        /// The new thinking, a delta to append.
        text: String,
    },
    /// A tool call the model made, announced once its arguments are known.
    ToolCall {
        /// The step it comes from.
        idx: i64,
        /// The call's id, which its [`Event::ToolResult`] repeats.
        id: String,
        /// The tool agy ran, in agy's own name (`run_command`, an MCP tool, ...).
        name: String,
        /// The call's arguments as a JSON object's text.
        arguments: String,
    },
    /// How a tool call ended, once its step is finished.
    ToolResult {
        /// The step it comes from.
        idx: i64,
        /// The id of the [`Event::ToolCall`] it answers.
        id: String,
        /// The tool that ran.
        name: String,
        /// agy's status word for the step (`done`, `error`, `canceled`, ...).
        status: String,
        /// Whether the tool succeeded.
        ok: bool,
        /// One line saying what the tool did, for a view to show.
        summary: String,
        /// What the tool printed or returned, when agy recorded it.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        output: Option<String>,
        /// A command's exit code, when the tool ran one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        exit_code: Option<i64>,
    },
    /// The title agy gave the conversation.
    Title {
        /// The step it comes from.
        idx: i64,
        /// The conversation's title.
        title: String,
    },
    /// An error agy recorded in the conversation (a failed model call, ...).
    Error {
        /// The step it comes from.
        idx: i64,
        /// agy's message, as it wrote it.
        message: String,
    },
    /// A subagent started (type 127): its own conversation, its role and
    /// the task its call gave it.
    Subagent {
        /// The step it comes from.
        idx: i64,
        /// The subagent's own conversation.
        conversation_id: String,
        /// The role agy gave it, when named.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        role: Option<String>,
        /// The task its call gave it, when recorded.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task: Option<String>,
    },
    /// A subagent's step ended. `answer` is the subagent's final answer, read
    /// from its own conversation by whoever can (the poller, when the
    /// database is beside the one it follows); `error` is why it failed.
    SubagentEnded {
        /// The step it comes from.
        idx: i64,
        /// The subagent's own conversation.
        conversation_id: String,
        /// The role agy gave it, when named.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        role: Option<String>,
        /// Whether it finished without an error.
        ok: bool,
        /// Its final answer, when it could be read.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        answer: Option<String>,
        /// Why it failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<String>,
    },
    /// A system message agy wrote into the conversation (type 101): its own
    /// notes and its subagents' reports. Neither answer nor thinking.
    Notice {
        /// The step it comes from.
        idx: i64,
        /// The message.
        text: String,
    },
    /// A permission agy asked for before running a tool (56.21), with the
    /// answer it got (147), once the answer is known or the step ended.
    Permission {
        /// The step it comes from.
        idx: i64,
        /// What agy asked to do, in its words (`write`, `run`, ...).
        action: String,
        /// What it would act on: a path, a command line, a URL.
        target: String,
        /// The reason agy gave, when it gave one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<String>,
        /// How the request ended.
        decision: PermissionDecision,
    },
    /// A step type this build does not know: carried, never dropped.
    Unknown {
        /// The step it comes from.
        idx: i64,
        /// agy's number for the step's type.
        step_type: i64,
    },
    /// A step whose bytes could not be decoded; the rest of the stream goes on.
    DecodeError {
        /// The step it comes from.
        idx: i64,
        /// What was wrong with it.
        message: String,
    },
    /// agy rewrote already-emitted content into something that does not
    /// extend it; `text` is the whole new content of the channel.
    Rewrite {
        /// The step it comes from.
        idx: i64,
        /// Which channel was rewritten.
        channel: Channel,
        /// The channel's whole new content.
        text: String,
    },
}

/// How a permission request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionDecision {
    /// The user allowed it.
    Allowed,
    /// The user denied it.
    Denied,
    /// Nobody answered in time, which agy takes as a denial.
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
    pub(crate) fn label(self) -> &'static str {
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
pub(crate) fn permission_line(action: &str, target: &str, decision: PermissionDecision) -> String {
    let what = format!("{} {}", action.trim(), target.trim());
    let what = shorten(&one_line(what.trim()), SUBJECT_MAX_CHARS);
    format!("agy asked permission for {what}: {}", decision.label())
}

impl Event {
    /// The step the event comes from.
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
            | Event::SubagentEnded { idx, .. }
            | Event::Notice { idx, .. }
            | Event::Permission { idx, .. }
            | Event::Unknown { idx, .. }
            | Event::DecodeError { idx, .. }
            | Event::Rewrite { idx, .. } => *idx,
        }
    }

    /// The event's kind as its JSON form names it (`tool_call`, `text`, ...).
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
            Event::SubagentEnded { .. } => "subagent_ended",
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
    /// The role its start named, for its end.
    subagent_role: Option<String>,
    notice: bool,
    permission: bool,
    finished: bool,
    waiting: bool,
    tool_name: Option<String>,
    /// The planner's call an MCP step answers, when its own call has an id
    /// of its own: its result goes under the planner's id, so a client that
    /// was shown that call sees it end.
    answers: Option<String>,
}

/// Remembers what was emitted per step; see the module comment.
#[derive(Debug, Default)]
pub struct Tracker {
    steps: HashMap<i64, StepState>,
    call_ids: HashSet<String>,
    /// The planner's `call_mcp_tool` calls whose MCP step has not been seen:
    /// (server, tool, call id). agy's type-38 step may carry a call id of its
    /// own, so it is matched to the planner's call by server and tool too.
    mcp_calls: Vec<McpCall>,
    /// The arguments of the planner's `invoke_subagent` calls whose subagent
    /// step has not been seen, for a subagent step that carries no call.
    subagent_calls: std::collections::VecDeque<String>,
}

impl Tracker {
    /// A tracker that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `idx` has reached a terminal status.
    pub fn is_finished(&self, idx: i64) -> bool {
        self.steps.get(&idx).map(|s| s.finished).unwrap_or(false)
    }

    /// Steps whose last view was WAITING (agy wants user interaction, which
    /// print mode can never give).
    pub(crate) fn waiting_steps(&self) -> impl Iterator<Item = i64> + '_ {
        self.steps
            .iter()
            .filter(|(_, s)| s.waiting)
            .map(|(idx, _)| *idx)
    }

    /// The tool a step runs, from its own call (5.4) or its type.
    pub(crate) fn tool_name(&self, idx: i64) -> Option<&str> {
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
        let started = match &step.body {
            Some(Body::Subagent(s)) => !state.subagent && !s.child_conversation_id.is_empty(),
            _ => false,
        };
        let call = if started {
            subagent_call(&mut self.subagent_calls, own_call.as_ref())
        } else {
            None
        };
        state.content(step, call.as_deref(), &mut out);
        // Requested calls in a planner response, then the tool step's own call.
        if let Some(Body::Planner(p)) = &step.body {
            for call in &p.tool_calls {
                if !call.name.is_empty() && remember_call(&mut self.call_ids, step.idx, call) {
                    requested(&mut self.mcp_calls, &mut self.subagent_calls, call);
                    out.push(call_event(step.idx, call));
                }
            }
        }
        if !state.tool_call {
            if let Some(call) = tool_step_call(step, own_call) {
                state.tool_call = true;
                let announced = mcp_step_announced(&mut self.mcp_calls, step, &call);
                if remember_call(&mut self.call_ids, step.idx, &call) && announced.is_none() {
                    out.push(call_event(step.idx, &call));
                }
                state.answers = announced.filter(|id| !id.is_empty());
            }
        }
        state.permission(step, &mut out);
        state.result(step, &mut out);
        state.errors(step, &mut out);
        out
    }
}

/// (server, tool, call id) of a planner's MCP call.
type McpCall = (String, String, String);

/// Remember a planner's call that a later step of its own answers.
fn requested(
    mcp_calls: &mut Vec<McpCall>,
    subagent_calls: &mut std::collections::VecDeque<String>,
    call: &ToolCall,
) {
    if let Some((server, tool)) = super::subject::mcp_target(&call.name, &call.arguments) {
        mcp_calls.push((server, tool, call.id.clone()));
    } else if call.name == "invoke_subagent" {
        subagent_calls.push_back(call.arguments.clone());
    }
}

/// The id of the planner's call an MCP step's call is, if its planner
/// already announced it (by call id, else by server and tool, oldest
/// first); that planner call is then answered.
fn mcp_step_announced(
    mcp_calls: &mut Vec<McpCall>,
    step: &Step,
    call: &ToolCall,
) -> Option<String> {
    let Some(Body::McpTool(m)) = &step.body else {
        return None;
    };
    let tool = m.call.as_ref().map(|c| c.name.as_str()).unwrap_or("");
    let by_id = |c: &McpCall| !call.id.is_empty() && c.2 == call.id;
    let by_target = |c: &McpCall| c.0 == m.server && c.1 == tool;
    let found = match mcp_calls.iter().position(by_id) {
        Some(i) => Some(i),
        None => mcp_calls.iter().position(by_target),
    };
    found.map(|i| mcp_calls.remove(i).2)
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
    /// subagent (with `call`, the arguments of the call that started it), a
    /// system message.
    fn content(&mut self, step: &Step, call: Option<&str>, out: &mut Vec<Event>) {
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
                let role = s.role.clone().filter(|r| !r.trim().is_empty());
                self.subagent_role = role
                    .or_else(|| call.and_then(super::subject::subagent_role))
                    .or_else(|| s.kind.clone().filter(|k| !k.trim().is_empty()));
                out.push(Event::Subagent {
                    idx,
                    conversation_id: s.child_conversation_id.clone(),
                    role: self.subagent_role.clone(),
                    task: call.and_then(super::subject::subagent_task),
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
            out.push(match &step.body {
                Some(Body::Subagent(s)) if !s.child_conversation_id.is_empty() => {
                    let role = self.subagent_role.clone();
                    subagent_ended(step, s, role.or_else(|| s.role.clone()))
                }
                _ => result_event(step, self.answers.as_deref()),
            });
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

/// The arguments of the call that started a subagent: the step's own call
/// (which then no longer waits in `requested`), else the oldest planner call
/// of `invoke_subagent` not yet matched.
fn subagent_call(
    requested: &mut std::collections::VecDeque<String>,
    own: Option<&ToolCall>,
) -> Option<String> {
    match own {
        Some(call) => {
            if let Some(i) = requested.iter().position(|a| *a == call.arguments) {
                requested.remove(i);
            }
            Some(call.arguments.clone())
        }
        None => requested.pop_front(),
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

/// What was emitted on one channel, without keeping it: a hash of it
/// ([`TextHash`], which counts its length). agy rewrites a growing step
/// whole on every commit, so keeping the text would hold one more copy of
/// the longest answer for the whole turn; the hash is enough to tell growth
/// (the old text is a prefix of the new one) from a rewrite. The hash of a
/// grown text goes on from its verified head, so a commit hashes its text
/// once, not its head and then all of it again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Emitted(TextHash);

impl Emitted {
    fn of(text: &str) -> Emitted {
        Emitted(TextHash::of(text.as_bytes()))
    }

    /// If `new` extends what was emitted: the part after it, and what is
    /// emitted once that part is.
    fn extended_by<'a>(&self, new: &'a str) -> Option<(&'a str, Emitted)> {
        let (head, rest) = (new.get(..self.0.len())?, new.get(self.0.len()..)?);
        let mut hash = TextHash::of(head.as_bytes());
        if hash != self.0 {
            return None;
        }
        hash.write(rest.as_bytes());
        Some((rest, Emitted(hash)))
    }
}

/// Emit the part of `new` that extends `emitted`, or a rewrite.
fn grow(out: &mut Vec<Event>, idx: i64, channel: Channel, emitted: &mut Emitted, new: &str) {
    if let Some((delta, grown)) = emitted.extended_by(new) {
        if delta.is_empty() {
            return;
        }
        let text = delta.to_string();
        *emitted = grown;
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

/// The first non-empty line of `text`, cut for a summary.
fn first_line(text: &str) -> String {
    agy_format::text::first_line(text, RESULT_SUMMARY_MAX_CHARS)
}

/// Characters of a result summary taken from free text (a search summary,
/// an MCP or generic tool's result).
const RESULT_SUMMARY_MAX_CHARS: usize = 120;

/// A subagent step's end: how it ended and, if it failed, agy's reason.
/// The answer is the subagent's own conversation's, which this step does
/// not hold (see [`Event::SubagentEnded`]).
fn subagent_ended(step: &Step, s: &agy_format::steps::Subagent, role: Option<String>) -> Event {
    let ok = step.status == StepStatus::Done;
    let error = step
        .errors
        .iter()
        .map(|e| e.message.clone())
        .find(|m| !m.is_empty())
        .or_else(|| (!ok).then(|| step.status.label().to_string()));
    Event::SubagentEnded {
        idx: step.idx,
        conversation_id: s.child_conversation_id.clone(),
        role: role.filter(|r| !r.trim().is_empty()),
        ok,
        answer: None,
        error: error.filter(|_| !ok),
    }
}

/// A tool step's result; `answers`: the planner's call id it goes under
/// (an MCP step matched to its planner's call), else the step's own.
fn result_event(step: &Step, answers: Option<&str>) -> Event {
    let call = step_call(step);
    let name = call
        .as_ref()
        .map(|c| c.name.clone())
        .or_else(|| step.step_type.tool_name().map(str::to_string))
        .unwrap_or_else(|| format!("step_type_{}", step.step_type.raw()));
    let (summary, output, exit_code) = body_summary(step.body.as_ref());
    let rejected = matches!(&step.body, Some(Body::McpTool(m)) if m.user_rejected);
    // An MCP call that failed (the server's isError, or a server agy does
    // not have) can end DONE with a result reading `Error: ...`, as
    // fake-agy writes it; how real agy words it is not captured, and a step
    // that ends in ERROR is a failure by its status anyway.
    let mcp_error = match &step.body {
        Some(Body::McpTool(m)) => m.result.as_deref().and_then(mcp_error_text),
        _ => None,
    };
    let ok = step.status == StepStatus::Done
        && exit_code.map(|c| c == 0).unwrap_or(true)
        && !rejected
        && mcp_error.is_none();
    // A failed step's own error says why (e.g. "tool call denied by pre-tool
    // hook: ..."); a result with nothing else still says how the step ended.
    let error = step
        .errors
        .iter()
        .map(|e| e.message.as_str())
        .find(|m| !m.is_empty());
    let summary = match (error, mcp_error) {
        (Some(message), _) if step.status != StepStatus::Done => message.to_string(),
        (_, Some(message)) => first_line(message),
        _ if summary.is_empty() => step.status.label().to_string(),
        _ => summary,
    };
    Event::ToolResult {
        idx: step.idx,
        id: answers
            .map(str::to_string)
            .or_else(|| call.map(|c| c.id))
            .unwrap_or_default(),
        name,
        status: step.status.label().to_string(),
        ok,
        summary,
        output,
        exit_code,
    }
}

/// The text of an MCP error result (`Error: ...`), if it is one.
fn mcp_error_text(result: &str) -> Option<&str> {
    let rest = result.trim_start().strip_prefix("Error:")?.trim();
    (!rest.is_empty()).then_some(rest)
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

#[cfg(test)]
mod tests {
    use super::*;
    use agy_format::steps::{McpToolResult, PlannerResponse, StepType, Subagent};

    fn planner(idx: i64, calls: Vec<ToolCall>) -> Step {
        Step::new(idx, StepType::PlannerResponse, StepStatus::Done).with_body(Body::Planner(
            PlannerResponse {
                tool_calls: calls,
                ..PlannerResponse::default()
            },
        ))
    }

    fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        }
    }

    /// The planner's `call_mcp_tool` and the MCP step it leads to, whose
    /// call has an id of its own (as fake-agy writes it).
    fn mcp_steps(result: &str) -> Vec<Step> {
        let planner_call = call(
            "c1",
            "call_mcp_tool",
            serde_json::json!({"ServerName": "pi", "ToolName": "memory", "Arguments": {"query": "x"}}),
        );
        let step = |status| {
            Step::new(2, StepType::McpTool, status).with_body(Body::McpTool(McpToolResult {
                server: "pi".into(),
                call: Some(call(
                    "mcp-call-2",
                    "memory",
                    serde_json::json!({"query": "x"}),
                )),
                result: (status == StepStatus::Done).then(|| result.to_string()),
                user_rejected: false,
            }))
        };
        vec![
            planner(1, vec![planner_call]),
            step(StepStatus::Running),
            step(StepStatus::Done),
        ]
    }

    #[test]
    fn an_mcp_call_is_announced_once_and_its_error_result_is_a_failure() {
        let mut tracker = Tracker::new();
        let events: Vec<Event> = mcp_steps("Error: MCP server \"pi\" is not configured")
            .iter()
            .flat_map(|s| tracker.observe(s))
            .collect();
        let calls: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::ToolCall { .. }))
            .collect();
        assert_eq!(calls.len(), 1, "{events:?}");
        assert!(matches!(calls[0], Event::ToolCall { name, .. } if name == "call_mcp_tool"));
        let result = events.iter().find_map(|e| match e {
            Event::ToolResult {
                id, ok, summary, ..
            } => Some((id.as_str(), *ok, summary.as_str())),
            _ => None,
        });
        // The result goes under the planner's call id: the call shown ends.
        assert_eq!(
            result,
            Some(("c1", false, "MCP server \"pi\" is not configured")),
            "{events:?}"
        );
        // A plain result is a success.
        let ok = decode_all(&mcp_steps("42"));
        assert!(ok
            .iter()
            .any(|e| matches!(e, Event::ToolResult { ok: true, summary, .. } if summary == "42")));
    }

    #[test]
    fn a_subagent_starts_with_its_role_and_task_and_ends_once() {
        let invoke = call(
            "s1",
            "invoke_subagent",
            serde_json::json!({"Role": "researcher", "Task": "find callers"}),
        );
        let body = |role: Option<&str>| {
            Body::Subagent(Subagent {
                child_conversation_id: "abc".into(),
                role: role.map(str::to_string),
                ..Subagent::default()
            })
        };
        // The step's own call, then a step without one (the planner's).
        for (own, role) in [(true, Some("researcher")), (false, None)] {
            let step = |status| {
                let s = Step::new(2, StepType::InvokeSubagent, status).with_body(body(role));
                if own {
                    s.with_tool_call(invoke.clone())
                } else {
                    s
                }
            };
            let events = decode_all(&[
                planner(1, vec![invoke.clone()]),
                step(StepStatus::Running),
                step(StepStatus::Done),
            ]);
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            assert_eq!(
                kinds,
                ["tool_call", "subagent", "subagent_ended"],
                "{events:?}"
            );
            assert_eq!(
                events[1],
                Event::Subagent {
                    idx: 2,
                    conversation_id: "abc".into(),
                    role: Some("researcher".into()),
                    task: Some("find callers".into()),
                }
            );
            assert!(
                matches!(
                    &events[2],
                    Event::SubagentEnded {
                        ok: true,
                        error: None,
                        answer: None,
                        role: Some(r),
                        ..
                    } if r == "researcher"
                ),
                "{events:?}"
            );
        }
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

    #[test]
    fn a_grown_text_hashes_as_the_whole_text_does() {
        // Heads that cut the hash's 8-byte words anywhere.
        let text = "All work and no play makes a long answer grow. 0123456789 ö";
        for cut in (0..=text.len()).filter(|c| text.is_char_boundary(*c)) {
            let (rest, grown) = Emitted::of(&text[..cut])
                .extended_by(text)
                .expect("a prefix");
            assert_eq!(rest, &text[cut..]);
            assert_eq!(grown, Emitted::of(text), "cut at {cut}");
        }
        assert!(Emitted::of("abc").extended_by("abd, more").is_none());
    }
}
