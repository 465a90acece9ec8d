//! The pi side of agy's tool calls, for one `agy-bridge stream` turn.
//!
//! [`relay`] forwards the runner's events to pi, as the plain stream does,
//! and when agy calls one of pi's tools it hands the call to pi: calls that
//! arrive together (within the batch window, `AGY_PI_TOOL_BATCH_MS`) end the current assistant
//! message as pi `toolCall`s with stop reason `toolUse`, and the relay parks
//! them until the extension's control lines answer them. Meanwhile agy's
//! events are held back; once every call is answered the next message starts
//! (`start`) and streams them. A parked call never outlives the wait: pi's
//! abort, a release line, the end of stdin, the watchdog, or agy ending its
//! turn each answer every call with an error saying which it was.
//!
//! A result no call is waiting for (a call answered twice, an id the bridge
//! never gave pi) is refused on its own: it is read as soon as it comes,
//! parked or not, never kept to answer a later call, and pi is told in a
//! thinking line naming the id; every other call goes on as if it had not
//! come (issue 17, item 14).

use super::park::{BadContent, Delivery, Mismatch, Parked, ToolCall, ToolOutcome};
use crate::gate::Question;
use crate::pi::dialog::{Answer, Asks};
use crate::pi::provider::mapper::EventMapper;
use crate::pi::provider::stream::PiStream;
use crate::runner::RunEvent;
use serde_json::Value;
use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A line the extension writes to the child's stdin after the request
/// (besides `{"type":"abort"}`, which cancels the turn directly).
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// `{"type":"tool_result","toolCallId","content":[...],"isError","steer"}`;
    /// `content` may also be a plain string. `Err` when it is neither (the
    /// call is answered with an error saying so). `steer` (optional) lists
    /// the contents of pi's steering messages that came after the results:
    /// they follow this result's content (see [`ToolOutcome::with_steer`]).
    ToolResult {
        /// The call answered (`toolCallId`).
        id: String,
        /// The result for agy, or why the line's content could not be read.
        outcome: Result<ToolOutcome, BadContent>,
    },
    /// `{"type":"permission","id","decision","scope","reason"}`: the user's
    /// decision on a tool call agy waits for (see [`crate::pi::dialog`]).
    Permission(Answer),
    /// `{"type":"release","reason"}`: pi will not continue this turn (the
    /// session ended, or its next request was not the continuation).
    Release {
        /// pi's reason, passed on to the calls released.
        reason: String,
    },
    /// stdin ended: pi (or the extension) is gone.
    Closed,
    /// A line that is none of these: pi hears why it was ignored, and no
    /// call is touched.
    Unreadable {
        /// What was wrong with the line.
        why: String,
    },
}

impl Control {
    /// A stdin line as a control line (`None` for a blank line).
    pub fn parse(line: &str) -> Option<Control> {
        if line.trim().is_empty() {
            return None;
        }
        let unreadable = |why: String| {
            Some(Control::Unreadable {
                why: format!("{why}; agy-bridge ignored the line"),
            })
        };
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return unreadable(format!("pi sent a line that is not JSON ({e})")),
        };
        match v.get("type").and_then(Value::as_str) {
            Some("tool_result") => match v.get("toolCallId").and_then(Value::as_str) {
                Some(id) => {
                    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    let steer = v.get("steer").and_then(Value::as_array);
                    let outcome = ToolOutcome::from_pi_value(v.get("content"), is_error)
                        .map(|o| o.with_steer(steer.map(Vec::as_slice).unwrap_or_default()));
                    Some(Control::ToolResult {
                        id: id.to_string(),
                        outcome,
                    })
                }
                None => unreadable("pi sent a tool_result without a toolCallId".into()),
            },
            Some("permission") => match Answer::from_value(&v) {
                Some(answer) => Some(Control::Permission(answer)),
                None => unreadable(
                    "pi sent a permission line without an id or with a decision other than allow or deny".into(),
                ),
            },
            Some("release") => Some(Control::Release {
                reason: v
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("pi did not continue this turn")
                    .to_string(),
            }),
            Some(other) => {
                let shown: String = other.chars().take(40).collect();
                unreadable(format!("pi sent a line of unknown type {shown:?}"))
            }
            None => unreadable("pi sent a line without a \"type\"".into()),
        }
    }
}

/// A `tool_result` no parked call takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Stale {
    #[error("pi sent a second result for tool call {id:?}, which was already answered; agy-bridge ignored it")]
    Repeated { id: String },
    #[error("pi sent a result for tool call {id:?}, which is not waiting (waiting: {waiting}); agy-bridge ignored it")]
    Unknown { id: String, waiting: String },
}

