//! agy's lifecycle hooks as fake-agy runs them (docs/agy-format.md,
//! "Hooks"). Everything about the data (hooks.json, the payload a hook
//! reads, the decision it prints, the `/hooks` listing) is the library's
//! [`agy_format::hooks`], which the bridge uses too; this module only
//! finds the files and runs the commands.
//!
//! - Each `--add-dir` dir's `.agents/hooks.json` is loaded (agy 1.2.7 and
//!   1.2.14 load it). A file that does not parse is named in a warning on
//!   stderr and ignored. `FAKE_AGY_IGNORE_HOOKS=1` is an agy that does not
//!   load hooks from `--add-dir` at all (nothing runs, `/hooks` lists none).
//! - A `PreToolUse` hook runs as `sh -c COMMAND` in the `.agents` directory
//!   holding its hooks.json (agy runs hooks in the folder holding
//!   hooks.json), in its own process group, with the payload on stdin. Its
//!   decision is [`Decision::from_hook_output`]: an explicit allow and exit 0
//!   allow; `{}`, a non-zero exit or a crash deny. A hook still running after
//!   its `timeout` is killed (its whole group) and the tool **runs**: agy
//!   1.1.7 did that (the emulated fault; never rely on the timeout).
//! - Several matching hooks must all allow; the first denial decides.

use agy_format::hooks::{
    parse_hooks_file, Decision, Hook, HookEvent, ListedHook, ToolCall, ToolPayload, HOOKS_FILE,
};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One loaded hook and the hooks.json it came from (absolute).
#[derive(Debug, Clone)]
struct Loaded {
    hook: Hook,
    source: PathBuf,
}

/// The hooks this agy loaded.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    loaded: Vec<Loaded>,
}

