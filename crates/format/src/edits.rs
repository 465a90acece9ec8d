//! agy's file-writing tools as data: which calls write a file, what they
//! ask for, and what that does to a file's text. One rule for both sides:
//! fake-agy applies a recording's edit to disk with it
//! (`FAKE_AGY_APPLY_EDITS`), and the bridge undoes an edit it saw only
//! after agy wrote it, to recover the text before (ACP's `diff` content).
//! No I/O.
//!
//! - `write_to_file {TargetFile, CodeContent}` writes the whole file
//!   (`EmptyFile: true` without CodeContent: an empty one).
//! - `replace_file_content {TargetFile, TargetContent, ReplacementContent}`,
//!   or with `ReplacementChunks`, and `multi_replace_file_content
//!   {TargetFile, ReplacementChunks: [{TargetContent, ReplacementContent}]}`
//!   replace text: a chunk's TargetContent must be in the file exactly
//!   once, or, with `AllowMultiple: true`, is replaced everywhere it is.
//!   Chunks apply in order, all or none; a TargetContent that is not there
//!   (or is ambiguous) is agy's edit error and the file is left as it was.
//!   `StartLine`/`EndLine` do not narrow the search here.
//!
//! Arguments are agy's (outside data): nothing here unwraps them.

use serde_json::{Map, Value};

/// The tools that write a file, by agy's name.
pub const FILE_TOOLS: &[&str] = &[
    "write_to_file",
    "replace_file_content",
    "multi_replace_file_content",
];

/// Whether `tool` is one of agy's file-writing tools.
pub fn writes_files(tool: &str) -> bool {
    FILE_TOOLS.contains(&tool)
}

/// One file-writing call: the file, as agy named it, and the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// `TargetFile` as written (normally absolute; may be a `file://` URI).
    pub target: String,
    pub change: Change,
}

/// What a call does to its file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The whole file (created when missing).
    Write(String),
    /// Replacements in the existing text, in order.
    Replace(Vec<Chunk>),
}

/// One replacement: `target` (exactly as in the file) becomes
/// `replacement`, once or, with `all`, everywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub target: String,
    pub replacement: String,
    pub all: bool,
}

impl FileEdit {
    /// The edit `tool` makes with `args` (its JSON arguments). `None`: not
    /// a file-writing tool; `Some(Err)`: one, but its arguments say no
    /// edit (the sentence says what is missing).
    pub fn parse(tool: &str, args: &Value) -> Option<Result<FileEdit, String>> {
        if !writes_files(tool) {
            return None;
        }
        let Some(args) = args.as_object() else {
            return Some(Err("its arguments are not an object".into()));
        };
        let target = match args.get("TargetFile").and_then(Value::as_str) {
            Some(t) if !t.trim().is_empty() => t.to_string(),
            _ => return Some(Err("the call has no TargetFile".into())),
        };
        Some(change_of(tool, args).map(|change| FileEdit { target, change }))
    }
}

/// What `tool`'s arguments ask for; `Err` says what is missing.
fn change_of(tool: &str, args: &Map<String, Value>) -> Result<Change, String> {
    if tool == "write_to_file" {
        let empty = args.get("EmptyFile").and_then(Value::as_bool) == Some(true);
        return match args.get("CodeContent").and_then(Value::as_str) {
            Some(code) => Ok(Change::Write(code.to_string())),
            None if empty => Ok(Change::Write(String::new())),
            None => Err("the call has no CodeContent".into()),
        };
    }
    let chunks = match args.get("ReplacementChunks") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_object().and_then(chunk_of))
            .collect::<Option<Vec<_>>>()
            .ok_or("a ReplacementChunks item lacks TargetContent or ReplacementContent")?,
        Some(_) => return Err("ReplacementChunks is not a list".into()),
        None if tool == "replace_file_content" => {
            vec![chunk_of(args).ok_or("the call lacks TargetContent or ReplacementContent")?]
        }
        None => return Err("the call has no ReplacementChunks".into()),
    };
    if chunks.is_empty() {
        return Err("ReplacementChunks is empty".into());
    }
    Ok(Change::Replace(chunks))
}

