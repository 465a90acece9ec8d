//! The pi side of agy's tool calls, for one `agy-bridge stream` turn.
//!
//! [`relay`] forwards the runner's events to pi, as the plain stream does,
//! and when agy calls one of pi's tools it hands the call to pi: calls that
//! arrive together (within [`batch_window`]) end the current assistant
//! message as pi `toolCall`s with stop reason `toolUse`, and the relay parks
//! them until the extension's control lines answer them. Meanwhile agy's
//! events are held back; once every call is answered the next message starts
//! (`start`) and streams them. A parked call never outlives the wait: pi's
//! abort, a release line, the end of stdin, a result for a call that is not
//! waiting, the watchdog, or agy ending its turn each answer every call with
//! an error saying which it was.

use super::park::{Delivery, Parked, ToolCall, ToolOutcome};
use crate::provider::{EventMapper, PiStream};
use crate::runner::RunEvent;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A line the extension writes to the child's stdin after the request
/// (besides `{"type":"abort"}`, which cancels the turn directly).
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// `{"type":"tool_result","toolCallId","content":[...],"isError"}`.
    ToolResult { id: String, outcome: ToolOutcome },
    /// `{"type":"release","reason"}`: pi will not continue this turn (the
    /// session ended, or its next request was not the continuation).
    Release { reason: String },
    /// stdin ended: pi (or the extension) is gone.
    Closed,
}

impl Control {
    /// A stdin line, if it is a control line this module takes.
    pub fn parse(line: &str) -> Option<Control> {
        let v: Value = serde_json::from_str(line).ok()?;
        match v.get("type").and_then(Value::as_str)? {
            "tool_result" => {
                let id = v.get("toolCallId").and_then(Value::as_str)?.to_string();
                let content = v
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
                Some(Control::ToolResult {
                    id,
                    outcome: ToolOutcome::from_pi(&content, is_error),
                })
            }
            "release" => Some(Control::Release {
                reason: v
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("pi did not continue this turn")
                    .to_string(),
            }),
            _ => None,
        }
    }
}

/// [`batch_window`] when `AGY_PI_TOOL_BATCH_MS` is unset.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(2);

/// `AGY_PI_TOOL_BATCH_MS`: how long after a call further calls join its
/// message (default 2 ms: calls agy sends together reach the loopback
/// server within microseconds of each other; every millisecond here is
/// added to each tool round trip, see benches/tool_roundtrip.rs).
/// A value that is not a whole number of milliseconds up to 1000 is an
/// error: a longer window would hold every tool call that long.
pub fn batch_window() -> Result<Duration, crate::config::BadEnv> {
    const VAR: &str = "AGY_PI_TOOL_BATCH_MS";
    let Some(value) = crate::config::env_nonempty(VAR) else {
        return Ok(DEFAULT_BATCH_WINDOW);
    };
    match value.trim().parse::<u64>() {
        Ok(ms) if ms <= 1000 => Ok(Duration::from_millis(ms)),
        _ => Err(crate::config::BadEnv {
            var: VAR,
            value,
            takes: "a whole number of milliseconds from 0 to 1000 (default 2)",
        }),
    }
}

/// pi's control lines waiting for the relay. The extension writes one
/// `tool_result` per parked call (at most [`super::CALL_CAPACITY`] park at
/// once) and a `release`; a flood beyond this is not pi's protocol, and the
/// stdin reader drops it rather than stop reading (an abort line behind it
/// must still be seen).
pub const CONTROL_CAPACITY: usize = 64;

/// The tool side of a turn: calls from the MCP server, control lines from pi.
pub struct ToolLines {
    pub calls: mpsc::Receiver<ToolCall>,
    pub control: mpsc::Receiver<Control>,
    pub window: Duration,
}

/// How a wait for pi's results ended.
enum Waited {
    /// Every call answered; go on.
    Answered,
    /// The turn is over for pi: end the next message with this error
    /// (`true`: an abort).
    Ended(bool, String),
}

/// Forward one runner event to pi.
fn forward<W: Write>(
    ev: &RunEvent,
    pi: &mut PiStream<W>,
    mapper: &mut EventMapper,
    cancel: &CancellationToken,
) {
    if matches!(ev, RunEvent::Aborted) {
        // Promptly: agy's tree is still being taken down.
        pi.fail(true, "Operation aborted");
    }
    // An edit's diff reads files and may ask git: off the runtime's
    // workers where the runtime allows it.
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| mapper.map(ev, pi))
        }
        _ => mapper.map(ev, pi),
    }
    if pi.broken {
        cancel.cancel();
    }
}

