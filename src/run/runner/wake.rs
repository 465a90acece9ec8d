//! What wakes a following turn: inotify on the conversations directory,
//! the settle re-checks after a notification, and the fallback tick. Apart
//! from the turn because it is policy (when to look), not what is looked at.

use super::*;
use crate::follow::poller::Settle;

/// Settle re-checks after a file notification. A WAL write notifies before
/// the commit is visible to readers (SQLite writes the WAL, syncs it, then
/// publishes the commit in shared memory, which notifies nobody). The poll
/// that a notification starts keeps looking on its blocking thread
/// ([`Poller::poll_settling`]) until the commit is visible: up to
/// [`SETTLE_FINE`]'s `written` bound when the WAL was written since the
/// last read (agy's fsync, typically under a millisecond, at times several,
/// is caught within 0.2 ms of its end), and only briefly for writes already
/// read. What outlasts that (a long write) is caught by the re-checks 2,
/// 4, … 64 ms later. Each look is one `PRAGMA data_version`.
pub(super) const SETTLE_FINE: Settle = Settle {
    written: Duration::from_millis(4),
    unwritten: Duration::from_micros(1500),
};
const SETTLE_FIRST: Duration = Duration::from_millis(2);
const SETTLE_LAST: Duration = Duration::from_millis(64);

pub(super) async fn settle_sleep(settle: Option<(tokio::time::Instant, Duration)>) {
    match settle {
        Some((since, delay)) => tokio::time::sleep_until(since + delay).await,
        None => std::future::pending().await,
    }
}

/// Wake-up source: inotify on the conversations directory.
pub(super) struct Watcher {
    _inner: notify::RecommendedWatcher,
    rx: mpsc::Receiver<PathBuf>,
}

/// File notifications waiting for the runner. A notification is only a
/// reason to poll, and the runner drains every waiting one per wake-up
/// ([`Wake::on_change`]), so a full queue already holds a wake-up: one that
/// does not fit is dropped rather than queued while the runner waits for a
/// slow consumer (agy's WAL writes notify on every commit), and the
/// fallback tick covers the rare relevant one lost behind others.
const WAKE_CAPACITY: usize = 64;

fn watch(dir: &Path) -> Option<Watcher> {
    use notify::Watcher as _;
    let (tx, rx) = mpsc::channel(WAKE_CAPACITY);
    let mut inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            for path in event.paths {
                // Full: a wake-up is waiting already (see WAKE_CAPACITY).
                let _ = tx.try_send(path);
            }
        }
    })
    .ok()?;
    inner.watch(dir, notify::RecursiveMode::NonRecursive).ok()?;
    Some(Watcher { _inner: inner, rx })
}

/// Whether a change to `path` can matter: before binding, a conversation
/// database appearing (`*.db`; the WAL writes of concurrent runs would only
/// make every waiting runner re-run discovery); after, only ours (`<id>.db`,
/// `-wal`, `-shm`).
fn relevant(path: &Path, bound: Option<&ConversationId>) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    match bound {
        Some(id) => name.starts_with(id.as_str()),
        None => name.ends_with(".db"),
    }
}

/// The wake-up policy: file notifications with settle re-checks and the
/// fallback tick.
pub(super) struct Wake {
    pub(super) watcher: Option<Watcher>,
    pub(super) tick: tokio::time::Interval,
    /// After a file notification: (since, delay) of the next settle re-check.
    pub(super) settle: Option<(tokio::time::Instant, Duration)>,
}

impl Wake {
    pub(super) fn new(cfg: &RunConfig, dir: &Path) -> Wake {
        let mut tick = tokio::time::interval(cfg.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Wake {
            watcher: match cfg.wake {
                WakeMode::Events => watch(dir),
                WakeMode::PollOnly => None,
            },
            tick,
            settle: None,
        }
    }

    /// A file changed: whether to poll now (coalescing a burst into one).
    pub(super) fn on_change(&mut self, path: &Path, bound: Option<&ConversationId>) -> bool {
        let mut wake = relevant(path, bound);
        if let Some(w) = self.watcher.as_mut() {
            while let Ok(p) = w.rx.try_recv() {
                wake |= relevant(&p, bound);
            }
        }
        if wake {
            // The write we were told about becomes visible only once agy's
            // commit (and its fsync) completes, which sends no notification:
            // re-check a few times soon.
            self.settle = Some((tokio::time::Instant::now(), SETTLE_FIRST));
        }
        wake
    }

    pub(super) fn next_settle(&mut self) {
        self.settle = self.settle.and_then(|(_, step)| {
            let next = step * 2;
            (next <= SETTLE_LAST).then(|| (tokio::time::Instant::now(), next))
        });
    }
}

pub(super) async fn recv_path(w: &mut Option<Watcher>) -> Option<PathBuf> {
    match w {
        Some(w) => w.rx.recv().await,
        None => std::future::pending().await,
    }
}
