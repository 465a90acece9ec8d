//! `agy-bridge config` and `agy-bridge sessions`: the `/agy` command's
//! state (the settings in config.json, the pi session → agy conversation
//! bindings), shown and changed. Together because both print the state
//! directory's warnings and write their whole output the same way.

use agy_bridge::settings::Settings;
use clap::{Args, Subcommand};
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Environment variables win over config.json: AGY_MODE, AGY_PERMISSIONS, \
AGY_ALLOW, AGY_DEFAULT_MODEL, AGY_DEFAULT_THINKING. \
Saving never writes them into the file. \
The state directory is ~/.pi/agent/antigravity-bridge, $PI_CODING_AGENT_DIR/antigravity-bridge when \
that is set (AGY_BRIDGE_STATE_DIR overrides both)."
)]
pub struct ConfigArgs {
    #[command(subcommand)]
    change: Option<ConfigCommand>,
    /// Print the status as one JSON object.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// agy's --mode: accept-edits (the default) or plan.
    Mode {
        #[arg(value_parser = ["plan", "accept-edits"])]
        mode: String,
    },
    /// Who decides on agy's tools that need permission: ask (the default),
    /// allow or deny (the old on and off are taken as allow and deny).
    ///
    /// ask: each tool call waits for your decision in pi; read-only tools
    /// and your allow rules pass, and with no UI (pi -p) only those pass.
    /// allow: agy runs any command, writes any file and calls any MCP tool
    /// without anyone seeing it first. deny: agy's print mode refuses every
    /// tool that needs permission.
    Permissions {
        #[arg(value_parser = |s: &str| s.parse::<agy_bridge::state::config::PermissionMode>())]
        value: agy_bridge::state::config::PermissionMode,
    },
    /// The tool calls that pass without asking: list them (the built-in
    /// read-only tools and yours), or add or remove one of yours.
    ///
    /// A rule is TOOL or TOOL: PATTERN (`run_command: cargo test*`); in
    /// PATTERN `*` is any run of characters (`/` too), `?` one character,
    /// the rest itself, matched against the whole command line or path.
    /// AGY_ALLOW (rules separated by `;` or newlines) replaces the file's.
    Allow {
        #[command(subcommand)]
        action: Option<AllowCommand>,
    },
    /// The default model alias for AskAntigravity (flash, pro, ...).
    Model { alias: String },
    /// The default thinking tier: low, medium or high.
    Thinking {
        #[arg(value_parser = ["low", "medium", "high"])]
        tier: String,
    },
}

