//! fake-agy speaks agy's real stream-json: every recording in
//! `recordings/outcomes/` is replayed and its stdout, stderr and exit code
//! are checked against the outcome it stands for (literal values), and
//! against the shape of the real capture it follows (event sequence, keys
//! in order, value types). Each comparison with a capture is a test of its
//! own, `#[ignore]`d in a plain `cargo test` and failing without
//! `AGY_CAPTURES_DIR` when run (`.ci/run` runs them with
//! `--include-ignored`); the same run's self-checks need nothing outside.
//! Every line fake-agy prints must round-trip through the library's
//! `stream_json::Line`, the reader the bridge uses.

#![forbid(unsafe_code)]

use agy_format::stream_json::Line;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

/// A JSON value's shape: its type, object keys in their printed order, and
/// the values that name what a line is (`event`, `state`, `step_type`,
/// `status`).
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Null,
    Bool,
    Number,
    String,
    /// A naming value, kept.
    Name(String),
    /// The shape of the first element (element shapes of one array agree in
    /// agy's output), or `None` for an empty array.
    Array(Option<Box<Shape>>),
    Object(Vec<(String, Shape)>),
}

const NAMING_KEYS: &[&str] = &["event", "state", "step_type", "status"];

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::String)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut first = None;
        while let Some(s) = seq.next_element::<Shape>()? {
            first.get_or_insert(s);
        }
        Ok(Shape::Array(first.map(Box::new)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut keys = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            if NAMING_KEYS.contains(&k.as_str()) {
                let v: serde_json::Value = map.next_value()?;
                let shape = match v.as_str() {
                    Some(s) => Shape::Name(s.to_string()),
                    None => serde_json::from_value(v).map_err(serde::de::Error::custom)?,
                };
                keys.push((k, shape));
            } else {
                keys.push((k, map.next_value::<Shape>()?));
            }
        }
        Ok(Shape::Object(keys))
    }
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

fn shape(line: &str) -> Shape {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// The shapes of a stream, without agent_response ACTIVE updates: how the
/// model chunks its text is not part of the format (agy 1.2.17 sent a short
/// answer as ACTIVE "PONG" + DONE "\n" but longer ones whole on DONE).
/// Lines starting with `#` (a capture's header) are skipped.
fn stream_shape(text: &str) -> Vec<Shape> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            let u = &v["step_update"];
            !(u["step_type"] == "agent_response" && u["state"] == "ACTIVE")
        })
        .map(shape)
        .collect()
}

/// The real capture `rel` under `AGY_CAPTURES_DIR`. Panics without it: a
/// comparison with a capture never passes by not comparing.
fn capture(rel: &str) -> String {
    let dir = std::env::var_os("AGY_CAPTURES_DIR").unwrap_or_else(|| {
        panic!("this test compares with the real capture {rel}: set AGY_CAPTURES_DIR to the captures' directory")
    });
    let path = PathBuf::from(dir).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `stdout` has the stream shape of the real capture `rel`.
fn assert_shape_of_capture(stdout: &str, rel: &str) {
    assert_eq!(stream_shape(stdout), stream_shape(&capture(rel)), "{rel}");
}

/// A `# key: value` line of a capture's header (simv/crt's captures name
/// their command, exit code and stderr so).
fn capture_header(text: &str, key: &str) -> Option<String> {
    let prefix = format!("# {key}: ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

struct Run {
    out: Output,
    elapsed: Duration,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    /// The final `result` object (stream-json's last line, or json's only
    /// line).
    fn result(&self) -> serde_json::Value {
        let stdout = self.stdout();
        let last = stdout.lines().last().expect("a result line");
        let v: serde_json::Value = serde_json::from_str(last).expect("JSON");
        match v.get("result") {
            Some(r) => r.clone(),
            None => v,
        }
    }
}

/// Replay `outcomes/NAME` with `args` (after `-p PROMPT`).
fn run(name: &str, speed: &str, args: &[&str]) -> Run {
    let home = tempfile::tempdir().expect("tempdir");
    run_in(home.path(), name, speed, args)
}

/// [`run`] with `HOME` at `home` (to run again on its conversations).
fn run_in(home: &std::path::Path, name: &str, speed: &str, args: &[&str]) -> Run {
    let rec = agy_corpus::recording::Recording::load(
        &agy_corpus::recording::bundled_dir().join(format!("outcomes/{name}.jsonl")),
    )
    .expect("recording");
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fake-agy"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("FAKE_AGY_RECORDING", format!("outcomes/{name}"))
        .env("FAKE_AGY_SPEED", speed)
        .arg("-p")
        .arg(&rec.header.prompt)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run fake-agy");
    let run = Run {
        out,
        elapsed: started.elapsed(),
    };
    if args.contains(&"--output-format") {
        assert_round_trips(&run.stdout());
    }
    run
}

/// Every line reads back through the bridge's reader and prints the same.
fn assert_round_trips(stdout: &str) {
    for line in stdout.lines() {
        match Line::parse(line) {
            Line::Result(r) if !line.starts_with("{\"event\"") => {
                assert_eq!(serde_json::to_string(&r).unwrap(), line)
            }
            parsed @ (Line::Init { .. }
            | Line::StepUpdate(_)
            | Line::Result(_)
            | Line::CommandResult(_)) => {
                assert!(parsed.unknown_fields().is_empty(), "{line}");
                assert_eq!(parsed.to_json(), line);
            }
            other => panic!("not agy stream-json: {other:?}"),
        }
    }
}

const STREAM: [&str; 2] = ["--output-format", "stream-json"];
const SKIP: &str = "--dangerously-skip-permissions";

fn events(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let u = &v["step_update"];
            let s = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
            (s(&v["event"]), s(&u["step_type"]), s(&u["state"]))
        })
        .collect()
}

fn ev(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// The runs each comparison with a capture shares with its self-checks.
fn pong() -> Run {
    run("pong-1.2.17", "20", &STREAM)
}

#[test]
fn success_prints_the_answer_whole_on_done_like_1_2_17() {
    let r = pong();
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.stderr(), "");
    assert_eq!(
        events(&r.stdout()),
        ev(&[
            ("init", "", ""),
            ("step_update", "user_input", "DONE"),
            ("step_update", "agent_response", "DONE"),
            ("result", "", ""),
        ])
    );
    let result = r.result();
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "READY\n");
    assert_eq!(result["usage"]["total_tokens"], 12_480 + 190);
    // Text mode: only the answer.
    let text = run("pong-1.2.17", "20", &[]);
    assert_eq!(text.stdout(), "READY\n");
}

