//! agy's `--output-format stream-json` lines: one typed reader and one writer.
//!
//! agy (1.1.8 and later) prints one JSON object per line, keyed by `event`:
//! `init` (the conversation id, at top level), `step_update` per step state
//! change (tool names and parameters, `text_delta`s, per-call usage) and a
//! final `result` (status, response, error, denied actions, usage), or, for a
//! prompt that is one of agy's slash commands, `command_result`. See
//! docs/agy-format.md, "stream-json". The runner reads these lines for the
//! binding, usage, the final status and as the fallback text source;
//! fake-agy writes them with the same types, so the two can never disagree on
//! the shape. Every unknown event and field is kept (`extra`) and counted,
//! never fatal: a newer agy must degrade to "an unknown field", not to a
//! silent failure.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Token counts as agy prints them. proto3-style: a zero may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub thinking_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

/// Turn totals: the sum of each model call's counts.
impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, u: &Usage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.thinking_tokens += u.thinking_tokens;
        self.cache_read_tokens += u.cache_read_tokens;
        self.total_tokens += u.total_tokens;
    }
}

/// `init.permission_mode` of an agy run with `--dangerously-skip-permissions`:
/// it runs every tool without asking (verified, agy 1.2.17).
pub const ALWAYS_PROCEED: &str = "always-proceed";
/// `init.permission_mode` without that flag: print mode cannot ask, so a
/// tool that needs permission is denied (verified, agy 1.1.8 and 1.2.17).
pub const REQUEST_REVIEW: &str = "request-review";

/// The permission mode agy reports for a command line with or without
/// `--dangerously-skip-permissions`.
pub fn permission_mode_for(skip_permissions: bool) -> &'static str {
    if skip_permissions {
        ALWAYS_PROCEED
    } else {
        REQUEST_REVIEW
    }
}

/// The `init` object (the conversation id is beside it, at top level).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Init {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `--agent NAME`, echoed even when agy has no such agent (1.1.8, 1.1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool step's failure as agy reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub message: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool_info` of a tool step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One `step_update`: a step changed state. Field order is agy's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepUpdate {
    #[serde(default)]
    pub conversation_id: String,
    #[serde(default)]
    pub step_index: i64,
    /// `ACTIVE`, `DONE` or `ERROR`.
    #[serde(default)]
    pub state: String,
    /// `user_input`, `agent_response`, `tool`, `checkpoint`,
    /// `system_message`, `error_message` or `unknown`.
    #[serde(default)]
    pub step_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_info: Option<ToolInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An action agy auto-denied because print mode cannot ask.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedAction {
    /// The permission kind (`command`, `file`, ...).
    #[serde(default)]
    pub action: String,
    /// agy's name for the tool (`RunCommand`).
    #[serde(default)]
    pub display_name: String,
}

/// What agy's `/model` slash command reports: the model in use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelChoice {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A slash command's `data`: typed where the shape is known (so it prints
/// with agy's key order), else kept as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CommandData {
    /// `/model` (agy 1.2.7): `{id, label, effort, is_default}`.
    Model(ModelChoice),
    /// Any other command's data (`/usage`'s buckets, `/hooks`' list, ...).
    Other(Value),
}

/// A slash command agy ran instead of a model turn (a `-p` prompt starting
/// with `/`): the body of `command_result` and the result's `command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlashCommand {
    /// The command without its slash (`model`).
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<CommandData>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SlashCommand {
    /// Names of the fields this build does not know, under `prefix`.
    fn unknown_fields(&self, prefix: &str) -> Vec<String> {
        let mut v: Vec<String> = self.extra.keys().map(|k| format!("{prefix}.{k}")).collect();
        if let Some(CommandData::Model(m)) = &self.data {
            v.extend(m.extra.keys().map(|k| format!("{prefix}.data.{k}")));
        }
        v
    }
}

