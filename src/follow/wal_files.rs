//! What agy's WAL files say about its commits, read without SQLite: the
//! questions a settling poll asks many times a commit, each for the price
//! of one system call instead of one of SQLite's read transactions.
//!
//! - **Is a commit on its way?** SQLite's unix VFS holds an `fcntl` write
//!   lock on one byte of `<db>-shm` for the whole of a write transaction:
//!   its WAL writes, the fsync, and the publication of the commit in shared
//!   memory, in that order. So while the lock is free, every commit whose
//!   writes came before is visible; a file notification for writes already
//!   read costs one look instead of a window of them ([`WalFiles::writer_held`]).
//! - **Was anything committed since?** The WAL-index header at the start of
//!   `-shm` changes with every commit ([`WalFiles::index_header`]).
//!
//! The danger is the descriptor: POSIX locks belong to the process and the
//! file, and closing *any* descriptor of a file drops every lock the
//! process holds on it, SQLite's connections' included. agy, finding no
//! other connection's lock, may then truncate `-shm` under our
//! connections' mappings (SIGBUS). So a file this module opens is never
//! closed: one descriptor per file for the life of the process, kept in a
//! process-wide table. The table is bounded ([`MAX_FILES`]); past it these
//! questions are not asked, and a poll asks SQLite and looks for longer.
//! Nothing here maps a file: a read past the end of a truncated file is a
//! short read, never a signal.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Mutex;

/// The byte of `-shm` SQLite's unix VFS locks for the WAL's writer:
/// `UNIX_SHM_BASE` ((22 + 8) * 4) plus `WAL_WRITE_LOCK` (0), in sqlite3.c.
const SHM_WRITE_LOCK: nix::libc::off_t = 120;

/// Bytes of the first copy of the WAL-index header at the start of `-shm`:
/// frame count, page count, frame and header checksums, salts and a change
/// counter (sqlite3.c, `WalIndexHdr`).
pub(crate) const INDEX_HEADER: usize = 48;

/// Files kept open at most: one per conversation followed by this process,
/// which even a long pi session stays far below; a descriptor apiece.
const MAX_FILES: usize = 512;

/// A file's (device, inode): a file removed and created again under the
/// same name is another file.
pub(crate) type FileId = (u64, u64);

fn id_of(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// The id of the file at `path` now (one `stat`).
pub(crate) fn file_id(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().as_ref().map(id_of)
}

/// `db`'s sibling `<db><suffix>` (`-wal`, `-shm`).
fn sibling(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push(suffix);
    path.into()
}

/// Every file opened so far, by id, never closed.
static OPENED: Mutex<Vec<(FileId, &'static File)>> = Mutex::new(Vec::new());

/// `path`, opened read-only once for the life of the process.
fn open_for_good(path: &Path) -> Option<&'static File> {
    let key = file_id(path)?;
    let mut opened = OPENED.lock().ok()?;
    if let Some((_, file)) = opened.iter().find(|(k, _)| *k == key) {
        return Some(file);
    }
    if opened.len() >= MAX_FILES {
        return None;
    }
    let file = File::open(path).ok()?;
    // The file opened may not be the one stat'ed (replaced between the
    // two): keyed by what was opened. Leaked either way, so that this
    // descriptor is never closed (see the module comment).
    let key = file.metadata().ok().as_ref().map(id_of);
    let file: &'static File = Box::leak(Box::new(file));
    opened.push((key?, file));
    Some(file)
}

/// One database's `-shm`, as the database is now (recreated
/// files are other files: ask [`WalFiles::of`] again after reopening the
/// database; while any connection of ours is open, SQLite keeps both).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalFiles {
    shm: &'static File,
}

impl WalFiles {
    /// `db`'s WAL files; `None` when it has none (not in WAL mode, or not
    /// opened yet) or the table is full.
    pub(crate) fn of(db: &Path) -> Option<WalFiles> {
        Some(WalFiles {
            shm: open_for_good(&sibling(db, "-shm"))?,
        })
    }

