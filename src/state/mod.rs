//! **state**: the bridge's own files under its state directory.
//!
//! Owns the state directory and its locked, atomic JSON state files
//! ([`file`](mod@file)), the settings in `config.json` ([`config`]: the variables
//! that override them in [`config::overrides`], what `agy-bridge config` shows in
//! [`config::status`]) with the permission gate's allow rules ([`rules`]),
//! and the map from pi sessions to agy conversations with the
//! per-session turn lock ([`sessions`]), the temporary directory its
//! private directories go in ([`tmp`]), and the account-wide admission
//! limits on agy starts shared by every bridge process of the user
//! ([`admission`]: seats for turns in flight, spacing between starts).
//!
//! May import: [`agy_format`](mod@agy_format).

pub mod admission;
pub mod config;
pub mod file;
pub mod rules;
pub mod sessions;
pub mod tmp;
