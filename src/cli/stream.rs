//! `agy-bridge stream`: the pi provider boundary. Its flags, its runtime,
//! the limits checked before anything is read, and the process's ends wired
//! to the turn's cancellation (a stop signal, pi's death, stdout's reader
//! gone); the turn itself is the library's ([`agy_bridge::pi::turn`]).

use agy_bridge::pi::provider::pipe::PipeOut;
use agy_bridge::pi::provider::stream::PiStream;
use agy_bridge::pi::turn::Limits;
use agy_bridge::settings::{Flags, Settings};
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
    settings: &Settings,
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
        rt.block_on(stream_session(args, standby, settings))
    } else {
        rt.block_on(stream_turn(args, standby, settings))
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
    settings: &Settings,
) -> bool {
    let gone = CancellationToken::new();
    ends_cancel(&gone);
    let settings = match stream_settings(&args, settings) {
        Ok(settings) => settings,
        Err(message) => {
            let mut pi = PiStream::new(io::stdout());
            pi.start();
            pi.fail(false, &format!("agy-bridge: {message}"));
            return false;
        }
    };
    let out: agy_bridge::pi::turn::Output = Box::new(|| {
        let (out, room) = PipeOut::stdout();
        PiStream::new(Box::new(out) as Box<dyn io::Write>).with_room(room)
    });
    agy_bridge::pi::turn::serve_session(io::stdin(), out, &settings, standby, gone).await;
    true
}

/// A stop signal, pi's death and pi no longer reading stdout each cancel
/// `token`: the turn (or the session) ends, agy's tree with it.
fn ends_cancel(token: &CancellationToken) {
    super::turn::cancel_on_signals(token.clone());
    agy_bridge::process::caller::stop_with_parent();
    agy_bridge::process::caller::cancel_when_stdout_closes(token.clone());
}

/// The settings with `--timeout-min` applied (the watchdog), every
/// variable checked before pi's request is even read.
fn stream_settings(args: &StreamArgs, settings: &Settings) -> Result<Settings, String> {
    super::env::check_words(settings)?;
    Ok(settings.clone().with_flags(Flags {
        timeout_min: args.timeout_min,
        ..Flags::default()
    }))
}

/// One `stream` turn; `standby` is agy's guardian, already started.
async fn stream_turn(
    args: StreamArgs,
    standby: Option<agy_bridge::process::standby::Standby>,
    settings: &Settings,
) -> bool {
    let cancel = CancellationToken::new();
    // pi may be slow to read: the relay awaits room in the pipe, so the
    // turn's other tasks go on meanwhile.
    let (out, room) = PipeOut::stdout();
    let mut pi = PiStream::new(out).with_room(room);
    pi.start();
    ends_cancel(&cancel);
    let settings = match stream_settings(&args, settings) {
        Ok(settings) => settings,
        Err(message) => {
            pi.fail(false, &format!("agy-bridge: {message}"));
            return false;
        }
    };
    agy_bridge::pi::turn::one_turn(
        io::stdin(),
        &mut pi,
        Limits::of(&settings),
        &settings,
        standby,
        cancel,
    )
    .await
}
