//! Account-wide admission (issue 18): more pi turns at once than the
//! account has seats queue, say that they wait, and all finish; never more
//! agy processes run at once than there are seats.

mod common;

use common::{bridge, eventually, CHILD_LIMIT};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Live fake-agy processes whose command line holds `marker`.
fn agys_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| common::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains(marker) && c.contains("fake-agy") && c.contains("-p")
            })
        })
        .count()
}

#[test]
fn three_turns_with_two_seats_queue_and_all_finish() {
    const SEATS: usize = 2;
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("admission-{}", std::process::id());
    let workspace = home.path().join(&marker);
    std::fs::create_dir_all(&workspace).expect("workspace");
    // Sample how many agy run at once for the whole test.
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (most, done, marker) = (most.clone(), done.clone(), marker.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(agys_with(&marker), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let turns: Vec<_> = (0..=SEATS)
        .map(|i| {
            let mut cmd = bridge("stream", home.path(), "long-answer", "0.5");
            cmd.env("AGY_SEATS", SEATS.to_string())
                .env("AGY_START_INTERVAL_MS", "0")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let request = json!({"model": "gemini-3.7-flash", "sessionId": format!("s{i}"),
                "cwd": workspace, "messages": [{"role": "user", "content": "a long one"}]});
            let child = cmd.spawn().expect("stream");
            std::thread::spawn(move || common::stream_output(child, &request.to_string()))
        })
        .collect();
    let outputs: Vec<_> = turns
        .into_iter()
        .map(|t| t.join().expect("turn thread"))
        .collect();
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let stdouts: Vec<String> = outputs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect();
    for out in &stdouts {
        assert!(
            out.contains("\"reason\":\"stop\""),
            "every turn finished: {out:.400}"
        );
    }
    let waited: Vec<&String> = stdouts
        .iter()
        .filter(|o| o.contains("waiting for an agy seat"))
        .collect();
    assert!(
        !waited.is_empty(),
        "the turn beyond the seats said it waited"
    );
    assert!(
        waited
            .iter()
            .all(|o| o.contains(&format!("all {SEATS} are in use"))),
        "{waited:?}"
    );
    let most = most.load(Ordering::Relaxed);
    assert!(most >= 1, "agy was seen running");
    assert!(most <= SEATS, "{most} agy ran at once with {SEATS} seats");
    assert!(eventually(CHILD_LIMIT, || agys_with(&marker) == 0));
}
