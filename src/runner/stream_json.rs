//! What agy's stream-json said about a turn, kept for the runner: the
//! answer text per step, each tool step (name, arguments, output, error),
//! usage per model call, and the final `result`.
//!
//! The database is the runner's first source; stream-json is the second,
//! and this module is what lets the two be merged instead of one silently
//! winning (docs/agy-format.md, "stream-json" and "Denials differ by tool"):
//! a tool step the database ends without words gets agy's error text from
//! here; a turn whose database cannot be read (degraded) still shows its
//! tool calls and results from here; and the answer agy printed is kept so
//! that a database holding less of it can be caught at the end of the turn.
//! Usage is counted per turn from the steps this process reported, never
//! from `result.usage`, which agy sums over the whole conversation.

use crate::follow::events::Event;
use crate::follow::subject;
use crate::follow::text_hash::TextHash;
use agy_format::stream_json::{Line, ParseStats, StepUpdate, TurnResult, Usage};
use agy_format::text::first_line;
use std::collections::BTreeMap;
use std::time::Instant;

/// A tool step as stream-json described it.
#[derive(Debug, Default)]
struct StreamTool {
    name: String,
    /// The parameters as a JSON object's text (`{}` when agy gave none).
    arguments: String,
    /// `Some(ok)` once the step reached DONE (true) or ERROR (false).
    ended: Option<bool>,
    output: Option<String>,
    error: Option<String>,
    call_sent: bool,
    result_sent: bool,
}

/// Characters of a tool's output shown as its result summary.
const SUMMARY_MAX_CHARS: usize = 120;
/// Characters of agy's words on a failed tool: a hook's reason can be long,
/// and it is what the user needs.
const ERROR_MAX_CHARS: usize = 400;

/// The first line of agy's error text for a tool, cut: what follows it is
/// agy's advice to the model ("Do not attempt to circumvent this denial
/// ..."), not news for the user.
fn error_words(message: &str) -> Option<String> {
    Some(first_line(message, ERROR_MAX_CHARS)).filter(|w| !w.is_empty())
}

/// agy's tool that starts a subagent: shown as a subagent, as the
/// database's subagent steps are.
const SUBAGENT_TOOL: &str = "invoke_subagent";

impl StreamTool {
    fn call_event(&self, idx: i64) -> Event {
        let arguments = if self.arguments.is_empty() {
            "{}".to_string()
        } else {
            self.arguments.clone()
        };
        if self.name == SUBAGENT_TOOL {
            return Event::Subagent {
                idx,
                conversation_id: String::new(),
                role: subject::subagent_role(&arguments),
                task: subject::subagent_task(&arguments),
            };
        }
        Event::ToolCall {
            idx,
            id: String::new(),
            name: self.name.clone(),
            arguments,
        }
    }

    fn result_event(&self, idx: i64) -> Option<Event> {
        let ok = self.ended?;
        if self.name == SUBAGENT_TOOL {
            return Some(Event::SubagentEnded {
                idx,
                conversation_id: String::new(),
                role: subject::subagent_role(&self.arguments),
                ok,
                answer: self.output.clone().filter(|_| ok),
                error: self.error.clone(),
            });
        }
        let summary = match (&self.error, &self.output) {
            (Some(e), _) if !e.is_empty() => e.clone(),
            (_, Some(o)) if !first_line(o, SUMMARY_MAX_CHARS).is_empty() => {
                first_line(o, SUMMARY_MAX_CHARS)
            }
            _ => if ok { "done" } else { "error" }.to_string(),
        };
        Some(Event::ToolResult {
            idx,
            id: String::new(),
            name: self.name.clone(),
            status: if ok { "done" } else { "error" }.into(),
            ok,
            summary,
            output: self.output.clone(),
            exit_code: None,
        })
    }
}

