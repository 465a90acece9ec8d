//! The followed database's reader on a thread of its own, from the binding
//! to the end of agy's run: it waits for agy's writes, settles, reads, and
//! wakes the turn only with what the turn must see.
//!
//! Why a thread: the commits are the hot path (hundreds a turn), and each
//! used to cross three threads before it became a line: the runtime's I/O
//! driver woke a worker for the inotify event, the worker handed the poll
//! to a blocking thread (SQLite reads block) and took it back. Here the
//! thread that reads inotify also looks, settles and reads (the floor's
//! shape, `benches/latency/floor.rs`), and a notification for writes
//! already read wakes nobody else. What a poll means stays the turn's
//! ([`Turn::on_polled`]); when to look is this thread's, with the same
//! policy the turn had: a settling poll after a notification, re-checks 2,
//! 4 … 64 ms later while the WAL holds writes not read, and the fallback
//! tick.
//!
//! Back-pressure is the channel of one: the thread hands over a poll's
//! events and reads nothing more until the turn took them, which it does
//! only while its consumer has room.

use super::changes::{changes, Changes, StopChanges, Woke};
use super::wake::SETTLE_FINE;
use super::*;
use crate::follow::poller::Poll;

/// The settle re-checks after a notification: the first this long after
/// it, each next twice as long, none past [`SETTLE_LAST`].
const SETTLE_FIRST: Duration = Duration::from_millis(2);
const SETTLE_LAST: Duration = Duration::from_millis(64);

/// The fallback tick while file notifications are trusted: every write of
/// agy's notifies, so the tick only guards against one that did not, and
/// each tick is a wake-up and a read transaction (about 0.1 ms of CPU on a
/// two-core VM, four a second at the 250 ms tick: more than a long turn's
/// commits cost while agy thinks). The trust ends for the rest of the run
/// as soon as a tick finds a commit no notification announced, and is
/// suspended while the database cannot be read: the short tick then.
const TRUSTED_TICK: Duration = Duration::from_secs(2);

/// What the turn keeps of the reader between polls (the reader itself is
/// the thread's while it runs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) last_idx: Option<i64>,
    /// The step waiting for user interaction, and what it runs.
    pub(super) waiting: Option<(i64, String)>,
}

impl Seen {
    pub(super) fn of(poller: &Poller) -> Seen {
        let waiting = poller.waiting_step().map(|idx| {
            let what = poller
                .tool_name(idx)
                .map(str::to_string)
                .unwrap_or_else(|| format!("step {idx}"));
            (idx, what)
        });
        Seen {
            last_idx: poller.last_idx(),
            waiting,
        }
    }
}

/// One poll's outcome, handed to the turn.
pub(super) struct Batch {
    pub(super) polled: Poll,
    pub(super) seen: Seen,
}

/// The turn's handle on the thread. Dropping it ends the thread (within
/// a poll); [`Follower::stop`] also takes back what it read and the reader.
pub(super) struct Follower {
    batches: mpsc::Receiver<Batch>,
    stop: Option<StopChanges>,
    done: tokio::sync::oneshot::Receiver<Poller>,
}

/// How the thread hands over polls: the turn's settings, as it starts.
pub(super) struct Handing {
    /// Every poll, even one that found nothing new (a recorder watches:
    /// it reads on every wake-up); else only what changes the turn's view.
    pub(super) every_poll: bool,
    pub(super) tick: Duration,
    /// inotify (or notify) on the conversations directory; else ticks only.
    pub(super) watch: bool,
}

