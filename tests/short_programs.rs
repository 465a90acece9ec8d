//! Every agy process is the bridge's, the short programs' too (`--version`,
//! `--help`, `-p /hooks`, `-p /usage`, `models`): each runs under the
//! guardian, so SIGKILL of the bridge leaves nothing of its tree, and
//! Ctrl-C ends the command that waits for it at once.
//!
//! The agy stand-in answers every program at once but the one under test
//! (`HANG_ON`), which puts one child in its own process group and one in a
//! session of its own (where neither a group kill nor `PR_SET_PDEATHSIG`
//! on agy reaches), writes their pids and its own (its own last: the file
//! says it is hanging), and hangs for 300 s. Each program's own time limit
//! (5 s for `--version`, 8 s for `models`, 10 s for `/hooks` and `/usage`)
//! is above the Ctrl-C bound, so a command that waited it out fails.

mod common;

use common::{alive, bridge, cmdline, eventually, parent_of};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The agy stand-in. `$1 $2` names the program; `HANG_ON` the one that
/// hangs (a turn, never asked here, hangs too).
const STAND_IN: &str = r#"#!/bin/sh
case "$1 $2" in
  "--version "*) what=version ;;
  "--help "*) what=help ;;
  "-p /hooks") what=hooks ;;
  "-p /usage") what=usage ;;
  "models "*) what=models ;;
  *) what=turn ;;
esac
if [ "$what" != "$HANG_ON" ] && [ "$what" != turn ]; then
  case "$what" in
    version) echo 1.2.14 ;;
    help) echo "Usage: agy [flags]" ;;
    *) echo "{}" ;;
  esac
  exit 0
fi
setsid sleep 300 &
echo $! > "$PIDS/session.pid"
sleep 300 &
echo $! > "$PIDS/child.pid"
echo $$ > "$PIDS/agy.tmp" && mv "$PIDS/agy.tmp" "$PIDS/agy.pid"
wait
"#;

/// How long a test waits for the bridge to reach the hanging program
/// (it starts a runtime, a guardian, maybe two other programs first).
const REACH: Duration = Duration::from_secs(60);
/// Ctrl-C must end the command within 1 s; asserted with room for a busy
/// machine, and still below every program's own time limit.
const CTRL_C_BOUND: Duration = Duration::from_secs(3);
/// How long the stand-in's tree may take to go once the bridge is killed.
const GONE: Duration = Duration::from_secs(10);

/// One bridge command waiting for one short program.
struct Case {
    command: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// The program that hangs (`STAND_IN`'s words).
    hang_on: &'static str,
    /// What the hanging program's argv holds.
    argv_has: &'static str,
    /// `stream`'s request line.
    request: bool,
    /// The exit code Ctrl-C ends it with (`stream` speaks to pi in events,
    /// not codes: only that it failed).
    interrupted: Option<i32>,
}

const RUN_VERSION: Case = Case {
    command: "run",
    args: &["Say hello"],
    env: &[],
    hang_on: "version",
    argv_has: "--version",
    request: false,
    interrupted: Some(130),
};

const RUN_HELP: Case = Case {
    hang_on: "help",
    argv_has: "--help",
    ..RUN_VERSION
};

/// `ask` permissions: the hook is proven before the turn (`-p /hooks`).
const RUN_HOOKS: Case = Case {
    env: &[("AGY_PERMISSIONS", "ask")],
    hang_on: "hooks",
    argv_has: "/hooks",
    ..RUN_VERSION
};

const USAGE: Case = Case {
    command: "usage",
    args: &[],
    env: &[],
    hang_on: "usage",
    argv_has: "/usage",
    request: false,
    interrupted: Some(130),
};

const MODELS: Case = Case {
    command: "models",
    hang_on: "models",
    argv_has: "models",
    ..USAGE
};

/// AskAntigravity resolves its model alias against `agy models` first.
const ASK_MODELS: Case = Case {
    command: "ask",
    args: &["Say hello"],
    ..MODELS
};

const CONFORMANCE_MODELS: Case = Case {
    command: "conformance",
    args: &["--out", "conformance-out"],
    ..MODELS
};

/// pi's turn: the model catalog is prepared before agy starts.
const STREAM_MODELS: Case = Case {
    command: "stream",
    request: true,
    interrupted: None,
    ..MODELS
};

/// The stand-in's pids, read once it hangs.
struct Hung {
    agy: u32,
    child: u32,
    session: u32,
}

