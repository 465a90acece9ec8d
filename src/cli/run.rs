//! `agy-bridge run` and `agy-bridge demo`: one turn for a person at a
//! terminal (or a script), its events printed as they come, readable or as
//! JSON lines. Apart from `stream` because nothing here speaks pi's
//! protocol: the printing and the exit code are the whole interface.

use super::turn::TurnOpts;
use agy_bridge::runner::{self, RunConfig, RunEvent, TurnRequest};
use agy_bridge::settings::{Flags, Settings};
use agy_bridge::view::render::LiveView;
use agy_format::agy_args::BindMode;
use agy_format::agy_args::Effort;
use clap::Args;
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// agy model (slug or display name), passed as --model.
    #[arg(long)]
    model: Option<String>,
    /// low, medium or high (Gemini tiers only).
    #[arg(long)]
    effort: Option<Effort>,
    #[command(flatten)]
    turn: TurnOpts,
    /// One JSON event per line, then a final result line.
    #[arg(long)]
    json: bool,
    /// How to bind the conversation: auto, discovery or stream-json
    /// (default: AGY_BIND, else auto).
    #[arg(long)]
    bind: Option<BindMode>,
    /// Wake only on the fallback interval (no inotify).
    #[arg(long)]
    poll_only: bool,
    /// Fallback poll interval in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which bundled recording to replay.
    #[arg(long, default_value = "tools")]
    recording: String,
    /// Replay speed (1 = agy's recorded pace, 2 = twice as fast).
    #[arg(long, default_value_t = 2.0, value_parser = parse_speed, allow_negative_numbers = true)]
    speed: f64,
    /// One JSON event per line instead of the readable view.
    #[arg(long)]
    json: bool,
}

/// `--speed`: a replay speed is a finite number above 0 (0 would never
/// replay anything, a negative or infinite pace has no meaning).
fn parse_speed(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "a replay speed is a number above 0 (1 = agy's recorded pace, 2 = twice as fast), not {s:?}"
        )),
    }
}

/// Run one turn, printing events as they come; returns the exit code. A
/// reader that closes stdout ends the turn (nobody sees the rest) and the
/// command quietly, exit 0 (see `super::out`).
async fn drive(
    mut cfg: RunConfig,
    mut req: TurnRequest,
    gating: Option<agy_bridge::session::gating::GatePlan>,
    json: bool,
) -> io::Result<(ExitCode, runner::RunResult)> {
    use super::out;
    let cancel = CancellationToken::new();
    super::turn::cancel_on_signals(cancel.clone());
    let Ok(_seat) =
        agy_bridge::session::seat::admit_one_shot(cfg.admission.as_ref(), &cancel).await
    else {
        let code = failed(&agy_bridge::runner::failure::Failure::Aborted);
        return Ok((code, runner::RunResult::aborted_before_start()));
    };
    let (tx, rx) = runner::event_channel();
    // Writing to stdout blocks while its reader is slow: on a thread of its
    // own, so the runner waits (its channel full), not a runtime worker.
    let printing = cancel.clone();
    let printer = tokio::task::spawn_blocking(move || print_events(rx, json, printing));
    let _gate =
        agy_bridge::session::gating::open_unattended(gating.as_ref(), &mut cfg, &mut req, &cancel)
            .await;
    let result = runner::run(&cfg, &req, cancel, tx).await;
    let (mut view, gone) = printer.await.map_err(io::Error::other)?;
    let written = if gone {
        Ok(())
    } else if json {
        let line = serde_json::json!({"kind": "result", "result": &result});
        out::print(&format!("{line}\n"))
    } else {
        view.summary(&result)
    };
    match written {
        Err(e) if out::reader_gone(&e) => return Ok((ExitCode::SUCCESS, result)),
        Err(e) => return Err(e),
        Ok(()) if gone => return Ok((ExitCode::SUCCESS, result)),
        Ok(()) => {}
    }
    // The failure's sentence goes to stderr, once; the summary line only
    // says "failed".
    let code = match &result.failure {
        None => ExitCode::SUCCESS,
        Some(f) => failed(f),
    };
    Ok((code, result))
}

