//! agy-format, layer 1 of agy-bridge: what agy writes and prints, as data.
//!
//! Owns the protobuf wire walker and encoder ([`wire`]), agy's step model and
//! field numbers ([`steps`]), its SQLite schema ([`schema`]), its
//! stream-json lines ([`stream_json`]) and the user turns it reads on stdin
//! ([`stream_input`]), conversation ids ([`ids`]), the words
//! of agy's command line ([`agy_args`]), what each agy version offers
//! ([`features`]), the quota `/usage` reports ([`quota`]), agy's lifecycle hooks ([`hooks`]), what its file-writing tools do to a file's text ([`edits`]), the stderr lines read live ([`stderr`]) and the small text helpers every
//! readable view shares ([`text`]). The spec behind it is docs/agy-format.md.
//!
//! Its own crate so the compiler keeps it at the bottom: it depends on no
//! other part of agy-bridge, and does no I/O (the `sqlite` feature adds the
//! three schema helpers that take an open connection, and [`database`]:
//! opening a conversation database read-only and reading its step rows). Everything above
//! builds on it.

#![forbid(unsafe_code)]

pub mod agy_args;
#[cfg(feature = "sqlite")]
pub mod database;
pub mod edits;
pub mod features;
pub mod hooks;
pub mod ids;
pub mod quota;
pub mod schema;
pub mod stderr;
pub mod steps;
pub mod stream_input;
pub mod stream_json;
pub mod text;
pub mod wire;