/// The same run against the real capture `stream-json-1.2.17/success-pong.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn success_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(&pong().stdout(), "stream-json-1.2.17/success-pong.stdout");
}

fn tools() -> Run {
    run("tools-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP])
}

#[test]
fn tools_report_name_parameters_and_output_like_1_2_17() {
    let r = tools();
    assert_eq!(r.code(), Some(0));
    let lines: Vec<serde_json::Value> = r
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["init"]["permission_mode"], "always-proceed");
    let tools: Vec<(&str, &str, Option<&str>)> = lines
        .iter()
        .filter(|l| l["step_update"]["step_type"] == "tool")
        .map(|l| {
            let u = &l["step_update"];
            (
                u["tool_name"].as_str().unwrap(),
                u["state"].as_str().unwrap(),
                u["tool_info"]["output"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        vec![
            ("view_file", "ACTIVE", None),
            ("view_file", "DONE", Some("3 lines, 49 bytes")),
            ("run_command", "ACTIVE", None),
            ("run_command", "DONE", Some("54\r\n")),
        ]
    );
    let result = r.result();
    assert_eq!(result["response"], "NAME=agy-bridge\nSUM=54\n");
    // Turn usage is the sum of the three model calls.
    assert_eq!(result["usage"]["input_tokens"], 12_530 + 18_700 + 19_150);
}

/// The same run against the real capture `stream-json-1.2.17/success-tools.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn tools_have_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(&tools().stdout(), "stream-json-1.2.17/success-tools.stdout");
}

fn web() -> Run {
    run("web-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP])
}

#[test]
fn web_tools_have_no_output_like_1_2_17() {
    let r = web();
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.result()["response"], "RUST=1.95.0\n");
    assert!(!r.stdout().contains("\"output\""));
}

/// The same run against the real capture `stream-json-1.2.17/web-tool.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn web_tools_have_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(&web().stdout(), "stream-json-1.2.17/web-tool.stdout");
}

fn denied_1_2_17() -> Run {
    run("denied-1.2.17", "20", &STREAM)
}

#[test]
fn a_denied_command_ends_promptly_with_denied_actions_like_1_2_17() {
    let r = denied_1_2_17();
    // A stall would last the 5-minute default print timeout.
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.stderr(), "");
    let result = r.result();
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "");
    assert_eq!(
        result["denied_actions"],
        serde_json::json!([{"action": "command", "display_name": "RunCommand"}])
    );
    assert_eq!(
        events(&r.stdout())[3..5],
        ev(&[
            ("step_update", "tool", "ACTIVE"),
            ("step_update", "tool", "DONE")
        ])
    );
    // With the flag the command runs and agy answers.
    let allowed = run("denied-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(allowed.result()["response"], "/srv is empty.\n");
    assert!(allowed.result().get("denied_actions").is_none());
    // Text mode prints nothing for the denied run.
    assert_eq!(run("denied-1.2.17", "20", &[]).stdout(), "");
}

/// agy 1.3.3: the denial ends the turn at once, with no output: an empty
/// response whatever the model said first, `denied_actions`, and `no
/// output produced` on stderr (docs/agy-format.md, "Denials (1.3.3)").
#[test]
fn a_denied_command_in_1_3_3_ends_the_turn_with_no_output() {
    let r = run("denied-1.3.3", "20", &STREAM);
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(0));
    assert!(r.stderr().contains("no output produced"), "{}", r.stderr());
    assert!(
        r.stdout()
            .contains("\"text_delta\":\"I'll list /srv with ls -la first.\\n\""),
        "the preamble streamed: {}",
        r.stdout()
    );
    let result = r.result();
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "");
    assert_eq!(
        result["denied_actions"],
        serde_json::json!([{"action": "command", "display_name": "RunCommand"}])
    );
    let allowed = run("denied-1.3.3", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(allowed.stderr(), "");
    assert_eq!(
        allowed.result()["response"],
        "/srv holds only . and ..: it is empty.\n"
    );
}

/// The same run against the real capture `stream-json-1.2.17/denied-command.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_denied_command_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(
        &denied_1_2_17().stdout(),
        "stream-json-1.2.17/denied-command.stdout",
    );
}

