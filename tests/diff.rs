//! Edits as diffs (issue 4 §6): recognising an edit from tool arguments and
//! rendering it against the turn's earlier content or git HEAD, in real
//! temporary git repositories.

use agy_bridge::follow::edits::EditTarget;
use agy_bridge::pi::diff::TurnEdits;
use agy_bridge::pi::testing::{before_edit, edit_target, numbered_diff, MAX_DIFF_LINES};
use proptest::prelude::*;
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=t",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} failed");
}

/// A repository whose HEAD holds `files`.
fn repo(files: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    git(dir.path(), &["init", "-q"]);
    for (name, content) in files {
        write(&dir.path().join(name), content.as_bytes());
    }
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    dir
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, bytes).expect("write");
}

/// The edit agy would announce for `path`, as replace_file_content does.
fn edit(path: &Path, summary: &str) -> EditTarget {
    let args = json!({
        "TargetFile": path,
        "ReplacementContent": "x",
        "TargetContent": "y",
        "toolAction": "Editing",
        "toolSummary": summary,
    });
    edit_target("replace_file_content", &args.to_string()).expect("an edit")
}

fn numbered(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

// --- recognition -----------------------------------------------------------

#[test]
fn recognises_edits_by_their_keys() {
    let edits = [
        (
            "replace_file_content",
            json!({"TargetFile": "/ws/src/lib.rs", "ReplacementContent": "    (0..=n).sum()", "TargetContent": "    (0..n).sum()", "toolAction": "Editing", "toolSummary": "include n in the range"}),
        ),
        (
            "write_to_file",
            json!({"TargetFile": "/ws/src/lib.rs", "CodeContent": "fn main() {}\n", "Overwrite": true, "EmptyFile": false}),
        ),
        (
            "write_to_file",
            json!({"TargetFile": "/ws/src/lib.rs", "CodeContent": "", "EmptyFile": true}),
        ),
        (
            "multi_replace_file_content",
            json!({"TargetFile": "/ws/src/lib.rs", "ReplacementChunks": [{"TargetContent": "a", "ReplacementContent": "b", "AllowMultiple": false}]}),
        ),
        (
            "edit",
            json!({"file_path": "/ws/src/lib.rs", "old_string": "a", "new_string": "b"}),
        ),
        (
            "edit",
            json!({"path": "/ws/src/lib.rs", "oldText": "a", "newText": "b"}),
        ),
        (
            "edit",
            json!({"path": "/ws/src/lib.rs", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        ("write", json!({"path": "/ws/src/lib.rs", "content": "b"})),
        (
            "create_file",
            json!({"filePath": "/ws/src/lib.rs", "fileContent": "b"}),
        ),
        (
            "apply",
            json!({"AbsolutePath": "/ws/src/lib.rs", "code": "b"}),
        ),
    ];
    for (name, args) in &edits {
        let got = edit_target(name, &args.to_string());
        let got = got.unwrap_or_else(|| panic!("{name} {args} is an edit"));
        assert_eq!(got.path, PathBuf::from("/ws/src/lib.rs"), "{name} {args}");
    }

    let not_edits = [
        (
            "view_file",
            json!({"AbsolutePath": "/ws/src/lib.rs", "StartLine": 1, "EndLine": 20, "toolAction": "Viewing", "toolSummary": "src/lib.rs"}),
        ),
        (
            "view_file",
            json!({"AbsolutePath": "/ws/src/lib.rs", "IncludeContent": "yes"}),
        ),
        (
            "grep_search",
            json!({"Query": "sum_to", "SearchPath": "/ws", "Includes": ["*.rs"], "toolAction": "Searching"}),
        ),
        (
            "run_command",
            json!({"CommandLine": "cargo test", "Cwd": "/ws", "toolAction": "Running"}),
        ),
        ("list_dir", json!({"DirectoryPath": "/ws"})),
        (
            "view_code_item",
            json!({"File": "/ws/src/lib.rs", "NodePaths": ["sum_to"]}),
        ),
        // Keys alone decide; values must be of the right kind.
        (
            "write_to_file",
            json!({"TargetFile": 3, "CodeContent": "x"}),
        ),
        (
            "write_to_file",
            json!({"TargetFile": "  ", "CodeContent": "x"}),
        ),
        (
            "write_to_file",
            json!({"TargetFile": "/ws/a", "CodeContent": null}),
        ),
        (
            "write_to_file",
            json!({"TargetFile": "/ws/a", "IsCode": true}),
        ),
        ("write_to_file", json!({"ContentPath": "/ws/a"})),
        ("write_to_file", json!({"CodeContent": "x"})),
    ];
    for (name, args) in &not_edits {
        assert_eq!(edit_target(name, &args.to_string()), None, "{name} {args}");
    }
    for garbage in [
        "",
        "{",
        "null",
        "[]",
        "\"TargetFile\"",
        "{\"TargetFile\": }",
    ] {
        assert_eq!(edit_target("write_to_file", garbage), None, "{garbage:?}");
    }
}

#[test]
fn label_is_the_path_and_a_short_summary() {
    let target = edit(Path::new("/ws/src/lib.rs"), "include n in the range");
    assert_eq!(target.label, "/ws/src/lib.rs (include n in the range)");

    // A summary that only repeats the file adds nothing.
    let args = json!({"TargetFile": "/ws/src/lib.rs", "CodeContent": "x", "toolSummary": "lib.rs"});
    let target = edit_target("write_to_file", &args.to_string()).expect("edit");
    assert_eq!(target.label, "/ws/src/lib.rs");

    // Long and multi-line summaries are cut to one short line.
    let long = format!("{}\nsecond line", "word ".repeat(30));
    let target = edit(Path::new("/ws/a.rs"), &long);
    let summary = target
        .label
        .strip_prefix("/ws/a.rs (")
        .and_then(|s| s.strip_suffix("…)"))
        .expect("shortened summary");
    assert!(summary.chars().count() <= 60, "{summary:?}");
    assert!(!target.label.contains('\n'));

    // No toolSummary: Description stands in.
    let args = json!({"TargetFile": "/ws/a.rs", "CodeContent": "x", "Description": "rewrite a"});
    let target = edit_target("write_to_file", &args.to_string()).expect("edit");
    assert_eq!(target.label, "/ws/a.rs (rewrite a)");
}

// --- rendering -------------------------------------------------------------

#[test]
fn modified_tracked_file_diffs_against_head() {
    let ws = repo(&[("notes.txt", &numbered(1..11))]);
    let path = ws.path().join("notes.txt");
    let target = edit(&path, "tweak line six");
    let mut turn = TurnEdits::new(ws.path());
    before_edit(&mut turn, &target.path);
    write(
        &path,
        numbered(1..11).replace("line 6\n", "LINE SIX\n").as_bytes(),
    );

    let expected = "\
[agy edit: notes.txt (tweak line six)]
    ...
  3 line 3
  4 line 4
  5 line 5
- 6 line 6
+ 6 LINE SIX
  7 line 7
  8 line 8
  9 line 9
    ...
";
    assert_eq!(turn.render(&target), expected);
}

#[test]
fn insertions_number_context_as_in_the_new_file() {
    let ws = repo(&[("src/lib.rs", "a\nb\nc\n")]);
    let path = ws.path().join("src/lib.rs");
    write(&path, b"a\nX\nY\nc\n");
    let mut turn = TurnEdits::new(ws.path());
    let expected = "\
[agy edit: src/lib.rs (s)]
 1 a
-2 b
+2 X
+3 Y
 4 c
";
    assert_eq!(turn.render(&edit(&path, "s")), expected);
}

#[test]
fn second_edit_in_a_turn_diffs_against_the_first_result() {
    let ws = repo(&[("f.txt", "one\ntwo\nthree\n")]);
    let path = ws.path().join("f.txt");
    let target = edit(&path, "s");
    let mut turn = TurnEdits::new(ws.path());

    before_edit(&mut turn, &target.path);
    write(&path, b"one\nTWO\nthree\n");
    assert_eq!(
        turn.render(&target),
        "[agy edit: f.txt (s)]\n 1 one\n-2 two\n+2 TWO\n 3 three\n"
    );

    before_edit(&mut turn, &target.path);
    write(&path, b"one\nTWO\nTHREE\n");
    assert_eq!(
        turn.render(&target),
        "[agy edit: f.txt (s)]\n 1 one\n 2 TWO\n-3 three\n+3 THREE\n"
    );

    // Without before_edit (the call was seen late) the last render is the
    // baseline, still not HEAD.
    write(&path, b"ONE\nTWO\nTHREE\n");
    assert_eq!(
        turn.render(&target),
        "[agy edit: f.txt (s)]\n-1 one\n+1 ONE\n 2 TWO\n 3 THREE\n"
    );

    // A new turn starts from HEAD again.
    let mut next = TurnEdits::new(ws.path());
    assert_eq!(
        next.render(&target),
        "[agy edit: f.txt (s)]\n-1 one\n-2 two\n-3 three\n+1 ONE\n+2 TWO\n+3 THREE\n"
    );
}

#[test]
fn snapshot_taken_after_the_write_falls_back_to_head() {
    let ws = repo(&[("f.txt", "old\n")]);
    let path = ws.path().join("f.txt");
    let target = edit(&path, "s");
    let mut turn = TurnEdits::new(ws.path());
    write(&path, b"new\n");
    before_edit(&mut turn, &target.path); // too late: agy already wrote
    assert_eq!(
        turn.render(&target),
        "[agy edit: f.txt (s)]\n-1 old\n+1 new\n"
    );
}

#[test]
fn new_untracked_file_diffs_against_empty() {
    let ws = repo(&[("keep.txt", "k\n")]);
    let path = ws.path().join("src/new.rs");
    write(&path, b"fn a() {}\n\nfn b() {}\n");
    let mut turn = TurnEdits::new(ws.path());
    assert_eq!(
        turn.render(&edit(&path, "add module")),
        "[agy edit: src/new.rs (add module)]\n+1 fn a() {}\n+2\n+3 fn b() {}\n"
    );

    // A repo with no commit yet: everything is new.
    let fresh = TempDir::new().expect("tempdir");
    git(fresh.path(), &["init", "-q"]);
    let path = fresh.path().join("a.txt");
    write(&path, b"hello\n");
    let mut turn = TurnEdits::new(fresh.path());
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: a.txt (s)]\n+1 hello\n"
    );
}

#[test]
fn relative_target_paths_resolve_against_cwd() {
    let ws = repo(&[("src/a.txt", "a\n")]);
    write(&ws.path().join("src/a.txt"), b"b\n");
    let args = json!({"TargetFile": "./src/../src/a.txt", "CodeContent": "b\n"});
    let target = edit_target("write_to_file", &args.to_string()).expect("edit");
    let mut turn = TurnEdits::new(ws.path());
    assert_eq!(turn.render(&target), "[agy edit: src/a.txt]\n-1 a\n+1 b\n");
}

#[test]
fn long_diffs_are_capped_with_an_exact_count() {
    let ws = repo(&[]);
    let path = ws.path().join("big.txt");
    write(&path, numbered(1..151).as_bytes());
    let mut turn = TurnEdits::new(ws.path());
    let out = turn.render(&edit(&path, "s"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + MAX_DIFF_LINES + 1, "{out}");
    assert_eq!(lines[0], "[agy edit: big.txt (s)]");
    assert_eq!(lines[1], "+  1 line 1");
    assert_eq!(lines[100], "+100 line 100");
    assert_eq!(lines[101], "… 50 more lines");
    assert!(out.ends_with("… 50 more lines\n"));

    // Exactly at the cap: no marker.
    let path = ws.path().join("hundred.txt");
    write(&path, numbered(1..101).as_bytes());
    let out = turn.render(&edit(&path, "s"));
    assert_eq!(out.lines().count(), 1 + MAX_DIFF_LINES);
    assert!(!out.contains("more lines"));
}

#[test]
fn binary_files_get_a_note() {
    let ws = repo(&[("img.bin", "text\n")]);
    let mut turn = TurnEdits::new(ws.path());

    let path = ws.path().join("img.bin");
    write(&path, b"\x89PNG\0\0\x01");
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: img.bin (s)]\n(binary file; no diff)\n"
    );

    let path = ws.path().join("latin1.txt");
    write(&path, b"caf\xe9\n");
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: latin1.txt (s)]\n(binary file; no diff)\n"
    );

    // Binary at HEAD, text now.
    let ws = repo(&[]);
    let path = ws.path().join("was.bin");
    write(&path, b"a\0b");
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-q", "-m", "bin"]);
    write(&path, b"text now\n");
    let mut turn = TurnEdits::new(ws.path());
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: was.bin (s)]\n(binary file; no diff)\n"
    );
}

