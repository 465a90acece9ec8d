//! agy's file edits as ACP `diff` content: which calls are edits (the
//! rule pi's diffs use, [`crate::follow::edits`]) and the file's text
//! before agy wrote and after.
//!
//! The text before is read when the call is announced, which races agy:
//! a follower that falls behind (a loaded machine, commits read together)
//! looks after agy wrote. Then the text before is the edit undone, when
//! agy's own arguments prove it ([`agy_format::edits::Change::undo`]);
//! otherwise no diff is sent, since a diff without `oldText` tells the
//! client the file is new.
//!
//! ACP wants whole texts (`oldText`, `newText`), not a rendered diff, so
//! the output is apart from pi's `diff` module (which renders numbered
//! diffs and falls back to git HEAD). [`FileTexts`] reads files: blocking, for a blocking thread
//! ([`FileTexts::before_off_runtime`], [`FileTexts::diff_off_runtime`]).
//! File contents are outside data: nothing here unwraps them.

use crate::follow::edits::edit_target;
use agent_client_protocol::v1::schema::Diff;
use agy_format::edits::{Change, FileEdit};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Files larger than this are not sent as text (a diff view of them helps
/// nobody, and the update would be huge).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Whether a call writes a file ([`edit_target`]: the rule pi's diffs use).
pub fn is_edit(name: &str, arguments: &str) -> bool {
    edit_target(name, arguments).is_some()
}

/// The file an edit writes, absolute against `cwd`; `None` for any other
/// call (malformed arguments included).
pub fn edit_path(name: &str, arguments: &str, cwd: &Path) -> Option<PathBuf> {
    let path = edit_target(name, arguments)?.path;
    Some(if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    })
}

/// What agy's call does to its file's text, when it is one of agy's own
/// file tools and its arguments say ([`agy_format::edits`]).
pub fn edit_change(name: &str, arguments: &str) -> Option<Change> {
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    FileEdit::parse(name, &args)?.ok().map(|edit| edit.change)
}

/// What a file held when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Text(String),
    Missing,
    /// Binary, too large, a directory or unreadable: no diff.
    Other,
}

/// One turn's view of the files agy edits: what each held before agy's
/// first write this turn, and after its last.
#[derive(Debug, Default, Clone)]
pub struct FileTexts {
    inner: Arc<Mutex<HashMap<PathBuf, Seen>>>,
}

impl FileTexts {
    /// Remember what `path` holds now, unless something is remembered
    /// already (the first look before a write wins). Blocking.
    pub fn before(&self, path: &Path) {
        let Ok(mut known) = self.inner.lock() else {
            return;
        };
        if !known.contains_key(path) {
            known.insert(path.to_path_buf(), read_text(path));
        }
    }

    /// The diff of `path` now against what was remembered (or `change`
    /// undone), and the new text remembered for its next edit. `None` when
    /// the file is not text now, or its text before is not known: a diff
    /// without `oldText` says the file is new, so it is sent only for a
    /// file that was missing. Blocking.
    pub fn diff(&self, path: &Path, change: Option<&Change>) -> Option<Diff> {
        let now = read_text(path);
        let before = self
            .inner
            .lock()
            .ok()
            .and_then(|mut known| known.insert(path.to_path_buf(), now.clone()));
        let Seen::Text(new) = now else {
            return None;
        };
        let old = match before {
            Some(Seen::Text(old)) if old != new => Some(old),
            Some(Seen::Missing) => None,
            // Looked at too late (agy had written: the same text as now) or
            // never: the text the edit, undone, proves it was; else none.
            Some(Seen::Text(_)) | None => Some(change?.undo(&new)?),
            // Not text before (binary, too large, unreadable).
            Some(Seen::Other) => return None,
        };
        Some(Diff::new(path, new).old_text(old))
    }

    /// [`FileTexts::before`] on a blocking thread.
    pub async fn before_off_runtime(&self, path: PathBuf) {
        let texts = self.clone();
        let _ = tokio::task::spawn_blocking(move || texts.before(&path)).await;
    }

