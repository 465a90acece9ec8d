//! A pi that stops reading `agy-bridge stream`'s stdout: the bridge's
//! memory stays bounded while agy writes far more than that (the database
//! is the buffer: the runner stops polling and goes on from its cursor
//! once pi reads again), the stream is then complete and in order, and an
//! abort still ends agy's turn while nobody reads.
//!
//! fake-agy replays `synth::bulk::many_answers`: thousands of finished answer
//! steps, each 64 KiB, committed as fast as it can.

mod common;
#[path = "common/rss.rs"]
mod rss;

use agy_synth as synth;
use common::{alive, bridge, eventually, Watchdog};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

const STEP_BYTES: usize = 64 << 10;
const STEPS_PER_COMMIT: usize = 16;
/// The commits `synth::bulk::many_answers` makes before its answers (the user's
/// input, the checkpoint).
const OPENING_COMMITS: usize = 2;
const MB: u64 = 1 << 20;

/// The recording, saved in `dir`.
fn recording(dir: &Path, steps: usize) -> String {
    let path = dir.join("many-answers.jsonl");
    synth::bulk::many_answers(steps, STEP_BYTES, STEPS_PER_COMMIT)
        .save(&path)
        .expect("save the recording");
    path.display().to_string()
}

/// `agy-bridge stream` on the recording, pi's request written, stdin kept
/// open (pi's abort line goes there) and stdout not read.
fn start(home: &Path, recording: &str, bind: &str, extra: &[(&str, &str)]) -> (Child, ChildStdin) {
    start_to(home, recording, bind, extra, Stdio::piped())
}

/// [`start`] with the bridge's stdout on `stdout` (pi's node gives its
/// children socket pairs, not pipes).
fn start_to(
    home: &Path,
    recording: &str,
    bind: &str,
    extra: &[(&str, &str)],
    stdout: Stdio,
) -> (Child, ChildStdin) {
    let mut cmd = bridge("stream", home, recording, "1000");
    cmd.env("AGY_BIND", bind)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn agy-bridge stream");
    let mut stdin = child.stdin.take().expect("stdin");
    let request = json!({
        "model": "gemini-3.7-flash",
        "sessionId": format!("backpressure-{bind}"),
        "cwd": home,
        "messages": [{"role": "user", "content": "go"}],
    });
    writeln!(stdin, "{request}").expect("write the request");
    (child, stdin)
}

/// A turn of `steps` answers bound by `bind`, started with pi not reading
/// its stdout: the bridge, its stdin, a watchdog on it, and fake-agy's
/// commit log.
struct Unread {
    child: Child,
    stdin: ChildStdin,
    watchdog: Watchdog,
    log: std::path::PathBuf,
    /// The recording's and the home's directories, kept to the test's end.
    _dirs: [tempfile::TempDir; 2],
}

fn unread_turn(steps: usize, bind: &str) -> Unread {
    let tmp = tempfile::tempdir().expect("tmp");
    let rec = recording(tmp.path(), steps);
    let log = tmp.path().join("commits.log");
    let home = tempfile::tempdir().expect("home");
    let log_var = log.display().to_string();
    let (child, stdin) = start(
        home.path(),
        &rec,
        bind,
        &[("FAKE_AGY_COMMIT_LOG", &log_var)],
    );
    let watchdog = Watchdog::new(&child, Duration::from_secs(600));
    Unread {
        child,
        stdin,
        watchdog,
        log,
        _dirs: [tmp, home],
    }
}