#[test]
fn files_outside_the_repo_get_a_note() {
    let ws = repo(&[("a.txt", "a\n")]);
    let elsewhere = TempDir::new().expect("tempdir");
    let path = elsewhere.path().join("task.md");
    write(&path, b"# plan\n");
    let target = edit(&path, "s");
    let mut turn = TurnEdits::new(ws.path());
    before_edit(&mut turn, &target.path);
    let out = turn.render(&target);
    assert_eq!(
        out,
        format!(
            "[agy edit: {} (s)]\n(outside the git repo; no diff)\n",
            path.display()
        )
    );

    // Climbing out with `..` is outside too.
    let args = json!({"TargetFile": "../x.txt", "CodeContent": "x"});
    let target = edit_target("write_to_file", &args.to_string()).expect("edit");
    assert!(turn
        .render(&target)
        .ends_with("\n(outside the git repo; no diff)\n"));

    // A cwd that is not a repo: outside the working directory.
    let plain = TempDir::new().expect("tempdir");
    let mut turn = TurnEdits::new(plain.path());
    assert!(turn
        .render(&edit(&path, "s"))
        .ends_with("\n(outside the working directory; no diff)\n"));

    // cwd in a subdirectory of the repo: the rest of the repo is fine.
    let ws = repo(&[("app/main.rs", "a\n"), ("lib/x.rs", "x\n")]);
    write(&ws.path().join("lib/x.rs"), b"y\n");
    let mut turn = TurnEdits::new(&ws.path().join("app"));
    let out = turn.render(&edit(&ws.path().join("lib/x.rs"), "s"));
    assert!(out.ends_with("\n-1 x\n+1 y\n"), "{out}");
}

