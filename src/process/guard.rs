//! The guardian: a tiny process between the bridge and agy that takes agy's
//! whole tree down when the bridge dies, however it dies.
//!
//! A SIGKILLed bridge runs no code, and agy's `run_command` children live in
//! process groups of their own, so neither a drop guard nor
//! `PR_SET_PDEATHSIG` on agy alone can reach them. The guardian can: it is
//! agy's parent and a child subreaper (Linux), so every orphan of agy's tree
//! is reparented to it and stays findable; and its stdin is a pipe whose only
//! writer is the bridge, so end-of-file on it means the bridge is gone. It
//! then SIGKILLs the tree and exits. When agy exits on its own, the guardian
//! ends what agy left running and exits with agy's status (the same code, or
//! the same signal), so the runner sees agy's exit as if agy were its child.
//!
//! Without Linux (macOS): no subreaper and no `PR_SET_PDEATHSIG`. The stdin
//! lifeline works the same, and agy's tree is found through `ps` (see
//! `crate::process::tree::process_tree`) and signalled with its process groups;
//! what it cannot reach is an orphan already reparented to launchd in a group
//! of its own.
//!
//! It is the bridge's own binary run with `GUARD_ARG` first, so it needs
//! no second executable; a binary that embeds the library calls
//! [`main_if_guard`] first thing in `main`. What to run comes on its stdin
//! ([`crate::process::launch`]), so it can be started before the turn knows.
//! After it, the same pipe brings what agy reads on its stdin (the turn's
//! prompt, `Frame`s), written to agy in order by a thread of its own, so a
//! slow reader never delays the lifeline.

use crate::process::launch::{Frame, Launch};
use std::io::{Read, Write};
use std::path::PathBuf;

/// argv\[1\] that turns the binary into the guardian:
/// `BIN __agy-bridge-guard`, with a [`Launch`] frame on stdin.
pub(crate) const GUARD_ARG: &str = "__agy-bridge-guard";

/// Set once [`main_if_guard`] has run in this process: its binary can be
/// a guardian, so the short agy programs it asks run under one too
/// ([`crate::process::short`]).
static CAN_GUARD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Run as the guardian if argv asks for it (never returns then). Otherwise
/// note that this binary can be one: a binary that calls this first thing
/// in `main` answers `GUARD_ARG`.
pub fn main_if_guard() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == GUARD_ARG) {
        std::process::exit(serve());
    }
    CAN_GUARD.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process's binary can be a guardian ([`main_if_guard`] ran
/// in it): a test binary or another embedder that never called it cannot.
pub(crate) fn this_binary_guards() -> bool {
    CAN_GUARD.load(std::sync::atomic::Ordering::Relaxed)
}

/// How the guardian's one line begins when it cannot start the program
/// (exit 127 when it is not there, else 126): a short program's caller
/// tells that apart from the program's own failure.
pub(crate) const CANNOT_START: &str = "agy-bridge guardian: cannot start ";

/// Read what to run, then run it under watch: the exit code to leave with.
/// A guardian forked from the bridge ([`crate::process::standby`]) starts here.
pub(crate) fn serve() -> i32 {
    // The lock (and its buffer) goes before the lifeline thread reads on.
    let launch = Launch::read_from(&mut std::io::stdin().lock());
    match launch {
        Ok(Some(launch)) => guard_tree(launch),
        // The bridge ended (or did not need us) before sending a command.
        Ok(None) => 0,
        Err(e) => {
            eprintln!("agy-bridge guardian: cannot read what to run: {e}");
            2
        }
    }
}

fn remove_all(dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The private directories to remove, keeping only directories this
/// bridge made (`agy-bridge-*`): a damaged frame cannot make the guardian
/// remove anything else.
fn private_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .filter(|dir| {
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("agy-bridge-"))
        })
        .cloned()
        .collect()
}