    /// Whether another process holds the WAL's write lock now: a write
    /// transaction is open, so a commit may be on its way (written, its
    /// fsync not yet returned). One `F_GETLK`, which takes nothing. `None`
    /// when it cannot be asked.
    pub(crate) fn writer_held(self) -> Option<bool> {
        use nix::fcntl::{fcntl, FcntlArg};
        let mut lock = nix::libc::flock {
            l_type: nix::libc::F_WRLCK as _,
            l_whence: nix::libc::SEEK_SET as _,
            l_start: SHM_WRITE_LOCK,
            l_len: 1,
            l_pid: 0,
        };
        fcntl(self.shm, FcntlArg::F_GETLK(&mut lock)).ok()?;
        // `c_short` on some platforms, `c_int` on others: compared wide.
        Some(i64::from(lock.l_type) != i64::from(nix::libc::F_UNLCK))
    }

    /// The WAL-index header as it is now (one `pread`, no lock). SQLite
    /// rewrites it on every commit (a new frame count and checksums, its
    /// change counter moved), so while it reads the same, nothing was
    /// committed; a torn read only differs, which sends the caller to
    /// SQLite.
    pub(crate) fn index_header(self) -> Option<[u8; INDEX_HEADER]> {
        let mut header = [0u8; INDEX_HEADER];
        self.shm.read_exact_at(&mut header, 0).ok()?;
        Some(header)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn wal_db(dir: &Path) -> (rusqlite::Connection, std::path::PathBuf) {
        let path = dir.join("c.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        (conn, path)
    }

    #[test]
    fn a_database_without_wal_files_has_nothing_to_ask() {
        let dir = tempfile::tempdir().unwrap();
        assert!(WalFiles::of(&dir.path().join("none.db")).is_none());
    }

    #[test]
    fn the_same_file_is_opened_once() {
        let dir = tempfile::tempdir().unwrap();
        let (_conn, path) = wal_db(dir.path());
        let a = WalFiles::of(&path).unwrap();
        let b = WalFiles::of(&path).unwrap();
        assert!(std::ptr::eq(a.shm, b.shm));
    }

    /// Another owner's write transaction is seen as held, and none once it
    /// ends; ours never is (POSIX locks do not conflict within a process).
    #[cfg(target_os = "linux")]
    #[test]
    fn another_owner_holding_the_write_byte_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let (_conn, path) = wal_db(dir.path());
        let lock = WalFiles::of(&path).unwrap();
        assert_eq!(lock.writer_held(), Some(false));
        let writer = held_elsewhere(&path);
        assert_eq!(lock.writer_held(), Some(true));
        drop(writer);
        assert_eq!(lock.writer_held(), Some(false));
    }

    /// Every commit rewrites the index header.
    #[test]
    fn a_commit_changes_the_index_header() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, path) = wal_db(dir.path());
        let files = WalFiles::of(&path).unwrap();
        let header = files.index_header().unwrap();
        assert_eq!(
            files.index_header(),
            Some(header),
            "unchanged without a commit"
        );
        conn.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_ne!(files.index_header(), Some(header));
    }

    /// `db`'s WAL write lock held as agy's writer holds it, by another owner
    /// than this process's POSIX locks, until dropped: a lock of an open file
    /// description of its own (Linux), which `F_GETLK` reports and SQLite's
    /// locks in this process conflict with, as with another process's.
    #[cfg(target_os = "linux")]
    pub(crate) struct HeldElsewhere(std::mem::ManuallyDrop<File>);

    #[cfg(target_os = "linux")]
    fn set_ofd_lock(shm: &File, kind: nix::libc::c_int) -> nix::Result<()> {
        use nix::fcntl::{fcntl, FcntlArg};
        let lock = nix::libc::flock {
            l_type: kind as _,
            l_whence: nix::libc::SEEK_SET as _,
            l_start: SHM_WRITE_LOCK,
            l_len: 1,
            l_pid: 0,
        };
        fcntl(shm, FcntlArg::F_OFD_SETLK(&lock)).map(drop)
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn held_elsewhere(db: &Path) -> HeldElsewhere {
        let shm = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(sibling(db, "-shm"))
            .unwrap();
        set_ofd_lock(&shm, nix::libc::F_WRLCK).expect("the write lock was free");
        HeldElsewhere(std::mem::ManuallyDrop::new(shm))
    }

    /// Released, and the descriptor left open: closing any descriptor of
    /// the file would drop this process's POSIX locks on it, SQLite's
    /// connections' included (see the module comment).
    #[cfg(target_os = "linux")]
    impl Drop for HeldElsewhere {
        fn drop(&mut self) {
            set_ofd_lock(&self.0, nix::libc::F_UNLCK).expect("released");
        }
    }
}
