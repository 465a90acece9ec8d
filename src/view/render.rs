//! The readable, live view of a running turn for a terminal.
//!
//! `agy-bridge run` and `demo` print agy's work as it happens: answer text as
//! it grows, thinking set apart, one line per tool call and result, errors in
//! plain words, and a summary at the end. This module owns only presentation;
//! it consumes [`RunEvent`]s and never looks at the database.
//!
//! Tools and subagents read as in pi (`crate::follow::subject` words both),
//! and a failure is said once: a failed tool step's reason is not repeated as
//! an error, and agy's error line that the turn's own failure repeats (which
//! the caller prints) is held back.

use crate::follow::events::{self, Channel, Event};
use crate::follow::subject;
use crate::runner::{
    answer_from_agy_notice, degraded_notice, new_conversation_notice, permission_mode_notice,
    RunEvent, RunResult,
};
use agy_format::text::{repeats, shorten};
use std::collections::HashMap;
use std::io::{self, Write};

/// Which block the cursor is in, so switching blocks starts a new line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Text,
    Thinking,
}

/// Renders events to a terminal (or any writer).
pub struct LiveView<W: Write> {
    out: W,
    block: Block,
    color: bool,
    tools: u32,
    errors: u32,
    last_text_idx: Option<i64>,
    /// Failed tool steps' reasons as shown, by step (see the module comment).
    failed_steps: HashMap<i64, String>,
    /// agy's error messages not printed yet: held until the next event or
    /// the summary.
    held: Vec<String>,
}

const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

impl<W: Write> LiveView<W> {
    /// A view writing to `out`, with ANSI colours when `color` is set.
    pub fn new(out: W, color: bool) -> Self {
        LiveView {
            out,
            block: Block::None,
            color,
            tools: 0,
            errors: 0,
            last_text_idx: None,
            failed_steps: HashMap::new(),
            held: Vec::new(),
        }
    }

    fn paint(&self, code: &'static str) -> &'static str {
        if self.color {
            code
        } else {
            ""
        }
    }

    fn enter(&mut self, block: Block) -> io::Result<()> {
        if self.block != block && self.block != Block::None {
            writeln!(self.out)?;
        }
        if self.block != block && block == Block::Thinking {
            write!(self.out, "{}thinking: ", self.paint(DIM))?;
        }
        if self.block == Block::Thinking && block != Block::Thinking {
            write!(self.out, "{}", self.paint(RESET))?;
        }
        self.block = block;
        Ok(())
    }

    fn line(&mut self, text: &str) -> io::Result<()> {
        self.enter(Block::None)?;
        writeln!(self.out, "{text}")
    }

    /// Print the held error lines: agy went on, so they were not the end.
    fn release_held(&mut self) -> io::Result<()> {
        let (red, r) = (self.paint(RED), self.paint(RESET));
        for message in std::mem::take(&mut self.held) {
            self.line(&format!("{red}error: {message}{r}"))?;
        }
        Ok(())
    }

    /// The turn ended with `failure` (which the caller prints): the held
    /// error lines it does not repeat are printed.
    fn end_errors(&mut self, failure: Option<&str>) -> io::Result<()> {
        if let Some(failure) = failure {
            self.held.retain(|message| !repeats(failure, message));
        }
        self.release_held()
    }

    /// Prints one of the runner's events as it arrives.
    pub fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let quiet = matches!(
            event,
            RunEvent::Started { .. }
                | RunEvent::Agy(
                    Event::Error { .. } | Event::Title { .. } | Event::UserInput { .. }
                )
        );
        if !quiet {
            self.release_held()?;
        }
        match event {
            RunEvent::Started { .. } => {}
            RunEvent::Bound {
                conversation_id,
                method,
            } => {
                let (d, r) = (self.paint(DIM), self.paint(RESET));
                self.line(&format!(
                    "{d}[conversation {conversation_id}, bound by {method}]{r}"
                ))?;
            }
            RunEvent::Aborted => self.line("[aborting]")?,
            RunEvent::TimedOut => self.line("[timed out]")?,
            RunEvent::Degraded { reason } => {
                let (d, r) = (self.paint(DIM), self.paint(RESET));
                self.line(&format!("{d}[{}]{r}", degraded_notice(reason)))?
            }
            RunEvent::ConversationReplaced {
                requested,
                conversation_id,
            } => {
                let notice = new_conversation_notice(requested, conversation_id);
                self.line(&format!(
                    "[{notice}; continue it with --conversation {conversation_id}]"
                ))?
            }
            RunEvent::AnswerFromAgy { reason } => {
                self.line(&format!("[{}]", answer_from_agy_notice(reason)))?
            }
            RunEvent::PermissionMode { reported, expected } => {
                self.line(&format!("[{}]", permission_mode_notice(reported, expected)))?
            }
            RunEvent::Agy(e) => self.agy(e)?,
        }
        self.out.flush()
    }

