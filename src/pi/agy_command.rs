//! pi's `/agy` command, answered in words (`agy-bridge slash WORDS…`). The
//! extension passes whatever the user typed after `/agy` (plus the pi
//! session, the working directory and its own switch for pi's tools) and
//! shows the answer: every subcommand names its values and what each means,
//! a bare setting shows its value instead of failing, an unknown word lists
//! the commands, and `clear` forgets this session only (`clear all` needs a
//! confirmation the extension asks for). The logic lives here so the
//! extension stays thin.

use crate::settings::Settings;
use crate::state::config::status::{rules_count, ConfigStatus};
use crate::state::config::{AllowEdit, ConfigChange, PermissionMode, Setting, Source};
use crate::state::rules::{Rule, DEFAULT_ALLOW};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What pi's `/agy` was given: the words after it and the pi session's
/// facts the extension adds.
#[derive(Debug, Clone)]
pub struct SlashRequest {
    /// pi's session id: its agy conversation is what `clear` forgets.
    pub session_id: Option<String>,
    /// pi's working directory (the session's key when there is no id).
    pub cwd: Option<PathBuf>,
    /// Whether agy may call pi's tools in this pi process (`on`/`off`: the
    /// extension's own switch, shown in the overview).
    pub pi_tools: Option<String>,
    /// `clear all` was confirmed by the user.
    pub yes: bool,
    /// The words after `/agy`.
    pub words: Vec<String>,
    /// The settings the binary resolved: every variable is checked
    /// ([`crate::pi::turn::check_settings`]) before a setting is shown or
    /// changed, `config.json` is read and written through them.
    pub settings: Settings,
    /// The command's stop, asked for only when checking
    /// `AGY_DEFAULT_MODEL` runs `agy models` (which it ends).
    pub stop: fn() -> CancellationToken,
}

/// What `/agy` takes, one line each.
const HELP: &str = "/agy                          every setting
/agy mode [plan|accept-edits]  how agy works on files
/agy permissions [ask|allow|deny]  who decides on agy's tools that need permission
/agy allow [RULE]             the tool calls that pass without asking (/agy allow remove RULE)
/agy model [ALIAS]            AskAntigravity's default model
/agy thinking [low|medium|high]  the default thinking tier
/agy tools [on|off]           whether agy may call pi's tools (this pi process)
/agy usage                    agy's quota: what is left in each bucket, and when it refills
/agy sessions                 pi sessions and their agy conversations
/agy clear                    forget this session's agy conversation (/agy clear all: every session's)";

/// Each setting's values and what each means.
fn values(setting: Setting) -> &'static str {
    match setting {
        Setting::Mode => {
            "accept-edits (the default): agy edits files without asking first\n  plan: agy plans first and edits only once the plan is accepted (agy's --mode plan)"
        }
        Setting::Permissions => PERMISSION_VALUES,
        Setting::Model => {
            "an alias agy's catalog answers to: flash, pro, gemini, sonnet, opus, gpt-oss, or e.g. '3.5 flash high' (agy-bridge models lists them)"
        }
        Setting::Thinking => "low, medium or high: the default --effort tier",
    }
}

/// The three permission modes and what each means for safety.
const PERMISSION_VALUES: &str = "ask (the default): each agy tool call waits for your decision in pi; read-only tools and your allow rules (/agy allow) pass without asking, and where pi has no UI (pi -p, JSON mode) only those pass and the rest is denied
  allow: agy runs any command, writes any file and calls any MCP tool with your user's rights, without anyone seeing it first (--dangerously-skip-permissions)
  deny: agy's print mode refuses every tool that needs permission, so the turn is mostly reading, and it names what was denied";

/// The answer to `/agy WORDS`: `Err` when the words were not understood or
/// a change could not be made (the text says why).
pub fn answer(args: &SlashRequest) -> Result<String, String> {
    let words: Vec<&str> = args.words.iter().map(String::as_str).collect();
    let setting = |name: &str| Setting::ALL.into_iter().find(|s| s.name() == name);
    // What shows or changes a setting reads every variable first: a bad
    // value is said before anything else.
    let reads_settings = match words.as_slice() {
        [] | ["allow", ..] => true,
        [name] | [name, _] => setting(name).is_some(),
        _ => false,
    };
    if reads_settings {
        crate::pi::turn::check_settings(&args.settings, args.stop)?;
    }
    match words.as_slice() {
        [] => overview(args),
        ["help"] => Ok(HELP.to_string()),
        // The extension runs `agy-bridge usage` for it (it asks agy).
        ["usage"] => Ok("agy's quota: agy-bridge usage".into()),
        ["sessions"] => sessions(&args.settings),
        ["clear"] => clear_this(args),
        ["clear", "all"] => clear_all(args),
        ["allow"] => allow_list(&args.settings),
        ["allow", "remove", rule @ ..] => allow_edit(rule, false, &args.settings),
        ["allow", rule @ ..] => allow_edit(rule, true, &args.settings),
        [name] if setting(name).is_some() => {
            show(setting(name).ok_or_else(String::new)?, &args.settings)
        }
        [name, value] if setting(name).is_some() => change(
            setting(name).ok_or_else(String::new)?,
            value,
            &args.settings,
        ),
        [name, ..] if setting(name).is_some() => Err(format!(
            "/agy {name} takes one value:\n  {}",
            values(setting(name).ok_or_else(String::new)?)
        )),
        [other, ..] => Err(format!("/agy does not know {other:?}. It takes:\n{HELP}")),
    }
}

