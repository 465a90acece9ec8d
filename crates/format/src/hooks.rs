//! agy's lifecycle hooks as data (docs/agy-format.md, "Hooks"): the
//! `hooks.json` agy loads from `<dir>/.agents/` of each `--add-dir`, the JSON
//! a tool hook reads on its stdin, the decision a `PreToolUse` hook prints,
//! and the `/hooks` listing that proves a file was loaded.
//!
//! Both sides go through this module: the bridge writes hooks.json, reads
//! payloads and the listing, and prints decisions; fake-agy reads hooks.json,
//! writes payloads, reads decisions and prints the listing. So the two can
//! only disagree with real agy, never with each other.
//!
//! What is known and what is assumed:
//! - hooks.json's shape, the payload fields and the decision semantics are
//!   from real agy (the payloads verbatim in the public captures);
//! - how a `matcher` other than `*` matches is not captured: [`Hook::matches`]
//!   reads it as tool names separated by `|` (the bridge only writes `*`);
//! - the `/hooks` listing is known to name each hook's `source` file; its
//!   other fields are not captured, so [`listed_sources`] looks for `source`
//!   anywhere in the output rather than at one path.

use crate::stream_json::{CommandData, SlashCommand};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The file agy reads in a customization root's `.agents/` directory.
pub const HOOKS_FILE: &str = "hooks.json";

/// A hook's timeout when hooks.json gives none (seconds).
pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// What a denied tool step's error says (agy 1.2.7, captured).
pub(crate) const DENIED_PREFIX: &str = "tool call denied by pre-tool hook: ";

/// The events a hook can serve. No payload names its event: a hook command
/// must be told which one it serves (an argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    PreInvocation,
    PostInvocation,
    Stop,
    SessionStart,
}

impl HookEvent {
    pub const ALL: [HookEvent; 6] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PreInvocation,
        HookEvent::PostInvocation,
        HookEvent::Stop,
        HookEvent::SessionStart,
    ];

    /// The key in hooks.json.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PreInvocation => "PreInvocation",
            HookEvent::PostInvocation => "PostInvocation",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Tool events list matcher groups; the others list commands directly.
    pub(crate) fn is_tool_event(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

/// One hook command, as hooks.json lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The top-level key it sits under.
    pub name: String,
    pub event: HookEvent,
    /// Tool events only: `*`, or tool names separated by `|` (assumed).
    pub matcher: Option<String>,
    pub command: String,
    pub timeout_secs: u64,
}

impl Hook {
    /// Whether this hook runs for a call of `tool`.
    pub fn matches(&self, tool: &str) -> bool {
        match self.matcher.as_deref().map(str::trim) {
            None | Some("") | Some("*") => true,
            Some(m) => m.split('|').any(|name| name.trim() == tool),
        }
    }
}

/// Why a hooks.json could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HooksError {
    #[error("hooks.json is not JSON: {0}")]
    NotJson(String),
    #[error("hooks.json: {0}")]
    Shape(String),
}

/// The hooks a hooks.json lists (by name, then event). Unknown events are skipped
/// (a newer agy may have more); a malformed entry is an error naming it.
pub fn parse_hooks_file(text: &str) -> Result<Vec<Hook>, HooksError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| HooksError::NotJson(e.to_string()))?;
    let top = value
        .as_object()
        .ok_or_else(|| HooksError::Shape("the top level is not an object".into()))?;
    let mut hooks = Vec::new();
    for (name, events) in top {
        let events = events
            .as_object()
            .ok_or_else(|| HooksError::Shape(format!("{name:?} is not an object of events")))?;
        for (event_name, entries) in events {
            let Some(event) = HookEvent::parse(event_name) else {
                continue;
            };
            let at = format!("{name}.{event_name}");
            let entries = entries
                .as_array()
                .ok_or_else(|| HooksError::Shape(format!("{at} is not a list")))?;
            for entry in entries {
                if event.is_tool_event() {
                    let matcher = entry.get("matcher").and_then(Value::as_str);
                    let inner = entry
                        .get("hooks")
                        .and_then(Value::as_array)
                        .ok_or_else(|| {
                            HooksError::Shape(format!("{at}: a group without \"hooks\""))
                        })?;
                    for cmd in inner {
                        hooks.push(command_hook(name, event, matcher, cmd, &at)?);
                    }
                } else {
                    hooks.push(command_hook(name, event, None, entry, &at)?);
                }
            }
        }
    }
    Ok(hooks)
}

