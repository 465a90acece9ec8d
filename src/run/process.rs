//! Signalling a process tree: a root, its descendants, and the process
//! groups they made (agy's `run_command` children make their own).
//!
//! One helper for the runner, which takes agy's tree down on abort, timeout
//! and exit, and for the guardian ([`crate::guard`]), which does it when the
//! bridge dies.

use crate::discovery;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgid, getpgrp, Pid};

/// Signal `root`'s whole tree: its process group, the groups of descendants
/// that made their own, and each process.
pub fn signal_tree(root: u32, sig: Signal) {
    let mut pids = discovery::process_tree(root);
    if !pids.contains(&root) {
        pids.push(root);
    }
    signal_all(&pids, Some(Pid::from_raw(root as i32)), sig);
}

/// Signal everything below `root` (not `root` itself, nor its group);
/// returns how many processes there were.
pub fn signal_tree_below(root: u32, sig: Signal) -> usize {
    let pids: Vec<u32> = discovery::process_tree(root)
        .into_iter()
        .filter(|p| *p != root)
        .collect();
    signal_all(&pids, None, sig);
    pids.len()
}

fn signal_all(pids: &[u32], first_group: Option<Pid>, sig: Signal) {
    // Never our own group: the bridge (or the guardian) must survive it.
    let own = getpgrp();
    let mut groups: Vec<Pid> = first_group.into_iter().collect();
    for pid in pids {
        if let Ok(g) = getpgid(Some(Pid::from_raw(*pid as i32))) {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    for g in groups {
        if g != own && g.as_raw() > 1 {
            let _ = killpg(g, sig);
        }
    }
    for pid in pids {
        if *pid as i32 != std::process::id() as i32 {
            let _ = kill(Pid::from_raw(*pid as i32), sig);
        }
    }
}
