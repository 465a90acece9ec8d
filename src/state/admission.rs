//! Account-wide admission for agy starts: how many agy turns may be in
//! flight at once, and how closely two agy processes may start, across every
//! process of this OS user.
//!
//! # Why
//!
//! Every pi session and subagent on a machine usually talks to Google through
//! one account. A burst of sessions (a fan-out of subagents, a restored
//! workspace) starting agy all at once stampedes that account; the bridge
//! makes them queue instead. The limit must hold across processes (each pi
//! session runs its own bridge), so it lives in files under the state
//! directory, not in memory.
//!
//! # How
//!
//! - **Seats** (`SEATS_ENV`, default `DEFAULT_SEATS`): the files
//!   `<state_dir>/admission/seat-<i>.lock`, `i` in `0..seats`. A turn holds
//!   one by a non-blocking exclusive `flock` on it ([`Seat`]). Dropping the
//!   [`Seat`] frees it, and so does the holder dying: `flock` locks go with
//!   the open file, so a crashed bridge never leaves a seat taken.
//! - **Start interval** (`START_INTERVAL_ENV`, default
//!   `DEFAULT_START_INTERVAL`, i.e. 8 starts per 2 s evenly spaced; 0 turns
//!   the spacing off): `<state_dir>/admission/starts.lock` holds the last
//!   start time (milliseconds since the Unix epoch, as text), read and
//!   written only under an exclusive `flock` on that same file.
//!
//! Nothing read from these files can block agy for good: a corrupt or empty
//! starts file counts as no earlier start, and a start time in the future
//! (the clock moved back) costs at most one interval. Lock files are never
//! removed (see [`crate::state::file`]'s `lock_file`: removing one would let two
//! holders lock two different files). Directories are made 0700, files 0600,
//! as for every state file.
//!
//! If the admission directory cannot be made at all (a read-only state
//! directory), every call here fails with an I/O error
//! (`AdmissionError::Io`); the caller then runs agy without admission
//! rather than not at all.

use crate::state::file::{lock_file, BadEnv, StateError, StateLock};
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// How many agy turns may be in flight at once (default [`DEFAULT_SEATS`]).
pub(crate) const SEATS_ENV: &str = "AGY_SEATS";
/// The least time between two agy starts, in milliseconds (default
/// [`DEFAULT_START_INTERVAL`]; 0 = no spacing).
pub(crate) const START_INTERVAL_ENV: &str = "AGY_START_INTERVAL_MS";

/// Seats when [`SEATS_ENV`] is unset.
pub(crate) const DEFAULT_SEATS: u32 = 8;
/// The start interval when [`START_INTERVAL_ENV`] is unset: 8 starts per
/// 2 s, evenly spaced.
pub(crate) const DEFAULT_START_INTERVAL: Duration = Duration::from_millis(250);
/// The most seats [`SEATS_ENV`] takes: each seat is a lock file tried in
/// turn, so a huge number would be thousands of files and opens per try.
pub(crate) const MAX_SEATS: u32 = 256;

/// The directory under the state directory that holds the lock files.
const ADMISSION_DIR: &str = "admission";
/// The file holding the last start time.
const STARTS_FILE: &str = "starts.lock";
/// How long [`Admission::wait_seat`] sleeps between tries: short enough
/// that a freed seat is taken quickly, long enough that waiting sessions
/// cost next to nothing.
const SEAT_POLL: Duration = Duration::from_millis(50);
/// The most of the starts file that is read: a time is 20 digits at most,
/// anything longer is corrupt anyway.
const MAX_STARTS_BYTES: u64 = 64;

/// Why waiting for admission ended without it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdmissionError {
    /// The cancellation token fired while waiting.
    #[error("cancelled while waiting for an agy seat or start slot")]
    Cancelled,
    /// The admission files could not be made, opened or locked; the message
    /// names the path. The caller may run agy without admission.
    #[error("agy admission: {0}")]
    Io(#[from] io::Error),
}

/// The admission limits over one state directory. Cheap to clone; holds no
/// file open (each try opens what it needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    dir: PathBuf,
    seats: u32,
    interval: Duration,
}

