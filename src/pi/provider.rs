//! agy as a pi model provider: one pi turn in, pi's streaming events out.
//!
//! This is the only library module that knows pi. It turns pi's request (the
//! model id, reasoning level, session and `messages`) into one agy turn, and
//! the runner's events into pi's `AssistantMessageEvent` protocol as JSON
//! lines (deltas only; the extension owns the partial message). Its two
//! promises to pi: `start` goes out at once, and exactly one terminal event
//! (`done` or `error`) ends every stream, whatever happens.

use crate::follow::events::{self, Channel, Event};
use crate::follow::subject;
use crate::pi::diff::{self, TurnEdits};
use crate::run::runner::{
    answer_from_agy_notice, degraded_notice, new_conversation_notice, RunEvent, RunResult,
    TurnUsage,
};
use agy_format::text::{flat, repeats, shell_word};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The provider id pi knows us by; assistant turns from it are agy's own.
pub const PROVIDER_ID: &str = "antigravity";
/// Upper bound on the context digest, keeping the newest items.
pub const DIGEST_MAX_CHARS: usize = 8000;

const COMPACTION_MARKER: &str = "compacted into the following summary";
const DIGEST_PREAMBLE: &str = "[Context from the wider pi session that this Antigravity turn did not see: compaction summaries, turns by other providers, tool results and earlier user messages. Your own earlier turns are already in your conversation history. Use this for continuity only.]";
const LOST_PREAMBLE: &str = "[Your earlier conversation for this pi session was not available to Antigravity, so this is pi's record of it: compaction summaries, earlier user messages, your own earlier answers, turns by other providers and tool results. Continue from where it left off.]";
/// Upper bound on the digest that replaces a lost conversation: larger,
/// since it carries agy's own earlier answers too.
pub const LOST_DIGEST_MAX_CHARS: usize = 32000;

/// What agy still has of a pi session, which decides what the context
/// digest must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgyContext {
    /// agy's conversation holds its own earlier turns: only what it never
    /// saw goes in the digest.
    Kept,
    /// agy's earlier conversation is gone (agy did not have it, or its
    /// database vanished): its own earlier turns go in the digest too.
    Lost,
}

/// The one request `agy-bridge stream` reads from stdin.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamRequest {
    /// pi's model id (a slug from `agy-bridge models --json`).
    pub model: String,
    /// pi's thinking level (`minimal` ... `xhigh`), if any.
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// pi's `context.messages`, as pi serialises them.
    #[serde(default)]
    pub messages: Vec<Value>,
    /// pi's `context.tools`, offered to agy over MCP (see [`crate::pi::mcp`]).
    #[serde(default)]
    pub tools: Vec<crate::pi::mcp::PiTool>,
    /// pi can show a dialog (it has a UI): in `ask` mode agy's tool calls
    /// are put to the user; without one, only the rules pass them.
    #[serde(default)]
    pub ui: bool,
}

/// A pi `AssistantMessageEvent` without `partial` (see ARCHITECTURE.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PiEvent {
    Start,
    TextStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    TextDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    /// Ends a text block. pi's own event also carries the block's whole
    /// text; the extension fills it in from the deltas it applied, so the
    /// bridge never keeps a second copy of a growing answer.
    TextEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    /// Ends a thinking block (its text as for [`PiEvent::TextEnd`]).
    ThinkingEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ToolcallStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
    },
    ToolcallDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    ToolcallEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        #[serde(rename = "toolCall")]
        tool_call: Value,
    },
    Done {
        reason: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<PiUsage>,
    },
    Error {
        reason: &'static str,
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    /// Not a message event: agy waits for the user's decision on a tool
    /// call (`ask` mode). The extension asks with pi's dialog and answers
    /// with a `permission` line; it may come between messages.
    PermissionRequest {
        id: String,
        tool: String,
        title: String,
        detail: String,
        #[serde(rename = "sessionRule")]
        session_rule: String,
    },
}

/// pi's `Usage` (without cost, which pi computes from the model's prices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// pi's sum of the four (agy's own total leaves out cache reads).
    pub total_tokens: u64,
}