fn command_hook(
    name: &str,
    event: HookEvent,
    matcher: Option<&str>,
    entry: &Value,
    at: &str,
) -> Result<Hook, HooksError> {
    let command = entry
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| HooksError::Shape(format!("{at}: a hook without a \"command\"")))?;
    Ok(Hook {
        name: name.to_string(),
        event,
        matcher: matcher.map(str::to_string),
        command: command.to_string(),
        timeout_secs: entry
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_SECS),
    })
}

/// hooks.json holding `hooks`, grouped by name and event as agy reads it.
pub fn hooks_file(hooks: &[Hook]) -> Value {
    let mut top = Map::new();
    for h in hooks {
        let events = top
            .entry(h.name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(events) = events else {
            continue;
        };
        let list = events
            .entry(h.event.name().to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(list) = list else {
            continue;
        };
        let command = json!({"type": "command", "command": h.command, "timeout": h.timeout_secs});
        if h.event.is_tool_event() {
            list.push(json!({"matcher": h.matcher.as_deref().unwrap_or("*"), "hooks": [command]}));
        } else {
            list.push(command);
        }
    }
    Value::Object(top)
}

/// The call a tool hook is about: the tool's name and its full arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default)]
    pub args: Value,
    #[serde(default)]
    pub name: String,
}

/// What a `PreToolUse` or `PostToolUse` hook reads on stdin (camelCase, no
/// event name, no cwd). Fields are in agy's (alphabetical) order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolPayload {
    #[serde(default)]
    pub artifact_directory_path: String,
    #[serde(default)]
    pub conversation_id: String,
    /// PostToolUse only: the tool's error (`""` when it succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub model_name: String,
    /// The step's `step_index` (inferred: the captures agree).
    #[serde(default)]
    pub step_idx: u64,
    #[serde(default)]
    pub tool_call: ToolCall,
    #[serde(default)]
    pub transcript_path: String,
    #[serde(default)]
    pub workspace_paths: Vec<String>,
    /// Fields this build does not know, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolPayload {
    pub fn parse(text: &str) -> Result<ToolPayload, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The tool's arguments as JSON text (as a step's arguments are).
    pub fn arguments(&self) -> String {
        match &self.tool_call.args {
            Value::Null => "{}".to_string(),
            args => args.to_string(),
        }
    }
}

/// A `PreToolUse` hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// `reason` reaches the model in the step's error.
    Deny {
        reason: String,
    },
}

impl Decision {
    pub fn deny(reason: impl Into<String>) -> Decision {
        Decision::Deny {
            reason: reason.into(),
        }
    }

    /// The line the hook prints: always an explicit decision.
    pub fn to_json(&self) -> String {
        match self {
            Decision::Allow => json!({"decision": "allow"}).to_string(),
            Decision::Deny { reason } => json!({"decision": "deny", "reason": reason}).to_string(),
        }
    }

    /// What agy makes of a hook's run: `allow` only from an explicit
    /// `{"decision":"allow"}` and a zero exit; `{}`, anything unreadable, a
    /// non-zero exit or a crash deny. `ask`/`force_ask` are untested in print
    /// mode and read as a denial here.
    pub fn from_hook_output(stdout: &str, exited_ok: bool) -> Decision {
        let value: Option<Value> = serde_json::from_str(stdout.trim()).ok();
        let field = |k: &str| {
            value
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match (exited_ok, field("decision").as_deref()) {
            (true, Some("allow")) => Decision::Allow,
            _ => Decision::deny(field("reason").unwrap_or_default()),
        }
    }

    /// The error agy gives the denied step.
    pub fn step_error(reason: &str) -> String {
        format!("{DENIED_PREFIX}{reason}")
    }
}

/// One hook as `/hooks` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedHook {
    pub name: String,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    pub command: String,
    pub timeout: u64,
    /// The hooks.json the hook was loaded from.
    pub source: String,
}