/// Run agy under watch; the exit code to leave with.
fn guard_tree(launch: Launch) -> i32 {
    let remove = private_dirs(&launch.remove_after);
    let subreaper = os::become_subreaper();
    os::hold_terminal_signals();
    let mut cmd = launch.command();
    cmd.stdin(if launch.stdin_piped {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    });
    os::reset_signals_in_child(&mut cmd);
    let mut child = match crate::process::tree::retry_while_busy(|| cmd.spawn()) {
        Ok(c) => c,
        Err(e) => {
            // The runner words this from the exit code and stderr.
            eprintln!("{CANNOT_START}{}: {e}", launch.program.to_string_lossy());
            remove_all(&remove);
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    let agy = child.id();
    let agy_stdin = child.stdin.take();
    // Do not wait on `child`: the reaper below collects every child.
    std::mem::forget(child);
    let on_eof = remove.clone();
    std::thread::spawn(move || {
        follow_lifeline(&mut std::io::stdin().lock(), agy_stdin);
        // The bridge is gone: nothing of agy's may outlive it, not even
        // what its tree keeps forking while it is being killed.
        os::kill_until_gone(KILL_PERSISTENCE);
        remove_all(&on_eof);
        // Last, the whole process group, the guardian with it: anything of
        // agy's that left the tree (it cannot leave the group unnoticed).
        os::kill_own_group();
        std::process::exit(137);
    });
    let status = os::reap_until(agy);
    // Whatever agy left behind (background work) ends with the turn: asked
    // first, killed after a moment. Nothing left means no wait at all, so
    // the runner sees agy's exit at once, and as a subreaper with no child
    // left not even a look through every process on the machine.
    let left_nothing = subreaper && os::childless();
    if !left_nothing && os::kill_descendants(nix::sys::signal::Signal::SIGTERM) > 0 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        os::kill_until_gone(KILL_PERSISTENCE);
    }
    remove_all(&remove);
    os::exit_like(status)
}

/// Read the bridge's frames until its end (end-of-file: the bridge is
/// gone), passing input on to agy's stdin when agy has a pipe.
fn follow_lifeline(lifeline: &mut impl Read, agy_stdin: Option<std::process::ChildStdin>) {
    let mut feed = agy_stdin.map(feed_agy);
    loop {
        match Frame::read_from(lifeline) {
            Ok(Some(Frame::Input(bytes))) => {
                if let Some(feed) = &feed {
                    // Refused only once agy stopped reading: nothing to do.
                    let _ = feed.send(bytes);
                }
            }
            // The writer closes agy's stdin once the bytes before are in.
            Ok(Some(Frame::CloseInput)) => feed = None,
            Ok(None) => return,
            Err(e) => {
                // The bridge is alive but its frames cannot be trusted any
                // more: agy gets no more input, and the lifeline keeps its
                // one meaning.
                eprintln!("agy-bridge guardian: a damaged frame from the bridge ({e}); agy's input is closed");
                drop(feed);
                os::wait_for_eof(lifeline);
                return;
            }
        }
    }
}

/// A thread that writes what it is sent to agy's stdin, in order, and
/// closes it when the sender is dropped. A write that fails (agy exited, or
/// closed its input) drops the rest: agy will never read it.
fn feed_agy(mut stdin: std::process::ChildStdin) -> std::sync::mpsc::Sender<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for bytes in rx {
            if stdin.write_all(&bytes).is_err() {
                return;
            }
        }
    });
    tx
}

/// How long the guardian keeps killing a tree that keeps forking. Each
/// round SIGKILLs every descendant it finds and reaps them; a process
/// forked in the meantime is reparented to the guardian (a subreaper) and
/// found in the next round, so a tree of any fork rate is gone in a few.
const KILL_PERSISTENCE: std::time::Duration = std::time::Duration::from_secs(3);

mod os {
    use crate::process::signals;
    use nix::sys::signal::{self, Signal};
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::Pid;
    use std::io::Read;

    /// Orphans of agy's tree come to us instead of init; whether they do.
    pub(crate) fn become_subreaper() -> bool {
        #[cfg(target_os = "linux")]
        {
            nix::sys::prctl::set_child_subreaper(true).is_ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Whether we have no child at all, not even an unreaped one. For a
    /// subreaper that means nothing of agy's tree is alive: a living
    /// descendant is our child or below one (its orphans come to us).
    pub(crate) fn childless() -> bool {
        matches!(
            waitpid(
                Pid::from_raw(-1),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG)
            ),
            Err(nix::errno::Errno::ECHILD)
        )
    }

    /// Terminal and termination signals reach the whole process group; the
    /// guardian outlives them so it can clean up after agy. A handler (not
    /// SIG_IGN) is reset by exec, so agy still gets them normally.
    pub(crate) fn hold_terminal_signals() {
        for sig in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            signals::outlive(sig);
        }
    }

