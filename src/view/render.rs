//! The readable, live view of a running turn for a terminal.
//!
//! `agy-bridge run` and `demo` print agy's work as it happens: answer text as
//! it grows, thinking set apart, one line per tool call and result, errors in
//! plain words, and a summary at the end. This module owns only presentation;
//! it consumes [`RunEvent`]s and never looks at the database.

use crate::events::{self, Channel, Event};
use crate::format::text::shorten;
use crate::runner::{
    answer_from_agy_notice, degraded_notice, new_conversation_notice, RunEvent, RunResult,
};
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
}

const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

impl<W: Write> LiveView<W> {
    pub fn new(out: W, color: bool) -> Self {
        LiveView {
            out,
            block: Block::None,
            color,
            tools: 0,
            errors: 0,
            last_text_idx: None,
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

    pub fn event(&mut self, event: &RunEvent) -> io::Result<()> {
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
            RunEvent::Agy(e) => self.agy(e)?,
        }
        self.out.flush()
    }

    fn agy(&mut self, e: &Event) -> io::Result<()> {
        let (d, c, red, r) = (
            self.paint(DIM),
            self.paint(CYAN),
            self.paint(RED),
            self.paint(RESET),
        );
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
            Event::ToolCall {
                name, arguments, ..
            } => {
                self.tools += 1;
                let subject = events::tool_subject(arguments, None)
                    .unwrap_or_else(|| first_line(arguments, 120));
                self.line(&format!("{c}→ {name}{r} {d}{subject}{r}"))?;
            }
            Event::ToolResult {
                name, ok, summary, ..
            } => {
                let mark = if *ok { "←" } else { "✗" };
                self.line(&format!(
                    "{c}{mark} {name}{r}: {}",
                    first_line(summary, 120)
                ))?;
            }
            Event::Title { title, .. } => self.line(&format!("{d}# {title}{r}"))?,
            Event::Error { message, .. } => {
                self.errors += 1;
                self.line(&format!("{red}error: {message}{r}"))?;
            }
            Event::Subagent {
                conversation_id,
                role,
                ..
            } => self.line(&format!(
                "{d}[subagent {}{conversation_id}]{r}",
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default()
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

    /// The closing summary.
    pub fn summary(&mut self, result: &RunResult) -> io::Result<()> {
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
