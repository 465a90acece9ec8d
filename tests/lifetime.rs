//! Nothing outlives the bridge: kill it with any signal, or drop a turn in
//! the library, and agy's whole tree (agy, and the `sleep` it leaves in the
//! background the way `run_command` children do) is gone soon after.
//!
//! Processes are found by a marker unique to each test in agy's argv (the
//! name of its workspace, an `--add-dir`: the prompt is never in agy's
//! argv) and by the pidfile fake-agy writes for its grandchild.

mod common;

use common::{alive, bridge, eventually, fake_agy, parent_of, pids_with, state_of, Home};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A workspace directory under `home` named after `marker`'s first line:
/// agy gets it as an `--add-dir`, so its argv holds the marker.
fn marked_workspace(home: &Path, marker: &str) -> std::path::PathBuf {
    let dir = home.join(marker.lines().next().unwrap_or("workspace"));
    std::fs::create_dir_all(&dir).expect("workspace");
    dir
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Start `agy-bridge stream` on a long turn that leaves a grandchild, and
/// wait until agy is streaming.
fn start_stream(
    home: &Path,
    marker: &str,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    start_stream_inner(home, marker, home, None, "0.2")
}

/// [`start_stream`] with `TMPDIR` set (where a private prompt file and the
/// config of pi's tools go), pi's `tools` in the request, at replay
/// `speed`. The marker's first line names
/// the workspace ([`marked_workspace`]); the whole marker is the message.
fn start_stream_inner(
    home: &Path,
    marker: &str,
    tmpdir: &Path,
    tools: Option<Value>,
    speed: &str,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    start_stream_bound(home, marker, tmpdir, tools, speed, "auto")
}

/// [`start_stream_inner`] with `AGY_BIND` set to `bind`.
fn start_stream_bound(
    home: &Path,
    marker: &str,
    tmpdir: &Path,
    tools: Option<Value>,
    speed: &str,
    bind: &str,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut child = bridge("stream", home, "long-answer", speed)
        .env("TMPDIR", tmpdir)
        .env("AGY_BIND", bind)
        .env_remove("AGY_PI_TOOLS")
        .env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", home.join("grandchild.pid"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut request = json!({
        "model": "gemini-3.7-flash",
        "cwd": marked_workspace(home, marker),
        "messages": [{"role": "user", "content": marker}],
    });
    if let Some(tools) = tools {
        request["tools"] = tools;
    }
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("request");
    // Keep stdin open (pi does) by leaking it into the child's lifetime.
    std::mem::forget(stdin);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        if v["type"] == "text_delta" {
            break;
        }
    }
    (child, lines)
}

fn kill_bridge_with(sig: nix::sys::signal::Signal) {
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("lifetime-{sig:?}-{}", std::process::id());
    let (mut child, lines) = start_stream(home.path(), &marker);
    let grandchild = read_pid(&home.path().join("grandchild.pid")).expect("grandchild pid");
    assert!(alive(grandchild));
    assert!(!pids_with(&marker).is_empty(), "agy is not running");

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).expect("kill");
    let gone = eventually(Duration::from_secs(10), || {
        pids_with(&marker).is_empty() && !alive(grandchild)
    });
    use nix::sys::signal::Signal::*;
    let catchable = matches!(sig, SIGTERM | SIGINT | SIGHUP | SIGQUIT);
    if catchable {
        // It ends on its own once agy's tree and the guardian are reaped
        // (agy's being gone does not mean the bridge has written its end).
        common::wait_status(&mut child, common::CHILD_LIMIT);
    } else {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        gone,
        "{sig:?}: left behind {:?} (grandchild {grandchild} alive: {})",
        pids_with(&marker),
        alive(grandchild)
    );
    // Signals the bridge can catch end the stream with one terminal event.
    if catchable {
        let rest: Vec<Value> = lines
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect();
        let terminal: Vec<&Value> = rest
            .iter()
            .filter(|v| v["type"] == "done" || v["type"] == "error")
            .collect();
        assert_eq!(terminal.len(), 1, "{sig:?}: {rest:?}");
        assert_eq!(terminal[0]["reason"], "aborted", "{sig:?}");
    }
}

