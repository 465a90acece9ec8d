//! Session bindings: which agy conversation a pi session continues.
//!
//! Stored in `sessions.json` in the state directory (see [`crate::state::file`]
//! for where that is and how files are written, locked and recovered), in the
//! format of the TypeScript bridge
//! ([EstebanForge/pi-antigravity-bridge](https://github.com/EstebanForge/pi-antigravity-bridge)):
//!
//! ```json
//! {
//!   "sid:5d0c…": {
//!     "conversationId": "0f3c2a9e-…",
//!     "lastStepIdx": 12,
//!     "lastMessageCount": 4
//!   }
//! }
//! ```
//!
//! - The key is `sid:<pi session id>`, else `cwd:<cwd>` ([`SessionKey`]).
//! - `lastStepIdx` is the last agy step already streamed into pi (-1: none;
//!   a missing value reads as -1, as in the TypeScript bridge).
//! - `lastMessageCount` is the pi message-count watermark: how many of pi's
//!   messages the last turn covered (missing, as in older files, reads as 0).
//! - `agyContextLost` (ours; absent means false): agy did not have the
//!   conversation the last turn resumed and began this one without the
//!   earlier context, so the next turn sends pi's record of all of it.
//! - Other fields in an entry are kept when the entry is rewritten.
//!
//! An entry whose conversation id does not pass
//! [`ConversationId::parse`], or whose numbers are not integers in range, is
//! dropped with a [`StateWarning`] (and left out of the next write). A file
//! that is not a JSON object is set aside whole.
//!
//! Every change is a read-modify-write of the one key it touches, under the
//! file's exclusive lock and on a fresh read, so processes updating different
//! keys at the same time never lose each other's updates. Reads take no lock
//! (writes are atomic renames).
//!
//! **The binding rule** the provider relies on: a run that failed to bind a
//! conversation never overwrites a good binding. Record a turn with
//! [`SessionStore::update_if_bound`], which does nothing without a
//! conversation id.

use crate::state::file::{
    json_kind, lock_file, StateError, StateFile, StateLock, StateWarning, SESSIONS_FILE,
};
use agy_format::ids::ConversationId;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const CONVERSATION_ID: &str = "conversationId";
const LAST_STEP_IDX: &str = "lastStepIdx";
const MESSAGE_COUNT: &str = "lastMessageCount";
const LEGACY_MESSAGE_COUNT: &str = "messageCount";
const CONTEXT_LOST: &str = "agyContextLost";

/// Session keys.
pub struct SessionKey;

impl SessionKey {
    /// `sid:<session_id>` when pi gave a (non-blank) session id, else
    /// `cwd:<cwd>` (one conversation per directory, as in the TypeScript bridge).
    pub fn for_request(session_id: Option<&str>, cwd: &Path) -> String {
        match session_id.filter(|s| !s.trim().is_empty()) {
            Some(sid) => format!("sid:{sid}"),
            None => format!("cwd:{}", cwd.to_string_lossy()),
        }
    }
}

/// Held while a session's turn runs; see `SessionStore::try_lock_turn`.
pub struct TurnLock {
    _lock: StateLock,
}

impl TurnLock {
    /// Block until the turn lock at `path` (a
    /// [`SessionStore::turn_lock_path`]) is free, and take it. A blocking
    /// `flock`: call it on a thread of its own, never a runtime's worker.
    pub(crate) fn wait_at(path: &Path) -> Result<TurnLock, StateError> {
        match lock_file(path, true)? {
            Some(lock) => Ok(TurnLock { _lock: lock }),
            // A waiting lock_file only returns once it holds the lock.
            None => Err(StateError::Lock {
                path: path.to_path_buf(),
                source: nix::errno::Errno::EWOULDBLOCK,
            }),
        }
    }
}

/// FNV-1a: a lock file name per session key, the same in every process and
/// every build (std's hasher promises neither).
fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEntry {
    /// The agy conversation the session is bound to.
    pub conversation_id: ConversationId,
    /// The last agy step idx already streamed (-1: none).
    pub last_step_idx: i64,
    /// How many pi messages the last turn covered.
    pub message_count: u64,
    /// agy lost the earlier conversation (see the module comment).
    pub context_lost: bool,
}

/// An entry as stored: ours plus whatever other fields it had.
#[derive(Debug, Clone)]
struct Stored {
    entry: SessionEntry,
    extra: Map<String, Value>,
}

