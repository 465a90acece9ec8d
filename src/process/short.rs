//! The short agy programs the bridge asks beside its turns (`agy --version`
//! and `--help`, `agy -p /hooks`, `agy -p /usage`, `agy models`, the
//! conformance suite's and `record`'s commands), run the way the turn's agy
//! is: under the guardian, so nothing of theirs outlives the bridge however
//! it dies, and ended at once when their caller stops waiting.
//!
//! They used to run as the bridge's own children, waited for by a blocking
//! call: a SIGKILLed bridge left the children agy puts in process groups of
//! their own running (`PR_SET_PDEATHSIG` reaches agy alone), and Ctrl-C had
//! to wait out the program's time limit. Here each is a [`Launch`] handed
//! to a guardian ([`crate::process::standby`]); its stdout and stderr are read,
//! capped, on the runtime; and it ends at its exit, at its time limit, when
//! its caller's cancellation token fires (awaited: the tree is gone and
//! reaped when [`run`] returns), or when its caller drops the future
//! (without waiting: the guardian's lifeline closes, which takes the whole
//! tree down, and a thread reaps it).
//!
//! The guardian is this process's own binary when it can be one (it called
//! [`crate::process::guard::main_if_guard`], as `agy-bridge` does). A binary
//! that cannot (a test of the library) runs the program as its own child,
//! in a process group of its own with `PR_SET_PDEATHSIG`, with the same time
//! limit and cancellation.

use crate::process::launch::Launch;
use crate::process::standby::{spawn_unguarded, Guardian, Spawned};
use crate::process::tree::find_program;
use nix::sys::signal::Signal;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The most of each of stdout and stderr kept; past it the pipe is closed
/// (the program then sees `EPIPE`). agy's listings are a few KiB.
const OUTPUT_CAP: usize = 4 << 20;

/// How long a finished program's pipes may stay open past its time limit:
/// something that left its tree (without a guardian) can hold them forever.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// How long a guardian whose lifeline closed has to end the tree and exit
/// (it takes milliseconds) before its tree is SIGKILLed from here.
const LIFELINE_GRACE: Duration = Duration::from_millis(500);

/// One short program: what to start (stdin is `/dev/null`) and its time
/// limit.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    launch: Launch,
    timeout: Duration,
}

impl Program {
    /// `bin args`, for at most `timeout`.
    pub(crate) fn new<A: AsRef<OsStr>>(
        bin: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = A>,
        timeout: Duration,
    ) -> Program {
        Program {
            launch: Launch {
                program: bin.as_ref().to_os_string(),
                args: args
                    .into_iter()
                    .map(|a| a.as_ref().to_os_string())
                    .collect(),
                ..Launch::default()
            },
            timeout,
        }
    }