/// The final `result`. Field order is agy's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnResult {
    /// `""` when agy failed before creating a conversation.
    #[serde(default)]
    pub conversation_id: String,
    /// `SUCCESS`, `ERROR` or `CANCELED`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub response: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub duration_seconds: f64,
    #[serde(default)]
    pub num_turns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_actions: Vec<DeniedAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
    /// The slash command the prompt ran instead of a turn (with
    /// `conversation_id` `""` and `num_turns` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<SlashCommand>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TurnResult {
    pub fn is_success(&self) -> bool {
        self.status == "SUCCESS"
    }
}

/// One line of agy's stream-json output.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Init {
        conversation_id: String,
        init: Init,
    },
    StepUpdate(StepUpdate),
    Result(TurnResult),
    /// `{"event":"command_result","command":{...}}`: a slash command's
    /// output (its body sits under `command`, not under the event's name).
    CommandResult(SlashCommand),
    /// Valid JSON with an event this build does not know (kept whole).
    UnknownEvent {
        event: String,
        value: Value,
    },
    /// Not a JSON object (a log line, a partial line): kept as text.
    NotJson(String),
}

impl Line {
    /// Read one line. Never fails: what does not fit is `UnknownEvent` or
    /// `NotJson`, for the caller to count.
    pub fn parse(line: &str) -> Line {
        let mut value: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Line::NotJson(line.to_string()),
        };
        let event = value
            .get("event")
            .and_then(Value::as_str)
            .map(str::to_string);
        // Bodies are moved out of the parsed value, never copied: a result
        // line can repeat a whole (large) answer.
        let parsed = match event.as_deref() {
            Some("init") => parse_init(&mut value),
            Some("step_update") => body(&mut value, "step_update").map(Line::StepUpdate),
            Some("result") => body(&mut value, "result").map(Line::Result),
            Some("command_result") => body(&mut value, "command").map(Line::CommandResult),
            // `--output-format json` prints the bare result object.
            None if value.get("status").is_some() => {
                serde_json::from_value(value.take()).ok().map(Line::Result)
            }
            _ => None,
        };
        parsed.unwrap_or_else(|| Line::UnknownEvent {
            event: event.unwrap_or_default(),
            value,
        })
    }

    /// The line as agy prints it (no trailing newline), keys in agy's
    /// order: `event` first, then the body as its struct declares it.
    pub fn to_json(&self) -> String {
        let ser = |v: &dyn erased::Ser| v.json();
        match self {
            Line::Init {
                conversation_id,
                init,
            } => format!(
                "{{\"event\":\"init\",\"conversation_id\":{},\"init\":{}}}",
                ser(conversation_id),
                ser(init)
            ),
            Line::StepUpdate(u) => {
                format!("{{\"event\":\"step_update\",\"step_update\":{}}}", ser(u))
            }
            Line::Result(r) => format!("{{\"event\":\"result\",\"result\":{}}}", ser(r)),
            Line::CommandResult(c) => {
                format!("{{\"event\":\"command_result\",\"command\":{}}}", ser(c))
            }
            Line::UnknownEvent { value, .. } => ser(value),
            Line::NotJson(text) => text.clone(),
        }
    }

    /// Names of the fields this build does not know, for the unknown-field
    /// counter.
    pub fn unknown_fields(&self) -> Vec<String> {
        let keys = |m: &Map<String, Value>, prefix: &str| -> Vec<String> {
            m.keys().map(|k| format!("{prefix}.{k}")).collect()
        };
        match self {
            Line::Init { init, .. } => keys(&init.extra, "init"),
            Line::StepUpdate(u) => {
                let mut v = keys(&u.extra, "step_update");
                if let Some(t) = &u.tool_info {
                    v.extend(keys(&t.extra, "step_update.tool_info"));
                }
                v
            }
            Line::Result(r) => {
                let mut v = keys(&r.extra, "result");
                if let Some(c) = &r.command {
                    v.extend(c.unknown_fields("result.command"));
                }
                v
            }
            Line::CommandResult(c) => c.unknown_fields("command"),
            Line::UnknownEvent { .. } | Line::NotJson(_) => Vec::new(),
        }
    }
}