#[test]
fn sigkill_takes_agys_tree_down() {
    kill_bridge_with(nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn sighup_aborts_like_sigterm() {
    kill_bridge_with(nix::sys::signal::Signal::SIGHUP);
}

#[test]
fn sigquit_aborts_like_sigterm() {
    kill_bridge_with(nix::sys::signal::Signal::SIGQUIT);
}

#[test]
fn sigusr1_takes_agys_tree_down() {
    kill_bridge_with(nix::sys::signal::Signal::SIGUSR1);
}

#[test]
fn sigterm_and_sigint_abort() {
    kill_bridge_with(nix::sys::signal::Signal::SIGTERM);
    kill_bridge_with(nix::sys::signal::Signal::SIGINT);
}

/// A library caller that drops the turn's future mid-run.
/// An agy (fake-agy, exec'd) that, for a turn (not `--version` or
/// `--help`), first leaves a child in a session of its own (`setsid
/// sleep`), as a tool's daemon would: no process group of agy's holds it,
/// only the tree does. Its pid goes to `pidfile`.
fn agy_with_a_session_child(dir: &Path, pidfile: &Path) -> std::path::PathBuf {
    let script = dir.join("agy-setsid");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \" $* \" in *' --version '*|*' --help '*) exec '{agy}' \"$@\";; esac\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > '{}'\nexec '{agy}' \"$@\"\n",
            pidfile.display(),
            agy = common::fake_agy().display()
        ),
    )
    .expect("write the stand-in");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_turn_kills_agys_tree() {
    for guardian in [false, true] {
        let home = Home::new();
        let marker = format!("drop-{guardian}-{}", std::process::id());
        let pidfile = home.dir.path().join("grandchild.pid");
        let session_pidfile = home.dir.path().join("session-child.pid");
        let mut cfg = home.config("long-answer", 0.2);
        cfg.agy_bin = agy_with_a_session_child(home.dir.path(), &session_pidfile);
        cfg.env.push(("FAKE_AGY_GRANDCHILD".into(), "1".into()));
        cfg.env.push((
            "FAKE_AGY_GRANDCHILD_PIDFILE".into(),
            pidfile.display().to_string(),
        ));
        if guardian {
            cfg.guardian = Some(agy_bridge::process::standby::Guardian::new(env!(
                "CARGO_BIN_EXE_agy-bridge"
            )));
        }
        let req = agy_bridge::runner::TurnRequest {
            prompt: marker.clone(),
            add_dirs: vec![marked_workspace(home.dir.path(), &marker)],
            ..Default::default()
        };
        let (tx, mut rx) = agy_bridge::runner::event_channel();
        let turn = tokio::spawn(async move {
            agy_bridge::runner::run(&cfg, &req, Default::default(), tx).await
        });
        // Wait for agy's first text, then drop the turn.
        while let Some(ev) = rx.recv().await {
            if matches!(
                ev,
                agy_bridge::runner::RunEvent::Agy(agy_bridge::follow::events::Event::Text { .. })
            ) {
                break;
            }
        }
        let grandchild = read_pid(&pidfile).expect("grandchild pid");
        let session_child = read_pid(&session_pidfile).expect("the session child's pid");
        assert!(alive(session_child), "the session child runs");
        turn.abort();
        let _ = turn.await;
        let gone = tokio::task::spawn_blocking(move || {
            eventually(Duration::from_secs(10), || {
                pids_with(&marker).is_empty() && !alive(grandchild) && !alive(session_child)
            })
        })
        .await
        .expect("join");
        assert!(
            gone,
            "guardian={guardian}: agy's tree outlived the dropped turn"
        );
    }
}

/// A prompt agy does not read on its stdin (here: a turn bound by
/// discovery, which does not read agy's stream-json) goes in a private
/// directory, and so does the config that serves pi's tools to agy; a
/// SIGKILLed bridge cannot remove them, so the guardian does.
#[test]
fn sigkill_leaves_no_private_prompt_file_behind() {
    let marker = format!("lifetime-long-{}", std::process::id());
    let message = format!("{marker}\n{}", "x".repeat(200 * 1024));
    sigkill_leaves_no_private_dir_behind(&message, None, "agy-bridge-prompt-", "discovery");
}

#[test]
fn sigkill_leaves_no_config_of_pis_tools_behind() {
    let marker = format!("lifetime-mcp-{}", std::process::id());
    let tools = json!([{
        "name": "only_pi_has_it",
        "description": "a tool agy lacks",
        "parameters": {"type": "object"},
    }]);
    sigkill_leaves_no_private_dir_behind(&marker, Some(tools), "agy-bridge-mcp-", "auto");
}

/// Start a turn whose private directory (named `prefix…`) goes in a TMPDIR
/// of its own, SIGKILL the bridge, and see the directory go.
fn sigkill_leaves_no_private_dir_behind(
    message: &str,
    tools: Option<Value>,
    prefix: &str,
    bind: &str,
) {
    let home = tempfile::tempdir().expect("tmp");
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let (mut child, _lines) =
        start_stream_bound(home.path(), message, tmp.path(), tools, "0.2", bind);
    let private: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(private.len(), 1, "one private directory: {private:?}");
    assert!(private[0].starts_with(prefix), "{private:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    let gone = eventually(Duration::from_secs(10), || {
        std::fs::read_dir(tmp.path())
            .map(|d| d.count() == 0)
            .unwrap_or(false)
    });
    let _ = child.wait();
    assert!(gone, "left in TMPDIR after SIGKILL");
}

