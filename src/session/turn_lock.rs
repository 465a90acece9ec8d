//! One turn per session at a time, across processes: a turn waits
//! (cancellably, within its watchdog) for the session's turn before it, so
//! it resumes the conversation that turn left.

use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Why the session's turn lock was not taken.
pub(crate) enum TurnWait {
    /// Cancelled while waiting.
    Aborted,
    /// The turn before did not end in time: the sentence to show.
    Failed(String),
    /// The lock file cannot be made (the state directory is read-only or
    /// full): there is no session state to protect either.
    Unavailable(String),
}

/// Take the session's turn lock, waiting (cancellably, at most `wait`) for
/// another process's turn of the same session to end.
///
/// The wait is a blocking `flock` on a thread of its own (not the runtime's
/// blocking pool, whose shutdown would wait for it): the lock is taken the
/// moment the other turn lets go, with no polling. Abandoned (abort,
/// timeout), the thread finds nobody to hand the lock to when it gets it,
/// and lets go at once.
pub(crate) async fn wait_turn_lock(
    store: &crate::state::sessions::SessionStore,
    key: &str,
    cancel: &CancellationToken,
    wait: Duration,
) -> Result<crate::state::sessions::TurnLock, TurnWait> {
    use crate::state::sessions::TurnLock;
    match store.try_lock_turn(key) {
        Ok(Some(lock)) => return Ok(lock),
        Ok(None) => {}
        Err(e) => return Err(TurnWait::Unavailable(e.to_string())),
    }
    let path = store.turn_lock_path(key);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let waiter = std::thread::Builder::new()
        .name("turn-lock".into())
        .spawn(move || {
            // Nobody to take it (abandoned): dropping it lets go.
            let _ = tx.send(TurnLock::wait_at(&path));
        });
    if let Err(e) = waiter {
        return Err(TurnWait::Unavailable(format!(
            "cannot start a thread to wait for the turn lock: {e}"
        )));
    }
    tokio::select! {
        _ = cancel.cancelled() => Err(TurnWait::Aborted),
        // tokio caps a limit too far to reach at 30 years: no limit, in effect.
        _ = tokio::time::sleep(wait) => Err(TurnWait::Failed(format!(
            "agy-bridge: another turn of this pi session was still running after {} minutes; try again when it has finished",
            wait.as_secs() / 60
        ))),
        taken = rx => match taken {
            Ok(Ok(lock)) => Ok(lock),
            Ok(Err(e)) => Err(TurnWait::Unavailable(e.to_string())),
            Err(_) => Err(TurnWait::Unavailable("the turn lock's waiting thread ended without an answer".into())),
        },
    }
}