impl PiUsage {
    /// agy's last model call of the turn: what pi's context meter shows.
    pub fn from_turn(usage: &TurnUsage) -> PiUsage {
        let u = &usage.last_call;
        PiUsage {
            input: u.input_tokens,
            output: u.output_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: 0,
            total_tokens: u.input_tokens + u.output_tokens + u.cache_read_tokens,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
}

/// Writes pi events, keeping pi's invariants: `start` first, at most one
/// block open (switching type closes it), exactly one terminal event, nothing
/// after it.
///
/// It also keeps the rule that a failure is said once: agy's error lines
/// are held ([`Self::hold_error`]) until agy goes on or the message ends,
/// and one that the turn's own failure repeats is not shown, since pi shows
/// that failure as the message's error ([`Self::fail`]).
pub struct PiStream<W: Write> {
    out: W,
    started: bool,
    finished: bool,
    open: Option<(BlockKind, usize)>,
    next_index: usize,
    /// agy's error lines not shown yet: (agy's sentence, the line).
    held: Vec<(String, String)>,
    /// The sink failed (pi went away); the caller should abort agy.
    pub broken: bool,
}

impl<W: Write> PiStream<W> {
    pub fn new(out: W) -> Self {
        PiStream {
            out,
            started: false,
            finished: false,
            open: None,
            next_index: 0,
            held: Vec::new(),
            broken: false,
        }
    }

    fn emit(&mut self, event: &PiEvent) {
        let always = matches!(
            event,
            PiEvent::Done { .. } | PiEvent::Error { .. } | PiEvent::PermissionRequest { .. }
        );
        if self.finished && !always {
            return;
        }
        // Serialised straight into the sink: a `text_end` carries the whole
        // block, and a line built first would be one more copy of it.
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, &mut self.out);
        let written = serde_json::to_writer(&mut out, event)
            .map_err(std::io::Error::from)
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if written.is_err() {
            self.broken = true;
        }
    }

    pub fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.emit(&PiEvent::Start);
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether a text block is open right now.
    pub fn text_open(&self) -> bool {
        matches!(self.open, Some((BlockKind::Text, _)))
    }

    /// Whether any content block was ever opened.
    pub fn has_content(&self) -> bool {
        self.next_index > 0
    }

    fn close(&mut self) {
        if let Some((kind, index)) = self.open.take() {
            self.emit(&match kind {
                BlockKind::Text => PiEvent::TextEnd {
                    content_index: index,
                },
                BlockKind::Thinking => PiEvent::ThinkingEnd {
                    content_index: index,
                },
            });
        }
    }

    fn ensure(&mut self, kind: BlockKind) -> usize {
        self.start();
        match &self.open {
            Some((k, i)) if *k == kind => return *i,
            Some(_) => self.close(),
            None => {}
        }
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, index));
        self.emit(&match kind {
            BlockKind::Text => PiEvent::TextStart {
                content_index: index,
            },
            BlockKind::Thinking => PiEvent::ThinkingStart {
                content_index: index,
            },
        });
        index
    }

    fn push(&mut self, kind: BlockKind, delta: &str) {
        if self.finished || delta.is_empty() {
            return;
        }
        let index = self.ensure(kind);
        self.emit(&match kind {
            BlockKind::Text => PiEvent::TextDelta {
                content_index: index,
                delta: delta.to_string(),
            },
            BlockKind::Thinking => PiEvent::ThinkingDelta {
                content_index: index,
                delta: delta.to_string(),
            },
        });
    }

    pub fn text(&mut self, delta: &str) {
        self.push(BlockKind::Text, delta);
    }

    /// Hold agy's error `line` (saying `sentence`) until
    /// [`Self::release_held`], the end of the message, or a failure that
    /// repeats it.
    pub fn hold_error(&mut self, sentence: &str, line: &str) {
        if !self.finished {
            self.held.push((sentence.to_string(), line.to_string()));
        }
    }

    /// Show the held error lines: agy went on, so they were not the end.
    pub fn release_held(&mut self) {
        for (_, line) in std::mem::take(&mut self.held) {
            self.thinking(&line);
        }
    }

    pub fn thinking(&mut self, delta: &str) {
        self.push(BlockKind::Thinking, delta);
    }

    /// End successfully. A turn with no content gets one empty text block so
    /// pi has a well-formed assistant message.
    pub fn done(&mut self, usage: Option<PiUsage>) {
        if self.finished {
            return;
        }
        self.start();
        self.release_held();
        if !self.has_content() {
            self.ensure(BlockKind::Text);
        }
        self.close();
        self.finished = true;
        self.emit(&PiEvent::Done {
            reason: "stop",
            usage,
        });
    }

    /// End the message with agy's tool calls for pi to run (`id`, name,
    /// arguments): each as `toolcall_start`/`_delta`/`_end`, then `done`
    /// with reason `toolUse`. The next message begins with [`Self::restart`].
    pub fn tool_use(&mut self, calls: &[(String, String, Value)]) {
        if self.finished {
            return;
        }
        self.start();
        self.release_held();
        self.close();
        for (id, name, arguments) in calls {
            let index = self.next_index;
            self.next_index += 1;
            self.emit(&PiEvent::ToolcallStart {
                content_index: index,
                id: id.clone(),
                tool_name: name.clone(),
            });
            self.emit(&PiEvent::ToolcallDelta {
                content_index: index,
                delta: arguments.to_string(),
            });
            self.emit(&PiEvent::ToolcallEnd {
                content_index: index,
                tool_call: serde_json::json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments}),
            });
        }
        self.finished = true;
        self.emit(&PiEvent::Done {
            reason: "toolUse",
            usage: None,
        });
    }

    /// Ask pi to decide a tool call agy waits on (outside any message).
    pub fn permission_request(&mut self, request: PiEvent) {
        if matches!(request, PiEvent::PermissionRequest { .. }) {
            self.emit(&request);
        }
    }

    /// Begin the next assistant message of the same agy turn (after pi ran
    /// the tools of a `toolUse` message): `start` again, indexes from 0.
    pub fn restart(&mut self) {
        if !self.finished {
            return;
        }
        self.started = false;
        self.finished = false;
        self.open = None;
        self.next_index = 0;
        self.start();
    }

    /// End with an error (`reason` is `error` or `aborted`). A held error
    /// line whose sentence `message` repeats is dropped: pi shows `message`.
    pub fn fail(&mut self, aborted: bool, message: &str) {
        if self.finished {
            return;
        }
        self.start();
        self.held
            .retain(|(sentence, _)| !repeats(message, sentence));
        self.release_held();
        self.close();
        self.finished = true;
        self.emit(&PiEvent::Error {
            reason: if aborted { "aborted" } else { "error" },
            error_message: message.to_string(),
        });
    }
}

// ---------------------------------------------------------------------------
// From pi's messages to agy's prompt.
// ---------------------------------------------------------------------------

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// Text blocks of a message's content (a string or a block array), joined;
/// images, thinking and tool calls are dropped. Returns (text, images).
fn content_text(content: Option<&Value>) -> (String, usize) {
    match content {
        Some(Value::String(s)) => (s.clone(), 0),
        Some(Value::Array(blocks)) => {
            let mut images = 0;
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str),
                    Some("image") => {
                        images += 1;
                        None
                    }
                    _ => None,
                })
                .collect();
            (texts.join("\n"), images)
        }
        _ => (String::new(), 0),
    }
}

/// The prompt for agy: the last message, which must be the user's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// Images pi attached that agy's `-p` cannot take.
    pub dropped_images: usize,
}

/// Why a request cannot become an agy turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("bad request: no user message to send to agy (the last message must be the user's)")]
    NoUserMessage,
    #[error("bad request: the user message has no text (agy -p takes text only)")]
    EmptyPrompt,
    #[error("pi sent tool results, but the agy turn that called those tools is over (it ended, or agy-bridge was restarted); send a new message")]
    OrphanToolResults,
    #[error("bad request: {0}")]
    Malformed(String),
}

pub fn extract_prompt(messages: &[Value]) -> Result<Prompt, RequestError> {
    let last = messages.last().ok_or(RequestError::NoUserMessage)?;
    match role(last) {
        "user" => {}
        // A continuation reaches here only when its agy turn is gone.
        "toolResult" => return Err(RequestError::OrphanToolResults),
        _ => return Err(RequestError::NoUserMessage),
    }
    let (text, images) = content_text(last.get("content"));
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(RequestError::EmptyPrompt);
    }
    Ok(Prompt {
        text,
        dropped_images: images,
    })
}

fn strip_compaction(t: &str) -> &str {
    match (t.find("<summary>"), t.rfind("</summary>")) {
        (Some(open), Some(close)) if close > open => t[open + "<summary>".len()..close].trim(),
        _ => t.trim(),
    }
}