    fn agy(&mut self, e: &Event) -> io::Result<()> {
        let (d, red, r) = (self.paint(DIM), self.paint(RED), self.paint(RESET));
        match e {
            Event::Text { idx, text } => {
                // Answers from different steps are separate paragraphs.
                if self.block == Block::Text && self.last_text_idx.is_some_and(|i| i != *idx) {
                    write!(self.out, "\n\n")?;
                }
                self.last_text_idx = Some(*idx);
                self.enter(Block::Text)?;
                write!(self.out, "{text}")?;
            }
            Event::Thinking { text, .. } => {
                self.enter(Block::Thinking)?;
                // Keep continuation lines visibly inside the thinking block.
                write!(self.out, "{}", text.replace('\n', "\n          "))?;
            }
            Event::Rewrite { channel, text, .. } => {
                let which = match channel {
                    Channel::Text => "answer",
                    Channel::Thinking => "thinking",
                };
                self.line(&format!("{d}[agy rewrote its {which}; it now reads:]{r}"))?;
                self.enter(if *channel == Channel::Text {
                    Block::Text
                } else {
                    Block::Thinking
                })?;
                write!(self.out, "{text}")?;
            }
            Event::UserInput { text, .. } => {
                self.line(&format!("{d}> {}{r}", first_line(text, 100)))?;
            }
            Event::ToolCall { .. } | Event::ToolResult { .. } => self.tool(e)?,
            Event::Title { title, .. } => self.line(&format!("{d}# {title}{r}"))?,
            Event::Error { idx, message } => {
                self.errors += 1;
                // Said once: as the failed step's line, or held (see `summary`).
                if self.failed_steps.get(idx) != Some(message) {
                    self.held.push(subject::sentence(message));
                }
            }
            Event::Subagent { role, task, .. } => self.line(&format!(
                "{d}[{}]{r}",
                subject::subagent_started(role.as_deref(), task.as_deref())
            ))?,
            Event::SubagentEnded {
                role,
                ok,
                answer,
                error,
                ..
            } => self.line(&format!(
                "{d}[{}]{r}",
                subject::subagent_ended(role.as_deref(), *ok, answer.as_deref(), error.as_deref())
            ))?,
            Event::Notice { text, .. } => self.line(&format!("{d}[agy: {}]{r}", text.trim()))?,
            Event::Permission {
                action,
                target,
                decision,
                ..
            } => self.line(&format!(
                "{d}[{}]{r}",
                events::permission_line(action, target, *decision)
            ))?,
            Event::Unknown { idx, step_type } => self.line(&format!(
                "{d}[step {idx}: unknown step type {step_type}]{r}"
            ))?,
            Event::DecodeError { idx, message } => {
                self.line(&format!("{red}[step {idx} did not decode: {message}]{r}"))?
            }
        }
        Ok(())
    }