/// `FAKE_AGY_IGNORE_HOOKS=1`: an agy that does not load hooks from --add-dir.
fn ignoring() -> bool {
    std::env::var("FAKE_AGY_IGNORE_HOOKS")
        .map(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
        .unwrap_or(false)
}

/// `path` made absolute (canonical when it exists).
fn absolute(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

impl Hooks {
    /// Load `<dir>/.agents/hooks.json` of each of `dirs` (missing files are
    /// no hooks; unreadable ones a warning).
    pub fn load(dirs: &[String]) -> Hooks {
        if ignoring() {
            return Hooks::default();
        }
        let mut loaded = Vec::new();
        for dir in dirs {
            let path = Path::new(dir).join(".agents").join(HOOKS_FILE);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let source = absolute(&path);
            match parse_hooks_file(&text) {
                Ok(hooks) => loaded.extend(hooks.into_iter().map(|hook| Loaded {
                    hook,
                    source: source.clone(),
                })),
                Err(e) => eprintln!("warning: ignoring hooks file {}: {e}", source.display()),
            }
        }
        Hooks { loaded }
    }

    /// What `/hooks` lists: every loaded hook with its source file.
    pub fn listing(&self) -> Vec<ListedHook> {
        self.loaded
            .iter()
            .map(|l| ListedHook::new(&l.hook, &l.source.to_string_lossy()))
            .collect()
    }

    /// Run every `PreToolUse` hook matching the payload's tool; the
    /// decision (all must allow; a timed-out hook does not object).
    pub fn pre_tool_use(&self, payload: &ToolPayload) -> Decision {
        let stdin = serde_json::to_string(payload).unwrap_or_else(|_| "{}".into());
        for l in &self.loaded {
            if l.hook.event != HookEvent::PreToolUse || !l.hook.matches(&payload.tool_call.name) {
                continue;
            }
            crate::append_json_line(
                "FAKE_AGY_HOOK_LOG",
                serde_json::from_str(&stdin).unwrap_or(Value::Null),
            );
            let dir = l.source.parent().unwrap_or(Path::new("/"));
            let timeout = Duration::from_secs(l.hook.timeout_secs);
            match run_hook(&l.hook.command, dir, &stdin, timeout) {
                HookRun::TimedOut => {
                    eprintln!(
                        "warning: hook {:?} timed out after {} s; the tool runs",
                        l.hook.command, l.hook.timeout_secs
                    );
                }
                HookRun::Exited { stdout, ok } => {
                    let d = Decision::from_hook_output(&stdout, ok);
                    if d != Decision::Allow {
                        return d;
                    }
                }
            }
        }
        Decision::Allow
    }
}

/// How a hook command ended.
#[derive(Debug)]
enum HookRun {
    /// It ran to its end: its stdout and whether it exited 0.
    Exited { stdout: String, ok: bool },
    /// Killed at its timeout.
    TimedOut,
}

/// Run `sh -c command` in `dir` with `stdin` on its stdin, for at most
/// `timeout`; a hook that cannot start is a failed one (deny).
fn run_hook(command: &str, dir: &Path, stdin: &str, timeout: Duration) -> HookRun {
    let failed = || HookRun::Exited {
        stdout: String::new(),
        ok: false,
    };
    let deadline = Instant::now() + timeout;
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut child) = spawned else {
        return failed();
    };
    // Both pipes on their own threads: a hook need not read its stdin,
    // and one that leaves a background child holding stdout must not hang
    // the run past the deadline.
    if let Some(mut input) = child.stdin.take() {
        let payload = stdin.to_string();
        std::thread::spawn(move || {
            let _ = input.write_all(payload.as_bytes());
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(mut out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            let _ = tx.send(text);
        });
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return HookRun::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => return failed(),
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let stdout = rx
        .recv_timeout(left.max(Duration::from_millis(100)))
        .unwrap_or_default();
    HookRun::Exited {
        stdout,
        ok: status.success(),
    }
}

/// Where a tool call happens: conversation `id`, the workspace agy names
/// (`workspacePaths`, as agy 1.3.3 fills it: the recording's own, which
/// its tool arguments name; the 1.1.7 capture's was empty), the model.
pub struct CallSite<'a> {
    pub id: &'a str,
    pub workspace: Option<&'a str>,
    pub model: &'a str,
}

/// The payload agy gives a tool hook for step `step_idx` (as written to the
/// database): `brain/<id>/` for the artifacts and the transcript, as agy
/// lays them out.
pub fn payload(site: &CallSite<'_>, step_idx: i64, name: &str, args: Value) -> ToolPayload {
    let (id, model) = (site.id, site.model);
    let home = std::env::var("HOME").unwrap_or_default();
    let brain = Path::new(&home)
        .join(".gemini/antigravity-cli/brain")
        .join(id);
    ToolPayload {
        artifact_directory_path: brain.to_string_lossy().into_owned(),
        conversation_id: id.to_string(),
        model_name: model.to_string(),
        step_idx: u64::try_from(step_idx).unwrap_or(0),
        tool_call: ToolCall {
            args,
            name: name.to_string(),
        },
        transcript_path: brain
            .join(".system_generated/logs/transcript.jsonl")
            .to_string_lossy()
            .into_owned(),
        workspace_paths: site.workspace.iter().map(|w| w.to_string()).collect(),
        ..ToolPayload::default()
    }
}

/// `FAKE_AGY_TOOL_LOG`: the tool really "ran" (allowed, or no hook).
pub fn log_tool_ran(name: &str, args: &Value, step_idx: i64) {
    crate::append_json_line(
        "FAKE_AGY_TOOL_LOG",
        serde_json::json!({"name": name, "args": args, "stepIdx": step_idx}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(command: &str, timeout: Duration) -> HookRun {
        run_hook(command, Path::new("/"), "{\"x\":1}", timeout)
    }

    #[test]
    fn hook_runs_report_output_exit_and_timeout() {
        match decide(
            "cat >/dev/null; echo '{\"decision\":\"allow\"}'",
            Duration::from_secs(5),
        ) {
            HookRun::Exited { stdout, ok } => {
                assert!(ok);
                assert_eq!(Decision::from_hook_output(&stdout, ok), Decision::Allow);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decide("exit 1", Duration::from_secs(5)),
            HookRun::Exited { ok: false, .. }
        ));
        assert!(matches!(
            decide("kill -9 $$", Duration::from_secs(5)),
            HookRun::Exited { ok: false, .. }
        ));
        let t = Instant::now();
        assert!(matches!(
            decide("sleep 30", Duration::from_millis(300)),
            HookRun::TimedOut
        ));
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn payloads_name_the_brain_directory() {
        let site = CallSite {
            id: "c1",
            workspace: Some("/home/dev/project"),
            model: "m",
        };
        let p = payload(&site, 7, "run_command", serde_json::json!({"a": 1}));
        assert_eq!(p.workspace_paths, ["/home/dev/project"]);
        assert!(p
            .artifact_directory_path
            .ends_with("antigravity-cli/brain/c1"));
        assert!(p.transcript_path.starts_with(&p.artifact_directory_path));
        assert_eq!((p.step_idx, p.tool_call.name.as_str()), (7, "run_command"));
    }
}
