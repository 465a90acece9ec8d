//! fake-agy as an MCP client, as agy is one: it reads the servers of
//! `<dir>/.agents/mcp_config.json` for each `--add-dir` dir (sending the
//! entry's `headers` on every request, as agy does), and a recording's
//! `mcp_call` makes it shake hands as agy 1.2.x does (docs/agy-format.md,
//! "MCP"): `server/discover` with `2026-07-28` in `_meta`; on an error
//! (the bridge answers -32601) `initialize` with protocol `2025-11-25`,
//! client `antigravity-client` 1.0.0 and capabilities `elicitation` and
//! `roots`; then `notifications/initialized`, `tools/list` and the call,
//! each with the negotiated `MCP-Protocol-Version`. It waits for the
//! result, cut off after `FAKE_AGY_MCP_CUTOFF_MS` (agy's own limit is about
//! 180 s). `FAKE_AGY_MCP_HANDSHAKE=legacy` initialises with `2026-07-28`
//! straight away instead, as earlier reports had agy do.
//!
//! A small blocking HTTP/1.1 client on `std::net::TcpStream`: one request
//! per connection, `Content-Length` bodies (what the bridge's server sends).

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The version agy 1.2.x names in `server/discover`'s `_meta` (newer than
/// current SDKs know); the legacy handshake initialises with it.
pub const AGY_DISCOVER_PROTOCOL: &str = "2026-07-28";
/// The version agy 1.2.x asks `initialize` for once discovery failed.
pub const AGY_PROTOCOL: &str = "2025-11-25";
/// The client agy names in `initialize`.
pub const AGY_CLIENT: (&str, &str) = ("antigravity-client", "1.0.0");

/// `FAKE_AGY_MCP_HANDSHAKE`: `legacy` for the old one-step handshake.
fn legacy_handshake() -> bool {
    std::env::var("FAKE_AGY_MCP_HANDSHAKE").is_ok_and(|v| v.trim() == "legacy")
}

/// One server entry of agy's MCP configuration.
#[derive(Debug, Clone)]
pub struct Server {
    /// `host:port`.
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
    /// The old one-step handshake (`FAKE_AGY_MCP_HANDSHAKE=legacy`).
    legacy: bool,
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
            legacy: legacy_handshake(),
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

/// The text of a `CallToolResult`'s content blocks, one per line.
fn content_text(result: &Value) -> String {
    let Some(blocks) = result.get("content").and_then(Value::as_array) else {
        return String::new();
    };
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
}

impl Server {
    /// POST one JSON-RPC message (with `MCP-Protocol-Version: version` once
    /// negotiated); the response body's JSON (None for 202).
    fn post(
        &self,
        body: &Value,
        version: Option<&str>,
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
        if let Some(v) = version {
            req.push_str(&format!("MCP-Protocol-Version: {v}\r\n"));
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

    /// agy's handshake up to `notifications/initialized`; the version the
    /// server agreed to, for the header of every later request.
    fn handshake(&self, quick: Duration) -> Result<String, String> {
        let (name, version) = AGY_CLIENT;
        let init = |protocol: &str| {
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                "protocolVersion": protocol,
                "capabilities": {"elicitation": {}, "roots": {}},
                "clientInfo": {"name": name, "version": version}}})
        };
        let asked = if self.legacy {
            AGY_DISCOVER_PROTOCOL
        } else {
            let discover = json!({"jsonrpc":"2.0","id":0,"method":"server/discover",
                "params":{"_meta":{"protocolVersion": AGY_DISCOVER_PROTOCOL}}});
            let found = self.post(&discover, None, quick)?;
            if found.as_ref().and_then(|f| f.get("error")).is_none() {
                return Err(format!(
                    "server/discover did not fail, and fake-agy speaks only the {AGY_PROTOCOL} handshake: {found:?}"
                ));
            }
            AGY_PROTOCOL
        };
        let answer = self.post(&init(asked), None, quick)?;
        let agreed = answer
            .as_ref()
            .and_then(|a| a.pointer("/result/protocolVersion"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("initialize did not agree on a version: {answer:?}"))?
            .to_string();
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        self.post(&note, Some(&agreed), quick)?;
        Ok(agreed)
    }

