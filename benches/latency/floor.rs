//! The floor: the least a follower can do to see each of agy's commits, as
//! the reference the bridge's latency is measured against (issue: "the
//! floor in the benches"). inotify on the conversations directory; after a
//! write to a database's WAL, `PRAGMA data_version` in a busy spin until the
//! commit is visible; then one SELECT of the followed step. No decoding
//! beyond the answer's length, no events, no second thread, no process of
//! its own: nothing a real follower could skip.

use super::common::env_num;
use super::{cpu_ms, fake_agy, growth_latencies, measure_with, now_ns, pct, Measured};
use agy_bridge::follow::poller::PollStats;
use agy_bridge::runner::WakeMode;
use agy_format::steps::{self, Body, StepRow};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use rusqlite::Connection;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// How long one spin waits for a commit to become visible before it gives
/// up (a WAL write that was not a commit's last).
const SPIN_BOUND: Duration = Duration::from_millis(20);

/// Sleeps measured after each pair of batches ([`wake_lateness_us`]).
const WAKE_SAMPLES: usize = 500;

/// What the floor saw: (arrival in unix ns, answer length) each time the
/// followed step's text grew.
pub struct Seen {
    pub arrivals: Vec<(u128, usize)>,
}

/// Follow the one database `agy` creates in `dir` until `agy` exits,
/// reading step `idx`'s answer length after each visible commit.
pub fn follow(dir: &Path, agy: &mut Child, idx: i64) -> Seen {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).expect("inotify");
    inotify
        .add_watch(dir, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MODIFY)
        .expect("watch");
    let mut reader = Reader::default();
    let mut seen = Seen {
        arrivals: Vec::new(),
    };
    loop {
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(20u16)).unwrap_or(0);
        let mut wal_written = false;
        if ready > 0 {
            while let Ok(events) = inotify.read_events() {
                if events.is_empty() {
                    break;
                }
                for ev in events {
                    let Some(name) = ev.name.as_ref().and_then(|n| n.to_str()) else {
                        continue;
                    };
                    if let Some(stem) = name.strip_suffix(".db-wal") {
                        reader
                            .path
                            .get_or_insert_with(|| dir.join(format!("{stem}.db")));
                        wal_written = true;
                    }
                }
            }
        }
        if wal_written {
            let last = seen.arrivals.last().map(|(_, l)| *l);
            if let Some(len) = reader.spin_then_read(idx, last) {
                seen.arrivals.push((now_ns(), len));
            }
        }
        if matches!(agy.try_wait(), Ok(Some(_))) {
            return seen;
        }
    }
}

#[derive(Default)]
struct Reader {
    path: Option<PathBuf>,
    conn: Option<Connection>,
    version: Option<i64>,
}

impl Reader {
    /// Spin on `data_version` until it moves and step `idx`'s answer is no
    /// longer `last` long (or [`SPIN_BOUND`] passes): its new length. A
    /// version that moved with the answer unchanged (seen with fsync on, on
    /// one machine: taken for the commit, it left the floor 40 ms behind,
    /// until the next one) keeps the spin going, as the commit the
    /// notification announced is still to come.
    fn spin_then_read(&mut self, idx: i64, last: Option<usize>) -> Option<usize> {
        if self.conn.is_none() {
            let path = self.path.as_ref()?;
            self.conn = Some(agy_format::database::open_read_only(path).ok()?);
        }
        let conn = self.conn.as_ref()?;
        let start = Instant::now();
        loop {
            let v: i64 = conn
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .ok()?;
            if self.version != Some(v) {
                self.version = Some(v);
                let len = answer_len(conn, idx);
                if len.is_some() && len != last {
                    return len;
                }
            }
            if start.elapsed() > SPIN_BOUND {
                return None;
            }
            std::hint::spin_loop();
        }
    }
}

/// Step `idx`'s answer length, read with one SELECT.
fn answer_len(conn: &Connection, idx: i64) -> Option<usize> {
    let payload: Vec<u8> = conn
        .query_row(
            "SELECT step_payload FROM steps WHERE idx = ?1",
            [idx],
            |r| r.get(0),
        )
        .ok()?;
    let row = StepRow {
        idx,
        step_type: 15,
        status: 0,
        payload: Some(payload),
        metadata: None,
        error_details: None,
        permissions: None,
        task_details: None,
    };
    match steps::decode(&row).body {
        Some(Body::Planner(p)) => Some(p.text.len()),
        _ => None,
    }
}

