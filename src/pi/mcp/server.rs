//! The bridge's MCP server: pi's tools, offered to agy for one turn over
//! Streamable HTTP on loopback.
//!
//! Every response is a single `application/json` body (the transport allows
//! it instead of SSE, and agy's client takes it). Methods: `initialize`
//! (answered with the client's version when we know it, else our newest:
//! agy asks for `2026-07-28` and sends that in `MCP-Protocol-Version` on
//! every follow-up, which is accepted, never a 400; see docs/agy-format.md,
//! "MCP"), `ping`, `tools/list` and `tools/call`, which parks the request
//! until pi's result arrives (see [`super::park`]). Notifications get 202.
//! Guard rails: loopback only, a random token header compared in constant
//! time, a foreign `Origin` refused, request size capped. The server lives as
//! long as its [`McpServer`] handle: dropping it closes the port and every
//! connection, and every parked call is then answered with an error.

use super::http::{self, HttpError, Request};
use super::park::{PiTool, ToolCall, ToolOutcome};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

/// The header agy sends the token in.
pub const TOKEN_HEADER: &str = "x-token";
/// Request bodies above this are refused (413).
pub const BODY_CAP: usize = 4 * 1024 * 1024;
/// Protocol versions this server implements, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// What is shared by every connection.
struct Shared {
    token: String,
    tools: Vec<PiTool>,
    calls: mpsc::UnboundedSender<ToolCall>,
}

/// A running server; drop it to stop it.
pub struct McpServer {
    pub addr: SocketAddr,
    pub token: String,
    accept: JoinHandle<()>,
}

impl McpServer {
    /// Serve `tools` on 127.0.0.1 at a free port; each `tools/call` comes
    /// out of `calls` as a [`ToolCall`] to answer.
    pub async fn start(
        tools: Vec<PiTool>,
        calls: mpsc::UnboundedSender<ToolCall>,
    ) -> std::io::Result<McpServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let shared = Arc::new(Shared {
            token: token.clone(),
            tools,
            calls,
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
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let Ok((stream, peer)) = accepted else {
            continue;
        };
        if !peer.ip().is_loopback() {
            continue;
        }
        let _ = stream.set_nodelay(true);
        conns.spawn(serve_connection(stream, shared.clone()));
    }
}

/// Constant-time equality (the length of our token is not a secret).
pub fn same_token(given: &[u8], ours: &[u8]) -> bool {
    if given.len() != ours.len() {
        return false;
    }
    given
        .iter()
        .zip(ours)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

fn is_local_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or(origin);
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split([':', '/']).next().unwrap_or(""),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

fn json_response(status: u16, reason: &str, body: &Value) -> Vec<u8> {
    http::response(
        status,
        reason,
        Some("application/json"),
        &[],
        body.to_string().as_bytes(),
    )
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// What to do with a request that passed the HTTP checks.
enum Route {
    Now(Vec<u8>),
    Rpc(Value),
}

fn route(req: &Request, shared: &Shared) -> Route {
    if req.path != "/mcp" {
        return Route::Now(http::response(404, "Not Found", None, &[], b""));
    }
    let token = req.header(TOKEN_HEADER).unwrap_or("");
    if !same_token(token.as_bytes(), shared.token.as_bytes()) {
        return Route::Now(json_response(
            401,
            "Unauthorized",
            &rpc_error(Value::Null, -32001, "missing or wrong token"),
        ));
    }
    if req.header("origin").is_some_and(|o| !is_local_origin(o)) {
        return Route::Now(json_response(
            403,
            "Forbidden",
            &rpc_error(Value::Null, -32001, "foreign origin"),
        ));
    }
    match req.method.as_str() {
        "POST" => match serde_json::from_slice::<Value>(&req.body) {
            Ok(v) => Route::Rpc(v),
            Err(e) => Route::Now(json_response(
                400,
                "Bad Request",
                &rpc_error(Value::Null, -32700, &format!("parse error: {e}")),
            )),
        },
        // No server-initiated stream; the session is stateless.
        "DELETE" => Route::Now(http::response(200, "OK", None, &[], b"")),
        _ => Route::Now(http::response(
            405,
            "Method Not Allowed",
            None,
            &[("Allow", "POST, DELETE")],
            b"",
        )),
    }
}

async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    loop {
        let req = match http::read_request(&mut stream, &mut buf, BODY_CAP).await {
            Ok(Some(r)) => r,
            Ok(None) | Err(HttpError::Closed) => return,
            Err(e) => {
                let (status, reason) = e.status();
                let body = rpc_error(Value::Null, -32600, &e.to_string());
                let _ = stream
                    .write_all(&json_response(status, reason, &body))
                    .await;
                return;
            }
        };
        let out = match route(&req, &shared) {
            Route::Now(bytes) => bytes,
            Route::Rpc(msg) => {
                let (mut rd, _) = stream.split();
                tokio::select! {
                    out = rpc(msg, &shared) => out,
                    // agy hung up (cut the call off): stop waiting; the
                    // parked call learns it from its closed reply channel.
                    _ = hung_up(&mut rd, &mut buf) => return,
                }
            }
        };
        if stream.write_all(&out).await.is_err() || req.close {
            return;
        }
    }
}

/// Resolves when the peer closes; bytes it sends meanwhile (a pipelined
/// request) are kept for the next read.
async fn hung_up<R: tokio::io::AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 4096];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// One POST body: a message or a batch; the HTTP response.
async fn rpc(msg: Value, shared: &Shared) -> Vec<u8> {
    let answer = match msg {
        Value::Array(batch) => {
            let mut out = Vec::new();
            for m in batch {
                out.extend(message(m, shared).await);
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        single => message(single, shared).await,
    };
    match answer {
        Some(v) => json_response(200, "OK", &v),
        None => http::response(202, "Accepted", None, &[], b""),
    }
}

/// One JSON-RPC message; `None` for notifications and responses.
async fn message(msg: Value, shared: &Shared) -> Option<Value> {
    let method = msg.get("method").and_then(Value::as_str)?;
    let id = msg.get("id").filter(|id| !id.is_null())?.clone();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools_list(&shared.tools)),
        "tools/call" => call(&params, shared).await,
        other => Err((-32601, format!("method not found: {other}"))),
    };
    Some(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => rpc_error(id, code, &message),
    })
}

/// The version to answer `initialize` with.
pub fn negotiate(requested: Option<&str>) -> &'static str {
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
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let (call, answer) = ToolCall::new(name.to_string(), arguments);
    // If the turn is over, the call comes back in the error and its drop
    // answers it.
    let _ = shared.calls.send(call);
    let outcome = answer.await.unwrap_or_else(|_| {
        ToolOutcome::error("agy-bridge ended this turn before pi answered the tool call")
    });
    Ok(outcome.to_mcp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn echo_tool() -> PiTool {
        PiTool {
            name: "echo".into(),
            description: "say it back".into(),
            parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
        }
    }

    async fn start() -> (McpServer, mpsc::UnboundedReceiver<ToolCall>) {
        let (tx, rx) = mpsc::unbounded_channel();
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
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n",
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
            same_token(b"abc", b"abc") && !same_token(b"abd", b"abc") && !same_token(b"ab", b"abc")
        );
    }

    #[tokio::test]
    async fn bodies_are_capped() {
        let (server, _rx) = start().await;
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nx-token: {}\r\nContent-Length: {}\r\n\r\n",
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
            let req = format!("POST /mcp HTTP/1.1\r\nx-token: {token}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len());
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
}
