//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! The crate is layered; each folder's `mod.rs` says what it owns and what it
//! may import. Data flows one way:
//! [`agy_format`] (its own crate: wire → steps, stream-json) → [`follow`] (events, poller,
//! discovery) → [`runner`] (one turn), over [`process`] (agy's processes and their guardian), → [`gate`] → [`pi`]
//! (provider, diffs, models). [`state`] holds the bridge's own files,
//! [`settings`], beside it, every environment variable the bridge reads
//! (resolved once by the binary's `main` and passed down),
//! [`view`] the readable views and [`maintain`], the top layer, the live
//! recorder and the conformance suite. The recordings themselves (their
//! format, redaction, drift) are the [`agy_corpus`] crate, below this one;
//! the generators of `recordings/` are agy-synth, a dev-dependency only, so
//! this binary does not link them. ARCHITECTURE.md has the whole map.
//!
//! Every path names its layer (`agy_format::steps`,
//! `agy_bridge::runner`): there are no top-level aliases.
//!
//! # The API
//!
//! The public modules are the layers. What is `pub` inside them is what
//! the crate's users name: the `agy-bridge` binary (its commands drive the
//! runner, the provider's stream, the state files), fake-agy, and the types
//! a public signature carries, each documented (`missing_docs` warns). The
//! rest is `pub(crate)` or private, so a helper cannot become API by
//! accident. Internals the crate's own tests and benches pin (file names,
//! limits, the calls that take the environment as an argument) are reached
//! through `agy_bridge::testing`, built only with the `testing` feature,
//! which the package's dev-dependency on itself turns on for them.
//! `tests/structure.rs` checks the layers' imports and that no modules
//! import each other in a cycle.
//!
//! `unsafe` is kept to the few calls with no safe form (forking, a child's
//! set-up before exec, signal handlers, registering a descriptor with the
//! reactor, ...), each once, behind a small helper, with a `// SAFETY:`
//! comment; `tests/structure.rs` counts them (at most 8 in `src/`). An
//! `unsafe fn`'s body is no exception: its unsafe calls are blocks too.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod acp;
pub mod follow;
pub mod gate;
pub mod maintain;
pub mod pi;
pub mod process;
pub mod runner;
pub mod session;
pub mod settings;
pub mod state;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
pub mod view;
