//! Reading one conversation database while agy writes it.
//!
//! The poller owns the read-only SQLite handle and the cursor over `steps`.
//! Its contract with the writer: it opens read-only with `query_only`, never
//! holds a read transaction between polls and never checkpoints, so agy is
//! never blocked. Its contract with the caller: every poll first asks
//! whether anything was committed since the last one (a settling look
//! reads the WAL-index header in `<db>-shm` first, `wal_files`; then
//! `PRAGMA data_version`), and runs no row SELECT unless something was
//! (or, for a settling look, the header moved: then the SELECT alone, and
//! its rows count only if the version its read saw moved); then
//! it reads rows past the cursor plus every step that has not finished
//! yet, and hands them to the [`Tracker`], which emits only what is new.
//!
//! A subagent writes a conversation of its own beside this one; when its
//! step ends, the poller reads that database once, read-only, for the
//! subagent's final answer (`subagent_answer`), the one thing of it a user
//! of the parent conversation sees.
//!
//! Memory: a growing step is the largest thing the bridge holds, and it is
//! re-read whole on every commit. Each row is decoded where SQLite holds it
//! (no copy of its blobs), and each decoded step is dropped as soon as the
//! tracker has seen it (the binary also keeps glibc from holding freed
//! large buffers resident: `main`'s `release_large_buffers`).

use crate::follow::events::{self, Event, Tracker};
use crate::follow::knobs::{mechanisms, Mechanisms};
use crate::follow::transcript::Transcript;
use crate::follow::wal_files::{file_id, FileId, WalFiles, INDEX_HEADER};
use agy_format::database::{open_read_only, read_all, to_row_ref, ReadError, StepColumns};
use agy_format::ids::ConversationId;
use agy_format::steps::{self, Step};
use rusqlite::Connection;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A settling poll's pauses between looks: the first, then every later
/// one. agy's commit is visible with the notification when it does not
/// fsync, and a quarter of a millisecond or more later when it does
/// (SQLite's default); looks every 0.1 ms once that is due see it within
/// 0.1 ms (docs/benchmarks.md, "Looks every 0.1 ms once agy's fsync is
/// due"). A pause learnt from agy's recent commits gained under 10% CPU
/// per turn and went (docs/benchmarks.md, "Follower mechanisms").
const SETTLE_PAUSES: [Duration; 2] = [Duration::from_micros(200), Duration::from_micros(100)];

/// The highest step idx in a conversation database, if it can be read
/// (blocking: a SQLite read).
pub(crate) fn last_idx(path: &Path) -> Option<i64> {
    open_read_only(path)
        .ok()?
        .query_row("SELECT MAX(idx) FROM steps", [], |r| {
            r.get::<_, Option<i64>>(0)
        })
        .ok()
        .flatten()
}

/// A read-only connection and the file it opened (`None`: not known for
/// sure).
#[derive(Debug)]
struct Opened {
    conn: Connection,
    file: Option<FileId>,
}

impl Opened {
    fn open(path: &Path) -> Result<Opened, ReadError> {
        let file = file_id(path);
        let conn = open_read_only(path)?;
        // Replaced between the look and the open: which file this is is
        // not known.
        let file = file.filter(|id| file_id(path) == Some(*id));
        Ok(Opened { conn, file })
    }

    /// Whether the file this connection opened is still the one at `path`
    /// (one `stat`): a connection to a file since removed or replaced reads
    /// the old file. Not known which file it opened: no.
    fn still_at(&self, path: &Path) -> bool {
        self.file.is_some() && file_id(path) == self.file
    }
}

/// The final answer of the subagent conversation `child`, read once from
/// its database beside `root` (the conversation that started it). `None`
/// when that database is not there, cannot be read or holds no answer, or
/// `child` is not a conversation id (it never becomes a path then).
pub(crate) fn subagent_answer(root: &Path, child: &str) -> Option<String> {
    let id = ConversationId::parse(child.trim()).ok()?;
    let path = root.parent()?.join(format!("{}.db", id.as_str()));
    let conn = open_read_only(&path).ok()?;
    let rows = read_all(&conn, &path).ok()?;
    let decoded: Vec<steps::Step> = rows.iter().map(steps::decode).collect();
    let transcript = Transcript::from_events(events::decode_all(&decoded));
    transcript.last_answer().map(|a| a.trim().to_string())
}

