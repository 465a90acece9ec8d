//! `agy-bridge usage` end to end with fake-agy as agy: the words and
//! `--json`, the cache honoured with `--max-age-secs` (counted in
//! fake-agy's argv log), `FAKE_AGY_USAGE`'s buckets in all of fake-agy's
//! output forms, and one clear sentence when agy is missing.

mod common;

use agy_bridge::format::quota::Quota;
use common::{bridge, fake_agy};
use serde_json::Value;
use std::path::Path;

fn usage(home: &Path, args: &[&str]) -> std::process::Output {
    let mut c = bridge("usage", home, "hello", "1");
    c.args(args).output().expect("run agy-bridge usage")
}

/// How many `-p /usage` runs the argv log holds.
fn usage_runs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"/usage\""))
        .count()
}

#[test]
fn words_name_each_bucket_with_what_is_left_and_when() {
    let home = tempfile::tempdir().unwrap();
    let out = usage(home.path(), &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "Gemini weekly 73% left, resets 2026-12-07T00:00:00Z\n\
         Gemini 5-hour 42% left, resets 2026-12-01T23:10:00Z\n\
         Third-party weekly 91% left, resets 2026-12-07T00:00:00Z\n"
    );
}

#[test]
fn json_has_the_buckets_and_the_lowest_in_words() {
    let home = tempfile::tempdir().unwrap();
    let out = usage(home.path(), &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["buckets"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["buckets"][1]["id"], "gemini-5h");
    assert_eq!(v["buckets"][1]["remaining_fraction"], 0.42);
    assert_eq!(
        v["lowest"],
        "Gemini 5-hour 42% left, resets 2026-12-01T23:10:00Z"
    );
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
    let mut c = bridge("usage", home.path(), "hello", "1");
    let out = c.env("FAKE_AGY_USAGE", &file).output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Gemini 5h 5% left, resets 2026-12-01T23:10:00Z\n"
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
