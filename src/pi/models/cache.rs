//! Running `agy models` (8 s, as a short program under the guardian:
//! `crate::process::short`) behind the 5-minute
//! cache in `models-cache.json`, with the built-in fallback when agy cannot
//! be asked.
//!
//! Every entry records which agy binary it came from ([`BinaryKey`]: resolved
//! path, size, modification time). A remembered failure speaks only for that
//! binary, so pointing `AGY_BIN` elsewhere, installing or upgrading agy is
//! seen at once; "not installed" is never remembered at all.

use super::parse::{is_glog, is_progress, is_sign_in, parse_models_output};
use super::{Catalog, CACHE_FILE, CACHE_TTL, DISCOVERY_TIMEOUT, FAILURE_TTL, REFRESH_LOCK_FILE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

use crate::process::short::{self, NoOutput, Program};
use crate::runner::version::BinaryKey;
use crate::state::file::{lock_file, StateError, StateFile};

// --- running `agy models` --------------------------------------------------------

/// Why `agy models` gave no catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The agy binary is not on disk or on `PATH`.
    #[error("agy is not installed: {bin} was not found")]
    NotInstalled {
        /// The agy binary looked for.
        bin: String,
    },
    /// agy exists but could not be started.
    #[error("cannot start {bin}: {message}")]
    SpawnFailed {
        /// The agy binary run.
        bin: String,
        /// The operating system's reason.
        message: String,
    },
    /// agy did not answer in time; its process tree was ended.
    #[error("`agy models` did not finish within {}s", secs)]
    TimedOut {
        /// The time limit, in seconds.
        secs: u64,
    },
    /// `message` is agy's own sentence ("Please sign in to view available
    /// models. Launch the CLI without arguments to sign in.").
    #[error("agy is not signed in: {message}")]
    SignedOut {
        /// agy's sentence.
        message: String,
    },
    /// agy failed.
    #[error("`agy models` exited with {code}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Exited {
        /// Its exit status, or the signal that ended it.
        code: String,
        /// Its last words on stderr, if any.
        detail: String,
    },
    /// agy succeeded but its output held no model.
    #[error("`agy models` listed no models")]
    NoModels,
    /// Another process holds the refresh lock, so this one did not run agy.
    #[error("another `agy models` refresh is running")]
    RefreshRunning,
    /// Stopped (an abort, a stop signal) before agy answered; agy's tree is
    /// ended. Never remembered.
    #[error("`agy models` was stopped before it answered")]
    Canceled,
}

