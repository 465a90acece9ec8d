//! Layer 4, **run**: one agy turn as a process the bridge owns.
//!
//! Owns spawning agy and following the turn live from both its sources, the
//! database and stream-json ([`runner`], in parts by concept: agy's command
//! line, its process, binding, the following loop, wake-ups, the two
//! sources merged, delivery, the end, and a warm agy); why a turn failed
//! ([`failure`]); agy's process tree ([`process`]) and the guardian that takes it down when
//! the bridge dies ([`guard`]), started ahead of its turn ([`standby`]) and
//! told what to run ([`launch`]); the short agy programs asked beside a
//! turn (`--version`, `models`, `-p /usage` ...), under the same guardian
//! and ended on the same stops ([`short`]); pausing and resuming agy's trees with
//! the terminal's Ctrl-Z and `fg` ([`job_control`]); agy's version, cached
//! per binary ([`agy_version`]); agy's quota, asked with `/usage` and
//! cached per binary ([`quota`]); the proof, cached per binary, that agy
//! loads the bridge's hook from `--add-dir` before a turn relies on it as
//! its permission gate ([`hook_proof`]); and the prompt, never in agy's argv: on
//! agy's stdin ([`agy_input`]) or, for an agy that cannot read it there, in
//! a private file ([`runner::prompt_file`]). [`blocking`] runs a call that must
//! block (a file read, pi's bounded stdout) without stalling the runtime.
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::state`].

pub mod agy_input;
pub mod agy_stream;
pub mod agy_version;
pub mod blocking;
pub mod failure;
pub mod gate;
pub mod guard;
pub mod hook_proof;
pub mod job_control;
pub mod launch;
pub mod process;
pub mod quota;
pub mod runner;
pub mod short;
pub mod standby;