impl Follower {
    /// Start the thread on the reader in `reader`, following `bound` in
    /// `dir`. When no thread can be had, the reader stays where it was.
    pub(super) fn start(
        reader: &mut Option<Poller>,
        dir: &Path,
        bound: &ConversationId,
        handing: Handing,
    ) -> Option<Follower> {
        let (changes, stop) = changes(dir, bound, handing.watch).ok()?;
        let (tx, batches) = mpsc::channel(1);
        let (done_tx, done) = tokio::sync::oneshot::channel();
        // The reader goes to the thread through this slot, so that a
        // refused spawn (which drops the closure) can give it back.
        let slot = std::sync::Arc::new(std::sync::Mutex::new(reader.take()));
        let theirs = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("agy-bridge-follow".into())
            .spawn(move || {
                // The settle's pauses are a tenth of a millisecond: the
                // default slack (50 µs) would stretch each by half.
                #[cfg(target_os = "linux")]
                let _ = nix::sys::prctl::set_timerslack(1_000);
                let taken = theirs.lock().ok().and_then(|mut s| s.take());
                if let Some(poller) = taken {
                    // A recorder wants the short tick: it reads on every one.
                    let trusted = changes.notified() && !handing.every_poll;
                    let thread = Thread {
                        poller,
                        changes,
                        tx,
                        every_poll: handing.every_poll,
                        tick: handing.tick,
                        trusted,
                        readable: true,
                        handed: None,
                    };
                    let _ = done_tx.send(thread.run());
                }
            });
        if spawned.is_err() {
            *reader = slot.lock().ok().and_then(|mut s| s.take());
            return None;
        }
        Some(Follower {
            batches,
            stop: Some(stop),
            done,
        })
    }

    /// The next poll handed over; `None` when the thread is gone (it
    /// panicked: a decoder bug).
    pub(super) async fn next(&mut self) -> Option<Batch> {
        self.batches.recv().await
    }

    /// End the thread: what it handed over and the turn has not taken yet,
    /// in order, and the reader (`None` if the thread panicked).
    pub(super) async fn stop(mut self) -> (Vec<Batch>, Option<Poller>) {
        drop(self.stop.take());
        let mut left = Vec::new();
        // Taking them lets a thread waiting to hand one over see the stop.
        while let Some(batch) = self.batches.recv().await {
            left.push(batch);
        }
        (left, (&mut self.done).await.ok())
    }
}

/// Why the thread polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Start,
    Changed,
    Settle,
    Tick,
    /// The last read stopped at its row limit.
    Behind,
}

struct Thread {
    poller: Poller,
    changes: Changes,
    tx: mpsc::Sender<Batch>,
    every_poll: bool,
    /// The fallback tick when notifications are not trusted.
    tick: Duration,
    /// Notifications announce every commit so far ([`TRUSTED_TICK`]).
    trusted: bool,
    /// The last poll could read the database.
    readable: bool,
    /// What the turn was last told: its view, and whether (or why not)
    /// the database was readable.
    handed: Option<(Seen, Option<String>)>,
}

impl Thread {
    fn run(mut self) -> Poller {
        let mut why = Why::Start;
        let mut settle: Option<(Instant, Duration)> = None;
        let mut next_tick = Instant::now() + self.tick();
        loop {
            let polled = if why == Why::Changed {
                settle = Some((Instant::now(), SETTLE_FIRST));
                self.poller.poll_settling(SETTLE_FINE)
            } else {
                self.poller.poll()
            };
            self.judge_notifications(why, &polled);
            // A shorter tick from now on takes effect now.
            next_tick = next_tick.min(Instant::now() + self.tick());
            if why == Why::Settle {
                settle = settle.and_then(|(_, step)| {
                    let next = step * 2;
                    (next <= SETTLE_LAST).then(|| (Instant::now(), next))
                });
            }
            // The turn first: what follows is for the next wait.
            if !self.hand_over(polled) {
                return self.poller;
            }
            if !self.poller.written_since_read() {
                // Every write so far is read: the next one notifies.
                settle = None;
            }
            why = if self.poller.behind() {
                match self.changes.wait(Instant::now()) {
                    Woke::Stop => return self.poller,
                    _ => Why::Behind,
                }
            } else {
                match self.wait(&mut settle, &mut next_tick) {
                    Some(why) => why,
                    None => return self.poller,
                }
            };
        }
    }

