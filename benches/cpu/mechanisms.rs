//! What each of the follower's mechanisms beyond inotify and
//! `data_version`, and the guardian forked first thing, gain per turn
//! (issue 51, item 8): `CPU_ONLY=mechanisms`.
//!
//! Each variant is the library's runner alone (`runner_turn.rs`, this
//! bench's binary started again) on the 40-commit turn, fake-agy fsyncing
//! every commit, resuming a conversation of its own turn after turn as a
//! pi session's cold turns do (so its WAL is as pi's turns leave it, and
//! a resumed turn reads where its steps begin before it follows). The
//! variants run round by round, in an order that moves each round:
//!
//! - every mechanism on, the guardian forked first thing (the bridge);
//! - each mechanism off alone ([`agy_bridge::testing::follow::Mechanisms`]);
//! - inotify and `data_version` alone (both off);
//! - every mechanism on, the guardian started at the turn (the
//!   `agy-bridge` binary run again, as `stream` does when its fork fails).
//!
//! Per variant: the median CPU per turn (the tree less fake-agy, as the
//! rest of this bench measures) and the time from starting the process
//! to its first answer text (p50 and the slowest), each against every
//! mechanism on. `CPU_MECH_ROUNDS` (default 12).

use agy_bridge::testing::follow::Mechanisms;
use std::path::Path;
use std::time::Instant;

/// Set in the runner child's environment: which variant it runs
/// ([`Knobs::from_env`]).
pub const MECHANISMS_ENV: &str = "CPU_MECHANISMS";

/// What a runner child runs: the follower's mechanisms, and whether its
/// guardian is forked first thing.
pub struct Knobs {
    pub follow: Mechanisms,
    pub early_guardian: bool,
}

/// The variants by name: (name, the follower's mechanisms, guardian forked
/// first thing).
const VARIANTS: [(&str, Mechanisms, bool); 3] = [
    ("all on", Mechanisms::ALL, true),
    (
        "wal_files off: inotify+data_version alone",
        Mechanisms::NONE,
        true,
    ),
    ("guardian at turn time", Mechanisms::ALL, false),
];

impl Knobs {
    /// From [`MECHANISMS_ENV`] (a variant's index); every mechanism on
    /// and the guardian forked when it is not set.
    pub fn from_env() -> Knobs {
        let index: usize = std::env::var(MECHANISMS_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let (_, follow, early_guardian) = VARIANTS[index.min(VARIANTS.len() - 1)];
        Knobs {
            follow,
            early_guardian,
        }
    }
}

/// One runner turn of `variant` in pi session `session`: (CPU ms, ms to
/// the first answer text).
fn turn(home: &Path, recording: &Path, session: &str, variant: usize) -> (f64, f64) {
    let this = std::env::current_exe().expect("the bench's own binary");
    let index = variant.to_string();
    let env = [
        (
            crate::cold_floor::CHILD_ENV,
            crate::cold_floor::Variant::Runner.env_value(),
        ),
        (MECHANISMS_ENV, index.as_str()),
    ];
    let log = home.join("fake-agy-cpu.log");
    let _ = std::fs::remove_file(&log);
    let before = crate::common::children_cpu_ms();
    let t0 = Instant::now();
    let mut first = None;
    let last = crate::common::stream_turn(&this, home, recording, session, &env, |line| {
        if first.is_none() && line.contains("\"text_delta\"") {
            first = Some(t0.elapsed().as_secs_f64() * 1e3);
        }
    });
    assert!(
        last.contains("\"done\""),
        "the turn did not end well: {last}"
    );
    let tree = crate::common::children_cpu_ms() - before;
    let cpu = tree - crate::common::fake_agy_cpu_ms(&log);
    (cpu, first.expect("answer text"))
}

/// The comparison on `recording` (the 40-commit turn), printed.
pub fn compare(recording: &Path) {
    let rounds: usize = crate::common::env_num("CPU_MECH_ROUNDS", 12).max(1);
    let home = tempfile::tempdir().expect("home");
    let n = VARIANTS.len();
    // Each variant's conversation begun, and agy's version cached.
    for v in 0..n {
        turn(home.path(), recording, &format!("mech-{v}"), v);
    }
    let (mut cpu, mut ttft) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for round in 0..rounds {
        for k in 0..n {
            let v = (k + round) % n;
            let (c, t) = turn(home.path(), recording, &format!("mech-{v}"), v);
            cpu[v].push(c);
            ttft[v].push(t);
        }
    }
    println!(
        "\n== the follower's mechanisms and the guardian's start: the runner alone, a resumed 40-commit turn, fsync on ({rounds} rounds) =="
    );
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let cpu: Vec<Vec<f64>> = cpu.into_iter().map(sorted).collect();
    let ttft: Vec<Vec<f64>> = ttft.into_iter().map(sorted).collect();
    let median = |v: &[f64]| v[v.len() / 2];
    let (cpu0, ttft0) = (median(&cpu[0]), median(&ttft[0]));
    for (v, (name, _, _)) in VARIANTS.iter().enumerate() {
        let (c, t) = (median(&cpu[v]), median(&ttft[v]));
        let slowest = ttft[v][ttft[v].len() - 1];
        println!(
            "{name:28}: CPU per turn {c:6.1} ms ({:.2}x all on; {:.1} to {:.1}), first text p50 {t:6.1} ms ({:.2}x), slowest {slowest:6.1} ms",
            c / cpu0,
            cpu[v][0],
            cpu[v][cpu[v].len() - 1],
            t / ttft0,
        );
    }
}
