//! Provider-neutral events, and the tracker that turns successive views of
//! the same steps into them.
//!
//! agy rewrites rows in place, so a step is seen many times as it grows. The
//! [`Tracker`] remembers what it already emitted for every step and emits only
//! what is new: text and thinking as deltas, everything else once. Decoding a
//! finished database is the same tracker fed the final rows once, so a live
//! stream and an after-the-fact decode agree by construction ([`Transcript`]).

use crate::steps::{Body, Step, StepStatus, StepType, ToolCall};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

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
        let idx = step.idx;
        let state = self.steps.entry(idx).or_default();
        state.finished = step.is_finished();
        state.waiting = step.status == StepStatus::Waiting;
        if let Some(name) = step
            .tool_call()
            .map(|c| c.name.as_str())
            .filter(|n| !n.is_empty())
            .or_else(|| step.step_type.tool_name())
        {
            state.tool_name = Some(name.to_string());
        }

        if let Some(msg) = &step.decode_error {
            if state.decode_error.as_ref() != Some(msg) {
                state.decode_error = Some(msg.clone());
                out.push(Event::DecodeError {
                    idx,
                    message: msg.clone(),
                });
            }
        }
        if !step.step_type.is_known() && !state.unknown {
            state.unknown = true;
            out.push(Event::Unknown {
                idx,
                step_type: step.step_type.raw(),
            });
        }

        match &step.body {
            Some(Body::UserInput(u)) if !state.user_input && !u.text.is_empty() => {
                state.user_input = true;
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
                grow(
                    &mut out,
                    idx,
                    Channel::Thinking,
                    &mut state.thinking,
                    thinking,
                );
                let text = if p.text.is_empty() {
                    p.modified_response.as_deref().unwrap_or("")
                } else {
                    &p.text
                };
                grow(&mut out, idx, Channel::Text, &mut state.text, text);
            }
            Some(Body::Checkpoint { title }) => {
                let title = title.split("\n\n").next().unwrap_or("").trim();
                if !title.is_empty() && state.title != title {
                    state.title = title.to_string();
                    out.push(Event::Title {
                        idx,
                        title: title.to_string(),
                    });
                }
            }
            Some(Body::Subagent(s)) if !state.subagent && !s.child_conversation_id.is_empty() => {
                state.subagent = true;
                out.push(Event::Subagent {
                    idx,
                    conversation_id: s.child_conversation_id.clone(),
                    role: s.role.clone(),
                });
            }
            _ => {}
        }

        // Requested calls in a planner response, then the tool step's own call.
        let state = self.steps.entry(idx).or_default();
        if let Some(Body::Planner(p)) = &step.body {
            for call in &p.tool_calls {
                if !call.name.is_empty() && remember_call(&mut self.call_ids, idx, call) {
                    out.push(call_event(idx, call));
                }
            }
        }
        let is_tool_step = step.step_type.tool_name().is_some()
            || step
                .body
                .as_ref()
                .map(Body::is_tool_result)
                .unwrap_or(false)
            || step.tool_call().is_some();
        if is_tool_step
            && !matches!(
                step.step_type,
                StepType::PlannerResponse | StepType::UserInput
            )
            && !state.tool_call
        {
            let call = step.tool_call().filter(|c| !c.name.is_empty()).cloned();
            let call = match call {
                Some(c) => Some(c),
                None if step.is_finished() => step.step_type.tool_name().map(|n| ToolCall {
                    name: n.to_string(),
                    ..ToolCall::default()
                }),
                None => None,
            };
            if let Some(call) = call {
                state.tool_call = true;
                if remember_call(&mut self.call_ids, idx, &call) {
                    out.push(call_event(idx, &call));
                }
            }
        }

        let state = self.steps.entry(idx).or_default();
        let has_result_body = step
            .body
            .as_ref()
            .map(Body::is_tool_result)
            .unwrap_or(false);
        if (has_result_body || step.step_type.tool_name().is_some())
            && step.is_finished()
            && !state.result
        {
            state.result = true;
            out.push(result_event(step));
        }

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
            if !state.errors.contains(&message) {
                state.errors.push(message.clone());
                out.push(Event::Error { idx, message });
            }
        }
        out
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

fn result_event(step: &Step) -> Event {
    let call = step.tool_call();
    let name = call
        .map(|c| c.name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| step.step_type.tool_name().map(str::to_string))
        .unwrap_or_else(|| format!("step_type_{}", step.step_type.raw()));
    let (summary, output, exit_code) = match &step.body {
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
        Some(Body::SearchWeb(s)) => (format!("search {:?}", s.query), s.refined.clone(), None),
        Some(Body::Generic(g)) => (
            g.args
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            g.result.clone(),
            None,
        ),
        _ => (String::new(), None, None),
    };
    // A result with no body still says how the step ended.
    let summary = if summary.is_empty() {
        step.status.label().to_string()
    } else {
        summary
    };
    Event::ToolResult {
        idx: step.idx,
        id: call.map(|c| c.id.clone()).unwrap_or_default(),
        name,
        status: step.status.label().to_string(),
        ok: step.status == StepStatus::Done && exit_code.map(|c| c == 0).unwrap_or(true),
        summary,
        output,
        exit_code,
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
