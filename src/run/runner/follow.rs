//! The turn while agy runs: the loop that binds, polls, delivers and
//! waits for the next reason to look, and the trailing reads after agy's
//! exit. What a poll or a stream-json line means is [`merge`]'s; when to
//! wake is [`wake`]'s.

use super::wake::{recv_path, settle_sleep, Wake, SETTLE_FINE};
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
    /// runtime worker. Returns whether a write may still be unread (the
    /// WAL was written since the last commit read, or nothing is followed
    /// yet): only then are the settle re-checks worth their wake-ups.
    pub(super) async fn poll(&mut self, notified: bool) -> bool {
        let Some(f) = self.followed.as_mut() else {
            return true;
        };
        let Some(mut poller) = f.reader.take() else {
            return true;
        };
        let joined = tokio::task::spawn_blocking(move || {
            let polled = if notified {
                poller.poll_settling(SETTLE_FINE)
            } else {
                poller.poll()
            };
            let unread = poller.written_since_read();
            (poller, polled, unread)
        })
        .await;
        let Ok((poller, polled, unread)) = joined else {
            // The reader panicked (a decoder bug): the turn goes on from
            // stream-json alone.
            self.db.last_problem = Some("the database reader failed".into());
            return true;
        };
        self.result.last_idx = poller.last_idx();
        let path = poller.path().to_path_buf();
        f.reader = Some(poller);
        match polled {
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
            crate::run::blocking::in_place(|| o.wake(dir, &path));
        }
        unread
    }

    /// Whether the followed database is read to its last commit with none
    /// on its way ([`Poller::caught_up`]); never while a recorder watches
    /// (it reads on every wake-up).
    fn caught_up(&self) -> bool {
        let reader = self.followed.as_ref().and_then(|f| f.reader.as_ref());
        self.observer.is_none() && reader.is_some_and(Poller::caught_up)
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

    /// A step stuck in WAITING: print mode can never answer it.
    fn check_stall(&mut self) {
        let Some(f) = self.followed.as_ref() else {
            return;
        };
        let Some(poller) = f.reader.as_ref() else {
            return;
        };
        let Some(idx) = poller.waiting_step() else {
            self.waiting_since = None;
            return;
        };
        match self.waiting_since {
            Some((w, since)) if w == idx => {
                if since.elapsed() >= self.cfg.permission_stall {
                    let tool = poller
                        .tool_name(idx)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("step {idx}"));
                    self.stop_reason = Some(Failure::PermissionStall { tool });
                }
            }
            _ => self.waiting_since = Some((idx, Instant::now())),
        }
    }

    /// Follow agy until it exits or we stop it; returns its exit status if
    /// it exited on its own (left unreaped for [`Turn::finish`]).
    pub(super) async fn follow(&mut self, agy: &mut Agy, cancel: &CancellationToken) {
        let mut wake = Wake::new(self.cfg, &self.dir);
        let mut notified = false;
        loop {
            self.try_bind(agy.pid.get()).await;
            if !self.poll(notified).await {
                // Every write so far is read: the next one notifies.
                wake.settle = None;
            }
            self.release_held(false);
            self.check_stall();
            self.check_degraded();
            // Nothing more is read while the consumer has no room.
            if !self.deliver_or_stop(cancel).await || self.stop_reason.is_some() {
                return;
            }
            match self.wait(agy, &mut wake, cancel).await {
                Waited::Exited | Waited::Stop => return,
                Waited::TurnEnded => {
                    if let Some(w) = self.warm.as_mut() {
                        w.ended = true;
                    }
                    return;
                }
                Waited::Poll { notified: n } => notified = n,
            }
        }
    }

    /// Wait for a reason to poll: a stream-json line, a relevant file
    /// change, the fallback tick, agy's exit, an abort or the watchdog; at
    /// once when the last poll stopped at its row limit.
    async fn wait(&mut self, agy: &mut Agy, wake: &mut Wake, cancel: &CancellationToken) -> Waited {
        let behind = self.behind();
        let deadline = self.deadline;
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    self.halt(Halted::Aborted);
                    return Waited::Stop;
                }
                _ = tokio::time::sleep_until(deadline) => {
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
                Some(path) = recv_path(&mut wake.watcher) => {
                    if wake.on_change(&path, self.followed.as_ref().map(|f| &f.id)) {
                        if self.caught_up() {
                            // Writes already read: no poll, no re-checks.
                            wake.settle = None;
                            continue;
                        }
                        return Waited::Poll { notified: true };
                    }
                }
                _ = settle_sleep(wake.settle), if wake.settle.is_some() => {
                    wake.next_settle();
                    return Waited::Poll { notified: false };
                }
                _ = wake.tick.tick() => return Waited::Poll { notified: false },
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
        for i in 0..=self.cfg.trailing_polls {
            if self.followed.is_none() {
                self.bind_after_exit().await;
            }
            self.poll_through(cancel).await?;
            if i < self.cfg.trailing_polls {
                tokio::time::sleep(self.cfg.trailing_interval).await;
            }
        }
        Ok(())
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
