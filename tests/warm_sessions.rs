//! `stream --session`: one bridge per pi session, with agy kept warm between
//! turns (issue 18). fake-agy runs a stdin session as agy ≥ 1.1.15 does: one
//! `init` after its start-up, then one turn per stdin line in the same
//! conversation, a `result` after each. Each test reads as a transcript of
//! what pi sees, and counts agy's starts in fake-agy's argv log.

mod common;

use common::{
    argvs, bridge, cmdline, eventually, load, pids_with, sessions_json, stdin_prompts, CHILD_LIMIT,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// One `agy-bridge stream --session` child, driven as the extension does.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Value>,
    home: PathBuf,
    workspace: PathBuf,
    stderr: PathBuf,
}

impl Session {
    fn start(recording: &str, speed: &str, env: &[(&str, &str)]) -> (Session, tempfile::TempDir) {
        let home = tempfile::tempdir().expect("tmp");
        let session = Session::start_in(home.path(), recording, speed, env);
        (session, home)
    }

    /// A session in `home`, a second one when one runs there already (as
    /// a second pi on the same session would be).
    fn start_in(home: &Path, recording: &str, speed: &str, env: &[(&str, &str)]) -> Session {
        let workspace = home.join(format!("ws-{}", std::process::id()));
        std::fs::create_dir_all(&workspace).expect("workspace");
        let n = std::fs::read_dir(home).map_or(0, |d| d.count());
        let stderr = home.join(format!("bridge-{n}.stderr"));
        let mut cmd = bridge("stream", home, recording, speed);
        cmd.arg("--session")
            .env("FAKE_AGY_ARGV_LOG", home.join("argv.log"))
            .env("FAKE_AGY_STDIN_LOG", home.join("stdin.log"))
            .env("TMPDIR", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("agy-bridge stream --session");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout");
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let ev = serde_json::from_str(&line).expect("one JSON event per line");
                if tx.send(ev).is_err() {
                    break;
                }
            }
        });
        Session {
            child,
            stdin,
            events,
            home: home.to_path_buf(),
            workspace,
            stderr,
        }
    }

    fn send(&mut self, line: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the bridge");
        stdin.flush().expect("flush");
    }

    fn request(&self, model: &str, prompts: &[&str]) -> Value {
        let mut messages = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            if i > 0 {
                messages.push(json!({"role": "assistant", "provider": "antigravity",
                    "api": "agy-bridge", "model": model, "content": [{"type": "text", "text": "…"}]}));
            }
            messages.push(json!({"role": "user", "content": p}));
        }
        json!({"model": model, "sessionId": "warm-test", "cwd": self.workspace, "messages": messages})
    }

    fn warm(&mut self, model: &str) {
        let line = json!({"type": "warm", "model": model, "sessionId": "warm-test", "cwd": self.workspace});
        self.send(&line);
    }

    /// The next event, or `None` after `limit`.
    fn next(&self, limit: Duration) -> Option<Value> {
        self.events.recv_timeout(limit).ok()
    }

    /// One turn's events, from its `start` to its terminal event.
    fn turn(&mut self, request: &Value) -> Vec<Value> {
        self.send(request);
        self.rest_of_turn(Vec::new())
    }

    fn rest_of_turn(&mut self, mut seen: Vec<Value>) -> Vec<Value> {
        let deadline = Instant::now() + CHILD_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = self
                .next(left)
                .unwrap_or_else(|| panic!("the turn never ended: {seen:?}\n{}", self.stderr()));
            let end = matches!(ev["type"].as_str(), Some("error"))
                || (ev["type"] == "done" && ev["reason"] == "stop");
            seen.push(ev);
            if end {
                return seen;
            }
        }
    }

    /// The agy turn processes started so far (not `--version`, `models`…).
    fn agy_starts(&self) -> Vec<Vec<String>> {
        argvs(&self.home.join("argv.log"))
            .into_iter()
            .filter(|a| a.iter().any(|w| w == "-p"))
            .collect()
    }

    fn prompts(&self) -> Vec<String> {
        stdin_prompts(&self.home.join("stdin.log"))
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Live fake-agy processes of this session (its workspace is in their argv).
    fn agy_pids(&self) -> Vec<u32> {
        let marker = self.workspace.display().to_string();
        pids_with(&marker)
            .into_iter()
            .filter(|pid| cmdline(*pid).contains("fake-agy"))
            .collect()
    }

    /// pi is gone: stdin ends, and the bridge exits.
    fn end(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        common::wait_status(&mut self.child, CHILD_LIMIT)
    }
}

