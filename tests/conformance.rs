//! `agy-bridge conformance` against fake-agy: every fact holds; with one
//! fault injected (fake-agy's FAKE_AGY_FAULT, FAKE_AGY_IGNORE_HOOKS) the
//! report names exactly that fact, and the exit code is 1.

mod common;

use common::bridge;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Run the suite with `env` added; its exit code and report.json.
fn conformance(home: &Path, env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let out = home.join("out");
    let mut cmd = bridge("conformance", home, "hello", "50");
    cmd.arg("--out").arg(&out).arg("--timeout").arg("60");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn agy-bridge conformance");
    let output = common::wait_output(child, Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e}); {}; stderr: {stderr}", output.status));
    let report: Value = serde_json::from_str(&text).expect("report.json is JSON");
    assert!(
        out.join("report.md").is_file(),
        "no report.md; stderr: {stderr}"
    );
    (output.status.code(), report)
}

/// The facts whose `ok` is `want` (true, false, or null).
fn facts_with(report: &Value, want: &Value) -> Vec<String> {
    report["facts"]
        .as_array()
        .map(|facts| {
            facts
                .iter()
                .filter(|f| &f["ok"] == want)
                .filter_map(|f| f["fact"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_fact_holds_against_fake_agy() {
    let home = tempfile::tempdir().expect("tempdir");
    let (code, report) = conformance(home.path(), &[]);
    let failed = facts_with(&report, &Value::Bool(false));
    assert!(failed.is_empty(), "facts failed: {failed:?}\n{report:#}");
    assert_eq!(code, Some(0), "{report:#}");
    let held = facts_with(&report, &Value::Bool(true));
    for fact in [
        "cli.version",
        "models.listing",
        "usage.buckets",
        "init.conversation_id",
        "init.permission_mode",
        "result.success",
        "db.text_field_path",
        "tools.view_file",
        "tools.run_command",
        "denied.result_denied_actions",
        "denied.permission_mode",
        "effort.xhigh_refused",
        "resume.same_conversation",
        "result.usage.cumulative",
        "resume.unknown_id_new_conversation",
        "stdin.two_turns_one_conversation",
        "hooks.add_dir_loaded",
        "hooks.pre_tool_use_allow",
        "hooks.payload_fields",
        "hooks.pre_tool_use_deny",
        "slash.disable_flag",
        "edits.accept_edits_write",
        "mcp.bridge_server",
        "subagent.child_conversation",
    ] {
        assert!(
            held.iter().any(|f| f == fact),
            "{fact} not held:\n{report:#}"
        );
    }
    assert_eq!(report["planned_turns"], report["spent_turns"], "{report:#}");
    let recordings = report["recordings"].as_array().map_or(0, Vec::len);
    assert!(recordings >= 10, "recordings: {:#}", report["recordings"]);
    // The recordings are what fake-agy replays.
    let one = home.path().join("out/recordings/one-word.jsonl");
    agy_corpus::recording::Recording::load(&one).expect("one-word recording loads");
}

/// Each fault makes exactly its facts fail (the permission mode is read
/// with the flag and without it).
#[test]
fn each_injected_fault_names_exactly_its_fact() {
    for (env, facts) in [
        (
            ("FAKE_AGY_FAULT", "init-without-id"),
            &["init.conversation_id"][..],
        ),
        (
            ("FAKE_AGY_FAULT", "usage-per-turn"),
            &["result.usage.cumulative"],
        ),
        (
            ("FAKE_AGY_FAULT", "text-field-moved"),
            &["db.text_field_path"],
        ),
        (
            ("FAKE_AGY_FAULT", "permission-mode"),
            &["init.permission_mode", "denied.permission_mode"],
        ),
        (("FAKE_AGY_IGNORE_HOOKS", "1"), &["hooks.add_dir_loaded"]),
    ] {
        let home = tempfile::tempdir().expect("tempdir");
        let (code, report) = conformance(home.path(), &[env]);
        let failed = facts_with(&report, &Value::Bool(false));
        assert_eq!(failed, facts, "{env:?}:\n{report:#}");
        assert_eq!(code, Some(1), "{env:?}");
    }
}

#[test]
fn only_and_unknown_scenarios() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = home.path().join("out");
    let output = bridge("conformance", home.path(), "hello", "50")
        .args(["--only", "version,one-word", "--out"])
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(0));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report"))
            .expect("json");
    assert_eq!(report["planned_turns"], 1);
    assert_eq!(report["facts"].as_array().map(Vec::len), Some(5));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("1 model turn(s)"), "{stderr}");

    let output = bridge("conformance", home.path(), "hello", "50")
        .args(["--only", "nonsense", "--out"])
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));

    let output = bridge("conformance", home.path(), "hello", "50")
        .args(["--out"])
        .arg(&out)
        .env("AGY_BIN", home.path().join("no-such-agy"))
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
}

