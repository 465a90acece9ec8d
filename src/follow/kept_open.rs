//! One read-only connection to a conversation database, kept open from one
//! read of it to the next.
//!
//! Why: the first connection to a WAL database in a process rebuilds the
//! WAL's index by reading the whole WAL (SQLite's recovery) whenever no
//! other process has the database open, which is the case between agy's
//! runs: agy's WAL outlives it (our reader is still open when agy exits, so
//! agy cannot checkpoint and remove it) and grows to about a thousand pages.
//! A resumed turn reads the database before agy starts (where its new steps
//! begin) and then follows it: with a connection apiece that is two
//! recoveries of up to 4 MB every turn, and a `stream --session` pays them
//! again on every turn. Kept open, the index stays valid, and agy itself
//! finds it valid too.
//!
//! One connection is kept (the database last read); a later read of the same
//! file takes it, and one of another file replaces it. Keeping a connection
//! open never blocks agy: it holds no transaction.

use crate::follow::knobs::mechanisms;
use crate::follow::wal_files::{file_id, FileId};
use agy_format::database::{open_read_only, ReadError};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Mutex;

/// A connection and the file it opened (`None`: not known for sure, so
/// never kept).
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) conn: Connection,
    file: Option<FileId>,
}

impl Opened {
    /// Whether the file this connection opened is still the one at `path`
    /// (one `stat`): a connection to a file since removed or replaced reads
    /// the old file. Not known which file it opened: no.
    pub(crate) fn still_at(&self, path: &Path) -> bool {
        self.file.is_some() && file_id(path) == self.file
    }
}

/// Where the connection is kept: one process-wide, [`KEPT`]; tests make
/// their own.
struct Keeper(Mutex<Option<(FileId, Connection)>>);

static KEPT: Keeper = Keeper(Mutex::new(None));

impl Keeper {
    fn open(&self, path: &Path) -> Result<Opened, ReadError> {
        let file = file_id(path);
        if let Ok(mut kept) = self.0.lock() {
            if file.is_some() && kept.as_ref().map(|(id, _)| *id) == file {
                if let Some((_, conn)) = kept.take() {
                    return Ok(Opened { conn, file });
                }
            }
        }
        let conn = open_read_only(path)?;
        // Replaced between the look and the open: which file this is is
        // not known.
        let file = file.filter(|id| file_id(path) == Some(*id));
        Ok(Opened { conn, file })
    }

    fn keep(&self, opened: Opened) {
        let Some(id) = opened.file else {
            return;
        };
        // Whatever was kept before is closed here, outside the lock.
        let replaced = self
            .0
            .lock()
            .ok()
            .and_then(|mut kept| kept.replace((id, opened.conn)));
        drop(replaced);
    }
}

/// A read-only connection to `path`: the one kept for that file if there is
/// one, else a new one ([`open_read_only`]).
pub(crate) fn open(path: &Path) -> Result<Opened, ReadError> {
    if !mechanisms().kept_open {
        return Keeper(Mutex::new(None)).open(path);
    }
    KEPT.open(path)
}

/// Keep `opened` for the next [`open`] of its file, closing the one kept
/// before.
pub(crate) fn keep(opened: Opened) {
    if mechanisms().kept_open {
        KEPT.keep(opened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_db(path: &Path, x: i64) {
        let conn = Connection::open(path).unwrap();
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.execute_batch(&format!("CREATE TABLE t (x); INSERT INTO t VALUES ({x});"))
            .unwrap();
    }

    fn x(conn: &Connection) -> i64 {
        conn.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_kept_connection_is_taken_by_the_next_open_of_its_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
        wal_db(&a, 1);
        wal_db(&b, 2);
        let keeper = Keeper(Mutex::new(None));
        let first = keeper.open(&a).unwrap();
        let handle = unsafe { first.conn.handle() };
        keeper.keep(first);
        let other = keeper.open(&b).unwrap();
        assert_ne!(unsafe { other.conn.handle() }, handle);
        assert_eq!(x(&other.conn), 2);
        let again = keeper.open(&a).unwrap();
        assert_eq!(unsafe { again.conn.handle() }, handle, "not the kept one");
        assert_eq!(x(&again.conn), 1);
        // Taken: the next open is a new connection.
        let third = keeper.open(&a).unwrap();
        assert_ne!(unsafe { third.conn.handle() }, handle);
    }

    #[test]
    fn a_file_created_again_under_the_same_name_is_opened_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        wal_db(&path, 1);
        let keeper = Keeper(Mutex::new(None));
        let old = keeper.open(&path).unwrap();
        assert_eq!(x(&old.conn), 1);
        // The new file is made while the old one exists, so it cannot
        // reuse the old one's inode.
        let new = dir.path().join("new.db");
        wal_db(&new, 2);
        std::fs::rename(&new, &path).unwrap();
        keeper.keep(old);
        let fresh = keeper.open(&path).unwrap();
        assert_eq!(
            x(&fresh.conn),
            2,
            "the old file's connection was handed out"
        );
    }
}
