//! `FAKE_AGY_APPLY_EDITS=1`: the recording's file edits written to disk as
//! agy writes them, so whatever reads the files agy edits (the bridge's ACP
//! `diff` content, pi's diffs) sees a real text before and after. Without
//! the knob fake-agy writes only its databases, as it always did. What a
//! call does to a file's text is the library's rule ([`agy_format::edits`]:
//! `write_to_file`, `replace_file_content`, `multi_replace_file_content`);
//! this module owns when and where it reaches the disk.
//!
//! - When: the replay calls [`Workspace::apply`] for a tool the gate let
//!   through, right before it commits the tool step's DONE state (agy writes
//!   the file, then records that the tool finished), never at its RUNNING
//!   write: a follower sees the file unchanged when the call is announced
//!   and changed once it ended.
//! - Where: agy writes only inside its workspace (its working directory and
//!   the `--add-dir` dirs). A path is resolved before it is judged: its
//!   nearest existing directory canonicalised (symlinks and `..` followed
//!   as the kernel would), the rest plain names, and an existing file that
//!   is a symlink followed to where it leads. Anything outside is refused:
//!   a warning on stderr, nothing written.
//! - agy's edit errors (a TargetContent not in the file or ambiguous, a
//!   file that is not there or not text) leave the file as it is and say
//!   so on stderr; the recorded step is replayed as recorded either way.
//!
//! The call's arguments are the recording's (outside data): nothing here
//! unwraps them.

use agy_format::edits::{Change, FileEdit};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Where this agy may write: its working directory and `--add-dir` dirs,
/// canonical.
#[derive(Debug, Clone)]
pub struct Workspace {
    cwd: PathBuf,
    roots: Vec<PathBuf>,
}

/// What applying one call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Not one of agy's file-writing tools: nothing to do.
    NotAnEdit,
    /// The file now holds the edited text.
    Written(PathBuf),
    /// The path is outside the workspace or cannot be placed: nothing
    /// written.
    Refused { path: String, why: String },
    /// agy's edit error: the file is left as it was.
    Failed { path: String, why: String },
}

impl Applied {
    /// The stderr line for a call that wrote nothing; `None` otherwise.
    pub fn warning(&self, tool: &str) -> Option<String> {
        match self {
            Applied::NotAnEdit | Applied::Written(_) => None,
            Applied::Refused { path, why } => Some(format!(
                "fake-agy: FAKE_AGY_APPLY_EDITS: {tool} not applied: {path} {why}; nothing written"
            )),
            Applied::Failed { path, why } => Some(format!(
                "fake-agy: FAKE_AGY_APPLY_EDITS: {tool} failed as agy's edit would: {why}; {path} left as it was"
            )),
        }
    }
}

impl Workspace {
    /// The workspace of this process: its working directory and `add_dirs`
    /// (relative ones against it). A directory that does not resolve adds
    /// nothing: no file can be inside it.
    pub fn here(add_dirs: &[String]) -> Workspace {
        let cwd = std::env::current_dir()
            .and_then(|d| d.canonicalize())
            .unwrap_or_default();
        let extra: Vec<PathBuf> = add_dirs.iter().map(PathBuf::from).collect();
        Workspace::new(&cwd, &extra)
    }

    /// The workspace rooted at `cwd` (also where relative paths resolve)
    /// with the extra directories `add_dirs`.
    pub fn new(cwd: &Path, add_dirs: &[PathBuf]) -> Workspace {
        let roots = std::iter::once(cwd.to_path_buf())
            .chain(add_dirs.iter().map(|d| cwd.join(d)))
            .filter_map(|d| d.canonicalize().ok())
            .collect();
        Workspace {
            cwd: cwd.to_path_buf(),
            roots,
        }
    }

    /// Apply `tool`'s call with `args` (its JSON arguments) to disk, as agy
    /// would when the tool runs.
    pub fn apply(&self, tool: &str, args: &Value) -> Applied {
        let edit = match FileEdit::parse(tool, args) {
            None => return Applied::NotAnEdit,
            Some(Ok(edit)) => edit,
            Some(Err(why)) => {
                let raw = args.get("TargetFile").and_then(Value::as_str);
                return failed(raw.unwrap_or("(no path)"), &why);
            }
        };
        let path = match self.resolve(&edit.target) {
            Ok(path) => path,
            Err(why) => {
                return Applied::Refused {
                    path: edit.target,
                    why,
                }
            }
        };
        match write(&path, &edit.change) {
            Ok(()) => Applied::Written(path),
            Err(why) => failed(&path.display().to_string(), &why),
        }
    }

