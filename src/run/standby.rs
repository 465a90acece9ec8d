//! Guardians started ahead of their turn, and the process a launch gives
//! the runner.
//!
//! A guardian ([`crate::guard`]) waits on its stdin for what to run
//! ([`Launch`]), so it can be started before the turn knows agy's command
//! line: `stream` starts one first thing, and the time it takes to start
//! passes while pi's request is read, the session lock taken and the turn
//! prepared, instead of between "ready" and agy's start (it was the largest
//! part of the bridge's time to first token). After the command, the same
//! pipe is the guardian's lifeline: nothing more is written, and its end
//! (the bridge's death included) tells the guardian to take agy's tree down.
//!
//! Two ways to have one ([`Standby`]): start the binary again
//! ([`Standby::spawn`]: a program image of several megabytes, one to two
//! milliseconds of CPU), or fork this process before it has a second thread
//! ([`Standby::fork`]: about a quarter of a millisecond with its pipes, and
//! nothing then competes for the CPU with the turn it waits for).
//! [`Guardian`] is the runner's handle: a binary to start, and maybe a
//! standby to take first.

use crate::run::launch::Launch;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// A guardian started ahead of its turn, waiting for its [`Launch`]. Its
/// stdout and stderr become agy's (agy inherits them), and it leads a
/// process group of its own, which agy joins. Dropped unused, its stdin
/// closes and it exits without starting anything.
#[derive(Debug)]
pub struct Standby(Started);

#[derive(Debug)]
enum Started {
    /// The binary started again: tokio owns and reaps it.
    Spawned(tokio::process::Child),
    /// A fork of this process: we reap it ourselves.
    Forked(Forked),
}

/// A forked guardian's pid and our ends of its stdio pipes (taken by its
/// launch; still here means it was never used).
#[derive(Debug)]
struct Forked {
    pid: u32,
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
    /// [`crate::guard::main_if_guard`] first) as a guardian. Needs a tokio
    /// runtime context.
    pub fn spawn(bin: &Path) -> io::Result<Standby> {
        let child = tokio::process::Command::new(bin)
            .arg(crate::guard::GUARD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        Ok(Standby(Started::Spawned(child)))
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
            nix::unistd::ForkResult::Parent { child } => Ok(Standby(Started::Forked(Forked {
                pid: child.as_raw() as u32,
                pipes: Some([stdin_w, stdout_r, stderr_r]),
            }))),
        }
    }

    /// Hand over the command; the guardian's stdin stays open as its
    /// lifeline. Needs a tokio runtime context.
    pub async fn launch(self, launch: &Launch) -> io::Result<Spawned> {
        let mut spawned = match self.0 {
            Started::Spawned(child) => Spawned::from_child(child),
            Started::Forked(mut forked) => {
                let Some([stdin, stdout, stderr]) = forked.pipes.take() else {
                    return Err(io::Error::other("the guardian was already used"));
                };
                // Its exit is watched first: if a pipe cannot be taken over,
                // dropping `spawned` closes the rest and collects it.
                let mut spawned = Spawned {
                    pid: forked.pid,
                    stdin: None,
                    stdout: None,
                    stderr: None,
                    exit: Exit::watch(forked.pid),
                };
                spawned.stdin = Some(ChildStdin::from_std(stdin.into())?);
                spawned.stdout = Some(ChildStdout::from_std(stdout.into())?);
                spawned.stderr = Some(ChildStderr::from_std(stderr.into())?);
                spawned
            }
        };
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
    use std::os::fd::AsRawFd;
    // Its own group, as a spawned guardian's `process_group(0)`.
    let _ = nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
    for (fd, target) in ours.iter().zip(0..) {
        // SAFETY: dup2 onto the standard descriptors, which Rust keeps open
        // from startup, so neither descriptor is one a live object owns
        // elsewhere (`ours` closes its originals when dropped).
        if unsafe { nix::libc::dup2(fd.as_raw_fd(), target) } < 0 {
            return 2;
        }
    }
    // The bridge's ends: kept here, the lifeline would never reach EOF.
    drop(theirs);
    drop(ours);
    crate::guard::serve()
}

/// A process a launch started (the guardian, or agy itself without one):
/// its pid, its pipes, and its exit.
#[derive(Debug)]
pub struct Spawned {
    pid: u32,
    /// The guardian's lifeline (none without a guardian).
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    exit: Exit,
}

#[derive(Debug)]
enum Exit {
    /// Spawned through tokio, which reaps it.
    Tokio(tokio::process::Child),
    /// Forked by us: a thread reports its exit without reaping it, so its
    /// pid cannot be reused while the runner may still signal it.
    Watched(tokio::sync::oneshot::Receiver<()>),
    Reaped(ExitStatus),
    /// Reaped by someone else: no status to give.
    Lost,
}

impl Exit {
    fn watch(pid: u32) -> Exit {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            wait_exited(pid);
            let _ = tx.send(());
        });
        Exit::Watched(rx)
    }
}

impl Spawned {
    /// A process tokio spawned (agy, without a guardian).
    pub fn from_child(mut child: tokio::process::Child) -> Spawned {
        Spawned {
            pid: child.id().unwrap_or(0),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            exit: Exit::Tokio(child),
        }
    }

    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Wait for it to exit and reap it (cancel-safe; again after that, the
    /// same status).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.exit {
            Exit::Tokio(child) => child.wait().await,
            Exit::Reaped(status) => Ok(*status),
            Exit::Lost => Err(lost(self.pid)),
            Exit::Watched(exited) => {
                let _ = exited.await;
                let reaped = reap_now(self.pid);
                self.exit = match &reaped {
                    Ok(status) => Exit::Reaped(*status),
                    Err(_) => Exit::Lost,
                };
                reaped
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if matches!(self.exit, Exit::Watched(_)) {
            // The runner kills a tree it has not reaped; collect it then.
            let pid = self.pid;
            std::thread::spawn(move || reap(pid));
        }
    }
}

/// Block until `pid` (our child) has exited, leaving it to be reaped.
fn wait_exited(pid: u32) {
    use nix::libc;
    loop {
        // SAFETY: waitid writes only into `info`, which outlives the call.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Reap `pid`, which has exited (no waiting).
fn reap_now(pid: u32) -> io::Result<ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: waitpid writes only into `status`.
    let r = unsafe { nix::libc::waitpid(pid as i32, &mut status, nix::libc::WNOHANG) };
    if r == pid as i32 {
        Ok(ExitStatus::from_raw(status))
    } else {
        Err(lost(pid))
    }
}

fn lost(pid: u32) -> io::Error {
    io::Error::other(format!("process {pid} exited but its status is gone"))
}

/// Block until `pid` (our child) exits, and reap it.
fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: waitpid writes only into `status`.
    while unsafe { nix::libc::waitpid(pid as i32, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
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
    /// [`crate::guard::main_if_guard`] first thing in `main`.
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

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Start `launch` under a guardian: the standby if there is one and it
    /// takes the command, else a fresh one. Needs a tokio runtime context.
    pub async fn launch(&self, launch: &Launch) -> io::Result<Spawned> {
        let standby = self.standby.lock().ok().and_then(|mut slot| slot.take());
        if let Some(standby) = standby {
            if let Ok(spawned) = standby.launch(launch).await {
                return Ok(spawned);
            }
        }
        Standby::spawn(&self.bin)?.launch(launch).await
    }
}
