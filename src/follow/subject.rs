//! What a tool call acted on, and how every readable view words agy's work
//! in one line.
//!
//! pi's thinking lines, `agy-bridge run` and `agy-bridge decode` all name a
//! tool call by what it acted on (a command line, a file, a pattern, a
//! query, a URL, an MCP server's tool, a task), so this module is the one
//! place that reads tool arguments for people. It knows argument *keys*, not
//! tools: agy has some sixty tools, most seen only by name, and a key such as
//! `CommandLine` or `AbsolutePath` means the same thing whichever tool
//! carries it. The shapes it is tested on are the ones real agy printed
//! (stream-json `tool_info.parameters` and hook payloads' `toolCall.args`).

use agy_format::text::{flat, one_line, same_key, shorten};
use serde_json::{Map, Value};
use std::path::Path;

/// Characters of a tool's subject shown on one line.
pub(crate) const SUBJECT_MAX_CHARS: usize = 80;

/// Characters of agy's own sentence (an error, a notice, a subagent's
/// answer) kept on one line.
pub(crate) const SENTENCE_MAX_CHARS: usize = 300;

/// The tool through which agy's model calls every MCP tool.
pub(crate) const CALL_MCP_TOOL: &str = "call_mcp_tool";

/// Keys naming a command agy runs.
pub(crate) const COMMAND_KEYS: &[&str] = &["CommandLine", "Command"];
/// Keys naming what a search looks for (find_by_name's glob, grep's query).
const PATTERN_KEYS: &[&str] = &["Pattern", "Query", "SearchPattern"];
/// Keys naming where a search looks.
pub(crate) const WHERE_KEYS: &[&str] = &[
    "SearchDirectory",
    "SearchPath",
    "DirectoryPath",
    "Directory",
];
/// Keys naming one file.
pub(crate) const FILE_KEYS: &[&str] = &[
    "AbsolutePath",
    "TargetFile",
    "FilePath",
    "File",
    "NotebookPath",
    "Path",
];
/// Keys naming a web or resource address.
const ADDRESS_KEYS: &[&str] = &["Url", "Uri"];
/// Keys naming the task, message or question an orchestration tool
/// (manage_task, invoke_subagent, send_message, ask_question, ...) is about.
const TASK_KEYS: &[&str] = &[
    "TaskName",
    "Task",
    "Subject",
    "Title",
    "Question",
    "Prompt",
    "Message",
    "Description",
    "Instruction",
    "Goal",
    "Name",
];
/// agy's own words for the call: its summary, else its action. Every real
/// call carries them in the database (a hook's `toolCall.args` shows both),
/// so a tool whose arguments name nothing else still gets a subject.
const OWN_WORDS_KEYS: &[&str] = &["toolSummary", "toolAction"];
/// Keys naming a subagent's role.
const ROLE_KEYS: &[&str] = &["Role", "AgentName", "SubagentName", "Agent"];

/// A tool call's arguments, looked up by key without case.
struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    fn parse(arguments: &str) -> Option<Value> {
        serde_json::from_str(arguments).ok()
    }

    /// The first of `keys` holding non-blank text. A value agy wrote as a
    /// JSON string fragment (`"\"src\""`, as its transcripts do) is unwrapped.
    fn text(&self, keys: &[&str]) -> Option<String> {
        keys.iter().find_map(|key| {
            let value = self.0.iter().find(|(k, _)| same_key(k, key))?.1;
            let raw = value.as_str()?.trim();
            let unwrapped = raw
                .starts_with('"')
                .then(|| serde_json::from_str::<String>(raw).ok())
                .flatten();
            let text = unwrapped.unwrap_or_else(|| raw.to_string());
            (!text.trim().is_empty()).then(|| text.trim().to_string())
        })
    }

    fn number(&self, key: &str) -> Option<u64> {
        let value = self.0.iter().find(|(k, _)| same_key(k, key))?.1;
        value
            .as_u64()
            .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
    }
}

/// What a tool call acted on, from its arguments JSON, in one line
/// cut with an ellipsis at [`SUBJECT_MAX_CHARS`]. `None` when the arguments
/// are not a JSON object or name nothing.
///
/// In order: an MCP call's `SERVER/TOOL`; a command line; a pattern or query
/// with where it looks (`*.rs in src`); a file (with its lines, `src/a.rs:1-20`);
/// a directory; a URL; the task, message or question; agy's own
/// `toolSummary`, else `toolAction`. A path inside `cwd` is shown relative
/// to it.
pub(crate) fn tool_subject(arguments: &str, cwd: Option<&Path>) -> Option<String> {
    let value = Args::parse(arguments)?;
    let args = Args(value.as_object()?);
    let subject = main_subject(&args, cwd).or_else(|| args.text(OWN_WORDS_KEYS))?;
    Some(shorten(&one_line(&subject), SUBJECT_MAX_CHARS))
}

