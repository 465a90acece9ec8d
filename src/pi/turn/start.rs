//! From pi's request line to a turn ready to run, for a cold `stream` turn
//! and a `--session` turn alike: the request parsed, the session's turn
//! lock taken (waiting for the turn before), the turn prepared, agy's
//! features known and an account seat held.

use super::prepare::PreparedTurn;
use crate::runner;
use crate::session::turn_lock::{wait_turn_lock, TurnWait};
use std::io::Write;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Everything `stream` has before agy starts: the request, its watchdog,
/// the session's turn lock, the prepared turn.
pub(super) struct StreamStart {
    pub(super) req: crate::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    /// The runner's [`runner::Prelude`], computed while preparing.
    pub(super) prelude: runner::Prelude,
    pub(super) _turn_lock: Option<crate::state::sessions::TurnLock>,
}

/// What pi is told of a request it got wrong (not an abort).
pub(super) fn bad_request(why: String) -> (bool, String) {
    (false, format!("agy-bridge: bad request: {why}"))
}

/// A turn once its request line is in: parse
/// it, take the session's turn lock, prepare the turn.
pub(super) async fn start_from_line(
    line: &str,
    timeout: Duration,
    settings: &crate::settings::Settings,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let req: crate::pi::provider::StreamRequest =
        serde_json::from_str(line).map_err(|e| bad_request(e.to_string()))?;
    // One turn per session at a time: wait for the one before (within our
    // watchdog) so this one resumes the conversation it left.
    let (session_key, store) = super::prepare::session_of(&req, settings);
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
    let (for_prepare, stop, env) = (req.clone(), cancel.clone(), settings.clone());
    let prepared = tokio::task::spawn_blocking(move || {
        let prepared =
            super::prepare::prepare_turn(&for_prepare, timeout, session_key, store, &env, &stop)?;
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
/// the [`crate::pi::provider::mapper::EventMapper`] its events go through, and
/// what it holds to its end (the session's turn lock, an account seat).
pub(super) struct Begun {
    pub(super) req: crate::pi::provider::StreamRequest,
    pub(super) prepared: PreparedTurn,
    pub(super) prelude: runner::Prelude,
    pub(super) mapper: crate::pi::provider::mapper::EventMapper,
    /// Bind it (`held: _held`) to keep both to the end of the turn.
    pub(super) held: Held,
}

/// What a turn holds while it runs.
pub(super) struct Held {
    _turn_lock: Option<crate::state::sessions::TurnLock>,
    _seat: Option<crate::state::admission::Seat>,
}

/// From a started turn to one ready to run: agy's features asked (once
/// per binary, then remembered: they decide what the turn may use, pi's
/// tools among it), the turn's notes shown, an account seat taken (pi
/// told when it waits). `None`: pi aborted the wait (pi has its `error`).
pub(super) async fn begin_turn<W: Write>(
    start: StreamStart,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Begun> {
    let StreamStart {
        req,
        prepared,
        mut prelude,
        _turn_lock,
    } = start;
    if prelude.features().is_none() {
        let (dir, bin) = (prepared.cfg.state_dir.as_deref(), &prepared.cfg.agy_bin);
        let features = crate::runner::version::agy_features(dir, bin, cancel).await;
        prelude.set_features(features);
    }
    for note in &prepared.notes {
        pi.thinking(note);
    }
    let mut mapper = crate::pi::provider::mapper::EventMapper::new(&prepared.cwd);
    mapper.set_conversations_dir(&prepared.cfg.conversations_dir);
    mapper.set_home(prepared.settings.home.as_deref());
    if let Some(gone) = &prepared.replaces {
        mapper.replaces(gone.as_str());
    }
    let seat = take_seat(prepared.cfg.admission.as_ref(), pi, cancel).await?;
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
    admission: Option<&crate::state::admission::Admission>,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> Option<Option<crate::state::admission::Seat>> {
    match crate::session::seat::wait_seat(admission, cancel, |words| pi.thinking(words)).await {
        Ok(seat) => Some(seat),
        Err(()) => {
            pi.fail(true, "Operation aborted");
            None
        }
    }
}
