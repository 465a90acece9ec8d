//! Case 7: commit to pi's line, through `agy-bridge stream` as pi runs it:
//! fake-agy's commit log against the moment each `text_delta` line reaches
//! the reading process (this one), on the growth recording, fsync per
//! commit (fake-agy's default). With `LATENCY_BEFORE_BIN`, another
//! agy-bridge binary runs interleaved, run by run, and the ratios print.
//! Cases 1 and 6 stop at the runner's caller; this one counts the relay,
//! the JSON line and the pipe too: what pi waits for.

use super::common::{self, env_num, workspace_bin};
use super::{growth_latencies, now_ns, pct};
use std::path::{Path, PathBuf};

/// One turn through `stream`: each growth commit's latency to its line.
fn one_turn(bridge: &Path, rec: &Path, lengths: &[usize]) -> Vec<f64> {
    let home = tempfile::tempdir().expect("tempdir");
    let log = home.path().join("commits.log");
    let log_env = log.display().to_string();
    let env = [("FAKE_AGY_COMMIT_LOG", log_env.as_str())];
    // (arrival, answer bytes streamed so far) per text line.
    let mut received = Vec::new();
    let mut streamed = 0;
    common::stream_turn(bridge, home.path(), rec, "latency-pi-line", &env, |line| {
        let at = now_ns();
        if !line.contains("\"text_delta\"") {
            return;
        }
        let event: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        streamed += event["delta"].as_str().map_or(0, str::len);
        received.push((at, streamed));
    });
    growth_latencies(&log, lengths, &received)
}

/// Case 7 (`LATENCY_ONLY=pi`): `LATENCY_PI_RUNS` runs (default 6) of each
/// binary, interleaved.
pub fn pi_line(growth: &Path, lengths: &[usize]) {
    let runs: usize = env_num("LATENCY_PI_RUNS", 6);
    let ours = workspace_bin("agy-bridge");
    let mut bins: Vec<(&str, PathBuf)> = vec![("ours", ours)];
    if let Some(before) = std::env::var_os("LATENCY_BEFORE_BIN") {
        bins.push(("before", PathBuf::from(before)));
    }
    println!(
        "\n== commit to pi's line through `stream` ({runs} interleaved runs of 60 commits) =="
    );
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); bins.len()];
    for _ in 0..runs {
        for (i, (_, bin)) in bins.iter().enumerate() {
            got[i].extend(one_turn(bin, growth, lengths));
        }
    }
    for v in &mut got {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    for ((name, _), v) in bins.iter().zip(&got) {
        println!(
            "{name:6}: p50 {:7.3} ms  p90 {:7.3} ms  p99 {:7.3} ms  (n={})",
            pct(v, 0.5),
            pct(v, 0.9),
            pct(v, 0.99),
            v.len()
        );
    }
    if got.len() == 2 {
        let ratio = |p| pct(&got[0], p) / pct(&got[1], p);
        println!(
            "ours/before: p50 {:.2}x  p90 {:.2}x  p99 {:.2}x",
            ratio(0.5),
            ratio(0.9),
            ratio(0.99)
        );
    }
}
