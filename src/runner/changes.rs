//! What wakes the follower's thread ([`super::follower`]): a change to the
//! followed database's files, a deadline, or the turn telling it to stop.
//! Blocking, for a thread of its own; the turn's side is [`StopChanges`],
//! which ends the wait when dropped. On Linux the thread reads inotify
//! itself (one `poll` on the inotify descriptor and a socket the turn
//! closes), so a commit's notification wakes only the thread that reads
//! the commit; elsewhere notify's watcher hands changes over.

#[cfg(target_os = "linux")]
use super::wake::inotify_on;
use super::wake::relevant;
use agy_format::ids::ConversationId;
use std::path::Path;
use std::time::Instant;

/// Why [`Changes::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Woke {
    /// The followed database's files changed.
    Changed,
    /// The deadline passed (or a wake-up that brought nothing: the caller
    /// looks at the clock).
    Timeout,
    /// The turn let go ([`StopChanges`] dropped).
    Stop,
}

/// The thread's side: changes to one conversation's files (`<id>.db`,
/// `-wal`, `-shm`) in the conversations directory.
#[cfg(target_os = "linux")]
pub(super) struct Changes {
    /// `None`: no notifications (poll-only mode, or inotify refused): only
    /// deadlines and the stop wake the thread.
    inotify: Option<nix::sys::inotify::Inotify>,
    stop: std::os::unix::net::UnixStream,
    bound: ConversationId,
}

