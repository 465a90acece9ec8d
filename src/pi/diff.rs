//! agy's file edits as short, line-numbered diffs for pi's thinking stream.
//!
//! The provider never emits pi `toolCall` blocks (pi would try to run them),
//! so pi's own diff viewer never sees agy's edits. This module owns the
//! replacement: given an edit recognised from a tool call's argument keys
//! (`follow::edits::edit_target`, the rule ACP's diffs share), and
//! once agy has written, it renders what changed on disk
//! ([`TurnEdits::render`]) against the content seen earlier in the same turn,
//! else against git HEAD. Whatever cannot be diffed sensibly (binary, outside
//! the workspace, no repo, deleted, unchanged) gets a one-line note instead.
//! File contents, git output and tool JSON are outside data: nothing here
//! unwraps them, and nothing here panics.

use crate::process::tree::{run_with_timeout_capped, RunError};
use similar::{Algorithm, DiffTag, TextDiff};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Diff lines shown for one edit; the rest become one `… K more lines` line.
pub(crate) const MAX_DIFF_LINES: usize = 100;
/// Unchanged lines shown around each change.
pub(crate) const CONTEXT_LINES: usize = 3;
/// Files (and HEAD blobs) larger than this get a note instead of a diff.
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;
/// Each git call is killed after this long.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(3);

/// Characters of one displayed line (a minified file must not flood pi).
const MAX_LINE_CHARS: usize = 240;
/// After this the diff algorithm settles for a coarser (still correct) diff.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

use crate::follow::edits::EditTarget;
use agy_format::text::{one_line, shorten};

/// What a file held when we looked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Text(String),
    Missing,
    Binary,
    TooLarge(u64),
    Directory,
    Unreadable(String),
}

impl Seen {
    /// As a diff baseline: `Some(Ok(text))`, `Some(Err(note))` when the old
    /// side cannot be diffed, `None` when it tells us nothing.
    fn baseline(&self) -> Option<Result<String, String>> {
        match self {
            Seen::Text(s) => Some(Ok(s.clone())),
            Seen::Missing => Some(Ok(String::new())),
            Seen::Binary => Some(Err(note_binary())),
            Seen::TooLarge(n) => Some(Err(note_large(*n))),
            Seen::Directory | Seen::Unreadable(_) => None,
        }
    }
}

#[derive(Debug, Default)]
struct Remembered {
    /// Taken by [`TurnEdits::before_edit`], consumed by the next render.
    snapshot: Option<Seen>,
    /// What the last render of this file found on disk.
    last: Option<Seen>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum GitError {
    /// git is not installed or cannot be started.
    Unavailable,
    TimedOut,
    /// git ran and failed (not a repo, path not in HEAD, no commits, ...).
    Failed,
}

/// One provider turn's view of the files agy edits: make a new one per turn
/// so turns never share state.
#[derive(Debug)]
pub struct TurnEdits {
    cwd: PathBuf,
    /// The user's home, resolved: labels outside the cwd start `~/` there.
    home: Option<PathBuf>,
    files: HashMap<PathBuf, Remembered>,
    toplevels: HashMap<PathBuf, Option<PathBuf>>,
}

impl TurnEdits {
    /// `cwd` is the turn's working directory: relative tool paths resolve
    /// against it and labels are shown relative to it.
    pub fn new(cwd: &Path) -> Self {
        let cwd = real_path(&lexical(cwd));
        TurnEdits {
            cwd,
            home: None,
            files: HashMap::new(),
            toplevels: HashMap::new(),
        }
    }

    /// The user's home: a label of a file under it (outside the cwd)
    /// starts with `~/`.
    pub fn set_home(&mut self, home: Option<&Path>) {
        self.home = home.filter(|h| !h.as_os_str().is_empty()).map(real_path);
    }

    /// The turn's working directory, as labels are shown relative to it.
    pub(crate) fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// This view, moved out (to a blocking thread), leaving an empty one
    /// of the same cwd in its place (no file touched to make it).
    pub(crate) fn take(&mut self) -> TurnEdits {
        let empty = TurnEdits {
            cwd: self.cwd.clone(),
            home: self.home.clone(),
            files: HashMap::new(),
            toplevels: HashMap::new(),
        };
        std::mem::replace(self, empty)
    }

