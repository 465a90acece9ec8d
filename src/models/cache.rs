//! Running `agy models` (8 s, process group killed) behind the 5-minute
//! cache in `models-cache.json`, with the built-in fallback when agy cannot
//! be asked.

#[allow(unused_imports)]
use super::*;

// --- running `agy models` --------------------------------------------------------

/// Why `agy models` gave no catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("agy is not installed: {bin} was not found")]
    NotInstalled { bin: String },
    #[error("cannot start {bin}: {message}")]
    SpawnFailed { bin: String, message: String },
    #[error("`agy models` did not finish within {}s", secs)]
    TimedOut { secs: u64 },
    #[error("agy is not signed in (run `agy` once to sign in)")]
    SignedOut,
    #[error("`agy models` exited with {code}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Exited { code: String, detail: String },
    #[error("`agy models` listed no models")]
    NoModels,
}

/// Run `BIN models` with stdin closed, in its own process group, killing the
/// group after `timeout`. Returns stdout of a successful run that listed at
/// least one model.
pub fn fetch(bin: &Path, timeout: Duration) -> Result<String, Unavailable> {
    use std::os::unix::process::CommandExt;
    let bin_s = bin.display().to_string();
    let mut child = Command::new(bin)
        .arg("models")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Unavailable::NotInstalled { bin: bin_s.clone() }
            } else {
                Unavailable::SpawnFailed {
                    bin: bin_s.clone(),
                    message: e.to_string(),
                }
            }
        })?;
    let pid = child.id();
    let out = read_in_thread(child.stdout.take());
    let err = read_in_thread(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    let Some(status) = status else {
        kill_group(pid);
        let _ = child.kill();
        let _ = child.wait();
        return Err(Unavailable::TimedOut {
            secs: timeout.as_secs_f64().ceil() as u64,
        });
    };
    // Whatever else is left of the group must not keep our pipes open.
    kill_group(pid);
    let stdout = collect(out);
    let stderr = collect(err);
    let signed_out = stdout.lines().chain(stderr.lines()).any(is_sign_in);
    if !status.success() {
        if signed_out {
            return Err(Unavailable::SignedOut);
        }
        let code = match status.code() {
            Some(c) => format!("status {c}"),
            None => "a signal".to_string(),
        };
        let detail = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty() && !is_glog(l))
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(Unavailable::Exited { code, detail });
    }
    if parse_models_output(&stdout).is_empty() {
        return Err(if signed_out {
            Unavailable::SignedOut
        } else {
            Unavailable::NoModels
        });
    }
    Ok(stdout)
}

pub(super) fn kill_group(pid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if pid > 1 {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

pub(super) fn read_in_thread<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// A pipe's text; a pipe held open by an escaped grandchild is given up on.
pub(super) fn collect(rx: mpsc::Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default()
}

// --- the cache ----------------------------------------------------------------

/// `$AGY_BRIDGE_STATE_DIR`, else `~/.pi/agent/antigravity-bridge` (the
/// original's directory, so its `models-cache.json` is reused); `None`
/// without HOME.
pub fn state_dir() -> Option<PathBuf> {
    crate::config::state_dir().ok()
}

/// `models-cache.json`: the original's `{raw, savedAt}` (raw `agy models`
/// stdout, epoch milliseconds), plus `unavailable` when the entry records a
/// failed run (then `raw` is empty). Entries written by the TypeScript
/// original read fine, and ours read fine there.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    pub raw: String,
    /// Epoch milliseconds (the original wrote `Date.now()`; a fraction is
    /// accepted and dropped).
    #[serde(deserialize_with = "millis")]
    pub saved_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
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
    pub fn age(&self) -> Duration {
        match now_ms().checked_sub(self.saved_at) {
            Some(diff) => Duration::from_millis(diff),
            None => Duration::MAX,
        }
    }

    /// A real catalog from agy (not a remembered failure).
    pub fn is_real(&self) -> bool {
        self.unavailable.is_none() && !Catalog::from_output(&self.raw).is_empty()
    }
}

/// Where the catalog came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `agy models`, just now.
    Agy,
    /// The cache, written `age` ago.
    Cache { age: Duration },
    /// `agy models` failed just now; the last good catalog (`age` old) is
    /// shown instead.
    CacheAfterFailure { reason: String, age: Duration },
    /// The built-in catalog. `age` is set when the failure is a remembered
    /// one (a failure entry younger than [`FAILURE_TTL`]).
    Fallback {
        reason: String,
        age: Option<Duration>,
    },
}

/// A loaded catalog and how it was had.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub catalog: Catalog,
    pub source: Source,
    /// The cache entry served is past its TTL: refresh it in the background
    /// ([`Loader::spawn_refresh`]).
    pub stale: bool,
}

impl Loaded {
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
    /// Fresh entry: served. Stale entry: served, `stale` set. Remembered
    /// failure younger than [`FAILURE_TTL`]: fallback. Otherwise run agy now.
    CacheFirst,
    /// Run agy now; on failure show the last good cache entry, else the
    /// fallback.
    Refresh,
}