fn denied_1_1_7() -> Run {
    run("denied-1.1.7", "20", &STREAM)
}

#[test]
fn a_denied_command_in_1_1_7_is_canceled_with_the_jetski_line() {
    let r = denied_1_1_7();
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(0));
    assert!(
        r.stderr()
            .starts_with("jetski: no output produced — a tool required the \"command\" permission"),
        "{}",
        r.stderr()
    );
    assert_eq!(r.stderr().lines().count(), 1);
    let result = r.result();
    assert_eq!(result["status"], "CANCELED");
    assert_eq!(result["response"], "");
}

/// The same run against the real capture `other/1.1.7-noflags.stdout-lastline`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_denied_commands_result_has_the_shape_of_the_1_1_7_capture() {
    assert_shape_of_capture(
        &last_lines(&denied_1_1_7().stdout(), 1),
        "other/1.1.7-noflags.stdout-lastline",
    );
}

/// The same run against the real capture `other/1.1.7-noflags.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_denied_commands_jetski_line_is_the_1_1_7_captures() {
    let real = capture("other/1.1.7-noflags.stderr");
    assert_eq!(denied_1_1_7().stderr().trim_end(), real.trim_end());
}

fn quota() -> Run {
    run("quota-1.2.17", "20", &STREAM)
}

#[test]
fn quota_exhausted_exits_3_with_the_sentence_and_agy_error() {
    let r = quota();
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(3));
    let sentence = "Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 12m40s.";
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], format!("error: {sentence}"));
    let agy_error = lines[1]
        .strip_prefix("AGY_ERROR: ")
        .expect("AGY_ERROR line");
    let v: serde_json::Value = serde_json::from_str(agy_error).unwrap();
    assert_eq!(v["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(v["error_code"], 429);
    assert_eq!(v["retryable"], true);
    let result = r.result();
    assert_eq!(result["status"], "ERROR");
    assert_eq!(result["error"], sentence);
    assert_eq!(result["response"], "");
    assert_eq!(
        events(&r.stdout()).iter().rev().nth(1).cloned(),
        Some(ev(&[("step_update", "error_message", "DONE")])[0].clone())
    );
}

/// The same run against the real capture `stream-json-1.2.17/quota-exhausted.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn quota_exhausted_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(
        &last_lines(&quota().stdout(), 2),
        "stream-json-1.2.17/quota-exhausted.stdout",
    );
}

/// The same run against the real capture `stream-json-1.2.17/quota-exhausted.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn quota_exhausteds_agy_error_has_the_shape_of_the_1_2_17_capture() {
    let stderr = quota().stderr();
    let agy_error = stderr
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("AGY_ERROR: "))
        .expect("AGY_ERROR line");
    let real = capture("stream-json-1.2.17/quota-exhausted.stderr");
    let real_json = real
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("AGY_ERROR: "));
    assert_eq!(Some(shape(agy_error)), real_json.map(shape));
    assert!(real.starts_with("error: "));
}

fn print_timeout() -> Run {
    run(
        "print-timeout-1.2.17",
        "1",
        &[STREAM[0], STREAM[1], "--print-timeout", "8s"],
    )
}

#[test]
fn print_timeout_returns_a_partial_success_after_8s() {
    let r = print_timeout();
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(0));
    assert_eq!(
        r.stderr(),
        "[agy] print timeout after 8s with turn in progress; returning partial output\n"
    );
    assert_eq!(
        events(&r.stdout()),
        ev(&[
            ("init", "", ""),
            ("step_update", "user_input", "DONE"),
            ("result", "", ""),
        ])
    );
    let result = r.result();
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "");
}

/// The same run against the real capture `stream-json-1.2.17/print-timeout.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_print_timeout_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(
        &print_timeout().stdout(),
        "stream-json-1.2.17/print-timeout.stdout",
    );
}

/// The same run against the real capture `stream-json-1.2.17/print-timeout.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_print_timeouts_stderr_is_the_1_2_17_captures() {
    let real = capture("stream-json-1.2.17/print-timeout.stderr");
    assert_eq!(print_timeout().stderr(), real);
}

#[test]
fn a_model_response_timeout_is_an_error_exit_1() {
    let r = run("response-timeout-1.2.17", "20", &STREAM);
    assert!(r.elapsed < Duration::from_secs(60), "{:?}", r.elapsed);
    assert_eq!(r.code(), Some(1));
    assert_eq!(r.stderr(), "Error: timeout waiting for response\n");
    let result = r.result();
    assert_eq!(result["status"], "ERROR");
    assert_eq!(result["error"], "timeout waiting for response");
    assert_eq!(
        events(&r.stdout())[2],
        ev(&[("step_update", "agent_response", "ERROR")])[0]
    );
}

fn signed_out() -> Run {
    run("signed-out-1.1.15", "20", &["--output-format", "json"])
}

#[test]
fn not_signed_in_prints_a_bare_error_result_in_json_mode() {
    let r = signed_out();
    assert_eq!(r.code(), Some(1));
    assert_eq!(r.stdout().lines().count(), 1);
    let result = r.result();
    assert_eq!(result["conversation_id"], "");
    assert_eq!(result["status"], "ERROR");
    assert_eq!(result["error"], "authentication failed or timed out");
    assert_eq!(result["num_turns"], 0);
    assert_eq!(
        r.stderr().lines().last(),
        Some("Error: authentication timed out.")
    );
    // stream-json: the same result as the only line, no init.
    let s = run("signed-out-1.1.15", "20", &STREAM);
    assert_eq!(events(&s.stdout()), ev(&[("result", "", "")]));
}

