//! The caller's lifetime, as the turn commands see it: a stop signal that
//! comes before the runtime can handle it, the caller dying, and the
//! caller no longer reading.
//!
//! A turn owns agy's process tree, so whatever ends the caller must end the
//! turn, with a terminal event where anyone can still read one:
//! - A SIGTERM or SIGINT in the first milliseconds, before tokio's handlers
//!   exist, would kill `stream` with no `start` and no terminal event. A
//!   plain handler installed first thing only notes it; the turn's own
//!   handlers ([`super::turn::cancel_on_signals`]) read the note.
//! - pi SIGKILLed leaves `stream` and agy running for the whole turn: the
//!   kernel tells us (`PR_SET_PDEATHSIG`, as SIGTERM, Linux).
//! - A caller that closed our stdout is gone too: a thread waits for the
//!   pipe's error and cancels the turn, instead of agy working on until the
//!   next write fails.
//!
//! - Ctrl-Z (SIGTSTP) stops the bridge, and agy, in a process group of its
//!   own, would work on: [`forward_job_control`] pauses agy's trees first,
//!   and resumes them when the bridge is continued.
//!
//! - A caller whose end of our stdin closed is gone as well: pi keeps it
//!   open for the whole turn (abort and tool results come on it), so
//!   `stream` aborts the turn at its end (`super::stream::stdin_reader`).
//!   One-shot use from a script is `run`'s job; `stream` is pi's protocol.

use nix::sys::signal::{self, SigHandler, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// The stop signals a turn ends on (see `cancel_on_signals`).
const STOP_SIGNALS: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

static EARLY_STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn note_stop(_: nix::libc::c_int) {
    EARLY_STOP.store(true, Ordering::SeqCst);
}

/// First thing in `main` for the turn commands: a stop signal is noted
/// until the runtime's handlers take over, not fatal.
pub fn hold_early_stops() {
    let action = signal::SigAction::new(
        SigHandler::Handler(note_stop),
        signal::SaFlags::SA_RESTART,
        signal::SigSet::empty(),
    );
    for sig in STOP_SIGNALS {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
}

/// Whether a stop signal came before the turn's own handlers existed.
pub fn stopped_early() -> bool {
    EARLY_STOP.load(Ordering::SeqCst)
}

/// Be sent SIGTERM (a stop like any other) when our parent dies (Linux).
/// A parent that died before we asked is caught by its pid changing.
pub fn stop_with_parent() {
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getppid();
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
        if nix::unistd::getppid() != parent {
            let _ = signal::raise(Signal::SIGTERM);
        }
    }
}

/// Cancel `token` once our stdout's reader is gone (a pipe or a socket;
/// a file or a terminal never goes away this way). Waits on a thread of its
/// own: `poll` with no events asked reports only the pipe's error or
/// hang-up.
pub fn cancel_when_stdout_closes(token: CancellationToken) {
    use std::os::fd::AsFd;
    if agy_bridge::pi::provider::pipe::pipe_kind(std::io::stdout().as_fd()).is_none() {
        return;
    }
    std::thread::spawn(move || {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(n) if n > 0 => {
                    let gone = fds[0].revents().is_some_and(|r| {
                        r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL)
                    });
                    if gone {
                        token.cancel();
                        return;
                    }
                }
                Err(nix::errno::Errno::EINTR) | Ok(_) => {}
                Err(_) => return,
            }
        }
    });
}

/// Forward the terminal's job control to agy's trees: on SIGTSTP, pause
/// them, then stop the bridge itself (its handler replaced the default
/// stop); on SIGCONT (`fg`, `bg`, `kill -CONT`), resume them.
pub fn forward_job_control() {
    use agy_bridge::run::job_control;
    use tokio::signal::unix::{signal, SignalKind};
    let tstp = signal(SignalKind::from_raw(Signal::SIGTSTP as i32));
    let cont = signal(SignalKind::from_raw(Signal::SIGCONT as i32));
    let (Ok(mut tstp), Ok(mut cont)) = (tstp, cont) else {
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = tstp.recv() => {
                    // Walking /proc blocks: not on a runtime worker.
                    let _ = tokio::task::spawn_blocking(job_control::pause_all).await;
                    // Stops the whole process until SIGCONT.
                    let _ = signal::raise(Signal::SIGSTOP);
                    let _ = tokio::task::spawn_blocking(job_control::resume_all).await;
                }
                Some(()) = cont.recv() => {
                    let _ = tokio::task::spawn_blocking(job_control::resume_all).await;
                }
                else => return,
            }
        }
    });
}
