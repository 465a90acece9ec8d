//! What the gate decides without asking anyone, in this order:
//!
//! 1. a call it cannot read one way (two keys agy reads as one, a value of
//!    the wrong type: `call.rs`) is denied;
//! 2. a call that reaches the bridge's private directories, by any
//!    spelling, is denied: every path argument is resolved first
//!    (`paths.rs`), a listing or search whose root holds one counts,
//!    and so does any argument that names one;
//! 3. the bridge's own MCP server is pi's to gate: allowed;
//! 4. a path outside the workspace (pi's cwd and agy's `workspacePaths`;
//!    for read-only tools also agy's own MCP descriptions and the
//!    conversation's artifacts) is asked, whatever the rules say: what agy
//!    reads goes to the model;
//! 5. inside it, the user's rules and this session's grants pass what
//!    they name: a command by its words, and only a command that makes the
//!    shell compute nothing (`command.rs`); a path as resolved;
//! 6. everything else is asked of the user, or denied with a reason saying
//!    how to allow it when nobody can be asked (`pi -p`, `agy-bridge run`).

use super::call::{read_args, readings, CallArgs, PathKind};
use super::command::plain_words;
use super::paths::{resolve, resolved_dir, within};
use crate::follow::subject::{mcp_target, rule_subject};
use crate::state::rules::{default_allow, Rule, RUN_COMMAND};
use agy_format::hooks::ToolPayload;
use agy_format::text::shell_word;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a pi session's user allowed "for this session": one list for every
/// gate the session opens (each cold turn's, each warm agy's), so a grant
/// outlives the agy it was given on.
#[derive(Debug, Clone, Default)]
pub struct Grants(Arc<Mutex<Vec<Rule>>>);

impl Grants {
    pub(crate) fn grant(&self, rule: Rule) {
        if let Ok(mut rules) = self.0.lock() {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }

    /// The first granted rule that `passes`.
    pub(crate) fn find(&self, passes: impl FnMut(&&Rule) -> bool) -> Option<Rule> {
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
    /// Someone must decide; the words, when there are any, say what the
    /// person should know beyond the call itself (where a path really
    /// leads).
    Ask(Option<String>),
}

/// The gate's standing decisions for a session.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Rules that pass a call without asking (built-in and the user's).
    pub rules: Vec<Rule>,
    /// The bridge's private directories: a call that reaches one is denied.
    pub private: Vec<PathBuf>,
    /// The MCP server that is pi's own tools (pi gates those itself).
    pub own_server: Option<String>,
    /// Whether a person can be asked (pi has a UI).
    pub can_ask: bool,
    /// Rules the user granted for this session ("allow for this session"),
    /// shared by every gate of the session.
    pub granted: Grants,
    /// agy's workspace as the bridge started it (pi's cwd); agy's own
    /// `workspacePaths` join it for each call. Relative paths are read
    /// against it, and a rule passes only inside the workspace.
    pub cwd: Option<PathBuf>,
    /// Places beside the workspace that agy's read-only tools may read
    /// unasked: agy's own (the MCP tools' descriptions it writes, which its
    /// model reads before calling one).
    pub agy_dirs: Vec<PathBuf>,
    /// The user's home, where a path's `~` leads.
    pub home: Option<PathBuf>,
}

/// Where one call may reach without asking, every directory resolved.
struct Places {
    /// Where relative paths are read from.
    base: PathBuf,
    workspace: Vec<PathBuf>,
    /// Also readable by read-only tools.
    agy_own: Vec<PathBuf>,
    private: Vec<PathBuf>,
}

/// One path argument with where each of its readings leads (`None`: a
/// reading that cannot be placed).
struct Resolved {
    kind: PathKind,
    raw: String,
    places: Vec<Option<PathBuf>>,
}

/// Where agy keeps each conversation's artifacts, under the user's home
/// (`brain/<id>/`): the only place a payload's `artifactDirectoryPath` is
/// believed.
const AGY_BRAIN: &str = ".gemini/antigravity-cli/brain";

impl Policy {
    /// The call agy is about to make, as its hook payload shows it.
    pub(crate) fn decide(&self, payload: &ToolPayload) -> Verdict {
        let tool = payload.tool_call.name.as_str();
        let args = match read_args(&payload.tool_call.args) {
            Ok(args) => args,
            Err(why) => {
                return Verdict::Deny(format!(
                    "agy-bridge refused this {tool} call, which cannot be read one way: {why}"
                ))
            }
        };
        let places = self.places(payload);
        let resolved = self.resolve_all(&args, &places);
        if let Some(dir) = private_reached(&args, &resolved, &places) {
            return Verdict::Deny(format!(
                "agy-bridge keeps its private files in {}; no tool call may touch them",
                dir.display()
            ));
        }
        let arguments = payload.arguments();
        if let (Some(own), Some((server, _))) = (&self.own_server, mcp_target(tool, &arguments)) {
            if &server == own {
                return Verdict::Allow("pi's own tool (pi decides it)".into());
            }
        }
        if let Some(outside) = outside(tool, &resolved, &places) {
            return self.outside_verdict(tool, &outside);
        }
        if let Some(verdict) = self.ruled(tool, &args, &resolved, &places, &arguments) {
            return verdict;
        }
        if self.can_ask {
            return Verdict::Ask(None);
        }
        Verdict::Deny(format!(
            "{tool} needs the user's permission and nobody can be asked here (no pi UI); to allow calls like it, the user adds a rule such as `{}` (`/agy allow RULE`, `agy-bridge config allow add RULE` or AGY_ALLOW), or sets permissions to allow",
            session_rule(tool, &arguments)
        ))
    }