    /// With these added to its environment (as the turn's agy gets them).
    pub(crate) fn env(mut self, env: &[(String, String)]) -> Program {
        self.launch
            .env
            .extend(env.iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Run in `dir`.
    pub(crate) fn cwd(mut self, dir: &Path) -> Program {
        self.launch.cwd = Some(dir.to_path_buf());
        self
    }

    fn timed_out(&self) -> NoOutput {
        NoOutput::TimedOut {
            secs: self.timeout.as_secs_f64().ceil() as u64,
        }
    }
}

/// Why a short program gave no output to judge. Its callers word it for
/// the user: not installed, not startable, no answer in time (whole
/// seconds, rounded up), or stopped by its caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoOutput {
    #[error("it is not installed")]
    NotInstalled,
    #[error("{0}")]
    SpawnFailed(String),
    #[error("no answer within {secs} s")]
    TimedOut { secs: u64 },
    #[error("it was stopped before it answered")]
    Canceled,
}

/// Run `program` to its end and return its status and output (at most
/// `OUTPUT_CAP` (4 MiB) of each stream). On its time limit, or when `cancel`
/// fires, its whole tree is ended and reaped before this returns (within
/// `LIFELINE_GRACE` (0.5 s) at worst); a dropped future ends it without waiting.
/// Once it exits, what is left of its process group goes too, so nothing
/// keeps its pipes open.
pub(crate) async fn run(program: &Program, cancel: &CancellationToken) -> Result<Output, NoOutput> {
    // Stopped already: nothing is started for nobody.
    if cancel.is_cancelled() {
        return Err(NoOutput::Canceled);
    }
    let deadline = Instant::now() + program.timeout;
    let mut running = start(&program.launch).await?;
    let mut stdout = tokio::spawn(read_capped(running.spawned.stdout.take()));
    let mut stderr = tokio::spawn(read_capped(running.spawned.stderr.take()));
    let stopped = tokio::select! {
        () = running.spawned.exited() => None,
        () = tokio::time::sleep_until(deadline) => Some(program.timed_out()),
        () = cancel.cancelled() => Some(NoOutput::Canceled),
    };
    if let Some(why) = stopped {
        running.end().await;
        return Err(why);
    }
    // A zombie still holds its group: what is left there cannot be a
    // stranger's yet.
    running.spawned.signal_group(Signal::SIGKILL);
    let pipes_until = deadline.max(Instant::now() + PIPE_GRACE);
    let pipes = tokio::select! {
        pipes = async { ((&mut stdout).await, (&mut stderr).await) } => Ok(pipes),
        () = tokio::time::sleep_until(pipes_until) => Err(program.timed_out()),
        () = cancel.cancelled() => Err(NoOutput::Canceled),
    };
    stdout.abort();
    stderr.abort();
    let status = running.spawned.wait().await;
    let (out, err) = pipes?;
    let status = status.map_err(|e| NoOutput::SpawnFailed(e.to_string()))?;
    let output = Output {
        status,
        stdout: read_result(out)?,
        stderr: read_result(err)?,
    };
    match running
        .guarded
        .then(|| guardian_failure(status, &output.stderr))
    {
        Some(Some(failure)) => Err(failure),
        _ => Ok(output),
    }
}

/// [`run`] for a caller that is not on the runtime (a plain thread, or a
/// blocking one of tokio's, never a runtime worker): it waits on a thread
/// of its own running a small runtime, so it can be called from inside a
/// runtime's blocking thread as well as outside any runtime.
pub(crate) fn run_blocking(
    program: &Program,
    cancel: &CancellationToken,
) -> Result<Output, NoOutput> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("agy-bridge-short".into())
            .spawn_scoped(scope, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| NoOutput::SpawnFailed(format!("no runtime to wait on: {e}")))?;
                runtime.block_on(run(program, cancel))
            })
            .map_err(|e| NoOutput::SpawnFailed(format!("no thread to wait on: {e}")))?;
        worker
            .join()
            .unwrap_or_else(|_| Err(NoOutput::SpawnFailed("its waiting thread failed".into())))
    })
}

/// A started program until it is reaped. Dropped before that (its caller's
/// future dropped), it is ended without waiting
/// ([`Spawned::end_in_background`]): a guardian by its lifeline, a program
/// without one by SIGKILL to its tree, walked before anything in it dies
/// (killed first, its root's children in other sessions would be orphans
/// of init's, out of the walk's reach).
struct Running {
    spawned: Spawned,
    /// `spawned` is a guardian, with the program below it.
    guarded: bool,
}

impl Running {
    /// End the whole tree and reap it. A guardian is told by its lifeline
    /// (it then kills the tree, orphans included, and exits); only one
    /// that has not exited within [`LIFELINE_GRACE`] is SIGKILLed from here,
    /// tree and all, since its orphans would otherwise go to init.
    async fn end(&mut self) {
        if self.guarded {
            self.spawned.stdin = None;
            let exited = tokio::time::timeout(LIFELINE_GRACE, self.spawned.exited()).await;
            if exited.is_err() {
                self.spawned.signal_tree(Signal::SIGKILL).await;
            }
        } else {
            self.spawned.signal_tree(Signal::SIGKILL).await;
        }
        let _ = self.spawned.wait().await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let grace = if self.guarded {
            LIFELINE_GRACE
        } else {
            Duration::ZERO
        };
        self.spawned.end_in_background(grace);
    }
}

