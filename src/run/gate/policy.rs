//! What the gate decides without asking anyone: the bridge's private
//! directories are never touched, the bridge's own MCP server is pi's to
//! gate, and the user's rules pass what they name. Everything else is asked
//! of the user, or denied with a reason saying how to allow it when nobody
//! can be asked (`pi -p`, `agy-bridge run`).

use crate::follow::subject::{mcp_target, rule_subject};
use crate::state::rules::Rule;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What a pi session's user allowed "for this session": one list for every
/// gate the session opens (each cold turn's, each warm agy's), so a grant
/// outlives the agy it was given on.
#[derive(Debug, Clone, Default)]
pub struct Grants(Arc<Mutex<Vec<Rule>>>);

impl Grants {
    pub fn grant(&self, rule: Rule) {
        if let Ok(mut rules) = self.0.lock() {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }

    /// The first granted rule that `passes`.
    pub fn find(&self, passes: impl FnMut(&&Rule) -> bool) -> Option<Rule> {
        self.0.lock().ok()?.iter().find(passes).cloned()
    }
}

/// The policy's call on one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed without asking; the words say by what.
    Allow(String),
    /// Denied; the reason reaches the model (and the user's stream).
    Deny(String),
    /// Someone must decide.
    Ask,
}

/// The gate's standing decisions for a session.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Rules that pass a call without asking (built-in and the user's).
    pub rules: Vec<Rule>,
    /// The bridge's private directories: a call that names one is denied.
    pub private: Vec<PathBuf>,
    /// The MCP server that is pi's own tools (pi gates those itself).
    pub own_server: Option<String>,
    /// Whether a person can be asked (pi has a UI).
    pub can_ask: bool,
    /// Rules the user granted for this session ("allow for this session"),
    /// shared by every gate of the session.
    pub granted: Grants,
    /// agy's workspace: a rule's path pattern may be relative to it
    /// (`write_to_file: docs/*`).
    pub cwd: Option<PathBuf>,
}

impl Policy {
    /// The call of `tool` with `arguments` (JSON text).
    pub fn decide(&self, tool: &str, arguments: &str) -> Verdict {
        if let Some(dir) = self.private_named(arguments) {
            return Verdict::Deny(format!(
                "agy-bridge keeps its private files in {}; no tool call may touch them",
                dir.display()
            ));
        }
        if let (Some(own), Some((server, _))) = (&self.own_server, mcp_target(tool, arguments)) {
            if &server == own {
                return Verdict::Allow("pi's own tool (pi decides it)".into());
            }
        }
        let subjects = self.subjects(tool, arguments);
        let passes = |r: &&Rule| subjects.iter().any(|s| r.matches(tool, s));
        if let Some(rule) = self.rules.iter().find(passes) {
            return Verdict::Allow(format!("rule {rule}"));
        }
        if let Some(rule) = self.granted.find(passes) {
            return Verdict::Allow(format!("allowed for this session ({rule})"));
        }
        if self.can_ask {
            return Verdict::Ask;
        }
        Verdict::Deny(format!(
            "{tool} needs the user's permission and nobody can be asked here (no pi UI); to allow calls like it, the user adds a rule such as `{}` (`/agy allow RULE`, `agy-bridge config allow add RULE` or AGY_ALLOW), or sets permissions to allow",
            session_rule(tool, arguments)
        ))
    }

    /// What a rule may match for this call: its whole subject, and a path
    /// inside the workspace also relative to it. None when a rule must not
    /// decide: a command line that runs more than one command (`cargo
    /// test*` must not pass `cargo test; rm -rf ~`), a path that climbs
    /// out with `..` (`docs/*` must not pass `docs/../../.ssh/x`).
    fn subjects(&self, tool: &str, arguments: &str) -> Vec<String> {
        let subject = rule_subject(tool, arguments);
        if tool == "run_command" {
            return if has_shell_control(&subject) {
                Vec::new()
            } else {
                vec![subject]
            };
        }
        if std::path::Path::new(&subject)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Vec::new();
        }
        let relative = self
            .cwd
            .as_deref()
            .and_then(|cwd| std::path::Path::new(&subject).strip_prefix(cwd).ok())
            .map(|rel| rel.to_string_lossy().into_owned())
            .filter(|rel| !rel.is_empty());
        std::iter::once(subject).chain(relative).collect()
    }

    /// The private directory the arguments name, if any. Any mention
    /// counts (a command line, a path, a nested argument): a tool that
    /// could write there could rewrite the gate itself.
    fn private_named(&self, arguments: &str) -> Option<&PathBuf> {
        self.private.iter().find(|dir| {
            let d = dir.to_string_lossy();
            !d.is_empty() && (arguments.contains(d.as_ref()) || json_escaped(arguments, &d))
        })
    }
}

/// Whether a command line does more than run one command: chains,
/// pipes, substitutions, redirections, several lines.
fn has_shell_control(command: &str) -> bool {
    command.contains("$(")
        || command
            .chars()
            .any(|c| matches!(c, ';' | '&' | '|' | '`' | '>' | '<' | '\n' | '\r'))
}

/// `arguments` names `dir` with JSON's escaping of `/` (`\/`).
fn json_escaped(arguments: &str, dir: &str) -> bool {
    arguments.contains(&dir.replace('/', "\\/"))
}

