//! The ACP agent: one connection (stdio), its sessions, and a handler per
//! method, on the official crate's v1 builder (`Agent.v1()`; the crate has
//! no `Agent` trait since its 1.0: an agent is a set of typed handlers).
//!
//! - `initialize`: protocol v1; prompts take text and embedded text
//!   resources (no images: agy 1.2.7 rejects image blocks on its stdin);
//!   `loadSession`; MCP servers over stdio and HTTP, not SSE (agy speaks
//!   Streamable HTTP only).
//! - `session/new`, `session/load` (the binding in `sessions.json`, key
//!   `sid:<ACP session id>`, beside pi's; the history replayed as updates),
//!   `session/set_mode` (accept-edits, plan), `session/set_config_option`
//!   (the model, from agy's catalog), `session/cancel`.
//! - `session/prompt` runs on a task of its own (`turn`), so the dispatch
//!   loop keeps reading: a `session/cancel` or a permission answer is never
//!   stuck behind a running turn.
//!
//! The session table is a mutex held only to read or change a session,
//! never across an await.

mod prompt;

use super::engine::TurnEngine;
use super::map::TurnMapper;
use super::mcp::EditorServers;
use super::permission::SessionRules;
use super::replay::{history_off_runtime, ReplayError};
use crate::state::sessions::SessionStore;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionId,
    SessionMode, SessionModeState, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, ErrorCode};
use agy_format::agy_args::Mode;
use agy_format::ids::ConversationId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The model option's id.
pub const MODEL_OPTION: &str = "model";
/// The model option's value for agy's own default.
pub const DEFAULT_MODEL: &str = "default";

/// A model the session may choose: the choice's id (agy's slug, a tier's
/// slug for a model with efforts), the name shown, and what agy is given
/// (`--model`, `--effort`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    /// The choice's id: agy's slug, or a tier's slug.
    pub id: String,
    /// The name the editor shows.
    pub name: String,
    /// agy's `--model`.
    pub model: String,
    /// agy's `--effort`, for a model with tiers.
    pub effort: Option<agy_format::agy_args::Effort>,
    /// Its context window in tokens, for the session's usage updates.
    pub context_window: Option<u64>,
}

/// What the agent is started with.
pub struct AgentSetup {
    /// What runs the turns.
    pub engine: Arc<dyn TurnEngine>,
    /// Where bindings are kept (`None`: no state directory; sessions then
    /// live as long as the connection).
    pub store: Option<Arc<SessionStore>>,
    /// The mode a session starts in (the configured one).
    pub default_mode: Mode,
    /// agy's catalog (empty: no model selection offered).
    pub models: Vec<ModelChoice>,
    /// The choice id a new session starts with (`None`: agy's default).
    pub default_model: Option<String>,
}

/// One ACP session.
#[derive(Debug, Clone)]
struct Session {
    cwd: PathBuf,
    mode: Mode,
    model: Option<String>,
    conversation: Option<ConversationId>,
    last_idx: Option<i64>,
    rules: SessionRules,
    /// The turn in flight, cancelled by `session/cancel`.
    running: Option<CancellationToken>,
    /// The editor's MCP servers, given to each turn's agy.
    mcp_servers: EditorServers,
    /// What of them agy does not get, said in the session's next turn
    /// (then `None`: said once).
    mcp_note: Option<String>,
}

/// The agent's state, shared by its handlers.
pub(crate) struct Bridge {
    setup: AgentSetup,
    sessions: Mutex<HashMap<String, Session>>,
}