    /// A tool call's or result's line, as pi's thinking words it.
    fn tool(&mut self, e: &Event) -> io::Result<()> {
        let (d, c, r) = (self.paint(DIM), self.paint(CYAN), self.paint(RESET));
        match e {
            Event::ToolCall {
                name, arguments, ..
            } => {
                self.tools += 1;
                // A subagent's call is told by its subagent line.
                if name != "invoke_subagent" {
                    let line = subject::tool_line(name, arguments, None);
                    let subject = line.subject.unwrap_or_default();
                    self.line(&format!("{c}→ {}{r} {d}{subject}{r}", line.label))?;
                }
            }
            Event::ToolResult {
                idx,
                name,
                ok,
                summary,
                ..
            } => {
                let label = subject::tool_label(name);
                if *ok {
                    self.line(&format!("{c}← {label}{r}: {}", first_line(summary, 120)))?;
                } else {
                    self.failed_steps.insert(*idx, summary.clone());
                    let reason = subject::failure_reason(name, summary);
                    self.line(&format!("{c}✗ {label}{r}: {reason}"))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The closing summary. agy's held error lines the failure repeats are
    /// dropped: the caller prints the failure.
    pub fn summary(&mut self, result: &RunResult) -> io::Result<()> {
        self.end_errors(result.failure.as_ref().map(|f| f.to_string()).as_deref())?;
        self.enter(Block::None)?;
        let (d, red, r) = (self.paint(DIM), self.paint(RED), self.paint(RESET));
        writeln!(self.out)?;
        for notice in &result.notices {
            writeln!(self.out, "{d}[{notice}]{r}")?;
        }
        let status = match &result.failure {
            None => "ok".to_string(),
            // The sentence itself goes to stderr (the caller's job): said once.
            Some(_) => format!("{red}failed{r}"),
        };
        writeln!(
            self.out,
            "{d}── {status}{d} · conversation {} · last step {} · {} tool call(s) · {} error(s) · {:.1}s · exit {}{r}",
            result.conversation_id.as_deref().unwrap_or("(unbound)"),
            result
                .last_idx
                .map(|i| i.to_string())
                .unwrap_or_else(|| "-".into()),
            self.tools,
            self.errors,
            result.duration_ms as f64 / 1000.0,
            match (result.exit_code, result.signal) {
                (Some(c), _) => c.to_string(),
                (None, Some(s)) => format!("signal {s}"),
                _ => "-".into(),
            }
        )?;
        self.out.flush()
    }
}

fn first_line(s: &str, max: usize) -> String {
    shorten(s.lines().next().unwrap_or(""), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(events: Vec<Event>, failure: Option<&str>) -> String {
        let mut buf = Vec::new();
        {
            let mut view = LiveView::new(&mut buf, false);
            for e in events {
                view.event(&RunEvent::Agy(e)).expect("write");
            }
            view.end_errors(failure).expect("write");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    #[test]
    fn tools_and_subagents_read_as_in_pi() {
        let out = shown(
            vec![
                Event::ToolCall {
                    idx: 1,
                    id: "c".into(),
                    name: "find_by_name".into(),
                    arguments: r#"{"Pattern":"*.rs","SearchDirectory":"src"}"#.into(),
                },
                Event::ToolCall {
                    idx: 1,
                    id: "m".into(),
                    name: "call_mcp_tool".into(),
                    arguments: r#"{"ServerName":"github","ToolName":"list_issues","Arguments":{"query":"is:open"}}"#.into(),
                },
                Event::ToolCall {
                    idx: 1,
                    id: "s".into(),
                    name: "invoke_subagent".into(),
                    arguments: r#"{"Role":"researcher","Task":"find callers"}"#.into(),
                },
                Event::Subagent {
                    idx: 2,
                    conversation_id: "abc".into(),
                    role: Some("researcher".into()),
                    task: Some("find callers".into()),
                },
                Event::SubagentEnded {
                    idx: 2,
                    conversation_id: "abc".into(),
                    role: Some("researcher".into()),
                    ok: true,
                    answer: Some("two callers".into()),
                    error: None,
                },
            ],
            None,
        );
        assert_eq!(
            out,
            "→ find_by_name *.rs in src\n→ mcp github/list_issues is:open\n[subagent researcher: find callers]\n[subagent researcher answered: two callers]\n"
        );
    }

    #[test]
    fn every_failure_is_printed_once() {
        let failed = "run_command failed: ./deploy.sh: No such file or directory";
        let quota = "Individual quota reached. Resets in 34m13s.";
        let events = vec![
            Event::ToolResult {
                idx: 11,
                id: "c".into(),
                name: "run_command".into(),
                status: "error".into(),
                ok: false,
                summary: failed.into(),
                output: None,
                exit_code: None,
            },
            Event::Error {
                idx: 11,
                message: failed.into(),
            },
            Event::Error {
                idx: 12,
                message: quota.into(),
            },
        ];
        let failure = format!("agy quota exceeded: {quota}");
        let out = shown(events.clone(), Some(&failure));
        assert_eq!(
            out,
            "✗ run_command: ./deploy.sh: No such file or directory\n"
        );
        // Without that failure (the caller prints none), the error is shown.
        let out = shown(events, None);
        assert!(out.ends_with(&format!("error: {quota}\n")), "{out}");
    }
}