    /// agy starts with default dispositions and an empty signal mask, and
    /// dies if the guardian does.
    pub(crate) fn reset_signals_in_child(cmd: &mut std::process::Command) {
        signals::die_with_parent(cmd, true);
    }

    pub(crate) fn wait_for_eof(input: &mut impl Read) {
        let mut buf = [0u8; 64];
        loop {
            match input.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Reap children (agy, and orphans reparented to us) until agy exits.
    pub(crate) fn reap_until(agy: u32) -> WaitStatus {
        loop {
            match waitpid(Pid::from_raw(-1), None) {
                Ok(s @ WaitStatus::Exited(pid, _)) | Ok(s @ WaitStatus::Signaled(pid, _, _))
                    if pid.as_raw() as u32 == agy =>
                {
                    return s
                }
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return WaitStatus::Exited(Pid::from_raw(agy as i32), 1),
            }
        }
    }

    /// Signal every descendant (and their process groups), then reap them;
    /// returns how many there were.
    pub(crate) fn kill_descendants(sig: Signal) -> usize {
        let me = std::process::id();
        let found = crate::process::tree::signal_tree_below(me, sig);
        while let Ok(status) = waitpid(
            Pid::from_raw(-1),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        ) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        found
    }

    /// SIGKILL every descendant, reap, and look again, until none is left
    /// (or `limit` passes: a tree that outforks us for that long is left to
    /// the group kill).
    pub(crate) fn kill_until_gone(limit: std::time::Duration) {
        let until = std::time::Instant::now() + limit;
        while kill_descendants(Signal::SIGKILL) > 0 && std::time::Instant::now() < until {
            // Give the killed a moment to die (and their orphans to come
            // to us) before the next look.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// SIGKILL the guardian's own process group, the guardian included, if
    /// the guardian leads it (it does: it is started in a group of its own,
    /// which agy's tree inherits). Never another's group.
    pub(crate) fn kill_own_group() {
        let own = nix::unistd::getpgrp();
        if own == nix::unistd::getpid() && own.as_raw() > 1 {
            let _ = signal::killpg(own, Signal::SIGKILL);
        }
    }

    /// Exit as agy did: its code, or its signal.
    pub(crate) fn exit_like(status: WaitStatus) -> i32 {
        match status {
            WaitStatus::Signaled(_, sig, _) => {
                signals::restore_default(sig);
                let _ = signal::raise(sig);
                128 + sig as i32
            }
            WaitStatus::Exited(_, code) => code,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat` as agy: what it read on stdin, once its stdin closed.
    fn through_cat(lifeline: &[u8]) -> Vec<u8> {
        let mut cat = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("cat");
        follow_lifeline(&mut &lifeline[..], cat.stdin.take());
        // cat ends only when the writer thread closed its stdin.
        let out = cat.wait_with_output().expect("cat's output");
        out.stdout
    }

    #[test]
    fn input_frames_reach_agy_in_order_and_close_ends_its_input() {
        let mut lifeline = Frame::encode_input(b"first line\n");
        lifeline.extend(Frame::encode_input(b"second"));
        lifeline.extend(Frame::encode_close());
        lifeline.extend(Frame::encode_input(b" never written"));
        assert_eq!(through_cat(&lifeline), b"first line\nsecond");
    }

    #[test]
    fn the_end_of_the_lifeline_ends_agys_input_too() {
        assert_eq!(through_cat(&Frame::encode_input(b"cut")), b"cut");
    }

    #[test]
    fn a_damaged_frame_closes_agys_input_without_a_panic() {
        let mut lifeline = Frame::encode_input(b"kept");
        lifeline.extend(b"w\xff\xff\xff\xff");
        lifeline.extend(Frame::encode_input(b" lost"));
        assert_eq!(through_cat(&lifeline), b"kept");
    }
}
