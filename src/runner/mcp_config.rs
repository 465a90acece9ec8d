//! agy's MCP configuration for one turn: agy loads
//! `<dir>/.agents/mcp_config.json` for each `--add-dir` directory
//! (docs/agy-format.md, "MCP"), so a turn that gives agy MCP servers
//! writes that file into a private directory of its own and adds the
//! directory to the request. Both front ends do so (pi for its own tools,
//! ACP for the editor's servers); the file's place and shape live here,
//! once, below both.
//!
//! The file holds secrets (a server's token, an editor's headers and
//! environment), hence a [`PrivateDir`] (0700, the file 0600, removed with
//! the turn) and nothing here logs it.

use crate::state::tmp::PrivateDir;
use serde_json::{json, Map, Value};

/// Where agy looks inside an `--add-dir` directory.
pub const CONFIG_FILE: &str = ".agents/mcp_config.json";

/// A fresh private directory holding [`CONFIG_FILE`] with `servers` (agy's
/// entries by server name) as its `mcpServers`.
pub fn config_dir(servers: Map<String, Value>) -> std::io::Result<PrivateDir> {
    let dir = PrivateDir::create(&crate::state::tmp::temp_dir(), "mcp")?;
    let config = json!({ "mcpServers": servers });
    dir.write(CONFIG_FILE, &format!("{config:#}\n"))?;
    Ok(dir)
}
