//! agy's version, asked of each agy binary once and remembered on disk.
//!
//! Whether a turn may bind by stream-json, or pass `--disable-slash-commands`,
//! depends on the installed agy's version and `--help`
//! ([`agy_format::features`] says which). Asking `agy --version` costs a process start on every turn, and
//! every `agy-bridge stream` turn is its own process, so an in-process cache
//! does not help: the answer is kept in `agy-version.json` in the state
//! directory, keyed by the binary itself ([`BinaryKey`]: its resolved path,
//! size and modification time). Installing, upgrading or replacing agy
//! changes the key and the next turn asks again. Only good answers are kept:
//! a missing agy or a failed probe is asked again next time. `--help` is
//! asked together with `--version` (an entry written before the bridge read
//! it lacks it and is completed on the next probe).
//!
//! [`BinaryKey`] is also what keys the `agy models` cache (see
//! [`crate::pi::models`]), so that an answer about one agy never outlives it.

use crate::process::short::{self, Program};
use crate::state::file::{self, StateFile, StateWarning};
use agy_format::features::{AgyFeatures, Version};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The first agy version known to print its conversation id with
/// `--output-format stream-json` (docs/agy-format.md, "stream-json"); the
/// unit tests hold the version parser to it.
#[cfg(test)]
pub(crate) const STREAM_JSON_MIN_VERSION: Version = agy_format::features::STREAM_JSON_OUTPUT;

/// The cache file's name inside the state directory.
pub(crate) const VERSION_CACHE_FILE: &str = "agy-version.json";

/// How long `agy --version` may take before it counts as a failed probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Parse `agy --version` output (`1.2.8`, maybe with a prefix) to a triple.
pub fn parse_version(s: &str) -> Option<Version> {
    let token = s.split_whitespace().find(|t| {
        t.trim_start_matches('v')
            .starts_with(|c: char| c.is_ascii_digit())
    })?;
    let mut parts = token.trim_start_matches('v').split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

/// Which agy binary an answer is about: the file `AGY_BIN` (or `agy` on
/// PATH) resolves to, symlinks followed, with its size and modification
/// time. Any change to the file gives a different key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinaryKey {
    /// The binary's path, symlinks followed.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, whole seconds.
    pub mtime_s: i64,
    /// Its modification time's nanoseconds.
    pub mtime_nsec: i64,
}

impl BinaryKey {
    /// The key of the binary `bin` names, found as the OS would run it: a
    /// name without a slash is looked up on PATH. `None` when there is no
    /// such executable file (agy is not installed there).
    pub(crate) fn of(bin: &Path) -> Option<BinaryKey> {
        let found = crate::process::tree::find_program(bin)?;
        let path = std::fs::canonicalize(found).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return None;
        }
        Some(BinaryKey {
            path,
            size: meta.len(),
            mtime_s: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        })
    }
}

/// One remembered answer: the binary as it was when asked, its version and
/// what its `--help` offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    binary: BinaryKey,
    version: Version,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    help: Option<HelpFacts>,
}

/// What the bridge reads from `agy --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HelpFacts {
    disable_slash_commands: bool,
}

impl Entry {
    fn features(&self) -> AgyFeatures {
        AgyFeatures {
            version: Some(self.version),
            disable_slash_commands: self.help.is_some_and(|h| h.disable_slash_commands),
        }
    }
}

/// A state file of answers about agy binaries: one JSON entry per resolved
/// binary path, each carrying the [`BinaryKey`] it is about as its `binary`
/// field, and read back only for exactly that binary. `agy-version.json`
/// and the hooks proof (`crate::gate::proof`) are such files. `None`
/// inside: no state directory, nothing is remembered.
#[derive(Debug, Clone)]
pub(crate) struct PerBinaryFile {
    file: Option<StateFile>,
}

