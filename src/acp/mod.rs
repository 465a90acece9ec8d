//! **acp**: agy as an Agent Client Protocol agent (`agy-bridge
//! acp`), the second front end beside [`crate::pi`]. It owns the protocol
//! side only: the mapping of the provider-neutral events to ACP session
//! updates and stop reasons (`map`), agy's edits as ACP diffs (`diffs`),
//! the gate's questions as `session/request_permission` (`permission`), a
//! conversation's history replayed for `session/load` (`replay`), the
//! editor's MCP servers as agy's configuration ([`mcp`]), the
//! turn it runs on the session core pi's turns share, behind a small trait
//! of its own ([`engine`]), and the ACP connection itself, on the official
//! `agent-client-protocol` crate ([`agent`]).
//!
//! It speaks protocol version 1 over the crate's stdio transport; nothing
//! here hand-writes JSON-RPC. It knows nothing of pi: what both front ends
//! need lives in the layers below (events, subjects and the edit rule in
//! `follow`, bindings and rules in `state`, the runner, the gate, and the
//! session core: turn lock, seat, gating).
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`],
//! [`crate::state`], [`crate::process`], [`crate::runner`], [`crate::gate`],
//! [`crate::session`], [`crate::settings`]; never the pi layer. Its
//! settings come from the binary (a [`crate::settings::Settings`] turned into
//! the runner's and the gate's); nothing here reads the environment.

pub mod agent;
pub(crate) mod diffs;
pub mod engine;
pub(crate) mod map;
pub mod mcp;
pub(crate) mod permission;
pub(crate) mod replay;
pub mod stdio;
