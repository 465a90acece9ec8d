//! agy-corpus: recordings of agy runs as data, and the tools that read them.
//!
//! Owns the recording format that fake-agy replays ([`recording`]), what a
//! path holds and the step rows in it ([`source`]: a database or a
//! recording), reading and diffing whole databases ([`db`]), redaction
//! ([`redact`]) and the schema drift report ([`drift`]).
//!
//! Its own crate so the compiler keeps its direction: it depends on
//! [`agy_format`] (with its `sqlite` feature) and on no other part of
//! agy-bridge, so it needs neither the runner nor pi. agy-bridge builds on
//! it (`decode`, the live recorder, the conformance suite, the `drift` and
//! `redact` commands), fake-agy replays its recordings, and agy-synth
//! writes the synthesized ones in `recordings/`.

#![forbid(unsafe_code)]

pub mod db;
pub mod drift;
pub mod recording;
pub mod redact;
pub mod source;