/// Run `BIN models` (a short program: stdin closed, its tree ended after
/// `timeout` or when `cancel` fires). Returns stdout of a successful run
/// that listed at least one model. Blocking: not for a runtime worker.
pub(crate) fn fetch(
    bin: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<String, Unavailable> {
    let bin_s = bin.display().to_string();
    let program = Program::new(bin, ["models"], timeout);
    let out = short::run_blocking(&program, cancel).map_err(|e| match e {
        NoOutput::NotInstalled => Unavailable::NotInstalled { bin: bin_s.clone() },
        NoOutput::SpawnFailed(message) => Unavailable::SpawnFailed {
            bin: bin_s.clone(),
            message,
        },
        NoOutput::TimedOut { secs } => Unavailable::TimedOut { secs },
        NoOutput::Canceled => Unavailable::Canceled,
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    judge(out.status, &stdout, &stderr)?;
    Ok(stdout)
}

/// What a finished `agy models` run amounts to: `Ok` when it listed models.
/// Signed out (real agy 1.1.20: exit 1, empty stdout, "Error: Please sign in
/// ..." on stderr) is told apart from other failures, and agy's progress
/// line is never taken for the reason (docs/agy-format.md, "agy models").
fn judge(status: std::process::ExitStatus, stdout: &str, stderr: &str) -> Result<(), Unavailable> {
    let sign_in = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .find(|l| is_sign_in(l));
    let signed_out = || Unavailable::SignedOut {
        message: sign_in_sentence(sign_in.unwrap_or_default()),
    };
    if !status.success() {
        if sign_in.is_some() {
            return Err(signed_out());
        }
        let code = match status.code() {
            Some(c) => format!("status {c}"),
            None => "a signal".to_string(),
        };
        let detail = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty() && !is_glog(l) && !is_progress(l))
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(Unavailable::Exited { code, detail });
    }
    if parse_models_output(stdout).is_empty() {
        return Err(if sign_in.is_some() {
            signed_out()
        } else {
            Unavailable::NoModels
        });
    }
    Ok(())
}

/// agy's sign-in line as a sentence for "agy is not signed in: ...": its
/// `Error:` prefix dropped; a hint of our own when agy said nothing usable.
fn sign_in_sentence(line: &str) -> String {
    let line = line.trim();
    let bare = match line.get(..6) {
        Some(p) if p.eq_ignore_ascii_case("error:") => line[6..].trim_start(),
        _ => line,
    };
    if bare.is_empty() {
        "run `agy` once to sign in".to_string()
    } else {
        bare.to_string()
    }
}

// --- the cache ----------------------------------------------------------------

/// `models-cache.json`: the TypeScript bridge's `{raw, savedAt}` (raw `agy models`
/// stdout, epoch milliseconds), plus `unavailable` when the entry records a
/// failed run (then `raw` is empty) and `binary`, the agy it came from.
/// Entries written by the TypeScript bridge read fine, and ours read fine
/// there.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    pub raw: String,
    /// Epoch milliseconds (the TypeScript bridge wrote `Date.now()`; a fraction is
    /// accepted and dropped).
    #[serde(deserialize_with = "millis")]
    pub saved_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// The agy binary that gave this answer; `None` in the TypeScript bridge's
    /// entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<BinaryKey>,
}

pub(super) fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 0.0 {
        Ok(v as u64)
    } else {
        Err(serde::de::Error::custom("savedAt is not a time"))
    }
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl CacheEntry {
    /// Age; an entry from the future counts as infinitely old.
    pub(crate) fn age(&self) -> Duration {
        match now_ms().checked_sub(self.saved_at) {
            Some(diff) => Duration::from_millis(diff),
            None => Duration::MAX,
        }
    }

    /// A real catalog from agy (not a remembered failure).
    pub(crate) fn is_real(&self) -> bool {
        self.unavailable.is_none() && !Catalog::from_output(&self.raw).is_empty()
    }
}

/// Where the catalog came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `agy models`, just now.
    Agy,
    /// The cache, written `age` ago.
    Cache {
        /// How old the entry is.
        age: Duration,
    },
    /// `agy models` failed just now; the last good catalog (`age` old) is
    /// shown instead.
    CacheAfterFailure {
        /// Why agy failed.
        reason: String,
        /// How old the cached catalog is.
        age: Duration,
    },
    /// The built-in catalog. `age` is set when the failure is a remembered
    /// one (a failure of the same agy binary younger than `FAILURE_TTL`).
    Fallback {
        /// Why there is no catalog from agy.
        reason: String,
        /// How old the remembered failure is; `None` when it happened now.
        age: Option<Duration>,
    },
}

/// A loaded catalog and how it was had.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The models.
    pub catalog: Catalog,
    /// Where they came from, for the note to the user.
    pub source: Source,
    /// The cache entry served is past its TTL, or came from another agy
    /// binary: refresh it in the background ([`Loader::spawn_refresh`]).
    pub stale: bool,
}

impl Loaded {
    /// Whether this is the built-in catalog, since agy gave none.
    pub fn is_fallback(&self) -> bool {
        matches!(self.source, Source::Fallback { .. })
    }

    /// The line to tell the user when this is not a catalog agy just gave
    /// or a cached one.
    pub fn note(&self) -> Option<String> {
        match &self.source {
            Source::Agy | Source::Cache { .. } => None,
            Source::CacheAfterFailure { reason, age } => Some(format!(
                "`agy models` failed ({reason}); showing the catalog cached {} ago",
                human(*age)
            )),
            Source::Fallback { reason, age: None } => Some(format!(
                "agy models unavailable ({reason}); using the built-in fallback catalog"
            )),
            Source::Fallback {
                reason,
                age: Some(age),
            } => Some(format!(
                "agy models unavailable ({reason}, checked {} ago; --refresh retries now); using the built-in fallback catalog",
                human(*age)
            )),
        }
    }
}

pub(super) fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else {
        format!("{}h", s / 3600)
    }
}

/// How [`Loader::load`] may use the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fresh entry: served. Stale entry (or one from another agy binary):
    /// served, `stale` set. A failure of this same binary younger than
    /// `FAILURE_TTL`: fallback. Otherwise run agy now.
    CacheFirst,
    /// Run agy now; on failure show the last good cache entry, else the
    /// fallback.
    Refresh,
}