    /// The places of this call: the workspace (the bridge's and agy's
    /// `workspacePaths`), agy's own directories (with the conversation's
    /// artifacts when they lie in agy's `brain/`), the private directories.
    fn places(&self, payload: &ToolPayload) -> Places {
        let workspace: Vec<PathBuf> = self
            .cwd
            .iter()
            .cloned()
            .chain(payload.workspace_paths.iter().map(PathBuf::from))
            .filter(|p| p.is_absolute())
            .map(|p| resolved_dir(&p))
            .collect();
        let mut agy_own: Vec<PathBuf> = self.agy_dirs.iter().map(|d| resolved_dir(d)).collect();
        let artifacts = PathBuf::from(&payload.artifact_directory_path);
        let brain = self.home.as_ref().map(|h| resolved_dir(&h.join(AGY_BRAIN)));
        if artifacts.is_absolute() {
            let artifacts = resolved_dir(&artifacts);
            if brain.is_some_and(|brain| within(&artifacts, &brain) && artifacts != brain) {
                agy_own.push(artifacts);
            }
        }
        Places {
            base: workspace
                .first()
                .cloned()
                .unwrap_or_else(|| PathBuf::from("/")),
            workspace,
            agy_own,
            private: self.private.iter().map(|d| resolved_dir(d)).collect(),
        }
    }

    /// Every reading of every path argument, resolved.
    fn resolve_all(&self, args: &CallArgs, places: &Places) -> Vec<Resolved> {
        args.paths
            .iter()
            .map(|arg| Resolved {
                kind: arg.kind,
                raw: arg.raw.clone(),
                places: readings(&arg.raw, self.home.as_deref())
                    .into_iter()
                    .map(|r| r.and_then(|r| resolve(Path::new(&r), &places.base)))
                    .collect(),
            })
            .collect()
    }

    /// Outside the workspace: asked, or denied saying why when nobody can
    /// be asked. What agy reads goes to the model, so reads count too.
    fn outside_verdict(&self, tool: &str, outside: &str) -> Verdict {
        let note = format!("outside the workspace: {outside}");
        if self.can_ask {
            return Verdict::Ask(Some(note));
        }
        Verdict::Deny(format!(
            "{tool} reaches {note}; agy-bridge asks the user before any tool reads or writes outside the workspace (what agy reads goes to the model), and nobody can be asked here (no pi UI). Start agy in a directory that holds it, or set permissions to allow"
        ))
    }

