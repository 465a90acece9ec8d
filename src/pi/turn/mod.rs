//! A pi turn, from pi's request line to its last event: the one-turn
//! `stream` ([`one_turn`]) and `stream --session` ([`serve_session`]), which
//! keeps one agy warm between a pi session's turns.
//!
//! The stages, each in a file of its own and shared by both: pi's input
//! (`input`), the request to a prepared turn (`start`, `prepare`), pi's
//! tools and the gate lent to the relay (`tools`), a turn on an agy of its
//! own (`cold`), and its end (`end`: the session's binding saved, pi's
//! message ended). The session core below ([`crate::session`]) holds what
//! is not pi's.
//!
//! The binary hands these pi's stdin and stdout and the cancellation it
//! wires to its signals; the tests hand them a pipe and a buffer.

mod cold;
mod end;
mod input;
mod prepare;
mod single;
mod start;
mod tools;
mod warm_session;

#[cfg(test)]
mod tests;

pub use prepare::{check_default_model, check_settings};
pub use single::one_turn;
use std::time::Duration;
pub use warm_session::{serve_session, Output};

/// How long a one-turn `stream` waits: for agy's turn (the watchdog) and
/// for pi's request line.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The per-turn watchdog.
    pub timeout: Duration,
    /// How long to wait for the request line.
    pub request_wait: Duration,
}

impl Limits {
    /// The watchdog (`AGY_TIMEOUT_MIN`, or `--timeout-min` applied) and the
    /// request-line wait (`AGY_REQUEST_TIMEOUT_SECS`) of `settings`.
    pub fn of(settings: &crate::settings::Settings) -> Limits {
        Limits {
            timeout: settings.watchdog(),
            request_wait: settings.request_timeout,
        }
    }
}
