//! The gate's server: one connection per hook run, two lines in (the
//! token, then `{"event","payload"}`), one decision line out.
//!
//! It listens on a Unix socket inside the gate's private directory (mode
//! 0700): no other user can reach it, as any user could a loopback port.
//! A process of the same user still can, so the token comes first, in a
//! short line within `TOKEN_DEADLINE` (2 s), and nothing more is read until it
//! matches; a connection holds one of the [`MAX_CONNECTIONS`] slots only
//! once it has shown the token, so idle strangers cannot keep the real
//! hook out, and at most [`MAX_PENDING`] may wait to show it. Each line has
//! a size cap and a deadline. Whatever goes wrong, the hook gets a denial
//! (or nothing, which its side reads as one).

use super::call::parse_unambiguous;
use super::policy::{Policy, Verdict};
use super::Question;
use agy_format::hooks::{Decision, HookEvent, ToolPayload};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The token line's cap (a token is 64 hex digits).
pub(crate) const TOKEN_LINE_CAP: usize = 256;
/// The request's cap: a tool call carries whole files (write_to_file).
pub(crate) const REQUEST_CAP: usize = 32 * 1024 * 1024;
/// How long a connection may take to show the token.
pub(crate) const TOKEN_DEADLINE: Duration = Duration::from_secs(2);
/// How long the hook may take to send its request once the token matched.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(30);
/// Hook runs served at once (agy runs one tool at a time, or a few).
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// Connections that have not shown the token yet; more are closed at once.
pub(crate) const MAX_PENDING: usize = 256;
/// The socket's name in the gate's directory (short: a socket's path has
/// at most 104 bytes on macOS).
pub(crate) const SOCKET_FILE: &str = "gate.sock";

/// What every connection handler shares.
pub(crate) struct Shared {
    token: String,
    policy: Mutex<Policy>,
    /// The directories private for the gate's whole life (its own, and
    /// those of what was served with it): every later policy keeps them.
    private: Vec<std::path::PathBuf>,
    questions: mpsc::Sender<Question>,
    pub(super) closing: CancellationToken,
    slots: Semaphore,
    pending: Arc<Semaphore>,
}

impl Shared {
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    pub(super) fn set_policy(&self, mut policy: Policy) {
        for dir in &self.private {
            if !policy.private.contains(dir) {
                policy.private.push(dir.clone());
            }
        }
        if let Ok(mut p) = self.policy.lock() {
            *p = policy;
        }
    }

    /// Where this gate's policy keeps the session's grants.
    pub(super) fn grants(&self) -> super::policy::Grants {
        self.policy
            .lock()
            .map(|p| p.granted.clone())
            .unwrap_or_default()
    }

    fn verdict(&self, payload: &ToolPayload) -> Verdict {
        match self.policy.lock() {
            Ok(p) => p.decide(payload),
            Err(_) => Verdict::Deny("agy-bridge's gate failed (a poisoned lock)".into()),
        }
    }
}

/// Listen on `socket` (inside the gate's private directory) and serve
/// until the gate closes.
pub(super) async fn start(
    policy: Policy,
    questions: mpsc::Sender<Question>,
    socket: &Path,
) -> std::io::Result<Arc<Shared>> {
    let listener = UnixListener::bind(socket)?;
    let token = agy_format::text::new_secret();
    let shared = Arc::new(Shared {
        token,
        private: policy.private.clone(),
        policy: Mutex::new(policy),
        questions,
        closing: CancellationToken::new(),
        slots: Semaphore::new(MAX_CONNECTIONS),
        pending: Arc::new(Semaphore::new(MAX_PENDING)),
    });
    tokio::spawn(accept_loop(listener, shared.clone()));
    Ok(shared)
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    loop {
        let conn = tokio::select! {
            _ = shared.closing.cancelled() => return,
            conn = listener.accept() => conn,
        };
        let Ok((stream, _)) = conn else { continue };
        // Past the pending cap the connection is dropped unanswered.
        let Ok(pending) = shared.pending.clone().try_acquire_owned() else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move { serve_one(stream, shared, pending).await });
    }
}

