//! Preparing a pi turn: everything between pi's request and agy's command
//! line (the prompt and its context digest, the model and effort, the
//! session's conversation and where its new steps start, the notes pi
//! sees first). Blocking work (files, SQLite, at worst `agy models`), done
//! on a blocking thread; the warm session prepares its agy from here too.

use crate::runner::{RunConfig, TurnRequest};
use crate::settings::Settings;
use std::path::PathBuf;
use std::time::Duration;

/// The request's working directory: pi's, else ours.
pub(super) fn request_cwd(req: &crate::pi::provider::StreamRequest) -> PathBuf {
    req.cwd
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The request's session key and the session store (if it can be opened).
pub(super) fn session_of(
    req: &crate::pi::provider::StreamRequest,
    settings: &Settings,
) -> (String, Option<crate::state::sessions::SessionStore>) {
    use crate::state::sessions::SessionKey;
    let key = SessionKey::for_request(req.session_id.as_deref(), &request_cwd(req));
    let store = match settings.session_store() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("agy-bridge: warning: sessions are not saved: {e}");
            None
        }
    };
    (key, store)
}

pub(super) struct PreparedTurn {
    pub(super) cfg: RunConfig,
    pub(super) turn: TurnRequest,
    pub(super) cwd: PathBuf,
    pub(super) session_key: String,
    pub(super) store: Option<crate::state::sessions::SessionStore>,
    /// Thinking lines to show before agy starts.
    pub(super) notes: Vec<String>,
    /// The pi session has no agy conversation yet: things said once per
    /// session are said now.
    pub(super) first_turn: bool,
    /// `ask` mode: the gate agy's tool calls go through.
    pub(super) gating: Option<crate::session::gating::GatePlan>,
    /// The conversation the session was bound to, whose database is gone
    /// (agy dropped it): the turn begins a new one with pi's whole record,
    /// and the user hears of it, once bound, in the words of a
    /// conversation agy did not have.
    pub(super) replaces: Option<agy_format::ids::ConversationId>,
    /// The environment's settings the turn was prepared with.
    pub(super) settings: Settings,
}

/// Where a resumed turn's new steps start: after the last step the
/// database holds now, never before it. A binding whose save failed keeps
/// an older cursor, which would replay the previous turn's answer.
/// (Blocking: a SQLite read, on the thread that prepares the turn.)
pub(super) fn resume_cursor(
    entry: &crate::state::sessions::SessionEntry,
    conversations_dir: &std::path::Path,
) -> i64 {
    let db = crate::follow::discovery::db_path(conversations_dir, &entry.conversation_id);
    crate::follow::poller::last_idx(&db)
        .map_or(entry.last_step_idx, |now| now.max(entry.last_step_idx))
}

/// pi's `reasoning`, if any. A level we do not know is the caller's
/// mistake, not "no preference": guessing would run agy at an effort nobody
/// asked for.
pub(super) fn thinking_level(
    reasoning: Option<&str>,
) -> Result<Option<crate::pi::models::ThinkingLevel>, String> {
    reasoning
        .filter(|r| !r.trim().is_empty())
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("agy-bridge: bad request: reasoning: {e}"))
}

/// What a request's words resolve to: the run configuration, the
/// settings, agy's model and effort.
pub(super) struct Resolved {
    pub(super) cfg: RunConfig,
    pub(super) settings: crate::state::config::Config,
    pub(super) model: crate::pi::models::Resolved,
}

