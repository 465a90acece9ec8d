//! What wakes a turn before it follows a database (a conversation database
//! appearing in the conversations directory, for discovery; the fallback
//! tick), and how long a settling poll looks. Once bound, the follower's
//! thread waits for the database's own changes (`follower`, `changes`).
//! Apart from the turn because it is policy (when to look), not what is
//! looked at.

use super::*;

/// How long a settling poll looks for the commit a notification
/// announced. A WAL write notifies before the commit is visible to readers
/// (SQLite writes the WAL, syncs it, then publishes the commit in shared
/// memory, which notifies nobody), so the poll a notification starts keeps
/// looking ([`Poller::poll_settling`]) while agy holds the WAL's write
/// lock, up to this long (agy's fsync, typically under a millisecond, at
/// times several, is caught within 0.1 ms of its end, 0.2 ms when it ends
/// in the first 0.2 ms). What outlasts that (a long write) is caught by the
/// follower's re-checks 2, 4, … 64 ms later, which stop once the reader is
/// caught up ([`Poller::written_since_read`]): then the next write
/// notifies. While agy holds no write transaction a look is one look,
/// never a window; each is a `pread` of the WAL-index header, SQLite asked
/// only when it moved.
pub(super) const SETTLE_FINE: Duration = Duration::from_millis(4);

/// Wake-up source: file notifications from the conversations directory.
/// On Linux, inotify read by the runtime's own I/O driver: one `read`
/// brings every waiting notification, with no thread or channel between
/// the kernel and the turn (a commit notifies once per WAL write).
#[cfg(target_os = "linux")]
pub(super) struct Watcher {
    fd: crate::process::reactor::Watched<nix::sys::inotify::Inotify>,
    /// Names read but not yet handed out, oldest first.
    pending: VecDeque<PathBuf>,
}

/// A non-blocking inotify watch of the conversations directory (the
/// turn's before binding, the follower's after): writes, and files
/// appearing (a new conversation, a WAL created), what can bring a commit.
/// Not opens or reads, our own included.
#[cfg(target_os = "linux")]
pub(super) fn inotify_on(dir: &Path) -> Option<nix::sys::inotify::Inotify> {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
    let mask = AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CLOSE_WRITE;
    inotify.add_watch(dir, mask).ok()?;
    Some(inotify)
}

#[cfg(target_os = "linux")]
fn watch(dir: &Path) -> Option<Watcher> {
    let inotify = inotify_on(dir)?;
    let readable = tokio::io::Interest::READABLE;
    let fd = crate::process::reactor::watch(inotify, readable).ok()?;
    Some(Watcher {
        fd,
        pending: VecDeque::new(),
    })
}

#[cfg(target_os = "linux")]
impl Watcher {
    /// The next changed file's name; `None` when the watch is gone.
    async fn recv(&mut self) -> Option<PathBuf> {
        loop {
            if let Some(name) = self.pending.pop_front() {
                return Some(name);
            }
            let mut ready = self.fd.readable().await.ok()?;
            match ready.try_io(|fd| {
                fd.get_ref()
                    .get()
                    .read_events()
                    .map_err(std::io::Error::from)
            }) {
                Ok(Ok(events)) => {
                    let names = events.into_iter().filter_map(|e| e.name).map(PathBuf::from);
                    self.pending.extend(names);
                }
                Ok(Err(_)) => return None,
                Err(_would_block) => {}
            }
        }
    }

    /// A name already read, without waiting.
    fn try_recv(&mut self) -> Option<PathBuf> {
        self.pending.pop_front()
    }
}

/// Wake-up source elsewhere: notify's watcher on the conversations
/// directory, its events handed over a channel.
#[cfg(not(target_os = "linux"))]
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
#[cfg(not(target_os = "linux"))]
const WAKE_CAPACITY: usize = 64;

#[cfg(not(target_os = "linux"))]
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

#[cfg(not(target_os = "linux"))]
impl Watcher {
    async fn recv(&mut self) -> Option<PathBuf> {
        self.rx.recv().await
    }

    fn try_recv(&mut self) -> Option<PathBuf> {
        self.rx.try_recv().ok()
    }
}

/// Whether a change to `path` can matter: before binding, a conversation
/// database appearing (`*.db`; the WAL writes of concurrent runs would only
/// make every waiting runner re-run discovery); after, only ours (`<id>.db`,
/// `-wal`, `-shm`).
pub(super) fn relevant(path: &Path, bound: Option<&ConversationId>) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    match bound {
        Some(id) => name.starts_with(id.as_str()),
        None => name.ends_with(".db"),
    }
}

/// The wake-up policy before a follower runs: file notifications and the
/// fallback tick.
pub(super) struct Wake {
    pub(super) watcher: Option<Watcher>,
    pub(super) tick: tokio::time::Interval,
}

impl Wake {
    pub(super) fn new(cfg: &RunConfig, dir: &Path) -> Wake {
        let mut tick = tokio::time::interval(cfg.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut wake = Wake {
            watcher: None,
            tick,
        };
        wake.watch(cfg, dir);
        wake
    }

    /// Watch the conversations directory (again), unless told not to.
    pub(super) fn watch(&mut self, cfg: &RunConfig, dir: &Path) {
        if cfg.wake == WakeMode::Events && self.watcher.is_none() {
            self.watcher = watch(dir);
        }
    }

    /// A file changed: whether to poll now (coalescing a burst into one).
    pub(super) fn on_change(&mut self, path: &Path, bound: Option<&ConversationId>) -> bool {
        let mut wake = relevant(path, bound);
        if let Some(w) = self.watcher.as_mut() {
            while let Some(p) = w.try_recv() {
                wake |= relevant(&p, bound);
            }
        }
        wake
    }
}

pub(super) async fn recv_path(w: &mut Option<Watcher>) -> Option<PathBuf> {
    match w {
        Some(w) => w.recv().await,
        None => std::future::pending().await,
    }
}
