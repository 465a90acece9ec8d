//! agy's `--input-format stream-json` lines: the user turns agy reads on
//! stdin, one JSON object per line (docs/agy-format.md, "Input:
//! `--input-format stream-json`").
//!
//! The bridge writes them ([`user_line`]) so the prompt never sits in agy's
//! argv, where every local user can read it in `/proc/PID/cmdline`; fake-agy
//! reads them ([`read_user_line`]) with agy's own error words, so the two
//! share one idea of the shape. The shape is verified on agy 1.2.7
//! (`crt-1.2.7-win-loop-two-turns`): `{"event":"user","message":{"role":
//! "user","content":"..."}}`, `content` a string or a list of `text` blocks.

use serde_json::Value;

/// One user turn as the line agy reads: JSON, newline-terminated, keys in
/// the order of the verified capture (`serde_json::json!` would sort them).
pub fn user_line(prompt: &str) -> String {
    // A JSON string's Display is its encoding, and cannot fail.
    let content = Value::from(prompt);
    format!("{{\"event\":\"user\",\"message\":{{\"role\":\"user\",\"content\":{content}}}}}\n")
}

/// Why a stdin line is not a user turn, worded as agy words it (its
/// `result.error`; docs/agy-format.md, "Outcomes").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Verified (`error-missing-event`).
    #[error("stream input message is missing the \"event\" field")]
    MissingEvent,
    /// Published wording; the detail is the JSON decoder's.
    #[error("failed to decode stream input: {0}")]
    NotJson(String),
    /// Verified (`crt-1.2.7-win-input-error-image-block`).
    #[error("stream input content block type \"{0}\" is not supported (only \"text\")")]
    BlockType(String),
    /// No capture shows these; the words follow the ones above.
    #[error("stream input event \"{0}\" is not supported (only \"user\")")]
    EventType(String),
    #[error("stream input message has no text content")]
    NoContent,
}

/// The prompt text of one stdin line: a string `content`, or its `text`
/// blocks joined (the blocks of one message are one prompt).
pub fn read_user_line(line: &str) -> Result<String, InputError> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| InputError::NotJson(e.to_string()))?;
    let event = value.get("event").ok_or(InputError::MissingEvent)?;
    match event.as_str() {
        Some("user") => {}
        Some(other) => return Err(InputError::EventType(other.to_string())),
        None => return Err(InputError::EventType(event.to_string())),
    }
    let content = value
        .get("message")
        .and_then(|m| m.get("content"))
        .ok_or(InputError::NoContent)?;
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => blocks.iter().map(block_text).collect(),
        _ => Err(InputError::NoContent),
    }
}

fn block_text(block: &Value) -> Result<&str, InputError> {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .ok_or(InputError::NoContent),
        Some(other) => Err(InputError::BlockType(other.to_string())),
        None => Err(InputError::BlockType(String::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_line_is_read_back_exactly() {
        let prompt = "line one\n\"quoted\" \u{e9} /model \\ \t end";
        let line = user_line(prompt);
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert!(line.starts_with(r#"{"event":"user","message":{"#), "{line}");
        assert_eq!(read_user_line(line.trim_end()).as_deref(), Ok(prompt));
    }

    #[test]
    fn text_blocks_are_one_prompt() {
        let line = r#"{"event":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#;
        assert_eq!(read_user_line(line).as_deref(), Ok("ab"));
    }

    #[test]
    fn bad_lines_are_worded_as_agy_words_them() {
        let missing = read_user_line(r#"{"message":{"content":"x"}}"#).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "stream input message is missing the \"event\" field"
        );
        let not_json = read_user_line("hello").unwrap_err().to_string();
        assert!(
            not_json.starts_with("failed to decode stream input: "),
            "{not_json}"
        );
        let image = r#"{"event":"user","message":{"content":[{"type":"text","text":"a"},{"type":"image","source":{}}]}}"#;
        assert_eq!(
            read_user_line(image).unwrap_err().to_string(),
            "stream input content block type \"image\" is not supported (only \"text\")"
        );
    }
}
