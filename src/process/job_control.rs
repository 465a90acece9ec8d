//! Ctrl-Z and `fg` for agy's trees: the processes this bridge started, still
//! unreaped, and how to pause and resume what runs under them.
//!
//! agy runs in a process group of its own (so a stop of agy's tree can never
//! reach the bridge's group), which also keeps the terminal's SIGTSTP from
//! reaching it: without this, Ctrl-Z on `run` stopped the bridge while agy
//! worked on. The turn commands forward it ([`pause_all`] before stopping
//! themselves, [`resume_all`] on SIGCONT).
//!
//! Every live [`crate::process::standby::Spawned`] is listed here while it is
//! not reaped, and is taken off the list, under the same lock, before it is
//! reaped: a pid on the list is always still ours, never a reused one.
//! Under a guardian only what runs below it is paused, never the guardian:
//! stopped, it could not take agy's tree down if the bridge died meanwhile.

use crate::process::tree::ChildPid;
use nix::sys::signal::Signal;
use std::sync::{Mutex, MutexGuard};

/// A started process and whether it is a guardian (pause below it only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Live {
    pid: ChildPid,
    guardian: bool,
}

static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<Live>> {
    // A panic while holding it leaves a plain list: still usable.
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// List `pid` (our child, not reaped).
pub(crate) fn register(pid: ChildPid, guardian: bool) {
    live().push(Live { pid, guardian });
}

/// Take `pid` off the list and run `reap` while no pause or resume can
/// reach it: after this, its pid is never signalled by us again.
pub(crate) fn unregister_then<T>(pid: ChildPid, reap: impl FnOnce() -> T) -> T {
    let mut list = live();
    list.retain(|l| l.pid != pid);
    reap()
}

/// Mark `pid` as a guardian (its launch was handed over).
pub(crate) fn set_guardian(pid: ChildPid) {
    for l in live().iter_mut().filter(|l| l.pid == pid) {
        l.guardian = true;
    }
}

/// Stop every live tree (SIGSTOP: agy and its children cannot ignore it);
/// how many trees there were.
pub(crate) fn pause_all() -> usize {
    signal_all(Signal::SIGSTOP)
}

/// Continue every live tree.
pub(crate) fn resume_all() -> usize {
    signal_all(Signal::SIGCONT)
}

fn signal_all(sig: Signal) -> usize {
    let list = live();
    for l in list.iter() {
        if l.guardian {
            crate::process::tree::signal_each_below(l.pid, sig);
        } else {
            crate::process::tree::signal_tree(l.pid, sig);
        }
    }
    list.len()
}
