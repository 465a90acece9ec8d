//! `FAKE_AGY_FAULT`: an agy that breaks one fact of docs/agy-format.md, so
//! a test can show `agy-bridge conformance` names exactly that fact. A
//! comma-separated list of:
//!
//! - `init-without-id`: the stream-json `init` line has no `conversation_id`;
//! - `usage-per-turn`: `result.usage` counts this run's model calls only,
//!   not the whole conversation's;
//! - `text-field-moved`: the planner's answer text is written to the
//!   database at payload field 20.31 instead of 20.1 (stream-json still
//!   prints it, from the recording);
//! - `permission-mode`: `init.permission_mode` is the other mode than the
//!   flags give (`request-review` with `--dangerously-skip-permissions`,
//!   `always-proceed` without), as when agy's own settings choose it; the
//!   tools are still run or denied as the flags say.

use agy_corpus::recording::{Commit, SqlValue};
use agy_format::wire;

/// The field the moved text goes to (unknown to the decoder).
const MOVED_TEXT_FIELD: u32 = 31;

/// Whether `FAKE_AGY_FAULT` names `fault`.
pub fn is(fault: &str) -> bool {
    std::env::var("FAKE_AGY_FAULT")
        .map(|v| v.split(',').any(|f| f.trim() == fault))
        .unwrap_or(false)
}

/// The permission mode `init` reports for a run with or without
/// `--dangerously-skip-permissions`: agy's, or under the `permission-mode`
/// fault the other one.
pub fn permission_mode(skip_permissions: bool) -> &'static str {
    let swapped = is("permission-mode");
    agy_format::stream_json::permission_mode_for(skip_permissions != swapped)
}

/// `line` (an init line's JSON) without its `conversation_id`.
pub fn without_conversation_id(line: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.remove("conversation_id");
            serde_json::Value::Object(map).to_string()
        }
        _ => line.to_string(),
    }
}

/// `commit` with each step payload's planner text (20.1) moved to
/// 20.[`MOVED_TEXT_FIELD`].
pub fn move_text_field(commit: &Commit) -> Commit {
    let mut moved = commit.clone();
    for w in moved.writes.iter_mut().filter(|w| w.table == "steps") {
        if let Some(SqlValue::Blob(payload)) = w.values.get_mut("step_payload") {
            if let Some(rewritten) = rewrite_payload(payload) {
                *payload = rewritten;
            }
        }
    }
    moved
}

/// The payload with field 20's field 1 renumbered; `None` when it does not
/// walk (left as it is).
fn rewrite_payload(payload: &[u8]) -> Option<Vec<u8>> {
    wire::rewrite(payload, |out, number, value| match (number, value) {
        (20, wire::Value::Len(inner)) => {
            let planner = wire::rewrite(inner, |out, number, value| {
                let moved = number == 1;
                if moved {
                    out.value(MOVED_TEXT_FIELD, &value);
                }
                Some(moved)
            })?;
            out.bytes(20, &planner);
            Some(true)
        }
        _ => Some(false),
    })
}
