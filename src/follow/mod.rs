//! **follow**: from a conversation database that agy is writing to
//! provider-neutral events.
//!
//! Owns the tracker that turns successive views of a step into deltas
//! ([`events`]) and what a stream of them amounts to ([`transcript`]), the words every readable view uses for a tool call
//! (`subject`), which calls are file edits ([`edits`]), the hash that tells a grown text from a rewritten one
//! (`text_hash`), the read-only poller over one database ([`poller`]),
//! with what it reads of agy's WAL files without SQLite (`wal_files`), and the
//! binding of the database a run created ([`discovery`]). Benches switch
//! the mechanisms beyond inotify and `data_version` off one by one
//! (`knobs`, through `crate::testing`).
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::process`] (the
//! process-tree walker, for which databases agy holds open).

mod calls;
pub mod discovery;
pub mod edits;
pub mod events;
pub(crate) mod knobs;
pub mod poller;
pub(crate) mod subject;
pub(crate) mod text_hash;
pub mod transcript;
mod wal_files;
