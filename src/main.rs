//! The `agy-bridge` command line: one subcommand per job, each a thin shell
//! over the library. To add a subcommand, add a variant to [`Commands`], an
//! args struct, one match arm in [`run`] and a `cmd_*` function.

mod cli;

use cli::turn as cmd_turn;

use agy_bridge::view::decode;
use clap::{Args, Parser, Subcommand};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Stream Google's Antigravity CLI (agy) as a model provider, and inspect
/// what agy writes.
#[derive(Debug, Parser)]
#[command(name = "agy-bridge", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Decode a conversation database or a recording into readable steps
    /// (or JSON lines with --json).
    Decode(DecodeArgs),
    /// Show or change the settings (config.json; environment variables win
    /// over the file).
    Config(ConfigArgs),
    /// List or clear the pi session → agy conversation bindings.
    Sessions(SessionsArgs),
    /// pi's `/agy` command, answered in words (what the pi extension runs).
    Slash(cli::slash::SlashArgs),
    /// Run one agy turn and stream what it does, live.
    Run(cmd_turn::RunArgs),
    /// Run the whole pipeline on a bundled recording with the workspace's
    /// fake agy: no real agy, no network.
    Demo(cmd_turn::DemoArgs),
    /// The pi provider boundary: one JSON request on stdin, pi's streaming
    /// events as JSON lines on stdout (see ARCHITECTURE.md).
    Stream(cmd_turn::StreamArgs),
    /// AskAntigravity: delegate one task to agy and print its final answer
    /// with a footer naming the conversation.
    Ask(cmd_turn::AskArgs),
    /// List agy's models (`agy models`, cached 5 minutes) as a table, or as
    /// pi model objects with --json.
    Models(ModelsArgs),
    /// Show agy's quota (`agy -p /usage`): what is left of each bucket and
    /// when it refills, or JSON with --json.
    Usage(UsageArgs),
    /// What agy runs before each tool call in `ask` mode: agy's payload on
    /// stdin, the decision (pi's, or the rules') on stdout.
    Hook(cli::hook::HookArgs),
    /// Record an agy run (or an existing database) as a recording in the
    /// corpus format, optionally redacted for publishing.
    Record(RecordArgs),
    /// Fingerprint recordings or databases and compare them with the
    /// schema baseline: breaking changes exit 1.
    Drift(DriftArgs),
    /// Run the conformance scenarios against agy and report which facts of
    /// docs/agy-format.md held.
    Conformance(cli::conformance::ConformanceArgs),
}

#[derive(Debug, Args)]
struct DecodeArgs {
    /// A conversation database (`<id>.db`, may be in use by agy) or a
    /// recording (`.jsonl`).
    path: PathBuf,
    /// Print one JSON object per step instead of the readable view.
    #[arg(long)]
    json: bool,
}

