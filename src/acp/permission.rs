//! The gate's question as `session/request_permission`, and the client's
//! answer as the gate's decision.
//!
//! A call the gate's policy leaves to a person ([`Verdict::Ask`](crate::gate::Verdict::Ask)) is put to
//! the client with four options: allow once, allow always (a session rule
//! in the session's grants, shared by every gate the session opens, as pi's
//! "allow for this session"), reject once, reject always (a session rule
//! this module keeps: a later call it matches is refused without asking).
//! A cancelled request (the turn was cancelled, the client gave up), an
//! answer naming no option we offered, or no answer at all is a denial.

use crate::follow::subject::rule_subject;
use crate::gate::policy::session_rule;
use crate::gate::Grants;
use crate::state::rules::Rule;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
};
use agy_format::hooks::Decision;
use std::sync::{Arc, Mutex};

pub const ALLOW_ONCE: &str = "allow-once";
pub const ALLOW_ALWAYS: &str = "allow-always";
pub const REJECT_ONCE: &str = "reject-once";
pub const REJECT_ALWAYS: &str = "reject-always";

/// What the client chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// The request was cancelled, or answered with no option we offered.
    Cancelled,
}

/// The four options, the session rule named in the "always" ones.
pub fn options(tool: &str, arguments: &str) -> Vec<PermissionOption> {
    let rule = rule_text(&session_rule(tool, arguments));
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Allow for this session ({rule})"),
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            format!("Reject for this session ({rule})"),
            PermissionOptionKind::RejectAlways,
        ),
    ]
}

/// The client's outcome as a choice; an option id we did not offer is a
/// denial, never a guess.
pub fn choice(outcome: &RequestPermissionOutcome) -> Choice {
    match outcome {
        RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
            ALLOW_ONCE => Choice::AllowOnce,
            ALLOW_ALWAYS => Choice::AllowAlways,
            REJECT_ONCE => Choice::RejectOnce,
            REJECT_ALWAYS => Choice::RejectAlways,
            _ => Choice::Cancelled,
        },
        _ => Choice::Cancelled,
    }
}

/// What agy hears, and the words for the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub decision: Decision,
    pub words: String,
}

/// A session's permission state beyond the gate's: its grants (allow
/// always, which the gate's policy reads) and its refusals (reject always).
#[derive(Debug, Clone, Default)]
pub struct SessionRules {
    pub grants: Grants,
    refused: Arc<Mutex<Vec<Rule>>>,
}

impl SessionRules {
    /// A rule of this session's refusals that the call matches.
    pub fn refusal(&self, tool: &str, arguments: &str) -> Option<Rule> {
        let subject = rule_subject(tool, arguments);
        let refused = self.refused.lock().ok()?;
        refused.iter().find(|r| r.matches(tool, &subject)).cloned()
    }

    /// Apply the client's choice for a call of `tool` with `arguments`.
    pub fn decide(&self, choice: Choice, tool: &str, arguments: &str) -> Decided {
        let rule = session_rule(tool, arguments);
        match choice {
            Choice::AllowOnce => decided(Decision::Allow, "allowed once".into()),
            Choice::AllowAlways => {
                let words = format!("allowed for this session ({})", rule_text(&rule));
                self.grants.grant(rule);
                decided(Decision::Allow, words)
            }
            Choice::RejectOnce => decided(
                Decision::deny("the user did not allow it"),
                "denied by the user".into(),
            ),
            Choice::RejectAlways => {
                let words = format!("denied for this session ({})", rule_text(&rule));
                if let Ok(mut refused) = self.refused.lock() {
                    if !refused.contains(&rule) {
                        refused.push(rule);
                    }
                }
                decided(
                    Decision::deny("the user refused calls like this for the rest of the session"),
                    words,
                )
            }
            Choice::Cancelled => decided(
                Decision::deny("the permission request was cancelled before the user decided"),
                "denied: the request was cancelled".into(),
            ),
        }
    }
}

fn decided(decision: Decision, words: String) -> Decided {
    Decided { decision, words }
}

/// `TOOL: GLOB`, as rules are written.
fn rule_text(rule: &Rule) -> String {
    format!("{}: {}", rule.tool, rule.glob)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;

    fn selected(id: &'static str) -> RequestPermissionOutcome {
        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
    }

    #[test]
    fn four_options_of_the_four_kinds() {
        let opts = options("run_command", r#"{"CommandLine":"cargo test --all"}"#);
        let kinds: Vec<_> = opts.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways
            ]
        );
        assert_eq!(
            opts[1].name,
            "Allow for this session (run_command: cargo test *)"
        );
    }

    #[test]
    fn answers_become_decisions_and_session_rules() {
        let rules = SessionRules::default();
        let args = r#"{"CommandLine":"cargo test"}"#;
        assert_eq!(choice(&selected(ALLOW_ONCE)), Choice::AllowOnce);
        assert_eq!(choice(&selected("something-else")), Choice::Cancelled);
        assert_eq!(
            choice(&RequestPermissionOutcome::Cancelled),
            Choice::Cancelled
        );
        let d = rules.decide(Choice::AllowAlways, "run_command", args);
        assert_eq!(d.decision, Decision::Allow);
        assert!(rules.grants.find(|r| r.tool == "run_command").is_some());
        let d = rules.decide(Choice::Cancelled, "run_command", args);
        assert!(matches!(d.decision, Decision::Deny { .. }));
        assert!(rules
            .refusal("run_command", r#"{"CommandLine":"rm -rf x"}"#)
            .is_none());
        rules.decide(
            Choice::RejectAlways,
            "run_command",
            r#"{"CommandLine":"rm -rf x"}"#,
        );
        assert!(rules
            .refusal("run_command", r#"{"CommandLine":"rm -rf y"}"#)
            .is_some());
        assert!(rules
            .refusal("run_command", r#"{"CommandLine":"ls"}"#)
            .is_none());
    }
}
