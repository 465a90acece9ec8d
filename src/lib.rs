//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! The crate is layered; each folder's `mod.rs` says what it owns and what it
//! may import. Data flows one way:
//! [`agy_format`] (its own crate: wire → steps, stream-json) → [`follow`] (events, poller,
//! discovery) → [`run`] (one turn: runner, failure, guardian) → [`pi`]
//! (provider, diffs, models). [`state`] holds the bridge's own files,
//! [`view`] the readable views and [`corpus`], the top layer, the live
//! recorder and the conformance suite. The recordings themselves (their
//! format, redaction, drift) are the [`agy_corpus`] crate, below this one;
//! the generators of `recordings/` are agy-synth, a dev-dependency only, so
//! this binary does not link them. ARCHITECTURE.md has the whole map.
//!
//! Every path names its layer (`agy_format::steps`,
//! `agy_bridge::run::runner`): there are no top-level aliases.
//!
//! # The API
//!
//! The public modules are the layers. What is `pub` inside them is what
//! the crate's users name: the `agy-bridge` binary (its commands drive the
//! runner, the provider's stream, the state files), fake-agy, the tests
//! and benches, and the types a public signature carries. The rest is
//! `pub(crate)` or private, so a helper cannot become API by accident;
//! `tests/structure.rs` checks the layers' imports and that no modules
//! import each other in a cycle.

pub mod acp;
pub mod corpus;
pub mod follow;
pub mod pi;
pub mod run;
pub mod state;
pub mod view;