/// Resolve the request's model and thinking level and the settings
/// (files, at worst an `agy models` run, ended when `cancel` fires:
/// blocking).
pub(super) fn resolve_agy(
    req: &crate::pi::provider::StreamRequest,
    timeout: Duration,
    env: &Settings,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Resolved, String> {
    let settings = crate::session::setup::config(env).map_err(|e| format!("agy-bridge: {e}"))?;
    let thinking = thinking_level(req.reasoning.as_deref())?;
    let catalog = crate::pi::models::catalog(env, cancel);
    check_default_model(env, &catalog).map_err(|e| format!("agy-bridge: {e}"))?;
    let model = catalog
        .resolve(&req.model, thinking)
        .map_err(|e| format!("agy-bridge: {e}"))?;
    let mut cfg = crate::session::setup::configured(&settings, env);
    cfg.timeout = timeout;
    Ok(Resolved {
        cfg,
        settings,
        model,
    })
}

/// A pi session's turn as agy gets it: `prompt` in `cwd` (agy's workspace:
/// the directory pi works in), resuming the session's conversation after
/// the last step its database holds. A warm agy is started from the same
/// request without a prompt, so both agree on agy's command line.
pub(super) fn session_turn(
    prompt: String,
    cwd: &std::path::Path,
    resolved: &Resolved,
    existing: Option<&crate::state::sessions::SessionEntry>,
) -> TurnRequest {
    TurnRequest {
        prompt,
        cwd: Some(cwd.to_path_buf()),
        model: Some(resolved.model.model.clone()),
        effort: resolved.model.effort,
        mode: Some(resolved.settings.mode),
        conversation: existing.map(|e| e.conversation_id.clone()),
        after_idx: existing.map(|e| resume_cursor(e, &resolved.cfg.conversations_dir)),
        add_dirs: vec![cwd.to_path_buf()],
        private_dirs: Vec::new(),
    }
}

/// Everything between pi's request and agy's command line; errors are the
/// message pi shows. `cancel` ends an `agy models` run it waits for.
pub(super) fn prepare_turn(
    req: &crate::pi::provider::StreamRequest,
    timeout: Duration,
    session_key: String,
    store: Option<crate::state::sessions::SessionStore>,
    env: &Settings,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<PreparedTurn, String> {
    use crate::pi::provider::context::{
        compose_prompt_for, context_digest_for, extract_prompt, has_own_turns, AgyContext,
        DIGEST_MAX_CHARS, LOST_DIGEST_MAX_CHARS,
    };

    let prompt = extract_prompt(&req.messages).map_err(|e| format!("agy-bridge: {e}"))?;
    let cwd = request_cwd(req);
    let Resolved {
        cfg,
        settings,
        model: resolved,
    } = resolve_agy(req, timeout, env, cancel)?;

    let mut notes = Vec::new();
    let mut existing = match store.as_ref().map(|s| s.get(&session_key)) {
        Some(Ok(entry)) => entry,
        Some(Err(e)) => {
            eprintln!("agy-bridge: warning: cannot read the session binding: {e}");
            None
        }
        None => None,
    };
    let mut context = AgyContext::Kept;
    let mut replaces = None;
    if let Some(entry) = &existing {
        let db = crate::follow::discovery::db_path(&cfg.conversations_dir, &entry.conversation_id);
        if !db.is_file() {
            // agy dropped it (it keeps about 500): resuming it would only
            // get agy's "not found" and a turn without the earlier context,
            // so this turn begins anew with pi's whole record.
            replaces = Some(entry.conversation_id.clone());
            existing = None;
            context = AgyContext::Lost;
        } else if entry.context_lost {
            context = AgyContext::Lost;
        }
    } else if has_own_turns(&req.messages) {
        // Earlier agy turns with no conversation to resume (a cleared
        // binding): agy has none of them.
        context = AgyContext::Lost;
    }
    let (watermark, cap) = match context {
        AgyContext::Lost => (0, LOST_DIGEST_MAX_CHARS),
        AgyContext::Kept => (
            existing
                .as_ref()
                .map(|e| e.message_count as usize)
                .unwrap_or(0),
            DIGEST_MAX_CHARS,
        ),
    };
    let digest = context_digest_for(&req.messages, watermark, cap, context);
    if prompt.dropped_images > 0 {
        notes.push(format!(
            "[agy-bridge: {} image(s) not sent: agy -p takes text only]\n",
            prompt.dropped_images
        ));
    }
    let gating = crate::session::gating::gate_plan(&settings, req.ui, env);
    let turn = session_turn(
        compose_prompt_for(&prompt, &digest, context),
        &cwd,
        &Resolved {
            cfg: cfg.clone(),
            settings,
            model: resolved,
        },
        existing.as_ref(),
    );
    for w in store
        .as_ref()
        .map(|s| s.take_warnings())
        .unwrap_or_default()
    {
        eprintln!("agy-bridge: warning: {w}");
    }
    Ok(PreparedTurn {
        cfg,
        turn,
        cwd,
        session_key,
        store,
        notes,
        first_turn: existing.is_none(),
        gating,
        replaces,
        settings: env.clone(),
    })
}

/// AskAntigravity's and every turn's default model alias.
const DEFAULT_MODEL: &str = "AGY_DEFAULT_MODEL";

/// `AGY_DEFAULT_MODEL` (as `settings` holds it) against agy's catalog (as
/// `stream` resolves models: the cache, else `agy models`, else the
/// built-in catalog): an alias no model answers to is an error naming the
/// ones there are.
pub fn check_default_model(
    settings: &Settings,
    catalog: &crate::pi::models::Catalog,
) -> Result<(), String> {
    let Some(alias) = settings.config_var(DEFAULT_MODEL) else {
        return Ok(());
    };
    catalog
        .resolve_alias(alias, None)
        .map(drop)
        .map_err(|e| format!("{DEFAULT_MODEL}={alias:?} is not valid: {e}"))
}

/// Every variable checked before a command acts on them: the first bad
/// value's sentence ([`Settings::check`]), then `AGY_DEFAULT_MODEL`
/// against agy's catalog ([`check_default_model`]; the catalog is loaded
/// only when the variable is set, and an `agy models` it runs ends on the
/// token `stop` gives, asked for only then: the command's stop signals in
/// the binary). Blocking.
pub fn check_settings(
    settings: &Settings,
    stop: fn() -> tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    settings.check().map_err(|e| e.to_string())?;
    if settings.config_var(DEFAULT_MODEL).is_some() {
        check_default_model(settings, &crate::pi::models::catalog(settings, &stop()))?;
    }
    Ok(())
}
