//! Case 8: what each of the follower's mechanisms beyond inotify and
//! `data_version` gains on the latency from agy's commit to the event and
//! on the CPU of following (issue 51, item 8), fake-agy fsyncing every
//! commit: every mechanism on, each off alone
//! ([`agy_bridge::testing::follow::Mechanisms`]), both off (inotify and
//! `data_version` alone), and the floor (`floor.rs`), batch by batch in
//! one run, the order moving each batch. `LATENCY_ONLY=mechanisms`;
//! `MECH_BATCHES` (default 8) batches of the 60-commit growth recording.
//! `benches/cpu.rs` measures the same on resumed turns
//! (`CPU_ONLY=mechanisms`). Results: `docs/bench-follower.md`.

use super::common::env_num;
use super::{floor, measure_with, pct};
use agy_bridge::runner::WakeMode;
use agy_bridge::testing::follow::{set_mechanisms, Mechanisms};
use std::path::Path;
use std::time::Duration;

/// The variants, every mechanism on first (the ratios' base).
const VARIANTS: [(&str, Mechanisms); 2] = [
    ("all on", Mechanisms::ALL),
    (
        "wal_files off: inotify+data_version alone",
        Mechanisms::NONE,
    ),
];

/// One variant's latencies (ms), CPU (ms) and turns.
#[derive(Default, Clone)]
struct Tally {
    latencies: Vec<f64>,
    cpu_ms: f64,
    turns: usize,
    pauses: u64,
    polls: u64,
}

/// The comparison, printed.
pub fn mechanisms(rt: &tokio::runtime::Runtime, growth: &Path, lengths: &[usize]) {
    let batches: usize = env_num("MECH_BATCHES", 8);
    let env = [("FAKE_AGY_SYNCHRONOUS", "FULL")];
    let n = VARIANTS.len();
    // The last slot is the floor's.
    let mut tallies = vec![Tally::default(); n + 1];
    for batch in 0..batches {
        for k in 0..=n {
            let v = (k + batch) % (n + 1);
            let tally = &mut tallies[v];
            let measured = match VARIANTS.get(v) {
                Some((_, mechanisms)) => {
                    set_mechanisms(*mechanisms);
                    let wake = WakeMode::Events;
                    let tick = Duration::from_millis(250);
                    let m = measure_with(rt, growth, lengths, wake, tick, &env);
                    set_mechanisms(Mechanisms::ALL);
                    m
                }
                None => floor::measure_floor(growth, lengths, &env),
            };
            tally.latencies.extend(measured.latencies_ms);
            tally.cpu_ms += measured.cpu_ms;
            tally.turns += 1;
            tally.pauses += measured.stats.pauses;
            tally.polls += measured.stats.polls;
        }
    }
    report(tallies, batches, lengths.len());
}

fn report(mut tallies: Vec<Tally>, batches: usize, commits: usize) {
    for t in &mut tallies {
        t.latencies.sort_by(f64::total_cmp);
    }
    println!(
        "\n== the follower's mechanisms: commit to event, fsync on ({batches} batches of {commits} commits, interleaved) =="
    );
    let floor = &tallies[VARIANTS.len()];
    let floor_p99 = pct(&floor.latencies, 0.99);
    let bound = (3.0 * floor_p99).max(1.5);
    let base = &tallies[0];
    let (base_p99, base_cpu) = (pct(&base.latencies, 0.99), base.cpu_ms / base.turns as f64);
    let names = VARIANTS.iter().map(|(name, _)| *name).chain(["the floor"]);
    for (name, t) in names.zip(&tallies) {
        let (p50, p99) = (pct(&t.latencies, 0.5), pct(&t.latencies, 0.99));
        let cpu = t.cpu_ms / t.turns as f64;
        let per_commit = |x: u64| x as f64 / (t.turns * commits) as f64;
        println!(
            "{name:28}: p50 {p50:6.3} ms  p99 {p99:6.3} ms ({:.2}x all on; bound {}), CPU per turn {cpu:6.1} ms ({:.2}x), {:.2} polls and {:.2} pauses a commit (n={})",
            p99 / base_p99,
            if p99 <= bound { "met" } else { "NOT met" },
            cpu / base_cpu,
            per_commit(t.polls),
            per_commit(t.pauses),
            t.latencies.len()
        );
    }
    println!("bound: p99 <= max(3 x the floor's {floor_p99:.3} ms, 1.5 ms) = {bound:.3} ms");
}
