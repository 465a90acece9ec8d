//! Why a turn failed: classified once, worded once.
//!
//! agy reports a failed turn in up to four places: its exit code, its
//! stream-json `result` (status, error, denied actions), its stderr (a human
//! sentence, an `AGY_ERROR: {json}` line, the print-timeout and auto-deny
//! notes) and error steps in the database. [`classify`] reads them together
//! (docs/agy-format.md, "Outcomes") into one typed [`Failure`]. Its `Display`
//! is the sentence every user sees (CLI and pi alike), and it is written so
//! that pi's automatic retry, which matches words such as "rate limit",
//! "timeout" or "429" and never "quota exceeded", retries exactly the
//! failures for which [`Failure::retryable`] is true. A test holds the two
//! together.

use agy_format::stream_json::{DeniedAction, TurnResult};
use serde::Serialize;

/// Why a turn failed, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// agy's binary is not there.
    #[error(
        "agy is not installed: {bin} was not found. Install the Antigravity CLI or set AGY_BIN."
    )]
    NotInstalled {
        /// The binary that was looked for.
        bin: String,
    },
    /// agy's binary is there but could not be started.
    #[error("could not start agy ({bin}): {message}")]
    SpawnFailed {
        /// The binary.
        bin: String,
        /// The operating system's error.
        message: String,
    },
    /// The turn's working directory does not exist.
    #[error("the working directory {dir} does not exist")]
    NoWorkingDir {
        /// The directory.
        dir: String,
    },
    /// The turn's working directory is a file or something else, not a directory.
    #[error("the working directory {dir} is not a directory")]
    WorkingDirNotADirectory {
        /// The path.
        dir: String,
    },
    /// A NUL ends a C string: exec cannot pass such an argument, and agy
    /// would otherwise fail with a bare exit 126.
    #[error("the prompt contains a NUL byte (after {before} characters), which agy cannot take in a prompt; remove it and send the message again")]
    PromptHasNul {
        /// How many characters come before the NUL.
        before: usize,
    },
    /// agy needs its user to sign in first.
    #[error("agy is not signed in. Run `agy` once in a terminal to sign in, then try again.")]
    NotSignedIn,
    /// A quota with a reset time: hours away, so never retried. `quota`
    /// is what agy's `/usage` said after the failure (the empty buckets and
    /// when they refill, or why it could not be read); `None` when it was
    /// not asked.
    #[error("agy quota exceeded: {message}{}", quota_note(.message, .quota.as_deref()))]
    QuotaExceeded {
        /// agy's own sentence about the quota.
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        /// What `/usage` said after the failure, if it was asked.
        quota: Option<String>,
    },
    /// A throttle agy marks retryable that is not a quota.
    #[error("agy hit a rate limit: {message}")]
    Throttled {
        /// agy's sentence.
        message: String,
    },
    /// agy's own model call gave up. Retried only when no tool ran, so a
    /// retry cannot repeat edits.
    #[error("{}", model_timeout_text(*.ran_tools))]
    ModelTimeout {
        /// Whether a tool ran before it gave up, which rules out a retry.
        ran_tools: bool,
    },
    /// agy does not know the model asked for.
    #[error("{}", unknown_model_text(.model, .available))]
    UnknownModel {
        /// The model asked for.
        model: String,
        /// The models agy offers, when it said.
        available: Vec<String>,
    },
    /// agy refused the model and effort together, in words the bridge does not take apart.
    #[error("agy rejected the model and effort: {message}")]
    ModelSelection {
        /// agy's sentence.
        message: String,
    },
    /// agy refused the `--effort` asked for: a model without that effort
    /// (its words list the ones it takes: agy 1.3.1), or a word it does not
    /// know as an effort (`available` then agy's valid words, if it said).
    #[error("{}", effort_text(.model, .effort, .available))]
    EffortRefused {
        /// The model asked for.
        model: String,
        /// The effort asked for.
        effort: String,
        /// The efforts agy takes, when it said.
        available: Vec<String>,
    },
    /// agy refused the input the bridge gave it, before any model call: a
    /// stream-json line on its stdin it cannot read (exit 2 from agy
    /// 1.3.3, exit 1 on 1.2.x) or a flag it does not take (exit 2).
    #[error("{}", input_refused_text(.message))]
    InputRefused {
        /// agy's sentence.
        message: String,
    },
    /// agy's model had no capacity (`UNAVAILABLE (code 503): No capacity
    /// available for model ...`, exit 3) or another server-side failure
    /// agy marks retryable. Retried only when no tool ran, so a retry
    /// cannot repeat edits.
    #[error("{}", unavailable_text(.message, *.ran_tools))]
    ModelUnavailable {
        /// agy's sentence.
        message: String,
        /// Whether a tool ran before it failed, which rules out a retry.
        ran_tools: bool,
    },
    /// Another model or API failure agy ended the turn on (exit 3, with
    /// `AGY_ERROR:` on stderr): agy's sentence.
    #[error("agy's model call failed (exit 3): {message}")]
    ModelCallFailed {
        /// agy's sentence.
        message: String,
    },
    /// agy auto-denied tools print mode cannot ask about, and gave no answer.
    #[error("{}", denied_text(.actions))]
    Denied {
        /// What agy denied, each once.
        actions: Vec<DeniedAction>,
    },
    /// The turn's conversation database could not be found.
    #[error("could not bind agy's conversation database: {reason}")]
    CouldNotBind {
        /// Why, in words.
        reason: String,
    },
    /// agy waited on a permission prompt print mode cannot answer.
    #[error("agy stopped to ask permission for {tool}, which print mode cannot answer. Allow agy's tools with `/agy permissions allow` in pi (or `agy-bridge config permissions allow`, or AGY_PERMISSIONS=allow).")]
    PermissionStall {
        /// The tool it asked about.
        tool: String,
    },
    /// Our watchdog. Worded without "timeout": a retry would run agy for
    /// another whole period and may repeat edits.
    #[error("agy did not finish within {minutes} minutes and was stopped; its partial work is in the agy conversation")]
    TimedOut {
        /// The limit that ran out.
        minutes: u64,
    },
    /// The user aborted the turn (pi's Esc, a closed stdout, Ctrl-C).
    #[error("Operation aborted")]
    Aborted,
    /// agy's own `--print-timeout` ran out (on 1.1.x worded as
    /// `timeout waiting for response`). Not retried: a retry meets the same
    /// limit, and the work so far is kept in the conversation.
    #[error("agy stopped at its own print time limit before the turn was finished; what it did so far is kept in the conversation, so send your message again to continue (and raise agy's print limit if AGY_EXTRA_ARGS sets one)")]
    PrintTimeout,
    /// agy ended the turn as canceled and gave no answer.
    #[error("agy canceled the turn without an answer")]
    Canceled,
    /// agy exited with an error the bridge has no better words for.
    #[error("agy failed (exit {code}): {message}")]
    AgyFailed {
        /// agy's exit code.
        code: i32,
        /// What agy said last on stderr.
        message: String,
    },
    /// agy was killed from outside (a signal, or exit 1 with no result after
    /// its conversation began). Its conversation keeps what was done.
    #[error("agy was stopped from outside ({how}) before it finished; its conversation keeps the work so far, so send your message again to resume it")]
    Stopped {
        /// The signal or exit that stopped it, in words.
        how: String,
    },
    /// agy printed a result without starting a conversation: a slash
    /// command's output (`num_turns` 0) instead of a model turn.
    #[error("agy answered without starting a conversation ({detail}); nothing was sent to the model. If your message starts with '/', agy read it as one of its own commands: start it with another character")]
    NoConversation {
        /// What agy printed instead, shortened.
        detail: String,
    },
}

