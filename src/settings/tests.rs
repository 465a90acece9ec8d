//! The settings resolved from made-up environments: defaults, every bad
//! value kept as its sentence, flags over variables, and `config.json`
//! read with the variables that win over it.

use super::*;
use crate::state::config::{PermissionMode, Setting, Source};

fn env(vars: &[(&str, &str)]) -> Env {
    Env::from_vars(vars.iter().copied())
}

#[test]
fn an_empty_environment_gives_the_defaults() {
    let s = Settings::resolve(&Env::default());
    assert!(s.check().is_ok());
    assert_eq!(s.agy_bin, PathBuf::from("agy"));
    assert!(s.extra_args.is_empty());
    assert_eq!(
        (s.conversations_dir.as_ref(), s.state_dir.as_ref()),
        (None, None)
    );
    assert!(matches!(s.state_dir(), Err(StateError::NoHome)));
    assert_eq!((s.bind, s.wake), (BindMode::Auto, WakeMode::Events));
    assert_eq!(s.watchdog(), Duration::from_secs(600));
    assert_eq!(s.request_timeout, Duration::from_secs(30));
    assert!(s.warm && s.pi_tools);
    assert_eq!(s.warm_idle, Duration::from_secs(600));
    assert_eq!((s.seats, s.start_interval), (8, Duration::from_millis(250)));
    assert_eq!(s.tool_batch, Duration::from_millis(2));
    assert!(s.notices().is_empty());
    assert!(s.admission().is_none());
}

#[test]
fn every_variable_is_read_from_the_snapshot() {
    let s = Settings::resolve(&env(&[
        ("AGY_BIN", "/opt/agy"),
        ("AGY_EXTRA_ARGS", "--x 1"),
        ("HOME", "/h"),
        ("AGY_BIND", "stream-json"),
        ("AGY_WAKE", "poll"),
        ("AGY_TIMEOUT_MIN", " 3 "),
        ("AGY_REQUEST_TIMEOUT_SECS", "0"),
        ("AGY_WARM", "off"),
        ("AGY_WARM_IDLE_SECS", "5"),
        ("AGY_SEATS", "2"),
        ("AGY_START_INTERVAL_MS", "0"),
        ("AGY_PI_TOOLS", "no"),
        ("AGY_PI_TOOL_BATCH_MS", "7"),
        ("FAKE_AGY_BIN", "/f"),
        ("AGY_MODE", "plan"),
    ]));
    assert!(s.check().is_ok(), "{:?}", s.check());
    assert_eq!(s.agy_bin, PathBuf::from("/opt/agy"));
    assert_eq!(s.extra_args, ["--x", "1"]);
    assert_eq!(s.home, Some(PathBuf::from("/h")));
    assert_eq!(
        s.conversations_dir,
        Some(PathBuf::from("/h/.gemini/antigravity-cli/conversations"))
    );
    assert_eq!((s.bind, s.wake), (BindMode::StreamJson, WakeMode::PollOnly));
    assert_eq!(s.watchdog(), Duration::from_secs(180));
    assert_eq!(s.request_timeout, Duration::from_secs(1), "at least 1 s");
    assert!(!s.warm && !s.pi_tools);
    assert_eq!(s.warm_idle, Duration::from_secs(5));
    assert_eq!((s.seats, s.start_interval), (2, Duration::ZERO));
    assert_eq!(s.tool_batch, Duration::from_millis(7));
    assert_eq!(s.fake_agy_bin, Some(PathBuf::from("/f")));
    assert_eq!(s.config_var("AGY_MODE"), Some("plan"));
    assert_eq!(s.admission().map(|a| a.seats()), Some(2));
}