    /// Shake hands, list the tools, call `tool` and wait for its result.
    pub fn call(&self, tool: &str, arguments: &Value, cutoff: Duration) -> CallResult {
        let quick = Duration::from_secs(10);
        let steps = || -> Result<CallResult, String> {
            let version = self.handshake(quick)?;
            let v = Some(version.as_str());
            let listed = self.post(
                &json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
                v,
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
            let answer = self.post(&call, v, cutoff)?.unwrap_or(Value::Null);
            if let Some(err) = answer.get("error") {
                return Ok(CallResult::failed(format!("MCP error: {err}")));
            }
            let result = answer.get("result").cloned().unwrap_or(Value::Null);
            Ok(CallResult {
                text: content_text(&result),
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
        agy_corpus::recording::McpCall,
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

/// `FAKE_AGY_MCP_HOLD=FIFO`: once the finished steps of the calls in flight
/// are written, wait until someone writes to the FIFO and closes it, then go
/// on. A test acts in that window (agy has cut a call off, and has not
/// ended its turn) with no race against the recording's schedule.
pub fn hold_after_calls() {
    if let Some(fifo) = std::env::var_os("FAKE_AGY_MCP_HOLD") {
        // Opening a FIFO to read blocks until a writer opens it; the read
        // ends at the writer's close. An unreadable path holds nothing.
        let _ = std::fs::read(fifo);
    }
}

/// The type-38 step of `call`: RUNNING while it waits (no result), DONE with
/// the result string after.
pub fn step(
    call: &agy_corpus::recording::McpCall,
    result: Option<&CallResult>,
) -> agy_format::steps::Step {
    use agy_format::steps::{Body, McpToolResult, Step, StepStatus, StepType, ToolCall};
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
    pub fn start(&mut self, call: &agy_corpus::recording::McpCall, dirs: &[String]) {
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
    pub fn finish(&mut self) -> Vec<agy_format::steps::Step> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::net::TcpListener;

    /// One request as a scripted server saw it: its headers (lower-case
    /// names) and JSON body.
    type Seen = (Vec<(String, String)>, Value);

    /// Read one `Content-Length` request off `s`.
    fn read_request(s: &TcpStream) -> Option<Seen> {
        let mut r = std::io::BufReader::new(s);
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            r.read_line(&mut line).ok()?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())?;
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).ok()?;
        Some((headers, serde_json::from_slice(&body).ok()?))
    }

    /// What the bridge's server answers each method with.
    fn reply(body: &Value) -> String {
        let id = body.get("id").cloned().unwrap_or(Value::Null);
        let answer = match body.get("method").and_then(Value::as_str) {
            Some("server/discover") => {
                json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"Method not found"}})
            }
            Some("initialize") => {
                json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion": body.pointer("/params/protocolVersion")}})
            }
            Some("tools/list") => json!({"jsonrpc":"2.0","id":id,"result":{"tools":[{"name":"probe"}]}}),
            Some("tools/call") => {
                json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}})
            }
            _ => return "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".into(),
        }
        .to_string();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        )
    }

    /// Run a call against a scripted server; the requests it saw.
    fn scripted_call(legacy: bool) -> (CallResult, Vec<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let authority = listener.local_addr().expect("addr").to_string();
        let seen = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for s in listener.incoming().flatten() {
                let Some(req) = read_request(&s) else { break };
                let last = req.1.get("method") == Some(&json!("tools/call"));
                let _ = (&s).write_all(reply(&req.1).as_bytes());
                seen.push(req);
                if last {
                    break;
                }
            }
            seen
        });
        let server = Server {
            authority,
            path: "/mcp".into(),
            headers: vec![("x-token".into(), "secret".into())],
            legacy,
        };
        let got = server.call("probe", &json!({"q": 1}), Duration::from_secs(10));
        (got, seen.join().expect("server thread"))
    }

    fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
        seen.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_handshake_is_agys() {
        let (got, seen) = scripted_call(false);
        assert_eq!(
            got,
            CallResult {
                text: "ok".into(),
                is_error: false
            }
        );
        let methods: Vec<&str> = seen.iter().filter_map(|s| s.1["method"].as_str()).collect();
        assert_eq!(
            methods,
            [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call"
            ]
        );
        assert_eq!(
            seen[0].1["params"],
            json!({"_meta": {"protocolVersion": "2026-07-28"}})
        );
        assert_eq!(
            seen[1].1["params"],
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"elicitation": {}, "roots": {}},
                   "clientInfo": {"name": "antigravity-client", "version": "1.0.0"}})
        );
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(
                header(s, "x-token"),
                Some("secret"),
                "the config's headers on every request"
            );
            let want = (i >= 2).then_some("2025-11-25");
            assert_eq!(header(s, "mcp-protocol-version"), want, "request {i}");
        }
    }

    #[test]
    fn the_legacy_handshake_initialises_with_2026_07_28() {
        let (got, seen) = scripted_call(true);
        assert!(!got.is_error, "{got:?}");
        let methods: Vec<&str> = seen.iter().filter_map(|s| s.1["method"].as_str()).collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call"
            ]
        );
        assert_eq!(seen[0].1["params"]["protocolVersion"], "2026-07-28");
        assert_eq!(header(&seen[3], "mcp-protocol-version"), Some("2026-07-28"));
    }
}
