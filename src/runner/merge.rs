//! The turn's two sources, merged: agy's stream-json lines and the
//! database's events, so that neither silently wins when it is wrong.
//!
//! - **Which conversation.** A resumed turn is bound to the id it asked
//!   for, but agy starts a new conversation when it does not have that one
//!   (docs/agy-format.md, "Resume"): the `init` line (or, without
//!   stream-json, the stderr warning and then discovery) rebinds the turn,
//!   and the user is told once.
//! - **Tool failures in agy's words.** A tool step the database ends in
//!   failure waits briefly for stream-json's `tool_info.error` (agy's
//!   permission and hook denials), with every later database event held
//!   behind it so the order stays the database's; when it comes, agy's
//!   sentence is the failure's reason, whatever the row holds (agy 1.3.1's
//!   row records only the call's arguments).
//! - **The whole answer.** At the end, each step's answer text agy printed
//!   is compared with what the database gave; where the database holds
//!   less or other text, agy's own answer follows, with a notice.
//! - **Usage per turn**, from this turn's steps, never agy's cumulative
//!   `result.usage`.
//! - **Permission mode.** `init` says how agy will treat tools; when that
//!   is not what the bridge's flags ask for, the user hears it at once.

use super::*;
use agy_format::stream_json::permission_mode_for;

/// How long a failed tool result without words waits for stream-json.
const HOLD_FOR_WORDS: Duration = Duration::from_secs(1);

/// A database event waiting in [`Turn::held`].
#[derive(Debug)]
pub(super) struct Held {
    since: Instant,
    event: Event,
}

/// The step of a failed tool result: its reason is agy's error text when
/// stream-json carries one.
fn failed_tool(ev: &Event) -> Option<i64> {
    match ev {
        Event::ToolResult { idx, ok: false, .. } => Some(*idx),
        _ => None,
    }
}