/// agy's quota words after agy's own sentence, as a sentence of their own.
fn quota_note(message: &str, quota: Option<&str>) -> String {
    match quota.map(str::trim).filter(|q| !q.is_empty()) {
        None => String::new(),
        Some(q) if message.trim_end().ends_with('.') || message.trim().is_empty() => {
            format!(" {q}")
        }
        Some(q) => format!(". {q}"),
    }
}

fn model_timeout_text(ran_tools: bool) -> String {
    if ran_tools {
        "agy's model stopped answering after agy had already run tools in this turn; not repeated automatically, so no edit runs twice. Ask again to continue.".into()
    } else {
        "agy's model call timed out (timeout waiting for response). Nothing ran yet, so it may be tried again; if it keeps timing out, the model is overloaded: switch to another agy model with /model or try later.".into()
    }
}

fn unknown_model_text(model: &str, available: &[String]) -> String {
    let mut s = format!("agy does not know the model {model:?}");
    if !available.is_empty() {
        s.push_str(". agy's models: ");
        s.push_str(&available.join(", "));
    }
    s
}

fn effort_text(model: &str, effort: &str, available: &[String]) -> String {
    let takes = available.join(", ");
    match (model.is_empty(), available.is_empty()) {
        (false, false) => format!("agy's model {model} has no {effort:?} effort; it takes {takes}. Choose one of those (pi's thinking level, or --effort) and send the message again"),
        (false, true) => format!("agy's model {model} has no {effort:?} effort. Choose another thinking level and send the message again"),
        (true, false) => format!("agy does not take {effort:?} as an effort; it takes {takes}"),
        (true, true) => format!("agy does not take {effort:?} as an effort"),
    }
}

/// agy's refusal of its input, with what the user can do about it: a flag
/// is the user's (`AGY_EXTRA_ARGS`); a stdin line is the bridge's own.
fn input_refused_text(message: &str) -> String {
    if message.contains("flag") {
        format!("agy refused its command line: {message}. A flag in AGY_EXTRA_ARGS may be one this agy does not take")
    } else {
        format!("agy refused the turn agy-bridge wrote on its stdin: {message}. Nothing reached the model: this agy reads its input differently from what agy-bridge writes, so update agy-bridge (or report it with the output of `agy --version`)")
    }
}

/// A model without capacity: "503" and "overloaded" (pi's retry words)
/// only when a retry cannot repeat a tool.
fn unavailable_text(message: &str, ran_tools: bool) -> String {
    if ran_tools {
        format!("agy's model had no capacity left on Google's side ({message}) after agy had already run tools in this turn; not repeated automatically, so no edit runs twice. Ask again to continue, or switch to another agy model with /model.")
    } else {
        format!("agy's model is overloaded (503, no capacity on Google's side): {message}. Nothing ran yet, so it may be tried again; if it keeps failing, switch to another agy model with /model or try later.")
    }
}