/// agy's stream-json for one turn, as it arrives.
#[derive(Debug, Default)]
pub(crate) struct AgyStream {
    /// `text_delta`s per step index: agy's own answer, kept whole.
    texts: BTreeMap<i64, String>,
    /// Bytes of each step's text already streamed in degraded mode.
    streamed: BTreeMap<i64, usize>,
    tools: BTreeMap<i64, StreamTool>,
    pub had_text: bool,
    /// agy printed its `init` line: it began (or resumed) a conversation.
    pub saw_init: bool,
    /// The last `agent_response` call's usage: the context in use. A
    /// `checkpoint` side call (1.1.x) is never it.
    pub last_call: Option<Usage>,
    /// The sum over every model call this turn reported (checkpoints too:
    /// they were spent).
    pub sum: Usage,
    pub result: Option<TurnResult>,
    pub ran_tools: bool,
    pub first_step: Option<Instant>,
    pub stats: ParseStats,
}

impl AgyStream {
    /// Take in one line; returns the conversation id of an `init` line.
    pub(crate) fn observe(&mut self, line: Line) -> Option<String> {
        self.stats.count(&line);
        match line {
            Line::Init {
                conversation_id, ..
            } => {
                self.saw_init = true;
                return Some(conversation_id);
            }
            Line::StepUpdate(u) => self.step(u),
            Line::Result(r) => self.result = Some(r),
            Line::CommandResult(_) | Line::UnknownEvent { .. } | Line::NotJson(_) => {}
        }
        None
    }

    fn step(&mut self, u: StepUpdate) {
        self.first_step.get_or_insert_with(Instant::now);
        if let Some(usage) = u.usage {
            if u.step_type != "checkpoint" {
                self.last_call = Some(usage);
            }
            self.sum += &usage;
        }
        if u.step_type == "tool" {
            self.ran_tools = true;
            self.tool(&u);
        }
        if let Some(delta) = u.text_delta.filter(|d| !d.is_empty()) {
            self.had_text = true;
            self.texts.entry(u.step_index).or_default().push_str(&delta);
        }
    }

    fn tool(&mut self, u: &StepUpdate) {
        let tool = self.tools.entry(u.step_index).or_default();
        let info = u.tool_info.as_ref();
        let name = info
            .map(|i| i.name.as_str())
            .filter(|n| !n.is_empty())
            .or(u.tool_name.as_deref());
        if let Some(name) = name.filter(|_| tool.name.is_empty()) {
            tool.name = name.to_string();
        }
        if let Some(params) = info.and_then(|i| i.parameters.as_ref()) {
            // A later update can carry more of the arguments (agy sends a
            // subset on ACTIVE): the fullest wins until the call is shown.
            let text = params.to_string();
            if !tool.call_sent && text.len() >= tool.arguments.len() {
                tool.arguments = text;
            }
        }
        if let Some(out) = info.and_then(|i| i.output.clone()) {
            tool.output = Some(out);
        }
        if let Some(e) = info.and_then(|i| i.error.as_ref()) {
            tool.error = error_words(&e.message);
        }
        match u.state.as_str() {
            "DONE" => tool.ended = Some(true),
            "ERROR" => tool.ended = Some(false),
            _ => {}
        }
    }

    /// agy's error text for the tool step at `idx`, once it ended in ERROR.
    pub(crate) fn tool_error(&self, idx: i64) -> Option<&str> {
        let tool = self.tools.get(&idx)?;
        (tool.ended == Some(false))
            .then_some(tool.error.as_deref())
            .flatten()
    }

    /// Whether the tool step at `idx` has ended, by stream-json.
    pub(crate) fn tool_ended(&self, idx: i64) -> bool {
        self.tools.get(&idx).is_some_and(|t| t.ended.is_some())
    }

