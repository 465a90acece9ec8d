//! fake-agy speaks agy's real stream-json: every recording in
//! `recordings/outcomes/` is replayed and its stdout, stderr and exit code
//! are checked against the outcome it stands for (literal values), and,
//! when `AGY_CAPTURES_DIR` points at the real captures, against the shape of
//! the capture it follows (event sequence, keys in order, value types).
//! Every line fake-agy prints must round-trip through the library's
//! `stream_json::Line`, the reader the bridge uses.

use agy_bridge::stream_json::Line;
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
fn stream_shape(text: &str) -> Vec<Shape> {
    text.lines()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            let u = &v["step_update"];
            !(u["step_type"] == "agent_response" && u["state"] == "ACTIVE")
        })
        .map(shape)
        .collect()
}

/// The real capture `rel` under `AGY_CAPTURES_DIR`, or `None` (and a line
/// saying the comparison was skipped) when it is not set.
fn capture(rel: &str) -> Option<String> {
    let Some(dir) = std::env::var_os("AGY_CAPTURES_DIR") else {
        eprintln!(
            "AGY_CAPTURES_DIR is not set: skipped the comparison with the real capture {rel}"
        );
        return None;
    };
    let path = PathBuf::from(dir).join(rel);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
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
    let rec = agy_bridge::recording::Recording::load(
        &agy_bridge::recording::bundled_dir().join(format!("outcomes/{name}.jsonl")),
    )
    .expect("recording");
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fake-agy"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
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
            parsed @ (Line::Init { .. } | Line::StepUpdate(_) | Line::Result(_)) => {
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

#[test]
fn success_prints_the_answer_whole_on_done_like_1_2_17() {
    let r = run("pong-1.2.17", "20", &STREAM);
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
    if let Some(real) = capture("stream-json-1.2.17/success-pong.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
    // Text mode: only the answer.
    let text = run("pong-1.2.17", "20", &[]);
    assert_eq!(text.stdout(), "READY\n");
}

#[test]
fn tools_report_name_parameters_and_output_like_1_2_17() {
    let r = run("tools-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP]);
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
    if let Some(real) = capture("stream-json-1.2.17/success-tools.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
}

#[test]
fn web_tools_have_no_output_like_1_2_17() {
    let r = run("web-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.result()["response"], "RUST=1.95.0\n");
    assert!(!r.stdout().contains("\"output\""));
    if let Some(real) = capture("stream-json-1.2.17/web-tool.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
}

#[test]
fn a_denied_command_ends_promptly_with_denied_actions_like_1_2_17() {
    let r = run("denied-1.2.17", "20", &STREAM);
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
    if let Some(real) = capture("stream-json-1.2.17/denied-command.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
    // With the flag the command runs and agy answers.
    let allowed = run("denied-1.2.17", "20", &[STREAM[0], STREAM[1], SKIP]);
    assert_eq!(allowed.result()["response"], "/srv is empty.\n");
    assert!(allowed.result().get("denied_actions").is_none());
    // Text mode prints nothing for the denied run.
    assert_eq!(run("denied-1.2.17", "20", &[]).stdout(), "");
}

#[test]
fn a_denied_command_in_1_1_7_is_canceled_with_the_jetski_line() {
    let r = run("denied-1.1.7", "20", &STREAM);
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
    if let Some(real) = capture("other/1.1.7-noflags.stdout-lastline") {
        assert_eq!(
            stream_shape(&last_lines(&r.stdout(), 1)),
            stream_shape(&real)
        );
    }
    if let Some(real) = capture("other/1.1.7-noflags.stderr") {
        assert_eq!(r.stderr().trim_end(), real.trim_end());
    }
}

#[test]
fn quota_exhausted_exits_3_with_the_sentence_and_agy_error() {
    let r = run("quota-1.2.17", "20", &STREAM);
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
    if let Some(real) = capture("stream-json-1.2.17/quota-exhausted.stdout") {
        assert_eq!(
            stream_shape(&last_lines(&r.stdout(), 2)),
            stream_shape(&real)
        );
    }
    if let Some(real) = capture("stream-json-1.2.17/quota-exhausted.stderr") {
        let real_json = real
            .lines()
            .nth(1)
            .and_then(|l| l.strip_prefix("AGY_ERROR: "));
        assert_eq!(Some(shape(agy_error)), real_json.map(shape));
        assert!(real.starts_with("error: "));
    }
}

#[test]
fn print_timeout_returns_a_partial_success_after_8s() {
    let r = run(
        "print-timeout-1.2.17",
        "1",
        &[STREAM[0], STREAM[1], "--print-timeout", "8s"],
    );
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
    if let Some(real) = capture("stream-json-1.2.17/print-timeout.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
    if let Some(real) = capture("stream-json-1.2.17/print-timeout.stderr") {
        assert_eq!(r.stderr(), real);
    }
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

#[test]
fn not_signed_in_prints_a_bare_error_result_in_json_mode() {
    let r = run("signed-out-1.1.15", "20", &["--output-format", "json"]);
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
    if let Some(real) = capture("other/1.1.15-foreign-home.stdout") {
        assert_eq!(shape(r.stdout().trim_end()), shape(real.trim_end()));
    }
    if let Some(real) = capture("other/1.1.15-foreign-home.stderr") {
        assert_eq!(r.stderr(), real);
    }
    // stream-json: the same result as the only line, no init.
    let s = run("signed-out-1.1.15", "20", &STREAM);
    assert_eq!(events(&s.stdout()), ev(&[("result", "", "")]));
}

#[test]
fn an_unknown_model_lists_the_models_on_stderr_in_1_2_17() {
    let r = run("unknown-model-1.2.17", "20", &STREAM);
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
    if let Some(real) = capture("stream-json-1.2.17/error-model-rejected.stderr") {
        let real: Vec<&str> = real.lines().collect();
        assert!(real[0].starts_with("error: invalid model selection (--model \""));
        assert_eq!(real[1], lines[1]);
        assert!(real[2..].iter().all(|l| l.starts_with("  ")));
    }
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

#[test]
fn a_model_effort_conflict_has_no_conversation() {
    let r = run("model-effort-1.2.17", "20", &STREAM);
    assert_eq!(r.code(), Some(1));
    let error = "invalid model selection (--model \"gemini-3.8-flash-medium\" --effort \"low\"): --model gemini-3.8-flash-medium conflicts with --effort=low";
    assert_eq!(r.stderr(), format!("error: {error}\n"));
    assert_eq!(r.stdout().lines().count(), 1, "no init line");
    let result = r.result();
    assert_eq!(result["conversation_id"], "");
    assert_eq!(result["error"], error);
    assert_eq!(result["num_turns"], 0);
    if let Some(real) = capture("stream-json-1.2.17/error-model-effort-conflict.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
    if let Some(real) = capture("stream-json-1.2.17/error-model-effort-conflict.stderr") {
        assert!(real.starts_with("error: invalid model selection (--model \""));
        assert_eq!(real.lines().count(), 1);
    }
}

#[test]
fn agy_1_3_1_streams_text_deltas_while_active() {
    let r = run("streaming-1.3.1", "20", &STREAM);
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
    if let Some(real) = capture("stream-json-1.2.17/success-pong.stdout") {
        assert_eq!(stream_shape(&r.stdout()), stream_shape(&real));
    }
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
    let corpus = agy_bridge::synth::corpus();
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
                    let lines: Vec<Line> = stdout.lines().map(Line::parse).collect();
                    let first_ok = before || matches!(lines.first(), Some(Line::Init { .. }));
                    let last_ok = matches!(lines.last(), Some(Line::Result(_)));
                    let middle_ok = lines
                        .iter()
                        .skip(1)
                        .take(lines.len().saturating_sub(2))
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
