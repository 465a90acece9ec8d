//! Runner benchmarks, measured side by side in one run and printed as ratios:
//!
//! 1. commit-to-event latency (p50/p99): fake-agy's commit log against the
//!    moment each event reaches the runner's caller, event-driven vs
//!    poll-only at 250 ms;
//! 2. idle cost: row SELECTs and CPU while agy commits nothing for 5 s
//!    (`LATENCY_ONLY=idle` runs this case alone);
//! 3. resume cost: one poll after one commit, with 10 vs 10,000 earlier steps;
//! 4. binding on agy's init line: from agy printing its real
//!    `{"event":"init",...}` line to the runner's `Bound` event, against a
//!    line the runner does not recognise (an agy whose init does not
//!    come): discovery binds on proof alongside (it waited 3 s before);
//! 5. time to first token through `agy-bridge stream` (as pi runs it) against
//!    fake-agy's own time to its first text commit, with agy's version
//!    cached on disk and with the cache cleared before every turn (one extra
//!    `agy --version` process, as every turn paid before); on the growth
//!    recording, and on `outcomes/pong-1.2.17`, which follows a real agy
//!    1.2.17 capture (its stream-json lines; the captures carry no
//!    timestamps, so its pace is agy-like, not measured).
//!
//! 6. ours against the floor (`latency/floor.rs`: inotify, a
//!    `data_version` spin, one SELECT), fake-agy fsyncing each commit and
//!    not: p50, p99, max, their ratios, CPU per commit, and how late the
//!    machine wakes a thread sleeping 100 µs between the batches
//!    (`LATENCY_ONLY=floor` runs this case alone; `LATENCY_ONLY=ttft`, case
//!    5 on the growth recording alone).
//!
//! 7. commit to pi's line through `agy-bridge stream` (`latency/pi_line.rs`;
//!    `LATENCY_ONLY=pi`, `LATENCY_BEFORE_BIN` for another build beside).
//!
//! 8. what each of the follower's mechanisms gains, fsync on: every one
//!    on, each off alone, inotify and `data_version` alone, and the floor
//!    (`latency/mechanisms.rs`; `LATENCY_ONLY=mechanisms`).
//!
//! Run with `cargo bench --bench latency` (after `cargo build -p fake-agy
//! --release` or `cargo build -p fake-agy`; the bench finds the binary in the
//! target directory). Results go to stdout; README quotes them.

mod common;
#[path = "latency/floor.rs"]
mod floor;
#[path = "latency/mechanisms.rs"]
mod mechanisms;
#[path = "latency/pi_line.rs"]
mod pi_line;

use common::{fake_agy, workspace_bin};

use agy_bridge::follow::events::Event;
use agy_bridge::follow::poller::{Poll, PollStats, Poller};
use agy_bridge::runner::{self, RunConfig, RunEvent, TurnRequest, WakeMode};
use agy_corpus::db::step_write;
use agy_corpus::recording::Recording;
use agy_format::agy_args::BindMode;
use agy_format::steps::{Body, PlannerResponse, Step, StepStatus, StepType};
use agy_synth::{builder::Builder, bulk::chunks};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// 60 growth commits, 40 ms apart, each extending one answer. Also returns
/// the answer's length after each growth commit.
fn growth_recording() -> (Recording, Vec<usize>) {
    let text: String = (0..60)
        .map(|i| format!("chunk {i:02} of the answer. "))
        .collect();
    let mut b = Builder::new("bench-growth", "latency bench", "go", &text);
    b.open_turn(0, "go", "bench", true);
    let pieces = chunks(&text, 60);
    let mut grown = String::new();
    let mut lengths = Vec::new();
    for piece in pieces {
        grown.push_str(piece);
        lengths.push(grown.len());
        let step = Step::new(2, StepType::PlannerResponse, StepStatus::Generating).with_body(
            Body::Planner(PlannerResponse {
                text: grown.clone(),
                ..PlannerResponse::default()
            }),
        );
        b.commit(40, vec![step_write(&step)]);
    }
    let done = Step::new(2, StepType::PlannerResponse, StepStatus::Done).with_body(Body::Planner(
        PlannerResponse {
            text: grown,
            ..PlannerResponse::default()
        },
    ));
    b.commit(40, vec![step_write(&done)]);
    (b.finish(), lengths)
}

