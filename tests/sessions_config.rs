//! Sessions and config state: compatibility with the TypeScript bridge's
//! files, corrupt files set aside, invalid entries dropped, 0600 writes,
//! environment overrides that are never saved, unknown keys kept, the
//! binding rule, and several processes updating sessions.json at once.

use agy_bridge::state::config::{ConfigChange, ConfigStore, Setting, Source};
use agy_bridge::state::file::StateWarning;
use agy_bridge::state::sessions::{SessionEntry, SessionKey, SessionStore};
use agy_bridge::testing::state::{ConfigStoreWithEnv, CONFIG_FILE, SESSIONS_FILE};
use agy_format::agy_args::Effort;
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const ID_A: &str = "0f3c2a9e-1b2c-4d5e-8f90-a1b2c3d4e5f6";
const ID_B: &str = "7d9e1f20-3a4b-4c5d-9e6f-708192a3b4c5";
const ID_C: &str = "ABCDEF01-2345-4678-9ABC-DEF012345678";

const ENV_VARS: [&str; 8] = [
    "PI_CODING_AGENT_DIR",
    "AGY_MODE",
    "AGY_SKIP_PERMISSIONS",
    "AGY_PERMISSIONS",
    "AGY_ALLOW",
    "AGY_DEFAULT_MODEL",
    "AGY_DEFAULT_THINKING",
    "AGY_BRIDGE_STATE_DIR",
];

/// `agy-bridge` with the state directory in `dir` and none of our
/// environment variables inherited from whoever runs the tests.
fn bin(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("agy-bridge").expect("binary builds");
    cmd.timeout(Duration::from_secs(60));
    for var in ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.env("AGY_BRIDGE_STATE_DIR", dir);
    cmd
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).expect("write fixture");
}

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).expect("read state file");
    assert!(text.ends_with("}\n"), "pretty JSON and a newline: {text:?}");
    serde_json::from_str(&text).expect("state file is JSON")
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn corrupt_copies(dir: &Path, name: &str) -> Vec<PathBuf> {
    let prefix = format!("{name}.corrupt-");
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    found.sort();
    found
}

fn entry(id: &str, last: i64, count: u64) -> SessionEntry {
    SessionEntry {
        conversation_id: ConversationId::parse(id).expect("valid id"),
        last_step_idx: last,
        message_count: count,
        context_lost: false,
    }
}

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON value")
}

// ---------------------------------------------------------------------------
// Session keys.

#[test]
fn session_keys_follow_the_original() {
    let cwd = Path::new("/home/u/project");
    assert_eq!(SessionKey::for_request(Some("abc"), cwd), "sid:abc");
    assert_eq!(SessionKey::for_request(None, cwd), "cwd:/home/u/project");
    assert_eq!(
        SessionKey::for_request(Some("  "), cwd),
        "cwd:/home/u/project"
    );
}

// ---------------------------------------------------------------------------
// sessions.json in the TypeScript bridge's format.