#[test]
fn each_bad_value_is_its_sentence_and_check_gives_the_first() {
    for (var, value, words) in [
        ("AGY_MODE", "plna", "accept-edits, plan"),
        ("AGY_PERMISSIONS", "bogus", "ask, allow or deny"),
        ("AGY_ALLOW", "run command: x", "TOOL: PATTERN"),
        ("AGY_DEFAULT_THINKING", "max", "low, medium, high"),
        ("AGY_BIND", "bogus", "auto, discovery, stream-json"),
        ("AGY_WAKE", "bogus", "events, poll"),
        ("AGY_EXTRA_ARGS", "--mode plan", "AGY_MODE"),
        ("AGY_TIMEOUT_MIN", "abc", "whole number of minutes"),
        ("AGY_REQUEST_TIMEOUT_SECS", "abc", "whole number of seconds"),
        ("AGY_WARM", "maybe", "on or off"),
        ("AGY_WARM_IDLE_SECS", "x", "whole number of seconds"),
        ("AGY_PI_TOOLS", "maybe", "on or off"),
        ("AGY_PI_TOOL_BATCH_MS", "-5", "milliseconds"),
        ("AGY_SEATS", "0", "agy turns from 1"),
        ("AGY_START_INTERVAL_MS", "-1", "milliseconds"),
    ] {
        let s = Settings::resolve(&env(&[(var, value)]));
        let err = s.check().expect_err(var).to_string();
        assert!(
            err.starts_with(&format!("{var}=\"{value}\"")) || err.contains(var),
            "{var}: {err}"
        );
        assert!(err.contains(words), "{var}: {err}");
        assert_eq!(s.problem(var).map(SettingsError::var), Some(var));
    }
    let s = Settings::resolve(&env(&[("AGY_BIND", "x"), ("AGY_SEATS", "0")]));
    assert_eq!(s.check().map_err(SettingsError::var), Err("AGY_BIND"));
    assert!(s.problem("AGY_SEATS").is_some());
    assert_eq!(s.seats, 8, "a bad value leaves the default standing");
}

#[test]
fn agy_skip_permissions_is_only_a_notice() {
    for value in ["1", "off", "bogus"] {
        let s = Settings::resolve(&env(&[("AGY_SKIP_PERMISSIONS", value)]));
        assert!(s.check().is_ok(), "{value}: never an error now");
        assert_eq!(
            s.notices(),
            ["AGY_SKIP_PERMISSIONS is no longer read; set AGY_PERMISSIONS=allow|deny|ask"]
        );
        assert_eq!(s.config_var("AGY_SKIP_PERMISSIONS"), None);
    }
    assert!(Settings::resolve(&env(&[("AGY_SKIP_PERMISSIONS", " ")]))
        .notices()
        .is_empty());
}

#[test]
fn flags_win_over_their_variables() {
    let s = Settings::resolve(&env(&[
        ("AGY_TIMEOUT_MIN", "3"),
        ("AGY_BIND", "stream-json"),
    ]));
    let s = s.with_flags(Flags {
        timeout_min: Some(0),
        bind: Some(BindMode::Discovery),
        poll_only: true,
    });
    assert_eq!(s.watchdog(), Duration::from_secs(60), "at least a minute");
    assert_eq!((s.bind, s.wake), (BindMode::Discovery, WakeMode::PollOnly));
    assert_eq!(watchdog(u64::MAX), Duration::from_secs(u64::MAX));
}

#[test]
fn config_json_is_read_with_the_variables_that_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().display().to_string();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{ "mode": "plan", "permissions": "deny" }"#,
    )
    .expect("write");
    let s = Settings::resolve(&env(&[
        ("AGY_BRIDGE_STATE_DIR", &state),
        ("AGY_PERMISSIONS", "allow"),
        ("AGY_SKIP_PERMISSIONS", "off"),
    ]));
    let status = s.load_config().expect("load");
    assert_eq!(status.config.permissions, PermissionMode::Allow);
    assert_eq!(status.source(Setting::Permissions), Some(Source::Env));
    assert_eq!(status.source(Setting::Mode), Some(Source::File));
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);
    let saved = s
        .save_config(ConfigChange::Permissions(PermissionMode::Ask))
        .expect("save");
    assert_eq!(saved.config.permissions, PermissionMode::Allow, "env wins");
    let file = std::fs::read_to_string(dir.path().join("config.json")).expect("read");
    assert!(file.contains("\"ask\""), "{file}");
    // AGY_SKIP_PERMISSIONS alone decides nothing any more.
    let s = Settings::resolve(&env(&[
        ("AGY_BRIDGE_STATE_DIR", &state),
        ("AGY_SKIP_PERMISSIONS", "on"),
    ]));
    let status = s.load_config().expect("load");
    assert_eq!(status.config.permissions, PermissionMode::Ask);
    assert_eq!(status.source(Setting::Permissions), Some(Source::File));
}