/// A digest of pi-side context agy never saw, since `watermark` (the number
/// of messages the previous agy turn covered): the newest compaction summary,
/// turns by other providers, tool results and earlier user messages. agy's own
/// turns are skipped (they are in its database). Capped at `max_chars`,
/// keeping the summary and then the newest items.
pub fn context_digest(messages: &[Value], watermark: usize, max_chars: usize) -> String {
    context_digest_for(messages, watermark, max_chars, AgyContext::Kept)
}

/// [`context_digest`] for what agy still has: with [`AgyContext::Lost`],
/// agy's own earlier answers and the results of the tools it called
/// through the bridge are in it too.
pub fn context_digest_for(
    messages: &[Value],
    watermark: usize,
    max_chars: usize,
    context: AgyContext,
) -> String {
    let lost = context == AgyContext::Lost;
    if messages.is_empty() {
        return String::new();
    }
    let (summary, compaction_at) = compaction_summary(messages);
    let mut start = watermark.min(messages.len());
    if let Some(c) = compaction_at {
        start = start.max(c + 1);
    }
    let end = messages.len().saturating_sub(1);
    let bridged = bridged_call_ids(messages);
    let mut items: Vec<String> = Vec::new();
    // User messages right after the results of agy's bridged calls were
    // pi's steering messages: they went to agy with the last result.
    let mut steering = false;
    for m in messages.iter().take(end).skip(start) {
        let (t, _) = content_text(m.get("content"));
        let t = t.trim();
        let was_steering = std::mem::replace(&mut steering, false);
        match role(m) {
            "assistant" => {
                let provider = m
                    .get("provider")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                if t.is_empty() || (provider == PROVIDER_ID && !lost) {
                    continue;
                }
                if provider == PROVIDER_ID {
                    items.push(format!("[your earlier answer]\n{t}"));
                } else {
                    items.push(format!("[assistant turn from {provider}]\n{t}"));
                }
            }
            "user" => {
                if was_steering && !lost {
                    steering = true;
                    continue;
                }
                if t.is_empty() || t.contains(COMPACTION_MARKER) {
                    continue;
                }
                items.push(format!("[earlier user message]\n{t}"));
            }
            "toolResult" => {
                let id = m.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                if bridged.contains(id) && !lost {
                    // agy called it through the bridge: it has the result.
                    steering = true;
                    continue;
                }
                let name = m.get("toolName").and_then(Value::as_str).unwrap_or("tool");
                let error = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
                items.push(format!(
                    "[tool result: {name}{}]\n{}",
                    if error { " (error)" } else { "" },
                    if t.is_empty() { "(no text output)" } else { t }
                ));
            }
            _ => {}
        }
    }
    within_budget(summary, &items, max_chars)
}

/// pi's newest compaction summary, and the index of its message.
fn compaction_summary(messages: &[Value]) -> (Option<String>, Option<usize>) {
    for (i, m) in messages.iter().enumerate().rev() {
        if role(m) != "user" {
            continue;
        }
        let (t, _) = content_text(m.get("content"));
        if t.contains(COMPACTION_MARKER) {
            let summary = format!("[pi compaction summary]\n{}", strip_compaction(&t));
            return (Some(summary), Some(i));
        }
    }
    (None, None)
}

/// The summary, then as many of the newest `items` as fit `max_chars`
/// (marked truncated when some were left out).
fn within_budget(summary: Option<String>, items: &[String], max_chars: usize) -> String {
    const SEP: &str = "\n\n";
    let summary_len = summary.as_ref().map(|s| s.len() + SEP.len()).unwrap_or(0);
    let budget = max_chars.saturating_sub(summary_len);
    let mut delta = items.join(SEP);
    if delta.len() > budget {
        let mut kept: Vec<&str> = Vec::new();
        let mut used = TRUNCATED_MARK.len() + 1;
        for item in items.iter().rev() {
            let cost = item.len() + SEP.len();
            if used + cost > budget {
                break;
            }
            kept.push(item);
            used += cost;
        }
        kept.reverse();
        delta = if kept.is_empty() {
            // Even the newest item is too long: keep its tail.
            keep_tail(items.last().map(String::as_str).unwrap_or(""), budget)
        } else {
            format!("{TRUNCATED_MARK}\n{}", kept.join(SEP))
        };
    }
    [summary.unwrap_or_default(), delta]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(SEP)
}

const TRUNCATED_MARK: &str = "[older context truncated]";

/// The end of `text` in at most `max` bytes, marked as truncated (empty when
/// not even the mark fits).
fn keep_tail(text: &str, max: usize) -> String {
    let room = max.saturating_sub(TRUNCATED_MARK.len() + 1);
    if room == 0 {
        return String::new();
    }
    let mut cut = text.len().saturating_sub(room);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("{TRUNCATED_MARK}\n{}", &text[cut..])
}

/// Ids of the tool calls agy made through the bridge (toolCall blocks of
/// its own assistant messages).
fn bridged_call_ids(messages: &[Value]) -> std::collections::HashSet<&str> {
    messages
        .iter()
        .filter(|m| {
            role(m) == "assistant" && m.get("provider").and_then(Value::as_str) == Some(PROVIDER_ID)
        })
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .filter_map(|b| b.get("id").and_then(Value::as_str))
        .collect()
}

/// Whether pi's context holds earlier turns of agy's own.
pub fn has_own_turns(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        role(m) == "assistant" && m.get("provider").and_then(Value::as_str) == Some(PROVIDER_ID)
    })
}

/// The full prompt agy receives: digest (if any), then the user's text.
///
/// Nothing is trimmed for length: the prompt never goes on agy's command
/// line, but on its stdin or in a private file ([`crate::run::prompt_file`]),
/// and the digest is bounded when it is made ([`context_digest`]).
pub fn compose_prompt(prompt: &Prompt, digest: &str) -> String {
    compose_prompt_for(prompt, digest, AgyContext::Kept)
}

/// [`compose_prompt`], framing the digest for what agy still has.
pub fn compose_prompt_for(prompt: &Prompt, digest: &str, context: AgyContext) -> String {
    let preamble = match context {
        AgyContext::Kept => DIGEST_PREAMBLE,
        AgyContext::Lost => LOST_PREAMBLE,
    };
    let mut text = prompt.text.clone();
    if prompt.dropped_images > 0 {
        text.push_str(&format!(
            "\n\n[{} image(s) were attached in pi but could not be passed to agy, which takes text only.]",
            prompt.dropped_images
        ));
    }
    if digest.is_empty() {
        text
    } else {
        format!("{preamble}\n\n{digest}\n\n---\n\n{text}")
    }
}