#[test]
fn fake_agy_is_the_agy_under_test() {
    // The markers above find fake-agy by its argv; make sure it is there.
    assert!(fake_agy().is_file());
}

/// The children of `pid` (from `/proc/*/stat`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| parent_of(*child) == Some(pid))
        .collect()
}

/// `stream` forks agy's guardian before it reads its request. Started, it
/// waits; the bridge gone (killed, or ended by a bad request) before any
/// turn, it leaves too, having started nothing.
#[test]
fn the_guardian_stream_starts_first_leaves_with_a_bridge_that_never_ran_a_turn() {
    for ending in ["SIGKILL", "a bad request"] {
        let home = tempfile::tempdir().expect("tmp");
        let mut child = bridge("stream", home.path(), "hello", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut guardian = Vec::new();
        let started = eventually(Duration::from_secs(10), || {
            guardian = children_of(child.id());
            !guardian.is_empty()
        });
        assert!(started, "{ending}: no guardian was started");
        assert_eq!(guardian.len(), 1, "{ending}: {guardian:?}");
        let mut stdin = child.stdin.take().expect("stdin");
        if ending == "SIGKILL" {
            child.kill().expect("kill");
        } else {
            writeln!(stdin, "not json").expect("write");
        }
        let status = child.wait().expect("wait");
        assert!(!status.success(), "{ending}");
        let gone = eventually(Duration::from_secs(10), || !alive(guardian[0]));
        assert!(
            gone,
            "{ending}: the guardian {} outlived the bridge",
            guardian[0]
        );
        assert!(
            children_of(guardian[0]).is_empty(),
            "{ending}: the guardian started something"
        );
    }
}

/// An agy whose tree keeps forking (`sleep` in the background, every 2 ms,
/// in agy's own group) while the bridge is SIGKILLed: one look at the tree
/// is never enough. The guardian kills, reaps and looks again until nothing
/// is left, then kills its own group. 20 of 20 runs, for `run` and `stream`.
#[test]
fn a_forking_agy_leaves_nothing_behind_when_the_bridge_is_sigkilled() {
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("forking-agy-{}", std::process::id());
    let dir = home.path().join(&marker);
    std::fs::create_dir_all(&dir).expect("dir");
    let agy = dir.join("agy");
    // The loop's own command line names the script (the marker is in its
    // path); each background child is `sleep 4242.<n>`, found by its value.
    let sleep_value = format!("4242.{}", std::process::id() % 1000);
    std::fs::write(
        &agy,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) echo 1.2.17; exit 0;; --help) exit 0;; models) exec '{}' models;; esac\nwhile :; do sleep {sleep_value} & sleep 0.002; done\n",
            fake_agy().display()
        ),
    )
    .expect("script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let left = || {
        let mut v = pids_with(&marker);
        v.extend(pids_with(&sleep_value));
        v
    };
    for round in 0..20 {
        for command in ["run", "stream"] {
            let mut cmd = bridge(command, home.path(), "hello", "1");
            cmd.env("AGY_BIN", &agy)
                .env("AGY_BIND", "discovery")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if command == "run" {
                cmd.arg("go");
            }
            let mut child = cmd.spawn().expect("spawn");
            let mut stdin = child.stdin.take().expect("stdin");
            if command == "stream" {
                let request = json!({"model": "gemini-3.7-flash", "cwd": home.path(),
                    "messages": [{"role": "user", "content": "go"}]});
                writeln!(stdin, "{request}").expect("request");
            }
            assert!(
                eventually(Duration::from_secs(20), || pids_with(&sleep_value).len()
                    >= 3),
                "{command} round {round}: agy never started forking"
            );
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .expect("kill");
            let _ = child.wait();
            drop(stdin);
            let gone = eventually(Duration::from_secs(10), || left().is_empty());
            assert!(gone, "{command} round {round}: left behind {:?}", left());
        }
    }
}