/// Counters, so tests and benches can prove the idle path is free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PollStats {
    /// Polls made.
    pub polls: u64,
    /// Checks of the database's data version (the cheap look that finds nothing new).
    pub version_checks: u64,
    /// Row SELECTs against `steps` (the thing that must be zero when idle).
    pub row_selects: u64,
    /// Rows those SELECTs returned.
    pub rows_read: u64,
    /// Timed pauses slept between a settling poll's looks: each a wake-up
    /// of its own, what waiting for agy's fsync costs.
    pub pauses: u64,
    /// Connections the poller opened to read the database. Each new
    /// connection reads the schema again, so a database agy has created but not yet
    /// given its table must not cost one per look.
    pub opens: u64,
}

/// The outcome of one poll.
#[derive(Debug)]
pub enum Poll {
    /// The database is readable; these are the new events (maybe none).
    Ready(Vec<Event>),
    /// Not readable yet (missing file or table, locked): try again later.
    NotReady(ReadError),
}

/// What one look ([`Poller::look`]) found.
enum Looked {
    /// A commit since the last read: its new events (maybe none).
    Read(Vec<Event>),
    /// Nothing committed since; whether a write transaction was open just
    /// before the look (`None`: not known).
    Nothing {
        writing: Option<bool>,
    },
    Failed(ReadError),
}

/// Follows one conversation database. See the module comment.
#[derive(Debug)]
pub struct Poller {
    path: PathBuf,
    conn: Option<Opened>,
    sql: Sql,
    data_version: Option<i64>,
    cursor: i64,
    unfinished: BTreeSet<i64>,
    tracker: Tracker,
    stats: PollStats,
    /// Usage stats (metadata 9) of the model calls seen, by step, and
    /// whether the step is a checkpoint (a side call).
    usage: std::collections::BTreeMap<i64, (steps::Usage, bool)>,
    /// The last read stopped at [`ROWS_PER_POLL`] new rows; more are there.
    behind: bool,
    /// The database's WAL files, once it has been read.
    files: Option<WalFiles>,
    /// The connection of the last look that found the database without its
    /// `steps` table, for the next look to ask again: SQLite writes a new
    /// database's file, its switch to WAL and its tables one after another,
    /// each announced (seen with fake-agy), and a connection apiece read
    /// the schema afresh each time.
    tableless: Option<Opened>,
    /// The WAL-index header as read just before the last `PRAGMA
    /// data_version`.
    header_seen: Option<[u8; INDEX_HEADER]>,
    /// The mechanisms this reader runs (all, unless a bench said otherwise).
    mechanisms: Mechanisms,
}

/// New rows one poll reads at most. A poll's decoded steps and their
/// events are held together until the runner has handed them on, so
/// a backlog (a consumer that was slow while agy wrote thousands of steps)
/// is read in batches of this many, each after the last was taken
/// ([`Poller::behind`]), never all at once. Steps still growing are read
/// again on every poll besides these (there are few: agy finishes a step
/// before it starts most others).
pub(crate) const ROWS_PER_POLL: usize = 64;

/// Payload bytes of new rows one poll reads at most (it always reads one
/// row, however large): the same bound for rows of a few megabytes each,
/// which would make [`ROWS_PER_POLL`] rows hundreds of megabytes.
pub(crate) const BYTES_PER_POLL: usize = 4 << 20;

/// The steps of the rows from the cursor's on (`reread`: the cursor's own
/// row too, the newest step read, still growing), in order, up to
/// [`ROWS_PER_POLL`] new rows or [`BYTES_PER_POLL`] bytes of new rows'
/// payload; whether more may be waiting. Only new rows count: the step read
/// again is read whole however large, as every other unfinished step is, or
/// a step growing past the byte limit would leave the reader behind on every
/// poll. Each row is decoded where SQLite holds it, not copied first.
fn rows_from(
    conn: &Connection,
    statement: &str,
    cursor: i64,
    reread: bool,
) -> rusqlite::Result<(Vec<Step>, bool)> {
    let mut stmt = conn.prepare_cached(statement)?;
    let from = if reread { cursor } else { cursor + 1 };
    let mut rows = Vec::new();
    let (mut fresh, mut bytes) = (0, 0);
    // Rows are read lazily: stopping here leaves the rest for the next poll.
    let mut read = stmt.query([from])?;
    while let Some(r) = read.next()? {
        let row = to_row_ref(r)?;
        if row.idx > cursor {
            fresh += 1;
            bytes += row.payload.map_or(0, <[u8]>::len);
        }
        rows.push(steps::decode_row(row));
        if bytes >= BYTES_PER_POLL || fresh >= ROWS_PER_POLL {
            return Ok((rows, true));
        }
    }
    Ok((rows, false))
}