#[test]
fn original_sessions_file_loads_and_keeps_unknown_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(SESSIONS_FILE);
    // As the TypeScript bridge writes it (no lastMessageCount), plus one of
    // ours and one entry carrying a field neither of us knows.
    write(
        &path,
        &format!(
            r#"{{
  "sid:old": {{ "conversationId": "{ID_A}", "lastStepIdx": 12 }},
  "cwd:/w": {{ "conversationId": "{ID_B}", "lastStepIdx": 3, "lastMessageCount": 7 }},
  "sid:extra": {{ "conversationId": "{ID_C}", "lastStepIdx": 1.0, "pinned": true, "note": {{ "by": "someone" }} }},
  "sid:noidx": {{ "conversationId": "{ID_A}" }}
}}
"#
        ),
    );
    let store = SessionStore::open(dir.path());
    assert_eq!(store.get("sid:old").unwrap(), Some(entry(ID_A, 12, 0)));
    assert_eq!(store.get("cwd:/w").unwrap(), Some(entry(ID_B, 3, 7)));
    assert_eq!(store.get("sid:extra").unwrap(), Some(entry(ID_C, 1, 0)));
    // A missing lastStepIdx reads as -1, as in the TypeScript bridge.
    assert_eq!(store.get("sid:noidx").unwrap(), Some(entry(ID_A, -1, 0)));
    assert_eq!(store.get("sid:nobody").unwrap(), None);
    assert_eq!(store.take_warnings(), vec![]);

    // The CLI lists them sorted by key.
    let out = bin(dir.path())
        .args(["sessions", "list"])
        .assert()
        .success()
        .stderr("")
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[0].starts_with("KEY "), "{text}");
    assert!(lines[1].starts_with("cwd:/w"), "{text}");
    assert!(
        lines[1].contains(ID_B) && lines[1].ends_with("       3         7"),
        "{text}"
    );
    assert!(
        // Listed as agy spells ids: lowercase.
        lines[2].starts_with("sid:extra") && lines[2].contains(&ID_C.to_ascii_lowercase()),
        "{text}"
    );
    assert!(lines[4].starts_with("sid:old") && lines[4].ends_with("      12         0"));
    assert!(lines[5].starts_with("4 session(s) in "), "{text}");

    // Rewriting one key keeps every other entry and every unknown field,
    // including those of the entry being rewritten. The id is written in
    // lowercase, the spelling agy knows.
    store.update("sid:extra", &entry(ID_C, 5, 2)).unwrap();
    let file = read_json(&path);
    assert_eq!(
        file["sid:extra"],
        json!({ "conversationId": ID_C.to_ascii_lowercase(), "lastStepIdx": 5, "lastMessageCount": 2,
                "pinned": true, "note": { "by": "someone" } })
    );
    assert_eq!(
        file["sid:old"],
        json!({ "conversationId": ID_A, "lastStepIdx": 12, "lastMessageCount": 0 })
    );
    assert_eq!(file.as_object().map(|o| o.len()), Some(4));
}

