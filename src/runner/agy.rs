//! agy's process for one turn: how it is started (under the guardian or as
//! our own child), the readers of its stdout and stderr, and how it is
//! stopped. The turn only reads what these readers send; the process and
//! its pipes are this module's.

use super::*;
use crate::process::launch::Launch;
use crate::process::standby::Spawned;
use crate::process::tree::ChildPid;
use crate::runner::stdin::AgyInput;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const STDERR_TAIL: usize = 16 * 1024;
/// agy's stream-json lines parsed and waiting for the runner. The reader
/// waits when they are full, so agy's stdout pipe fills and agy itself
/// waits on its next write: a runner held up by a slow consumer never
/// queues agy's output (a line can hold a whole step's text).
const LINE_CAPACITY: usize = 16;
/// `conversation not found` warnings waiting (one is all a turn acts on).
const NOT_FOUND_CAPACITY: usize = 4;
const STDOUT_CAP: usize = 4 * 1024 * 1024;

pub(super) struct Tails {
    stderr: Arc<Mutex<VecDeque<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
}

impl Tails {
    pub(super) fn stderr(&self) -> String {
        self.stderr
            .lock()
            .map(|t| {
                let (a, b) = t.as_slices();
                let mut v = a.to_vec();
                v.extend_from_slice(b);
                String::from_utf8_lossy(&v).into_owned()
            })
            .unwrap_or_default()
    }

    pub(super) fn stdout(&self) -> String {
        self.stdout
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    /// Forget what earlier turns of a warm agy printed.
    pub(super) fn clear(&self) {
        if let Ok(mut t) = self.stderr.lock() {
            t.clear();
        }
        if let Ok(mut s) = self.stdout.lock() {
            s.clear();
        }
    }
}

/// agy's process (or the guardian running it) and the readers of its
/// output. Dropped before it is reaped (a dropped turn, a panic), it takes
/// the whole tree down.
pub(super) struct Agy {
    pub(super) child: Spawned,
    /// agy's stdin. Under a guardian it holds the guardian's stdin: closing
    /// that (our death included) kills agy's tree.
    pub(super) input: AgyInput,
    pub(super) pid: ChildPid,
    pub(super) tails: Tails,
    /// agy's stdout lines, parsed, when it prints stream-json.
    pub(super) lines: mpsc::Receiver<Line>,
    pub(super) lines_open: bool,
    /// Ids agy said it does not have (`warning: conversation "ID" not found`).
    pub(super) not_found: mpsc::Receiver<String>,
    pub(super) not_found_open: bool,
    pub(super) readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Agy {
    /// `private`: directories of this turn's own (the prompt file's) that the
    /// guardian removes once agy's tree is gone, even if we were killed.
    pub(super) async fn spawn(
        cfg: &RunConfig,
        req: &TurnRequest,
        surface: Surface,
        private: &[&Path],
    ) -> Result<Agy, Failure> {
        let stream_json = surface.stream_json;
        let bin = cfg.agy_bin.display().to_string();
        if !is_installed(&cfg.agy_bin) {
            return Err(Failure::NotInstalled { bin });
        }
        let launch = Launch {
            program: cfg.agy_bin.clone().into_os_string(),
            args: agy_args(cfg, req, surface)
                .into_iter()
                .map(Into::into)
                .collect(),
            // Real agy ignores AGY_CONVERSATIONS_DIR; fake-agy writes where
            // we look.
            env: std::iter::once(("AGY_CONVERSATIONS_DIR", cfg.conversations_dir.as_os_str()))
                .chain(cfg.env.iter().map(|(k, v)| (k.as_str(), v.as_ref())))
                .map(|(k, v)| (k.into(), v.to_os_string()))
                .collect(),
            cwd: req.cwd.clone(),
            remove_after: private.iter().map(|p| p.to_path_buf()).collect(),
            stdin_piped: surface.stdin_input,
        };
        let spawned = match &cfg.guardian {
            Some(guardian) => guardian
                .launch(&launch)
                .await
                .map_err(|e| Failure::SpawnFailed {
                    bin: bin.clone(),
                    message: format!(
                        "its guardian ({}) did not start: {e}",
                        guardian.bin().display()
                    ),
                }),
            None => crate::process::standby::spawn_unguarded(&launch).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Failure::NotInstalled { bin: bin.clone() }
                } else {
                    Failure::SpawnFailed {
                        bin: bin.clone(),
                        message: e.to_string(),
                    }
                }
            }),
        };
        let mut child = spawned?;
        let pid = child.id();
        let input = match (&cfg.guardian, child.stdin.take()) {
            (Some(_), Some(lifeline)) => AgyInput::through_guardian(lifeline),
            (_, stdin) => AgyInput::direct(stdin),
        };
        let tails = Tails {
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            stdout: Arc::new(Mutex::new(Vec::new())),
        };
        let (tx, lines) = mpsc::channel(LINE_CAPACITY);
        let (not_found_tx, not_found) = mpsc::channel(NOT_FOUND_CAPACITY);
        let mut readers = Vec::new();
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(read_stderr(
                err,
                tails.stderr.clone(),
                not_found_tx,
            )));
        }
        if let Some(out) = child.stdout.take() {
            let sink = tails.stdout.clone();
            readers.push(tokio::spawn(read_stdout(
                out,
                sink,
                stream_json.then_some(tx),
            )));
        }
        Ok(Agy {
            input,
            child,
            pid,
            tails,
            lines,
            lines_open: stream_json,
            not_found,
            not_found_open: true,
            readers,
        })
    }
}