/// One taken seat: an agy turn may run while this is alive. Dropping it (or
/// the process ending) frees the seat for another process.
pub struct Seat {
    _lock: StateLock,
    index: u32,
}

impl Seat {
    /// Which seat this is (`seat-<index>.lock`), for logs.
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl fmt::Debug for Seat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Seat").field("index", &self.index).finish()
    }
}

impl Admission {
    /// The limits given outright; `seats` below 1 is taken as 1 (no seat at
    /// all would block every turn forever).
    pub(crate) fn new(state_dir: &Path, seats: u32, interval: Duration) -> Admission {
        Admission {
            dir: state_dir.join(ADMISSION_DIR),
            seats: seats.max(1),
            interval,
        }
    }

    /// How many agy turns may be in flight at once.
    pub fn seats(&self) -> u32 {
        self.seats
    }

    /// The least time between two agy starts.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Non-blocking: a free seat, or `None` when every seat is held. Blocking
    /// file I/O: call it off the async runtime (as [`Admission::wait_seat`]
    /// does).
    pub(crate) fn try_seat(&self) -> io::Result<Option<Seat>> {
        for index in 0..self.seats {
            let path = self.dir.join(format!("seat-{index}.lock"));
            if let Some(lock) = lock_file(&path, false).map_err(to_io)? {
                return Ok(Some(Seat { _lock: lock, index }));
            }
        }
        Ok(None)
    }

    /// Non-blocking: record an agy start now and return `Ok(Ok(()))`, or
    /// return `Ok(Err(wait))`, how long until a start may be recorded.
    /// Never waits for the interval; it does wait for the starts lock, which
    /// other processes hold only for one read and one write. Blocking file
    /// I/O: call it off the async runtime (as [`Admission::wait_start`]
    /// does).
    pub(crate) fn try_start(&self) -> io::Result<Result<(), Duration>> {
        if self.interval.is_zero() {
            return Ok(Ok(()));
        }
        let path = self.dir.join(STARTS_FILE);
        let lock = match lock_file(&path, true).map_err(to_io)? {
            Some(lock) => lock,
            // A waiting flock does not come back empty; should it ever, it
            // is the same as a refused lock.
            None => return Err(path_err(&path, "lock", io::ErrorKind::WouldBlock.into())),
        };
        let file = lock.file();
        let last = read_last_start(file).map_err(|e| path_err(&path, "read", e))?;
        let now = now_ms();
        let (wait, record) = match last {
            // The clock moved back: the recorded start cannot be trusted, so
            // it is replaced by a start just now, which costs one interval
            // and no more, instead of waiting for the clock to catch up.
            Some(last) if last > now => (Err(self.interval), true),
            Some(last) => match last.saturating_add(duration_ms(self.interval)) {
                next if next > now => (Err(Duration::from_millis(next - now)), false),
                _ => (Ok(()), true),
            },
            None => (Ok(()), true),
        };
        if record {
            write_last_start(file, now).map_err(|e| path_err(&path, "write", e))?;
        }
        Ok(wait)
    }

    /// Wait for a seat, trying every ~50 ms, until one is free or `cancel`
    /// fires. `waiting` is called once, with the number of seats, the first
    /// time none is free, so the caller can tell the user why nothing
    /// happens yet. Each try runs on tokio's blocking pool: file I/O never
    /// runs on a runtime worker.
    pub(crate) async fn wait_seat(
        &self,
        cancel: &CancellationToken,
        mut waiting: impl FnMut(u32),
    ) -> Result<Seat, AdmissionError> {
        let mut told = false;
        // Tried once even when `cancel` has fired: a caller that need not
        // wait goes on to its own checks (a bad request is said as such,
        // not as an abort); only a wait is cut short.
        loop {
            let admission = self.clone();
            if let Some(seat) = blocking(move || admission.try_seat()).await? {
                return Ok(seat);
            }
            if !told {
                told = true;
                waiting(self.seats);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(AdmissionError::Cancelled),
                _ = tokio::time::sleep(SEAT_POLL) => {}
            }
        }
    }