#[test]
fn sessions_list_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    bin(dir.path())
        .args(["sessions", "set", "sid:s1", ID_A, "-1"])
        .assert()
        .success()
        .stdout("set sid:s1\n");
    bin(dir.path())
        .args(["sessions", "set", "cwd:/a b", ID_B, "9", "4"])
        .assert()
        .success();
    let out = bin(dir.path())
        .args(["sessions", "--json"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let v = stdout_json(&out);
    assert_eq!(
        v["sessions"],
        json!([
            { "key": "cwd:/a b", "conversationId": ID_B, "lastStepIdx": 9, "lastMessageCount": 4 },
            { "key": "sid:s1", "conversationId": ID_A, "lastStepIdx": -1, "lastMessageCount": 0 },
        ])
    );
    assert_eq!(v["path"], json!(dir.path().join(SESSIONS_FILE)));

    // clear, then an empty list.
    bin(dir.path())
        .args(["sessions", "clear"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("cleared 2 session(s) in "));
    assert_eq!(read_json(&dir.path().join(SESSIONS_FILE)), json!({}));
    bin(dir.path())
        .arg("sessions")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("no sessions ("));
}

#[test]
fn sessions_set_rejects_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    bin(dir.path())
        .args(["sessions", "set", "sid:x", "../../etc/passwd", "1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("not a conversation id"));
    bin(dir.path())
        .args(["sessions", "set", "sid:x", ID_A, "-2"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("LAST_IDX must be -1 or more"));
    assert!(!dir.path().join(SESSIONS_FILE).exists());
}

// ---------------------------------------------------------------------------
// Corrupt files and invalid entries.

#[test]
fn corrupt_sessions_file_is_set_aside_and_reported() {
    for (name, content, reason) in [
        (
            "bad json",
            "{\"sid:a\": {\"conversationId\": ",
            "not valid JSON",
        ),
        (
            "wrong shape",
            "[1, 2, 3]\n",
            "expected a JSON object, found an array",
        ),
        ("control bytes", "\u{0}\u{1}garbage", "not valid JSON"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(SESSIONS_FILE);
        write(&path, content);

        let out = bin(dir.path())
            .args(["sessions", "list"])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("no sessions"),
            "{name}"
        );
        assert!(
            stderr.starts_with("agy-bridge: warning: ")
                && stderr.contains("sessions.json is corrupt")
                && stderr.contains(reason)
                && stderr.contains("sessions.json.corrupt-"),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(!path.exists(), "{name}: the corrupt file was moved");
        let copies = corrupt_copies(dir.path(), SESSIONS_FILE);
        assert_eq!(copies.len(), 1, "{name}");
        assert_eq!(fs::read_to_string(&copies[0]).unwrap(), content, "{name}");

        // The store works afterwards.
        bin(dir.path())
            .args(["sessions", "set", "sid:a", ID_A, "0"])
            .assert()
            .success()
            .stderr("");
        assert_eq!(read_json(&path)["sid:a"]["conversationId"], json!(ID_A));
    }
}

#[test]
fn corrupt_file_found_by_an_update_is_set_aside_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join(SESSIONS_FILE), "not json");
    let store = SessionStore::open(dir.path());
    store.update("sid:a", &entry(ID_A, 1, 1)).unwrap();
    let warnings = store.take_warnings();
    assert!(
        matches!(
            &warnings[..],
            [StateWarning::SetAside {
                moved_to: Some(_),
                ..
            }]
        ),
        "{warnings:?}"
    );
    assert_eq!(
        store.list().unwrap(),
        vec![("sid:a".to_string(), entry(ID_A, 1, 1))]
    );
    // A second set-aside in the same second gets its own name.
    write(&dir.path().join(SESSIONS_FILE), "still not json");
    assert_eq!(store.list().unwrap(), vec![]);
    assert_eq!(corrupt_copies(dir.path(), SESSIONS_FILE).len(), 2);
}

#[test]
fn invalid_entries_are_dropped_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(SESSIONS_FILE);
    write(
        &path,
        &format!(
            r#"{{
  "sid:good": {{ "conversationId": "{ID_A}", "lastStepIdx": 4, "lastMessageCount": 2 }},
  "sid:not-object": "{ID_B}",
  "sid:no-id": {{ "lastStepIdx": 4 }},
  "sid:bad-id": {{ "conversationId": "--help", "lastStepIdx": 4 }},
  "sid:number-id": {{ "conversationId": 42 }},
  "sid:bad-idx": {{ "conversationId": "{ID_B}", "lastStepIdx": "4" }},
  "sid:low-idx": {{ "conversationId": "{ID_B}", "lastStepIdx": -7 }},
  "sid:neg-count": {{ "conversationId": "{ID_B}", "lastStepIdx": 1, "lastMessageCount": -1 }},
  "sid:frac-count": {{ "conversationId": "{ID_B}", "lastStepIdx": 1, "lastMessageCount": 1.5 }}
}}"#
        ),
    );
    let out = bin(dir.path())
        .args(["sessions", "list", "--json"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(
        stdout_json(&out)["sessions"],
        json!([{ "key": "sid:good", "conversationId": ID_A, "lastStepIdx": 4, "lastMessageCount": 2 }])
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 8, "{stderr}");
    for (key, why) in [
        ("sid:bad-id", "not a conversation id"),
        ("sid:bad-idx", "lastStepIdx: expected an integer >= -1"),
        (
            "sid:frac-count",
            "lastMessageCount: expected an integer >= 0",
        ),
        ("sid:low-idx", "lastStepIdx: expected an integer >= -1"),
        (
            "sid:neg-count",
            "lastMessageCount: expected an integer >= 0",
        ),
        ("sid:no-id", "no conversationId"),
        ("sid:not-object", "expected an object, found a string"),
        (
            "sid:number-id",
            "conversationId: expected a string, found a number",
        ),
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("dropped entry {key:?}: {why}"))),
            "{key}: {stderr}"
        );
    }
    // The file itself is left alone by reading; the next write drops them.
    assert!(corrupt_copies(dir.path(), SESSIONS_FILE).is_empty());
    let store = SessionStore::open(dir.path());
    store.update("sid:new", &entry(ID_B, 0, 1)).unwrap();
    let keys: Vec<String> = read_json(&path)
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["sid:good", "sid:new"]);
}

// ---------------------------------------------------------------------------
// Writes.