impl PerBinaryFile {
    /// The file `name` in `dir`.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn at(dir: &Path, name: &'static str) -> PerBinaryFile {
        PerBinaryFile {
            file: Some(StateFile::new(dir, name)),
        }
    }

    /// The file `name` in the bridge's state directory, if there is one
    /// (`None`: nothing is remembered).
    pub(crate) fn in_dir(dir: Option<&Path>, name: &'static str) -> PerBinaryFile {
        PerBinaryFile {
            file: dir.map(|dir| StateFile::new(dir, name)),
        }
    }

    /// The entry remembered for exactly `key` (blocking file I/O).
    pub(crate) fn get<T: serde::de::DeserializeOwned>(&self, key: &BinaryKey) -> Option<T> {
        let file = self.file.as_ref()?;
        let map = file.read(None, &mut Vec::new()).ok()?;
        let value = map.get(&path_key(key))?;
        let binary: BinaryKey = serde_json::from_value(value.get("binary")?.clone()).ok()?;
        if binary != *key {
            return None;
        }
        serde_json::from_value(value.clone()).ok()
    }

    /// Remember `entry` (whose `binary` field is `key`) under the file's
    /// lock (blocking file I/O). Entries for binaries that no longer exist
    /// are dropped.
    pub(crate) fn put<T: Serialize>(
        &self,
        key: &BinaryKey,
        entry: &T,
    ) -> Result<(), file::StateError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let lock = file.lock()?;
        let mut warnings: Vec<StateWarning> = Vec::new();
        let mut map = file.read(Some(&lock), &mut warnings)?;
        map.retain(|path, _| Path::new(path).exists());
        let Ok(value) = serde_json::to_value(entry) else {
            return Ok(());
        };
        map.insert(path_key(key), value);
        file.write(&lock, &map)
    }
}

/// The on-disk version cache: `agy-version.json`, one entry per resolved
/// binary path (`PerBinaryFile`).
#[derive(Debug, Clone)]
pub(crate) struct VersionCache {
    file: PerBinaryFile,
}

impl VersionCache {
    /// The cache in the bridge's state directory, if there is one (`None`:
    /// agy is asked each time).
    pub fn in_dir(dir: Option<&Path>) -> VersionCache {
        VersionCache {
            file: PerBinaryFile::in_dir(dir, VERSION_CACHE_FILE),
        }
    }

    fn entry(&self, key: &BinaryKey) -> Option<Entry> {
        self.file.get(key)
    }

    /// The remembered features of exactly this binary, `--help` included
    /// (blocking file I/O); `None` when either is not remembered.
    pub(crate) fn lookup_features(&self, key: &BinaryKey) -> Option<AgyFeatures> {
        self.entry(key)
            .filter(|e| e.help.is_some())
            .map(|e| e.features())
    }

    /// Remember `version` for `key` (blocking file I/O), under the file's
    /// lock. Entries for binaries that no longer exist are dropped.
    pub(crate) fn store(&self, key: &BinaryKey, version: Version) -> Result<(), file::StateError> {
        self.store_entry(Entry {
            binary: key.clone(),
            version,
            help: None,
        })
    }

    /// Remember `features` (version and `--help`) for `key`.
    fn store_features(
        &self,
        key: &BinaryKey,
        version: Version,
        features: AgyFeatures,
    ) -> Result<(), file::StateError> {
        self.store_entry(Entry {
            binary: key.clone(),
            version,
            help: Some(HelpFacts {
                disable_slash_commands: features.disable_slash_commands,
            }),
        })
    }

    fn store_entry(&self, entry: Entry) -> Result<(), file::StateError> {
        self.file.put(&entry.binary, &entry)
    }

    /// The version of the agy `bin` names: remembered, else asked now and
    /// remembered. `None` when agy is not there or its answer is not a
    /// version (neither is remembered), or `cancel` fired while agy was
    /// asked (agy is stopped then). File I/O runs on tokio's blocking
    /// threads.
    pub(crate) async fn version(&self, bin: &Path, cancel: &CancellationToken) -> Option<Version> {
        self.features(bin, cancel).await.and_then(|f| f.version)
    }

