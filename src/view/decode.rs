//! One conversation decoded after the fact: what `agy-bridge decode` shows.
//!
//! This module owns rendering the decoded steps of a conversation, whose rows
//! [`agy_corpus::source`] reads from wherever they sit (a conversation
//! database, possibly one agy is still writing, or a recording replayed into
//! memory), for people
//! (a readable text view with a summary) and for tools (JSON lines). It adds
//! no decoding of its own: rows go through [`steps::decode`] and then one
//! [`Tracker`] in idx order, exactly as a live stream would, so what `decode`
//! shows is what a run would have streamed.
//!
//! Databases are opened read-only through
//! [`agy_format::database::open_read_only`]; nothing here writes, holds a
//! transaction or checkpoints, so decoding a database agy is writing cannot
//! block or disturb agy.

use crate::follow::events::{self, Event, Tracker};
use crate::follow::transcript::Transcript;
use agy_corpus::source::{read_rows, LoadError, SourceKind};
use agy_format::steps::{self, FieldPath, Step, StepRow, StepStatus, StepType};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One step: the decoded row and the events the tracker emitted for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedStep {
    /// The row decoded: its type, status, payload and what did not decode.
    pub step: Step,
    /// The events the step adds to the conversation (text, tool calls, ...).
    pub events: Vec<Event>,
}

impl DecodedStep {
    /// The step's position in the conversation.
    pub fn idx(&self) -> i64 {
        self.step.idx
    }

    /// What kind of step agy wrote (user input, planner response, a tool, ...).
    pub fn step_type(&self) -> StepType {
        self.step.step_type
    }

    /// Where the step stood when read (pending, running, done, error, ...).
    pub fn status(&self) -> StepStatus {
        self.step.status
    }

    /// Why the payload (or a side column) failed to decode, if it did.
    pub fn error(&self) -> Option<&str> {
        self.step.decode_error.as_deref()
    }

    /// Payload fields the decoder does not know: agy's format moved on.
    pub fn unknown_fields(&self) -> &[FieldPath] {
        &self.step.unknown_fields
    }
}

/// Decode rows with one tracker fed in idx order, so that a tool call listed
/// by a planner response and repeated by the tool's own step is one call.
pub(crate) fn decode_rows(rows: &[StepRow]) -> Vec<DecodedStep> {
    let mut order: Vec<&StepRow> = rows.iter().collect();
    order.sort_by_key(|r| r.idx);
    let mut tracker = Tracker::new();
    order
        .into_iter()
        .map(|row| {
            let step = steps::decode(row);
            let events = tracker.observe(&step);
            DecodedStep { step, events }
        })
        .collect()
}

/// A whole decoded conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The database or recording read.
    pub path: PathBuf,
    /// Whether it was agy's database or a recording.
    pub source: SourceKind,
    /// The steps, in idx order.
    pub steps: Vec<DecodedStep>,
}

/// Load and decode the conversation at `path` (database or recording).
pub fn decode_path(path: &Path) -> Result<Decoded, LoadError> {
    let (source, rows) = read_rows(path)?;
    Ok(Decoded {
        path: path.to_path_buf(),
        source,
        steps: decode_rows(&rows),
    })
}

/// The transcript of the conversation at `path`: the same events the text
/// and JSON views show, with every channel's content joined per step.
pub fn transcript(path: &Path) -> Result<Transcript, LoadError> {
    Ok(decode_path(path)?.transcript())
}

/// Counts over a decoded conversation, for the end of the text view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Summary {
    pub steps: usize,
    /// Step type -> number of steps, by raw type number.
    pub by_type: BTreeMap<i64, (StepType, usize)>,
    /// idx and message of every step whose payload failed to decode.
    pub decode_errors: Vec<(i64, String)>,
    /// Unknown field paths (numerically ordered) and the number of steps
    /// each appeared in.
    pub unknown_fields: Vec<(FieldPath, usize)>,
}

/// One `--json` line. The keys are part of the CLI's contract.
#[derive(Serialize)]
struct JsonStep<'a> {
    idx: i64,
    step_type: i64,
    step_type_label: &'static str,
    status: i64,
    status_label: &'static str,
    events: &'a [Event],
    unknown_fields: &'a [FieldPath],
    error: Option<&'a str>,
}

