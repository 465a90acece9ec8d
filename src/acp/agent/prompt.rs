//! One `session/prompt`, on a task of its own: the prompt as agy's text,
//! the turn started on the engine, its events, notes and the gate's
//! questions relayed as they come (a question's wait for the client on a
//! task of its own, so events and a cancel still flow), agy's edits read
//! off the runtime, then the stop reason (or the failure as a JSON-RPC
//! error) sent. The engine saves the binding, under the session's turn lock.

use super::{notify, session_key, thought_update, Bridge, Session};
use crate::acp::diffs::FileTexts;
use crate::acp::engine::{TurnHandle, TurnSpec};
use crate::acp::map::{edited_update, ending, refused, Ending, Out, TurnFailure, TurnMapper};
use crate::acp::permission::{self, Choice, SessionRules};
use crate::gate::{Question, Verdict};
use crate::runner::RunResult;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, EmbeddedResourceResource, PromptRequest, PromptResponse,
    RequestPermissionRequest, SessionId, SessionUpdate, TextContent, ToolCallId, UsageUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, ErrorCode};
use agy_format::hooks::Decision;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Run the prompt and answer it.
pub(super) async fn prompt(
    bridge: Arc<Bridge>,
    req: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let sid = req.session_id.clone();
    let cancel = CancellationToken::new();
    let (session, spec) = match begin(&bridge, &req, &cancel) {
        Ok(begun) => begun,
        Err(e) => return responder.respond_with_error(e),
    };
    if let Some(note) = &session.mcp_note {
        notify(&cx, &sid, thought_update(note))?;
    }
    let handle = match bridge.setup.engine.start(spec, cancel.clone()).await {
        Ok(handle) => handle,
        Err(words) => {
            bridge.end(&sid, None);
            return responder.respond_with_error(failure_error(&TurnFailure::said(words)));
        }
    };
    let mut relay = Relay {
        cx: cx.clone(),
        sid: sid.clone(),
        mapper: TurnMapper::new(&session.cwd),
        texts: FileTexts::default(),
        rules: session.rules.clone(),
        cancel: cancel.clone(),
    };
    let result = relay.run(handle).await;
    bridge.end(&sid, Some(&result));
    if let Some(usage) = bridge.usage_update(&session, &result) {
        notify(&cx, &sid, usage)?;
    }
    for notice in &result.notices {
        notify(&cx, &sid, thought_update(&format!("\n[{notice}]\n")))?;
    }
    match ending(&result, cancel.is_cancelled()) {
        Ending::Stop { reason, say } => {
            if let Some(words) = say {
                let text = format!("\n\n{words}");
                notify(&cx, &sid, SessionUpdate::AgentMessageChunk(chunk(&text)))?;
            }
            responder.respond(PromptResponse::new(reason))
        }
        Ending::Failed(failure) => responder.respond_with_error(failure_error(&failure)),
    }
}

/// The session's state for the turn and the turn to start; marks the
/// session running. `Err`: no such session, a turn already running, or a
/// prompt agy cannot take.
fn begin(
    bridge: &Bridge,
    req: &PromptRequest,
    cancel: &CancellationToken,
) -> Result<(Session, TurnSpec), Error> {
    let text = prompt_text(&req.prompt)?;
    let mut sessions = bridge.lock();
    let session = sessions
        .get_mut(&*req.session_id.0)
        .ok_or_else(|| super::not_found(&req.session_id))?;
    if session.running.is_some() {
        return Err(Error::new(
            ErrorCode::INVALID_REQUEST,
            "a turn is already running in this session; cancel it (session/cancel) or wait for its end",
        ));
    }
    session.running = Some(cancel.clone());
    let spec = bridge.spec(&req.session_id.0, session, text);
    let begun = session.clone();
    // What the editor's servers lost is said in this turn only.
    session.mcp_note = None;
    Ok((begun, spec))
}