    /// Snapshots `path` as it is now; call it when the tool call is announced,
    /// before agy writes. Best effort: the first snapshot before a render wins,
    /// and a snapshot that turns out to equal the result (taken too late, or
    /// the edit changed nothing) is passed over for older knowledge.
    pub(crate) fn before_edit(&mut self, path: &Path) {
        let abs = self.resolve(path);
        if self.outside_note(&abs).is_some() {
            return;
        }
        let entry = self.files.entry(abs.clone()).or_default();
        if entry.snapshot.is_none() {
            let seen = read_disk(&abs);
            if seen.baseline().is_some() {
                entry.snapshot = Some(seen);
            }
        }
    }

    /// Renders one finished edit: `[agy edit: LABEL]\n` then either a
    /// numbered diff (see `numbered_diff`) or a one-line note, ending in
    /// `\n`. Remembers the file's new content for its next edit this turn.
    pub fn render(&mut self, target: &EditTarget) -> String {
        let abs = self.resolve(&target.path);
        let mut out = format!("[agy edit: {}]\n", self.label(target, &abs));
        out.push_str(&self.body(&abs));
        out.push('\n');
        out
    }

    fn body(&mut self, abs: &Path) -> String {
        if let Some(note) = self.outside_note(abs) {
            return note;
        }
        let current = read_disk(abs);
        let remembered = self.files.remove(abs).unwrap_or_default();
        let last = match &current {
            Seen::Directory | Seen::Unreadable(_) => remembered.last.clone(),
            seen => Some(seen.clone()),
        };
        self.files.insert(
            abs.to_path_buf(),
            Remembered {
                snapshot: None,
                last,
            },
        );

        let new = match current {
            Seen::Text(s) => s,
            Seen::Missing => {
                let never_existed = remembered.snapshot == Some(Seen::Missing);
                return if never_existed {
                    "(file not found)".into()
                } else {
                    "(file deleted)".into()
                };
            }
            Seen::Binary => return note_binary(),
            Seen::TooLarge(n) => return note_large(n),
            Seen::Directory => return "(a directory, not a file; no diff)".into(),
            Seen::Unreadable(e) => return format!("(cannot read the file: {e})"),
        };

        // (a) what we saw earlier this turn; a snapshot identical to the
        // result may have been taken after agy wrote, so look further back.
        let mut snapshot_unchanged = false;
        let mut baseline = None;
        if let Some(b) = remembered.snapshot.as_ref().and_then(Seen::baseline) {
            if b.as_deref() == Ok(new.as_str()) {
                snapshot_unchanged = true;
            } else {
                baseline = Some(b);
            }
        }
        if baseline.is_none() {
            baseline = remembered.last.as_ref().and_then(Seen::baseline);
        }
        // (b) the committed version.
        let baseline = match baseline {
            Some(b) => b,
            None => match self.head_content(abs) {
                Ok(b) => b,
                Err(_) if snapshot_unchanged => return "(no change)".into(),
                Err(note) => return note,
            },
        };
        let old = match baseline {
            Ok(old) => old,
            Err(note) => return note,
        };
        if old == new {
            return "(no change)".into();
        }
        numbered_diff(&old, &new)
    }

    /// The file's content at HEAD of its own repository: `Ok(Ok(text))`
    /// (empty when the file is new since HEAD), `Ok(Err(note))` when HEAD's
    /// version cannot be diffed, `Err(note)` when there is no HEAD to ask.
    fn head_content(&mut self, abs: &Path) -> Result<Result<String, String>, String> {
        let dir = abs.parent().unwrap_or(abs);
        let root = match self.toplevel(dir) {
            Ok(Some(root)) => root,
            Ok(None) => return Err("(not in a git repo; no diff)".into()),
            Err(e) => return Err(git_note(e)),
        };
        let Ok(rel) = abs.strip_prefix(&root) else {
            return Err("(outside the git repo; no diff)".into());
        };
        let mut spec = String::from("HEAD:");
        for (i, part) in rel.components().enumerate() {
            let Component::Normal(part) = part else {
                return Err("(outside the git repo; no diff)".into());
            };
            let Some(part) = part.to_str() else {
                return Err("(path is not UTF-8; no diff)".into());
            };
            if i > 0 {
                spec.push('/');
            }
            spec.push_str(part);
        }
        match run_git(&root, &["show", "--no-textconv", &spec]) {
            Ok(bytes) => Ok(decode(bytes)),
            Err(GitError::Failed) => Ok(Ok(String::new())),
            Err(e) => Err(git_note(e)),
        }
    }

