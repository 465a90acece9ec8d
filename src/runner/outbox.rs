//! The turn's events on their way to its consumer, with back-pressure.
//!
//! Whatever the turn has to say goes into its outbox ([`Turn::emit`]); at
//! its await points the outbox is handed to the bounded event channel
//! ([`Turn::deliver`]), waiting for room. While it waits the turn does not
//! poll, so a consumer that stops reading stops the reading of agy's
//! database (the database is the buffer: the poller keeps its cursor and
//! goes on from there) and of agy's stdout (its pipe fills and agy waits).
//! The outbox holds at most what one poll or one stream-json line made,
//! which the poller's row limit bounds ([`crate::follow::poller::ROWS_PER_POLL`]).
//!
//! The wait never outlasts an abort or the watchdog: a stalled consumer
//! must not keep agy running. A turn being stopped hands over only what
//! fits at once ([`Turn::deliver_now`]).

use super::*;

/// Why a delivery stopped before the outbox was empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Halted {
    Aborted,
    TimedOut,
}

impl Turn<'_> {
    /// Queue one event for the consumer, behind those already waiting.
    pub(super) fn emit(&mut self, event: RunEvent) {
        self.outbox.push_back(event);
    }

    /// Hand the outbox over in order, each event as soon as the channel has
    /// room, however long the consumer takes, up to an abort or the
    /// watchdog (which leave the rest in the outbox). A consumer that is
    /// gone takes nothing more: its events are dropped.
    pub(super) async fn deliver(&mut self, cancel: &CancellationToken) -> Result<(), Halted> {
        let deadline = self.deadline;
        while !self.outbox.is_empty() {
            // Room now (the usual case): no timer, no waker registered.
            if cancel.is_cancelled() {
                return Err(Halted::Aborted);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Halted::TimedOut);
            }
            match self.events.try_reserve() {
                Ok(permit) => {
                    if let Some(event) = self.outbox.pop_front() {
                        permit.send(event);
                    }
                    continue;
                }
                Err(mpsc::error::TrySendError::Closed(())) => {
                    self.outbox.clear();
                    continue;
                }
                Err(mpsc::error::TrySendError::Full(())) => {}
            }
            let room = tokio::select! {
                // An abort or the watchdog wins over room that is also there.
                biased;
                _ = cancel.cancelled() => return Err(Halted::Aborted),
                _ = tokio::time::sleep_until(deadline) => return Err(Halted::TimedOut),
                room = self.events.reserve() => room,
            };
            match (room, self.outbox.pop_front()) {
                (Ok(permit), Some(event)) => permit.send(event),
                _ => self.outbox.clear(),
            }
        }
        Ok(())
    }

    /// [`deliver`](Self::deliver); when an abort or the watchdog cut in,
    /// the turn stops (`false`), recorded and said as [`halt`](Self::halt).
    pub(super) async fn deliver_or_stop(&mut self, cancel: &CancellationToken) -> bool {
        match self.deliver(cancel).await {
            Ok(()) => true,
            Err(why) => {
                self.halt(why);
                false
            }
        }
    }

    /// Record that the turn is being stopped, and queue the event that
    /// says so.
    pub(super) fn halt(&mut self, why: Halted) {
        match why {
            Halted::Aborted => {
                self.result.aborted = true;
                self.emit(RunEvent::Aborted);
            }
            Halted::TimedOut => {
                self.result.timed_out = true;
                self.emit(RunEvent::TimedOut);
            }
        }
    }

    /// Hand over what the channel has room for now, in order, and drop the
    /// rest: for a turn that is being stopped, whose consumer may not be
    /// reading at all (the result still says how the turn ended).
    pub(super) fn deliver_now(&mut self) {
        while let Some(event) = self.outbox.pop_front() {
            if self.events.try_send(event).is_err() {
                self.outbox.clear();
            }
        }
    }

    /// Whether the poller stopped at its row limit with more rows waiting:
    /// the turn polls again as soon as the consumer has taken these.
    pub(super) fn behind(&self) -> bool {
        self.followed
            .as_ref()
            .and_then(|f| f.reader.as_ref())
            .is_some_and(Poller::behind)
    }

    /// Poll and deliver until the poller has caught up with the database.
    pub(super) async fn poll_through(&mut self, cancel: &CancellationToken) -> Result<(), Halted> {
        loop {
            self.poll(false).await;
            self.deliver(cancel).await?;
            if !self.behind() {
                return Ok(());
            }
        }
    }
}