/// `RunCommand (command)`, for the denial sentences.
pub(crate) fn denied_list(actions: &[DeniedAction]) -> String {
    let names: Vec<String> = actions
        .iter()
        .map(|a| match (a.display_name.is_empty(), a.action.is_empty()) {
            (false, false) => format!("{} ({} permission)", a.display_name, a.action),
            (false, true) => a.display_name.clone(),
            (true, false) => format!("a tool needing the {} permission", a.action),
            (true, true) => "a tool".into(),
        })
        .collect();
    names.join(", ")
}

/// How to stop agy denying: one phrase for failures and notices.
pub(crate) const HOW_TO_ALLOW: &str = "print mode cannot ask for permission, so agy denied it. Allow agy's tools with `/agy permissions allow` in pi (or `agy-bridge config permissions allow`, or AGY_PERMISSIONS=allow)";

fn denied_text(actions: &[DeniedAction]) -> String {
    format!(
        "agy gave no answer: it needed {}, and {HOW_TO_ALLOW}.",
        denied_list(actions)
    )
}

impl Failure {
    /// Whether trying the same turn again can help (and pi may do it).
    pub fn retryable(&self) -> bool {
        match self {
            Failure::Throttled { .. } => true,
            Failure::ModelTimeout { ran_tools } | Failure::ModelUnavailable { ran_tools, .. } => {
                !ran_tools
            }
            _ => false,
        }
    }

    /// The failure is the user's own abort.
    pub(crate) fn is_abort(&self) -> bool {
        matches!(self, Failure::Aborted)
    }

    /// A quota failure whose buckets are not named yet.
    pub(crate) fn wants_quota(&self) -> bool {
        matches!(self, Failure::QuotaExceeded { quota: None, .. })
    }

    /// Name the quota a [`Failure::QuotaExceeded`] ran out of (`words`:
    /// `runner::quota`'s sentences); any other failure is left as it is.
    pub(crate) fn set_quota(&mut self, words: String) {
        if let Failure::QuotaExceeded { quota, .. } = self {
            *quota = Some(words);
        }
    }
}

/// agy's `AGY_ERROR: {json}` stderr line (docs/agy-format.md, "Outcomes").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct AgyError {
    #[serde(default)]
    pub short_error: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub error_code: i64,
    #[serde(default)]
    pub retryable: bool,
}

impl AgyError {
    /// The last `AGY_ERROR:` line of stderr, if it parses.
    pub(crate) fn from_stderr(stderr: &str) -> Option<AgyError> {
        stderr.lines().rev().find_map(|l| {
            let json = l.trim().strip_prefix("AGY_ERROR:")?;
            serde_json::from_str(json.trim()).ok()
        })
    }

    /// `short_error` without its `STATUS (code N): ` prefix.
    pub(crate) fn sentence(&self) -> &str {
        match self.short_error.split_once("): ") {
            Some((head, tail)) if head.contains("(code ") => tail,
            _ => &self.short_error,
        }
    }
}

/// Everything agy said about a finished turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgyReport<'a> {
    /// agy's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended agy, if one did.
    pub signal: Option<i32>,
    /// The end of agy's stderr.
    pub stderr: &'a str,
    /// agy's stream-json `result`, if it printed one.
    pub result: Option<&'a TurnResult>,
    /// Error messages from the database's error steps.
    pub db_errors: &'a [String],
    /// Whether agy ran a tool this turn (from either source).
    pub ran_tools: bool,
    /// Whether the turn produced answer text (from either source).
    pub answered: bool,
    /// The model we asked for, for the unknown-model sentence.
    pub model: Option<&'a str>,
    /// What this agy offers (its version decides how some words read).
    pub features: agy_format::features::AgyFeatures,
    /// agy began a conversation this turn (an `init` line, or a bound
    /// database): a run that ends without a result after that was stopped.
    pub conversation_began: bool,
}

/// What agy's own report says about the turn: a failure, or `None` for
/// success. Our own reasons (abort, watchdog, stall, binding) are the
/// runner's and come first; this covers agy's.
pub fn classify(r: &AgyReport<'_>) -> Option<Failure> {
    let error = r.result.and_then(|t| t.error.as_deref()).unwrap_or("");
    let agy_error = AgyError::from_stderr(r.stderr);
    if let Some(f) = signed_out(r.stderr, error) {
        return Some(f);
    }
    if let Some(f) = model_selection(r, error) {
        return Some(f);
    }
    if let Some(f) = input_refused(r, error) {
        return Some(f);
    }
    if let Some(f) = quota(agy_error.as_ref(), r.stderr, error, r.db_errors) {
        return Some(f);
    }
    if let Some(f) = api_failure(r, agy_error.as_ref(), error) {
        return Some(f);
    }
    if error.contains("timeout waiting for response")
        || r.stderr.contains("timeout waiting for response")
    {
        // agy 1.1.x said this when its print timeout expired.
        if r.features.timeout_wording_is_print_timeout() {
            return Some(Failure::PrintTimeout);
        }
        return Some(Failure::ModelTimeout {
            ran_tools: r.ran_tools,
        });
    }
    if let Some(f) = denial(r) {
        return Some(f);
    }
    if let Some(f) = stopped(r) {
        return Some(f);
    }
    if let Some(f) = without_conversation(r, error) {
        return Some(f);
    }
    if let Some(code) = r.exit_code.filter(|c| *c != 0) {
        return Some(Failure::AgyFailed {
            code,
            message: failure_sentence(error, agy_error.as_ref(), r.stderr, r.db_errors),
        });
    }
    match r.result.map(|t| t.status.as_str()) {
        Some("ERROR") => Some(Failure::AgyFailed {
            code: 0,
            message: failure_sentence(error, agy_error.as_ref(), r.stderr, r.db_errors),
        }),
        Some("CANCELED") if !r.answered => Some(Failure::Canceled),
        _ if r.stderr.contains("print timeout after") => Some(Failure::PrintTimeout),
        _ => None,
    }
}

