//! `FAKE_AGY_APPLY_EDITS`: fake-agy writes the recording's file edit as agy
//! would, at the moment the tool's DONE state is committed (never at its
//! RUNNING write), only for a tool that ran, and only inside its
//! workspace. Replays the `tools` recording built for a temporary
//! workspace (`agy_synth::tools_in`), whose `replace_file_content` (step 9)
//! makes `(0..n)` in `src/lib.rs` `(0..=n)`. The crash knob stops a run
//! right after a given commit, so what is on disk then is checked without
//! any timing.

#![forbid(unsafe_code)]

mod common;

use agy_corpus::recording::{ApplyOptions, Recording};
use agy_format::hooks::Decision;
use agy_format::steps::StepStatus;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The edited line before and after.
const BEFORE: &str = "    (0..n).sum()";
const AFTER: &str = "    (0..=n).sum()";

/// The recording's edit step.
const EDIT_IDX: i64 = 9;

/// A temporary HOME with the workspace `work/` (holding `src/lib.rs` as
/// the recording's view_file shows it) and the `tools` recording made
/// for that workspace.
struct Setup {
    home: tempfile::TempDir,
    rec: Recording,
}

impl Setup {
    fn new() -> Setup {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(home.path().join("work/src")).expect("mkdir");
        std::fs::write(home.path().join("work/src/lib.rs"), agy_synth::TOOLS_LIB_RS)
            .expect("lib.rs");
        let ws = home.path().join("work");
        let rec = agy_synth::tools_in(&ws.display().to_string());
        rec.save(&home.path().join("tools.jsonl")).expect("save");
        Setup { home, rec }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }

    fn lib_rs(&self) -> String {
        std::fs::read_to_string(self.path("work/src/lib.rs")).expect("lib.rs")
    }

    /// fake-agy in `cwd` with the edits applied, printing stream-json.
    fn command(&self, cwd: &Path, extra: &[&str]) -> Command {
        let mut cmd = common::fake_agy();
        cmd.current_dir(cwd)
            .env("HOME", self.home.path())
            .env("FAKE_AGY_RECORDING", self.path("tools.jsonl"))
            .env("FAKE_AGY_SPEED", "50")
            .env("FAKE_AGY_APPLY_EDITS", "1")
            .env("FAKE_AGY_TOOL_LOG", self.path("tools.log"))
            .args(["-p", "go", "--output-format", "stream-json"])
            .args(extra)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, mut cmd: Command) -> Output {
        cmd.output().expect("run fake-agy")
    }

    /// The 1-based commit number (as `FAKE_AGY_CRASH_AT_COMMIT` counts)
    /// that writes the edit step with `status`.
    fn commit_of_edit(&self, status: StepStatus) -> usize {
        let writes = |c: &agy_corpus::recording::Commit| {
            c.writes.iter().any(|w| {
                let row = agy_corpus::db::step_row(&w.key, &w.values);
                w.table == "steps" && row.idx == EDIT_IDX && row.status == status.raw()
            })
        };
        self.rec
            .effective_commits(&ApplyOptions::default())
            .position(|(_, c)| writes(c))
            .map(|p| p + 1)
            .expect("the recording writes the edit step")
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_edit_lands_with_its_done_state_and_not_at_its_running_write() {
    let s = Setup::new();
    let running = s.commit_of_edit(StepStatus::Running);
    let done = s.commit_of_edit(StepStatus::Done);
    assert!(running < done, "{running} {done}");
    let work = s.path("work");
    // Stopped right after the commit before DONE (RUNNING and after): as it was.
    let mut cmd = s.command(&work, &[]);
    cmd.env("FAKE_AGY_CRASH_AT_COMMIT", (done - 1).to_string());
    let o = s.run(cmd);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS);
    // Stopped right after DONE: edited, nothing else in the file changed.
    let mut cmd = s.command(&work, &[]);
    cmd.env("FAKE_AGY_CRASH_AT_COMMIT", done.to_string());
    let o = s.run(cmd);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS.replace(BEFORE, AFTER));
}

#[test]
fn a_whole_run_edits_once_and_a_rerun_is_agys_edit_error() {
    let s = Setup::new();
    let work = s.path("work");
    let o = s.run(s.command(&work, &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS.replace(BEFORE, AFTER));
    assert!(
        !stderr(&o).contains("FAKE_AGY_APPLY_EDITS"),
        "{}",
        stderr(&o)
    );
    // The same edit again: its TargetContent is gone; said, file kept, the
    // recording replayed as recorded.
    let o = s.run(s.command(&work, &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("replace_file_content failed") && err.contains("is not in the file"),
        "{err}"
    );
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS.replace(BEFORE, AFTER));
    // Without the knob nothing is written.
    std::fs::write(s.path("work/src/lib.rs"), agy_synth::TOOLS_LIB_RS).expect("reset");
    let mut cmd = s.command(&work, &[]);
    cmd.env_remove("FAKE_AGY_APPLY_EDITS");
    assert!(s.run(cmd).status.success());
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS);
}

#[test]
fn an_edit_outside_the_workspace_is_refused_unless_an_add_dir_holds_it() {
    let s = Setup::new();
    let elsewhere = s.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let o = s.run(s.command(&elsewhere, &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("outside the workspace") && err.contains("nothing written"),
        "{err}"
    );
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS);
    let work = s.path("work").display().to_string();
    let o = s.run(s.command(&elsewhere, &["--add-dir", &work]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS.replace(BEFORE, AFTER));
}

#[test]
fn a_tool_a_hook_denies_writes_nothing() {
    let s = Setup::new();
    let agents = s.path("hooks/.agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    let deny = Decision::deny("no edits here").to_json();
    let file = serde_json::json!({"test": {"PreToolUse": [{"matcher": "replace_file_content",
        "hooks": [{"type": "command", "command": format!("cat >/dev/null; echo '{deny}'"), "timeout": 10}]}]}});
    std::fs::write(agents.join("hooks.json"), file.to_string()).expect("hooks.json");
    let hooks = s.path("hooks").display().to_string();
    let work = s.path("work");
    let args = ["--dangerously-skip-permissions", "--add-dir", &hooks];
    let o = s.run(s.command(&work, &args));
    assert!(o.status.success(), "{}", stderr(&o));
    let ran = std::fs::read_to_string(s.path("tools.log")).unwrap_or_default();
    assert!(
        ran.contains("run_command") && !ran.contains("replace_file_content"),
        "{ran}"
    );
    assert_eq!(s.lib_rs(), agy_synth::TOOLS_LIB_RS);
}
