//! **view**: the readable views of what agy did, for people.
//!
//! Owns `agy-bridge decode` of a database or recording ([`decode`]) and the
//! live view of a turn that `run` and `demo` print ([`render`]), and the
//! bridge's state as `config allow` and `sessions` list it ([`listing`]).
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::runner`]
//! (its events and result), [`agy_corpus::source`] (the step rows of a
//! database or a recording), [`crate::state`] (the state it lists).

pub mod decode;
pub mod listing;
pub mod render;