#[test]
fn directories_that_are_not_repos_get_a_note() {
    let plain = TempDir::new().expect("tempdir");
    let path = plain.path().join("notes.txt");
    write(&path, b"hello\n");
    let mut turn = TurnEdits::new(plain.path());
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: notes.txt (s)]\n(not in a git repo; no diff)\n"
    );

    // What this turn saw earlier still gives a diff without git.
    before_edit(&mut turn, &path);
    write(&path, b"hello\nworld\n");
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: notes.txt (s)]\n 1 hello\n+2 world\n"
    );

    // An edit that changed nothing, with no repo to ask: no change.
    before_edit(&mut turn, &path);
    assert_eq!(
        turn.render(&edit(&path, "s")),
        "[agy edit: notes.txt (s)]\n(no change)\n"
    );

    // So does a snapshot taken before the edit.
    let other = plain.path().join("other.txt");
    write(&other, b"1\n");
    before_edit(&mut turn, &other);
    write(&other, b"2\n");
    assert_eq!(
        turn.render(&edit(&other, "s")),
        "[agy edit: other.txt (s)]\n-1 1\n+1 2\n"
    );
}

#[test]
fn deleted_and_unchanged_files_get_a_note() {
    let ws = repo(&[("gone.txt", "bye\n"), ("same.txt", "same\n")]);
    let mut turn = TurnEdits::new(ws.path());

    let gone = ws.path().join("gone.txt");
    before_edit(&mut turn, &gone);
    fs::remove_file(&gone).expect("rm");
    assert_eq!(
        turn.render(&edit(&gone, "s")),
        "[agy edit: gone.txt (s)]\n(file deleted)\n"
    );

    let same = ws.path().join("same.txt");
    before_edit(&mut turn, &same);
    assert_eq!(
        turn.render(&edit(&same, "s")),
        "[agy edit: same.txt (s)]\n(no change)\n"
    );

    // Only the final newline changed.
    write(&same, b"same");
    assert_eq!(
        turn.render(&edit(&same, "s")),
        "[agy edit: same.txt (s)]\n(only line endings or the final newline changed)\n"
    );

    // A path naming a directory.
    let dir = ws.path().join("sub");
    fs::create_dir_all(&dir).expect("mkdir");
    assert_eq!(
        turn.render(&edit(&dir, "s")),
        "[agy edit: sub (s)]\n(a directory, not a file; no diff)\n"
    );
}

