//! Processes the bridge starts and must be able to stop: signalling a
//! process tree (a root, its descendants, and the process groups they made;
//! agy's `run_command` children make their own), and running a short-lived
//! program that is not agy (`git`) with a timeout ([`run_with_timeout`]).
//!
//! One helper for the runner, which takes agy's tree down on abort, timeout
//! and exit, and for the guardian ([`crate::process::guard`]), which does it when the
//! bridge dies; one for the short programs that are not agy's, so each is
//! killed, tree and all, when it overstays. agy's own short programs
//! (`--version`, `models`, `-p /usage` ...) run under the guardian instead
//! ([`crate::process::short`]).

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgid, getpgrp, Pid};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The file the OS would run for `bin`: a path (anything with a slash) as it
/// is, if it is a file; a bare name as exec finds it, the first executable
/// file of that name in PATH's directories (as exec reads PATH:
/// [`crate::settings::exec_search_path`]).
pub(crate) fn find_program(bin: &Path) -> Option<PathBuf> {
    if bin.components().count() > 1 || bin.is_absolute() {
        return bin.is_file().then(|| bin.to_path_buf());
    }
    let path = crate::settings::exec_search_path()?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(bin))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Start a program with `spawn`, trying again for a moment while its file
/// is busy (`ETXTBSY`): agy being replaced as it starts (`agy update`), or
/// its file still open for writing in a process between fork and exec.
/// Sleeps only on that error, at most 0.2 s in all.
pub(crate) fn retry_while_busy<T>(
    mut spawn: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut tries = 0;
    loop {
        match spawn() {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The pid of a process this bridge started: never 0 (to `kill`, our own
/// group) nor 1 (init), which no child can have, so a signal meant for a
/// child's tree cannot reach the bridge's own group or every process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ChildPid(u32);

impl ChildPid {
    /// `None` for 0 and 1, and for what does not fit a `pid_t`.
    pub(crate) fn new(raw: u32) -> Option<ChildPid> {
        (raw > 1 && i32::try_from(raw).is_ok()).then_some(ChildPid(raw))
    }

    pub(crate) fn get(self) -> u32 {
        self.0
    }

    pub(crate) fn nix(self) -> Pid {
        // In range: checked by `new`.
        Pid::from_raw(self.0 as i32)
    }
}

impl std::fmt::Display for ChildPid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Signal `root`'s whole tree: its process group, the groups of descendants
/// that made their own, and each process. The caller has not reaped `root`
/// (else its pid, and group, may be another's by now).
pub(crate) fn signal_tree(root: ChildPid, sig: Signal) {
    let mut pids = process_tree(root.get());
    if !pids.contains(&root.get()) {
        pids.push(root.get());
    }
    signal_all(&pids, Some(root.nix()), sig);
}

/// Signal the process group `leader` leads (not our own). The caller has not
/// reaped `leader`: a zombie still holds its pid, so the group cannot be a
/// stranger's.
pub(crate) fn signal_group(leader: ChildPid, sig: Signal) {
    if leader.nix() != getpgrp() {
        let _ = killpg(leader.nix(), sig);
    }
}

/// Signal everything below `root` (not `root` itself, nor its group);
/// returns how many processes there were.
pub(crate) fn signal_tree_below(root: u32, sig: Signal) -> usize {
    if root <= 1 {
        return 0;
    }
    let pids = descendants(root);
    signal_all(&pids, None, sig);
    pids.len()
}

/// Signal each process below `root`, one by one, never a process group
/// (`root`'s own group holds `root`, which must not get `sig`); returns how
/// many there were.
pub(crate) fn signal_each_below(root: ChildPid, sig: Signal) -> usize {
    let pids = descendants(root.get());
    signal_each(&pids, sig);
    pids.len()
}

/// Every process below `root` (not `root` itself).
fn descendants(root: u32) -> Vec<u32> {
    process_tree(root)
        .into_iter()
        .filter(|p| *p != root)
        .collect()
}

/// Signal each of `pids`, never this process.
fn signal_each(pids: &[u32], sig: Signal) {
    let me = std::process::id();
    for pid in pids.iter().filter(|p| **p != me) {
        let _ = kill(Pid::from_raw(*pid as i32), sig);
    }
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
    signal_each(pids, sig);
}

/// Why [`run_with_timeout`] has no output to give.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The program could not be started (`NotFound`: it is not installed).
    #[error("{0}")]
    Spawn(#[source] std::io::Error),
    /// It had not finished (or still held its output open) when the time
    /// was up; its tree has been killed.
    #[error("no answer within {} s", .0.as_secs())]
    TimedOut(Duration),
    /// Waiting for it failed; its tree has been killed.
    #[error("cannot wait for it: {0}")]
    Wait(#[source] std::io::Error),
}

/// How long a finished program's pipes may stay open when its time is
/// (nearly) up: a descendant that left its group can hold them forever.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Run `cmd` with stdin closed, in a process group of its own, for at most
/// `timeout`, and return its status and output. On timeout the whole tree
/// (its group, descendants and the groups they made) is killed. Once it
/// exits, whatever is left of its group is killed too, so nothing keeps
/// its pipes open.
///
/// Blocking: for a plain thread or one of tokio's blocking threads. The
/// bridge itself always caps the output; the unit tests use this form.
#[cfg(test)]
pub(crate) fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, RunError> {
    run_with_timeout_capped(cmd, timeout, u64::MAX)
}

/// [`run_with_timeout`] keeping at most `cap` bytes of each of stdout and
/// stderr; past that the pipe is closed (the program then sees `EPIPE`).
pub(crate) fn run_with_timeout_capped(
    cmd: &mut Command,
    timeout: Duration,
    cap: u64,
) -> Result<Output, RunError> {
    let deadline = Instant::now() + timeout;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // It dies with the thread waiting for it, so a bridge killed outright
    // (SIGKILL runs no code) does not leave it running.
    crate::process::signals::die_with_parent(cmd, false);
    let mut child = retry_while_busy(|| cmd.spawn()).map_err(RunError::Spawn)?;
    let pipes = read_pipe(child.stdout.take(), cap).and_then(|out| {
        let err = read_pipe(child.stderr.take(), cap)?;
        Ok((out, err))
    });
    let (out, err) = match pipes {
        Ok(pipes) => pipes,
        Err(e) => {
            kill_tree_and_reap(&mut child);
            return Err(RunError::Spawn(e));
        }
    };
    let status = match wait_until(&mut child, deadline) {
        Ok(Some(status)) => status,
        Ok(None) => {
            kill_tree_and_reap(&mut child);
            return Err(RunError::TimedOut(timeout));
        }
        Err(e) => {
            kill_tree_and_reap(&mut child);
            return Err(RunError::Wait(e));
        }
    };
    let grace = deadline
        .saturating_duration_since(Instant::now())
        .max(PIPE_GRACE);
    let pipe_deadline = Instant::now() + grace;
    let collect = |rx: mpsc::Receiver<std::io::Result<Vec<u8>>>| {
        let left = pipe_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => Err(RunError::Wait(e)),
            Err(_) => Err(RunError::TimedOut(timeout)),
        }
    };
    Ok(Output {
        status,
        stdout: collect(out)?,
        stderr: collect(err)?,
    })
}

/// Whether our child `pid` has exited, leaving it unreaped: a zombie keeps
/// its pid and its process group, so both can still be signalled safely.
/// `block`: wait until it has.
#[cfg(not(target_vendor = "apple"))]
pub(crate) fn exited_unreaped(pid: ChildPid, block: bool) -> std::io::Result<bool> {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    let mut flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
    if !block {
        flags |= WaitPidFlag::WNOHANG;
    }
    loop {
        match waitid(Id::Pid(pid.nix()), flags) {
            // With WNOHANG, a child still running is `StillAlive`, no pid.
            Ok(status) => return Ok(status.pid().is_some()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// macOS: nix has no `waitid` there, so this is the one raw call.
#[cfg(target_vendor = "apple")]
pub(crate) fn exited_unreaped(pid: ChildPid, block: bool) -> std::io::Result<bool> {
    use nix::libc;
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: `siginfo_t` is a plain C struct, valid all zeroes, and
        // waitid writes only into `info`, which outlives the call.
        let (r, info) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(libc::P_PID, pid.get() as libc::id_t, &mut info, flags);
            (r, info)
        };
        if r == 0 {
            // With WNOHANG, a child still running leaves `si_pid` zero.
            return Ok(info.si_pid != 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Poll `child` until it exits (`Some`, reaped) or `deadline` passes
/// (`None`). Once it has exited, and before it is reaped, what is left of
/// its process group is killed: the group cannot be a stranger's while its
/// leader is an unreaped zombie.
fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    let pid = ChildPid::new(child.id());
    let mut pause = Duration::from_millis(1);
    loop {
        let exited = match pid {
            Some(pid) => exited_unreaped(pid, false)?,
            None => true,
        };
        if exited {
            if let Some(pid) = pid {
                signal_group(pid, Signal::SIGKILL);
            }
            return child.wait().map(Some);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// Kill a child that has not been reaped yet, with its whole tree (walked
/// while the child still holds it together), then reap it.
fn kill_tree_and_reap(child: &mut Child) {
    if let Some(pid) = ChildPid::new(child.id()) {
        signal_tree(pid, Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Read a pipe to its end (at most `cap` bytes) on a thread of its own, so
/// a full pipe never stalls the program while it is being waited for.
fn read_pipe<R: Read + Send + 'static>(
    pipe: Option<R>,
    cap: u64,
) -> std::io::Result<mpsc::Receiver<std::io::Result<Vec<u8>>>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("agy-bridge-pipe".into())
        .spawn(move || {
            let mut buf = Vec::new();
            let read = match pipe {
                Some(p) => p.take(cap).read_to_end(&mut buf).map(|_| buf),
                None => Ok(buf),
            };
            let _ = tx.send(read);
        })?;
    Ok(rx)
}

// The process-tree walker: each process's parent links, from `/proc` on
// Linux and `ps` elsewhere.

/// The fields of `/proc/<pid>/stat` after the command name: the command may
/// contain spaces and parentheses, so split after the *last* `)`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn proc_stat_tail(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    stat.get(close + 1..).map(|s| s.trim_start().to_owned())
}

/// `(state, ppid)` of a process, from `/proc/<pid>/stat`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn proc_state_ppid(pid: u32) -> Option<(char, u32)> {
    let tail = proc_stat_tail(pid)?;
    let mut fields = tail.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` is a live process (not gone, not a zombie) whose open files
/// can be inspected.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn is_alive(pid: u32) -> bool {
    matches!(proc_state_ppid(pid), Some((state, _)) if !matches!(state, 'Z' | 'X' | 'x'))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn is_alive(_pid: u32) -> bool {
    false
}

/// Each process's children, from the parent links in `/proc/*/stat`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn children_by_parent() -> BTreeMap<u32, Vec<u32>> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((_, ppid)) = proc_state_ppid(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    children
}

/// Each process's children, from POSIX `ps -A -o pid=,ppid=` where there is
/// no `/proc` (macOS, the BSDs); none when `ps` cannot run.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn children_by_parent() -> BTreeMap<u32, Vec<u32>> {
    std::process::Command::new("ps")
        .args(["-A", "-o", "pid=,ppid="])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|out| parse_ps_links(&String::from_utf8_lossy(&out.stdout)))
        .unwrap_or_default()
}

/// `ps -o pid=,ppid=` output as each parent's children; a line that is not
/// two numbers is skipped.
#[cfg(any(test, not(any(target_os = "linux", target_os = "android"))))]
pub(crate) fn parse_ps_links(ps_output: &str) -> BTreeMap<u32, Vec<u32>> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for line in ps_output.lines() {
        let mut fields = line.split_ascii_whitespace().map(str::parse::<u32>);
        if let (Some(Ok(pid)), Some(Ok(ppid)), None) = (fields.next(), fields.next(), fields.next())
        {
            children.entry(ppid).or_default().push(pid);
        }
    }
    children
}

/// `root_pid` followed by all its descendants, breadth first: parent links
/// from `/proc/*/stat`, or from `ps` where there is no `/proc`. Where neither
/// can be read, only `root_pid`. A process reparented away (a daemonised
/// grandchild) is not found; neither is one that has already exited.
pub(crate) fn process_tree(root_pid: u32) -> Vec<u32> {
    let children = children_by_parent();
    let mut seen = BTreeSet::from([root_pid]);
    let mut tree = vec![root_pid];
    let mut queue = VecDeque::from([root_pid]);
    while let Some(pid) = queue.pop_front() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(child) {
                tree.push(child);
                queue.push_back(child);
            }
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    fn alive(pid: i32) -> bool {
        // A zombie still answers signal 0; /proc says what it is.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[test]
    fn output_status_and_stdin_closed() {
        let out = run_with_timeout(
            &mut sh("cat; echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
        )
        .expect("runs");
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = run_with_timeout(
            &mut Command::new("/nonexistent/agy"),
            Duration::from_secs(1),
        )
        .expect_err("no such program");
        assert!(
            matches!(&err, RunError::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound),
            "{err:?}"
        );
    }

    #[test]
    fn the_cap_bounds_what_is_kept() {
        let out = run_with_timeout_capped(&mut sh("printf 0123456789"), Duration::from_secs(10), 4)
            .expect("runs");
        assert_eq!(out.stdout, b"0123");
    }

    #[test]
    fn a_timeout_kills_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("grandchild");
        let script = format!(
            "setsid sleep 30 & echo $! > {}; sleep 30",
            pidfile.display()
        );
        let err =
            run_with_timeout(&mut sh(&script), Duration::from_millis(500)).expect_err("times out");
        assert!(matches!(err, RunError::TimedOut(_)), "{err:?}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid");
        // Killed before run_with_timeout returned; a zombie waits for init.
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(Instant::now() < deadline, "grandchild {pid} survived");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
