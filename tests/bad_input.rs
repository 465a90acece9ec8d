//! Every bad input gets a sentence that names it: each test feeds one
//! (a flag, an environment variable, a request line, an id, a directory)
//! to the `agy-bridge` binary and reads what comes out, as a transcript.
//! `stream` always answers with pi's `start` and exactly one `error`.

mod common;

use common::bridge;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// What one command printed.
struct Transcript {
    stdout: String,
    stderr: String,
    success: bool,
}

impl Transcript {
    fn of(out: Output) -> Transcript {
        Transcript {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            success: out.status.success(),
        }
    }

    /// `stream`'s events, each line parsed.
    fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The one error message of a `stream` that failed before any turn:
    /// asserts the stream is exactly `start`, `error`.
    fn stream_error(&self) -> String {
        let events = self.events();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(types, ["start", "error"], "stdout:\n{}", self.stdout);
        assert_eq!(events[1]["reason"], "error");
        assert!(!self.success);
        events[1]["errorMessage"]
            .as_str()
            .expect("errorMessage")
            .to_string()
    }
}

/// A temporary HOME with fake-agy replaying `hello` as agy.
struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().expect("tmp"),
        }
    }

    fn cmd(&self, subcommand: &str) -> Command {
        let mut c = bridge(subcommand, self.home.path(), "hello", "10");
        c.env("FAKE_AGY_ARGV_LOG", self.argv_log())
            .env_remove("AGY_TIMEOUT_MIN")
            .env_remove("AGY_REQUEST_TIMEOUT_SECS");
        c
    }

    /// `cmd` with no agy anywhere.
    fn without_agy(&self, subcommand: &str) -> Command {
        let mut c = self.cmd(subcommand);
        c.env("AGY_BIN", self.home.path().join("no-agy"));
        c
    }

    fn argv_log(&self) -> PathBuf {
        self.home.path().join("argv.jsonl")
    }

    fn missing_dir(&self) -> PathBuf {
        self.home.path().join("no/such/dir")
    }

    /// The arguments of every print-mode agy invocation (a turn; not
    /// `agy --version` or `agy models`), in order.
    fn print_runs(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.argv_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
            .filter(|a| a.iter().any(|x| x == "-p"))
            .collect()
    }

    /// The arguments of the last print-mode agy invocation.
    fn last_print_argv(&self) -> Vec<String> {
        self.print_runs().pop().expect("agy ran in print mode")
    }

    fn conversations(&self) -> PathBuf {
        self.home
            .path()
            .join(".gemini/antigravity-cli/conversations")
    }
}

fn run(mut cmd: Command, args: &[&str]) -> Transcript {
    Transcript::of(cmd.args(args).output().expect("run agy-bridge"))
}

/// Run `cmd` with `stdin` as its whole input (then end of file).
fn feed(mut cmd: Command, stdin: &[u8]) -> Transcript {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A bridge that rejects its flags exits without reading stdin.
    match child.stdin.take().expect("stdin").write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
        _ => {}
    }
    Transcript::of(common::wait_output(child, common::CHILD_LIMIT))
}

fn request(extra: Value) -> String {
    let mut req = json!({
        "model": "gemini-3.7-flash",
        "sessionId": "s1",
        "cwd": "/tmp",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}],
    });
    if let (Some(req), Some(extra)) = (req.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            req.insert(k.clone(), v.clone());
        }
    }
    format!("{req}\n")
}

fn flag(argv: &[String], name: &str) -> Option<String> {
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

// ---------------------------------------------------------------------------
// stream: flags, environment, the request line.

/// A `stream` case: what it is, extra flags, one environment variable and
/// its value, the start of the sentence.
type StreamCase<'a> = (&'a str, &'a [&'a str], (&'a str, &'a str), &'a str);

