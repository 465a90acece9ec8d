//! pi's side of the pipe, shared by one-turn `stream` and `--session`:
//! the lines pi sends during a turn (an abort, pi's tool results as
//! control lines).
//!
//! pi's stdout is written where `PiStream` writes: on the thread driving
//! `stream`, the runtime's only one (the binary builds it on one thread),
//! through [`crate::pi::provider::pipe::PipeOut`], which puts a line
//! into the pipe as far as it has room now; the relay awaits the rest
//! before the next event. pi reading slowly holds the relay, not the
//! runtime: the relay stops taking the runner's events, and the runner
//! stops reading agy's database, so pi's pace is the turn's and the bridge
//! holds at most one event's lines; the turn's abort and watchdog still
//! run. A write error (pi gone) fails that write, which is how `PiStream`
//! learns pi went away. It was a thread of its own fed by a queue of eight
//! chunks, then a blocking write on the thread that drove a multi-thread
//! runtime: one or two more threads to wake for every event.

use crate::pi::mcp::relay::Control;

/// Queue a control line for the relay without waiting: this thread must go
/// on reading stdin (an abort may follow), so a line beyond
/// [`crate::pi::mcp::relay::CONTROL_CAPACITY`] is dropped, and said.
pub(super) fn keep_control(control: &tokio::sync::mpsc::Sender<Control>, line: Control) {
    use tokio::sync::mpsc::error::TrySendError;
    if let Err(TrySendError::Full(_)) = control.try_send(line) {
        eprintln!(
            "agy-bridge: warning: a control line was dropped: more came than the turn has tool calls"
        );
    }
}

/// Whether a stdin line is pi's `{"type":"abort"}`.
pub(super) fn is_abort_line(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(|t| t == "abort"))
        .unwrap_or(false)
}
