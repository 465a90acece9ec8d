//! AskAntigravity (`agy-bridge ask`) as transcripts, with fake-agy as agy.

mod common;

use assert_cmd::Command;
use common::bridge;
use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().expect("tmp"),
        }
    }

    fn ask(&self, recording: &str) -> Command {
        let mut c = bridge("ask", self.home.path(), recording, "10");
        c.env("FAKE_AGY_ARGV_LOG", self.argv_log());
        Command::from_std(c)
    }

    fn argv_log(&self) -> std::path::PathBuf {
        self.home.path().join("argv.jsonl")
    }

    /// The arguments of the last print-mode agy invocation.
    fn last_print_argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.argv_log())
            .unwrap_or_default()
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Vec<String>>(l).ok())
            .find(|a| a.iter().any(|x| x == "-p"))
            .expect("agy ran in print mode")
    }
}

fn flag(argv: &[String], name: &str) -> Option<String> {
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

#[test]
fn prints_the_answer_and_a_footer_with_the_conversation() {
    let env = Env::new();
    let out = env
        .ask("thinking")
        .arg("What is the capital of Australia?")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let (answer, footer) = stdout
        .split_once("\n\n[agy conversation: ")
        .expect("footer");
    assert!(
        answer.starts_with("The capital of Australia is **Canberra**"),
        "{answer}"
    );
    let id = footer.split(';').next().expect("id");
    assert!(
        agy_format::ids::ConversationId::parse(id).is_ok(),
        "{footer}"
    );
    assert!(footer.contains(&format!("--conversation {id}")));
}

#[test]
fn json_output_and_model_aliases() {
    let env = Env::new();
    let out = env
        .ask("hello")
        .args(["--json", "--model", "pro high", "Say hello"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).expect("one JSON object");
    assert_eq!(v["ok"], true);
    assert!(v["answer"]
        .as_str()
        .unwrap_or("")
        .starts_with("Hello! I'm agy"));
    assert!(v["conversationId"].is_string());
    assert!(v["error"].is_null());
    // The alias resolved against fake-agy's `agy models`: a Gemini base with
    // --effort, and nothing of the bridge's own passed along.
    let argv = env.last_print_argv();
    assert_eq!(flag(&argv, "--model").as_deref(), Some("gemini-3.7-pro"));
    assert_eq!(flag(&argv, "--effort").as_deref(), Some("high"));
    // Only the workspace is added (ours is the current directory).
    let added: Vec<&String> = argv
        .windows(2)
        .filter(|w| w[0] == "--add-dir")
        .map(|w| &w[1])
        .collect();
    assert_eq!(added.len(), 1, "{argv:?}");
}

#[test]
fn fixed_models_never_get_an_effort() {
    let env = Env::new();
    env.ask("hello")
        .args(["--json", "--model", "sonnet", "Say hello"])
        .assert()
        .success();
    let argv = env.last_print_argv();
    assert_eq!(flag(&argv, "--model").as_deref(), Some("claude-sonnet-4-6"));
    assert_eq!(flag(&argv, "--effort"), None);
}

#[test]
fn continues_a_conversation_by_id() {
    let env = Env::new();
    let first = env
        .ask("hello")
        .args(["--json", "Say hello"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&first.get_output().stdout).expect("json");
    let id = v["conversationId"].as_str().expect("id").to_string();
    let second = env
        .ask("resume")
        .args(["--json", "--conversation", &id, "Any suggestions?"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&second.get_output().stdout).expect("json");
    assert_eq!(v["conversationId"].as_str(), Some(id.as_str()));
    assert!(v["answer"].as_str().unwrap_or("").contains("proptest"));
    assert_eq!(
        flag(&env.last_print_argv(), "--conversation").as_deref(),
        Some(id.as_str())
    );
}

#[test]
fn refuses_when_the_caller_is_antigravity_itself() {
    let env = Env::new();
    let out = env
        .ask("hello")
        .args(["--json", "--caller-provider", "antigravity", "Say hello"])
        .assert()
        .failure();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert!(v["error"]
        .as_str()
        .unwrap_or("")
        .contains("itself antigravity"));
    assert!(
        !env.argv_log().exists(),
        "agy must not run when the caller is antigravity"
    );
}

#[test]
fn extra_add_dirs_are_not_passed_to_a_delegated_run() {
    // AGY_EXTRA_ARGS may carry the bridge's own directories for provider
    // turns; a delegated run must not see them, or it could recurse.
    let env = Env::new();
    env.ask("hello")
        .env("AGY_EXTRA_ARGS", "--add-dir /tmp/bridge-mcp --sandbox")
        .args(["--json", "Say hello"])
        .assert()
        .success();
    let argv = env.last_print_argv();
    assert!(!argv.iter().any(|a| a.contains("bridge-mcp")), "{argv:?}");
    assert!(argv.iter().any(|a| a == "--sandbox"), "{argv:?}");
}

#[test]
fn failures_are_reported_in_words() {
    let env = Env::new();
    let out = env
        .ask("quota-error")
        .args(["--json", "Refactor the parser"])
        .assert()
        .failure();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap_or("").contains("quota"), "{v}");
    let out = env
        .ask("hello")
        .args(["--model", "no such model", "hi"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("unknown model alias"), "{stderr}");
}

/// `ask` takes agy's answer from its stream-json `result.response`: here
/// the database is never written where we look, and the answer still comes,
/// with a note that the turn ran from stream-json alone.
#[test]
fn answers_from_agys_result_when_the_database_cannot_be_read() {
    let env = Env::new();
    let out = env
        .ask("hello")
        .env("FAKE_AGY_NO_DB", "1")
        .env("AGY_BIND", "stream-json")
        .args(["--json", "hi"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(
        v["answer"].as_str().unwrap_or(""),
        "Hello! I'm agy, running in print mode. I can read and edit files in this workspace, run commands, and search the web. What would you like to work on?",
        "{v}"
    );
    let notices = v["notices"].as_array().expect("notices");
    assert!(
        notices.iter().any(|n| n
            .as_str()
            .unwrap_or("")
            .contains("stream-json output alone")),
        "{v}"
    );
}
