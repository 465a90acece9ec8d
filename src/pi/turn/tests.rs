//! The pi turn through its channels: pi's input as one end of a socket
//! pair, pi's events into a buffer. What needs no agy is checked here (the
//! request's checks, the waits, the session's lines); whole turns over
//! fake-agy are `tests/stream_protocol.rs` and `tests/warm_sessions.rs`.

use super::input::is_abort_line;
use super::warm_session::{classify, Current, Msg};
use super::*;
use crate::pi::provider::stream::PiStream;
use crate::settings::{Env, Settings};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// pi's end of the output: every line the turn wrote.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<u8>>>);

impl Write for Seen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seen {
    /// The events written so far, parsed.
    fn events(&self) -> Vec<serde_json::Value> {
        let bytes = self.0.lock().expect("buffer").clone();
        String::from_utf8(bytes)
            .expect("UTF-8 events")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
            .collect()
    }

    fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// The one error's message and reason.
    fn error(&self) -> (String, String) {
        let events = self.events();
        let error = events
            .iter()
            .find(|e| e["type"] == "error")
            .expect("an error event");
        (
            error["errorMessage"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            error["reason"].as_str().unwrap_or_default().to_string(),
        )
    }
}

const LIMITS: Limits = Limits {
    timeout: Duration::from_secs(60),
    request_wait: Duration::from_secs(30),
};

/// The settings of an environment holding only `vars` (no HOME, no state
/// directory: nothing of the user's is touched).
fn settings(vars: &[(&str, &str)]) -> Settings {
    Settings::resolve(&Env::from_vars(vars.iter().copied()))
}

/// One `stream` turn fed `input`'s bytes (then its end, unless `keep_open`).
async fn one(input: &[u8], limits: Limits, cancel: CancellationToken) -> Seen {
    let (mut pi_side, ours) = UnixStream::pair().expect("socket pair");
    pi_side.write_all(input).expect("write input");
    let seen = Seen::default();
    let mut pi = PiStream::new(seen.clone());
    pi.start();
    let settings = settings(&[]);
    let turn = one_turn(ours, &mut pi, limits, &settings, None, cancel);
    // pi's side stays open for the whole turn, as pi keeps stdin open.
    let ok = turn.await;
    drop(pi_side);
    assert!(!ok, "none of these turns can succeed without agy");
    seen
}

#[tokio::test]
async fn a_request_that_is_not_json_is_a_bad_request() {
    let seen = one(b"{not json\n", LIMITS, CancellationToken::new()).await;
    assert_eq!(seen.types(), ["start", "error"]);
    let (message, reason) = seen.error();
    assert!(message.starts_with("agy-bridge: bad request:"), "{message}");
    assert_eq!(reason, "error");
}

#[tokio::test]
async fn an_empty_request_line_says_what_to_send() {
    let seen = one(b"   \n", LIMITS, CancellationToken::new()).await;
    let (message, _) = seen.error();
    assert!(message.contains("the request line is empty"), "{message}");
}

#[tokio::test]
async fn a_request_that_never_comes_ends_at_the_wait() {
    let limits = Limits {
        request_wait: Duration::from_millis(50),
        ..LIMITS
    };
    let seen = one(b"{\"model\":", limits, CancellationToken::new()).await;
    let (message, reason) = seen.error();
    assert!(message.contains("no complete request line"), "{message}");
    assert!(message.contains("AGY_REQUEST_TIMEOUT_SECS"), "{message}");
    assert_eq!(reason, "error");
}

#[tokio::test]
async fn cancelled_before_the_request_is_an_abort() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let seen = one(b"", LIMITS, cancel).await;
    assert_eq!(seen.types(), ["start", "error"]);
    let (message, reason) = seen.error();
    assert_eq!(message, "Operation aborted");
    assert_eq!(reason, "aborted");
}

