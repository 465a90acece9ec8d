//! **pi**: agy as a pi model provider, a front end over [`crate::session`].
//! The only layer that knows pi.
//!
//! Owns pi's request and event protocol ([`provider`]), with the prompt and
//! context digest (`provider::context`), the writer that keeps pi's event
//! invariants ([`provider::stream`]) and the mapping of runner events to pi
//! events (`provider::mapper`); agy's edits as diffs for pi's thinking
//! stream ([`diff`]) and agy's model catalog as pi models ([`models`]); a
//! pi turn from request line to last event ([`turn`]); pi's tools served
//! to agy over MCP ([`mcp`]); pi's dialog deciding agy's tool calls
//! (`dialog`); the `/agy` command ([`agy_command`]) and AskAntigravity
//! ([`delegate`]).
//!
//! May import: every layer below ([`agy_format`](mod@agy_format), [`crate::follow`],
//! [`crate::state`], [`crate::settings`], [`crate::process`], [`crate::runner`], [`crate::gate`],
//! [`crate::session`]).

pub mod agy_command;
pub mod delegate;
pub(crate) mod dialog;
pub mod diff;
pub mod mcp;
pub mod models;
pub mod provider;
pub mod turn;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
