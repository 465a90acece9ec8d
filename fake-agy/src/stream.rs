//! agy's stream-json for a replay: the `init` line, one `step_update` per
//! step state change of the replayed root conversation, and the numbers the
//! final `result` needs (answer, usage, turns, duration, counted over the
//! whole conversation as agy counts them).
//!
//! Everything is derived from the committed step rows, decoded with the
//! library's decoder, so the stream and the database of one replay can never
//! disagree; every line is printed through `agy_format::stream_json`, the
//! types the bridge parses. The one exception is a tool error's text that a
//! recording carries for the stream only (`stream_error`, see
//! recordings/README.md). The shapes follow real agy output, 1.1.8 to 1.3.1
//! (docs/agy-format.md, "stream-json").

use agy_format::steps::{Body, Step, StepStatus, StepType};
use agy_format::stream_json::{Init, StepUpdate, ToolError, ToolInfo, Usage};
use std::collections::BTreeMap;

/// The tools agy 1.2.17 announces in its `init` line, in its order.
pub const TOOLS: &[&str] = &[
    "ask_custom_permission",
    "ask_permission",
    "ask_question",
    "browser_click_element",
    "browser_drag_pixel_to_pixel",
    "browser_get_dom",
    "browser_get_network_request",
    "browser_input",
    "browser_list_network_requests",
    "browser_mouse_down",
    "browser_mouse_up",
    "browser_move_mouse",
    "browser_press_key",
    "browser_refresh_page",
    "browser_resize_window",
    "browser_scroll",
    "browser_scroll_dom",
    "browser_select_option",
    "browser_subagent",
    "call_mcp_tool",
    "capture_browser_console_logs",
    "capture_browser_screenshot",
    "click_browser_pixel",
    "command_status",
    "define_subagent",
    "delete_knowledge",
    "execute_browser_javascript",
    "find_by_name",
    "finish",
    "generate_image",
    "grep_search",
    "invoke_subagent",
    "list_browser_pages",
    "list_dir",
    "list_permissions",
    "list_plugin_accounts",
    "list_resources",
    "manage_inbox",
    "manage_subagents",
    "manage_task",
    "multi_replace_file_content",
    "notebook_edit",
    "notebook_execution",
    "open_browser_url",
    "read_browser_page",
    "read_resource",
    "read_url_content",
    "replace_file_content",
    "run_command",
    "run_workflow",
    "schedule",
    "search_marketplace",
    "search_web",
    "sed_file",
    "send_command_input",
    "send_message",
    "view_file",
    "wait",
    "wait_5_seconds",
    "write_to_file",
];

/// The `init` object: `model` from `--model` or the recording, the process
/// cwd, `--agent` as given, and the permission mode the flags give (the
/// other one under `FAKE_AGY_FAULT=permission-mode`).
pub fn init(model: Option<String>, agent: Option<String>, skip_permissions: bool) -> Init {
    Init {
        model,
        cwd: std::env::current_dir()
            .ok()
            .map(|p| p.display().to_string()),
        agent,
        tools: TOOLS.iter().map(|t| t.to_string()).collect(),
        permission_mode: Some(crate::fault::permission_mode(skip_permissions).into()),
        extra: Default::default(),
    }
}

/// How an agy version sends answer text: 1.2.17 (and the corpus's 1.2.8)
/// as one `text_delta` on the DONE update; 1.1.x, 1.2.7 and 1.3.x as
/// `text_delta`s on ACTIVE updates while the text grows, the rest on DONE.
/// 1.2.7 streams in every public capture of it (simv/crt); where between
/// 1.2.7 and 1.2.17 that changed is unknown, so 1.2.8 keeps the corpus's
/// shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextMode {
    AtDone,
    Streamed,
}

impl TextMode {
    pub fn for_version(v: (u32, u32, u32)) -> TextMode {
        if ((1, 2, 8)..(1, 3, 0)).contains(&v) {
            TextMode::AtDone
        } else {
            TextMode::Streamed
        }
    }
}

/// agy's `step_type` word for a step, by its raw type number.
pub fn step_kind(step: &Step) -> &'static str {
    match step.step_type.raw() {
        14 => "user_input",
        15 => "agent_response",
        23 => "checkpoint",
        101 => "system_message",
        17 => "error_message",
        5 | 7 | 8 | 9 | 21 | 31 | 33 | 38 | 127 | 132 | 138 => "tool",
        _ if step.tool_call().is_some() => "tool",
        _ => "unknown",
    }
}