impl Stored {
    fn to_json(&self) -> Value {
        let mut obj = self.extra.clone();
        obj.insert(
            CONVERSATION_ID.into(),
            Value::from(self.entry.conversation_id.as_str()),
        );
        obj.insert(LAST_STEP_IDX.into(), Value::from(self.entry.last_step_idx));
        obj.insert(MESSAGE_COUNT.into(), Value::from(self.entry.message_count));
        obj.remove(CONTEXT_LOST);
        if self.entry.context_lost {
            obj.insert(CONTEXT_LOST.into(), Value::Bool(true));
        }
        Value::Object(obj)
    }
}

/// An integer, also when JSON spells it `3.0`.
fn as_integer(v: &Value) -> Option<i128> {
    if let Some(i) = v.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = v.as_u64() {
        return Some(u.into());
    }
    let f = v.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i128)
}

fn parse_entry(value: Value) -> Result<Stored, String> {
    let mut obj = match value {
        Value::Object(obj) => obj,
        other => return Err(format!("expected an object, found {}", json_kind(&other))),
    };
    let conversation_id = match obj.remove(CONVERSATION_ID) {
        Some(Value::String(s)) => ConversationId::parse(&s).map_err(|e| e.to_string())?,
        Some(other) => {
            return Err(format!(
                "conversationId: expected a string, found {}",
                json_kind(&other)
            ))
        }
        None => return Err("no conversationId".into()),
    };
    let last_step_idx = match obj.remove(LAST_STEP_IDX) {
        None | Some(Value::Null) => -1,
        Some(v) => match as_integer(&v).and_then(|i| i64::try_from(i).ok()) {
            Some(i) if i >= -1 => i,
            _ => return Err(format!("lastStepIdx: expected an integer >= -1, found {v}")),
        },
    };
    // `lastMessageCount` is the TypeScript bridge's name; an early build of ours
    // wrote `messageCount`, which still reads.
    let legacy = obj.remove(LEGACY_MESSAGE_COUNT);
    let message_count = match obj.remove(MESSAGE_COUNT).or(legacy) {
        None | Some(Value::Null) => 0,
        Some(v) => match as_integer(&v).and_then(|i| u64::try_from(i).ok()) {
            Some(n) => n,
            None => {
                return Err(format!(
                    "lastMessageCount: expected an integer >= 0, found {v}"
                ))
            }
        },
    };
    let context_lost = match obj.remove(CONTEXT_LOST) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return Err(format!(
                "{CONTEXT_LOST}: expected true or false, found {}",
                json_kind(&other)
            ))
        }
    };
    Ok(Stored {
        entry: SessionEntry {
            conversation_id,
            last_step_idx,
            message_count,
            context_lost,
        },
        extra: obj,
    })
}

/// sessions.json in one state directory. Cheap to create; holds no state of
/// its own besides the warnings collected so far (see
/// [`take_warnings`](SessionStore::take_warnings)).
#[derive(Debug)]
pub struct SessionStore {
    file: StateFile,
    warnings: Mutex<Vec<StateWarning>>,
}