#[derive(Debug, Subcommand)]
enum AllowCommand {
    /// Add a rule to config.json's allow list.
    Add {
        /// TOOL or TOOL: PATTERN (the words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        rule: Vec<String>,
    },
    /// Remove a rule from config.json's allow list.
    Remove {
        #[arg(required = true, num_args = 1..)]
        rule: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    action: Option<SessionsCommand>,
    /// Print JSON instead of the readable view.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// List the bindings: key, agy conversation, last streamed idx, pi
    /// message count (the default).
    List,
    /// Forget every binding: each pi session starts a fresh agy conversation
    /// on its next turn.
    Clear,
    /// Set one binding (tests and repairs).
    #[command(hide = true)]
    Set {
        key: String,
        conversation_id: String,
        #[arg(allow_negative_numbers = true)]
        last_idx: i64,
        message_count: Option<u64>,
    },
}

/// Print state warnings on stderr, one line each.
fn report_state_warnings(warnings: &[agy_bridge::state::file::StateWarning]) {
    for w in warnings {
        let line = w.to_string().replace(['\n', '\r'], " ");
        eprintln!("agy-bridge: warning: {line}");
    }
}

/// Write a command's whole output; a closed pipe is not an error.
fn write_state_output(text: &str) -> CmdResult {
    super::out::print_then(text, ExitCode::SUCCESS)
}

pub fn cmd_config(args: ConfigArgs, settings: &Settings) -> CmdResult {
    use agy_bridge::state::config::ConfigChange;
    super::checks::check_all(settings)?;
    // No state directory: the same error as before anything is read.
    settings.state_dir()?;
    let change = match args.change {
        None => None,
        Some(ConfigCommand::Mode { mode }) => Some(ConfigChange::Mode(mode.parse()?)),
        Some(ConfigCommand::Permissions { value }) => Some(ConfigChange::Permissions(value)),
        Some(ConfigCommand::Allow { action }) => {
            return cmd_config_allow(settings, action, args.json)
        }
        Some(ConfigCommand::Model { alias }) => Some(ConfigChange::DefaultModel(alias)),
        Some(ConfigCommand::Thinking { tier }) => {
            Some(ConfigChange::DefaultThinking(tier.parse()?))
        }
    };
    let Some(change) = change else {
        let status = settings.load_config()?;
        report_state_warnings(&status.warnings);
        let text = if args.json {
            format!("{}\n", status.to_json())
        } else {
            format!("{status}\n")
        };
        return write_state_output(&text);
    };
    let setting = change.setting();
    let status = settings.save_config(change)?;
    report_state_warnings(&status.warnings);
    let Some(now) = status.setting(setting) else {
        return Err("internal error: setting missing from the status".into());
    };
    // The environment variable's current value, if it still wins.
    let env_wins = (now.source == agy_bridge::state::config::Source::Env).then(|| {
        settings
            .config_var(now.env_var)
            .unwrap_or_default()
            .to_string()
    });
    let text = agy_bridge::view::listing::saved_text(&status, setting, env_wins, args.json);
    write_state_output(&text)
}

/// `agy-bridge config allow [add|remove RULE]`: the effective allow list
/// (built-in rules marked), after the change if there is one.
fn cmd_config_allow(settings: &Settings, action: Option<AllowCommand>, json: bool) -> CmdResult {
    use agy_bridge::state::config::AllowEdit;
    use agy_bridge::state::rules::Rule;
    let edit = match action {
        None => None,
        Some(AllowCommand::Add { rule }) => Some(AllowEdit::Add(Rule::parse(&rule.join(" "))?)),
        Some(AllowCommand::Remove { rule }) => {
            Some(AllowEdit::Remove(Rule::parse(&rule.join(" "))?))
        }
    };
    let (status, changed) = match &edit {
        None => (settings.load_config()?, false),
        Some(edit) => settings.edit_allow(edit)?,
    };
    report_state_warnings(&status.warnings);
    write_state_output(&agy_bridge::view::listing::allow_text(
        &status,
        edit.as_ref(),
        changed,
        json,
    ))
}

pub fn cmd_sessions(args: SessionsArgs, settings: &Settings) -> CmdResult {
    use agy_bridge::state::sessions::SessionEntry;
    let store = settings.session_store()?;
    let result = match args.action.unwrap_or(SessionsCommand::List) {
        SessionsCommand::List => store
            .list()
            .map(|list| agy_bridge::view::listing::sessions_text(&list, store.path(), args.json)),
        SessionsCommand::Clear => store.clear().map(|n| {
            if args.json {
                format!(
                    "{}\n",
                    serde_json::json!({ "path": store.path(), "cleared": n })
                )
            } else {
                format!("cleared {n} session(s) in {}\n", store.path().display())
            }
        }),
        SessionsCommand::Set {
            key,
            conversation_id,
            last_idx,
            message_count,
        } => {
            if key.is_empty() {
                return Err("the session key is empty".into());
            }
            if last_idx < -1 {
                return Err(format!("LAST_IDX must be -1 or more, not {last_idx}").into());
            }
            let entry = SessionEntry {
                conversation_id: agy_format::ids::ConversationId::parse(&conversation_id)?,
                last_step_idx: last_idx,
                message_count: message_count.unwrap_or(0),
                context_lost: false,
            };
            store.update(&key, &entry).map(|()| {
                if args.json {
                    format!(
                        "{}\n",
                        serde_json::json!({ "path": store.path(), "set": key })
                    )
                } else {
                    format!("set {}\n", key.escape_debug())
                }
            })
        }
    };
    report_state_warnings(&store.take_warnings());
    write_state_output(&result?)
}
