//! pi's event stream for one assistant message: the invariants pi relies
//! on (`start` first, one open block, exactly one terminal event) kept in
//! one writer, so no caller can break them whatever order it calls in.

use crate::pi::provider::pipe::Room;
use crate::pi::provider::{PiEvent, PiUsage};
use agy_format::text::repeats;
use serde_json::Value;
use std::io::Write;

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
/// are held (`Self::hold_error`) until agy goes on or the message ends,
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
    /// Room in the sink's pipe ([`Self::with_room`]), awaited before an
    /// event's lines are written ([`Self::room`]).
    room: Option<Room>,
}

impl<W: Write> PiStream<W> {
    /// A stream that writes pi's events to `out`; nothing is written until [`Self::start`] or
    /// the first event.
    pub fn new(out: W) -> Self {
        PiStream {
            out,
            started: false,
            finished: false,
            open: None,
            next_index: 0,
            held: Vec::new(),
            broken: false,
            room: None,
        }
    }

    /// Await `room` in the sink's pipe before each event (`Self::room`):
    /// a pi that reads slowly then holds the turn's relay, never the
    /// runtime it shares with the turn (its abort, its watchdog).
    pub fn with_room(mut self, room: Option<Room>) -> Self {
        self.room = room;
        self
    }

    /// Return once the sink can take a line without waiting (at once
    /// without a [`Room`]).
    pub(crate) async fn room(&self) {
        if let Some(room) = &self.room {
            room.wait().await;
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

    /// Writes `start`, once: pi expects it at once, before agy has said anything.
    pub fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.emit(&PiEvent::Start);
        }
    }

    /// Whether a text block is open right now.
    pub(crate) fn text_open(&self) -> bool {
        matches!(self.open, Some((BlockKind::Text, _)))
    }

    /// Whether any content block was ever opened.
    pub(crate) fn has_content(&self) -> bool {
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

    pub(crate) fn text(&mut self, delta: &str) {
        self.push(BlockKind::Text, delta);
    }

    /// Hold agy's error `line` (saying `sentence`) until
    /// [`Self::release_held`], the end of the message, or a failure that
    /// repeats it.
    pub(crate) fn hold_error(&mut self, sentence: &str, line: &str) {
        if !self.finished {
            self.held.push((sentence.to_string(), line.to_string()));
        }
    }

    /// Show the held error lines: agy went on, so they were not the end.
    pub(crate) fn release_held(&mut self) {
        for (_, line) in std::mem::take(&mut self.held) {
            self.thinking(&line);
        }
    }

    pub(crate) fn thinking(&mut self, delta: &str) {
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
    pub(crate) fn tool_use(&mut self, calls: &[(String, String, Value)]) {
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
                tool_call: tool_call(id, name, arguments),
            });
        }
        self.finished = true;
        self.emit(&PiEvent::Done {
            reason: "toolUse",
            usage: None,
        });
    }

    /// Ask pi to decide a tool call agy waits on (outside any message).
    pub(crate) fn permission_request(&mut self, request: PiEvent) {
        if matches!(request, PiEvent::PermissionRequest { .. }) {
            self.emit(&request);
        }
    }

    /// Begin the next assistant message of the same agy turn (after pi ran
    /// the tools of a `toolUse` message): `start` again, indexes from 0.
    pub(crate) fn restart(&mut self) {
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

/// pi's `ToolCall`: its `arguments` are a JSON object (pi-ai 0.86 on). No
/// arguments are `{}`; anything else that is not an object is `{}` with
/// pi's `argumentsError` naming what agy sent, so pi's validation fails the
/// call with it instead of running the tool on a guess.
fn tool_call(id: &str, name: &str, arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => {
            serde_json::json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments})
        }
        Value::Null => {
            serde_json::json!({"type": "toolCall", "id": id, "name": name, "arguments": {}})
        }
        other => serde_json::json!({
            "type": "toolCall", "id": id, "name": name, "arguments": {},
            "argumentsError": format!("agy's arguments were not a JSON object: {other}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::pi::provider::json_lines;

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
        let types: Vec<String> = json_lines(&buf)
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
        let all = json_lines(&buf);
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
        let all = json_lines(&buf);
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
    fn tool_call_arguments_are_always_an_object() {
        let mut buf = Vec::new();
        {
            let mut s = PiStream::new(&mut buf);
            s.tool_use(&[
                ("a".into(), "t".into(), Value::Null),
                ("b".into(), "t".into(), json!(["x"])),
            ]);
        }
        let ends: Vec<Value> = json_lines(&buf)
            .into_iter()
            .filter(|v| v["type"] == "toolcall_end")
            .map(|v| v["toolCall"].clone())
            .collect();
        assert_eq!(
            ends[0],
            json!({"type":"toolCall","id":"a","name":"t","arguments":{}})
        );
        assert_eq!(ends[1]["arguments"], json!({}));
        assert_eq!(
            ends[1]["argumentsError"],
            r#"agy's arguments were not a JSON object: ["x"]"#
        );
    }

    #[test]
    fn empty_success_has_one_empty_text_block() {
        let mut buf = Vec::new();
        PiStream::new(&mut buf).done(None);
        let types: Vec<Value> = json_lines(&buf).iter().map(|v| v["type"].clone()).collect();
        assert_eq!(types, ["start", "text_start", "text_end", "done"]);
    }
}
