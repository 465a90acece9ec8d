//! Guardians started ahead of their turn, and the process a launch gives
//! the runner.
//!
//! A guardian ([`crate::process::guard`]) waits on its stdin for what to run
//! ([`Launch`]), so it can be started before the turn knows agy's command
//! line: `stream` starts one first thing, and the time it takes to start
//! passes while pi's request is read, the session lock taken and the turn
//! prepared, instead of between "ready" and agy's start (it was the largest
//! part of the bridge's time to first token). After the command, the same
//! pipe is the guardian's lifeline: nothing more is written, and its end
//! (the bridge's death included) tells the guardian to take agy's tree down.
//!
//! Two ways to have one ([`Standby`]): start the binary again
//! (`Standby::spawn`: a program image of several megabytes, one to two
//! milliseconds of CPU), or fork this process before it has a second thread
//! ([`Standby::fork`]: about a quarter of a millisecond with its pipes, and
//! nothing then competes for the CPU with the turn it waits for).
//! [`Guardian`] is the runner's handle: a binary to start, and maybe a
//! standby to take first.

use crate::process::launch::Launch;
use crate::process::tree::ChildPid;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// A guardian started ahead of its turn, waiting for its [`Launch`]. Its
/// stdout and stderr become agy's (agy inherits them), and it leads a
/// process group of its own, which agy joins. Dropped unused, its stdin
/// closes and it exits without starting anything.
///
/// Started either way, it is a pid and our ends of its stdio pipes, and we
/// reap it ourselves (never tokio): its exit is seen without reaping it, so
/// its pid and group stay its own while the runner may still signal them.
#[derive(Debug)]
pub struct Standby(Forked);

/// A guardian's pid and our ends of its stdio pipes (taken by its launch;
/// still here means it was never used).
#[derive(Debug)]
struct Forked {
    pid: ChildPid,
    pipes: Option<[OwnedFd; 3]>,
}

impl Drop for Forked {
    fn drop(&mut self) {
        if self.pipes.take().is_some() {
            // Its stdin has just closed, so it exits: collect it off-thread.
            let pid = self.pid;
            std::thread::spawn(move || reap(pid));
        }
    }
}

impl Standby {
    /// Start `bin` (the agy-bridge binary, or any binary that calls
    /// [`crate::process::guard::main_if_guard`] first) as a guardian.
    pub(crate) fn spawn(bin: &Path) -> io::Result<Standby> {
        let mut child = std::process::Command::new(bin)
            .arg(crate::process::guard::GUARD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let pipes = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => Some([i.into(), o.into(), e.into()]),
            _ => None,
        };
        let pid = ChildPid::new(child.id());
        match (pid, pipes) {
            (Some(pid), Some(pipes)) => Ok(Standby(Forked {
                pid,
                pipes: Some(pipes),
            })),
            // Cannot happen (piped stdio, a child's pid); if it did, the
            // pipes just taken are closed, so the guardian exits.
            _ => {
                std::thread::spawn(move || child.wait());
                Err(io::Error::other("the guardian started without its pipes"))
            }
        }
    }

    /// Fork this process into a guardian, without starting any program.
    ///
    /// # Safety
    ///
    /// Call it while this process has a single thread (first thing in
    /// `main`, before any runtime or thread is started). The child goes on
    /// running this program's code, which allocates and takes locks: after
    /// `fork` that is sound only if no other thread could have held one.
    pub unsafe fn fork() -> io::Result<Standby> {
        let (stdin_r, stdin_w) = cloexec_pipe()?;
        let (stdout_r, stdout_w) = cloexec_pipe()?;
        let (stderr_r, stderr_w) = cloexec_pipe()?;
        // SAFETY: the caller guarantees a single thread (see above).
        match unsafe { nix::unistd::fork() }.map_err(io::Error::from)? {
            nix::unistd::ForkResult::Child => {
                let ours = [stdin_r, stdout_w, stderr_w];
                let theirs = [stdin_w, stdout_r, stderr_r];
                std::process::exit(become_guardian(ours, theirs))
            }
            nix::unistd::ForkResult::Parent { child } => {
                let pipes = Some([stdin_w, stdout_r, stderr_r]);
                match ChildPid::new(child.as_raw() as u32) {
                    Some(pid) => Ok(Standby(Forked { pid, pipes })),
                    None => Err(io::Error::other("fork gave no child pid")),
                }
            }
        }
    }