#[tokio::test]
async fn a_request_line_that_is_not_utf8_names_the_offset() {
    let seen = one(b"{\"a\":\"\xff\"}\n", LIMITS, CancellationToken::new()).await;
    let (message, _) = seen.error();
    assert!(message.contains("invalid byte at offset 6"), "{message}");
}

#[test]
fn abort_lines_are_read_as_json_not_text() {
    assert!(is_abort_line(b"{\"type\":\"abort\"}\n"));
    assert!(is_abort_line(b" { \"type\" : \"abort\" } "));
    assert!(!is_abort_line(b"{\"type\":\"abortion\"}"));
    assert!(!is_abort_line(b"abort"));
    assert!(!is_abort_line(b"{\"kind\":\"abort\"}"));
}

/// The session's reader sorts pi's lines: a request starts a turn with its
/// own abort token, an abort cancels only the current turn, a warm line is
/// the session's, a control line goes to the current turn's queue.
#[test]
fn session_lines_are_sorted_for_the_current_turn() {
    let gone = CancellationToken::new();
    let (control, _) = tokio::sync::mpsc::channel(1);
    let current = Mutex::new(Current {
        cancel: gone.child_token(),
        control,
    });
    let Some(Msg::Turn {
        line,
        cancel: first,
        mut control,
    }) = classify(b"{\"type\":\"request\",\"model\":\"m\"}\n", &current, &gone)
    else {
        panic!("a request line is a turn");
    };
    assert_eq!(line, "{\"type\":\"request\",\"model\":\"m\"}");
    let tool_result = br#"{"type":"tool_result","toolCallId":"c1","content":[]}"#;
    assert!(classify(tool_result, &current, &gone).is_none());
    assert!(
        control.try_recv().is_ok(),
        "the control line reached the turn"
    );
    assert!(matches!(
        classify(b"{\"type\":\"warm\",\"model\":\"m\"}", &current, &gone),
        Some(Msg::Warm(_))
    ));
    assert!(classify(b"{\"type\":\"abort\"}\n", &current, &gone).is_none());
    assert!(first.is_cancelled(), "the abort reached the current turn");
    assert!(!gone.is_cancelled(), "an abort does not end the session");
    // A line with no type (an older extension) is a request too.
    assert!(matches!(
        classify(b"{\"model\":\"m\"}", &current, &gone),
        Some(Msg::Turn { .. })
    ));
    assert!(classify(b"  \n", &current, &gone).is_none());
}

/// `stream --session`: each turn's events go to a stream of its own, a bad
/// request fails only its turn, and the end of pi's input ends the session.
#[tokio::test]
async fn a_session_serves_turns_until_its_input_ends() {
    let (mut pi_side, ours) = UnixStream::pair().expect("socket pair");
    let seen = Seen::default();
    let streams = Arc::new(Mutex::new(0));
    let (sink, count) = (seen.clone(), streams.clone());
    let out: Output = Box::new(move || {
        *count.lock().expect("count") += 1;
        PiStream::new(Box::new(sink.clone()) as Box<dyn Write>)
    });
    let settings = settings(&[("AGY_WARM", "off")]);
    let gone = CancellationToken::new();
    let session = serve_session(ours, out, &settings, None, gone.clone());
    let errors = |seen: &Seen| seen.types().iter().filter(|t| *t == "error").count();
    let pi = async {
        for turn in 1..=2 {
            pi_side
                .write_all(b"{\"type\":\"request\",\"bad\n")
                .expect("write");
            // The turn's error is the event waited for.
            while errors(&seen) < turn {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        drop(pi_side);
    };
    // Generous bound: each turn is answered, and the input's end ends it all.
    tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(session, pi) })
        .await
        .expect("both turns answered, and the session ended with its input");
    assert_eq!(seen.types(), ["start", "error", "start", "error"]);
    assert_eq!(*streams.lock().expect("count"), 2);
    assert!(gone.is_cancelled());
}