    /// Wait for a reason to poll; `None`: stop.
    fn wait(
        &mut self,
        settle: &mut Option<(Instant, Duration)>,
        next_tick: &mut Instant,
    ) -> Option<Why> {
        loop {
            let settle_due = settle.map(|(since, step)| since + step);
            let until = settle_due.map_or(*next_tick, |due| due.min(*next_tick));
            match self.changes.wait(until) {
                Woke::Stop => return None,
                Woke::Changed => {
                    if self.every_poll || !self.poller.caught_up() {
                        return Some(Why::Changed);
                    }
                    // Writes already read: no poll, no re-checks.
                    *settle = None;
                }
                Woke::Timeout => {
                    let now = Instant::now();
                    if settle_due.is_some_and(|due| due <= now) {
                        return Some(Why::Settle);
                    }
                    if *next_tick <= now {
                        *next_tick = now + self.tick();
                        return Some(Why::Tick);
                    }
                }
            }
        }
    }

    /// The fallback tick now: long while notifications are trusted and
    /// the database reads, else the turn's.
    fn tick(&self) -> Duration {
        if self.trusted && self.readable {
            self.tick.max(TRUSTED_TICK)
        } else {
            self.tick
        }
    }

    /// What a poll says of the notifications: a tick that found a commit
    /// found one none announced (or one whose notification is late, which
    /// the short tick costs nothing to allow for), so they are no longer
    /// trusted; an unreadable database keeps the tick short until it reads.
    fn judge_notifications(&mut self, why: Why, polled: &Poll) {
        self.readable = matches!(polled, Poll::Ready(_));
        if why == Why::Tick && matches!(polled, Poll::Ready(events) if !events.is_empty()) {
            self.trusted = false;
        }
    }