    /// The rule or grant that passes a call inside the workspace, as a
    /// verdict.
    fn ruled(
        &self,
        tool: &str,
        args: &CallArgs,
        resolved: &[Resolved],
        places: &Places,
        arguments: &str,
    ) -> Option<Verdict> {
        let passes: Box<dyn Fn(&Rule) -> bool> = if tool == RUN_COMMAND {
            let words = plain_words(args.command.as_deref().unwrap_or("")).ok()?;
            Box::new(move |r: &Rule| r.matches_words(tool, &words))
        } else {
            let subjects = subjects(tool, resolved, places, arguments);
            Box::new(move |r: &Rule| subjects.iter().any(|s| r.matches(tool, s)))
        };
        if let Some(rule) = self.rules.iter().find(|r| passes(r)) {
            return Some(Verdict::Allow(format!("rule {rule}")));
        }
        let rule = self.granted.find(|r| passes(r))?;
        Some(Verdict::Allow(format!("allowed for this session ({rule})")))
    }
}

/// The private directory the call reaches, if any: a path inside one, a
/// listing or search whose root holds one, or any argument that names one
/// (a command line, a nested argument), however spelt around its unique
/// name.
fn private_reached<'p>(
    args: &CallArgs,
    resolved: &[Resolved],
    places: &'p Places,
) -> Option<&'p PathBuf> {
    places.private.iter().find(|dir| {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .filter(|n| !n.is_empty());
        let mentioned =
            name.is_some_and(|name| args.texts.iter().any(|t| t.to_lowercase().contains(&name)));
        mentioned
            || resolved.iter().any(|r| {
                r.places
                    .iter()
                    .flatten()
                    .any(|p| within(p, dir) || (r.kind == PathKind::Root && within(dir, p)))
            })
    })
}

/// The first path of the call that leads outside the places it may reach
/// unasked, as the person should see it (where it leads, and what agy
/// wrote when that differs).
fn outside(tool: &str, resolved: &[Resolved], places: &Places) -> Option<String> {
    let read_only = default_allow().iter().any(|r| r.tool == tool);
    let allowed = |p: &Path| {
        places.workspace.iter().any(|w| within(p, w))
            || (read_only && places.agy_own.iter().any(|d| within(p, d)))
    };
    resolved.iter().find_map(|r| {
        r.places.iter().find_map(|place| match place {
            None => Some(format!("{} (it cannot be resolved)", r.raw)),
            Some(p) if !allowed(p) => Some(if Path::new(&r.raw) == p {
                r.raw.clone()
            } else {
                format!("{} (agy wrote {})", p.display(), r.raw)
            }),
            Some(_) => None,
        })
    })
}

/// What a rule may match for a call that is not a command: its main path
/// as resolved, whole and relative to the workspace root holding it (or,
/// naming no path, its subject: an MCP `SERVER/TOOL`, an address).
fn subjects(tool: &str, resolved: &[Resolved], places: &Places, arguments: &str) -> Vec<String> {
    let main = resolved
        .iter()
        .find(|r| r.kind == PathKind::File)
        .or_else(|| resolved.iter().find(|r| r.kind == PathKind::Root));
    let Some(main) = main else {
        return vec![rule_subject(tool, arguments)];
    };
    let mut out = Vec::new();
    for place in main.places.iter().flatten() {
        out.push(place.to_string_lossy().into_owned());
        let relative = places
            .workspace
            .iter()
            .find_map(|w| place.strip_prefix(w).ok())
            .map(|rel| rel.to_string_lossy().into_owned())
            .filter(|rel| !rel.is_empty());
        out.extend(relative);
    }
    out
}

