//! Proof that an agy binary loads a hook from `--add-dir`, before the bridge
//! relies on one (docs/agy-format.md, "Hooks").
//!
//! `ask` may pass `--dangerously-skip-permissions` only with its own
//! `PreToolUse` hook as the gate, and only once this agy has shown that it
//! loads hooks from an `--add-dir` dir: agy's hooks moved between versions,
//! and an agy that ignored the hook would run every tool unasked. Never run
//! skip-permissions with an unproven gate.
//!
//! `prove` writes a private probe dir with `.agents/hooks.json` holding one
//! `PreToolUse` hook (matcher `*`, a harmless marker command that `/hooks`
//! never runs), asks `AGY_BIN -p /hooks --output-format json --add-dir PROBE`
//! (a slash command: no model turn, no quota; so never with
//! `--disable-slash-commands`) and proves it only if the listing names the
//! probe's hooks.json as a hook's `source` (and, where it lists one, the
//! probe's command). agy runs in an empty sibling directory of the probe, so
//! a hook loaded from the working directory cannot pass for one from
//! `--add-dir`.
//!
//! The answer is remembered per agy binary in `agy-hooks-proof.json` in the
//! state directory, keyed by [`BinaryKey`] as `agy-version.json` is (the
//! same `PerBinaryFile` plumbing): another or upgraded agy is asked afresh.
//! Only definitive answers are kept (proven, or ran fine and did not list
//! the hook); a failure to run and a timeout are asked again next time.

use crate::process::short::{self, NoOutput, Program};
use crate::runner::version::{BinaryKey, PerBinaryFile};
use crate::state::tmp::PrivateDir;
use agy_format::hooks::{hooks_file, listed_sources, Decision, Hook, HookEvent, HOOKS_FILE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The cache file's name inside the state directory.
pub(crate) const PROOF_CACHE_FILE: &str = "agy-hooks-proof.json";

/// A sensible bound for `agy -p /hooks` (it answers in about the time
/// `/usage` does, a few seconds).
pub(crate) const PROOF_TIMEOUT: Duration = Duration::from_secs(10);

/// The probe hook's name in hooks.json.
const PROBE_NAME: &str = "agy-bridge-probe";

/// The probe hook's command: never run by `/hooks`; were it ever run, it
/// denies.
fn probe_command() -> String {
    format!(
        "echo '{}'",
        Decision::deny("agy-bridge hook probe").to_json()
    )
}

/// This agy lists a hook loaded from `--add-dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    /// Answered from `agy-hooks-proof.json`, without running agy.
    pub cached: bool,
}

/// Why the hook is not proven: each is one sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unproven {
    /// agy ran but did not list the probe's hook.
    #[error(
        "agy did not list the hook loaded from --add-dir (agy -p /hooks shows no hooks from {dir}); this agy may be too old to load hooks from --add-dir"
    )]
    NotListed {
        /// The hook directory agy was given.
        dir: String,
    },
    /// agy's binary is not there.
    #[error("agy is not installed: {bin} was not found")]
    NotInstalled {
        /// The agy binary that was looked for.
        bin: String,
    },
    /// `agy -p /hooks` failed; what it said.
    #[error("agy -p /hooks failed: {0}")]
    Failed(String),
    /// `agy -p /hooks` ran out of time.
    #[error("agy -p /hooks timed out after {secs} s")]
    TimedOut {
        /// How long it was given.
        secs: u64,
    },
    /// The probe's hook could not be written; the error.
    #[error("cannot write the hook probe: {0}")]
    Probe(String),
    /// Stopped (an abort, a stop signal) before agy answered; agy's tree is
    /// ended. Never remembered.
    #[error("stopped before agy -p /hooks answered")]
    Canceled,
}

/// One remembered answer: the binary as it was, whether it listed the
/// probe, and the probe dir it was asked with (for the words).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    binary: BinaryKey,
    proven: bool,
    probe_dir: String,
}

