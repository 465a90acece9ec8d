//! CPU the bridge spends per turn and per commit, through `agy-bridge
//! stream` as pi runs it (issue 22, item 2).
//!
//! Each run spawns `agy-bridge stream` on fake-agy replaying a growth
//! recording (`agy_synth::bulk::growing_answer`: one answer growing by a
//! line a commit, one commit every `CPU_DT_MS`, default 20 ms, fsyncing
//! each commit as SQLite's default does). The bridge's CPU is its whole
//! process tree's (the bridge, its threads, the guardian: user +
//! system, from `getrusage(RUSAGE_CHILDREN)` around the run) less what
//! fake-agy reports it spent itself (`FAKE_AGY_CPU_LOG`, every fake-agy
//! process of the run: the turn and any `--version`/`--help` probe), so
//! agy's stand-in is never counted as ours.
//!
//! Two sizes, interleaved run by run: a short turn (40 commits) and a long
//! one (`CPU_LONG`, default 960). Per commit = (long − short) / (commits
//! between them); fixed per turn = short − 40 × per commit. Targets: ≤ 0.3
//! ms per commit, ≤ 5 ms per turn fixed. Then the short turn five times on
//! one warm session (`stream --session`) against five cold `stream`s: the
//! CPU per turn of each, and the warm turn's fixed part (its CPU less its
//! commits at the per-commit cost).
//!
//! Run with `cargo build --release --workspace && cargo bench --bench cpu`
//! (`CPU_ROUNDS`, default 3; `CPU_SAVE=DIR` keeps the two recordings;
//! `CPU_BEFORE_BIN=PATH` runs another agy-bridge binary interleaved with
//! this one, run by run, and prints the ratios).

mod common;

use agy_corpus::recording::Recording;
use agy_synth::bulk;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

const SHORT: usize = 40;

/// Bytes each commit adds to the growing answer (about a line of it).
const CHUNK: usize = 26;

/// One turn through `agy-bridge stream`: (the bridge's CPU ms, text events).
fn run_once(bridge: &Path, home: &Path, recording: &Path) -> (f64, usize) {
    let log = home.join("fake-agy-cpu.log");
    let _ = std::fs::remove_file(&log);
    let before = common::children_cpu_ms();
    let mut texts = 0;
    let last = common::stream_turn(bridge, home, recording, "cpu-bench", &[], |line| {
        if line.contains("\"text_delta\"") {
            texts += 1;
        }
    });
    assert!(
        last.contains("\"done\""),
        "the turn did not end well: {last}"
    );
    let tree = common::children_cpu_ms() - before;
    (tree - common::fake_agy_cpu_ms(&log), texts)
}

/// `turns` turns of one warm session (`stream --session`, agy kept between
/// turns), pi's whole history in each request as pi sends it: the
/// bridge's CPU per turn, in ms.
fn warm_session(bridge: &Path, home: &Path, recording: &Path, turns: usize) -> f64 {
    let log = home.join("fake-agy-cpu.log");
    let _ = std::fs::remove_file(&log);
    let mut cmd = common::bridge_on_fake_agy(bridge, home, recording);
    cmd.args(["stream", "--session"])
        .env("AGY_PERMISSIONS", "allow");
    let before = common::children_cpu_ms();
    let mut child = cmd.spawn().expect("spawn agy-bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut request = common::stream_request(home, "cpu-bench-warm");
    for turn in 0..turns {
        if turn > 0 {
            let history = request["messages"].as_array_mut().expect("messages");
            history.push(
                serde_json::json!({"role": "assistant", "provider": "antigravity",
                "api": "agy-bridge", "model": "gemini-3.7-flash",
                "content": [{"type": "text", "text": "…"}]}),
            );
            history.push(serde_json::json!({"role": "user", "content": "go"}));
        }
        writeln!(stdin, "{request}").expect("request");
        let done = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains("\"done\"") || l.contains("\"error\""));
        let done = done.unwrap_or_default();
        assert!(
            done.contains("\"done\""),
            "warm turn {turn} did not end well: {done}"
        );
    }
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "agy-bridge stream --session failed: {status}"
    );
    let tree = common::children_cpu_ms() - before;
    (tree - common::fake_agy_cpu_ms(&log)) / turns as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let long: usize = common::env_num("CPU_LONG", 960);
    let dt: u64 = common::env_num("CPU_DT_MS", 20);
    let rounds: u64 = common::env_num("CPU_ROUNDS", 3).max(1);
    let home = tempfile::tempdir().expect("tempdir");
    let save = |rec: Recording, name: &str| {
        let path = home.path().join(name);
        rec.save(&path).expect("save recording");
        path
    };
    let growth = |commits| bulk::growing_answer(CHUNK * commits, commits, dt);
    let short_rec = save(growth(SHORT), "short.jsonl");
    let long_rec = save(growth(long), "long.jsonl");
    // Keep them to replay by hand (under `perf`, say).
    if let Some(keep) = std::env::var_os("CPU_SAVE") {
        let keep = Path::new(&keep);
        std::fs::create_dir_all(keep).expect("CPU_SAVE dir");
        for r in [&short_rec, &long_rec] {
            std::fs::copy(r, keep.join(r.file_name().expect("name"))).expect("copy recording");
        }
    }
    let mut bridges = vec![("ours", PathBuf::from(env!("CARGO_BIN_EXE_agy-bridge")))];
    if let Some(before) = std::env::var_os("CPU_BEFORE_BIN") {
        bridges.push(("before", PathBuf::from(before)));
    }
    // Each bridge its own HOME (its own state, sessions and caches).
    let homes: Vec<tempfile::TempDir> = bridges
        .iter()
        .map(|_| tempfile::tempdir().expect("home"))
        .collect();
    let mut results = Vec::new();
    for ((name, bridge), home) in bridges.iter().zip(&homes) {
        // One turn first, so agy's version and help are cached as in use.
        run_once(bridge, home.path(), &short_rec);
        results.push((*name, Vec::new(), Vec::new()));
    }
    for round in 0..rounds {
        for (i, ((name, bridge), home)) in bridges.iter().zip(&homes).enumerate() {
            let (s, s_texts) = run_once(bridge, home.path(), &short_rec);
            let (l, l_texts) = run_once(bridge, home.path(), &long_rec);
            println!(
                "round {round} {name}: short {s:.1} ms ({s_texts} text events), long {l:.1} ms ({l_texts} text events)"
            );
            results[i].1.push(s);
            results[i].2.push(l);
        }
    }
    let per_commit = summarise(results, long, dt, rounds);
    warm_against_cold(&bridges, &short_rec, rounds, &per_commit);
}