/// A line of pi's thinking from the bridge (how pi learns of a refusal: the
/// extension shows thinking, and nothing else reaches it mid-turn).
fn note(text: &str) -> String {
    format!("\n[agy-bridge: {text}]\n")
}

/// pi's control lines waiting for the relay. The extension writes one
/// `tool_result` per parked call (at most [`super::CALL_CAPACITY`] park at
/// once) and a `release`; a flood beyond this is not pi's protocol, and the
/// stdin reader drops it rather than stop reading (an abort line behind it
/// must still be seen).
pub(crate) const CONTROL_CAPACITY: usize = 64;

/// The tool side of a turn: calls from the MCP server, control lines from pi.
pub struct ToolLines {
    /// agy's calls, from the MCP server.
    pub calls: mpsc::Receiver<ToolCall>,
    /// pi's control lines, from the stdin reader.
    pub control: mpsc::Receiver<Control>,
    /// How long the first call waits for others to join its batch.
    pub window: Duration,
    /// Ids pi has answered this turn: a repeat is told from a stranger.
    answered: HashSet<String>,
    /// A release or stdin's end that came while no call was parked: it ends
    /// the wait for the next call, as it would have had it come then.
    ended: Option<Control>,
    /// The gate's questions (`ask` mode), when the turn has a gate.
    pub asks: Option<Asks>,
}

impl ToolLines {
    /// The tool side over these channels, batching calls within `window`.
    pub fn new(
        calls: mpsc::Receiver<ToolCall>,
        control: mpsc::Receiver<Control>,
        window: Duration,
    ) -> ToolLines {
        ToolLines {
            calls,
            control,
            window,
            answered: HashSet::new(),
            ended: None,
            asks: None,
        }
    }

    /// With the gate's questions.
    pub(crate) fn with_asks(mut self, asks: Option<Asks>) -> ToolLines {
        self.asks = asks;
        self
    }

    /// A gate question's lines, or the lines of pi's answer to one.
    fn gate_lines<W: Write>(
        &mut self,
        input: GateInput,
        mapper: &mut EventMapper,
        pi: &mut PiStream<W>,
    ) -> Vec<String> {
        match (input, self.asks.as_mut()) {
            (GateInput::Question(q), Some(asks)) => asks.question(*q, mapper, pi),
            (GateInput::Answer(a), Some(asks)) => asks.answer(a, mapper),
            (GateInput::Answer(a), None) => vec![note(&format!(
                "pi answered permission question {:?}, but this turn asks none",
                a.id
            ))],
            (GateInput::Question(_), None) => Vec::new(),
        }
    }

    /// Why pi's result for `id` fits no parked call.
    fn stale(&self, id: String, waiting: String) -> Stale {
        if self.answered.contains(&id) {
            Stale::Repeated { id }
        } else {
            let waiting = if waiting.is_empty() {
                "none".into()
            } else {
                waiting
            };
            Stale::Unknown { id, waiting }
        }
    }

    /// A control line while no call is parked: a result is stale (no call
    /// is waiting, and a later call has an id pi has not seen yet), so pi
    /// hears so now; a release or stdin's end is kept for the next call.
    fn between_calls<W: Write>(
        &mut self,
        ctl: Control,
        pi: &mut PiStream<W>,
        mapper: &mut EventMapper,
    ) {
        match ctl {
            Control::Permission(a) => {
                for line in self.gate_lines(GateInput::Answer(a), mapper, pi) {
                    pi.thinking(&line);
                }
            }
            Control::ToolResult { id, .. } => {
                pi.thinking(&note(&self.stale(id, String::new()).to_string()))
            }
            Control::Unreadable { why } => pi.thinking(&note(&why)),
            ended => self.ended = Some(ended),
        }
    }

    /// Answer a parked call with pi's result; what pi should hear about it
    /// goes to `notes`. A result for no parked call answers nothing.
    fn take_result(
        &mut self,
        parked: &mut Parked,
        id: String,
        outcome: Result<ToolOutcome, BadContent>,
        notes: &mut Vec<String>,
    ) {
        let (outcome, unreadable) = match outcome {
            Ok(outcome) => (outcome, None),
            Err(bad) => {
                let why = format!("agy-bridge could not read pi's result for this call: {bad}");
                (ToolOutcome::error(&why), Some(bad))
            }
        };
        match parked.answer(&id, outcome) {
            Ok((name, delivery)) => {
                if let Some(bad) = unreadable {
                    notes.push(note(&format!(
                        "pi's result for tool call {id:?} ({name}) could not be read: {bad}; agy was told the call failed"
                    )));
                }
                if delivery == Delivery::AgyGone {
                    notes.push(note(&format!(
                        "agy stopped waiting for pi's tool {name} before its result came (agy cuts a tool call off after about 180 s); agy did not get this result"
                    )));
                }
                self.answered.insert(id);
            }
            Err(Mismatch { id, waiting }) => notes.push(note(&self.stale(id, waiting).to_string())),
        }
    }
}