async fn serve_one(stream: UnixStream, shared: Arc<Shared>, pending: OwnedSemaphorePermit) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let shown = tokio::time::timeout(TOKEN_DEADLINE, read_token(&mut read, &shared)).await;
    drop(pending);
    let decision = match shown {
        Ok(Ok(())) => match shared.slots.try_acquire() {
            Ok(_slot) => decide(read, &shared).await,
            Err(_) => Decision::deny("agy-bridge's gate is serving too many tool calls at once"),
        },
        Ok(Err(why)) => Decision::deny(format!("agy-bridge's gate refused the hook: {why}")),
        Err(_) => Decision::deny("agy-bridge's gate refused the hook: no token in time"),
    };
    let line = format!("{}\n", decision.to_json());
    let _ = write.write_all(line.as_bytes()).await;
    let _ = write.shutdown().await;
}

/// The token line: `Err` says what was wrong with it.
async fn read_token<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
    shared: &Shared,
) -> Result<(), String> {
    let token = read_line(read, TOKEN_LINE_CAP).await?;
    if !agy_format::text::same_secret(token.trim_end().as_bytes(), shared.token.as_bytes()) {
        return Err("wrong token".into());
    }
    Ok(())
}

/// Read the hook's two lines and decide, asking when the policy cannot.
async fn decide<R: AsyncRead + Unpin>(mut read: BufReader<R>, shared: &Shared) -> Decision {
    let lines = tokio::time::timeout(READ_DEADLINE, read_request(&mut read)).await;
    let payload = match lines {
        Ok(Ok(payload)) => payload,
        Ok(Err(why)) => {
            return Decision::deny(format!("agy-bridge's gate refused the hook: {why}"))
        }
        Err(_) => return Decision::deny("agy-bridge's gate refused the hook: it sent too slowly"),
    };
    let verdict = shared.verdict(&payload);
    match verdict.clone() {
        Verdict::Allow(_) => {
            show(shared, payload, verdict);
            Decision::Allow
        }
        Verdict::Deny(reason) => {
            show(shared, payload, verdict);
            Decision::deny(reason)
        }
        Verdict::Ask(note) => ask(shared, payload, note).await,
    }
}

/// Tell the stream about a call the policy decided (never waits: a full
/// queue only costs the line).
fn show(shared: &Shared, payload: ToolPayload, verdict: Verdict) {
    let _ = shared.questions.try_send(Question {
        payload,
        verdict,
        reply: None,
    });
}

/// Hand the call to whoever asks the user and wait for the answer; the
/// gate closing (the turn ended, pi aborted) denies.
async fn ask(shared: &Shared, payload: ToolPayload, note: Option<String>) -> Decision {
    let ended =
        || Decision::deny("the turn ended before the user decided; the call was not allowed");
    let (tx, rx) = oneshot::channel();
    let question = Question {
        payload,
        verdict: Verdict::Ask(note),
        reply: Some(tx),
    };
    tokio::select! {
        _ = shared.closing.cancelled() => return ended(),
        sent = shared.questions.send(question) => if sent.is_err() { return ended() },
    }
    tokio::select! {
        _ = shared.closing.cancelled() => ended(),
        answer = rx => answer.unwrap_or_else(|_| ended()),
    }
}

/// The request line (after the token); an error says what was wrong. A
/// request agy could read two ways (two keys the same but for case) is one.
async fn read_request<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
) -> Result<ToolPayload, String> {
    let line = read_line(read, REQUEST_CAP).await?;
    let request = parse_unambiguous(&line)
        .map_err(|e| format!("the request cannot be read one way ({e})"))?;
    let event = request.get("event").and_then(serde_json::Value::as_str);
    if event != Some(HookEvent::PreToolUse.name()) {
        return Err(format!(
            "it serves {event:?}, and the gate only answers PreToolUse"
        ));
    }
    let payload = request
        .get("payload")
        .cloned()
        .ok_or("the request has no payload")?;
    let payload: ToolPayload = serde_json::from_value(payload)
        .map_err(|e| format!("agy's payload could not be read ({e})"))?;
    if payload.tool_call.name.is_empty() {
        return Err("agy's payload names no tool".into());
    }
    Ok(payload)
}

/// One line of at most `cap` bytes, as text.
async fn read_line<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
    cap: usize,
) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut limited = (&mut *read).take(cap as u64 + 1);
    limited
        .read_until(b'\n', &mut buf)
        .await
        .map_err(|e| format!("cannot read it ({e})"))?;
    if buf.len() > cap {
        return Err(format!("a line over {cap} bytes"));
    }
    if buf.last() != Some(&b'\n') {
        return Err("it ended before a whole line".into());
    }
    String::from_utf8(buf).map_err(|_| "a line that is not UTF-8".into())
}
