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
//! Three sizes, interleaved round by round: five tiny turns (4 commits),
//! five short ones (40) and a long one (`CPU_LONG`, default 960). Per
//! commit = (long − short) / (commits between them), over an answer
//! growing long; fixed per turn = short − 40 × that. On small rows the
//! same from the tiny and the short turn: what a commit costs while the
//! answer is short, and the fixed part measured nearly directly (the tiny
//! turn less its four commits), which the first split's fixed part is not:
//! it moves by 40 times any error in the long answer's price, and a long
//! answer's commits cost more (each reads the whole growing row). Medians
//! of each size's turns; each split round by round is printed as a range,
//! the figures' own noise. Targets: ≤ 0.3 ms per commit, ≤ 5 ms per turn
//! fixed. Each round also runs, five times on the short recording, the
//! least a cold turn does (`cpu/cold_floor.rs`: its process, pi's request,
//! agy started and waited for, its database read once, the binding stored
//! durably), and five times the same with agy under the library's
//! guardian and its output read; each bridge's fixed per turn (on the tiny
//! turn) is set against both medians. Beside the bridges, with turns of
//! its own, runs the library's runner alone (`cpu/runner_turn.rs`:
//! `stream` less pi's side), the step between the guarded floor and
//! `stream`. Then warm sessions (`stream --session`) of 5 and 10 short
//! turns against five cold `stream`s: the CPU per turn of each (a warm
//! turn's the marginal one, the second session less the first). The warm
//! turn's fixed part is measured as a cold turn's is, on the tiny turn:
//! warm sessions of 10 and 20 tiny turns, less the tiny turn's commits at
//! the warm per-commit cost (the short warm turn against the tiny one).
//! Last, what agy's silences cost: the short turn against the same turn
//! paused `CPU_IDLE_S` seconds (default 30, long enough to stand above a
//! turn's own noise of a few ms) half-way, as agy pauses while the model
//! thinks or a tool runs: CPU per second of silence = (paused − short) /
//! the pause. The short and long turns of the first part and those of
//! the last each run in a pi session of their own, so each begins a
//! conversation and none reads the WAL a resumed one left (its size
//! varies from turn to turn); the cold turns set against a warm session
//! resume one conversation, as pi's turns do. `CPU_ONLY=silence` runs the
//! last part alone; `CPU_ONLY=mechanisms`, what each of the follower's
//! mechanisms and the guardian's early fork gain (`cpu/mechanisms.rs`).
//!
//! Run with `cargo build --release --workspace && cargo bench --bench cpu`
//! (`CPU_ROUNDS`, default 3; `CPU_SAVE=DIR` keeps the three recordings;
//! `CPU_BEFORE_BIN=PATH` runs another agy-bridge binary interleaved with
//! this one, run by run, and prints the ratios).

#[path = "cpu/cold_floor.rs"]
mod cold_floor;
mod common;
#[path = "cpu/mechanisms.rs"]
mod mechanisms;
#[path = "cpu/runner_turn.rs"]
mod runner_turn;

use agy_corpus::recording::Recording;
use agy_synth::bulk;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

const SHORT: usize = 40;

/// The tiny turn's commits: a turn's fixed part measured nearly directly.
/// Its commits, priced at what a commit costs on the short turn's small
/// rows, are about a millisecond, so an error in that price barely reaches
/// the fixed part; the short turn less 40 commits priced on the long turn
/// (whose rows grow to 25 kB, each read whole at every commit) leaves a
/// fixed part moved by 40 times that price's error and bias.
const TINY: usize = 4;

/// Tiny turns and short ones a round, each, against one long: a turn's
/// fixed cost is a few milliseconds beside a noise of about as much from
/// turn to turn, and a short turn takes a second.
const SHORTS_PER_ROUND: usize = 5;

/// Bytes each commit adds to the growing answer (about a line of it).
const CHUNK: usize = 26;

/// One turn through `agy-bridge stream` in pi session `cpu-bench`, which
/// resumes that session's conversation after its first turn: (the bridge's
/// CPU ms, text events).
fn run_once(bridge: &Path, home: &Path, recording: &Path) -> (f64, usize) {
    run_in(bridge, home, recording, "cpu-bench")
}

