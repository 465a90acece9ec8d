//! fake-agy's hooks: `<dir>/.agents/hooks.json` from `--add-dir`, the
//! `PreToolUse` gate with `--dangerously-skip-permissions`, the `/hooks`
//! listing, and the logs tests use to see what ran. Replays the bundled
//! `tools` recording (view_file 3, grep_search 4, list_dir 5, run_command 7,
//! replace_file_content 9, run_command 11).

#![forbid(unsafe_code)]

mod common;

use agy_corpus::recording::{self, Recording};
use agy_format::hooks::{listed_sources, Decision, ToolPayload};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A temporary HOME with an `--add-dir` dir whose hooks.json holds one
/// PreToolUse hook.
struct Setup {
    home: tempfile::TempDir,
}

impl Setup {
    fn new(matcher: &str, command: &str, timeout: u64) -> Setup {
        let home = tempfile::tempdir().expect("tempdir");
        let agents = home.path().join("d/.agents");
        std::fs::create_dir_all(&agents).expect("mkdir");
        let file = serde_json::json!({"test": {"PreToolUse": [{"matcher": matcher,
            "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]}});
        std::fs::write(agents.join("hooks.json"), file.to_string()).expect("hooks.json");
        Setup { home }
    }

    fn dir(&self) -> PathBuf {
        self.home.path().join("d")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }

    fn command(&self, recording: &str, args: &[&str]) -> Command {
        let mut cmd = common::fake_agy();
        cmd.env("HOME", self.home.path())
            .env("FAKE_AGY_RECORDING", recording)
            .env("FAKE_AGY_SPEED", "50")
            .env("FAKE_AGY_TOOL_LOG", self.path("tools.log"))
            .env("FAKE_AGY_HOOK_LOG", self.path("hooks.log"))
            .args(args)
            .arg("--add-dir")
            .arg(self.dir())
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, recording: &str, args: &[&str]) -> Output {
        self.command(recording, args)
            .output()
            .expect("run fake-agy")
    }

    /// One JSON value per line of a log (none if it was never written).
    fn log(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.path(name))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    fn tools_ran(&self) -> Vec<String> {
        self.log("tools.log")
            .iter()
            .map(|v| v["name"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

const SKIP: &[&str] = &[
    "-p",
    "go",
    "--output-format",
    "stream-json",
    "--dangerously-skip-permissions",
];

fn lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn results(o: &Output) -> Vec<Value> {
    lines(o)
        .into_iter()
        .filter(|l| l["event"] == "result")
        .map(|l| l["result"].clone())
        .collect()
}

fn recorded_answer() -> String {
    let path = recording::bundled_dir().join("tools.jsonl");
    Recording::load(&path)
        .expect("tools")
        .stdout_text()
        .to_string()
}

fn allow_cmd() -> String {
    format!("cat >/dev/null; echo '{}'", Decision::Allow.to_json())
}

#[test]
fn an_allowing_hook_lets_every_tool_run_and_the_answer_is_the_recorded_one() {
    let s = Setup::new("*", &allow_cmd(), 10);
    let o = s.run("tools", SKIP);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        s.tools_ran(),
        [
            "view_file",
            "grep_search",
            "list_dir",
            "run_command",
            "replace_file_content",
            "run_command"
        ]
    );
    assert_eq!(s.log("hooks.log").len(), 6, "one payload per tool");
    let r = results(&o);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0]["response"].as_str().unwrap_or("").trim_end(),
        recorded_answer()
    );
}

/// The stream's ERROR update of a denied tool: its index and error message.
fn denied_update(o: &Output) -> Option<(i64, String)> {
    lines(o).iter().find_map(|l| {
        let u = &l["step_update"];
        (u["state"] == "ERROR" && u["step_type"] == "tool").then(|| {
            (
                u["step_index"].as_i64().unwrap_or(-1),
                u["tool_info"]["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
    })
}

#[test]
fn a_denying_hook_stops_the_tool_and_the_model_gets_the_reason() {
    let payload = "payload.json";
    let deny = Decision::deny("commands are not allowed here").to_json();
    let s = Setup::new(
        "run_command",
        &format!("cat > {payload}; echo '{deny}'"),
        10,
    );
    let o = s.run("tools", SKIP);
    assert!(o.status.success(), "{o:?}");
    let want = Decision::step_error("commands are not allowed here");
    assert_eq!(denied_update(&o), Some((7, want.clone())));
    assert_eq!(s.tools_ran(), ["view_file", "grep_search", "list_dir"]);
    let r = results(&o);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["status"], "SUCCESS");
    let response = r[0]["response"].as_str().unwrap_or("");
    assert!(response.contains(&want), "{response}");
    assert!(
        !lines(&o)
            .iter()
            .any(|l| l["step_update"]["step_type"] == "tool"
                && l["step_update"]["tool_name"] == "replace_file_content"),
        "the rest of the turn is not replayed"
    );
    // The hook ran in the .agents dir and read agy's payload.
    let seen = std::fs::read_to_string(s.dir().join(".agents").join(payload)).expect("payload");
    let p = ToolPayload::parse(&seen).expect("a ToolPayload");
    assert_eq!((p.step_idx, p.tool_call.name.as_str()), (7, "run_command"));
    assert_eq!(p.tool_call.args["CommandLine"], "cargo test");
    let id = r[0]["conversation_id"].as_str().unwrap_or("");
    assert_eq!(p.conversation_id, id);
    assert!(p.transcript_path.contains(&format!("brain/{id}/")));
    assert_eq!(p.model_name, "gemini-3.7-flash-medium");
    assert_eq!(
        s.log("hooks.log"),
        [serde_json::to_value(&p).expect("json")]
    );
}

#[test]
fn empty_output_a_failed_exit_and_a_crash_all_deny() {
    for command in ["cat >/dev/null; echo '{}'", "exit 1", "kill -9 $$"] {
        let s = Setup::new("run_command", command, 10);
        let o = s.run("tools", SKIP);
        assert!(o.status.success(), "{command}: {o:?}");
        let (idx, message) = denied_update(&o).expect(command);
        assert_eq!(idx, 7, "{command}");
        assert!(
            message.starts_with(Decision::step_error("").as_str()),
            "{message}"
        );
        assert!(
            !s.tools_ran().contains(&"run_command".to_string()),
            "{command}"
        );
    }
}

#[test]
fn without_skip_permissions_an_allowing_hook_does_not_lift_the_auto_deny() {
    let s = Setup::new("*", &allow_cmd(), 10);
    let o = s.run(
        "outcomes/denied-1.2.17",
        &["-p", "go", "--output-format", "stream-json"],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(s.tools_ran().is_empty(), "{:?}", s.tools_ran());
    assert!(s.log("hooks.log").is_empty(), "hooks are not consulted");
    let r = results(&o);
    assert!(r[0]["denied_actions"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
}

#[test]
fn a_hook_that_times_out_lets_the_tool_run() {
    let s = Setup::new("run_command", "sleep 20; echo '{}'", 1);
    let t = Instant::now();
    let o = s.run("tools", SKIP);
    assert!(o.status.success(), "{o:?}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "killed at its timeout"
    );
    assert_eq!(
        denied_update(&o).map(|d| d.0),
        Some(11),
        "the recorded error only"
    );
    let ran = s.tools_ran();
    assert_eq!(
        ran.iter().filter(|n| *n == "run_command").count(),
        2,
        "{ran:?}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("timed out"));
}

#[test]
fn slash_hooks_lists_each_hook_with_its_source_unless_hooks_are_ignored() {
    let s = Setup::new("*", "/bin/true", 30);
    let args = ["-p", "/hooks", "--output-format", "json"];
    let o = s.run("tools", &args);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let v: Value = serde_json::from_str(&out).expect("one json result");
    assert_eq!(v["num_turns"], 0);
    assert_eq!(v["command"]["name"], "hooks");
    let want = s
        .dir()
        .join(".agents/hooks.json")
        .canonicalize()
        .expect("canon");
    let listed = listed_sources(&out);
    assert_eq!(listed.len(), 1, "{out}");
    assert_eq!(Path::new(&listed[0].source), want);
    assert_eq!(listed[0].command.as_deref(), Some("/bin/true"));
    assert!(
        !s.path(".gemini/antigravity-cli/conversations").exists(),
        "no database"
    );

    let ignored = s
        .command("tools", &args)
        .env("FAKE_AGY_IGNORE_HOOKS", "1")
        .output()
        .expect("run");
    assert!(ignored.status.success());
    assert!(listed_sources(&String::from_utf8_lossy(&ignored.stdout)).is_empty());

    let text = s.run("tools", &["-p", "/hooks"]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains(&format!("PreToolUse\t*\t/bin/true\t{}", want.display())),
        "{text}"
    );
}

#[test]
fn ignored_or_unreadable_hooks_do_not_gate() {
    let deny = Decision::deny("no").to_json();
    let s = Setup::new("*", &format!("echo '{deny}'"), 10);
    let o = s
        .command("tools", SKIP)
        .env("FAKE_AGY_IGNORE_HOOKS", "1")
        .output()
        .expect("run");
    assert!(o.status.success());
    assert_eq!(s.tools_ran().len(), 6);
    let bad = Setup::new("*", "true", 10);
    let file = bad.dir().join(".agents/hooks.json");
    std::fs::write(&file, "{not json").expect("write");
    let o = bad.run("tools", SKIP);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&file.canonicalize().expect("canon").display().to_string()),
        "{err}"
    );
    assert_eq!(bad.tools_ran().len(), 6);
}

#[test]
fn a_denial_in_a_stdin_turn_ends_that_turn_and_the_session_goes_on() {
    let deny = Decision::deny("not in this session").to_json();
    let s = Setup::new("run_command", &format!("cat >/dev/null; echo '{deny}'"), 10);
    let mut child = s
        .command(
            "tools",
            &[
                "-p",
                "",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--dangerously-skip-permissions",
            ],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    for prompt in ["one", "two"] {
        let line =
            serde_json::json!({"event": "user", "message": {"role": "user", "content": prompt}});
        writeln!(stdin, "{line}").expect("write");
    }
    drop(stdin);
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{o:?}");
    let r = results(&o);
    assert_eq!(r.len(), 2, "a result per turn");
    for result in &r {
        let response = result["response"].as_str().unwrap_or("");
        assert!(response.contains("not in this session"), "{response}");
    }
    let errors: Vec<i64> = lines(&o)
        .iter()
        .filter(|l| l["step_update"]["state"] == "ERROR")
        .filter_map(|l| l["step_update"]["step_index"].as_i64())
        .collect();
    let seen: Vec<i64> = s
        .log("hooks.log")
        .iter()
        .map(|v| {
            ToolPayload::parse(&v.to_string())
                .expect("payload")
                .step_idx as i64
        })
        .collect();
    assert_eq!(errors.len(), 2);
    assert_eq!(seen, errors, "each payload names the step as written");
    assert!(seen[1] > seen[0]);
    assert_eq!(s.tools_ran().len(), 6, "view, grep, list in each turn");
}

#[test]
fn an_mcp_call_reaches_the_hooks_as_call_mcp_tool_and_a_denial_skips_the_call() {
    let deny = Decision::deny("no pi tools").to_json();
    let s = Setup::new(
        "call_mcp_tool",
        &format!("cat >/dev/null; echo '{deny}'"),
        10,
    );
    let o = s.run("mcp/pi-tool", SKIP);
    assert!(o.status.success(), "{o:?}");
    let (_, message) = denied_update(&o).expect("a denied MCP step");
    assert_eq!(message, Decision::step_error("no pi tools"));
    assert!(s.tools_ran().is_empty(), "{:?}", s.tools_ran());
    let seen = s.log("hooks.log");
    assert_eq!(seen.len(), 1);
    let p = ToolPayload::parse(&seen[0].to_string()).expect("payload");
    assert_eq!(p.tool_call.name, "call_mcp_tool");
    assert_eq!(p.tool_call.args["ServerName"], "pi");
    assert!(p
        .tool_call
        .args
        .get("ToolName")
        .is_some_and(Value::is_string));
    let r = results(&o);
    assert!(r[0]["response"]
        .as_str()
        .unwrap_or("")
        .contains("no pi tools"));
}