/// The answer text pi got in one turn (text deltas joined).
fn text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

/// The turn ended as pi's `done` with reason `stop`.
fn assert_stopped(events: &[Value]) {
    assert_eq!(
        ended_with(events),
        ("done".into(), "stop".into()),
        "{events:?}"
    );
}

fn ended_with(events: &[Value]) -> (String, String) {
    let last = events.last().expect("a terminal event");
    (
        last["type"].as_str().unwrap_or_default().to_string(),
        last["reason"].as_str().unwrap_or_default().to_string(),
    )
}

/// The answer text of turn `n` of a recording: what its database holds
/// after that turn and not before it (white space ignored, as pi's blocks
/// may be joined differently).
fn recorded_answer(recording: &str, n: u32) -> String {
    let upto = |last: Option<u32>| -> String {
        let Some(last) = last else {
            return String::new();
        };
        let mut rec = load(recording);
        rec.commits.retain(|c| c.turn <= last);
        let conn = rec
            .final_database(&rec.header.root_conversation)
            .expect("final db");
        let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
        let decoded: Vec<_> = rows.iter().map(agy_format::steps::decode).collect();
        agy_bridge::follow::events::decode_all(&decoded)
            .into_iter()
            .filter_map(|e| match e {
                agy_bridge::follow::events::Event::Text { text, .. } => Some(text),
                _ => None,
            })
            .collect()
    };
    let all = squeeze(&upto(Some(n)));
    let before = squeeze(&upto(n.checked_sub(1)));
    all.strip_prefix(&before)
        .expect("a later turn only adds steps")
        .to_string()
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

const MODEL: &str = "gemini-3.7-flash";
const OTHER_MODEL: &str = "gemini-3.7-pro";
const TWO_TURNS: &str = "stdin-two-turns";

#[test]
fn two_turns_run_on_one_agy_and_each_streams_only_its_own_answer() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[("FAKE_AGY_BOOT_MS", "300")]);
    let first = s.turn(&s.request(MODEL, &["first question"]));
    let second = s.turn(&s.request(MODEL, &["first question", "second question"]));
    assert_stopped(&first);
    assert_stopped(&second);
    assert_eq!(squeeze(&text(&first)), recorded_answer(TWO_TURNS, 0));
    assert_eq!(squeeze(&text(&second)), recorded_answer(TWO_TURNS, 1));
    assert!(!recorded_answer(TWO_TURNS, 1).is_empty());
    assert_eq!(
        s.agy_starts().len(),
        1,
        "one agy for both turns: {:?}",
        s.agy_starts()
    );
    assert_eq!(s.prompts().len(), 2, "both prompts on that agy's stdin");
    assert!(
        s.prompts()[1].contains("second question"),
        "{:?}",
        s.prompts()
    );
    assert!(s.stderr().contains("warm agy: on"), "{}", s.stderr());
    assert!(s.end().success());
}

/// The extension tags its request line `{"type":"request",…}`, as every
/// other line it writes (issue 50, item 3).
#[test]
fn a_tagged_request_line_is_a_turn() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[]);
    let mut request = s.request(MODEL, &["first question"]);
    request["type"] = json!("request");
    let first = s.turn(&request);
    assert_stopped(&first);
    assert_eq!(squeeze(&text(&first)), recorded_answer(TWO_TURNS, 0));
    assert!(s.end().success());
}