/// Killed from outside: by a signal, or (as agy reports a kill on some
/// platforms) exit 1 with no result and nothing said, after its
/// conversation began (docs/agy-format.md, "stdin sessions", exit codes).
fn stopped(r: &AgyReport<'_>) -> Option<Failure> {
    if let Some(signal) = r.signal {
        return Some(Failure::Stopped {
            how: format!("signal {signal}"),
        });
    }
    let silent = r.result.is_none() && human_sentence(r.stderr, "", None).is_empty();
    (r.exit_code == Some(1) && silent && r.conversation_began).then(|| Failure::Stopped {
        how: "exit 1 without a result".into(),
    })
}

/// A result with an empty `conversation_id`: agy never started a turn.
/// Failures with words (quota, sign-in, model) are classified before this.
fn without_conversation(r: &AgyReport<'_>, error: &str) -> Option<Failure> {
    let result = r.result.filter(|t| t.conversation_id.is_empty())?;
    // A slash command's result names its command (1.2.7); an empty one
    // answered nothing at all.
    let ran_command = result.command.is_some() || result.response.is_empty();
    if result.status == "SUCCESS" && result.num_turns == 0 && !r.conversation_began && ran_command {
        let first = result.response.lines().next().unwrap_or("").trim();
        return Some(Failure::NoConversation {
            detail: if first.is_empty() {
                "an empty result".into()
            } else {
                format!("it printed {first:?}")
            },
        });
    }
    (result.status == "ERROR" && !error.trim().is_empty()).then(|| Failure::AgyFailed {
        code: r.exit_code.unwrap_or(0),
        message: format!("before starting a conversation: {}", error.trim()),
    })
}

fn signed_out(stderr: &str, error: &str) -> Option<Failure> {
    (says_signed_out(stderr) || says_signed_out(error)).then_some(Failure::NotSignedIn)
}

/// Whether agy's words say nobody is signed in: one test for a turn and for
/// the commands that run without one (`/usage`).
pub(crate) fn says_signed_out(s: &str) -> bool {
    s.contains("Please sign in")
        || s.contains("Waiting for authentication")
        || s.contains("authentication failed")
        || s.contains("authentication timed out")
}

/// `invalid model selection (...)`: an unknown model (with agy's list of
/// display names on stderr), a model/effort conflict, or an effort the
/// model does not take.
fn model_selection(r: &AgyReport<'_>, error: &str) -> Option<Failure> {
    let line = [error, r.stderr]
        .into_iter()
        .flat_map(str::lines)
        .map(|l| {
            let l = l.trim();
            l.strip_prefix("error:")
                .or_else(|| l.strip_prefix("Error:"))
                .unwrap_or(l)
                .trim()
        })
        .find(|l| l.starts_with("invalid model selection") || l.starts_with("invalid --effort"))?;
    let detail = line.split_once("): ").map(|(_, d)| d).unwrap_or(line);
    if detail.contains("conflicts with") {
        return Some(Failure::ModelSelection {
            message: detail.to_string(),
        });
    }
    if let Some(f) = effort_refused(detail) {
        return Some(f);
    }
    let model = detail
        .strip_prefix("model ")
        .and_then(|d| d.split_whitespace().next())
        .or(r.model)
        .unwrap_or("")
        .to_string();
    Some(Failure::UnknownModel {
        model,
        available: available_models(r.stderr),
    })
}

