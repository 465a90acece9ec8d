//! A bound conversation's history, for `session/load`: its database read
//! once, read-only, every step through one [`Tracker`] in idx order, as a
//! live turn would have streamed it (so a load shows what the turns
//! showed). Blocking: call [`history_off_runtime`] from the runtime.
//!
//! The two cases pi words too: a session agy-bridge has no binding for,
//! and a binding whose conversation agy no longer keeps (agy keeps about
//! 500 conversations and drops the oldest).

use crate::follow::discovery::db_path;
use crate::follow::events::{Event, Tracker};
use agy_format::database::{open_read_only, read_all};
use agy_format::ids::ConversationId;
use agy_format::steps;
use std::path::{Path, PathBuf};

/// Why a history cannot be replayed, in the words the client shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("agy-bridge has no session {id}: it was never created here, or its binding was cleared (`agy-bridge sessions`)")]
    UnknownSession { id: String },
    #[error("session {session} was bound to agy conversation {conversation}, which agy no longer has (agy keeps about 500 conversations and drops the oldest; or it was deleted, or is from another machine): its history cannot be shown; a new prompt in this session begins a new agy conversation without the earlier context")]
    Pruned {
        session: String,
        conversation: String,
    },
    #[error("agy's conversation {path} cannot be read: {reason}")]
    Unreadable { path: PathBuf, reason: String },
}

/// The last step idx and every event of conversation `id` in `dir`.
pub fn history(
    dir: &Path,
    session: &str,
    id: &ConversationId,
) -> Result<(Option<i64>, Vec<Event>), ReplayError> {
    let path = db_path(dir, id);
    if !path.is_file() {
        return Err(ReplayError::Pruned {
            session: session.to_string(),
            conversation: id.as_str().to_string(),
        });
    }
    let unreadable = |reason: String| ReplayError::Unreadable {
        path: path.clone(),
        reason,
    };
    let conn = open_read_only(&path).map_err(|e| unreadable(e.to_string()))?;
    let rows = read_all(&conn, &path).map_err(|e| unreadable(e.to_string()))?;
    let mut tracker = Tracker::new();
    let mut events = Vec::new();
    let mut last = None;
    for row in &rows {
        let step = steps::decode(row);
        last = Some(step.idx);
        events.extend(tracker.observe(&step));
    }
    Ok((last, events))
}

/// [`history`] on a blocking thread.
pub async fn history_off_runtime(
    dir: PathBuf,
    session: String,
    id: ConversationId,
) -> Result<(Option<i64>, Vec<Event>), ReplayError> {
    tokio::task::spawn_blocking(move || history(&dir, &session, &id))
        .await
        .unwrap_or_else(|e| {
            Err(ReplayError::Unreadable {
                path: PathBuf::new(),
                reason: format!("the reader stopped: {e}"),
            })
        })
}