/// agy's `state` for a step status; `None` for statuses it does not report.
fn state_of(status: StepStatus) -> Option<&'static str> {
    match status {
        StepStatus::Done => Some("DONE"),
        StepStatus::Error
        | StepStatus::Canceled
        | StepStatus::Interrupted
        | StepStatus::Invalid => Some("ERROR"),
        StepStatus::Pending
        | StepStatus::Running
        | StepStatus::Generating
        | StepStatus::Waiting
        | StepStatus::Queued => Some("ACTIVE"),
        _ => None,
    }
}

/// The tool's name: from its call (metadata 5.4), else from its step type.
pub fn tool_name(step: &Step) -> String {
    step.tool_call()
        .map(|c| c.name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| step.step_type.tool_name().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// What agy prints as a finished tool's `output`: a command's output, a
/// viewed file as "N lines, B bytes", a generic tool's result; nothing for
/// web tools (as real 1.2.17 output shows).
fn tool_output(name: &str, body: Option<&Body>) -> Option<String> {
    let raw = match body? {
        Body::RunCommand(r) => Some(r.output.clone()),
        Body::ViewFile(v) => Some(v.content.clone()),
        Body::Generic(g) => g.result.clone(),
        Body::Grep(g) => Some(g.output.clone()),
        _ => None,
    }?;
    match name {
        "view_file" => Some(format!(
            "{} lines, {} bytes",
            raw.lines().count(),
            raw.len()
        )),
        "search_web" | "read_url_content" => None,
        _ => Some(raw),
    }
}

/// The `type` agy gives every tool error it prints (1.1.18, 1.2.7).
const TOOL_ERROR: &str = "TOOL_ERROR";

/// `tool_info` of a tool step in `state`. A step that ended in ERROR
/// carries `error {type, message}`: the message is the row's own error
/// text, else what the recording says agy printed (`stream_error`).
fn tool_info(step: &Step, state: &str, stream_error: Option<&str>) -> ToolInfo {
    let name = tool_name(step);
    let parameters = step
        .tool_call()
        .and_then(|c| serde_json::from_str(&c.arguments).ok());
    let output = match state {
        "DONE" => tool_output(&name, step.body.as_ref()),
        _ => None,
    };
    let error = (state == "ERROR").then(|| {
        let from_row = step
            .errors
            .iter()
            .map(|e| e.message.as_str())
            .find(|m| !m.is_empty());
        ToolError {
            kind: TOOL_ERROR.into(),
            message: from_row.or(stream_error).unwrap_or_default().to_string(),
            ..ToolError::default()
        }
    });
    ToolInfo {
        name,
        parameters,
        output,
        error,
        extra: Default::default(),
    }
}

/// Per-call usage from a planner step's metadata 9 (total = input + output,
/// as agy counts it).
fn call_usage(step: &Step) -> Option<Usage> {
    let u = step.metadata.as_ref()?.usage.as_ref()?;
    Some(Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        thinking_tokens: u.thinking_tokens,
        cache_read_tokens: u.cache_read_tokens,
        total_tokens: u.input_tokens + u.output_tokens,
    })
}

/// Whether agy reports a finished step of this kind with the usage of a
/// model call: an answer, or a checkpoint's small side call (1.1.x).
fn reports_usage(kind: &str) -> bool {
    matches!(kind, "agent_response" | "checkpoint")
}

/// What a conversation's earlier turns add to a `result`: agy's `usage`,
/// `num_turns` and `duration_seconds` count the whole conversation, not the
/// turn (docs/agy-format.md, "Resume"). Read from the steps the database
/// holds before this run, so a conversation resumed again and again
/// accumulates as agy's does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Earlier {
    /// The model calls of the earlier turns, as their steps reported them.
    pub usage: Usage,
    /// The user turns: one per user_input step.
    pub turns: u64,
    /// The earlier turns' durations, in nanoseconds: each from its prompt's
    /// `created_at` to the last time a step of that turn records (metadata
    /// 1 and 8). agy counts from the conversation's creation; the idle time
    /// between two runs is in no database, so fake-agy leaves it out.
    /// Integers, so the printed sum is as short as agy's own numbers.
    pub nanos: u64,
}