#[test]
fn stream_flag_and_environment_errors_are_one_error_event_naming_the_input() {
    let env = Env::new();
    let cases: Vec<StreamCase> = vec![
        (
            "AGY_TIMEOUT_MIN=abc",
            &[],
            ("AGY_TIMEOUT_MIN", "abc"),
            "agy-bridge: AGY_TIMEOUT_MIN=\"abc\" is not a whole number of minutes",
        ),
        (
            "--timeout-min x",
            &["--timeout-min", "x"],
            ("UNUSED", ""),
            "agy-bridge stream: invalid value 'x' for '--timeout-min <TIMEOUT_MIN>'",
        ),
        (
            "--no-such-flag",
            &["--no-such-flag"],
            ("UNUSED", ""),
            "agy-bridge stream: unexpected argument '--no-such-flag'",
        ),
        (
            "AGY_REQUEST_TIMEOUT_SECS=soon",
            &[],
            ("AGY_REQUEST_TIMEOUT_SECS", "soon"),
            "agy-bridge: AGY_REQUEST_TIMEOUT_SECS=\"soon\" is not a whole number of seconds",
        ),
        (
            "AGY_BIND=bogus",
            &[],
            ("AGY_BIND", "bogus"),
            "agy-bridge: AGY_BIND=\"bogus\" is not a bind mode; use one of: auto, discovery, stream-json",
        ),
        (
            "AGY_WAKE=bogus",
            &[],
            ("AGY_WAKE", "bogus"),
            "agy-bridge: AGY_WAKE=\"bogus\" is not a wake mode; use one of: events, poll",
        ),
    ];
    for (what, args, (var, value), want) in cases {
        let mut cmd = env.cmd("stream");
        cmd.args(args).env(var, value);
        let out = feed(cmd, request(json!({})).as_bytes());
        let message = out.stream_error();
        assert!(message.starts_with(want), "{what}: {message}");
    }
}

#[test]
fn stream_help_is_help_not_an_error_event() {
    let out = run(Env::new().cmd("stream"), &["--help"]);
    assert!(out.success);
    assert!(
        out.stdout.contains("AGY_REQUEST_TIMEOUT_SECS"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("AGY_TIMEOUT_MIN"));
    assert!(!out.stdout.contains("\"type\""));
}

#[test]
fn stream_request_line_problems_are_named() {
    let env = Env::new();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "non-UTF-8",
            b"{\"model\": \"\xff\xfe\"}\n".to_vec(),
            "agy-bridge: bad request: the request line is not UTF-8 text (invalid byte at offset 11)",
        ),
        (
            "nothing",
            Vec::new(),
            "agy-bridge: bad request: no request line on stdin (it closed before any input)",
        ),
        (
            "an empty line",
            b"\n".to_vec(),
            "agy-bridge: bad request: the request line is empty",
        ),
        (
            "unknown reasoning",
            request(json!({"reasoning": "ultra-max"})).into_bytes(),
            "agy-bridge: bad request: reasoning: unknown thinking level \"ultra-max\" (expected off, minimal, low, medium, high, xhigh or max)",
        ),
    ];
    for (what, stdin, want) in cases {
        let out = feed(env.cmd("stream"), &stdin);
        let message = out.stream_error();
        assert!(message.starts_with(want), "{what}: {message}");
    }
    // None of them reached agy.
    assert_eq!(env.print_runs(), Vec::<Vec<String>>::new());
}

#[test]
fn stream_takes_a_request_that_ends_at_end_of_file_without_a_newline() {
    let env = Env::new();
    let req = request(json!({}));
    // No agy: the turn fails at the spawn, after the request was understood.
    let out = feed(env.without_agy("stream"), req.trim_end().as_bytes());
    let message = out.stream_error();
    assert!(message.starts_with("agy is not installed"), "{message}");
}

