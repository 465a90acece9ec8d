//! agy's quota, asked: `agy -p /usage --output-format json` run with a
//! timeout, its answer cached per agy binary in `usage-cache.json`.
//!
//! `/usage` costs no model turn and no quota but takes about 3 s
//! (docs/agy-format.md, "Quota"), so a caller that asks after every turn
//! (the pi extension's footer) gives a max age and is answered from the
//! cache while the answer is younger. Only good answers are cached, keyed
//! by the binary's resolved path and checked against its size and mtime
//! ([`BinaryKey`]), as `agy-version.json` is: another or upgraded agy is
//! asked afresh. An agy older than 1.1.11 (or of unknown version) is never
//! asked: before slash commands existed, `/usage` would be a prompt sent to
//! the model, spending the very quota the user wanted to see.
//!
//! The prompt must reach agy as a slash command, so `--disable-slash-commands`
//! is never passed here.

use crate::process::short::{self, NoOutput, Program};
use crate::runner::failure::says_signed_out;
use crate::runner::version::{BinaryKey, VersionCache};
use crate::state::file::{self, StateFile};
use agy_format::features::{Version, USAGE_COMMAND};
use agy_format::quota::{Quota, QuotaError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// How long `agy -p /usage` may run before its process group is killed.
pub(crate) const USAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The cache file name inside the state directory.
pub(crate) const CACHE_FILE: &str = "usage-cache.json";
/// How young a cached answer must be to explain a quota failure (the pi
/// extension's footer keeps it about this fresh).
pub(crate) const FAILURE_MAX_AGE: Duration = Duration::from_secs(300);

/// Why there is no quota to show. Each is one sentence for the user.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UsageError {
    /// agy's binary is not there.
    #[error("agy is not installed: {bin} was not found")]
    NotInstalled {
        /// The binary that was looked for.
        bin: String,
    },
    /// agy's binary is there but could not be started.
    #[error("cannot start {bin}: {message}")]
    SpawnFailed {
        /// The binary.
        bin: String,
        /// The operating system's error.
        message: String,
    },
    /// `agy -p /usage` ran out of time.
    #[error("`agy -p /usage` did not answer within {secs} s")]
    TimedOut {
        /// How long it was given.
        secs: u64,
    },
    /// agy is older than `/usage`.
    #[error("agy {version} is too old for /usage: it needs agy 1.1.11 or later")]
    TooOld {
        /// agy's version.
        version: String,
    },
    /// agy's version could not be read, so `/usage` was not asked.
    #[error(
        "agy's version could not be read, so /usage was not asked (it needs agy 1.1.11 or later)"
    )]
    VersionUnknown,
    /// agy needs its user to sign in first.
    #[error("agy is not signed in. Run `agy` once in a terminal to sign in, then try again.")]
    SignedOut,
    /// `agy -p /usage` failed.
    #[error("`agy -p /usage` exited with {code}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Exited {
        /// How it exited, in words.
        code: String,
        /// What it said.
        detail: String,
    },
    /// agy answered in a form the reader does not take.
    #[error("agy's /usage answer could not be read: {0}")]
    Unreadable(QuotaError),
    /// Stopped (an abort, a stop signal) before agy answered; agy's tree
    /// is ended.
    #[error("stopped before agy answered /usage")]
    Canceled,
}

/// A quota and how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The buckets and when they refill.
    pub quota: Quota,
    /// `None`: agy answered just now; else the cached answer's age.
    pub age: Option<Duration>,
}

/// One remembered answer: the binary as it was, when, and agy's `data`
/// object as agy gave it (so the cache reads with the same reader).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheEntry {
    binary: BinaryKey,
    /// Epoch milliseconds.
    saved_at: u64,
    data: Value,
}

/// Asks agy for its quota, through the cache.
#[derive(Debug, Clone)]
pub struct UsageLoader {
    /// The agy binary to ask.
    pub agy_bin: PathBuf,
    /// Where `usage-cache.json` (and `agy-version.json`) live; `None`:
    /// nothing is cached.
    pub state_dir: Option<PathBuf>,
    /// How long `agy -p /usage` may run.
    pub timeout: Duration,
}

impl UsageLoader {
    /// The settings' agy binary and state directory.
    pub fn from_settings(settings: &crate::settings::Settings) -> UsageLoader {
        UsageLoader {
            agy_bin: settings.agy_bin.clone(),
            state_dir: settings.state_dir.clone(),
            timeout: USAGE_TIMEOUT,
        }
    }

