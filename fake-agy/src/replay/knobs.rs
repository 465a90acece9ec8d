//! The `FAKE_AGY_*` environment knobs of a run (speed, database delay,
//! crash, grandchild, commit log, hang, which recording, how many
//! conversations agy keeps, whether edits reach the disk) and what the
//! fault ones do when they fire. Read once per run, so a test sets up a
//! scenario through the environment without the replay knowing about tests.

use super::{err_raw, sleep_forever, Fatal, CONFIG_EXIT};
use agy_corpus::recording::{self, Recording};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

pub(super) fn env_flag(name: &str) -> bool {
    env(name)
        .map(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no"))
        .unwrap_or(false)
}

pub(super) fn env_parse<T: std::str::FromStr>(name: &str) -> Result<Option<T>, Fatal> {
    match env(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            Fatal::new(
                CONFIG_EXIT,
                format!("{name}={v:?} is not a valid value (see fake-agy --help)"),
            )
        }),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CrashMode {
    Exit(i32),
    SigKill,
}

/// The environment knobs of a print run (see `fake-agy --help`).
#[derive(Debug)]
pub(super) struct Knobs {
    pub(super) speed: f64,
    pub(super) db_delay: Option<Duration>,
    pub(super) no_db: bool,
    pub(super) crash_at: Option<usize>,
    /// `FAKE_AGY_CRASH_MODE`, when set.
    pub(super) crash_mode: Option<CrashMode>,
    pub(super) grandchild: bool,
    pub(super) grandchild_pidfile: Option<PathBuf>,
    pub(super) commit_log: Option<PathBuf>,
    pub(super) hang: bool,
    /// `FAKE_AGY_LATE_COMMIT_MS`: a late writer's delay ([`super::late`]).
    pub(super) late_commit: Option<Duration>,
    /// `FAKE_AGY_GIVEN_PROMPT` ([`super::given_prompt`]).
    pub(super) given_prompt: bool,
    /// `FAKE_AGY_KEEP_CONVERSATIONS`: how many conversations agy keeps
    /// ([`super::conversation::prune`]).
    pub(super) keep_conversations: Option<usize>,
    /// `FAKE_AGY_APPLY_EDITS`: the recording's file edits are written to
    /// disk ([`crate::edits`]).
    pub(super) apply_edits: bool,
}

impl Knobs {
    pub(super) fn from_env() -> Result<Knobs, Fatal> {
        let speed = env_parse::<f64>("FAKE_AGY_SPEED")?.unwrap_or(1.0);
        if !(speed.is_finite() && speed > 0.0) {
            return Err(Fatal::new(
                CONFIG_EXIT,
                format!("FAKE_AGY_SPEED must be a positive number, not {speed}"),
            ));
        }
        let crash_mode = match env("FAKE_AGY_CRASH_MODE").as_deref().map(str::trim) {
            None => None,
            Some("exit") => Some(CrashMode::Exit(3)),
            Some("sigkill") | Some("SIGKILL") => Some(CrashMode::SigKill),
            Some(other) => match other.strip_prefix("exit:").map(|c| c.trim().parse::<i32>()) {
                Some(Ok(code)) => Some(CrashMode::Exit(code)),
                _ => {
                    return Err(Fatal::new(
                        CONFIG_EXIT,
                        format!("FAKE_AGY_CRASH_MODE={other:?}: expected exit:CODE or sigkill"),
                    ))
                }
            },
        };
        Ok(Knobs {
            speed,
            db_delay: env_parse::<u64>("FAKE_AGY_DB_DELAY_MS")?.map(Duration::from_millis),
            no_db: env_flag("FAKE_AGY_NO_DB"),
            crash_at: env_parse::<usize>("FAKE_AGY_CRASH_AT_COMMIT")?,
            crash_mode,
            grandchild: env_flag("FAKE_AGY_GRANDCHILD"),
            grandchild_pidfile: env("FAKE_AGY_GRANDCHILD_PIDFILE").map(PathBuf::from),
            commit_log: env("FAKE_AGY_COMMIT_LOG").map(PathBuf::from),
            hang: env_flag("FAKE_AGY_HANG"),
            late_commit: env_parse::<u64>("FAKE_AGY_LATE_COMMIT_MS")?.map(Duration::from_millis),
            given_prompt: env_flag("FAKE_AGY_GIVEN_PROMPT"),
            keep_conversations: env_parse::<usize>("FAKE_AGY_KEEP_CONVERSATIONS")?,
            apply_edits: env_flag("FAKE_AGY_APPLY_EDITS"),
        })
    }

    pub(super) fn scaled(&self, t_ms: u64) -> Duration {
        Duration::from_secs_f64(t_ms as f64 / 1000.0 / self.speed)
    }

    /// How `FAKE_AGY_CRASH_AT_COMMIT` crashes (default: exit 3).
    pub(super) fn crash_mode(&self) -> CrashMode {
        self.crash_mode.unwrap_or(CrashMode::Exit(3))
    }
}

/// Load the recording `FAKE_AGY_RECORDING` names (default `hello`).
pub fn load_recording() -> Result<(Recording, PathBuf), Fatal> {
    let name = env("FAKE_AGY_RECORDING").unwrap_or_else(|| "hello".to_string());
    let dir = env("FAKE_AGY_RECORDINGS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(recording::bundled_dir);
    let path = recording::resolve(&name, &dir).map_err(|e| {
        Fatal::new(
            CONFIG_EXIT,
            format!(
                "{e}; set FAKE_AGY_RECORDING to a recording file or to a name in \
                 FAKE_AGY_RECORDINGS_DIR (default {})",
                recording::bundled_dir().display()
            ),
        )
    })?;
    let rec = Recording::load(&path).map_err(|e| Fatal::new(CONFIG_EXIT, e.to_string()))?;
    let path = path.canonicalize().unwrap_or(path);
    Ok((rec, path))
}

/// Leave a `sleep 600` in our process group that outlives us: `sh` starts it
/// in the background and exits, so it is reparented but keeps our pgid.
pub(super) fn spawn_grandchild(pidfile: Option<&Path>) -> Result<(), Fatal> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Fatal::internal(format!("FAKE_AGY_GRANDCHILD: cannot run sh: {e}")))?;
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if let Some(p) = pidfile {
        std::fs::write(p, format!("{pid}\n")).map_err(|e| {
            Fatal::internal(format!("FAKE_AGY_GRANDCHILD_PIDFILE {}: {e}", p.display()))
        })?;
    }
    Ok(())
}

pub(super) fn crash(mode: CrashMode, n: usize) -> ! {
    match mode {
        CrashMode::Exit(code) => {
            err_raw(&format!(
                "fake-agy: simulated crash after commit {n} (FAKE_AGY_CRASH_AT_COMMIT={n}), exit {code}\n"
            ));
            std::process::exit(code)
        }
        CrashMode::SigKill => {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            sleep_forever()
        }
    }
}
