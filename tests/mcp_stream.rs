//! pi's tools for agy, as `agy-bridge stream` transcripts: fake-agy (an MCP
//! client like agy) calls pi's tool over the bridge's MCP server; the stream
//! ends the message with pi `toolCall`s (`toolUse`), the test answers as the
//! extension would, and the rest of agy's turn follows as a new message.
//! Every path answers every parked call and leaves no port or config behind.

mod common;

use agy_bridge::pi::provider::stream::PiStream;
use agy_bridge::pi::testing::{relay, Control, EventMapper, ToolCall, ToolLines, ToolOutcome};
use agy_bridge::runner::RunEvent;
use agy_corpus::recording;
use agy_format::steps;
use agy_synth as synth;
use common::bridge;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

const PROBE: &str = "pi_probe";

/// A type-38 step: (idx, status, result).
type McpStep = (i64, String, Option<String>);

#[test]
fn mcp_recordings_match_their_builder() {
    let dir = recording::bundled_dir();
    let update = std::env::var_os("AGY_BRIDGE_UPDATE_CORPUS").is_some();
    for (name, rec) in synth::mcp::corpus(agy_bridge::pi::testing::SERVER_NAME) {
        let path = dir.join(format!("{name}.jsonl"));
        let want = rec.to_jsonl();
        if update {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
            std::fs::write(&path, &want).expect("write");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{name} is out of date: AGY_BRIDGE_UPDATE_CORPUS=1 cargo test --test mcp_stream"
        );
        assert_eq!(
            recording::Recording::parse(&have).expect("parses"),
            rec,
            "{name}"
        );
    }
}

/// A live `agy-bridge stream` child: its stdout lines arrive on a channel.
struct Turn {
    home: tempfile::TempDir,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: std_mpsc::Receiver<Value>,
    argv_log: PathBuf,
    seen: Vec<Value>,
}

fn tools() -> Value {
    json!([
        {"name": PROBE, "description": "A value only pi knows", "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}},
        {"name": "read", "description": "pi's read", "parameters": {"type": "object"}},
        {"name": "AskAntigravity", "description": "delegate", "parameters": {"type": "object"}},
    ])
}

impl Turn {
    fn start(recording: &str, envs: &[(&str, &str)]) -> Turn {
        let home = tempfile::tempdir().expect("tmp");
        let argv_log = home.path().join("argv.log");
        let mut cmd = bridge("stream", home.path(), recording, "8");
        cmd.env("FAKE_AGY_ARGV_LOG", &argv_log)
            .env_remove("AGY_PI_TOOLS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let request = json!({
            "model": "gemini-3.7-flash",
            "sessionId": "mcp-test",
            "cwd": home.path(),
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Ask pi"}]}],
            "tools": tools(),
        });
        writeln!(stdin, "{request}").expect("request");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std_mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Turn {
            home,
            child,
            stdin: Some(stdin),
            lines,
            argv_log,
            seen: Vec::new(),
        }
    }

    /// The bridge's next stdout line (within 60 s), kept in `seen`.
    fn next_line(&mut self) -> Value {
        let v = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line within 60 s");
        self.seen.push(v.clone());
        v
    }

    /// Lines up to and including the next terminal event (`done`/`error`).
    fn next_message(&mut self) -> Vec<Value> {
        let mut msg = Vec::new();
        loop {
            let v = self.next_line();
            let end = matches!(v["type"].as_str(), Some("done") | Some("error"));
            msg.push(v);
            if end {
                return msg;
            }
        }
    }

    /// Lines up to and including the first that `stop_at` accepts (it
    /// must come before the message ends).
    fn lines_until(&mut self, stop_at: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut lines = Vec::new();
        loop {
            let v = self.next_line();
            assert!(
                !matches!(v["type"].as_str(), Some("done") | Some("error")),
                "the message ended first: {lines:?} {v}"
            );
            let found = stop_at(&v);
            lines.push(v);
            if found {
                return lines;
            }
        }
    }

    fn send(&mut self, line: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write control line");
    }

    /// The bridge's private `--add-dir` (not the workspace).
    fn private_dir(&self) -> PathBuf {
        let log = std::fs::read_to_string(&self.argv_log).expect("argv log");
        let argv: Vec<String> =
            serde_json::from_str(log.lines().last().expect("a run")).expect("argv");
        let dirs: Vec<&String> = argv
            .windows(2)
            .filter(|w| w[0] == "--add-dir")
            .map(|w| &w[1])
            .collect();
        assert_eq!(dirs.len(), 2, "workspace and the private dir: {argv:?}");
        PathBuf::from(dirs[1])
    }

    /// The MCP server's address, from the private config agy reads.
    fn server_addr(&self) -> String {
        let config = std::fs::read_to_string(self.private_dir().join(".agents/mcp_config.json"))
            .expect("config");
        let v: Value = serde_json::from_str(&config).expect("json");
        let url = v["mcpServers"]["pi"]["serverUrl"]
            .as_str()
            .expect("url")
            .to_string();
        url.trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    /// Wait for the child to exit (stdin closed first); the rest of stdout.
    fn finish(mut self) -> (Vec<Value>, tempfile::TempDir) {
        self.stdin.take();
        let status = self.child.wait().expect("wait");
        let _ = status;
        let mut rest = Vec::new();
        while let Ok(v) = self.lines.recv_timeout(Duration::from_secs(10)) {
            rest.push(v);
        }
        (rest, self.home)
    }

    /// The type-38 steps of agy's conversation (result strings).
    fn mcp_steps(home: &Path) -> Vec<McpStep> {
        let dir = home.join(".gemini/antigravity-cli/conversations");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("conversations").flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("db") {
                continue;
            }
            let conn = agy_format::database::open_read_only(&path).expect("open");
            for row in agy_format::database::read_all(&conn, &path).expect("rows") {
                let step = steps::decode(&row);
                if let Some(steps::Body::McpTool(m)) = &step.body {
                    out.push((step.idx, step.status.label().to_string(), m.result.clone()));
                }
            }
        }
        out
    }
}

