//! Layer 5, **pi**: agy as a pi model provider. The only layer that knows pi.
//!
//! Owns pi's request and event protocol ([`provider`]), with the prompt and
//! context digest ([`provider::context`]), the writer that keeps pi's event
//! invariants ([`provider::stream`]) and the mapping of runner events to pi
//! events ([`provider::mapper`]); agy's edits as diffs for pi's thinking
//! stream ([`diff`]) and agy's model catalog as pi models ([`models`]).
//!
//! May import: every layer below ([`agy_format`](mod@agy_format), [`crate::follow`],
//! [`crate::state`], [`crate::process`], [`crate::runner`], [`crate::gate`]).

pub mod ask;
pub mod diff;
pub mod mcp;
pub mod models;
pub mod provider;
