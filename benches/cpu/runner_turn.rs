//! A cold turn through the library's runner alone: what `agy-bridge
//! stream` does less pi's side. Between the least a cold turn does under
//! the guardian (`cold_floor.rs`) and the bridge's `stream`, it tells
//! whether the bridge's extra lies in following agy or in serving pi.
//!
//! It has what the runner does (agy under the guardian, forked first thing
//! as `stream` forks it; discovery and stream-json binding; agy followed
//! live, each commit decoded as it lands; agy's exit classified) on a
//! current-thread runtime as `stream`'s, each event a JSON line on stdout
//! (answer text as pi's `text_delta`), and the binding stored durably as
//! the floor stores it. It has none of pi's side: no command line, no
//! settings file, no session lock, no admission, no model catalog, no
//! mapping to pi's events, no stdin reader or stdout watcher.

use agy_bridge::follow::events::Event;
use agy_bridge::process::standby::{Guardian, Standby};
use agy_bridge::runner::{self, Prelude, RunConfig, RunEvent, TurnRequest};
use serde_json::json;
use std::io::Write;
use tokio_util::sync::CancellationToken;

/// Run pi's prompt (in `cwd`, if it names one; resuming conversation
/// `resume`, if any) through the runner, agy under `standby`, or without
/// one under a guardian started at the turn as `stream` starts one when
/// its fork failed (the `agy-bridge` binary again); each event a line on
/// `out`: whether the turn succeeded, its conversation and the last
/// step's idx.
pub fn run(
    standby: Option<Standby>,
    prompt: &str,
    cwd: Option<&str>,
    resume: Option<String>,
    out: &mut impl Write,
) -> (bool, Option<String>, i64) {
    let settings = agy_bridge::settings::Settings::from_process();
    if let Err(bad) = settings.check() {
        panic!("the runner's settings: {bad}");
    }
    let mut cfg = RunConfig::from_settings(&settings);
    let bridge = crate::common::workspace_bin("agy-bridge");
    cfg.guardian = Some(match standby {
        Some(standby) => Guardian::new(bridge).with_standby(standby),
        None => Guardian::new(bridge),
    });
    let conversation = resume
        .map(|id| agy_format::ids::ConversationId::parse(&id).expect("a stored conversation id"));
    let req = TurnRequest {
        prompt: prompt.to_string(),
        cwd: cwd.map(Into::into),
        conversation,
        ..Default::default()
    };
    let prelude = Prelude::blocking(&cfg);
    let result = crate::cold_floor::runtime().block_on(async {
        let (tx, mut rx) = runner::event_channel();
        let turn = runner::run_with(&cfg, &req, prelude, CancellationToken::new(), tx);
        let print = async {
            while let Some(event) = rx.recv().await {
                print_event(&event, out);
            }
        };
        tokio::join!(turn, print).0
    });
    let last = result.last_idx.unwrap_or(-1);
    (result.ok(), result.conversation_id, last)
}

/// One event's line: answer text as pi's `text_delta`, the rest as the
/// runner reports it.
fn print_event(event: &RunEvent, out: &mut impl Write) {
    let line = match event {
        RunEvent::Agy(Event::Text { idx, text }) => {
            json!({"type": "text_delta", "idx": idx, "delta": text})
        }
        other => serde_json::to_value(other).expect("an event as JSON"),
    };
    writeln!(out, "{line}").expect("stdout");
}
