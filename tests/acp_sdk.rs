//! `agy-bridge acp` as an editor uses it: the official ACP TypeScript SDK
//! (`@agentclientprotocol/sdk`, tests/acp_sdk/client.mjs) drives the agent
//! over stdio, with fake-agy as agy: a streamed answer with thoughts,
//! tools and an edit's diff; permission requests answered both ways
//! (fake-agy's tool log as the mark); a cancel mid-turn that leaves no agy
//! behind; a load after a restart; a failure as a JSON-RPC error; the
//! editor's MCP server called by agy, its header passed on. The SDK
//! comes from npm into CI's cache (`.ci/acp-sdk.sh`), which names its
//! install directory in `AGY_BRIDGE_ACP_SDK`. The tests are `#[ignore]`d
//! in a plain `cargo test` and fail without that variable when run
//! (`.ci/run` installs the SDK and runs them with `--include-ignored`).
//! Set `AGY_BRIDGE_ACP_EXCHANGE` to a path to keep the streamed turn's
//! whole exchange there (docs/acp-exchange.jsonl is one).

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK's install directory; panics without it: a test that needs it
/// never passes by not running.
fn sdk() -> PathBuf {
    std::env::var_os("AGY_BRIDGE_ACP_SDK")
        .map(PathBuf::from)
        .expect(
            "this test runs the official ACP SDK: set AGY_BRIDGE_ACP_SDK to its install directory \
             (`eval \"$(bash .ci/acp-sdk.sh --install-only)\"` installs it and sets it)",
        )
}

/// `node client.mjs` for `scenario` with fake-agy replaying `recording` at
/// `speed`; the agent's environment is `common::bridge`'s.
fn client(home: &Path, scenario: &str, recording: &str, speed: &str) -> Command {
    let template = common::bridge("acp", home, recording, speed);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_sdk/client.mjs");
    let mut c = Command::new("node");
    c.arg(script)
        .arg(sdk())
        .arg(scenario)
        .arg(home.join("exchange.jsonl"))
        .arg(home.join("work"));
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.env("AGY_BRIDGE_BIN", env!("CARGO_BIN_EXE_agy-bridge"))
        .env("AGY_BRIDGE_STATE_DIR", home.join("state"))
        .env("FAKE_AGY_TOOL_LOG", home.join("tools.log"));
    c
}

/// Run it; its one JSON line.
fn run(mut c: Command) -> Value {
    let out = c.output().expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK client failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON line ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(home.path().join("work")).expect("work dir");
    home
}

fn of_kind<'a>(updates: &'a Value, kind: &str) -> Vec<&'a Value> {
    updates
        .as_array()
        .map(|u| u.iter().filter(|u| u["sessionUpdate"] == kind).collect())
        .unwrap_or_default()
}