/// The next control line while calls are parked (one kept from before
/// first; a closed channel is stdin's end). Fields, not the whole
/// [`ToolLines`]: the gate's questions are awaited beside it.
async fn next_control(
    ended: &mut Option<Control>,
    control: &mut mpsc::Receiver<Control>,
) -> Control {
    if let Some(ended) = ended.take() {
        return ended;
    }
    control.recv().await.unwrap_or(Control::Closed)
}

/// What the gate side of a turn brings.
enum GateInput {
    Question(Box<Question>),
    Answer(Answer),
}

/// The next question of the gate (never, without one).
async fn next_question(asks: Option<&mut Asks>) -> Question {
    match asks {
        Some(asks) => match asks.questions.recv().await {
            Some(q) => q,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
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
async fn forward<W: Write>(
    ev: &RunEvent,
    pi: &mut PiStream<W>,
    mapper: &mut EventMapper,
    cancel: &CancellationToken,
) {
    // Room first: pi not reading holds this relay here, while the runtime
    // goes on with the turn (its abort, its watchdog).
    pi.room().await;
    if matches!(ev, RunEvent::Aborted) {
        // Promptly: agy's tree is still being taken down.
        pi.fail(true, "Operation aborted");
    }
    // An edit's snapshot and diff read files and may ask git: on a
    // blocking thread, with the mapper's view of the files moved there and
    // back. (A work that panicked leaves the view empty: the next diffs
    // start from what is on disk then.)
    if let Some(work) = mapper.disk_work(ev) {
        if let Ok(done) = tokio::task::spawn_blocking(move || work.run()).await {
            mapper.disk_done(done);
        }
    }
    // Off the runtime's workers where the runtime allows it: an event's
    // lines past `pipe::MAX_PENDING` still wait for pi to read them.
    crate::process::blocking::in_place(|| mapper.map(ev, pi));
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
                    Some(ev) => { forward(&ev, pi, mapper, cancel).await; continue; }
                    None => return,
                },
                Some(call) = t.calls.recv() => Some(call),
                q = next_question(t.asks.as_mut()) => {
                    for line in t.gate_lines(GateInput::Question(Box::new(q)), mapper, pi) {
                        pi.thinking(&line);
                    }
                    continue;
                }
                // Read at once, never queued for a later call (item 14).
                ctl = t.control.recv(), if t.ended.is_none() => {
                    t.between_calls(ctl.unwrap_or(Control::Closed), pi, mapper);
                    continue;
                }
            },
        };
        let Some(first) = call else {
            match events.recv().await {
                Some(ev) => forward(&ev, pi, mapper, cancel).await,
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
                Some(ev) => forward(&ev, pi, mapper, cancel).await,
                None => open = false,
            },
            Some(call) = tools.calls.recv() => {
                batch.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                parked.park(call);
            }
            q = next_question(tools.asks.as_mut()) => {
                for line in tools.gate_lines(GateInput::Question(Box::new(q)), mapper, pi) {
                    pi.thinking(&line);
                }
            }
            _ = &mut window => break,
        }
    }
    pi.room().await;
    pi.tool_use(&batch);
    let mut held = Vec::new();
    let mut notes = Vec::new();
    let waited = if open {
        let mut waiting = Waiting {
            held: &mut held,
            notes: &mut notes,
            mapper,
        };
        wait_for_results(&mut parked, tools, events, &mut waiting, pi, cancel).await
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
        forward(&ev, pi, mapper, cancel).await;
    }
    open && !ended
}

/// What a wait for pi's results keeps for the next message: agy's events
/// (`None` marks the end of them) and the lines to say first.
struct Waiting<'a> {
    held: &'a mut Vec<Option<RunEvent>>,
    notes: &'a mut Vec<String>,
    mapper: &'a mut EventMapper,
}

