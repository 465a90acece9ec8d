//! Peak memory of the bridge while a long answer grows live, and the CPU
//! it spends on it (its process tree's, fake-agy's own left out).
//!
//! fake-agy replays one answer of 50 MB growing over 10 commits (each commit
//! rewrites the whole step, as agy does), through `agy-bridge stream` (pi's
//! path) and `agy-bridge run --json`. The bridge process's peak RSS (its
//! `VmHWM`, sampled until it exits; agy's and the guardian's are not
//! counted) is printed against the largest step payload. Target: peak below
//! 3x the payload plus 20 MB.
//!
//! Run with `cargo build --release -p fake-agy && cargo bench --bench
//! memory`. `MEMORY_BENCH_MB` changes the answer's size;
//! `MEMORY_BENCH_SAVE=PATH` also keeps the recording at PATH;
//! `MEMORY_BRIDGE_BIN=PATH` measures another agy-bridge binary (an earlier
//! build, for a before and after).

mod common;

#[path = "../tests/common/rss.rs"]
mod rss;

use agy_corpus::recording::Recording;
use agy_synth as synth;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

const COMMITS: usize = 10;
const MB: f64 = 1024.0 * 1024.0;

/// The largest `step_payload` any commit writes.
fn largest_payload(rec: &Recording) -> usize {
    rec.commits
        .iter()
        .flat_map(|c| &c.writes)
        .filter_map(|w| w.values.get("step_payload").and_then(|v| v.as_blob()))
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
}

/// What the bridge printed: answer bytes seen and the last event's type.
#[derive(Default)]
struct Printed {
    text_bytes: usize,
    last: String,
}

/// Read the bridge's stdout line by line, keeping only counts.
fn read_events(out: impl std::io::Read, text_of: fn(&Value) -> Option<usize>) -> Printed {
    let mut printed = Printed::default();
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        printed.text_bytes += text_of(&v).unwrap_or(0);
        let kind = v.get("type").or_else(|| v.get("kind"));
        printed.last = kind.and_then(Value::as_str).unwrap_or("?").to_string();
    }
    printed
}

fn pi_text(v: &Value) -> Option<usize> {
    (v["type"] == "text_delta").then(|| v["delta"].as_str().map(str::len))?
}

fn runner_text(v: &Value) -> Option<usize> {
    (v["kind"] == "text").then(|| v["text"].as_str().map(str::len))?
}

/// Run the bridge on the recording; returns (peak RSS, the bridge's CPU
/// in ms, what it printed). The CPU is the bridge's process tree's less
/// what fake-agy reports it spent (`FAKE_AGY_CPU_LOG`).
fn measure(home: &Path, recording: &Path, subcommand: &[&str]) -> (u64, f64, Printed) {
    let bridge = std::env::var_os("MEMORY_BRIDGE_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_agy-bridge").into());
    let mut cmd = common::bridge_on_fake_agy(Path::new(&bridge), home, recording);
    cmd.args(subcommand).env("FAKE_AGY_SPEED", "1");
    let cpu_before = common::children_cpu_ms();
    let mut child = cmd.spawn().expect("spawn agy-bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    let stream = subcommand[0] == "stream";
    if stream {
        let request = common::stream_request(home, "memory-bench");
        writeln!(stdin, "{request}").expect("request");
    }
    let out = child.stdout.take().expect("stdout");
    let text_of = if stream { pi_text } else { runner_text };
    let reader = std::thread::spawn(move || read_events(out, text_of));
    let (status, peak) = rss::wait_with_peak(&mut child);
    let cpu = common::children_cpu_ms()
        - cpu_before
        - common::fake_agy_cpu_ms(&home.join("fake-agy-cpu.log"));
    // `stream`: held open to the end of the turn, as pi does (its end
    // aborts).
    drop(stdin);
    let printed = reader.join().expect("reader");
    assert!(
        status.success() || stream,
        "agy-bridge {subcommand:?}: {status}"
    );
    (peak, cpu, printed)
}

fn main() {
    let mb: usize = common::env_num("MEMORY_BENCH_MB", 50);
    let rec = synth::bulk::growing_answer(mb << 20, COMMITS, 100);
    let payload = largest_payload(&rec);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("growing-answer.jsonl");
    rec.save(&path).expect("save recording");
    drop(rec);
    // Keep the recording to replay by hand (e.g. to watch RSS over time).
    if let Some(keep) = std::env::var_os("MEMORY_BENCH_SAVE") {
        std::fs::copy(&path, &keep).expect("copy recording");
        println!("recording saved to {}", Path::new(&keep).display());
    }

    println!(
        "answer {mb} MB over {COMMITS} commits; largest step payload {:.1} MB; target peak < {:.1} MB",
        payload as f64 / MB,
        (3 * payload) as f64 / MB + 20.0
    );
    println!("| path | peak RSS | peak / payload | CPU | answer bytes streamed | last event |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for subcommand in [&["stream"][..], &["run", "--json", "go"][..]] {
        let home = tempfile::tempdir().expect("home");
        let (peak, cpu, printed) = measure(home.path(), &path, subcommand);
        println!(
            "| `agy-bridge {}` | {:.1} MB | {:.2}x | {:.0} ms | {} | {} |",
            subcommand.join(" "),
            peak as f64 / MB,
            peak as f64 / payload as f64,
            cpu,
            printed.text_bytes,
            printed.last
        );
    }
}