    /// The work tree containing `dir` (or its nearest existing ancestor).
    fn toplevel(&mut self, dir: &Path) -> Result<Option<PathBuf>, GitError> {
        let Some(dir) = dir.ancestors().find(|d| d.is_dir()) else {
            return Ok(None);
        };
        if let Some(known) = self.toplevels.get(dir) {
            return Ok(known.clone());
        }
        let root = match run_git(dir, &["rev-parse", "--show-toplevel"]) {
            Ok(out) => String::from_utf8(out)
                .ok()
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .filter(|s| !s.is_empty())
                .map(|s| real_path(Path::new(&s))),
            Err(GitError::Failed) => None,
            Err(e) => return Err(e),
        };
        self.toplevels.insert(dir.to_path_buf(), root.clone());
        Ok(root)
    }

    /// A note when `abs` is outside both the cwd and the repo holding the cwd.
    fn outside_note(&mut self, abs: &Path) -> Option<String> {
        if abs.starts_with(&self.cwd) {
            return None;
        }
        let cwd = self.cwd.clone();
        match self.toplevel(&cwd) {
            Ok(Some(root)) if abs.starts_with(&root) => None,
            Ok(Some(_)) => Some("(outside the git repo; no diff)".into()),
            _ => Some("(outside the working directory; no diff)".into()),
        }
    }

    fn resolve(&self, path: &Path) -> PathBuf {
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        };
        real_path(&lexical(&joined))
    }

    /// The target's label with its leading path shown relative to the cwd
    /// (or `~`) when it can be.
    fn label(&self, target: &EditTarget, abs: &Path) -> String {
        let written = one_line(&target.path.display().to_string());
        let Some(rest) = target.label.strip_prefix(&written) else {
            return one_line(&target.label);
        };
        let shown = match abs.strip_prefix(&self.cwd) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => home_relative(self.home.as_deref(), abs).unwrap_or(written),
        };
        one_line(&format!("{shown}{rest}"))
    }
}

fn home_relative(home: Option<&Path>, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(home?).ok()?;
    Some(format!("~/{}", rel.display()))
}

fn note_binary() -> String {
    "(binary file; no diff)".into()
}

fn note_large(bytes: u64) -> String {
    format!("(large file, {bytes} bytes; no diff)")
}

fn git_note(e: GitError) -> String {
    match e {
        GitError::Unavailable => "(git is unavailable; no diff)".into(),
        GitError::TimedOut => "(git timed out; no diff)".into(),
        GitError::Failed => "(not in a git repo; no diff)".into(),
    }
}

/// Text, or a note for binary (NUL bytes or invalid UTF-8) and large content.
fn decode(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(note_large(bytes.len() as u64));
    }
    if bytes.contains(&0) {
        return Err(note_binary());
    }
    String::from_utf8(bytes).map_err(|_| note_binary())
}

fn read_disk(path: &Path) -> Seen {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Seen::Missing,
        Err(e) => return Seen::Unreadable(e.kind().to_string()),
    };
    if meta.is_dir() {
        return Seen::Directory;
    }
    if meta.len() > MAX_FILE_BYTES {
        return Seen::TooLarge(meta.len());
    }
    let mut bytes = Vec::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes));
    match read {
        Ok(_) if bytes.len() as u64 > MAX_FILE_BYTES => Seen::TooLarge(bytes.len() as u64),
        Ok(_) => match decode(bytes) {
            Ok(text) => Seen::Text(text),
            Err(_) => Seen::Binary,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Seen::Missing,
        Err(e) => Seen::Unreadable(e.kind().to_string()),
    }
}

/// Removes `.` and resolves `..` without touching the file system, so a
/// path cannot climb out of the cwd unnoticed.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with symlinks resolved as far as it exists (a deleted file keeps
/// its canonical directory), so `/tmp` and its real name compare equal.
fn real_path(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = ancestor.canonicalize() {
            return match path.strip_prefix(ancestor) {
                Ok(rest) if !rest.as_os_str().is_empty() => real.join(rest),
                _ => real,
            };
        }
    }
    path.to_path_buf()
}

/// Runs `git -C dir ARGS`, killed after [`GIT_TIMEOUT`]; stdout on success.
fn run_git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let mut git = Command::new("git");
    git.arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_PREFIX")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0");
    // A blob past the cap is too large to diff anyway: stop reading there.
    match run_with_timeout_capped(&mut git, GIT_TIMEOUT, MAX_FILE_BYTES + 1) {
        Ok(out) if out.status.success() => Ok(out.stdout),
        Ok(_) | Err(RunError::Wait(_)) => Err(GitError::Failed),
        Err(RunError::Spawn(_)) => Err(GitError::Unavailable),
        Err(RunError::TimedOut(_)) => Err(GitError::TimedOut),
    }
}