    /// Hand over the command; the guardian's stdin stays open as its
    /// lifeline. Needs a tokio runtime context.
    pub async fn launch(mut self, launch: &Launch) -> io::Result<Spawned> {
        let Some([stdin, stdout, stderr]) = self.0.pipes.take() else {
            return Err(io::Error::other("the guardian was already used"));
        };
        // Its exit is watched first: if a pipe cannot be taken over,
        // dropping `spawned` closes the rest and collects it.
        let mut spawned = Spawned::watch(self.0.pid);
        crate::process::job_control::set_guardian(self.0.pid);
        spawned.stdin = Some(ChildStdin::from_std(stdin.into())?);
        spawned.stdout = Some(ChildStdout::from_std(stdout.into())?);
        spawned.stderr = Some(ChildStderr::from_std(stderr.into())?);
        let stdin = spawned
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("the guardian's stdin is gone"))?;
        stdin.write_all(&launch.encode()).await?;
        stdin.flush().await?;
        Ok(spawned)
    }
}

/// A pipe whose ends do not leak into programs this process starts: the
/// lifeline's write end in a long-lived child would keep the guardian from
/// ever seeing the bridge go.
fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let (read, write) = nix::unistd::pipe()?;
    for fd in [&read, &write] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((read, write))
}

/// The forked child's side: its ends of the pipes become its stdio, ours
/// close, and it serves as the guardian. Returns its exit code.
fn become_guardian(ours: [OwnedFd; 3], theirs: [OwnedFd; 3]) -> i32 {
    // Its own group, as a spawned guardian's `process_group(0)`.
    let _ = nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
    let [stdin, stdout, stderr] = &ours;
    let moved = nix::unistd::dup2_stdin(stdin)
        .and_then(|()| nix::unistd::dup2_stdout(stdout))
        .and_then(|()| nix::unistd::dup2_stderr(stderr));
    if moved.is_err() {
        return 2;
    }
    // The bridge's ends: kept here, the lifeline would never reach EOF.
    drop(theirs);
    drop(ours);
    crate::process::guard::serve()
}

/// A process a launch started (the guardian, or agy itself without one):
/// its pid, its pipes, and its exit. It is never reaped behind our back:
/// its exit is seen first (`Spawned::exited`), and only [`Spawned::wait`]
/// reaps it, after which it is never signalled again.
#[derive(Debug)]
pub struct Spawned {
    pid: ChildPid,
    /// The guardian's lifeline (none without a guardian).
    pub stdin: Option<ChildStdin>,
    /// agy's stdout, until taken.
    pub stdout: Option<ChildStdout>,
    /// agy's stderr, until taken.
    pub stderr: Option<ChildStderr>,
    exit: Exit,
}

#[derive(Debug)]
enum Exit {
    /// Running, as far as we know: a thread reports its exit without
    /// reaping it.
    Watched(tokio::sync::oneshot::Receiver<()>),
    /// Exited and not reaped: a zombie, holding its pid and group.
    Exited,
    Reaped(ExitStatus),
    /// Reaped by someone else: no status to give.
    Lost,
    /// Handed to a thread of its own that ends and reaps it
    /// ([`Spawned::end_in_background`]): this handle never signals it again.
    Released,
}

