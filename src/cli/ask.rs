//! `agy-bridge ask`: AskAntigravity, one-shot delegation. One turn to its
//! end, then only agy's final answer and the conversation to continue,
//! as text or one JSON object.

use super::turn::TurnOpts;
use agy_bridge::pi::delegate::{strip_add_dirs, AskReport, SELF_DELEGATION};
use agy_bridge::runner::{self, RunConfig, TurnRequest};
use agy_bridge::session::unattended::{final_answer, run_collecting};
use agy_bridge::settings::Settings;
use clap::Args;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
pub struct AskArgs {
    /// Model alias: flash, pro, gemini, sonnet, opus, gpt-oss, or e.g.
    /// "3.5 flash low" (default: the configured default model).
    #[arg(long)]
    model: Option<String>,
    #[command(flatten)]
    turn: TurnOpts,
    /// Print {"answer", "conversationId", ...} as one JSON object.
    #[arg(long)]
    json: bool,
    /// The provider of the model calling this tool; `antigravity` refuses
    /// (agy delegating to itself would recurse).
    #[arg(long)]
    caller_provider: Option<String>,
}

/// The delegated turn `ask` runs: the workspace and nothing else, so it
/// cannot call back into pi.
fn ask_turn(args: &AskArgs, settings: &Settings) -> Result<AskTurn, String> {
    super::env::check_all(settings)?;
    let config = agy_bridge::session::setup::config(settings)?;
    let alias = args
        .model
        .clone()
        .unwrap_or_else(|| config.default_model.clone());
    let stop = agy_bridge::process::caller::stop_token();
    let resolved = agy_bridge::pi::models::catalog(settings, &stop)
        .resolve_alias(&alias, Some(config.default_thinking))
        .map_err(|e| e.to_string())?;
    let (mut cfg, mut turn) = super::turn::turn_setup(&args.turn, &config, settings)?;
    cfg.extra_args = strip_add_dirs(&cfg.extra_args);
    let label = match resolved.effort {
        Some(e) => format!("{} ({})", resolved.model, e.as_arg()),
        None => resolved.model.clone(),
    };
    turn.model = Some(resolved.model);
    turn.effort = resolved.effort;
    Ok(AskTurn {
        cfg,
        turn,
        label,
        gating: agy_bridge::session::gating::gate_plan(&config, false, settings),
    })
}

/// AskAntigravity's turn: agy's settings and request, the model as the
/// answer names it, and its gate (nobody is asked: the rules decide).
struct AskTurn {
    cfg: RunConfig,
    turn: TurnRequest,
    label: String,
    gating: Option<agy_bridge::session::gating::GatePlan>,
}

pub fn cmd_ask(args: AskArgs, settings: &Settings) -> CmdResult {
    if args.caller_provider.as_deref() == Some(agy_bridge::pi::provider::PROVIDER_ID) {
        return Ok(print(&AskReport::failed(SELF_DELEGATION.into()), args.json));
    }
    let AskTurn {
        cfg,
        turn,
        label,
        gating,
    } = match ask_turn(&args, settings) {
        Ok(t) => t,
        Err(e) => return Ok(print(&AskReport::failed(e), args.json)),
    };
    let (result, events) = super::turn::runtime()?.block_on(async {
        let cancel = CancellationToken::new();
        super::turn::cancel_on_signals(cancel.clone());
        run_collecting(cfg, turn, gating, cancel).await
    });
    let answer = final_answer(&result, &events);
    let mut notices = result.notices.clone();
    if let Some(reason) = &result.degraded {
        notices.push(runner::degraded_notice(reason));
    }
    if let (Some(lost), Some(id)) = (&result.lost_conversation, &result.conversation_id) {
        notices.push(runner::new_conversation_notice(lost, id));
    }
    let report = AskReport {
        answer: &answer,
        id: result.conversation_id.as_deref(),
        error: result.failure.as_ref().map(|f| f.to_string()),
        model: Some(&label),
        notices: &notices,
    };
    let code = print(&report, args.json);
    // Stopped by a signal: the shell's code for it (130 for Ctrl-C).
    Ok(agy_bridge::process::caller::stopped_exit().unwrap_or(code))
}

/// Print the report; a reader gone from stdout is not reported (the exit
/// code still says whether agy succeeded).
fn print(report: &AskReport<'_>, json: bool) -> ExitCode {
    match super::out::print(&report.stdout_text(json)) {
        Err(e) if !super::out::reader_gone(&e) => {
            eprintln!("agy-bridge: error: cannot write output: {e}");
        }
        _ => {}
    }
    for line in report.stderr_lines(json) {
        eprintln!("{line}");
    }
    if report.error.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
