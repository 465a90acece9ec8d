//! Which conversation the turn follows: bound up front when it resumes one,
//! by agy's own word (stream-json's `init`), or by discovery while agy
//! runs and after it exits. Every way ends in [`Turn::bind`], so the
//! result and the consumer hear of it the same way.

use super::*;
use crate::follow::discovery::Binding;

/// How long agy's stream-json `init` line may still come: within it,
/// discovery binds only on proof, and agy's word overrules it.
const STREAM_JSON_GRACE: Duration = Duration::from_secs(3);

impl Turn<'_> {
    pub(super) fn bind(&mut self, id: ConversationId, after_idx: Option<i64>, how: BindMethod) {
        if let Some(requested) = self.lost.take().filter(|r| *r != id) {
            self.announce_new_conversation(&requested, &id);
        }
        self.followed = Some(Followed::bind(
            &self.dir,
            id,
            after_idx,
            how,
            &mut self.result,
            &mut self.outbox,
        ));
    }

    /// Bind by discovery, from agy's start, alongside its own word. While
    /// agy's `init` line may still come (stream-json, within the grace),
    /// only proof binds: the one new database our running agy holds open
    /// ([`discovery::decide_proven`]); an ambiguity then is no ambiguity
    /// yet, as the line may settle it. After the grace (or without
    /// stream-json), discovery decides on its own, as before.
    pub(super) async fn try_bind(&mut self, pid: u32) {
        if self.followed.is_some() {
            return;
        }
        let init_may_come = self.stream_json && self.started.elapsed() < STREAM_JSON_GRACE;
        let decided = if init_may_come {
            self.discover(move |dir, before| discovery::decide_proven(dir, before, pid))
                .await
        } else {
            self.discover(move |dir, before| discovery::decide(dir, before, Some(pid)))
                .await
        };
        match decided {
            Ok(Binding::Bound { id, how }) => self.bind(id, None, how),
            Ok(Binding::Ambiguous { candidates }) if !init_may_come => {
                self.last_ambiguity = candidates.iter().map(|c| c.as_str().to_string()).collect();
                let since = *self.ambiguous_since.get_or_insert_with(Instant::now);
                if since.elapsed() > self.cfg.ambiguity_budget {
                    self.stop_reason = Some(Failure::CouldNotBind {
                        reason: format!(
                            "{} new conversation databases could belong to this run ({}); refusing to guess",
                            self.last_ambiguity.len(),
                            self.last_ambiguity.join(", ")
                        ),
                    });
                }
            }
            Ok(_) | Err(_) => {}
        }
    }

    /// One of discovery's decisions (directory and `/proc` scans) over the
    /// conversations directory and the snapshot taken before agy started,
    /// on a blocking thread. (`&mut self`: a shared borrow held across the
    /// await would need the turn to be `Sync`, which its reader is not.)
    async fn discover(
        &mut self,
        decide: impl FnOnce(&Path, &Snapshot) -> std::io::Result<Binding> + Send + 'static,
    ) -> std::io::Result<Binding> {
        let (dir, before) = (self.dir.clone(), self.before.clone());
        tokio::task::spawn_blocking(move || decide(&dir, &before))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    pub(super) async fn bind_after_exit(&mut self) {
        match self
            .discover(|dir, before| discovery::decide(dir, before, None))
            .await
        {
            Ok(Binding::Bound { id, how }) => self.bind(id, None, how),
            Ok(Binding::Ambiguous { candidates }) => {
                // agy is gone, so its open files cannot settle it; its own
                // record of our prompt can, if it is unique.
                let (dir, prompt, asked) = (
                    self.dir.clone(),
                    self.req.prompt.clone(),
                    candidates.clone(),
                );
                let matched = tokio::task::spawn_blocking(move || {
                    discovery::match_prompt(&dir, &asked, &prompt)
                })
                .await
                .unwrap_or(None);
                match matched {
                    Some(id) => self.bind(id, None, BindMethod::PromptMatch),
                    None => {
                        self.last_ambiguity =
                            candidates.iter().map(|c| c.as_str().to_string()).collect()
                    }
                }
            }
            Ok(Binding::Waiting) | Err(_) => {}
        }
    }
}

/// The conversation this turn follows, once bound.
pub(super) struct Followed {
    pub(super) id: ConversationId,
    pub(super) how: BindMethod,
    pub(super) path: PathBuf,
    /// Out on a blocking thread while a poll runs, or the follower's while
    /// that runs; gone if it panicked.
    pub(super) reader: Option<Poller>,
    /// The reader's own thread, from the binding to agy's end.
    pub(super) follower: Option<super::follower::Follower>,
    /// No thread could be had: the turn polls itself.
    pub(super) no_thread: bool,
    /// What the reader showed at its last poll.
    pub(super) seen: super::follower::Seen,
}

impl Followed {
    /// Follow `id` from after `after_idx`, recording how it was bound in the
    /// result and telling the caller.
    fn bind(
        dir: &Path,
        id: ConversationId,
        after_idx: Option<i64>,
        how: BindMethod,
        result: &mut RunResult,
        outbox: &mut VecDeque<RunEvent>,
    ) -> Followed {
        result.conversation_id = Some(id.as_str().to_string());
        result.bind_method = Some(how);
        outbox.push_back(RunEvent::Bound {
            conversation_id: id.as_str().to_string(),
            method: how,
        });
        let path = discovery::db_path(dir, &id);
        Followed {
            reader: Some(Poller::new(&path, after_idx)),
            follower: None,
            no_thread: false,
            seen: Default::default(),
            path,
            id,
            how,
        }
    }
}

/// The last step a conversation's database holds now (a SQLite read, on a
/// blocking thread).
pub(super) async fn last_idx_off_thread(db: PathBuf) -> Option<i64> {
    tokio::task::spawn_blocking(move || crate::follow::poller::last_idx(&db))
        .await
        .unwrap_or(None)
}
