//! The bridge's MCP server: pi's tools, offered to agy for one turn over
//! Streamable HTTP (MCP 2025-06-18 / 2025-11-25 transport) on loopback.
//!
//! Every response is a single `application/json` body (the transport allows
//! it instead of SSE, and agy's client takes it). Methods: `initialize`
//! (answered with the client's version when we know it, else our newest:
//! agy 1.2.x asks for `2025-11-25` after a `server/discover` that gets
//! -32601, older fake clients ask for `2026-07-28`; see docs/agy-format.md,
//! "MCP"), `ping`, `tools/list` and `tools/call`, which parks the request
//! until pi's result arrives (see [`super::park`]). Notifications and
//! responses get 202. The server lives as long as its [`McpServer`] handle:
//! dropping it closes the port and every connection, and every parked call
//! is then answered with an error.
//!
//! Anyone on the machine can connect to a loopback port (issue 17), so:
//! - **the head decides first**: path, `Host` (loopback name or address with
//!   our port: DNS rebinding), `Origin` (loopback, any case), the token
//!   (constant time), the method and `MCP-Protocol-Version` are checked
//!   before a byte of the body is read; a refusal closes the connection
//!   after a short, bounded drain, so an unauthenticated upload costs us
//!   nothing but a read buffer;
//! - **connections are capped** ([`Limits::connections`]): over the cap,
//!   new ones wait in the kernel's backlog, not in our file descriptors, so
//!   `accept` never runs the process out of them; an `accept` error
//!   (EMFILE) backs off instead of spinning;
//! - **every read has a deadline**: a new connection must send its first
//!   head within [`Limits::first_request`] (a slowloris or idle socket holds
//!   a slot that long at most), an authenticated keep-alive connection may
//!   idle [`Limits::idle`] between requests, and a body must arrive within
//!   [`Limits::body`];
//! - **JSON-RPC is checked**: one message per POST (batches are -32600
//!   since MCP 2025-06-18), `"jsonrpc":"2.0"` required (-32600), unparsable
//!   JSON -32700, `tools/call` arguments an object (-32602).
//!
//! What remains: a local user can keep the slots busy and so delay agy's
//! requests (each slot for a few seconds at a time); they cannot crash the
//! bridge, grow its memory past the caps, or call pi's tools.

use super::http::{self, HttpError, Request};
use super::park::{ToolCall, ToolOutcome};
use crate::pi::provider::PiTool;
use agy_format::text::same_secret;
use serde_json::{json, Map, Value};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::timeout;

/// The header agy sends the token in.
pub(crate) const TOKEN_HEADER: &str = "x-token";
/// Request bodies above this are refused (413).
pub(crate) const BODY_CAP: usize = 4 * 1024 * 1024;
/// Protocol versions this server implements, newest first.
pub(crate) const PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Versions clients send that we serve as our newest: agy puts `2026-07-28`
/// in `server/discover`'s `_meta` and, in some versions, in the
/// `MCP-Protocol-Version` header of follow-ups.
pub(crate) const CLIENT_VERSIONS: &[&str] = &["2026-07-28"];
/// Bytes read and thrown away after a refusal, so the client sees the
/// response rather than a reset; bounded in size and time.
const LINGER_BYTES: usize = 64 * 1024;
const LINGER_TIME: Duration = Duration::from_millis(500);

/// The server's caps; [`Limits::default`] is what the bridge uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once (agy opens a handful).
    pub connections: usize,
    /// From accept to a complete first head.
    pub first_request: Duration,
    /// Between requests on an authenticated keep-alive connection.
    pub idle: Duration,
    /// From a complete head to a complete body.
    pub body: Duration,
    /// Largest body.
    pub body_cap: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 32,
            first_request: Duration::from_secs(5),
            idle: Duration::from_secs(120),
            body: Duration::from_secs(30),
            body_cap: BODY_CAP,
        }
    }
}

/// What is shared by every connection.
struct Shared {
    token: String,
    port: u16,
    tools: Vec<PiTool>,
    calls: mpsc::Sender<ToolCall>,
    limits: Limits,
}