// --- the diff itself -------------------------------------------------------

#[test]
fn numbered_diff_marks_gaps_between_hunks() {
    let old = numbered(1..21);
    let new = old
        .replace("line 2\n", "line two\n")
        .replace("line 18\n", "line eighteen\n");
    let expected = [
        "  1 line 1",
        "- 2 line 2",
        "+ 2 line two",
        "  3 line 3",
        "  4 line 4",
        "  5 line 5",
        "    ...",
        " 15 line 15",
        " 16 line 16",
        " 17 line 17",
        "-18 line 18",
        "+18 line eighteen",
        " 19 line 19",
        " 20 line 20",
    ]
    .join("\n");
    assert_eq!(numbered_diff(&old, &new), expected);
    assert_eq!(numbered_diff("a\n", "a\n"), "(no change)");
    assert_eq!(
        numbered_diff("a\r\nb\r\n", "a\nb\n"),
        "(only line endings or the final newline changed)"
    );
}

#[test]
fn numbered_diff_shortens_very_long_lines() {
    let long = "x".repeat(10_000);
    let out = numbered_diff("", &long);
    assert!(out.starts_with("+1 xxx"));
    assert!(out.ends_with('…'));
    assert!(out.chars().count() < 300, "{}", out.len());
}

proptest! {
    #[test]
    fn numbered_diff_never_panics_and_respects_the_cap(
        old in proptest::collection::vec("[ab\r\n]{0,3}", 0..150),
        new in proptest::collection::vec("[ab\r\n]{0,3}", 0..150),
    ) {
        let out = numbered_diff(&old.concat(), &new.concat());
        prop_assert!(out.lines().count() <= MAX_DIFF_LINES + 1);
    }

    #[test]
    fn edit_target_never_panics(name in ".{0,20}", args in ".{0,200}") {
        let _ = edit_target(&name, &args);
    }
}
