//! Where a tool is let through or stopped: the PreToolUse hooks consulted
//! for each new root tool step and MCP call, a hook's denial written as agy
//! writes it, and the actions a permission-gated commit lists when print
//! mode denies them; and what a let-through file tool does to disk when it
//! ends (`FAKE_AGY_APPLY_EDITS`, [`crate::edits`]): only a tool that ran
//! may write. Apart from the schedule because the hook rules are what a
//! reader checking agy's permission behaviour looks for.

use super::database::step_row;
use super::{Fatal, Run};
use crate::stream;
use agy_corpus::recording::{self, Commit};
use agy_format::hooks::Decision;
use agy_format::steps;
use agy_format::stream_json::DeniedAction;
use agy_format::wire;

/// A root tool step the replay is about to run: where its PreToolUse hooks
/// are consulted.
pub(super) struct NewTool {
    /// The step as first written (recorded idx).
    step: steps::Step,
    name: String,
    args: serde_json::Value,
    /// Its first write already holds its result (hooks run before it).
    pub(super) finished: bool,
}

/// The permission kind a `permissions` column asks for
/// (`{2: {1: {1 kind, 2 value}}}`), e.g. `command`.
fn permission_kind(blob: &[u8]) -> Option<String> {
    let len_field = |buf: &[u8], n: u32| -> Option<Vec<u8>> {
        wire::fields(buf)
            .map_while(Result::ok)
            .find_map(|f| match f.value {
                wire::Value::Len(b) if f.number == n => Some(b.to_vec()),
                _ => None,
            })
    };
    let request = len_field(blob, 2)?;
    let item = len_field(&request, 1)?;
    let kind = len_field(&item, 1)?;
    Some(String::from_utf8_lossy(&kind).into_owned())
}