/// [`run_once`] in pi session `session`.
fn run_in(bridge: &Path, home: &Path, recording: &Path, session: &str) -> (f64, usize) {
    run_with(bridge, home, recording, session, &[])
}

/// The floor's cold turn ([`cold_floor`], `variant`) in pi session
/// `session`, measured as [`run_in`] measures the bridge's.
fn run_floor(
    home: &Path,
    recording: &Path,
    session: &str,
    variant: cold_floor::Variant,
) -> (f64, usize) {
    let this = std::env::current_exe().expect("the bench's own binary");
    run_with(
        &this,
        home,
        recording,
        session,
        &[(cold_floor::CHILD_ENV, variant.env_value())],
    )
}

fn run_with(
    bridge: &Path,
    home: &Path,
    recording: &Path,
    session: &str,
    env: &[(&str, &str)],
) -> (f64, usize) {
    let log = home.join("fake-agy-cpu.log");
    let _ = std::fs::remove_file(&log);
    let before = common::children_cpu_ms();
    let mut texts = 0;
    let last = common::stream_turn(bridge, home, recording, session, env, |line| {
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
/// turns) of pi session `session`, pi's whole history in each request as
/// pi sends it: the bridge's CPU per turn, in ms.
fn warm_session(bridge: &Path, home: &Path, recording: &Path, session: &str, turns: usize) -> f64 {
    let log = home.join("fake-agy-cpu.log");
    let _ = std::fs::remove_file(&log);
    let mut cmd = common::bridge_on_fake_agy(bridge, home, recording);
    cmd.args(["stream", "--session"])
        .env("AGY_PERMISSIONS", "allow");
    let before = common::children_cpu_ms();
    let mut child = cmd.spawn().expect("spawn agy-bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut request = common::stream_request(home, session);
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
    cold_floor::run_if_asked();
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
    let tiny_rec = save(growth(TINY), "tiny.jsonl");
    let short_rec = save(growth(SHORT), "short.jsonl");
    let long_rec = save(growth(long), "long.jsonl");
    // Keep them to replay by hand (under `perf`, say).
    if let Some(keep) = std::env::var_os("CPU_SAVE") {
        let keep = Path::new(&keep);
        std::fs::create_dir_all(keep).expect("CPU_SAVE dir");
        for r in [&tiny_rec, &short_rec, &long_rec] {
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
    for ((_, bridge), home) in bridges.iter().zip(&homes) {
        // One turn first, so agy's version and help are cached as in use.
        run_once(bridge, home.path(), &short_rec);
    }
    if std::env::var("CPU_ONLY").as_deref() == Ok("mechanisms") {
        return mechanisms::compare(&short_rec);
    }
    let idle_s: u64 = common::env_num("CPU_IDLE_S", 30).max(1);
    let paused_rec = save(paused(growth(SHORT), idle_s), "paused.jsonl");
    if std::env::var("CPU_ONLY").as_deref() != Ok("silence") {
        let recs = [tiny_rec.as_path(), &short_rec, &long_rec];
        per_commit_and_turn(&bridges, &homes, recs, long, dt, rounds);
    }
    silence(&bridges, &homes, [&short_rec, &paused_rec], rounds, idle_s);
}

/// A program measured on the tiny, short and long turns: an agy-bridge's
/// `stream`, or this bench's turn through the library's runner alone
/// (`cpu/runner_turn.rs`), with the environment that makes it so.
struct Subject<'a> {
    name: &'a str,
    bin: &'a Path,
    env: &'a [(&'a str, &'a str)],
    home: &'a Path,
}

impl Subject<'_> {
    /// One round's turns: [`SHORTS_PER_ROUND`] tiny and short ones,
    /// interleaved, and a long one, each beginning a conversation (a pi
    /// session apiece); each size's (CPU ms, text events), in `recs`'
    /// order.
    fn round(&self, recs: [&Path; 3], round: u64) -> [Vec<(f64, usize)>; 3] {
        let mut turns = [Vec::new(), Vec::new(), Vec::new()];
        let run = |size: usize, k: usize| {
            let session = format!("per-commit-{size}-{round}-{k}");
            run_with(self.bin, self.home, recs[size], &session, self.env)
        };
        for k in 0..SHORTS_PER_ROUND {
            for size in [0, 1] {
                turns[size].push(run(size, k));
            }
        }
        turns[2].push(run(2, 0));
        turns
    }
}

/// The name of the runner-alone turn in the bench's lines.
const RUNNER_ALONE: &str = "the library's runner alone";

/// The tiny, short and long turns, interleaved run by run; each bridge's
/// CPU per commit and fixed per turn, and the runner's alone, against the
/// floors; then warm sessions against cold turns.
fn per_commit_and_turn(
    bridges: &[(&str, PathBuf)],
    homes: &[tempfile::TempDir],
    recs @ [tiny_rec, short_rec, _]: [&Path; 3],
    long: usize,
    dt: u64,
    rounds: u64,
) {
    let this = std::env::current_exe().expect("the bench's own binary");
    let runner_home = tempfile::tempdir().expect("the runner's home");
    let runner_env = [(
        cold_floor::CHILD_ENV,
        cold_floor::Variant::Runner.env_value(),
    )];
    let mut subjects: Vec<Subject> = bridges
        .iter()
        .zip(homes)
        .map(|((name, bin), home)| Subject {
            name,
            bin,
            env: &[],
            home: home.path(),
        })
        .collect();
    subjects.push(Subject {
        name: RUNNER_ALONE,
        bin: &this,
        env: &runner_env,
        home: runner_home.path(),
    });
    // As for the bridges: one turn first, agy's version cached.
    let runner = &subjects[bridges.len()];
    run_with(
        runner.bin,
        runner.home,
        short_rec,
        "runner-warm-up",
        runner.env,
    );
    let mut results: Vec<_> = subjects
        .iter()
        .map(|s| (s.name, [Vec::new(), Vec::new(), Vec::new()]))
        .collect();
    let floor_home = tempfile::tempdir().expect("the floor's home");
    // As for the bridges: one turn first, its binary and fake-agy's cached.
    for variant in FLOORS {
        run_floor(floor_home.path(), short_rec, "floor-warm-up", variant);
    }
    let mut floors = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (subject, (_, result)) in subjects.iter().zip(&mut results) {
            let turns = subject.round(recs, round);
            let [tiny, short, long] = turns.each_ref().map(|t| listed(t));
            println!(
                "round {round} {}: tiny {} ms ({} text events), short {} ms ({} text events), long {} ms ({} text events)",
                subject.name, tiny.0, tiny.1, short.0, short.1, long.0, long.1
            );
            for (sizes, turns) in result.iter_mut().zip(turns) {
                sizes.extend(turns.iter().map(|(cpu, _)| *cpu));
            }
        }
        for (turns, variant) in floor_round(floor_home.path(), short_rec, round)
            .into_iter()
            .zip(FLOORS)
        {
            let (cpu, lines) = listed(&turns);
            println!(
                "round {round} {}: {cpu} ms ({lines} lines of steps)",
                floor_name(variant)
            );
            floors[variant as usize].extend(turns.iter().map(|(f, _)| *f));
        }
    }
    let summary = summarise(results, long, dt, rounds);
    let names: Vec<&str> = subjects.iter().map(|s| s.name).collect();
    against_the_floor(&names, &summary, &mut floors);
    let small_rows: Vec<f64> = summary.iter().map(|s| s.small_rows.0).collect();
    let warm_recs = [tiny_rec, short_rec];
    warm_against_cold(bridges, warm_recs, rounds, &small_rows[..bridges.len()]);
}

/// The floor's two cold turns, in the order of [`cold_floor::Variant`]'s
/// discriminants: the least a cold turn does, and the same under the
/// guardian.
const FLOORS: [cold_floor::Variant; 2] = [cold_floor::Variant::Plain, cold_floor::Variant::Guarded];

/// A floor variant's name in the round lines.
fn floor_name(variant: cold_floor::Variant) -> &'static str {
    match variant {
        cold_floor::Variant::Plain => "the least a cold turn does",
        cold_floor::Variant::Guarded => "the same, agy under the guardian",
        cold_floor::Variant::Runner => RUNNER_ALONE,
    }
}

/// A round's floor turns, [`SHORTS_PER_ROUND`] of each variant,
/// interleaved: each variant's (CPU ms, lines of steps), in [`FLOORS`]'s
/// order.
fn floor_round(home: &Path, recording: &Path, round: u64) -> [Vec<(f64, usize)>; 2] {
    let mut turns = [Vec::new(), Vec::new()];
    for k in 0..SHORTS_PER_ROUND {
        for variant in FLOORS {
            let session = format!("floor-{}-{round}-{k}", variant.env_value());
            turns[variant as usize].push(run_floor(home, recording, &session, variant));
        }
    }
    turns
}

/// Turns' (CPU ms, lines counted) as two space-separated lists, for a
/// round's line.
fn listed(turns: &[(f64, usize)]) -> (String, String) {
    let cpu: Vec<String> = turns.iter().map(|(c, _)| format!("{c:.1}")).collect();
    let counts: Vec<String> = turns.iter().map(|(_, n)| n.to_string()).collect();
    (cpu.join(" "), counts.join(" "))
}

/// Each subject's fixed CPU per cold turn (on the tiny turn) against the
/// least a cold turn does ([`cold_floor`]): the floor's whole CPU on the
/// short turn, whose database it reads once, not commit by commit, so none
/// of it is per-commit work. And the same
/// turn with agy under the guardian and its output read, parts of the
/// bridge's extra that no cold turn of ours may leave out.
fn against_the_floor(names: &[&str], summary: &[Split], [plain, guarded]: &mut [Vec<f64>; 2]) {
    let least = median(plain);
    let under_guard = median(guarded);
    println!(
        "the least a cold turn does (its process, pi's request, agy started and waited for, agy's database read once, a line a step, the binding stored with fsync): {least:.1} ms (median of {})",
        plain.len()
    );
    println!(
        "the same, agy under the guardian (forked first thing, a current-thread runtime, agy's stdout and stderr read): {under_guard:.1} ms (median of {}), {:.1} ms more",
        guarded.len(),
        under_guard - least
    );
    for (name, parts) in names.iter().zip(summary) {
        let fixed = parts.small_rows.1;
        println!(
            "{name}: per turn fixed (on the {TINY}-commit turn) {fixed:.1} ms = {:.2}x the least, {:.1} ms more; {:.2}x the guarded least, {:.1} ms more",
            fixed / least,
            fixed - least,
            fixed / under_guard,
            fixed - under_guard
        );
    }
}

/// `rec` with its second half `idle_s` seconds later: one silence of agy's
/// in the middle of the turn.
fn paused(mut rec: Recording, idle_s: u64) -> Recording {
    let half = rec.commits.len() / 2;
    for c in &mut rec.commits[half..] {
        c.t_ms += idle_s * 1000;
    }
    rec
}

/// CPU per second of agy's silence: the short turn and the paused one,
/// each bridge in its own home, the bridges interleaved round by round;
/// the ratio when two bridges ran.
fn silence(
    bridges: &[(&str, PathBuf)],
    homes: &[tempfile::TempDir],
    [short, paused]: [&Path; 2],
    rounds: u64,
    idle_s: u64,
) {
    let mut costs = vec![Vec::new(); bridges.len()];
    for round in 0..rounds {
        for (((_, bridge), home), costs) in bridges.iter().zip(homes).zip(&mut costs) {
            let (s, _) = run_in(bridge, home.path(), short, &format!("short-{round}"));
            let (p, _) = run_in(bridge, home.path(), paused, &format!("paused-{round}"));
            costs.push((p - s) / idle_s as f64);
        }
    }
    let mut per_s = Vec::new();
    for ((name, _), mut costs) in bridges.iter().zip(costs) {
        let cost = median(&mut costs);
        // Sorted by `median`: the spread shows the turns' own noise.
        let (low, high) = (costs[0], costs[costs.len() - 1]);
        println!(
            "{name}: agy silent for {idle_s} s mid-turn: {cost:.3} ms of CPU per second of silence (median of {rounds}; {low:.3} to {high:.3})"
        );
        per_s.push(cost);
    }
    match per_s[..] {
        [ours, before] if ours > 0.0 && before > 0.0 => {
            println!("ours/before: per second of silence {:.2}x", ours / before)
        }
        [_, _] => println!(
            "ours/before: no ratio (a median at or below zero is within the turns' own noise)"
        ),
        _ => {}
    }
}

/// A subject's CPU split into its commits and the rest, two ways; each
/// (CPU per commit, fixed per turn), in ms.
struct Split {
    /// From the short and the long turn: per commit over a long answer
    /// (the figure); the fixed part left moves by 40 times any
    /// error in that price.
    long_rows: (f64, f64),
    /// From the tiny and the short turn: per commit on the short turn's
    /// small rows, and the fixed part measured nearly directly.
    small_rows: (f64, f64),
}

/// Each subject's medians and splits, round by round too, and the ratios
/// when two bridges ran.
fn summarise(results: Vec<(&str, [Vec<f64>; 3])>, long: usize, dt: u64, rounds: u64) -> Vec<Split> {
    let before_ran = results.get(1).is_some_and(|(name, _)| *name == "before");
    let mut summary = Vec::new();
    let n = rounds as usize;
    for (name, [mut tinies, mut shorts, mut longs]) in results {
        let long_spread = by_round([&shorts, &longs], [SHORT, long], n);
        let small_spread = by_round([&tinies, &shorts], [TINY, SHORT], n);
        let (t, s, l) = (median(&mut tinies), median(&mut shorts), median(&mut longs));
        let parts = Split {
            long_rows: split([s, l], [SHORT, long]),
            small_rows: split([t, s], [TINY, SHORT]),
        };
        let ((per_commit, fixed), (small_per_commit, tiny_fixed)) =
            (parts.long_rows, parts.small_rows);
        println!(
            "{name}: {SHORT}-commit turn {s:.1} ms (median of {}), {long}-commit turn {l:.1} ms (median of {rounds}), commits {dt} ms apart",
            shorts.len()
        );
        println!(
            "{name}: per commit {per_commit:.3} ms (target <= 0.3), per turn fixed {fixed:.1} ms (target <= 5)"
        );
        println!("{name}: {long_spread}");
        println!(
            "{name}: on small rows ({TINY}-commit turn {t:.1} ms, median of {}, against the {SHORT}-commit one): per commit {small_per_commit:.3} ms, per turn fixed {tiny_fixed:.1} ms (the {TINY}-commit turn less its commits; target <= 5)",
            tinies.len()
        );
        println!("{name}: on small rows, {small_spread}");
        summary.push(parts);
    }
    if let ([ours, before, ..], true) = (&summary[..], before_ran) {
        println!(
            "ours/before: per commit {:.2}x, per turn fixed (on the {TINY}-commit turn) {:.2}x",
            ours.long_rows.0 / before.long_rows.0,
            ours.small_rows.1 / before.small_rows.1
        );
    }
    summary
}

/// Two turn sizes' CPU in ms (the one with fewer commits first), split
/// into their commits (how many each has, in the same order) and the
/// rest: (CPU per commit, fixed per turn).
fn split([fewer, more]: [f64; 2], [n_fewer, n_more]: [usize; 2]) -> (f64, f64) {
    let per_commit = (more - fewer) / (n_more - n_fewer) as f64;
    (per_commit, fewer - n_fewer as f64 * per_commit)
}

/// The split round by round (each round's median of each size, from turns
/// listed round after round), lowest to highest: how far the medians'
/// figures move with the turns' noise. A long turn's CPU moves by a few
/// tens of milliseconds from round to round; spread over its commits that
/// is a few hundredths of a millisecond a commit, and forty times that in
/// the short turn's fixed part, so one run's fixed part from those two
/// alone says little.
fn by_round(sizes: [&[f64]; 2], commits: [usize; 2], rounds: usize) -> String {
    let per_round = |turns: &[f64]| -> Vec<f64> {
        let per = (turns.len() / rounds.max(1)).max(1);
        turns
            .chunks(per)
            .map(|round| median(&mut round.to_vec()))
            .collect()
    };
    let (mut per_commit, mut fixed): (Vec<f64>, Vec<f64>) = per_round(sizes[0])
        .into_iter()
        .zip(per_round(sizes[1]))
        .map(|(fewer, more)| split([fewer, more], commits))
        .unzip();
    per_commit.sort_by(f64::total_cmp);
    fixed.sort_by(f64::total_cmp);
    let range = |v: &[f64], digits: usize| match v {
        [low, .., high] => format!("{low:.digits$} to {high:.digits$}"),
        [one] => format!("{one:.digits$}"),
        [] => String::from("none"),
    };
    format!(
        "round by round: per commit {} ms, per turn fixed {} ms",
        range(&per_commit, 3),
        range(&fixed, 1)
    )
}

/// CPU per turn of the short turn on a warm session against one cold
/// `stream` per turn: what the per-turn start costs, and whether a warm
/// session pays it. A session's own start (its first agy, probes) is paid
/// once, so the warm cost per turn is the marginal one: the difference
/// between sessions of `n` and `2 * n` turns, per turn.
///
/// A warm turn's fixed part (the start a warm session spares, and what it
/// still pays) is measured as a cold turn's is: on the tiny turn, less its
/// commits at the warm turns' own per-commit cost (the short warm turn
/// against the tiny one). The short warm turn less 40 commits priced on
/// cold turns moves by 40 times that price's error (1.6-5.8 ms in six
/// runs of one night on one build); its line stays, beside the new one.
fn warm_against_cold(
    bridges: &[(&str, PathBuf)],
    [tiny_rec, short_rec]: [&Path; 2],
    rounds: u64,
    per_commit: &[f64],
) {
    const TURNS: usize = 5;
    // A tiny warm turn is cheap and quick (about half a second): more of
    // them, as its marginal cost is a few ms beside a session's noise.
    const TINY_TURNS: usize = 10;
    for ((name, bridge), per_commit) in bridges.iter().zip(per_commit) {
        let (mut warm, mut cold, mut tiny) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let home = tempfile::tempdir().expect("home");
            run_once(bridge, home.path(), short_rec);
            let turns: f64 = (0..TURNS)
                .map(|_| run_once(bridge, home.path(), short_rec).0)
                .sum();
            cold.push(turns / TURNS as f64);
            let marginal = |recording: &Path, session: &str, n: usize| {
                let short = warm_session(bridge, home.path(), recording, session, n) * n as f64;
                let long = warm_session(bridge, home.path(), recording, session, 2 * n);
                (long * (2 * n) as f64 - short) / n as f64
            };
            warm.push(marginal(short_rec, "cpu-bench-warm", TURNS));
            tiny.push(marginal(tiny_rec, "cpu-bench-warm-tiny", TINY_TURNS));
        }
        // Round by round before the medians sort the rounds apart.
        let spread = by_round([&tiny, &warm], [TINY, SHORT], rounds as usize);
        let (w, c, t) = (median(&mut warm), median(&mut cold), median(&mut tiny));
        println!(
            "{name}: {SHORT}-commit turn, CPU per turn: warm session {w:.1} ms (marginal: {TURNS}- against {}-turn sessions), one `stream` per turn {c:.1} ms (warm/cold {:.2}x; medians of {rounds})",
            2 * TURNS,
            w / c
        );
        println!(
            "{name}: the same less {SHORT} x {per_commit:.3} ms per commit on small rows (cold turns'): {:.1} ms",
            w - SHORT as f64 * per_commit
        );
        let (warm_per_commit, fixed) = split([t, w], [TINY, SHORT]);
        println!(
            "{name}: warm turn fixed {fixed:.1} ms (the {TINY}-commit warm turn, {t:.1} ms marginal in {TINY_TURNS}- against {}-turn sessions, less its commits at {warm_per_commit:.3} ms, the {SHORT}-commit warm turn against it; target <= 5)",
            2 * TINY_TURNS
        );
        println!("{name}: warm turns, {spread}");
    }
}