/// What a subcommand returns: its exit code, or an error to report.
type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Make glibc hand freed buffers of 1 MiB or more straight back to the
/// system (Linux, glibc). The process's allocator is the binary's to set,
/// not a library call's side effect, so this runs first thing in `main`.
///
/// A growing answer passes through the bridge as buffers of many megabytes
/// (the row's blob, its decoded text, each delta). glibc serves a large
/// allocation with its own mapping, but after freeing one it raises that
/// threshold to the freed size (up to 32 MiB), so later buffers of that size
/// come from the heap, whose freed space stays resident: a 50 MB answer left
/// the bridge holding about 100 MB it no longer used (benches/memory.rs). A
/// fixed threshold turns that adjustment off.
fn release_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; main calls it before
    // any other thread exists.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn main() -> ExitCode {
    agy_bridge::run::guard::main_if_guard();
    release_large_buffers();
    // A turn command notes a stop signal from its first instruction on, so
    // even one in the first millisecond ends the turn in order.
    let turn_command = std::env::args_os()
        .nth(1)
        .is_some_and(|a| ["stream", "run", "ask", "demo"].iter().any(|c| a == *c));
    if turn_command {
        cli::caller::hold_early_stops();
    }
    let standby = guardian_for_stream();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match run(cli.command, standby) {
        Ok(code) => code,
        Err(e) => {
            // One line, whatever the error's own text holds.
            let message = e.to_string().replace(['\n', '\r'], " ");
            eprintln!("agy-bridge: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A command line clap rejects. `stream`'s reader is pi, which reads JSON
/// events, not stderr: it gets its `start` and one `error` naming the bad
/// flag, as every other `stream` failure does. `--help` and `--version` are
/// not failures and print as usual.
fn usage_error(e: clap::Error) -> ExitCode {
    let is_stream = std::env::args_os().nth(1).is_some_and(|a| a == "stream");
    if !is_stream || !e.use_stderr() {
        e.exit();
    }
    let rendered = e.render().to_string();
    eprint!("{rendered}");
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let reason = first.strip_prefix("error: ").unwrap_or(first);
    cmd_turn::stream_fails_early(&format!("agy-bridge stream: {reason}"))
}

/// `stream` (pi's turn) forks agy's guardian first thing, while this
/// process still has one thread: it waits while the request is read and the
/// turn prepared, and agy starts the moment the turn is ready (see
/// `agy_bridge::run::standby`). If the fork fails, the turn starts one later.
fn guardian_for_stream() -> Option<agy_bridge::run::standby::Standby> {
    if std::env::args_os().nth(1).is_some_and(|a| a == "stream") {
        // SAFETY: nothing has started a thread yet: this is the first thing
        // `main` does after `main_if_guard`, which never returns here with
        // a thread started.
        unsafe { agy_bridge::run::standby::Standby::fork() }.ok()
    } else {
        None
    }
}

/// `standby`: agy's guardian, already started for `stream`.
fn run(command: Commands, standby: Option<agy_bridge::run::standby::Standby>) -> CmdResult {
    match command {
        Commands::Decode(args) => cmd_decode(args),
        Commands::Config(args) => cmd_config(args),
        Commands::Sessions(args) => cmd_sessions(args),
        Commands::Slash(args) => Ok(cli::slash::cmd_slash(args)),
        Commands::Hook(args) => Ok(cli::hook::cmd_hook(args)),
        Commands::Run(args) => cmd_turn::cmd_run(args),
        Commands::Demo(args) => cmd_turn::cmd_demo(args),
        Commands::Stream(args) => cmd_turn::cmd_stream(args, standby),
        Commands::Ask(args) => cmd_turn::cmd_ask(args),
        Commands::Models(args) => cmd_models(args),
        Commands::Usage(args) => cli::usage::cmd_usage(args.json, args.max_age_secs),
        Commands::Record(args) => cmd_record(args),
        Commands::Drift(args) => cmd_drift(args),
        Commands::Conformance(args) => cli::conformance::cmd_conformance(args),
    }
}

fn cmd_decode(args: DecodeArgs) -> CmdResult {
    let decoded = decode::decode_path(&args.path)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = if args.json {
        decoded.write_json_lines(&mut out)
    } else {
        decoded.write_text(&mut out)
    }
    .and_then(|_| out.flush());
    cli::out::finish(written, ExitCode::SUCCESS)
}
// ---------------------------------------------------------------------------
// `agy-bridge config` and `agy-bridge sessions`: the `/agy` command's state.

#[derive(Debug, Args)]
#[command(
    after_help = "Environment variables win over config.json: AGY_MODE, AGY_PERMISSIONS (the older \
AGY_SKIP_PERMISSIONS counts when it is unset), AGY_ALLOW, AGY_DEFAULT_MODEL, AGY_DEFAULT_THINKING. \
Saving never writes them into the file. \
The state directory is ~/.pi/agent/antigravity-bridge, $PI_CODING_AGENT_DIR/antigravity-bridge when \
that is set (AGY_BRIDGE_STATE_DIR overrides both)."
)]
struct ConfigArgs {
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
struct SessionsArgs {
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
    cli::out::print_then(text, ExitCode::SUCCESS)
}

fn cmd_config(args: ConfigArgs) -> CmdResult {
    use agy_bridge::state::config::{ConfigChange, ConfigStore};
    cli::env::check_all()?;
    let store = ConfigStore::open_default()?;
    let change = match args.change {
        None => None,
        Some(ConfigCommand::Mode { mode }) => Some(ConfigChange::Mode(mode.parse()?)),
        Some(ConfigCommand::Permissions { value }) => Some(ConfigChange::Permissions(value)),
        Some(ConfigCommand::Allow { action }) => {
            return cmd_config_allow(&store, action, args.json)
        }
        Some(ConfigCommand::Model { alias }) => Some(ConfigChange::DefaultModel(alias)),
        Some(ConfigCommand::Thinking { tier }) => {
            Some(ConfigChange::DefaultThinking(tier.parse()?))
        }
    };
    let Some(change) = change else {
        let status = store.load()?;
        report_state_warnings(&status.warnings);
        let text = if args.json {
            format!("{}\n", status.to_json())
        } else {
            format!("{status}\n")
        };
        return write_state_output(&text);
    };
    let setting = change.setting();
    let status = store.save_change(change)?;
    report_state_warnings(&status.warnings);
    let Some(now) = status.setting(setting) else {
        return Err("internal error: setting missing from the status".into());
    };
    let saved = now.file_value.clone().unwrap_or_default();
    let saved_shown = now.display_file_value().unwrap_or_default();
    // The environment variable's current value, if it still wins.
    let env_wins = (now.source == agy_bridge::state::config::Source::Env)
        .then(|| std::env::var(now.env_var).unwrap_or_default());
    let text = if args.json {
        let mut json = status.to_json();
        if let Some(obj) = json.as_object_mut() {
            obj.insert(
                "saved".into(),
                serde_json::json!({
                    "setting": setting.name(),
                    "key": setting.file_key(),
                    "value": saved,
                    "overriddenByEnv": env_wins.as_ref().map(|_| now.env_var),
                }),
            );
        }
        format!("{json}\n")
    } else {
        let mut text = format!(
            "saved {} = {} in {}\n",
            setting.name(),
            saved_shown,
            status.config_path.display()
        );
        if let Some(v) = &env_wins {
            text.push_str(&format!(
                "note: {}={v:?} is set in the environment and still wins over the file\n",
                now.env_var
            ));
        }
        text.push_str(&format!("\n{status}\n"));
        text
    };
    write_state_output(&text)
}

/// `agy-bridge config allow [add|remove RULE]`: the effective allow list
/// (built-in rules marked), after the change if there is one.
fn cmd_config_allow(
    store: &agy_bridge::state::config::ConfigStore,
    action: Option<AllowCommand>,
    json: bool,
) -> CmdResult {
    use agy_bridge::state::config::{AllowEdit, Source};
    use agy_bridge::state::rules::Rule;
    let edit = match action {
        None => None,
        Some(AllowCommand::Add { rule }) => Some(AllowEdit::Add(Rule::parse(&rule.join(" "))?)),
        Some(AllowCommand::Remove { rule }) => {
            Some(AllowEdit::Remove(Rule::parse(&rule.join(" "))?))
        }
    };
    let (status, changed) = match &edit {
        None => (store.load()?, false),
        Some(edit) => store.edit_allow(edit)?,
    };
    report_state_warnings(&status.warnings);
    let list = status.config.allow_list();
    let env_wins = status.allow.source == Source::Env;
    if json {
        let rules: Vec<serde_json::Value> = list
            .iter()
            .map(|r| serde_json::json!({ "rule": r, "builtIn": r.is_default() }))
            .collect();
        let mut out = serde_json::json!({
            "rules": rules,
            "source": status.allow.source,
            "envVar": status.allow.env_var,
            "permissions": status.config.permissions,
            "configPath": status.config_path,
        });
        if let (Some(edit), Some(obj)) = (&edit, out.as_object_mut()) {
            let (word, rule) = match edit {
                AllowEdit::Add(r) => ("add", r),
                AllowEdit::Remove(r) => ("remove", r),
            };
            obj.insert(
                "saved".into(),
                serde_json::json!({ word: rule, "changed": changed,
                    "overriddenByEnv": env_wins.then_some(status.allow.env_var) }),
            );
        }
        return write_state_output(&format!("{out}\n"));
    }
    let mut text = String::new();
    match &edit {
        Some(AllowEdit::Add(r)) if changed => text.push_str(&format!("added {r}\n")),
        Some(AllowEdit::Add(r)) => text.push_str(&format!("{r} is already there\n")),
        Some(AllowEdit::Remove(r)) if changed => text.push_str(&format!("removed {r}\n")),
        Some(AllowEdit::Remove(r)) if r.is_default() => text.push_str(&format!(
            "{r} is built in (a read-only tool) and cannot be removed\n"
        )),
        Some(AllowEdit::Remove(r)) => {
            text.push_str(&format!("{r} is not in config.json's allow list\n"))
        }
        None => {}
    }
    if env_wins {
        text.push_str(&format!(
            "note: {} is set in the environment and replaces config.json's rules\n",
            status.allow.env_var
        ));
    }
    text.push_str(&format!(
        "allow rules (permissions is {}; config file {}):\n",
        status.config.permissions,
        status.config_path.display()
    ));
    for rule in &list {
        let mark = if rule.is_default() {
            "  (built in)"
        } else {
            ""
        };
        text.push_str(&format!("  {rule}{mark}\n"));
    }
    write_state_output(&text)
}

fn cmd_sessions(args: SessionsArgs) -> CmdResult {
    use agy_bridge::state::sessions::{SessionEntry, SessionStore};
    let store = SessionStore::open_default()?;
    let result = match args.action.unwrap_or(SessionsCommand::List) {
        SessionsCommand::List => store.list().map(|list| {
            if args.json {
                let sessions: Vec<serde_json::Value> = list
                    .iter()
                    .map(|(key, e)| {
                        serde_json::json!({
                            "key": key,
                            "conversationId": e.conversation_id.as_str(),
                            "lastStepIdx": e.last_step_idx,
                            "lastMessageCount": e.message_count,
                        })
                    })
                    .collect();
                format!(
                    "{}\n",
                    serde_json::json!({ "path": store.path(), "sessions": sessions })
                )
            } else if list.is_empty() {
                format!("no sessions ({})\n", store.path().display())
            } else {
                let shown: Vec<String> = list
                    .iter()
                    .map(|(k, _)| k.escape_debug().to_string())
                    .collect();
                let width = shown.iter().map(|k| k.chars().count()).max().unwrap_or(0);
                let mut text = format!(
                    "{:<width$}  {:<36}  {:>8}  {:>8}\n",
                    "KEY", "CONVERSATION", "LAST IDX", "MESSAGES"
                );
                for (key, (_, e)) in shown.iter().zip(&list) {
                    text.push_str(&format!(
                        "{key:<width$}  {:<36}  {:>8}  {:>8}\n",
                        e.conversation_id.as_str(),
                        e.last_step_idx,
                        e.message_count
                    ));
                }
                text.push_str(&format!(
                    "{} session(s) in {}\n",
                    list.len(),
                    store.path().display()
                ));
                text
            }
        }),
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

// ---------------------------------------------------------------------------
// `agy-bridge models`: agy's catalog for pi's model picker.

#[derive(Debug, Args)]
#[command(
    after_help = "Runs `$AGY_BIN models` (default `agy`), killed after 8 s. The result is \
cached for 5 minutes in models-cache.json in the state directory (~/.pi/agent/antigravity-bridge, \
AGY_BRIDGE_STATE_DIR overrides it); a stale entry, or one from another agy binary, is shown at \
once and refreshed in the background. When agy is missing, signed out, hangs or fails, a \
built-in catalog (agy 1.1.24's own listing) is shown and a note says so on stderr. A failure is \
remembered for a minute, and only for the agy binary that failed; a missing agy is never \
remembered."
)]
struct ModelsArgs {
    /// Print a JSON array of pi model objects (provider "antigravity").
    #[arg(long)]
    json: bool,
    /// Run `agy models` now instead of using the cache.
    #[arg(long)]
    refresh: bool,
    /// Print nothing (the background refresh uses `--refresh --quiet`).
    #[arg(long, hide = true)]
    quiet: bool,
}

fn cmd_models(args: ModelsArgs) -> CmdResult {
    use agy_bridge::pi::models::{Loader, Policy};
    let loader = Loader::from_env();
    if args.quiet && args.refresh {
        let _ = loader.refresh_quietly();
        return Ok(ExitCode::SUCCESS);
    }
    let policy = if args.refresh {
        Policy::Refresh
    } else {
        Policy::CacheFirst
    };
    let loaded = loader.load(policy);
    if loaded.stale {
        if let Ok(exe) = std::env::current_exe() {
            loader.spawn_refresh(&exe);
        }
    }
    if args.quiet {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(note) = loaded.note() {
        eprintln!("agy-bridge: note: {}", note.replace(['\n', '\r'], " "));
    }
    let text = if args.json {
        format!("{}\n", serde_json::to_string(&loaded.catalog.to_pi())?)
    } else {
        let mut buf = Vec::new();
        agy_bridge::pi::models::write_table(&loaded.catalog, &mut buf)?;
        String::from_utf8_lossy(&buf).into_owned()
    };
    cli::out::print_then(&text, ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------
// `agy-bridge usage`: agy's quota.

#[derive(Debug, Args)]
#[command(
    after_help = "Runs `$AGY_BIN -p /usage --output-format json` (agy 1.1.11 or later; no model \
turn, no quota spent), killed after 10 s. Good answers are cached per agy binary in usage-cache.json \
in the state directory; --max-age-secs N answers from that cache while it is younger than N \
seconds. Errors are one sentence on stderr, exit 1."
)]
struct UsageArgs {
    /// Print `{"buckets":[...],"lowest":"<words>","ageSecs":N}`: agy's
    /// buckets, the one with the least left in words, the cache's age
    /// (null: asked just now).
    #[arg(long)]
    json: bool,
    /// Answer from the cache when it is younger than this (0: always ask agy).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_age_secs: u64,
}

// ---------------------------------------------------------------------------
// `agy-bridge record` and `agy-bridge drift`: capturing a new agy version and
// reporting what changed (docs/recording-new-agy.md).

#[derive(Debug, Args)]
#[command(
    after_help = "Runs $AGY_BIN (default `agy`) as `agy-bridge run` does, captures every committed \
change of its conversation database(s) with its time offset, and writes a recording. Without \
--redact the file holds private data (paths, user name, ids, the prompt)."
)]
struct RecordArgs {
    /// Where to write the recording (JSON Lines).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Convert this existing conversation database (one commit, no timing)
    /// instead of running agy.
    #[arg(long, value_name = "PATH", conflicts_with = "from")]
    db: Option<PathBuf>,
    /// Rewrite this existing recording instead of running agy (use with
    /// --redact to redact it).
    #[arg(long, value_name = "RECORDING")]
    from: Option<PathBuf>,
    /// agy's --model.
    #[arg(long)]
    model: Option<String>,
    /// agy's --effort: low, medium or high.
    #[arg(long)]
    effort: Option<agy_format::agy_args::Effort>,
    /// agy's --mode: accept-edits or plan.
    #[arg(long)]
    mode: Option<agy_format::agy_args::Mode>,
    /// Resume this conversation (its earlier state is recorded as `pre`).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Run agy in this directory (the workspace).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// agy's --add-dir (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dirs: Vec<PathBuf>,
    /// Replace home and workspace paths, user name, e-mail addresses and ids
    /// with placeholders, in payloads too.
    #[arg(long)]
    redact: bool,
    /// Stop agy after this many seconds (what was captured is kept).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// The prompt (required unless --db or --from).
    prompt: Option<String>,
}

fn cmd_record(args: RecordArgs) -> CmdResult {
    use agy_bridge::{corpus::record, run::runner};
    use agy_corpus::{recording::Recording, redact};
    let mut workspaces: Vec<String> = Vec::new();
    let recording = if let Some(db) = &args.db {
        record::from_database(db)?
    } else if let Some(from) = &args.from {
        Recording::load(from)?
    } else {
        let Some(prompt) = args.prompt.clone() else {
            return Err("a PROMPT is required (or --db PATH / --from RECORDING)".into());
        };
        // The same setup as `run`: the environment, the guardian, the
        // configured permissions and mode, the same signals.
        cli::env::check_all()?;
        let settings = cmd_turn::settings()?;
        let mut cfg = cmd_turn::configured(&settings)?;
        if let Some(secs) = args.timeout {
            cfg.timeout = std::time::Duration::from_secs(secs);
        }
        let conversation = match &args.conversation {
            Some(id) => Some(agy_format::ids::ConversationId::parse(id)?),
            None => None,
        };
        let cwd = match &args.cwd {
            Some(dir) => Some(
                std::fs::canonicalize(dir).map_err(|e| format!("--cwd {}: {e}", dir.display()))?,
            ),
            None => None,
        };
        for d in cwd.iter().chain(args.add_dirs.iter()) {
            workspaces.push(d.display().to_string());
        }
        let req = record::RecordRequest {
            turn: runner::TurnRequest {
                prompt,
                cwd,
                model: args.model.clone(),
                effort: args.effort,
                mode: Some(args.mode.unwrap_or(settings.mode)),
                conversation,
                add_dirs: args.add_dirs.clone(),
                ..runner::TurnRequest::default()
            },
        };
        let recorded = cmd_turn::runtime()?.block_on(async {
            let cancel = tokio_util::sync::CancellationToken::new();
            cmd_turn::cancel_on_signals(cancel.clone());
            record::record(&cfg, &req, cancel).await
        })?;
        for w in &recorded.warnings {
            eprintln!("agy-bridge: warning: {}", w.replace(['\n', '\r'], " "));
        }
        let dbs = recorded.recording.conversations().len();
        eprintln!(
            "agy-bridge: captured {} commits from {dbs} database(s) in {} ms ({} wake-ups), agy exit {}",
            recorded.recording.commits.len(),
            recorded.result.duration_ms,
            recorded.stats.wakes,
            recorded.recording.header.exit_code
        );
        recorded.recording
    };
    let recording = if args.redact {
        if let Ok(dir) = std::env::current_dir() {
            workspaces.push(dir.display().to_string());
        }
        redact::redact_recording(&recording, &redact::RedactOptions::from_env(workspaces))
    } else {
        eprintln!("agy-bridge: {}", record::PRIVACY_WARNING);
        recording
    };
    if args.redact {
        recording.save(&args.out)?;
    } else {
        recording.save_private(&args.out)?;
    }
    eprintln!(
        "agy-bridge: wrote {} ({} commits)",
        args.out.display(),
        recording.commits.len()
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
#[command(
    after_help = "PATHS are recordings (.jsonl), conversation databases, or directories \
(every .jsonl in them).

A finding is BREAKING only when data a user sees would be lost or misread: a load-bearing field \
gone with nothing the decoder reads carrying its content, a field the decoder reads arriving with \
another wire type, content-bearing steps that fail to decode, a needed table or column gone, an \
unknown step status or `agy models` format, a recording writing what its own schema lacks. A \
field that is merely absent is a note: proto3 omits zero and empty values. New things are \
warnings. Baseline step types the inputs do not have are listed as coverage, not findings.

Exit status: 0 no breaking finding (warnings and notes are printed); 1 a breaking finding; \
2 an input or the baseline could not be read; 3 nothing to compare (no inputs found, e.g. an \
empty directory, or inputs without a single step): nothing was checked."
)]
struct DriftArgs {
    /// Recordings, databases or directories of recordings.
    #[arg(required = true, value_name = "PATHS")]
    paths: Vec<PathBuf>,
    /// The baseline to compare with (default: recordings/schema-baseline.json
    /// of this source tree, else the copy built into agy-bridge).
    #[arg(long, value_name = "FILE", conflicts_with = "update_baseline")]
    baseline: Option<PathBuf>,
    /// Write the fingerprint of PATHS to FILE as the new baseline instead.
    #[arg(long, value_name = "FILE")]
    update_baseline: Option<PathBuf>,
    /// Print the findings as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `drift`'s exit status when the inputs hold nothing to compare.
const DRIFT_NOTHING_TO_COMPARE: u8 = 3;

/// The files drift reads from PATHS (a directory gives the `.jsonl` files
/// in it and in every directory below it, so `recordings/` is the whole
/// corpus), each once, and a description of each PATH for the
/// nothing-to-compare case.
fn drift_inputs(args: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut looked_at = Vec::new();
    for p in args {
        if !p.is_dir() {
            paths.push(p.clone());
            looked_at.push(p.display().to_string());
            continue;
        }
        let mut found = Vec::new();
        jsonl_under(p, &mut found)?;
        found.sort();
        looked_at.push(format!(
            "{} (a directory with {} .jsonl file(s) in it and below)",
            p.display(),
            found.len()
        ));
        paths.extend(found);
    }
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    Ok((paths, looked_at))
}

/// Every `.jsonl` file under `dir`, at any depth.
fn jsonl_under(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if kind.is_dir() {
            jsonl_under(&path, found)?;
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            found.push(path);
        }
    }
    Ok(())
}

fn cmd_drift(args: DriftArgs) -> CmdResult {
    use agy_corpus::drift;
    let fail = |message: String| {
        eprintln!("agy-bridge: error: {}", message.replace(['\n', '\r'], " "));
        Ok(ExitCode::from(2))
    };
    let (paths, looked_at) = match drift_inputs(&args.paths) {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    let current = match drift::fingerprint_paths(&paths) {
        Ok(fp) => fp,
        Err(e) => return fail(e.to_string()),
    };
    if let Some(out) = &args.update_baseline {
        if current.total_steps() == 0 {
            eprintln!(
                "agy-bridge: error: nothing to write: {} holds no step; {} is unchanged",
                looked_at.join(", "),
                out.display()
            );
            return Ok(ExitCode::from(DRIFT_NOTHING_TO_COMPARE));
        }
        if let Err(e) = std::fs::write(out, current.to_json()) {
            return fail(format!("cannot write {}: {e}", out.display()));
        }
        let text = format!(
            "wrote {}: {} sources, {} step types, {} steps\n",
            out.display(),
            current.sources.len(),
            current.step_types.len(),
            current.total_steps()
        );
        return cli::out::print_then(&text, ExitCode::SUCCESS);
    }
    let loaded = match args.baseline {
        Some(path) => drift::Fingerprint::load(&path).map(|fp| (fp, path)),
        None => drift::default_baseline(),
    };
    let (baseline, baseline_path) = match loaded {
        Ok(b) => b,
        Err(e) => return fail(e.to_string()),
    };
    let report = drift::compare(&baseline, &current);
    let text = if args.json {
        report.to_json(&current, &baseline_path, &looked_at)
    } else {
        report.to_text(&current, &baseline_path, &looked_at)
    };
    let code = if report.nothing_to_compare {
        ExitCode::from(DRIFT_NOTHING_TO_COMPARE)
    } else if report.is_breaking() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    // A reader gone early does not hide a breaking finding.
    cli::out::finish(cli::out::print(&text), code).map(|_| code)
}
