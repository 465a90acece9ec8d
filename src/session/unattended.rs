//! A turn nobody watches (AskAntigravity, a script's `run`): run to its
//! end with its events kept, and agy's final answer taken from them.

use super::gating::GatePlan;
use crate::follow::events::Event;
use crate::runner::{self, RunConfig, RunEvent, TurnRequest};
use tokio_util::sync::CancellationToken;

/// Run one turn to the end, keeping agy's events: a seat first, the gate
/// unattended (the rules decide, nobody is asked); `cancel` aborts it.
pub async fn run_collecting(
    mut cfg: RunConfig,
    mut turn: TurnRequest,
    gating: Option<GatePlan>,
    cancel: CancellationToken,
) -> (runner::RunResult, Vec<Event>) {
    let Ok(_seat) = super::seat::admit_one_shot(cfg.admission.as_ref(), &cancel).await else {
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
    let _gate = super::gating::open_unattended(gating.as_ref(), &mut cfg, &mut turn, &cancel).await;
    let result = runner::run(&cfg, &turn, cancel, tx).await;
    (result, collect.await.unwrap_or_default())
}

/// agy's answer: its stream-json `result.response` when it printed one,
/// else the last planner step's text, else its plain stdout.
pub fn final_answer(result: &runner::RunResult, events: &[Event]) -> String {
    if let Some(r) = result
        .agy_result
        .as_ref()
        .filter(|r| !r.response.is_empty())
    {
        return r.response.trim_end().to_string();
    }
    let t = crate::follow::transcript::Transcript::from_events(events.iter().cloned());
    t.last_answer()
        .map(str::to_string)
        .unwrap_or_else(|| result.stdout.trim().to_string())
}