    /// Wait for a start slot and record the start: sleeps as long as
    /// [`Admission::try_start`] says (another process may take the slot
    /// first, then it waits again), until a start is recorded or `cancel`
    /// fires. `waiting` is called once, with the first wait, if there is one.
    pub(crate) async fn wait_start(
        &self,
        cancel: &CancellationToken,
        mut waiting: impl FnMut(Duration),
    ) -> Result<(), AdmissionError> {
        let mut told = false;
        // Tried once even when `cancel` has fired: a caller that need not
        // wait goes on to its own checks (a bad request is said as such,
        // not as an abort); only a wait is cut short.
        loop {
            let admission = self.clone();
            let wait = match blocking(move || admission.try_start()).await? {
                Ok(()) => return Ok(()),
                Err(wait) => wait,
            };
            if !told {
                told = true;
                waiting(wait);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(AdmissionError::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The limits when neither variable is set.
pub const DEFAULT_LIMITS: (u32, Duration) = (DEFAULT_SEATS, DEFAULT_START_INTERVAL);

/// The values of `AGY_SEATS` and `AGY_START_INTERVAL_MS` (`None`: unset)
/// checked into seats and an interval: a bad value is a [`BadEnv`] naming
/// the variable and the values it takes ([`crate::settings`] reads them).
pub fn limits(seats: Option<&str>, interval: Option<&str>) -> Result<(u32, Duration), BadEnv> {
    let seats = match seats {
        None => DEFAULT_SEATS,
        Some(value) => match value.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_SEATS).contains(&n) => n,
            _ => {
                return Err(BadEnv {
                    var: SEATS_ENV,
                    value: value.to_string(),
                    takes: "a whole number of agy turns from 1 to 256 (default 8)",
                })
            }
        },
    };
    let interval = match interval {
        None => DEFAULT_START_INTERVAL,
        Some(value) => match value.trim().parse::<u64>() {
            Ok(ms) => Duration::from_millis(ms),
            Err(_) => {
                return Err(BadEnv {
                    var: START_INTERVAL_ENV,
                    value: value.to_string(),
                    takes: "a whole number of milliseconds, 0 for no spacing (default 250)",
                })
            }
        },
    };
    Ok((seats, interval))
}

/// Run a blocking try on tokio's blocking pool; a try that panicked or was
/// dropped with the runtime is an I/O error rather than a panic here.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, AdmissionError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => Ok(result?),
        Err(join) => Err(AdmissionError::Io(io::Error::other(format!(
            "the admission check did not finish: {join}"
        )))),
    }
}

/// The last start time in the starts file: `None` when the file is empty
/// or holds anything but a number (counts as no earlier start).
fn read_last_start(file: &File) -> io::Result<Option<u64>> {
    let mut bytes = Vec::new();
    file.take(MAX_STARTS_BYTES).read_to_end(&mut bytes)?;
    Ok(std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok()))
}

/// Replace the starts file's content with `ms` (under its lock, so nobody
/// reads it half-written). Not fsynced: losing it in a crash costs at most
/// one early start, and a torn file reads as no earlier start.
fn write_last_start(mut file: &File, ms: u64) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{ms}")?;
    file.flush()
}

/// Milliseconds since the Unix epoch (0 for a clock before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(duration_ms)
        .unwrap_or(0)
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An I/O error that names the file and what was being done to it.
fn path_err(path: &Path, action: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {action} {}: {e}", path.display()))
}