/// The request for a long turn whose workspace is named `marker` (agy's
/// argv holds it, so its tree can be found).
fn long_request(home: &Path, marker: &str) -> String {
    json!({"model": "gemini-3.7-flash", "cwd": marked_workspace(home, marker),
        "messages": [{"role": "user", "content": marker}]})
    .to_string()
}

/// pi SIGKILLed mid-turn: `stream`'s parent is gone, the kernel tells it
/// (PR_SET_PDEATHSIG), and the turn ends as an abort, agy's tree with it,
/// instead of agy working on for the rest of the turn.
#[test]
fn when_the_caller_is_killed_the_turn_ends() {
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("caller-killed-{}", std::process::id());
    let request = home.path().join("request.json");
    std::fs::write(
        &request,
        format!("{}\n", long_request(home.path(), &marker)),
    )
    .expect("req");
    let out = home.path().join("out.jsonl");
    let template = bridge("stream", home.path(), "long-answer", "0.2");
    // `; true` keeps sh from exec'ing the bridge: sh stays its parent. The
    // request comes from a pipe kept open past the turn (pi keeps stdin
    // open; its end alone would end the turn), so only the caller's death
    // can.
    let mut parent = common::under_sh(
        &template,
        &format!(
            "{{ cat '{}'; sleep 60; }} | {{bridge}} stream > '{}' 2>/dev/null; true",
            request.display(),
            out.display()
        ),
    );
    assert!(
        eventually(Duration::from_secs(30), || !pids_with(&marker).is_empty()),
        "agy never started"
    );
    parent.kill().expect("kill the caller");
    let _ = parent.wait();
    let gone = eventually(Duration::from_secs(10), || pids_with(&marker).is_empty());
    assert!(gone, "agy outlived its caller: {:?}", pids_with(&marker));
    // The bridge ended the turn in order (to a reader that is gone, here a
    // file): one terminal event, an abort.
    assert!(
        eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.contains("\"reason\":\"aborted\""))
        }),
        "{}",
        std::fs::read_to_string(&out).unwrap_or_default()
    );
}