#[test]
fn written_files_are_0600_in_a_0700_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("state").join("nested");
    bin(&dir)
        .args(["sessions", "set", "sid:a", ID_A, "3", "1"])
        .assert()
        .success();
    bin(&dir)
        .args(["config", "thinking", "high"])
        .assert()
        .success();
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&root.path().join("state")), 0o700);
    assert_eq!(mode_of(&dir.join(SESSIONS_FILE)), 0o600);
    assert_eq!(mode_of(&dir.join(CONFIG_FILE)), 0o600);
    // An existing file with looser permissions is replaced by a 0600 one.
    fs::set_permissions(dir.join(CONFIG_FILE), fs::Permissions::from_mode(0o644)).unwrap();
    bin(&dir)
        .args(["config", "mode", "plan"])
        .assert()
        .success();
    assert_eq!(mode_of(&dir.join(CONFIG_FILE)), 0o600);
    // No temporary files are left behind.
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "config.json.lock",
            "sessions.json",
            "sessions.json.lock"
        ]
    );
}

#[test]
fn home_is_the_default_location() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = bin(home.path());
    cmd.env_remove("AGY_BRIDGE_STATE_DIR")
        .env("HOME", home.path());
    cmd.args(["config", "model", "pro"]).assert().success();
    let path = home
        .path()
        .join(".pi/agent/antigravity-bridge")
        .join(CONFIG_FILE);
    assert_eq!(read_json(&path), json!({ "defaultModel": "pro" }));
}

#[test]
fn pi_coding_agent_dir_moves_the_state_and_agy_bridge_state_dir_still_wins() {
    let home = tempfile::tempdir().expect("tempdir");
    let pi_dir = home.path().join("pi-agent");
    let mut cmd = bin(home.path());
    cmd.env_remove("AGY_BRIDGE_STATE_DIR")
        .env("HOME", home.path())
        .env("PI_CODING_AGENT_DIR", &pi_dir);
    cmd.args(["config", "model", "pro"]).assert().success();
    let path = pi_dir.join("antigravity-bridge").join(CONFIG_FILE);
    assert_eq!(read_json(&path), json!({ "defaultModel": "pro" }));
    assert!(!home.path().join(".pi").exists());

    let own = home.path().join("own");
    let mut cmd = bin(&own);
    cmd.env("HOME", home.path())
        .env("PI_CODING_AGENT_DIR", &pi_dir);
    cmd.args(["config", "model", "opus"]).assert().success();
    assert_eq!(
        read_json(&own.join(CONFIG_FILE)),
        json!({ "defaultModel": "opus" })
    );
    assert_eq!(read_json(&path), json!({ "defaultModel": "pro" }));
}

// ---------------------------------------------------------------------------
// The binding rule.

#[test]
fn a_run_that_failed_to_bind_never_overwrites_a_good_binding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SessionStore::open(dir.path());
    let key = SessionKey::for_request(Some("s1"), Path::new("/w"));

    // Turn 1 binds.
    assert!(store.update_if_bound(&key, Some(ID_A), 7, 2).unwrap());
    // Turn 2 fails before binding: nothing changes (and nothing is written).
    let before = fs::read(store.path()).unwrap();
    assert!(!store.update_if_bound(&key, None, -1, 4).unwrap());
    assert_eq!(store.get(&key).unwrap(), Some(entry(ID_A, 7, 2)));
    assert_eq!(fs::read(store.path()).unwrap(), before);
    // Nor does it create an entry where there was none.
    assert!(!store.update_if_bound("sid:other", None, 3, 1).unwrap());
    assert_eq!(store.get("sid:other").unwrap(), None);
    // An id that is not one is an error, and leaves the binding alone.
    assert!(store.update_if_bound(&key, Some("nope"), 9, 9).is_err());
    assert_eq!(store.get(&key).unwrap(), Some(entry(ID_A, 7, 2)));
    // Turn 3 binds again (resumed): the binding moves on.
    assert!(store.update_if_bound(&key, Some(ID_A), 12, 4).unwrap());
    assert_eq!(store.get(&key).unwrap(), Some(entry(ID_A, 12, 4)));

    assert!(store.remove(&key).unwrap());
    assert!(!store.remove(&key).unwrap());
    assert_eq!(store.get(&key).unwrap(), None);
}

// ---------------------------------------------------------------------------
// config.json.