/// Loads the catalog: agy, cache and fallback.
#[derive(Debug, Clone)]
pub struct Loader {
    /// The agy binary to run `models` on; the cache is keyed by it.
    pub agy_bin: PathBuf,
    /// Where `models-cache.json` lives; `None`: nothing is cached.
    pub state_dir: Option<PathBuf>,
    /// How long `agy models` may run before its process group is killed.
    pub timeout: Duration,
    /// How long a catalog from agy is served from the cache without a refresh.
    pub ttl: Duration,
    /// How long a failed `agy models` is remembered instead of retried.
    pub failure_ttl: Duration,
}

impl Loader {
    /// The settings' agy binary, and the cache in their state directory
    /// (`~/.pi/agent/antigravity-bridge` by default, the original's, so its
    /// `models-cache.json` is reused).
    pub fn from_settings(settings: &crate::settings::Settings) -> Loader {
        Loader {
            agy_bin: settings.agy_bin.clone(),
            state_dir: settings.state_dir.clone(),
            timeout: DISCOVERY_TIMEOUT,
            ttl: CACHE_TTL,
            failure_ttl: FAILURE_TTL,
        }
    }

    /// `models-cache.json`'s path.
    pub(crate) fn cache_path(&self) -> Option<PathBuf> {
        self.state_dir.as_ref().map(|d| d.join(CACHE_FILE))
    }

    /// The lock a background refresh holds while it runs.
    pub(crate) fn refresh_lock_path(&self) -> Option<PathBuf> {
        self.state_dir.as_ref().map(|d| d.join(REFRESH_LOCK_FILE))
    }