/// pi stopped reading (closed its end of our stdout) mid-turn: the turn
/// ends within a second or two, not at the next write.
#[test]
fn when_the_caller_stops_reading_the_turn_ends() {
    let home = tempfile::tempdir().expect("tmp");
    let marker = format!("caller-closed-{}", std::process::id());
    // Slow enough (a commit every 5 s) that no write would notice soon.
    let (mut child, lines) = start_stream_inner(home.path(), &marker, home.path(), None, "0.05");
    assert!(!pids_with(&marker).is_empty(), "agy is not running");
    drop(lines);
    let gone = eventually(Duration::from_secs(3), || pids_with(&marker).is_empty());
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    assert!(
        gone,
        "agy outlived a caller that stopped reading: {:?}",
        pids_with(&marker)
    );
    assert!(!status.success(), "{status:?}");
}

/// A stop signal the moment the bridge can catch one (its handler shows in
/// /proc, from the first instructions of `main`) still ends the turn in
/// order: `start`, then one `error` with reason `aborted`.
#[test]
fn a_stop_signal_at_once_still_ends_in_order() {
    for round in 0..6 {
        let home = tempfile::tempdir().expect("tmp");
        let child = bridge("stream", home.path(), "long-answer", "0.2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let pid = child.id();
        let catches_term = || {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("SigCgt:"))?.to_string();
                    u64::from_str_radix(line.trim_start_matches("SigCgt:").trim(), 16).ok()
                })
                .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
        };
        assert!(
            eventually(Duration::from_secs(10), catches_term),
            "round {round}"
        );
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("kill");
        let out = common::wait_output(child, common::CHILD_LIMIT);
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert_eq!(
            events.first().map(|e| e["type"].clone()),
            Some(json!("start")),
            "round {round}: {events:?}"
        );
        let terminal: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "done" || e["type"] == "error")
            .collect();
        assert_eq!(terminal.len(), 1, "round {round}: {events:?}");
        assert_eq!(terminal[0]["reason"], "aborted", "round {round}");
    }
}

fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// When fake-agy, replaying `recording` at `speed`, is due to make the
/// commit after the last one in its commit log (`<n> <unix-time-ns> ...`
/// a line): that commit's time, plus the recording's gap to the next,
/// scaled. Panics when no commit is left to make.
fn next_commit_due(log: &Path, recording: &str, speed: f64) -> std::time::SystemTime {
    let text = std::fs::read_to_string(log).expect("commit log");
    let last = text.lines().last().expect("a commit");
    let mut fields = last.split(' ');
    let n: usize = fields.next().and_then(|f| f.parse().ok()).expect("n");
    let at_ns: u64 = fields.next().and_then(|f| f.parse().ok()).expect("time");
    let rec = common::load(recording);
    assert!(n < rec.commits.len(), "agy had made all its commits");
    let gap_ms = (rec.commits[n].t_ms - rec.commits[n - 1].t_ms) as f64 / speed;
    std::time::UNIX_EPOCH + Duration::from_nanos(at_ns) + Duration::from_secs_f64(gap_ms / 1000.0)
}

