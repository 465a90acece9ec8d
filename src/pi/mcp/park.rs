//! Parked tool calls: an MCP `tools/call` from agy waits here until pi has
//! run the tool and the extension has sent its result.
//!
//! The promise this module keeps is that **every parked call is answered**.
//! A [`ToolCall`] owns the only way back to the waiting HTTP request; it is
//! answered explicitly ([`ToolCall::answer`]) with pi's result or an error,
//! and if it is dropped unanswered (the turn ended on any path, a panic
//! unwound) its `Drop` answers with an error. agy therefore never waits on
//! a call nobody will answer; it only waits as long as pi runs the tool.

use serde_json::{json, Value};
use tokio::sync::oneshot;

/// What a call ends with: MCP `CallToolResult` content blocks (pi's text and
/// image blocks have the same shape) and whether it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The result's content blocks, as MCP passes them to agy.
    pub content: Vec<Value>,
    /// Whether the tool failed; agy sees the content as the error.
    pub is_error: bool,
}

impl ToolOutcome {
    /// A failed call whose one text block says why.
    pub(crate) fn error(message: &str) -> ToolOutcome {
        ToolOutcome {
            content: vec![json!({"type": "text", "text": message})],
            is_error: true,
        }
    }

    /// The MCP `CallToolResult` for agy.
    pub(crate) fn to_mcp(&self) -> Value {
        json!({"content": self.content, "isError": self.is_error})
    }

    /// pi's tool result content, kept to the block types MCP and pi share
    /// (text, image); anything else becomes a note in text.
    pub fn from_pi(content: &[Value], is_error: bool) -> ToolOutcome {
        let content = content
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => json!({
                    "type": "text",
                    "text": b.get("text").and_then(Value::as_str).unwrap_or(""),
                }),
                Some("image") => json!({
                    "type": "image",
                    "data": b.get("data").and_then(Value::as_str).unwrap_or(""),
                    "mimeType": b.get("mimeType").and_then(Value::as_str).unwrap_or(""),
                }),
                other => json!({
                    "type": "text",
                    "text": format!("[pi returned a {} block agy cannot take]", other.unwrap_or("untyped")),
                }),
            })
            .collect();
        ToolOutcome { content, is_error }
    }
}

/// Why the `content` of a `tool_result` line cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its content is {found}, not a list of content blocks or a string")]
pub struct BadContent {
    /// The JSON type that came (`a number`, `an object`, ...).
    pub found: &'static str,
}

impl ToolOutcome {
    /// pi's `content` as the extension sends it: a list of blocks, a plain
    /// string (one text block: pi's own tools return blocks, but a string
    /// is what a hand-written extension or an older pi sends), or nothing
    /// (no blocks). Any other shape is an error rather than an empty
    /// result, so nobody mistakes a broken line for a tool that said nothing.
    pub(crate) fn from_pi_value(
        content: Option<&Value>,
        is_error: bool,
    ) -> Result<ToolOutcome, BadContent> {
        let found = match content {
            None | Some(Value::Null) => return Ok(ToolOutcome::from_pi(&[], is_error)),
            Some(Value::Array(blocks)) => return Ok(ToolOutcome::from_pi(blocks, is_error)),
            Some(Value::String(text)) => {
                let block = json!({"type": "text", "text": text});
                return Ok(ToolOutcome::from_pi(&[block], is_error));
            }
            Some(Value::Bool(_)) => "true or false",
            Some(Value::Number(_)) => "a number",
            Some(Value::Object(_)) => "an object",
        };
        Err(BadContent { found })
    }

    /// The result followed by pi's steering messages (the user wrote them
    /// while the tool ran; pi puts them after the tool results, before the
    /// model's next call, and agy's next model call reads this result): a
    /// text block saying what follows, then each message's blocks (a string
    /// is one text block; images stay images, as MCP takes them).
    pub(crate) fn with_steer(mut self, steer: &[Value]) -> ToolOutcome {
        // Each message's content as a result's content is read; what is
        // neither a string nor blocks has nothing to show.
        let blocks: Vec<Value> = steer
            .iter()
            .filter_map(|content| ToolOutcome::from_pi_value(Some(content), false).ok())
            .flat_map(|message| message.content)
            .collect();
        if !blocks.is_empty() {
            self.content
                .push(json!({"type": "text", "text": STEER_HEAD}));
            self.content.extend(blocks);
        }
        self
    }
}

/// What precedes the user's steering messages in a tool result.
pub(crate) const STEER_HEAD: &str =
    "[The user sent this message while the tool ran; it comes after the tool's result above:]";

/// A call agy made, waiting for pi. `id` is the pi `toolCall` id.
#[derive(Debug)]
pub struct ToolCall {
    /// The id pi's tool result quotes back.
    pub id: String,
    /// The pi tool called.
    pub name: String,
    /// The arguments agy gave, as JSON.
    pub arguments: Value,
    reply: Option<oneshot::Sender<ToolOutcome>>,
}

/// What happened to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Delivered,
    /// agy stopped waiting before the answer came (it cuts a call off after
    /// about 180 s, or its turn ended).
    AgyGone,
}

impl ToolCall {
    /// A new call and the receiver its HTTP request waits on.
    pub fn new(name: String, arguments: Value) -> (ToolCall, oneshot::Receiver<ToolOutcome>) {
        let (tx, rx) = oneshot::channel();
        let id = format!("agy_{}", &uuid::Uuid::new_v4().simple().to_string()[..24]);
        let call = ToolCall {
            id,
            name,
            arguments,
            reply: Some(tx),
        };
        (call, rx)
    }

