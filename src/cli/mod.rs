//! The `agy-bridge` command line (the binary's own modules, not the
//! library's): one file per command group, each its flags, the library
//! call, the printing and the exit code. `main.rs` parses the arguments and
//! dispatches here.

pub mod acp;
pub mod ask;
pub mod checks;
pub mod conformance;
pub mod decode;
pub mod drift;
pub mod hook;
pub mod models;
pub mod out;
pub mod record;
pub mod run;
pub mod slash;
pub mod state;
pub mod stream;
pub mod tools_switch;
pub mod turn;
pub mod usage;
