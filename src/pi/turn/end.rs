//! Ending a pi turn, cold or warm: the session's binding saved (which agy
//! conversation the pi session continues, and from which step) and pi's
//! message ended with the turn's outcome.

use super::prepare::PreparedTurn;
use crate::runner;
use std::io::Write;

/// Save the session's binding and end pi's message with the turn's outcome.
pub(super) fn end_turn<W: Write>(
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    prepared: &PreparedTurn,
    req: &crate::pi::provider::StreamRequest,
    result: &runner::RunResult,
) -> bool {
    use crate::pi::provider;
    // Remember where this conversation is, unless the run failed to bind.
    if let Some(store) = &prepared.store {
        // A new conversation (agy did not have ours) has no earlier cursor.
        let lost = result.lost_conversation.is_some();
        let before = prepared.turn.after_idx.filter(|_| !lost);
        let last = result.last_idx.or(before).unwrap_or(-1);
        if let Err(e) = store.record_turn(
            &prepared.session_key,
            result.conversation_id.as_deref(),
            last,
            req.messages.len() as u64,
            lost,
        ) {
            eprintln!("agy-bridge: warning: could not save the session binding: {e}");
            pi.thinking(&format!(
                "\n[agy-bridge: could not save which agy conversation this pi session continues ({e}); the next turn may begin a new conversation, with pi's record of the earlier turns]\n"
            ));
        }
    }
    for notice in &result.notices {
        pi.thinking(&format!("\n[{notice}]\n"));
    }
    if result.failure.is_none() {
        pi.done(result.usage.as_ref().map(provider::PiUsage::from_turn));
        true
    } else {
        let (aborted, message) = provider::mapper::error_message(result);
        pi.fail(aborted, &message);
        false
    }
}