    /// Answer the call (once; the call is consumed).
    pub fn answer(mut self, outcome: ToolOutcome) -> Delivery {
        match self.reply.take().map(|tx| tx.send(outcome)) {
            Some(Ok(())) => Delivery::Delivered,
            _ => Delivery::AgyGone,
        }
    }

    /// Whether agy has stopped waiting for this call.
    #[cfg(test)]
    fn agy_gone(&self) -> bool {
        self.reply.as_ref().is_none_or(|tx| tx.is_closed())
    }
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(ToolOutcome::error(
                "agy-bridge ended this turn before pi answered the tool call",
            ));
        }
    }
}

/// The calls of one pi message, waiting for their results.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    calls: Vec<ToolCall>,
}

/// A continuation that does not fit the parked calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pi sent a result for tool call {id:?}, which is not waiting (waiting: {waiting})")]
pub(crate) struct Mismatch {
    pub id: String,
    pub waiting: String,
}

impl Parked {
    pub(crate) fn park(&mut self, call: ToolCall) {
        self.calls.push(call);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.calls.iter().map(|c| c.id.clone()).collect()
    }

    /// Answer the call `id`; returns its name and how the answer went.
    pub(crate) fn answer(
        &mut self,
        id: &str,
        outcome: ToolOutcome,
    ) -> Result<(String, Delivery), Mismatch> {
        let Some(pos) = self.calls.iter().position(|c| c.id == id) else {
            return Err(Mismatch {
                id: id.to_string(),
                waiting: self.ids().join(", "),
            });
        };
        let call = self.calls.remove(pos);
        let name = call.name.clone();
        Ok((name, call.answer(outcome)))
    }

    /// Answer every call still waiting with an error saying `why`.
    pub(crate) fn release_all(&mut self, why: &str) -> usize {
        let n = self.calls.len();
        for call in self.calls.drain(..) {
            call.answer(ToolOutcome::error(why));
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_call_is_answered_with_an_error() {
        let (call, mut rx) = ToolCall::new("t".into(), json!({}));
        drop(call);
        let got = rx.try_recv().expect("answered");
        assert!(got.is_error);
        assert!(got.content[0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("ended this turn"));
    }

    #[test]
    fn parked_calls_pair_by_id_and_refuse_strangers() {
        let mut parked = Parked::default();
        let (a, mut ra) = ToolCall::new("a".into(), json!({"x": 1}));
        let (b, mut rb) = ToolCall::new("b".into(), json!({}));
        let (a_id, b_id) = (a.id.clone(), b.id.clone());
        parked.park(a);
        parked.park(b);
        let err = parked.answer("nope", ToolOutcome::error("x")).unwrap_err();
        assert_eq!(err.id, "nope");
        assert!(err.waiting.contains(&a_id) && err.waiting.contains(&b_id));
        let ok = ToolOutcome::from_pi(&[json!({"type":"text","text":"42"})], false);
        assert_eq!(
            parked.answer(&b_id, ok.clone()),
            Ok(("b".into(), Delivery::Delivered))
        );
        assert_eq!(rb.try_recv().expect("b answered"), ok);
        assert_eq!(parked.release_all("pi aborted"), 1);
        let a_got = ra.try_recv().expect("a answered");
        assert!(a_got.is_error && a_got.content[0]["text"] == "pi aborted");
        assert!(parked.is_empty());
    }

    #[test]
    fn an_answer_after_agy_left_is_reported() {
        let (call, rx) = ToolCall::new("slow".into(), json!({}));
        drop(rx);
        assert!(call.agy_gone());
        assert_eq!(call.answer(ToolOutcome::error("late")), Delivery::AgyGone);
    }

    #[test]
    fn content_may_be_blocks_a_string_or_nothing() {
        let text = |t: &str| vec![json!({"type": "text", "text": t})];
        let blocks = json!([{"type": "text", "text": "a"}]);
        let read = |v: Option<&Value>| ToolOutcome::from_pi_value(v, false).map(|o| o.content);
        assert_eq!(read(Some(&blocks)), Ok(text("a")));
        assert_eq!(read(Some(&json!("plain words"))), Ok(text("plain words")));
        assert_eq!(read(None), Ok(vec![]));
        assert_eq!(read(Some(&Value::Null)), Ok(vec![]));
        for (v, found) in [
            (json!(7), "a number"),
            (json!({"type": "text", "text": "a"}), "an object"),
            (json!(true), "true or false"),
        ] {
            let err = ToolOutcome::from_pi_value(Some(&v), false).unwrap_err();
            assert_eq!(err, BadContent { found });
            assert!(err.to_string().contains(found), "{err}");
        }
    }

    #[test]
    fn pi_blocks_map_to_mcp_blocks() {
        let out = ToolOutcome::from_pi(
            &[
                json!({"type":"text","text":"hi"}),
                json!({"type":"image","data":"AA==","mimeType":"image/png"}),
                json!({"type":"weird"}),
            ],
            false,
        );
        assert_eq!(
            out.to_mcp(),
            json!({"content":[
                {"type":"text","text":"hi"},
                {"type":"image","data":"AA==","mimeType":"image/png"},
                {"type":"text","text":"[pi returned a weird block agy cannot take]"}
            ],"isError":false})
        );
    }
}