fn types(msg: &[Value]) -> Vec<String> {
    msg.iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn tool_calls(msg: &[Value]) -> Vec<Value> {
    msg.iter()
        .filter(|e| e["type"] == "toolcall_end")
        .map(|e| e["toolCall"].clone())
        .collect()
}

fn port_closed(addr: &str) -> bool {
    std::net::TcpStream::connect(addr).is_err()
}

#[test]
fn a_call_becomes_tool_use_and_pis_result_reaches_agy() {
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    let first = turn.next_message();
    let t = types(&first);
    assert_eq!(t.first().map(String::as_str), Some("start"));
    assert_eq!(
        &t[t.len() - 4..],
        ["toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    );
    assert_eq!(first.last().expect("done")["reason"], "toolUse");
    let calls = tool_calls(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["type"], "toolCall");
    assert_eq!(calls[0]["name"], PROBE);
    assert_eq!(
        calls[0]["arguments"],
        json!({"question": "what is the probe value?"})
    );
    let start = first
        .iter()
        .find(|e| e["type"] == "toolcall_start")
        .expect("start");
    assert_eq!(
        (start["id"].clone(), start["toolName"].clone()),
        (calls[0]["id"].clone(), json!(PROBE))
    );
    let delta = first
        .iter()
        .find(|e| e["type"] == "toolcall_delta")
        .expect("delta");
    assert_eq!(
        serde_json::from_str::<Value>(delta["delta"].as_str().unwrap_or("")).ok(),
        Some(calls[0]["arguments"].clone())
    );
    // Only the tools agy lacks are offered.
    let addr = turn.server_addr();
    let private = turn.private_dir();
    let id = calls[0]["id"].as_str().expect("id").to_string();
    turn.send(json!({"type": "tool_result", "toolCallId": id, "content": [{"type": "text", "text": "probe=7f3a-only-pi-knows"}], "isError": false}));
    let second = turn.next_message();
    assert_eq!(types(&second).first().map(String::as_str), Some("start"));
    assert_eq!(second.last().expect("done")["reason"], "stop");
    let text: String = second
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(text.contains("pi ran pi_probe"), "{text}");
    let all = turn.seen.clone();
    assert!(
        !common::pi_thinking(&all).contains("mcp:pi/"),
        "agy's own step for the call is not repeated: {}",
        common::pi_thinking(&all)
    );
    let (rest, home) = turn.finish();
    assert!(
        rest.is_empty(),
        "nothing after the terminal event: {rest:?}"
    );
    let steps = Turn::mcp_steps(home.path());
    assert_eq!(
        steps,
        [(
            3,
            "done".to_string(),
            Some("probe=7f3a-only-pi-knows".to_string())
        )]
    );
    assert!(
        !private.exists(),
        "the private MCP config dir is removed with the turn"
    );
    assert!(port_closed(&addr), "the MCP port is closed with the turn");
}

#[test]
fn calls_made_together_go_out_in_one_message() {
    let mut turn = Turn::start("mcp/pi-tools-parallel", &[("AGY_PI_TOOL_BATCH_MS", "300")]);
    let first = turn.next_message();
    let calls = tool_calls(&first);
    let mut questions: Vec<&str> = calls
        .iter()
        .filter_map(|c| c["arguments"]["question"].as_str())
        .collect();
    questions.sort();
    assert_eq!(questions, ["first", "second"]);
    let indexes: Vec<u64> = first
        .iter()
        .filter(|e| e["type"] == "toolcall_end")
        .filter_map(|e| e["contentIndex"].as_u64())
        .collect();
    assert_eq!(indexes.len(), 2);
    assert!(indexes[1] == indexes[0] + 1);
    for c in &calls {
        let q = c["arguments"]["question"].as_str().unwrap_or("");
        turn.send(json!({"type": "tool_result", "toolCallId": c["id"], "content": [{"type": "text", "text": format!("answer to {q}")}], "isError": false}));
    }
    let second = turn.next_message();
    assert_eq!(second.last().expect("done")["reason"], "stop");
    let (_, home) = turn.finish();
    let steps = Turn::mcp_steps(home.path());
    assert_eq!(
        steps,
        [
            (3, "done".to_string(), Some("answer to first".to_string())),
            (4, "done".to_string(), Some("answer to second".to_string()))
        ]
    );
}

/// A parked call ends without pi's result: the child starts a new message
/// that ends the turn, exits, and leaves no port or directory behind.
fn ended_while_parked(control: Option<Value>) -> Vec<Value> {
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    let first = turn.next_message();
    assert_eq!(
        first.last().expect("done")["reason"],
        "toolUse",
        "{first:?}"
    );
    let (addr, private) = (turn.server_addr(), turn.private_dir());
    match control {
        Some(line) => turn.send(line),
        None => {
            turn.stdin.take();
        }
    }
    let second = turn.next_message();
    let (rest, _home) = turn.finish();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(!private.exists() && port_closed(&addr));
    second
}

#[test]
fn abort_while_the_tool_runs_ends_the_turn() {
    let second = ended_while_parked(Some(json!({"type": "abort"})));
    assert_eq!(types(&second), ["start", "error"]);
    assert_eq!(second[1]["reason"], "aborted");
}

#[test]
fn a_release_answers_the_call_and_ends_the_turn() {
    let second = ended_while_parked(Some(
        json!({"type": "release", "reason": "the pi session ended"}),
    ));
    assert_eq!(types(&second), ["start", "error"]);
    assert_eq!(second[1]["reason"], "aborted");
    assert_eq!(
        second[1]["errorMessage"],
        "agy-bridge: the pi session ended"
    );
}

/// ARCHITECTURE's rule for `release` (the extension's `discard` counts on
/// it): a released turn still ends with exactly one final event, `error`
/// (or `done` with reason `stop` had it ended first); a `done` with reason
/// `toolUse` is never final, and nothing follows the final event. Here the
/// release comes while agy still works, before it calls pi's tool.
#[test]
fn a_turn_released_before_agys_call_ends_with_one_final_event() {
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    turn.send(json!({"type": "release", "reason": "pi moved on"}));
    let mut events = Vec::new();
    loop {
        let msg = turn.next_message();
        let last = msg.last().expect("end").clone();
        events.extend(msg);
        if last["type"] == "error" || last["reason"] == "stop" {
            break;
        }
        assert_eq!(last["reason"], "toolUse", "{events:?}");
    }
    let finals = events
        .iter()
        .filter(|e| e["type"] == "error" || (e["type"] == "done" && e["reason"] == "stop"))
        .count();
    assert_eq!(finals, 1, "{events:?}");
    let last = events.last().expect("final");
    assert_eq!(
        (last["type"].as_str(), last["errorMessage"].as_str()),
        (Some("error"), Some("agy-bridge: pi moved on")),
        "{events:?}"
    );
    let (rest, _home) = turn.finish();
    assert!(rest.is_empty(), "nothing after the final event: {rest:?}");
}

#[test]
fn pi_going_away_ends_the_turn() {
    let second = ended_while_parked(None);
    assert_eq!(types(&second), ["start", "error"]);
    assert!(second[1]["errorMessage"]
        .as_str()
        .unwrap_or("")
        .contains("without a result"));
}

/// The one call of a `toolUse` message: its id and arguments.
fn only_call(msg: &[Value]) -> (String, Value) {
    assert_eq!(msg.last().expect("end")["reason"], "toolUse", "{msg:?}");
    let calls = tool_calls(msg);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let id = calls[0]["id"].as_str().expect("id").to_string();
    (id, calls[0]["arguments"].clone())
}

fn result_line(id: &str, content: Value) -> Value {
    json!({"type": "tool_result", "toolCallId": id, "content": content, "isError": false})
}

fn text(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

#[test]
fn a_result_for_another_call_is_refused_and_the_call_still_waits() {
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    let (id, _) = only_call(&turn.next_message());
    turn.send(result_line("call_from_elsewhere", text("forged")));
    turn.send(result_line(&id, text("probe=real")));
    let second = turn.next_message();
    assert_eq!(second.last().expect("end")["reason"], "stop", "{second:?}");
    let thinking = common::pi_thinking(&second);
    assert!(
        thinking.contains("\"call_from_elsewhere\", which is not waiting")
            && thinking.contains(&id),
        "pi is told, naming both ids: {thinking}"
    );
    let (_, home) = turn.finish();
    assert_eq!(
        Turn::mcp_steps(home.path()),
        [(3, "done".to_string(), Some("probe=real".to_string()))]
    );
}

#[test]
fn a_call_answered_twice_leaves_the_next_call_its_own_result() {
    // Item 14: the second answer of the first call used to wait in line and
    // then stop the second call's wait, ending the turn.
    let mut turn = Turn::start("mcp/pi-tools-sequential", &[]);
    let (first, args) = only_call(&turn.next_message());
    assert_eq!(args, json!({"question": "first"}));
    turn.send(result_line(&first, text("answer to first")));
    turn.send(result_line(&first, text("answer to first, again")));
    let middle = turn.next_message();
    let (second, args) = only_call(&middle);
    assert_eq!(args, json!({"question": "second"}));
    turn.send(result_line(&second, text("answer to second")));
    let last = turn.next_message();
    assert_eq!(last.last().expect("end")["reason"], "stop", "{last:?}");
    let all = common::pi_thinking(&turn.seen);
    assert!(
        all.contains(&format!(
            "second result for tool call \"{first}\", which was already answered"
        )),
        "pi is told about the repeat: {all}"
    );
    let (_, home) = turn.finish();
    assert_eq!(
        Turn::mcp_steps(home.path()),
        [
            (3, "done".to_string(), Some("answer to first".to_string())),
            (5, "done".to_string(), Some("answer to second".to_string()))
        ]
    );
}

#[test]
fn a_result_before_any_call_never_answers_a_later_one() {
    // Item 14: a line that came while nothing was parked was queued, then
    // taken as the answer (or a mismatch) of the next call.
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    turn.send(result_line("call_never_given", text("forged")));
    let first = turn.next_message();
    let (id, _) = only_call(&first);
    turn.send(result_line(&id, text("probe=real")));
    let second = turn.next_message();
    assert_eq!(second.last().expect("end")["reason"], "stop", "{second:?}");
    let all = common::pi_thinking(&turn.seen);
    assert!(
        all.contains("\"call_never_given\", which is not waiting (waiting: none)"),
        "{all}"
    );
    let (_, home) = turn.finish();
    assert_eq!(
        Turn::mcp_steps(home.path()),
        [(3, "done".to_string(), Some("probe=real".to_string()))]
    );
}

#[test]
fn a_plain_string_result_is_text_and_other_shapes_are_refused() {
    // Item 17: a string `content` became an empty result.
    let mut turn = Turn::start("mcp/pi-tools-sequential", &[]);
    let (first, _) = only_call(&turn.next_message());
    turn.send(result_line(&first, json!("answer as a plain string")));
    let (second, _) = only_call(&turn.next_message());
    turn.send(result_line(&second, json!({"text": "not a list"})));
    let last = turn.next_message();
    assert_eq!(last.last().expect("end")["reason"], "stop", "{last:?}");
    let thinking = common::pi_thinking(&last);
    assert!(
        thinking.contains(&format!("pi's result for tool call \"{second}\""))
            && thinking
                .contains("its content is an object, not a list of content blocks or a string"),
        "{thinking}"
    );
    let (_, home) = turn.finish();
    let steps = Turn::mcp_steps(home.path());
    assert_eq!(
        steps[0],
        (
            3,
            "done".to_string(),
            Some("answer as a plain string".to_string())
        )
    );
    let refused = steps[1].2.as_deref().unwrap_or("");
    assert!(
        steps[1].0 == 5
            && refused.starts_with("Error: ")
            && refused.contains("its content is an object"),
        "agy is told the call failed and why: {steps:?}"
    );
}

/// How many descriptors `pid` has open.
fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// `pid`'s CPU time so far (user + system, all threads), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    // Fields after the command's closing parenthesis: state is the first,
    // utime the 12th, stime the 13th (proc(5) numbers them 3, 14 and 15).
    let fields = common::stat_fields(pid).expect("stat");
    let ticks: u64 = fields
        .iter()
        .skip(11)
        .take(2)
        .map(|f| f.parse::<u64>().expect("a tick count"))
        .sum();
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1);
    ticks as f64 / per_second as f64
}

/// Set `pid`'s descriptor limit (soft and hard stay as given); the old one.
fn set_fd_limit(pid: u32, soft: u64) -> nix::libc::rlimit {
    let mut old = nix::libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads `new` and writes `old`, both live locals.
    let got = unsafe {
        nix::libc::prlimit(
            pid as i32,
            nix::libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut old,
        )
    };
    assert_eq!(got, 0, "read the bridge's descriptor limit");
    let new = nix::libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    let set = unsafe {
        nix::libc::prlimit(
            pid as i32,
            nix::libc::RLIMIT_NOFILE,
            &new,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "lower the bridge's descriptor limit");
    old
}

#[test]
fn accept_errors_back_off_when_descriptors_run_out() {
    // Item 8: with its descriptors used up, the bridge's `accept` fails
    // (EMFILE) while connections wait in the backlog; retried at once, it
    // would spin a core. The bridge's limit is lowered to a few more than it
    // holds while a call is parked, then far more sockets than that connect.
    let mut turn = Turn::start("mcp/pi-tool", &[]);
    let (id, _) = only_call(&turn.next_message());
    let pid = turn.child.id();
    let addr = turn.server_addr();
    let limit = open_fds(pid) + 6;
    set_fd_limit(pid, limit);
    let flood: Vec<std::net::TcpStream> = (0..64)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect (the backlog takes it)"))
        .collect();
    let full = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        open_fds(pid) >= limit
    });
    assert!(
        full,
        "the bridge took sockets up to its limit ({} of {limit})",
        open_fds(pid)
    );
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_seconds(pid) - before;
    eprintln!("the bridge used {used:.3} s of CPU in 3 s with accept failing");
    // A busy retry burns most of a core (well over a second here even on a
    // crowded machine); backing off costs a few milliseconds.
    assert!(
        used < 1.0,
        "the bridge used {used:.2} s of CPU in 3 s with accept failing"
    );
    drop(flood);
    turn.send(result_line(&id, text("probe=after the flood")));
    let second = turn.next_message();
    assert_eq!(second.last().expect("end")["reason"], "stop", "{second:?}");
    let (_, home) = turn.finish();
    assert_eq!(
        Turn::mcp_steps(home.path()),
        [(
            3,
            "done".to_string(),
            Some("probe=after the flood".to_string())
        )]
    );
}

#[test]
fn agy_cutting_a_call_off_is_reported() {
    // fake-agy holds after writing the cut-off call's step until the FIFO
    // is written: the late result is sent, and seen answered, while agy is
    // still running, whatever the machine's load.
    let hold = tempfile::tempdir().expect("tmp");
    let fifo = hold.path().join("hold");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let fifo_env = fifo.to_string_lossy().into_owned();
    let mut turn = Turn::start(
        "mcp/pi-tool",
        &[
            ("FAKE_AGY_MCP_CUTOFF_MS", "200"),
            ("FAKE_AGY_MCP_HOLD", &fifo_env),
        ],
    );
    let first = turn.next_message();
    let id = tool_calls(&first)[0]["id"].clone();
    // Wait until agy has given up on the call (its step is DONE; fake-agy
    // then holds).
    let home = turn.home.path().to_path_buf();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !Turn::mcp_steps(&home).iter().any(|s| s.1 == "done") {
        assert!(
            std::time::Instant::now() < deadline,
            "fake-agy never cut the call off"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    turn.send(json!({"type": "tool_result", "toolCallId": id, "content": [{"type": "text", "text": "too late"}], "isError": false}));
    let note = "agy stopped waiting for pi's tool pi_probe";
    let mut second = turn.lines_until(|v| v.to_string().contains(note));
    // Let agy go on; its turn ends.
    std::fs::write(&fifo, b"go").expect("release fake-agy");
    second.extend(turn.next_message());
    assert_eq!(second.last().expect("end")["reason"], "stop");
    assert!(
        common::pi_thinking(&second).contains(note),
        "{}",
        common::pi_thinking(&second)
    );
    let (_, home) = turn.finish();
    let steps = Turn::mcp_steps(home.path());
    assert!(
        steps[0].2.as_deref().unwrap_or("").contains("timed out"),
        "{steps:?}"
    );
}

#[test]
fn no_tools_when_turned_off() {
    let mut turn = Turn::start("hello", &[("AGY_PI_TOOLS", "off")]);
    let msg = turn.next_message();
    assert_eq!(msg.last().expect("done")["reason"], "stop");
    let log = std::fs::read_to_string(&turn.argv_log).expect("argv log");
    assert_eq!(
        log.matches("--add-dir").count(),
        1,
        "only the workspace: {log}"
    );
    turn.finish();
}

#[test]
fn a_call_of_a_server_agy_lacks_is_one_line_and_its_failure_one_more() {
    // pi's tools off: agy calls the server "pi", which it does not have.
    let mut turn = Turn::start("mcp/pi-tool", &[("AGY_PI_TOOLS", "off")]);
    let msg = turn.next_message();
    assert_eq!(msg.last().expect("done")["reason"], "stop");
    let thinking = common::pi_thinking(&msg);
    assert_eq!(
        thinking.matches("[agy tool").count(),
        2,
        "one call line, one failure line: {thinking}"
    );
    assert!(
        thinking.contains("\n[agy tool: mcp pi/pi_probe] what is the probe value?\n"),
        "{thinking}"
    );
    assert!(
        thinking.contains(
            "\n[agy tool failed: mcp pi/pi_probe: MCP server \"pi\" is not configured]\n"
        ),
        "{thinking}"
    );
    turn.finish();
}

// ---------------------------------------------------------------------------
// The relay alone, with events the runner would send (the watchdog).
// ---------------------------------------------------------------------------

/// A writer whose lines go to a channel (the test reads pi's side live).
struct Lines(tokio::sync::mpsc::UnboundedSender<Value>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for line in String::from_utf8_lossy(buf)
            .lines()
            .filter(|l| !l.is_empty())
        {
            let _ = self
                .0
                .send(serde_json::from_str(line).unwrap_or(Value::Null));
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_watchdog_answers_a_parked_call_and_ends_the_turn() {
    let (ev_tx, mut events) = agy_bridge::runner::event_channel();
    let (call_tx, calls) = tokio::sync::mpsc::channel::<ToolCall>(1);
    let (_ctl_tx, control) = tokio::sync::mpsc::channel::<Control>(1);
    let (out_tx, mut out) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let mut lines = ToolLines::new(calls, control, Duration::ZERO);
    let cancel = tokio_util::sync::CancellationToken::new();
    let (call, answer) = ToolCall::new(PROBE.into(), json!({}));
    let relay_task = tokio::spawn(async move {
        let mut pi = PiStream::new(Lines(out_tx));
        pi.start();
        let mut mapper = EventMapper::new(Path::new("/tmp"));
        relay(&mut events, Some(&mut lines), &mut pi, &mut mapper, &cancel).await;
        pi.fail(false, "agy-bridge: the turn timed out");
    });
    call_tx.send(call).await.expect("send call");
    let mut first = Vec::new();
    while first
        .last()
        .map(|e: &Value| e["type"] != "done")
        .unwrap_or(true)
    {
        first.push(out.recv().await.expect("line"));
    }
    assert_eq!(first.last().expect("done")["reason"], "toolUse");
    ev_tx.send(RunEvent::TimedOut).await.expect("timed out");
    let answered: ToolOutcome = answer.await.expect("the parked call is answered");
    assert!(answered.is_error);
    assert!(answered.content[0]["text"]
        .as_str()
        .unwrap_or("")
        .contains("timed out"));
    drop(ev_tx);
    relay_task.await.expect("relay ends");
    let mut rest = Vec::new();
    while let Ok(v) = out.try_recv() {
        rest.push(v);
    }
    assert_eq!(types(&rest), ["start", "error"]);
}