#[test]
fn config_status_defaults_file_and_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    // Nothing anywhere: all defaults, and no file is created by looking.
    let out = bin(dir.path()).arg("config").output().expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "mode         accept-edits  default\n\
             permissions  ask           default\n\
             model        flash         default\n\
             thinking     medium        default\n\
             allow        0 rules       default, after 11 built-in read-only tools\n\
             config file:   {}\n\
             sessions file: {}\n",
            path.display(),
            dir.path().join(SESSIONS_FILE).display()
        )
    );
    let created: Vec<_> = fs::read_dir(dir.path())
        .expect("list state dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(created.is_empty(), "looking created {created:?}");

    write(
        &path,
        r#"{ "mode": "plan", "skipPermissions": false, "defaultThinking": "HIGH" }"#,
    );
    let out = bin(dir.path())
        .arg("config")
        .env("AGY_MODE", "accept-edits")
        .env("AGY_DEFAULT_MODEL", "opus")
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().take(4).collect();
    assert_eq!(
        lines,
        [
            "mode         accept-edits  env AGY_MODE (file has plan)",
            "permissions  deny          file (skipPermissions)",
            "model        opus          env AGY_DEFAULT_MODEL",
            "thinking     high          file",
        ]
    );

    // --json, for the pi extension's /agy command (the old switch's words
    // in AGY_PERMISSIONS).
    let out = bin(dir.path())
        .args(["config", "--json"])
        .env("AGY_PERMISSIONS", "1")
        .output()
        .expect("run");
    assert!(out.status.success());
    let v = stdout_json(&out);
    assert_eq!(v["mode"], json!("plan"));
    assert_eq!(v["permissions"], json!("allow"));
    assert_eq!(v["allow"], json!([]));
    assert_eq!(v["defaultModel"], json!("flash"));
    assert_eq!(v["defaultThinking"], json!("high"));
    assert_eq!(v["configPath"], json!(path));
    assert_eq!(v["warnings"], json!([]));
    assert_eq!(
        v["settings"][1],
        json!({ "setting": "permissions", "key": "skipPermissions", "value": "allow",
                "source": "env", "envVar": "AGY_PERMISSIONS", "fileValue": "deny" })
    );
    assert_eq!(v["settings"][2]["source"], json!("default"));
}

#[test]
fn env_values_win_and_are_never_saved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    let out = bin(dir.path())
        .args(["config", "thinking", "high"])
        .env("AGY_MODE", "plan")
        .env("AGY_PERMISSIONS", "0")
        .env("AGY_DEFAULT_MODEL", "pro")
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("saved thinking = high in {}\n\n", path.display())),
        "{text}"
    );
    assert!(
        text.contains("mode         plan          env AGY_MODE\n"),
        "{text}"
    );
    // Only the change is in the file: nothing from the environment.
    assert_eq!(read_json(&path), json!({ "defaultThinking": "high" }));

    // Changing a setting the environment overrides: saved, and we say the
    // variable still wins.
    let out = bin(dir.path())
        .args(["config", "mode", "accept-edits"])
        .env("AGY_MODE", "plan")
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "note: AGY_MODE=\"plan\" is set in the environment and still wins over the file\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("mode         plan          env AGY_MODE (file has accept-edits)\n"),
        "{text}"
    );
    assert_eq!(
        read_json(&path),
        json!({ "defaultThinking": "high", "mode": "accept-edits" })
    );

    // The same in JSON.
    let out = bin(dir.path())
        .args(["config", "permissions", "off", "--json"])
        .env("AGY_PERMISSIONS", "true")
        .output()
        .expect("run");
    assert!(out.status.success());
    let v = stdout_json(&out);
    assert_eq!(
        v["saved"],
        json!({ "setting": "permissions", "key": "permissions", "value": "deny",
                "overriddenByEnv": "AGY_PERMISSIONS" })
    );
    assert_eq!(v["permissions"], json!("allow"));
    assert_eq!(read_json(&path)["permissions"], json!("deny"));
    assert_eq!(read_json(&path).get("skipPermissions"), None);
}

