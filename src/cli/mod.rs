//! The `agy-bridge` command line (the binary's own modules, not the
//! library's): one file per command group. `main.rs` parses the arguments
//! and dispatches here.

pub mod admission;
pub mod caller;
pub mod conformance;
pub mod env;
pub mod gate;
pub mod hook;
pub mod out;
pub mod session;
pub mod slash;
pub mod turn;
pub mod usage;