/// A turn that failed: its sentence and exit 1, or, stopped by a signal,
/// that and the shell's code for it (130 for Ctrl-C).
fn failed(failure: &agy_bridge::runner::failure::Failure) -> ExitCode {
    agy_bridge::process::caller::stopped_exit().unwrap_or_else(|| {
        eprintln!("agy-bridge: error: {failure}");
        ExitCode::FAILURE
    })
}

/// Print the turn's events as they come (blocking: a thread of its own);
/// when stdout's reader is gone, cancel the turn and say so (`true`).
fn print_events(
    mut rx: tokio::sync::mpsc::Receiver<RunEvent>,
    json: bool,
    cancel: CancellationToken,
) -> (LiveView<io::Stdout>, bool) {
    let stdout = io::stdout();
    let color = stdout.is_terminal();
    let mut view = LiveView::new(stdout, color);
    while let Some(ev) = rx.blocking_recv() {
        let r = if json {
            serde_json::to_string(&ev)
                .map_err(io::Error::other)
                .and_then(|line| super::out::print(&format!("{line}\n")))
        } else {
            view.event(&ev)
        };
        match r {
            Ok(()) => {}
            Err(e) if super::out::reader_gone(&e) => {
                cancel.cancel();
                return (view, true);
            }
            Err(_) => break,
        }
    }
    (view, false)
}

pub fn cmd_run(args: RunArgs, settings: &Settings) -> CmdResult {
    super::env::check_all(settings)?;
    let settings = settings.clone().with_flags(Flags {
        bind: args.bind,
        poll_only: args.poll_only,
        ..Flags::default()
    });
    let config = agy_bridge::session::setup::config(&settings)?;
    let (mut cfg, mut req) = super::turn::turn_setup(&args.turn, &config, &settings)?;
    let gating = agy_bridge::session::gating::gate_plan(&config, false, &settings);
    req.model = args.model;
    req.effort = args.effort;
    cfg.poll_interval = Duration::from_millis(args.poll_ms.max(10));
    let rt = super::turn::runtime()?;
    let (code, _) = rt.block_on(drive(cfg, req, gating, args.json))?;
    Ok(code)
}

/// The workspace's fake-agy: next to this binary (cargo puts both in
/// target/<profile>/), or `$FAKE_AGY_BIN`.
fn find_fake_agy(settings: &Settings) -> Result<PathBuf, String> {
    if let Some(p) = &settings.fake_agy_bin {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let beside = exe.with_file_name("fake-agy");
    if beside.is_file() {
        return Ok(beside);
    }
    Err(format!(
        "the demo needs the workspace's fake-agy next to {} (build it with `cargo build --workspace`, or set FAKE_AGY_BIN)",
        exe.display()
    ))
}

pub fn cmd_demo(args: DemoArgs, settings: &Settings) -> CmdResult {
    let fake = find_fake_agy(settings)?;
    let demo = agy_bridge::maintain::demo::Demo::prepare(&args.recording, args.speed, fake)?;
    if !args.json {
        // Not the recording's description: it is written for developers
        // (step types, field numbers).
        let intro = format!(
            "agy-bridge demo: replaying recording {:?} with the bundled fake agy at {}x; no real agy, no network.\nprompt: {}\n\n",
            args.recording, args.speed, demo.req.prompt
        );
        if let Err(e) = super::out::print(&intro) {
            return super::out::finish(Err(e), ExitCode::SUCCESS);
        }
    }
    let rt = super::turn::runtime()?;
    let outcome = rt.block_on(drive(demo.cfg.clone(), demo.req.clone(), None, args.json));
    Ok(outcome?.0)
}