impl Earlier {
    pub fn from_steps(steps: &[Step]) -> Earlier {
        let mut e = Earlier::default();
        // (start, end) of the turn being read.
        let mut turn: Option<(u64, u64)> = None;
        for step in steps {
            let times = step_times(step);
            if step.step_type == StepType::UserInput {
                if let Some((start, end)) = turn.take() {
                    e.nanos = e.nanos.saturating_add(end - start);
                }
                e.turns += 1;
                turn = times.map(|(start, _)| (start, start));
            } else if let (Some((_, end)), Some((_, t))) = (turn.as_mut(), times) {
                *end = (*end).max(t);
            }
            if reports_usage(step_kind(step)) && step.is_finished() {
                if let Some(u) = call_usage(step) {
                    e.usage += &u;
                }
            }
        }
        if let Some((start, end)) = turn {
            e.nanos = e.nanos.saturating_add(end - start);
        }
        e
    }
}

/// A step's `created_at` and its latest recorded time (`completed_at`, else
/// `created_at`), in nanoseconds since the epoch.
fn step_times(step: &Step) -> Option<(u64, u64)> {
    let m = step.metadata.as_ref()?;
    let nanos = |(s, n): (u64, u64)| s.saturating_mul(1_000_000_000).saturating_add(n);
    let created = nanos(m.created_at?);
    let last = m.completed_at.map(nanos).unwrap_or(created).max(created);
    Some((created, last))
}

/// What has been reported about one step.
#[derive(Debug)]
struct Seen {
    state: Option<&'static str>,
    /// Answer text already sent as `text_delta`s.
    sent: String,
    /// Recorded time the step's work began.
    start_ms: u64,
}

/// Turns successive views of the root conversation's steps into
/// `step_update`s, and keeps what the `result` needs.
#[derive(Debug)]
pub struct Emitter {
    conversation_id: String,
    text_mode: TextMode,
    seen: BTreeMap<i64, Seen>,
    /// Recorded time of the last commit observed.
    last_ms: u64,
    usage: Usage,
    /// Answer text by agent_response idx.
    answers: BTreeMap<i64, String>,
    /// The conversation's turns before this run.
    earlier: Earlier,
}

impl Emitter {
    pub fn new(conversation_id: &str, text_mode: TextMode) -> Emitter {
        Emitter {
            conversation_id: conversation_id.to_string(),
            text_mode,
            seen: BTreeMap::new(),
            last_ms: 0,
            usage: Usage::default(),
            answers: BTreeMap::new(),
            earlier: Earlier::default(),
        }
    }

    /// The conversation's turns before this run (what the database held).
    pub fn set_earlier(&mut self, earlier: Earlier) {
        self.earlier = earlier;
    }

    /// `result.usage`: the earlier turns' model calls and this turn's.
    pub fn conversation_usage(&self) -> Usage {
        if crate::fault::is("usage-per-turn") {
            return self.usage;
        }
        let mut u = self.earlier.usage;
        u += &self.usage;
        u
    }

    /// `result.num_turns`: the earlier user turns and this one.
    pub fn num_turns(&self) -> u64 {
        self.earlier.turns + 1
    }

    /// `result.duration_seconds`: the earlier turns' and this run's.
    pub fn conversation_seconds(&self) -> f64 {
        let nanos = (self.earlier.nanos).saturating_add(self.last_ms.saturating_mul(1_000_000));
        nanos as f64 / 1e9
    }

    /// A commit at recorded time `t_ms` has been fully observed.
    pub fn commit_done(&mut self, t_ms: u64) {
        self.last_ms = self.last_ms.max(t_ms);
    }

    /// Whether any agent response was seen.
    pub fn saw_answer(&self) -> bool {
        !self.answers.is_empty()
    }

    /// The final answer (or, mid-turn, the partial one): the text of the
    /// last agent response.
    pub fn response(&self) -> String {
        self.answers
            .values()
            .next_back()
            .cloned()
            .unwrap_or_default()
    }