/// [`lock_file`]'s error as an I/O error keeping its kind; its message
/// already names the path.
fn to_io(e: StateError) -> io::Error {
    let kind = match &e {
        StateError::Io { source, .. } => source.kind(),
        StateError::Lock { source, .. } => io::Error::from(*source).kind(),
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    const LONG: Duration = Duration::from_secs(10);

    fn starts_path(dir: &Path) -> PathBuf {
        dir.join(ADMISSION_DIR).join(STARTS_FILE)
    }

    #[test]
    fn seats_run_out_and_a_dropped_seat_is_free_again() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 2, Duration::ZERO);
        let first = admission.try_seat().unwrap().unwrap();
        let second = admission.try_seat().unwrap().unwrap();
        assert_ne!(first.index(), second.index());
        assert!(admission.try_seat().unwrap().is_none());
        let freed = first.index();
        drop(first);
        let again = admission.try_seat().unwrap().unwrap();
        assert_eq!(again.index(), freed);
        assert!(admission.try_seat().unwrap().is_none());
    }

    #[test]
    fn two_admissions_over_one_dir_share_seats() {
        // flock belongs to the open file description: each try opens its own,
        // so two values here behave like two processes.
        let dir = tempfile::tempdir().unwrap();
        let one = Admission::new(dir.path(), 1, Duration::ZERO);
        let other = Admission::new(dir.path(), 1, Duration::ZERO);
        let seat = one.try_seat().unwrap().unwrap();
        assert!(other.try_seat().unwrap().is_none());
        drop(seat);
        assert!(other.try_seat().unwrap().is_some());
    }

    #[cfg(unix)]
    #[test]
    fn lock_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::from_millis(10));
        let _seat = admission.try_seat().unwrap().unwrap();
        admission.try_start().unwrap().unwrap();
        let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.path().join(ADMISSION_DIR)), 0o700);
        assert_eq!(
            mode(dir.path().join(ADMISSION_DIR).join("seat-0.lock")),
            0o600
        );
        assert_eq!(mode(starts_path(dir.path())), 0o600);
    }

    #[test]
    fn a_second_start_within_the_interval_waits_at_most_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let interval = Duration::from_secs(5);
        let admission = Admission::new(dir.path(), 1, interval);
        assert_eq!(admission.try_start().unwrap(), Ok(()));
        let wait = admission.try_start().unwrap().unwrap_err();
        assert!(wait <= interval, "{wait:?}");
        assert!(wait > Duration::ZERO);
        // Another "process" sees the same start.
        let other = Admission::new(dir.path(), 1, interval);
        assert!(other.try_start().unwrap().is_err());
    }

    #[test]
    fn a_start_after_the_interval_goes() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::from_millis(30));
        assert_eq!(admission.try_start().unwrap(), Ok(()));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(admission.try_start().unwrap(), Ok(()));
    }

    #[test]
    fn interval_zero_never_waits() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::ZERO);
        for _ in 0..5 {
            assert_eq!(admission.try_start().unwrap(), Ok(()));
        }
    }

    #[test]
    fn a_corrupt_or_empty_starts_file_is_no_earlier_start() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::from_secs(60));
        std::fs::create_dir_all(dir.path().join(ADMISSION_DIR)).unwrap();
        for content in [&b""[..], b"garbage\0\xff", b"-5", &[b'9'; 200][..]] {
            std::fs::write(starts_path(dir.path()), content).unwrap();
            assert_eq!(admission.try_start().unwrap(), Ok(()), "{content:?}");
        }
        // ...and the file is repaired: the next start waits.
        assert!(admission.try_start().unwrap().is_err());
    }

    #[test]
    fn a_start_in_the_future_waits_at_most_one_interval() {
        let dir = tempfile::tempdir().unwrap();
        let interval = Duration::from_millis(100);
        let admission = Admission::new(dir.path(), 1, interval);
        std::fs::create_dir_all(dir.path().join(ADMISSION_DIR)).unwrap();
        let hour_ahead = now_ms() + 3_600_000;
        std::fs::write(starts_path(dir.path()), format!("{hour_ahead}\n")).unwrap();
        let wait = admission.try_start().unwrap().unwrap_err();
        assert!(wait <= interval, "{wait:?}");
        std::thread::sleep(interval * 2);
        assert_eq!(admission.try_start().unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn wait_seat_tells_once_and_takes_a_freed_seat() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::ZERO);
        let held = admission.try_seat().unwrap().unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(held);
        });
        let mut told = Vec::new();
        let cancel = CancellationToken::new();
        let seat = tokio::time::timeout(LONG, admission.wait_seat(&cancel, |n| told.push(n)))
            .await
            .expect("a freed seat is taken")
            .unwrap();
        assert_eq!(seat.index(), 0);
        assert_eq!(told, vec![1]);
        release.await.unwrap();
    }

    #[tokio::test]
    async fn wait_seat_with_a_free_seat_does_not_tell() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 2, Duration::ZERO);
        let calls = AtomicU32::new(0);
        let cancel = CancellationToken::new();
        let seat = admission
            .wait_seat(&cancel, |_| {
                calls.fetch_add(1, Ordering::SeqCst);
            })
            .await
            .unwrap();
        assert_eq!(seat.index(), 0);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn wait_seat_returns_cancelled_promptly() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::ZERO);
        let _held = admission.try_seat().unwrap().unwrap();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let began = Instant::now();
        let result = tokio::time::timeout(LONG, admission.wait_seat(&cancel, |_| {}))
            .await
            .expect("cancel ends the wait");
        assert!(
            matches!(result, Err(AdmissionError::Cancelled)),
            "{result:?}"
        );
        assert!(began.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_cancelled_caller_that_need_not_wait_is_admitted() {
        // Its own checks then run (a bad request is said as such).
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::from_secs(60));
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(admission.wait_seat(&cancel, |_| {}).await.is_ok());
        assert!(admission.wait_start(&cancel, |_| {}).await.is_ok());
    }

    #[tokio::test]
    async fn wait_start_waits_once_then_records() {
        let dir = tempfile::tempdir().unwrap();
        let interval = Duration::from_millis(150);
        let admission = Admission::new(dir.path(), 1, interval);
        admission.try_start().unwrap().unwrap();
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = told.clone();
        let cancel = CancellationToken::new();
        tokio::time::timeout(
            LONG,
            admission.wait_start(&cancel, move |d| seen.lock().unwrap().push(d)),
        )
        .await
        .expect("the interval passes")
        .unwrap();
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 1);
        assert!(told[0] <= interval, "{told:?}");
        // That start was recorded: the next one waits again.
        assert!(admission.try_start().unwrap().is_err());
    }

    #[tokio::test]
    async fn wait_start_returns_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let admission = Admission::new(dir.path(), 1, Duration::from_secs(60));
        admission.try_start().unwrap().unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result = tokio::time::timeout(LONG, admission.wait_start(&cancel, |_| {}))
            .await
            .expect("cancel ends the wait");
        assert!(matches!(result, Err(AdmissionError::Cancelled)));
    }

    #[test]
    fn a_state_dir_that_cannot_hold_files_is_an_io_error_naming_the_path() {
        // A file where the state directory should be: no admission directory
        // can be made under it, even by root (a read-only mode would not
        // stop root).
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("state");
        std::fs::write(&not_a_dir, "").unwrap();
        let admission = Admission::new(&not_a_dir, 1, Duration::from_millis(10));
        let err = admission.try_seat().unwrap_err();
        assert!(err.to_string().contains(ADMISSION_DIR), "{err}");
        let err = admission.try_start().unwrap_err();
        assert!(err.to_string().contains(ADMISSION_DIR), "{err}");
    }

    #[test]
    fn limits_take_defaults_and_good_values() {
        assert_eq!(
            limits(None, None).unwrap(),
            (DEFAULT_SEATS, DEFAULT_START_INTERVAL)
        );
        assert_eq!(limits(Some(" 3 "), Some("0")).unwrap(), (3, Duration::ZERO));
        assert_eq!(limits(Some("256"), None).unwrap().0, 256);
    }

    #[test]
    fn limits_reject_bad_values_naming_the_variable() {
        for (seats, interval, var) in [
            (Some("0"), None, SEATS_ENV),
            (Some("many"), None, SEATS_ENV),
            (Some("257"), None, SEATS_ENV),
            (Some("-1"), None, SEATS_ENV),
            (None, Some("-1"), START_INTERVAL_ENV),
            (None, Some("1.5"), START_INTERVAL_ENV),
        ] {
            let err = limits(seats, interval).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.to_string().contains(var), "{err}");
            assert!(err.to_string().contains("whole number"), "{err}");
        }
    }

    #[test]
    fn new_keeps_at_least_one_seat() {
        let admission = Admission::new(Path::new("/nowhere"), 0, Duration::ZERO);
        assert_eq!(admission.seats(), 1);
        assert_eq!(admission.interval(), Duration::ZERO);
    }
}