#[test]
fn config_keys_unknown_to_us_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    // The original's full config object.
    let original = json!({
        "engine": "stream-json",
        "acp": { "bin": "", "permissions": "auto" },
        "mode": "accept-edits",
        "skipPermissions": true,
        "defaultModel": "flash",
        "defaultThinking": "medium",
        "askTool": true,
        "bridgeTools": "all",
        "digest": false,
        "systemPrompt": true,
        "patchCleanupNotified": false
    });
    write(&path, &serde_json::to_string_pretty(&original).unwrap());
    for args in [
        &["config", "mode", "plan"][..],
        &["config", "permissions", "off"],
        &["config", "model", "  gemini 3.5 flash high "],
        &["config", "thinking", "low"],
    ] {
        bin(dir.path()).args(args).assert().success().stderr("");
    }
    let mut expected = original;
    expected["mode"] = json!("plan");
    // Saved under the new key; the TypeScript bridge's switch is left as it was.
    expected["permissions"] = json!("deny");
    expected["defaultModel"] = json!("gemini 3.5 flash high");
    expected["defaultThinking"] = json!("low");
    assert_eq!(read_json(&path), expected);
}

#[test]
fn invalid_config_values_and_env_values_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    write(
        &path,
        r#"{ "mode": "yolo", "skipPermissions": "false", "defaultModel": 7, "defaultThinking": "max", "digest": true }"#,
    );
    let store = ConfigStore::open(dir.path());
    // A variable holding a value it does not take is an error naming it and
    // its values, never a default (AGY_MODE=plna must not allow file edits).
    for (var, value, takes) in [
        ("AGY_MODE", "plna", "expected one of: accept-edits, plan"),
        ("AGY_PERMISSIONS", "maybe", "expected ask, allow or deny"),
        ("AGY_ALLOW", "view_file; run command", "TOOL: PATTERN"),
        (
            "AGY_DEFAULT_THINKING",
            "max",
            "expected one of: low, medium, high",
        ),
    ] {
        let env = |name: &str| (name == var).then(|| value.to_string());
        let err = store.load_with_env(&env).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{var}=\"{value}\" is not valid: ")) && err.contains(takes),
            "{err}"
        );
        let err = store
            .save_change_with_env(ConfigChange::Mode(Mode::Plan), &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains(var), "{err}");
    }
    let env = |name: &str| (name == "AGY_DEFAULT_THINKING").then(|| "HIGH".to_string());
    let status = store.load_with_env(&env).unwrap();
    assert_eq!(status.config.mode, Mode::AcceptEdits);
    assert_eq!(status.source(Setting::Mode), Some(Source::Default));
    assert_eq!(status.config.default_model, "flash");
    assert_eq!(status.config.default_thinking, Effort::High);
    assert_eq!(status.source(Setting::Thinking), Some(Source::Env));
    let shown: Vec<String> = status.warnings.iter().map(ToString::to_string).collect();
    let p = path.display();
    assert_eq!(
        shown,
        [
            format!("{p}: ignoring \"mode\": unknown mode \"yolo\" (expected one of: accept-edits, plan); using the default"),
            format!("{p}: ignoring \"skipPermissions\": expected true or false, found a string; using the default"),
            format!("{p}: ignoring \"defaultModel\": expected a string, found a number; using the default"),
            format!("{p}: ignoring \"defaultThinking\": unknown effort \"max\" (expected one of: low, medium, high); using the default"),
        ]
    );
    // Saving one key leaves the others (even invalid ones) as they were.
    store
        .save_change_with_env(ConfigChange::DefaultThinking(Effort::Low), &no_env)
        .unwrap();
    assert_eq!(
        read_json(&path),
        json!({ "mode": "yolo", "skipPermissions": "false", "defaultModel": 7,
                "defaultThinking": "low", "digest": true })
    );
    // An empty model alias is refused.
    assert!(store
        .save_change_with_env(ConfigChange::DefaultModel(" ".into()), &no_env)
        .is_err());
    bin(dir.path())
        .args(["config", "model", ""])
        .assert()
        .failure()
        .stderr(predicate::str::contains("invalid model alias"));
    bin(dir.path())
        .args(["config", "mode", "yolo"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("invalid value 'yolo'"));
}