impl Decoded {
    /// Every event, steps in idx order.
    pub fn events(&self) -> impl Iterator<Item = &Event> + '_ {
        self.steps.iter().flat_map(|s| s.events.iter())
    }

    /// The conversation as the follower's transcript: each channel's text
    /// joined per step, as the text and JSON views show it.
    pub fn transcript(&self) -> Transcript {
        Transcript::from_events(self.events().cloned())
    }

    pub(crate) fn summary(&self) -> Summary {
        let mut summary = Summary {
            steps: self.steps.len(),
            ..Summary::default()
        };
        let mut unknown: BTreeMap<FieldPath, usize> = BTreeMap::new();
        for s in &self.steps {
            summary
                .by_type
                .entry(s.step.step_type.raw())
                .or_insert((s.step.step_type, 0))
                .1 += 1;
            if let Some(e) = s.error() {
                summary.decode_errors.push((s.idx(), e.to_string()));
            }
            for path in s.unknown_fields() {
                *unknown.entry(path.clone()).or_insert(0) += 1;
            }
        }
        summary.unknown_fields = unknown.into_iter().collect();
        summary.unknown_fields.sort_by(|(a, _), (b, _)| {
            steps::path_order(&a.path)
                .cmp(&steps::path_order(&b.path))
                .then(a.wire_type.cmp(&b.wire_type))
        });
        summary
    }

    /// One JSON object per step, one per line.
    pub fn write_json_lines(&self, w: &mut dyn Write) -> io::Result<()> {
        for s in &self.steps {
            let line = JsonStep {
                idx: s.step.idx,
                step_type: s.step.step_type.raw(),
                step_type_label: s.step.step_type.label(),
                status: s.step.status.raw(),
                status_label: s.step.status.label(),
                events: &s.events,
                unknown_fields: &s.step.unknown_fields,
                error: s.error(),
            };
            serde_json::to_writer(&mut *w, &line)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The readable view: every step with its events, then a summary.
    pub fn write_text(&self, w: &mut dyn Write) -> io::Result<()> {
        let mut out = String::new();
        for s in &self.steps {
            out.clear();
            render_step(&mut out, s);
            w.write_all(out.as_bytes())?;
        }
        out.clear();
        render_summary(&mut out, &self.summary());
        w.write_all(out.as_bytes())
    }

    /// [`Decoded::write_text`] into a string.
    pub fn to_text(&self) -> String {
        let mut buf = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = self.write_text(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// [`Decoded::write_json_lines`] into a string.
    #[cfg(test)]
    fn to_json_lines(&self) -> String {
        let mut buf = Vec::new();
        let _ = self.write_json_lines(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// How many characters of tool-call arguments the text view shows.
const ARGS_PREVIEW_CHARS: usize = 240;
/// How many lines of a tool's output the text view shows.
const OUTPUT_PREVIEW_LINES: usize = 4;
const OUTPUT_PREVIEW_CHARS: usize = 160;

fn type_label(t: StepType) -> String {
    format!("{} [{}]", t.label(), t.raw())
}

fn status_label(s: StepStatus) -> String {
    if s.is_known() {
        s.label().to_string()
    } else {
        format!("unknown status [{}]", s.raw())
    }
}

/// `text` cut to at most `max` characters, marked when cut.
fn preview(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Every line of `text` behind `prefix` (an empty text still gets one line).
fn prefixed(out: &mut String, prefix: &str, text: &str) {
    let mut lines = text.split('\n').peekable();
    // A trailing newline does not make an extra empty line.
    while let Some(line) = lines.next() {
        if line.is_empty() && lines.peek().is_none() && !text.is_empty() {
            break;
        }
        let _ = writeln!(out, "{prefix}{line}");
    }
}

/// Text exactly as agy wrote it, ending in a newline.
fn verbatim(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

fn render_step(out: &mut String, s: &DecodedStep) {
    let _ = writeln!(
        out,
        "#{} {} {}",
        s.step.idx,
        type_label(s.step.step_type),
        status_label(s.step.status)
    );
    for event in &s.events {
        render_event(out, event);
    }
    if !s.step.unknown_fields.is_empty() {
        let paths: Vec<String> = s
            .step
            .unknown_fields
            .iter()
            .map(|p| format!("{} {}", p.path, p.wire_type))
            .collect();
        let _ = writeln!(out, "  unknown fields: {}", paths.join(", "));
    }
}

fn render_event(out: &mut String, event: &Event) {
    match event {
        Event::UserInput { text, .. } => prefixed(out, "  user: ", text),
        Event::Text { text, .. } => verbatim(out, text),
        Event::Thinking { text, .. } => prefixed(out, "  thinking: ", text),
        Event::ToolCall {
            name, arguments, ..
        } => {
            let args = preview(arguments.trim(), ARGS_PREVIEW_CHARS).replace('\n', " ");
            match crate::follow::subject::tool_subject(arguments, None) {
                Some(subject) => {
                    let _ = writeln!(out, "  → {name} {subject}");
                    let _ = writeln!(out, "      args: {args}");
                }
                None => {
                    let _ = writeln!(out, "  → {name} {args}");
                }
            }
        }
        Event::ToolResult { .. } => render_tool_result(out, event),
        Event::Title { title, .. } => prefixed(out, "  title: ", title),
        Event::Error { message, .. } => prefixed(out, "  error: ", message),
        Event::Subagent {
            conversation_id,
            role,
            task,
            ..
        } => {
            let role = role
                .as_deref()
                .map(|r| format!(" (role {r})"))
                .unwrap_or_default();
            let _ = writeln!(out, "  subagent: conversation {conversation_id}{role}");
            if let Some(task) = task {
                prefixed(out, "      task: ", task);
            }
        }
        Event::SubagentEnded {
            conversation_id,
            ok,
            answer,
            error,
            ..
        } => {
            let how = if *ok { "ended" } else { "failed" };
            let _ = writeln!(out, "  subagent {how}: conversation {conversation_id}");
            if let Some(error) = error {
                prefixed(out, "      error: ", error);
            }
            if let Some(answer) = answer {
                prefixed(out, "      answer: ", answer);
            }
        }
        Event::Notice { text, .. } => prefixed(out, "  notice: ", text),
        Event::Permission {
            action,
            target,
            reason,
            decision,
            ..
        } => {
            let because = reason
                .as_deref()
                .map(|r| format!(" (reason: {})", r.trim()))
                .unwrap_or_default();
            let line = events::permission_line(action, target, *decision);
            let _ = writeln!(out, "  {line}{because}");
        }
        Event::Unknown { step_type, .. } => {
            let _ = writeln!(
                out,
                "  unknown step type {step_type} (not decoded, kept as is)"
            );
        }
        Event::DecodeError { message, .. } => prefixed(out, "  decode error: ", message),
        Event::Rewrite { channel, text, .. } => {
            let label = match channel {
                crate::follow::events::Channel::Text => "text",
                crate::follow::events::Channel::Thinking => "thinking",
            };
            let _ = writeln!(out, "  rewritten {label}:");
            verbatim(out, text);
        }
    }
}

/// A tool result: its summary (with how it ended, when that is not the
/// summary itself) and the start of its output.
fn render_tool_result(out: &mut String, event: &Event) {
    let Event::ToolResult {
        name,
        status,
        ok,
        summary,
        output,
        ..
    } = event
    else {
        return;
    };
    let summary = summary.trim().replace('\n', " ");
    let flag = match (*ok, status.as_str()) {
        (true, _) => String::new(),
        (false, "done") => " [failed]".to_string(),
        // A bodiless result's summary is already its status.
        (false, status) if summary == status => String::new(),
        (false, status) => format!(" [{status}]"),
    };
    let sep = if summary.is_empty() { "" } else { ": " };
    let _ = writeln!(out, "  ← {name}{sep}{summary}{flag}");
    if let Some(output) = output.as_deref().filter(|o| !o.trim().is_empty()) {
        let lines: Vec<&str> = output.trim_end().lines().collect();
        for line in lines.iter().take(OUTPUT_PREVIEW_LINES) {
            let _ = writeln!(out, "      {}", preview(line, OUTPUT_PREVIEW_CHARS));
        }
        if lines.len() > OUTPUT_PREVIEW_LINES {
            let _ = writeln!(
                out,
                "      … {} more line(s)",
                lines.len() - OUTPUT_PREVIEW_LINES
            );
        }
    }
}

fn render_summary(out: &mut String, summary: &Summary) {
    let _ = writeln!(out, "== summary ==");
    let _ = writeln!(out, "steps: {}", summary.steps);
    if !summary.by_type.is_empty() {
        let _ = writeln!(out, "by step type:");
        for (raw, (t, n)) in &summary.by_type {
            let _ = writeln!(out, "  {raw} {}: {n}", t.label());
        }
    }
    if summary.decode_errors.is_empty() {
        let _ = writeln!(out, "decode errors: 0");
    } else {
        let idxs: Vec<String> = summary
            .decode_errors
            .iter()
            .map(|(i, _)| i.to_string())
            .collect();
        let _ = writeln!(
            out,
            "decode errors: {} (idx {})",
            summary.decode_errors.len(),
            idxs.join(", ")
        );
        for (idx, message) in &summary.decode_errors {
            let _ = writeln!(out, "  #{idx}: {message}");
        }
    }
    if summary.unknown_fields.is_empty() {
        let _ = writeln!(out, "unknown fields: none");
    } else {
        let _ = writeln!(out, "unknown fields (path, wire type: steps):");
        for (path, n) in &summary.unknown_fields {
            let _ = writeln!(out, "  {} {}: {n}", path.path, path.wire_type);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agy_format::steps::{Body, PlannerResponse, ToolCall, UserInput};

    fn rows() -> Vec<StepRow> {
        let call = ToolCall {
            id: "c1".into(),
            name: "view_file".into(),
            arguments: "{\"AbsolutePath\":\"/w/a.rs\"}".into(),
        };
        vec![
            Step::new(0, StepType::UserInput, StepStatus::Done)
                .with_body(Body::UserInput(UserInput {
                    text: "hi\nthere".into(),
                    workspace_uri: None,
                }))
                .to_row(),
            Step::new(1, StepType::PlannerResponse, StepStatus::Done)
                .with_body(Body::Planner(PlannerResponse {
                    text: "Answer.\nTwo lines.".into(),
                    thinking: "hmm\nmore".into(),
                    tool_calls: vec![call.clone()],
                    ..Default::default()
                }))
                .to_row(),
            Step::new(2, StepType::ViewFile, StepStatus::Done)
                .with_tool_call(call)
                .to_row(),
        ]
    }

    fn decoded() -> Decoded {
        Decoded {
            path: PathBuf::from("x"),
            source: SourceKind::Database,
            steps: decode_rows(&rows()),
        }
    }

    #[test]
    fn text_view_keeps_answer_verbatim_and_sets_thinking_apart() {
        let text = decoded().to_text();
        assert!(text.contains("\nAnswer.\nTwo lines.\n"), "{text}");
        assert!(
            text.contains("  thinking: hmm\n  thinking: more\n"),
            "{text}"
        );
        assert!(text.contains("  user: hi\n  user: there\n"), "{text}");
        assert!(text.contains("#1 planner response [15] done\n"), "{text}");
        assert!(
            text.contains("  → view_file /w/a.rs\n      args: {\"AbsolutePath\""),
            "{text}"
        );
        assert!(text.contains("  ← view_file"), "{text}");
        assert!(text.contains("by step type:\n  8 view_file: 1\n  14 user input: 1\n"));
    }

    #[test]
    fn tool_call_is_deduplicated_across_steps() {
        let d = decoded();
        let calls = d
            .events()
            .filter(|e| matches!(e, Event::ToolCall { .. }))
            .count();
        assert_eq!(calls, 1);
    }

    #[test]
    fn json_lines_have_the_contract_keys() {
        let json = decoded().to_json_lines();
        for line in json.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            for key in [
                "idx",
                "step_type",
                "step_type_label",
                "status",
                "status_label",
                "events",
                "unknown_fields",
                "error",
            ] {
                assert!(v.get(key).is_some(), "{key} missing in {line}");
            }
        }
    }

    #[test]
    fn preview_cuts_on_char_boundaries() {
        assert_eq!(preview("héllo", 2), "hé…");
        assert_eq!(preview("hé", 2), "hé");
    }

    #[test]
    fn prefixed_handles_trailing_newline_and_empty() {
        let mut out = String::new();
        prefixed(&mut out, "> ", "a\n");
        prefixed(&mut out, "> ", "");
        assert_eq!(out, "> a\n> \n");
    }
}