    /// The cache entry, if there is a readable one.
    pub(crate) fn read_cache(&self) -> Option<CacheEntry> {
        let text = std::fs::read_to_string(self.cache_path()?).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write the cache as every state file is written (locked, temporary
    /// file, mode 0600, rename).
    pub(crate) fn write_cache(&self, entry: &CacheEntry) -> Result<(), StateError> {
        let Some(dir) = &self.state_dir else {
            return Ok(());
        };
        let file = StateFile::new(dir, CACHE_FILE);
        let map = match serde_json::to_value(entry) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return Ok(()),
        };
        let lock = file.lock()?;
        file.write(&lock, &map)
    }

    /// Run agy now and cache the outcome: a good catalog replaces the entry;
    /// a failure is recorded, with the binary that failed, only when there
    /// is no good entry to keep. "Not installed" is never recorded: the
    /// next call must see agy the moment it is there; nor is a run stopped
    /// by `cancel`, which says nothing of agy.
    pub(crate) fn fetch_and_store(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Catalog, Unavailable> {
        let outcome = fetch(&self.agy_bin, self.timeout, cancel);
        let binary = BinaryKey::of(&self.agy_bin);
        match outcome {
            Ok(raw) => {
                let _ = self.write_cache(&CacheEntry {
                    raw: raw.clone(),
                    saved_at: now_ms(),
                    unavailable: None,
                    binary,
                });
                Ok(Catalog::from_output(&raw))
            }
            Err(reason @ (Unavailable::NotInstalled { .. } | Unavailable::Canceled)) => Err(reason),
            Err(reason) => {
                let keep_good = self.read_cache().is_some_and(|c| c.is_real());
                if binary.is_some() && !keep_good {
                    let _ = self.write_cache(&CacheEntry {
                        raw: String::new(),
                        saved_at: now_ms(),
                        unavailable: Some(reason.to_string()),
                        binary,
                    });
                }
                Err(reason)
            }
        }
    }

    /// The catalog by `policy`; `agy models`, when it runs, is stopped
    /// when `cancel` fires (the cache or the fallback answers then).
    /// Blocking: not for a runtime worker.
    pub fn load(&self, policy: Policy, cancel: &CancellationToken) -> Loaded {
        let cached = self.read_cache();
        if policy == Policy::CacheFirst {
            let binary = BinaryKey::of(&self.agy_bin);
            if let Some(loaded) = cached
                .as_ref()
                .and_then(|entry| self.serve_cached(entry, binary.as_ref()))
            {
                return loaded;
            }
        }
        match self.fetch_and_store(cancel) {
            Ok(catalog) => Loaded {
                catalog,
                source: Source::Agy,
                stale: false,
            },
            Err(reason) => {
                if let Some(entry) = cached.filter(CacheEntry::is_real) {
                    return Loaded {
                        catalog: Catalog::from_output(&entry.raw),
                        source: Source::CacheAfterFailure {
                            reason: reason.to_string(),
                            age: entry.age(),
                        },
                        stale: false,
                    };
                }
                Loaded {
                    catalog: Catalog::fallback(),
                    source: Source::Fallback {
                        reason: reason.to_string(),
                        age: None,
                    },
                    stale: false,
                }
            }
        }
    }

    /// What the cache entry can serve without running agy, for the binary
    /// `binary` (`None`: it is not there). A failure speaks only for the
    /// binary that failed; a catalog from another binary is still shown
    /// (better than the fallback) but marked for refresh.
    fn serve_cached(&self, entry: &CacheEntry, binary: Option<&BinaryKey>) -> Option<Loaded> {
        let age = entry.age();
        if let Some(reason) = &entry.unavailable {
            let same_binary = binary.is_some() && entry.binary.as_ref() == binary;
            return (same_binary && age < self.failure_ttl).then(|| Loaded {
                catalog: Catalog::fallback(),
                source: Source::Fallback {
                    reason: reason.clone(),
                    age: Some(age),
                },
                stale: false,
            });
        }
        let catalog = Catalog::from_output(&entry.raw);
        if catalog.is_empty() {
            return None;
        }
        let other_binary = binary.is_some() && entry.binary.as_ref() != binary;
        Some(Loaded {
            catalog,
            source: Source::Cache { age },
            stale: age >= self.ttl || other_binary,
        })
    }

    /// Start `EXE models --refresh --quiet` detached (own process group,
    /// stdio null) to rewrite the cache after this process has exited. It
    /// is meant to outlive this process, and is the bridge too: its `agy
    /// models` runs under its own guardian, within its time limit, and ends
    /// on its stop signals like any other.
    /// Nothing is started while another refresh holds the refresh lock; the
    /// started one takes the lock itself ([`Loader::refresh_quietly`]), so
    /// of two started at once one runs agy and the other stops at once.
    /// Returns whether one was started.
    pub fn spawn_refresh(&self, exe: &Path) -> bool {
        use std::os::unix::process::CommandExt;
        let Some(lock) = self.refresh_lock_path() else {
            return false;
        };
        match lock_file(&lock, false) {
            // Free: let go of it again for the refresh to take.
            Ok(Some(_free)) => {}
            Ok(None) | Err(_) => return false,
        }
        let mut cmd = Command::new(exe);
        cmd.args(["models", "--refresh", "--quiet"])
            .env("AGY_BIN", &self.agy_bin)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(dir) = &self.state_dir {
            cmd.env("AGY_BRIDGE_STATE_DIR", dir);
        }
        match cmd.spawn() {
            Ok(mut child) => {
                // Reap it if this process outlives it.
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
                true
            }
            Err(_) => false,
        }
    }

    /// The background refresh itself: under the refresh lock (an `flock`,
    /// released when this process ends, however it ends), run agy and store
    /// the outcome. [`Unavailable::RefreshRunning`] when another refresh
    /// holds the lock. `cancel` stops agy (the refresh's own stop signals).
    pub fn refresh_quietly(&self, cancel: &CancellationToken) -> Result<Catalog, Unavailable> {
        let _lock = match self.refresh_lock_path().map(|p| lock_file(&p, false)) {
            Some(Ok(None)) => return Err(Unavailable::RefreshRunning),
            Some(Ok(Some(lock))) => Some(lock),
            // No state directory, or it cannot be locked: nothing to race.
            None | Some(Err(_)) => None,
        };
        self.fetch_and_store(cancel)
    }
}

/// Cache-first catalog for the provider and AskAntigravity: the cache when
/// there is one (stale or not: the next `agy-bridge models` refreshes it),
/// else `agy models` now (stopped when `cancel` fires), else the fallback.
/// Blocking: not for a runtime worker.
pub fn catalog(settings: &crate::settings::Settings, cancel: &CancellationToken) -> Catalog {
    Loader::from_settings(settings)
        .load(Policy::CacheFirst, cancel)
        .catalog
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_sentences() {
        assert_eq!(
            sign_in_sentence(
                "Error: Please sign in to view available models. Launch the CLI without arguments to sign in."
            ),
            "Please sign in to view available models. Launch the CLI without arguments to sign in."
        );
        assert_eq!(
            sign_in_sentence("Waiting for authentication..."),
            "Waiting for authentication..."
        );
        assert_eq!(sign_in_sentence("ERROR:"), "run `agy` once to sign in");
        assert_eq!(sign_in_sentence(""), "run `agy` once to sign in");
    }
}