/// fake-agy run on a saved conformance folder: `args`, `stdin`, `env`.
fn replay(args: &[&str], stdin: &str, env: &[(&str, &Path)]) -> std::process::Output {
    use std::io::Write;
    let mut cmd = std::process::Command::new(common::fake_agy());
    cmd.args(args)
        .env("FAKE_AGY_SPEED", "50")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn fake-agy");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("write stdin");
    }
    common::wait_output(child, Duration::from_secs(60))
}

/// What a report's folder keeps is what agy printed, and fake-agy replays
/// it as it is: `--version` and `models` from a recording's header, `/usage`
/// from `commands/usage.stdout`, the two stdin turns from one recording.
#[test]
fn the_folder_keeps_agys_commands_and_stdin_turns_and_fake_agy_replays_them() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = home.path().join("out");
    let argv_log = home.path().join("argv.log");
    let output = bridge("conformance", home.path(), "hello", "50")
        .args(["--only", "version,models,usage,hooks,stdin", "--out"])
        .arg(&out)
        .env("FAKE_AGY_ARGV_LOG", &argv_log)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // `agy models` is asked once: the model named up front is the one
    // the suite records.
    let asked = common::argvs(&argv_log)
        .iter()
        .filter(|a| a.as_slice() == ["models"])
        .count();
    assert_eq!(asked, 1, "{:?}", common::argvs(&argv_log));

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report"))
            .expect("json");
    assert!(
        report["commands"]
            .as_array()
            .is_some_and(|c| c.iter().any(|f| f == "commands/usage.stdout")),
        "{report:#}"
    );
    let commands = out.join("commands");
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(commands.join("index.json")).expect("commands/index.json"),
    )
    .expect("index is JSON");
    let names: Vec<&str> = index
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["version", "models", "usage", "hooks"], "{index:#}");
    for c in index.as_array().into_iter().flatten() {
        assert_eq!(c["exit_code"], 0, "{c:#}");
    }
    let saved = |name: &str| {
        std::fs::read_to_string(commands.join(format!("{name}.stdout"))).expect("saved stdout")
    };
    // The throwaway workspace is redacted out of /hooks' listing.
    let hooks = saved("hooks");
    assert!(hooks.contains("hooks.json"), "{hooks}");
    assert!(!hooks.contains("conformance-"), "{hooks}");

    let stdin_rec = out.join("recordings/stdin.jsonl");
    let rec = agy_corpus::recording::Recording::load(&stdin_rec).expect("stdin recording loads");
    let turns: std::collections::BTreeSet<u32> = rec.commits.iter().map(|c| c.turn).collect();
    assert_eq!(turns, [0, 1].into(), "one recording, both stdin turns");
    assert_eq!(rec.header.version_output, saved("version"));
    assert_eq!(rec.header.models_output, saved("models"));

    let env = [("FAKE_AGY_RECORDING", stdin_rec.as_path())];
    let version = replay(&["--version"], "", &env);
    assert_eq!(String::from_utf8_lossy(&version.stdout), saved("version"));
    let models = replay(&["models"], "", &env);
    assert_eq!(String::from_utf8_lossy(&models.stdout), saved("models"));
    let usage_file = commands.join("usage.stdout");
    let usage = replay(
        &["-p", "/usage", "--output-format", "json"],
        "",
        &[("FAKE_AGY_USAGE", usage_file.as_path())],
    );
    assert_eq!(String::from_utf8_lossy(&usage.stdout), saved("usage"));

    let lines = format!(
        "{}\n{}\n",
        agy_format::stream_input::user_line("one"),
        agy_format::stream_input::user_line("two")
    );
    let played = replay(
        &[
            "--output-format",
            "stream-json",
            "--input-format",
            "stream-json",
            "--print",
            "",
        ],
        &lines,
        &env,
    );
    let stdout = String::from_utf8_lossy(&played.stdout);
    assert_eq!(played.status.code(), Some(0), "{stdout}");
    let results: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "result")
        .collect();
    assert_eq!(results.len(), 2, "{stdout}");
    assert_eq!(
        results[0]["result"]["conversation_id"], results[1]["result"]["conversation_id"],
        "{stdout}"
    );
    assert_eq!(results[1]["result"]["num_turns"], 2, "{stdout}");
}
