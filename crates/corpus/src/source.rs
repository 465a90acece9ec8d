//! What a path holds, and every step row of the conversation in it: a
//! conversation database (possibly one agy is still writing) or a
//! recording replayed into memory. `agy-bridge decode` renders these rows;
//! drift reads whole sources after [`detect`] has told them apart.
//!
//! Databases are opened read-only through
//! [`agy_format::database::open_read_only`]; this module never writes, never
//! holds a transaction and never checkpoints, so reading a database agy is
//! writing cannot block or disturb agy.

use crate::recording::{Recording, RecordingError};
use agy_format::database::{self, ReadError};
use agy_format::steps::StepRow;
use serde::Serialize;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The first 16 bytes of every SQLite database file.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What a decoded path turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A conversation database (full or legacy 4-column `steps` table).
    Database,
    /// A recording, replayed into an in-memory database.
    Recording,
}

/// Why a path could not be decoded at all. (A step whose payload does not
/// decode is not one of these: it is reported on that step.)
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: no such file")]
    Missing { path: PathBuf },
    #[error("{path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is a SQLite file but not a readable conversation database: {source}")]
    Database { path: PathBuf, source: ReadError },
    #[error("{path} is neither a SQLite database nor an agy-bridge recording ({reason})")]
    NotRecognised { path: PathBuf, reason: String },
    #[error("cannot replay recording {path}: {source}")]
    Replay {
        path: PathBuf,
        source: RecordingError,
    },
    /// The header's conversation is not a database the recording writes
    /// (decoding it would show "steps: 0" as if agy had done nothing).
    #[error("recording {path} names database {root} as its conversation, but writes only {}", .written.join(", "))]
    UnknownDatabase {
        path: PathBuf,
        root: String,
        written: Vec<String>,
    },
}

/// Decide from its first bytes whether `path` is a database or (maybe) a
/// recording. Missing files and directories are errors.
pub fn detect(path: &Path) -> Result<SourceKind, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| io_error(path, source))?;
    if !meta.is_file() {
        return Err(LoadError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    std::fs::File::open(path)
        .and_then(|f| f.take(SQLITE_MAGIC.len() as u64).read_to_end(&mut head))
        .map_err(|source| io_error(path, source))?;
    Ok(if head.as_slice() == SQLITE_MAGIC {
        SourceKind::Database
    } else {
        SourceKind::Recording
    })
}

fn io_error(path: &Path, source: io::Error) -> LoadError {
    if source.kind() == io::ErrorKind::NotFound {
        LoadError::Missing {
            path: path.to_path_buf(),
        }
    } else {
        LoadError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Every step row of the conversation at `path`, in idx order. For a
/// recording that is its root conversation as the finished run left it.
pub fn read_rows(path: &Path) -> Result<(SourceKind, Vec<StepRow>), LoadError> {
    let kind = detect(path)?;
    let rows = match kind {
        SourceKind::Database => read_database(path)?,
        SourceKind::Recording => read_recording(path)?,
    };
    Ok((kind, rows))
}

fn read_database(path: &Path) -> Result<Vec<StepRow>, LoadError> {
    let db_error = |source| LoadError::Database {
        path: path.to_path_buf(),
        source,
    };
    let conn = database::open_read_only(path).map_err(db_error)?;
    // A one-shot read may wait a little for a lock (a rollback-journal writer
    // mid-commit, or WAL recovery); waiting on our side never blocks agy.
    let _ = conn.busy_timeout(std::time::Duration::from_secs(2));
    // A read-only connection cannot checkpoint anyway; say so explicitly so
    // that closing it can never touch agy's WAL, whatever SQLite decides.
    // Failing to set it is harmless, so the result is ignored.
    let _ = conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    );
    database::read_all(&conn, path).map_err(db_error)
}

fn read_recording(path: &Path) -> Result<Vec<StepRow>, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| io_error(path, source))?;
    let not_recognised = |reason: String| LoadError::NotRecognised {
        path: path.to_path_buf(),
        reason,
    };
    let text =
        String::from_utf8(bytes).map_err(|e| not_recognised(format!("not UTF-8 text: {e}")))?;
    let recording = Recording::parse(&text).map_err(|e| not_recognised(e.to_string()))?;
    let replay = |source| LoadError::Replay {
        path: path.to_path_buf(),
        source,
    };
    let root = &recording.header.root_conversation;
    let written: Vec<String> = recording
        .conversations()
        .into_iter()
        .filter(|db| recording.commits.iter().any(|c| &c.db == db))
        .collect();
    if !written.is_empty() && !written.contains(root) {
        return Err(LoadError::UnknownDatabase {
            path: path.to_path_buf(),
            root: root.clone(),
            written,
        });
    }
    let conn = recording
        .final_database(&recording.header.root_conversation)
        .map_err(replay)?;
    database::read_all(&conn, path).map_err(|e| LoadError::Database {
        path: path.to_path_buf(),
        source: e,
    })
}