/// A running server; drop it to stop it.
pub struct McpServer {
    /// Where it listens: 127.0.0.1 and the port it got.
    pub addr: SocketAddr,
    /// The secret every request must carry, written into agy's MCP config.
    pub token: String,
    accept: JoinHandle<()>,
}

impl McpServer {
    /// Serve `tools` on 127.0.0.1 at a free port; each `tools/call` comes
    /// out of `calls` as a [`ToolCall`] to answer.
    pub async fn start(
        tools: Vec<PiTool>,
        calls: mpsc::Sender<ToolCall>,
    ) -> std::io::Result<McpServer> {
        McpServer::start_with(tools, calls, Limits::default()).await
    }

    /// [`McpServer::start`] with other caps (tests use small ones).
    pub(crate) async fn start_with(
        tools: Vec<PiTool>,
        calls: mpsc::Sender<ToolCall>,
        limits: Limits,
    ) -> std::io::Result<McpServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let token = agy_format::text::new_secret();
        let shared = Arc::new(Shared {
            token: token.clone(),
            port: addr.port(),
            tools,
            calls,
            limits,
        });
        let accept = tokio::spawn(accept_loop(listener, shared));
        Ok(McpServer {
            addr,
            token,
            accept,
        })
    }

    /// The URL agy is given.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // Drops the listener and the JoinSet of connections (aborting them).
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    const BACKOFF_MIN: Duration = Duration::from_millis(10);
    const BACKOFF_MAX: Duration = Duration::from_secs(1);
    let slots = Arc::new(Semaphore::new(shared.limits.connections.max(1)));
    let mut conns = JoinSet::new();
    let mut backoff = BACKOFF_MIN;
    loop {
        while conns.try_join_next().is_some() {}
        // A slot first: over the cap, connections wait in the backlog.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                backoff = BACKOFF_MIN;
                accepted
            }
            Err(_) => {
                // EMFILE and friends: retrying at once would spin.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        if !peer.ip().is_loopback() {
            continue;
        }
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        conns.spawn(async move {
            serve_connection(stream, shared).await;
            drop(slot);
        });
    }
}

fn is_loopback_name(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

/// `Host` names us: a loopback name or address with our port, any case.
pub(crate) fn is_our_host(host: &str, port: u16) -> bool {
    let host = host.to_ascii_lowercase();
    match host.rsplit_once(':') {
        Some((name, p)) => is_loopback_name(name) && p.parse::<u16>() == Ok(port),
        None => false,
    }
}

/// `Origin` is a loopback page (any port, any case).
pub(crate) fn is_local_origin(origin: &str) -> bool {
    let origin = origin.to_ascii_lowercase();
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    let name = match authority.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next().unwrap_or("")),
        None => authority.split(':').next().unwrap_or("").to_string(),
    };
    is_loopback_name(&name)
}

/// A protocol version a client may name in `MCP-Protocol-Version`.
pub(crate) fn is_known_version(v: &str) -> bool {
    PROTOCOL_VERSIONS.contains(&v) || CLIENT_VERSIONS.contains(&v)
}

