//! Conformance with a client nobody here wrote: the official MCP TypeScript
//! SDK (`@modelcontextprotocol/sdk`) runs initialize, tools/list and
//! tools/call against a live bridge MCP server. The SDK comes from npm into
//! CI's cache (`.ci/mcp-sdk.sh`), which names its install directory in
//! `AGY_BRIDGE_MCP_SDK`; without that variable the test says it was skipped.

use agy_bridge::mcp::server::McpServer;
use agy_bridge::mcp::{PiTool, ToolOutcome};
use serde_json::{json, Value};
use tokio::sync::mpsc;

#[tokio::test]
async fn the_official_sdk_client_initializes_lists_and_calls() {
    let Some(sdk) = std::env::var_os("AGY_BRIDGE_MCP_SDK") else {
        eprintln!("skipped: AGY_BRIDGE_MCP_SDK is not set (.ci/mcp-sdk.sh sets it)");
        return;
    };
    let tool = PiTool {
        name: "echo".into(),
        description: "say it back".into(),
        parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
    };
    let (tx, mut rx) = mpsc::channel(agy_bridge::mcp::CALL_CAPACITY);
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
        .output()
        .await
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "SDK client failed: {stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    eprintln!(
        "SDK {} negotiated {}",
        got["sdkVersion"], got["protocolVersion"]
    );
    assert_eq!(got["server"]["name"], "agy-bridge");
    assert_eq!(got["tools"], json!(["echo"]));
    assert_eq!(
        got["called"]["content"],
        json!([{"type":"text","text":"hi back"}])
    );
    assert_eq!(got["refused"], json!(-32602), "{got}");
    drop(server);
    let seen = answering.await.expect("join");
    assert_eq!(
        seen,
        [json!({"text":"hi"})],
        "only the object arguments reached pi"
    );
}