impl Bridge {
    /// The context in use after the turn against the session's model's
    /// window; `None` without agy's usage or a known window (agy's own
    /// default model: which one it is, agy does not say).
    fn usage_update(&self, session: &Session, result: &RunResult) -> Option<SessionUpdate> {
        let usage = result.usage.as_ref()?;
        let model = session.model.as_deref()?;
        let choice = self.setup.models.iter().find(|m| m.id == model)?;
        let size = choice.context_window?;
        Some(SessionUpdate::UsageUpdate(UsageUpdate::new(
            usage.context_tokens(),
            size,
        )))
    }

    /// The turn `prompt` of session `id` would run.
    pub(super) fn spec(&self, id: &str, session: &Session, prompt: String) -> TurnSpec {
        let choice = session
            .model
            .as_deref()
            .and_then(|id| self.setup.models.iter().find(|m| m.id == id));
        TurnSpec {
            session_key: session_key(id),
            prompt,
            cwd: session.cwd.clone(),
            mode: session.mode,
            model: choice.map(|m| m.model.clone()),
            effort: choice.and_then(|m| m.effort),
            resume: session.conversation.clone(),
            after_idx: session.conversation.as_ref().and(session.last_idx),
            grants: session.rules.grants.clone(),
            mcp_servers: session.mcp_servers.clone(),
        }
    }
}

impl Bridge {
    /// The turn ended: the session is free, and bound to the conversation
    /// the turn ran in (a turn that bound none keeps the old binding).
    fn end(&self, sid: &SessionId, result: Option<&RunResult>) {
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(&*sid.0) else {
            return;
        };
        session.running = None;
        let Some(result) = result else { return };
        let bound = result
            .conversation_id
            .as_deref()
            .and_then(|id| agy_format::ids::ConversationId::parse(id).ok());
        if let Some(id) = bound {
            session.conversation = Some(id);
            session.last_idx = result.last_idx.or(session.last_idx);
        }
    }
}

/// A turn's relay from the engine to the client.
struct Relay {
    cx: ConnectionTo<Client>,
    sid: SessionId,
    mapper: TurnMapper,
    texts: FileTexts,
    rules: SessionRules,
    cancel: CancellationToken,
}

impl Relay {
    /// Relay until the runner's events end, then the turn's result.
    async fn run(&mut self, mut handle: TurnHandle) -> RunResult {
        let mut questions = handle.questions.take();
        loop {
            tokio::select! {
                event = handle.events.recv() => match event {
                    Some(event) => {
                        let outs = self.mapper.run_event(&event);
                        self.send_all(outs).await;
                    }
                    None => break,
                },
                Some(note) = handle.notes.recv() => self.send(thought_update(&note)),
                Some(q) = next_question(&mut questions) => self.question(q).await,
            }
        }
        // What the gate asked after the last event is still answered.
        while let Some(q) = questions.as_mut().and_then(|q| q.try_recv().ok()) {
            self.question(q).await;
        }
        match handle.done.await {
            Ok(result) => result,
            Err(e) => {
                let mut result = RunResult::aborted_before_start();
                result.failure = Some(crate::runner::failure::Failure::SpawnFailed {
                    bin: "agy".into(),
                    message: format!("the turn's task stopped: {e}"),
                });
                result
            }
        }
    }

    async fn send_all(&mut self, outs: Vec<Out>) {
        for out in outs {
            match out {
                Out::Update(update) => self.send(*update),
                Out::Before { path } => self.texts.before_off_runtime(path).await,
                Out::Edited {
                    call,
                    path,
                    summary,
                    change,
                } => {
                    let diff = self.texts.diff_off_runtime(path, change).await;
                    self.send(edited_update(&call, &summary, diff));
                }
            }
        }
    }

    /// One update to the client; a client that is gone ends the turn.
    fn send(&self, update: SessionUpdate) {
        if notify(&self.cx, &self.sid, update).is_err() {
            self.cancel.cancel();
        }
    }

