//! How a replay ends, and what fake-agy prints and returns then: the final
//! `result` (stream-json and json), the text-mode answer, stderr and the exit
//! code, all from one [`Conclusion`] so that they always agree.
//!
//! The endings are agy's outcome table (docs/agy-format.md, "Outcomes"): a
//! recorded run that finished (its header's `outcome` says how when it did
//! not simply succeed), a print timeout, an auto-denied tool (worded by agy
//! version; from 1.3.3 it ends the turn with no output), a failure before any conversation existed, a run that was
//! killed (no result at all), and a tool a `PreToolUse` hook denied.

use crate::cli::{self, OutputFormat};
use crate::stream::Emitter;
use agy_corpus::recording::Recording;
use agy_format::stream_json::{DeniedAction, Line, TurnResult, Usage};
use std::io::Write;
use std::time::Duration;

/// Why the replay stopped.
#[derive(Debug)]
pub enum Ending {
    /// Every commit of the recorded path was applied.
    Finished,
    /// `--print-timeout` expired with the turn in progress.
    PrintTimeout,
    /// agy auto-denied these actions (print mode cannot ask).
    Denied(Vec<DeniedAction>),
    /// The recording's outcome says agy failed before creating a
    /// conversation.
    BeforeConversation,
    /// The recording's outcome says agy was killed after its last commit.
    Killed,
    /// A `PreToolUse` hook denied a tool (with `--dangerously-skip-permissions`):
    /// the turn ended on the answer that states the denial.
    HookDenied,
}

/// What agy does in print mode at a tool that needs permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionPolicy {
    /// Before 1.1.7: waits for an answer nobody can give.
    Stall,
    /// 1.1.7 to 1.1.x: auto-denies, ends CANCELED with a `jetski:` line.
    Cancel,
    /// 1.2.0 to 1.2.16: auto-denies, ends SUCCESS with `denied_actions`
    /// and still prints the `jetski:` line (agy 1.2.7, simv/crt's
    /// `mcp-denied-headless` capture). 1.1.18 still cancelled; where in
    /// between it changed is unknown, 1.2.0 is our guess.
    DenyWithNote,
    /// 1.2.17 to 1.3.2: auto-denies, ends SUCCESS with `denied_actions`,
    /// nothing on stderr (none captured).
    Deny,
    /// 1.3.3 and later: the denial ends the turn at once: SUCCESS with an
    /// empty response and `denied_actions`, `no output produced` on stderr
    /// (docs/agy-format.md, "Denials (1.3.3)"; the rest of the line is
    /// 1.1.x's `jetski:` sentence, the only whole one known). 1.2.17 is the
    /// last version seen without the line; where between it and 1.3.3 the
    /// line came back is unknown.
    NoOutput,
}

impl PermissionPolicy {
    pub fn for_version(v: (u32, u32, u32)) -> PermissionPolicy {
        if v < (1, 1, 7) {
            PermissionPolicy::Stall
        } else if v < (1, 2, 0) {
            PermissionPolicy::Cancel
        } else if v < (1, 2, 17) {
            PermissionPolicy::DenyWithNote
        } else if v < (1, 3, 3) {
            PermissionPolicy::Deny
        } else {
            PermissionPolicy::NoOutput
        }
    }
}

/// Everything the end of a run prints and returns.
#[derive(Debug)]
pub struct Conclusion {
    /// `None` for a run that was killed: it printed no result.
    pub result: Option<TurnResult>,
    /// What text mode prints on stdout.
    pub stdout_text: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// What the conclusion is drawn from.
pub struct Context<'a> {
    pub rec: &'a Recording,
    pub conversation_id: &'a str,
    pub print_timeout: Duration,
    pub policy: PermissionPolicy,
    pub emitter: &'a Emitter,
}

