//! A one-turn `stream`: pi's input read on a thread of its own (the
//! request line first, then abort and control lines), the request checked
//! and the turn run cold, on an agy of its own.

use super::input::{is_abort_line, keep_control};
use super::start::{bad_request, StreamStart};
use super::Limits;
use crate::pi::mcp::relay::Control;
use crate::pi::provider::stream::PiStream;
use crate::process::standby::Standby;
use crate::settings::Settings;
use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The first stdin line, or why there is none.
type RequestLine = Result<String, String>;

/// Read pi's input (stdin) on a plain thread: the first line is the request (or, without
/// a newline, everything up to the end of stdin); later lines are
/// `{"type":"abort"}` (cancels at once) or the control lines of pi's tool
/// results (see [`crate::pi::mcp::relay::Control`]). The end of stdin
/// cancels the turn: the caller is gone.
fn input_reader<R: Read + Send + 'static>(
    input: R,
    cancel: CancellationToken,
) -> (
    tokio::sync::oneshot::Receiver<RequestLine>,
    tokio::sync::mpsc::Receiver<Control>,
) {
    use crate::pi::mcp::relay::CONTROL_CAPACITY;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (control_tx, control) = tokio::sync::mpsc::channel(CONTROL_CAPACITY);
    std::thread::spawn(move || {
        let mut stdin = BufReader::new(input);
        let mut buf = Vec::new();
        let first = match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => Err("no request line on stdin (it closed before any input)".to_string()),
            Ok(_) => request_text(buf),
            Err(e) => Err(format!("cannot read the request from stdin: {e}")),
        };
        let _ = tx.send(first);
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if is_abort_line(&line) => cancel.cancel(),
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    if let Some(c) = Control::parse(text.trim_end()) {
                        keep_control(&control_tx, c);
                    }
                }
            }
        }
        // pi keeps stdin open for the whole turn (tool results come on it):
        // its end means pi is gone, and the turn is aborted. A parked tool
        // call hears why first, if the queue has room; never waited for:
        // with pi's tools off nothing reads the queue, and the abort must
        // not wait on it.
        let _ = control_tx.try_send(Control::Closed);
        cancel.cancel();
    });
    (rx, control)
}

/// The request line's text, without its line ending.
fn request_text(mut line: Vec<u8>) -> RequestLine {
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err("the request line is empty; send one JSON object".into());
    }
    String::from_utf8(line).map_err(|e| {
        format!(
            "the request line is not UTF-8 text (invalid byte at offset {}); send one JSON object in UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Wait for the request line: it, or the sentence pi shows instead.
async fn read_request(
    mut request_line: tokio::sync::oneshot::Receiver<RequestLine>,
    wait: Duration,
    cancel: &CancellationToken,
) -> Result<String, (bool, String)> {
    tokio::select! {
        // A line that is there wins over a timer that is also done.
        biased;
        line = &mut request_line => taken_request(line),
        _ = tokio::time::sleep(wait) => Err(bad_request(format!(
            "no complete request line on stdin after {} s: the request is one JSON object followed by a newline (or the end of stdin); AGY_REQUEST_TIMEOUT_SECS sets how long to wait",
            wait.as_secs()
        ))),
        // stdin's end cancels just after the stdin thread sends the line
        // (or why there is none), and both can land between this select's
        // look at the line and its look here: the line, when it came,
        // still says more than "aborted".
        _ = cancel.cancelled() => match request_line.try_recv() {
            Ok(line) => taken_request(Ok(line)),
            Err(_) => Err((true, "Operation aborted".into())),
        },
    }
}

/// The request line as the stdin thread sent it, or the sentence pi shows.
fn taken_request(
    line: Result<RequestLine, tokio::sync::oneshot::error::RecvError>,
) -> Result<String, (bool, String)> {
    match line {
        Ok(line) => line.map_err(bad_request),
        Err(_) => Err(bad_request("stdin could not be read".into())),
    }
}

/// Read and check the request, take the session's turn lock (waiting for a
/// turn before it) and prepare the turn; the sentence pi shows otherwise,
/// and whether it was an abort.
async fn start_turn(
    limits: Limits,
    settings: &Settings,
    request_line: tokio::sync::oneshot::Receiver<RequestLine>,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let line = read_request(request_line, limits.request_wait, cancel).await?;
    super::start::start_from_line(&line, limits.timeout, settings, cancel).await
}

/// One `stream` turn: pi's request read from `input` (then its abort and
/// control lines), the turn's events written to `pi` (which has said
/// `start` already), under `settings` (the binary's, resolved once).
/// `standby` is agy's guardian, already started;
/// `cancel` ends the turn (the caller cancels it on a stop signal, on pi's
/// death, on stdout's reader gone). `false`: the turn failed (pi has its
/// `error`).
pub async fn one_turn<R: Read + Send + 'static, W: Write>(
    input: R,
    pi: &mut PiStream<W>,
    limits: Limits,
    settings: &Settings,
    standby: Option<Standby>,
    cancel: CancellationToken,
) -> bool {
    // The request is read on a thread of its own, from the start: the rest
    // of the set-up happens while it comes.
    let (request_line, control) = input_reader(input, cancel.clone());
    let start = match start_turn(limits, settings, request_line, &cancel).await {
        Ok(start) => start,
        Err((aborted, message)) => {
            pi.fail(aborted, &message);
            return false;
        }
    };
    super::cold::run_cold(start, standby, control, pi, &cancel).await
}