fn json_response(status: u16, reason: &str, extra: &[(&str, &str)], body: &Value) -> Vec<u8> {
    http::response(
        status,
        reason,
        Some("application/json"),
        extra,
        body.to_string().as_bytes(),
    )
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A refusal from the head: the connection closes after it.
fn refusal(status: u16, reason: &str, code: i64, message: &str) -> Vec<u8> {
    json_response(
        status,
        reason,
        &[("Connection", "close")],
        &rpc_error(Value::Null, code, message),
    )
}

/// What the head of a request decides.
enum Verdict {
    /// Read the body and answer the JSON-RPC message in it.
    Post,
    /// Answer this and close, without reading the body.
    Close(Vec<u8>),
}

/// Check everything the head tells before any of the body is read.
fn judge_head(req: &Request, shared: &Shared) -> Verdict {
    if req.path != "/mcp" {
        return Verdict::Close(refusal(404, "Not Found", -32600, "no such path"));
    }
    if !req
        .header("host")
        .is_some_and(|h| is_our_host(h, shared.port))
    {
        return Verdict::Close(refusal(403, "Forbidden", -32600, "Host is not this server"));
    }
    if req.header("origin").is_some_and(|o| !is_local_origin(o)) {
        return Verdict::Close(refusal(403, "Forbidden", -32001, "foreign origin"));
    }
    let token = req.header(TOKEN_HEADER).unwrap_or("");
    if !same_secret(token.as_bytes(), shared.token.as_bytes()) {
        let msg = "missing or wrong token";
        return Verdict::Close(refusal(401, "Unauthorized", -32001, msg));
    }
    if let Some(v) = req.header("mcp-protocol-version") {
        if !is_known_version(v) {
            let msg = format!("unsupported MCP-Protocol-Version {v:?}");
            return Verdict::Close(refusal(400, "Bad Request", -32600, &msg));
        }
    }
    match req.method.as_str() {
        "POST" => Verdict::Post,
        // No server-initiated stream; the session is stateless.
        "DELETE" => Verdict::Close(http::response(
            200,
            "OK",
            None,
            &[("Connection", "close")],
            b"",
        )),
        _ => Verdict::Close(http::response(
            405,
            "Method Not Allowed",
            None,
            &[("Allow", "POST, DELETE"), ("Connection", "close")],
            b"",
        )),
    }
}

/// Send a refusal, then read and drop what the client may still be sending
/// (bounded), so it sees the answer rather than a reset.
async fn refuse(stream: &mut TcpStream, out: &[u8]) {
    if stream.write_all(out).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 8192];
    let mut left = LINGER_BYTES;
    let _ = timeout(LINGER_TIME, async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

fn http_error_response(e: &HttpError) -> Vec<u8> {
    let (status, reason) = e.status();
    refusal(status, reason, -32600, &e.to_string())
}

async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let limits = shared.limits;
    let mut buf = Vec::new();
    let mut wait = limits.first_request;
    loop {
        let mut req = match timeout(wait, http::read_head(&mut stream, &mut buf)).await {
            Err(_) | Ok(Ok(None)) | Ok(Err(HttpError::Closed)) => return,
            Ok(Err(e)) => return refuse(&mut stream, &http_error_response(&e)).await,
            Ok(Ok(Some(req))) => req,
        };
        if let Verdict::Close(out) = judge_head(&req, &shared) {
            return refuse(&mut stream, &out).await;
        }
        let body = http::read_body(&mut stream, &mut buf, &mut req, limits.body_cap);
        match timeout(limits.body, body).await {
            Err(_) | Ok(Err(HttpError::Closed)) => return,
            Ok(Err(e)) => return refuse(&mut stream, &http_error_response(&e)).await,
            Ok(Ok(())) => {}
        }
        let out = {
            let (mut rd, _) = stream.split();
            let pipeline_cap = http::HEADER_CAP.saturating_add(limits.body_cap);
            tokio::select! {
                out = answer(&req.body, &shared) => out,
                // agy hung up (cut the call off): stop waiting; the
                // parked call learns it from its closed reply channel.
                _ = hung_up(&mut rd, &mut buf, pipeline_cap) => return,
            }
        };
        if stream.write_all(&out).await.is_err() || req.close {
            return;
        }
        wait = limits.idle;
    }
}

/// Resolves when the peer closes, or has pipelined more than `cap` bytes
/// behind a parked call; bytes it sends meanwhile are kept for the next read.
async fn hung_up<R: tokio::io::AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>, cap: usize) {
    let mut chunk = [0u8; 4096];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > cap {
            return;
        }
    }
}

/// One JSON-RPC message, as the transport classifies it.
enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification or a response: nothing to answer.
    Accepted,
}