fn chunk_of(item: &Map<String, Value>) -> Option<Chunk> {
    Some(Chunk {
        target: item.get("TargetContent")?.as_str()?.to_string(),
        replacement: item.get("ReplacementContent")?.as_str()?.to_string(),
        all: item.get("AllowMultiple").and_then(Value::as_bool) == Some(true),
    })
}

impl Change {
    /// The file's text after the change, given its text `before` (ignored
    /// by a whole-file write); `Err` is agy's edit error.
    pub fn apply(&self, before: &str) -> Result<String, String> {
        let chunks = match self {
            Change::Write(text) => return Ok(text.clone()),
            Change::Replace(chunks) => chunks,
        };
        let mut out = before.to_string();
        for (n, chunk) in chunks.iter().enumerate() {
            let which = match chunks.len() {
                1 => String::new(),
                _ => format!(" (chunk {})", n + 1),
            };
            if chunk.target.is_empty() {
                return Err(format!("TargetContent{which} is empty"));
            }
            out = match out.matches(chunk.target.as_str()).count() {
                0 => {
                    return Err(format!(
                        "TargetContent{which} {:?} is not in the file",
                        chunk.target
                    ))
                }
                1 => out.replacen(&chunk.target, &chunk.replacement, 1),
                _ if chunk.all => out.replace(&chunk.target, &chunk.replacement),
                many => {
                    return Err(format!(
                        "TargetContent{which} {:?} is in the file {many} times and AllowMultiple is not set",
                        chunk.target
                    ))
                }
            };
        }
        Ok(out)
    }

