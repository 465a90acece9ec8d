//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! The crate is layered; each folder's `mod.rs` says what it owns and what it
//! may import. Data flows one way:
//! [`format`](mod@format) (wire → steps, stream-json) → [`follow`] (events, poller,
//! discovery) → [`run`] (one turn: runner, failure, guardian) → [`pi`]
//! (provider, diffs, models). [`state`] holds the bridge's own files,
//! [`view`] the readable views and [`corpus`] the recordings, fake-agy's
//! food, the recorder and drift. ARCHITECTURE.md has the whole map.
//!
//! The modules are also re-exported at the top level under their own names
//! (`agy_bridge::steps`, `agy_bridge::runner`, ...), the paths the tests,
//! benches and fake-agy use.

pub mod corpus;
pub mod follow;
pub mod format;
pub mod pi;
pub mod run;
pub mod state;
pub mod view;

#[cfg(any(test, feature = "corpus"))]
pub use corpus::synth;
pub use corpus::{db, drift, record, recording, redact};
pub use follow::{discovery, events, poller};
pub use format::{schema, steps, stream_json, wire};
pub use pi::{diff, mcp, models, provider};
pub use run::{agy_version, failure, guard, process, prompt_file, runner};
pub use state::{admission, config, rules, sessions};
pub use view::{decode, render};
