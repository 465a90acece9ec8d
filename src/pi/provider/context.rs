//! From pi's messages to agy's prompt: the user's prompt, and a digest of
//! what agy's own conversation does not hold (other providers' turns, tool
//! results, compaction summaries, pi's system messages after the first),
//! capped to keep the newest.
//!
//! Since pi 0.86 the messages are a transcript: the leading system message
//! is pi's system prompt and tool loadout (pi's own harness, its own tools:
//! agy runs with its own prompt, and gets pi's tools from the request's
//! `tools`), and later system messages change it mid-conversation (an
//! extension's instructions, a prompt section replaced). Those later ones
//! are context agy did not see, digested as the rest is; one may follow the
//! user's prompt (pi puts a tool or prompt change there between calls).

use crate::pi::provider::PROVIDER_ID;
use serde_json::Value;

/// Upper bound on the context digest, keeping the newest items.
pub(crate) const DIGEST_MAX_CHARS: usize = 8000;

const COMPACTION_MARKER: &str = "compacted into the following summary";
const DIGEST_PREAMBLE: &str = "[Context from the wider pi session that this Antigravity turn did not see: compaction summaries, turns by other providers, tool results, pi's system messages and earlier user messages. Your own earlier turns are already in your conversation history. Use this for continuity only.]";
const LOST_PREAMBLE: &str = "[Your earlier conversation for this pi session was not available to Antigravity, so this is pi's record of it: compaction summaries, earlier user messages, your own earlier answers, turns by other providers, tool results and pi's system messages. Continue from where it left off.]";
/// Upper bound on the digest that replaces a lost conversation: larger,
/// since it carries agy's own earlier answers too.
pub(crate) const LOST_DIGEST_MAX_CHARS: usize = 32000;

/// What agy still has of a pi session, which decides what the context
/// digest must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgyContext {
    /// agy's conversation holds its own earlier turns: only what it never
    /// saw goes in the digest.
    Kept,
    /// agy's earlier conversation is gone (agy did not have it, or its
    /// database vanished): its own earlier turns go in the digest too.
    Lost,
}

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
pub(crate) struct Prompt {
    pub text: String,
    /// Images pi attached that agy's `-p` cannot take.
    pub dropped_images: usize,
}

/// Why a request cannot become an agy turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("bad request: no user message to send to agy (the last message must be the user's)")]
    NoUserMessage,
    #[error("bad request: the user message has no text (agy -p takes text only)")]
    EmptyPrompt,
    #[error("pi sent tool results, but the agy turn that called those tools is over (it ended, or agy-bridge was restarted); send a new message")]
    OrphanToolResults,
}

/// The index of the message that must be the user's prompt: the last one
/// that is not a system message.
fn prompt_index(messages: &[Value]) -> Option<usize> {
    messages.iter().rposition(|m| role(m) != "system")
}

/// A system message's text: its `content`, then the prompt sections it sets
/// (a removed section, `null`, has none). Tool changes carry no text: the
/// request's `tools` are pi's current ones.
fn system_text(m: &Value) -> String {
    let (content, _) = content_text(m.get("content"));
    let mut parts = vec![content.trim().to_string()];
    if let Some(sections) = m.get("sections").and_then(Value::as_object) {
        parts.extend(
            sections
                .values()
                .filter_map(Value::as_str)
                .map(|t| t.trim().to_string()),
        );
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

pub(crate) fn extract_prompt(messages: &[Value]) -> Result<Prompt, RequestError> {
    let last = prompt_index(messages)
        .map(|i| &messages[i])
        .ok_or(RequestError::NoUserMessage)?;
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
/// turns by other providers, tool results, pi's system messages after the
/// leading one and earlier user messages. agy's own turns are skipped (they
/// are in its database). Capped at `max_chars`, keeping the summary and
/// then the newest items.
#[cfg(test)]
pub(crate) fn context_digest(messages: &[Value], watermark: usize, max_chars: usize) -> String {
    context_digest_for(messages, watermark, max_chars, AgyContext::Kept)
}

/// [`context_digest`] for what agy still has: with [`AgyContext::Lost`],
/// agy's own earlier answers and the results of the tools it called
/// through the bridge are in it too.
pub(crate) fn context_digest_for(
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
    let prompt_at = prompt_index(messages);
    let bridged = bridged_call_ids(messages);
    let mut items: Vec<String> = Vec::new();
    // User messages right after the results of agy's bridged calls were
    // pi's steering messages: they went to agy with the last result.
    let mut steering = false;
    for (i, m) in messages.iter().enumerate().skip(start) {
        if Some(i) == prompt_at {
            continue;
        }
        let (t, _) = content_text(m.get("content"));
        let t = t.trim();
        if role(m) == "system" {
            // The leading one is pi's own prompt; later ones change it.
            let text = system_text(m);
            if i > 0 && !text.is_empty() {
                items.push(format!("[pi system message]\n{text}"));
            }
            continue;
        }
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
pub(crate) fn has_own_turns(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        role(m) == "assistant" && m.get("provider").and_then(Value::as_str) == Some(PROVIDER_ID)
    })
}

/// The full prompt agy receives: digest (if any), then the user's text.
///
/// Nothing is trimmed for length: the prompt never goes on agy's command
/// line, but on its stdin or in a private file ([`crate::runner::prompt_file`]),
/// and the digest is bounded when it is made ([`context_digest`]).
#[cfg(test)]
pub(crate) fn compose_prompt(prompt: &Prompt, digest: &str) -> String {
    compose_prompt_for(prompt, digest, AgyContext::Kept)
}

/// [`compose_prompt`], framing the digest for what agy still has.
pub(crate) fn compose_prompt_for(prompt: &Prompt, digest: &str, context: AgyContext) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn later_system_messages_are_digested_and_the_leading_one_is_not() {
        let msgs = vec![
            json!({"role":"system","content":"","sections":{"preamble":"You are pi's assistant"},"toolsAdded":[{"name":"read","description":"r","parameters":{}}],"timestamp":1}),
            json!({"role":"user","content":"first","timestamp":2}),
            json!({"role":"assistant","provider":"antigravity","content":[{"type":"text","text":"agy answer"}]}),
            json!({"role":"system","content":"Answer in French from now on.","timestamp":3}),
            json!({"role":"system","content":[{"type":"text","text":"A second note."}],"sections":{"rules":"<rules>be brief</rules>","docs":null},"timestamp":4}),
            json!({"role":"system","content":"","toolsAdded":[{"name":"probe","description":"p","parameters":{}}],"timestamp":5}),
            json!({"role":"user","content":"next","timestamp":6}),
            json!({"role":"system","content":"Said after the prompt.","timestamp":7}),
        ];
        assert_eq!(extract_prompt(&msgs).map(|p| p.text), Ok("next".into()));
        let d = context_digest(&msgs, 3, 8000);
        assert!(!d.contains("pi's assistant"), "the leading prompt: {d}");
        assert_eq!(
            d,
            "[pi system message]\nAnswer in French from now on.\n\n\
             [pi system message]\nA second note.\n<rules>be brief</rules>\n\n\
             [pi system message]\nSaid after the prompt."
        );
        // Seen by an earlier turn (before the watermark): not again.
        let d = context_digest(&msgs, 7, 8000);
        assert_eq!(d, "[pi system message]\nSaid after the prompt.");
        let only_system = vec![msgs[0].clone()];
        assert_eq!(
            extract_prompt(&only_system),
            Err(RequestError::NoUserMessage)
        );
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