/// Start `launch` under this binary's guardian, else (no guardian, or one
/// that did not start: its binary replaced meanwhile) as our own child.
async fn start(launch: &Launch) -> Result<Running, NoOutput> {
    if !installed(launch) {
        return Err(NoOutput::NotInstalled);
    }
    if let Some(guardian) = guardian() {
        if let Ok(spawned) = guardian.launch(launch).await {
            return Ok(Running {
                spawned,
                guarded: true,
            });
        }
    }
    match spawn_unguarded(launch) {
        Ok(spawned) => Ok(Running {
            spawned,
            guarded: false,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(NoOutput::NotInstalled),
        Err(e) => Err(NoOutput::SpawnFailed(e.to_string())),
    }
}

/// Whether the program can be found as exec would find it (a relative path
/// from the directory it runs in). Under a guardian a missing program is
/// only the guardian's exit code, so it is looked for first.
fn installed(launch: &Launch) -> bool {
    let bin = Path::new(&launch.program);
    let bin = match &launch.cwd {
        Some(dir) if bin.is_relative() && bin.components().count() > 1 => dir.join(bin),
        _ => bin.to_path_buf(),
    };
    find_program(&bin).is_some()
}

/// This binary as the guardian, when it can be one.
fn guardian() -> Option<Guardian> {
    static BIN: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        crate::process::guard::this_binary_guards()
            .then(|| std::env::current_exe().ok())
            .flatten()
    })
    .clone()
    .map(Guardian::new)
}

/// The guardian's own words when it could not start the program (its exit
/// 127 or 126 and its [`crate::process::guard::CANNOT_START`] line), as the
/// error a direct spawn would have given.
fn guardian_failure(status: ExitStatus, stderr: &[u8]) -> Option<NoOutput> {
    let code = status.code().filter(|c| *c == 126 || *c == 127)?;
    let text = String::from_utf8_lossy(stderr);
    let why = text
        .lines()
        .find_map(|l| l.strip_prefix(crate::process::guard::CANNOT_START))?;
    Some(match code {
        127 => NoOutput::NotInstalled,
        _ => NoOutput::SpawnFailed(why.split_once(": ").map_or(why, |(_, e)| e).to_string()),
    })
}

/// Read a pipe to its end, at most [`OUTPUT_CAP`] bytes.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    if let Some(pipe) = pipe {
        pipe.take(OUTPUT_CAP as u64).read_to_end(&mut buf).await?;
    }
    Ok(buf)
}

