//! agy-bridge: Google's Antigravity CLI (`agy`) as a streaming model provider.
//!
//! Data flows one way through these modules:
//! [`wire`] → [`steps`] → [`events`] → [`poller`] → runner → provider.
//! [`recording`] and [`schema`] describe agy's database for fake-agy, the
//! recorder and the drift tool; see ARCHITECTURE.md for the whole map.

pub mod events;
pub mod poller;
pub mod recording;
pub mod schema;
pub mod steps;
pub mod wire;