/// Ctrl-Z on `run` (SIGTSTP, as the terminal sends it) stops the bridge
/// and agy's tree with it: no commit is written while stopped. The
/// guardian is not stopped (it must stay able to take the tree down). `fg`
/// (SIGCONT to the bridge) resumes agy, and the turn completes.
#[test]
fn ctrl_z_pauses_agys_tree_and_fg_resumes_it() {
    use nix::sys::signal::{kill, Signal};
    let home = tempfile::tempdir().expect("tmp");
    let commits = home.path().join("commits.log");
    let pidfile = home.path().join("grandchild.pid");
    let child = bridge("run", home.path(), "long-answer", "0.1")
        .args(["--json", "pause me"])
        .env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile)
        .env("FAKE_AGY_COMMIT_LOG", &commits)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let bridge_pid = nix::unistd::Pid::from_raw(child.id() as i32);
    assert!(
        eventually(Duration::from_secs(30), || lines_in(&commits) >= 1
            && read_pid(&pidfile).is_some()),
        "agy never committed"
    );
    let grandchild = read_pid(&pidfile).expect("grandchild pid");
    // The grandchild's shell has exited: it belongs to the guardian (a
    // subreaper), whose other child is agy.
    let guardian = parent_of(grandchild).expect("guardian");
    let agy: Vec<u32> = children_of(guardian)
        .into_iter()
        .filter(|p| *p != grandchild)
        .collect();
    assert_eq!(agy.len(), 1, "agy under guardian {guardian}: {agy:?}");
    let agy = agy[0];

    kill(bridge_pid, Signal::SIGTSTP).expect("SIGTSTP");
    let stopped = |pid: u32| state_of(pid) == Some('T');
    assert!(
        eventually(Duration::from_secs(10), || stopped(child.id())
            && stopped(agy)
            && stopped(grandchild)),
        "bridge {:?}, agy {:?}, grandchild {:?}",
        state_of(child.id()),
        state_of(agy),
        state_of(grandchild)
    );
    assert!(!stopped(guardian), "the guardian was stopped");
    let before = lines_in(&commits);
    // No commit while stopped: watched until agy's next commit was due by
    // the recording's schedule (fake-agy commits at fixed offsets from its
    // start, so a running agy would have made it), and a second more.
    let due = next_commit_due(&commits, "long-answer", 0.1) + Duration::from_secs(1);
    while std::time::SystemTime::now() < due {
        assert_eq!(lines_in(&commits), before, "agy committed while stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lines_in(&commits), before, "agy committed while stopped");

    kill(bridge_pid, Signal::SIGCONT).expect("SIGCONT");
    assert!(
        eventually(Duration::from_secs(10), || !stopped(agy)),
        "agy was not resumed"
    );
    let out = common::wait_output(child, common::CHILD_LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(lines_in(&commits) > before, "agy never went on");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"kind\":\"result\""), "{stdout}");
}

/// pi closes `stream`'s stdin mid-turn (it keeps it open while it lives):
/// the turn is aborted at once and agy's tree goes with it, instead of agy
/// working on to the end of its turn.
#[test]
fn when_the_caller_closes_stdin_the_turn_ends() {
    let home = tempfile::tempdir().expect("tmp");
    let pidfile = home.path().join("grandchild.pid");
    let mut child = bridge("stream", home.path(), "long-answer", "0.05")
        .env_remove("AGY_PI_TOOLS")
        .env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", long_request(home.path(), "stdin closes")).expect("request");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("\"text_delta\""));
    assert!(started, "agy never streamed");
    let grandchild = read_pid(&pidfile).expect("grandchild pid");
    drop(stdin);
    let rest: Vec<Value> = lines
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    let terminal: Vec<&Value> = rest
        .iter()
        .filter(|v| v["type"] == "done" || v["type"] == "error")
        .collect();
    assert_eq!(terminal.len(), 1, "{rest:?}");
    assert_eq!(terminal[0]["reason"], "aborted", "{rest:?}");
    assert!(!status.success(), "{status:?}");
    assert!(
        eventually(Duration::from_secs(10), || !alive(grandchild)),
        "agy's tree outlived a caller that closed stdin"
    );
}

/// agy ends its turn on its own but leaves a child running in the
/// background (the `sleep` a `run_command` may leave): the turn ends well
/// and the child goes with it. (The guardian skips its look through every
/// process when it has no child left; here it has one.)
#[test]
fn what_agy_leaves_running_at_its_end_goes_with_the_turn() {
    let home = tempfile::tempdir().expect("tmp");
    let pidfile = home.path().join("grandchild.pid");
    let out = bridge("run", home.path(), "hello", "1")
        .arg("go")
        .env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let grandchild = read_pid(&pidfile).expect("grandchild pid");
    assert!(
        eventually(Duration::from_secs(10), || !alive(grandchild)),
        "agy's background child outlived its turn"
    );
}
