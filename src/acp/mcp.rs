//! The editor's MCP servers, for agy. `session/new` and `session/load`
//! name the servers the editor wants its agent to use (`mcpServers`), and
//! agy takes MCP servers only from configuration files: each turn's agy
//! gets them in a private `--add-dir` directory of the bridge's own
//! ([`crate::runner::mcp_config`], the writer pi's tools use too). This
//! module owns the translation, so the engine only writes what it is
//! given: a stdio server becomes agy's `command`/`args`/`env` entry, an
//! HTTP one its `serverUrl`/`headers` entry.
//!
//! What agy cannot take is left out, and said once (in the session's first
//! turn): agy speaks Streamable HTTP, not SSE, so `initialize` advertises
//! no SSE and an SSE server given anyway is skipped; agy's config is keyed
//! by name, so of two servers with one name the first is kept.
//!
//! The entries hold the editor's secrets (environment, headers): their
//! `Debug` shows names only, and they are written nowhere but that private
//! directory.

use crate::state::tmp::PrivateDir;
use agent_client_protocol::v1::schema::McpServer;
use serde_json::{json, Map, Value};

/// The editor's MCP servers as agy's config entries, by name.
#[derive(Clone, Default)]
pub struct EditorServers {
    entries: Map<String, Value>,
}

impl EditorServers {
    /// `servers` as agy takes them, and what was left out as a note for the
    /// user (`None` when nothing was).
    pub fn from_acp(servers: &[McpServer]) -> (EditorServers, Option<String>) {
        let mut entries = Map::new();
        let (mut sse, mut twice, mut unknown) = (Vec::new(), Vec::new(), 0usize);
        for server in servers {
            let (name, entry) = match server {
                McpServer::Stdio(s) => (&s.name, stdio_entry(s)),
                McpServer::Http(h) => (&h.name, http_entry(h)),
                McpServer::Sse(s) => {
                    sse.push(format!("{:?}", s.name));
                    continue;
                }
                // A transport of a newer protocol (the crate's enum is
                // non-exhaustive) is nothing agy is known to take.
                _ => {
                    unknown += 1;
                    continue;
                }
            };
            if entries.contains_key(name) {
                let quoted = format!("{name:?}");
                if !twice.contains(&quoted) {
                    twice.push(quoted);
                }
                continue;
            }
            entries.insert(name.clone(), entry);
        }
        let note = left_out(&sse, &twice, unknown);
        (EditorServers { entries }, note)
    }

    /// No server to give agy.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The servers' names, as agy sees them.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// What a warm agy started with these servers must match: a hash of
    /// their entries (the entries hold secrets, so not the entries).
    pub(crate) fn signature(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(&self.entries)
            .unwrap_or_default()
            .hash(&mut hasher);
        hasher.finish()
    }

    /// The private `--add-dir` directory that gives agy these servers
    /// (removed when dropped); `None` when there are none, so a session
    /// without servers gives agy no directory at all.
    pub fn config_dir(&self) -> std::io::Result<Option<PrivateDir>> {
        if self.entries.is_empty() {
            return Ok(None);
        }
        crate::runner::mcp_config::config_dir(self.entries.clone()).map(Some)
    }
}

