//! `agy-bridge ask`: AskAntigravity, one-shot delegation. One turn to its
//! end, then only agy's final answer and the conversation to continue,
//! as text or one JSON object.

use super::turn::TurnOpts;
use agy_bridge::runner::{self, RunConfig, RunEvent, TurnRequest};
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

/// What `ask` tells its caller: the answer, the conversation to continue,
/// the model, notices and the failure, as text or one JSON object.
struct AskReport<'a> {
    answer: &'a str,
    id: Option<&'a str>,
    error: Option<String>,
    model: Option<&'a str>,
    notices: &'a [String],
}

impl AskReport<'_> {
    fn failed(error: String) -> AskReport<'static> {
        AskReport {
            answer: "",
            id: None,
            error: Some(error),
            model: None,
            notices: &[],
        }
    }

    /// Print the report; a reader gone from stdout is not reported (the
    /// exit code still says whether agy succeeded).
    fn print(&self, json: bool) -> ExitCode {
        let mut text = String::new();
        if json {
            let v = serde_json::json!({
                "answer": self.answer,
                "conversationId": self.id,
                "model": self.model,
                "ok": self.error.is_none(),
                "error": self.error,
                "notices": self.notices,
            });
            text = format!("{v}\n");
        } else {
            if !self.answer.is_empty() {
                text.push_str(&format!("{}\n", self.answer));
            }
            if let Some(id) = self.id {
                text.push_str(&format!(
                    "\n[agy conversation: {id}; continue with --conversation {id}]\n"
                ));
            }
        }
        match super::out::print(&text) {
            Err(e) if !super::out::reader_gone(&e) => {
                eprintln!("agy-bridge: error: cannot write output: {e}");
            }
            _ => {}
        }
        if !json {
            for notice in self.notices {
                eprintln!("agy-bridge: note: {notice}");
            }
            if let Some(e) = &self.error {
                eprintln!("agy-bridge: error: {e}");
            }
        }
        if self.error.is_some() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// The delegated turn `ask` runs: the workspace and nothing else, so it
/// cannot call back into pi.
fn ask_turn(args: &AskArgs) -> Result<AskTurn, String> {
    super::env::check_all()?;
    let settings = super::turn::settings()?;
    let alias = args
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let resolved = agy_bridge::pi::models::catalog(&super::caller::stop_token())
        .resolve_alias(&alias, Some(settings.default_thinking))
        .map_err(|e| e.to_string())?;
    let (mut cfg, mut turn) = super::turn::turn_setup(&args.turn, &settings)?;
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
        gating: super::gate::gate_plan(&settings, false),
    })
}

/// AskAntigravity's turn: agy's settings and request, the model as the
/// answer names it, and its gate (nobody is asked: the rules decide).
struct AskTurn {
    cfg: RunConfig,
    turn: TurnRequest,
    label: String,
    gating: Option<super::gate::GatePlan>,
}

pub fn cmd_ask(args: AskArgs) -> CmdResult {
    if args.caller_provider.as_deref() == Some(agy_bridge::pi::provider::PROVIDER_ID) {
        return Ok(AskReport::failed(
            "AskAntigravity is not available while the current model is itself antigravity: agy would be delegating to itself".into(),
        )
        .print(args.json));
    }
    let AskTurn {
        cfg,
        turn,
        label,
        gating,
    } = match ask_turn(&args) {
        Ok(t) => t,
        Err(e) => return Ok(AskReport::failed(e).print(args.json)),
    };
    let (result, events) = super::turn::runtime()?.block_on(run_collecting(cfg, turn, gating));
    let answer = final_answer(&result, &events);
    let mut notices = result.notices.clone();
    if let Some(reason) = &result.degraded {
        notices.push(runner::degraded_notice(reason));
    }
    if let (Some(lost), Some(id)) = (&result.lost_conversation, &result.conversation_id) {
        notices.push(runner::new_conversation_notice(lost, id));
    }
    let code = AskReport {
        answer: &answer,
        id: result.conversation_id.as_deref(),
        error: result.failure.as_ref().map(|f| f.to_string()),
        model: Some(&label),
        notices: &notices,
    }
    .print(args.json);
    // Stopped by a signal: the shell's code for it (130 for Ctrl-C).
    Ok(super::caller::stopped_exit().unwrap_or(code))
}

/// Run one turn to the end, keeping agy's events (Ctrl-C and the other
/// signals abort it).
async fn run_collecting(
    mut cfg: RunConfig,
    mut turn: TurnRequest,
    gating: Option<super::gate::GatePlan>,
) -> (runner::RunResult, Vec<agy_bridge::follow::events::Event>) {
    let cancel = CancellationToken::new();
    super::turn::cancel_on_signals(cancel.clone());
    let Ok(_seat) = super::admission::admit_one_shot(&cancel).await else {
        return (runner::RunResult::aborted_before_start(), Vec::new());
    };
    let (tx, mut rx) = runner::event_channel();
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let RunEvent::Agy(e) = ev {
                v.push(e);
            }
        }
        v
    });
    let _gate = super::gate::open_unattended(gating.as_ref(), &mut cfg, &mut turn, &cancel).await;
    let result = runner::run(&cfg, &turn, cancel, tx).await;
    (result, collect.await.unwrap_or_default())
}

/// agy's answer: its stream-json `result.response` when it printed one,
/// else the last planner step's text, else its plain stdout.
fn final_answer(
    result: &runner::RunResult,
    events: &[agy_bridge::follow::events::Event],
) -> String {
    if let Some(r) = result
        .agy_result
        .as_ref()
        .filter(|r| !r.response.is_empty())
    {
        return r.response.trim_end().to_string();
    }
    let t = agy_bridge::follow::transcript::Transcript::from_events(events.iter().cloned());
    t.last_answer()
        .map(str::to_string)
        .unwrap_or_else(|| result.stdout.trim().to_string())
}

fn strip_add_dirs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--add-dir" {
            skip = true;
            continue;
        }
        if a.starts_with("--add-dir=") {
            continue;
        }
        out.push(a.clone());
    }
    out
}