/// The rule "allow for this session" grants for a call: the same command
/// (its program and first word after it), the same MCP tool, or every call
/// of a tool that names a file, a place or nothing.
pub(crate) fn session_rule(tool: &str, arguments: &str) -> Rule {
    let subject = rule_subject(tool, arguments);
    let glob = if tool == "run_command" {
        let words: Vec<&str> = subject.split_whitespace().take(2).collect();
        match words.as_slice() {
            [] => "*".to_string(),
            [program] => format!("{program}*"),
            [program, first] if first.starts_with('-') => format!("{program}*"),
            [program, first] => format!("{program} {first}*"),
            _ => "*".to_string(),
        }
    } else if mcp_target(tool, arguments).is_some() {
        subject
    } else {
        "*".to_string()
    };
    Rule {
        tool: tool.to_string(),
        glob,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(can_ask: bool) -> Policy {
        Policy {
            rules: vec![
                Rule::parse("view_file: *").unwrap(),
                Rule::parse("run_command: cargo test*").unwrap(),
            ],
            private: vec![PathBuf::from("/tmp/agy-bridge-gate-1")],
            own_server: Some("pi".into()),
            can_ask,
            granted: Grants::default(),
            cwd: Some(PathBuf::from("/w")),
        }
    }

    #[test]
    fn rules_pass_private_dirs_never_and_the_rest_is_asked_or_denied() {
        let p = policy(true);
        assert!(matches!(
            p.decide("view_file", r#"{"AbsolutePath":"/w/a.rs"}"#),
            Verdict::Allow(_)
        ));
        assert!(matches!(
            p.decide("run_command", r#"{"CommandLine":"cargo test --lib"}"#),
            Verdict::Allow(_)
        ));
        assert_eq!(
            p.decide("run_command", r#"{"CommandLine":"rm -rf /"}"#),
            Verdict::Ask
        );
        // A rule's glob is matched against the whole command.
        // A glob never passes a second command chained after the first.
        for chained in [
            "cargo test; rm -rf /",
            "cargo test && curl x | sh",
            "cargo test $(rm x)",
            "cargo test `rm x`",
            "cargo test\nrm x",
            "cargo test > /etc/x",
        ] {
            let args = serde_json::json!({"CommandLine": chained}).to_string();
            assert_eq!(p.decide("run_command", &args), Verdict::Ask, "{chained}");
        }
        let private = p.decide(
            "view_file",
            r#"{"AbsolutePath":"/tmp/agy-bridge-gate-1/gate.json"}"#,
        );
        assert!(
            matches!(private, Verdict::Deny(ref r) if r.contains("private")),
            "{private:?}"
        );
        let escaped = p.decide(
            "run_command",
            r#"{"CommandLine":"cat \/tmp\/agy-bridge-gate-1\/gate.json"}"#,
        );
        assert!(matches!(escaped, Verdict::Deny(_)), "{escaped:?}");
        let own = p.decide(
            "call_mcp_tool",
            r#"{"ServerName":"pi","ToolName":"todo","Arguments":{}}"#,
        );
        assert!(matches!(own, Verdict::Allow(_)), "{own:?}");
        let other = p.decide(
            "call_mcp_tool",
            r#"{"ServerName":"notes","ToolName":"add","Arguments":{}}"#,
        );
        assert_eq!(other, Verdict::Ask);
        let Verdict::Deny(why) = policy(false).decide("write_to_file", r#"{"TargetFile":"/w/x"}"#)
        else {
            panic!("no UI: denied");
        };
        assert!(
            why.contains("write_to_file: *") && why.contains("/agy allow"),
            "{why}"
        );
    }

    #[test]
    fn path_rules_read_the_workspace_relative_path_and_never_climb_out() {
        let mut p = policy(true);
        p.rules.push(Rule::parse("write_to_file: docs/*").unwrap());
        let write = |path: &str| {
            p.decide(
                "write_to_file",
                &serde_json::json!({"TargetFile": path}).to_string(),
            )
        };
        assert!(matches!(write("/w/docs/a.md"), Verdict::Allow(_)));
        assert!(matches!(write("docs/a.md"), Verdict::Allow(_)));
        assert_eq!(write("/w/src/a.rs"), Verdict::Ask);
        assert_eq!(
            write("/w/docs/../../home/u/.ssh/authorized_keys"),
            Verdict::Ask
        );
        assert_eq!(write("/elsewhere/docs/a.md"), Verdict::Ask);
    }

    #[test]
    fn session_grants_name_the_command_or_the_tool() {
        let rule = |t: &str, a: &str| session_rule(t, a).to_string();
        assert_eq!(
            rule("run_command", r#"{"CommandLine":"cargo test --lib"}"#),
            "run_command: cargo test*"
        );
        assert_eq!(
            rule("run_command", r#"{"CommandLine":"ls -la"}"#),
            "run_command: ls*"
        );
        assert_eq!(
            rule("write_to_file", r#"{"TargetFile":"/w/x"}"#),
            "write_to_file: *"
        );
        assert_eq!(
            rule(
                "call_mcp_tool",
                r#"{"ServerName":"notes","ToolName":"add"}"#
            ),
            "call_mcp_tool: notes/add"
        );
        let p = policy(true);
        p.granted.grant(session_rule(
            "run_command",
            r#"{"CommandLine":"npm run build"}"#,
        ));
        assert!(matches!(
            p.decide("run_command", r#"{"CommandLine":"npm run lint"}"#),
            Verdict::Allow(_)
        ));
        assert_eq!(
            p.decide("run_command", r#"{"CommandLine":"npx evil"}"#),
            Verdict::Ask
        );
    }
}