/// ARCHITECTURE's rule for `release`, on a session: the released turn's
/// events end with its one final event before the next request's `start`,
/// and a release with no turn under way adds no event.
#[test]
fn a_released_turn_ends_before_the_next_request_begins_and_a_late_release_adds_nothing() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[]);
    let mut first = s.request(MODEL, &["first question"]);
    first["type"] = json!("request");
    let mut second = s.request(MODEL, &["first question", "second question"]);
    second["type"] = json!("request");
    s.send(&first);
    s.send(&json!({"type": "release", "reason": "pi moved on"}));
    s.send(&second);
    let released = s.rest_of_turn(Vec::new());
    let next = s.rest_of_turn(Vec::new());
    for turn in [&released, &next] {
        assert_eq!(turn[0]["type"], "start", "{turn:?}");
        let finals = turn
            .iter()
            .filter(|e| e["type"] == "error" || (e["type"] == "done" && e["reason"] == "stop"))
            .count();
        assert_eq!(finals, 1, "{turn:?}");
    }
    assert_stopped(&next);
    assert_eq!(squeeze(&text(&next)), recorded_answer(TWO_TURNS, 1));
    s.send(&json!({"type": "release", "reason": "nothing to release"}));
    drop(s.stdin.take());
    let mut after = Vec::new();
    while let Some(ev) = s.next(CHILD_LIMIT) {
        after.push(ev);
    }
    assert!(after.is_empty(), "{after:?}");
    assert!(s.end().success());
}

#[test]
fn a_warm_line_starts_agy_before_the_first_prompt() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[("FAKE_AGY_BOOT_MS", "300")]);
    s.warm(MODEL);
    assert!(
        eventually(Duration::from_secs(30), || s.agy_starts().len() == 1),
        "agy was not started by the warm line: {}",
        s.stderr()
    );
    assert!(s.prompts().is_empty(), "no prompt before the first turn");
    let first = s.turn(&s.request(MODEL, &["first question"]));
    assert_eq!(squeeze(&text(&first)), recorded_answer(TWO_TURNS, 0));
    assert_eq!(s.agy_starts().len(), 1, "the first turn used the warm agy");
    assert!(s.end().success());
}

#[test]
fn a_model_change_between_turns_restarts_agy_on_the_same_conversation() {
    let (mut s, home) = Session::start(TWO_TURNS, "4", &[]);
    let first = s.turn(&s.request(MODEL, &["first question"]));
    assert_eq!(ended_with(&first).0, "done");
    let id = sessions_json(home.path())["sid:warm-test"]["conversationId"]
        .as_str()
        .expect("the session is bound")
        .to_string();
    let second = s.turn(&s.request(OTHER_MODEL, &["first question", "second"]));
    assert_stopped(&second);
    let starts = s.agy_starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    let argv = starts[1].join(" ");
    assert!(argv.contains(&format!("--conversation {id}")), "{argv}");
    assert!(argv.contains(&format!("--model {OTHER_MODEL}")), "{argv}");
    assert!(
        !starts[0].join(" ").contains("--conversation"),
        "{:?}",
        starts[0]
    );
    assert!(s.end().success());
}