    /// The quota: from the cache when this binary's answer is younger than
    /// `max_age` (zero: always ask agy), else asked now and cached. File
    /// I/O happens on tokio's blocking threads; agy runs as a short program
    /// (`short`), stopped when `cancel` fires.
    pub async fn load(
        &self,
        max_age: Duration,
        cancel: &CancellationToken,
    ) -> Result<Answer, UsageError> {
        let this = self.clone();
        let (key, cached) = tokio::task::spawn_blocking(move || {
            let key = BinaryKey::of(&this.agy_bin);
            let cached = key.as_ref().and_then(|k| this.cached(k, max_age));
            (key, cached)
        })
        .await
        .map_err(|e| self.spawn_failed(e.to_string()))?;
        let Some(key) = key else {
            return Err(self.not_installed());
        };
        if let Some(answer) = cached {
            return Ok(answer);
        }
        let versions = VersionCache::in_dir(self.state_dir.as_deref());
        let version = versions.version(&self.agy_bin, cancel).await;
        if cancel.is_cancelled() {
            return Err(UsageError::Canceled);
        }
        check_version(version)?;
        self.fetch_and_store(key, cancel).await
    }

    /// agy's quota for a turn that just failed on it: the cached answer
    /// when it is younger than [`FAILURE_MAX_AGE`] and shows an empty
    /// bucket, else agy asked once (bounded by `timeout`). A cached answer
    /// with every bucket above zero predates the failure, so it is not
    /// trusted to explain it. Given up when `cancel` fires.
    pub(crate) async fn after_quota_failure(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Quota, UsageError> {
        let ask = async {
            let answer = self.load(FAILURE_MAX_AGE, cancel).await?;
            let stale = answer.age.is_some() && !answer.quota.culprits().1;
            if stale {
                return self.load(Duration::ZERO, cancel).await.map(|a| a.quota);
            }
            Ok(answer.quota)
        };
        tokio::select! {
            r = ask => r,
            _ = cancel.cancelled() => Err(UsageError::Canceled),
        }
    }

    /// What a quota failure ends with: the empty buckets and when they
    /// refill ([`Quota::failure_words`]), or why agy's quota could not be
    /// read.
    pub(crate) async fn quota_failure_words(&self, cancel: &CancellationToken) -> String {
        failure_words(self.after_quota_failure(cancel).await, now_ms() / 1000)
    }

    fn not_installed(&self) -> UsageError {
        UsageError::NotInstalled {
            bin: self.agy_bin.display().to_string(),
        }
    }

    fn spawn_failed(&self, message: String) -> UsageError {
        UsageError::SpawnFailed {
            bin: self.agy_bin.display().to_string(),
            message,
        }
    }

    fn file(&self) -> Option<StateFile> {
        self.state_dir
            .as_ref()
            .map(|dir| StateFile::new(dir, CACHE_FILE))
    }

    /// This binary's cached answer, if it is younger than `max_age` and
    /// still reads (blocking file I/O).
    fn cached(&self, key: &BinaryKey, max_age: Duration) -> Option<Answer> {
        if max_age.is_zero() {
            return None;
        }
        let map = self.file()?.read(None, &mut Vec::new()).ok()?;
        let entry: CacheEntry = serde_json::from_value(map.get(&path_key(key))?.clone()).ok()?;
        // An entry from the future counts as infinitely old.
        let age = Duration::from_millis(now_ms().checked_sub(entry.saved_at)?);
        if entry.binary != *key || age >= max_age {
            return None;
        }
        let quota = Quota::from_data(&entry.data).ok()?;
        Some(Answer {
            quota,
            age: Some(age),
        })
    }

    /// Ask agy now; a good answer is cached for `key` (on a blocking
    /// thread).
    async fn fetch_and_store(
        &self,
        key: BinaryKey,
        cancel: &CancellationToken,
    ) -> Result<Answer, UsageError> {
        let quota = fetch(&key.path, self.timeout, cancel).await?;
        let (this, kept) = (self.clone(), quota.clone());
        let _ = tokio::task::spawn_blocking(move || {
            // Only if the binary did not change while it was asked.
            if BinaryKey::of(&key.path).as_ref() == Some(&key) {
                let _ = this.store(&key, &kept);
            }
        })
        .await;
        Ok(Answer { quota, age: None })
    }

    fn store(&self, key: &BinaryKey, quota: &Quota) -> Result<(), file::StateError> {
        let Some(file) = self.file() else {
            return Ok(());
        };
        let entry = CacheEntry {
            binary: key.clone(),
            saved_at: now_ms(),
            data: quota.to_data(),
        };
        let lock = file.lock()?;
        let mut map = file.read(Some(&lock), &mut Vec::new())?;
        // Entries for binaries that are gone are dropped.
        map.retain(|path, _| Path::new(path).exists());
        if let Ok(value) = serde_json::to_value(entry) {
            map.insert(path_key(key), value);
        }
        file.write(&lock, &map)
    }
}

/// `/usage` only on an agy known to have it.
fn check_version(version: Option<Version>) -> Result<(), UsageError> {
    match version {
        None => Err(UsageError::VersionUnknown),
        Some(v) if v < USAGE_COMMAND => Err(UsageError::TooOld {
            version: format!("{}.{}.{}", v.0, v.1, v.2),
        }),
        Some(_) => Ok(()),
    }
}

/// Run `BIN -p /usage --output-format json` (a short program: its tree
/// ended after `timeout`, or when `cancel` fires) and read its answer.
pub(crate) async fn fetch(
    bin: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Quota, UsageError> {
    let bin_s = bin.display().to_string();
    let program = Program::new(bin, ["-p", "/usage", "--output-format", "json"], timeout);
    let out = short::run(&program, cancel).await.map_err(|e| match e {
        NoOutput::NotInstalled => UsageError::NotInstalled { bin: bin_s.clone() },
        NoOutput::SpawnFailed(message) => UsageError::SpawnFailed {
            bin: bin_s.clone(),
            message,
        },
        NoOutput::TimedOut { secs } => UsageError::TimedOut { secs },
        NoOutput::Canceled => UsageError::Canceled,
    })?;
    judge(
        out.status,
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// What a finished `/usage` run amounts to.
fn judge(
    status: std::process::ExitStatus,
    stdout: &str,
    stderr: &str,
) -> Result<Quota, UsageError> {
    let parsed = Quota::parse(stdout);
    if let (true, Ok(quota)) = (status.success(), &parsed) {
        return Ok(quota.clone());
    }
    let agy_said = match &parsed {
        Err(QuotaError::AgyError(words)) => words.as_str(),
        _ => "",
    };
    if says_signed_out(stderr) || says_signed_out(stdout) || says_signed_out(agy_said) {
        return Err(UsageError::SignedOut);
    }
    if status.success() {
        return Err(parsed.err().map_or(
            UsageError::Unreadable(QuotaError::NoData),
            UsageError::Unreadable,
        ));
    }
    let code = match status.code() {
        Some(c) => format!("status {c}"),
        None => "a signal".to_string(),
    };
    let detail: String = std::iter::once(agy_said)
        .chain(stderr.lines())
        .chain(stdout.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    Err(UsageError::Exited { code, detail })
}

/// [`UsageLoader::quota_failure_words`] for an answer at `now` (Unix
/// seconds).
pub(crate) fn failure_words(answer: Result<Quota, UsageError>, now: u64) -> String {
    match answer {
        Ok(quota) => quota.failure_words(i64::try_from(now).unwrap_or(i64::MAX)),
        Err(e) => format!(
            "agy's quota could not be read to name the empty bucket: {}.",
            e.to_string().trim_end_matches('.')
        ),
    }
}

fn path_key(key: &BinaryKey) -> String {
    key.path.to_string_lossy().into_owned()
}

/// Now, in Unix seconds: what a bucket's reset is said from.
pub fn now_secs() -> i64 {
    i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn exit(code: i32) -> std::process::ExitStatus {
        std::process::ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn old_and_unknown_versions_are_not_asked() {
        assert_eq!(check_version(None), Err(UsageError::VersionUnknown));
        assert_eq!(
            check_version(Some((1, 1, 9))),
            Err(UsageError::TooOld {
                version: "1.1.9".into()
            })
        );
        assert_eq!(check_version(Some((1, 1, 11))), Ok(()));
    }

    #[test]
    fn an_unread_quota_says_why() {
        assert_eq!(
            failure_words(Err(UsageError::TimedOut { secs: 10 }), 0),
            "agy's quota could not be read to name the empty bucket: `agy -p /usage` did not answer within 10 s."
        );
        assert_eq!(
            failure_words(Err(UsageError::SignedOut), 0),
            "agy's quota could not be read to name the empty bucket: agy is not signed in. Run `agy` once in a terminal to sign in, then try again."
        );
        assert_eq!(
            failure_words(Ok(Quota::default()), 0),
            "agy reports no quota buckets."
        );
    }

    #[test]
    fn answers_are_judged() {
        let ok = r#"{"status":"SUCCESS","command":{"name":"usage","data":{"groups":[{"buckets":[{"id":"gemini-5h","remaining_fraction":0.5}]}]}}}"#;
        assert_eq!(judge(exit(0), ok, "").map(|q| q.buckets.len()), Ok(1));
        assert_eq!(
            judge(exit(1), "", "Error: Please sign in to use agy."),
            Err(UsageError::SignedOut)
        );
        assert_eq!(
            judge(
                exit(0),
                r#"{"status":"ERROR","error":"Please sign in"}"#,
                ""
            ),
            Err(UsageError::SignedOut)
        );
        assert!(matches!(
            judge(exit(0), "garbage", ""),
            Err(UsageError::Unreadable(_))
        ));
        assert_eq!(
            judge(exit(2), "", "error: unknown slash command \"/usage\"\n"),
            Err(UsageError::Exited {
                code: "status 2".into(),
                detail: "error: unknown slash command \"/usage\"".into()
            })
        );
    }
}