/// [`prove_at`] with the cache in the bridge's state directory
/// `state_dir`, if there is one (`None`: nothing is remembered).
///
/// Blocking (runs agy, reads and writes files): async callers use
/// `tokio::task::spawn_blocking`. `env` is set on agy's process (as the
/// turn's agy would get it); `timeout` bounds agy's run, and `cancel` ends
/// it at once ([`short`]: agy runs under the guardian).
pub(crate) fn prove(
    state_dir: Option<&Path>,
    agy_bin: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Proven, Unproven> {
    let asking = Asking {
        env,
        timeout,
        cancel,
    };
    prove_in(
        &PerBinaryFile::in_dir(state_dir, PROOF_CACHE_FILE),
        agy_bin,
        &asking,
    )
}

// Reached only through `crate::testing`: the tests keep their cache apart.
#[cfg(any(test, feature = "testing"))]
/// [`prove`] with `agy-hooks-proof.json` in `state_dir` (blocking).
pub(crate) fn prove_at(
    state_dir: &Path,
    agy_bin: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Proven, Unproven> {
    prove(Some(state_dir), agy_bin, env, timeout, cancel)
}

/// How agy is asked: its environment additions, its time limit, and what
/// stops it.
struct Asking<'a> {
    env: &'a [(String, String)],
    timeout: Duration,
    cancel: &'a CancellationToken,
}

/// What `agy-hooks-proof.json` in `state_dir` remembers for the agy
/// `agy_bin` names, as it is now: proven or not; `None` when it was never
/// answered (or is not an executable file). Blocking file I/O, no agy run.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn remembered_at(state_dir: &Path, agy_bin: &Path) -> Option<bool> {
    remembered_in(
        &PerBinaryFile::in_dir(Some(state_dir), PROOF_CACHE_FILE),
        agy_bin,
    )
}

#[cfg(any(test, feature = "testing"))]
fn remembered_in(cache: &PerBinaryFile, agy_bin: &Path) -> Option<bool> {
    let key = BinaryKey::of(agy_bin)?;
    cache.get::<Entry>(&key).map(|e| e.proven)
}

fn prove_in(cache: &PerBinaryFile, agy_bin: &Path, asking: &Asking) -> Result<Proven, Unproven> {
    let key = BinaryKey::of(agy_bin).ok_or_else(|| Unproven::NotInstalled {
        bin: agy_bin.display().to_string(),
    })?;
    if let Some(entry) = cache.get::<Entry>(&key) {
        return judged(entry.proven, &entry.probe_dir, true);
    }
    let probe = Probe::create().map_err(|e| Unproven::Probe(e.to_string()))?;
    let proven = ask(&key.path, &probe, asking)?;
    let probe_dir = probe.add_dir().display().to_string();
    // Only if the binary did not change while it was asked.
    if BinaryKey::of(&key.path).as_ref() == Some(&key) {
        let entry = Entry {
            binary: key.clone(),
            proven,
            probe_dir: probe_dir.clone(),
        };
        let _ = cache.put(&key, &entry);
    }
    judged(proven, &probe_dir, false)
}

fn judged(proven: bool, dir: &str, cached: bool) -> Result<Proven, Unproven> {
    match proven {
        true => Ok(Proven { cached }),
        false => Err(Unproven::NotListed {
            dir: dir.to_string(),
        }),
    }
}