    /// Where `raw` (a `TargetFile`) leads, when that is inside the
    /// workspace.
    fn resolve(&self, raw: &str) -> Result<PathBuf, String> {
        let trimmed = raw.trim();
        let text = trimmed.strip_prefix("file://").unwrap_or(trimmed);
        if text.is_empty() {
            return Err("is not a path".into());
        }
        let path = self.cwd.join(text);
        let (Some(parent), Some(Component::Normal(name))) =
            (path.parent(), path.components().next_back())
        else {
            return Err("does not name a file".into());
        };
        let (mut resolved, rest) = existing_ancestor(parent)?;
        resolved.extend(rest);
        resolved.push(name);
        // An existing file that is a symlink is written where it leads.
        let is_link = std::fs::symlink_metadata(&resolved).is_ok_and(|m| m.is_symlink());
        if is_link {
            resolved = resolved
                .canonicalize()
                .map_err(|e| format!("is a symlink that leads nowhere ({e})"))?;
        }
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else {
            Err(format!(
                "resolves to {}, outside the workspace ({})",
                resolved.display(),
                self.roots_text()
            ))
        }
    }

    fn roots_text(&self) -> String {
        if self.roots.is_empty() {
            return "none resolved".into();
        }
        self.roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn failed(path: &str, why: &str) -> Applied {
    Applied::Failed {
        path: path.to_string(),
        why: why.to_string(),
    }
}

/// The nearest existing ancestor of `dir` (itself included), canonical,
/// and the plain names below it that do not exist yet. A `..` or other
/// special component below a missing directory cannot be placed.
fn existing_ancestor(dir: &Path) -> Result<(PathBuf, Vec<OsString>), String> {
    let mut missing = Vec::new();
    let mut at = dir;
    loop {
        if let Ok(canonical) = at.canonicalize() {
            missing.reverse();
            return Ok((canonical, missing));
        }
        match at.components().next_back() {
            Some(Component::Normal(name)) => missing.push(name.to_os_string()),
            _ => return Err(format!("cannot be placed: {} does not exist", at.display())),
        }
        at = at
            .parent()
            .ok_or_else(|| format!("cannot be placed: {} has no parent", at.display()))?;
    }
}

/// Write `change` to `path` (inside the workspace).
fn write(path: &Path, change: &Change) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
    match change {
        Change::Write(text) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
            }
            std::fs::write(path, text).map_err(|e| io("write", e))
        }
        Change::Replace(_) => {
            let before = std::fs::read_to_string(path).map_err(|e| io("read", e))?;
            let after = change.apply(&before)?;
            std::fs::write(path, after).map_err(|e| io("write", e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A workspace in a temp dir, with a file `src/lib.rs`.
    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("ws/src")).expect("mkdir");
        std::fs::write(
            root.join("ws/src/lib.rs"),
            "fn a() {\n    (0..n).sum()\n}\n",
        )
        .expect("write");
        let ws = Workspace::new(&root.join("ws"), &[]);
        (dir, ws)
    }

    fn read(dir: &tempfile::TempDir, rel: &str) -> String {
        std::fs::read_to_string(dir.path().join(rel)).unwrap_or_else(|e| format!("<{e}>"))
    }

    #[test]
    fn a_replacement_changes_the_file_in_place() {
        let (dir, ws) = workspace();
        let file = dir.path().join("ws/src/lib.rs");
        let args = json!({"TargetFile": file, "TargetContent": "    (0..n).sum()", "ReplacementContent": "    (0..=n).sum()", "toolSummary": "x"});
        let applied = ws.apply("replace_file_content", &args);
        assert!(matches!(applied, Applied::Written(_)), "{applied:?}");
        assert_eq!(
            read(&dir, "ws/src/lib.rs"),
            "fn a() {\n    (0..=n).sum()\n}\n"
        );
        // The same edit again: its TargetContent is gone, the file stays.
        let again = ws.apply("replace_file_content", &args);
        assert!(matches!(again, Applied::Failed { .. }), "{again:?}");
        let warning = again.warning("replace_file_content").unwrap_or_default();
        assert!(warning.contains("is not in the file"), "{warning}");
        assert_eq!(
            read(&dir, "ws/src/lib.rs"),
            "fn a() {\n    (0..=n).sum()\n}\n"
        );
    }

    /// What chunks do to text is `agy_format::edits`'s (tested there); here:
    /// a failing chunk leaves the file on disk as it was.
    #[test]
    fn a_failing_chunk_writes_nothing_and_good_ones_write_all() {
        let (dir, ws) = workspace();
        let chunks = |second: &str| {
            json!({"TargetFile": "src/lib.rs", "ReplacementChunks": [
                {"TargetContent": "fn a()", "ReplacementContent": "fn b()", "AllowMultiple": false},
                {"TargetContent": second, "ReplacementContent": "m", "AllowMultiple": true},
            ]})
        };
        let none = ws.apply("multi_replace_file_content", &chunks("missing"));
        assert!(matches!(none, Applied::Failed { .. }), "{none:?}");
        assert_eq!(
            read(&dir, "ws/src/lib.rs"),
            "fn a() {\n    (0..n).sum()\n}\n"
        );
        let both = ws.apply("multi_replace_file_content", &chunks("n"));
        assert!(matches!(both, Applied::Written(_)), "{both:?}");
        assert_eq!(
            read(&dir, "ws/src/lib.rs"),
            "fm b() {\n    (0..m).sum()\n}\n"
        );
        // replace_file_content takes chunks too; a text found more than
        // once ("fm", "0..m", "sum") without AllowMultiple is ambiguous.
        let twice = json!({"TargetFile": "src/lib.rs", "ReplacementChunks": [{"TargetContent": "m", "ReplacementContent": "n"}]});
        let ambiguous = ws.apply("replace_file_content", &twice);
        let warning = ambiguous
            .warning("replace_file_content")
            .unwrap_or_default();
        assert!(warning.contains("3 times"), "{warning}");
    }

    #[test]
    fn a_write_creates_the_file_and_its_directories() {
        let (dir, ws) = workspace();
        let args = json!({"TargetFile": "file://docs/new/notes.md", "CodeContent": "hi\n"});
        let applied = ws.apply("write_to_file", &args);
        assert!(matches!(applied, Applied::Written(_)), "{applied:?}");
        assert_eq!(read(&dir, "ws/docs/new/notes.md"), "hi\n");
        let absolute = dir.path().join("ws/docs/a.md");
        let args = json!({"TargetFile": absolute, "CodeContent": "a\n", "Overwrite": true});
        assert!(matches!(
            ws.apply("write_to_file", &args),
            Applied::Written(_)
        ));
        assert_eq!(read(&dir, "ws/docs/a.md"), "a\n");
        let empty = json!({"TargetFile": absolute, "EmptyFile": true});
        assert!(matches!(
            ws.apply("write_to_file", &empty),
            Applied::Written(_)
        ));
        assert_eq!(read(&dir, "ws/docs/a.md"), "");
        let no_content = json!({"TargetFile": absolute});
        assert!(matches!(
            ws.apply("write_to_file", &no_content),
            Applied::Failed { .. }
        ));
    }

    #[test]
    fn paths_outside_the_workspace_are_refused() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("outside.txt"), "keep\n").expect("write");
        let write = |target: String| {
            ws.apply(
                "write_to_file",
                &json!({"TargetFile": target, "CodeContent": "x"}),
            )
        };
        let root = dir.path().join("ws").display().to_string();
        for escape in [
            format!("{root}/../outside.txt"),
            format!("{root}/src/../../outside.txt"),
            "../outside.txt".to_string(),
            format!("{root}/missing/../../outside.txt"),
            dir.path().join("elsewhere/new.txt").display().to_string(),
            "/".to_string(),
        ] {
            let applied = write(escape.clone());
            assert!(
                matches!(applied, Applied::Refused { .. }),
                "{escape}: {applied:?}"
            );
        }
        assert_eq!(read(&dir, "outside.txt"), "keep\n");
        assert!(!dir.path().join("elsewhere").exists());
        // Inside after `..`: written.
        let inside = write(format!("{root}/src/../src/b.rs"));
        assert!(matches!(inside, Applied::Written(_)), "{inside:?}");
        // No path at all: the call is malformed, nothing is written.
        assert!(matches!(write(String::new()), Applied::Failed { .. }));
        // Not a file tool: nothing at all.
        assert_eq!(
            ws.apply("view_file", &json!({"AbsolutePath": root})),
            Applied::NotAnEdit
        );
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_refused() {
        let (dir, ws) = workspace();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("f.txt"), "keep\n").expect("write");
        let ws_dir = dir.path().join("ws");
        std::os::unix::fs::symlink(&outside, ws_dir.join("out")).expect("dir link");
        std::os::unix::fs::symlink(outside.join("f.txt"), ws_dir.join("f.txt")).expect("file link");
        std::os::unix::fs::symlink(outside.join("gone"), ws_dir.join("dangling")).expect("link");
        for target in ["out/f.txt", "out/new/g.txt", "f.txt", "dangling"] {
            let args = json!({"TargetFile": target, "CodeContent": "x"});
            let applied = ws.apply("write_to_file", &args);
            assert!(
                matches!(applied, Applied::Refused { .. }),
                "{target}: {applied:?}"
            );
        }
        assert_eq!(read(&dir, "outside/f.txt"), "keep\n");
        assert!(!outside.join("new").exists() && !outside.join("gone").exists());
        // A link that stays inside is followed.
        std::os::unix::fs::symlink(ws_dir.join("src/lib.rs"), ws_dir.join("lib.rs")).expect("link");
        let args =
            json!({"TargetFile": "lib.rs", "TargetContent": "fn a", "ReplacementContent": "fn c"});
        assert!(matches!(
            ws.apply("replace_file_content", &args),
            Applied::Written(_)
        ));
        assert!(read(&dir, "ws/src/lib.rs").starts_with("fn c()"));
    }

    #[test]
    fn an_add_dir_is_part_of_the_workspace() {
        let (dir, _) = workspace();
        let extra = dir.path().join("extra");
        std::fs::create_dir_all(&extra).expect("mkdir");
        let ws = Workspace::new(&dir.path().join("ws"), &[PathBuf::from("../extra")]);
        let args = json!({"TargetFile": extra.join("e.txt"), "CodeContent": "e"});
        assert!(matches!(
            ws.apply("write_to_file", &args),
            Applied::Written(_)
        ));
        assert_eq!(read(&dir, "extra/e.txt"), "e");
    }
}
