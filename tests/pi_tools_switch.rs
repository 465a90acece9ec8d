//! `agy-bridge pi-tools --json`: the one place the extension learns whether
//! agy may call pi's tools and which of pi's tools agy is never offered
//! (issue 50, item 3): `AGY_PI_TOOLS=bogus` is the same error here as in a
//! turn, never "on".

mod common;

use common::bridge;
use serde_json::Value;

fn ask(env: Option<&str>, args: &[&str]) -> (bool, Value) {
    let home = tempfile::tempdir().expect("tmp");
    let mut c = bridge("pi-tools", home.path(), "hello", "1");
    c.env_remove("AGY_PI_TOOLS").arg("--json").args(args);
    if let Some(v) = env {
        c.env("AGY_PI_TOOLS", v);
    }
    let out = c.output().expect("agy-bridge pi-tools");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.success(), v)
}

#[test]
fn the_default_comes_from_agy_pi_tools_and_a_bad_word_is_an_error() {
    let (ok, v) = ask(None, &[]);
    assert!(ok && v["on"] == true && v.get("error").is_none(), "{v}");
    let (ok, v) = ask(Some("off"), &[]);
    assert!(ok && v["on"] == false, "{v}");
    let (ok, v) = ask(Some(" No "), &[]);
    assert!(ok && v["on"] == false, "{v}");
    let (ok, v) = ask(Some("bogus"), &[]);
    assert!(!ok, "{v}");
    assert_eq!(v["on"], false);
    let error = v["error"].as_str().unwrap_or("");
    assert!(
        error.starts_with("AGY_PI_TOOLS=\"bogus\" is not valid: it takes on or off"),
        "{v}"
    );
    assert_eq!(v["message"], error, "pi shows the error as the message");
}

#[test]
fn the_users_word_takes_the_same_words_and_the_message_names_the_native_tools() {
    let (ok, v) = ask(Some("off"), &["--set", "yes"]);
    assert!(ok && v["on"] == true, "--set wins over the default: {v}");
    let (ok, v) = ask(None, &["--current", "off"]);
    assert!(ok && v["on"] == false, "{v}");
    let (ok, v) = ask(None, &["--set", "maybe"]);
    assert!(!ok, "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("/agy tools takes on or off") && e.contains("\"maybe\"")),
        "{v}"
    );
    let (_, v) = ask(None, &["--set", "on"]);
    let native: Vec<&str> = v["native"]
        .as_array()
        .expect("native")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        native,
        [
            "read",
            "bash",
            "edit",
            "write",
            "grep",
            "find",
            "ls",
            "AskAntigravity"
        ]
    );
    assert_eq!(
        v["message"],
        "agy can call pi's tools: on (all but read, bash, edit, write, grep, find, ls, AskAntigravity, which agy has of its own or which is agy itself; this pi process; AGY_PI_TOOLS=off sets the default)"
    );
}
