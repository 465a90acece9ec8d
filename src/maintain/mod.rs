//! **maintain**: what maintainers run against a live agy (and the demo
//! that runs the pipeline on a recording, [`demo`]), the top layer, above [`crate::pi`]: capturing a live agy run
//! as a recording ([`record`]) and the conformance suite that checks a live
//! agy against docs/agy-format.md ([`conformance`]).
//!
//! The recordings themselves are data and live below, in the agy-corpus
//! crate ([`agy_corpus`]: the recording format, whole-database reads,
//! redaction, drift); the generators of `recordings/` are the agy-synth
//! crate, a dev-dependency only. What stays here needs the runner or pi:
//! the recorder implements the runner's observer, and conformance runs
//! turns and checks agy against the bridge's own MCP server and the
//! `agy models` parser.
//!
//! May import: every layer of this crate ([`crate::follow`], [`crate::state`], [`crate::settings`],
//! [`crate::process`], [`crate::runner`], [`crate::gate`], [`crate::view`], [`crate::pi`]), [`agy_corpus`] and
//! [`agy_format`](mod@agy_format). Nothing in this crate imports it.

pub mod conformance;
pub mod demo;
pub mod record;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