    /// A new view of one step, written at recorded time `t_ms`: the update
    /// to print, if agy would print one. `stream_error` is the recording's
    /// stream-only error text for this write (see [`tool_info`]).
    pub fn observe(
        &mut self,
        step: &Step,
        t_ms: u64,
        stream_error: Option<&str>,
    ) -> Option<StepUpdate> {
        let kind = step_kind(step);
        let state = state_of(step.status)?;
        let text = match &step.body {
            Some(Body::Planner(p)) if kind == "agent_response" => p.text.clone(),
            _ => String::new(),
        };
        if kind == "agent_response" {
            self.answers.insert(step.idx, text.clone());
        }
        // A model call begins when the step before it ends; a tool when
        // its step appears.
        let start_ms = if kind == "tool" { t_ms } else { self.last_ms };
        let seen = self.seen.entry(step.idx).or_insert(Seen {
            state: None,
            sent: String::new(),
            start_ms,
        });
        let changed = seen.state != Some(state);
        let terminal = state != "ACTIVE";
        seen.state = Some(state);
        let delta =
            if kind == "agent_response" && (terminal || self.text_mode == TextMode::Streamed) {
                text_delta(&mut seen.sent, &text)
            } else {
                None
            };
        let report = match kind {
            "agent_response" => (changed && terminal) || delta.is_some(),
            _ => changed,
        };
        if !report {
            return None;
        }
        let timed = terminal && matches!(kind, "agent_response" | "tool" | "checkpoint");
        let duration = timed.then(|| t_ms.saturating_sub(seen.start_ms) as f64 / 1000.0);
        let usage = if reports_usage(kind) && terminal && changed {
            call_usage(step)
        } else {
            None
        };
        if let Some(u) = &usage {
            self.usage += u;
        }
        let tool = kind == "tool";
        Some(StepUpdate {
            conversation_id: self.conversation_id.clone(),
            step_index: step.idx,
            state: state.into(),
            step_type: kind.into(),
            tool_name: tool.then(|| tool_name(step)),
            text_delta: delta,
            duration_seconds: duration,
            tool_info: tool.then(|| tool_info(step, state, stream_error)),
            usage,
            extra: Default::default(),
        })
    }
}

