//! Conformance with a client nobody here wrote: the official MCP TypeScript
//! SDK (`@modelcontextprotocol/sdk`) runs against a live bridge MCP server,
//! once with its own sequence (initialize, tools/list, tools/call) and once
//! with agy's (`server/discover` refused with -32601, then initialize at
//! `2025-11-25` as `antigravity-client`; docs/agy-format.md, "MCP"). The
//! SDK comes from npm into CI's cache (`.ci/mcp-sdk.sh`), which names its
//! install directory in `AGY_BRIDGE_MCP_SDK`. The tests are `#[ignore]`d
//! in a plain `cargo test` and fail without that variable when run
//! (`.ci/run` installs the SDK and runs them with `--include-ignored`).

use agy_bridge::pi::provider::PiTool;
use agy_bridge::pi::testing::{McpServer, ToolOutcome};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// What one run of `tests/mcp_sdk/client.mjs` in `mode` printed, and the
/// arguments of the calls that reached pi. Panics without the SDK: a test
/// that needs it never passes by not running.
async fn sdk_run(mode: &str) -> (Value, Vec<Value>) {
    let sdk = std::env::var_os("AGY_BRIDGE_MCP_SDK").expect(
        "this test runs the official MCP SDK: set AGY_BRIDGE_MCP_SDK to its install directory \
         (`eval \"$(bash .ci/mcp-sdk.sh --install-only)\"` installs it and sets it)",
    );
    let tool = PiTool {
        name: "echo".into(),
        description: "say it back".into(),
        parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
    };
    let (tx, mut rx) = mpsc::channel(agy_bridge::pi::testing::CALL_CAPACITY);
    let server = McpServer::start(vec![tool], tx).await.expect("server");
    // pi's side: answer each call with its text.
    let answering = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(call) = rx.recv().await {
            seen.push(call.arguments.clone());
            let text = call.arguments["text"].as_str().unwrap_or("").to_string();
            call.answer(ToolOutcome::from_pi(
                &[json!({"type":"text","text": format!("{text} back")})],
                false,
            ));
        }
        seen
    });
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/client.mjs");
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .arg(&sdk)
        .arg(server.url())
        .arg(&server.token)
        .arg(mode)
        .output()
        .await
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "SDK client ({mode}) failed: {stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    eprintln!(
        "SDK {} ({mode}) negotiated {}",
        got["sdkVersion"], got["protocolVersion"]
    );
    drop(server);
    let seen = answering.await.expect("join");
    (got, seen)
}

/// What both sequences must get: the server's name, the one tool, pi's
/// answer, a refusal of non-object arguments that never reaches pi.
fn assert_served(got: &Value, seen: &[Value]) {
    assert_eq!(got["server"]["name"], "agy-bridge");
    assert_eq!(got["tools"], json!(["echo"]));
    assert_eq!(
        got["called"]["content"],
        json!([{"type":"text","text":"hi back"}])
    );
    assert_eq!(got["refused"], json!(-32602), "{got}");
    assert_eq!(
        seen,
        [json!({"text":"hi"})],
        "only the object arguments reached pi"
    );
}

#[tokio::test]
#[ignore = "needs the official MCP SDK: AGY_BRIDGE_MCP_SDK (.ci/mcp-sdk.sh installs it)"]
async fn the_official_sdk_client_initializes_lists_and_calls() {
    let (got, seen) = sdk_run("sdk").await;
    assert_served(&got, &seen);
}

#[tokio::test]
#[ignore = "needs the official MCP SDK: AGY_BRIDGE_MCP_SDK (.ci/mcp-sdk.sh installs it)"]
async fn the_sdk_speaking_agys_handshake_is_served() {
    let (got, seen) = sdk_run("agy").await;
    assert_eq!(
        got["discovered"]["error"]["code"],
        json!(-32601),
        "server/discover is refused as agy expects: {got}"
    );
    assert_eq!(got["discovered"]["id"], json!(0));
    assert_eq!(got["protocolVersion"], "2025-11-25", "{got}");
    assert_served(&got, &seen);
    let sent = got["sent"].as_array().cloned().unwrap_or_default();
    let methods: Vec<&str> = sent.iter().filter_map(|s| s["method"].as_str()).collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call"
        ],
        "{got}"
    );
    assert_eq!(
        sent[0]["params"],
        json!({"_meta": {"protocolVersion": "2026-07-28"}})
    );
    assert_eq!(
        sent[1]["params"],
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"elicitation": {}, "roots": {}},
               "clientInfo": {"name": "antigravity-client", "version": "1.0.0"}})
    );
    for (i, s) in sent.iter().enumerate() {
        assert_eq!(s["token"], true, "the token on request {i}");
        if i >= 2 {
            assert_eq!(s["protocolHeader"], "2025-11-25", "request {i}: {s}");
        }
    }
}
