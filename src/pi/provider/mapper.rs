//! From the runner's events to pi's: what has a block of its own in pi
//! (text, thinking) goes there, and everything else (tool calls and
//! results, failures, subagents, notices) becomes one thinking line in
//! words a user can act on.

use crate::follow::events::{self, Channel, Event};
use crate::follow::subject;
use crate::pi::diff::TurnEdits;
use crate::pi::provider::stream::PiStream;
use crate::runner::{
    answer_from_agy_notice, degraded_notice, new_conversation_notice, permission_mode_notice,
    RunEvent, RunResult,
};
use agy_format::text::{flat, shell_word};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Maps runner events onto a [`PiStream`] for one turn: one thinking line
/// per event pi has no block for (a tool call, a failure, a subagent, a
/// notice), each in words a user can act on.
pub struct EventMapper {
    edits: TurnEdits,
    /// Edit calls announced but not finished yet, by call id (or name+args).
    pending_edits: HashMap<String, crate::follow::edits::EditTarget>,
    /// agy's own error messages this turn (for the final error).
    pub errors: Vec<String>,
    last_text_idx: Option<i64>,
    /// agy's calls of pi's tools are pi's own toolCalls: not repeated.
    /// Which calls those are is the MCP layer's to say (above this one).
    bridge_call: Option<fn(&str, &str) -> bool>,
    /// The reason shown for each failed tool step: agy records it again as
    /// that step's error, which is then not shown twice.
    failed_steps: HashMap<i64, String>,
    /// The conversation this turn is bound to (from [`RunEvent::Bound`]) and
    /// where agy keeps conversations: the database named in the commands
    /// the notices tell the user to run.
    conversation: Option<String>,
    conversations_dir: Option<PathBuf>,
    /// Tool calls shown once from one source and not yet met in the other
    /// (the gate's hook payload, the database's step), by [`call_identity`]:
    /// each call is shown by whichever comes first, once.
    from_gate: HashMap<String, u32>,
    from_db: HashMap<String, u32>,
    /// Steps the gate denied, said already: their error is not repeated.
    denied: HashMap<i64, String>,
    /// An edit's diff rendered off the runtime ([`Self::disk_work`]), for
    /// the result of that edit mapped next.
    rendered: Option<(crate::follow::edits::EditTarget, String)>,
    /// The session's conversation whose database was gone before the turn
    /// ([`Self::replaces`]), until the turn's own is bound.
    replaces: Option<String>,
}

/// The file reads (and git) one event's mapping needs, with the mapper's
/// view of the turn's files moved out to do them: run it where blocking is
/// allowed ([`DiskWork::run`]), then give the outcome back
/// ([`EventMapper::disk_done`]) before mapping the event.
pub(crate) struct DiskWork {
    edits: TurnEdits,
    job: DiskJob,
}

enum DiskJob {
    /// An edit announced: the file as it is before agy writes it.
    Snapshot(PathBuf),
    /// An edit done: its diff.
    Render(crate::follow::edits::EditTarget),
}

/// What [`DiskWork::run`] did, for [`EventMapper::disk_done`].
pub(crate) struct DiskDone {
    edits: TurnEdits,
    rendered: Option<(crate::follow::edits::EditTarget, String)>,
}

impl DiskWork {
    /// Read the file (and ask git): blocking.
    pub(crate) fn run(mut self) -> DiskDone {
        let rendered = match self.job {
            DiskJob::Snapshot(path) => {
                self.edits.before_edit(&path);
                None
            }
            DiskJob::Render(target) => {
                let text = self.edits.render(&target);
                Some((target, text))
            }
        };
        DiskDone {
            edits: self.edits,
            rendered,
        }
    }
}

/// What makes the gate's view of a call and the database's the same call:
/// the tool and its whole subject. The arguments themselves differ between
/// the two (the planner's carry agy's `toolAction`/`toolSummary`, key order
/// differs), and the step indexes do (the planner step requests, the tool
/// step runs).
fn call_identity(name: &str, arguments: &str) -> String {
    format!("{name}\u{0}{}", subject::rule_subject(name, arguments))
}

