//! The end of a turn: agy reaped (or stopped), the two sources settled,
//! the last events handed over, and the turn classified, our own reasons
//! (abort, watchdog, stall) first, then agy's, then a binding never made.

use super::agy::{terminate, Tails};
use super::*;
use crate::runner::failure::AgyReport;

impl Turn<'_> {
    /// Reap agy, settle the text source, and classify the turn.
    pub(super) async fn finish(mut self, mut agy: Agy, cancel: &CancellationToken) -> RunResult {
        let stopping = self.result.aborted || self.result.timed_out || self.stop_reason.is_some();
        if stopping {
            // An abort or timeout is said at once, before agy is reaped, to
            // a consumer with room; one that is not reading does not hold it
            // up. (Our own stop's events wait for room in `deliver_last`.)
            if self.result.aborted || self.result.timed_out {
                self.deliver_now();
            }
            terminate(&mut agy.child, self.cfg.kill_grace).await;
        } else {
            // agy has exited and is not reaped yet: as a zombie it keeps
            // its pid and its process group, so what its tree left in that
            // group (background work; under a guardian nothing, unless the
            // guardian itself was killed) can be ended without any risk of
            // reaching a stranger. Then it is reaped, and never signalled
            // again.
            agy.child.signal_group(nix::sys::signal::Signal::SIGTERM);
            if let Ok(status) = agy.child.wait().await {
                use std::os::unix::process::ExitStatusExt;
                self.result.exit_code = status.code();
                self.result.signal = status.signal();
            }
            if let Err(why) = self.trailing(&mut agy, cancel).await {
                self.halt(why);
            }
        }
        // Nothing reads agy's lines from here: a reader waiting for room
        // gives up and drains the pipe to its end.
        agy.lines.close();
        // Grandchildren can hold the pipes open; do not wait on them for long.
        for r in agy.readers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_millis(500), r).await;
        }
        self.conclude(&agy.tails, !stopping, cancel).await
    }

    /// The end of every turn, once agy has said all it will: its output's
    /// tails kept, held events released, the two sources settled (unless
    /// the turn was stopped: `settle`), the last events handed over, and
    /// the turn classified.
    pub(super) async fn conclude(
        mut self,
        tails: &Tails,
        settle: bool,
        cancel: &CancellationToken,
    ) -> RunResult {
        self.result.stderr_tail = tails.stderr();
        self.result.stdout = tails.stdout();
        self.release_held(true);
        if settle {
            self.fill_missing_text();
            self.check_answer();
        }
        self.deliver_last(cancel).await;
        self.settle_result();
        self.name_quota(cancel).await;
        self.restore_response();
        self.result
    }

    /// A turn that failed on agy's quota names the empty bucket and when it
    /// refills ([`RunConfig::usage`]). Only a failed turn waits for this.
    async fn name_quota(&mut self, cancel: &CancellationToken) {
        let cfg = self.cfg;
        let Some(loader) = &cfg.usage else {
            return;
        };
        if let Some(failure) = self.result.failure.as_mut().filter(|f| f.wants_quota()) {
            failure.set_quota(loader.quota_failure_words(cancel).await);
        }
    }

    /// The turn's last events: waited for as any (a turn that ended on its
    /// own still gives its consumer everything), unless the turn is being
    /// stopped or an abort or the watchdog cuts in now.
    async fn deliver_last(&mut self, cancel: &CancellationToken) {
        if !(self.result.aborted || self.result.timed_out) {
            if let Err(why) = self.deliver(cancel).await {
                self.halt(why);
            }
        }
        self.deliver_now();
    }

    /// The database gave no answer text although agy answered: stream the
    /// answer from stream-json, saying why.
    fn fill_missing_text(&mut self) {
        if self.db.text() || self.result.degraded.is_some() {
            return;
        }
        // No conversation at all (a slash command's output): nothing to
        // stream as an answer; the failure says what happened.
        let no_conversation = self
            .agy
            .result
            .as_ref()
            .is_some_and(|r| r.conversation_id.is_empty());
        if no_conversation && !self.agy.saw_init {
            return;
        }
        let response = self
            .agy
            .result
            .as_ref()
            .map(|r| r.response.clone())
            .unwrap_or_default();
        if !self.agy.has_texts() && !response.is_empty() {
            let idx = self.result.last_idx.unwrap_or(0);
            self.agy.set_text(idx, response);
        }
        // Tool steps only stream-json saw (no database to read) are shown
        // too, even when agy gave no answer (a denial).
        let unseen_tools = self.agy.ran_tools && !self.db.tools;
        if self.agy.has_texts() || unseen_tools {
            let why = match &self.db.last_problem {
                Some(p) if !self.db.ready => p.clone(),
                None if !self.db.ready => match &self.followed {
                    Some(f) => format!("{} was not readable", f.path.display()),
                    None => "agy's conversation database could not be identified".into(),
                },
                _ if self.agy.has_texts() => {
                    "agy's database held no answer text for this turn".into()
                }
                _ => "agy's database held none of this turn's tool steps".into(),
            };
            self.degrade(why);
        }
    }

    fn settle_result(&mut self) {
        if let Some(f) = &self.followed {
            if let Some(p) = &f.reader {
                self.result.poll_stats = p.stats();
            }
        }
        self.result.usage = self.usage();
        self.result.stream_stats = self.agy.stats.clone();
        self.result.agy_result = self.agy.result.take();
        self.result.duration_ms = self.started.elapsed().as_millis() as u64;
        let report = AgyReport {
            exit_code: self.result.exit_code,
            signal: self.result.signal,
            stderr: &self.result.stderr_tail,
            result: self.result.agy_result.as_ref(),
            db_errors: &self.db.errors,
            ran_tools: self.db.tools || self.agy.ran_tools,
            answered: self.db.text()
                || self.agy.had_text
                || self
                    .result
                    .agy_result
                    .as_ref()
                    .is_some_and(|r| !r.response.is_empty()),
            model: self.req.model.as_deref(),
            features: self.features,
            conversation_began: self.conversation_began(),
        };
        let agy_failure = crate::runner::failure::classify(&report);
        let notice = crate::runner::failure::denial_notice(&report);
        self.result.notices.extend(notice);
        self.result.failure = self.our_failure().or(agy_failure).or_else(|| {
            (self.followed.is_none() && self.result.degraded.is_none())
                .then(|| self.unbound_failure())
        });
    }

    /// Whether agy began (or resumed) a conversation this turn: its init
    /// line, a database it created, or steps read from the resumed one.
    fn conversation_began(&self) -> bool {
        let created = self
            .followed
            .as_ref()
            .is_some_and(|f| f.how != BindMethod::Given);
        self.agy.saw_init || created || self.db.events
    }

    /// Our own reasons, which win over anything agy said.
    fn our_failure(&mut self) -> Option<Failure> {
        if self.result.aborted {
            return Some(Failure::Aborted);
        }
        if let Some(f) = self.stop_reason.take() {
            return Some(f);
        }
        self.result.timed_out.then(|| Failure::TimedOut {
            minutes: self.cfg.timeout.as_secs().div_ceil(60),
        })
    }

    fn unbound_failure(&self) -> Failure {
        Failure::CouldNotBind {
            reason: if self.last_ambiguity.is_empty() {
                "agy exited without creating a conversation database".into()
            } else {
                format!(
                    "{} candidate databases ({}); refusing to guess",
                    self.last_ambiguity.len(),
                    self.last_ambiguity.join(", ")
                )
            },
        }
    }
}