// ---------------------------------------------------------------------------
// From agy's events to pi's.
// ---------------------------------------------------------------------------

/// Maps runner events onto a [`PiStream`] for one turn: one thinking line
/// per event pi has no block for (a tool call, a failure, a subagent, a
/// notice), each in words a user can act on.
pub struct EventMapper {
    edits: TurnEdits,
    /// Edit calls announced but not finished yet, by call id (or name+args).
    pending_edits: HashMap<String, diff::EditTarget>,
    /// agy's own error messages this turn (for the final error).
    pub errors: Vec<String>,
    last_text_idx: Option<i64>,
    /// agy's calls of pi's tools are pi's own toolCalls: not repeated.
    hide_bridge_calls: bool,
    /// The reason shown for each failed tool step: agy records it again as
    /// that step's error, which is then not shown twice.
    failed_steps: HashMap<i64, String>,
    /// The conversation this turn is bound to (from [`RunEvent::Bound`]) and
    /// where agy keeps conversations: the database named in the commands
    /// the notices tell the user to run.
    conversation: Option<String>,
    conversations_dir: Option<PathBuf>,
    /// Tool calls shown once from one source and not yet met in the other
    /// (the gate's hook payload, the database's step), by [`call_identity`]:
    /// each call is shown by whichever comes first, once.
    from_gate: HashMap<String, u32>,
    from_db: HashMap<String, u32>,
    /// Steps the gate denied, said already: their error is not repeated.
    denied: HashMap<i64, String>,
}

/// What makes the gate's view of a call and the database's the same call:
/// the tool and its whole subject. The arguments themselves differ between
/// the two (the planner's carry agy's `toolAction`/`toolSummary`, key order
/// differs), and the step indexes do (the planner step requests, the tool
/// step runs).
fn call_identity(name: &str, arguments: &str) -> String {
    format!("{name}\u{0}{}", subject::rule_subject(name, arguments))
}

/// A call seen by one source: `false` when the other source showed it
/// already (that showing is used up), else `true` and remembered as shown.
fn pair(
    other: &mut HashMap<String, u32>,
    mine: &mut HashMap<String, u32>,
    name: &str,
    arguments: &str,
) -> bool {
    let key = call_identity(name, arguments);
    match other.get_mut(&key) {
        Some(n) if *n > 0 => {
            *n -= 1;
            false
        }
        _ => {
            *mine.entry(key).or_default() += 1;
            true
        }
    }
}

fn call_key(id: &str, name: &str, arguments: &str) -> String {
    if id.is_empty() {
        format!("{name}\u{0}{arguments}")
    } else {
        id.to_string()
    }
}

impl EventMapper {
    pub fn new(cwd: &Path) -> Self {
        EventMapper {
            edits: TurnEdits::new(cwd),
            pending_edits: HashMap::new(),
            errors: Vec::new(),
            last_text_idx: None,
            hide_bridge_calls: false,
            failed_steps: HashMap::new(),
            conversation: None,
            conversations_dir: crate::follow::discovery::default_conversations_dir(),
            from_gate: HashMap::new(),
            from_db: HashMap::new(),
            denied: HashMap::new(),
        }
    }

