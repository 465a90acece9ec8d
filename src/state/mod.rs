//! Layer 3, **state**: the bridge's own files under its state directory.
//!
//! Owns locked, atomic JSON state files and the settings in `config.json`
//! ([`config`]), and the map from pi sessions to agy conversations with the
//! per-session turn lock ([`sessions`]), and the temporary directory its
//! private directories go in ([`tmp`]).
//!
//! May import: [`crate::format`](mod@crate::format).

pub mod config;
pub mod sessions;
pub mod tmp;
