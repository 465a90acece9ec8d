//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! Data flows one way through these modules:
//! [`wire`] → [`steps`] → [`events`] → [`poller`] → runner → provider.
//! [`recording`] and [`schema`] describe agy's database for fake-agy, the
//! recorder and the drift tool; see ARCHITECTURE.md for the whole map.

pub mod config;
pub mod decode;
pub mod diff;
pub mod discovery;
pub mod drift;
pub mod events;
pub mod models;
pub mod poller;
pub mod provider;
pub mod record;
pub mod recording;
pub mod redact;
pub mod render;
pub mod runner;
pub mod schema;
pub mod sessions;
pub mod steps;
pub mod synth;
pub mod wire;