impl Hung {
    fn all(&self) -> [u32; 3] {
        [self.agy, self.child, self.session]
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Start `case`'s command in `home` against the stand-in, and wait until
/// the program under test hangs. The bridge's stderr is piped.
fn start(case: &Case, home: &Path) -> (Child, Hung) {
    use std::os::unix::fs::PermissionsExt;
    let agy = home.join("agy");
    std::fs::write(&agy, STAND_IN).expect("stand-in");
    std::fs::set_permissions(&agy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let pids = home.join("pids");
    std::fs::create_dir_all(&pids).expect("pids dir");
    let mut cmd = bridge(case.command, home, "hello", "1");
    cmd.current_dir(home)
        .env("AGY_BIN", &agy)
        .env("HANG_ON", case.hang_on)
        .env("PIDS", &pids)
        .args(case.args)
        .stdin(if case.request {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in case.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn the bridge");
    if let Some(mut stdin) = child.stdin.take() {
        let request = serde_json::json!({
            "model": "gemini-3.7-flash",
            "cwd": home,
            "messages": [{"role": "user", "content": "Say hello"}],
        });
        writeln!(stdin, "{request}").expect("request");
        // pi keeps stdin open for the whole turn.
        std::mem::forget(stdin);
    }
    let reached = eventually(REACH, || read_pid(&pids.join("agy.pid")).is_some());
    if !reached {
        let _ = child.kill();
        let out = common::wait_output(child, common::CHILD_LIMIT);
        panic!(
            "{} never reached {}: {}",
            case.command,
            case.hang_on,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let pid = |name: &str| read_pid(&pids.join(name)).expect(name);
    let hung = Hung {
        agy: pid("agy.pid"),
        child: pid("child.pid"),
        session: pid("session.pid"),
    };
    (child, hung)
}

/// The program under test is the one hanging, and it runs under the
/// bridge's guardian (the stand-in's parent), not as the bridge's child.
fn assert_guarded(case: &Case, bridge: &Child, hung: &Hung) {
    let argv = cmdline(hung.agy);
    assert!(argv.contains(case.argv_has), "{}: {argv}", case.command);
    let parent = parent_of(hung.agy).expect("agy's parent");
    assert_ne!(
        parent,
        bridge.id(),
        "{}: agy is the bridge's own child",
        case.command
    );
    let guardian = cmdline(parent);
    assert!(
        guardian.contains("__agy-bridge-guard"),
        "{}: agy's parent is {guardian:?}",
        case.command
    );
}

fn assert_all_gone(case: &Case, hung: &Hung, after: &str) {
    let gone = eventually(GONE, || hung.all().iter().all(|p| !alive(*p)));
    let left: Vec<u32> = hung.all().into_iter().filter(|p| alive(*p)).collect();
    assert!(
        gone,
        "{} ({}), {after}: left running {left:?}",
        case.command, case.hang_on
    );
}

/// SIGKILL of the bridge while the program hangs: nothing of its tree is
/// left, the child in a session of its own included.
fn sigkill(case: &Case) {
    let home = tempfile::tempdir().expect("tempdir");
    let (mut bridge, hung) = start(case, home.path());
    assert_guarded(case, &bridge, &hung);
    bridge.kill().expect("SIGKILL");
    let _ = bridge.wait();
    assert_all_gone(case, &hung, "after SIGKILL of the bridge");
}

/// Ctrl-C while the program hangs: the command ends well within the
/// program's own time limit, says so, exits 130 (`stream`: fails), and
/// nothing of the tree is left.
fn ctrl_c(case: &Case) {
    let home = tempfile::tempdir().expect("tempdir");
    let (mut bridge, hung) = start(case, home.path());
    assert_guarded(case, &bridge, &hung);
    let stderr = bridge.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let asked = Instant::now();
    let pid = nix::unistd::Pid::from_raw(bridge.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let status = common::wait_status(&mut bridge, common::CHILD_LIMIT);
    let took = asked.elapsed();
    let said = reader.join().expect("stderr reader");
    assert!(
        took < CTRL_C_BOUND,
        "{} ({}) took {took:?} to end after Ctrl-C: {said}",
        case.command,
        case.hang_on
    );
    match case.interrupted {
        Some(code) => {
            assert_eq!(status.code(), Some(code), "{}: {said}", case.command);
            assert!(
                said.contains("stopped by SIGINT"),
                "{}: {said}",
                case.command
            );
        }
        None => assert!(!status.success(), "{}: {said}", case.command),
    }
    assert_all_gone(case, &hung, "after Ctrl-C");
}

#[test]
fn sigkill_during_version_leaves_nothing() {
    sigkill(&RUN_VERSION);
}

#[test]
fn ctrl_c_during_version_ends_run_at_once() {
    ctrl_c(&RUN_VERSION);
}

#[test]
fn sigkill_during_help_leaves_nothing() {
    sigkill(&RUN_HELP);
}

#[test]
fn ctrl_c_during_help_ends_run_at_once() {
    ctrl_c(&RUN_HELP);
}

#[test]
fn sigkill_during_the_hook_proof_leaves_nothing() {
    sigkill(&RUN_HOOKS);
}

#[test]
fn ctrl_c_during_the_hook_proof_ends_run_at_once() {
    ctrl_c(&RUN_HOOKS);
}

#[test]
fn sigkill_during_usage_leaves_nothing() {
    sigkill(&USAGE);
}

#[test]
fn ctrl_c_during_usage_ends_it_at_once() {
    ctrl_c(&USAGE);
}

#[test]
fn sigkill_during_models_leaves_nothing() {
    sigkill(&MODELS);
}

#[test]
fn ctrl_c_during_models_ends_it_at_once() {
    ctrl_c(&MODELS);
}

#[test]
fn sigkill_during_asks_models_leaves_nothing() {
    sigkill(&ASK_MODELS);
}

#[test]
fn ctrl_c_during_asks_models_ends_it_at_once() {
    ctrl_c(&ASK_MODELS);
}

#[test]
fn ctrl_c_during_conformances_models_ends_it_at_once() {
    ctrl_c(&CONFORMANCE_MODELS);
}

#[test]
fn sigkill_during_streams_models_leaves_nothing() {
    sigkill(&STREAM_MODELS);
}

#[test]
fn ctrl_c_during_streams_models_ends_it_at_once() {
    ctrl_c(&STREAM_MODELS);
}