fn text_of(updates: &Value, kind: &str) -> String {
    of_kind(updates, kind)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_turn_streams_thoughts_tools_and_the_answer() {
    let home = home();
    let got = run(client(home.path(), "prompt", "tools", "20"));
    assert_eq!(got["init"]["protocolVersion"], 1, "{got}");
    let caps = &got["init"]["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["promptCapabilities"]["image"], false);
    assert_eq!(got["session"]["modes"]["currentModeId"], "accept-edits");
    assert_eq!(got["stopReason"], "end_turn", "{got}");
    let updates = &got["updates"];
    assert!(text_of(updates, "agent_thought_chunk").contains("Let me look at the code"));
    assert!(text_of(updates, "agent_message_chunk").contains("I fixed the off-by-one"));
    let calls = of_kind(updates, "tool_call");
    let titles: Vec<&str> = calls.iter().filter_map(|c| c["title"].as_str()).collect();
    assert!(titles.contains(&"run_command cargo test"), "{titles:?}");
    let edit = calls
        .iter()
        .find(|c| c["kind"] == "edit")
        .expect("the edit is a call of kind edit");
    let ends = of_kind(updates, "tool_call_update");
    let edit_end = ends
        .iter()
        .find(|u| u["toolCallId"] == edit["toolCallId"] && u["status"] == "completed")
        .expect("the edit ends");
    assert!(
        edit_end["content"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{edit_end}"
    );
    assert!(
        ends.iter().any(|u| u["status"] == "failed"),
        "deploy.sh fails"
    );
    // The session starts on the settings' default model (`flash`, at its
    // default tier), and the turn ends with the context in use against
    // that model's window.
    let model = &got["session"]["configOptions"][0];
    assert_eq!(model["currentValue"], "gemini-3.7-flash-medium", "{model}");
    let usage = of_kind(updates, "usage_update");
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert!(
        usage[0]["used"].as_u64().is_some_and(|n| n > 0),
        "{usage:?}"
    );
    assert_eq!(usage[0]["size"], 1_048_576, "a Gemini model's window");
    assert_eq!(got["agentExit"], 0);
    if let Some(keep) = std::env::var_os("AGY_BRIDGE_ACP_EXCHANGE") {
        std::fs::copy(home.path().join("exchange.jsonl"), keep).expect("keep the exchange");
    }
}

/// An edit's update carries the file agy wrote as ACP `diff` content: the
/// `tools` recording made for the session's directory, whose
/// replace_file_content fake-agy applies to the real `src/lib.rs`
/// (`FAKE_AGY_APPLY_EDITS`) when its step ends, as agy does. The old side
/// is what the bridge read when the call was announced, or, when it looked
/// only after agy wrote (a loaded machine: at speed 20 the call comes
/// 8.5 ms before the write), the edit undone: the same text either way.
#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn an_edit_is_sent_as_the_diff_of_the_file_agy_wrote() {
    let home = home();
    let work = home.path().join("work");
    let lib = work.join("src/lib.rs");
    std::fs::create_dir_all(work.join("src")).expect("src dir");
    std::fs::write(&lib, agy_synth::TOOLS_LIB_RS).expect("lib.rs");
    let recording = home.path().join("tools-in-work.jsonl");
    agy_synth::tools_in(&work.display().to_string())
        .save(&recording)
        .expect("the recording for this workspace");
    let mut c = client(
        home.path(),
        "prompt",
        &recording.display().to_string(),
        "20",
    );
    c.env("FAKE_AGY_APPLY_EDITS", "1");
    let got = run(c);
    assert_eq!(got["stopReason"], "end_turn", "{got}");
    let edited = std::fs::read_to_string(&lib).expect("lib.rs after the turn");
    assert_eq!(
        edited,
        agy_synth::TOOLS_LIB_RS.replace("    (0..n).sum()", "    (0..=n).sum()"),
        "fake-agy applied the recording's edit"
    );
    let updates = &got["updates"];
    let edit = of_kind(updates, "tool_call")
        .into_iter()
        .find(|c| c["kind"] == "edit")
        .expect("the edit is a call of kind edit");
    let path = lib.display().to_string();
    assert_eq!(edit["locations"][0]["path"], path, "{edit}");
    let edit_end = of_kind(updates, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == edit["toolCallId"] && u["status"] == "completed")
        .expect("the edit ends");
    let diff = edit_end["content"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "diff"))
        .unwrap_or_else(|| panic!("the edit's end has diff content: {edit_end}"));
    assert_eq!(diff["path"], path, "{diff}");
    assert_eq!(diff["oldText"], agy_synth::TOOLS_LIB_RS, "{diff}");
    assert_eq!(diff["newText"], edited, "{diff}");
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_cancel_mid_turn_ends_it_and_agys_tree() {
    let home = home();
    let mut c = client(home.path(), "cancel", "long-answer", "0.2");
    let pidfile = home.path().join("grandchild.pid");
    c.env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile);
    let got = run(c);
    assert_eq!(got["stopReason"], "cancelled", "{got}");
    assert!(
        got["updatesBeforeCancel"].as_u64().is_some_and(|n| n > 0),
        "{got}"
    );
    // Nothing of that turn is left: neither agy (its command line names
    // the session's directory) nor what agy left running.
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("fake-agy wrote its grandchild's pid");
    let marker = home.path().join("work").display().to_string();
    let gone = common::eventually(std::time::Duration::from_secs(5), || {
        !common::alive(grandchild) && common::pids_with(&marker).is_empty()
    });
    assert!(
        gone,
        "agy's tree outlived the cancel: {:?}",
        common::pids_with(&marker)
    );
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_failure_is_a_json_rpc_error_with_the_bridges_sentence() {
    let home = home();
    let got = run(client(home.path(), "fail", "quota-error", "20"));
    let error = &got["error"];
    assert_eq!(error["code"], -32603, "{got}");
    let message = error["message"].as_str().unwrap_or("");
    assert!(message.contains("quota"), "{message}");
    assert!(
        error["data"].is_object(),
        "the typed failure as data: {error}"
    );
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn permissions_are_asked_and_a_rejection_keeps_the_tool_from_running() {
    let home = home();
    let mut c = client(home.path(), "prompt", "tools", "20");
    c.env("AGY_PERMISSIONS", "ask")
        .env("ACP_TEST_REJECT", "cargo test");
    let got = run(c);
    let asked = got["permissions"].as_array().cloned().unwrap_or_default();
    assert!(!asked.is_empty(), "the gate asked: {got}");
    assert_eq!(
        asked[0]["options"],
        serde_json::json!(["allow_once", "allow_always", "reject_once", "reject_always"])
    );
    let rejected: Vec<&Value> = asked
        .iter()
        .filter(|a| a["optionId"] == "reject-once")
        .collect();
    assert_eq!(rejected.len(), 1, "{asked:?}");
    let ran = std::fs::read_to_string(home.path().join("tools.log")).unwrap_or_default();
    assert!(!ran.contains("cargo test"), "a rejected tool ran: {ran}");
    assert!(
        ran.contains("view_file"),
        "an allowed tool did not run: {ran}"
    );
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_session_loads_after_a_restart_with_its_history() {
    let home = home();
    let first = run(client(home.path(), "prompt", "tools", "20"));
    let id = first["session"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let mut c = client(home.path(), "load", "tools", "20");
    c.arg(&id);
    let got = run(c);
    assert!(got["loaded"].is_object(), "{got}");
    let updates = &got["updates"];
    assert_eq!(
        text_of(updates, "user_message_chunk"),
        "Fix the failing test"
    );
    assert!(text_of(updates, "agent_message_chunk").contains("I fixed the off-by-one"));
    assert!(!of_kind(updates, "tool_call").is_empty());
    // The loaded session goes on in the same agy conversation: its agy,
    // started at the load, resumes it.
    let bound = |home: &Path| {
        let path = home.join("state/sessions.json");
        let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default())
            .unwrap_or(Value::Null);
        all.pointer(&format!("/sid:{id}/conversationId"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let conversation = bound(home.path()).expect("the first run saved the session's binding");
    let mut c = client(home.path(), "load", "tools", "20");
    c.arg(&id)
        .env("ACP_TEST_PROMPT_AFTER_LOAD", "Fix the failing test")
        .env("FAKE_AGY_ARGV_LOG", home.path().join("argv.log"));
    let again = run(c);
    assert_eq!(again["stopReason"], "end_turn", "{again}");
    let turn: Vec<Value> = again["updates"].as_array().cloned().unwrap_or_default();
    let after_load = Value::from(turn[again["replayed"].as_u64().unwrap_or(0) as usize..].to_vec());
    assert!(text_of(&after_load, "agent_message_chunk").contains("I fixed the off-by-one"));
    let starts = model_starts(home.path());
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert!(
        starts[0]
            .windows(2)
            .any(|w| w[0] == "--conversation" && w[1] == conversation),
        "agy resumed {conversation}: {starts:?}"
    );
    assert_eq!(bound(home.path()).as_deref(), Some(conversation.as_str()));
    // An id the bridge never made is an error.
    let mut c = client(home.path(), "load", "tools", "20");
    c.arg("acp-00000000-0000-0000-0000-000000000000");
    let out = c.output().expect("node runs");
    assert!(!out.status.success(), "loading an unknown session fails");
}

/// fake-agy's starts for model turns (its argv log), not its short
/// programs (`--version`, `models`, `/hooks`).
fn model_starts(home: &Path) -> Vec<Vec<String>> {
    common::argvs(&home.join("argv.log"))
        .into_iter()
        .filter(|argv| argv.windows(2).any(|w| w[0] == "--input-format"))
        .collect()
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_sessions_agy_is_started_ahead_and_kept_warm_between_turns() {
    let home = home();
    let mut c = client(home.path(), "two", "stdin-two-turns", "20");
    c.env("FAKE_AGY_ARGV_LOG", home.path().join("argv.log"))
        .env("FAKE_AGY_STDIN_LOG", home.path().join("stdin.log"));
    let got = run(c);
    assert_eq!(
        got["stopReasons"],
        serde_json::json!(["end_turn", "end_turn"]),
        "{got}"
    );
    assert_eq!(
        got["startedBeforePrompt"], true,
        "session/new starts the session's agy: {got}"
    );
    let starts = model_starts(home.path());
    assert_eq!(starts.len(), 1, "one agy for both turns: {starts:?}");
    assert_eq!(
        common::stdin_prompts(&home.path().join("stdin.log")),
        ["What is this project?", "Any suggestions?"],
        "both prompts went to that agy's stdin"
    );
    let said = text_of(&got["updates"], "agent_message_chunk");
    assert!(said.contains("small Rust library"), "{said}");
    assert!(said.contains("one-line changes"), "{said}");
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn a_mode_change_starts_the_sessions_agy_again_before_the_prompt() {
    let home = home();
    let mut c = client(home.path(), "mode", "stdin-two-turns", "20");
    c.env("FAKE_AGY_ARGV_LOG", home.path().join("argv.log"));
    let got = run(c);
    assert_eq!(got["stopReason"], "end_turn", "{got}");
    assert_eq!(got["startedBeforePrompt"], true, "{got}");
    assert_eq!(got["restartedBeforePrompt"], true, "{got}");
    let modes: Vec<String> = model_starts(home.path())
        .iter()
        .filter_map(|argv| {
            let at = argv.iter().position(|a| a == "--mode")?;
            argv.get(at + 1).cloned()
        })
        .collect();
    // The first agy (accept-edits) went unused; the turn ran on the second.
    assert_eq!(modes, ["accept-edits", "plan"]);
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn an_idle_sessions_agy_is_let_go_and_the_next_turn_starts_another() {
    let home = home();
    let mut c = client(home.path(), "two", "stdin-two-turns", "20");
    c.env("FAKE_AGY_ARGV_LOG", home.path().join("argv.log"))
        .env("FAKE_AGY_STDIN_LOG", home.path().join("stdin.log"))
        .env("AGY_WARM_IDLE_SECS", "1")
        // Well past the idle time, so the first agy is gone by then.
        .env("ACP_TEST_PAUSE_MS", "3000");
    let got = run(c);
    assert_eq!(
        got["stopReasons"],
        serde_json::json!(["end_turn", "end_turn"]),
        "{got}"
    );
    assert_eq!(model_starts(home.path()).len(), 2);
    assert_eq!(
        common::stdin_prompts(&home.path().join("stdin.log")),
        ["What is this project?", "Any suggestions?"]
    );
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn with_warm_off_each_turn_starts_its_own_agy_and_none_ahead() {
    let home = home();
    let mut c = client(home.path(), "two", "stdin-two-turns", "20");
    c.env("FAKE_AGY_ARGV_LOG", home.path().join("argv.log"))
        .env("AGY_WARM", "off")
        // Nothing may start before the prompt; how long to look for it.
        .env("ACP_TEST_START_WAIT_MS", "1500");
    let got = run(c);
    assert_eq!(
        got["stopReasons"],
        serde_json::json!(["end_turn", "end_turn"]),
        "{got}"
    );
    assert_eq!(got["startedBeforePrompt"], false, "{got}");
    assert_eq!(model_starts(home.path()).len(), 2);
}

#[test]
#[ignore = "needs the ACP client SDK (.ci/acp-sdk.sh)"]
fn the_editors_mcp_server_is_called_by_agy_with_its_headers() {
    use agy_synth::mcp::{editor_tool_arguments, EDITOR_SERVER, EDITOR_TOOL};
    let home = home();
    let tmp = home.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let answer = "parse_config is defined in src/config.rs, line 42";
    let header = ["X-Editor-Token", "editor-token-7f3a"];
    let mut c = client(home.path(), "mcp", "mcp/editor-tool", "20");
    c.env(
        "ACP_TEST_MCP",
        serde_json::json!({"server": EDITOR_SERVER, "tool": EDITOR_TOOL, "header": header, "answer": answer})
            .to_string(),
    )
    .env("TMPDIR", &tmp);
    let got = run(c);
    let mcp = &got["init"]["agentCapabilities"]["mcpCapabilities"];
    assert_eq!(mcp["http"], true, "{got}");
    assert_eq!(mcp["sse"], false, "{got}");
    assert_eq!(got["stopReason"], "end_turn", "{got}");

    // The editor's server saw agy's whole exchange, each request with the
    // header the editor configured (it refuses a request without).
    let seen = got["mcpRequests"].as_array().cloned().unwrap_or_default();
    let methods: Vec<&str> = seen.iter().filter_map(|r| r["method"].as_str()).collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ],
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|r| r["header"] == header[1]),
        "a request without the editor's header: {seen:?}"
    );
    assert_eq!(
        seen[4]["params"],
        serde_json::json!({"name": EDITOR_TOOL, "arguments": editor_tool_arguments()})
    );

    // The call is one tool call in the turn, completed with the answer.
    let updates = &got["updates"];
    let call = of_kind(updates, "tool_call")
        .into_iter()
        .find(|c| c.to_string().contains(EDITOR_TOOL))
        .unwrap_or_else(|| panic!("no tool call for {EDITOR_TOOL}: {updates}"));
    let done = of_kind(updates, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == call["toolCallId"] && u["status"] == "completed")
        .unwrap_or_else(|| panic!("the call did not complete: {updates}"));
    assert!(done["content"].to_string().contains(answer), "{done}");

    // The SSE server beside it is not given to agy, and the editor hears
    // why, once.
    let thoughts = text_of(updates, "agent_thought_chunk");
    assert_eq!(
        thoughts.matches("\"editor-events\"").count(),
        1,
        "{thoughts}"
    );
    assert!(thoughts.contains("not SSE"), "{thoughts}");

    // The config (the editor's secrets) went with the turn.
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().starts_with("agy-bridge-mcp-")),
        "{left:?}"
    );
}