/// What a permission rule is matched against: the call's whole subject,
/// never shortened nor made relative (a rule must not pass a command
/// because its shown form was cut): an MCP call's `SERVER/TOOL`, else the
/// command line, the file, the directory, the pattern or the address; `""`
/// when the arguments name none of these.
pub(crate) fn rule_subject(name: &str, arguments: &str) -> String {
    if let Some((server, tool)) = mcp_target(name, arguments) {
        return format!("{server}/{tool}");
    }
    let Some(value) = Args::parse(arguments) else {
        return String::new();
    };
    let Some(map) = value.as_object() else {
        return String::new();
    };
    let args = Args(map);
    [
        COMMAND_KEYS,
        FILE_KEYS,
        WHERE_KEYS,
        PATTERN_KEYS,
        ADDRESS_KEYS,
    ]
    .iter()
    .find_map(|keys| args.text(keys))
    .unwrap_or_default()
}

/// The subject from the arguments that name what the tool acts on.
fn main_subject(args: &Args<'_>, cwd: Option<&Path>) -> Option<String> {
    if let (Some(server), Some(tool)) = (args.text(&["ServerName"]), args.text(&["ToolName"])) {
        return Some(format!("{server}/{tool}"));
    }
    if let Some(command) = args.text(COMMAND_KEYS) {
        return Some(command);
    }
    let place = args.text(WHERE_KEYS).map(|d| relative_to(&d, cwd));
    if let Some(pattern) = args.text(PATTERN_KEYS) {
        return Some(match place.as_deref() {
            Some(dir) if dir != "." => format!("{pattern} in {dir}"),
            _ => pattern,
        });
    }
    if let Some(file) = args.text(FILE_KEYS) {
        let file = relative_to(&file, cwd);
        return Some(match (args.number("StartLine"), args.number("EndLine")) {
            (Some(start), Some(end)) => format!("{file}:{start}-{end}"),
            _ => file,
        });
    }
    if let Some(dir) = place {
        return Some(dir);
    }
    if let Some(address) = args.text(ADDRESS_KEYS) {
        return Some(match args.text(&["ServerName"]) {
            Some(server) => format!("{server} {address}"),
            None => address,
        });
    }
    args.text(TASK_KEYS).or_else(|| args.text(&["ServerName"]))
}

/// A path argument shown relative to `cwd` when it lies inside it.
fn relative_to(raw: &str, cwd: Option<&Path>) -> String {
    let path = Path::new(raw.strip_prefix("file://").unwrap_or(raw));
    match cwd.and_then(|c| path.strip_prefix(c).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Some(rel) if path.is_absolute() => rel.display().to_string(),
        _ => raw.to_string(),
    }
}

/// How a tool is named on its line, and what it acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolLine {
    /// The tool: its own name, or `mcp SERVER/TOOL` for a call of an MCP
    /// server's tool (agy's `call_mcp_tool` and its type-38 step alike).
    pub label: String,
    pub subject: Option<String>,
}

impl ToolLine {
    /// `LABEL SUBJECT`, or the label alone.
    pub(crate) fn text(&self) -> String {
        match &self.subject {
            Some(s) => format!("{} {s}", self.label),
            None => self.label.clone(),
        }
    }
}

/// A tool call as one line names it. An MCP call is one tool however agy
/// records it: the planner's `call_mcp_tool {ServerName, ToolName,
/// Arguments}` and the MCP step's own `mcp:SERVER/TOOL` both read
/// `mcp SERVER/TOOL`, with the subject of the MCP tool's own arguments.
pub(crate) fn tool_line(name: &str, arguments: &str, cwd: Option<&Path>) -> ToolLine {
    if let Some((server, tool)) = mcp_target(name, arguments) {
        let inner = match name.strip_prefix("mcp:") {
            Some(_) => Some(arguments.to_string()),
            None => mcp_inner_arguments(arguments),
        };
        return ToolLine {
            label: format!("mcp {server}/{tool}"),
            subject: inner.and_then(|a| tool_subject(&a, cwd)),
        };
    }
    ToolLine {
        label: tool_label(name),
        subject: tool_subject(arguments, cwd),
    }
}

