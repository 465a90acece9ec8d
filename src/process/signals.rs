//! Signals: the handlers this crate installs, and the signal set-up of the
//! children it starts. Both need `unsafe` (a handler runs between any two
//! instructions of the process; a child's set-up runs between `fork` and
//! `exec`), so each is done in one place, here, with what makes it sound.
//!
//! - **Handlers.** Three dispositions, never another: the default, a
//!   handler that does nothing (the guardian outlives terminal signals; a
//!   handler, unlike `SIG_IGN`, is reset by `exec`, so agy still gets them
//!   normally), and one that notes the first stop signal and wakes a pipe
//!   (the `agy-bridge` commands that run agy: [`note_stops`]). Both
//!   handlers do only what a handler may: atomic loads and stores and one
//!   `write(2)`, errno kept.
//! - **A child's start.** It dies with the thread that started it (Linux's
//!   `PR_SET_PDEATHSIG`), and the guardian's agy starts with no signal
//!   blocked: `sigprocmask` and `prctl`, async-signal-safe, nothing
//!   allocated, no lock taken.

use nix::errno::Errno;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// What a signal does in this process: the only dispositions [`set`]
/// installs.
#[derive(Debug, Clone, Copy)]
enum Disposition {
    /// The system's default.
    Default,
    /// Caught and dropped ([`outlive`]).
    Outlived,
    /// Noted, and the wake pipe written ([`note_stops`]).
    Noted,
}

fn set(sig: Signal, disposition: Disposition) {
    let handler = match disposition {
        Disposition::Default => SigHandler::SigDfl,
        Disposition::Outlived => SigHandler::Handler(do_nothing),
        Disposition::Noted => SigHandler::Handler(note_stop),
    };
    let action = SigAction::new(handler, SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handler is the default or one of this module's two,
    // which only touch atomics and `write(2)` a byte (keeping errno): all
    // async-signal-safe, so it may interrupt any code of this process.
    let _ = unsafe { signal::sigaction(sig, &action) };
}

extern "C" fn do_nothing(_: nix::libc::c_int) {}

/// The first stop signal noted (0: none yet).
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);
/// The write end of the pipe a noted stop wakes (unset: a stop is only
/// noted). Read in the handler: `OnceLock::get` is one atomic load.
static WAKE: OnceLock<OwnedFd> = OnceLock::new();

extern "C" fn note_stop(sig: nix::libc::c_int) {
    let _ = STOPPED_BY.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    if let Some(wake) = WAKE.get() {
        // A write may change errno under the code this handler interrupted.
        let errno = Errno::last_raw();
        let _ = nix::unistd::write(wake, &[1u8]);
        Errno::set_raw(errno);
    }
}

/// Outlive `sig`: caught and dropped, until this process execs another
/// program (which gets the default back).
pub(crate) fn outlive(sig: Signal) {
    set(sig, Disposition::Outlived)
}

/// Give `sig` its default action back (to die of it by raising it).
pub(crate) fn restore_default(sig: Signal) {
    set(sig, Disposition::Default)
}

/// Note the first of `signals` to come ([`noted_stop`]) instead of dying of
/// it, and wake the pipe given to [`wake_on_stop`], if any, on each. Later
/// handlers (tokio's) chain to this one.
pub(crate) fn note_stops(signals: &[Signal]) {
    for &sig in signals {
        set(sig, Disposition::Noted)
    }
}

/// The first signal [`note_stops`] noted, if any came.
pub(crate) fn noted_stop() -> Option<Signal> {
    Signal::try_from(STOPPED_BY.load(Ordering::SeqCst)).ok()
}

/// From now on a noted stop writes a byte to `write` (the write end of a
/// pipe, kept open for the life of the process). Once: a second call gives
/// its descriptor back.
pub(crate) fn wake_on_stop(write: OwnedFd) -> Result<(), OwnedFd> {
    WAKE.set(write)
}

/// A child started from `cmd` dies (SIGKILL) with the thread that started
/// it (Linux; nothing elsewhere), and with `empty_mask` starts with no
/// signal blocked, whatever its starter blocks.
pub(crate) fn die_with_parent(cmd: &mut Command, empty_mask: bool) {
    // Without anything to do before exec, std may start the child with
    // `posix_spawn`, as it did before.
    #[cfg(not(target_os = "linux"))]
    if !empty_mask {
        return;
    }
    // SAFETY: between fork and exec the closure makes only async-signal-safe
    // calls (sigprocmask, prctl) on values of its own: it allocates nothing
    // and takes no lock, as the child of a threaded process must not.
    unsafe {
        cmd.pre_exec(move || {
            if empty_mask {
                let _ = signal::sigprocmask(
                    signal::SigmaskHow::SIG_SETMASK,
                    Some(&SigSet::empty()),
                    None,
                );
            }
            #[cfg(target_os = "linux")]
            {
                let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
            }
            Ok(())
        });
    }
}