#[test]
fn stream_gives_up_on_a_request_line_that_never_ends() {
    let env = Env::new();
    let mut child = env
        .cmd("stream")
        .env("AGY_REQUEST_TIMEOUT_SECS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let watchdog = common::Watchdog::new(&child, common::CHILD_LIMIT);
    // Half a request, and stdin stays open until the bridge has answered.
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(br#"{"model": "gemini-3.7-flash", "messages": ["#)
        .expect("write");
    stdin.flush().expect("flush");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    drop(watchdog);
    let status = common::wait_status(&mut child, common::CHILD_LIMIT);
    drop(stdin);
    let out = Transcript {
        stdout,
        stderr: String::new(),
        success: status.success(),
    };
    assert_eq!(
        out.stream_error(),
        "agy-bridge: bad request: no complete request line on stdin after 1 s: the request is one \
JSON object followed by a newline (or the end of stdin); AGY_REQUEST_TIMEOUT_SECS sets how long to wait"
    );
}

#[test]
fn stream_with_a_missing_working_directory_says_so_even_without_agy() {
    let env = Env::new();
    let dir = env.missing_dir();
    let req = request(json!({"cwd": dir.display().to_string()}));
    let out = feed(env.without_agy("stream"), req.as_bytes());
    assert_eq!(
        out.stream_error(),
        format!("the working directory {} does not exist", dir.display())
    );
    // Nothing was bound for the directory that is not there.
    let sessions = std::fs::read_to_string(
        env.home
            .path()
            .join(".pi/agent/antigravity-bridge/sessions.json"),
    )
    .unwrap_or_default();
    assert!(!sessions.contains("sid:s1"), "{sessions}");
}

// ---------------------------------------------------------------------------
// run and ask.

#[test]
fn run_and_ask_with_a_missing_working_directory_say_so_even_without_agy() {
    let env = Env::new();
    let dir = env.missing_dir();
    let want = format!(
        "agy-bridge: error: the working directory {} does not exist\n",
        dir.display()
    );
    for sub in ["run", "ask"] {
        let out = run(
            env.without_agy(sub),
            &["--cwd", &dir.display().to_string(), "hi"],
        );
        assert!(!out.success, "{sub}");
        assert_eq!(out.stderr, want, "{sub}");
        assert!(
            !out.stdout.contains("not installed"),
            "{sub}: {}",
            out.stdout
        );
    }
}

#[test]
fn run_without_agy_says_so_once() {
    let env = Env::new();
    let out = run(env.without_agy("run"), &["hi"]);
    assert!(!out.success);
    let sentence = "agy is not installed";
    let both = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(both.matches(sentence).count(), 1, "{both}");
    assert!(
        out.stderr
            .starts_with("agy-bridge: error: agy is not installed: "),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("── failed · conversation (unbound)"));
}

#[test]
fn run_takes_agy_bind_from_the_environment_and_the_flag_wins() {
    let env = Env::new();
    let stream_json =
        |argv: &[String]| flag(argv, "--output-format").as_deref() == Some("stream-json");

    let mut cmd = env.cmd("run");
    cmd.env("AGY_BIND", "discovery");
    run(cmd, &["hi"]);
    assert!(!stream_json(&env.last_print_argv()), "AGY_BIND=discovery");

    let mut cmd = env.cmd("run");
    cmd.env("AGY_BIND", "stream-json");
    run(cmd, &["hi"]);
    assert!(stream_json(&env.last_print_argv()), "AGY_BIND=stream-json");

    let mut cmd = env.cmd("run");
    cmd.env("AGY_BIND", "stream-json");
    run(cmd, &["--bind", "discovery", "hi"]);
    assert!(!stream_json(&env.last_print_argv()), "--bind discovery");
}

#[test]
fn run_ask_and_record_refuse_unknown_bind_and_wake_words() {
    let env = Env::new();
    let out_file = env.home.path().join("rec.jsonl");
    for (var, want) in [
        (
            "AGY_BIND",
            "agy-bridge: error: AGY_BIND=\"bogus\" is not a bind mode; use one of: auto, discovery, stream-json\n",
        ),
        (
            "AGY_WAKE",
            "agy-bridge: error: AGY_WAKE=\"bogus\" is not a wake mode; use one of: events, poll\n",
        ),
    ] {
        for (sub, args) in [
            ("run", vec!["hi"]),
            ("ask", vec!["hi"]),
            ("record", vec!["--out", out_file.to_str().expect("utf-8"), "hi"]),
        ] {
            let mut cmd = env.cmd(sub);
            cmd.env(var, "bogus");
            let out = run(cmd, &args);
            assert!(!out.success, "{sub} {var}");
            assert_eq!(out.stderr, want, "{sub} {var}");
        }
    }
    assert_eq!(
        env.print_runs(),
        Vec::<Vec<String>>::new(),
        "agy ran despite a bad setting"
    );
}

/// Every variable with a value it does not take, and the words its
/// sentence must hold.
const BAD_ENV: &[(&str, &str, &str)] = &[
    ("AGY_MODE", "plna", "accept-edits, plan"),
    ("AGY_PERMISSIONS", "bogus", "ask, allow or deny"),
    ("AGY_ALLOW", "run command: x", "TOOL: PATTERN"),
    ("AGY_DEFAULT_THINKING", "max", "low, medium, high"),
    ("AGY_DEFAULT_MODEL", "bogus", "flash"),
    ("AGY_PI_TOOLS", "maybe", "on or off"),
    ("AGY_PI_TOOL_BATCH_MS", "abc", "milliseconds"),
    ("AGY_PI_TOOL_BATCH_MS", "-5", "milliseconds"),
    ("AGY_TIMEOUT_MIN", "abc", "minutes"),
    ("AGY_REQUEST_TIMEOUT_SECS", "abc", "seconds"),
    ("AGY_SEATS", "0", "agy turns from 1"),
    ("AGY_SEATS", "many", "agy turns from 1"),
    ("AGY_START_INTERVAL_MS", "-1", "milliseconds"),
];

#[test]
fn every_bad_environment_value_is_a_sentence_in_every_command() {
    let env = Env::new();
    let out_file = env.home.path().join("rec.jsonl");
    for &(var, value, takes) in BAD_ENV {
        let named = format!("{var}=\"{value}\"");
        for (sub, args) in [
            ("run", vec!["hi"]),
            ("ask", vec!["hi"]),
            (
                "record",
                vec!["--out", out_file.to_str().expect("utf-8"), "hi"],
            ),
            ("config", vec![]),
            ("config", vec!["mode", "plan"]),
        ] {
            let mut cmd = env.cmd(sub);
            cmd.env(var, value);
            let out = run(cmd, &args);
            assert!(!out.success, "{sub} {named}: {}", out.stderr);
            assert!(
                out.stderr.starts_with("agy-bridge: error: ")
                    && out.stderr.contains(&named)
                    && out.stderr.contains(takes)
                    && out.stderr.lines().count() == 1,
                "{sub} {named}: {}",
                out.stderr
            );
        }
        let mut cmd = env.cmd("stream");
        cmd.env(var, value);
        let message = feed(cmd, request(json!({})).as_bytes()).stream_error();
        assert!(
            message.contains(&named) && message.contains(takes),
            "stream {named}: {message}"
        );
    }
    assert_eq!(
        env.print_runs(),
        Vec::<Vec<String>>::new(),
        "agy ran despite a bad setting"
    );
    assert!(!out_file.exists());
}

/// `AGY_SKIP_PERMISSIONS` is no longer read: whatever it holds, the
/// command runs as without it, and one warning line says so.
#[test]
fn agy_skip_permissions_is_one_warning_and_never_an_error() {
    let env = Env::new();
    let warning =
        "agy-bridge: warning: AGY_SKIP_PERMISSIONS is no longer read; set AGY_PERMISSIONS=allow|deny|ask";
    for value in ["bogus", "on"] {
        let mut cmd = env.cmd("run");
        cmd.env("AGY_SKIP_PERMISSIONS", value);
        let out = run(cmd, &["hi"]);
        assert!(out.success, "{value}: {}", out.stderr);
        assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
        let mut cmd = env.cmd("config");
        cmd.env("AGY_SKIP_PERMISSIONS", value)
            .env_remove("AGY_PERMISSIONS");
        let out = run(cmd, &["--json"]);
        assert!(out.success, "{value}: {}", out.stderr);
        let status: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        assert_eq!(status["permissions"], "ask", "{value}: not read");
        assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
    }
}

#[test]
fn extra_args_print_timeout_is_the_users_and_flags_the_bridge_sets_are_refused() {
    let env = Env::new();
    for extra in ["--print-timeout 8s", "-print-timeout=8s"] {
        let mut cmd = env.cmd("run");
        cmd.env("AGY_EXTRA_ARGS", extra);
        let out = run(cmd, &["hi"]);
        assert!(out.success, "{extra}: {}", out.stderr);
        let argv = env.last_print_argv();
        let timeouts: Vec<&String> = argv
            .iter()
            .filter(|a| a.trim_start_matches('-').starts_with("print-timeout"))
            .collect();
        assert_eq!(timeouts.len(), 1, "{extra}: {argv:?}");
        assert!(argv.join(" ").contains("print-timeout"), "{argv:?}");
        assert!(argv.iter().any(|a| a.contains("8s")), "{extra}: {argv:?}");
    }
    let runs = env.print_runs().len();
    for extra in [
        "--output-format json",
        "-p other",
        "--conversation=3ac00ab7-1125-47fe-b16e-3c6ec504e26b",
        "--model x",
        "--mode plan",
    ] {
        for sub in ["run", "ask"] {
            let mut cmd = env.cmd(sub);
            cmd.env("AGY_EXTRA_ARGS", extra);
            let out = run(cmd, &["hi"]);
            assert!(!out.success, "{sub} {extra}");
            let flag = extra.split(' ').next().expect("flag");
            assert!(
                out.stderr.starts_with(&format!(
                    "agy-bridge: error: AGY_EXTRA_ARGS holds {flag}, which the bridge sets itself"
                )),
                "{sub} {extra}: {}",
                out.stderr
            );
        }
        let mut cmd = env.cmd("stream");
        cmd.env("AGY_EXTRA_ARGS", extra);
        let message = feed(cmd, request(json!({})).as_bytes()).stream_error();
        assert!(message.contains("AGY_EXTRA_ARGS holds"), "{message}");
    }
    assert_eq!(env.print_runs().len(), runs, "agy ran with a refused flag");
}

#[test]
fn a_nul_in_the_prompt_a_file_as_cwd_and_an_unknown_recording_db_are_named() {
    let env = Env::new();
    // A NUL byte: run (from stdin) and stream say what it is, agy never runs.
    let mut cmd = env.cmd("run");
    cmd.arg("-");
    let out = feed(cmd, b"say\0hello");
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "the prompt contains a NUL byte (after 3 characters), which agy cannot take in a prompt"
        ),
        "{}",
        out.stderr
    );
    let req = request(json!({
        "messages": [{"role": "user", "content": [{"type": "text", "text": "say\u{0}hello"}]}],
    }));
    let message = feed(env.cmd("stream"), req.as_bytes()).stream_error();
    assert!(message.contains("contains a NUL byte"), "{message}");
    assert_eq!(env.print_runs(), Vec::<Vec<String>>::new());

    // A file as the working directory.
    let file = env.home.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    for sub in ["run", "ask"] {
        let out = run(
            env.cmd(sub),
            &["--cwd", file.to_str().expect("utf-8"), "hi"],
        );
        assert!(!out.success, "{sub}");
        assert!(
            out.stderr.contains(&format!(
                "the working directory {} is not a directory",
                file.display()
            )),
            "{sub}: {}",
            out.stderr
        );
    }

    // A recording whose conversation is none of the databases it writes.
    let hello = agy_corpus::recording::resolve("hello", &agy_corpus::recording::bundled_dir())
        .expect("bundled");
    let mut rec = agy_corpus::recording::Recording::load(&hello).expect("load");
    let real = rec.header.root_conversation.clone();
    rec.header.root_conversation = "00000000-0000-4000-8000-000000000000".into();
    let odd = env.home.path().join("odd.jsonl");
    rec.save(&odd).expect("save");
    let out = Transcript::of(
        Command::new(env!("CARGO_BIN_EXE_agy-bridge"))
            .arg("decode")
            .arg(&odd)
            .output()
            .expect("decode"),
    );
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("names database 00000000-0000-4000-8000-000000000000")
            && out.stderr.contains(&real),
        "{}",
        out.stderr
    );
}