    /// What was not streamed yet, as events in step order (degraded mode):
    /// answer text, and tool calls and results `with_tools`.
    pub(crate) fn unstreamed(&mut self, with_tools: bool) -> Vec<Event> {
        let mut idxs: Vec<i64> = self
            .texts
            .keys()
            .chain(self.tools.keys())
            .copied()
            .collect();
        idxs.sort_unstable();
        idxs.dedup();
        let mut out = Vec::new();
        for idx in idxs {
            if let Some(tool) = self.tools.get_mut(&idx).filter(|_| with_tools) {
                if !tool.call_sent && !tool.name.is_empty() {
                    tool.call_sent = true;
                    out.push(tool.call_event(idx));
                }
                if !tool.result_sent {
                    if let Some(ev) = tool.result_event(idx) {
                        tool.result_sent = true;
                        out.push(ev);
                    }
                }
            }
            if let Some(text) = self.texts.get(&idx) {
                let done = self.streamed.entry(idx).or_default();
                if let Some(rest) = text.get(*done..).filter(|r| !r.is_empty()) {
                    out.push(Event::Text {
                        idx,
                        text: rest.to_string(),
                    });
                    *done = text.len();
                }
            }
        }
        out
    }

    /// Whether agy printed any answer text for a step.
    pub(crate) fn has_texts(&self) -> bool {
        !self.texts.is_empty()
    }

    /// agy's answer text per step, for the end-of-turn comparison.
    pub(crate) fn texts(&self) -> &BTreeMap<i64, String> {
        &self.texts
    }

    /// Put `response` (a `result` line's answer, when no `text_delta` gave
    /// it) in as the text of step `idx`.
    pub(crate) fn set_text(&mut self, idx: i64, response: String) {
        self.texts.insert(idx, response);
    }

    /// The last step's answer, moved out (the end of the turn, when nothing
    /// else needs it): what a blanked `result.response` held.
    pub(crate) fn take_last_text(&mut self) -> Option<String> {
        let (_, text) = self.texts.pop_last()?;
        Some(text)
    }
}

/// A digest of a text that ignores trailing white space (agy's two outputs
/// may differ in a final newline), built as the text arrives so the runner
/// can compare the database's answer with agy's without a copy of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TextDigest {
    /// The text up to its last non-white-space character.
    core: TextHash,
    /// White space after it, not yet in `core` (it is, once more text follows).
    tail: String,
}

impl TextDigest {
    pub(crate) fn new() -> TextDigest {
        TextDigest::default()
    }

    pub(crate) fn of(text: &str) -> TextDigest {
        let mut d = TextDigest::new();
        d.push(text);
        d
    }

    /// Append `text`.
    pub(crate) fn push(&mut self, text: &str) {
        match text.rfind(|c: char| !c.is_whitespace()) {
            None => self.tail.push_str(text),
            Some(at) => {
                let end = at + text[at..].chars().next().map_or(1, char::len_utf8);
                let tail = std::mem::take(&mut self.tail);
                self.core.write(tail.as_bytes());
                self.core.write(&text.as_bytes()[..end]);
                self.tail.push_str(&text[end..]);
            }
        }
    }

    /// Whether two texts are equal but for trailing white space.
    pub(crate) fn same_text(&self, other: &TextDigest) -> bool {
        self.core == other.core
    }