/// Classify a POST body; `Err` is the JSON-RPC error to answer with 400.
fn classify(body: &[u8]) -> Result<Message, Value> {
    let msg: Value = serde_json::from_slice(body)
        .map_err(|e| rpc_error(Value::Null, -32700, &format!("parse error: {e}")))?;
    let obj = match msg {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            let m = "batches are not supported: one JSON-RPC message per POST";
            return Err(rpc_error(Value::Null, -32600, m));
        }
        _ => return Err(rpc_error(Value::Null, -32600, "not a JSON-RPC message")),
    };
    let id = obj.get("id").filter(|id| id.is_string() || id.is_number());
    let echo = id.cloned().unwrap_or(Value::Null);
    let invalid = |m: &str| Err(rpc_error(echo.clone(), -32600, m));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    match (obj.get("method"), obj.contains_key("id"), id) {
        (Some(Value::String(method)), true, Some(id)) => Ok(Message::Request {
            id: id.clone(),
            method: method.clone(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        }),
        (Some(Value::String(_)), false, _) => Ok(Message::Accepted),
        (None, true, Some(_)) if obj.contains_key("result") != obj.contains_key("error") => {
            Ok(Message::Accepted)
        }
        (Some(Value::String(_)), true, None) => invalid("\"id\" must be a string or a number"),
        _ => invalid("neither a request, a notification nor a response"),
    }
}

/// One POST body: the HTTP response.
async fn answer(body: &[u8], shared: &Shared) -> Vec<u8> {
    match classify(body) {
        Err(error) => json_response(400, "Bad Request", &[], &error),
        Ok(Message::Accepted) => http::response(202, "Accepted", None, &[], b""),
        Ok(Message::Request { id, method, params }) => {
            let result = match method.as_str() {
                "initialize" => Ok(initialize(&params)),
                "ping" => Ok(json!({})),
                "tools/list" => Ok(tools_list(&shared.tools)),
                "tools/call" => call(&params, shared).await,
                // agy's `server/discover` lands here first, as it expects.
                other => Err((-32601, format!("method not found: {other}"))),
            };
            let reply = match result {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err((code, message)) => rpc_error(id, code, &message),
            };
            json_response(200, "OK", &[], &reply)
        }
    }
}

/// The version to answer `initialize` with.
pub(crate) fn negotiate(requested: Option<&str>) -> &'static str {
    PROTOCOL_VERSIONS
        .iter()
        .find(|v| Some(**v) == requested)
        .copied()
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

fn initialize(params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "agy-bridge", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Tools of the pi coding agent you are working inside. pi runs them, with its own permission checks and display, and returns their result.",
    })
}

fn tools_list(tools: &[PiTool]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            let schema = match &t.parameters {
                Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("object") => {
                    t.parameters.clone()
                }
                _ => json!({"type": "object"}),
            };
            json!({"name": t.name, "description": t.description, "inputSchema": schema})
        })
        .collect();
    json!({"tools": tools})
}

