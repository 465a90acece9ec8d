//! The hook's side of the gate: what `agy-bridge hook PreToolUse --gate
//! FILE` does when agy runs it. It reads agy's payload (refusing one agy
//! could read two ways: it still holds the raw text, where two equal keys
//! are still two), forwards it with the gate's token to the gate's socket,
//! and always ends with an explicit decision: an unreadable gate file, a
//! bridge that is gone, a refused or broken connection, or no answer within
//! the gate's wait (set inside agy's own hook timeout) all deny, each
//! saying why.

use super::call::parse_unambiguous;
use agy_format::hooks::Decision;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long sending the request may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// The payload's cap (the server's own cap, plus the request's wrapping).
const PAYLOAD_CAP: u64 = super::listen::REQUEST_CAP as u64 - 1024;

/// What gate.json says.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GateFile {
    socket: PathBuf,
    token: String,
    wait_secs: u64,
}

/// The decision for the payload on `stdin`, for the hook `event`.
pub fn decide(event: &str, gate_file: &Path, stdin: impl Read) -> Decision {
    let denied = |why: String| {
        Decision::deny(format!(
            "agy-bridge's permission gate could not get a decision ({why}); the call was not allowed"
        ))
    };
    // agy's payload first, whatever follows: agy never meets a closed pipe.
    let payload = match read_payload(stdin) {
        Ok(p) => p,
        Err(why) => return denied(why),
    };
    let gate = match read_gate_file(gate_file) {
        Ok(g) => g,
        Err(why) => return denied(why),
    };
    match exchange(&gate, event, &payload) {
        Ok(line) => Decision::from_hook_output(&line, true),
        Err(why) => denied(why),
    }
}

fn read_gate_file(path: &Path) -> Result<GateFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {}: {e}; the bridge may be gone",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a gate file ({e})", path.display()))
}

fn read_payload(stdin: impl Read) -> Result<serde_json::Value, String> {
    let mut text = String::new();
    stdin
        .take(PAYLOAD_CAP + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read agy's payload ({e})"))?;
    if text.len() as u64 > PAYLOAD_CAP {
        return Err("agy's payload is too large to forward".into());
    }
    parse_unambiguous(&text).map_err(|e| format!("agy's payload cannot be read one way ({e})"))
}

/// Send the token and the request; the answer's line.
fn exchange(gate: &GateFile, event: &str, payload: &serde_json::Value) -> Result<String, String> {
    let mut stream = UnixStream::connect(&gate.socket).map_err(|e| {
        format!(
            "the bridge at {} cannot be reached: {e}",
            gate.socket.display()
        )
    })?;
    stream
        .set_write_timeout(Some(SEND_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let request = serde_json::json!({"event": event, "payload": payload});
    let sent = stream
        .write_all(format!("{}\n{request}\n", gate.token).as_bytes())
        .and_then(|()| stream.flush());
    sent.map_err(|e| format!("the bridge hung up: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(gate.wait_secs.max(1))))
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    match BufReader::new(stream).take(64 * 1024).read_line(&mut line) {
        Ok(0) => Err("the bridge closed the connection without an answer".into()),
        Ok(_) => Ok(line),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(format!(
                "no decision came within {} minutes",
                gate.wait_secs / 60
            ))
        }
        Err(e) => Err(format!("the answer could not be read: {e}")),
    }
}
