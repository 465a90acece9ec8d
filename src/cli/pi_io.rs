//! pi's side of the pipe, shared by one-turn `stream` and `--session`:
//! stdout written by a thread of its own (pi's pace is the turn's), and the
//! lines pi sends during a turn (an abort, pi's tool results as control
//! lines).

use agy_bridge::pi::mcp::relay::Control;
use std::io::{self, Write};

/// Queue a control line for the relay without waiting: this thread must go
/// on reading stdin (an abort may follow), so a line beyond
/// [`agy_bridge::pi::mcp::relay::CONTROL_CAPACITY`] is dropped, and said.
pub(super) fn keep_control(control: &tokio::sync::mpsc::Sender<Control>, line: Control) {
    use tokio::sync::mpsc::error::TrySendError;
    if let Err(TrySendError::Full(_)) = control.try_send(line) {
        eprintln!(
            "agy-bridge: warning: a control line was dropped: more came than the turn has tool calls"
        );
    }
}

/// Whether a stdin line is pi's `{"type":"abort"}`.
pub(super) fn is_abort_line(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(|t| t == "abort"))
        .unwrap_or(false)
}

/// Flushed chunks (one pi event each, mostly) waiting for the stdout
/// thread. When pi reads slowly they fill and the next flush waits (on the
/// thread driving `stream`, or in the relay's `block_in_place`, never on a
/// runtime worker), the relay stops taking the runner's events, and the
/// runner stops reading agy's database: pi's pace is the turn's, and the
/// bridge holds no more than these few chunks of it.
const STDOUT_QUEUE: usize = 8;

/// stdout written by a thread of its own: each flushed line is handed over
/// (at most [`STDOUT_QUEUE`] waiting) and written there, so a reader that is
/// slow never blocks the runtime and one that is gone is noticed. A write
/// error there makes the next write here fail, which is how `PiStream`
/// learns that pi went away. Dropping it waits for everything handed over
/// to be written.
pub(super) struct StdoutThread {
    buf: Vec<u8>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    broken: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StdoutThread {
    pub(super) fn spawn() -> StdoutThread {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(STDOUT_QUEUE);
        let broken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = broken.clone();
        let thread = std::thread::spawn(move || {
            let mut out = io::stdout().lock();
            for chunk in rx {
                if out.write_all(&chunk).and_then(|_| out.flush()).is_err() {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            }
        });
        StdoutThread {
            buf: Vec::new(),
            tx: Some(tx),
            broken,
            thread: Some(thread),
        }
    }

    fn check(&self) -> io::Result<()> {
        if self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdout closed"));
        }
        Ok(())
    }
}

impl Write for StdoutThread {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.buf);
        match &self.tx {
            Some(tx) if tx.send(chunk).is_ok() => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdout closed")),
        }
    }
}

impl Drop for StdoutThread {
    fn drop(&mut self) {
        let _ = self.flush();
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