/// The floor ([`follow`]) on the same recording: fake-agy spawned
/// directly, its database followed by the minimal follower in this process.
pub fn measure_floor(rec_path: &Path, lengths: &[usize], extra_env: &[(&str, &str)]) -> Measured {
    let home = tempfile::tempdir().expect("tempdir");
    let log = home.path().join("commits.log");
    let conversations = home.path().join("conversations");
    std::fs::create_dir_all(&conversations).expect("dir");
    let cpu0 = cpu_ms();
    let t0 = Instant::now();
    let mut agy = std::process::Command::new(fake_agy())
        .args(["--dangerously-skip-permissions", "-p", "go"])
        .env("HOME", home.path())
        .env("AGY_CONVERSATIONS_DIR", &conversations)
        .env("FAKE_AGY_RECORDING", rec_path)
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .envs(extra_env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("fake-agy");
    let seen = follow(&conversations, &mut agy, 2);
    let _ = agy.wait();
    Measured {
        latencies_ms: growth_latencies(&log, lengths, &seen.arrivals),
        stats: PollStats::default(),
        cpu_ms: cpu_ms() - cpu0,
        wall_ms: t0.elapsed().as_secs_f64() * 1e3,
    }
}

/// Case 6: ours against the floor (this module), interleaved batches on the
/// same recording, with fake-agy fsyncing every commit (`synchronous=FULL`,
/// SQLite's default) and not (`NORMAL`): p50, p99 and max, the ratios, and
/// CPU per commit (this process's CPU while following; fake-agy's is its
/// own); then what ours' wake-ups cost in place.
pub fn floor_vs_ours(rt: &tokio::runtime::Runtime, growth: &Path, lengths: &[usize]) {
    let batches: usize = env_num("FLOOR_BATCHES", 6);
    let full = one_mode(rt, growth, lengths, "FULL", batches);
    let normal = one_mode(rt, growth, lengths, "NORMAL", batches);
    in_place(&full, &normal);
}

/// [`floor_vs_ours`] in one `synchronous` mode: `batches` batches, each
/// ours, then the floor, then the machine's sleeps.
fn one_mode(
    rt: &tokio::runtime::Runtime,
    growth: &Path,
    lengths: &[usize],
    sync: &str,
    batches: usize,
) -> WakeUps {
    println!("\n== ours vs the floor, synchronous={sync} ({batches} interleaved batches of 60 commits) ==");
    let env = [("FAKE_AGY_SYNCHRONOUS", sync)];
    let (mut ours, mut floor, mut late) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_cpu, mut floor_cpu, mut commits) = (0.0, 0.0, 0usize);
    let (mut ours_stats, mut wake_cpu) = (Vec::new(), Vec::new());
    for _ in 0..batches {
        let o = measure_with(
            rt,
            growth,
            lengths,
            WakeMode::Events,
            Duration::from_millis(250),
            &env,
        );
        let f = measure_floor(growth, lengths, &env);
        let machine = wake_lateness_us(WAKE_SAMPLES);
        late.extend(machine.late_us);
        wake_cpu.push(machine.cpu_us);
        ours_stats.push(o.stats);
        commits += lengths.len();
        ours_cpu += o.cpu_ms;
        floor_cpu += f.cpu_ms;
        ours.extend(o.latencies_ms);
        floor.extend(f.latencies_ms);
    }
    for v in [&mut ours, &mut floor, &mut late, &mut wake_cpu] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    let row = |name: &str, v: &[f64]| {
        println!(
            "{name:6}: p50 {:7.3} ms  p99 {:7.3} ms  max {:7.3} ms  (n={})",
            pct(v, 0.5),
            pct(v, 0.99),
            pct(v, 1.0),
            v.len()
        )
    };
    row("ours", &ours);
    row("floor", &floor);
    let ratio = |p| pct(&ours, p) / pct(&floor, p);
    println!(
        "ours/floor: p50 {:.2}x  p99 {:.2}x  max {:.2}x",
        ratio(0.5),
        ratio(0.99),
        ratio(1.0)
    );
    println!(
        "CPU per commit while following: ours {:.3} ms, floor {:.3} ms",
        ours_cpu / commits as f64,
        floor_cpu / commits as f64
    );
    println!(
        "the machine between batches: a 100 µs sleep wakes late by p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs (n={}), and costs {:.0} µs of CPU (median of the batches)",
        pct(&late, 0.5),
        pct(&late, 0.99),
        pct(&late, 1.0),
        late.len(),
        pct(&wake_cpu, 0.5)
    );
    let woken = wake_ups(&ours_stats, commits, ours_cpu);
    println!(
        "targets: p99 <= 3x the floor's and <= 1.5 ms: {}",
        verdict(pct(&ours, 0.99), pct(&floor, 0.99))
    );
    woken
}

/// Ours' wake-ups in one mode, per commit, and ours' CPU per commit (the
/// turn's start spread over its commits included).
struct WakeUps {
    /// Each begins with a wake-up: a notification or a timer.
    polls: f64,
    /// Each a timed wake-up between a settling poll's looks.
    pauses: f64,
    cpu_us: f64,
}