/// The stderr line agy 1.1.x prints when it auto-denied a permission.
pub fn jetski_line(kind: &str) -> String {
    format!(
        "jetski: no output produced — a tool required the \"{kind}\" permission that headless mode \
         cannot prompt for, so it was auto-denied. Add an allow-rule under permissions.allow in \
         settings.json (e.g. {kind}(<target>)). Alternatively, re-run with \
         --dangerously-skip-permissions to auto-approve all tools.\n"
    )
}

/// The stderr line of an expired `--print-timeout`.
pub fn print_timeout_line(timeout: Duration) -> String {
    format!(
        "[agy] print timeout after {} with turn in progress; returning partial output\n",
        cli::go_duration_string(timeout)
    )
}

/// An answer as text mode prints it: with one trailing newline.
fn as_text(response: &str) -> String {
    if response.is_empty() || response.ends_with('\n') {
        response.to_string()
    } else {
        format!("{response}\n")
    }
}

/// The last non-empty stderr line without agy's `Error: ` prefix: the
/// error of a recording that has no `outcome`.
fn error_from_stderr(stderr: &str) -> Option<String> {
    let line = stderr.lines().rev().find(|l| !l.trim().is_empty())?;
    let line = line
        .strip_prefix("Error: ")
        .or_else(|| line.strip_prefix("error: "))
        .unwrap_or(line);
    Some(line.to_string())
}

/// A result of a run on a conversation: usage, turns and duration count
/// the whole conversation, earlier turns included, as agy's do.
fn result(ctx: &Context, status: &str, response: String) -> TurnResult {
    TurnResult {
        conversation_id: ctx.conversation_id.to_string(),
        status: status.into(),
        response,
        duration_seconds: ctx.emitter.conversation_seconds(),
        num_turns: ctx.emitter.num_turns(),
        usage: Some(ctx.emitter.conversation_usage()),
        ..TurnResult::default()
    }
}

/// Draw the conclusion of `ending`.
pub fn conclude(ending: Ending, ctx: &Context) -> Conclusion {
    let h = &ctx.rec.header;
    match ending {
        Ending::Finished => finished(ctx),
        Ending::BeforeConversation => {
            let outcome = h.outcome.clone().unwrap_or_default();
            let r = TurnResult {
                conversation_id: String::new(),
                status: outcome.status,
                error: outcome.error,
                usage: Some(Usage::default()),
                ..TurnResult::default()
            };
            Conclusion {
                result: Some(r),
                stdout_text: h.stdout.clone(),
                stderr: h.stderr.clone(),
                exit_code: h.exit_code,
            }
        }
        Ending::PrintTimeout => {
            let partial = ctx.emitter.response();
            let mut r = result(ctx, "SUCCESS", partial.clone());
            // agy reports no duration for a turn it gave up waiting for.
            r.duration_seconds = 0.0;
            Conclusion {
                result: Some(r),
                stdout_text: as_text(&partial),
                stderr: print_timeout_line(ctx.print_timeout),
                exit_code: 0,
            }
        }
        Ending::Denied(actions) => denied(ctx, actions),
        Ending::HookDenied => {
            let response = ctx.emitter.response();
            Conclusion {
                result: Some(result(ctx, "SUCCESS", response.clone())),
                stdout_text: as_text(&response),
                stderr: String::new(),
                exit_code: 0,
            }
        }
        // Nothing is printed after the kill.
        Ending::Killed => Conclusion {
            result: None,
            stdout_text: String::new(),
            stderr: h.stderr.clone(),
            exit_code: h.exit_code,
        },
    }
}

fn finished(ctx: &Context) -> Conclusion {
    let h = &ctx.rec.header;
    let outcome = h.outcome.clone().unwrap_or_default();
    let status = if !outcome.status.is_empty() {
        outcome.status.clone()
    } else if h.exit_code == 0 {
        "SUCCESS".into()
    } else {
        "ERROR".into()
    };
    let response = if ctx.emitter.saw_answer() {
        ctx.emitter.response()
    } else {
        ctx.rec.stdout_text().to_string()
    };
    let mut r = result(ctx, &status, response);
    r.error = outcome.error.clone().or_else(|| {
        (status != "SUCCESS")
            .then(|| error_from_stderr(&h.stderr))
            .flatten()
    });
    if let Some(u) = outcome.usage {
        r.usage = Some(u);
    }
    r.denied_actions = outcome.denied_actions;
    Conclusion {
        result: Some(r),
        stdout_text: h.stdout.clone(),
        stderr: h.stderr.clone(),
        exit_code: h.exit_code,
    }
}