/// `config.json` merged with the variables that win over it, read now.
fn status(settings: &Settings) -> Result<ConfigStatus, String> {
    settings.load_config().map_err(|e| e.to_string())
}

/// Where a value comes from, in words.
fn source_words(status: &ConfigStatus, setting: Setting) -> String {
    match status.setting(setting) {
        Some(s) => match s.source {
            Source::Default => "the default".into(),
            Source::File => "set with /agy".into(),
            Source::Env => format!(
                "from {} in the environment, which wins over /agy",
                s.env_var
            ),
        },
        None => "unknown".into(),
    }
}

fn value_of(status: &ConfigStatus, setting: Setting) -> String {
    status
        .setting(setting)
        .map(|s| s.display_value())
        .unwrap_or_else(|| "?".into())
}

fn overview(args: &SlashRequest) -> Result<String, String> {
    let status = status(&args.settings)?;
    let mut text = String::from("agy-bridge settings:\n");
    for setting in Setting::ALL {
        text.push_str(&format!(
            "  {:<12} {} ({})\n",
            setting.name(),
            value_of(&status, setting),
            source_words(&status, setting)
        ));
    }
    text.push_str(&format!(
        "  {:<12} {} of yours + {} built-in read-only tools ({}; /agy allow lists them)\n",
        "allow",
        rules_count(status.allow.rules.len()),
        DEFAULT_ALLOW.len(),
        allow_source_words(&status)
    ));
    let tools = args.pi_tools.as_deref().unwrap_or("on");
    text.push_str(&format!(
        "  {:<12} {tools} (this pi process; /agy tools on|off)\n",
        "tools"
    ));
    let warm = if args.settings.warm {
        "on"
    } else {
        "off (AGY_WARM)"
    };
    text.push_str(&format!(
        "  {:<12} {warm} (agy kept between turns)\n",
        "warm agy"
    ));
    text.push_str(&format!(
        "  {:<12} {}\n",
        "session",
        this_conversation(args)
    ));
    text.push_str(&format!(
        "config file: {}\n/agy SETTING shows its values; /agy help lists the commands",
        status.config_path.display()
    ));
    Ok(text)
}

/// This pi session's agy conversation, in words.
fn this_conversation(args: &SlashRequest) -> String {
    let (key, store) = session_key(args);
    match store.and_then(|s| s.get(&key).ok().flatten()) {
        Some(e) => format!("agy conversation {}", e.conversation_id.as_str()),
        None => "no agy conversation yet".into(),
    }
}

fn session_key(args: &SlashRequest) -> (String, Option<crate::state::sessions::SessionStore>) {
    use crate::state::sessions::SessionKey;
    let cwd = args
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let key = SessionKey::for_request(args.session_id.as_deref(), &cwd);
    (key, args.settings.session_store().ok())
}

fn show(setting: Setting, settings: &Settings) -> Result<String, String> {
    let status = status(settings)?;
    Ok(format!(
        "{} is {} ({}). Values:\n  {}\nChange it with /agy {} VALUE",
        setting.name(),
        value_of(&status, setting),
        source_words(&status, setting),
        values(setting),
        setting.name()
    ))
}

fn change(setting: Setting, value: &str, settings: &Settings) -> Result<String, String> {
    let bad = || {
        format!(
            "{value:?} is not a value of {}. Values:\n  {}",
            setting.name(),
            values(setting)
        )
    };
    let change = match setting {
        Setting::Mode => ConfigChange::Mode(value.parse().map_err(|_| bad())?),
        Setting::Permissions => ConfigChange::Permissions(value.parse().map_err(|_| bad())?),
        Setting::Model => ConfigChange::DefaultModel(value.to_string()),
        Setting::Thinking => ConfigChange::DefaultThinking(value.parse().map_err(|_| bad())?),
    };
    status(settings)?;
    let permissions = match &change {
        ConfigChange::Permissions(p) => Some(*p),
        _ => None,
    };
    let status = settings.save_config(change).map_err(|e| e.to_string())?;
    let mut text = match permissions {
        Some(p) => format!("permissions is now {p}: {}", p.meaning()),
        None => format!("{} is now {}", setting.name(), value),
    };
    if let Some(s) = status.setting(setting).filter(|s| s.source == Source::Env) {
        text.push_str(&format!(
            " in config.json, but {} in the environment still wins ({})",
            s.env_var,
            s.display_value()
        ));
    }
    Ok(text)
}

/// Where the user's allow rules come from, in words.
fn allow_source_words(status: &ConfigStatus) -> String {
    match status.allow.source {
        Source::Default => "none set".into(),
        Source::File => "set with /agy allow".into(),
        Source::Env => format!(
            "from {} in the environment, which wins over /agy allow",
            status.allow.env_var
        ),
    }
}