/// A call seen by one source: `false` when the other source showed it
/// already (that showing is used up), else `true` and remembered as shown.
fn pair(
    other: &mut HashMap<String, u32>,
    mine: &mut HashMap<String, u32>,
    name: &str,
    arguments: &str,
) -> bool {
    let key = call_identity(name, arguments);
    match other.get_mut(&key) {
        Some(n) if *n > 0 => {
            *n -= 1;
            false
        }
        _ => {
            *mine.entry(key).or_default() += 1;
            true
        }
    }
}

fn call_key(id: &str, name: &str, arguments: &str) -> String {
    if id.is_empty() {
        format!("{name}\u{0}{arguments}")
    } else {
        id.to_string()
    }
}

impl EventMapper {
    /// A mapper for one turn in `cwd`, against which agy's edited paths are
    /// shown and diffed.
    pub fn new(cwd: &Path) -> Self {
        EventMapper {
            edits: TurnEdits::new(cwd),
            pending_edits: HashMap::new(),
            errors: Vec::new(),
            last_text_idx: None,
            bridge_call: None,
            failed_steps: HashMap::new(),
            conversation: None,
            conversations_dir: None,
            from_gate: HashMap::new(),
            from_db: HashMap::new(),
            denied: HashMap::new(),
            rendered: None,
            replaces: None,
        }
    }

    /// The disk work mapping `event` needs (an edit's snapshot or its
    /// diff), to run off the runtime; `None` when its mapping touches no
    /// file. Until [`Self::disk_done`], the mapper's view of the turn's
    /// files is the work's.
    pub(crate) fn disk_work(&mut self, event: &RunEvent) -> Option<DiskWork> {
        let RunEvent::Agy(e) = event else {
            return None;
        };
        if self.hidden(e) {
            return None;
        }
        let job = match e {
            Event::ToolCall {
                name, arguments, ..
            } => DiskJob::Snapshot(crate::follow::edits::edit_target(name, arguments)?.path),
            Event::ToolResult {
                id, name, ok: true, ..
            } => {
                let key = self.edit_of_result(id, name)?;
                DiskJob::Render(self.pending_edits.get(&key)?.clone())
            }
            _ => return None,
        };
        Some(DiskWork {
            edits: self.edits.take(),
            job,
        })
    }

    /// Take back what [`DiskWork::run`] did.
    pub(crate) fn disk_done(&mut self, done: DiskDone) {
        self.edits = done.edits;
        self.rendered = done.rendered;
    }

    /// The key of the pending edit a result of tool `name` with call `id`
    /// finishes: that id's, or (a result without an id, or an id not
    /// seen) one of that tool's.
    fn edit_of_result(&self, id: &str, name: &str) -> Option<String> {
        if !id.is_empty() && self.pending_edits.contains_key(id) {
            return Some(id.to_string());
        }
        let prefix = format!("{name}\u{0}");
        self.pending_edits
            .keys()
            .find(|k| k.starts_with(&prefix))
            .cloned()
    }