/// Wait until every parked call is answered or the turn ends for pi.
/// Runner events are held; the gate's questions are still asked (their
/// lines wait with the notes: pi's message is ended meanwhile).
async fn wait_for_results<W: Write>(
    parked: &mut Parked,
    tools: &mut ToolLines,
    events: &mut mpsc::Receiver<RunEvent>,
    waiting: &mut Waiting<'_>,
    pi: &mut PiStream<W>,
    cancel: &CancellationToken,
) -> Waited {
    // pi will not continue: an abort for pi, an error result for agy.
    let end = |parked: &mut Parked, cancel: &CancellationToken, why: String| {
        parked.release_all(&why);
        cancel.cancel();
        Waited::Ended(true, format!("agy-bridge: {why}"))
    };
    loop {
        tokio::select! {
            // pi's lines first: stdin's end also cancels the turn, and the
            // call must hear why (pi is gone), not just that it was aborted.
            biased;
            ctl = next_control(&mut tools.ended, &mut tools.control) => match ctl {
                Control::ToolResult { id, outcome } => tools.take_result(parked, id, outcome, waiting.notes),
                Control::Permission(a) => {
                    let lines = tools.gate_lines(GateInput::Answer(a), waiting.mapper, pi);
                    waiting.notes.extend(lines);
                }
                Control::Unreadable { why } => waiting.notes.push(note(&why)),
                Control::Release { reason } => return end(parked, cancel, reason),
                Control::Closed => {
                    return end(parked, cancel, "pi ended the session without a result for agy's tool call".into())
                }
            },
            q = next_question(tools.asks.as_mut()) => {
                let lines = tools.gate_lines(GateInput::Question(Box::new(q)), waiting.mapper, pi);
                waiting.notes.extend(lines);
            }
            ev = events.recv() => {
                let why = match &ev {
                    Some(RunEvent::TimedOut) => Some("the turn timed out while pi was running agy's tool call"),
                    Some(RunEvent::Aborted) => Some("the turn was aborted while pi was running agy's tool call"),
                    None => Some("agy's turn ended while pi was running its tool call"),
                    _ => None,
                };
                waiting.held.push(ev);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn why(line: &str) -> String {
        match Control::parse(line) {
            Some(Control::Unreadable { why }) => why,
            other => panic!("{line}: {other:?}"),
        }
    }

    /// A line that is no control line is never silently dropped: pi hears
    /// what was wrong with it.
    #[test]
    fn lines_that_are_no_control_line_say_why() {
        assert!(why("{not json").contains("not JSON"));
        assert!(why(r#"{"type":"tool_result","content":[]}"#).contains("without a toolCallId"));
        assert!(why(r#"{"type":"tool_reslut"}"#).contains("unknown type \"tool_reslut\""));
        assert!(why(r#"{"toolCallId":"a"}"#).contains("without a \"type\""));
        assert!(why("[1]").ends_with("agy-bridge ignored the line"));
        assert_eq!(Control::parse("  "), None);
        assert!(matches!(
            Control::parse(r#"{"type":"tool_result","toolCallId":"a","content":"ok"}"#),
            Some(Control::ToolResult { id, outcome: Ok(_) }) if id == "a"
        ));
    }

    /// pi's steering messages on a result come after its content, each
    /// message's blocks (a string as text, an image as an image) after one
    /// line saying what they are; a result without them is unchanged.
    #[test]
    fn steering_messages_follow_the_result() {
        let line = r#"{"type":"tool_result","toolCallId":"a","content":[{"type":"text","text":"42"}],"isError":false,"steer":["stop after this",[{"type":"text","text":"and use metres"},{"type":"image","data":"eA==","mimeType":"image/png"}]]}"#;
        let Some(Control::ToolResult { outcome: Ok(o), .. }) = Control::parse(line) else {
            panic!("{line}");
        };
        let texts: Vec<&str> = o
            .content
            .iter()
            .map(|b| b["text"].as_str().unwrap_or("<image>"))
            .collect();
        assert_eq!(
            texts,
            [
                "42",
                super::super::park::STEER_HEAD,
                "stop after this",
                "and use metres",
                "<image>"
            ]
        );
        assert_eq!(o.content[4]["mimeType"], "image/png");
        assert!(!o.is_error);
        let plain = r#"{"type":"tool_result","toolCallId":"a","content":"42","steer":[]}"#;
        let Some(Control::ToolResult { outcome: Ok(o), .. }) = Control::parse(plain) else {
            panic!("{plain}");
        };
        assert_eq!(o.content, [serde_json::json!({"type":"text","text":"42"})]);
    }
}
