//! **process**: agy's processes, owned until reaped.
//!
//! Every agy the bridge starts runs under a guardian ([`guard`]) that takes
//! agy's whole tree down when the bridge dies, however it dies. For pi's
//! `stream` the guardian is forked first thing in `main` and waits for its
//! turn ([`standby`]); [`launch`] is what it is told to run. `tree` walks
//! a process tree and signals it (a reaped pid is never signalled);
//! `short` runs the short agy programs asked beside a turn (`--version`,
//! `models`, `-p /usage`, ...) under the same guardian, ended on the same
//! stops; `job_control` pauses and resumes agy's trees with the
//! terminal's Ctrl-Z and `fg`; `blocking` runs a call that must block (a
//! file read, pi's bounded stdout) without stalling the runtime; [`caller`]
//! is the bridge's own lifetime: stop signals from the first millisecond,
//! its parent's death, its stdout's reader gone; `reactor` registers a
//! descriptor with the runtime's reactor (pi's stdout, inotify);
//! `signals` installs this crate's signal handlers and sets up a child's
//! signals before it execs (it dies with its parent).
//!
//! This is the lowest layer of the crate beside [`crate::state`]: it knows
//! processes, not agy's files or events.
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::settings`] (PATH,
//! as exec reads it).

pub(crate) mod blocking;
pub mod caller;
pub mod guard;
pub(crate) mod job_control;
pub mod launch;
pub(crate) mod reactor;
pub(crate) mod short;
pub(crate) mod signals;
pub mod standby;
pub(crate) mod tree;
