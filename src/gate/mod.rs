//! The permission gate for agy's tool calls (`ask` mode).
//!
//! agy runs a `PreToolUse` hook before each tool call and waits for its
//! decision (docs/agy-format.md, "Hooks"). [`Gate::start`] writes a private
//! `<dir>/.agents/hooks.json` whose one hook is this binary in hook mode
//! (`agy-bridge hook PreToolUse --gate <dir>/gate.json`) and serves that
//! hook on a Unix socket in the same private directory. The hook ([`client`])
//! forwards agy's payload with the gate's token; the listener (`listen`) lets the
//! `policy` decide what it can (a call it cannot read one way, or one
//! that reaches the bridge's private directories: deny; the bridge's own
//! MCP server: allow; inside the workspace, rules and this session's
//! grants: allow) and hands everything else to whoever asks the user, as a
//! [`Question`]. Every call becomes a question, answered or not, so the
//! stream can show the tool the moment agy is about to run it, with its
//! full arguments.
//!
//! What keeps it safe:
//! - the hook always prints an explicit decision, and denies on any error,
//!   on an unreachable bridge and before its own timeout runs out: agy
//!   1.1.7 let the tool run when a hook timed out;
//! - agy is given `--dangerously-skip-permissions` (without which print mode
//!   denies everything) only once it has listed this hook as loaded
//!   ([`crate::gate::proof`]);
//! - dropping the [`Gate`] (the turn or session ended, pi aborted) answers
//!   every open question with a denial.
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::state`],
//! [`crate::settings`], [`crate::process`], [`crate::runner`].

mod call;
pub mod client;
mod command;
pub(crate) mod listen;
mod paths;
pub(crate) mod policy;
pub mod proof;

use crate::state::tmp::PrivateDir;
use agy_format::hooks::{self, Decision, Hook, HookEvent, ToolPayload};
use agy_format::text::shell_word;

pub use policy::{Grants, Policy, Verdict};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The hook's timeout in hooks.json: long, as a person decides.
pub(crate) const HOOK_TIMEOUT_SECS: u64 = 3600;
/// How long the hook waits for the decision before it denies: well inside
/// agy's timeout, so agy never sees the hook time out.
pub(crate) const HOOK_WAIT_SECS: u64 = HOOK_TIMEOUT_SECS - 60;
/// The name of the hook in hooks.json.
pub(crate) const HOOK_NAME: &str = "agy-bridge";
/// The file the hook reads the gate's address and token from.
pub(crate) const GATE_FILE: &str = "gate.json";
/// Calls waiting to be shown or decided.
pub(crate) const QUESTION_CAPACITY: usize = 64;

/// One tool call agy is about to make, with the policy's verdict; when the
/// verdict is [`Verdict::Ask`], agy waits for [`Question::answer`].
#[derive(Debug)]
pub struct Question {
    /// The call as agy's hook sent it.
    pub payload: ToolPayload,
    /// What the policy said of it: allowed, denied, or to be asked.
    pub verdict: Verdict,
    reply: Option<oneshot::Sender<Decision>>,
}

impl Question {
    /// The tool agy is about to run.
    pub fn tool(&self) -> &str {
        &self.payload.tool_call.name
    }

    /// The call's arguments as JSON text.
    pub fn arguments(&self) -> String {
        self.payload.arguments()
    }

    /// Whether agy waits for an answer.
    pub fn waits(&self) -> bool {
        self.reply.as_ref().is_some_and(|r| !r.is_closed())
    }

    /// Give agy the decision; `false` when nobody waits for it any more
    /// (the hook gave up, the gate closed).
    pub fn answer(mut self, decision: Decision) -> bool {
        self.reply
            .take()
            .is_some_and(|reply| reply.send(decision).is_ok())
    }
}

/// A turn's or a session's gate: its private directory (the `--add-dir`
/// agy loads the hook from), its loopback server and the questions.
pub struct Gate {
    dir: PrivateDir,
    /// The calls agy is about to make, for the front end to show and, when asked, answer.
    pub questions: mpsc::Receiver<Question>,
    shared: Arc<listen::Shared>,
}

impl Gate {
    /// Serve the gate for `policy` (its private directories gain the gate's
    /// own), the hook being `exe hook PreToolUse`.
    pub async fn start(mut policy: Policy, exe: &Path) -> std::io::Result<Gate> {
        let dir = PrivateDir::create(&crate::state::tmp::temp_dir(), "gate")?;
        policy.private.push(dir.path().to_path_buf());
        let (tx, questions) = mpsc::channel(QUESTION_CAPACITY);
        let socket = dir.path().join(listen::SOCKET_FILE);
        let shared = listen::start(policy, tx, &socket).await?;
        let gate_file = dir.path().join(GATE_FILE);
        let config = serde_json::json!({
            "socket": socket,
            "token": shared.token(),
            "waitSecs": HOOK_WAIT_SECS,
        });
        dir.write(GATE_FILE, &format!("{config}\n"))?;
        let command = format!(
            "{} hook {} --gate {}",
            shell_word(&exe.to_string_lossy()),
            HookEvent::PreToolUse.name(),
            shell_word(&gate_file.to_string_lossy())
        );
        let hook = Hook {
            name: HOOK_NAME.into(),
            event: HookEvent::PreToolUse,
            matcher: Some("*".into()),
            command,
            timeout_secs: HOOK_TIMEOUT_SECS,
        };
        let file = hooks::hooks_file(&[hook]);
        dir.write(
            &format!(".agents/{}", hooks::HOOKS_FILE),
            &format!("{file:#}\n"),
        )?;
        Ok(Gate {
            dir,
            questions,
            shared,
        })
    }

    /// The directory agy gets as an `--add-dir`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The hooks.json agy must list as loaded before it is trusted.
    pub fn hooks_file(&self) -> std::path::PathBuf {
        self.dir.path().join(".agents").join(hooks::HOOKS_FILE)
    }

    /// Replace the standing policy (a new turn of the session: its rules
    /// and UI may have changed). The directories private when the gate
    /// started (its own, pi's tools' config) stay private.
    pub fn set_policy(&self, policy: Policy) {
        self.shared.set_policy(policy);
    }

    /// Where "allow for this session" goes: the session's grants, shared
    /// by each gate of the session.
    pub fn grants(&self) -> policy::Grants {
        self.shared.grants()
    }

    /// A token that is cancelled when the gate closes.
    pub fn closing(&self) -> CancellationToken {
        self.shared.closing.clone()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Every hook still waiting is told no, now.
        self.shared.closing.cancel();
    }
}