/// Blank, in place, the `response` string of a `result` line: for a reader
/// that already has the answer (from the database) and should not hold a
/// long one a second time. Returns whether it did; anything it cannot
/// read is left as it is.
pub fn blank_response(line: &mut Vec<u8>) -> bool {
    const KEY: &[u8] = b"\"response\":\"";
    if !line.starts_with(b"{\"event\":\"result\"") {
        return false;
    }
    let Some(at) = line.windows(KEY.len()).position(|w| w == KEY) else {
        return false;
    };
    let start = at + KEY.len();
    // The closing quote: the first one not escaped by a backslash.
    let mut i = start;
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => {
                line.drain(start..i);
                return true;
            }
            _ => i += 1,
        }
    }
    false
}

fn parse_init(value: &mut Value) -> Option<Line> {
    let conversation_id = value.get("conversation_id")?.as_str()?.to_string();
    let init = match value.get_mut("init") {
        Some(v) => serde_json::from_value(v.take()).ok()?,
        None => Init::default(),
    };
    Some(Line::Init {
        conversation_id,
        init,
    })
}

fn body<T: serde::de::DeserializeOwned>(value: &mut Value, key: &str) -> Option<T> {
    serde_json::from_value(value.get_mut(key)?.take()).ok()
}

mod erased {
    /// Serialise a body in its declared field order (a `Value` would sort
    /// the keys), escaping strings as Go's encoding/json does.
    pub(crate) trait Ser {
        fn json(&self) -> String;
    }

    impl<T: serde::Serialize + ?Sized> Ser for T {
        fn json(&self) -> String {
            let mut out = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
            match self.serialize(&mut ser) {
                Ok(()) => String::from_utf8(out).unwrap_or_default(),
                Err(_) => "{}".into(),
            }
        }
    }

    /// agy is written in Go, whose JSON encoder writes `&`, `<`, `>` and the
    /// two Unicode line separators as `\u` escapes.
    struct GoFormatter;

    impl serde_json::ser::Formatter for GoFormatter {
        fn write_string_fragment<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> std::io::Result<()> {
            let mut start = 0;
            for (i, c) in fragment.char_indices() {
                let escaped = match c {
                    '&' => "\\u0026",
                    '<' => "\\u003c",
                    '>' => "\\u003e",
                    '\u{2028}' => "\\u2028",
                    '\u{2029}' => "\\u2029",
                    _ => continue,
                };
                writer.write_all(&fragment.as_bytes()[start..i])?;
                writer.write_all(escaped.as_bytes())?;
                start = i + c.len_utf8();
            }
            writer.write_all(&fragment.as_bytes()[start..])
        }

        /// Go's float format: no `.0` on whole numbers, and a two-digit
        /// exponent outside [1e-6, 1e21).
        fn write_f64<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            value: f64,
        ) -> std::io::Result<()> {
            writer.write_all(go_float(value).as_bytes())
        }
    }

    pub(super) fn go_float(value: f64) -> String {
        let abs = value.abs();
        if value == 0.0 || (1e-6..1e21).contains(&abs) {
            if value.fract() == 0.0 {
                return format!("{value:.0}");
            }
            return value.to_string();
        }
        // Rust writes `1e-7`; Go writes `1e-07`.
        let s = format!("{value:e}");
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', e),
                };
                format!("{m}e{sign}{digits:0>2}")
            }
            None => s,
        }
    }
}

/// Counters for what the reader did not understand.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ParseStats {
    pub lines: u64,
    /// `init` lines read, each naming its conversation (an `init` without
    /// `conversation_id` is an unknown event, not one of these).
    pub inits: u64,
    pub unknown_events: u64,
    pub unknown_fields: u64,
    pub not_json: u64,
}

