//! `agy-bridge usage` end to end with fake-agy as agy: the words and
//! `--json`, the cache honoured with `--max-age-secs` (counted in
//! fake-agy's argv log), `FAKE_AGY_USAGE`'s buckets in all of fake-agy's
//! output forms, and one clear sentence when agy is missing. A turn that
//! fails on quota (`stream`, pi's protocol, and `run`) names the empty
//! bucket and when it refills, from the cache or one `/usage`.

mod common;

use agy_format::quota::{rfc3339, Quota};
use common::{bridge, fake_agy};
use serde_json::Value;
use std::path::Path;

/// `agy-bridge usage ARGS` with fake-agy answering `/usage` from `file`.
fn usage(home: &Path, file: &Path, args: &[&str]) -> std::process::Output {
    let mut c = bridge("usage", home, "hello", "1");
    c.env("FAKE_AGY_USAGE", file)
        .args(args)
        .output()
        .expect("run agy-bridge usage")
}

/// How many `-p /usage` runs the argv log holds.
fn usage_runs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"/usage\""))
        .count()
}

/// agy's buckets as agy 1.3 names them: alike in two groups, one reset
/// ahead (2 d 3 h and 30 s from now), one already past (3 h and 30 s ago).
fn two_groups_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("usage-groups.json");
    let data = serde_json::json!({"groups": [
        {"name": "Gemini Models", "buckets": [
            {"id": "gemini-weekly", "name": "Weekly Limit Remaining", "window": "weekly",
             "remaining_fraction": 0.6, "reset_time": rfc3339(now() + 2 * 86_400 + 3 * 3600 + 30)}]},
        {"name": "Claude and GPT models", "buckets": [
            {"id": "3p-weekly", "name": "Weekly Limit Remaining", "window": "weekly",
             "remaining_fraction": 0.25, "reset_time": rfc3339(now() - 3 * 3600 - 30)}]},
    ]});
    std::fs::write(&file, data.to_string()).unwrap();
    file
}

/// What a person reads for those buckets: each group named, the reset as a
/// span and a weekday, a past one as past.
const AHEAD: &str = r"^Gemini Models: Weekly Limit Remaining 60% left, resets in 2 d 3 h \((Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d\d:\d\d UTC\)$";
const PAST: &str = r"^Claude and GPT models: Weekly Limit Remaining 25% left, its reset was due (Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d\d:\d\d UTC \(3 h ago\)$";

#[test]
fn words_name_each_bucket_with_its_group_what_is_left_and_when() {
    let home = tempfile::tempdir().unwrap();
    let out = usage(home.path(), &two_groups_file(home.path()), &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        regex::Regex::new(AHEAD).unwrap().is_match(lines[0]),
        "{text}"
    );
    assert!(
        regex::Regex::new(PAST).unwrap().is_match(lines[1]),
        "{text}"
    );
}