impl Turn<'_> {
    /// One stream-json line from agy.
    pub(super) fn on_line(&mut self, line: Line) {
        // agy's own word on the id: its init line, else its result line.
        let result_id = match &line {
            Line::Result(r) if !r.conversation_id.is_empty() => Some(r.conversation_id.clone()),
            _ => None,
        };
        let tool_step = match &line {
            Line::StepUpdate(u) if u.step_type == "tool" => Some(u.step_index),
            _ => None,
        };
        if let Line::Init { init, .. } = &line {
            self.on_permission_mode(init.permission_mode.as_deref());
        }
        if let Some(id) = self.agy.observe(line).or(result_id) {
            self.on_agy_id(&id);
        }
        if tool_step.is_some() {
            self.release_held(false);
        }
        if self.result.degraded.is_some() {
            let with_tools = self.stream_tools;
            for ev in self.agy.unstreamed(with_tools) {
                self.send(ev);
            }
        }
    }

    /// agy's `init` said its permission mode: kept, and when it is not the
    /// one agy's command line asks for, the user is told (once: agy prints
    /// `init` once per process).
    fn on_permission_mode(&mut self, reported: Option<&str>) {
        let Some(reported) = reported else {
            return;
        };
        self.result.permission_mode = Some(reported.to_string());
        let expected = permission_mode_for(super::args::skips_permissions(self.cfg));
        if reported != expected {
            self.emit(RunEvent::PermissionMode {
                reported: reported.to_string(),
                expected: expected.to_string(),
            });
        }
    }

    /// agy named the conversation it is writing.
    fn on_agy_id(&mut self, id: &str) {
        let Ok(id) = ConversationId::parse(id) else {
            return;
        };
        match &self.followed {
            None => self.bind(id, None, BindMethod::StreamJson),
            // Resumed, but agy is writing another conversation: it did not
            // have ours and began a new one.
            Some(f) if f.how == BindMethod::Given && f.id != id => {
                self.lost = Some(f.id.clone());
                self.bind(id, None, BindMethod::StreamJson);
            }
            // Discovery bound first: agy's word confirms it (and is the
            // stronger evidence, so the turn says it was bound by it), or
            // overrules it.
            Some(f) if f.how != BindMethod::Given && f.how != BindMethod::StreamJson => {
                if f.id == id {
                    self.result.bind_method = Some(BindMethod::StreamJson);
                    if let Some(f) = self.followed.as_mut() {
                        f.how = BindMethod::StreamJson;
                    }
                } else {
                    self.bind(id, None, BindMethod::StreamJson);
                }
            }
            Some(_) => {}
        }
    }

    /// agy warned that it does not have the conversation `id`.
    pub(super) fn on_not_found(&mut self, id: &str) {
        let requested = match &self.followed {
            Some(f) if f.how == BindMethod::Given && f.id.as_str() == id => f.id.clone(),
            _ => return,
        };
        // With stream-json, agy's init line names the new conversation;
        // without, discovery finds the database it creates.
        self.lost = Some(requested);
        if !self.stream_json {
            self.followed = None;
            self.result.conversation_id = None;
            self.result.bind_method = None;
        }
    }

    /// Tell the user, once, that agy began a new conversation.
    pub(super) fn announce_new_conversation(
        &mut self,
        requested: &ConversationId,
        new: &ConversationId,
    ) {
        self.result.lost_conversation = Some(requested.as_str().to_string());
        self.emit(RunEvent::ConversationReplaced {
            requested: requested.as_str().to_string(),
            conversation_id: new.as_str().to_string(),
        });
    }

    /// One event from the database.
    pub(super) fn on_db_event(&mut self, ev: Event) {
        self.db.events = true;
        match &ev {
            Event::Text { .. } | Event::Rewrite { .. } if self.result.degraded.is_some() => {
                // stream-json is the text source now; do not say it twice.
                return;
            }
            Event::ToolCall { .. } | Event::ToolResult { .. } if self.stream_tools => return,
            Event::Text { idx, text } => {
                self.db.text = true;
                self.db.texts.entry(*idx).or_default().push(text);
            }
            Event::Rewrite {
                idx,
                channel: crate::follow::events::Channel::Text,
                text,
            } => {
                self.db.text = true;
                self.db.texts.insert(*idx, TextDigest::of(text));
            }
            Event::ToolCall { .. } => self.db.tools = true,
            Event::Error { message, .. } => self.db.errors.push(message.clone()),
            _ => {}
        }
        self.held.push_back(Held {
            since: Instant::now(),
            event: ev,
        });
        self.release_held(false);
    }

    /// Send the held events from the front, up to one still waiting for
    /// its words (all of them when `all`). A waiting result goes with
    /// stream-json's error text when it came, as it is when it did not.
    pub(super) fn release_held(&mut self, all: bool) {
        while let Some(front) = self.held.front_mut() {
            if let Some(idx) = failed_tool(&front.event) {
                if let Some(words) = self.agy.tool_error(idx) {
                    if let Event::ToolResult { summary, .. } = &mut front.event {
                        *summary = words.to_string();
                    }
                } else {
                    let may_come = self.stream_json
                        && !self.agy.tool_ended(idx)
                        && front.since.elapsed() < HOLD_FOR_WORDS;
                    if may_come && !all {
                        return;
                    }
                }
            }
            if let Some(held) = self.held.pop_front() {
                self.send(held.event);
            }
        }
    }

    /// Where the database gave less (or other) answer text than agy
    /// printed, agy's own answer follows, with the reason, so the user
    /// never gets the shorter text alone. A step's text agy printed counts
    /// as given when any step of the database holds the same text: that
    /// stream-json's `step_index` is the database's `idx` is only reported,
    /// and a wrong guess must not repeat a whole answer.
    pub(super) fn check_answer(&mut self) {
        if !self.db.text() || self.result.degraded.is_some() {
            return;
        }
        let missing: Vec<i64> = self
            .agy
            .texts()
            .iter()
            .filter(|(_, text)| {
                let printed = TextDigest::of(text);
                !printed.is_blank() && !self.db.texts.values().any(|d| d.same_text(&printed))
            })
            .map(|(idx, _)| *idx)
            .collect();
        if missing.is_empty() {
            return;
        }
        let reason =
            "agy's conversation database holds less (or other) answer text than agy printed";
        self.emit(RunEvent::AnswerFromAgy {
            reason: reason.into(),
        });
        for idx in missing {
            if let Some(text) = self.agy.texts().get(&idx).cloned() {
                self.send(Event::Text { idx, text });
            }
        }
    }

    /// Usage of this turn: its own model calls from stream-json, else the
    /// database's metadata for this turn's steps, else (a new conversation
    /// only) agy's result, which then covers just this turn.
    pub(super) fn usage(&self) -> Option<TurnUsage> {
        let conversation = self.agy.result.as_ref().and_then(|r| r.usage);
        if let Some(last_call) = self.agy.last_call {
            return Some(TurnUsage {
                last_call,
                turn: self.agy.sum,
                conversation,
            });
        }
        if let Some((last, sum)) = self
            .followed
            .as_ref()
            .and_then(|f| f.reader.as_ref()?.usage())
        {
            return Some(TurnUsage {
                last_call: usage_of(&last),
                turn: usage_of(&sum),
                conversation,
            });
        }
        // A warm agy's results count the whole process: the turn is what
        // this result added to the one before.
        if let (Some(total), Some(before)) =
            (conversation, self.warm.as_ref().and_then(|w| w.before))
        {
            let turn = usage_minus(total, before);
            return Some(TurnUsage {
                last_call: turn,
                turn,
                conversation,
            });
        }
        let fresh = self.req.conversation.is_none() || self.result.lost_conversation.is_some();
        let whole = conversation.filter(|_| fresh)?;
        Some(TurnUsage {
            last_call: whole,
            turn: whole,
            conversation,
        })
    }

    /// agy's `result.response`, blanked while it was read (the deltas held
    /// it), is agy's last step's answer: put back for the caller.
    pub(super) fn restore_response(&mut self) {
        let Some(result) = self.result.agy_result.as_mut() else {
            return;
        };
        if result.response.is_empty() {
            if let Some(text) = self.agy.take_last_text() {
                result.response = text;
            }
        }
    }
}

/// What `total` added to `before`, both cumulative (never below zero: a
/// count that went down belongs to another process's reckoning).
fn usage_minus(total: Usage, before: Usage) -> Usage {
    Usage {
        input_tokens: total.input_tokens.saturating_sub(before.input_tokens),
        output_tokens: total.output_tokens.saturating_sub(before.output_tokens),
        thinking_tokens: total.thinking_tokens.saturating_sub(before.thinking_tokens),
        cache_read_tokens: total
            .cache_read_tokens
            .saturating_sub(before.cache_read_tokens),
        total_tokens: total.total_tokens.saturating_sub(before.total_tokens),
    }
}

/// The database's usage stats (metadata 9) in stream-json's terms.
fn usage_of(u: &agy_format::steps::Usage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        thinking_tokens: u.thinking_tokens,
        cache_read_tokens: u.cache_read_tokens,
        total_tokens: u.input_tokens + u.output_tokens,
    }
}