/// A settling look's read once the WAL-index header moved, so a commit has
/// most likely landed, and no unfinished step is older than the cursor's:
/// the rows in one statement, its own read transaction, and then the
/// version that transaction saw ([`data_version_read`]): one statement,
/// not four (`BEGIN`, the version, the rows, `COMMIT`). The rows count
/// only when the version moved past `seen` (a checkpoint also moves the
/// header). `None` when the version cannot be had.
fn read_versioned(
    conn: &Connection,
    statement: &str,
    cursor: i64,
    reread: bool,
    seen: Option<i64>,
) -> rusqlite::Result<Option<Read>> {
    let (rows, behind) = rows_from(conn, statement, cursor, reread)?;
    Ok(data_version_read(conn).map(|version| Read {
        version,
        rows: (seen != Some(version)).then_some((rows, behind, 1)),
    }))
}

/// `PRAGMA data_version` as of the connection's last read transaction,
/// without a statement: the pager's change counter that pragma reports
/// (`SQLITE_FCNTL_DATA_VERSION`; the pragma adds this connection's own
/// commits, and a read-only connection makes none). Read after a SELECT in
/// autocommit mode, it is the version of the commit that SELECT saw. The
/// pragma as a table (`pragma_data_version`) in the SELECT cost a parse of
/// the pragma on every run (`pragmaVtabFilter`, 8% of the reader's thread
/// in a profile).
fn data_version_read(conn: &Connection) -> Option<i64> {
    let mut version: std::ffi::c_uint = 0;
    // SAFETY: the handle is `conn`'s own, open for the call; this op
    // writes one `unsigned int` through the pointer, which points at one.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_DATA_VERSION,
            (&mut version as *mut std::ffi::c_uint).cast(),
        )
    };
    (rc == rusqlite::ffi::SQLITE_OK).then_some(i64::from(version))
}

/// The rows one read takes: every row past `cursor` (within the limits of
/// [`rows_from`]) and every step in `unfinished`, read again; whether more
/// rows may be waiting; how many SELECTs it took. When no unfinished step
/// is older than the cursor's (the usual case: the step growing is the
/// newest), one SELECT from the cursor covers both; otherwise the older
/// ones are read one by one beside it. Inside the caller's read
/// transaction, so that every row is of the same commit.
fn read_rows(
    conn: &Connection,
    sql: &Sql,
    cursor: i64,
    unfinished: &BTreeSet<i64>,
) -> rusqlite::Result<(Vec<Step>, bool, u64)> {
    let reread = unfinished.contains(&cursor);
    let (mut rows, behind) = rows_from(conn, &sql.from, cursor, reread)?;
    let mut selects = 1;
    let older = unfinished.range(..cursor);
    if older.clone().next().is_some() {
        let mut again = conn.prepare_cached(&sql.one)?;
        for idx in older {
            let decoded = |r: &rusqlite::Row<'_>| to_row_ref(r).map(steps::decode_row);
            if let Some(row) = again.query_map([idx], decoded)?.next() {
                rows.push(row?);
            }
            selects += 1;
        }
    }
    Ok((rows, behind, selects))
}

/// What one read transaction found: `PRAGMA data_version`, and the rows
/// when it moved ([`read_rows`]).
struct Read {
    version: i64,
    rows: Option<(Vec<Step>, bool, u64)>,
}

/// The statements every poll runs, written once per database: each is
/// compiled once and kept in the connection's statement cache, so a poll
/// (up to a few dozen a commit while one settles) parses no SQL.
#[derive(Debug, Default)]
struct Sql {
    /// The rows from an idx (`?1`) on, in order, one more than
    /// [`ROWS_PER_POLL`] at most (the newest row read, read again). The
    /// limit is written in, not bound: bound, the bundled SQLite recompiled
    /// the statement on every run (`sqlite3Reprepare`, seen in a profile).
    from: String,
    /// One row by idx (`?1`): a step that has not finished, read again.
    one: String,
}