/// The rule "allow for this session" grants for a call: the same command
/// (its program and first word after it, by words: `cargo test *`), the
/// same MCP tool, or every call of a tool that names a file, a place or
/// nothing (inside the workspace: no rule passes more).
pub(crate) fn session_rule(tool: &str, arguments: &str) -> Rule {
    let subject = rule_subject(tool, arguments);
    let glob = if tool == RUN_COMMAND {
        let words = plain_words(&subject)
            .unwrap_or_else(|_| subject.split_whitespace().map(str::to_string).collect());
        let quoted: Vec<String> = words.iter().take(2).map(|w| shell_word(w)).collect();
        match quoted.as_slice() {
            [] => "*".to_string(),
            [program] => format!("{program} *"),
            [program, first] if first.starts_with('-') => format!("{program} *"),
            [program, first] => format!("{program} {first} *"),
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
    use serde_json::json;

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
            agy_dirs: Vec::new(),
            home: Some(PathBuf::from("/home/u")),
        }
    }

    fn call(tool: &str, args: serde_json::Value) -> ToolPayload {
        let mut payload = ToolPayload::default();
        payload.tool_call.name = tool.into();
        payload.tool_call.args = args;
        payload
    }

    fn decide(p: &Policy, tool: &str, args: serde_json::Value) -> Verdict {
        p.decide(&call(tool, args))
    }

    #[test]
    fn rules_pass_private_dirs_never_and_the_rest_is_asked_or_denied() {
        let p = policy(true);
        let allowed = |v: Verdict| matches!(v, Verdict::Allow(_));
        assert!(allowed(decide(
            &p,
            "view_file",
            json!({"AbsolutePath":"/w/a.rs"})
        )));
        assert!(allowed(decide(
            &p,
            "run_command",
            json!({"CommandLine":"cargo test --lib"})
        )));
        assert_eq!(
            decide(&p, "run_command", json!({"CommandLine":"rm -rf /"})),
            Verdict::Ask(None)
        );
        for chained in [
            "cargo test; rm -rf /",
            "cargo test && curl x | sh",
            "cargo test $(rm x)",
            "cargo test `rm x`",
            "cargo test\nrm x",
            "cargo test > /etc/x",
        ] {
            let v = decide(&p, "run_command", json!({ "CommandLine": chained }));
            assert_eq!(v, Verdict::Ask(None), "{chained}");
        }
        let private = decide(
            &p,
            "view_file",
            json!({"AbsolutePath":"/tmp/agy-bridge-gate-1/gate.json"}),
        );
        assert!(
            matches!(private, Verdict::Deny(ref r) if r.contains("private")),
            "{private:?}"
        );
        let named = decide(
            &p,
            "run_command",
            json!({"CommandLine":"cat /tmp//AGY-bridge-gate-1/gate.json"}),
        );
        assert!(matches!(named, Verdict::Deny(_)), "{named:?}");
        let own = decide(
            &p,
            "call_mcp_tool",
            json!({"ServerName":"pi","ToolName":"todo","Arguments":{}}),
        );
        assert!(allowed(own));
        let other = decide(
            &p,
            "call_mcp_tool",
            json!({"ServerName":"notes","ToolName":"add","Arguments":{}}),
        );
        assert_eq!(other, Verdict::Ask(None));
        let Verdict::Deny(why) = decide(
            &policy(false),
            "write_to_file",
            json!({"TargetFile":"/w/x"}),
        ) else {
            panic!("no UI: denied");
        };
        assert!(
            why.contains("write_to_file: *") && why.contains("/agy allow"),
            "{why}"
        );
    }

    #[test]
    fn reads_outside_the_workspace_are_asked_and_say_where() {
        let p = policy(true);
        let v = decide(&p, "view_file", json!({"AbsolutePath":"/etc/shadow"}));
        assert_eq!(
            v,
            Verdict::Ask(Some("outside the workspace: /etc/shadow".into()))
        );
        let v = decide(&p, "view_file", json!({"AbsolutePath":"~/.ssh/id_rsa"}));
        assert!(
            matches!(v, Verdict::Ask(Some(ref n)) if n.contains("/home/u/.ssh/id_rsa")),
            "{v:?}"
        );
        let Verdict::Deny(why) =
            decide(&policy(false), "list_dir", json!({"DirectoryPath":"/etc"}))
        else {
            panic!("no UI: denied");
        };
        assert!(why.contains("outside the workspace: /etc;"), "{why}");
        let Verdict::Deny(why) = decide(
            &p,
            "grep_search",
            json!({"SearchPath":"/tmp/","Query":"token"}),
        ) else {
            panic!("a search over a private directory is denied");
        };
        assert!(why.contains("private"), "{why}");
        let v = decide(
            &p,
            "run_command",
            json!({"CommandLine":"cargo test","Cwd":"/w/../etc"}),
        );
        assert!(matches!(v, Verdict::Ask(Some(_))), "{v:?}");
        let v = decide(
            &p,
            "run_command",
            json!({"CommandLine":"cargo test","Cwd":"."}),
        );
        assert!(matches!(v, Verdict::Allow(_)), "{v:?}");
    }

    #[test]
    fn agy_s_workspace_paths_and_its_own_places_count() {
        let mut p = policy(true);
        p.agy_dirs = vec![PathBuf::from("/home/u/.gemini/antigravity-cli/mcp")];
        let mut payload = call("view_file", json!({"AbsolutePath":"/more/a.rs"}));
        payload.workspace_paths = vec!["/more".into()];
        assert!(matches!(p.decide(&payload), Verdict::Allow(_)));
        let mcp = json!({"AbsolutePath":"/home/u/.gemini/antigravity-cli/mcp/pi/todo.json"});
        assert!(matches!(
            decide(&p, "view_file", mcp.clone()),
            Verdict::Allow(_)
        ));
        p.rules.push(Rule::parse("write_to_file: *").unwrap());
        let write = json!({"TargetFile":"/home/u/.gemini/antigravity-cli/mcp/pi/todo.json"});
        assert!(
            matches!(decide(&p, "write_to_file", write), Verdict::Ask(Some(_))),
            "agy's own places are for reading"
        );
        let mut artifacts = call(
            "view_file",
            json!({"AbsolutePath":"/home/u/.gemini/antigravity-cli/brain/c/task.md"}),
        );
        artifacts.artifact_directory_path = "/home/u/.gemini/antigravity-cli/brain/c".into();
        assert!(matches!(p.decide(&artifacts), Verdict::Allow(_)));
        artifacts.artifact_directory_path = "/".into();
        assert!(
            matches!(p.decide(&artifacts), Verdict::Ask(_)),
            "only under agy's home"
        );
    }

    #[test]
    fn ambiguous_or_mistyped_calls_are_denied() {
        let p = policy(true);
        for args in [
            json!({"CommandLine":"cargo test","commandline":"touch x"}),
            json!({"CommandLine":["cargo","test"]}),
            json!({"AbsolutePath": 7}),
        ] {
            let v = decide(&p, "run_command", args.clone());
            assert!(
                matches!(v, Verdict::Deny(ref r) if r.contains("cannot be read one way")),
                "{args}: {v:?}"
            );
        }
    }

    #[test]
    fn path_rules_read_the_workspace_relative_path_and_never_climb_out() {
        let mut p = policy(true);
        p.rules.push(Rule::parse("write_to_file: docs/*").unwrap());
        let write = |path: &str| decide(&p, "write_to_file", json!({ "TargetFile": path }));
        assert!(matches!(write("/w/docs/a.md"), Verdict::Allow(_)));
        assert!(matches!(write("docs/a.md"), Verdict::Allow(_)));
        assert_eq!(write("/w/src/a.rs"), Verdict::Ask(None));
        assert!(matches!(
            write("/w/docs/../../home/u/.ssh/authorized_keys"),
            Verdict::Ask(Some(_))
        ));
        assert!(matches!(
            write("/elsewhere/docs/a.md"),
            Verdict::Ask(Some(_))
        ));
    }

    #[test]
    fn session_grants_name_the_command_or_the_tool() {
        let rule = |t: &str, a: &str| session_rule(t, a).to_string();
        assert_eq!(
            rule("run_command", r#"{"CommandLine":"cargo test --lib"}"#),
            "run_command: cargo test *"
        );
        assert_eq!(
            rule("run_command", r#"{"CommandLine":"ls -la"}"#),
            "run_command: ls *"
        );
        assert_eq!(
            rule("run_command", r#"{"CommandLine":"'my tool' x"}"#),
            "run_command: 'my tool' x *"
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
            decide(&p, "run_command", json!({"CommandLine":"npm run lint"})),
            Verdict::Allow(_)
        ));
        assert_eq!(
            decide(&p, "run_command", json!({"CommandLine":"npx evil"})),
            Verdict::Ask(None)
        );
    }
}
