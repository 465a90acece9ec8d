//! The turn while agy runs: the loop that binds, hands the reader to its
//! thread ([`follower`]), takes what it read, delivers and waits for the
//! next reason to act, and the trailing reads after agy's exit. What a poll
//! or a stream-json line means is [`merge`]'s; when to wake is the
//! follower's once bound, [`wake`]'s before.

use super::follower::{Batch, Follower, Handing, Seen};
use super::wake::{recv_path, Wake, SETTLE_FINE};
use super::*;
use crate::follow::poller::Poll;
use agy_format::database::ReadError;

/// How long the database may stay unreadable after agy's stream-json has
/// reported steps before the turn streams from stream-json alone.
const DEGRADE_AFTER: Duration = Duration::from_secs(2);

impl Turn<'_> {
    /// Poll the database once, forwarding what is new; right after a file
    /// notification (`notified`), wait briefly for the commit it announced.
    /// SQLite reads block, so the poll runs on a blocking thread, never on a
    /// runtime worker. This is the reader's way while no follower thread
    /// has it: after agy's run, and when no thread could be had.
    pub(super) async fn poll(&mut self, notified: bool) {
        let Some(f) = self.followed.as_mut() else {
            return;
        };
        let Some(mut poller) = f.reader.take() else {
            return;
        };
        let joined = tokio::task::spawn_blocking(move || {
            let polled = if notified {
                poller.poll_settling(SETTLE_FINE)
            } else {
                poller.poll()
            };
            (poller, polled)
        })
        .await;
        let Ok((poller, polled)) = joined else {
            // The reader panicked (a decoder bug): the turn goes on from
            // stream-json alone.
            self.db.last_problem = Some("the database reader failed".into());
            return;
        };
        let seen = Seen::of(&poller);
        f.reader = Some(poller);
        self.on_batch(Batch { polled, seen });
    }

    /// One poll's outcome, from the follower's thread or [`Turn::poll`].
    pub(super) fn on_batch(&mut self, batch: Batch) {
        let Some(f) = self.followed.as_mut() else {
            return;
        };
        self.result.last_idx = batch.seen.last_idx;
        f.seen = batch.seen;
        let path = f.path.clone();
        match batch.polled {
            Poll::Ready(evs) => {
                self.db.ready = true;
                for ev in evs {
                    self.on_db_event(ev);
                }
            }
            Poll::NotReady(ReadError::Locked { .. }) => {}
            Poll::NotReady(e) => self.db.last_problem = Some(e.to_string()),
        }
        if let Some(o) = self.observer.as_mut() {
            // The recorder reads whole tables; it borrows the turn's state,
            // so it blocks here, the worker's other tasks moved away.
            let dir = &self.dir;
            crate::process::blocking::in_place(|| o.wake(dir, &path));
        }
    }

    /// Once bound, hand the reader to a thread of its own ([`Follower`]),
    /// which from then on wakes for the database's changes: the directory's
    /// watch here is let go. Unbound again (agy began another conversation),
    /// the directory is watched again for discovery.
    fn start_follower(&mut self, wake: &mut Wake) {
        let Some(f) = self.followed.as_mut() else {
            wake.watch(self.cfg, &self.dir);
            return;
        };
        if f.follower.is_some() || f.no_thread || f.reader.is_none() {
            return;
        }
        let handing = Handing {
            every_poll: self.observer.is_some(),
            tick: self.cfg.poll_interval,
            watch: self.cfg.wake == WakeMode::Events,
        };
        f.follower = Follower::start(&mut f.reader, &self.dir, &f.id, handing);
        if f.follower.is_some() {
            wake.watcher = None;
        } else {
            // No thread: the turn polls on its own wake-ups.
            f.no_thread = true;
        }
    }

    /// Take the reader back from its thread, with whatever it read that
    /// the turn has not taken yet.
    pub(super) async fn stop_follower(&mut self) {
        let Some(follower) = self.followed.as_mut().and_then(|f| f.follower.take()) else {
            return;
        };
        let (left, reader) = follower.stop().await;
        for batch in left {
            self.on_batch(batch);
        }
        match self.followed.as_mut() {
            Some(f) if reader.is_some() => f.reader = reader,
            _ => self.db.last_problem = Some("the database reader failed".into()),
        }
    }

    /// The follower's thread is gone without being stopped (it panicked:
    /// a decoder bug): the turn goes on from stream-json alone.
    fn follower_lost(&mut self) {
        if let Some(f) = self.followed.as_mut() {
            f.follower = None;
        }
        self.db.last_problem = Some("the database reader failed".into());
    }

    /// Switch to stream-json as the text source, saying so once.
    pub(super) fn degrade(&mut self, reason: String) {
        if self.result.degraded.is_some() {
            return;
        }
        self.emit(RunEvent::Degraded {
            reason: reason.clone(),
        });
        self.result.degraded = Some(reason);
        // Tools from stream-json only where the database showed none.
        self.stream_tools = !self.db.tools;
        let stream_tools = self.stream_tools;
        for ev in self.agy.unstreamed(stream_tools) {
            self.send(ev);
        }
    }

    /// The database has stayed unreadable while agy reports steps.
    fn check_degraded(&mut self) {
        let late = self
            .agy
            .first_step
            .is_some_and(|t| t.elapsed() >= DEGRADE_AFTER);
        if late && !self.db.ready && self.result.degraded.is_none() {
            let why = match (&self.followed, &self.db.last_problem) {
                (None, _) => "agy's conversation database could not be identified".to_string(),
                (Some(_), Some(p)) => p.clone(),
                (Some(f), None) => format!("{} was not readable", f.path.display()),
            };
            self.degrade(why);
        }
    }

    /// Whether a check the turn makes on time alone is pending: a step
    /// waiting for permission ([`Turn::check_stall`]), a database not read
    /// yet ([`Turn::check_degraded`]), events held for agy's words
    /// ([`Turn::release_held`]). While the follower runs, the turn's tick
    /// serves only these (the follower polls on its own tick): without
    /// them an idle turn does not wake twice per tick period.
    fn timed_check_due(&self) -> bool {
        let waiting = self
            .followed
            .as_ref()
            .is_some_and(|f| f.seen.waiting.is_some());
        let unread = !self.db.ready && self.result.degraded.is_none();
        waiting || unread || !self.held.is_empty()
    }

    /// A step stuck in WAITING: print mode can never answer it.
    fn check_stall(&mut self) {
        let Some(f) = self.followed.as_ref() else {
            return;
        };
        let Some((idx, tool)) = f.seen.waiting.as_ref() else {
            self.waiting_since = None;
            return;
        };
        match self.waiting_since {
            Some((w, since)) if w == *idx => {
                if since.elapsed() >= self.cfg.permission_stall {
                    let tool = tool.clone();
                    self.stop_reason = Some(Failure::PermissionStall { tool });
                }
            }
            _ => self.waiting_since = Some((*idx, Instant::now())),
        }
    }

    /// Follow agy until it exits or we stop it; returns its exit status if
    /// it exited on its own (left unreaped for [`Turn::finish`]). The
    /// reader is back in the turn's hands when this returns.
    pub(super) async fn follow(&mut self, agy: &mut Agy, cancel: &CancellationToken) {
        let mut wake = Wake::new(self.cfg, &self.dir);
        let mut notified = false;
        // One timer for the whole turn, not one registered and dropped on
        // every wait (a lock of the runtime's timer wheel each way).
        let watchdog = tokio::time::sleep_until(self.deadline);
        tokio::pin!(watchdog);
        loop {
            self.try_bind(agy.pid.get()).await;
            self.start_follower(&mut wake);
            self.poll(notified).await;
            self.release_held(false);
            self.check_stall();
            self.check_degraded();
            // Nothing more is read while the consumer has no room.
            if !self.deliver_or_stop(cancel).await || self.stop_reason.is_some() {
                break;
            }
            match self.wait(agy, &mut wake, watchdog.as_mut(), cancel).await {
                Waited::Exited | Waited::Stop => break,
                Waited::TurnEnded => {
                    if let Some(w) = self.warm.as_mut() {
                        w.ended = true;
                    }
                    break;
                }
                Waited::Poll { notified: n } => notified = n,
            }
        }
        self.stop_follower().await;
    }

    /// Wait for a reason to poll: a stream-json line, a relevant file
    /// change, the fallback tick, agy's exit, an abort or the watchdog; at
    /// once when the last poll stopped at its row limit. `watchdog`: the
    /// turn's deadline.
    async fn wait(
        &mut self,
        agy: &mut Agy,
        wake: &mut Wake,
        mut watchdog: std::pin::Pin<&mut tokio::time::Sleep>,
        cancel: &CancellationToken,
    ) -> Waited {
        let behind = self.behind();
        let following = self.followed.as_ref().is_some_and(|f| f.follower.is_some());
        loop {
            // Asked each time round: a stream-json line handled below may
            // hold or release events without ending the wait.
            let ticking = !following || self.timed_check_due();
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    self.halt(Halted::Aborted);
                    return Waited::Stop;
                }
                _ = watchdog.as_mut() => {
                    self.halt(Halted::TimedOut);
                    return Waited::Stop;
                }
                _ = std::future::ready(()), if behind => return Waited::Poll { notified: false },
                line = agy.lines.recv(), if agy.lines_open => match line {
                    Some(line) => {
                        let ended = matches!(line, Line::Result(_));
                        if ended && self.warm.is_none() {
                            // The turn is over: agy ends at the end of its
                            // input. Not closed before: whether an early end
                            // cancels a real agy's turn is not known. (A
                            // warm agy keeps its input for the next turn.)
                            let _ = agy.input.close();
                        }
                        let was_bound = self.followed.is_some();
                        self.on_line(line);
                        if !self.deliver_or_stop(cancel).await {
                            return Waited::Stop;
                        }
                        if ended && self.warm.is_some() {
                            return Waited::TurnEnded;
                        }
                        if !was_bound && self.followed.is_some() {
                            return Waited::Poll { notified: false };
                        }
                    }
                    None => agy.lines_open = false,
                },
                id = agy.not_found.recv(), if agy.not_found_open => match id {
                    Some(id) => {
                        self.on_not_found(&id);
                        return Waited::Poll { notified: false };
                    }
                    None => agy.not_found_open = false,
                },
                _ = agy.child.exited() => return Waited::Exited,
                batch = next_batch(&mut self.followed), if following => {
                    match batch {
                        Some(batch) => self.on_batch(batch),
                        None => self.follower_lost(),
                    }
                    return Waited::Poll { notified: false };
                }
                Some(path) = recv_path(&mut wake.watcher) => {
                    if wake.on_change(&path, self.followed.as_ref().map(|f| &f.id)) {
                        return Waited::Poll { notified: true };
                    }
                }
                _ = wake.tick.tick(), if ticking => return Waited::Poll { notified: false },
            }
        }
    }

    /// After agy exited on its own: its last stream-json lines, the last
    /// flush of the database, and a binding if we still have none (a fast
    /// run may exit before the first wake-up). Delivered as it goes, so an
    /// abort or the watchdog can still cut in while the consumer is slow.
    pub(super) async fn trailing(
        &mut self,
        agy: &mut Agy,
        cancel: &CancellationToken,
    ) -> Result<(), Halted> {
        // The pipe closes when agy (and whatever holds its stdout) is gone;
        // a grandchild holding it open gets 500 ms of silence.
        let silence = Duration::from_millis(500);
        while let Ok(Some(line)) = tokio::time::timeout(silence, agy.lines.recv()).await {
            self.on_line(line);
            self.deliver(cancel).await?;
        }
        while let Ok(id) = agy.not_found.try_recv() {
            self.on_not_found(&id);
        }
        self.trailing_reads(cancel, true).await
    }

    /// The reads at a turn's end, `trailing_interval` apart, at most
    /// `trailing_polls` + 1. After agy's exit (`exited`) each binds first
    /// if the turn is not bound yet, and they stop once the database is
    /// read to the end ([`Turn::read_to_the_end`]); at a warm turn's end
    /// agy is still running, so all of them are made.
    pub(super) async fn trailing_reads(
        &mut self,
        cancel: &CancellationToken,
        exited: bool,
    ) -> Result<(), Halted> {
        for i in 0..=self.cfg.trailing_polls {
            if exited && self.followed.is_none() {
                self.bind_after_exit().await;
            }
            self.poll_through(cancel).await?;
            if i == self.cfg.trailing_polls || (exited && self.read_to_the_end()) {
                break;
            }
            tokio::time::sleep(self.cfg.trailing_interval).await;
        }
        Ok(())
    }

    /// After agy's exit: the bound database is read to its last commit and
    /// nobody is writing it ([`Poller::caught_up`]: no process holds its
    /// write lock, nothing published since the last read). agy's tree is
    /// gone by then (its group was ended before it was reaped), so no
    /// commit can follow, and the trailing reads end: each one waited
    /// `trailing_interval` (100 ms), so every turn's last event reached the
    /// consumer 300 ms after agy had finished. A writer still holding the
    /// lock (something agy left outside its group) keeps them going.
    fn read_to_the_end(&self) -> bool {
        self.followed
            .as_ref()
            .and_then(|f| f.reader.as_ref())
            .is_some_and(Poller::caught_up)
    }
}

/// The follower's next poll (never, without one).
async fn next_batch(followed: &mut Option<Followed>) -> Option<Batch> {
    match followed.as_mut().and_then(|f| f.follower.as_mut()) {
        Some(follower) => follower.next().await,
        None => std::future::pending().await,
    }
}

enum Waited {
    /// `notified`: woken by a change to the database's files.
    Poll {
        notified: bool,
    },
    /// agy (or its guardian) exited; not reaped yet.
    Exited,
    Stop,
    /// A warm agy printed the turn's `result`: the turn is over, agy is not.
    TurnEnded,
}
