//! Every pi turn after the first resumes an agy conversation. When agy no
//! longer has it, agy does not fail: it warns on stderr and begins a new one
//! (docs/agy-format.md, "Resume"). These tests hold the bridge to what the
//! user needs then: the turn follows the new conversation, the session is
//! rebound to it, the user is told once, and the next prompt carries pi's
//! record of the earlier turns, agy's own answers included.

mod common;

use common::bridge;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const HELLO_ANSWER: &str = "Hello! I'm agy, running in print mode.";

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().expect("tmp"),
        }
    }

    fn sessions(&self) -> Value {
        common::sessions_json(self.home.path())
    }

    fn argv_log(&self) -> PathBuf {
        self.home.path().join("argv.jsonl")
    }

    /// The prompt agy read on its stdin in the last turn.
    fn last_prompt(&self) -> String {
        common::stdin_prompts(&self.home.path().join("stdin.jsonl"))
            .pop()
            .expect("a prompt on agy's stdin")
    }

    /// One `stream` turn; `env` adds variables. Returns pi's events.
    fn turn(&self, recording: &str, request: &str, env: &[(&str, &str)]) -> Vec<Value> {
        let mut cmd = bridge("stream", self.home.path(), recording, "8");
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("FAKE_AGY_ARGV_LOG", self.argv_log())
            .env("FAKE_AGY_STDIN_LOG", self.home.path().join("stdin.jsonl"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn");
        let out = common::stream_output(child, request);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The last print-mode invocation's arguments.
    fn last_print_argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.argv_log())
            .expect("argv log")
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
            .find(|a| a.iter().any(|x| x == "-p"))
            .expect("a print invocation")
    }
}

fn request(prompt: &str, history: Vec<Value>) -> String {
    let mut messages = history;
    messages.push(json!({"role": "user", "content": prompt}));
    json!({"model": "gemini-3.7-flash", "sessionId": "s1", "cwd": "/tmp", "messages": messages})
        .to_string()
}

