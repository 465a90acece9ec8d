//! **corpus**: recordings of agy runs, and the tools over them.
//!
//! Owns the recording format that fake-agy replays ([`recording`]), the
//! synthesized corpus in `recordings/` (`synth`, behind the `corpus`
//! feature: fake-agy's tests, ours and the benches use it), capturing a live run
//! ([`record`]), redaction ([`redact`]), reading and diffing whole databases
//! ([`db`]), the schema drift report ([`drift`]) and the conformance suite
//! that checks a live agy against docs/agy-format.md ([`conformance`]).
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::run`] (the
//! recorder runs a turn), [`crate::view`] (drift reads what `decode` reads).
//! One exception, kept to [`conformance`]: it also imports [`crate::pi`]
//! (the `agy models` parser, and the bridge's own MCP server it checks agy
//! against), so it sits above `pi`; nothing below imports it.

pub mod conformance;
pub mod db;
pub mod drift;
pub mod record;
pub mod recording;
pub mod redact;
#[cfg(any(test, feature = "corpus"))]
pub mod synth;