/// Lines for diffing: split on `\n`, a final newline does not make a line,
/// and a trailing `\r` is not part of the line.
fn split_lines(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let s = s.strip_suffix('\n').unwrap_or(s);
    s.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// A line-numbered diff of two texts, one line per entry, joined with `\n`
/// (no trailing newline):
///
/// - `-N text`: line N of the old text, removed;
/// - `+N text`: line N of the new text, added;
/// - ` N text`: unchanged context, numbered as in the new text (the file as
///   it now is on disk), [`CONTEXT_LINES`] around each change;
/// - `…` lines padded to the number column (`   ...`) mark skipped unchanged
///   lines before, between and after hunks.
///
/// Numbers are right-aligned to the width of the longer text's line count.
/// Beyond [`MAX_DIFF_LINES`] lines the rest is replaced by `… K more lines`.
/// Texts differing only in line endings or the final newline give the note
/// `(only line endings or the final newline changed)`; equal texts give
/// `(no change)`.
pub(crate) fn numbered_diff(old: &str, new: &str) -> String {
    if old == new {
        return "(no change)".into();
    }
    let old_lines = split_lines(old);
    let new_lines = split_lines(new);
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_slices(&old_lines, &new_lines);
    let groups = diff.grouped_ops(CONTEXT_LINES);
    if groups.is_empty() {
        return "(only line endings or the final newline changed)".into();
    }
    let width = old_lines
        .len()
        .max(new_lines.len())
        .max(1)
        .to_string()
        .len();
    let mut out = Capped::default();
    let line = |marker: char, number: usize, text: &str| {
        let text = shorten(text, MAX_LINE_CHARS);
        if text.is_empty() {
            format!("{marker}{number:>width$}")
        } else {
            format!("{marker}{number:>width$} {text}")
        }
    };
    let gap = format!("{:width$}  ...", "");
    let (mut old_end, mut new_end) = (0, 0);
    for group in &groups {
        for (i, op) in group.iter().enumerate() {
            let (tag, o, n) = op.as_tag_tuple();
            if i == 0 && (o.start > old_end || n.start > new_end) {
                out.push(|| gap.clone());
            }
            if matches!(tag, DiffTag::Equal) {
                for k in n.clone() {
                    out.push(|| line(' ', k + 1, new_lines.get(k).copied().unwrap_or("")));
                }
            }
            if matches!(tag, DiffTag::Delete | DiffTag::Replace) {
                for k in o.clone() {
                    out.push(|| line('-', k + 1, old_lines.get(k).copied().unwrap_or("")));
                }
            }
            if matches!(tag, DiffTag::Insert | DiffTag::Replace) {
                for k in n.clone() {
                    out.push(|| line('+', k + 1, new_lines.get(k).copied().unwrap_or("")));
                }
            }
            old_end = o.end;
            new_end = n.end;
        }
    }
    if old_end < old_lines.len() || new_end < new_lines.len() {
        out.push(|| gap.clone());
    }
    out.finish()
}

/// Keeps the first [`MAX_DIFF_LINES`] lines and counts the rest without
/// formatting them.
#[derive(Default)]
struct Capped {
    lines: Vec<String>,
    dropped: usize,
}

impl Capped {
    fn push(&mut self, make: impl FnOnce() -> String) {
        if self.lines.len() < MAX_DIFF_LINES {
            self.lines.push(make());
        } else {
            self.dropped += 1;
        }
    }

    fn finish(mut self) -> String {
        if self.dropped > 0 {
            self.lines.push(format!("… {} more lines", self.dropped));
        }
        self.lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file outside the cwd is labelled from the home it is given (the
    /// settings' HOME), not from the process environment.
    #[test]
    fn a_label_outside_the_cwd_starts_at_the_given_home() {
        let home = tempfile::tempdir().expect("home");
        let cwd = tempfile::tempdir().expect("cwd");
        let file = home.path().join("notes.txt");
        let target = EditTarget {
            path: file.clone(),
            label: file.display().to_string(),
        };
        let mut edits = TurnEdits::new(cwd.path());
        let first = |text: String| text.lines().next().unwrap_or_default().to_string();
        assert_eq!(
            first(edits.render(&target)),
            format!("[agy edit: {}]", file.display())
        );
        edits.set_home(Some(home.path()));
        assert_eq!(first(edits.render(&target)), "[agy edit: ~/notes.txt]");
    }
}