    /// The one text this change turns into `after`, when `after` proves
    /// it: each chunk (last first) replaced once, its replacement found
    /// exactly once (so where it went is known), and the change applied to
    /// the result giving `after` again. `None` otherwise: a whole-file
    /// write (what it replaced is not in its arguments), a chunk with
    /// `AllowMultiple`, an empty or repeated replacement.
    pub fn undo(&self, after: &str) -> Option<String> {
        let Change::Replace(chunks) = self else {
            return None;
        };
        let mut text = after.to_string();
        for chunk in chunks.iter().rev() {
            if chunk.all
                || chunk.replacement.is_empty()
                || text.matches(chunk.replacement.as_str()).count() != 1
            {
                return None;
            }
            text = text.replacen(&chunk.replacement, &chunk.target, 1);
        }
        (self.apply(&text).ok()? == after).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIB: &str = "fn a() {\n    (0..n).sum()\n}\n";

    fn change(tool: &str, args: Value) -> Change {
        match FileEdit::parse(tool, &args) {
            Some(Ok(edit)) => edit.change,
            other => panic!("{tool} {args}: {other:?}"),
        }
    }

    #[test]
    fn agys_three_file_tools_parse_and_others_are_not_edits() {
        let replace = json!({"TargetFile": "/w/src/lib.rs", "TargetContent": "a", "ReplacementContent": "b", "toolSummary": "x"});
        let parsed = FileEdit::parse("replace_file_content", &replace);
        assert_eq!(
            parsed,
            Some(Ok(FileEdit {
                target: "/w/src/lib.rs".into(),
                change: Change::Replace(vec![Chunk {
                    target: "a".into(),
                    replacement: "b".into(),
                    all: false
                }]),
            }))
        );
        let write = json!({"TargetFile": "notes.md", "EmptyFile": true});
        assert_eq!(change("write_to_file", write), Change::Write(String::new()));
        let multi = json!({"TargetFile": "a", "ReplacementChunks": [{"TargetContent": "x", "ReplacementContent": "y", "AllowMultiple": true}]});
        assert!(
            matches!(change("multi_replace_file_content", multi), Change::Replace(c) if c[0].all)
        );
        assert_eq!(
            FileEdit::parse("view_file", &json!({"AbsolutePath": "/w"})),
            None
        );
        for (tool, args) in [
            ("write_to_file", json!({"TargetFile": "a"})),
            ("write_to_file", json!({"CodeContent": "a"})),
            (
                "write_to_file",
                json!({"TargetFile": " ", "CodeContent": "a"}),
            ),
            (
                "replace_file_content",
                json!({"TargetFile": "a", "TargetContent": "x"}),
            ),
            (
                "multi_replace_file_content",
                json!({"TargetFile": "a", "TargetContent": "x", "ReplacementContent": "y"}),
            ),
            (
                "multi_replace_file_content",
                json!({"TargetFile": "a", "ReplacementChunks": []}),
            ),
            (
                "multi_replace_file_content",
                json!({"TargetFile": "a", "ReplacementChunks": [{"TargetContent": 1, "ReplacementContent": "y"}]}),
            ),
            ("replace_file_content", json!("not an object")),
        ] {
            assert!(
                matches!(FileEdit::parse(tool, &args), Some(Err(_))),
                "{tool} {args}"
            );
        }
    }

    #[test]
    fn chunks_apply_in_order_all_or_none() {
        let chunk = |t: &str, r: &str, all: bool| Chunk {
            target: t.into(),
            replacement: r.into(),
            all,
        };
        let fix = Change::Replace(vec![
            chunk("fn a()", "fn b()", false),
            chunk("n", "m", true),
        ]);
        assert_eq!(
            fix.apply(LIB).as_deref(),
            Ok("fm b() {\n    (0..m).sum()\n}\n")
        );
        let missing = Change::Replace(vec![
            chunk("fn a()", "fn b()", false),
            chunk("zz", "m", true),
        ]);
        let err = missing.apply(LIB).unwrap_err();
        assert!(
            err.contains("(chunk 2)") && err.contains("is not in the file"),
            "{err}"
        );
        // "fn", "0..n": twice, without AllowMultiple.
        let ambiguous = Change::Replace(vec![chunk("n", "m", false)]);
        assert!(ambiguous.apply(LIB).unwrap_err().contains("2 times"));
        assert!(Change::Replace(vec![chunk("", "m", false)])
            .apply(LIB)
            .is_err());
        assert_eq!(Change::Write("x".into()).apply(LIB).as_deref(), Ok("x"));
    }

    #[test]
    fn an_edit_is_undone_only_where_the_text_after_proves_the_text_before() {
        let chunk = |t: &str, r: &str, all: bool| Chunk {
            target: t.into(),
            replacement: r.into(),
            all,
        };
        let fix = Change::Replace(vec![chunk("    (0..n).sum()", "    (0..=n).sum()", false)]);
        let after = fix.apply(LIB).expect("applies");
        assert_eq!(fix.undo(&after).as_deref(), Some(LIB));
        let two = Change::Replace(vec![
            chunk("fn a()", "fn b()", false),
            chunk("(0..n)", "(1..=n)", false),
        ]);
        let after = two.apply(LIB).expect("applies");
        assert_eq!(two.undo(&after).as_deref(), Some(LIB));
        // Not provable: the replacement is there twice, is empty, replaced
        // everywhere, or a whole-file write.
        let twice = Change::Replace(vec![chunk("a", "n", false)]);
        assert_eq!(twice.undo(LIB), None);
        assert_eq!(Change::Replace(vec![chunk("x", "", false)]).undo(LIB), None);
        assert_eq!(Change::Replace(vec![chunk("n", "q", true)]).undo("q"), None);
        assert_eq!(Change::Write(LIB.into()).undo(LIB), None);
        // A text the change cannot have made: undone, it does not apply
        // back to the same text (the target was already there).
        let made = Change::Replace(vec![chunk("x", "y", false)]);
        assert_eq!(made.undo("x y"), None);
    }
}