fn read_result(
    read: Result<std::io::Result<Vec<u8>>, tokio::task::JoinError>,
) -> Result<Vec<u8>, NoOutput> {
    match read {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(NoOutput::SpawnFailed(format!(
            "its output could not be read: {e}"
        ))),
        Err(e) => Err(NoOutput::SpawnFailed(format!(
            "its output could not be read: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Program {
        Program::new("sh", ["-c", script], timeout)
    }

    /// Not running any more (gone, or a zombie waiting for its parent).
    fn gone(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    /// Wait until `path` holds a pid (the program wrote it).
    async fn pid_in(path: &Path) -> u32 {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let read = std::fs::read_to_string(path).ok();
            if let Some(pid) = read.and_then(|s| s.trim().parse().ok()) {
                return pid;
            }
            assert!(std::time::Instant::now() < until, "no pid in {path:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A program that puts a child in a session of its own (out of its
    /// process group), writes the child's pid to `pidfile`, and hangs.
    fn forks_and_hangs(pidfile: &Path) -> Program {
        sh(
            &format!(
                "setsid sleep 300 & echo $! > {}; sleep 300",
                pidfile.display()
            ),
            Duration::from_secs(60),
        )
    }

    async fn assert_gone(pid: u32) {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !gone(pid) {
            assert!(std::time::Instant::now() < until, "{pid} survived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn output_status_and_stdin_closed() {
        let program = sh(
            "cat; echo out; echo err >&2; exit 3",
            Duration::from_secs(30),
        );
        let out = run(&program, &CancellationToken::new())
            .await
            .expect("runs");
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[tokio::test]
    async fn environment_and_directory_are_the_programs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = sh("echo \"$SHORT_TEST\"; pwd", Duration::from_secs(30))
            .env(&[("SHORT_TEST".into(), "set".into())])
            .cwd(dir.path());
        let out = run(&program, &CancellationToken::new())
            .await
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let canonical = dir.path().canonicalize().expect("canonical");
        assert_eq!(text, format!("set\n{}\n", canonical.display()));
    }

    #[test]
    fn a_missing_program_is_not_installed() {
        let program = Program::new("/nonexistent/agy", ["--version"], Duration::from_secs(1));
        assert_eq!(
            run_blocking(&program, &CancellationToken::new()).unwrap_err(),
            NoOutput::NotInstalled
        );
    }

    #[test]
    fn what_is_kept_of_its_output_is_capped() {
        let program = sh(
            &format!("head -c {} /dev/zero", OUTPUT_CAP + 4096),
            Duration::from_secs(30),
        );
        let out = run_blocking(&program, &CancellationToken::new()).expect("runs");
        assert_eq!(out.stdout.len(), OUTPUT_CAP);
    }

    #[tokio::test]
    async fn its_time_limit_ends_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("child");
        let mut program = forks_and_hangs(&pidfile);
        program.timeout = Duration::from_millis(500);
        let err = run(&program, &CancellationToken::new()).await.unwrap_err();
        assert_eq!(err, NoOutput::TimedOut { secs: 1 });
        assert_gone(pid_in(&pidfile).await).await;
    }

    /// A cancelled call returns at once, the tree ended (without a
    /// guardian: its group and the sessions below it).
    #[tokio::test]
    async fn a_cancelled_call_returns_at_once_and_ends_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("child");
        let program = forks_and_hangs(&pidfile);
        let cancel = CancellationToken::new();
        let call = run(&program, &cancel);
        let cancelling = async {
            let pid = pid_in(&pidfile).await;
            cancel.cancel();
            (pid, std::time::Instant::now())
        };
        let (result, (pid, asked)) = tokio::join!(call, cancelling);
        assert_eq!(result.unwrap_err(), NoOutput::Canceled);
        assert!(asked.elapsed() < Duration::from_secs(2), "{asked:?}");
        assert_gone(pid).await;
    }

    #[tokio::test]
    async fn a_dropped_call_ends_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("child");
        let program = forks_and_hangs(&pidfile);
        let cancel = CancellationToken::new();
        let pid = tokio::select! {
            r = run(&program, &cancel) => panic!("it ended: {r:?}"),
            pid = pid_in(&pidfile) => pid,
        };
        assert_gone(pid).await;
    }

    #[test]
    fn the_guardians_own_failure_reads_as_a_spawn_error() {
        use std::os::unix::process::ExitStatusExt;
        let missing = format!(
            "{}/x/agy: No such file or directory (os error 2)\n",
            crate::process::guard::CANNOT_START
        );
        assert_eq!(
            guardian_failure(ExitStatus::from_raw(127 << 8), missing.as_bytes()),
            Some(NoOutput::NotInstalled)
        );
        let denied = format!(
            "{}/x/agy: Permission denied (os error 13)\n",
            crate::process::guard::CANNOT_START
        );
        assert_eq!(
            guardian_failure(ExitStatus::from_raw(126 << 8), denied.as_bytes()),
            Some(NoOutput::SpawnFailed(
                "Permission denied (os error 13)".into()
            ))
        );
        // agy's own 127 (a shell's "not found" inside it) is agy's answer.
        assert_eq!(
            guardian_failure(ExitStatus::from_raw(127 << 8), b"sh: foo: not found\n"),
            None
        );
    }
}