fn flag(argv: &[String], name: &str) -> Option<String> {
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

fn db(home: &Path, id: &str) -> PathBuf {
    home.join(format!(".gemini/antigravity-cli/conversations/{id}.db"))
}

/// The whole path, with `bind` as AGY_BIND (stream-json: agy's init line
/// tells; discovery: its stderr warning, then the new database).
fn a_forgotten_conversation_is_replaced_and_the_next_turn_gets_the_context(bind: &str) {
    let env = Env::new();
    let first = env.turn(
        "hello",
        &request("Say hello", vec![]),
        &[("AGY_BIND", bind)],
    );
    assert_eq!(first.last().expect("last")["type"], "done");
    let old = env.sessions()["sid:s1"]["conversationId"]
        .as_str()
        .expect("bound")
        .to_string();

    let history = vec![
        json!({"role": "user", "content": "Say hello"}),
        json!({"role": "assistant", "provider": "antigravity", "content": [{"type": "text", "text": HELLO_ANSWER}]}),
    ];
    let second = env.turn(
        "hello",
        &request("What did you say?", history.clone()),
        &[("AGY_BIND", bind), ("FAKE_AGY_FORGET_CONVERSATIONS", "1")],
    );
    assert_eq!(second.last().expect("last")["type"], "done", "{second:?}");
    assert_eq!(
        flag(&env.last_print_argv(), "--conversation"),
        Some(old.clone())
    );
    let said = common::pi_thinking(&second);
    let notice = format!("agy did not have conversation {old}");
    assert_eq!(said.matches(&notice).count(), 1, "told once: {said}");
    assert!(said.contains("pi's record of the earlier turns goes to agy with your next message"));
    let text: String = second
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(
        text.starts_with("Hello! I'm agy"),
        "the new conversation's answer: {text}"
    );
    assert!(!said.contains("held no answer text"), "{said}");

    let entry = env.sessions()["sid:s1"].clone();
    let new = entry["conversationId"]
        .as_str()
        .expect("rebound")
        .to_string();
    assert_ne!(new, old, "{entry}");
    assert!(db(env.home.path(), &new).is_file());
    assert_eq!(entry["agyContextLost"], true, "{entry}");
    assert_eq!(entry["lastStepIdx"], 2, "the new conversation's own steps");

    // The next turn resumes the new conversation, with pi's whole record,
    // agy's own earlier answer included.
    let mut history = history;
    history.push(json!({"role": "user", "content": "What did you say?"}));
    history.push(json!({"role": "assistant", "provider": "antigravity", "content": [{"type": "text", "text": "I said hello."}]}));
    let third = env.turn(
        "resume",
        &request("Any suggestions?", history),
        &[("AGY_BIND", bind)],
    );
    assert_eq!(third.last().expect("last")["type"], "done", "{third:?}");
    let argv = env.last_print_argv();
    assert_eq!(flag(&argv, "--conversation"), Some(new.clone()));
    if bind == "discovery" {
        // A turn that does not read agy's stream-json sends the prompt in a
        // private file, gone with the turn: only its note is in argv.
        let note = flag(&argv, "-p").unwrap_or_default();
        assert!(note.contains("user-message.md"), "{note}");
        return;
    }
    assert_eq!(flag(&argv, "-p").as_deref(), Some(""), "no prompt in argv");
    let prompt = env.last_prompt();
    assert!(
        prompt.contains("was not available to Antigravity"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!("[your earlier answer]\n{HELLO_ANSWER}")),
        "{prompt}"
    );
    assert!(
        prompt.contains("[earlier user message]\nSay hello"),
        "{prompt}"
    );
    assert!(prompt.ends_with("Any suggestions?"), "{prompt}");
    let entry = env.sessions()["sid:s1"].clone();
    assert_eq!(entry["conversationId"].as_str(), Some(new.as_str()));
    assert!(entry.get("agyContextLost").is_none(), "cleared: {entry}");
}

#[test]
fn init_line_rebinds_a_forgotten_conversation() {
    a_forgotten_conversation_is_replaced_and_the_next_turn_gets_the_context("stream-json");
}

#[test]
fn stderr_warning_and_discovery_rebind_a_forgotten_conversation() {
    a_forgotten_conversation_is_replaced_and_the_next_turn_gets_the_context("discovery");
}

/// `run --conversation` with an id agy does not have: a line in text mode,
/// an event and a field with `--json`, and the new id to continue with.
#[test]
fn run_names_the_new_conversation_in_words_and_in_json() {
    const ASKED: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let home = tempfile::tempdir().expect("home");
    let out = bridge("run", home.path(), "hello", "8")
        .args(["--conversation", ASKED, "--json", "Say hello"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let replaced: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "conversation_replaced")
        .collect();
    assert_eq!(replaced.len(), 1, "{lines:?}");
    assert_eq!(replaced[0]["requested"], ASKED);
    let result = &lines.last().expect("result")["result"];
    assert_eq!(result["lost_conversation"], ASKED);
    let new = result["conversation_id"].as_str().expect("id");
    assert_eq!(replaced[0]["conversation_id"], new);
    assert_ne!(new, ASKED);

    let text = bridge("run", home.path(), "hello", "8")
        .args(["--conversation", ASKED, "Say hello"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains(&format!("agy did not have conversation {ASKED}"))
            && stdout.contains("continue it with --conversation "),
        "{stdout}"
    );
}

/// `run --json` on a recording: the final result object.
fn run_json(recording: &str, prompt: &str) -> Value {
    let home = tempfile::tempdir().expect("home");
    let out = bridge("run", home.path(), recording, "8")
        .args(["--json", prompt])
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("a result line");
    serde_json::from_str::<Value>(last).expect("json")["result"].clone()
}

/// A resumed conversation's `result.usage` counts every turn: the turn's own
/// usage is its steps', and the cumulative figure is reported as such.
#[test]
fn a_resumed_turns_usage_is_its_own_and_the_cumulative_is_named() {
    let result = run_json("outcomes/resume-cumulative-1.1.9", "Any bug?");
    let usage = &result["usage"];
    let agy_total = &result["agy_result"]["usage"];
    assert_eq!(&usage["conversation_total"], agy_total, "{result}");
    assert_eq!(result["agy_result"]["num_turns"], 3, "{result}");
    let turn = usage["turn"]["input_tokens"].as_u64().expect("turn");
    let whole = agy_total["input_tokens"].as_u64().expect("total");
    assert!(
        turn > 0 && turn < whole,
        "turn {turn}, conversation {whole}"
    );
}

/// 1.1.x's checkpoint side call comes last but is never pi's context.
#[test]
fn a_checkpoint_is_counted_but_never_the_context() {
    let result = run_json(
        "outcomes/checkpoint-1.1.9",
        "Review the staged change to calc.py and reply with JSON findings.",
    );
    let usage = &result["usage"];
    // A new conversation: the turn's sum is agy's result, checkpoint included.
    assert_eq!(usage["turn"], result["agy_result"]["usage"], "{result}");
    let last = usage["last_call"]["input_tokens"].as_u64().expect("last");
    let turn = usage["turn"]["input_tokens"].as_u64().expect("turn");
    assert!(
        last > 1000,
        "the answer call, not the checkpoint's: {usage}"
    );
    assert!(turn > last, "{usage}");

    // And in pi: `done` carries the answer call's context.
    let env = Env::new();
    // This recording's agy lists the 3.6 models.
    let req = json!({"model": "gemini-3.6-flash", "sessionId": "s1", "cwd": "/tmp",
        "messages": [{"role": "user", "content": "Review the staged change"}]});
    let events = env.turn("outcomes/checkpoint-1.1.9", &req.to_string(), &[]);
    let done = events.last().expect("done");
    assert_eq!(done["type"], "done", "{events:?}");
    assert_eq!(done["usage"]["input"], last, "{done}");
}

/// agy before 1.2 does not load MCP servers from `--add-dir`, so pi's tools
/// cannot reach it: the pi session is told once, and agy is not given a
/// configuration it would ignore.
#[test]
fn pi_tools_on_an_agy_too_old_for_them_are_named_once() {
    let env = Env::new();
    let req = |prompt: &str| {
        json!({"model": "gemini-3.6-flash", "sessionId": "s1", "cwd": "/tmp",
            "messages": [{"role": "user", "content": prompt}],
            "tools": [{"name": "memory_search", "description": "pi's memory", "parameters": {"type": "object"}}]})
        .to_string()
    };
    let notice = "pi's tools are not offered to agy 1.1.9";
    let first = env.turn("outcomes/checkpoint-1.1.9", &req("Review it"), &[]);
    assert_eq!(first.last().expect("last")["type"], "done", "{first:?}");
    assert_eq!(common::pi_thinking(&first).matches(notice).count(), 1);
    let argv = env.last_print_argv();
    let add_dirs: Vec<&String> = argv
        .iter()
        .zip(argv.iter().skip(1))
        .filter(|(flag, _)| *flag == "--add-dir")
        .map(|(_, dir)| dir)
        .collect();
    // The workspace, and the private directory of the prompt's file (an agy
    // this old cannot read it on stdin); no configuration of pi's tools.
    assert_eq!(add_dirs.len(), 2, "{argv:?}");
    assert_eq!(add_dirs[0], "/tmp", "{argv:?}");
    assert!(add_dirs[1].contains("agy-bridge-prompt-"), "{argv:?}");
    let second = env.turn("outcomes/checkpoint-1.1.9", &req("And now?"), &[]);
    assert_eq!(second.last().expect("last")["type"], "done", "{second:?}");
    assert!(!common::pi_thinking(&second).contains(notice), "said once");
}

/// A binding whose save failed keeps an older cursor: the next turn starts
/// from what the database holds, and never replays the previous answer.
#[test]
fn a_stale_cursor_does_not_replay_the_previous_answer() {
    let env = Env::new();
    let first = env.turn("hello", &request("Say hello", vec![]), &[]);
    assert_eq!(first.last().expect("last")["type"], "done");
    // As if the first turn's save had failed after an earlier turn's.
    let path = env
        .home
        .path()
        .join(".pi/agent/antigravity-bridge/sessions.json");
    let mut sessions = env.sessions();
    sessions["sid:s1"]["lastStepIdx"] = json!(-1);
    std::fs::write(&path, sessions.to_string()).expect("write");
    let history = vec![
        json!({"role": "user", "content": "Say hello"}),
        json!({"role": "assistant", "provider": "antigravity", "content": [{"type": "text", "text": HELLO_ANSWER}]}),
    ];
    let second = env.turn("resume", &request("Any suggestions?", history), &[]);
    assert_eq!(second.last().expect("last")["type"], "done", "{second:?}");
    let text: String = second
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(!text.contains("Hello! I'm agy"), "replayed: {text}");
    assert!(text.contains("proptest"), "{text}");
}

/// A state directory that cannot be written: the turn still runs, without
/// session memory, and says so once.
#[test]
fn an_unwritable_state_dir_runs_the_turn_without_session_memory() {
    let env = Env::new();
    let not_a_dir = env.home.path().join("state-is-a-file");
    std::fs::write(&not_a_dir, "x").expect("file");
    let state = not_a_dir.display().to_string();
    let events = env.turn(
        "hello",
        &request("Say hello", vec![]),
        &[("AGY_BRIDGE_STATE_DIR", &state)],
    );
    assert_eq!(events.last().expect("last")["type"], "done", "{events:?}");
    let said = common::pi_thinking(&events);
    assert_eq!(
        said.matches("runs without session memory").count(),
        1,
        "{said}"
    );
}

/// agy keeps about 500 conversations and drops the oldest (fake-agy's
/// `FAKE_AGY_KEEP_CONVERSATIONS` emulates it): when another session's turn
/// made agy drop this session's conversation, the next turn tells the user
/// in the words of a conversation agy did not have, why it may have gone,
/// and carries pi's whole record in its own prompt.
#[test]
fn a_conversation_agy_dropped_is_named_as_one_agy_did_not_have() {
    let env = Env::new();
    let first = env.turn("hello", &request("Say hello", vec![]), &[]);
    assert_eq!(first.last().expect("last")["type"], "done");
    let old = env.sessions()["sid:s1"]["conversationId"]
        .as_str()
        .expect("bound")
        .to_string();
    // Another pi session's turn, with agy keeping one conversation: ours goes.
    let other = json!({"model": "gemini-3.7-flash", "sessionId": "s2", "cwd": "/tmp",
                       "messages": [{"role": "user", "content": "Say hello too"}]});
    let elsewhere = env.turn(
        "hello",
        &other.to_string(),
        &[("FAKE_AGY_KEEP_CONVERSATIONS", "1")],
    );
    assert_eq!(elsewhere.last().expect("last")["type"], "done");
    assert!(!db(env.home.path(), &old).exists(), "agy dropped {old}");

    let history = vec![
        json!({"role": "user", "content": "Say hello"}),
        json!({"role": "assistant", "provider": "antigravity", "content": [{"type": "text", "text": HELLO_ANSWER}]}),
    ];
    let second = env.turn("hello", &request("What did you say?", history), &[]);
    assert_eq!(second.last().expect("last")["type"], "done", "{second:?}");
    let new = env.sessions()["sid:s1"]["conversationId"]
        .as_str()
        .expect("rebound")
        .to_string();
    assert_ne!(new, old);
    let said = common::pi_thinking(&second);
    let notice = format!("agy did not have conversation {old} (agy keeps about 500 conversations and drops the oldest; or it was deleted, or is from another machine) and began a new one, {new}, without the earlier context; pi's record of the earlier turns went to agy with this message");
    assert_eq!(said.matches(&notice).count(), 1, "told once: {said}");
    assert!(!said.contains("is gone from"), "{said}");
    // Nothing asked agy for the old conversation; pi's record went along.
    assert_eq!(flag(&env.last_print_argv(), "--conversation"), None);
    let prompt = env.last_prompt();
    assert!(
        prompt.contains(&format!("[your earlier answer]\n{HELLO_ANSWER}")),
        "{prompt}"
    );
    assert!(prompt.ends_with("What did you say?"), "{prompt}");
    // The record went with this turn: the next one need not send it again.
    let entry = env.sessions()["sid:s1"].clone();
    assert!(entry.get("agyContextLost").is_none(), "{entry}");
}
