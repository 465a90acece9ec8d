//! A pi turn's tool side: pi's tools served to agy for the turn (when this
//! agy can reach them), the `ask` gate opened, and both lent to the relay
//! and given back. Shared by the cold turn and the warm session.

use super::prepare::PreparedTurn;
use crate::pi::mcp::relay::Control;
use crate::runner::{self, RunConfig, TurnRequest};
use std::io::Write;
use std::time::Duration;

/// The gate of an `ask` turn, opened (its line said when it cannot be,
/// and the turn runs as `deny`).
pub(super) async fn open_turn_gate<W: Write>(
    prepared: &PreparedTurn,
    cfg: &mut RunConfig,
    turn: &mut TurnRequest,
    own_server: Option<&str>,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<crate::gate::Gate> {
    let plan = prepared.gating.as_ref()?;
    match crate::session::gating::open_gate(plan, cfg, turn, own_server, cancel).await {
        Ok(gate) => Some(gate),
        Err(line) => {
            if let Some(line) = line {
                eprintln!("agy-bridge: {line}");
                pi.thinking(&format!("\n[agy-bridge: {line}]\n"));
            }
            None
        }
    }
}

/// The turn's tool side, when agy may call pi's tools or the turn has a
/// gate: pi's control lines with agy's calls (lent from the MCP server) and
/// the gate's questions (lent from the gate). [`give_back`] returns them.
pub(super) fn tool_side(
    bridge: Option<&mut crate::pi::mcp::ToolBridge>,
    gate: Option<&mut crate::gate::Gate>,
    control: tokio::sync::mpsc::Receiver<Control>,
    window: Duration,
) -> Result<crate::pi::mcp::relay::ToolLines, tokio::sync::mpsc::Receiver<Control>> {
    use tokio::sync::mpsc::channel;
    if bridge.is_none() && gate.is_none() {
        return Err(control);
    }
    let calls = match bridge {
        Some(b) => std::mem::replace(&mut b.calls, channel(1).1),
        None => channel(1).1,
    };
    let asks = gate.map(|g| {
        let questions = std::mem::replace(&mut g.questions, channel(1).1);
        crate::pi::dialog::Asks::new(questions, g.grants())
    });
    Ok(crate::pi::mcp::relay::ToolLines::new(calls, control, window).with_asks(asks))
}

/// What [`tool_side`] lent, back to its owners (questions still open are
/// denied); pi's control lines back to the caller.
pub(super) fn give_back(
    side: Result<crate::pi::mcp::relay::ToolLines, tokio::sync::mpsc::Receiver<Control>>,
    bridge: Option<&mut crate::pi::mcp::ToolBridge>,
    gate: Option<&mut crate::gate::Gate>,
) -> tokio::sync::mpsc::Receiver<Control> {
    let mut lines = match side {
        Ok(lines) => lines,
        Err(control) => return control,
    };
    if let Some(b) = bridge {
        b.calls = std::mem::replace(&mut lines.calls, tokio::sync::mpsc::channel(1).1);
    }
    if let (Some(g), Some(asks)) = (gate, lines.asks.take()) {
        g.questions = asks.into_questions();
    }
    lines.control
}

/// pi's tools, served to agy for this turn only (dropped with it), when
/// this agy can reach them. Only a known older version is held back (said
/// once per pi session): an agy that does not say its version is offered
/// the tools as before.
pub(super) async fn offer_pi_tools<W: Write>(
    req: &crate::pi::provider::StreamRequest,
    prepared: &PreparedTurn,
    prelude: &runner::Prelude,
    turn: &mut TurnRequest,
    mapper: &mut crate::pi::provider::mapper::EventMapper,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
) -> Result<Option<crate::pi::mcp::ToolBridge>, String> {
    if let Some(old) = too_old_for_pi_tools(prelude) {
        if prepared.first_turn && !req.tools.is_empty() {
            pi.thinking(&no_pi_tools_note(old));
        }
        return Ok(None);
    }
    serve_pi_tools(req, turn, mapper, prepared.settings.pi_tools).await
}

/// This agy, when it is known to be too old to reach pi's tools (an agy
/// that does not say its version is offered them).
pub(super) fn too_old_for_pi_tools(
    prelude: &runner::Prelude,
) -> Option<agy_format::features::AgyFeatures> {
    prelude
        .features()
        .filter(|f| f.version.is_some() && !f.mcp_from_add_dir())
}

/// Serve the request's tools (those agy lacks) to agy for this turn: the
/// private MCP config directory joins the turn's `--add-dir`s.
async fn serve_pi_tools(
    req: &crate::pi::provider::StreamRequest,
    turn: &mut TurnRequest,
    mapper: &mut crate::pi::provider::mapper::EventMapper,
    on: bool,
) -> Result<Option<crate::pi::mcp::ToolBridge>, String> {
    use crate::pi::mcp;
    // `AGY_PI_TOOLS`, checked before the turn (the binary checks every variable first).
    if !on {
        return Ok(None);
    }
    let bridge = mcp::ToolBridge::start(mcp::offered_tools(&req.tools))
        .await
        .map_err(|e| format!("agy-bridge: cannot serve pi's tools to agy: {e}"))?;
    if let Some(b) = &bridge {
        turn.add_dirs.push(b.dir.path().to_path_buf());
        turn.private_dirs.push(b.dir.path().to_path_buf());
        mapper.hide_bridge_calls(crate::pi::mcp::is_bridge_call);
    }
    Ok(bridge)
}

/// The one sentence for an agy too old to reach pi's tools.
pub(super) fn no_pi_tools_note(features: agy_format::features::AgyFeatures) -> String {
    let version = features
        .version
        .map(|(a, b, c)| format!(" {a}.{b}.{c}"))
        .unwrap_or_default();
    format!(
        "\n[agy-bridge: pi's tools are not offered to agy{version}: it loads MCP servers from --add-dir only from 1.2.0 on. Update agy (`agy update`) to let it call them.]\n"
    )
}
