//! `agy --version` is asked once per agy binary, not once per turn: the
//! answer is kept on disk (`agy-version.json` in the state directory) keyed
//! by the binary's resolved path, size and modification time, so a second
//! `agy-bridge` process starts agy only for the turn itself, and a changed
//! binary is asked again.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One `agy-bridge run` turn with `agy` as AGY_BIN; every agy invocation it
/// made, in order (fake-agy's argv log).
fn turn(home: &Path, agy: &Path) -> Vec<Vec<String>> {
    let log = home.join("argv.jsonl");
    let _ = std::fs::remove_file(&log);
    let out = common::bridge("run", home, "hello", "100")
        .env("AGY_BIN", agy)
        .env("FAKE_AGY_ARGV_LOG", &log)
        .arg("Say hello")
        .output()
        .expect("run agy-bridge");
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(&log)
        .expect("argv log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("argv line"))
        .collect()
}

fn version_probes(invocations: &[Vec<String>]) -> usize {
    invocations.iter().filter(|a| *a == &["--version"]).count()
}

/// The turn itself ran with stream-json binding (fake-agy's "hello" says it
/// is agy 1.2.8, new enough): the remembered answer is the right one.
fn assert_turn_binds_by_stream_json(invocations: &[Vec<String>]) {
    let turn: Vec<&Vec<String>> = invocations
        .iter()
        .filter(|a| a.iter().any(|x| x == "-p"))
        .collect();
    assert_eq!(turn.len(), 1, "{invocations:?}");
    assert!(
        turn[0]
            .windows(2)
            .any(|w| w[0] == "--output-format" && w[1] == "stream-json"),
        "{invocations:?}"
    );
}

#[test]
fn agy_version_is_asked_once_per_binary_across_processes() {
    let home = tempfile::tempdir().expect("tempdir");
    let bin_dir = home.path().join("bin");
    std::fs::create_dir_all(&bin_dir).expect("bin dir");
    // A copy of fake-agy this test may touch and grow.
    let agy: PathBuf = bin_dir.join("agy");
    std::fs::copy(common::fake_agy(), &agy).expect("copy fake-agy");

    let first = turn(home.path(), &agy);
    assert_eq!(version_probes(&first), 1, "{first:?}");
    // `--version` and `--help` are asked together, before the turn.
    let mut probes: Vec<&Vec<String>> = first[..2].iter().collect();
    probes.sort();
    assert_eq!(
        probes,
        [&vec!["--help".to_string()], &vec!["--version".to_string()]]
    );
    assert_turn_binds_by_stream_json(&first);
    // fake-agy 1.2.8 lists the flag, so the turn passes it.
    assert!(
        first[2].iter().any(|a| a == "--disable-slash-commands"),
        "{first:?}"
    );

    // A second process: no `--version` at all.
    let second = turn(home.path(), &agy);
    assert_eq!(version_probes(&second), 0, "{second:?}");
    assert_turn_binds_by_stream_json(&second);

    let cache_file = home
        .path()
        .join(".pi/agent/antigravity-bridge/agy-version.json");
    let cache: Value =
        serde_json::from_str(&std::fs::read_to_string(&cache_file).expect("cache file"))
            .expect("cache json");
    let canonical = std::fs::canonicalize(&agy).expect("canonical");
    let entry = &cache[canonical.display().to_string()];
    assert_eq!(entry["version"], serde_json::json!([1, 2, 8]), "{cache}");
    assert_eq!(
        entry["binary"]["size"],
        std::fs::metadata(&agy).expect("meta").len()
    );

    // Touched (same bytes, a new modification time): asked again, once.
    touch(&agy, SystemTime::now() + Duration::from_secs(5));
    let touched = turn(home.path(), &agy);
    assert_eq!(version_probes(&touched), 1, "{touched:?}");
    assert_eq!(version_probes(&turn(home.path(), &agy)), 0);

    // Replaced by a different file (another size): asked again, once.
    let mut bytes = std::fs::read(&agy).expect("read agy");
    bytes.extend_from_slice(b"\0replaced");
    let replacement = bin_dir.join("agy.new");
    std::fs::write(&replacement, &bytes).expect("write replacement");
    std::fs::set_permissions(
        &replacement,
        std::fs::metadata(&agy).expect("meta").permissions(),
    )
    .expect("chmod");
    std::fs::rename(&replacement, &agy).expect("replace agy");
    let replaced = turn(home.path(), &agy);
    assert_eq!(version_probes(&replaced), 1, "{replaced:?}");
    assert_turn_binds_by_stream_json(&replaced);
    assert_eq!(version_probes(&turn(home.path(), &agy)), 0);
}

fn touch(path: &Path, when: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(when)
        .expect("set mtime");
}
