//! pi's `/agy`, as a new user tries it (issue 19, item 8): every answer is
//! words with the values; a bare setting shows its value; an unknown word
//! lists the commands; the overview shows every setting, pi's tools and the
//! session; `clear` forgets this session only, `clear all` needs a yes.

mod common;

use common::{bridge, sessions_json};
use std::path::Path;

/// `/agy WORDS` in pi session `sid`: (exit ok, stdout). Settings as the
/// user has them by default (no `AGY_PERMISSIONS`: these tests read them).
fn slash(home: &Path, sid: &str, words: &[&str]) -> (bool, String) {
    let out = bridge("slash", home, "hello", "1")
        .env_remove("AGY_PERMISSIONS")
        .args(["--session-id", sid, "--pi-tools", "off", "--"])
        .args(words)
        .output()
        .expect("agy-bridge slash");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn bind(home: &Path, key: &str, id: &str) {
    let ok = bridge("sessions", home, "hello", "1")
        .args(["set", key, id, "3"])
        .status()
        .expect("sessions set")
        .success();
    assert!(ok);
}

#[test]
fn an_unknown_word_lists_the_commands_instead_of_raw_usage() {
    let home = tempfile::tempdir().expect("tmp");
    let (ok, text) = slash(home.path(), "a", &["bogus"]);
    assert!(!ok);
    assert!(text.contains("/agy does not know \"bogus\""), "{text}");
    for command in ["/agy mode", "/agy permissions", "/agy clear", "/agy tools"] {
        assert!(text.contains(command), "{command} missing: {text}");
    }
    assert!(!text.contains("Usage:"), "no clap usage: {text}");
}

#[test]
fn a_bare_setting_shows_its_value_and_what_each_value_means() {
    let home = tempfile::tempdir().expect("tmp");
    let (ok, text) = slash(home.path(), "a", &["mode"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with("mode is accept-edits (the default)"),
        "{text}"
    );
    assert!(text.contains("plan: agy plans first"), "{text}");
    let (ok, text) = slash(home.path(), "a", &["permissions"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with("permissions is ask (the default)"),
        "{text}"
    );
    assert!(text.contains("--dangerously-skip-permissions"), "{text}");
    for value in ["ask (the default): ", "allow: ", "deny: "] {
        assert!(text.contains(&format!("\n  {value}")), "{value}: {text}");
    }
    let (ok, text) = slash(home.path(), "a", &["permissions", "maybe"]);
    assert!(!ok);
    assert!(
        text.contains("\"maybe\" is not a value of permissions"),
        "{text}"
    );
    let (ok, text) = slash(home.path(), "a", &["mode", "plan"]);
    assert!(ok && text.contains("mode is now plan"), "{text}");
    let (_, text) = slash(home.path(), "a", &["mode"]);
    assert!(text.starts_with("mode is plan (set with /agy)"), "{text}");
}

#[test]
fn the_overview_shows_every_setting_pis_tools_and_the_session() {
    let home = tempfile::tempdir().expect("tmp");
    let id = "0b7c8d2e-8a53-4f0b-9a53-1c2d3e4f5a6b";
    bind(home.path(), "sid:a", id);
    let (ok, text) = slash(home.path(), "a", &[]);
    assert!(ok, "{text}");
    for line in [
        "mode ",
        "permissions  ask (the default)",
        "model ",
        "thinking ",
        "warm agy ",
        "allow        0 rules of yours + 11 built-in read-only tools",
    ] {
        assert!(text.contains(line), "{line:?} missing: {text}");
    }
    assert!(text.contains("tools        off (this pi process"), "{text}");
    assert!(text.contains(&format!("agy conversation {id}")), "{text}");
}

#[test]
fn clear_forgets_this_session_only_and_clear_all_needs_a_yes() {
    let home = tempfile::tempdir().expect("tmp");
    let (a, b) = (
        "0b7c8d2e-8a53-4f0b-9a53-1c2d3e4f5a6b",
        "1b7c8d2e-8a53-4f0b-9a53-1c2d3e4f5a6b",
    );
    bind(home.path(), "sid:a", a);
    bind(home.path(), "sid:b", b);
    let (ok, text) = slash(home.path(), "a", &["clear"]);
    assert!(ok && text.contains("forgotten"), "{text}");
    let sessions = sessions_json(home.path());
    assert!(sessions.get("sid:a").is_none(), "{sessions}");
    assert_eq!(sessions["sid:b"]["conversationId"], b, "{sessions}");
    let (ok, text) = slash(home.path(), "b", &["clear", "all"]);
    assert!(!ok && text.contains("needs a confirmation"), "{text}");
    assert_eq!(sessions_json(home.path())["sid:b"]["conversationId"], b);
    let out = bridge("slash", home.path(), "hello", "1")
        .args(["--yes", "--session-id", "b", "--", "clear", "all"])
        .output()
        .expect("slash");
    assert!(out.status.success());
    assert!(sessions_json(home.path()).get("sid:b").is_none());
}

#[test]
fn permissions_take_three_words_and_the_old_ones_are_saved_as_the_new() {
    let home = tempfile::tempdir().expect("tmp");
    let config = home.path().join(".pi/agent/antigravity-bridge/config.json");
    let (ok, text) = slash(home.path(), "a", &["permissions", "deny"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with("permissions is now deny: agy's print mode refuses"),
        "{text}"
    );
    let (ok, text) = slash(home.path(), "a", &["permissions", "ask"]);
    assert!(ok && text.starts_with("permissions is now ask: "), "{text}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("json");
    assert_eq!(saved["permissions"], "ask", "{saved}");
    let (_, text) = slash(home.path(), "a", &["permissions"]);
    assert!(
        text.starts_with("permissions is ask (set with /agy)"),
        "{text}"
    );
    let (ok, text) = slash(home.path(), "a", &["permissions", "on"]);
    assert!(
        ok && text.starts_with("permissions is now allow: "),
        "{text}"
    );
    let (_, text) = slash(home.path(), "a", &[]);
    assert!(
        text.contains("permissions  allow (set with /agy)"),
        "{text}"
    );
}

#[test]
fn allow_rules_are_listed_added_and_removed() {
    let home = tempfile::tempdir().expect("tmp");
    let (ok, text) = slash(home.path(), "a", &["allow"]);
    assert!(ok, "{text}");
    assert!(text.contains("  view_file: *  (built in)\n"), "{text}");
    assert!(text.contains("TOOL: PATTERN"), "{text}");
    let (ok, text) = slash(home.path(), "a", &["allow", "run_command: cargo test*"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with("added the allow rule run_command: cargo test*"),
        "{text}"
    );
    // As the extension splits it: one word each, quotes and all.
    let (ok, text) = slash(
        home.path(),
        "a",
        &["allow", "'run_command:", "cargo", "test*'"],
    );
    assert!(ok && text.contains("is already there"), "{text}");
    let (_, text) = slash(home.path(), "a", &["allow"]);
    assert!(text.contains("  run_command: cargo test*\n"), "{text}");
    assert!(!text.contains("cargo test*  (built in)"), "{text}");
    let (_, text) = slash(home.path(), "a", &[]);
    assert!(text.contains("allow        1 rule of yours"), "{text}");
    let (ok, text) = slash(home.path(), "a", &["allow", "bad tool: x"]);
    assert!(!ok && text.contains("whitespace"), "{text}");
    let (ok, text) = slash(home.path(), "a", &["allow", "remove", "view_file"]);
    assert!(!ok && text.contains("built in"), "{text}");
    let (ok, text) = slash(
        home.path(),
        "a",
        &["allow", "remove", "run_command: cargo test*"],
    );
    assert!(ok && text.starts_with("removed the allow rule"), "{text}");
    let (_, text) = slash(home.path(), "a", &["allow"]);
    assert!(!text.contains("  run_command: cargo test*\n"), "{text}");
}
