//! Which conversation a run writes, decided as agy decides it: a new one,
//! an existing one resumed (`--conversation`, `-c`), or a new one after a
//! warning when agy does not have the one named; and, when a test asks
//! (`FAKE_AGY_KEEP_CONVERSATIONS`), the oldest conversations dropped as
//! agy drops them beyond about 500. Kept apart from the replay because a
//! stdin session decides it once for all its turns.

use super::knobs::env;
use super::knobs::env_flag;
use super::{err_raw, Fatal};
use crate::cli::PrintArgs;
use std::path::{Path, PathBuf};

/// Where conversation databases go: `AGY_CONVERSATIONS_DIR`, else agy's own
/// `$HOME/.gemini/antigravity-cli/conversations`.
pub fn conversations_dir() -> Result<PathBuf, Fatal> {
    if let Some(dir) = env("AGY_CONVERSATIONS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = env("HOME").ok_or_else(|| {
        Fatal::internal("HOME is not set (or set AGY_CONVERSATIONS_DIR)".to_string())
    })?;
    Ok(Path::new(&home).join(".gemini/antigravity-cli/conversations"))
}

/// The most recently written conversation, for `-c/--continue`.
fn latest_conversation(dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".db")?.to_string();
            let mtime = e.metadata().ok()?.modified().ok()?;
            Some((mtime, id))
        })
        .max()
        .map(|(_, id)| id)
}

/// Which conversation a run writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A new conversation: no `--conversation`, or `-c` with none to
    /// continue.
    New,
    /// An existing conversation, resumed: its earlier turns are in its
    /// database, so the recording's `pre` commits are skipped.
    Existing,
    /// `--conversation` named a conversation agy does not have: agy warns
    /// and runs the turn in a new conversation, without the earlier turns
    /// (docs/agy-format.md, "Resume"), so `pre` commits are skipped too.
    Missing,
}

/// The conversation a stdin session's turns write, decided once at its
/// start (its `init` names it before any turn runs).
#[derive(Debug, Clone)]
pub struct Conversation {
    pub target: Target,
    pub id: String,
}

impl Conversation {
    /// Decide it as agy does for the command line (`--conversation`, `-c`,
    /// else a new one).
    pub fn for_args(args: &PrintArgs) -> Result<Conversation, Fatal> {
        let (target, id) = resolve_conversation(args, &conversations_dir()?);
        Ok(Conversation {
            target,
            id: id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        })
    }

    /// The same conversation for the session's next turn: it exists now.
    pub fn next_turn(&self) -> Conversation {
        Conversation {
            target: Target::Existing,
            id: self.id.clone(),
        }
    }
}

/// Which turn a run replays and where.
#[derive(Debug, Clone, Default)]
pub struct TurnPlan {
    /// The recording's turn to replay (`-p` replays the first).
    pub turn: u32,
    /// The stdin session's conversation, whose `init` it printed; `None`:
    /// decide it from the command line and print `init` here.
    pub conversation: Option<Conversation>,
}

/// The conversation a run writes and its id (`None`: a fresh one).
pub(super) fn resolve_conversation(args: &PrintArgs, conv_dir: &Path) -> (Target, Option<String>) {
    let resume = match &args.conversation {
        Some(id) => Some(id.clone()),
        None if args.continue_latest => latest_conversation(conv_dir),
        None => None,
    };
    // `FAKE_AGY_FORGET_CONVERSATIONS=1`: agy's own record of every earlier
    // conversation is gone (expired, another machine), whatever files the
    // directory still holds.
    let forgot = env_flag("FAKE_AGY_FORGET_CONVERSATIONS");
    match resume {
        Some(id) if !forgot && conv_dir.join(format!("{id}.db")).is_file() => {
            (Target::Existing, Some(id))
        }
        Some(id) => {
            // agy 1.1.9, 1.2.7 and 1.3.1 say exactly this, and go on.
            err_raw(&format!("warning: conversation \"{id}\" not found\n"));
            (Target::Missing, None)
        }
        None => (Target::New, None),
    }
}

/// Drop the oldest conversation databases of `dir` (by modification time,
/// each with its `-wal` and `-shm`) so that `keep` are left once `newest`
/// (the one this run is creating) is there: agy seems to keep about 500 and drop
/// the oldest (docs/agy-format.md, "Conversations agy keeps"). A file that
/// cannot be removed is left: agy's own housekeeping is not a turn's
/// failure.
pub(super) fn prune(dir: &Path, keep: usize, newest: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut others: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "db") && p != newest)
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    // Newest first: the ones past `keep - 1` (the new one counts) go.
    others.sort_by(|a, b| b.cmp(a));
    for (_, db) in others.into_iter().skip(keep.saturating_sub(1)) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = db.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}
