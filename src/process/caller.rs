//! The caller's lifetime, as the turn commands see it: a stop signal that
//! comes before the runtime can handle it, the caller dying, and the
//! caller no longer reading.
//!
//! A turn owns agy's process tree, so whatever ends the caller must end the
//! turn, with a terminal event where anyone can still read one:
//! - A SIGTERM or SIGINT, from the first millisecond on, ends the command in
//!   order instead of killing it: a plain handler installed first thing
//!   notes it and cancels the command's stop token ([`stop_token`]), which
//!   the turn (the binary's `cancel_on_signals`) and every short agy
//!   program the command waits for (`agy models`, `-p /usage`, ...) end
//!   on, so the command exits within moments, with 128 + the signal.
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
//!   `stream` aborts the turn at its end ([`crate::pi::turn`]).
//!   One-shot use from a script is `run`'s job; `stream` is pi's protocol.

use crate::process::signals;
use nix::sys::signal::{self, Signal};
use tokio_util::sync::CancellationToken;

/// The stop signals a command ends on (see [`stop_token`]).
const STOP_SIGNALS: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// First thing in `main` for the commands that run agy: a stop signal is
/// noted, not fatal, and from then on cancels [`stop_token`]. Later
/// handlers (tokio's for job control) chain to this one. Installed once.
pub fn hold_early_stops() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| signals::note_stops(&STOP_SIGNALS));
}

/// This command's stop: cancelled by the first SIGTERM, SIGINT, SIGHUP or
/// SIGQUIT (one that came before is not lost), from any thread, with a
/// runtime or without one, so a blocking wait for an agy program can be
/// cut short as well as the turn. The first call starts a thread that
/// waits for the handler's byte on a pipe (a handler cannot cancel a token
/// itself: that takes a lock).
pub fn stop_token() -> CancellationToken {
    static TOKEN: std::sync::OnceLock<CancellationToken> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let token = CancellationToken::new();
            hold_early_stops();
            watch_stops(token.clone());
            token
        })
        .clone()
}

/// Cancel `token` when the handler writes its byte, or now if a stop came
/// before the pipe existed (looked at after the pipe is in place, so none
/// falls between).
fn watch_stops(token: CancellationToken) {
    use std::io::Read;
    if let Ok((read, write)) = cloexec_pipe() {
        let mut read = std::fs::File::from(read);
        let watcher = token.clone();
        let started = std::thread::Builder::new()
            .name("agy-bridge-stops".into())
            .spawn(move || {
                let mut byte = [0u8; 1];
                loop {
                    match read.read(&mut byte) {
                        Ok(0) => return,
                        Ok(_) => watcher.cancel(),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return,
                    }
                }
            });
        if started.is_ok() {
            // Kept open for the life of the process: the handler's end.
            let _ = signals::wake_on_stop(write);
        }
    }
    if stopped_by().is_some() {
        token.cancel();
    }
}

/// A pipe whose ends agy and its tools do not inherit. Linux makes it so
/// at once; macOS has no `pipe2`, and marks each end just after (this runs
/// first thing in `main`, before any child is started).
fn cloexec_pipe() -> nix::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        let (read, write) = nix::unistd::pipe()?;
        for end in [&read, &write] {
            fcntl(end, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        }
        Ok((read, write))
    }
}

/// The stop signal this command got first, if any.
pub fn stopped_by() -> Option<Signal> {
    signals::noted_stop()
}

/// When a stop signal ended the command: say so and give the shell's code
/// for it (128 + the signal: 130 for Ctrl-C). What it was running has been
/// ended and reaped by then.
pub fn stopped_exit() -> Option<std::process::ExitCode> {
    let sig = stopped_by()?;
    eprintln!("agy-bridge: stopped by {}", sig.as_str());
    Some(std::process::ExitCode::from(128 + sig as u8))
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
    if pipe_kind(std::io::stdout().as_fd()).is_none() {
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
    use crate::process::job_control;
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

/// What a descriptor with a reader at its other end is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipeKind {
    /// A pipe (a FIFO).
    Fifo,
    /// A socket.
    Socket,
}

/// Whether `fd` is a pipe or a socket (`None`: a file, a terminal, or
/// unknown), from its `fstat`.
pub fn pipe_kind(fd: std::os::fd::BorrowedFd<'_>) -> Option<PipeKind> {
    use nix::sys::stat::{fstat, SFlag};
    let kind = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFIFO {
        Some(PipeKind::Fifo)
    } else if kind == SFlag::S_IFSOCK {
        Some(PipeKind::Socket)
    } else {
        None
    }
}