/// Lines of fake-agy's commit log so far.
fn commits(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Every event the bridge printed, read to its end.
/// Bytes waiting unread on `fd` (our end of pi's stdout).
fn unread(fd: std::os::fd::RawFd) -> usize {
    let mut n: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which outlives
    // the call; `fd` is open (its owner is borrowed by the caller).
    let rc = unsafe { nix::libc::ioctl(fd, nix::libc::FIONREAD, &mut n) };
    if rc == 0 {
        usize::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

fn read_all(out: impl std::io::Read) -> Vec<Value> {
    BufReader::new(out)
        .lines()
        .map(|line| serde_json::from_str(&line.expect("a line")).expect("a JSON event"))
        .collect()
}

fn is_terminal(event: &Value) -> bool {
    matches!(event["type"].as_str(), Some("done" | "error"))
}

/// The answer text pi received, every delta in order.
fn text_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

/// The bridge's peak RSS while `holds` is false (sampled every 10 ms, up
/// to 300 s), then 2 s longer; whether `holds` came true.
fn peak_while(child: &Child, mut holds: impl FnMut() -> bool) -> (u64, bool) {
    let mut peak = 0;
    let mut sample = || peak = peak.max(rss::vm_hwm(child.id()).unwrap_or(0));
    let came = eventually(Duration::from_secs(300), || {
        sample();
        holds()
    });
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(2) {
        sample();
        std::thread::sleep(Duration::from_millis(10));
    }
    (peak, came)
}

/// pi reads again: every event to the end, the bridge's peak RSS to its
/// exit (pi's stdin held open to the end, as pi does: its end would abort).
fn read_to_the_end(mut child: Child, stdin: ChildStdin, watchdog: Watchdog) -> (Vec<Value>, u64) {
    let out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || read_all(out));
    let (status, peak) = rss::wait_with_peak(&mut child);
    drop(stdin);
    drop(watchdog);
    assert!(status.success(), "agy-bridge stream: {status}");
    (reader.join().expect("reader"), peak)
}

/// The stream is whole: `start`, every answer step's text in order, one
/// terminal event, `done`, last.
fn assert_complete(events: &[Value], steps: usize) {
    assert_eq!(
        events.first().map(|e| e["type"].clone()),
        Some(json!("start"))
    );
    let terminal: Vec<&Value> = events.iter().filter(|e| is_terminal(e)).collect();
    assert_eq!(terminal.len(), 1, "exactly one terminal event");
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some(json!("done"))
    );
    let text = text_of(events);
    let mut at = 0;
    for n in 0..steps {
        let step = synth::bulk::numbered_answer(n, STEP_BYTES);
        match text[at..].find(&step) {
            Some(found) => at += found + step.len(),
            None => panic!("answer step {n} is missing or out of order"),
        }
    }
}

/// Without stream-json agy is not held up (it prints its answer at the
/// end): it writes all 150 MiB to its database while pi reads nothing, and
/// the bridge holds a few megabytes of it.
#[test]
fn a_pi_that_stops_reading_holds_the_bridge_to_bounded_memory_and_loses_nothing() {
    const STEPS: usize = 2400; // 150 MiB of answer text
    const BOUND: u64 = 60 * MB;
    let written = (STEPS * STEP_BYTES) as u64;
    let turn = unread_turn(STEPS, "discovery");

    // pi reads nothing while agy writes every step, and a moment longer.
    let all = OPENING_COMMITS + STEPS.div_ceil(STEPS_PER_COMMIT);
    let (peak, wrote_all) = peak_while(&turn.child, || commits(&turn.log) >= all);
    assert!(wrote_all, "agy wrote all its steps meanwhile");
    eprintln!(
        "while pi did not read: agy wrote {} MiB, the bridge's peak RSS {} MiB",
        written / MB,
        peak / MB
    );
    assert!(
        peak < BOUND,
        "the bridge held {} MiB while pi did not read {} MiB of agy's output (bound {} MiB)",
        peak / MB,
        written / MB,
        BOUND / MB
    );

    let (events, after) = read_to_the_end(turn.child, turn.stdin, turn.watchdog);
    eprintln!("the bridge's peak RSS to the end: {} MiB", after / MB);
    assert!(after < BOUND, "peak RSS {} MiB to the end", after / MB);
    assert_complete(&events, STEPS);
}

/// With stream-json, agy's stdout pushes back too: while pi reads nothing
/// agy gets only a few commits ahead (it waits on its full pipe), and the
/// bridge holds little. (To the end, the bridge keeps each step's printed
/// answer once, for the whole-answer check: no bound on that here.)
#[test]
fn with_stream_json_agy_waits_for_a_pi_that_stops_reading() {
    const STEPS: usize = 800; // 50 MiB
    const BOUND: u64 = 40 * MB;
    let turn = unread_turn(STEPS, "stream-json");

    // Until agy has made no commit for 3 s (waiting on its pipe, or done).
    let mut last = (0, Instant::now());
    let (peak, settled) = peak_while(&turn.child, || {
        let now = commits(&turn.log);
        if now != last.0 {
            last = (now, Instant::now());
        }
        now > OPENING_COMMITS && last.1.elapsed() > Duration::from_secs(3)
    });
    assert!(settled, "agy got going, then stopped");
    let all = OPENING_COMMITS + STEPS.div_ceil(STEPS_PER_COMMIT);
    let ahead = commits(&turn.log);
    eprintln!(
        "while pi did not read: agy wrote {ahead} of {all} commits, the bridge's peak RSS {} MiB",
        peak / MB
    );
    assert!(
        ahead < all / 2,
        "agy waited for pi: {ahead} of {all} commits written"
    );
    assert!(
        peak < BOUND,
        "the bridge held {} MiB while pi did not read",
        peak / MB
    );

    let (events, _) = read_to_the_end(turn.child, turn.stdin, turn.watchdog);
    assert_complete(&events, STEPS);
}

#[test]
fn an_abort_ends_the_turn_while_pi_is_not_reading() {
    const STEPS: usize = 800; // 50 MiB
    let tmp = tempfile::tempdir().expect("tmp");
    let rec = recording(tmp.path(), STEPS);
    // With stream-json agy soon waits on its full stdout pipe (each answer
    // is a line): a few commits are all it gets to. pi's node gives the
    // bridge a socket pair for stdout; the other runs have a pipe.
    let runs = [
        ("discovery", 20, false),
        ("stream-json", OPENING_COMMITS + 1, false),
        ("discovery", 20, true),
    ];
    for (bind, going, socket) in runs {
        let (pi_end, stdout) = if socket {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
            (Some(ours), Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        } else {
            (None, Stdio::piped())
        };
        let label = if socket {
            format!("{bind}-socket")
        } else {
            bind.to_string()
        };
        let log = tmp.path().join(format!("commits-{label}.log"));
        let pidfile = tmp.path().join(format!("grandchild-{label}"));
        let home = tempfile::tempdir().expect("home");
        let (log_var, pid_var) = (log.display().to_string(), pidfile.display().to_string());
        // agy would never end on its own (it hangs after its last commit),
        // and leaves a grandchild: gone means the abort ended agy's tree.
        let (mut child, mut stdin) = start_to(
            home.path(),
            &rec,
            bind,
            &[
                ("FAKE_AGY_COMMIT_LOG", &log_var),
                ("FAKE_AGY_HANG", "1"),
                ("FAKE_AGY_GRANDCHILD", "1"),
                ("FAKE_AGY_GRANDCHILD_PIDFILE", &pid_var),
            ],
            stdout,
        );
        let watchdog = Watchdog::new(&child, Duration::from_secs(300));
        // More than pi has read (nothing) is waiting.
        assert!(
            eventually(Duration::from_secs(120), || commits(&log) >= going),
            "{label}: agy got going"
        );
        let grandchild: u32 = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .expect("the grandchild's pid");
        // The abort must come while the bridge writes answers pi does not
        // read: half a pipe of them waits on pi's end (agy has committed far
        // more than a pipe holds, so the bridge is then filling it; a full
        // pipe's byte count depends on how the writes fell into its pages).
        let pi_fd = match (&pi_end, &child.stdout) {
            (Some(socket), _) => socket.as_raw_fd(),
            (None, Some(pipe)) => pipe.as_raw_fd(),
            (None, None) => panic!("{label}: no end for pi"),
        };
        assert!(
            eventually(Duration::from_secs(120), || unread(pi_fd) >= STEP_BYTES / 2),
            "{label}: the bridge never wrote to pi ({} bytes unread)",
            unread(pi_fd)
        );
        writeln!(stdin, r#"{{"type":"abort"}}"#).expect("write the abort");
        assert!(
            eventually(Duration::from_secs(10), || !alive(grandchild)),
            "{label}: agy's tree still runs 10 s after the abort, pi not reading"
        );
        let events = match pi_end {
            Some(socket) => read_all(socket),
            None => read_all(child.stdout.take().expect("stdout")),
        };
        drop(stdin);
        let status = common::wait_status(&mut child, Duration::from_secs(60));
        drop(watchdog);
        assert!(!status.success(), "{label}: an aborted turn fails");
        let terminal: Vec<&Value> = events.iter().filter(|e| is_terminal(e)).collect();
        assert_eq!(terminal.len(), 1, "{label}: exactly one terminal event");
        assert_eq!(terminal[0]["type"], "error", "{label}");
        assert_eq!(terminal[0]["reason"], "aborted", "{label}");
        assert!(
            is_terminal(events.last().expect("events")),
            "{label}: nothing after it"
        );
    }
}