    /// What the agy `bin` names offers: remembered, else asked now
    /// (`--version` and `--help` at once) and remembered. `None` when agy is
    /// not there or its `--version` is not a version, or `cancel` fired
    /// while agy was asked (nothing is remembered then).
    pub(crate) async fn features(
        &self,
        bin: &Path,
        cancel: &CancellationToken,
    ) -> Option<AgyFeatures> {
        let (this, bin) = (self.clone(), bin.to_path_buf());
        let (key, known) = tokio::task::spawn_blocking(move || {
            let key = BinaryKey::of(&bin)?;
            let known = this.lookup_features(&key);
            Some((key, known))
        })
        .await
        .ok()??;
        if known.is_some() {
            return known;
        }
        let (version, help) = tokio::join!(probe(&key.path, cancel), probe_help(&key.path, cancel));
        let version = version?;
        let features = AgyFeatures::from_probe(Some(version), help.as_deref().unwrap_or(""));
        let this = self.clone();
        // Remember it only if the binary did not change while it was asked,
        // and `--help` only if it answered.
        let _ = tokio::task::spawn_blocking(move || {
            if BinaryKey::of(&key.path).as_ref() == Some(&key) {
                let _ = match help {
                    Some(_) => this.store_features(&key, version, features),
                    None => this.store(&key, version),
                };
            }
        })
        .await;
        Some(features)
    }
}

/// The cache's key for a binary: its resolved path as text.
fn path_key(key: &BinaryKey) -> String {
    key.path.to_string_lossy().into_owned()
}

/// Run `BIN --version` (a short program: its tree ended after
/// [`PROBE_TIMEOUT`], or when `cancel` fires).
async fn probe(bin: &Path, cancel: &CancellationToken) -> Option<Version> {
    let program = Program::new(bin, ["--version"], PROBE_TIMEOUT);
    match short::run(&program, cancel).await {
        Ok(out) if out.status.success() => parse_version(&String::from_utf8_lossy(&out.stdout)),
        _ => None,
    }
}

/// `BIN --help`, stdout and stderr together (where a CLI prints its help
/// differs); `None` when it did not answer in time. Its exit code is not
/// read: some CLIs exit 2 after printing help.
async fn probe_help(bin: &Path, cancel: &CancellationToken) -> Option<String> {
    let program = Program::new(bin, ["--help"], PROBE_TIMEOUT);
    let out = short::run(&program, cancel).await.ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Some(text)
}

/// What the installed agy offers, through the cache in the state directory
/// `state_dir`; an agy whose version cannot be had (or was not had before
/// `cancel` fired) offers nothing version-gated.
pub async fn agy_features(
    state_dir: Option<&Path>,
    bin: &Path,
    cancel: &CancellationToken,
) -> AgyFeatures {
    VersionCache::in_dir(state_dir)
        .features(bin, cancel)
        .await
        .unwrap_or_default()
}

