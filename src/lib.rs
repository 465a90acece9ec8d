//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! Data flows one way through these modules:
//! [`wire`] → [`steps`] → [`events`] → [`poller`] → [`runner`] (with
//! [`discovery`]) → [`provider`]. Only the provider knows pi; its state lives
//! in [`config`], [`sessions`] and [`models`], and agy's edits become diffs in
//! [`diff`]. [`recording`] and [`schema`] describe agy's database for
//! fake-agy ([`synth`] builds the corpus), the recorder ([`record`],
//! [`redact`]) and [`drift`]; [`decode`] and [`render`] are the readable
//! views. [`mcp`] serves pi's tools to agy for a `stream` turn.
//! ARCHITECTURE.md has the whole map.

pub mod agy_version;
pub mod config;
pub mod decode;
pub mod diff;
pub mod discovery;
pub mod drift;
pub mod events;
pub mod failure;
pub mod guard;
pub mod mcp;
pub mod models;
pub mod poller;
pub mod process;
pub mod provider;
pub mod record;
pub mod recording;
pub mod redact;
pub mod render;
pub mod runner;
pub mod schema;
pub mod sessions;
pub mod steps;
pub mod stream_json;
pub mod synth;
pub mod wire;
