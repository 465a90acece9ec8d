//! fake-agy as an MCP client, as agy is one: it reads the servers of
//! `<dir>/.agents/mcp_config.json` for each `--add-dir` dir, and a
//! recording's `mcp_call` makes it initialise (protocol `2026-07-28`, sent
//! back in `MCP-Protocol-Version` on every follow-up, as agy does), list the
//! tools, call one and wait for the result, cut off after
//! `FAKE_AGY_MCP_CUTOFF_MS` (agy's own limit is about 180 s).
//!
//! A small blocking HTTP/1.1 client on `std::net::TcpStream`: one request
//! per connection, `Content-Length` bodies (what the bridge's server sends).

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The protocol version agy asks for (newer than current SDKs know).
pub const AGY_PROTOCOL: &str = "2026-07-28";

/// One server entry of agy's MCP configuration.
#[derive(Debug, Clone)]
pub struct Server {
    /// `host:port`.
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
}

/// Find server `name` in the `.agents/mcp_config.json` of `dirs`.
pub fn find_server(dirs: &[String], name: &str) -> Option<Server> {
    dirs.iter().find_map(|dir| {
        let path = std::path::Path::new(dir).join(".agents/mcp_config.json");
        let config: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        let entry = config.get("mcpServers")?.get(name)?;
        let url = entry.get("serverUrl")?.as_str()?;
        let rest = url.strip_prefix("http://")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let headers = entry
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Some(Server {
            authority: authority.to_string(),
            path: path.to_string(),
            headers,
        })
    })
}

/// How a call ended, as the type-38 step's result string records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
}

impl CallResult {
    fn failed(text: String) -> CallResult {
        CallResult {
            text,
            is_error: true,
        }
    }
}

impl Server {
    /// POST one JSON-RPC message; the response body's JSON (None for 202).
    fn post(
        &self,
        body: &Value,
        negotiated: bool,
        timeout: Duration,
    ) -> Result<Option<Value>, String> {
        let mut s = TcpStream::connect(&self.authority)
            .map_err(|e| format!("connect {}: {e}", self.authority))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let body = body.to_string();
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if negotiated {
            req.push_str(&format!("MCP-Protocol-Version: {AGY_PROTOCOL}\r\n"));
        }
        for (k, v) in &self.headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        if let Err(e) = s.read_to_end(&mut raw) {
            return Err(match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("MCP tool call timed out after {}s", timeout.as_secs())
                }
                _ => e.to_string(),
            });
        }
        let text = String::from_utf8_lossy(&raw);
        let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        match status {
            202 => Ok(None),
            200 => serde_json::from_str(payload)
                .map(Some)
                .map_err(|e| format!("bad JSON from the server: {e}")),
            other => Err(format!("HTTP {other}: {}", payload.trim())),
        }
    }

    /// Initialise, list the tools, call `tool` and wait for its result.
    pub fn call(&self, tool: &str, arguments: &Value, cutoff: Duration) -> CallResult {
        let quick = Duration::from_secs(10);
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion": AGY_PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "fake-agy", "version": env!("CARGO_PKG_VERSION")}}});
        let steps = || -> Result<CallResult, String> {
            self.post(&init, false, quick)?;
            self.post(
                &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
                true,
                quick,
            )?;
            let listed = self.post(
                &json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
                true,
                quick,
            )?;
            let known = listed
                .as_ref()
                .and_then(|l| l.pointer("/result/tools"))
                .and_then(Value::as_array)
                .is_some_and(|tools| {
                    tools
                        .iter()
                        .any(|t| t.get("name").and_then(Value::as_str) == Some(tool))
                });
            if !known {
                return Ok(CallResult::failed(format!(
                    "tool {tool} not found on the MCP server"
                )));
            }
            let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name": tool, "arguments": arguments}});
            let answer = self.post(&call, true, cutoff)?.unwrap_or(Value::Null);
            if let Some(err) = answer.get("error") {
                return Ok(CallResult::failed(format!("MCP error: {err}")));
            }
            let result = answer.get("result").cloned().unwrap_or(Value::Null);
            let text = result
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| {
                    blocks
                        .iter()
                        .map(|b| match b.get("type").and_then(Value::as_str) {
                            Some("text") => b
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            Some(other) => format!("[{other}]"),
                            None => String::new(),
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default();
            Ok(CallResult {
                text,
                is_error: result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        };
        steps().unwrap_or_else(CallResult::failed)
    }
}

/// Calls in flight: agy sends the calls of one model response together and
/// writes each one's type-38 step when its result is in.
#[derive(Default)]
pub struct InFlight {
    calls: Vec<(
        agy_bridge::recording::McpCall,
        std::thread::JoinHandle<CallResult>,
    )>,
}

/// `FAKE_AGY_MCP_CUTOFF_MS`: how long a call may take (agy: about 180 s).
fn cutoff() -> Duration {
    std::env::var("FAKE_AGY_MCP_CUTOFF_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(180))
}

/// The type-38 step of `call`: RUNNING while it waits (no result), DONE with
/// the result string after.
pub fn step(
    call: &agy_bridge::recording::McpCall,
    result: Option<&CallResult>,
) -> agy_bridge::steps::Step {
    use agy_bridge::steps::{Body, McpToolResult, Step, StepStatus, StepType, ToolCall};
    let status = if result.is_some() {
        StepStatus::Done
    } else {
        StepStatus::Running
    };
    Step::new(call.idx, StepType::McpTool, status).with_body(Body::McpTool(McpToolResult {
        server: call.server.clone(),
        call: Some(ToolCall {
            id: format!("mcp-call-{}", call.idx),
            name: call.tool.clone(),
            arguments: call.arguments.to_string(),
        }),
        result: result.map(|r| {
            if r.is_error {
                format!("Error: {}", r.text)
            } else {
                r.text.clone()
            }
        }),
        user_rejected: false,
    }))
}

impl InFlight {
    /// Send `call` to its server (from `dirs`' MCP configs) on its own thread.
    pub fn start(&mut self, call: &agy_bridge::recording::McpCall, dirs: &[String]) {
        let server = find_server(dirs, &call.server);
        let c = call.clone();
        let handle = std::thread::spawn(move || match server {
            Some(s) => s.call(&c.tool, &c.arguments, cutoff()),
            None => CallResult::failed(format!("MCP server {:?} is not configured", c.server)),
        });
        self.calls.push((call.clone(), handle));
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Wait for every call in flight; their finished steps, in call order.
    pub fn finish(&mut self) -> Vec<agy_bridge::steps::Step> {
        self.calls
            .drain(..)
            .map(|(call, handle)| {
                let result = handle.join().unwrap_or_else(|_| {
                    CallResult::failed("the MCP client thread panicked".into())
                });
                step(&call, Some(&result))
            })
            .collect()
    }
}
