//! The bridge's state as `agy-bridge config allow` and `agy-bridge
//! sessions` list it: text for a person, or one JSON object.

use crate::state::config::status::ConfigStatus;
use crate::state::config::{AllowEdit, Setting, Source};
use crate::state::sessions::SessionEntry;
use std::path::Path;

/// The effective allow list (built-in rules marked), after `edit` if there
/// was one (`changed`: it changed the file).
pub fn allow_text(
    status: &ConfigStatus,
    edit: Option<&AllowEdit>,
    changed: bool,
    json: bool,
) -> String {
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
        if let (Some(edit), Some(obj)) = (edit, out.as_object_mut()) {
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
        return format!("{out}\n");
    }
    let mut text = String::new();
    match edit {
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
    text
}

/// The pi session → agy conversation bindings in `path`.
pub fn sessions_text(list: &[(String, SessionEntry)], path: &Path, json: bool) -> String {
    if json {
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
        return format!(
            "{}\n",
            serde_json::json!({ "path": path, "sessions": sessions })
        );
    }
    if list.is_empty() {
        return format!("no sessions ({})\n", path.display());
    }
    let shown: Vec<String> = list
        .iter()
        .map(|(k, _)| k.escape_debug().to_string())
        .collect();
    let width = shown.iter().map(|k| k.chars().count()).max().unwrap_or(0);
    let mut text = format!(
        "{:<width$}  {:<36}  {:>8}  {:>8}\n",
        "KEY", "CONVERSATION", "LAST IDX", "MESSAGES"
    );
    for (key, (_, e)) in shown.iter().zip(list) {
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
        path.display()
    ));
    text
}

/// `agy-bridge config SETTING VALUE`'s answer: what was saved where, the
/// variable that still wins over the file (`env_wins`: its value), and
/// the whole status after.
pub fn saved_text(
    status: &ConfigStatus,
    setting: Setting,
    env_wins: Option<String>,
    json: bool,
) -> String {
    let now = status.setting(setting);
    let saved = now.and_then(|n| n.file_value.clone()).unwrap_or_default();
    let env_var = now.map(|n| n.env_var).unwrap_or_default();
    if json {
        let mut json = status.to_json();
        if let Some(obj) = json.as_object_mut() {
            obj.insert(
                "saved".into(),
                serde_json::json!({
                    "setting": setting.name(),
                    "key": setting.file_key(),
                    "value": saved,
                    "overriddenByEnv": env_wins.as_ref().map(|_| env_var),
                }),
            );
        }
        return format!("{json}\n");
    }
    let shown = now.and_then(|n| n.display_file_value()).unwrap_or_default();
    let mut text = format!(
        "saved {} = {} in {}\n",
        setting.name(),
        shown,
        status.config_path.display()
    );
    if let Some(v) = &env_wins {
        text.push_str(&format!(
            "note: {env_var}={v:?} is set in the environment and still wins over the file\n"
        ));
    }
    text.push_str(&format!("\n{status}\n"));
    text
}