/// Each bridge's medians, its CPU per commit and fixed per turn, and the
/// ratios when two ran; each bridge's CPU per commit.
fn summarise(
    results: Vec<(&str, Vec<f64>, Vec<f64>)>,
    long: usize,
    dt: u64,
    rounds: u64,
) -> Vec<f64> {
    let mut summary = Vec::new();
    for (name, mut shorts, mut longs) in results {
        let (s, l) = (median(&mut shorts), median(&mut longs));
        let per_commit = (l - s) / (long - SHORT) as f64;
        let fixed = s - SHORT as f64 * per_commit;
        println!(
            "{name}: {SHORT}-commit turn {s:.1} ms, {long}-commit turn {l:.1} ms (medians of {rounds}, commits {dt} ms apart)"
        );
        println!(
            "{name}: per commit {per_commit:.3} ms (target <= 0.3), per turn fixed {fixed:.1} ms (target <= 5)"
        );
        summary.push((per_commit, fixed));
    }
    if let [(ours_c, ours_f), (before_c, before_f)] = summary[..] {
        println!(
            "ours/before: per commit {:.2}x, per turn fixed {:.2}x",
            ours_c / before_c,
            ours_f / before_f
        );
    }
    summary
        .into_iter()
        .map(|(per_commit, _)| per_commit)
        .collect()
}

/// CPU per turn of the short turn on a warm session against one cold
/// `stream` per turn: what the per-turn start costs, and whether a warm
/// session pays it. A session's own start (its first agy, probes) is paid
/// once, so the warm cost per turn is the marginal one: the difference
/// between sessions of `TURNS` and `2 * TURNS` turns, per turn. Less the
/// turn's commits at `per_commit` (each bridge's, from the cold turns),
/// that is a warm turn's fixed cost, the start a warm session spares.
fn warm_against_cold(
    bridges: &[(&str, PathBuf)],
    recording: &Path,
    rounds: u64,
    per_commit: &[f64],
) {
    const TURNS: usize = 5;
    for ((name, bridge), per_commit) in bridges.iter().zip(per_commit) {
        let (mut warm, mut cold) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let home = tempfile::tempdir().expect("home");
            run_once(bridge, home.path(), recording);
            let turns: f64 = (0..TURNS)
                .map(|_| run_once(bridge, home.path(), recording).0)
                .sum();
            cold.push(turns / TURNS as f64);
            let short = warm_session(bridge, home.path(), recording, TURNS) * TURNS as f64;
            let long = warm_session(bridge, home.path(), recording, 2 * TURNS) * (2 * TURNS) as f64;
            warm.push((long - short) / TURNS as f64);
        }
        let (w, c) = (median(&mut warm), median(&mut cold));
        println!(
            "{name}: {SHORT}-commit turn, CPU per turn: warm session {w:.1} ms (marginal: {TURNS}- against {}-turn sessions), one `stream` per turn {c:.1} ms (warm/cold {:.2}x; medians of {rounds})",
            2 * TURNS,
            w / c
        );
        println!(
            "{name}: warm turn fixed {:.1} ms (its CPU less {SHORT} x {per_commit:.3} ms per commit; target <= 5)",
            w - SHORT as f64 * per_commit
        );
    }
}