    /// [`FileTexts::diff`] on a blocking thread.
    pub async fn diff_off_runtime(&self, path: PathBuf, change: Option<Change>) -> Option<Diff> {
        let texts = self.clone();
        tokio::task::spawn_blocking(move || texts.diff(&path, change.as_ref()))
            .await
            .ok()
            .flatten()
    }
}

/// A file as text: missing, or not text (binary, too large, unreadable).
fn read_text(path: &Path) -> Seen {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Seen::Missing,
        Err(_) => return Seen::Other,
    };
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() <= MAX_FILE_BYTES => {}
        _ => return Seen::Other,
    }
    let mut bytes = Vec::new();
    if file
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Seen::Other;
    }
    if bytes.contains(&0) {
        return Seen::Other;
    }
    String::from_utf8(bytes).map_or(Seen::Other, Seen::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agys_edit_tools_are_edits_and_readers_are_not() {
        let cwd = Path::new("/w");
        let replace =
            r#"{"TargetFile":"/w/src/lib.rs","ReplacementContent":"x","TargetContent":"y"}"#;
        assert_eq!(
            edit_path("replace_file_content", replace, cwd),
            Some(PathBuf::from("/w/src/lib.rs"))
        );
        let write = r#"{"TargetFile":"notes.md","CodeContent":"hi"}"#;
        assert_eq!(
            edit_path("write_to_file", write, cwd),
            Some(PathBuf::from("/w/notes.md"))
        );
        let view = r#"{"AbsolutePath":"/w/src/lib.rs","StartLine":1}"#;
        assert_eq!(edit_path("view_file", view, cwd), None);
        assert_eq!(edit_path("write_to_file", "not json", cwd), None);
    }

    #[test]
    fn a_diff_has_the_text_before_and_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "one\n").expect("write");
        let texts = FileTexts::default();
        texts.before(&file);
        std::fs::write(&file, "two\n").expect("write");
        let diff = texts.diff(&file, None).expect("a diff");
        assert_eq!(diff.old_text.as_deref(), Some("one\n"));
        assert_eq!(diff.new_text, "two\n");
        // The next edit's old side is this one's new side.
        std::fs::write(&file, "three\n").expect("write");
        let diff = texts.diff(&file, None).expect("a diff");
        assert_eq!(diff.old_text.as_deref(), Some("two\n"));
        // A new file has no old side; a binary one no diff.
        let new = dir.path().join("b.txt");
        texts.before(&new);
        std::fs::write(&new, "b\n").expect("write");
        assert_eq!(texts.diff(&new, None).expect("diff").old_text, None);
        std::fs::write(&new, [0u8, 1, 2]).expect("write");
        assert!(texts.diff(&new, None).is_none());
    }

    #[test]
    fn a_look_after_agy_wrote_is_the_edit_undone_or_no_diff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("lib.rs");
        let replace =
            r#"{"TargetFile":"lib.rs","TargetContent":"(0..n)","ReplacementContent":"(0..=n)"}"#;
        let change = edit_change("replace_file_content", replace).expect("agy's edit");
        // agy wrote before the look: the look saw the text after.
        std::fs::write(&file, "fn f() { (0..=n).sum() }\n").expect("write");
        let texts = FileTexts::default();
        texts.before(&file);
        let diff = texts.diff(&file, Some(&change)).expect("a diff");
        assert_eq!(diff.old_text.as_deref(), Some("fn f() { (0..n).sum() }\n"));
        assert_eq!(diff.new_text, "fn f() { (0..=n).sum() }\n");
        // Not provable (a whole-file write, or no edit known): no diff,
        // rather than one that calls the file new.
        let late = FileTexts::default();
        late.before(&file);
        let write = edit_change(
            "write_to_file",
            r#"{"TargetFile":"lib.rs","CodeContent":"x"}"#,
        );
        assert!(write.is_some());
        assert!(late.diff(&file, write.as_ref()).is_none());
        assert!(FileTexts::default().diff(&file, None).is_none());
        // Not agy's own file tools, or malformed: nothing to undo.
        assert_eq!(
            edit_change("edit", r#"{"path":"a","new_string":"b"}"#),
            None
        );
        assert_eq!(edit_change("replace_file_content", "not json"), None);
    }
}
