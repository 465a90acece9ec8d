//! The tool call a step stands for: its own call (an MCP step's, a
//! GENERIC step's arguments), else the call its type implies once it ends.
//! The tracker announces each call once ([`super::events::Tracker`]).

use agy_format::steps::{Body, Step, StepType, ToolCall};
use serde_json::{Map, Value};

/// The call a tool step announces itself: its own call, or once finished
/// the call its type stands for. Planner and user steps announce none.
pub(super) fn tool_step_call(step: &Step, own_call: Option<ToolCall>) -> Option<ToolCall> {
    let is_tool_step = step.step_type.tool_name().is_some()
        || step
            .body
            .as_ref()
            .map(Body::is_tool_result)
            .unwrap_or(false)
        || step.tool_call().is_some();
    if !is_tool_step
        || matches!(
            step.step_type,
            StepType::PlannerResponse | StepType::UserInput
        )
    {
        return None;
    }
    // A subagent step without a call is announced by its subagent event.
    let subagent = matches!(&step.body, Some(Body::Subagent(_)));
    match own_call {
        Some(c) => Some(c),
        None if step.is_finished() && !subagent => step.step_type.tool_name().map(|n| ToolCall {
            name: n.to_string(),
            arguments: generic_arguments(step).unwrap_or_default(),
            ..ToolCall::default()
        }),
        None => None,
    }
}

/// The call a tool step stands for: an MCP step's own call (47.2, named
/// `mcp:SERVER/TOOL`, keeping the metadata call's id so that it deduplicates
/// with the planner's `call_mcp_tool`), else its metadata call (5.4).
pub(super) fn step_call(step: &Step) -> Option<ToolCall> {
    let meta = step.tool_call().filter(|c| !c.name.is_empty());
    if let Some(Body::McpTool(m)) = &step.body {
        if let Some(call) = &m.call {
            return Some(ToolCall {
                id: meta
                    .map(|c| c.id.clone())
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| call.id.clone()),
                name: m.display_name(),
                arguments: call.arguments.clone(),
            });
        }
    }
    meta.cloned()
}

/// A GENERIC step's arguments (140.1) as a JSON object, for a step whose
/// metadata carries no call. Values that are JSON stay JSON.
fn generic_arguments(step: &Step) -> Option<String> {
    let Some(Body::Generic(g)) = &step.body else {
        return None;
    };
    let args: Map<String, Value> = g
        .args
        .iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            (k.clone(), value)
        })
        .collect();
    Some(Value::Object(args).to_string())
}
