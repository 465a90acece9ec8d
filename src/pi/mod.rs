//! Layer 5, **pi**: agy as a pi model provider. The only layer that knows pi.
//!
//! Owns pi's request and event protocol, the context digest and the mapping
//! of runner events to pi events ([`provider`]), agy's edits as diffs for
//! pi's thinking stream ([`diff`]) and agy's model catalog as pi models
//! ([`models`]).
//!
//! May import: every layer below ([`agy_format`](mod@agy_format), [`crate::follow`],
//! [`crate::state`], [`crate::run`]).

pub mod ask;
pub mod diff;
pub mod mcp;
pub mod models;
pub mod provider;