    /// A tool call agy is about to make, from the gate (its earliest sign,
    /// with full arguments): the line to show now (`None` for an edit,
    /// shown as its diff, and for pi's own tools). The database's record of
    /// the same step is then not shown again.
    pub(crate) fn announce_call(&mut self, name: &str, arguments: &str) -> Option<String> {
        let call = Event::ToolCall {
            idx: 0,
            id: String::new(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        if self.hidden(&call) || !pair(&mut self.from_db, &mut self.from_gate, name, arguments) {
            return None;
        }
        self.call_line(name, arguments)
    }

    /// A step the gate denied, with why (said on its own line): agy's
    /// error for it is not said again.
    pub(crate) fn note_denied(&mut self, idx: i64, reason: &str) {
        self.denied.insert(idx, reason.to_string());
    }

    /// Leave out agy's steps for the calls it made through the bridge:
    /// those `is_bridge_call(name, arguments)` names
    /// (`pi::mcp::is_bridge_call`).
    pub(crate) fn hide_bridge_calls(&mut self, is_bridge_call: fn(&str, &str) -> bool) {
        self.bridge_call = Some(is_bridge_call);
    }

    /// The pi session was bound to conversation `gone`, whose database was
    /// gone before this turn (agy keeps about 500 and drops the oldest), so
    /// the turn begins a new one with pi's whole record: once it is bound,
    /// the user is told as for a conversation agy did not have.
    pub(crate) fn replaces(&mut self, gone: &str) {
        self.replaces = Some(gone.to_string());
    }

    /// Where agy keeps conversations (the settings' conversations
    /// directory); unset, a command names agy's default under `~`.
    pub(crate) fn set_conversations_dir(&mut self, dir: &Path) {
        self.conversations_dir = Some(dir.to_path_buf());
    }

    /// The user's home, where an edited file outside the cwd is shown as
    /// `~/...` (unset: such a file is shown as agy wrote its path).
    pub fn set_home(&mut self, home: Option<&Path>) {
        self.edits.set_home(home);
    }

    fn hidden(&self, e: &Event) -> bool {
        match e {
            Event::ToolCall {
                name, arguments, ..
            } => self.bridge_call.is_some_and(|is| is(name, arguments)),
            Event::ToolResult { name, .. } => self.bridge_call.is_some_and(|is| is(name, "")),
            _ => false,
        }
    }

    /// The bound conversation's database as one shell word, for a command
    /// the user can paste.
    fn database(&self) -> String {
        // Events come after the binding; the placeholder is for a caller
        // that never forwards `Bound`.
        let id = self.conversation.as_deref().unwrap_or("CONVERSATION_ID");
        match &self.conversations_dir {
            Some(dir) => shell_word(&dir.join(format!("{id}.db")).display().to_string()),
            // No HOME: agy's default, for the shell to expand.
            None => format!(
                "~/.gemini/antigravity-cli/conversations/{}",
                shell_word(&format!("{id}.db"))
            ),
        }
    }

    /// One thinking line; agy's held error lines come first (agy went on).
    fn line<W: Write>(&self, out: &mut PiStream<W>, text: &str) {
        out.release_held();
        out.thinking(&format!("\n[{text}]\n"));
    }

    /// A tool call: an edit is remembered for its diff; a subagent's call is
    /// left to its subagent line; anything else is one line naming the tool
    /// and what it acted on.
    fn tool_call<W: Write>(
        &mut self,
        id: &str,
        name: &str,
        arguments: &str,
        out: &mut PiStream<W>,
    ) {
        if let Some(target) = crate::follow::edits::edit_target(name, arguments) {
            self.edits.before_edit(&target.path);
            self.pending_edits
                .insert(call_key(id, name, arguments), target);
        } else if let Some(line) = self.call_line(name, arguments) {
            out.release_held();
            out.thinking(&line);
        }
    }

    /// The line of a call that is neither an edit (remembered for its
    /// diff) nor a subagent's (left to its subagent line).
    fn call_line(&mut self, name: &str, arguments: &str) -> Option<String> {
        if let Some(target) = crate::follow::edits::edit_target(name, arguments) {
            self.edits.before_edit(&target.path);
            self.pending_edits
                .insert(call_key("", name, arguments), target);
            return None;
        }
        if name == "invoke_subagent" {
            return None;
        }
        let line = subject::tool_line(name, arguments, Some(self.edits.cwd()));
        let subject = line.subject.map(|s| format!(" {s}")).unwrap_or_default();
        Some(format!("\n[agy tool: {}]{subject}\n", line.label))
    }

    /// A tool's result: an edit's diff, or one failure line in agy's words.
    fn tool_result<W: Write>(
        &mut self,
        idx: i64,
        (id, name): (&str, &str),
        ok: bool,
        summary: &str,
        out: &mut PiStream<W>,
    ) {
        let target = self
            .edit_of_result(id, name)
            .and_then(|key| self.pending_edits.remove(&key));
        let reason = subject::failure_reason(name, summary);
        let ready = self.rendered.take();
        match target {
            Some(target) if ok => {
                let rendered = match ready {
                    Some((done, text)) if done == target => text,
                    _ => self.edits.render(&target),
                };
                out.release_held();
                out.thinking(&format!("\n{}\n", rendered.trim_end()));
            }
            Some(target) => {
                let path = target
                    .path
                    .strip_prefix(self.edits.cwd())
                    .unwrap_or(&target.path);
                self.failed_steps.insert(idx, summary.to_string());
                self.line(
                    out,
                    &format!("agy edit failed: {}: {reason}", path.display()),
                );
            }
            None if !ok => {
                self.failed_steps.insert(idx, summary.to_string());
                let label = subject::tool_label(name);
                self.line(out, &format!("agy tool failed: {label}: {reason}"));
            }
            None => {}
        }
    }

    /// agy's error: held, so that the turn's own failure is said once (see
    /// [`PiStream::fail`]); not repeated when it is a failed tool step's
    /// reason already shown.
    fn error<W: Write>(&mut self, idx: i64, message: &str, out: &mut PiStream<W>) {
        self.errors.push(message.to_string());
        if self.failed_steps.get(&idx).map(String::as_str) == Some(message)
            || self.denied.contains_key(&idx)
        {
            return;
        }
        let sentence = subject::sentence(message);
        out.hold_error(&sentence, &format!("\n[agy error: {sentence}]\n"));
    }

    /// Writes what `event` means to pi on `out`: text, thinking lines, a
    /// tool's note or diff, an error held for the end.
    pub fn map<W: Write>(&mut self, event: &RunEvent, out: &mut PiStream<W>) {
        let e = match event {
            RunEvent::Agy(e) => e,
            RunEvent::Bound {
                conversation_id, ..
            } => {
                self.conversation = Some(conversation_id.clone());
                if let Some(gone) = self.replaces.take().filter(|g| g != conversation_id) {
                    let notice = new_conversation_notice(&gone, conversation_id);
                    self.line(
                        out,
                        &format!("{notice}; pi's record of the earlier turns went to agy with this message"),
                    );
                }
                return;
            }
            RunEvent::Degraded { reason } => return self.line(out, &degraded_notice(reason)),
            RunEvent::ConversationReplaced {
                requested,
                conversation_id,
            } => {
                self.conversation = Some(conversation_id.clone());
                let notice = new_conversation_notice(requested, conversation_id);
                return self.line(
                    out,
                    &format!("{notice}; this turn continues there, and pi's record of the earlier turns goes to agy with your next message"),
                );
            }
            RunEvent::AnswerFromAgy { reason } => {
                return self.line(out, &answer_from_agy_notice(reason))
            }
            RunEvent::PermissionMode { reported, expected } => {
                return self.line(out, &permission_mode_notice(reported, expected))
            }
            _ => return,
        };
        if self.hidden(e) {
            return;
        }
        match e {
            Event::Text { idx, text } => {
                out.release_held();
                // Text from a later planner step is a new paragraph.
                if out.text_open() && self.last_text_idx.is_some_and(|i| i != *idx) {
                    out.text("\n\n");
                }
                self.last_text_idx = Some(*idx);
                out.text(text);
            }
            Event::Thinking { text, .. } => {
                out.release_held();
                out.thinking(text);
            }
            Event::Rewrite { channel, text, .. } => self.rewrite(*channel, text, out),
            Event::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                if pair(&mut self.from_gate, &mut self.from_db, name, arguments) {
                    self.tool_call(id, name, arguments, out)
                }
            }
            Event::ToolResult {
                idx,
                id,
                name,
                ok,
                summary,
                ..
            } => {
                if *ok || !self.denied.contains_key(idx) {
                    self.tool_result(*idx, (id, name), *ok, summary, out)
                }
            }
            Event::Error { idx, message } => self.error(*idx, message, out),
            other => {
                if let Some(line) = self.other_line(other) {
                    self.line(out, &line);
                }
            }
        }
    }

    /// pi cannot retract streamed text: say so, then give the new version
    /// in full so nothing agy wrote is lost.
    fn rewrite<W: Write>(&mut self, channel: Channel, text: &str, out: &mut PiStream<W>) {
        match channel {
            Channel::Text => {
                self.line(out, "agy revised its answer; the revised text follows");
                out.text(text);
            }
            Channel::Thinking => {
                self.line(out, "agy revised its thinking");
                out.thinking(text);
            }
        }
    }

    /// The line of an event that is neither content nor a tool.
    fn other_line(&self, e: &Event) -> Option<String> {
        Some(match e {
            Event::Subagent { role, task, .. } => {
                format!("agy {}", subject::subagent_started(role.as_deref(), task.as_deref()))
            }
            Event::SubagentEnded {
                role,
                ok,
                answer,
                error,
                ..
            } => format!(
                "agy {}",
                subject::subagent_ended(role.as_deref(), *ok, answer.as_deref(), error.as_deref())
            ),
            Event::Notice { text, .. } => format!("agy: {}", flat(text, subject::SENTENCE_MAX_CHARS)),
            Event::Permission {
                action,
                target,
                decision,
                ..
            } => events::permission_line(action, target, *decision),
            Event::Unknown { idx, step_type } => format!(
                "agy step {idx} is of a type this agy-bridge does not know ({step_type}) and is not shown; to see what changed in agy's format, run `agy-bridge drift {}`",
                self.database()
            ),
            // The wire detail (field paths) is for `agy-bridge decode`.
            Event::DecodeError { idx, .. } => format!(
                "agy step {idx} could not be read by this agy-bridge and is not shown; to see why, run `agy-bridge decode {}`",
                self.database()
            ),
            // The prompt is ours; titles are conversation metadata; the
            // rest has its own mapping in `map`.
            Event::UserInput { .. }
            | Event::Title { .. }
            | Event::Text { .. }
            | Event::Thinking { .. }
            | Event::Rewrite { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::Error { .. } => return None,
        })
    }
}

/// The error pi sees for a failed turn: whether it was the user's abort,
/// and the failure's one sentence (worded for pi's retry; see
/// [`crate::runner::failure`]).
pub(crate) fn error_message(result: &RunResult) -> (bool, String) {
    match &result.failure {
        Some(f) => (f.is_abort(), f.to_string()),
        None => (false, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json::Value;

    use crate::pi::provider::json_lines;

    #[test]
    fn bridge_calls_are_not_repeated_in_thinking() {
        let call = |name: &str, args: &str| {
            RunEvent::Agy(Event::ToolCall {
                idx: 3,
                id: "c".into(),
                name: name.into(),
                arguments: args.into(),
            })
        };
        let run = |hide: bool| {
            let mut buf = Vec::new();
            let mut mapper = EventMapper::new(Path::new("/w"));
            if hide {
                mapper.hide_bridge_calls(crate::pi::mcp::is_bridge_call);
            }
            {
                let mut s = PiStream::new(&mut buf);
                mapper.map(&call("mcp:pi/memory", "{}"), &mut s);
                mapper.map(
                    &call(
                        "call_mcp_tool",
                        r#"{"ServerName":"pi","ToolName":"memory"}"#,
                    ),
                    &mut s,
                );
                mapper.map(&call("mcp:github/issues", "{}"), &mut s);
            }
            String::from_utf8_lossy(&buf).into_owned()
        };
        let hidden = run(true);
        assert!(
            !hidden.contains("mcp:pi/") && !hidden.contains("call_mcp_tool"),
            "{hidden}"
        );
        assert!(hidden.contains("[agy tool: mcp github/issues]"), "{hidden}");
        assert!(run(false).contains("[agy tool: mcp pi/memory]"));
    }

    /// A call announced by the gate (the hook's payload, the tool step's
    /// index, agy's arguments without its own words) and recorded by the
    /// database (the planner step's index, with them) is one line, whichever
    /// comes first; two like calls are two lines; a denied step's error is
    /// not said again.
    #[test]
    fn a_call_seen_by_the_gate_and_the_database_is_shown_once() {
        let db_call = |idx: i64, cmd: &str| {
            RunEvent::Agy(Event::ToolCall {
                idx,
                id: format!("call-{idx}"),
                name: "run_command".into(),
                arguments: format!(
                    r#"{{"CommandLine":"{cmd}","toolAction":"Running","toolSummary":"tests"}}"#
                ),
            })
        };
        let hook_args = |cmd: &str| format!(r#"{{"Cwd":"/w","CommandLine":"{cmd}"}}"#);
        let mut buf = Vec::new();
        {
            let mut mapper = EventMapper::new(Path::new("/w"));
            let mut s = PiStream::new(&mut buf);
            // Gate first, then the database.
            let line = mapper.announce_call("run_command", &hook_args("cargo test"));
            s.thinking(&line.expect("the gate's line"));
            mapper.map(&db_call(2, "cargo test"), &mut s);
            // The database first, then the gate.
            mapper.map(&db_call(5, "cargo build"), &mut s);
            assert_eq!(
                mapper.announce_call("run_command", &hook_args("cargo build")),
                None
            );
            // The same command again is another call.
            let again = mapper.announce_call("run_command", &hook_args("cargo test"));
            s.thinking(&again.expect("a second call"));
            mapper.map(&db_call(8, "cargo test"), &mut s);
            // A denied step: its error is the decision line's, said already.
            mapper.note_denied(9, "not now");
            mapper.map(
                &RunEvent::Agy(Event::ToolResult {
                    idx: 9,
                    id: "call-8".into(),
                    name: "run_command".into(),
                    status: "error".into(),
                    ok: false,
                    summary: "tool call denied by pre-tool hook: not now".into(),
                    output: None,
                    exit_code: None,
                }),
                &mut s,
            );
            mapper.map(
                &error(9, "tool call denied by pre-tool hook: not now"),
                &mut s,
            );
            s.done(None);
        }
        let text: String = json_lines(&buf)
            .iter()
            .filter_map(|v| v["delta"].as_str().map(str::to_string))
            .collect();
        assert_eq!(
            text.matches("[agy tool: run_command] cargo test").count(),
            2,
            "{text}"
        );
        assert_eq!(
            text.matches("[agy tool: run_command] cargo build").count(),
            1,
            "{text}"
        );
        assert!(!text.contains("denied by pre-tool hook"), "{text}");
    }

    /// The thinking text and the final error message of `events` mapped
    /// and ended with `end` (a failure's sentence, or `None` for done).
    fn mapped(events: Vec<RunEvent>, hide: bool, end: Option<&str>) -> (String, String) {
        let mut buf = Vec::new();
        {
            let mut mapper = EventMapper::new(Path::new("/w"));
            mapper.set_conversations_dir(Path::new("/home/u/conversations"));
            if hide {
                mapper.hide_bridge_calls(crate::pi::mcp::is_bridge_call);
            }
            let mut s = PiStream::new(&mut buf);
            for e in &events {
                mapper.map(e, &mut s);
            }
            match end {
                Some(message) => s.fail(false, message),
                None => s.done(None),
            }
        }
        let all = json_lines(&buf);
        let thinking = all
            .iter()
            .filter(|v| v["type"] == "thinking_delta" || v["type"] == "text_delta")
            .filter_map(|v| v["delta"].as_str())
            .collect();
        let error = all
            .iter()
            .find(|v| v["type"] == "error")
            .and_then(|v| v["errorMessage"].as_str())
            .unwrap_or("")
            .to_string();
        (thinking, error)
    }

    fn error(idx: i64, message: &str) -> RunEvent {
        RunEvent::Agy(Event::Error {
            idx,
            message: message.into(),
        })
    }

    #[test]
    fn a_quota_failure_is_said_once() {
        let quota = "Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 34m13s.";
        let failure = format!("agy quota exceeded: {quota}");
        let (thinking, message) = mapped(vec![error(5, quota)], false, Some(&failure));
        let said = thinking.matches(quota).count() + message.matches(quota).count();
        assert_eq!(said, 1, "{thinking:?} / {message:?}");
        assert_eq!(message, failure);
        // An error the failure does not repeat, or one agy went on from, is shown.
        let (thinking, _) = mapped(vec![error(5, "model hiccup")], false, Some(&failure));
        assert!(
            thinking.contains("\n[agy error: model hiccup]\n"),
            "{thinking}"
        );
        let went_on = vec![
            error(5, quota),
            RunEvent::Agy(Event::Text {
                idx: 6,
                text: "after".into(),
            }),
        ];
        let (thinking, _) = mapped(went_on, false, None);
        assert!(
            thinking.contains(&format!("[agy error: {quota}]\n")),
            "{thinking}"
        );
        let (thinking, _) = mapped(vec![error(5, quota)], false, None);
        assert!(
            thinking.contains(quota),
            "held lines show at the end: {thinking}"
        );
    }

    #[test]
    fn a_failed_tool_step_is_one_line_in_agys_words() {
        let events = vec![
            RunEvent::Agy(Event::ToolResult {
                idx: 11,
                id: "c".into(),
                name: "run_command".into(),
                status: "error".into(),
                ok: false,
                summary: "run_command failed: ./deploy.sh: No such file or directory".into(),
                output: None,
                exit_code: None,
            }),
            error(
                11,
                "run_command failed: ./deploy.sh: No such file or directory",
            ),
        ];
        let (thinking, _) = mapped(events, false, None);
        assert_eq!(
            thinking,
            "\n[agy tool failed: run_command: ./deploy.sh: No such file or directory]\n"
        );
    }

    #[test]
    fn one_mcp_call_is_one_line_and_its_failure_another() {
        use agy_format::steps::{
            Body, McpToolResult, PlannerResponse, Step, StepStatus, StepType, ToolCall,
        };
        let call = |id: &str, name: &str, args: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        };
        let mcp = |status| {
            Step::new(2, StepType::McpTool, status).with_body(Body::McpTool(McpToolResult {
                server: "pi".into(),
                call: Some(call(
                    "mcp-call-2",
                    "memory",
                    json!({"query": "release notes"}),
                )),
                result: (status == StepStatus::Done)
                    .then(|| "Error: MCP server \"pi\" is not configured".into()),
                user_rejected: false,
            }))
        };
        let steps = [
            Step::new(1, StepType::PlannerResponse, StepStatus::Done).with_body(Body::Planner(
                PlannerResponse {
                    tool_calls: vec![call(
                        "c1",
                        "call_mcp_tool",
                        json!({"ServerName": "pi", "ToolName": "memory", "Arguments": {"query": "release notes"}}),
                    )],
                    ..PlannerResponse::default()
                },
            )),
            mcp(StepStatus::Running),
            mcp(StepStatus::Done),
        ];
        let events: Vec<RunEvent> = events::decode_all(&steps)
            .into_iter()
            .map(RunEvent::Agy)
            .collect();
        let (thinking, _) = mapped(events.clone(), false, None);
        assert_eq!(
            thinking,
            "\n[agy tool: mcp pi/memory] release notes\n\n[agy tool failed: mcp pi/memory: MCP server \"pi\" is not configured]\n"
        );
        // agy's calls of pi's own tools through the bridge stay hidden.
        let (thinking, _) = mapped(events, true, None);
        assert_eq!(thinking, "");
    }

    #[test]
    fn a_subagent_shows_its_role_task_and_answer() {
        let events = vec![
            RunEvent::Agy(Event::ToolCall {
                idx: 2,
                id: "s1".into(),
                name: "invoke_subagent".into(),
                arguments: json!({"Role": "researcher", "Task": "find callers"}).to_string(),
            }),
            RunEvent::Agy(Event::Subagent {
                idx: 3,
                conversation_id: "abc".into(),
                role: Some("researcher".into()),
                task: Some("find callers".into()),
            }),
            RunEvent::Agy(Event::SubagentEnded {
                idx: 3,
                conversation_id: "abc".into(),
                role: Some("researcher".into()),
                ok: true,
                answer: Some("Two callers:\nmain.rs and cli.rs.".into()),
                error: None,
            }),
        ];
        let (thinking, _) = mapped(events, false, None);
        assert_eq!(
            thinking,
            "\n[agy subagent researcher: find callers]\n\n[agy subagent researcher answered: Two callers: main.rs and cli.rs.]\n"
        );
    }

    #[test]
    fn unknown_and_unreadable_steps_name_a_command_to_paste() {
        let id = "0f0e0d0c-0b0a-4908-8706-050403020100";
        let events = vec![
            RunEvent::Bound {
                conversation_id: id.into(),
                method: crate::follow::discovery::BindMethod::StreamJson,
            },
            RunEvent::Agy(Event::Unknown {
                idx: 7,
                step_type: 250,
            }),
            RunEvent::Agy(Event::DecodeError {
                idx: 8,
                message: "malformed".into(),
            }),
        ];
        let (thinking, _) = mapped(events, false, None);
        let db = format!("/home/u/conversations/{id}.db");
        assert!(
            thinking.contains(&format!("does not know (250) and is not shown; to see what changed in agy's format, run `agy-bridge drift {db}`]")),
            "{thinking}"
        );
        assert!(
            thinking.contains(&format!("run `agy-bridge decode {db}`]")),
            "{thinking}"
        );
    }

    /// An edit's snapshot and diff done by [`DiskWork`] off the mapper (as
    /// the relay does them, on a blocking thread) say what mapping in place
    /// says: the same diff lines, for a result with an id and one without.
    #[test]
    fn disk_work_done_aside_maps_as_in_place() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("a.txt");
        let args = |content: &str| {
            serde_json::json!({"TargetFile": file, "CodeContent": content, "toolSummary": "edit"})
                .to_string()
        };
        let events = |id: &str, content: &str| {
            let name = "write_to_file";
            let call = RunEvent::Agy(Event::ToolCall {
                idx: 1,
                id: id.into(),
                name: name.into(),
                arguments: args(content),
            });
            let result = RunEvent::Agy(Event::ToolResult {
                idx: 1,
                id: id.into(),
                name: name.into(),
                status: "done".into(),
                ok: true,
                summary: String::new(),
                output: None,
                exit_code: None,
            });
            (call, result)
        };
        let run = |aside: bool| {
            std::fs::write(&file, "one\ntwo\n").expect("write");
            let mut buf = Vec::new();
            let mut mapper = EventMapper::new(dir.path());
            let mut s = PiStream::new(&mut buf);
            for (id, content) in [("c1", "one\n2\n"), ("", "1\n2\n")] {
                let (call, result) = events(id, content);
                for (ev, then) in [(&call, Some(content)), (&result, None)] {
                    if aside {
                        if let Some(work) = mapper.disk_work(ev) {
                            let done = std::thread::spawn(move || work.run()).join();
                            mapper.disk_done(done.expect("the work"));
                        }
                    }
                    mapper.map(ev, &mut s);
                    if let Some(content) = then {
                        std::fs::write(&file, content).expect("agy's edit");
                    }
                }
            }
            drop(s);
            String::from_utf8_lossy(&buf).into_owned()
        };
        let in_place = run(false);
        assert!(in_place.contains("[agy edit:"), "{in_place}");
        assert!(
            in_place.contains("two"),
            "the old line is in the diff: {in_place}"
        );
        assert_eq!(run(true), in_place);
    }
}