impl Spawned {
    /// Our child `pid`, watched from now on.
    fn watch(pid: ChildPid) -> Spawned {
        crate::process::job_control::register(pid, false);
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            // An error means it is not our child to wait for (reaped
            // elsewhere): then it has exited as far as we can tell.
            let _ = crate::process::tree::exited_unreaped(pid, true);
            let _ = tx.send(());
        });
        Spawned {
            pid,
            stdin: None,
            stdout: None,
            stderr: None,
            exit: Exit::Watched(rx),
        }
    }

    /// A program started with `std::process` (agy, without a guardian):
    /// its pipes move to tokio, and it is watched, not reaped, by us. Needs
    /// a tokio runtime context.
    pub(crate) fn from_std(mut child: std::process::Child) -> io::Result<Spawned> {
        let Some(pid) = ChildPid::new(child.id()) else {
            return Err(io::Error::other("the child has no pid of its own"));
        };
        let mut spawned = Spawned::watch(pid);
        spawned.stdin = child.stdin.take().map(ChildStdin::from_std).transpose()?;
        spawned.stdout = child.stdout.take().map(ChildStdout::from_std).transpose()?;
        spawned.stderr = child.stderr.take().map(ChildStderr::from_std).transpose()?;
        Ok(spawned)
    }

    pub(crate) fn id(&self) -> ChildPid {
        self.pid
    }

    /// Wait until it has exited, without reaping it (cancel-safe).
    pub(crate) async fn exited(&mut self) {
        if let Exit::Watched(rx) = &mut self.exit {
            let _ = rx.await;
            self.exit = Exit::Exited;
        }
    }

    /// Wait for it to exit and reap it (cancel-safe; again after that, the
    /// same status).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.exited().await;
        match &self.exit {
            Exit::Reaped(status) => Ok(*status),
            Exit::Lost | Exit::Released => Err(lost(self.pid)),
            Exit::Watched(_) | Exit::Exited => {
                let pid = self.pid;
                let reaped = crate::process::job_control::unregister_then(pid, || reap_now(pid));
                self.exit = match &reaped {
                    Ok(status) => Exit::Reaped(*status),
                    Err(_) => Exit::Lost,
                };
                reaped
            }
        }
    }

    /// Not reaped yet: its pid and group are still its own.
    fn unreaped(&self) -> bool {
        matches!(self.exit, Exit::Watched(_) | Exit::Exited)
    }

    /// Signal its whole tree, if it is not reaped yet (a reaped pid is
    /// never signalled: it may be another's by now). Whether it was. The
    /// tree is a /proc scan, so it runs on a blocking thread, off the
    /// runtime's workers; the caller holds `self`, so it cannot be reaped
    /// meanwhile.
    pub(crate) async fn signal_tree(&self, sig: nix::sys::signal::Signal) -> bool {
        if !self.unreaped() {
            return false;
        }
        let pid = self.pid;
        let scan = tokio::task::spawn_blocking(move || crate::process::tree::signal_tree(pid, sig));
        if scan.await.is_err() {
            // The blocking pool is gone (runtime shutting down): here, then.
            crate::process::tree::signal_tree(pid, sig);
        }
        true
    }

    /// End it without waiting (its owner is gone: a dropped future), on a
    /// thread of its own: its stdin closes, which for a guardian is its
    /// lifeline (it then takes agy's tree down, orphans included: they are
    /// its children, as a subreaper, and exits); if it has not exited
    /// within `grace`, its tree is SIGKILLed (walked while its root still
    /// holds it together); then it is reaped. Give a guardian a moment:
    /// killed at once, its orphans would go to init, out of reach. A
    /// program without a guardian gets no grace.
    pub(crate) fn end_in_background(&mut self, grace: std::time::Duration) {
        self.stdin = None;
        self.stdout = None;
        self.stderr = None;
        if !self.unreaped() {
            return;
        }
        let pid = self.pid;
        self.exit = Exit::Released;
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + grace;
            let exited = loop {
                // An error: not ours to wait for (reaped elsewhere).
                let exited = crate::process::tree::exited_unreaped(pid, false).unwrap_or(true);
                if exited || std::time::Instant::now() >= deadline {
                    break exited;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            };
            crate::process::job_control::unregister_then(pid, || {
                if !exited {
                    crate::process::tree::signal_tree(pid, nix::sys::signal::Signal::SIGKILL);
                }
                reap(pid)
            });
        });
    }

    /// Signal the process group it leads, if it is not reaped yet.
    pub(crate) fn signal_group(&self, sig: nix::sys::signal::Signal) {
        if self.unreaped() {
            crate::process::tree::signal_group(self.pid, sig);
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // Dropped before it was reaped (a dropped turn, a panic): its tree
        // goes with it, without waiting here (maybe a runtime worker). The
        // lifeline closes first, so a guardian takes the tree down itself,
        // orphans included; what is left after a moment is walked and killed
        // while it is still whole. Killing the guardian's group first would
        // hand agy's children in sessions of their own to init, out of reach.
        self.end_in_background(DROP_GRACE);
    }
}

