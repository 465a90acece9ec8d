//! What the crate's own tests and benches reach that is not its API.
//!
//! Built only with the `testing` feature, which the package's dev-dependency
//! on itself turns on, so `cargo test` and `cargo bench` see it and a user of
//! the crate does not. Nothing here is stable: these are internals (file
//! names, limits, helpers that take what the public calls read from the
//! environment), named here so a test can pin them without making them API.
//! Each layer's items sit in a module of the layer's name.

/// The follower's internals: the poller's read limits and the discovery
/// helpers the recorder uses.
pub mod follow {
    use agy_format::ids::ConversationId;
    use std::path::{Path, PathBuf};

    /// The most rows one poll reads before it reports more are waiting.
    pub const ROWS_PER_POLL: usize = crate::follow::poller::ROWS_PER_POLL;
    /// The most bytes of step payloads one poll reads.
    pub const BYTES_PER_POLL: usize = crate::follow::poller::BYTES_PER_POLL;

    /// The final answer of subagent conversation `child`, read from its
    /// database beside `root`.
    pub fn subagent_answer(root: &Path, child: &str) -> Option<String> {
        crate::follow::poller::subagent_answer(root, child)
    }

    /// The database file of conversation `id` in `dir`.
    pub fn db_path(dir: &Path, id: &ConversationId) -> PathBuf {
        crate::follow::discovery::db_path(dir, id)
    }

    /// The follower's mechanisms beyond inotify and `data_version`, which
    /// the benches switch off one by one to measure each.
    pub use crate::follow::knobs::{set_mechanisms, Mechanisms};

    /// The subagent conversations the conversation in `db_path` started.
    pub fn subagent_children(db_path: &Path) -> Vec<ConversationId> {
        crate::follow::discovery::subagent_children(db_path)
    }
}

/// The bridge's own processes: how the binary knows it is the guardian.
pub mod process {
    /// The first argument that makes the bridge's binary the guardian.
    pub const GUARD_ARG: &str = crate::process::guard::GUARD_ARG;
}

/// The gate's internals: the hook proof with its state directory and
/// environment given, not read.
pub mod gate {
    use crate::gate::proof::{Proven, Unproven};
    use std::path::Path;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// The file in the state directory that remembers each agy binary's proof.
    pub const PROOF_CACHE_FILE: &str = crate::gate::proof::PROOF_CACHE_FILE;

    /// Prove that `agy_bin` runs the bridge's `--add-dir` hooks, remembering
    /// the answer in `state_dir`.
    pub fn prove_at(
        state_dir: &Path,
        agy_bin: &Path,
        env: &[(String, String)],
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Proven, Unproven> {
        crate::gate::proof::prove_at(state_dir, agy_bin, env, timeout, cancel)
    }

    /// What `state_dir` remembers of `agy_bin`'s proof, if anything.
    pub fn remembered_at(state_dir: &Path, agy_bin: &Path) -> Option<bool> {
        crate::gate::proof::remembered_at(state_dir, agy_bin)
    }
}

/// The runner's internals: the words a failure uses.
pub mod runner {
    /// The advice a permission denial ends with.
    pub const HOW_TO_ALLOW: &str = crate::runner::failure::HOW_TO_ALLOW;
}

/// The state files' internals: their names, the default rules, and the
/// calls that take the environment instead of reading it.
pub mod state {
    use crate::state::config::{ConfigChange, ConfigStatus, ConfigStore};
    use crate::state::file::StateError;
    use crate::state::sessions::{SessionStore, TurnLock};
    use std::path::PathBuf;

    /// The settings file's name in the state directory.
    pub const CONFIG_FILE: &str = crate::state::config::CONFIG_FILE;
    /// The sessions file's name in the state directory.
    pub const SESSIONS_FILE: &str = crate::state::file::SESSIONS_FILE;
    /// The allow rules a new settings file starts with.
    pub const DEFAULT_ALLOW: &[&str] = crate::state::rules::DEFAULT_ALLOW;

    /// The store's calls that take the environment as a function, so a
    /// test need not set the process's own.
    pub trait ConfigStoreWithEnv {
        /// [`ConfigStore::load`] with `env` in place of the environment.
        fn load_with_env(
            &self,
            env: &dyn Fn(&str) -> Option<String>,
        ) -> Result<ConfigStatus, StateError>;
        /// [`ConfigStore::save_change`] with `env` in place of the environment.
        fn save_change_with_env(
            &self,
            change: ConfigChange,
            env: &dyn Fn(&str) -> Option<String>,
        ) -> Result<ConfigStatus, StateError>;
    }

    impl ConfigStoreWithEnv for ConfigStore {
        fn load_with_env(
            &self,
            env: &dyn Fn(&str) -> Option<String>,
        ) -> Result<ConfigStatus, StateError> {
            ConfigStore::load_with_env(self, env)
        }
        fn save_change_with_env(
            &self,
            change: ConfigChange,
            env: &dyn Fn(&str) -> Option<String>,
        ) -> Result<ConfigStatus, StateError> {
            ConfigStore::save_change_with_env(self, change, env)
        }
    }

    /// The store's turn lock, which the session core takes through
    /// `session::turn_lock`.
    pub trait SessionStoreTurnLock {
        /// Session `key`'s turn lock, taken if nobody holds it.
        fn try_lock_turn(&self, key: &str) -> Result<Option<TurnLock>, StateError>;
        /// Where session `key`'s turn lock file lives.
        fn turn_lock_path(&self, key: &str) -> PathBuf;
    }

    impl SessionStoreTurnLock for SessionStore {
        fn try_lock_turn(&self, key: &str) -> Result<Option<TurnLock>, StateError> {
            SessionStore::try_lock_turn(self, key)
        }
        fn turn_lock_path(&self, key: &str) -> PathBuf {
            SessionStore::turn_lock_path(self, key)
        }
    }
}