impl ParseStats {
    /// Count one parsed line.
    pub fn count(&mut self, line: &Line) {
        self.lines += 1;
        match line {
            Line::UnknownEvent { .. } => self.unknown_events += 1,
            Line::NotJson(_) => self.not_json += 1,
            _ => self.unknown_fields += line.unknown_fields().len() as u64,
        }
        if matches!(line, Line::Init { .. }) {
            self.inits += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines in the shape agy 1.2.17 prints (docs/agy-format.md, "stream-json"),
    // with our own values and a shortened tool list.
    const INIT: &str = r#"{"event":"init","conversation_id":"0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11","init":{"model":"gemini-3.8-flash-high","cwd":"/work","tools":["run_command","view_file"],"permission_mode":"request-review"}}"#;
    const TOOL_DONE: &str = r#"{"event":"step_update","step_update":{"conversation_id":"0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11","step_index":2,"state":"DONE","step_type":"tool","tool_name":"run_command","duration_seconds":0.5,"tool_info":{"name":"run_command","parameters":{"CommandLine":"ls"},"output":"a\r\n"}}}"#;
    const TEXT: &str = r#"{"event":"step_update","step_update":{"conversation_id":"0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11","step_index":3,"state":"DONE","step_type":"agent_response","text_delta":"done\n","duration_seconds":1.25,"usage":{"input_tokens":10,"output_tokens":4,"thinking_tokens":3,"cache_read_tokens":0,"total_tokens":14}}}"#;
    const RESULT: &str = r#"{"event":"result","result":{"conversation_id":"0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11","status":"SUCCESS","response":"","duration_seconds":2.5,"num_turns":1,"usage":{"input_tokens":10,"output_tokens":4,"thinking_tokens":3,"cache_read_tokens":0,"total_tokens":14},"denied_actions":[{"action":"command","display_name":"RunCommand"}]}}"#;
    // agy 1.2.7's `/model` (docs/agy-format.md, "Slash commands"), our values.
    const COMMAND: &str = r#"{"event":"command_result","command":{"name":"model","data":{"id":"gemini-3.8-flash-low","label":"Gemini 3.8 Flash (Low)","effort":"low","is_default":false}}}"#;
    const COMMAND_RESULT: &str = r#"{"event":"result","result":{"conversation_id":"","status":"SUCCESS","response":"gemini-3.8-flash-low\tGemini 3.8 Flash (Low)\n","duration_seconds":0,"num_turns":0,"usage":{"input_tokens":0,"output_tokens":0,"thinking_tokens":0,"cache_read_tokens":0,"total_tokens":0},"command":{"name":"model","data":{"id":"gemini-3.8-flash-low","label":"Gemini 3.8 Flash (Low)","effort":"low","is_default":false}}}}"#;
    const AGENT_INIT: &str = r#"{"event":"init","conversation_id":"0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11","init":{"cwd":"/work","agent":"reviewer","tools":["view_file"],"permission_mode":"request-review"}}"#;

    #[test]
    fn lines_round_trip_byte_for_byte() {
        for line in [
            INIT,
            TOOL_DONE,
            TEXT,
            RESULT,
            COMMAND,
            COMMAND_RESULT,
            AGENT_INIT,
        ] {
            let parsed = Line::parse(line);
            assert!(
                !matches!(parsed, Line::UnknownEvent { .. } | Line::NotJson(_)),
                "{line}"
            );
            assert_eq!(parsed.to_json(), line);
            assert!(parsed.unknown_fields().is_empty());
        }
    }

    #[test]
    fn floats_print_as_go_prints_them() {
        for (v, want) in [
            (0.0, "0"),
            (2.0, "2"),
            (2.6566104900000003, "2.6566104900000003"),
            (0.015946572, "0.015946572"),
            (1e-7, "1e-07"),
            (1.5e21, "1.5e+21"),
        ] {
            assert_eq!(erased::go_float(v), want);
        }
    }

    #[test]
    fn a_result_lines_response_can_be_blanked_in_place() {
        let mut line = RESULT
            .replace(r#""response":"""#, r#""response":"a \"quoted\" answer\\""#)
            .into_bytes();
        assert!(blank_response(&mut line));
        assert_eq!(String::from_utf8(line).expect("utf8"), RESULT);
        let mut init = INIT.as_bytes().to_vec();
        assert!(!blank_response(&mut init));
        assert_eq!(init, INIT.as_bytes());
    }

    #[test]
    fn a_slash_command_is_typed_and_other_data_kept() {
        let Line::CommandResult(c) = Line::parse(COMMAND) else {
            panic!("not a command_result");
        };
        assert_eq!(c.name, "model");
        let Some(CommandData::Model(m)) = &c.data else {
            panic!("not /model's data: {:?}", c.data);
        };
        assert_eq!(m.effort.as_deref(), Some("low"));
        let Line::Result(r) = Line::parse(COMMAND_RESULT) else {
            panic!("not a result");
        };
        assert_eq!(r.command, Some(c));
        let usage = r#"{"event":"command_result","command":{"name":"usage","data":{"groups":[]}}}"#;
        let parsed = Line::parse(usage);
        assert!(matches!(
            &parsed,
            Line::CommandResult(SlashCommand {
                data: Some(CommandData::Other(_)),
                ..
            })
        ));
        assert_eq!(parsed.to_json(), usage);
    }

    #[test]
    fn init_id_is_top_level() {
        let Line::Init {
            conversation_id,
            init,
        } = Line::parse(INIT)
        else {
            panic!("not init");
        };
        assert_eq!(conversation_id, "0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11");
        assert_eq!(init.permission_mode.as_deref(), Some("request-review"));
    }

    #[test]
    fn result_carries_denials_and_usage() {
        let Line::Result(r) = Line::parse(RESULT) else {
            panic!("not a result");
        };
        assert!(r.is_success());
        assert_eq!(r.denied_actions[0].display_name, "RunCommand");
        assert_eq!(r.usage.map(|u| u.total_tokens), Some(14));
    }

    #[test]
    fn unknown_events_and_fields_are_counted_not_fatal() {
        let mut stats = ParseStats::default();
        for line in [
            INIT,
            // An init line without its conversation id is not an init.
            r#"{"event":"init","init":{"cwd":"/work"}}"#,
            r#"{"event":"heartbeat","heartbeat":{}}"#,
            "I0701 12:00:00 log line",
            r#"{"event":"step_update","step_update":{"step_index":1,"state":"ACTIVE","step_type":"agent_response","sparkle":true}}"#,
            // `--output-format json`: the bare result object.
            r#"{"conversation_id":"","status":"ERROR","response":"","error":"authentication failed or timed out"}"#,
        ] {
            let parsed = Line::parse(line);
            stats.count(&parsed);
        }
        assert_eq!(
            stats,
            ParseStats {
                lines: 6,
                inits: 1,
                unknown_events: 2,
                unknown_fields: 1,
                not_json: 1
            }
        );
        let Line::Result(r) = Line::parse(
            r#"{"conversation_id":"","status":"ERROR","response":"","error":"authentication failed or timed out"}"#,
        ) else {
            panic!("bare result not read");
        };
        assert_eq!(
            r.error.as_deref(),
            Some("authentication failed or timed out")
        );
    }

    #[test]
    fn a_missing_event_field_is_unknown_not_a_panic() {
        assert!(matches!(
            Line::parse(r#"{"step_update":{}}"#),
            Line::UnknownEvent { .. }
        ));
        assert!(matches!(Line::parse("[1,2]"), Line::NotJson(_)));
    }

    #[test]
    fn turn_totals_add_every_count() {
        let call = |n: u64| Usage {
            input_tokens: n,
            output_tokens: 2 * n,
            thinking_tokens: 3 * n,
            cache_read_tokens: 4 * n,
            total_tokens: 5 * n,
        };
        let mut turn = Usage::default();
        turn += &call(1);
        turn += &call(10);
        assert_eq!(turn, call(11));
    }
}