impl ListedHook {
    pub fn new(hook: &Hook, source: &str) -> ListedHook {
        ListedHook {
            name: hook.name.clone(),
            event: hook.event.name().to_string(),
            matcher: hook.matcher.clone(),
            command: hook.command.clone(),
            timeout: hook.timeout_secs,
            source: source.to_string(),
        }
    }
}

/// The slash command's name.
pub(crate) const LISTING_COMMAND: &str = "hooks";

/// `/hooks`' answer as a command (its `data` is `{"hooks":[...]}`).
pub fn listing_command(hooks: &[ListedHook]) -> SlashCommand {
    SlashCommand {
        name: LISTING_COMMAND.into(),
        data: Some(CommandData::Other(json!({ "hooks": hooks }))),
        extra: Map::new(),
    }
}

/// `/hooks`' text form: one tab-separated line per hook.
pub fn listing_text(hooks: &[ListedHook]) -> String {
    hooks
        .iter()
        .map(|h| {
            format!(
                "{}\t{}\t{}\t{}\n",
                h.event,
                h.matcher.as_deref().unwrap_or("-"),
                h.command,
                h.source
            )
        })
        .collect()
}

/// A loaded hook as the listing shows it: its source file and, when the
/// listing gives it, its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub source: String,
    pub command: Option<String>,
}

/// Every hook a `/hooks` output lists (json, stream-json or anything with
/// JSON lines): each object anywhere in it with a string `source`.
pub fn listed_sources(output: &str) -> Vec<Listed> {
    let mut found = Vec::new();
    let whole: Option<Value> = serde_json::from_str(output.trim()).ok();
    let values: Vec<Value> = match whole {
        Some(v) => vec![v],
        None => output
            .lines()
            .filter_map(|l| serde_json::from_str(l.trim()).ok())
            .collect(),
    };
    for v in &values {
        collect_sources(v, &mut found, 0);
    }
    found
}