fn denied(ctx: &Context, actions: Vec<DeniedAction>) -> Conclusion {
    if ctx.policy == PermissionPolicy::Cancel {
        let kind = actions
            .first()
            .map(|a| a.action.clone())
            .unwrap_or_else(|| "command".into());
        return Conclusion {
            result: Some(result(ctx, "CANCELED", String::new())),
            stdout_text: String::new(),
            stderr: jetski_line(&kind),
            exit_code: 0,
        };
    }
    let stderr = match (ctx.policy, actions.first()) {
        (PermissionPolicy::DenyWithNote | PermissionPolicy::NoOutput, Some(a)) => {
            jetski_line(&a.action)
        }
        _ => String::new(),
    };
    // 1.3.3 reports no output for a turn its denial ended, whatever the
    // model said before the tool.
    let response = match ctx.policy {
        PermissionPolicy::NoOutput => String::new(),
        _ => ctx.emitter.response(),
    };
    let mut r = result(ctx, "SUCCESS", response.clone());
    r.denied_actions = actions;
    Conclusion {
        result: Some(r),
        stdout_text: as_text(&response),
        stderr,
        exit_code: 0,
    }
}

/// How many turn results this process printed: a turn read from stdin is
/// followed by the next line as agy does, while a turn that ended without
/// one (killed, refused) ends the process at once. A counter, not a flag,
/// because a stdin session runs several turns.
static RESULTS_PRINTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub fn results_printed() -> usize {
    RESULTS_PRINTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Note that a result went out ([`results_printed`]).
pub fn note_result() {
    RESULTS_PRINTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Print the conclusion in `format` (stdout, then stderr) and return the
/// exit code.
pub fn print(c: Conclusion, format: OutputFormat) -> i32 {
    if format != OutputFormat::Text && c.result.is_some() {
        note_result();
    }
    let stdout = match (format, c.result) {
        (OutputFormat::Text, _) => c.stdout_text,
        (_, None) => String::new(),
        // `--output-format json`: the bare result object.
        (OutputFormat::Json, Some(r)) => format!(
            "{}\n",
            serde_json::to_string(&r).unwrap_or_else(|_| "{}".into())
        ),
        (OutputFormat::StreamJson, Some(r)) => format!("{}\n", Line::Result(r).to_json()),
    };
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(stdout.as_bytes());
    let _ = o.flush();
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(c.stderr.as_bytes());
    let _ = e.flush();
    c.exit_code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_pick_the_permission_policy() {
        assert_eq!(
            PermissionPolicy::for_version((1, 1, 4)),
            PermissionPolicy::Stall
        );
        assert_eq!(
            PermissionPolicy::for_version((1, 1, 7)),
            PermissionPolicy::Cancel
        );
        assert_eq!(
            PermissionPolicy::for_version((1, 1, 18)),
            PermissionPolicy::Cancel
        );
        assert_eq!(
            PermissionPolicy::for_version((1, 2, 7)),
            PermissionPolicy::DenyWithNote
        );
        assert_eq!(
            PermissionPolicy::for_version((1, 2, 17)),
            PermissionPolicy::Deny
        );
        assert_eq!(
            PermissionPolicy::for_version((1, 3, 3)),
            PermissionPolicy::NoOutput
        );
    }

    #[test]
    fn stderr_errors_lose_agys_prefix() {
        assert_eq!(
            error_from_stderr("warning: x\nError: timeout waiting for response\n").as_deref(),
            Some("timeout waiting for response")
        );
        assert_eq!(error_from_stderr(""), None);
    }
}