impl SessionStore {
    /// The store in `dir`. Touches nothing until used.
    pub fn open(dir: impl AsRef<Path>) -> SessionStore {
        SessionStore {
            file: StateFile::new(dir.as_ref(), SESSIONS_FILE),
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Take the turn lock of session `key` if nobody holds it: one agy turn
    /// per session at a time, across processes, so two turns never resume
    /// the same conversation at once and stream each other's steps. The
    /// lock is an `flock` (it dies with its holder, crash included) held by
    /// the returned guard.
    pub(crate) fn try_lock_turn(&self, key: &str) -> Result<Option<TurnLock>, StateError> {
        Ok(lock_file(&self.turn_lock_path(key), false)?.map(|lock| TurnLock { _lock: lock }))
    }

    /// Where session `key`'s turn lock lives, for [`TurnLock::wait_at`].
    pub(crate) fn turn_lock_path(&self, key: &str) -> PathBuf {
        let dir = self.file.path().parent().unwrap_or(Path::new("."));
        dir.join("turns").join(format!("{:016x}.lock", fnv1a(key)))
    }

    /// The sessions file it reads and writes.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Problems found by the operations so far (corrupt file set aside,
    /// entries dropped), oldest first; clears them.
    pub fn take_warnings(&self) -> Vec<StateWarning> {
        let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *w)
    }

    fn note(&self, mut new: Vec<StateWarning>) {
        if !new.is_empty() {
            let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
            w.append(&mut new);
        }
    }

    /// Parse the file's map; invalid entries become warnings.
    fn parse(
        &self,
        map: Map<String, Value>,
        warnings: &mut Vec<StateWarning>,
    ) -> BTreeMap<String, Stored> {
        let mut out = BTreeMap::new();
        for (key, value) in map {
            match parse_entry(value) {
                Ok(stored) => {
                    out.insert(key, stored);
                }
                Err(reason) => warnings.push(StateWarning::DroppedEntry {
                    path: self.file.path().to_path_buf(),
                    key,
                    reason,
                }),
            }
        }
        out
    }

    fn read(&self) -> Result<BTreeMap<String, Stored>, StateError> {
        let mut warnings = Vec::new();
        let map = self.file.read(None, &mut warnings);
        let parsed = map.map(|m| self.parse(m, &mut warnings));
        self.note(warnings);
        parsed
    }

    /// Read-modify-write under the lock. `f` returns whether it changed
    /// anything (nothing is written otherwise) and a result.
    fn modify<T>(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, Stored>) -> (bool, T),
    ) -> Result<T, StateError> {
        let mut warnings = Vec::new();
        let result = (|| {
            let lock = self.file.lock()?;
            let map = self.file.read(Some(&lock), &mut warnings)?;
            let mut entries = self.parse(map, &mut warnings);
            let (changed, out) = f(&mut entries);
            if changed {
                let map: Map<String, Value> = entries
                    .iter()
                    .map(|(k, s)| (k.clone(), s.to_json()))
                    .collect();
                self.file.write(&lock, &map)?;
            }
            Ok(out)
        })();
        self.note(warnings);
        result
    }

    /// The binding for `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<SessionEntry>, StateError> {
        Ok(self.read()?.remove(key).map(|s| s.entry))
    }

    /// Every valid binding, sorted by key.
    pub fn list(&self) -> Result<Vec<(String, SessionEntry)>, StateError> {
        Ok(self
            .read()?
            .into_iter()
            .map(|(k, s)| (k, s.entry))
            .collect())
    }

    /// Set `key`'s binding (other fields of an existing entry are kept). A
    /// `last_step_idx` below -1 is stored as -1.
    pub fn update(&self, key: &str, entry: &SessionEntry) -> Result<(), StateError> {
        let entry = &SessionEntry {
            last_step_idx: entry.last_step_idx.max(-1),
            ..entry.clone()
        };
        self.modify(|entries| {
            match entries.get_mut(key) {
                Some(stored) => stored.entry = entry.clone(),
                None => {
                    entries.insert(
                        key.to_string(),
                        Stored {
                            entry: entry.clone(),
                            extra: Map::new(),
                        },
                    );
                }
            }
            (true, ())
        })
    }

    /// Record a finished turn, keeping the binding rule: without a
    /// conversation id (the run never bound one) nothing is written and a
    /// good binding stays; with one, it is validated and stored. Returns
    /// whether anything was stored.
    pub fn update_if_bound(
        &self,
        key: &str,
        conversation_id: Option<&str>,
        last_idx: i64,
        message_count: u64,
    ) -> Result<bool, StateError> {
        self.record_turn(key, conversation_id, last_idx, message_count, false)
    }

    /// [`update_if_bound`](SessionStore::update_if_bound), also saying
    /// whether agy lost the earlier context this turn (the next turn then
    /// sends all of pi's record).
    pub(crate) fn record_turn(
        &self,
        key: &str,
        conversation_id: Option<&str>,
        last_idx: i64,
        message_count: u64,
        context_lost: bool,
    ) -> Result<bool, StateError> {
        let Some(id) = conversation_id else {
            return Ok(false);
        };
        let entry = SessionEntry {
            conversation_id: ConversationId::parse(id)?,
            last_step_idx: last_idx,
            message_count,
            context_lost,
        };
        self.update(key, &entry)?;
        Ok(true)
    }

    /// Forget `key`'s binding. Returns whether there was one.
    pub fn remove(&self, key: &str) -> Result<bool, StateError> {
        self.modify(|entries| {
            let had = entries.remove(key).is_some();
            (had, had)
        })
    }

    /// Forget every binding (each pi session starts a fresh agy conversation
    /// on its next turn). Returns how many there were.
    pub fn clear(&self) -> Result<usize, StateError> {
        self.modify(|entries| {
            let n = entries.len();
            entries.clear();
            (true, n)
        })
    }
}