    /// Whether the text has any non-white-space character.
    pub(crate) fn is_blank(&self) -> bool {
        self.core.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(json: &str) -> Line {
        Line::parse(json)
    }

    #[test]
    fn digests_ignore_trailing_white_space_and_chunking() {
        let whole = TextDigest::of("hi there\n");
        let mut parts = TextDigest::new();
        for p in ["hi", " ", "there", "\n"] {
            parts.push(p);
        }
        assert!(whole.same_text(&parts));
        assert!(whole.same_text(&TextDigest::of("hi there")));
        assert!(!whole.same_text(&TextDigest::of("hi ther")));
        assert!(!whole.same_text(&TextDigest::of("hi  there")));
        assert!(TextDigest::of(" \n").is_blank());
        assert!(TextDigest::of("é\n").same_text(&TextDigest::of("é")));
    }

    #[test]
    fn digests_are_the_same_however_the_text_is_cut() {
        let text = "All work and no play makes a long answer grow. 0123456789 \u{e9}t\u{e9}";
        let whole = TextDigest::of(text);
        for cut in (0..=text.len()).filter(|c| text.is_char_boundary(*c)) {
            for second in (cut..=text.len()).filter(|c| text.is_char_boundary(*c)) {
                let mut parts = TextDigest::new();
                for p in [&text[..cut], &text[cut..second], &text[second..]] {
                    parts.push(p);
                }
                assert_eq!(parts, whole, "cut at {cut} and {second}");
            }
        }
    }

    #[test]
    fn checkpoint_usage_counts_in_the_sum_but_is_never_the_last_call() {
        let mut s = AgyStream::default();
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":1,"state":"DONE","step_type":"agent_response","text_delta":"ok","usage":{"input_tokens":12000,"output_tokens":40,"cache_read_tokens":500,"total_tokens":12040}}}"#));
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":2,"state":"DONE","step_type":"checkpoint","usage":{"input_tokens":200,"output_tokens":20,"total_tokens":220}}}"#));
        let last = s.last_call.expect("last call");
        assert_eq!((last.input_tokens, last.cache_read_tokens), (12000, 500));
        assert_eq!(s.sum.input_tokens, 12200);
        assert_eq!(s.sum.total_tokens, 12260);
    }

    #[test]
    fn tool_steps_become_events_with_agys_error_words() {
        let mut s = AgyStream::default();
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":3,"state":"ACTIVE","step_type":"tool","tool_name":"write_to_file","tool_info":{"name":"write_to_file","parameters":{"TargetFile":"/r/a.txt"}}}}"#));
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":3,"state":"ERROR","step_type":"tool","tool_name":"write_to_file","tool_info":{"name":"write_to_file","parameters":{"TargetFile":"/r/a.txt"},"error":{"type":"tool","message":"permission check failed for write_file \"/r/a.txt\": user denied permission"}}}}"#));
        assert!(s.tool_ended(3));
        assert_eq!(
            s.tool_error(3),
            Some("permission check failed for write_file \"/r/a.txt\": user denied permission")
        );
        assert!(s.unstreamed(false).is_empty(), "no tools asked for");
        let evs = s.unstreamed(true);
        assert_eq!(evs.len(), 2, "{evs:?}");
        match (&evs[0], &evs[1]) {
            (
                Event::ToolCall {
                    name, arguments, ..
                },
                Event::ToolResult { ok, summary, .. },
            ) => {
                assert_eq!(name, "write_to_file");
                assert_eq!(arguments, r#"{"TargetFile":"/r/a.txt"}"#);
                assert!(!ok);
                assert!(summary.starts_with("permission check failed"), "{summary}");
            }
            other => panic!("{other:?}"),
        }
        assert!(s.unstreamed(true).is_empty(), "each event goes out once");
    }

    #[test]
    fn a_subagent_from_stream_json_is_a_subagent() {
        let mut s = AgyStream::default();
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":4,"state":"ACTIVE","step_type":"tool","tool_name":"invoke_subagent","tool_info":{"name":"invoke_subagent","parameters":{"Role":"researcher","Task":"find callers of parse_config"}}}}"#));
        s.observe(update(r#"{"event":"step_update","step_update":{"step_index":4,"state":"DONE","step_type":"tool","tool_name":"invoke_subagent","tool_info":{"name":"invoke_subagent","parameters":{"Role":"researcher","Task":"find callers of parse_config"},"output":"two callers: main.rs, cli.rs"}}}"#));
        let evs = s.unstreamed(true);
        match (&evs[0], &evs[1]) {
            (Event::Subagent { role, task, .. }, Event::SubagentEnded { ok, answer, .. }) => {
                assert_eq!(role.as_deref(), Some("researcher"));
                assert_eq!(task.as_deref(), Some("find callers of parse_config"));
                assert!(ok);
                assert_eq!(answer.as_deref(), Some("two callers: main.rs, cli.rs"));
            }
            other => panic!("{other:?}"),
        }
    }
}
