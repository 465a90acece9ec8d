//! What the bridge adds to a tool round trip: agy's `tools/call` in, the
//! pi `toolCall` out, pi's result in, the MCP response out — with a no-op
//! tool and a pi stand-in that answers the moment it reads `done` with
//! `toolUse`, so everything measured is the bridge (HTTP parsing, parking,
//! the batch window `AGY_PI_TOOL_BATCH_MS`, the event lines, the control
//! line). The extension's own JSON handling in pi is not included.
//!
//! Run: `cargo bench --bench tool_roundtrip --profile test` (prints the
//! median and p95 of 300 round trips on one keep-alive connection; the
//! budget is 5 ms).

use agy_bridge::pi::provider::stream::PiStream;
use agy_bridge::pi::provider::PiTool;
use agy_bridge::pi::testing::{relay, Control, EventMapper, McpServer, ToolLines};
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{channel, Sender};

/// pi, as far as the bridge can tell: answers every toolUse message at once.
struct InstantPi {
    control: Sender<Control>,
    ids: Vec<String>,
}

impl Write for InstantPi {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for line in String::from_utf8_lossy(buf).lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            match v["type"].as_str() {
                Some("toolcall_start") => self.ids.push(v["id"].as_str().unwrap_or("").to_string()),
                Some("done") if v["reason"] == "toolUse" => {
                    for id in self.ids.drain(..) {
                        let line = json!({"type":"tool_result","toolCallId":id,"content":[],"isError":false}).to_string();
                        if let Some(c) = Control::parse(&line) {
                            let _ = self.control.try_send(c);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One request on a keep-alive connection; the response body.
async fn post(s: &mut TcpStream, token: &str, body: &str) -> Vec<u8> {
    let host = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let req = format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nx-token: {token}\r\nMCP-Protocol-Version: 2026-07-28\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return buf[end + 4..end + 4 + len].to_vec();
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (call_tx, calls) = channel(agy_bridge::pi::testing::CALL_CAPACITY);
        let (control_tx, control) = channel(agy_bridge::pi::testing::CONTROL_CAPACITY);
        let (_events_tx, mut events) = agy_bridge::runner::event_channel();
        let tool = PiTool { name: "noop".into(), description: "does nothing".into(), parameters: json!({"type":"object"}) };
        let server = McpServer::start(vec![tool], call_tx).await.expect("server");
        let settings = agy_bridge::settings::Settings::from_process();
        if let Some(bad) = settings.problem("AGY_PI_TOOL_BATCH_MS") {
            panic!("{bad}");
        }
        let window = settings.tool_batch;
        tokio::spawn(async move {
            let mut lines = ToolLines::new(calls, control, window);
            let mut pi = PiStream::new(InstantPi { control: control_tx, ids: Vec::new() });
            pi.start();
            let mut mapper = EventMapper::new(std::path::Path::new("/"));
            let cancel = tokio_util::sync::CancellationToken::new();
            relay(&mut events, Some(&mut lines), &mut pi, &mut mapper, &cancel).await;
        });
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        let measure = |label: &'static str, mut samples: Vec<Duration>| {
            samples.sort();
            let p = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
            println!("{label}: median {:?}, p95 {:?}, max {:?} ({} runs)", p(0.5), p(0.95), p(1.0), samples.len());
            p(0.5)
        };
        let mut pings = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            post(&mut s, &server.token, ping).await;
            pings.push(t.elapsed());
        }
        let mut trips = Vec::new();
        for i in 0..320 {
            let t = Instant::now();
            let body = post(&mut s, &server.token, call).await;
            if i >= 20 {
                trips.push(t.elapsed());
            }
            assert!(String::from_utf8_lossy(&body).contains("\"isError\":false"));
        }
        println!("batch window: {window:?} (AGY_PI_TOOL_BATCH_MS)");
        measure("HTTP ping round trip (transport floor)", pings);
        let median = measure("tool round trip through the bridge, no-op tool", trips);
        println!(
            "budget 5 ms: {}",
            if median <= Duration::from_millis(5) { "within" } else { "OVER" }
        );
    });
}