/// agy's refusal of an effort (docs/agy-format.md, "Efforts (1.3.1)"): `MODEL has
/// no "E" effort (available: a, b)` (agy 1.3.1), or `invalid --effort "E"
/// (valid: a, b)` (1.1.18).
fn effort_refused(detail: &str) -> Option<Failure> {
    let listed = |after: &str| -> Vec<String> {
        detail
            .split_once(after)
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| {
                list.split(',')
                    .map(|w| w.trim().to_string())
                    .filter(|w| !w.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some((model, rest)) = detail.split_once(" has no \"") {
        let (effort, _) = rest.split_once("\" effort")?;
        return Some(Failure::EffortRefused {
            model: model.trim().to_string(),
            effort: effort.to_string(),
            available: listed("(available:"),
        });
    }
    let rest = detail.strip_prefix("invalid --effort \"")?;
    let (effort, _) = rest.split_once('"')?;
    Some(Failure::EffortRefused {
        model: String::new(),
        effort: effort.to_string(),
        available: listed("(valid:"),
    })
}

/// agy refused the bridge's input: exit 2 (agy 1.3.3: malformed stream
/// input, or a flag it does not take), or agy's words for a stream-json
/// line it cannot read whatever the exit (1 on agy 1.2.x; none on a warm
/// agy's turn).
fn input_refused(r: &AgyReport<'_>, error: &str) -> Option<Failure> {
    let words = human_sentence(r.stderr, error, None);
    let about_input = words.starts_with("stream input") || words.contains("decode stream input");
    let failed =
        r.exit_code.is_some_and(|c| c != 0) || r.result.is_some_and(|t| t.status == "ERROR");
    if !(r.exit_code == Some(2) || (about_input && failed)) {
        return None;
    }
    // Go's flag parser says what is wrong first, then its usage.
    let first_line = || {
        r.stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("AGY_ERROR:"))
            .map(str::to_string)
    };
    let message = if words.is_empty() {
        first_line().unwrap_or_else(|| "agy gave no reason".into())
    } else {
        words
    };
    Some(Failure::InputRefused { message })
}

/// The indented names under `Available models:`.
fn available_models(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Available models:"))
        .skip(1)
        .take_while(|l| l.starts_with(' ') || l.starts_with('\t'))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Quota or throttle, from AGY_ERROR's fields together with its words: a
/// quota that names a reset time is not retried even though agy marks it
/// `retryable`; a retryable 429 without one is a throttle.
fn quota(
    agy_error: Option<&AgyError>,
    stderr: &str,
    error: &str,
    db_errors: &[String],
) -> Option<Failure> {
    let human = human_sentence(stderr, error, agy_error);
    if let Some(e) = agy_error {
        let exhausted = e.status == "RESOURCE_EXHAUSTED" || e.error_code == 429;
        if exhausted && is_quota_wording(&human) {
            return Some(Failure::QuotaExceeded {
                message: human,
                quota: None,
            });
        }
        if e.retryable && exhausted {
            return Some(Failure::Throttled { message: human });
        }
        return None;
    }
    // Older agy: the quota only as an error step's message.
    let quota = db_errors
        .iter()
        .chain(std::iter::once(&error.to_string()))
        .find(|m| is_quota_wording(m))
        .map(|m| Failure::QuotaExceeded {
            message: m.clone(),
            quota: None,
        });
    // "Eligibility check failed: RESOURCE_EXHAUSTED (code 429)", a result
    // without AGY_ERROR (docs/agy-format.md, "Quota"): a rate outcome.
    quota.or_else(|| {
        (error.contains("RESOURCE_EXHAUSTED") || error.contains("(code 429)")).then(|| {
            Failure::Throttled {
                message: error.trim().to_string(),
            }
        })
    })
}

/// A model or API failure that is not a quota or a throttle: a model
/// without capacity (`UNAVAILABLE (code 503)`, agy 1.3.1 and 1.3.2) or a
/// server-side failure agy marks retryable; else, on exit 3 with agy's
/// report (`AGY_ERROR:`, or an ERROR result), the model call's failure in
/// agy's words (docs/agy-format.md, "Outcomes": exit 3 is a model or API
/// failure since agy 1.2.6).
fn api_failure(r: &AgyReport<'_>, agy_error: Option<&AgyError>, error: &str) -> Option<Failure> {
    let capacity_words = [error, r.stderr]
        .iter()
        .any(|t| t.contains("No capacity available") || t.contains("UNAVAILABLE (code 503)"));
    let server_side = agy_error.is_some_and(|e| {
        e.status == "UNAVAILABLE" || e.error_code == 503 || (e.retryable && e.error_code >= 500)
    });
    if capacity_words || server_side {
        return Some(Failure::ModelUnavailable {
            message: capacity_sentence(r.stderr, error, agy_error),
            ran_tools: r.ran_tools,
        });
    }
    let reported = agy_error.is_some() || r.result.is_some_and(|t| t.status == "ERROR");
    (r.exit_code == Some(3) && reported).then(|| Failure::ModelCallFailed {
        message: without_code(&failure_sentence(error, agy_error, r.stderr, r.db_errors))
            .to_string(),
    })
}

/// agy's sentence for a model without capacity, without its `STATUS (code
/// N): ` prefix or its `API error (attempt N): ` log prefix: the words
/// are shown as agy's, the code in ours.
fn capacity_sentence(stderr: &str, error: &str, agy_error: Option<&AgyError>) -> String {
    let human = human_sentence(stderr, error, agy_error);
    let found = if human.is_empty() {
        stderr
            .lines()
            .find(|l| l.contains("No capacity available") || l.contains("(code 503)"))
            .unwrap_or("")
            .trim()
            .to_string()
    } else {
        human
    };
    let sentence = without_code(&found).trim();
    if sentence.is_empty() {
        "agy gave no reason".into()
    } else {
        sentence.to_string()
    }
}

/// `text` after its last `STATUS (code N): ` prefix, if it has one.
fn without_code(text: &str) -> &str {
    match text.rfind("): ") {
        Some(at) if text[..at].contains("(code ") => &text[at + 3..],
        _ => text,
    }
}

fn is_quota_wording(message: &str) -> bool {
    let l = message.to_ascii_lowercase();
    [
        "quota reached",
        "resets in",
        "exhausted your capacity",
        "quota will reset",
        "quota exceeded",
        "insufficient_quota",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// agy's sentence for a failure: the result's `error`, the `error: ...`
/// stderr line, or AGY_ERROR's short error; never the JSON itself.
fn human_sentence(stderr: &str, error: &str, agy_error: Option<&AgyError>) -> String {
    if !error.trim().is_empty() {
        return error.trim().to_string();
    }
    let from_stderr = stderr.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("error:")
            .or_else(|| l.strip_prefix("Error:"))
            .map(|s| s.trim().to_string())
    });
    from_stderr
        .or_else(|| agy_error.map(|e| e.sentence().to_string()))
        .unwrap_or_default()
}

fn failure_sentence(
    error: &str,
    agy_error: Option<&AgyError>,
    stderr: &str,
    db_errors: &[String],
) -> String {
    let human = human_sentence(stderr, error, agy_error);
    if !human.is_empty() {
        return human;
    }
    db_errors
        .last()
        .cloned()
        .or_else(|| last_plain_line(stderr))
        .unwrap_or_else(|| "no error message".into())
}

/// The last stderr line that is not agy's machine-readable JSON.
fn last_plain_line(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("AGY_ERROR:"))
        .map(str::to_string)
}

/// Denied tools and no answer: 1.2.17+ reports `denied_actions` in a
/// SUCCESS result; 1.1.x ends CANCELED with an "auto-denied" stderr note.
/// agy's `no output produced` line (1.1.x, 1.2.7, 1.3.3) says the denial
/// ended the turn: what text came before it was only the model's preamble,
/// so it is the denial even then.
fn denial(r: &AgyReport<'_>) -> Option<Failure> {
    if r.answered && !says_no_output(r.stderr) {
        return None;
    }
    let mut actions = denied_actions(r);
    if actions.is_empty() {
        return None;
    }
    actions.dedup();
    Some(Failure::Denied { actions })
}

/// Every action agy denied this turn, from the result or from stderr.
pub(crate) fn denied_actions(r: &AgyReport<'_>) -> Vec<DeniedAction> {
    if let Some(t) = r.result {
        if !t.denied_actions.is_empty() {
            return t.denied_actions.clone();
        }
    }
    r.stderr
        .lines()
        .filter(|l| l.contains("auto-denied") || l.contains(NO_OUTPUT))
        .map(|l| DeniedAction {
            action: quoted_after(l, "required the ").unwrap_or_default(),
            display_name: String::new(),
        })
        .collect()
}

/// agy's stderr words when a denied tool ended the turn without an answer
/// (`jetski: no output produced — ...` on 1.1.x and 1.2.7; 1.3.3 prints
/// `no output produced` with its denials).
const NO_OUTPUT: &str = "no output produced";

/// Whether agy said a denial ended the turn without output.
fn says_no_output(stderr: &str) -> bool {
    stderr.lines().any(|l| l.contains(NO_OUTPUT))
}

/// The first `"..."` after `marker` in `line`.
fn quoted_after(line: &str, marker: &str) -> Option<String> {
    let rest = line.split_once(marker)?.1;
    let rest = rest.strip_prefix('"')?;
    Some(rest.split_once('"')?.0.to_string())
}

/// A notice for a turn that answered although agy denied something.
pub(crate) fn denial_notice(r: &AgyReport<'_>) -> Option<String> {
    if !r.answered || says_no_output(r.stderr) {
        return None;
    }
    let actions = denied_actions(r);
    (!actions.is_empty()).then(|| {
        format!(
            "agy answered without {}: {HOW_TO_ALLOW}.",
            denied_list(&actions)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agy_error_sentence_drops_the_code_prefix() {
        let e = AgyError {
            short_error: "RESOURCE_EXHAUSTED (code 429): Slow down.".into(),
            ..AgyError::default()
        };
        assert_eq!(e.sentence(), "Slow down.");
    }

    #[test]
    fn quota_with_reset_is_not_retryable_even_when_agy_says_so() {
        let stderr = "error: Individual quota reached. Resets in 1h2m.\nAGY_ERROR: {\"short_error\":\"RESOURCE_EXHAUSTED (code 429): Individual quota reached. Resets in 1h2m.\",\"status\":\"RESOURCE_EXHAUSTED\",\"error_code\":429,\"retryable\":true}\n";
        let f = classify(&AgyReport {
            exit_code: Some(3),
            stderr,
            ..AgyReport::default()
        });
        assert_eq!(
            f,
            Some(Failure::QuotaExceeded {
                message: "Individual quota reached. Resets in 1h2m.".into(),
                quota: None,
            })
        );
        assert!(!f.as_ref().is_some_and(Failure::retryable));
        let mut f = f.expect("a failure");
        assert!(f.wants_quota());
        f.set_quota(
            "Gemini 5-hour quota is used up (0% left); it resets at 14:05 UTC (in 2 h 10 min)."
                .into(),
        );
        assert!(!f.wants_quota());
        assert_eq!(
            f.to_string(),
            "agy quota exceeded: Individual quota reached. Resets in 1h2m. Gemini 5-hour quota is used up (0% left); it resets at 14:05 UTC (in 2 h 10 min)."
        );
        // agy's sentence without a full stop gets one before ours.
        let mut bare = Failure::QuotaExceeded {
            message: "You have exhausted your capacity (429 RESOURCE_EXHAUSTED)".into(),
            quota: None,
        };
        assert_eq!(
            bare.to_string(),
            "agy quota exceeded: You have exhausted your capacity (429 RESOURCE_EXHAUSTED)"
        );
        bare.set_quota("agy reports no quota buckets.".into());
        assert!(bare
            .to_string()
            .ends_with("RESOURCE_EXHAUSTED). agy reports no quota buckets."));
    }

    #[test]
    fn retryable_throttle_without_quota_words_is_retried() {
        let stderr = "AGY_ERROR: {\"short_error\":\"RESOURCE_EXHAUSTED (code 429): Too many requests, slow down.\",\"status\":\"RESOURCE_EXHAUSTED\",\"error_code\":429,\"retryable\":true}\n";
        let f = classify(&AgyReport {
            exit_code: Some(3),
            stderr,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f,
            Failure::Throttled {
                message: "Too many requests, slow down.".into()
            }
        );
        assert!(f.retryable());
    }

    #[test]
    fn model_list_is_read_from_stderr() {
        let stderr = "error: invalid model selection (--model \"x-1\" --effort \"\"): model x-1 is not recognized as a known model\nAvailable models:\n  Alpha (High)\n  Beta\n";
        let f = classify(&AgyReport {
            exit_code: Some(1),
            stderr,
            ..AgyReport::default()
        });
        assert_eq!(
            f,
            Some(Failure::UnknownModel {
                model: "x-1".into(),
                available: vec!["Alpha (High)".into(), "Beta".into()]
            })
        );
    }

    #[test]
    fn results_without_a_conversation_are_named_by_what_happened() {
        let eligibility = TurnResult {
            status: "ERROR".into(),
            error: Some("Eligibility check failed: RESOURCE_EXHAUSTED (code 429)".into()),
            ..TurnResult::default()
        };
        let f = classify(&AgyReport {
            exit_code: Some(1),
            result: Some(&eligibility),
            ..AgyReport::default()
        })
        .expect("a failure");
        assert!(matches!(f, Failure::Throttled { .. }), "{f:?}");
        assert!(f.retryable(), "a rate outcome is retried");
        let other = TurnResult {
            status: "ERROR".into(),
            error: Some("workspace is not trusted".into()),
            ..TurnResult::default()
        };
        let f = classify(&AgyReport {
            exit_code: Some(1),
            result: Some(&other),
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f.to_string(),
            "agy failed (exit 1): before starting a conversation: workspace is not trusted"
        );
        assert!(!f.retryable());
    }

    #[test]
    fn a_killed_agy_says_the_conversation_can_be_resumed() {
        let f = classify(&AgyReport {
            signal: Some(9),
            conversation_began: true,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f,
            Failure::Stopped {
                how: "signal 9".into()
            }
        );
        assert!(f
            .to_string()
            .contains("send your message again to resume it"));
        assert!(!f.retryable());
        // Exit 1 with nothing said, before any conversation: not "stopped".
        let early = classify(&AgyReport {
            exit_code: Some(1),
            ..AgyReport::default()
        });
        assert!(
            matches!(early, Some(Failure::AgyFailed { code: 1, .. })),
            "{early:?}"
        );
    }

    /// agy 1.3.1's words for an effort a model does not take, and 1.1.18's
    /// for a word that is no effort (docs/agy-format.md, "Efforts (1.3.1)").
    #[test]
    fn a_refused_effort_names_the_efforts_the_model_takes() {
        let stderr = "error: invalid model selection (--model \"gemini-3.8-flash\" --effort \"xhigh\"): gemini-3.8-flash has no \"xhigh\" effort (available: low, medium, high)\n";
        let f = classify(&AgyReport {
            exit_code: Some(1),
            stderr,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f,
            Failure::EffortRefused {
                model: "gemini-3.8-flash".into(),
                effort: "xhigh".into(),
                available: vec!["low".into(), "medium".into(), "high".into()],
            }
        );
        assert!(
            f.to_string().starts_with(
                "agy's model gemini-3.8-flash has no \"xhigh\" effort; it takes low, medium, high."
            ),
            "{f}"
        );
        assert!(!f.retryable());
        let bogus = "Error: invalid model selection (--model \"\" --effort \"bogus\"): invalid --effort \"bogus\" (valid: low, medium, high)\n";
        let f = classify(&AgyReport {
            exit_code: Some(1),
            stderr: bogus,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f.to_string(),
            "agy does not take \"bogus\" as an effort; it takes low, medium, high"
        );
    }

    /// Exit 2 (agy 1.3.3): the bridge's own input refused, in agy's words;
    /// the same words on exit 1 (agy 1.2.x) are the same refusal.
    #[test]
    fn refused_input_is_named_as_the_bridges_not_the_users() {
        let result = TurnResult {
            conversation_id: "fc27d94d-6d8e-4659-abab-f742e6b03e47".into(),
            status: "ERROR".into(),
            error: Some("stream input message is missing the \"event\" field".into()),
            ..TurnResult::default()
        };
        for exit in [2, 1] {
            let f = classify(&AgyReport {
                exit_code: Some(exit),
                result: Some(&result),
                conversation_began: true,
                ..AgyReport::default()
            })
            .expect("a failure");
            assert_eq!(
                f,
                Failure::InputRefused {
                    message: "stream input message is missing the \"event\" field".into()
                }
            );
            assert!(f.to_string().contains("update agy-bridge"), "{f}");
            assert!(!f.retryable());
        }
        let flag = classify(&AgyReport {
            exit_code: Some(2),
            stderr: "flag provided but not defined: -frobnicate\nUsage of agy:\n",
            ..AgyReport::default()
        })
        .expect("a failure");
        assert!(flag.to_string().contains("AGY_EXTRA_ARGS"), "{flag}");
    }

    /// Exit 3: a model without capacity (503) is worth another try when no
    /// tool ran; any other model failure is agy's sentence.
    #[test]
    fn exit_3_is_a_model_failure_and_capacity_is_retried_without_tools() {
        let stderr = "API error (attempt 1): UNAVAILABLE (code 503): No capacity available for model gemini-3.1-pro-high on the server\n\
                      error: No capacity available for model gemini-3.1-pro-high on the server\n\
                      AGY_ERROR: {\"short_error\":\"UNAVAILABLE (code 503): No capacity available for model gemini-3.1-pro-high on the server\",\"status\":\"UNAVAILABLE\",\"error_code\":503,\"retryable\":true}\n";
        for ran_tools in [false, true] {
            let f = classify(&AgyReport {
                exit_code: Some(3),
                stderr,
                ran_tools,
                ..AgyReport::default()
            })
            .expect("a failure");
            assert_eq!(
                f,
                Failure::ModelUnavailable {
                    message: "No capacity available for model gemini-3.1-pro-high on the server"
                        .into(),
                    ran_tools
                }
            );
            assert_eq!(f.retryable(), !ran_tools);
        }
        // Only agy's log line: the same.
        let f = classify(&AgyReport {
            exit_code: Some(3),
            stderr: "API error (attempt 1): UNAVAILABLE (code 503): No capacity available for model m on the server\n",
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f,
            Failure::ModelUnavailable {
                message: "No capacity available for model m on the server".into(),
                ran_tools: false
            }
        );
        let other = "error: Request contains an invalid argument.\nAGY_ERROR: {\"short_error\":\"INVALID_ARGUMENT (code 400): Request contains an invalid argument.\",\"status\":\"INVALID_ARGUMENT\",\"error_code\":400,\"retryable\":false}\n";
        let f = classify(&AgyReport {
            exit_code: Some(3),
            stderr: other,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert_eq!(
            f.to_string(),
            "agy's model call failed (exit 3): Request contains an invalid argument."
        );
        assert!(!f.retryable());
        // A crash with exit 3 and no report of agy's is no model failure.
        let crash = classify(&AgyReport {
            exit_code: Some(3),
            stderr: "fake-agy: simulated crash\n",
            ..AgyReport::default()
        });
        assert!(
            matches!(crash, Some(Failure::AgyFailed { code: 3, .. })),
            "{crash:?}"
        );
    }

    /// agy 1.3.3: a denied tool ends the turn at once, `no output produced`
    /// on stderr: what the model said before it is a preamble, not an answer.
    #[test]
    fn a_denial_that_ended_the_turn_is_the_denial_even_after_a_preamble() {
        let result = TurnResult {
            status: "SUCCESS".into(),
            denied_actions: vec![DeniedAction {
                action: "command".into(),
                display_name: "RunCommand".into(),
            }],
            ..TurnResult::default()
        };
        let report = AgyReport {
            exit_code: Some(0),
            stderr: "no output produced\n",
            result: Some(&result),
            answered: true,
            ..AgyReport::default()
        };
        assert_eq!(
            classify(&report),
            Some(Failure::Denied {
                actions: result.denied_actions.clone()
            })
        );
        assert_eq!(denial_notice(&report), None, "said once, as the failure");
        // The line alone, without denied_actions: still a denial.
        let bare = TurnResult {
            status: "SUCCESS".into(),
            ..TurnResult::default()
        };
        let f = classify(&AgyReport {
            exit_code: Some(0),
            stderr: "no output produced\n",
            result: Some(&bare),
            ..AgyReport::default()
        });
        assert!(matches!(f, Some(Failure::Denied { .. })), "{f:?}");
    }

    #[test]
    fn denial_with_an_answer_is_a_notice_not_a_failure() {
        let result = TurnResult {
            status: "SUCCESS".into(),
            response: "partial".into(),
            denied_actions: vec![DeniedAction {
                action: "command".into(),
                display_name: "RunCommand".into(),
            }],
            ..TurnResult::default()
        };
        let report = AgyReport {
            exit_code: Some(0),
            result: Some(&result),
            answered: true,
            ..AgyReport::default()
        };
        assert_eq!(classify(&report), None);
        let notice = denial_notice(&report).expect("a notice");
        assert!(
            notice.contains("RunCommand (command permission)"),
            "{notice}"
        );
        assert!(notice.contains("/agy permissions allow"), "{notice}");
    }
}
