//! The bridge does not keep copies of a growing answer: a 20 MB answer
//! growing over 5 commits streams through `agy-bridge stream` with the
//! bridge's peak RSS under 4x the largest step payload plus 40 MB (a generous
//! bound; `benches/memory.rs` measures the real ratio on 50 MB).

mod common;
#[path = "common/rss.rs"]
mod rss;

use agy_synth as synth;
use common::bridge;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

#[test]
fn a_20_mb_answer_streams_without_copies_piling_up() {
    const ANSWER: usize = 20 << 20;
    let rec = synth::bulk::growing_answer(ANSWER, 5, 50);
    let payload = rec
        .commits
        .iter()
        .flat_map(|c| &c.writes)
        .filter_map(|w| w.values.get("step_payload").and_then(|v| v.as_blob()))
        .map(<[u8]>::len)
        .max()
        .expect("a step payload");
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("growing.jsonl");
    rec.save(&path).expect("save");
    drop(rec);

    let home = tempfile::tempdir().expect("home");
    let mut child = bridge("stream", home.path(), &path.display().to_string(), "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Held open to the end of the turn, as pi does (its end aborts).
    let mut stdin = child.stdin.take().expect("stdin");
    {
        let request = json!({
            "model": "gemini-3.7-flash",
            "sessionId": "memory",
            "cwd": home.path(),
            "messages": [{"role": "user", "content": "go"}],
        });
        writeln!(stdin, "{request}").expect("request");
    }
    let out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let (mut deltas, mut ends, mut last) = (0, 0, String::new());
        for line in BufReader::new(out).lines() {
            let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
            match v["type"].as_str() {
                Some("text_delta") => deltas += v["delta"].as_str().map_or(0, str::len),
                Some("text_end") => ends += 1,
                _ => {}
            }
            last = v["type"].as_str().unwrap_or("?").to_string();
        }
        (deltas, ends, last)
    });
    let (_, peak) = rss::wait_with_peak(&mut child);
    drop(stdin);
    let (deltas, ends, last) = reader.join().expect("reader");
    assert_eq!(last, "done");
    assert_eq!(
        (deltas, ends),
        (ANSWER, 1),
        "the whole answer, once, one block"
    );
    let bound = 4 * payload as u64 + (40 << 20);
    eprintln!(
        "peak RSS {} MB for a {} MB payload",
        peak >> 20,
        payload >> 20
    );
    assert!(
        peak < bound,
        "peak RSS {} MB, bound {} MB (payload {} MB)",
        peak >> 20,
        bound >> 20,
        payload >> 20
    );
}