fn collect_sources(v: &Value, out: &mut Vec<Listed>, depth: usize) {
    // Our own output is shallow; a deep one is not worth the stack.
    if depth > 32 {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(source) = m.get("source").and_then(Value::as_str) {
                let listed = Listed {
                    source: source.to_string(),
                    command: m.get("command").and_then(Value::as_str).map(str::to_string),
                };
                if !out.contains(&listed) {
                    out.push(listed);
                }
            }
            m.values().for_each(|c| collect_sources(c, out, depth + 1));
        }
        Value::Array(a) => a.iter().for_each(|c| collect_sources(c, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream_json::{Line, TurnResult};

    fn gate(command: &str) -> Hook {
        Hook {
            name: "agy-bridge".into(),
            event: HookEvent::PreToolUse,
            matcher: Some("*".into()),
            command: command.into(),
            timeout_secs: 3600,
        }
    }

    #[test]
    fn hooks_file_round_trips_in_agys_shape() {
        let stop = Hook {
            name: "agy-bridge".into(),
            event: HookEvent::Stop,
            matcher: None,
            command: "true".into(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
        };
        let hooks = vec![gate("/bin/gate 'a b'"), stop];
        let file = hooks_file(&hooks);
        assert_eq!(
            file["agy-bridge"]["PreToolUse"][0]["hooks"][0]["timeout"],
            3600
        );
        assert_eq!(file["agy-bridge"]["PreToolUse"][0]["matcher"], "*");
        assert_eq!(file["agy-bridge"]["Stop"][0]["command"], "true");
        assert_eq!(parse_hooks_file(&file.to_string()).unwrap(), hooks);
    }

    #[test]
    fn the_documented_shape_reads_with_defaults_and_unknown_events_skipped() {
        let text = r#"{"crt":{"PreToolUse":[{"matcher":"run_command|write_to_file","hooks":[{"type":"command","command":"node gate.js"}]}],"OnSomethingNew":[{"x":1}],"PreInvocation":[{"type":"command","command":"log"}]}}"#;
        let hooks = parse_hooks_file(text).unwrap();
        assert_eq!(hooks.len(), 2);
        let by = |e: HookEvent| hooks.iter().find(|h| h.event == e).expect("hook");
        let gate = by(HookEvent::PreToolUse);
        assert_eq!(gate.timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert!(gate.matches("write_to_file") && !gate.matches("view_file"));
        assert!(by(HookEvent::PreInvocation).matches("anything"));
    }

    #[test]
    fn malformed_hooks_files_say_where() {
        assert!(matches!(
            parse_hooks_file("nope"),
            Err(HooksError::NotJson(_))
        ));
        let e = parse_hooks_file(r#"{"x":{"PreToolUse":[{"matcher":"*"}]}}"#).unwrap_err();
        assert!(e.to_string().contains("x.PreToolUse"), "{e}");
        let e = parse_hooks_file(r#"{"x":{"Stop":[{"type":"command"}]}}"#).unwrap_err();
        assert!(e.to_string().contains("without a \"command\""), "{e}");
    }

    #[test]
    fn decisions_follow_agys_semantics() {
        let allow = Decision::from_hook_output(&Decision::Allow.to_json(), true);
        assert_eq!(allow, Decision::Allow);
        // An allow from a hook that then failed is still a denial.
        assert_eq!(
            Decision::from_hook_output(r#"{"decision":"allow"}"#, false),
            Decision::deny("")
        );
        for denied in ["{}", "", "garbage", r#"{"decision":"ask"}"#] {
            assert!(matches!(
                Decision::from_hook_output(denied, true),
                Decision::Deny { .. }
            ));
        }
        let d = Decision::deny("not now");
        assert_eq!(Decision::from_hook_output(&d.to_json(), true), d);
        assert_eq!(
            Decision::step_error("not now"),
            "tool call denied by pre-tool hook: not now"
        );
    }

    #[test]
    fn payload_fields_are_camel_case_in_agys_order() {
        let p = ToolPayload {
            conversation_id: "c".into(),
            step_idx: 16,
            tool_call: ToolCall {
                name: "run_command".into(),
                args: json!({"CommandLine": "echo hello"}),
            },
            ..ToolPayload::default()
        };
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.starts_with(r#"{"artifactDirectoryPath":"","conversationId":"c","modelName""#));
        assert!(text.contains(
            r#""stepIdx":16,"toolCall":{"args":{"CommandLine":"echo hello"},"name":"run_command"}"#
        ));
        assert_eq!(ToolPayload::parse(&text).unwrap(), p);
        assert_eq!(p.arguments(), r#"{"CommandLine":"echo hello"}"#);
    }

    #[test]
    fn listing_is_found_in_json_and_stream_json_output() {
        let listed = vec![ListedHook::new(
            &gate("/bin/gate"),
            "/tmp/d/.agents/hooks.json",
        )];
        let command = listing_command(&listed);
        let json_mode = serde_json::to_string(&TurnResult {
            command: Some(command.clone()),
            response: listing_text(&listed),
            ..TurnResult::default()
        })
        .unwrap();
        let stream = Line::CommandResult(command).to_json();
        let want = vec![Listed {
            source: "/tmp/d/.agents/hooks.json".into(),
            command: Some("/bin/gate".into()),
        }];
        assert_eq!(listed_sources(&json_mode), want);
        assert_eq!(
            listed_sources(&format!("{stream}\n{{\"event\":\"result\"}}\n")),
            want
        );
        assert!(listed_sources("no hooks loaded").is_empty());
        assert!(
            listing_text(&listed).contains("PreToolUse\t*\t/bin/gate\t/tmp/d/.agents/hooks.json")
        );
    }
}