/// The turn's side: dropping it wakes the thread's [`Changes::wait`] with
/// [`Woke::Stop`].
#[cfg(target_os = "linux")]
pub(super) struct StopChanges(#[allow(dead_code)] std::os::unix::net::UnixStream);

/// Changes to `bound`'s files in `dir` (with `watch`; else deadlines only),
/// and the turn's handle that stops the waiting.
#[cfg(target_os = "linux")]
pub(super) fn changes(
    dir: &Path,
    bound: &ConversationId,
    watch: bool,
) -> std::io::Result<(Changes, StopChanges)> {
    let (stop, turn) = std::os::unix::net::UnixStream::pair()?;
    let inotify = if watch { inotify_on(dir) } else { None };
    let changes = Changes {
        inotify,
        stop,
        bound: bound.clone(),
    };
    Ok((changes, StopChanges(turn)))
}

#[cfg(target_os = "linux")]
impl Changes {
    /// Wait until one of the followed database's files changes, `until`
    /// passes (at once when it has), or the turn lets go. Deadlines are
    /// kept to the millisecond, rounded up (the settle re-checks and the
    /// tick are whole milliseconds; what is finer is
    /// [`crate::follow::poller::Poller::poll_settling`]'s).
    pub(super) fn wait(&mut self, until: Instant) -> Woke {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let left = until.saturating_duration_since(Instant::now());
        let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = vec![PollFd::new(self.stop.as_fd(), PollFlags::POLLIN)];
        if let Some(inotify) = &self.inotify {
            fds.push(PollFd::new(inotify.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Woke::Timeout,
            Ok(_) => {}
            Err(_) => {
                // Not expected of two valid descriptors; waiting out the
                // deadline keeps the thread on its timed looks, not spinning.
                std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
                return Woke::Timeout;
            }
        }
        let stopped = fds[0].revents().is_some_and(|r| !r.is_empty());
        let notified = fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty());
        if stopped {
            return Woke::Stop;
        }
        if notified && self.drain_relevant() {
            return Woke::Changed;
        }
        Woke::Timeout
    }

    /// Every waiting notification read (one read takes a buffer's worth);
    /// whether one was of the followed database's files. An error reading
    /// them counts as a change: a look costs less than a commit missed.
    fn drain_relevant(&mut self) -> bool {
        let Some(inotify) = &self.inotify else {
            return false;
        };
        let mut ours = false;
        loop {
            match inotify.read_events() {
                Ok(events) if !events.is_empty() => {
                    ours |= events.iter().any(|e| {
                        // The queue overflowed: notifications were lost,
                        // any of them this database's.
                        e.mask
                            .contains(nix::sys::inotify::AddWatchFlags::IN_Q_OVERFLOW)
                            || e.name
                                .as_deref()
                                .is_some_and(|name| relevant(Path::new(name), Some(&self.bound)))
                    });
                }
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => return ours,
                Err(_) => return true,
            }
        }
    }

    /// Whether file notifications wake the thread (else only deadlines do).
    pub(super) fn notified(&self) -> bool {
        self.inotify.is_some()
    }
}

/// The thread's side elsewhere: notify's watcher raises a flag and wakes
/// the thread through a channel of one (a wake-up already waiting is
/// enough, so a full channel drops the next).
#[cfg(not(target_os = "linux"))]
pub(super) struct Changes {
    watcher: Option<notify::RecommendedWatcher>,
    flags: std::sync::Arc<Flags>,
    wake: std::sync::mpsc::Receiver<()>,
}

#[cfg(not(target_os = "linux"))]
#[derive(Default)]
struct Flags {
    changed: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
}

#[cfg(not(target_os = "linux"))]
pub(super) struct StopChanges {
    flags: std::sync::Arc<Flags>,
    wake: std::sync::mpsc::SyncSender<()>,
}

#[cfg(not(target_os = "linux"))]
impl Drop for StopChanges {
    fn drop(&mut self) {
        self.flags
            .stop
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.wake.try_send(());
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn changes(
    dir: &Path,
    bound: &ConversationId,
    watch: bool,
) -> std::io::Result<(Changes, StopChanges)> {
    let flags = std::sync::Arc::new(Flags::default());
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let watcher = if watch {
        watcher(dir, bound, &flags, &tx)
    } else {
        None
    };
    let changes = Changes {
        watcher,
        flags: flags.clone(),
        wake: rx,
    };
    Ok((changes, StopChanges { flags, wake: tx }))
}

/// notify's watcher on `dir`, raising `flags.changed` for `bound`'s files;
/// `None` when it cannot watch (deadlines only, then).
#[cfg(not(target_os = "linux"))]
fn watcher(
    dir: &Path,
    bound: &ConversationId,
    flags: &std::sync::Arc<Flags>,
    tx: &std::sync::mpsc::SyncSender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let (flags, tx, bound) = (flags.clone(), tx.clone(), bound.clone());
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        // An error or a rescan: events were lost, any of them ours.
        let lost = res.as_ref().map_or(true, notify::Event::need_rescan);
        let ours = res.is_ok_and(|e| e.paths.iter().any(|p| relevant(p, Some(&bound))));
        if lost || ours {
            flags
                .changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = tx.try_send(());
        }
    })
    .ok()?;
    w.watch(dir, notify::RecursiveMode::NonRecursive).ok()?;
    Some(w)
}

#[cfg(not(target_os = "linux"))]
impl Changes {
    /// Whether file notifications wake the thread (else only deadlines do).
    pub(super) fn notified(&self) -> bool {
        self.watcher.is_some()
    }

    pub(super) fn wait(&mut self, until: Instant) -> Woke {
        use std::sync::atomic::Ordering::SeqCst;
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            if self.flags.stop.load(SeqCst) {
                return Woke::Stop;
            }
            if self.flags.changed.swap(false, SeqCst) {
                return Woke::Changed;
            }
            let left = until.saturating_duration_since(Instant::now());
            match self.wake.recv_timeout(left) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => return Woke::Timeout,
                Err(RecvTimeoutError::Disconnected) => return Woke::Stop,
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    const ID: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

    /// Another database's writes do not wake the thread; a notification
    /// queue that overflowed does, since what it lost may be ours.
    #[test]
    fn an_overflowed_queue_counts_as_a_change() {
        let dir = tempfile::tempdir().expect("tmp");
        let id = ConversationId::parse(ID).expect("id");
        let (mut changes, _stop) = changes(dir.path(), &id, true).expect("changes");
        assert!(changes.notified());
        let open = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join(name))
                .expect("open")
        };
        let mut files = [open("other.db"), open("another.db")];
        files[0].write_all(b"x").expect("write");
        let soon = || Instant::now() + Duration::from_millis(50);
        assert_eq!(changes.wait(soon()), Woke::Timeout);
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16_384);
        if max > 1 << 20 {
            eprintln!("skipped: a queue of {max} events takes too long to fill");
            return;
        }
        // Two files in turn: no event is like the one before, so none merge.
        for i in 0..=max {
            files[i % 2].write_all(b"x").expect("write");
        }
        assert_eq!(changes.wait(soon()), Woke::Changed);
    }
}