/// Serve ACP on `transport` until the client closes it.
pub async fn serve(
    setup: AgentSetup,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), Error> {
    let bridge = Arc::new(Bridge {
        setup,
        sessions: Mutex::new(HashMap::new()),
    });
    let (b1, b2, b3, b4, b5, b6) = (
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
    );
    Agent
        .v1()
        .name("agy-bridge")
        .on_receive_request(
            async |req: InitializeRequest,
                   responder: Responder<InitializeResponse>,
                   _cx: ConnectionTo<Client>| { responder.respond(initialize(&req)) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        _cx: ConnectionTo<Client>| {
                responder.respond(b1.new_session(req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                match b2.load_session(req, &cx).await {
                    Ok(response) => responder.respond(response),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let bridge = b3.clone();
                let conn = cx.clone();
                cx.spawn(async move { prompt::prompt(bridge, req, responder, conn).await })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        _cx: ConnectionTo<Client>| {
                match b4.set_mode(&req) {
                    Ok(()) => responder.respond(SetSessionModeResponse::new()),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        _cx: ConnectionTo<Client>| {
                match b5.set_option(&req) {
                    Ok(options) => responder.respond(SetSessionConfigOptionResponse::new(options)),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx: ConnectionTo<Client>| {
                b6.cancel(&n.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

/// What this agent offers: protocol v1, text and embedded text resources,
/// `session/load`, MCP servers over stdio (always) and HTTP; not SSE, which
/// agy does not speak ([`super::mcp`]).
fn initialize(req: &InitializeRequest) -> InitializeResponse {
    let _ = req;
    let prompts = PromptCapabilities::new().embedded_context(true);
    let mcp = McpCapabilities::new().http(true).sse(false);
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(prompts)
                .mcp_capabilities(mcp),
        )
        .agent_info(
            Implementation::new("agy-bridge", env!("CARGO_PKG_VERSION"))
                .title("agy (Antigravity CLI) through agy-bridge"),
        )
}

impl Bridge {
    fn new_session(&self, req: NewSessionRequest) -> NewSessionResponse {
        let id = format!("acp-{}", uuid::Uuid::new_v4());
        let (mcp_servers, mcp_note) = EditorServers::from_acp(&req.mcp_servers);
        let session = Session {
            cwd: req.cwd.clone(),
            mode: self.setup.default_mode,
            model: self.setup.default_model.clone(),
            conversation: None,
            last_idx: None,
            rules: SessionRules::default(),
            running: None,
            mcp_servers,
            mcp_note,
        };
        let response = NewSessionResponse::new(id.clone())
            .modes(modes(session.mode))
            .config_options(self.options(&session));
        self.lock().insert(id.clone(), session);
        self.prewarm(&id);
        response
    }

    /// `session/load`: the binding, then its history as updates, then the
    /// response. A session with no binding is an error; a binding whose
    /// conversation agy no longer has loads empty, and says so.
    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let id = req.session_id.0.to_string();
        let entry = self.binding(&id).await;
        let Some(entry) = entry else {
            let words = ReplayError::UnknownSession { id: id.clone() }.to_string();
            return Err(Error::new(ErrorCode::RESOURCE_NOT_FOUND, words)
                .data(serde_json::json!({ "sessionId": id })));
        };
        let (mcp_servers, mcp_note) = EditorServers::from_acp(&req.mcp_servers);
        let mut session = Session {
            cwd: req.cwd.clone(),
            mode: self.setup.default_mode,
            model: self.setup.default_model.clone(),
            conversation: Some(entry.conversation_id.clone()),
            last_idx: Some(entry.last_step_idx),
            rules: SessionRules::default(),
            running: None,
            mcp_servers,
            mcp_note,
        };
        let dir = self.setup.engine.conversations_dir();
        match history_off_runtime(dir, id.clone(), entry.conversation_id.clone()).await {
            Ok((last, events)) => {
                session.last_idx = last.or(session.last_idx);
                let conversation = entry.conversation_id.as_str().to_string();
                let mut mapper = TurnMapper::replay(&session.cwd, &conversation);
                for event in &events {
                    for out in mapper.event(event) {
                        if let super::map::Out::Update(update) = out {
                            notify(cx, &req.session_id, *update)?;
                        }
                    }
                }
            }
            Err(e @ ReplayError::Pruned { .. }) => {
                // The next turn begins a new conversation: the saved
                // binding goes too, so no turn resumes what agy lost.
                session.conversation = None;
                session.last_idx = None;
                self.forget(&id).await;
                notify(
                    cx,
                    &req.session_id,
                    thought_update(&format!("[agy-bridge: {e}]\n")),
                )?;
            }
            Err(e) => return Err(Error::new(ErrorCode::INTERNAL_ERROR, e.to_string())),
        }
        let response = LoadSessionResponse::new()
            .modes(modes(session.mode))
            .config_options(self.options(&session));
        self.lock().insert(id.clone(), session);
        self.prewarm(&id);
        Ok(response)
    }

    /// The stored binding of session `id` (a file read, off the runtime).
    async fn binding(&self, id: &str) -> Option<crate::state::sessions::SessionEntry> {
        let store = self.setup.store.clone()?;
        let key = session_key(id);
        tokio::task::spawn_blocking(move || store.get(&key).ok().flatten())
            .await
            .ok()
            .flatten()
    }

    /// Forget session `id`'s binding (a file write, off the runtime).
    async fn forget(&self, id: &str) {
        let Some(store) = self.setup.store.clone() else {
            return;
        };
        let key = session_key(id);
        let _ = tokio::task::spawn_blocking(move || store.remove(&key)).await;
    }

    fn set_mode(&self, req: &SetSessionModeRequest) -> Result<(), Error> {
        let mode: Mode = req.mode_id.0.parse().map_err(|_| {
            invalid(format!(
                "agy has no mode {:?}; its modes are accept-edits and plan",
                &*req.mode_id.0
            ))
        })?;
        self.with_session(&req.session_id, |s| s.mode = mode)?;
        self.prewarm(&req.session_id.0);
        Ok(())
    }

    fn set_option(
        &self,
        req: &SetSessionConfigOptionRequest,
    ) -> Result<Vec<SessionConfigOption>, Error> {
        let value = req.value.as_value_id().map(|v| v.0.to_string());
        let known = |v: &str| v == DEFAULT_MODEL || self.setup.models.iter().any(|m| m.id == v);
        let model = match (&*req.config_id.0, value) {
            (MODEL_OPTION, Some(v)) if known(&v) => (v != DEFAULT_MODEL).then_some(v),
            (MODEL_OPTION, v) => {
                return Err(invalid(format!(
                    "agy's catalog has no model {:?} (`agy-bridge models` lists them)",
                    v.unwrap_or_default()
                )))
            }
            (other, _) => return Err(invalid(format!("agy-bridge has no option {other:?}"))),
        };
        self.with_session(&req.session_id, |s| s.model = model)?;
        self.prewarm(&req.session_id.0);
        let session = self.session(&req.session_id)?;
        Ok(self.options(&session))
    }

    /// Have session `id`'s agy ready for its settings now (unless a turn
    /// runs: its end keeps or replaces agy).
    fn prewarm(&self, id: &str) {
        let spec = match self.lock().get(id) {
            Some(s) if s.running.is_none() => self.spec(id, s, String::new()),
            _ => return,
        };
        self.setup.engine.prewarm(spec);
    }

    fn cancel(&self, id: &SessionId) {
        if let Some(token) = self.lock().get(&*id.0).and_then(|s| s.running.clone()) {
            token.cancel();
        }
    }

    /// The model option, when agy's catalog is known.
    fn options(&self, session: &Session) -> Vec<SessionConfigOption> {
        if self.setup.models.is_empty() {
            return Vec::new();
        }
        let mut choices = vec![SessionConfigSelectOption::new(
            DEFAULT_MODEL,
            "agy's default",
        )];
        choices.extend(
            self.setup
                .models
                .iter()
                .map(|m| SessionConfigSelectOption::new(m.id.clone(), m.name.clone())),
        );
        let current = session
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_string());
        vec![
            SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
                .category(SessionConfigOptionCategory::Model),
        ]
    }

    fn session(&self, id: &SessionId) -> Result<Session, Error> {
        self.lock()
            .get(&*id.0)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    fn with_session(&self, id: &SessionId, change: impl FnOnce(&mut Session)) -> Result<(), Error> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(&*id.0).ok_or_else(|| not_found(id))?;
        change(session);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A handler that panicked mid-change leaves a session as it was
        // before or after that change: still usable.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The key of an ACP session's binding in `sessions.json`.
pub fn session_key(id: &str) -> String {
    format!("sid:{id}")
}

fn not_found(id: &SessionId) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("agy-bridge has no session {} on this connection (create it with session/new, or load it with session/load)", &*id.0),
    )
    .data(serde_json::json!({ "sessionId": &*id.0 }))
}

/// `-32602` with the bridge's sentence.
fn invalid(message: String) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message)
}

/// The two modes agy takes, `current` selected.
fn modes(current: Mode) -> SessionModeState {
    SessionModeState::new(
        current.as_arg(),
        vec![
            SessionMode::new(Mode::AcceptEdits.as_arg(), "Accept edits")
                .description("agy's --mode accept-edits"),
            SessionMode::new(Mode::Plan.as_arg(), "Plan").description("agy's --mode plan"),
        ],
    )
}

fn notify(cx: &ConnectionTo<Client>, id: &SessionId, update: SessionUpdate) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(id.clone(), update))
}

fn thought_update(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
        text,
    ))))
}