/// [`WakeUps`] of the runs of one mode, said.
fn wake_ups(stats: &[PollStats], commits: usize, ours_cpu_ms: f64) -> WakeUps {
    let per_commit =
        |f: fn(&PollStats) -> u64| stats.iter().map(f).sum::<u64>() as f64 / commits.max(1) as f64;
    let woken = WakeUps {
        polls: per_commit(|s| s.polls),
        pauses: per_commit(|s| s.pauses),
        cpu_us: ours_cpu_ms * 1e3 / commits.max(1) as f64,
    };
    println!(
        "ours' wake-ups per commit: {:.2} polls and {:.2} pauses between looks",
        woken.polls, woken.pauses
    );
    woken
}

/// What one pause costs ours in place (its sleep, its wake-up, the look
/// after it), from the two modes: the same commits read the same way,
/// with fsync and without, differ in the pauses agy's fsync makes ours
/// wait (`FULL` − `NORMAL` CPU per commit over `FULL` − `NORMAL` pauses
/// per commit). The modes differ a little in other ways too (with fsync a
/// commit takes a few more polls; the batches run minutes apart), which
/// the price carries. At that price, the share of ours' CPU per commit
/// with fsync that its polls and pauses come to, a poll's wake-up taken to
/// cost what a pause's does. The hand-over to the turn's thread is not
/// counted.
fn in_place(full: &WakeUps, normal: &WakeUps) {
    let (extra, more_cpu) = (full.pauses - normal.pauses, full.cpu_us - normal.cpu_us);
    if extra < 0.5 || more_cpu <= 0.0 {
        println!(
            "\na pause in place: not measurable in this run ({extra:.2} more pauses a commit with fsync, {more_cpu:.0} µs more CPU)"
        );
        return;
    }
    let price = more_cpu / extra;
    let woken = (full.polls + full.pauses) * price;
    println!(
        "\na pause in place (its sleep, its wake-up, the look after it): {price:.0} µs of CPU ({more_cpu:.0} µs more a commit with fsync, for {extra:.2} more pauses); at that price ours' polls and pauses with fsync come to {woken:.0} µs of its {:.0} µs a commit ({:.0}%)",
        full.cpu_us,
        100.0 * woken / full.cpu_us
    );
}

/// What the machine charges for sleeping: how late it wakes a thread that
/// sleeps 100 µs (the settling looks' pause), in µs, and the CPU the
/// thread is charged per sleep.
struct Machine {
    late_us: Vec<f64>,
    cpu_us: f64,
}

/// [`Machine`], measured `n` times on a thread of its own with the
/// follower's timer slack (1 µs), while nothing else of the bench runs:
/// what every look after a pause pays here before it can see anything, and
/// what the floor, which spins, never pays. On a virtual machine a halted
/// vCPU waits for the host to run it again, so this tail is the machine's;
/// and each wake-up is charged CPU whatever the sleep's length (14-40 µs
/// on the benches' VMs), which is why ours sleeps as little as it can.
fn wake_lateness_us(n: usize) -> Machine {
    std::thread::spawn(move || {
        #[cfg(target_os = "linux")]
        let _ = nix::sys::prctl::set_timerslack(1_000);
        let pause = Duration::from_micros(100);
        let thread_cpu_ms =
            || super::common::cpu_ms_of(nix::sys::resource::UsageWho::RUSAGE_THREAD);
        let cpu0 = thread_cpu_ms();
        let late_us = (0..n)
            .map(|_| {
                let t = Instant::now();
                std::thread::sleep(pause);
                t.elapsed().saturating_sub(pause).as_secs_f64() * 1e6
            })
            .collect();
        let cpu_us = (thread_cpu_ms() - cpu0) * 1e3 / n.max(1) as f64;
        Machine { late_us, cpu_us }
    })
    .join()
    .expect("sleeper")
}

/// The p99 target's verdict. A floor whose own p99 is past the absolute
/// bound was not a floor in this run (on this machine a few commits have
/// become visible tens of milliseconds after their WAL write, for both
/// followers): a ratio to it would call anything "met".
fn verdict(ours_p99: f64, floor_p99: f64) -> String {
    const ABSOLUTE_MS: f64 = 1.5;
    if floor_p99 > ABSOLUTE_MS {
        return format!(
            "not judged: the floor's own p99 ({floor_p99:.3} ms) is past {ABSOLUTE_MS} ms in this run"
        );
    }
    let met = ours_p99 / floor_p99 <= 3.0 && ours_p99 <= ABSOLUTE_MS;
    if met { "met" } else { "NOT met" }.to_string()
}