/// The text not yet sent, and remember it as sent. A rewrite that does not
/// extend what was sent is sent whole again.
fn text_delta(sent: &mut String, text: &str) -> Option<String> {
    let new = match text.strip_prefix(sent.as_str()) {
        Some(rest) => rest.to_string(),
        None => text.to_string(),
    };
    *sent = text.to_string();
    (!new.is_empty()).then_some(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agy_format::steps::{PlannerResponse, StepType, ToolCall};

    fn planner(idx: i64, status: StepStatus, text: &str) -> Step {
        Step::new(idx, StepType::PlannerResponse, status).with_body(Body::Planner(
            PlannerResponse {
                text: text.into(),
                ..PlannerResponse::default()
            },
        ))
    }

    #[test]
    fn text_comes_whole_at_done_in_1_2_and_streams_in_1_3() {
        for (mode, want) in [
            (TextMode::AtDone, vec![("DONE", Some("ab"))]),
            (
                TextMode::Streamed,
                vec![("ACTIVE", Some("a")), ("DONE", Some("b"))],
            ),
        ] {
            let mut e = Emitter::new("c", mode);
            let mut got = Vec::new();
            for (t, step) in [
                (10, planner(1, StepStatus::Generating, "")),
                (20, planner(1, StepStatus::Generating, "a")),
                (30, planner(1, StepStatus::Done, "ab")),
            ] {
                if let Some(u) = e.observe(&step, t, None) {
                    got.push((u.state.clone(), u.text_delta.clone()));
                }
                e.commit_done(t);
            }
            let want: Vec<_> = want
                .into_iter()
                .map(|(s, d)| (s.to_string(), d.map(str::to_string)))
                .collect();
            assert_eq!(got, want, "{mode:?}");
            assert_eq!(e.response(), "ab");
        }
    }

    #[test]
    fn tool_steps_carry_name_parameters_and_output() {
        let mut e = Emitter::new("c", TextMode::AtDone);
        let call = ToolCall {
            id: "x".into(),
            name: "run_command".into(),
            arguments: r#"{"CommandLine":"ls"}"#.into(),
        };
        let running =
            Step::new(2, StepType::GenericTool, StepStatus::Running).with_tool_call(call.clone());
        let u = e.observe(&running, 9, None).expect("tool update");
        assert_eq!((u.state.as_str(), u.step_type.as_str()), ("ACTIVE", "tool"));
        assert_eq!(u.tool_name.as_deref(), Some("run_command"));
        let info = u.tool_info.expect("tool_info");
        assert_eq!(
            info.parameters,
            Some(serde_json::json!({"CommandLine": "ls"}))
        );
        assert_eq!(info.output, None);
        assert_eq!(e.observe(&running, 10, None), None, "no change, no update");
        let done = running
            .clone()
            .with_body(Body::Generic(agy_format::steps::GenericTool {
                args: vec![("CommandLine".into(), "ls".into())],
                result: Some("a\r\n".into()),
            }));
        let done = Step {
            status: StepStatus::Done,
            ..done
        };
        let u = e.observe(&done, 40, None).expect("done update");
        assert_eq!(u.duration_seconds, Some(0.031), "from ACTIVE to DONE");
        assert_eq!(u.tool_info.and_then(|i| i.output).as_deref(), Some("a\r\n"));
    }

    #[test]
    fn version_picks_the_text_mode() {
        assert_eq!(TextMode::for_version((1, 2, 17)), TextMode::AtDone);
        assert_eq!(TextMode::for_version((1, 2, 8)), TextMode::AtDone);
        assert_eq!(TextMode::for_version((1, 2, 7)), TextMode::Streamed);
        assert_eq!(TextMode::for_version((1, 3, 1)), TextMode::Streamed);
        assert_eq!(TextMode::for_version((1, 1, 18)), TextMode::Streamed);
    }

    /// A step with `created_at` at `secs` and, for a model call, usage.
    fn timed(step: Step, secs: u64, input: u64) -> Step {
        let mut step = step;
        let m = step.metadata.get_or_insert_with(Default::default);
        m.created_at = Some((secs, 0));
        if input > 0 {
            m.usage = Some(agy_format::steps::Usage {
                input_tokens: input,
                output_tokens: 1,
                ..Default::default()
            });
        }
        step
    }

    #[test]
    fn earlier_turns_count_prompts_calls_and_each_turns_span() {
        let steps = [
            timed(Step::new(0, StepType::UserInput, StepStatus::Done), 100, 0),
            timed(planner(1, StepStatus::Done, "a"), 102, 10),
            timed(Step::new(2, StepType::Checkpoint, StepStatus::Done), 103, 5),
            timed(Step::new(3, StepType::UserInput, StepStatus::Done), 500, 0),
            // Unfinished: its usage is not (yet) a call's.
            timed(planner(4, StepStatus::Generating, ""), 501, 7),
        ];
        let e = Earlier::from_steps(&steps);
        assert_eq!(e.turns, 2);
        assert_eq!(e.usage.input_tokens, 15);
        assert_eq!(e.usage.total_tokens, 17);
        // 3 s, then 1 s: the idle time between the turns is not counted.
        assert_eq!(e.nanos, 4_000_000_000);
        let mut em = Emitter::new("c", TextMode::AtDone);
        em.set_earlier(e);
        assert_eq!(em.num_turns(), 3);
        assert_eq!(em.conversation_usage().input_tokens, 15);
        em.commit_done(1_500);
        assert_eq!(em.conversation_seconds(), 5.5);
    }

    #[test]
    fn a_checkpoint_reports_its_call_and_a_tool_error_its_text() {
        let mut e = Emitter::new("c", TextMode::AtDone);
        let cp = timed(Step::new(2, StepType::Checkpoint, StepStatus::Done), 1, 220);
        let u = e.observe(&cp, 460, None).expect("checkpoint update");
        assert_eq!(u.step_type, "checkpoint");
        assert_eq!(u.usage.map(|u| u.input_tokens), Some(220));
        assert_eq!(u.duration_seconds, Some(0.46));
        assert_eq!(e.conversation_usage().total_tokens, 221);
        let call = ToolCall {
            id: "w".into(),
            name: "write_to_file".into(),
            arguments: r#"{"TargetFile":"/x"}"#.into(),
        };
        let failed = Step::new(3, StepType::GenericTool, StepStatus::Error).with_tool_call(call);
        let u = e
            .observe(&failed, 500, Some("denied"))
            .expect("error update");
        assert_eq!(u.state, "ERROR");
        let error = u.tool_info.and_then(|i| i.error).expect("error");
        assert_eq!(
            (error.kind.as_str(), error.message.as_str()),
            ("TOOL_ERROR", "denied")
        );
        // The row's own text wins over the recording's.
        let mut own = failed.clone();
        own.idx = 4;
        own.errors.push(agy_format::steps::ErrorDetails {
            message: "from the row".into(),
            detail: None,
            stack: None,
        });
        let u = e.observe(&own, 510, Some("denied")).expect("error update");
        let error = u.tool_info.and_then(|i| i.error).expect("error");
        assert_eq!(error.message, "from the row");
    }
}