/// Whether `bin` can be run: a path that exists, or a name found on PATH.
pub(super) fn is_installed(bin: &Path) -> bool {
    crate::process::tree::find_program(bin).is_some()
}

/// agy's stderr: its tail, kept for the end of the turn, and the lines that
/// matter while it runs ([`agy_format::stderr`]), sent on at once.
async fn read_stderr(
    mut err: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<u8>>>,
    not_found: mpsc::Sender<String>,
) {
    let mut buf = [0u8; 4096];
    // The line being read: only its start matters, so it is capped.
    let mut line: Vec<u8> = Vec::new();
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line);
                if let Some(id) = agy_format::stderr::conversation_not_found(&text) {
                    // Full: the warning is waiting already; stderr is
                    // never held up for it.
                    let _ = not_found.try_send(id.to_string());
                }
                line.clear();
            } else if line.len() < 512 {
                line.push(b);
            }
        }
        if let Ok(mut t) = tail.lock() {
            t.extend(&buf[..n]);
            while t.len() > STDERR_TAIL {
                t.pop_front();
            }
        }
    }
}

/// agy's stdout: with stream-json, each line parsed and sent on (only lines
/// that are not JSON are kept as text); otherwise the text, capped. Once
/// agy has streamed its answer as `text_delta`s (which the runner keeps), a
/// `result` line's copy of it is blanked before it is parsed, so a long
/// answer is never held twice; the runner puts it back from the deltas.
async fn read_stdout(
    out: tokio::process::ChildStdout,
    sink: Arc<Mutex<Vec<u8>>>,
    lines: Option<mpsc::Sender<Line>>,
) {
    let mut reader = BufReader::new(out);
    let mut buf = Vec::new();
    let mut saw_text = false;
    loop {
        // One huge line (a long answer's `result`) must not keep its buffer.
        if buf.capacity() > 1 << 20 {
            buf = Vec::new();
        }
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if lines.is_some() && saw_text {
            agy_format::stream_json::blank_response(&mut buf);
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(tx) = &lines {
            let line = Line::parse(text);
            saw_text |= matches!(&line, Line::StepUpdate(u) if u.text_delta.as_deref().is_some_and(|d| !d.is_empty()));
            // A warm agy's next turn starts with nothing streamed.
            saw_text &= !matches!(line, Line::Result(_));
            let keep = matches!(line, Line::NotJson(_));
            // Waits while the runner waits for its consumer: the pipe then
            // fills and agy waits too (see LINE_CAPACITY).
            let _ = tx.send(line).await;
            if !keep {
                continue;
            }
        }
        if let Ok(mut s) = sink.lock() {
            if s.len() < STDOUT_CAP {
                s.extend_from_slice(text.as_bytes());
                s.push(b'\n');
            }
        }
    }
}

/// SIGTERM the tree, wait up to `grace`, then SIGKILL, and reap. Every
/// signal goes out before the reap, while the pid and group are its own.
pub(super) async fn terminate(child: &mut Spawned, grace: Duration) {
    use nix::sys::signal::Signal;
    child.signal_tree(Signal::SIGTERM).await;
    if tokio::time::timeout(grace, child.exited()).await.is_err() {
        child.signal_tree(Signal::SIGKILL).await;
    } else {
        // What is left of its group is not wanted either.
        child.signal_group(Signal::SIGKILL);
    }
    let _ = child.wait().await;
}