    /// Hand a poll to the turn when it changes what the turn knows (new
    /// events, the reader's view, readability), or always with
    /// `every_poll`, waiting for room; `false` once the turn is gone.
    fn hand_over(&mut self, polled: Poll) -> bool {
        let seen = Seen::of(&self.poller);
        let readable = match &polled {
            Poll::Ready(_) => None,
            Poll::NotReady(e) => Some(e.to_string()),
        };
        let news = matches!(&polled, Poll::Ready(events) if !events.is_empty());
        let view = (seen, readable);
        if !self.every_poll && !news && self.handed.as_ref() == Some(&view) {
            return true;
        }
        let seen = view.0.clone();
        self.handed = Some(view);
        self.tx.blocking_send(Batch { polled, seen }).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::events::Event;
    use crate::follow::poller::tests::{put, writer};
    use rusqlite::Connection;

    const ID: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

    /// A conversation database of one answered step, and a follower on it.
    fn following(handing: Handing) -> (tempfile::TempDir, Connection, Follower) {
        let (dir, w, follower, _) = watching(handing, false);
        (dir, w, follower)
    }

    /// A conversation database of one answered step, and a follower on it
    /// that watches its directory, or another one when `elsewhere` (so that
    /// no notification ever comes: a file system that does not notify).
    fn watching(
        handing: Handing,
        elsewhere: bool,
    ) -> (tempfile::TempDir, Connection, Follower, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tmp");
        let other = tempfile::tempdir().expect("tmp");
        let id = ConversationId::parse(ID).expect("id");
        let path = dir.path().join(format!("{ID}.db"));
        let w = writer(&path);
        put(&w, 0, "zero");
        let mut reader = Some(Poller::new(&path, None));
        let watched = if elsewhere { other.path() } else { dir.path() };
        let follower = Follower::start(&mut reader, watched, &id, handing).expect("thread");
        assert!(reader.is_none(), "the thread has the reader");
        (dir, w, follower, other)
    }

    fn texts(batches: impl IntoIterator<Item = Batch>) -> Vec<String> {
        let mut out = Vec::new();
        for b in batches {
            if let Poll::Ready(events) = b.polled {
                for e in events {
                    if let Event::Text { text, .. } = e {
                        out.push(text);
                    }
                }
            }
        }
        out
    }

    async fn next(f: &mut Follower) -> Batch {
        tokio::time::timeout(Duration::from_secs(10), f.next())
            .await
            .expect("a batch within 10 s")
            .expect("the thread is running")
    }

    fn handing(watch: bool, every_poll: bool) -> Handing {
        Handing {
            every_poll,
            tick: Duration::from_millis(20),
            watch,
        }
    }

    /// The thread reads at once, then each commit as it lands; stopped, it
    /// gives the reader back where it left off.
    #[tokio::test]
    async fn commits_reach_the_turn_and_the_reader_comes_back() {
        let (_dir, w, mut f) = following(handing(true, false));
        let first = next(&mut f).await;
        assert_eq!(first.seen.last_idx, Some(0));
        assert_eq!(texts([first]), ["zero"]);
        put(&w, 1, "one");
        assert_eq!(texts([next(&mut f).await]), ["one"]);
        let (left, reader) = f.stop().await;
        assert!(texts(left).is_empty());
        assert_eq!(reader.expect("the reader").last_idx(), Some(1));
    }

    /// Without notifications (poll-only), the tick reads the commits.
    #[tokio::test]
    async fn without_notifications_the_tick_reads() {
        let (_dir, w, mut f) = following(handing(false, false));
        assert_eq!(texts([next(&mut f).await]), ["zero"]);
        put(&w, 1, "one");
        assert_eq!(texts([next(&mut f).await]), ["one"]);
    }

    /// With notifications, an idle follower does not tick at the turn's
    /// pace: each tick is a wake-up and a read, paid for as long as agy
    /// thinks. Without them, the tick is all there is.
    #[tokio::test]
    async fn an_idle_follower_with_notifications_hardly_ticks() {
        let polls_while_idle = |watch| async move {
            let (_dir, _w, mut f) = following(handing(watch, false));
            next(&mut f).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (_, reader) = f.stop().await;
            reader.expect("the reader").stats().polls
        };
        let notified = polls_while_idle(true).await;
        assert!(notified <= 2, "{notified} polls in 500 ms idle");
        // 25 at the 20 ms tick, however slow the machine: at least 5.
        let ticked = polls_while_idle(false).await;
        assert!(ticked >= 5, "only {ticked} polls in 500 ms on the tick");
    }

    /// Where notifications never come, the first tick that finds a commit
    /// ends their trust: the commits after it are read at the turn's tick,
    /// not the trusted one.
    #[tokio::test]
    async fn a_commit_no_notification_announced_brings_the_short_tick_back() {
        let (_dir, w, mut f, _other) = watching(handing(true, false), true);
        assert_eq!(texts([next(&mut f).await]), ["zero"]);
        put(&w, 1, "one");
        assert_eq!(texts([next(&mut f).await]), ["one"]);
        put(&w, 2, "two");
        let since = Instant::now();
        assert_eq!(texts([next(&mut f).await]), ["two"]);
        let took = since.elapsed();
        assert!(
            took < TRUSTED_TICK / 2,
            "read {took:?} after its commit, the trusted tick's pace"
        );
    }

    /// A poll that changes nothing the turn knows wakes nobody; a recorder
    /// (`every_poll`) hears of every poll.
    #[tokio::test]
    async fn a_poll_that_finds_nothing_is_handed_over_only_to_a_recorder() {
        let (_dir, _w, mut quiet) = following(handing(false, false));
        next(&mut quiet).await;
        let nothing = tokio::time::timeout(Duration::from_millis(300), quiet.next()).await;
        assert!(
            nothing.is_err(),
            "ticks that found nothing were handed over"
        );
        let (_dir, _w, mut every) = following(handing(false, true));
        next(&mut every).await;
        assert!(texts([next(&mut every).await]).is_empty());
    }

    /// Stopped while it waits for the turn to take a poll (the consumer is
    /// slow), the thread ends; what it read and what it had not reached
    /// come back, nothing lost and nothing twice.
    #[tokio::test]
    async fn stopped_while_waiting_for_room_it_loses_nothing() {
        let (_dir, w, f) = following(handing(true, false));
        for (idx, text) in [(1, "one"), (2, "two"), (3, "three")] {
            put(&w, idx, text);
            std::thread::sleep(Duration::from_millis(30));
        }
        let (left, reader) = tokio::time::timeout(Duration::from_secs(10), f.stop())
            .await
            .expect("stopped within 10 s");
        let mut seen = texts(left);
        let mut reader = reader.expect("the reader");
        if let Poll::Ready(events) = reader.poll() {
            seen.extend(events.into_iter().filter_map(|e| match e {
                Event::Text { text, .. } => Some(text),
                _ => None,
            }));
        }
        assert_eq!(seen, ["zero", "one", "two", "three"]);
    }
}