/// The name a tool result is shown under: as its call's line names it.
pub(crate) fn tool_label(name: &str) -> String {
    match name.strip_prefix("mcp:") {
        Some(target) => format!("mcp {target}"),
        None => name.to_string(),
    }
}

/// The MCP server and tool a call names: `mcp:SERVER/TOOL`, or
/// `call_mcp_tool` with `ServerName` and `ToolName`.
pub(crate) fn mcp_target(name: &str, arguments: &str) -> Option<(String, String)> {
    if let Some(target) = name.strip_prefix("mcp:") {
        let (server, tool) = target.split_once('/')?;
        return Some((server.to_string(), tool.to_string()));
    }
    if name != CALL_MCP_TOOL {
        return None;
    }
    let value = Args::parse(arguments)?;
    let args = Args(value.as_object()?);
    Some((args.text(&["ServerName"])?, args.text(&["ToolName"])?))
}

/// `call_mcp_tool`'s `Arguments` (an object, or JSON text of one) as JSON.
fn mcp_inner_arguments(arguments: &str) -> Option<String> {
    let value = Args::parse(arguments)?;
    let (_, inner) = value
        .as_object()?
        .iter()
        .find(|(k, _)| same_key(k, "Arguments"))?;
    match inner {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A subagent's role as its call names it (`Role`, `AgentName`, ...).
pub(crate) fn subagent_role(arguments: &str) -> Option<String> {
    let value = Args::parse(arguments)?;
    Args(value.as_object()?)
        .text(ROLE_KEYS)
        .map(|r| shorten(&one_line(&r), SUBJECT_MAX_CHARS))
}

/// The task a subagent was given, as its call words it.
pub(crate) fn subagent_task(arguments: &str) -> Option<String> {
    let value = Args::parse(arguments)?;
    Args(value.as_object()?).text(TASK_KEYS)
}

/// `subagent ROLE`, or `subagent` when it has no role.
fn subagent_who(role: Option<&str>) -> String {
    match role
        .map(|r| flat(r, SUBJECT_MAX_CHARS))
        .filter(|r| !r.is_empty())
    {
        Some(role) => format!("subagent {role}"),
        None => "subagent".to_string(),
    }
}

/// A subagent's start in one line: `subagent researcher: find callers`.
pub(crate) fn subagent_started(role: Option<&str>, task: Option<&str>) -> String {
    let who = subagent_who(role);
    match task
        .map(|t| flat(t, SENTENCE_MAX_CHARS))
        .filter(|t| !t.is_empty())
    {
        Some(task) => format!("{who}: {task}"),
        None => format!("{who} started"),
    }
}

/// A subagent's end in one line: its answer (`subagent researcher
/// answered: ...`), or why it failed in agy's words.
pub(crate) fn subagent_ended(
    role: Option<&str>,
    ok: bool,
    answer: Option<&str>,
    error: Option<&str>,
) -> String {
    let who = subagent_who(role);
    let answer = answer.map(|a| flat(a, SENTENCE_MAX_CHARS));
    match (ok, answer.filter(|a| !a.is_empty())) {
        (true, Some(answer)) => format!("{who} answered: {answer}"),
        (true, None) => format!("{who} finished"),
        (false, _) => format!(
            "{who} failed: {}",
            sentence(error.unwrap_or("agy gave no reason"))
        ),
    }
}

/// agy's own sentence on one line: its first non-blank line (what follows
/// is, in agy's denials, advice addressed to the model), control characters
/// made spaces, cut at [`SENTENCE_MAX_CHARS`].
pub(crate) fn sentence(text: &str) -> String {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    shorten(&one_line(first.unwrap_or("")), SENTENCE_MAX_CHARS)
}

/// A failure reason without a repetition of the tool's own name
/// (`run_command failed: x` under `run_command` reads `x`) or of MCP's
/// `Error:` marker.
pub(crate) fn failure_reason(name: &str, summary: &str) -> String {
    let reason = sentence(summary);
    let reason = reason
        .strip_prefix(&format!("{name} failed:"))
        .or_else(|| reason.strip_prefix("Error:"))
        .unwrap_or(&reason);
    reason.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subject(args: Value, cwd: Option<&str>) -> Option<String> {
        tool_subject(&args.to_string(), cwd.map(Path::new))
    }

    /// Each (tool, arguments, subject) with `/w` as the working directory.
    fn check(cases: Vec<(&str, Value, &str)>) {
        for (name, args, want) in cases {
            assert_eq!(
                subject(args.clone(), Some("/w")).as_deref(),
                Some(want),
                "{name} {args}"
            );
        }
    }

    /// Every tool whose arguments real agy printed, with those arguments
    /// (paths shortened, values as printed), and what its line says.
    #[test]
    fn real_argument_shapes_name_what_the_tool_acted_on() {
        let cases: Vec<(&str, Value, &str)> = vec![
            // stream-json tool_info.parameters, agy 1.2.17.
            (
                "view_file",
                json!({"AbsolutePath": "/w/notes.txt"}),
                "notes.txt",
            ),
            (
                "run_command",
                json!({"CommandLine": "python3 -c 'print(6*7)'"}),
                "python3 -c 'print(6*7)'",
            ),
            (
                "run_command",
                json!({"CommandLine": "pwd && ls -la /mnt"}),
                "pwd && ls -la /mnt",
            ),
            (
                "search_web",
                json!({"query": "latest stable CPython release"}),
                "latest stable CPython release",
            ),
            // agy 1.1.8: find_by_name names its pattern and where it looks.
            (
                "find_by_name",
                json!({"Pattern": "*.rs", "SearchDirectory": "/w/src"}),
                "*.rs in src",
            ),
            (
                "find_by_name",
                json!({"Pattern": "calc.py", "SearchDirectory": "/w"}),
                "calc.py",
            ),
            (
                "find_by_name",
                json!({"Pattern": "calc.py", "SearchDirectory": "/elsewhere/repo"}),
                "calc.py in /elsewhere/repo",
            ),
            // agy 1.2.7.
            (
                "write_to_file",
                json!({"TargetFile": "/w/probe_output.txt"}),
                "probe_output.txt",
            ),
            (
                "view_file",
                json!({"AbsolutePath": "C:\\Users\\u\\.gemini\\antigravity-cli\\mcp\\crt_crt\\crt_ping.json"}),
                "C:\\Users\\u\\.gemini\\antigravity-cli\\mcp\\crt_crt\\crt_ping.json",
            ),
            (
                "call_mcp_tool",
                json!({"Arguments": {"message": "turn one"}, "ServerName": "crt_crt", "ToolName": "crt_ping"}),
                "crt_crt/crt_ping",
            ),
            (
                "run_command",
                json!({"CommandLine": "Get-Date"}),
                "Get-Date",
            ),
            // A hook's toolCall.args, agy 1.1.7: the command wins over agy's summary.
            (
                "run_command",
                json!({"CommandLine": "echo hello", "Cwd": ".", "WaitMsBeforeAsync": 1000, "toolAction": "Running simple echo in dot", "toolSummary": "Echo command in dot"}),
                "echo hello",
            ),
        ];
        check(cases);
    }

    /// Tools real agy listed only by name (init's tool lists), with the
    /// keys of their kind, and agy's own summary for the rest.
    #[test]
    fn tools_seen_only_by_name_get_a_subject() {
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "manage_task",
                json!({"toolAction": "Updating task list", "toolSummary": "Mark parser task done"}),
                "Mark parser task done",
            ),
            (
                "manage_task",
                json!({"toolAction": "Updating task list"}),
                "Updating task list",
            ),
            (
                "manage_task",
                json!({"TaskName": "Release 2.0", "toolSummary": "create task"}),
                "Release 2.0",
            ),
            (
                "grep_search",
                json!({"Query": "sum_to", "SearchPath": "/w", "Includes": ["*.rs"]}),
                "sum_to",
            ),
            ("list_dir", json!({"DirectoryPath": "/w/src"}), "src"),
            (
                "view_file",
                json!({"AbsolutePath": "/w/src/lib.rs", "StartLine": 1, "EndLine": 20}),
                "src/lib.rs:1-20",
            ),
            (
                "replace_file_content",
                json!({"TargetFile": "file:///w/src/lib.rs", "CodeContent": "x"}),
                "src/lib.rs",
            ),
            (
                "read_url_content",
                json!({"Url": "https://example.com/x"}),
                "https://example.com/x",
            ),
            (
                "read_resource",
                json!({"ServerName": "docs", "Uri": "file:///README"}),
                "docs file:///README",
            ),
            ("list_resources", json!({"ServerName": "docs"}), "docs"),
            (
                "invoke_subagent",
                json!({"Role": "researcher", "Task": "find callers of parse_config"}),
                "find callers of parse_config",
            ),
            (
                "ask_question",
                json!({"Question": "Which branch?"}),
                "Which branch?",
            ),
            (
                "send_message",
                json!({"Message": "done with the parser"}),
                "done with the parser",
            ),
            // agy's transcripts write values as JSON fragments.
            ("view_file", json!({"AbsolutePath": "\"/w/a.rs\""}), "a.rs"),
        ];
        check(cases);
    }

    #[test]
    fn an_mcp_call_is_one_tool_named_by_server_and_tool() {
        let planner = json!({"ServerName": "github", "ToolName": "list_issues", "Arguments": {"repo": "o/r", "query": "is:open"}});
        let line = tool_line(CALL_MCP_TOOL, &planner.to_string(), None);
        assert_eq!(line.text(), "mcp github/list_issues is:open");
        let step = json!({"repo": "o/r", "query": "is:open"});
        assert_eq!(
            tool_line("mcp:github/list_issues", &step.to_string(), None),
            line
        );
        // Arguments given as JSON text, and none at all.
        let text_args = json!({"ServerName": "crt_crt", "ToolName": "crt_ping", "Arguments": "{\"message\":\"turn one\"}"});
        assert_eq!(
            tool_line(CALL_MCP_TOOL, &text_args.to_string(), None).text(),
            "mcp crt_crt/crt_ping turn one"
        );
        assert_eq!(
            tool_line("mcp:pi/memory", "{}", None).text(),
            "mcp pi/memory"
        );
        assert_eq!(tool_label("mcp:pi/memory"), "mcp pi/memory");
        assert_eq!(tool_line("view_file", "{}", None).text(), "view_file");
    }

    #[test]
    fn relative_arguments_are_not_rewritten() {
        let args = json!({"AbsolutePath": "src/lib.rs"});
        assert_eq!(subject(args, Some("src")).as_deref(), Some("src/lib.rs"));
    }

    #[test]
    fn subject_is_one_line_cut_with_an_ellipsis() {
        let args = json!({"CommandLine": format!("echo a\necho {}", "b".repeat(100))});
        let got = subject(args, None).expect("a subject");
        assert!(got.starts_with("echo a echo bbb"), "{got}");
        assert!(got.ends_with('…'), "{got}");
        assert_eq!(got.chars().count(), SUBJECT_MAX_CHARS + 1);
    }

    #[test]
    fn nothing_to_name_is_none() {
        assert_eq!(tool_subject("not json", None), None);
        assert_eq!(tool_subject("[1,2]", None), None);
        assert_eq!(
            subject(json!({"Other": "x", "CommandLine": "  "}), None),
            None
        );
    }

    #[test]
    fn subagent_role_and_task_come_from_the_call() {
        let args = json!({"Role": "researcher", "Task": "find callers"}).to_string();
        assert_eq!(subagent_role(&args).as_deref(), Some("researcher"));
        assert_eq!(subagent_task(&args).as_deref(), Some("find callers"));
        assert_eq!(subagent_role("{}"), None);
    }

    #[test]
    fn a_subagent_reads_as_its_role_task_and_answer() {
        assert_eq!(
            subagent_started(Some("researcher"), Some("find\ncallers")),
            "subagent researcher: find callers"
        );
        assert_eq!(subagent_started(None, None), "subagent started");
        assert_eq!(
            subagent_ended(
                Some("researcher"),
                true,
                Some("Two callers.\n\nBoth safe."),
                None
            ),
            "subagent researcher answered: Two callers. Both safe."
        );
        assert_eq!(subagent_ended(None, true, None, None), "subagent finished");
        assert_eq!(
            subagent_ended(Some("r"), false, None, Some("quota\nmore")),
            "subagent r failed: quota"
        );
    }

    #[test]
    fn sentences_are_one_line_and_failures_do_not_repeat_the_tool() {
        let denial = "permission check failed for mcp \"s/t\": user denied permission for mcp(s/t)\nDo not attempt to circumvent this denial";
        assert_eq!(
            sentence(denial),
            "permission check failed for mcp \"s/t\": user denied permission for mcp(s/t)"
        );
        assert_eq!(
            failure_reason(
                "run_command",
                "run_command failed: ./deploy.sh: No such file"
            ),
            "./deploy.sh: No such file"
        );
        assert_eq!(
            failure_reason(
                "mcp:pi/memory",
                "Error: MCP server \"pi\" is not configured"
            ),
            "MCP server \"pi\" is not configured"
        );
    }
}
