//! pi decides agy's tool calls (`ask` mode): the pi side of the gate.
//!
//! Each call the gate hears of ([`crate::gate::Question`]) is shown at
//! once as the tool's line (from agy's hook payload, before the database
//! has the step). A call the policy decided needs nothing more, except a
//! line when it was denied. A call that waits is put to pi as a
//! `permission_request` (the extension asks with pi's own dialog) and
//! answered when the extension's `permission` line comes: allow once, allow
//! for this session (a rule the session's gates share for its life), or
//! deny with a reason that reaches the model. The stream says each decision
//! in a line. Questions still open when the turn ends are denied (dropping
//! them does: the gate's hook hears no).

use crate::follow::subject;
use crate::gate::policy::session_rule;
use crate::gate::{Grants, Question, Verdict};
use crate::pi::provider::mapper::EventMapper;
use crate::pi::provider::stream::PiStream;
use crate::pi::provider::PiEvent;
use agy_format::hooks::Decision;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use tokio::sync::mpsc;

/// The longest detail a dialog shows (a command line, a path).
const DETAIL_MAX_CHARS: usize = 2000;

/// The extension's answer: `{"type":"permission","id","decision":"allow"|
/// "deny","scope":"once"|"session","reason"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The question answered (the `permission_request`'s id).
    pub id: String,
    /// Whether the user let the call run.
    pub allow: bool,
    /// Allow every call like it for the rest of the session.
    pub for_session: bool,
    /// What the user said with a denial, passed on to agy.
    pub reason: Option<String>,
}

impl Answer {
    /// Read a `permission` line's fields (`None` without an id or with a
    /// decision that is neither allow nor deny: such a line decides nothing).
    pub fn from_value(v: &Value) -> Option<Answer> {
        let id = v.get("id").and_then(Value::as_str)?.to_string();
        let allow = match v.get("decision").and_then(Value::as_str)? {
            "allow" => true,
            "deny" => false,
            _ => return None,
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::trim);
        Some(Answer {
            id,
            allow,
            for_session: allow && text("scope") == Some("session"),
            reason: text("reason").filter(|r| !r.is_empty()).map(str::to_string),
        })
    }
}

/// The questions of one turn.
pub struct Asks {
    /// The gate's questions as they come: agy's tool calls waiting for a decision.
    pub questions: mpsc::Receiver<Question>,
    grants: Grants,
    open: HashMap<String, Question>,
    next_id: u64,
}

impl Asks {
    /// The questions the gate sends on `questions`; `grants` records the
    /// "for this session" answers.
    pub fn new(questions: mpsc::Receiver<Question>, grants: Grants) -> Asks {
        Asks {
            questions,
            grants,
            open: HashMap::new(),
            next_id: 0,
        }
    }

    /// The gate's queue back (a warm session keeps its gate between turns);
    /// questions still open are denied.
    pub(crate) fn into_questions(self) -> mpsc::Receiver<Question> {
        for (_, q) in self.open {
            q.answer(Decision::deny("the turn ended before the user decided"));
        }
        self.questions
    }

    /// A call the gate heard of: its lines for the stream (the tool, and a
    /// denial), and pi asked when agy waits for a decision.
    pub fn question<W: Write>(
        &mut self,
        q: Question,
        mapper: &mut EventMapper,
        pi: &mut PiStream<W>,
    ) -> Vec<String> {
        let idx = q.payload.step_idx as i64;
        let (tool, arguments) = (q.tool().to_string(), q.arguments());
        let mut lines: Vec<String> = mapper
            .announce_call(&tool, &arguments)
            .into_iter()
            .collect();
        match &q.verdict {
            Verdict::Allow(_) => {}
            Verdict::Deny(reason) => {
                mapper.note_denied(idx, reason);
                lines.push(decision_line(
                    &tool,
                    &arguments,
                    &format!("denied: {reason}"),
                ));
            }
            Verdict::Ask(note) if q.waits() => {
                self.next_id += 1;
                let id = format!("agy-gate-{}", self.next_id);
                pi.permission_request(request(&id, &tool, &arguments, note.as_deref()));
                self.open.insert(id, q);
            }
            Verdict::Ask(_) => {}
        }
        lines
    }

    /// pi's answer: agy gets it, the stream a line saying it.
    pub fn answer(&mut self, answer: Answer, mapper: &mut EventMapper) -> Vec<String> {
        let Some(q) = self.open.remove(&answer.id) else {
            return vec![format!(
                "\n[agy-bridge: pi answered permission question {:?}, which is not open; it was ignored]\n",
                answer.id
            )];
        };
        let idx = q.payload.step_idx as i64;
        let (tool, arguments) = (q.tool().to_string(), q.arguments());
        let (decision, words) = if answer.allow && answer.for_session {
            let rule = session_rule(&tool, &arguments);
            let words = format!("allowed for this session ({rule})");
            self.grants.grant(rule);
            (Decision::Allow, words)
        } else if answer.allow {
            (Decision::Allow, "allowed once".to_string())
        } else {
            let reason = answer
                .reason
                .unwrap_or_else(|| "the user did not allow it".to_string());
            mapper.note_denied(idx, &reason);
            (
                Decision::deny(reason.clone()),
                format!("denied by the user: {reason}"),
            )
        };
        let line = decision_line(&tool, &arguments, &words);
        if q.answer(decision) {
            vec![line]
        } else {
            vec![format!(
                "\n[agy-bridge: the answer came after agy stopped waiting for it; {} was not allowed]\n",
                subject::tool_line(&tool, &arguments, None).text()
            )]
        }
    }
}

/// `[agy tool run_command cargo test: allowed once]`.
fn decision_line(tool: &str, arguments: &str, words: &str) -> String {
    let line = subject::tool_line(tool, arguments, None);
    format!("\n[agy tool {}: {words}]\n", line.text())
}

/// The question as pi shows it: what agy wants to do and to what, in full,
/// and the gate's note (where a path really leads).
fn request(id: &str, tool: &str, arguments: &str, note: Option<&str>) -> PiEvent {
    let line = subject::tool_line(tool, arguments, None);
    let full = subject::rule_subject(tool, arguments);
    let mut detail: String = if full.is_empty() {
        line.subject.clone().unwrap_or_default()
    } else {
        full.chars().take(DETAIL_MAX_CHARS).collect()
    };
    if let Some(note) = note {
        detail = format!("{detail}\n({note})");
    }
    PiEvent::PermissionRequest {
        id: id.to_string(),
        tool: tool.to_string(),
        title: format!("agy wants to use {}", line.label),
        detail,
        session_rule: session_rule(tool, arguments).to_string(),
    }
}
