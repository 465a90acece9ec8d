//! `agy-bridge stream`: the pi provider boundary. The command's entry (its
//! flags, its runtime, one turn or a `--session`) and pi's stdin (the request
//! line, then abort and control lines; the pipe itself is [`super::pi_io`]). What a turn does once its request is read lives in
//! [`super::start`], [`super::prepare`], [`super::cold`],
//! [`super::pi_tools`] and [`super::end`], which `--session` shares.

use super::pi_io::{is_abort_line, keep_control};
use super::start::{bad_request, StreamStart};
use agy_bridge::pi::mcp::relay::Control;
use clap::Args;
use std::io;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Environment: AGY_TIMEOUT_MIN, the watchdog in minutes when --timeout-min \
is not given (default 10); AGY_REQUEST_TIMEOUT_SECS, how long to wait for the request line on \
stdin (default 30, at least 1): the request is one JSON object followed by a newline, or by the end of \
stdin. Every error, a bad flag or variable included, is reported as pi's `start` event followed \
by one `error` event."
)]
pub struct StreamArgs {
    /// Our own watchdog per turn, in minutes (default: AGY_TIMEOUT_MIN,
    /// else 10).
    #[arg(long)]
    timeout_min: Option<u64>,
    /// Serve every turn of one pi session, one request line after another,
    /// keeping agy warm between them (AGY_WARM=off: one agy per turn).
    /// stdin's end ends the session.
    #[arg(long)]
    session: bool,
}

/// How long `stream` waits for its request line when
/// `AGY_REQUEST_TIMEOUT_SECS` is not set.
const REQUEST_TIMEOUT_SECS: u64 = 30;

/// The first stdin line, or why there is none.
type RequestLine = Result<String, String>;

/// Read stdin on a plain thread: the first line is the request (or, without
/// a newline, everything up to the end of stdin); later lines are
/// `{"type":"abort"}` (cancels at once) or the control lines of pi's tool
/// results (see [`agy_bridge::pi::mcp::relay::Control`]). The end of stdin
/// cancels the turn: the caller is gone.
fn stdin_reader(
    cancel: CancellationToken,
) -> (
    tokio::sync::oneshot::Receiver<RequestLine>,
    tokio::sync::mpsc::Receiver<Control>,
) {
    use agy_bridge::pi::mcp::relay::CONTROL_CAPACITY;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (control_tx, control) = tokio::sync::mpsc::channel(CONTROL_CAPACITY);
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut stdin = io::stdin().lock();
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

/// Report a `stream` failure that comes before any turn: pi's `start`, then
/// one `error` naming what was wrong.
pub fn stream_fails_early(message: &str) -> ExitCode {
    let mut pi = agy_bridge::pi::provider::stream::PiStream::new(io::stdout());
    pi.start();
    pi.fail(false, message);
    ExitCode::FAILURE
}

/// `standby`: agy's guardian, forked by `main` before anything else.
pub fn cmd_stream(
    args: StreamArgs,
    standby: Option<agy_bridge::process::standby::Standby>,
) -> CmdResult {
    let rt = match super::turn::stream_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            return Ok(stream_fails_early(&format!(
                "agy-bridge: cannot start: {e}"
            )))
        }
    };
    // The turn's first blocking job (preparing it) finds a thread started
    // while the request was on its way.
    drop(rt.spawn_blocking(|| ()));
    let ok = if args.session {
        rt.block_on(stream_session(args, standby))
    } else {
        rt.block_on(stream_turn(args, standby))
    };
    // The stdin thread may still be blocked reading; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `stream --session`: its limits checked first, as `stream`'s are.
async fn stream_session(
    args: StreamArgs,
    standby: Option<agy_bridge::process::standby::Standby>,
) -> bool {
    match stream_limits(&args) {
        Ok((timeout, _)) => super::session::serve(timeout, standby).await,
        Err(message) => {
            let mut pi = agy_bridge::pi::provider::stream::PiStream::new(io::stdout());
            pi.start();
            pi.fail(false, &format!("agy-bridge: {message}"));
            false
        }
    }
}

/// The watchdog and the request-line wait from flags and environment.
pub(super) fn stream_limits(args: &StreamArgs) -> Result<(Duration, Duration), String> {
    use super::env;
    let minutes = match args.timeout_min {
        Some(m) => m,
        None => env::whole_number(env::TIMEOUT_MIN, "minutes")?
            .unwrap_or(super::turn::TIMEOUT_MIN_DEFAULT),
    };
    let request_secs =
        env::whole_number(env::REQUEST_TIMEOUT_SECS, "seconds")?.unwrap_or(REQUEST_TIMEOUT_SECS);
    // Every other variable too, before pi's request is even read.
    env::check_words()?;
    Ok((
        super::turn::watchdog(minutes),
        Duration::from_secs(request_secs.max(1)),
    ))
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
async fn stream_start(
    args: &StreamArgs,
    request_line: tokio::sync::oneshot::Receiver<RequestLine>,
    cancel: &CancellationToken,
) -> Result<StreamStart, (bool, String)> {
    let (timeout, request_wait) =
        stream_limits(args).map_err(|message| (false, format!("agy-bridge: {message}")))?;
    let line = read_request(request_line, request_wait, cancel).await?;
    super::start::start_from_line(&line, timeout, cancel).await
}

/// One `stream` turn; `standby` is agy's guardian, already started.
async fn stream_turn(
    args: StreamArgs,
    standby: Option<agy_bridge::process::standby::Standby>,
) -> bool {
    use agy_bridge::pi::provider::stream::PiStream;
    let cancel = CancellationToken::new();
    // The request is read on a thread of its own, from the start: the rest
    // of the set-up happens while it comes.
    let (request_line, control) = stdin_reader(cancel.clone());
    // pi may be slow to read: the relay awaits room in the pipe, so the
    // turn's other tasks go on meanwhile.
    let (out, room) = agy_bridge::pi::provider::pipe::PipeOut::stdout();
    let mut pi = PiStream::new(out).with_room(room);
    pi.start();
    super::turn::cancel_on_signals(cancel.clone());
    // pi gone (killed, or no longer reading) ends the turn and agy's tree.
    super::caller::stop_with_parent();
    super::caller::cancel_when_stdout_closes(cancel.clone());
    let start = match stream_start(&args, request_line, &cancel).await {
        Ok(start) => start,
        Err((aborted, message)) => {
            pi.fail(aborted, &message);
            return false;
        }
    };
    super::cold::run_cold(start, standby, control, &mut pi, &cancel).await
}