impl std::fmt::Debug for EditorServers {
    /// Names only: the entries hold the editor's secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// agy's entry for a stdio server.
fn stdio_entry(s: &agent_client_protocol::v1::schema::McpServerStdio) -> Value {
    let env: Map<String, Value> = s
        .env
        .iter()
        .map(|v| (v.name.clone(), Value::String(v.value.clone())))
        .collect();
    // The command came in as a JSON string, so it is UTF-8: nothing lost.
    json!({"command": s.command.to_string_lossy(), "args": s.args, "env": env})
}

/// agy's entry for a Streamable HTTP server.
fn http_entry(h: &agent_client_protocol::v1::schema::McpServerHttp) -> Value {
    let headers: Map<String, Value> = h
        .headers
        .iter()
        .map(|v| (v.name.clone(), Value::String(v.value.clone())))
        .collect();
    json!({"serverUrl": h.url, "headers": headers})
}

/// The note for what agy does not get, in the bridge's style.
fn left_out(sse: &[String], twice: &[String], unknown: usize) -> Option<String> {
    let mut said = Vec::new();
    if !sse.is_empty() {
        let (servers, are) = match sse.len() {
            1 => ("server", "is"),
            _ => ("servers", "are"),
        };
        said.push(format!(
            "agy speaks MCP over stdio and Streamable HTTP, not SSE: the editor's SSE {servers} {} {are} not given to agy",
            sse.join(", ")
        ));
    }
    for name in twice {
        said.push(format!(
            "the editor named two MCP servers {name}; agy gets the first"
        ));
    }
    if unknown > 0 {
        said.push(format!(
            "{unknown} of the editor's MCP servers use a transport agy-bridge does not know, and are not given to agy"
        ));
    }
    (!said.is_empty()).then(|| format!("[agy-bridge: {}]\n", said.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EnvVariable, HttpHeader, McpServerHttp, McpServerSse, McpServerStdio,
    };
    use std::os::unix::fs::PermissionsExt;

    fn stdio() -> McpServer {
        McpServer::Stdio(
            McpServerStdio::new("files", "/usr/bin/mcp-files")
                .args(vec!["--root".into(), "/work".into()])
                .env(vec![EnvVariable::new("API_KEY", "s3cret")]),
        )
    }

    fn http(name: &str, url: &str) -> McpServer {
        McpServer::Http(
            McpServerHttp::new(name, url)
                .headers(vec![HttpHeader::new("Authorization", "Bearer tok")]),
        )
    }

    fn config(servers: &EditorServers) -> Value {
        let dir = servers.config_dir().expect("written").expect("a dir");
        let text =
            std::fs::read_to_string(dir.path().join(".agents/mcp_config.json")).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    #[test]
    fn stdio_and_http_become_agys_entries_with_env_and_headers() {
        let (servers, note) =
            EditorServers::from_acp(&[stdio(), http("docs", "http://127.0.0.1:9/mcp")]);
        assert_eq!(note, None);
        assert_eq!(
            config(&servers),
            json!({"mcpServers": {
                "files": {"command": "/usr/bin/mcp-files", "args": ["--root", "/work"],
                          "env": {"API_KEY": "s3cret"}},
                "docs": {"serverUrl": "http://127.0.0.1:9/mcp",
                         "headers": {"Authorization": "Bearer tok"}},
            }})
        );
    }

    #[test]
    fn a_bare_stdio_server_has_empty_args_and_env() {
        let bare = McpServer::Stdio(McpServerStdio::new("bare", "mcp-bare"));
        let (servers, _) = EditorServers::from_acp(&[bare]);
        assert_eq!(
            config(&servers),
            json!({"mcpServers": {"bare": {"command": "mcp-bare", "args": [], "env": {}}}})
        );
    }

    #[test]
    fn no_servers_no_directory() {
        let (servers, note) = EditorServers::from_acp(&[]);
        assert!(servers.is_empty());
        assert_eq!(note, None);
        assert!(servers.config_dir().expect("nothing to write").is_none());
    }

    #[test]
    fn sse_is_left_out_and_said() {
        let sse = McpServer::Sse(McpServerSse::new("events", "http://127.0.0.1:9/sse"));
        let (servers, note) = EditorServers::from_acp(&[sse]);
        assert!(servers.is_empty());
        let note = note.expect("a note");
        assert!(
            note.starts_with("[agy-bridge: ") && note.ends_with("]\n"),
            "{note}"
        );
        assert!(
            note.contains("\"events\"") && note.contains("SSE"),
            "{note}"
        );
    }

    #[test]
    fn of_two_servers_with_one_name_the_first_wins_said_once() {
        let (servers, note) = EditorServers::from_acp(&[
            http("docs", "http://first/mcp"),
            http("docs", "http://second/mcp"),
            http("docs", "http://third/mcp"),
        ]);
        assert_eq!(
            config(&servers)["mcpServers"]["docs"]["serverUrl"],
            "http://first/mcp"
        );
        let note = note.expect("a note");
        assert_eq!(note.matches("\"docs\"").count(), 1, "{note}");
    }

    #[test]
    fn the_config_is_owner_only_and_goes_with_the_turn() {
        let (servers, _) = EditorServers::from_acp(&[stdio()]);
        let dir = servers.config_dir().expect("written").expect("a dir");
        let root = dir.path().to_path_buf();
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join(".agents")), 0o700);
        assert_eq!(mode(&root.join(".agents/mcp_config.json")), 0o600);
        drop(dir);
        assert!(!root.exists());
    }

    #[test]
    fn debug_shows_names_not_secrets() {
        let (servers, _) = EditorServers::from_acp(&[stdio(), http("docs", "http://x/mcp")]);
        let shown = format!("{servers:?}");
        assert!(shown.contains("files") && shown.contains("docs"), "{shown}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("Bearer"),
            "{shown}"
        );
    }
}