/// How a rule is written, for answers.
const RULE_SYNTAX: &str = "A rule is TOOL or TOOL: PATTERN, e.g. `run_command: cargo test *` or `write_to_file: docs/*`; in PATTERN * is any run of characters (/ too), ? one character, the rest itself. A command pattern matches the command's words one for one (a last word `*` takes any more); a path pattern matches the whole path, or the path inside the workspace. Rules pass only inside the workspace.";

fn allow_list(settings: &Settings) -> Result<String, String> {
    let status = status(settings)?;
    let mode = status.config.permissions;
    let mut text = format!(
        "Tool calls that pass without asking ({}; permissions is {mode}{}):\n",
        allow_source_words(&status),
        match mode {
            PermissionMode::Ask => "",
            PermissionMode::Allow => ", so every call passes anyway",
            PermissionMode::Deny => ", so the rules are not used",
        }
    );
    for rule in status.config.allow_list() {
        let mark = if rule.is_default() {
            "  (built in)"
        } else {
            ""
        };
        text.push_str(&format!("  {rule}{mark}\n"));
    }
    text.push_str(&format!(
        "Add one with /agy allow RULE, remove one with /agy allow remove RULE. {RULE_SYNTAX}"
    ));
    Ok(text)
}

/// The words of a rule as the extension split them, joined again, without
/// the quotes a user may have put around it.
fn rule_text(words: &[&str]) -> String {
    let joined = words.join(" ");
    let t = joined.trim();
    for q in ['\'', '"'] {
        if let Some(inner) = t.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner.trim().to_string();
        }
    }
    t.to_string()
}

fn allow_edit(words: &[&str], add: bool, settings: &Settings) -> Result<String, String> {
    let text = rule_text(words);
    if text.is_empty() {
        return Err(format!(
            "/agy allow remove takes the rule to remove. {RULE_SYNTAX}"
        ));
    }
    let rule = Rule::parse(&text).map_err(|e| format!("{e}. {RULE_SYNTAX}"))?;
    if !add && rule.is_default() {
        return Err(format!(
            "{rule} is built in (a read-only tool) and cannot be removed"
        ));
    }
    status(settings)?;
    let edit = if add {
        AllowEdit::Add(rule.clone())
    } else {
        AllowEdit::Remove(rule.clone())
    };
    let (status, changed) = settings.edit_allow(&edit).map_err(|e| e.to_string())?;
    let mut text = match (add, changed) {
        (true, true) => format!("added the allow rule {rule}: {}", rule_effect(&rule)),
        (true, false) => format!("the allow rule {rule} is already there"),
        (false, true) => format!("removed the allow rule {rule}"),
        (false, false) => format!("there is no allow rule {rule} in config.json to remove"),
    };
    if status.allow.source == Source::Env {
        text.push_str(&format!(
            "\nnote: {} in the environment replaces the rules of config.json, so this takes effect only once it is unset",
            status.allow.env_var
        ));
    }
    if add && status.config.permissions != PermissionMode::Ask {
        text.push_str(&format!(
            "\nnote: permissions is {}, and the rules count only when it is ask (/agy permissions ask)",
            status.config.permissions
        ));
    }
    Ok(text)
}

/// What an added rule lets through, in words.
fn rule_effect(rule: &Rule) -> String {
    if rule.glob == "*" {
        format!("every {} call now runs without asking", rule.tool)
    } else {
        format!(
            "{} calls matching {:?} now run without asking",
            rule.tool, rule.glob
        )
    }
}

fn sessions(settings: &Settings) -> Result<String, String> {
    let store = settings.session_store().map_err(|e| e.to_string())?;
    let list = store.list().map_err(|e| e.to_string())?;
    if list.is_empty() {
        return Ok("no pi session has an agy conversation yet".into());
    }
    let mut text = format!("{} pi sessions with an agy conversation:\n", list.len());
    for (key, e) in &list {
        text.push_str(&format!(
            "  {}  agy conversation {}\n",
            key.escape_debug(),
            e.conversation_id.as_str()
        ));
    }
    Ok(text)
}

fn clear_this(args: &SlashRequest) -> Result<String, String> {
    let (key, store) = session_key(args);
    let store = store.ok_or("the session state cannot be opened")?;
    match store.remove(&key) {
        Ok(true) => Ok(
            "this pi session's agy conversation is forgotten: its next turn begins a new one"
                .into(),
        ),
        Ok(false) => Ok("this pi session has no agy conversation to forget".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn clear_all(args: &SlashRequest) -> Result<String, String> {
    let store = args.settings.session_store().map_err(|e| e.to_string())?;
    if !args.yes {
        let n = store.list().map(|l| l.len()).unwrap_or(0);
        return Err(format!(
            "/agy clear all forgets the agy conversation of every pi session ({n}); it needs a confirmation (agy-bridge slash --yes clear all)"
        ));
    }
    let n = store.clear().map_err(|e| e.to_string())?;
    Ok(format!(
        "forgot the agy conversations of {n} pi sessions: each begins a new one on its next turn"
    ))
}
