//! From pi's request line to a turn ready to run, for a cold `stream` turn
//! and a `--session` turn alike: the request parsed, the session's turn
//! lock taken (waiting for the turn before), the turn prepared, agy's
//! features known and an account seat held.

use super::prepare::PreparedTurn;
use agy_bridge::runner;
use std::io::Write;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Everything `stream` has before agy starts: the request, its watchdog,
/// the session's turn lock, the prepared turn.
pub(super) struct StreamStart {
    pub(super) req: agy_bridge::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    /// The runner's [`runner::Prelude`], computed while preparing.
    pub(super) prelude: runner::Prelude,
    pub(super) _turn_lock: Option<agy_bridge::state::sessions::TurnLock>,
}

/// What pi is told of a request it got wrong (not an abort).
pub(super) fn bad_request(why: String) -> (bool, String) {
    (false, format!("agy-bridge: bad request: {why}"))
}

/// `stream_start` ([`super::stream`]) once the request line is in: parse
/// it, take the session's turn lock, prepare the turn.
pub(super) async fn start_from_line(
    line: &str,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let req: agy_bridge::pi::provider::StreamRequest =
        serde_json::from_str(line).map_err(|e| bad_request(e.to_string()))?;
    // One turn per session at a time: wait for the one before (within our
    // watchdog) so this one resumes the conversation it left.
    let (session_key, store) = super::prepare::session_of(&req);
    let mut store = store;
    let mut state_note = None;
    let turn_lock = match &store {
        Some(s) => match wait_turn_lock(s, &session_key, cancel, timeout).await {
            Ok(lock) => Some(lock),
            Err(TurnWait::Aborted) => return Err((true, "Operation aborted".into())),
            Err(TurnWait::Failed(message)) => return Err((false, message)),
            // A read-only or full state directory: the turn runs, without
            // session memory, and says so.
            Err(TurnWait::Unavailable(why)) => {
                state_note = Some(format!(
                    "\n[agy-bridge: the session state cannot be written ({why}); this turn runs without session memory: agy begins a new conversation, and pi's record of the earlier turns goes with the prompt]\n"
                ));
                store = None;
                None
            }
        },
        None => None,
    };
    // Settings, sessions and the model catalog are files (and at worst an
    // `agy models` run): resolved on a blocking thread, before the turn,
    // with what the runner reads before agy starts (the session is ours
    // now, so nothing of it can appear unseen).
    let (for_prepare, stop) = (req.clone(), cancel.clone());
    let prepared = tokio::task::spawn_blocking(move || {
        let prepared =
            super::prepare::prepare_turn(&for_prepare, timeout, session_key, store, &stop)?;
        let prelude = runner::Prelude::blocking(&prepared.cfg);
        Ok::<_, String>((prepared, prelude))
    })
    .await
    .map_err(|e| (false, format!("agy-bridge: preparing the turn failed: {e}")))?;
    let (mut prepared, prelude) = prepared.map_err(|m| (false, m))?;
    prepared.notes.extend(state_note);
    Ok(StreamStart {
        req,
        prepared,
        prelude,
        _turn_lock: turn_lock,
    })
}

/// A turn ready to run: its request, preparation and [`runner::Prelude`],
/// the [`agy_bridge::pi::provider::mapper::EventMapper`] its events go through, and
/// what it holds to its end (the session's turn lock, an account seat).
pub(super) struct Begun {
    pub(super) req: agy_bridge::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    pub(super) prelude: runner::Prelude,
    pub(super) mapper: agy_bridge::pi::provider::mapper::EventMapper,
    /// Bind it (`held: _held`) to keep both to the end of the turn.
    pub(super) held: Held,
}

/// What a turn holds while it runs.
pub(super) struct Held {
    _turn_lock: Option<agy_bridge::state::sessions::TurnLock>,
    _seat: Option<agy_bridge::state::admission::Seat>,
}

/// From a started turn to one ready to run: agy's features asked (once
/// per binary, then remembered: they decide what the turn may use, pi's
/// tools among it), the turn's notes shown, an account seat taken (pi
/// told when it waits). `None`: pi aborted the wait (pi has its `error`).
pub(super) async fn begin_turn<W: Write>(
    start: StreamStart,
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Begun> {
    let StreamStart {
        req,
        prepared,
        mut prelude,
        _turn_lock,
    } = start;
    if prelude.features().is_none() {
        let bin = &prepared.cfg.agy_bin;
        let features = agy_bridge::runner::version::agy_features(bin, cancel).await;
        prelude.set_features(features);
    }
    for note in &prepared.notes {
        pi.thinking(note);
    }
    let mut mapper = agy_bridge::pi::provider::mapper::EventMapper::new(&prepared.cwd);
    mapper.set_conversations_dir(&prepared.cfg.conversations_dir);
    if let Some(gone) = &prepared.replaces {
        mapper.replaces(gone.as_str());
    }
    let seat = take_seat(pi, cancel).await?;
    Some(Begun {
        req,
        prepared,
        prelude,
        mapper,
        held: Held {
            _turn_lock,
            _seat: seat,
        },
    })
}

/// One of the account's seats for this turn (held by the caller to the
/// turn's end), pi told when it waits; `None` when pi aborted the wait
/// (pi has its `error` already).
async fn take_seat<W: Write>(
    pi: &mut agy_bridge::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Option<agy_bridge::state::admission::Seat>> {
    match super::admission::wait_seat(cancel, |words| pi.thinking(words)).await {
        Ok(seat) => Some(seat),
        Err(()) => {
            pi.fail(true, "Operation aborted");
            None
        }
    }
}

enum TurnWait {
    Aborted,
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
async fn wait_turn_lock(
    store: &agy_bridge::state::sessions::SessionStore,
    key: &str,
    cancel: &CancellationToken,
    wait: Duration,
) -> Result<agy_bridge::state::sessions::TurnLock, TurnWait> {
    use agy_bridge::state::sessions::TurnLock;
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