/// The same run against the real capture `other/1.1.15-foreign-home.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn not_signed_in_has_the_shape_of_the_1_1_15_capture() {
    let real = capture("other/1.1.15-foreign-home.stdout");
    assert_eq!(
        shape(signed_out().stdout().trim_end()),
        shape(real.trim_end())
    );
}

/// The same run against the real capture `other/1.1.15-foreign-home.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn not_signed_ins_stderr_is_the_1_1_15_captures() {
    let real = capture("other/1.1.15-foreign-home.stderr");
    assert_eq!(signed_out().stderr(), real);
}

fn unknown_model_1_2_17() -> Run {
    run("unknown-model-1.2.17", "20", &STREAM)
}

#[test]
fn an_unknown_model_lists_the_models_on_stderr_in_1_2_17() {
    let r = unknown_model_1_2_17();
    assert_eq!(r.code(), Some(1));
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines[0].starts_with(
        "error: invalid model selection (--model \"gemini-9.0-ultra\" --effort \"\"): model gemini-9.0-ultra is not recognized"
    ));
    assert_eq!(lines[1], "Available models:");
    assert_eq!(lines[2], "  Gemini 3.8 Flash (High)");
    assert!(lines[2..].iter().all(|l| l.starts_with("  ")));
    let result = r.result();
    assert_eq!(result["status"], "ERROR");
    assert_eq!(result["conversation_id"], "");
    assert_eq!(
        Some(result["error"].as_str().unwrap()),
        lines[0].strip_prefix("error: ")
    );
}

/// The same run against the real capture `stream-json-1.2.17/error-model-rejected.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn an_unknown_models_list_has_the_form_of_the_1_2_17_capture() {
    let stderr = unknown_model_1_2_17().stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    let real = capture("stream-json-1.2.17/error-model-rejected.stderr");
    let real: Vec<&str> = real.lines().collect();
    assert!(real[0].starts_with("error: invalid model selection (--model \""));
    assert_eq!(real[1], lines[1]);
    assert!(real[2..].iter().all(|l| l.starts_with("  ")));
}

#[test]
fn an_unknown_model_is_in_the_result_in_1_3_1() {
    let r = run("unknown-model-1.3.1", "20", &STREAM);
    assert_eq!(r.code(), Some(1));
    assert_eq!(r.stderr(), "");
    let result = r.result();
    assert_eq!(result["status"], "ERROR");
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("invalid model selection (--model \"gemini-9.0-ultra\""));
    assert!(error.contains("\nAvailable models:\n  Gemini 3.8 Flash (High)"));
}

fn model_effort() -> Run {
    run("model-effort-1.2.17", "20", &STREAM)
}

#[test]
fn a_model_effort_conflict_has_no_conversation() {
    let r = model_effort();
    assert_eq!(r.code(), Some(1));
    let error = "invalid model selection (--model \"gemini-3.8-flash-medium\" --effort \"low\"): --model gemini-3.8-flash-medium conflicts with --effort=low";
    assert_eq!(r.stderr(), format!("error: {error}\n"));
    assert_eq!(r.stdout().lines().count(), 1, "no init line");
    let result = r.result();
    assert_eq!(result["conversation_id"], "");
    assert_eq!(result["error"], error);
    assert_eq!(result["num_turns"], 0);
}

/// The same run against the real capture `stream-json-1.2.17/error-model-effort-conflict.stdout`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_model_effort_conflict_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(
        &model_effort().stdout(),
        "stream-json-1.2.17/error-model-effort-conflict.stdout",
    );
}

/// The same run against the real capture `stream-json-1.2.17/error-model-effort-conflict.stderr`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_model_effort_conflicts_stderr_has_the_form_of_the_1_2_17_capture() {
    let real = capture("stream-json-1.2.17/error-model-effort-conflict.stderr");
    assert!(real.starts_with("error: invalid model selection (--model \""));
    assert_eq!(real.lines().count(), 1);
}

fn streaming_1_3_1() -> Run {
    run("streaming-1.3.1", "20", &STREAM)
}