#[test]
fn config_permissions_takes_the_three_words_and_the_old_switch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    write(&path, r#"{ "skipPermissions": true }"#);
    for (word, saved) in [
        ("deny", "deny"),
        ("on", "allow"),
        ("off", "deny"),
        ("ask", "ask"),
    ] {
        let out = bin(dir.path())
            .args(["config", "permissions", word])
            .output()
            .expect("run");
        assert!(out.status.success(), "{word}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(&format!("saved permissions = {saved} in ")),
            "{text}"
        );
        assert_eq!(
            read_json(&path),
            json!({ "skipPermissions": true, "permissions": saved })
        );
    }
    bin(dir.path())
        .args(["config", "permissions", "maybe"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("expected ask, allow or deny"));
    // The old variable is no longer read: one warning line says so, and
    // the setting is what it would be without it.
    let warning =
        "agy-bridge: warning: AGY_SKIP_PERMISSIONS is no longer read; set AGY_PERMISSIONS=allow|deny|ask\n";
    for (with_new, value, shown) in [
        (
            true,
            "on",
            "permissions  deny          env AGY_PERMISSIONS (file has ask)\n",
        ),
        (false, "on", "permissions  ask           file\n"),
        (false, "maybe", "permissions  ask           file\n"),
    ] {
        let mut cmd = bin(dir.path());
        cmd.arg("config").env("AGY_SKIP_PERMISSIONS", value);
        if with_new {
            cmd.env("AGY_PERMISSIONS", "deny");
        }
        let out = cmd.output().expect("run");
        assert!(out.status.success(), "{value}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(shown), "{value}: {stdout}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), warning);
    }
}