/// Run `agy -p /hooks` against `probe`: whether it listed the probe's hook
/// (a definitive answer), or why it could not tell.
fn ask(bin: &Path, probe: &Probe, asking: &Asking) -> Result<bool, Unproven> {
    let add_dir = probe.add_dir();
    let args: [&std::ffi::OsStr; 6] = [
        "-p".as_ref(),
        "/hooks".as_ref(),
        "--output-format".as_ref(),
        "json".as_ref(),
        "--add-dir".as_ref(),
        add_dir.as_os_str(),
    ];
    let program = Program::new(bin, args, asking.timeout)
        .env(asking.env)
        .cwd(&probe.cwd());
    let out = short::run_blocking(&program, asking.cancel).map_err(|e| match e {
        NoOutput::NotInstalled => Unproven::NotInstalled {
            bin: bin.display().to_string(),
        },
        NoOutput::SpawnFailed(m) => Unproven::Failed(m),
        NoOutput::TimedOut { secs } => Unproven::TimedOut { secs },
        NoOutput::Canceled => Unproven::Canceled,
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let code = out
            .status
            .code()
            .map_or_else(|| "a signal".to_string(), |c| c.to_string());
        return Err(Unproven::Failed(match last {
            Some(line) => format!("exited with {code}: {}", line.trim()),
            None => format!("exited with {code}"),
        }));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(lists_probe(&stdout, &probe.hooks_json(), &probe_command()))
}

/// Whether a `/hooks` output lists a hook whose `source` is `hooks_json`
/// (the same path text, or the same file once both are canonicalized) and
/// whose command, where the listing gives one, is `command`.
pub(crate) fn lists_probe(output: &str, hooks_json: &Path, command: &str) -> bool {
    let want = hooks_json.canonicalize().ok();
    listed_sources(output).iter().any(|l| {
        let source = Path::new(&l.source);
        let same_file =
            source == hooks_json || (want.is_some() && source.canonicalize().ok() == want);
        same_file && l.command.as_deref().is_none_or(|c| c == command)
    })
}

/// The private probe (a [`PrivateDir`], removed when dropped):
/// `add/.agents/hooks.json` and an empty `cwd/`.
struct Probe {
    dir: PrivateDir,
}

impl Probe {
    fn create() -> std::io::Result<Probe> {
        let dir = PrivateDir::create(&crate::state::tmp::temp_dir(), "hook-probe")?;
        let hook = Hook {
            name: PROBE_NAME.into(),
            event: HookEvent::PreToolUse,
            matcher: Some("*".into()),
            command: probe_command(),
            timeout_secs: 5,
        };
        dir.write(
            &format!("add/.agents/{HOOKS_FILE}"),
            &hooks_file(&[hook]).to_string(),
        )?;
        std::fs::create_dir(dir.path().join("cwd"))?;
        Ok(Probe { dir })
    }

    fn add_dir(&self) -> PathBuf {
        self.dir.path().join("add")
    }

    fn cwd(&self) -> PathBuf {
        self.dir.path().join("cwd")
    }

    fn hooks_json(&self) -> PathBuf {
        self.add_dir().join(".agents").join(HOOKS_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agy_format::hooks::{listing_command, listing_text, ListedHook};
    use agy_format::stream_json::{Line, TurnResult};

    fn listing(source: &str, command: &str) -> String {
        let hook = Hook {
            name: PROBE_NAME.into(),
            event: HookEvent::PreToolUse,
            matcher: Some("*".into()),
            command: command.into(),
            timeout_secs: 5,
        };
        let listed = vec![ListedHook::new(&hook, source)];
        serde_json::to_string(&TurnResult {
            command: Some(listing_command(&listed)),
            response: listing_text(&listed),
            ..TurnResult::default()
        })
        .expect("json")
    }

    #[test]
    fn the_listing_must_name_the_probe_file_and_its_command() {
        let probe = Probe::create().expect("probe");
        let file = probe.hooks_json();
        let cmd = probe_command();
        assert!(lists_probe(
            &listing(&file.to_string_lossy(), &cmd),
            &file,
            &cmd
        ));
        // Another path to the same file counts.
        let link = probe.dir.path().join("link");
        std::os::unix::fs::symlink(probe.add_dir(), &link).expect("symlink");
        let other = link.join(".agents/hooks.json");
        assert!(lists_probe(
            &listing(&other.to_string_lossy(), &cmd),
            &file,
            &cmd
        ));
        assert!(!lists_probe(
            &listing("/elsewhere/.agents/hooks.json", &cmd),
            &file,
            &cmd
        ));
        assert!(!lists_probe(
            &listing(&file.to_string_lossy(), "other"),
            &file,
            &cmd
        ));
        assert!(!lists_probe("", &file, &cmd));
        let stream = Line::CommandResult(listing_command(&[])).to_json();
        assert!(!lists_probe(&stream, &file, &cmd));
    }

    #[test]
    fn the_probe_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let probe = Probe::create().expect("probe");
        let root = probe.dir.path().to_path_buf();
        let mode = std::fs::metadata(&root).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let text = std::fs::read_to_string(probe.hooks_json()).expect("hooks.json");
        let hooks = agy_format::hooks::parse_hooks_file(&text).expect("parses");
        assert_eq!(hooks.len(), 1);
        assert!(hooks[0].matches("run_command"));
        assert!(std::fs::read_dir(probe.cwd())
            .expect("cwd")
            .next()
            .is_none());
        drop(probe);
        assert!(!root.exists());
    }

    #[test]
    fn reasons_are_worded() {
        let e = Unproven::NotListed {
            dir: "/tmp/p".into(),
        };
        assert!(e.to_string().contains("shows no hooks from /tmp/p"), "{e}");
        assert_eq!(
            Unproven::TimedOut { secs: 10 }.to_string(),
            "agy -p /hooks timed out after 10 s"
        );
    }
}