async fn call(params: &Value, shared: &Shared) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    if !shared.tools.iter().any(|t| t.name == name) {
        return Err((-32602, format!("unknown tool: {name:?}")));
    }
    // Absent (or null, as some clients send for no arguments) is `{}`;
    // anything else that is not an object never reaches pi.
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(_) => return Err((-32602, "tools/call arguments must be an object".into())),
    };
    let (call, answer) = ToolCall::new(name.to_string(), arguments);
    // If the turn is over, the call comes back in the error and its drop
    // answers it. Waiting for room costs nothing: this connection waits
    // for pi's answer anyway.
    let _ = shared.calls.send(call).await;
    let outcome = answer.await.unwrap_or_else(|_| {
        ToolOutcome::error("agy-bridge ended this turn before pi answered the tool call")
    });
    Ok(outcome.to_mcp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_tool() -> PiTool {
        PiTool {
            name: "echo".into(),
            description: "say it back".into(),
            parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
        }
    }

    async fn start() -> (McpServer, mpsc::Receiver<ToolCall>) {
        let (tx, rx) = mpsc::channel(crate::pi::mcp::CALL_CAPACITY);
        (
            McpServer::start(vec![echo_tool()], tx)
                .await
                .expect("server"),
            rx,
        )
    }

    /// One request on a fresh connection: (status, headers+body text).
    async fn post(server: &McpServer, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            server.addr,
            body.len()
        );
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, out)
    }

    fn body_json(resp: &str) -> Value {
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    #[tokio::test]
    async fn agy_protocol_version_is_accepted_everywhere() {
        let (server, _rx) = start().await;
        let token = server.token.clone();
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"agy","version":"1"}}}"#;
        let (status, resp) = post(&server, &[("x-token", &token)], init).await;
        assert_eq!(status, 200, "{resp}");
        assert!(resp.contains("Content-Type: application/json"));
        assert_eq!(
            body_json(&resp)["result"]["protocolVersion"],
            PROTOCOL_VERSIONS[0]
        );
        let follow = [
            ("x-token", token.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
        ];
        let (status, _) = post(
            &server,
            &follow,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
        assert_eq!(status, 202);
        let (status, resp) = post(
            &server,
            &follow,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        )
        .await;
        assert_eq!(status, 200);
        let listed = body_json(&resp);
        assert_eq!(listed["result"]["tools"][0]["name"], "echo");
        assert_eq!(
            listed["result"]["tools"][0]["inputSchema"]["properties"]["text"]["type"],
            "string"
        );
        let (status, resp) = post(
            &server,
            &follow,
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        )
        .await;
        assert_eq!(
            (status, body_json(&resp)["result"].clone()),
            (200, json!({}))
        );
        // A version we know is echoed back.
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
    }

    #[tokio::test]
    async fn token_is_required() {
        let (server, _rx) = start().await;
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(post(&server, &[], ping).await.0, 401);
        let mut wrong = server.token.clone().into_bytes();
        wrong[0] ^= 1;
        let wrong = String::from_utf8(wrong).unwrap_or_default();
        assert_eq!(post(&server, &[("x-token", &wrong)], ping).await.0, 401);
        assert_eq!(post(&server, &[("x-token", "short")], ping).await.0, 401);
        let token = server.token.clone();
        assert_eq!(
            post(
                &server,
                &[("x-token", &token), ("Origin", "http://evil.example")],
                ping
            )
            .await
            .0,
            403
        );
        assert_eq!(
            post(
                &server,
                &[("x-token", &token), ("Origin", "http://localhost:3000")],
                ping
            )
            .await
            .0,
            200
        );
        assert!(
            same_secret(b"abc", b"abc")
                && !same_secret(b"abd", b"abc")
                && !same_secret(b"ab", b"abc")
        );
    }

    #[tokio::test]
    async fn bodies_are_capped() {
        let (server, _rx) = start().await;
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nx-token: {}\r\nContent-Length: {}\r\n\r\n",
            server.addr,
            server.token,
            BODY_CAP + 1
        );
        s.write_all(head.as_bytes()).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
    }

    #[tokio::test]
    async fn a_call_parks_until_answered() {
        let (server, mut rx) = start().await;
        let token = server.token.clone();
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
        let pending = tokio::spawn(async move {
            let (status, resp) = post(&server, &[("x-token", &token)], body).await;
            (status, body_json(&resp), server)
        });
        let call = rx.recv().await.expect("parked call");
        assert_eq!(
            (call.name.as_str(), &call.arguments),
            ("echo", &json!({"text":"hi"}))
        );
        call.answer(ToolOutcome::from_pi(
            &[json!({"type":"text","text":"hi back"})],
            false,
        ));
        let (status, resp, server) = pending.await.expect("join");
        assert_eq!(status, 200);
        assert_eq!(resp["id"], 7);
        assert_eq!(
            resp["result"],
            json!({"content":[{"type":"text","text":"hi back"}],"isError":false})
        );
        // Unknown tools are refused without parking.
        let bad = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nope"}}"#;
        let (status, resp) = post(&server, &[("x-token", &server.token.clone())], bad).await;
        assert_eq!(
            (status, body_json(&resp)["error"]["code"].clone()),
            (200, json!(-32602))
        );
    }

    #[tokio::test]
    async fn dropping_the_server_answers_and_closes() {
        let (server, rx) = start().await;
        let addr = server.addr;
        let token = server.token.clone();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
        let client = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let req = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nx-token: {token}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            s.write_all(req.as_bytes()).await.expect("write");
            let mut out = String::new();
            let _ = s.read_to_string(&mut out).await;
            out
        });
        let mut rx = rx;
        let call = rx.recv().await.expect("parked");
        drop(call); // the turn ends: the call is answered with an error
        let out = client.await.expect("join");
        assert!(
            out.contains("\"isError\":true") && out.contains("ended this turn"),
            "{out}"
        );
        drop(server);
        tokio::task::yield_now().await;
        // The port is closed once the server is gone.
        let mut closed = false;
        for _ in 0..200 {
            if TcpStream::connect(addr).await.is_err() {
                closed = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(closed, "port {addr} still accepts connections");
    }

    /// Raw bytes on a fresh connection; everything the server sends back
    /// before it closes (or `within` passes).
    async fn raw(server: &McpServer, bytes: &[u8], within: Duration) -> String {
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let _ = s.write_all(bytes).await;
        let mut out = Vec::new();
        let _ = timeout(within, s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    fn ping_head(server: &McpServer, extra: &str) -> String {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nx-token: {}\r\n{extra}",
            server.addr, server.token
        )
    }

    async fn still_serves(server: &McpServer) {
        let token = server.token.clone();
        let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
        assert_eq!(post(server, &[("x-token", &token)], ping).await.0, 200);
    }

    #[tokio::test]
    async fn agy_discovers_then_initializes_with_2025_11_25() {
        let (server, _rx) = start().await;
        let token = server.token.clone();
        let auth = [("x-token", token.as_str())];
        let discover = r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"protocolVersion":"2026-07-28"}}}"#;
        let (status, resp) = post(&server, &auth, discover).await;
        assert_eq!(
            (status, body_json(&resp)["error"]["code"].clone()),
            (200, json!(-32601))
        );
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"roots":{}},"clientInfo":{"name":"antigravity-client","version":"1.0.0"}}}"#;
        let (status, resp) = post(&server, &auth, init).await;
        assert_eq!(
            (
                status,
                body_json(&resp)["result"]["protocolVersion"].clone()
            ),
            (200, json!("2025-11-25"))
        );
        for v in [
            "2025-11-25",
            "2026-07-28",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05",
        ] {
            let h = [("x-token", token.as_str()), ("MCP-Protocol-Version", v)];
            let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            assert_eq!(post(&server, &h, note).await.0, 202, "{v}");
        }
    }

    #[tokio::test]
    async fn an_overflowing_chunk_is_refused_and_the_server_goes_on() {
        // Finding 5: a chunk of size ffffffffffffffff panicked the task,
        // before the token was checked.
        let (server, _rx) = start().await;
        let chunk = "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n";
        let out = raw(
            &server,
            ping_head(&server, chunk).as_bytes(),
            Duration::from_secs(5),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
        let anon = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n{chunk}", server.addr);
        let out = raw(&server, anon.as_bytes(), Duration::from_secs(5)).await;
        assert!(out.starts_with("HTTP/1.1 401 "), "{out}");
        still_serves(&server).await;
    }

    #[tokio::test]
    async fn an_unauthenticated_body_is_refused_before_it_is_sent() {
        // Finding 6: bodies were buffered before the token was checked. The
        // head alone announces 4 MB; the answer comes without the body.
        let (server, _rx) = start().await;
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {BODY_CAP}\r\n\r\n",
            server.addr
        );
        let out = raw(&server, head.as_bytes(), Duration::from_secs(5)).await;
        assert!(out.starts_with("HTTP/1.1 401 "), "{out}");
        // And a client that sends its 4 MB anyway sees the 401, not a reset.
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        s.write_all(head.as_bytes()).await.expect("head");
        let _ = s.write_all(&vec![b'x'; BODY_CAP]).await;
        let mut out = Vec::new();
        let _ = timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        assert!(
            out.starts_with(b"HTTP/1.1 401 "),
            "{}",
            String::from_utf8_lossy(&out)
        );
        still_serves(&server).await;
    }

    #[tokio::test]
    async fn connections_are_capped_and_slow_ones_dropped() {
        // Finding 7: connections were unlimited and never timed out.
        let (tx, _rx) = mpsc::channel(crate::pi::mcp::CALL_CAPACITY);
        let limits = Limits {
            connections: 2,
            first_request: Duration::from_millis(400),
            ..Limits::default()
        };
        let server = McpServer::start_with(vec![echo_tool()], tx, limits)
            .await
            .expect("server");
        let mut idle = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(server.addr).await.expect("connect");
            s.write_all(b"POST /mcp HTT").await.expect("slowloris");
            idle.push(s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The third waits in the backlog until a slot frees, then is served.
        let began = std::time::Instant::now();
        still_serves(&server).await;
        assert!(
            began.elapsed() >= Duration::from_millis(250),
            "{:?}",
            began.elapsed()
        );
        // The slow ones were dropped at their deadline.
        for mut s in idle {
            let mut out = Vec::new();
            let read = timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
            assert!(
                matches!(read, Ok(Ok(_))) && out.is_empty(),
                "{read:?} {out:?}"
            );
        }
    }

    #[tokio::test]
    async fn protocol_deviations_are_refused() {
        // Finding 8.
        let (server, mut rx) = start().await;
        let token = server.token.clone();
        let auth = [("x-token", token.as_str())];
        let v = [
            ("x-token", token.as_str()),
            ("MCP-Protocol-Version", "1999-01-01"),
        ];
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(post(&server, &v, ping).await.0, 400);
        let code = |resp: &str| body_json(resp)["error"]["code"].clone();
        for (body, status, want) in [
            (r#"{"id":1,"method":"ping"}"#, 400, -32600),
            (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, 400, -32600),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, 400, -32600),
            (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, 400, -32600),
            (r#"{"jsonrpc":"2.0","id":1}"#, 400, -32600),
            ("7", 400, -32600),
            ("{nope", 400, -32700),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":"hi"}}"#,
                200,
                -32602,
            ),
        ] {
            let (got, resp) = post(&server, &auth, body).await;
            assert_eq!((got, code(&resp)), (status, json!(want)), "{body}: {resp}");
        }
        assert!(rx.try_recv().is_err(), "non-object arguments reached pi");
        let response = r#"{"jsonrpc":"2.0","id":5,"result":{}}"#;
        assert_eq!(post(&server, &auth, response).await.0, 202);
    }

    #[tokio::test]
    async fn host_and_origin_are_loopback_only() {
        let (server, _rx) = start().await;
        let port = server.addr.port();
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let bad_hosts = [
            format!("evil.example:{port}"),
            format!("127.0.0.1:{}", port.wrapping_add(1)),
            "127.0.0.1".to_string(),
            String::new(),
        ];
        for host in bad_hosts {
            let req = format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nx-token: {}\r\nContent-Length: {}\r\n\r\n{ping}",
                server.token,
                ping.len()
            );
            let out = raw(&server, req.as_bytes(), Duration::from_secs(5)).await;
            assert!(out.starts_with("HTTP/1.1 403 "), "{host}: {out}");
        }
        let token = server.token.clone();
        let upper = format!("http://LOCALHOST:{port}");
        for (origin, want) in [
            (upper.as_str(), 200),
            ("http://[::1]:9", 200),
            ("HTTPS://127.0.0.1", 200),
            ("null", 403),
            ("http://localhost.evil.example", 403),
        ] {
            let h = [("x-token", token.as_str()), ("Origin", origin)];
            assert_eq!(post(&server, &h, ping).await.0, want, "{origin}");
        }
        assert!(is_our_host(&format!("LocalHost:{port}"), port));
        assert!(is_our_host(&format!("[::1]:{port}"), port));
    }
}
