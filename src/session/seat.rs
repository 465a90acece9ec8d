//! The account-wide admission of agy turns, as the turn commands use it
//! (the limits themselves are the library's, [`crate::state::admission`]; the
//! spacing of agy starts is the runner's, `crate::runner::spaced_start`):
//! a wait for a seat is said, and a state directory that cannot hold the
//! lock files never stops a turn (it runs without admission, with one
//! warning).

use crate::state::admission::{Admission, AdmissionError, Seat, SEATS_ENV};
use tokio_util::sync::CancellationToken;

/// The admission of this user's state directory; `None` when there is no
/// state directory (the turn then runs without admission). Its variables
/// were checked before the command acted (the binary checks every variable first).
pub fn admission(settings: &crate::settings::Settings) -> Option<Admission> {
    settings.admission()
}

/// The lock files cannot be used: said once, and the turn goes on.
fn unavailable(e: &AdmissionError) {
    eprintln!("agy-bridge: warning: agy starts are not limited across processes ({e})");
}

/// One of the account's seats for a turn, held while the turn runs.
/// `waiting` hears the sentence to show when all are taken. `Err(())`:
/// cancelled while waiting; `Ok(None)`: no admission (no state directory).
pub async fn wait_seat(
    admission: Option<&Admission>,
    cancel: &CancellationToken,
    mut waiting: impl FnMut(&str),
) -> Result<Option<Seat>, ()> {
    let Some(admission) = admission else {
        return Ok(None);
    };
    let said = |seats: u32| {
        waiting(&format!(
            "[agy-bridge: waiting for an agy seat: all {seats} are in use by other agy turns of this user ({SEATS_ENV})]\n"
        ))
    };
    match admission.wait_seat(cancel, said).await {
        Ok(seat) => Ok(Some(seat)),
        Err(AdmissionError::Cancelled) => Err(()),
        Err(e) => {
            unavailable(&e);
            Ok(None)
        }
    }
}

/// `run` and `ask`: a seat, its wait said on stderr (the start spacing is
/// the runner's). `Err(())`: cancelled while waiting.
pub async fn admit_one_shot(
    admission: Option<&Admission>,
    cancel: &CancellationToken,
) -> Result<Option<Seat>, ()> {
    wait_seat(admission, cancel, |words| eprint!("{}", words.trim_start())).await
}
