//! What the integration tests and benches reach of `pi` beyond its API:
//! the tool relay's parts, the event mapper, the diff helpers and the model
//! cache's internals. Built only with the `testing` feature, which the
//! crate's own tests and benches turn on; nothing here is API.

use crate::follow::edits::EditTarget;
use crate::pi::diff::TurnEdits;
use crate::pi::models::cache::CacheEntry;
use crate::pi::models::{Loader, ThinkingLevel, Unavailable};
use agy_format::agy_args::Effort;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use crate::pi::dialog::{Answer, Asks};
pub use crate::pi::mcp::park::{ToolCall, ToolOutcome};
pub use crate::pi::mcp::relay::{relay, Control, ToolLines};
pub use crate::pi::mcp::server::McpServer;
pub use crate::pi::provider::mapper::EventMapper;

/// How many of agy's tool calls may wait for pi at once.
pub const CALL_CAPACITY: usize = crate::pi::mcp::CALL_CAPACITY;
/// How many of the extension's control lines the relay buffers.
pub const CONTROL_CAPACITY: usize = crate::pi::mcp::relay::CONTROL_CAPACITY;
/// The MCP server name agy sees.
pub const SERVER_NAME: &str = crate::pi::mcp::SERVER_NAME;
/// The most lines one rendered diff shows.
pub const MAX_DIFF_LINES: usize = crate::pi::diff::MAX_DIFF_LINES;
/// How long a catalog from agy is served from the cache.
pub const CACHE_TTL: Duration = crate::pi::models::CACHE_TTL;
/// How long a failed `agy models` is remembered.
pub const FAILURE_TTL: Duration = crate::pi::models::FAILURE_TTL;
/// The model cache's file name in the state directory.
pub const CACHE_FILE: &str = crate::pi::models::CACHE_FILE;
/// The lock file of a background catalog refresh.
pub const REFRESH_LOCK_FILE: &str = crate::pi::models::REFRESH_LOCK_FILE;
/// agy 1.1.24's `agy models` listing: (label, slug) pairs.
pub const LISTING_1_1_24: &[(&str, &str)] = crate::pi::models::listed::LISTING_1_1_24;

/// The file an agy edit tool call writes, from its name and arguments.
pub fn edit_target(tool_name: &str, arguments_json: &str) -> Option<EditTarget> {
    crate::follow::edits::edit_target(tool_name, arguments_json)
}

/// `old` to `new` as the numbered, capped diff pi's thinking stream shows.
pub fn numbered_diff(old: &str, new: &str) -> String {
    crate::pi::diff::numbered_diff(old, new)
}

/// Snapshot `path` before agy writes it, as the mapper does when it sees
/// the call.
pub fn before_edit(edits: &mut TurnEdits, path: &Path) {
    edits.before_edit(path)
}

/// The effort agy is given for pi's thinking `level`, among `offered`.
pub fn clamp_effort(offered: &[Effort], level: Option<ThinkingLevel>) -> Option<Effort> {
    crate::pi::models::clamp_effort(offered, level)
}

/// Run `bin models` and return its listing, or why there is none.
pub fn fetch(
    bin: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<String, Unavailable> {
    crate::pi::models::cache::fetch(bin, timeout, cancel)
}

/// The cache entry `loader` would read now.
pub fn read_cache(loader: &Loader) -> Option<CacheEntry> {
    loader.read_cache()
}