#[test]
fn json_has_the_buckets_and_the_lowest_in_words() {
    let home = tempfile::tempdir().unwrap();
    let out = usage(home.path(), &two_groups_file(home.path()), &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["buckets"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["buckets"][1]["id"], "3p-weekly");
    assert_eq!(v["buckets"][1]["remaining_fraction"], 0.25);
    let lowest = v["lowest"].as_str().unwrap_or_default();
    assert!(regex::Regex::new(PAST).unwrap().is_match(lowest), "{v}");
    assert_eq!(v["ageSecs"], Value::Null);
}

#[test]
fn the_cache_answers_while_younger_than_max_age() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("argv.jsonl");
    let run = |args: &[&str]| {
        let mut c = bridge("usage", home.path(), "hello", "1");
        c.env("FAKE_AGY_ARGV_LOG", &log).args(args);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    run(&["--json", "--max-age-secs", "300"]);
    assert_eq!(usage_runs(&log), 1);
    let cached = run(&["--json", "--max-age-secs", "300"]);
    assert_eq!(usage_runs(&log), 1, "answered from usage-cache.json");
    assert!(cached["ageSecs"].is_u64(), "{cached}");
    assert_eq!(cached["buckets"].as_array().map(Vec::len), Some(3));
    // The default max age is 0: always ask agy.
    run(&["--json"]);
    assert_eq!(usage_runs(&log), 2);
    // The prompt reaches agy as a slash command.
    let argv = std::fs::read_to_string(&log).unwrap();
    assert!(!argv.contains("--disable-slash-commands"), "{argv}");
    assert!(home
        .path()
        .join(".pi/agent/antigravity-bridge/usage-cache.json")
        .is_file());
}

#[test]
fn buckets_from_fake_agy_usage_in_every_output_form() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("usage.json");
    std::fs::write(
        &file,
        r#"{"groups":[{"buckets":[{"id":"gemini-5h","name":"Gemini 5h","window":"5h","remaining_fraction":0.05,"reset_time":"2026-12-01T23:10:00Z"}]}]}"#,
    )
    .unwrap();
    let out = usage(home.path(), &file, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("Gemini 5h 5% left, its reset was due Tue ")
            && text.contains(" 23:10 UTC ("),
        "{text}"
    );
    for format in ["json", "stream-json", "text"] {
        let out = std::process::Command::new(fake_agy())
            .args(["-p", "/usage", "--output-format", format])
            .env("HOME", home.path())
            .env("FAKE_AGY_RECORDING", "hello")
            .env("FAKE_AGY_USAGE", &file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{format}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let quota = Quota::parse(&text).unwrap_or_else(|e| panic!("{format}: {e}: {text}"));
        assert_eq!(quota.lowest().map(|b| b.remaining_fraction), Some(0.05));
        if format == "stream-json" {
            assert!(text.contains(r#""event":"command_result""#), "{text}");
            assert!(text.contains(r#""conversation_id":"""#), "{text}");
            assert!(text.contains(r#""num_turns":0"#), "{text}");
        }
    }
}

#[test]
fn a_missing_agy_is_one_clear_sentence() {
    let home = tempfile::tempdir().unwrap();
    let mut c = bridge("usage", home.path(), "hello", "1");
    let out = c
        .env("AGY_BIN", home.path().join("no-such-agy"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("agy-bridge: error: agy is not installed:"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());
}

/// Unix seconds now.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A `/usage` answer (the `data` object) whose `gemini-5h` bucket is empty
/// and refills in 2 h 10 min 30 s; returns the file and the reset's words.
fn empty_bucket_file(dir: &Path, left: f64) -> (std::path::PathBuf, String) {
    let reset = now() + 2 * 3600 + 10 * 60 + 30;
    let file = dir.join(format!("usage-{left}.json"));
    let data = serde_json::json!({"groups": [{"name": "Gemini", "buckets": [
        {"id": "gemini-weekly", "name": "Gemini weekly", "window": "weekly",
         "remaining_fraction": 0.6, "reset_time": "2099-01-01T00:00:00Z"},
        {"id": "gemini-5h", "name": "Gemini 5-hour", "window": "5h",
         "remaining_fraction": left, "reset_time": rfc3339(reset)},
    ]}]});
    std::fs::write(&file, data.to_string()).unwrap();
    let at = &rfc3339(reset)[11..16];
    (file, format!("it resets at {at} UTC (in 2 h 10 min)"))
}

/// The error message pi sees for one `stream` turn of the quota-error
/// recording.
fn stream_quota_error(home: &Path, usage_file: &Path, log: &Path) -> String {
    let mut c = bridge("stream", home, "quota-error", "8");
    c.env("FAKE_AGY_USAGE", usage_file)
        .env("FAKE_AGY_ARGV_LOG", log)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let request = serde_json::json!({
        "model": "gemini-3.7-flash", "reasoning": "medium", "sessionId": "s1", "cwd": "/tmp",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Refactor the parser"}]}],
    });
    let out = common::stream_output(c.spawn().unwrap(), &request.to_string());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let last: Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    assert_eq!(last["type"], "error", "{text}");
    assert_eq!(last["reason"], "error", "{text}");
    last["errorMessage"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_quota_failure_in_pi_names_the_empty_bucket_and_its_reset() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("argv.jsonl");
    let (file, reset) = empty_bucket_file(home.path(), 0.0);
    let msg = stream_quota_error(home.path(), &file, &log);
    assert!(
        msg.starts_with("agy quota exceeded: You have exhausted your capacity"),
        "{msg}"
    );
    let named = format!("Gemini 5-hour quota is used up (0% left); {reset}.");
    assert!(msg.ends_with(&named), "want {named:?} in {msg}");
    assert!(!msg.contains("Gemini weekly"), "{msg}");
    assert!(!common::pi_retries(&msg), "{msg}");
    assert_eq!(usage_runs(&log), 1);
    // A second failure within minutes: the cached answer (it shows the
    // empty bucket) names it without asking agy again.
    let again = stream_quota_error(home.path(), &home.path().join("gone.json"), &log);
    assert!(again.ends_with(&named), "{again}");
    assert_eq!(usage_runs(&log), 1, "answered from usage-cache.json");
}

#[test]
fn a_cached_quota_without_an_empty_bucket_is_asked_again() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("argv.jsonl");
    // The footer cached an answer before the turn: 5% left.
    let (before, _) = empty_bucket_file(home.path(), 0.05);
    let mut c = bridge("usage", home.path(), "hello", "1");
    let out = c.env("FAKE_AGY_USAGE", &before).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let (file, reset) = empty_bucket_file(home.path(), 0.0);
    let msg = stream_quota_error(home.path(), &file, &log);
    assert!(
        msg.ends_with(&format!(
            "Gemini 5-hour quota is used up (0% left); {reset}."
        )),
        "{msg}"
    );
    assert_eq!(usage_runs(&log), 1, "the cache predates the failure");
}

#[test]
fn a_quota_failure_in_run_names_the_bucket_too() {
    let home = tempfile::tempdir().unwrap();
    let (file, reset) = empty_bucket_file(home.path(), 0.0);
    let mut c = bridge("run", home.path(), "quota-error", "8");
    let out = c
        .env("FAKE_AGY_USAGE", &file)
        .arg("Refactor the parser")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("agy-bridge: error: agy quota exceeded: You have exhausted your capacity"),
        "{err}"
    );
    let want = format!(" Gemini 5-hour quota is used up (0% left); {reset}.\n");
    assert!(err.ends_with(&want), "want {want:?}, got:\n{err}");
}

#[test]
fn an_unreadable_quota_is_said_with_its_reason() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("usage.txt");
    std::fs::write(&file, "no buckets here").unwrap();
    let msg = stream_quota_error(home.path(), &file, &home.path().join("argv.jsonl"));
    assert!(
        msg.starts_with("agy quota exceeded: You have exhausted your capacity"),
        "{msg}"
    );
    let why = "agy's quota could not be read to name the empty bucket: `agy -p /usage` exited with status 2: fake-agy: FAKE_AGY_USAGE";
    assert!(msg.contains(why), "want {why:?} in {msg}");
    assert!(msg.ends_with('.'), "{msg}");
}