/// How long a dropped guardian has to end its tree and exit (it takes
/// milliseconds) before the tree is walked and SIGKILLed from here.
const DROP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// agy (or a short agy program) as our own child, without a guardian (a
/// library caller that names none): in a process group of its own, as the
/// guardian would have started it, stdout and stderr piped, stdin piped
/// when the launch asks for it (else `/dev/null`). Needs a tokio runtime
/// context.
pub(crate) fn spawn_unguarded(launch: &Launch) -> io::Result<Spawned> {
    let mut cmd = launch.command();
    cmd.stdin(if launch.stdin_piped {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    die_with_parent(&mut cmd);
    let child = crate::process::tree::retry_while_busy(|| cmd.spawn())?;
    // Dropped on error, `child` would be neither killed nor reaped: this
    // cannot fail inside a runtime, and if it did the process dies with
    // its pipes closed.
    Spawned::from_std(child)
}

/// Without a guardian, the program at least dies with the thread that
/// spawned it (Linux); its own children are then the drop guard's and the
/// tree kill's.
fn die_with_parent(cmd: &mut std::process::Command) {
    crate::process::signals::die_with_parent(cmd, false);
}

/// Reap `pid`, which has exited (no waiting).
fn reap_now(pid: ChildPid) -> io::Result<ExitStatus> {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use std::os::unix::process::ExitStatusExt;
    // ExitStatus is built from the raw wait status (`WEXITSTATUS << 8`, or
    // the signal with the core-dump bit 0x80), the encoding std reads back.
    match waitpid(pid.nix(), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Ok(ExitStatus::from_raw((code & 0xff) << 8)),
        Ok(WaitStatus::Signaled(_, signal, core)) => Ok(ExitStatus::from_raw(
            signal as i32 | if core { 0x80 } else { 0 },
        )),
        _ => Err(lost(pid)),
    }
}

fn lost(pid: ChildPid) -> io::Error {
    io::Error::other(format!("process {pid} exited but its status is gone"))
}

/// Block until `pid` (our child) exits, and reap it.
fn reap(pid: ChildPid) {
    while nix::sys::wait::waitpid(pid.nix(), None) == Err(nix::errno::Errno::EINTR) {}
}

/// The guardian a runner starts agy under: its binary, and maybe a standby
/// to take first. Clones share the standby; the first launch takes it.
#[derive(Debug, Clone)]
pub struct Guardian {
    bin: PathBuf,
    standby: Arc<Mutex<Option<Standby>>>,
}

impl Guardian {
    /// `bin`: the agy-bridge binary, or any binary that calls
    /// [`crate::process::guard::main_if_guard`] first thing in `main`.
    pub fn new(bin: impl Into<PathBuf>) -> Guardian {
        Guardian {
            bin: bin.into(),
            standby: Arc::new(Mutex::new(None)),
        }
    }

    /// With a guardian already started, for the next launch to take.
    pub fn with_standby(self, standby: Standby) -> Guardian {
        if let Ok(mut slot) = self.standby.lock() {
            *slot = Some(standby);
        }
        self
    }

    pub(crate) fn bin(&self) -> &Path {
        &self.bin
    }

    /// Start `launch` under a guardian: the standby if there is one and it
    /// takes the command, else a fresh one. Needs a tokio runtime context.
    pub(crate) async fn launch(&self, launch: &Launch) -> io::Result<Spawned> {
        let standby = self.standby.lock().ok().and_then(|mut slot| slot.take());
        if let Some(standby) = standby {
            if let Ok(spawned) = standby.launch(launch).await {
                return Ok(spawned);
            }
        }
        Standby::spawn(&self.bin)?.launch(launch).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;
    use std::io::BufRead;

    fn state_of(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .next()?
            .chars()
            .next()
    }

    #[test]
    fn pids_0_and_1_are_never_a_childs() {
        assert_eq!(ChildPid::new(0), None);
        assert_eq!(ChildPid::new(1), None);
        assert_eq!(ChildPid::new(u32::MAX), None);
        assert_eq!(ChildPid::new(2).map(ChildPid::get), Some(2));
    }

    /// Once reaped, a child is never signalled again: its pid may be
    /// another's by now.
    #[tokio::test]
    async fn a_reaped_child_is_never_signalled() {
        let child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let mut spawned = Spawned::from_std(child).expect("spawned");
        assert!(spawned.wait().await.expect("status").success());
        assert!(!spawned.signal_tree(Signal::SIGKILL).await);
        // Waiting again gives the same status, without another reap.
        assert!(spawned.wait().await.expect("again").success());
    }

    /// A child that has exited stays a zombie until `wait`: its group, with
    /// what it left running there, is signalled while it cannot be a
    /// stranger's, and only then is the child reaped.
    #[tokio::test]
    async fn an_exited_childs_group_is_ended_before_it_is_reaped() {
        let child = std::process::Command::new("sh")
            .args(["-c", "sleep 300 & echo $!"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        let mut spawned = Spawned::from_std(child).expect("spawned");
        let stdout = spawned.stdout.take().expect("stdout").into_owned_fd();
        let mut line = String::new();
        std::io::BufReader::new(std::fs::File::from(stdout.expect("fd")))
            .read_line(&mut line)
            .expect("read");
        let left: u32 = line.trim().parse().expect("pid");
        spawned.exited().await;
        let pid = spawned.id().get();
        assert_eq!(
            state_of(pid),
            Some('Z'),
            "reaped before its group was ended"
        );
        spawned.signal_group(Signal::SIGKILL);
        assert!(spawned.wait().await.is_ok());
        let gone = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !matches!(state_of(left), Some(s) if s != 'Z')
        });
        assert!(gone, "what the child left in its group still runs");
        assert_eq!(state_of(pid), None, "the child was not reaped");
    }
}