    /// A tool call agy is about to make, from the gate (its earliest sign,
    /// with full arguments): the line to show now (`None` for an edit,
    /// shown as its diff, and for pi's own tools). The database's record of
    /// the same step is then not shown again.
    pub fn announce_call(&mut self, name: &str, arguments: &str) -> Option<String> {
        let call = Event::ToolCall {
            idx: 0,
            id: String::new(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        if self.hidden(&call) || !pair(&mut self.from_db, &mut self.from_gate, name, arguments) {
            return None;
        }
        self.call_line(name, arguments)
    }

    /// A step the gate denied, with why (said on its own line): agy's
    /// error for it is not said again.
    pub fn note_denied(&mut self, idx: i64, reason: &str) {
        self.denied.insert(idx, reason.to_string());
    }

    /// Leave out agy's steps for the calls it made through the bridge.
    pub fn hide_bridge_calls(&mut self) {
        self.hide_bridge_calls = true;
    }

    /// Where agy keeps conversations, when it is not the default
    /// (`$AGY_CONVERSATIONS_DIR`, else `~/.gemini/antigravity-cli/conversations`).
    pub fn set_conversations_dir(&mut self, dir: &Path) {
        self.conversations_dir = Some(dir.to_path_buf());
    }

    fn hidden(&self, e: &Event) -> bool {
        match e {
            Event::ToolCall {
                name, arguments, ..
            } => self.hide_bridge_calls && crate::pi::mcp::is_bridge_call(name, arguments),
            Event::ToolResult { name, .. } => {
                self.hide_bridge_calls && crate::pi::mcp::is_bridge_call(name, "")
            }
            _ => false,
        }
    }

    /// The bound conversation's database as one shell word, for a command
    /// the user can paste.
    fn database(&self) -> String {
        // Events come after the binding; the placeholder is for a caller
        // that never forwards `Bound`.
        let id = self.conversation.as_deref().unwrap_or("CONVERSATION_ID");
        match &self.conversations_dir {
            Some(dir) => shell_word(&dir.join(format!("{id}.db")).display().to_string()),
            // No HOME: agy's default, for the shell to expand.
            None => format!(
                "~/.gemini/antigravity-cli/conversations/{}",
                shell_word(&format!("{id}.db"))
            ),
        }
    }

    /// One thinking line; agy's held error lines come first (agy went on).
    fn line<W: Write>(&self, out: &mut PiStream<W>, text: &str) {
        out.release_held();
        out.thinking(&format!("\n[{text}]\n"));
    }

    /// A tool call: an edit is remembered for its diff; a subagent's call is
    /// left to its subagent line; anything else is one line naming the tool
    /// and what it acted on.
    fn tool_call<W: Write>(
        &mut self,
        id: &str,
        name: &str,
        arguments: &str,
        out: &mut PiStream<W>,
    ) {
        if let Some(target) = diff::edit_target(name, arguments) {
            self.edits.before_edit(&target.path);
            self.pending_edits
                .insert(call_key(id, name, arguments), target);
        } else if let Some(line) = self.call_line(name, arguments) {
            out.release_held();
            out.thinking(&line);
        }
    }

    /// The line of a call that is neither an edit (remembered for its
    /// diff) nor a subagent's (left to its subagent line).
    fn call_line(&mut self, name: &str, arguments: &str) -> Option<String> {
        if let Some(target) = diff::edit_target(name, arguments) {
            self.edits.before_edit(&target.path);
            self.pending_edits
                .insert(call_key("", name, arguments), target);
            return None;
        }
        if name == "invoke_subagent" {
            return None;
        }
        let line = subject::tool_line(name, arguments, Some(self.edits.cwd()));
        let subject = line.subject.map(|s| format!(" {s}")).unwrap_or_default();
        Some(format!("\n[agy tool: {}]{subject}\n", line.label))
    }

    /// A tool's result: an edit's diff, or one failure line in agy's words.
    fn tool_result<W: Write>(
        &mut self,
        idx: i64,
        (id, name): (&str, &str),
        ok: bool,
        summary: &str,
        out: &mut PiStream<W>,
    ) {
        let key_by_id = (!id.is_empty()).then(|| id.to_string());
        let target = key_by_id
            .and_then(|k| self.pending_edits.remove(&k))
            .or_else(|| {
                // A result without an id: the oldest pending edit of that tool.
                let k = self
                    .pending_edits
                    .keys()
                    .find(|k| k.starts_with(&format!("{name}\u{0}")))
                    .cloned()?;
                self.pending_edits.remove(&k)
            });
        let reason = subject::failure_reason(name, summary);
        match target {
            Some(target) if ok => {
                let rendered = self.edits.render(&target);
                out.release_held();
                out.thinking(&format!("\n{}\n", rendered.trim_end()));
            }
            Some(target) => {
                let path = target
                    .path
                    .strip_prefix(self.edits.cwd())
                    .unwrap_or(&target.path);
                self.failed_steps.insert(idx, summary.to_string());
                self.line(
                    out,
                    &format!("agy edit failed: {}: {reason}", path.display()),
                );
            }
            None if !ok => {
                self.failed_steps.insert(idx, summary.to_string());
                let label = subject::tool_label(name);
                self.line(out, &format!("agy tool failed: {label}: {reason}"));
            }
            None => {}
        }
    }

    /// agy's error: held, so that the turn's own failure is said once (see
    /// [`PiStream::fail`]); not repeated when it is a failed tool step's
    /// reason already shown.
    fn error<W: Write>(&mut self, idx: i64, message: &str, out: &mut PiStream<W>) {
        self.errors.push(message.to_string());
        if self.failed_steps.get(&idx).map(String::as_str) == Some(message)
            || self.denied.contains_key(&idx)
        {
            return;
        }
        let sentence = subject::sentence(message);
        out.hold_error(&sentence, &format!("\n[agy error: {sentence}]\n"));
    }

    pub fn map<W: Write>(&mut self, event: &RunEvent, out: &mut PiStream<W>) {
        let e = match event {
            RunEvent::Agy(e) => e,
            RunEvent::Bound {
                conversation_id, ..
            } => {
                self.conversation = Some(conversation_id.clone());
                return;
            }
            RunEvent::Degraded { reason } => return self.line(out, &degraded_notice(reason)),
            RunEvent::ConversationReplaced {
                requested,
                conversation_id,
            } => {
                self.conversation = Some(conversation_id.clone());
                let notice = new_conversation_notice(requested, conversation_id);
                return self.line(
                    out,
                    &format!("{notice}; this turn continues there, and pi's record of the earlier turns goes to agy with your next message"),
                );
            }
            RunEvent::AnswerFromAgy { reason } => {
                return self.line(out, &answer_from_agy_notice(reason))
            }
            _ => return,
        };
        if self.hidden(e) {
            return;
        }
        match e {
            Event::Text { idx, text } => {
                out.release_held();
                // Text from a later planner step is a new paragraph.
                if out.text_open() && self.last_text_idx.is_some_and(|i| i != *idx) {
                    out.text("\n\n");
                }
                self.last_text_idx = Some(*idx);
                out.text(text);
            }
            Event::Thinking { text, .. } => {
                out.release_held();
                out.thinking(text);
            }
            Event::Rewrite { channel, text, .. } => self.rewrite(*channel, text, out),
            Event::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                if pair(&mut self.from_gate, &mut self.from_db, name, arguments) {
                    self.tool_call(id, name, arguments, out)
                }
            }
            Event::ToolResult {
                idx,
                id,
                name,
                ok,
                summary,
                ..
            } => {
                if *ok || !self.denied.contains_key(idx) {
                    self.tool_result(*idx, (id, name), *ok, summary, out)
                }
            }
            Event::Error { idx, message } => self.error(*idx, message, out),
            other => {
                if let Some(line) = self.other_line(other) {
                    self.line(out, &line);
                }
            }
        }
    }

    /// pi cannot retract streamed text: say so, then give the new version
    /// in full so nothing agy wrote is lost.
    fn rewrite<W: Write>(&mut self, channel: Channel, text: &str, out: &mut PiStream<W>) {
        match channel {
            Channel::Text => {
                self.line(out, "agy revised its answer; the revised text follows");
                out.text(text);
            }
            Channel::Thinking => {
                self.line(out, "agy revised its thinking");
                out.thinking(text);
            }
        }
    }

    /// The line of an event that is neither content nor a tool.
    fn other_line(&self, e: &Event) -> Option<String> {
        Some(match e {
            Event::Subagent { role, task, .. } => {
                format!("agy {}", subject::subagent_started(role.as_deref(), task.as_deref()))
            }
            Event::SubagentEnded {
                role,
                ok,
                answer,
                error,
                ..
            } => format!(
                "agy {}",
                subject::subagent_ended(role.as_deref(), *ok, answer.as_deref(), error.as_deref())
            ),
            Event::Notice { text, .. } => format!("agy: {}", flat(text, subject::SENTENCE_MAX_CHARS)),
            Event::Permission {
                action,
                target,
                decision,
                ..
            } => events::permission_line(action, target, *decision),
            Event::Unknown { idx, step_type } => format!(
                "agy step {idx} is of a type this agy-bridge does not know ({step_type}) and is not shown; to see what changed in agy's format, run `agy-bridge drift {}`",
                self.database()
            ),
            // The wire detail (field paths) is for `agy-bridge decode`.
            Event::DecodeError { idx, .. } => format!(
                "agy step {idx} could not be read by this agy-bridge and is not shown; to see why, run `agy-bridge decode {}`",
                self.database()
            ),
            // The prompt is ours; titles are conversation metadata; the
            // rest has its own mapping in `map`.
            Event::UserInput { .. }
            | Event::Title { .. }
            | Event::Text { .. }
            | Event::Thinking { .. }
            | Event::Rewrite { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::Error { .. } => return None,
        })
    }
}

/// The error pi sees for a failed turn: whether it was the user's abort,
/// and the failure's one sentence (worded for pi's retry; see
/// [`crate::run::failure`]).
pub fn error_message(result: &RunResult) -> (bool, String) {
    match &result.failure {
        Some(f) => (f.is_abort(), f.to_string()),
        None => (false, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(buf: &[u8]) -> Vec<Value> {
        String::from_utf8_lossy(buf)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    }

    #[test]
    fn stream_closes_blocks_on_switch_and_ends_once() {
        let mut buf = Vec::new();
        {
            let mut s = PiStream::new(&mut buf);
            s.start();
            s.thinking("a");
            s.thinking("b");
            s.text("c");
            s.done(None);
            s.fail(false, "late");
            s.text("ignored");
        }
        let types: Vec<String> = lines(&buf)
            .iter()
            .map(|v| v["type"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(
            types,
            [
                "start",
                "thinking_start",
                "thinking_delta",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_end",
                "done"
            ]
        );
        let all = lines(&buf);
        assert!(all[4].get("content").is_none(), "{}", all[4]);
        assert_eq!(all[5]["contentIndex"], 1);
    }

    #[test]
    fn tool_use_ends_the_message_and_restart_begins_the_next() {
        let mut buf = Vec::new();
        {
            let mut s = PiStream::new(&mut buf);
            s.start();
            s.thinking("t");
            s.tool_use(&[("agy_1".into(), "memory".into(), json!({"q": "x"}))]);
            s.text("ignored until restart");
            s.restart();
            s.text("after");
            s.done(None);
        }
        let all = lines(&buf);
        let types: Vec<&str> = all
            .iter()
            .map(|v| v["type"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            types,
            [
                "start",
                "thinking_start",
                "thinking_delta",
                "thinking_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_end",
                "done",
                "start",
                "text_start",
                "text_delta",
                "text_end",
                "done"
            ]
        );
        assert_eq!(
            all[4],
            json!({"type":"toolcall_start","contentIndex":1,"id":"agy_1","toolName":"memory"})
        );
        assert_eq!(all[5]["delta"], r#"{"q":"x"}"#);
        assert_eq!(
            all[6]["toolCall"],
            json!({"type":"toolCall","id":"agy_1","name":"memory","arguments":{"q":"x"}})
        );
        assert_eq!(all[7], json!({"type":"done","reason":"toolUse"}));
        assert_eq!(all[9]["contentIndex"], 0, "the next message counts from 0");
        assert_eq!(all[12]["reason"], "stop");
    }

    #[test]
    fn bridge_calls_are_not_repeated_in_thinking() {
        let call = |name: &str, args: &str| {
            RunEvent::Agy(Event::ToolCall {
                idx: 3,
                id: "c".into(),
                name: name.into(),
                arguments: args.into(),
            })
        };
        let run = |hide: bool| {
            let mut buf = Vec::new();
            let mut mapper = EventMapper::new(Path::new("/w"));
            if hide {
                mapper.hide_bridge_calls();
            }
            {
                let mut s = PiStream::new(&mut buf);
                mapper.map(&call("mcp:pi/memory", "{}"), &mut s);
                mapper.map(
                    &call(
                        "call_mcp_tool",
                        r#"{"ServerName":"pi","ToolName":"memory"}"#,
                    ),
                    &mut s,
                );
                mapper.map(&call("mcp:github/issues", "{}"), &mut s);
            }
            String::from_utf8_lossy(&buf).into_owned()
        };
        let hidden = run(true);
        assert!(
            !hidden.contains("mcp:pi/") && !hidden.contains("call_mcp_tool"),
            "{hidden}"
        );
        assert!(hidden.contains("[agy tool: mcp github/issues]"), "{hidden}");
        assert!(run(false).contains("[agy tool: mcp pi/memory]"));
    }

    /// A call announced by the gate (the hook's payload, the tool step's
    /// index, agy's arguments without its own words) and recorded by the
    /// database (the planner step's index, with them) is one line, whichever
    /// comes first; two like calls are two lines; a denied step's error is
    /// not said again.
    #[test]
    fn a_call_seen_by_the_gate_and_the_database_is_shown_once() {
        let db_call = |idx: i64, cmd: &str| {
            RunEvent::Agy(Event::ToolCall {
                idx,
                id: format!("call-{idx}"),
                name: "run_command".into(),
                arguments: format!(
                    r#"{{"CommandLine":"{cmd}","toolAction":"Running","toolSummary":"tests"}}"#
                ),
            })
        };
        let hook_args = |cmd: &str| format!(r#"{{"Cwd":"/w","CommandLine":"{cmd}"}}"#);
        let mut buf = Vec::new();
        {
            let mut mapper = EventMapper::new(Path::new("/w"));
            let mut s = PiStream::new(&mut buf);
            // Gate first, then the database.
            let line = mapper.announce_call("run_command", &hook_args("cargo test"));
            s.thinking(&line.expect("the gate's line"));
            mapper.map(&db_call(2, "cargo test"), &mut s);
            // The database first, then the gate.
            mapper.map(&db_call(5, "cargo build"), &mut s);
            assert_eq!(
                mapper.announce_call("run_command", &hook_args("cargo build")),
                None
            );
            // The same command again is another call.
            let again = mapper.announce_call("run_command", &hook_args("cargo test"));
            s.thinking(&again.expect("a second call"));
            mapper.map(&db_call(8, "cargo test"), &mut s);
            // A denied step: its error is the decision line's, said already.
            mapper.note_denied(9, "not now");
            mapper.map(
                &RunEvent::Agy(Event::ToolResult {
                    idx: 9,
                    id: "call-8".into(),
                    name: "run_command".into(),
                    status: "error".into(),
                    ok: false,
                    summary: "tool call denied by pre-tool hook: not now".into(),
                    output: None,
                    exit_code: None,
                }),
                &mut s,
            );
            mapper.map(
                &error(9, "tool call denied by pre-tool hook: not now"),
                &mut s,
            );
            s.done(None);
        }
        let text: String = lines(&buf)
            .iter()
            .filter_map(|v| v["delta"].as_str().map(str::to_string))
            .collect();
        assert_eq!(
            text.matches("[agy tool: run_command] cargo test").count(),
            2,
            "{text}"
        );
        assert_eq!(
            text.matches("[agy tool: run_command] cargo build").count(),
            1,
            "{text}"
        );
        assert!(!text.contains("denied by pre-tool hook"), "{text}");
    }

    /// The thinking text and the final error message of `events` mapped
    /// and ended with `end` (a failure's sentence, or `None` for done).
    fn mapped(events: Vec<RunEvent>, hide: bool, end: Option<&str>) -> (String, String) {
        let mut buf = Vec::new();
        {
            let mut mapper = EventMapper::new(Path::new("/w"));
            mapper.set_conversations_dir(Path::new("/home/u/conversations"));
            if hide {
                mapper.hide_bridge_calls();
            }
            let mut s = PiStream::new(&mut buf);
            for e in &events {
                mapper.map(e, &mut s);
            }
            match end {
                Some(message) => s.fail(false, message),
                None => s.done(None),
            }
        }
        let all = lines(&buf);
        let thinking = all
            .iter()
            .filter(|v| v["type"] == "thinking_delta" || v["type"] == "text_delta")
            .filter_map(|v| v["delta"].as_str())
            .collect();
        let error = all
            .iter()
            .find(|v| v["type"] == "error")
            .and_then(|v| v["errorMessage"].as_str())
            .unwrap_or("")
            .to_string();
        (thinking, error)
    }

    fn error(idx: i64, message: &str) -> RunEvent {
        RunEvent::Agy(Event::Error {
            idx,
            message: message.into(),
        })
    }

    #[test]
    fn a_quota_failure_is_said_once() {
        let quota = "Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 34m13s.";
        let failure = format!("agy quota exceeded: {quota}");
        let (thinking, message) = mapped(vec![error(5, quota)], false, Some(&failure));
        let said = thinking.matches(quota).count() + message.matches(quota).count();
        assert_eq!(said, 1, "{thinking:?} / {message:?}");
        assert_eq!(message, failure);
        // An error the failure does not repeat, or one agy went on from, is shown.
        let (thinking, _) = mapped(vec![error(5, "model hiccup")], false, Some(&failure));
        assert!(
            thinking.contains("\n[agy error: model hiccup]\n"),
            "{thinking}"
        );
        let went_on = vec![
            error(5, quota),
            RunEvent::Agy(Event::Text {
                idx: 6,
                text: "after".into(),
            }),
        ];
        let (thinking, _) = mapped(went_on, false, None);
        assert!(
            thinking.contains(&format!("[agy error: {quota}]\n")),
            "{thinking}"
        );
        let (thinking, _) = mapped(vec![error(5, quota)], false, None);
        assert!(
            thinking.contains(quota),
            "held lines show at the end: {thinking}"
        );
    }

    #[test]
    fn a_failed_tool_step_is_one_line_in_agys_words() {
        let events = vec![
            RunEvent::Agy(Event::ToolResult {
                idx: 11,
                id: "c".into(),
                name: "run_command".into(),
                status: "error".into(),
                ok: false,
                summary: "run_command failed: ./deploy.sh: No such file or directory".into(),
                output: None,
                exit_code: None,
            }),
            error(
                11,
                "run_command failed: ./deploy.sh: No such file or directory",
            ),
        ];
        let (thinking, _) = mapped(events, false, None);
        assert_eq!(
            thinking,
            "\n[agy tool failed: run_command: ./deploy.sh: No such file or directory]\n"
        );
    }

    #[test]
    fn one_mcp_call_is_one_line_and_its_failure_another() {
        use agy_format::steps::{
            Body, McpToolResult, PlannerResponse, Step, StepStatus, StepType, ToolCall,
        };
        let call = |id: &str, name: &str, args: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        };
        let mcp = |status| {
            Step::new(2, StepType::McpTool, status).with_body(Body::McpTool(McpToolResult {
                server: "pi".into(),
                call: Some(call(
                    "mcp-call-2",
                    "memory",
                    json!({"query": "release notes"}),
                )),
                result: (status == StepStatus::Done)
                    .then(|| "Error: MCP server \"pi\" is not configured".into()),
                user_rejected: false,
            }))
        };
        let steps = [
            Step::new(1, StepType::PlannerResponse, StepStatus::Done).with_body(Body::Planner(
                PlannerResponse {
                    tool_calls: vec![call(
                        "c1",
                        "call_mcp_tool",
                        json!({"ServerName": "pi", "ToolName": "memory", "Arguments": {"query": "release notes"}}),
                    )],
                    ..PlannerResponse::default()
                },
            )),
            mcp(StepStatus::Running),
            mcp(StepStatus::Done),
        ];
        let events: Vec<RunEvent> = events::decode_all(&steps)
            .into_iter()
            .map(RunEvent::Agy)
            .collect();
        let (thinking, _) = mapped(events.clone(), false, None);
        assert_eq!(
            thinking,
            "\n[agy tool: mcp pi/memory] release notes\n\n[agy tool failed: mcp pi/memory: MCP server \"pi\" is not configured]\n"
        );
        // agy's calls of pi's own tools through the bridge stay hidden.
        let (thinking, _) = mapped(events, true, None);
        assert_eq!(thinking, "");
    }

    #[test]
    fn a_subagent_shows_its_role_task_and_answer() {
        let events = vec![
            RunEvent::Agy(Event::ToolCall {
                idx: 2,
                id: "s1".into(),
                name: "invoke_subagent".into(),
                arguments: json!({"Role": "researcher", "Task": "find callers"}).to_string(),
            }),
            RunEvent::Agy(Event::Subagent {
                idx: 3,
                conversation_id: "abc".into(),
                role: Some("researcher".into()),
                task: Some("find callers".into()),
            }),
            RunEvent::Agy(Event::SubagentEnded {
                idx: 3,
                conversation_id: "abc".into(),
                role: Some("researcher".into()),
                ok: true,
                answer: Some("Two callers:\nmain.rs and cli.rs.".into()),
                error: None,
            }),
        ];
        let (thinking, _) = mapped(events, false, None);
        assert_eq!(
            thinking,
            "\n[agy subagent researcher: find callers]\n\n[agy subagent researcher answered: Two callers: main.rs and cli.rs.]\n"
        );
    }

    #[test]
    fn unknown_and_unreadable_steps_name_a_command_to_paste() {
        let id = "0f0e0d0c-0b0a-4908-8706-050403020100";
        let events = vec![
            RunEvent::Bound {
                conversation_id: id.into(),
                method: crate::follow::discovery::BindMethod::StreamJson,
            },
            RunEvent::Agy(Event::Unknown {
                idx: 7,
                step_type: 250,
            }),
            RunEvent::Agy(Event::DecodeError {
                idx: 8,
                message: "malformed".into(),
            }),
        ];
        let (thinking, _) = mapped(events, false, None);
        let db = format!("/home/u/conversations/{id}.db");
        assert!(
            thinking.contains(&format!("does not know (250) and is not shown; to see what changed in agy's format, run `agy-bridge drift {db}`]")),
            "{thinking}"
        );
        assert!(
            thinking.contains(&format!("run `agy-bridge decode {db}`]")),
            "{thinking}"
        );
    }

    #[test]
    fn digest_skips_results_of_calls_agy_made_through_the_bridge() {
        let msgs = vec![
            json!({"role":"user","content":"ask pi"}),
            json!({"role":"assistant","provider":"antigravity","content":[{"type":"toolCall","id":"agy_1","name":"memory","arguments":{}}]}),
            json!({"role":"toolResult","toolCallId":"agy_1","toolName":"memory","isError":false,"content":[{"type":"text","text":"bridged result"}]}),
            json!({"role":"assistant","provider":"anthropic","content":[{"type":"toolCall","id":"toolu_2","name":"bash","arguments":{}}]}),
            json!({"role":"toolResult","toolCallId":"toolu_2","toolName":"bash","isError":false,"content":[{"type":"text","text":"claude's result"}]}),
            json!({"role":"user","content":"next"}),
        ];
        let d = context_digest(&msgs, 0, 8000);
        assert!(!d.contains("bridged result"), "{d}");
        assert!(d.contains("[tool result: bash]\nclaude's result"), "{d}");
        // A user message right after a bridged result was pi's steering
        // message: agy got it with the result. One after another
        // provider's result was not.
        let mut steered = msgs.clone();
        steered.insert(3, json!({"role":"user","content":"steer: use metres"}));
        steered.insert(4, json!({"role":"user","content":"steer: and be brief"}));
        steered.insert(7, json!({"role":"user","content":"said to claude"}));
        let d = context_digest(&steered, 0, 8000);
        assert!(!d.contains("steer:"), "{d}");
        assert!(d.contains("[earlier user message]\nsaid to claude"), "{d}");
        let lost = context_digest_for(&steered, 0, 8000, AgyContext::Lost);
        assert!(
            lost.contains("steer: use metres") && lost.contains("steer: and be brief"),
            "{lost}"
        );
        let orphan = vec![msgs[2].clone()];
        assert_eq!(
            extract_prompt(&orphan),
            Err(RequestError::OrphanToolResults)
        );
    }

    #[test]
    fn empty_success_has_one_empty_text_block() {
        let mut buf = Vec::new();
        PiStream::new(&mut buf).done(None);
        let types: Vec<Value> = lines(&buf).iter().map(|v| v["type"].clone()).collect();
        assert_eq!(types, ["start", "text_start", "text_end", "done"]);
    }

    #[test]
    fn prompt_joins_text_and_counts_images() {
        let msgs = vec![
            json!({"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"},{"type":"text","text":"b"}]}),
        ];
        assert_eq!(
            extract_prompt(&msgs),
            Ok(Prompt {
                text: "a\nb".into(),
                dropped_images: 1
            })
        );
        assert_eq!(extract_prompt(&[]), Err(RequestError::NoUserMessage));
        let assistant_last = vec![json!({"role":"assistant","content":[]})];
        assert_eq!(
            extract_prompt(&assistant_last),
            Err(RequestError::NoUserMessage)
        );
    }

    #[test]
    fn digest_skips_own_turns_and_keeps_newest() {
        let msgs = vec![
            json!({"role":"user","content":"first question"}),
            json!({"role":"assistant","provider":"antigravity","content":[{"type":"text","text":"agy answer"}]}),
            json!({"role":"assistant","provider":"anthropic","content":[{"type":"text","text":"claude answer"}]}),
            json!({"role":"toolResult","toolName":"bash","isError":true,"content":[{"type":"text","text":"boom"}]}),
            json!({"role":"user","content":"now this"}),
        ];
        let d = context_digest(&msgs, 0, 8000);
        assert!(!d.contains("agy answer"));
        assert!(d.contains("[assistant turn from anthropic]\nclaude answer"));
        assert!(d.contains("[tool result: bash (error)]\nboom"));
        assert!(d.contains("[earlier user message]\nfirst question"));
        assert!(!d.contains("now this"), "the prompt itself is not digest");
        // Watermark: only what came after the last agy turn.
        let d = context_digest(&msgs, 2, 8000);
        assert!(!d.contains("first question"));
        // Cap keeps the newest items.
        let d = context_digest(&msgs, 0, 60);
        assert!(d.len() <= 60, "{}", d.len());
        assert!(d.contains("boom") && !d.contains("first question"), "{d}");
    }

    #[test]
    fn digest_starts_at_the_newest_compaction() {
        let msgs = vec![
            json!({"role":"user","content":"ancient"}),
            json!({"role":"user","content":"The conversation history before this point was compacted into the following summary:\n<summary>\nwe fixed the parser\n</summary>"}),
            json!({"role":"user","content":"after"}),
            json!({"role":"user","content":"prompt"}),
        ];
        let d = context_digest(&msgs, 0, 8000);
        assert!(d.starts_with("[pi compaction summary]\nwe fixed the parser"));
        assert!(d.contains("after") && !d.contains("ancient"));
    }

    #[test]
    fn a_long_prompt_keeps_its_whole_digest() {
        let digest = format!("OLDEST {}NEWEST", "d".repeat(7000));
        let long = Prompt {
            text: "u".repeat(300 * 1024),
            dropped_images: 0,
        };
        let p = compose_prompt(&long, &digest);
        assert!(p.contains("OLDEST") && p.contains("NEWEST") && p.ends_with(&long.text));
        assert!(!p.contains(TRUNCATED_MARK));
    }
}
