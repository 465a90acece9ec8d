//! What every turn-running subcommand of the binary shares (`run`, `ask`,
//! `stream`, and `record` and `conformance` too): the turn options, the
//! runner settings with this binary as agy's guardian, the settings file,
//! the runtime and the signals that end a turn. Kept apart from the
//! commands so each command's file holds only what is its own.

use agy_bridge::runner::{RunConfig, TurnRequest};
use agy_bridge::settings::{Flags, Settings};
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use clap::Args;
use std::io;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What every turn-running command shares: the mode, the conversation to
/// continue, agy's directory, the watchdog and the prompt.
#[derive(Debug, Args)]
pub struct TurnOpts {
    /// plan or accept-edits (default: the configured mode).
    #[arg(long)]
    mode: Option<Mode>,
    /// Continue this conversation (only its new steps stream).
    #[arg(long)]
    conversation: Option<String>,
    /// Working directory for agy.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Our own watchdog, in minutes (default: AGY_TIMEOUT_MIN, else 10).
    #[arg(long)]
    timeout_min: Option<u64>,
    /// The prompt: the task or question (`-` reads it from stdin, for a
    /// prompt longer than a command line takes, or one other users of this
    /// machine must not see in this command line; agy never gets it in its
    /// own).
    prompt: String,
}

/// A turn's runner settings and request from the shared options: the
/// environment's settings (`--timeout-min` over them), this binary as
/// agy's guardian, the configured permissions and mode, the watchdog;
/// agy's workspace is the turn's directory.
pub fn turn_setup(
    opts: &TurnOpts,
    config: &agy_bridge::state::config::Config,
    settings: &Settings,
) -> Result<(RunConfig, TurnRequest), String> {
    let settings = settings.clone().with_flags(Flags {
        timeout_min: opts.timeout_min,
        ..Flags::default()
    });
    let cfg = agy_bridge::session::setup::configured(config, &settings);
    let conversation = opts
        .conversation
        .as_deref()
        .map(ConversationId::parse)
        .transpose()
        .map_err(|e| e.to_string())?;
    let prompt = match opts.prompt.as_str() {
        "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            text
        }
        p => p.to_string(),
    };
    let mode = opts.mode.unwrap_or(config.mode);
    let turn =
        agy_bridge::session::setup::one_shot_turn(prompt, opts.cwd.clone(), mode, conversation);
    Ok((cfg, turn))
}

/// `stream`'s runtime: one thread, the one `stream` starts on, so a commit's
/// events reach pi with no hand-off between the runtime's threads
/// (docs/benchmarks.md, "`stream` on one thread"; ARCHITECTURE.md says what
/// still waits on it).
pub fn stream_runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// The runtime of `run`, `ask`, `record` and `conformance`.
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Cancel `token` on Ctrl-C, SIGTERM, SIGHUP (the terminal closed, the
/// parent shell died) or SIGQUIT: each ends the turn the same way, terminal
/// event first. One that came before this was called is not lost (see
/// [`agy_bridge::process::caller::stop_token`]).
pub fn cancel_on_signals(token: CancellationToken) {
    let stop = agy_bridge::process::caller::stop_token();
    tokio::spawn(async move {
        stop.cancelled().await;
        token.cancel();
    });
    // Ctrl-Z stops agy's tree with the bridge, `fg` resumes both.
    agy_bridge::process::caller::forward_job_control();
}