/// Forward the turn's events to pi until the runner is done, handing agy's
/// tool calls to pi on the way (when `tools` is given).
pub async fn relay<W: Write>(
    events: &mut mpsc::Receiver<RunEvent>,
    mut tools: Option<&mut ToolLines>,
    pi: &mut PiStream<W>,
    mapper: &mut EventMapper,
    cancel: &CancellationToken,
) {
    loop {
        let call = match tools.as_deref_mut() {
            None => None,
            Some(t) => tokio::select! {
                // agy's earlier events go out before its call.
                biased;
                ev = events.recv() => match ev {
                    Some(ev) => { forward(&ev, pi, mapper, cancel); continue; }
                    None => return,
                },
                Some(call) = t.calls.recv() => Some(call),
            },
        };
        let Some(first) = call else {
            match events.recv().await {
                Some(ev) => forward(&ev, pi, mapper, cancel),
                None => return,
            }
            continue;
        };
        let Some(t) = tools.as_deref_mut() else {
            return;
        };
        if !hand_over(first, t, events, pi, mapper, cancel).await {
            return;
        }
    }
}

/// Give pi the call `first` (and any arriving with it), wait for the
/// results, then start the next message. `false` when the runner's events
/// ended meanwhile.
async fn hand_over<W: Write>(
    first: ToolCall,
    tools: &mut ToolLines,
    events: &mut mpsc::Receiver<RunEvent>,
    pi: &mut PiStream<W>,
    mapper: &mut EventMapper,
    cancel: &CancellationToken,
) -> bool {
    let mut parked = Parked::default();
    let mut batch = vec![(
        first.id.clone(),
        first.name.clone(),
        first.arguments.clone(),
    )];
    parked.park(first);
    let window = tokio::time::sleep(tools.window);
    tokio::pin!(window);
    let mut open = true;
    if tools.window.is_zero() {
        // No window: only the calls already here join (no timer tick).
        while let Ok(call) = tools.calls.try_recv() {
            batch.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
            parked.park(call);
        }
    }
    while open && !tools.window.is_zero() {
        tokio::select! {
            biased;
            ev = events.recv() => match ev {
                Some(ev) => forward(&ev, pi, mapper, cancel),
                None => open = false,
            },
            Some(call) = tools.calls.recv() => {
                batch.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                parked.park(call);
            }
            _ = &mut window => break,
        }
    }
    pi.tool_use(&batch);
    let mut held = Vec::new();
    let mut notes = Vec::new();
    let waited = if open {
        wait_for_results(&mut parked, tools, events, &mut held, &mut notes, cancel).await
    } else {
        parked.release_all("agy's turn ended before pi ran the tool");
        Waited::Ended(
            false,
            "agy's turn ended while pi was running its tool call".into(),
        )
    };
    pi.restart();
    for note in notes {
        pi.thinking(&note);
    }
    if let Waited::Ended(aborted, message) = &waited {
        pi.fail(*aborted, message);
    }
    let ended = held.iter().any(|e| e.is_none());
    for ev in held.into_iter().flatten() {
        forward(&ev, pi, mapper, cancel);
    }
    open && !ended
}

/// Wait until every parked call is answered or the turn ends for pi. Runner
/// events are held (`None` marks the end of them).
async fn wait_for_results(
    parked: &mut Parked,
    tools: &mut ToolLines,
    events: &mut mpsc::Receiver<RunEvent>,
    held: &mut Vec<Option<RunEvent>>,
    notes: &mut Vec<String>,
    cancel: &CancellationToken,
) -> Waited {
    let end = |parked: &mut Parked, cancel: &CancellationToken, aborted: bool, why: String| {
        parked.release_all(&why);
        cancel.cancel();
        Waited::Ended(aborted, format!("agy-bridge: {why}"))
    };
    loop {
        tokio::select! {
            ctl = tools.control.recv() => match ctl {
                Some(Control::ToolResult { id, outcome }) => match parked.answer(&id, outcome) {
                    Ok((name, Delivery::AgyGone)) => notes.push(format!(
                        "\n[agy-bridge: agy stopped waiting for pi's tool {name} before its result came (agy cuts a tool call off after about 180 s); agy did not get this result]\n"
                    )),
                    Ok(_) => {}
                    Err(mismatch) => return end(parked, cancel, false, format!("{mismatch}; agy's turn was stopped")),
                },
                Some(Control::Release { reason }) => return end(parked, cancel, true, reason),
                Some(Control::Closed) | None => {
                    return end(parked, cancel, true, "pi ended the session without a result for agy's tool call".into())
                }
            },
            ev = events.recv() => {
                let why = match &ev {
                    Some(RunEvent::TimedOut) => Some("the turn timed out while pi was running agy's tool call"),
                    Some(RunEvent::Aborted) => Some("the turn was aborted while pi was running agy's tool call"),
                    None => Some("agy's turn ended while pi was running its tool call"),
                    _ => None,
                };
                held.push(ev);
                if let Some(why) = why {
                    parked.release_all(why);
                    // The held events end the next message as they would.
                    return Waited::Answered;
                }
            }
            _ = cancel.cancelled() => {
                parked.release_all("pi aborted the turn while its tool ran");
                return Waited::Answered;
            }
        }
        if parked.is_empty() {
            return Waited::Answered;
        }
    }
}
