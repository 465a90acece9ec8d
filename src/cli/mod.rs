//! The `agy-bridge` command line (the binary's own modules, not the
//! library's): one file per command group, and a pi turn's stages (start,
//! prepare, cold run, tool side, end) each in a file of its own, shared by
//! `stream` and `stream --session`. `main.rs` parses the arguments and
//! dispatches here.

pub mod acp;
pub mod admission;
pub mod ask;
pub mod caller;
pub mod cold;
pub mod conformance;
pub mod decode;
pub mod drift;
pub mod end;
pub mod env;
pub mod gate;
pub mod hook;
pub mod models;
pub mod out;
pub mod pi_io;
pub mod pi_tools;
pub mod prepare;
pub mod record;
pub mod run;
pub mod session;
pub mod slash;
pub mod start;
pub mod state;
pub mod stream;
pub mod tools_switch;
pub mod turn;
pub mod usage;