#[test]
fn a_huge_timeout_saturates_instead_of_panicking() {
    let env = Env::new();
    let out = run(
        env.cmd("run"),
        &["--timeout-min", "18446744073709551615", "hi"],
    );
    assert!(out.success, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    // agy (Go) gets the longest duration it can parse.
    assert_eq!(
        flag(&env.last_print_argv(), "--print-timeout").as_deref(),
        Some("2562047h0m0s")
    );

    let out = run(
        env.cmd("ask"),
        &["--timeout-min", "18446744073709551615", "hi"],
    );
    assert!(out.success, "{}", out.stderr);

    let mut cmd = env.cmd("stream");
    cmd.env("AGY_TIMEOUT_MIN", "18446744073709551615");
    let out = feed(cmd, request(json!({})).as_bytes());
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let events = out.events();
    let terminal: Vec<&Value> = events
        .iter()
        .filter(|e| matches!(e["type"].as_str(), Some("done" | "error")))
        .collect();
    assert_eq!(terminal.len(), 1, "{}", out.stdout);
    assert_eq!(
        flag(&env.last_print_argv(), "--print-timeout").as_deref(),
        Some("2562047h0m0s")
    );
}

// ---------------------------------------------------------------------------
// Conversation ids.

const UPPER: &str = "3AC00AB7-1125-47FE-B16E-3C6EC504E26B";
const LOWER: &str = "3ac00ab7-1125-47fe-b16e-3c6ec504e26b";

#[test]
fn uppercase_conversation_ids_reach_agy_in_lowercase() {
    let env = Env::new();
    for sub in ["run", "ask"] {
        run(env.cmd(sub), &["--conversation", UPPER, "hi"]);
        assert_eq!(
            flag(&env.last_print_argv(), "--conversation").as_deref(),
            Some(LOWER),
            "{sub}"
        );
    }

    // A binding set in uppercase is stored, listed and resumed in lowercase.
    let out = run(env.cmd("sessions"), &["set", "sid:s1", UPPER, "2", "1"]);
    assert!(out.success, "{}", out.stderr);
    let out = run(env.cmd("sessions"), &["list", "--json"]);
    let listed: Value = serde_json::from_str(out.stdout.trim()).expect("json");
    assert_eq!(listed["sessions"][0]["conversationId"], LOWER);
    std::fs::create_dir_all(env.conversations()).expect("mkdir");
    std::fs::write(env.conversations().join(format!("{LOWER}.db")), b"").expect("db");
    feed(env.cmd("stream"), request(json!({})).as_bytes());
    assert_eq!(
        flag(&env.last_print_argv(), "--conversation").as_deref(),
        Some(LOWER)
    );
}

#[test]
fn malformed_conversation_ids_are_named() {
    let env = Env::new();
    for bad in ["--help", "../etc", "3ac00ab7-1125-47fe-b16e-3c6ec504e26"] {
        let want = format!(
            "agy-bridge: error: not a conversation id (expected 8-4-4-4-12 hex digits): {bad:?}\n"
        );
        for sub in ["run", "ask"] {
            let out = run(env.cmd(sub), &[&format!("--conversation={bad}"), "hi"]);
            assert!(!out.success);
            assert_eq!(out.stderr, want, "{sub} {bad}");
        }
    }
    assert_eq!(env.print_runs(), Vec::<Vec<String>>::new());
}

// ---------------------------------------------------------------------------
// demo.

#[test]
fn demo_speed_must_be_above_zero_and_says_so_about_speed() {
    for bad in ["0", "-1", "nan", "inf", "fast"] {
        let out = run(
            Command::new(env!("CARGO_BIN_EXE_agy-bridge")),
            &["demo", "--speed", bad],
        );
        assert!(!out.success, "{bad}");
        let first = out.stderr.lines().next().unwrap_or("");
        assert_eq!(
            first,
            format!(
                "error: invalid value '{bad}' for '--speed <SPEED>': a replay speed is a number above 0 (1 = agy's recorded pace, 2 = twice as fast), not {bad:?}"
            )
        );
        assert!(!out.stderr.contains("FAKE_AGY_SPEED"), "{}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
}

#[test]
fn demo_names_the_recordings_there_are() {
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_agy-bridge")),
        &["demo", "--recording", "nosuch"],
    );
    assert!(!out.success);
    let names = agy_corpus::recording::list(&agy_corpus::recording::bundled_dir()).expect("list");
    assert!(names.iter().any(|n| n == "tools"), "{names:?}");
    assert_eq!(
        out.stderr,
        format!(
            "agy-bridge: error: no recording named \"nosuch\"; the bundled recordings are: {} (or give the path of a .jsonl recording)\n",
            names.join(", ")
        )
    );
}

#[test]
fn demo_output_speaks_of_meaning_not_field_numbers() {
    let developer_words = regex::Regex::new(r"\bfield \d+|\btype-\d+|\(\d+\.\d+\)").expect("regex");
    for recording in [
        "thinking",
        "quota-error",
        "orchestration",
        "subagent",
        "tools",
    ] {
        let out = run(
            Command::new(env!("CARGO_BIN_EXE_agy-bridge")),
            &["demo", "--speed", "100", "--recording", recording],
        );
        let both = format!("{}{}", out.stdout, out.stderr);
        assert!(
            both.contains("no real agy, no network"),
            "{recording}: {both}"
        );
        assert!(
            !developer_words.is_match(&both),
            "{recording} shows field numbers: {both}"
        );
    }
}

/// The guardian reads what to run from its stdin: a damaged command is
/// named and runs nothing; no command at all (the bridge ended first) is a
/// quiet exit.
#[test]
fn the_guardian_names_a_damaged_launch_and_runs_nothing() {
    let guardian = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_agy-bridge"));
        c.arg(agy_bridge::testing::process::GUARD_ARG);
        c
    };
    let damaged = feed(guardian(), b"x\x00\x00\x00\x00.");
    assert!(!damaged.success);
    assert_eq!(
        damaged.stderr.trim(),
        "agy-bridge guardian: cannot read what to run: unknown item tag 0x78"
    );
    let cut = feed(guardian(), b"p\x09\x00\x00\x00/bin/t");
    assert!(!cut.success);
    assert!(
        cut.stderr
            .starts_with("agy-bridge guardian: cannot read what to run: "),
        "{}",
        cut.stderr
    );
    let nothing = feed(guardian(), b"");
    assert!(nothing.success, "{}", nothing.stderr);
    assert_eq!((nothing.stdout.as_str(), nothing.stderr.as_str()), ("", ""));
}
