//! How late the recorder sees a root commit: fake-agy's commit log time
//! against the time the capture gives the same commit, for the resolution
//! limit the docs state for recordings (`t_ms` is whole milliseconds).
//!
//! Run with `cargo bench --bench capture_latency` (after `cargo build -p
//! fake-agy`); `LAT_TICK=ms` overrides the fallback tick, to compare.
//! Results go to stderr, one line per captured commit, then the sorted
//! latencies.

mod common;

use common::workspace_bin;

use agy_bridge::maintain::record::Capturer;
use agy_bridge::maintain::testing::CAPTURE_INTERVAL;
use agy_bridge::runner::{self, RunConfig, TurnRequest};
use agy_corpus::recording::{self, Recording};
use agy_format::agy_args::BindMode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ns() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos() as f64
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: measure
    // only under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("capture_latency bench: run with `cargo bench --bench capture_latency`");
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let conversations = home.path().join(".gemini/antigravity-cli/conversations");
    let log = home.path().join("commits.log");
    let cfg = RunConfig {
        agy_bin: workspace_bin("fake-agy"),
        conversations_dir: conversations.clone(),
        env: vec![
            ("HOME".into(), home.path().display().to_string()),
            ("FAKE_AGY_RECORDING".into(), "hello".into()),
            ("FAKE_AGY_SPEED".into(), "1".into()),
            ("FAKE_AGY_COMMIT_LOG".into(), log.display().to_string()),
        ],
        timeout: Duration::from_secs(120),
        bind: BindMode::Discovery,
        poll_interval: std::env::var("LAT_TICK")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(CAPTURE_INTERVAL),
        ..RunConfig::default()
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut cap = Capturer::new(&conversations);
    // The capture is what is measured: the events are not read (a closed
    // channel makes the runner drop them).
    let (tx, rx) = runner::event_channel();
    drop(rx);
    let req = TurnRequest {
        prompt: "Say hello".into(),
        ..TurnRequest::default()
    };
    let t0 = now_ns();
    cap.start();
    rt.block_on(runner::run_observed(
        &cfg,
        &req,
        tokio_util::sync::CancellationToken::new(),
        tx,
        Some(&mut cap as &mut dyn runner::Observer),
    ));
    let logged: Vec<f64> = std::fs::read_to_string(&log)
        .expect("commit log")
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .collect();
    // Match each captured commit to the original commit that wrote the
    // same idx-2 payload (log line n is the recording's commit n).
    let path = recording::resolve("hello", &recording::bundled_dir()).expect("hello");
    let original = Recording::load(&path).expect("load hello");
    let mut lat = Vec::new();
    for c in cap.commits() {
        let Some((_, p)) = c.step_payloads().into_iter().find(|(i, _)| *i == 2) else {
            continue;
        };
        let Some(k) = original
            .commits
            .iter()
            .position(|o| o.step_payloads().iter().any(|(i, op)| *i == 2 && *op == p))
        else {
            continue;
        };
        let Some(&logged_k) = logged.get(k) else {
            continue;
        };
        let seen = t0 + c.t_ms as f64 * 1e6;
        lat.push((seen - logged_k) / 1e6);
        eprintln!(
            "commit {k} at {:>8.1} ms, captured {:>5.1} ms later",
            (logged_k - t0) / 1e6,
            (seen - logged_k) / 1e6
        );
    }
    lat.sort_by(f64::total_cmp);
    eprintln!("latency ms (t_ms is truncated to whole ms): {lat:?}");
}