#[test]
fn agy_1_3_1_streams_text_deltas_while_active() {
    let r = streaming_1_3_1();
    assert_eq!(r.code(), Some(0));
    let deltas: Vec<(String, String)> = r
        .stdout()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let u = &v["step_update"];
            Some((
                u["state"].as_str()?.to_string(),
                u["text_delta"].as_str()?.to_string(),
            ))
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("ACTIVE", "Red\n"),
        ("ACTIVE", "Yellow\n"),
        ("DONE", "Blue\n"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(deltas, want);
    assert_eq!(r.result()["response"], "Red\nYellow\nBlue\n");
}

/// The same run against the real capture
/// `stream-json-1.2.17/success-pong.stdout` (`stream_shape` leaves out the
/// ACTIVE answer updates, which 1.2.17 did not print).
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn agy_1_3_1s_deltas_aside_has_the_shape_of_the_1_2_17_capture() {
    assert_shape_of_capture(
        &streaming_1_3_1().stdout(),
        "stream-json-1.2.17/success-pong.stdout",
    );
}

#[test]
fn shapes_see_key_order_types_and_names() {
    assert_eq!(
        shape(r#"{"event":"result","result":{"a":1,"b":"x"}}"#),
        Shape::Object(vec![
            ("event".into(), Shape::Name("result".into())),
            (
                "result".into(),
                Shape::Object(vec![
                    ("a".into(), Shape::Number),
                    ("b".into(), Shape::String)
                ])
            ),
        ])
    );
    assert_ne!(shape(r#"{"a":1,"b":2}"#), shape(r#"{"b":2,"a":1}"#));
    assert_ne!(shape(r#"{"state":"DONE"}"#), shape(r#"{"state":"ACTIVE"}"#));
    assert_eq!(
        shape(r#"{"x":[]}"#),
        Shape::Object(vec![("x".into(), Shape::Array(None))])
    );
    assert_eq!(
        shape("[null,true]"),
        Shape::Array(Some(Box::new(Shape::Null)))
    );
    assert_eq!(
        shape(r#"{"x":false}"#),
        Shape::Object(vec![("x".into(), Shape::Bool)])
    );
}

/// Every recording of the corpus, old and new, replays into lines the
/// bridge's reader takes back unchanged: `init` first (unless agy failed
/// before any conversation), `result` last, step updates between.
#[test]
fn every_corpus_recording_prints_readable_stream_json() {
    let corpus = agy_synth::corpus();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = corpus
            .iter()
            .map(|(name, rec)| {
                s.spawn(move || {
                    let home = tempfile::tempdir().expect("tempdir");
                    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fake-agy"))
                        .env("HOME", home.path())
                        .env_remove("AGY_CONVERSATIONS_DIR")
                        .env("FAKE_AGY_RECORDING", name)
                        .env("FAKE_AGY_SPEED", "50")
                        .args(["-p", &rec.header.prompt, "--print-timeout", "5s"])
                        .args(STREAM)
                        .stdin(std::process::Stdio::null())
                        .output()
                        .expect("run fake-agy");
                    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
                    let before = rec
                        .header
                        .outcome
                        .as_ref()
                        .is_some_and(|o| o.before_conversation);
                    let killed = rec.header.outcome.as_ref().is_some_and(|o| o.killed);
                    let lines: Vec<Line> = stdout.lines().map(Line::parse).collect();
                    let first_ok = before || matches!(lines.first(), Some(Line::Init { .. }));
                    // A killed run never prints its result.
                    let last_ok = killed != matches!(lines.last(), Some(Line::Result(_)));
                    let middle_ok = lines
                        .iter()
                        .skip(1)
                        .take(lines.len().saturating_sub(2 - usize::from(killed)))
                        .all(|l| matches!(l, Line::StepUpdate(_)));
                    let round_trip = std::panic::catch_unwind(|| assert_round_trips(&stdout));
                    let code_ok = out.status.code() == Some(rec.header.exit_code);
                    (first_ok && last_ok && middle_ok && round_trip.is_ok() && code_ok)
                        .then_some(())
                        .ok_or_else(|| format!("{name}: exit {:?}\n{stdout}", out.status.code()))
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("join").err())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// agy 1.1.9 and 1.2.7: sessions, checkpoints, slash commands, denials by
// tool, a killed run (jdiazromeral/agy-plugin-cc and simv/crt captures).
// ---------------------------------------------------------------------------

/// The step updates' (step_index, step_type, state).
fn steps_seen(stdout: &str) -> Vec<(i64, String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let u = v.get("step_update")?;
            Some((
                u["step_index"].as_i64()?,
                u["step_type"].as_str()?.to_string(),
                u["state"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn seen(list: &[(i64, &str, &str)]) -> Vec<(i64, String, String)> {
    list.iter()
        .map(|(i, t, s)| (*i, t.to_string(), s.to_string()))
        .collect()
}

/// The one step update of `(idx, state)`.
fn update(stdout: &str, idx: i64, state: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["step_update"].clone())
        .find(|u| u["step_index"] == idx && u["state"] == state)
        .unwrap_or_else(|| panic!("no update {idx} {state} in\n{stdout}"))
}

fn usage(input: u64, output: u64, thinking: u64, cache_read: u64) -> serde_json::Value {
    serde_json::json!({"input_tokens": input, "output_tokens": output,
        "thinking_tokens": thinking, "cache_read_tokens": cache_read,
        "total_tokens": input + output})
}

/// The only conversation database under `home`.
fn only_db(home: &std::path::Path) -> PathBuf {
    let dir = home.join(".gemini/antigravity-cli/conversations");
    let dbs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "db"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    dbs[0].clone()
}

/// The decoded step `idx` of the database at `path`.
fn db_step(path: &std::path::Path, idx: i64) -> agy_format::steps::Step {
    let conn = rusqlite::Connection::open(path).expect("open");
    let rows = agy_format::database::read_all(&conn, path).expect("rows");
    let row = rows.iter().find(|r| r.idx == idx).expect("the step");
    agy_format::steps::decode(row)
}

const RESUME_ARGS: [&str; 3] = [STREAM[0], STREAM[1], SKIP];

fn resume_cumulative(home: &std::path::Path) -> Run {
    run_in(home, "resume-cumulative-1.1.9", "20", &RESUME_ARGS)
}

#[test]
fn a_resumed_result_is_cumulative_over_the_conversation_like_1_1_9() {
    let home = tempfile::tempdir().expect("tempdir");
    let args = RESUME_ARGS;
    let r = resume_cumulative(home.path());
    assert_eq!((r.code(), r.stderr()), (Some(0), String::new()));
    assert_eq!(
        steps_seen(&r.stdout()),
        seen(&[
            (8, "user_input", "DONE"),
            (9, "system_message", "DONE"),
            (10, "agent_response", "ACTIVE"),
            (10, "agent_response", "DONE"),
        ])
    );
    // Per call: this turn's one model call.
    assert_eq!(
        update(&r.stdout(), 10, "DONE")["usage"],
        usage(3_200, 450, 240, 12_300)
    );
    // The result: two earlier turns (each an answer and a checkpoint, from
    // the database's metadata 9) and this one; 3 s per earlier turn by its
    // steps' timestamps, plus this run's 1.5 s.
    let result = r.result();
    assert_eq!(result["num_turns"], 3);
    assert_eq!(
        result["usage"],
        usage(
            9_800 + 99 + 10_100 + 99 + 3_200,
            1_300 + 4 + 420 + 4 + 450,
            1_100 + 380 + 240,
            12_300
        )
    );
    assert_eq!(result["duration_seconds"], 7.5);
    assert_eq!(
        result["response"],
        "The bug is in `calc.py`: `add` returns `a - b` instead of `a + b`.\n"
    );
    // Resumed once more: the last turn counts again, read back from the
    // database, and the steps continue after 10.
    let id = result["conversation_id"].as_str().expect("id").to_string();
    let mut again_args = args.to_vec();
    again_args.extend(["--conversation", &id]);
    let again = run_in(home.path(), "resume-cumulative-1.1.9", "20", &again_args);
    assert_eq!(again.code(), Some(0), "{}", again.stderr());
    let steps: Vec<i64> = steps_seen(&again.stdout()).iter().map(|s| s.0).collect();
    assert_eq!(steps, vec![11, 12, 13, 13]);
    let result = again.result();
    assert_eq!(result["conversation_id"], id.as_str());
    assert_eq!(result["num_turns"], 4);
    assert_eq!(result["usage"]["input_tokens"], 23_298 + 3_200);
    assert_eq!(result["usage"]["cache_read_tokens"], 2 * 12_300);
    // The third turn now counts by its steps' timestamps (created 1 s
    // apart, idx 8 to 10 as recorded: 2 s), this run by its 1.5 s.
    assert_eq!(result["duration_seconds"], 6.0 + 2.0 + 1.5);
}

/// The same run against the real capture `stream-json-more/jdiaz-1.1.9-resume-cumulative.ndjson`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_resumed_turn_has_the_shape_of_the_1_1_9_capture() {
    let home = tempfile::tempdir().expect("tempdir");
    assert_shape_of_capture(
        &resume_cumulative(home.path()).stdout(),
        "stream-json-more/jdiaz-1.1.9-resume-cumulative.ndjson",
    );
}

const MISSING_ID: &str = "00000000-0000-4000-8000-000000000000";

fn resume_unknown_id(home: &std::path::Path) -> Run {
    run_in(
        home,
        "resume-unknown-id-1.2.7",
        "20",
        &[STREAM[0], STREAM[1], "--conversation", MISSING_ID],
    )
}

#[test]
fn an_unknown_conversation_id_warns_and_starts_a_new_one_like_1_2_7() {
    let missing = MISSING_ID;
    let home = tempfile::tempdir().expect("tempdir");
    let r = resume_unknown_id(home.path());
    assert_eq!(r.code(), Some(0));
    assert_eq!(
        r.stderr(),
        format!("warning: conversation \"{missing}\" not found\n")
    );
    let init: serde_json::Value =
        serde_json::from_str(r.stdout().lines().next().expect("init")).expect("JSON");
    let id = init["conversation_id"].as_str().expect("id").to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok() && id != missing, "{id}");
    assert_eq!(
        only_db(home.path()).file_stem().and_then(|s| s.to_str()),
        Some(id.as_str())
    );
    assert_eq!(
        steps_seen(&r.stdout()),
        seen(&[
            (0, "user_input", "DONE"),
            (1, "agent_response", "ACTIVE"),
            (1, "agent_response", "DONE"),
        ])
    );
    assert_eq!(update(&r.stdout(), 1, "ACTIVE")["text_delta"], "fresh");
    assert_eq!(update(&r.stdout(), 1, "DONE")["text_delta"], "\n");
    let result = r.result();
    assert_eq!(result["conversation_id"], id.as_str());
    assert_eq!(result["response"], "fresh\n");
    assert_eq!(result["num_turns"], 1);
}

/// The same run against the real capture `stream-json-more/crt-1.2.7-win-resume-unknown-id.jsonl`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn an_unknown_conversation_id_has_the_shape_of_the_1_2_7_capture() {
    let home = tempfile::tempdir().expect("tempdir");
    let r = resume_unknown_id(home.path());
    let rel = "stream-json-more/crt-1.2.7-win-resume-unknown-id.jsonl";
    assert_shape_of_capture(&r.stdout(), rel);
    let real = capture(rel);
    let warned = capture_header(&real, "stderr").expect("stderr header");
    assert!(warned.starts_with("warning: conversation \"") && warned.ends_with("\" not found"));
    assert!(capture_header(&real, "exit").is_some_and(|e| e.starts_with("0 ")));
}

fn checkpoint() -> Run {
    run(
        "checkpoint-1.1.9",
        "20",
        &[STREAM[0], STREAM[1], "--agent", "agy-review"],
    )
}

#[test]
fn a_checkpoint_carries_its_side_calls_usage_into_the_result_like_1_1_9() {
    let r = checkpoint();
    assert_eq!((r.code(), r.stderr()), (Some(0), String::new()));
    let init: serde_json::Value =
        serde_json::from_str(r.stdout().lines().next().expect("init")).expect("JSON");
    assert_eq!(init["init"]["agent"], "agy-review");
    assert_eq!(
        steps_seen(&r.stdout()),
        seen(&[
            (0, "user_input", "DONE"),
            (1, "agent_response", "ACTIVE"),
            (1, "agent_response", "DONE"),
            (2, "checkpoint", "DONE"),
        ])
    );
    let checkpoint = update(&r.stdout(), 2, "DONE");
    assert_eq!(checkpoint["usage"], usage(220, 4, 0, 0));
    assert_eq!(checkpoint["duration_seconds"], 0.46);
    assert_eq!(
        r.result()["usage"],
        usage(12_100 + 220, 1_400 + 4, 1_200, 0),
        "answer call + checkpoint call"
    );
    assert_eq!(r.result()["num_turns"], 1);
}

/// The same run against the real capture `stream-json-more/jdiaz-1.1.9-review-checkpoint.ndjson`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_checkpoint_has_the_shape_of_the_1_1_9_capture() {
    assert_shape_of_capture(
        &checkpoint().stdout(),
        "stream-json-more/jdiaz-1.1.9-review-checkpoint.ndjson",
    );
}

fn slash_model(home: &std::path::Path) -> Run {
    run_in(home, "slash-model-1.2.7", "20", &STREAM)
}

#[test]
fn slash_model_prints_a_command_result_and_no_conversation_like_1_2_7() {
    let home = tempfile::tempdir().expect("tempdir");
    let r = slash_model(home.path());
    assert_eq!((r.code(), r.stderr()), (Some(0), String::new()));
    let data = r#"{"name":"model","data":{"id":"gemini-3.8-flash-medium","label":"Gemini 3.8 Flash (Medium)","effort":"medium","is_default":false}}"#;
    assert_eq!(
        r.stdout(),
        format!(
            "{{\"event\":\"command_result\",\"command\":{data}}}\n\
             {{\"event\":\"result\",\"result\":{{\"conversation_id\":\"\",\"status\":\"SUCCESS\",\
             \"response\":\"gemini-3.8-flash-medium\\tGemini 3.8 Flash (Medium)\\n\",\
             \"duration_seconds\":0,\"num_turns\":0,\"usage\":{{\"input_tokens\":0,\"output_tokens\":0,\
             \"thinking_tokens\":0,\"cache_read_tokens\":0,\"total_tokens\":0}},\"command\":{data}}}}}\n"
        )
    );
    assert!(
        !home.path().join(".gemini").exists(),
        "no conversation database"
    );
    let text = run("slash-model-1.2.7", "20", &[]);
    assert_eq!(
        text.stdout(),
        "gemini-3.8-flash-medium\tGemini 3.8 Flash (Medium)\n"
    );
}

/// The same run against the real capture `stream-json-more/jdiaz-1.2.7-command-result-model.ndjson`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn slash_model_prints_the_1_2_7_captures_bytes() {
    let home = tempfile::tempdir().expect("tempdir");
    let real = capture("stream-json-more/jdiaz-1.2.7-command-result-model.ndjson");
    // Our values are the capture's: the same bytes.
    assert_eq!(
        slash_model(home.path()).stdout().trim_end(),
        real.trim_end()
    );
}

/// Without `--dangerously-skip-permissions` agy 1.2.7 denies the tool:
/// step ERROR with `tool_info.error` (text from the recording's
/// `stream_error`: the database row has none), SUCCESS with
/// `denied_actions`, the `jetski:` line, exit 0.
fn assert_denied_in_error(r: &Run, tool: &str, (action, display_name): (&str, &str), target: &str) {
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.stderr(), jetski(action));
    let idx = steps_seen(&r.stdout())
        .iter()
        .find(|s| s.2 == "ERROR")
        .expect("a step in ERROR")
        .0;
    let ended = update(&r.stdout(), idx, "ERROR");
    assert_eq!(ended["step_type"], "tool");
    assert_eq!(ended["tool_name"], tool);
    assert_eq!(
        ended["tool_info"]["error"],
        serde_json::json!({"type": "TOOL_ERROR", "message": format!(
            "permission check failed for {action} \"{target}\": user denied permission for {action}({target})\n\
             Do not attempt to circumvent this denial by rephrasing the command, using alternative \
             tools/scripts (e.g. python, sh, curl), or accessing the same target resource. Proceed \
             without performing this action.")})
    );
    assert!(ended["tool_info"].get("output").is_none());
    assert!(ended["duration_seconds"].is_number());
    let result = r.result();
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "");
    assert_eq!(
        result["denied_actions"],
        serde_json::json!([{"action": action, "display_name": display_name}])
    );
}

fn jetski(kind: &str) -> String {
    format!(
        "jetski: no output produced — a tool required the \"{kind}\" permission that headless mode \
         cannot prompt for, so it was auto-denied. Add an allow-rule under permissions.allow in \
         settings.json (e.g. {kind}(<target>)). Alternatively, re-run with \
         --dangerously-skip-permissions to auto-approve all tools.\n"
    )
}

fn denied_write(home: &std::path::Path) -> Run {
    run_in(home, "denied-write-1.2.7", "20", &STREAM)
}

#[test]
fn a_denied_write_ends_in_error_with_text_only_the_stream_has_like_1_2_7() {
    let home = tempfile::tempdir().expect("tempdir");
    let r = denied_write(home.path());
    let target = "/home/dev/project/NOTES.md";
    assert_denied_in_error(&r, "write_to_file", ("write_file", "WriteToFile"), target);
    assert_eq!(
        steps_seen(&r.stdout()),
        seen(&[
            (0, "user_input", "DONE"),
            (1, "agent_response", "DONE"),
            (2, "tool", "ACTIVE"),
            (2, "tool", "ERROR"),
        ])
    );
    assert_eq!(
        update(&r.stdout(), 2, "ACTIVE")["tool_info"]["parameters"],
        serde_json::json!({"TargetFile": target})
    );
    assert_eq!(r.result()["usage"], usage(18_400, 380, 230, 0));
    // The database's step ended in ERROR without any error text.
    let step = db_step(&only_db(home.path()), 2);
    assert_eq!(step.status, agy_format::steps::StepStatus::Error);
    assert!(step.errors.is_empty(), "{:?}", step.errors);
    // With the flag the file is written and agy answers.
    let allowed = run("denied-write-1.2.7", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(allowed.result()["response"], "Wrote NOTES.md.\n");
    assert!(allowed.result().get("denied_actions").is_none());
    assert_eq!(allowed.stderr(), "");
}

/// The same run against the real capture `stream-json-more/jdiaz-1.2.7-denied-write.ndjson`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_denied_write_has_the_shape_of_the_1_2_7_capture() {
    let home = tempfile::tempdir().expect("tempdir");
    assert_shape_of_capture(
        &denied_write(home.path()).stdout(),
        "stream-json-more/jdiaz-1.2.7-denied-write.ndjson",
    );
}

fn mcp_denied(home: &std::path::Path) -> Run {
    run_in(home, "mcp-denied-1.2.7", "20", &STREAM)
}

#[test]
fn a_denied_mcp_call_ends_in_error_with_text_only_the_stream_has_like_1_2_7() {
    let home = tempfile::tempdir().expect("tempdir");
    let r = mcp_denied(home.path());
    assert_denied_in_error(
        &r,
        "call_mcp_tool",
        ("mcp", "CallMcpTool"),
        "notes/add_note",
    );
    assert_eq!(
        steps_seen(&r.stdout()),
        seen(&[
            (0, "user_input", "DONE"),
            (1, "agent_response", "DONE"),
            (2, "tool", "ACTIVE"),
            (2, "tool", "DONE"),
            (3, "agent_response", "DONE"),
            (4, "tool", "ACTIVE"),
            (4, "tool", "ERROR"),
        ])
    );
    let schema = update(&r.stdout(), 2, "DONE");
    assert_eq!(schema["tool_info"]["output"], "1 lines, 147 bytes");
    assert_eq!(
        update(&r.stdout(), 4, "ACTIVE")["tool_info"]["parameters"],
        serde_json::json!({"Arguments": {"message": "hello"}, "ServerName": "notes", "ToolName": "add_note"})
    );
    assert_eq!(
        r.result()["usage"],
        usage(12_700 + 13_250, 250 + 220, 180 + 160, 0)
    );
    let step = db_step(&only_db(home.path()), 4);
    assert_eq!(step.step_type, agy_format::steps::StepType::McpTool);
    assert!(step.errors.is_empty(), "{:?}", step.errors);
    let allowed = run("mcp-denied-1.2.7", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(
        allowed.result()["response"],
        "add_note returned: Note saved.\n"
    );
}

/// The same run against the real capture `stream-json-more/crt-1.2.7-win-mcp-denied-headless.jsonl`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_denied_mcp_call_has_the_shape_and_stderr_of_the_1_2_7_capture() {
    let home = tempfile::tempdir().expect("tempdir");
    let r = mcp_denied(home.path());
    let rel = "stream-json-more/crt-1.2.7-win-mcp-denied-headless.jsonl";
    assert_shape_of_capture(&r.stdout(), rel);
    assert_eq!(
        capture_header(&capture(rel), "stderr").map(|l| format!("{l}\n")),
        Some(r.stderr())
    );
}

fn killed() -> Run {
    run("killed-1.2.7", "20", &[STREAM[0], STREAM[1], SKIP])
}

#[test]
fn a_killed_run_prints_init_and_the_prompt_only_like_1_2_7() {
    let r = killed();
    assert_eq!((r.code(), r.stderr()), (Some(1), String::new()));
    assert_eq!(
        events(&r.stdout()),
        ev(&[("init", "", ""), ("step_update", "user_input", "DONE")])
    );
    // The model was thinking for about 9 s (0.45 s at speed 20).
    assert!(r.elapsed >= Duration::from_millis(400), "{:?}", r.elapsed);
    assert_eq!(run("killed-1.2.7", "20", &[]).stdout(), "");
}

/// The same run against the real capture `stream-json-more/crt-1.2.7-win-killed.jsonl`.
#[test]
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
fn a_killed_run_has_the_shape_of_the_1_2_7_capture() {
    let rel = "stream-json-more/crt-1.2.7-win-killed.jsonl";
    assert_shape_of_capture(&killed().stdout(), rel);
    assert!(capture_header(&capture(rel), "exit").is_some_and(|e| e.starts_with("1 ")));
}