    /// A call the gate heard of: shown, and put to the client when the
    /// policy leaves it to a person (on a task of its own).
    async fn question(&mut self, q: Question) {
        let (tool, arguments) = (q.tool().to_string(), q.arguments());
        let (id, outs) = self.mapper.gate_call(&tool, &arguments);
        self.send_all(outs).await;
        match q.verdict.clone() {
            Verdict::Allow(_) => {}
            Verdict::Deny(reason) => self.send_refused(&id, &reason),
            Verdict::Ask(_) if !q.waits() => {}
            Verdict::Ask(_) => {
                if let Some(rule) = self.rules.refusal(&tool, &arguments) {
                    let reason = format!(
                        "the user refused calls like this for the rest of the session ({}: {})",
                        rule.tool, rule.glob
                    );
                    q.answer(Decision::deny(reason.clone()));
                    return self.send_refused(&id, &reason);
                }
                let request = RequestPermissionRequest::new(
                    self.sid.clone(),
                    self.mapper.permission_subject(&id, &tool, &arguments),
                    permission::options(&tool, &arguments),
                );
                let asking = Asking {
                    cx: self.cx.clone(),
                    sid: self.sid.clone(),
                    rules: self.rules.clone(),
                    cancel: self.cancel.clone(),
                };
                let spawned = self.cx.spawn(async move {
                    asking.ask(request, q, id).await;
                    Ok(())
                });
                if spawned.is_err() {
                    self.cancel.cancel();
                }
            }
        }
    }

    fn send_refused(&self, id: &ToolCallId, reason: &str) {
        self.send(refused(id, reason));
    }
}

/// One permission request in flight.
struct Asking {
    cx: ConnectionTo<Client>,
    sid: SessionId,
    rules: SessionRules,
    cancel: CancellationToken,
}

impl Asking {
    /// Ask, and give agy the answer; the turn's cancel is a denial (and the
    /// request is cancelled for the client).
    async fn ask(self, request: RequestPermissionRequest, q: Question, id: ToolCallId) {
        let (tool, arguments) = (q.tool().to_string(), q.arguments());
        let sent = self.cx.send_request(request);
        let cancelling = sent.cancellation_handle();
        let choice = tokio::select! {
            answer = sent.block_task() => match answer {
                Ok(response) => permission::choice(&response.outcome),
                Err(_) => Choice::Cancelled,
            },
            _ = self.cancel.cancelled() => {
                let _ = cancelling.cancel();
                Choice::Cancelled
            }
        };
        let decided = self.rules.decide(choice, &tool, &arguments);
        let denied = matches!(decided.decision, Decision::Deny { .. });
        let heard = q.answer(decided.decision);
        if denied || !heard {
            let reason = if heard {
                decided.words
            } else {
                "agy stopped waiting for the answer".to_string()
            };
            let _ = notify(&self.cx, &self.sid, refused(&id, &reason));
        }
    }
}

/// The next question, or never when the turn has no gate.
async fn next_question(questions: &mut Option<mpsc::Receiver<Question>>) -> Option<Question> {
    match questions {
        Some(q) => q.recv().await,
        None => std::future::pending().await,
    }
}

/// The prompt as agy's text: text blocks as they are, an embedded text
/// resource with its address, a link as its address. Images, audio and
/// binary resources are refused: agy's print mode takes text only (agy
/// 1.2.7 rejects image blocks on its stdin).
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    t.uri, t.text
                )),
                _ => return Err(refused_block("a binary resource")),
            },
            ContentBlock::ResourceLink(l) => parts.push(format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Image(_) => return Err(refused_block("an image")),
            ContentBlock::Audio(_) => return Err(refused_block("audio")),
            _ => return Err(refused_block("a content block agy-bridge does not know")),
        }
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Err(Error::new(
            ErrorCode::INVALID_PARAMS,
            "the prompt holds no text for agy",
        ));
    }
    Ok(text)
}

fn refused_block(what: &str) -> Error {
    Error::new(
        ErrorCode::INVALID_PARAMS,
        format!("agy takes text only: the prompt holds {what}, which agy-bridge does not advertise (promptCapabilities)"),
    )
}

/// A failed turn as a JSON-RPC error: the bridge's sentence, the typed
/// failure as data.
fn failure_error(failure: &TurnFailure) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, failure.message.clone()).data(failure.data.clone())
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}