/// agy's display name of a tool: `run_command` -> `RunCommand`.
fn display_name(tool: &str) -> String {
    tool.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The actions a permission-gated commit asks for, as agy lists them
/// when it denies them.
pub(super) fn denied_actions(commit: &Commit) -> Vec<DeniedAction> {
    commit
        .writes
        .iter()
        .filter_map(|w| step_row(w, 0))
        .filter_map(|row| {
            let kind = row.permissions.as_deref().and_then(permission_kind);
            let step = steps::decode(&row);
            let tool = stream::tool_name(&step);
            (kind.is_some() || step.tool_call().is_some()).then(|| DeniedAction {
                action: kind.unwrap_or_else(|| "command".into()),
                display_name: display_name(&tool),
            })
        })
        .collect()
}

impl Run<'_> {
    /// The root tool steps `commit` writes for the first time.
    pub(super) fn new_tools(&mut self, commit: &Commit) -> Vec<NewTool> {
        let mut found = Vec::new();
        for w in &commit.writes {
            let Some(row) = step_row(w, 0) else {
                continue;
            };
            let step = steps::decode(&row);
            if stream::step_kind(&step) != "tool" || !self.tools_seen.insert(step.idx) {
                continue;
            }
            let args = step
                .tool_call()
                .and_then(|c| serde_json::from_str(&c.arguments).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            found.push(NewTool {
                name: stream::tool_name(&step),
                args,
                finished: step.is_finished(),
                step,
            });
        }
        found
    }

    /// Consult the hooks for `tools`; whether one was denied (its denial
    /// is written and the turn is over).
    pub(super) fn gate_tools<'t>(
        &mut self,
        commit: &Commit,
        tools: impl Iterator<Item = &'t NewTool>,
    ) -> Result<bool, Fatal> {
        for tool in tools {
            if self.gate(commit.t_ms, tool, commit.gate.is_some())? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One tool's gate. Without `--dangerously-skip-permissions` the hooks
    /// are not consulted (real agy's hook allow does not lift print mode's
    /// auto-deny): the recording's gates decide, and a tool in a gated
    /// commit never runs. With it, every matching PreToolUse hook must
    /// allow. Whether the tool was denied.
    fn gate(&mut self, t_ms: u64, tool: &NewTool, gated: bool) -> Result<bool, Fatal> {
        let db_idx = tool.step.idx + self.opts.idx_offset;
        if !self.args.skip_permissions {
            if !gated {
                self.let_through(tool, db_idx);
            }
            return Ok(false);
        }
        let model = self
            .args
            .model
            .clone()
            .or_else(|| self.rec.header.model.clone());
        let site = crate::hooks::CallSite {
            id: &self.root_id,
            workspace: self.rec.header.workspace.as_deref(),
            model: model.as_deref().unwrap_or(""),
        };
        let payload = crate::hooks::payload(&site, db_idx, &tool.name, tool.args.clone());
        match self.hooks.pre_tool_use(&payload) {
            Decision::Allow => {
                self.let_through(tool, db_idx);
                Ok(false)
            }
            Decision::Deny { reason } => {
                self.deny(t_ms, tool, &reason)?;
                Ok(true)
            }
        }
    }

    /// `tool` runs: logged (`FAKE_AGY_TOOL_LOG`), and a file tool's edit
    /// kept for when its step ends.
    fn let_through(&mut self, tool: &NewTool, db_idx: i64) {
        crate::hooks::log_tool_ran(&tool.name, &tool.args, db_idx);
        if self.edits.is_some() && agy_format::edits::writes_files(&tool.name) {
            let call = (tool.name.clone(), tool.args.clone());
            self.edits_due.insert(tool.step.idx, call);
        }
    }

    /// Before `commit` (a root commit) is written: the files of the tools
    /// it ends well (DONE) are written, as agy writes a file before it
    /// records that the tool finished; never at an earlier write of the
    /// step, so a follower sees the file unchanged when the call appears.
    pub(super) fn write_edits(&mut self, commit: &Commit) {
        let Some(workspace) = self.edits.as_ref() else {
            return;
        };
        for w in &commit.writes {
            let Some(row) = step_row(w, 0) else {
                continue;
            };
            if row.status != steps::StepStatus::Done.raw() {
                continue;
            }
            let Some((name, args)) = self.edits_due.remove(&row.idx) else {
                continue;
            };
            if let Some(warning) = workspace.apply(&name, &args).warning(&name) {
                super::err_raw(&format!("{warning}\n"));
            }
        }
    }

    /// Write a denied tool as agy does (the step in ERROR with
    /// `tool call denied by pre-tool hook: <reason>`), then the model's
    /// answer stating the denial, which ends the turn.
    fn deny(&mut self, t_ms: u64, tool: &NewTool, reason: &str) -> Result<(), Fatal> {
        // Calls already in flight finish first.
        self.finish_mcp(t_ms)?;
        let error = Decision::step_error(reason);
        let mut written = Vec::new();
        let mut failed = tool.step.clone();
        if tool.finished {
            // Not written yet: it appears (ACTIVE) first, without a result.
            failed.body = None;
            let mut running = failed.clone();
            running.status = steps::StepStatus::Running;
            written.push(running);
        }
        failed.status = steps::StepStatus::Error;
        failed.errors = vec![steps::ErrorDetails {
            message: error.clone(),
            detail: None,
            stack: None,
        }];
        written.push(failed);
        let idx = self.max_idx.max(tool.step.idx) + 1;
        let text = format!("The {} call was denied: {error}", tool.name);
        written.push(
            steps::Step::new(
                idx,
                steps::StepType::PlannerResponse,
                steps::StepStatus::Done,
            )
            .with_body(steps::Body::Planner(steps::PlannerResponse {
                text,
                ..steps::PlannerResponse::default()
            })),
        );
        self.write_steps(t_ms, written)
    }

    /// An MCP call begins: its RUNNING step, its gate (agy's hooks see it as
    /// `call_mcp_tool {ServerName, ToolName, Arguments}`), then the call.
    /// Whether it was denied.
    pub(super) fn start_mcp_call(
        &mut self,
        t_ms: u64,
        call: &recording::McpCall,
    ) -> Result<bool, Fatal> {
        let step = crate::mcp::step(call, None);
        self.write_steps(t_ms, vec![step.clone()])?;
        self.tools_seen.insert(call.idx);
        let tool = NewTool {
            step,
            name: "call_mcp_tool".into(),
            args: serde_json::json!({
                "ServerName": call.server,
                "ToolName": call.tool,
                "Arguments": call.arguments,
            }),
            finished: false,
        };
        if self.gate(t_ms, &tool, false)? {
            return Ok(true);
        }
        self.mcp.start(call, &self.args.add_dirs);
        Ok(false)
    }
}