#[test]
fn config_allow_lists_adds_and_removes_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    let out = bin(dir.path())
        .args(["config", "allow", "add", "run_command: cargo test*"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("added run_command: cargo test*\n"),
        "{text}"
    );
    assert!(text.contains("  view_file: *  (built in)\n"), "{text}");
    assert!(text.contains("  run_command: cargo test*\n"), "{text}");
    assert_eq!(
        read_json(&path),
        json!({ "allow": ["run_command: cargo test*"] })
    );
    // Words are joined; the same rule twice is one.
    bin(dir.path())
        .args(["config", "allow", "add", "run_command:", "cargo", "test*"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "run_command: cargo test* is already there",
        ));

    let out = bin(dir.path())
        .args(["config", "allow", "--json"])
        .output()
        .expect("run");
    let v = stdout_json(&out);
    let rules = v["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 12);
    assert_eq!(rules[0], json!({ "rule": "view_file: *", "builtIn": true }));
    assert_eq!(
        rules[11],
        json!({ "rule": "run_command: cargo test*", "builtIn": false })
    );
    assert_eq!(v["source"], json!("file"));
    assert_eq!(v["permissions"], json!("ask"));

    // AGY_ALLOW replaces the file's list; a removal still edits the file
    // and says the variable wins.
    let out = bin(dir.path())
        .args([
            "config",
            "allow",
            "remove",
            "run_command: cargo test*",
            "--json",
        ])
        .env("AGY_ALLOW", "write_to_file: docs/*")
        .output()
        .expect("run");
    assert!(out.status.success());
    let v = stdout_json(&out);
    assert_eq!(
        v["saved"],
        json!({ "remove": "run_command: cargo test*", "changed": true,
                "overriddenByEnv": "AGY_ALLOW" })
    );
    assert_eq!(v["rules"][11]["rule"], json!("write_to_file: docs/*"));
    assert_eq!(read_json(&path), json!({ "allow": [] }));
    bin(dir.path())
        .args(["config", "allow", "add", "bad tool: x"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "the tool name contains whitespace",
        ));
    let out = bin(dir.path())
        .args(["config", "--json"])
        .env("AGY_ALLOW", "view_file; run_command: make")
        .output()
        .expect("run");
    let v = stdout_json(&out);
    assert_eq!(v["allow"], json!(["view_file: *", "run_command: make"]));
    assert_eq!(v["allowRules"]["source"], json!("env"));
}

#[test]
fn corrupt_config_file_is_set_aside_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONFIG_FILE);
    write(&path, "{ \"mode\": \"plan\", ");
    let out = bin(dir.path()).arg("config").output().expect("run");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("agy-bridge: warning: ")
            && stderr.contains("config.json is corrupt (not valid JSON"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("mode         accept-edits  default"));
    assert_eq!(corrupt_copies(dir.path(), CONFIG_FILE).len(), 1);
    assert!(!path.exists());

    // A save over a corrupt file sets it aside too and starts afresh.
    write(&path, "\"just a string\"");
    let out = bin(dir.path())
        .args(["config", "thinking", "low", "--json"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected a JSON object, found a string"));
    assert_eq!(
        stdout_json(&out)["warnings"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(read_json(&path), json!({ "defaultThinking": "low" }));
    assert_eq!(corrupt_copies(dir.path(), CONFIG_FILE).len(), 2);
}

// ---------------------------------------------------------------------------
// Several writers at once.

/// 8 processes × 25 `agy-bridge sessions set` runs each, all at once, each
/// run setting its own key: every one of the 200 keys must survive.
#[test]
fn hammer_processes_updating_different_keys_lose_nothing() {
    const WORKERS: usize = 8;
    const PER_WORKER: usize = 25;
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_agy-bridge"));
    // Something already there, which must survive too.
    SessionStore::open(dir.path())
        .update("cwd:/pre-existing", &entry(ID_C, 99, 9))
        .unwrap();

    let id_for = |w: usize, i: usize| format!("{:08x}-0000-4000-8000-{:012x}", w, i);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(WORKERS));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let exe = exe.clone();
            let dir = dir.path().to_path_buf();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..PER_WORKER {
                    let mut cmd = std::process::Command::new(&exe);
                    for var in ENV_VARS {
                        cmd.env_remove(var);
                    }
                    let out = cmd
                        .env("AGY_BRIDGE_STATE_DIR", &dir)
                        .args(["sessions", "set"])
                        .arg(format!("sid:w{w}-k{i}"))
                        .arg(id_for(w, i))
                        .arg((i as i64 * 10 + w as i64).to_string())
                        .arg((w * 100 + i).to_string())
                        .output()
                        .expect("spawn agy-bridge");
                    assert!(
                        out.status.success() && out.stderr.is_empty(),
                        "worker {w} run {i}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker");
    }

    let store = SessionStore::open(dir.path());
    let list = store.list().unwrap();
    assert_eq!(store.take_warnings(), vec![]);
    assert_eq!(list.len(), WORKERS * PER_WORKER + 1);
    for w in 0..WORKERS {
        for i in 0..PER_WORKER {
            assert_eq!(
                store.get(&format!("sid:w{w}-k{i}")).unwrap(),
                Some(entry(
                    &id_for(w, i),
                    i as i64 * 10 + w as i64,
                    (w * 100 + i) as u64
                )),
                "worker {w} key {i}"
            );
        }
    }
    assert_eq!(
        store.get("cwd:/pre-existing").unwrap(),
        Some(entry(ID_C, 99, 9))
    );
    assert_eq!(mode_of(store.path()), 0o600);
}

/// The same within one process: threads, each with its own store handle,
/// updating their own keys repeatedly; the last value of each key wins.
#[test]
fn hammer_threads_last_update_of_each_key_wins() {
    const THREADS: usize = 8;
    const ROUNDS: u64 = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let store = SessionStore::open(&dir);
                for round in 0..ROUNDS {
                    for k in 0..3 {
                        store
                            .update(&format!("sid:t{t}-{k}"), &entry(ID_A, round as i64, round))
                            .expect("update");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let list = SessionStore::open(dir.path()).list().unwrap();
    assert_eq!(list.len(), THREADS * 3);
    for (key, e) in list {
        assert_eq!(e, entry(ID_A, ROUNDS as i64 - 1, ROUNDS - 1), "{key}");
    }
}

/// A second `SessionStore` sees a first one's writes at once (no caching).
#[test]
fn stores_read_fresh() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = SessionStore::open(dir.path());
    let b = SessionStore::open(dir.path());
    a.update("sid:x", &entry(ID_A, 1, 1)).unwrap();
    assert_eq!(b.get("sid:x").unwrap(), Some(entry(ID_A, 1, 1)));
    b.update("sid:y", &entry(ID_B, 2, 2)).unwrap();
    assert_eq!(a.list().unwrap().len(), 2);
    assert_eq!(a.clear().unwrap(), 2);
    assert_eq!(b.list().unwrap(), vec![]);
}