#[test]
fn an_aborted_turn_is_followed_by_one_that_succeeds_on_the_same_conversation() {
    let (mut s, home) = Session::start("long-answer", "0.3", &[]);
    s.send(&s.request(MODEL, &["a long one"]));
    let mut seen = Vec::new();
    while let Some(ev) = s.next(CHILD_LIMIT) {
        let texting = ev["type"] == "text_delta";
        seen.push(ev);
        if texting {
            break;
        }
    }
    let pids = s.agy_pids();
    assert!(!pids.is_empty(), "agy is running the turn");
    s.send(&json!({"type": "abort"}));
    let aborted = s.rest_of_turn(seen);
    assert_eq!(ended_with(&aborted), ("error".into(), "aborted".into()));
    assert!(
        eventually(Duration::from_secs(10), || pids
            .iter()
            .all(|p| !common::alive(*p))),
        "the aborted agy's tree is gone"
    );
    // pi hears of the abort at once; the binding is saved as the turn ends.
    let bound = || {
        sessions_json(home.path())["sid:warm-test"]["conversationId"]
            .as_str()
            .map(str::to_string)
    };
    assert!(
        eventually(Duration::from_secs(10), || bound().is_some()),
        "the aborted turn's conversation is kept"
    );
    let id = bound().unwrap_or_default();
    let next = s.turn(&s.request(MODEL, &["a long one", "go on"]));
    assert_stopped(&next);
    let starts = s.agy_starts();
    assert_eq!(starts.len(), 2, "a replacement agy: {starts:?}");
    assert!(
        starts[1]
            .join(" ")
            .contains(&format!("--conversation {id}")),
        "{:?}",
        starts[1]
    );
    assert!(s.end().success());
}

#[test]
fn agy_killed_between_turns_is_replaced_not_reported() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[]);
    let first = s.turn(&s.request(MODEL, &["first question"]));
    assert_eq!(ended_with(&first).0, "done");
    let pids = s.agy_pids();
    assert_eq!(pids.len(), 1, "one warm agy: {pids:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pids[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill agy");
    assert!(
        eventually(Duration::from_secs(30), || s.agy_starts().len() == 2),
        "a replacement was started: {}",
        s.stderr()
    );
    let second = s.turn(&s.request(MODEL, &["first question", "second"]));
    assert_stopped(&second);
    assert!(!text(&second).is_empty());
    assert!(
        s.stderr().contains("exited between turns"),
        "{}",
        s.stderr()
    );
    assert!(s.end().success());
}

#[test]
fn an_idle_session_releases_its_agy_and_the_next_turn_starts_one() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[("AGY_WARM_IDLE_SECS", "1")]);
    let first = s.turn(&s.request(MODEL, &["first question"]));
    assert_eq!(ended_with(&first).0, "done");
    assert!(
        eventually(Duration::from_secs(20), || s.agy_pids().is_empty()),
        "the idle agy was released: {:?}",
        s.agy_pids()
    );
    let second = s.turn(&s.request(MODEL, &["first question", "second"]));
    assert_stopped(&second);
    assert_eq!(s.agy_starts().len(), 2);
    assert!(s.end().success());
}

#[test]
fn warm_off_runs_one_agy_per_turn_and_says_so_once() {
    let (mut s, _home) = Session::start(TWO_TURNS, "4", &[("AGY_WARM", "off")]);
    s.warm(MODEL);
    let first = s.turn(&s.request(MODEL, &["first question"]));
    let second = s.turn(&s.request(MODEL, &["first question", "second"]));
    assert_stopped(&first);
    assert_stopped(&second);
    assert_eq!(s.agy_starts().len(), 2, "one agy per turn");
    let said = s.stderr().matches("warm agy: off").count();
    assert_eq!(said, 1, "{}", s.stderr());
    assert!(s.end().success());
}

