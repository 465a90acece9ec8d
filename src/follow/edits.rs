//! Which tool calls are file edits: the one rule every front end uses to
//! show agy's edits (pi's numbered diffs, ACP's `diff` content). An edit is
//! recognised from the call's argument keys, since agy's edit tools change
//! names between versions while their keys keep their shape.
//! Tool JSON is outside data: nothing here unwraps it.

use agy_format::text::{one_line, shorten};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Characters of the tool summary kept in a label.
const MAX_SUMMARY_CHARS: usize = 60;
/// Tool-name prefixes that never write, whatever their argument keys say.
const READ_ONLY_PREFIXES: &[&str] = &["view", "read", "grep", "search", "find", "list", "glob"];
/// Argument keys that describe the edit, best first.
const SUMMARY_KEYS: &[&str] = &["toolSummary", "Description", "Instruction"];

/// An edit recognised from a tool call: which file, and how to name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditTarget {
    /// The path as agy wrote it (normally absolute); a relative path is
    /// taken relative to the turn's cwd.
    pub path: PathBuf,
    /// `PATH` or `PATH (summary)`, with the path as written. pi's `TurnEdits::render`
    /// shows the leading path relative to its cwd when the file is inside it.
    pub label: String,
}

/// Recognises a file edit from a tool call's name and argument JSON.
///
/// It is an edit when the arguments carry both a non-empty string under a key
/// ending (case-insensitively) in `file` or `path` (`TargetFile`,
/// `AbsolutePath`, `file_path`, `path`, ...) and a content value under another
/// key mentioning content or code (`CodeContent`, `content`,
/// `ReplacementContent`, `ReplacementChunks`, `code`, `new_string`,
/// `newText`, `edits`, ...). Tools named like readers (`view_*`, `read_*`,
/// `grep*`, `search*`, `find*`, `list*`, `glob*`) are never edits. Anything
/// else, malformed JSON included, is `None`.
pub(crate) fn edit_target(tool_name: &str, arguments_json: &str) -> Option<EditTarget> {
    let name = tool_name.trim().to_ascii_lowercase();
    if READ_ONLY_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return None;
    }
    let value: Value = serde_json::from_str(arguments_json).ok()?;
    let args = value.as_object()?;
    let (path_key, raw_path) = pick_path(args)?;
    let has_content = args
        .iter()
        .any(|(k, v)| k != path_key && is_content_key(k) && carries_content(v));
    if !has_content {
        return None;
    }
    let path = path_from_arg(raw_path)?;
    let written = one_line(&path.display().to_string());
    let label = match summary(args, raw_path, &path) {
        Some(s) => format!("{written} ({s})"),
        None => written,
    };
    Some(EditTarget { path, label })
}

/// The path argument: a key ending in `file` before one ending in `path`,
/// then the first in key order.
fn pick_path(args: &Map<String, Value>) -> Option<(&str, &str)> {
    let mut best: Option<(u8, &str, &str)> = None;
    for (k, v) in args {
        let Some(s) = v.as_str().filter(|s| !s.trim().is_empty()) else {
            continue;
        };
        let lower = k.to_ascii_lowercase();
        let rank = if lower.ends_with("file") {
            0
        } else if lower.ends_with("path") {
            1
        } else {
            continue;
        };
        let better = match best {
            Some((r, _, _)) => rank < r,
            None => true,
        };
        if better {
            best = Some((rank, k.as_str(), s));
        }
    }
    best.map(|(_, k, s)| (k, s))
}

fn is_content_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace(['_', '-'], "");
    [
        "content",
        "code",
        "chunks",
        "newstring",
        "newtext",
        "newstr",
    ]
    .iter()
    .any(|w| k.contains(w))
        || k == "edits"
}

/// A content value: text (even empty: writing an empty file is an edit) or
/// structured chunks. Flags, numbers and nulls are not content.
fn carries_content(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Array(_) | Value::Object(_))
}

fn path_from_arg(raw: &str) -> Option<PathBuf> {
    let s = raw.trim();
    let s = s.strip_prefix("file://").unwrap_or(s);
    (!s.is_empty()).then(|| PathBuf::from(s))
}

/// The tool's own short description of the edit, if it adds anything.
fn summary(args: &Map<String, Value>, raw_path: &str, path: &Path) -> Option<String> {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    SUMMARY_KEYS.iter().find_map(|key| {
        let (_, v) = args.iter().find(|(k, _)| k.eq_ignore_ascii_case(key))?;
        let line = v.as_str()?.lines().map(str::trim).find(|l| !l.is_empty())?;
        let redundant = line == raw_path.trim() || Some(line) == file_name.as_deref();
        (!redundant).then(|| shorten(&one_line(line), MAX_SUMMARY_CHARS))
    })
}