impl Sql {
    fn new(columns: StepColumns) -> Sql {
        let select = columns.select();
        let order = format!("ORDER BY idx LIMIT {}", ROWS_PER_POLL + 1);
        Sql {
            from: format!("{select} WHERE idx >= ?1 {order}"),
            one: format!("{select} WHERE idx = ?1"),
        }
    }
}

/// `f` inside one read transaction (`BEGIN` … `COMMIT`, both cached), so
/// every SELECT in it sees the same commit; the transaction ends whatever
/// `f` returns.
fn in_read_transaction<T>(
    conn: &Connection,
    f: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    let read = f();
    let ended = conn.prepare_cached("COMMIT")?.execute([]);
    let read = read?;
    ended?;
    Ok(read)
}

impl Poller {
    /// Follow `path`, streaming steps with idx greater than `after_idx`
    /// (`None` streams from the start).
    pub fn new(path: impl Into<PathBuf>, after_idx: Option<i64>) -> Poller {
        Poller {
            path: path.into(),
            conn: None,
            sql: Sql::default(),
            data_version: None,
            cursor: after_idx.unwrap_or(-1),
            unfinished: BTreeSet::new(),
            tracker: Tracker::new(),
            stats: PollStats::default(),
            usage: std::collections::BTreeMap::new(),
            behind: false,
            files: None,
            tableless: None,
            header_seen: None,
            mechanisms: mechanisms(),
        }
    }

    /// Whether the last read stopped at `ROWS_PER_POLL`: poll again
    /// (without waiting for a commit) to read on from the cursor.
    pub fn behind(&self) -> bool {
        self.behind
    }

    /// The database file it follows.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its counters so far.
    pub fn stats(&self) -> PollStats {
        self.stats
    }

    /// The highest idx read so far (or the starting cursor).
    pub fn last_idx(&self) -> Option<i64> {
        (self.cursor >= 0).then_some(self.cursor)
    }

    /// Whether agy's WAL may hold writes the last read did not see: the
    /// poller is not [caught up](Self::caught_up) (a writer holds the WAL's
    /// write lock, or something was published since the last look, or the
    /// WAL files cannot be asked). When it is, every write so far has been
    /// read, and only a new file notification can bring more.
    pub fn written_since_read(&mut self) -> bool {
        !self.caught_up()
    }

    /// Whether every commit is read and none is on its way, known without
    /// SQLite: no other process holds the WAL's write lock, and the
    /// WAL-index header is as it was at the last look that asked SQLite
    /// (so nothing was published since). A file notification then announces
    /// writes already read (one commit notifies several times) and needs no
    /// poll. Two system calls on descriptors kept open (`F_GETLK`, which
    /// never waits, and a `pread` of `-shm`, which SQLite keeps in memory):
    /// cheap enough for the runtime's own thread, which is the point.
    pub fn caught_up(&self) -> bool {
        let Some(files) = self.files else {
            return false;
        };
        if self.behind || self.data_version.is_none() || self.header_seen.is_none() {
            return false;
        }
        // The lock first: free then, every earlier write is published, and
        // the header read after it shows whether any was since our look.
        files.writer_held() == Some(false) && files.index_header() == self.header_seen
    }