/// A turn that commits, then is silent for 5 s, then finishes.
fn idle_recording() -> Recording {
    let mut b = Builder::new("bench-idle", "idle bench", "go", "done");
    b.open_turn(0, "go", "bench", true);
    let step = |status, text: &str| {
        Step::new(2, StepType::PlannerResponse, status).with_body(Body::Planner(PlannerResponse {
            text: text.into(),
            ..PlannerResponse::default()
        }))
    };
    b.step(100, step(StepStatus::Generating, "do"));
    b.step(5_000, step(StepStatus::Done, "done"));
    b.finish()
}

/// Case 2: what 5 s of agy's silence costs, the poller alone and a whole
/// run, event-driven and poll-only (`LATENCY_ONLY=idle` runs it alone).
fn idle_case(rt: &tokio::runtime::Runtime, idle: &Path) {
    println!("\n== idle cost (5 s with nothing committed) ==");
    let idle_poll = idle_poller(Duration::from_secs(5), Duration::from_millis(250));
    println!(
        "poller alone : {} row SELECTs, {} data_version checks, CPU {:.2} ms in 5 s (target: 0 SELECTs: {})",
        idle_poll.0,
        idle_poll.1,
        idle_poll.2,
        if idle_poll.0 == 0 { "met" } else { "NOT met" }
    );
    for (label, wake) in [
        ("event-driven", WakeMode::Events),
        ("poll-only 250", WakeMode::PollOnly),
    ] {
        let m = measure(rt, idle, &[], wake, Duration::from_millis(250));
        println!(
            "{label:13}: whole run (4 commits + 5 s idle): {} row SELECTs, {} data_version checks, our CPU {:.1} ms over {:.0} ms wall",
            m.stats.row_selects, m.stats.version_checks, m.cpu_ms, m.wall_ms
        );
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

struct Measured {
    latencies_ms: Vec<f64>,
    /// The run's reader (none for the floor, which has no poller).
    stats: PollStats,
    cpu_ms: f64,
    wall_ms: f64,
}

fn cpu_ms() -> f64 {
    common::cpu_ms_of(nix::sys::resource::UsageWho::RUSAGE_SELF)
}

fn measure(
    rt: &tokio::runtime::Runtime,
    rec_path: &Path,
    lengths: &[usize],
    wake: WakeMode,
    interval: Duration,
) -> Measured {
    measure_with(rt, rec_path, lengths, wake, interval, &[])
}

/// [`measure`] with more environment for fake-agy (its `synchronous`).
fn measure_with(
    rt: &tokio::runtime::Runtime,
    rec_path: &Path,
    lengths: &[usize],
    wake: WakeMode,
    interval: Duration,
    extra_env: &[(&str, &str)],
) -> Measured {
    let home = tempfile::tempdir().expect("tempdir");
    let log = home.path().join("commits.log");
    let cfg = RunConfig {
        agy_bin: fake_agy(),
        conversations_dir: home.path().join("conversations"),
        env: vec![
            ("HOME".into(), home.path().display().to_string()),
            ("FAKE_AGY_RECORDING".into(), rec_path.display().to_string()),
            ("FAKE_AGY_COMMIT_LOG".into(), log.display().to_string()),
        ]
        .into_iter()
        .chain(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .collect(),
        wake,
        poll_interval: interval,
        bind: BindMode::Discovery,
        ..RunConfig::default()
    };
    let req = TurnRequest {
        prompt: "go".into(),
        ..TurnRequest::default()
    };
    let cpu0 = cpu_ms();
    let t0 = Instant::now();
    let (received, result) = rt.block_on(async {
        let (tx, mut rx) = runner::event_channel();
        let collector = tokio::spawn(async move {
            // (arrival, answer length streamed so far) per text event.
            let mut got: Vec<(u128, usize)> = Vec::new();
            let mut streamed = 0;
            while let Some(ev) = rx.recv().await {
                if let RunEvent::Agy(Event::Text { idx: 2, text }) = &ev {
                    streamed += text.len();
                    got.push((now_ns(), streamed));
                }
            }
            got
        });
        let result = runner::run(&cfg, &req, tokio_util::sync::CancellationToken::new(), tx).await;
        (collector.await.unwrap_or_default(), result)
    });
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let cpu = cpu_ms() - cpu0;
    assert!(result.ok(), "bench run failed: {:?}", result.failure);

    let latencies = growth_latencies(&log, lengths, &received);
    Measured {
        latencies_ms: latencies,
        stats: result.poll_stats,
        cpu_ms: cpu,
        wall_ms,
    }
}

/// Each growth commit's latency, from fake-agy's commit log at `log` and
/// `received` (arrival in unix ns, answer length streamed so far), sorted.
///
/// Commit log: `<n> <unix ns> <db> <idx,idx>`. The growth commits are the
/// ones writing step 2, in order; commit j brought the answer to
/// lengths[j]. Its latency is the arrival of the first event by which at
/// least that much had streamed: a coalesced poll is charged to every
/// commit it coalesced, so poll-only mode is measured fairly.
fn growth_latencies(log: &Path, lengths: &[usize], received: &[(u128, usize)]) -> Vec<f64> {
    let text = std::fs::read_to_string(log).expect("commit log");
    let growth: Vec<u128> = text
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            (parts.len() >= 4 && parts[3] == "2")
                .then(|| parts[1].parse::<u128>().ok())
                .flatten()
        })
        .collect();
    let mut latencies = Vec::new();
    for (j, committed) in growth.iter().enumerate().take(lengths.len()) {
        if let Some((at, _)) = received.iter().find(|(_, len)| *len >= lengths[j]) {
            latencies.push(at.saturating_sub(*committed) as f64 / 1e6);
        }
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    latencies
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// A stand-in agy that stamps the time, prints `line` (stdout flushed by
/// the shell at once), holds `<id>.db` open in the conversations directory
/// (so discovery can bind it too) and lingers.
fn init_script(dir: &Path, line: &str, id: &str) -> PathBuf {
    let script = dir.join("agy-init");
    let body = format!(
        "#!/bin/sh\nexec 3>\"$AGY_CONVERSATIONS_DIR/{id}.db\"\ndate +%s%N > \"$STAMP\"\nprintf '%s\\n' '{line}'\nsleep 4\n"
    );
    std::fs::write(&script, body).expect("script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// Milliseconds from the script's stamp (taken just before it prints the
/// line, so this slightly overstates) to the `Bound` event, over `runs`.
fn bind_latencies(rt: &tokio::runtime::Runtime, line: &str, runs: usize) -> Vec<f64> {
    let id = "0b6f3c1e-5d0a-4e43-9d7e-2a4c1f0e9b11";
    let mut out = Vec::new();
    for _ in 0..runs {
        let home = tempfile::tempdir().expect("tempdir");
        let stamp = home.path().join("stamp");
        let conversations = home.path().join("conversations");
        std::fs::create_dir_all(&conversations).expect("dir");
        let cfg = RunConfig {
            agy_bin: init_script(home.path(), &line.replace("ID", id), id),
            conversations_dir: conversations,
            env: vec![("STAMP".into(), stamp.display().to_string())],
            bind: BindMode::StreamJson,
            ..RunConfig::default()
        };
        let req = TurnRequest {
            prompt: "go".into(),
            ..TurnRequest::default()
        };
        let bound_at = rt.block_on(async {
            let (tx, mut rx) = runner::event_channel();
            let cancel = tokio_util::sync::CancellationToken::new();
            let stop = cancel.clone();
            let turn = tokio::spawn(async move { runner::run(&cfg, &req, stop, tx).await });
            let mut at = None;
            while let Some(ev) = rx.recv().await {
                if matches!(ev, RunEvent::Bound { .. }) {
                    at = Some(now_ns());
                    cancel.cancel();
                }
            }
            let _ = turn.await;
            at
        });
        let stamped: Option<u128> = std::fs::read_to_string(&stamp)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        match (bound_at, stamped) {
            (Some(b), Some(s)) => out.push(b.saturating_sub(s) as f64 / 1e6),
            // Bound (by discovery, on proof) before the line was printed:
            // the turn was cancelled before the stand-in stamped.
            (Some(_), None) => out.push(0.0),
            _ => {}
        }
    }
    out.sort_by(|a, b| a.total_cmp(b));
    out
}

/// One turn through `agy-bridge stream`: ms from spawning the bridge to the
/// first `text_delta` on its stdout.
fn bridge_ttft(
    bridge: &Path,
    home: &Path,
    rec: &Path,
    model: &str,
    fresh_version: bool,
) -> Option<f64> {
    use std::io::{BufRead, Write};
    if fresh_version {
        let _ = std::fs::remove_file(home.join("state/agy-version.json"));
    }
    let request = serde_json::json!({
        "model": model,
        "cwd": home,
        "messages": [{"role": "user", "content": "go"}],
    });
    let t0 = Instant::now();
    let mut child = std::process::Command::new(bridge)
        .arg("stream")
        .env("HOME", home)
        .env("AGY_BRIDGE_STATE_DIR", home.join("state"))
        .env("AGY_BIN", fake_agy())
        .env("FAKE_AGY_RECORDING", rec)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Held open to the end of the turn, as pi does (its end aborts).
    let mut stdin = child.stdin.take()?;
    writeln!(stdin, "{request}").ok()?;
    let out = child.stdout.take()?;
    let mut first = None;
    for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        if first.is_none() && line.contains("\"text_delta\"") {
            first = Some(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    let _ = child.wait();
    drop(stdin);
    first
}

/// The number (1-based, as fake-agy's commit log counts) of the first
/// commit of `rec` after which a poller reads answer text: where agy's own
/// time to its first text ends.
fn first_text_commit(rec: &Recording) -> Option<usize> {
    use agy_corpus::recording::{apply_commit, ApplyOptions};
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("first-text.db");
    let conn = rusqlite::Connection::open(&path).ok()?;
    conn.pragma_update(None, "journal_mode", "wal").ok()?;
    agy_format::schema::create(&conn).ok()?;
    let opts = ApplyOptions {
        skip_permissions: true,
        ..ApplyOptions::default()
    };
    let mut poller = Poller::new(&path, None);
    for (n, (index, commit)) in rec.effective_commits(&opts).enumerate() {
        apply_commit(&conn, index, commit, &opts).ok()?;
        if let Poll::Ready(events) = poller.poll() {
            if events.iter().any(|e| matches!(e, Event::Text { .. })) {
                return Some(n + 1);
            }
        }
    }
    None
}

/// fake-agy alone, as the bridge runs it: ms from spawn to its commit
/// number `first_text` (its commit log), the one that brings the first text.
fn agy_ttft(home: &Path, rec: &Path, first_text: usize) -> Option<f64> {
    let log = home.join("direct-commits.log");
    let _ = std::fs::remove_file(&log);
    let conversations = home.join("direct");
    let start = now_ns();
    let status = std::process::Command::new(fake_agy())
        .args([
            "--output-format",
            "stream-json",
            "--dangerously-skip-permissions",
            "-p",
            "go",
        ])
        .env("HOME", home)
        .env("AGY_CONVERSATIONS_DIR", &conversations)
        .env("FAKE_AGY_RECORDING", rec)
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let text = std::fs::read_to_string(&log).ok()?;
    let number = first_text.to_string();
    let committed = text.lines().find_map(|line| {
        let parts: Vec<&str> = line.split_whitespace().collect();
        (parts.len() >= 4 && parts[0] == number)
            .then(|| parts[1].parse::<u128>().ok())
            .flatten()
    })?;
    Some(committed.saturating_sub(start) as f64 / 1e6)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    pct(&v, 0.5)
}

/// Poll a database with an unfinished step every `every` for `span` while
/// nothing commits: (row SELECTs, version checks, thread CPU ms).
fn idle_poller(span: Duration, every: Duration) -> (u64, u64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.db");
    let w = rusqlite::Connection::open(&path).expect("open");
    w.pragma_update(None, "journal_mode", "wal").expect("wal");
    agy_format::schema::create(&w).expect("schema");
    let row = Step::new(0, StepType::PlannerResponse, StepStatus::Generating)
        .with_body(Body::Planner(PlannerResponse {
            text: "still thinking".into(),
            ..PlannerResponse::default()
        }))
        .to_row();
    w.execute(
        "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![row.idx, row.step_type, row.status, row.payload],
    )
    .expect("insert");
    let mut poller = Poller::new(&path, None);
    let _ = poller.poll();
    let before = poller.stats();
    let thread_cpu = || {
        getrusage(UsageWho::RUSAGE_THREAD)
            .map(|u| {
                let t = |tv: nix::sys::time::TimeVal| {
                    tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3
                };
                t(u.user_time()) + t(u.system_time())
            })
            .unwrap_or(0.0)
    };
    let cpu0 = thread_cpu();
    let end = Instant::now() + span;
    while Instant::now() < end {
        let _ = poller.poll();
        std::thread::sleep(every);
    }
    let after = poller.stats();
    (
        after.row_selects - before.row_selects,
        after.version_checks - before.version_checks,
        thread_cpu() - cpu0,
    )
}

/// Time one poll that reads one new committed step, with `history` earlier
/// steps already streamed.
fn resume_poll_cost(history: i64) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.db");
    let w = rusqlite::Connection::open(&path).expect("open");
    w.pragma_update(None, "journal_mode", "wal").expect("wal");
    agy_format::schema::create(&w).expect("schema");
    {
        let tx = w.unchecked_transaction().expect("tx");
        for idx in 0..history {
            let row = Step::new(idx, StepType::PlannerResponse, StepStatus::Done)
                .with_body(Body::Planner(PlannerResponse {
                    text: format!("old step {idx}"),
                    ..PlannerResponse::default()
                }))
                .to_row();
            tx.execute(
                "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![row.idx, row.step_type, row.status, row.payload],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
    }
    let mut poller = Poller::new(&path, Some(history - 1));
    let _ = poller.poll();
    let rounds = 500;
    let mut total = Duration::ZERO;
    for i in 0..rounds {
        let idx = history + i;
        let row = Step::new(idx, StepType::PlannerResponse, StepStatus::Done)
            .with_body(Body::Planner(PlannerResponse {
                text: "new".into(),
                ..PlannerResponse::default()
            }))
            .to_row();
        w.execute(
            "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![row.idx, row.step_type, row.status, row.payload],
        )
        .expect("insert");
        let t = Instant::now();
        match poller.poll() {
            Poll::Ready(ev) => assert_eq!(ev.len(), 1),
            Poll::NotReady(e) => panic!("{e}"),
        }
        total += t.elapsed();
    }
    total / rounds as u32
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // useful. Run the real measurement only under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("latency bench: run with `cargo bench --bench latency`");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let growth = dir.path().join("growth.jsonl");
    let (growth_rec, lengths) = growth_recording();
    growth_rec.save(&growth).expect("save");
    let idle = dir.path().join("idle.jsonl");
    idle_recording().save(&idle).expect("save");

    match std::env::var("LATENCY_ONLY").as_deref() {
        Ok("floor") => return floor::floor_vs_ours(&rt, &growth, &lengths),
        Ok("mechanisms") => return mechanisms::mechanisms(&rt, &growth, &lengths),
        Ok("ttft") => return ttft_case("growth recording", &growth, "gemini-3.7-flash", false),
        Ok("pi") => return pi_line::pi_line(&growth, &lengths),
        Ok("idle") => return idle_case(&rt, &idle),
        _ => {}
    }
    println!("== commit-to-event latency (60 commits, 40 ms apart) ==");
    let ev = measure(
        &rt,
        &growth,
        &lengths,
        WakeMode::Events,
        Duration::from_millis(250),
    );
    let po = measure(
        &rt,
        &growth,
        &lengths,
        WakeMode::PollOnly,
        Duration::from_millis(250),
    );
    let (e50, e99) = (pct(&ev.latencies_ms, 0.5), pct(&ev.latencies_ms, 0.99));
    let (p50, p99) = (pct(&po.latencies_ms, 0.5), pct(&po.latencies_ms, 0.99));
    println!(
        "event-driven : p50 {e50:7.2} ms  p99 {e99:7.2} ms  (n={})",
        ev.latencies_ms.len()
    );
    println!(
        "poll-only 250: p50 {p50:7.2} ms  p99 {p99:7.2} ms  (n={})",
        po.latencies_ms.len()
    );
    println!(
        "ratio poll/event: p50 {:.1}x  p99 {:.1}x",
        p50 / e50,
        p99 / e99
    );
    println!(
        "targets: event p99 <= 5 ms: {}; >= 20x better than poll-only at p99: {}",
        if e99 <= 5.0 { "met" } else { "NOT met" },
        if p99 / e99 >= 20.0 { "met" } else { "NOT met" }
    );

    floor::floor_vs_ours(&rt, &growth, &lengths);
    pi_line::pi_line(&growth, &lengths);

    idle_case(&rt, &idle);

    println!("\n== resume cost (one poll reading one new step) ==");
    let small = resume_poll_cost(10);
    let medium = resume_poll_cost(1_000);
    let large = resume_poll_cost(10_000);
    println!("history 10    : {:?} per poll", small);
    println!("history 1000  : {:?} per poll", medium);
    println!("history 10000 : {:?} per poll", large);
    println!(
        "ratio 10000/10: {:.2}x for 1000x the history (an indexed idx > cursor lookup: the cost does not scale with history)",
        large.as_secs_f64() / small.as_secs_f64()
    );

    println!("\n== binding: agy prints its init line -> Bound event ==");
    let real = bind_latencies(
        &rt,
        r#"{"event":"init","conversation_id":"ID","init":{"model":"gemini-3.8-flash-high","cwd":"/tmp","tools":["run_command"],"permission_mode":"always-proceed"}}"#,
        20,
    );
    let old = bind_latencies(&rt, r#"{"type":"init","conversation_id":"ID"}"#, 20);
    println!(
        "real init line     : p50 {:8.2} ms  p99 {:8.2} ms  (n={}; target <= 50 ms: {})",
        pct(&real, 0.5),
        pct(&real, 0.99),
        real.len(),
        if pct(&real, 0.99) <= 50.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "unrecognised line  : p50 {:8.2} ms  p99 {:8.2} ms  (n={}; discovery on proof, alongside; before: the 3 s grace, then discovery; 0 = bound before the line)",
        pct(&old, 0.5),
        pct(&old, 0.99),
        old.len()
    );
    println!(
        "no grace wait before discovery: {}",
        if pct(&old, 0.99) < 1000.0 {
            "met"
        } else {
            "NOT met"
        }
    );

    println!("\n== time to first token: agy-bridge stream vs fake-agy alone ==");
    ttft_case(
        "growth recording (60 commits, 40 ms apart)",
        &growth,
        "gemini-3.7-flash",
        true,
    );
    // fake-agy lists the models of the recording's agy version.
    let pong = agy_corpus::recording::bundled_dir().join("outcomes/pong-1.2.17.jsonl");
    ttft_case(
        "pong-1.2.17 (follows a real agy 1.2.17 capture, at its pace)",
        &pong,
        "gemini-3.8-flash",
        false,
    );
}

/// Case 5 on one recording: 15 interleaved runs of fake-agy alone and of
/// the bridge (and, with `probe`, of the bridge asking `agy --version`).
/// `LATENCY_BASELINE_BRIDGE=PATH` adds another agy-bridge binary (an older
/// build) to the same interleaving, for a before/after from one run.
fn ttft_case(label: &str, rec: &Path, model: &str, probe: bool) {
    let bridge = workspace_bin("agy-bridge");
    let baseline = std::env::var_os("LATENCY_BASELINE_BRIDGE").map(PathBuf::from);
    let first_text = Recording::load(rec)
        .ok()
        .as_ref()
        .and_then(first_text_commit)
        .expect("the recording has answer text");
    let home = tempfile::tempdir().expect("tempdir");
    let (mut direct, mut cached, mut probed, mut before) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Warm the version cache and the page cache once.
    for b in std::iter::once(&bridge).chain(baseline.as_ref()) {
        bridge_ttft(b, home.path(), rec, model, false)
            .expect("the bridge streams the recording's text");
    }
    for _ in 0..15 {
        direct.extend(agy_ttft(home.path(), rec, first_text));
        cached.extend(bridge_ttft(&bridge, home.path(), rec, model, false));
        if probe {
            probed.extend(bridge_ttft(&bridge, home.path(), rec, model, true));
        }
        if let Some(b) = &baseline {
            before.extend(bridge_ttft(b, home.path(), rec, model, false));
        }
    }
    println!("{label}:");
    let (d, c) = (median(direct), median(cached));
    println!("  fake-agy alone to its first text commit : median {d:7.2} ms");
    println!(
        "  bridge, agy version cached on disk       : median {c:7.2} ms  overhead {:6.2} ms (target <= 5 ms: {})",
        c - d,
        if c - d <= 5.0 { "met" } else { "NOT met" }
    );
    if probe {
        let p = median(probed);
        println!(
            "  bridge, `agy --version` run every turn   : median {p:7.2} ms  overhead {:6.2} ms",
            p - d
        );
    }
    if let Some(b) = &baseline {
        let m = median(before);
        println!(
            "  baseline {}, version cached: median {m:7.2} ms  overhead {:6.2} ms ({:.2}x this build's)",
            b.display(),
            m - d,
            (m - d) / (c - d)
        );
    }
}