/// Loads the catalog: agy, cache and fallback.
#[derive(Debug, Clone)]
pub struct Loader {
    pub agy_bin: PathBuf,
    /// `None`: no state directory, nothing is cached.
    pub cache_path: Option<PathBuf>,
    pub timeout: Duration,
    pub ttl: Duration,
    pub failure_ttl: Duration,
}

impl Loader {
    /// `AGY_BIN` (else `agy`) and the cache in [`state_dir`].
    pub fn from_env() -> Loader {
        let agy_bin = std::env::var("AGY_BIN")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("agy"));
        Loader {
            agy_bin,
            cache_path: state_dir().map(|d| d.join(CACHE_FILE)),
            timeout: DISCOVERY_TIMEOUT,
            ttl: CACHE_TTL,
            failure_ttl: FAILURE_TTL,
        }
    }

    /// The cache entry, if there is a readable one.
    pub fn read_cache(&self) -> Option<CacheEntry> {
        let path = self.cache_path.as_ref()?;
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write the cache atomically (temporary file, mode 0600, rename).
    pub fn write_cache(&self, entry: &CacheEntry) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let Some(path) = &self.cache_path else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_file_name(format!(
            "{CACHE_FILE}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut text = serde_json::to_string_pretty(entry).map_err(std::io::Error::other)?;
            text.push('\n');
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Run agy now and cache the outcome: a good catalog replaces the entry;
    /// a failure is recorded only when there is no good entry to keep.
    pub fn fetch_and_store(&self) -> Result<Catalog, Unavailable> {
        match fetch(&self.agy_bin, self.timeout) {
            Ok(raw) => {
                let _ = self.write_cache(&CacheEntry {
                    raw: raw.clone(),
                    saved_at: now_ms(),
                    unavailable: None,
                });
                Ok(Catalog::from_output(&raw))
            }
            Err(reason) => {
                if !self.read_cache().is_some_and(|c| c.is_real()) {
                    let _ = self.write_cache(&CacheEntry {
                        raw: String::new(),
                        saved_at: now_ms(),
                        unavailable: Some(reason.to_string()),
                    });
                }
                Err(reason)
            }
        }
    }

    pub fn load(&self, policy: Policy) -> Loaded {
        let cached = self.read_cache();
        if policy == Policy::CacheFirst {
            if let Some(entry) = &cached {
                let age = entry.age();
                if let Some(reason) = &entry.unavailable {
                    if age < self.failure_ttl {
                        return Loaded {
                            catalog: Catalog::fallback(),
                            source: Source::Fallback {
                                reason: reason.clone(),
                                age: Some(age),
                            },
                            stale: false,
                        };
                    }
                } else {
                    let catalog = Catalog::from_output(&entry.raw);
                    if !catalog.is_empty() {
                        return Loaded {
                            catalog,
                            source: Source::Cache { age },
                            stale: age >= self.ttl,
                        };
                    }
                }
            }
        }
        match self.fetch_and_store() {
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

    fn lock_path(&self) -> Option<PathBuf> {
        self.cache_path
            .as_ref()
            .map(|p| p.with_file_name(format!("{CACHE_FILE}.refreshing")))
    }

    /// Start `EXE models --refresh --quiet` detached (own process group,
    /// stdio null) to rewrite the cache after this process has exited. At
    /// most one runs at a time (a lock file younger than 30 s). Returns
    /// whether one was started.
    pub fn spawn_refresh(&self, exe: &Path) -> bool {
        use std::os::unix::process::CommandExt;
        let Some(lock) = self.lock_path() else {
            return false;
        };
        if let Some(dir) = lock.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let fresh_lock = std::fs::metadata(&lock)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < REFRESH_LOCK_TTL);
        if fresh_lock {
            return false;
        }
        let _ = std::fs::remove_file(&lock);
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
            .is_err()
        {
            return false; // another process just took it
        }
        let mut cmd = Command::new(exe);
        cmd.args(["models", "--refresh", "--quiet"])
            .env("AGY_BIN", &self.agy_bin)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(dir) = self.cache_path.as_ref().and_then(|p| p.parent()) {
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
            Err(_) => {
                let _ = std::fs::remove_file(&lock);
                false
            }
        }
    }

    /// The background refresh itself: run agy, store the outcome, drop the
    /// lock.
    pub fn refresh_quietly(&self) -> Result<Catalog, Unavailable> {
        let out = self.fetch_and_store();
        if let Some(lock) = self.lock_path() {
            let _ = std::fs::remove_file(lock);
        }
        out
    }
}

/// Cache-first catalog for the provider and AskAntigravity: the cache when
/// there is one (stale or not: the next `agy-bridge models` refreshes it),
/// else `agy models` now, else the fallback.
pub fn catalog() -> Catalog {
    Loader::from_env().load(Policy::CacheFirst).catalog
}