/// [`agy_features`] from the cache alone (blocking file I/O, no agy run):
/// `None` when they are not remembered.
pub fn features_remembered(state_dir: Option<&Path>, bin: &Path) -> Option<AgyFeatures> {
    let cache = VersionCache::in_dir(state_dir);
    cache.lookup_features(&BinaryKey::of(bin)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::io::Write;

    fn never() -> CancellationToken {
        CancellationToken::new()
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.2.8\n"), Some((1, 2, 8)));
        assert_eq!(parse_version("agy version v1.1.14"), Some((1, 1, 14)));
        assert_eq!(parse_version("1.3"), Some((1, 3, 0)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("1.1.7").is_some_and(|v| v < STREAM_JSON_MIN_VERSION));
        assert!(parse_version("1.1.8").is_some_and(|v| v >= STREAM_JSON_MIN_VERSION));
    }

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    #[test]
    fn a_binary_key_follows_symlinks_and_changes_with_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = script(dir.path(), "agy-1.2.8", "echo 1.2.8");
        let link = dir.path().join("agy");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let key = BinaryKey::of(&link).expect("key");
        assert_eq!(key.path, std::fs::canonicalize(&real).expect("canonical"));
        assert_eq!(BinaryKey::of(&real), Some(key.clone()));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&real)
            .expect("open");
        writeln!(f, "# grown").expect("append");
        drop(f);
        let grown = BinaryKey::of(&link).expect("key");
        assert_ne!(grown, key);
        assert_eq!(grown.size, key.size + "# grown\n".len() as u64);
        // Missing, a directory, a file that is not executable: no agy.
        assert_eq!(BinaryKey::of(&dir.path().join("nope")), None);
        assert_eq!(BinaryKey::of(dir.path()), None);
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "x").expect("write");
        assert_eq!(BinaryKey::of(&plain), None);
        // A bare name is looked up on PATH, as exec does.
        assert!(BinaryKey::of(Path::new("sh")).is_some());
        assert_eq!(BinaryKey::of(Path::new("no-such-agy-anywhere")), None);
    }

    #[tokio::test]
    async fn answers_are_remembered_per_binary_and_failures_are_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let log = dir.path().join("asked.log");
        // Each run logs what it was asked; `--version` counts a probe.
        let body = |v: &str| format!("echo \"$1\" >> {}\necho {v}", log.display());
        let asked = || {
            std::fs::read_to_string(&log)
                .map(|s| s.lines().filter(|l| *l == "--version").count())
                .unwrap_or(0)
        };
        let agy = script(dir.path(), "agy", &body("1.2.17"));
        let cache = VersionCache::in_dir(Some(&state));
        assert_eq!(cache.version(&agy, &never()).await, Some((1, 2, 17)));
        assert_eq!(asked(), 1);
        assert_eq!(cache.version(&agy, &never()).await, Some((1, 2, 17)));
        assert_eq!(asked(), 1, "agy was asked again instead of the cache");
        // Another process's view: a fresh handle on the same directory.
        assert_eq!(
            VersionCache::in_dir(Some(&state))
                .version(&agy, &never())
                .await,
            Some((1, 2, 17))
        );
        assert_eq!(asked(), 1);
        // Replaced by an older agy (different size): asked again.
        let agy = script(dir.path(), "agy", &body("1.1.7"));
        assert_eq!(cache.version(&agy, &never()).await, Some((1, 1, 7)));
        assert_eq!(asked(), 2);
        // A probe that fails is not remembered.
        let broken = script(
            dir.path(),
            "broken",
            &format!("echo \"$1\" >> {}\nexit 1", log.display()),
        );
        assert_eq!(cache.version(&broken, &never()).await, None);
        assert_eq!(cache.version(&broken, &never()).await, None);
        assert_eq!(asked(), 4);
        // Nor is a missing agy; nor does it disturb what is remembered.
        assert_eq!(
            cache.version(&dir.path().join("gone"), &never()).await,
            None
        );
        assert_eq!(cache.version(&agy, &never()).await, Some((1, 1, 7)));
        assert_eq!(asked(), 4);
        let text = std::fs::read_to_string(state.join(VERSION_CACHE_FILE)).expect("cache file");
        let json: Value = serde_json::from_str(&text).expect("json");
        let entries = json.as_object().expect("object");
        assert_eq!(entries.len(), 1, "{text}");
        let entry = &entries[&path_key(&BinaryKey::of(&agy).expect("key"))];
        assert_eq!(entry["version"], serde_json::json!([1, 1, 7]));
        assert_eq!(
            entry["help"],
            serde_json::json!({"disableSlashCommands": false})
        );
    }

    #[tokio::test]
    async fn help_is_asked_once_with_the_version_and_names_the_slash_flag() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("asked.log");
        let agy = script(
            dir.path(),
            "agy",
            &format!(
                "echo \"$1\" >> {}\ncase \"$1\" in --help) echo '      --disable-slash-commands   no / commands' >&2;; *) echo 1.2.14;; esac",
                log.display()
            ),
        );
        let cache = VersionCache::in_dir(Some(&dir.path().join("state")));
        let features = cache.features(&agy, &never()).await.expect("features");
        assert_eq!(features.version, Some((1, 2, 14)));
        assert!(
            features.disable_slash_commands,
            "read from --help on stderr"
        );
        assert_eq!(cache.features(&agy, &never()).await, Some(features));
        let asked = std::fs::read_to_string(&log).expect("log");
        assert_eq!(asked.lines().collect::<Vec<_>>().len(), 2, "{asked}");
        // An entry from before --help was read is completed, not trusted.
        let old = VersionCache::in_dir(Some(&dir.path().join("old")));
        let key = BinaryKey::of(&agy).expect("key");
        old.store(&key, (1, 2, 14)).expect("store");
        assert_eq!(old.lookup_features(&key), None);
        assert!(
            old.features(&agy, &never())
                .await
                .expect("features")
                .disable_slash_commands
        );
    }
}