/// pi SIGKILLed while its session holds a warm agy: nothing is left.
#[test]
fn a_sigkilled_pi_leaves_no_warm_agy_behind() {
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("warm-killed-{}", std::process::id());
    let workspace = home.path().join(&marker);
    std::fs::create_dir_all(&workspace).expect("workspace");
    let request = home.path().join("request.json");
    let req = json!({"model": MODEL, "sessionId": "k", "cwd": workspace,
        "messages": [{"role": "user", "content": "hi"}]});
    std::fs::write(&request, format!("{req}\n")).expect("request");
    let out = home.path().join("out.jsonl");
    let template = bridge("stream", home.path(), TWO_TURNS, "4");
    // sh stays the bridge's parent (`; true`), as pi would be; its stdin
    // stays open past the turn, so only the caller's death ends it.
    let mut parent = common::under_sh(
        &template,
        &format!(
            "{{ cat '{}'; sleep 60; }} | {{bridge}} stream --session > '{}' 2>/dev/null; true",
            request.display(),
            out.display()
        ),
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.contains("\"done\""))
        }),
        "the turn never ended"
    );
    let agy: Vec<u32> = pids_with(&marker)
        .into_iter()
        .filter(|p| cmdline(*p).contains("fake-agy"))
        .collect();
    assert_eq!(agy.len(), 1, "agy is warm after the turn");
    parent.kill().expect("SIGKILL pi");
    let _ = parent.wait();
    let gone = eventually(Duration::from_secs(10), || {
        pids_with(&marker).is_empty() && !common::alive(agy[0])
    });
    assert!(gone, "left behind: {:?}", pids_with(&marker));
}

/// Two pi processes on one pi session (two session children): each turn
/// takes the session's lock, and a warm agy whose conversation the other
/// process wrote to since is replaced (on the same conversation), never
/// handed a turn it knows nothing about.
#[test]
fn a_warm_agy_is_not_used_after_another_process_ran_a_turn_of_its_session() {
    let (mut a, home) = Session::start(TWO_TURNS, "4", &[]);
    let first = a.turn(&a.request(MODEL, &["first question"]));
    assert_eq!(ended_with(&first).0, "done");
    // A second child in the same home and workspace, as a second pi would be.
    let mut b = Session::start_in(home.path(), TWO_TURNS, "4", &[]);
    let other = b.turn(&b.request(MODEL, &["first question", "from the other pi"]));
    assert_stopped(&other);
    let id = sessions_json(home.path())["sid:warm-test"]["conversationId"]
        .as_str()
        .expect("bound")
        .to_string();
    let before = a.agy_starts().len();
    let again = a.turn(&a.request(MODEL, &["first question", "from the other pi", "back"]));
    assert_stopped(&again);
    let starts = a.agy_starts();
    assert_eq!(
        starts.len(),
        before + 1,
        "a replaced a stale agy: {starts:?}"
    );
    let last = starts.last().expect("a start").join(" ");
    assert!(last.contains(&format!("--conversation {id}")), "{last}");
    assert!(a.stderr().contains("warm agy: on"), "{}", a.stderr());
    assert!(a.end().success());
    assert!(b.end().success());
}

/// An agy that cannot read turns on stdin (older than 1.1.15): one agy per
/// turn, as before, and the session says why once.
#[test]
fn an_agy_older_than_1_1_15_runs_one_process_per_turn_and_says_why() {
    let bin = tempfile::tempdir().expect("tmp");
    let old_agy = bin.path().join("agy");
    std::fs::write(
        &old_agy,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 1.1.9; exit 0; fi\nexec '{}' \"$@\"\n",
            common::fake_agy().display()
        ),
    )
    .expect("script");
    let mut perms = std::fs::metadata(&old_agy).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&old_agy, perms).expect("chmod");
    let agy_bin = old_agy.display().to_string();
    let (mut s, _home) = Session::start("hello", "4", &[("AGY_BIN", agy_bin.as_str())]);
    let first = s.turn(&s.request(MODEL, &["hi"]));
    let second = s.turn(&s.request(MODEL, &["hi", "again"]));
    assert_stopped(&first);
    assert_stopped(&second);
    assert_eq!(s.agy_starts().len(), 2, "one agy per turn");
    let stderr = s.stderr();
    assert_eq!(stderr.matches("warm agy: off").count(), 1, "{stderr}");
    assert!(
        stderr.contains("1.1.9 does not read turns on its stdin"),
        "{stderr}"
    );
    assert!(s.end().success());
}