    /// Steps seen but not yet in a terminal status.
    pub fn unfinished(&self) -> impl Iterator<Item = i64> + '_ {
        self.unfinished.iter().copied()
    }

    /// The current status of the newest unfinished step waiting for user
    /// interaction, if any (agy stalls on these in print mode).
    pub(crate) fn waiting_step(&self) -> Option<i64> {
        self.tracker.waiting_steps().next()
    }

    /// The tool step `idx` runs, if it is a tool step.
    pub(crate) fn tool_name(&self, idx: i64) -> Option<&str> {
        self.tracker.tool_name(idx)
    }

    /// The newest model call's usage (never a checkpoint's side call: it
    /// is not the context in use) and the sum over every call seen.
    pub(crate) fn usage(&self) -> Option<(steps::Usage, steps::Usage)> {
        let mut sum = steps::Usage::default();
        for (u, _) in self.usage.values() {
            sum += u;
        }
        let last = self
            .usage
            .values()
            .rev()
            .find(|(_, checkpoint)| !checkpoint)
            .or_else(|| self.usage.values().next_back())
            .map(|(u, _)| u.clone())?;
        Some((last, sum))
    }

    /// Look once for new steps: the events they make, or that there is nothing new yet. Blocking (a SQLite read).
    pub fn poll(&mut self) -> Poll {
        self.stats.polls += 1;
        match self.look(false) {
            Looked::Read(events) => Poll::Ready(events),
            Looked::Nothing { .. } => Poll::Ready(Vec::new()),
            Looked::Failed(e) => self.not_ready(e),
        }
    }

    /// One look: the writer lock asked first, then (when settling) the
    /// WAL-index header, then `PRAGMA data_version`, and the rows when it
    /// moved.
    fn look(&mut self, settling: bool) -> Looked {
        // Asked before the look: a writer that lets the lock go after this
        // has published its commit, which the look then sees.
        let writing = self.files.and_then(WalFiles::writer_held);
        match self.poll_inner(settling) {
            Ok(Some(events)) => Looked::Read(events),
            Ok(None) => Looked::Nothing { writing },
            Err(e) => Looked::Failed(e),
        }
    }

    /// [`poll`](Self::poll) right after a file notification: when nothing
    /// has been committed yet, keep asking `PRAGMA data_version` (short
    /// sleeps) and read as soon as it moves, while a write transaction is
    /// open (agy holds the WAL's writer lock, `follow::wal_files`), for
    /// `window` at most. With no writer, one look: every commit is visible
    /// already.
    ///
    /// Why: agy's WAL write is what notifies, and its commit becomes visible
    /// only when SQLite then publishes it in shared memory, after the fsync
    /// of each commit, which notifies nobody: usually well under a
    /// millisecond later, at times several. The runtime's timers tick in
    /// whole milliseconds; this thread can look again sooner. A notification
    /// for writes already read (one commit notifies several times) finds no
    /// writer, so it costs one look, not the window.
    pub fn poll_settling(&mut self, window: Duration) -> Poll {
        let deadline = Instant::now() + window;
        self.stats.polls += 1;
        // The pauses between looks: [`SETTLE_PAUSES`].
        let mut sleeps = 0;
        loop {
            match self.look(true) {
                Looked::Read(events) => return Poll::Ready(events),
                Looked::Nothing { writing } => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || writing == Some(false) {
                        return Poll::Ready(Vec::new());
                    }
                    std::thread::sleep(self.pause(sleeps).min(left));
                    sleeps += 1;
                    self.stats.pauses += 1;
                }
                Looked::Failed(e) => return self.not_ready(e),
            }
        }
    }

    /// The pause before a settling poll's look after `sleeps` pauses:
    /// [`SETTLE_PAUSES`].
    fn pause(&self, sleeps: usize) -> Duration {
        SETTLE_PAUSES[sleeps.min(1)]
    }

    fn not_ready(&mut self, e: ReadError) -> Poll {
        // The header was taken before the read that failed: what it
        // announced is not read, so neither [`Self::caught_up`] nor the
        // next settling look may take it as seen.
        self.header_seen = None;
        // Drop the handle so a replaced or recreated file is reopened.
        if !matches!(e, ReadError::Locked { .. }) {
            self.conn = None;
            self.data_version = None;
            self.files = None;
        }
        Poll::NotReady(e)
    }

    /// A connection to the database with its `steps` table found, and the
    /// statements for that table.
    fn connect(&mut self) -> Result<(), ReadError> {
        let opened = match self.tableless.take() {
            // Still the file it opened: one removed or replaced since is
            // read anew.
            Some(opened) if opened.still_at(&self.path) => opened,
            _ => {
                let opened = Opened::open(&self.path)?;
                self.stats.opens += 1;
                opened
            }
        };
        let columns = match StepColumns::detect(&opened.conn, &self.path) {
            Err(e @ ReadError::NoStepsTable { .. }) => {
                self.tableless = Some(opened);
                return Err(e);
            }
            columns => columns?,
        };
        self.sql = Sql::new(columns);
        self.conn = Some(opened);
        // Once the database has been read it has its WAL files (in WAL
        // mode); a database opened again may have new ones.
        self.files = if self.mechanisms.wal_files {
            WalFiles::of(&self.path)
        } else {
            None
        };
        self.header_seen = None;
        Ok(())
    }

    /// The new events, or `None` when nothing was committed since the last
    /// read (one `PRAGMA data_version`, no row SELECT). `settling`: a look
    /// of a settling poll, which trusts an unchanged WAL-index header and
    /// asks SQLite nothing; a plain poll (the ticks, the re-checks) always
    /// asks SQLite, so a commit is seen within a tick whatever our view of
    /// the files.
    fn poll_inner(&mut self, settling: bool) -> Result<Option<Vec<Event>>, ReadError> {
        if self.conn.is_none() {
            self.connect()?;
        }
        let Some(conn) = self.conn.as_ref().map(|o| &o.conn) else {
            return Ok(Some(Vec::new()));
        };
        let path = self.path.clone();
        let err = |e| ReadError::from_sqlite(&path, e);

        self.stats.version_checks += 1;
        let header = self.files.and_then(WalFiles::index_header);
        let unchanged = header.is_some() && header == self.header_seen;
        if settling && self.data_version.is_some() && unchanged {
            return Ok(None);
        }
        let moved = settling && header.is_some() && self.header_seen.is_some();
        self.header_seen = header;
        let (seen, sql, cursor, unfinished) =
            (self.data_version, &self.sql, self.cursor, &self.unfinished);
        let one_statement = moved && seen.is_some() && unfinished.range(..cursor).next().is_none();
        let versioned = if one_statement {
            let reread = unfinished.contains(&cursor);
            read_versioned(conn, &sql.from, cursor, reread, seen).map_err(err)?
        } else {
            None
        };
        // Otherwise the version and the rows in one read transaction:
        // starting one is most of what a read costs SQLite (the WAL-index
        // header, its locks, the page cache dropped after another's
        // commit), so a commit read pays it once, not once for the
        // question and again for the rows.
        let read = match versioned {
            Some(read) => read,
            None => in_read_transaction(conn, || {
                let version: i64 = conn
                    .prepare_cached("PRAGMA data_version")?
                    .query_row([], |r| r.get(0))?;
                let rows = if seen == Some(version) {
                    None
                } else {
                    Some(read_rows(conn, sql, cursor, unfinished)?)
                };
                Ok(Read { version, rows })
            })
            .map_err(err)?,
        };
        let Some((mut decoded, behind, selects)) = read.rows else {
            return Ok(None);
        };
        self.stats.row_selects += selects;
        self.behind = behind;
        // Behind: the rows past this batch are in the version just read, so
        // the next poll must not take it as already seen.
        self.data_version = (!self.behind).then_some(read.version);
        self.stats.rows_read += decoded.len() as u64;

        decoded.sort_by_key(|s| s.idx);
        let mut events = Vec::new();
        // Each step goes as soon as it is observed: a growing step's decoded
        // text is the largest thing the bridge holds.
        for step in decoded {
            for mut event in self.tracker.observe(&step) {
                if let Event::SubagentEnded {
                    conversation_id,
                    answer: answer @ None,
                    ..
                } = &mut event
                {
                    *answer = subagent_answer(&self.path, conversation_id);
                }
                events.push(event);
            }
            if let Some(u) = step.metadata.as_ref().and_then(|m| m.usage.as_ref()) {
                let checkpoint = step.step_type == steps::StepType::Checkpoint;
                self.usage.insert(step.idx, (u.clone(), checkpoint));
            }
            if step.is_finished() {
                self.unfinished.remove(&step.idx);
            } else {
                self.unfinished.insert(step.idx);
            }
            self.cursor = self.cursor.max(step.idx);
        }
        Ok(Some(events))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The pager's counter read after a SELECT is what `PRAGMA
    /// data_version` says, and it moves with another connection's commit.
    #[test]
    fn the_version_read_after_a_select_is_the_pragma_s() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("v.db");
        let w = Connection::open(&path).expect("open");
        w.pragma_update(None, "journal_mode", "wal").expect("wal");
        w.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .expect("write");
        let r = open_read_only(&path).expect("reader");
        let pragma = |c: &Connection| -> i64 {
            c.query_row("PRAGMA data_version", [], |row| row.get(0))
                .expect("pragma")
        };
        let select = |c: &Connection| -> i64 {
            c.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
                .expect("select")
        };
        assert_eq!(select(&r), 1);
        let before = data_version_read(&r).expect("version");
        assert_eq!(before, pragma(&r));
        w.execute("INSERT INTO t VALUES (2)", []).expect("commit");
        assert_eq!(data_version_read(&r), Some(before), "no read since");
        assert_eq!(select(&r), 2);
        let after = data_version_read(&r).expect("version");
        assert_ne!(after, before, "a commit by another connection moves it");
        assert_eq!(after, pragma(&r));
    }

    /// A conversation database in WAL mode with agy's schema, and its
    /// writer (for tests across the crate).
    pub(crate) fn writer(path: &Path) -> Connection {
        let w = Connection::open(path).expect("open");
        w.pragma_update(None, "journal_mode", "wal").expect("wal");
        agy_format::schema::create(&w).expect("schema");
        w
    }

    /// Commit step `idx` as an answer of `text` (replacing it if there).
    pub(crate) fn put(w: &Connection, idx: i64, text: &str) {
        use steps::{Body, PlannerResponse, StepStatus, StepType};
        let row = Step::new(idx, StepType::PlannerResponse, StepStatus::Done)
            .with_body(Body::Planner(PlannerResponse {
                text: text.into(),
                ..PlannerResponse::default()
            }))
            .to_row();
        w.execute(
            "INSERT OR REPLACE INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![row.idx, row.step_type, row.status, row.payload],
        )
        .expect("commit");
    }

    /// A conversation database, its writer and a poller that has read it
    /// once.
    fn followed(dir: &Path) -> (Connection, Poller) {
        let path = dir.join("c.db");
        let w = writer(&path);
        let mut p = Poller::new(&path, None);
        assert!(matches!(p.poll(), Poll::Ready(_)));
        (w, p)
    }

    /// A commit read by a look that counts only the writes announced before
    /// it: with no writer at work and nothing published since, every write
    /// to the WAL is read, and no re-check follows for the commit's later
    /// writes (each cost a wake-up and a read transaction per commit).
    #[test]
    fn a_commit_read_with_no_writer_left_counts_every_write() {
        let dir = tempfile::tempdir().expect("tmp");
        let (w, mut p) = followed(dir.path());
        put(&w, 0, "an answer");
        assert!(matches!(p.look(true), Looked::Read(e) if !e.is_empty()));
        assert!(!p.written_since_read(), "a commit's own writes re-checked");
        put(&w, 1, "an answer");
        assert!(p.written_since_read(), "a commit not read");
    }

    /// With a writer at work (another process holds the WAL's write
    /// lock), the writes since the notification may be the next commit's:
    /// they are not taken as read, and the re-checks go on.
    #[cfg(target_os = "linux")]
    #[test]
    fn writes_past_those_announced_count_while_a_writer_works() {
        let dir = tempfile::tempdir().expect("tmp");
        let (w, mut p) = followed(dir.path());
        put(&w, 0, "an answer");
        assert!(matches!(p.look(true), Looked::Read(e) if !e.is_empty()));
        let writer = crate::follow::wal_files::tests::held_elsewhere(p.path());
        assert!(p.written_since_read());
        drop(writer);
        assert!(!p.written_since_read());
    }

    /// A read that failed (here: busy) leaves the poller not caught up,
    /// though the WAL-index header it took before the read is the newest:
    /// what that header announced was not read. After agy's exit the turn
    /// ends on [`Poller::caught_up`]; a commit behind a failed read must
    /// not end it.
    #[test]
    fn a_failed_read_is_not_caught_up() {
        let dir = tempfile::tempdir().expect("tmp");
        let (_w, mut p) = followed(dir.path());
        assert!(p.caught_up());
        let locked = ReadError::Locked {
            path: p.path().to_path_buf(),
        };
        assert!(matches!(p.not_ready(locked), Poll::NotReady(_)));
        assert!(!p.caught_up(), "caught up after a failed read");
        assert!(matches!(p.poll(), Poll::Ready(_)));
        assert!(p.caught_up(), "a read again");
    }
}
