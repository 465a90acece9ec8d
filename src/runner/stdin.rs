//! What agy reads on its stdin: the turn's prompt as a stream-json user
//! line ([`agy_format::stream_input`]), never in its argv.
//!
//! [`AgyInput`] is the runner's one handle for it, whichever way agy was
//! started: under a guardian, the bytes travel as input frames on the
//! guardian's lifeline ([`crate::process::launch::Frame`]) and the guardian
//! writes them to agy; without one, straight into agy's stdin pipe. A task
//! of its own does the writing, in order, so the runner never waits on a
//! pipe agy is slow to read (a prompt of megabytes, an agy that is busy):
//! [`AgyInput::send_line`] and [`AgyInput::close`] only queue. Several turns
//! can be sent over time, which a long-lived agy will need.

use crate::process::launch::Frame;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

/// The writer task is gone: agy (or its guardian) stopped reading, or the
/// input was never a pipe. Not an error for a turn: agy's exit says more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("agy's input is closed")]
pub(crate) struct InputClosed;

#[derive(Debug)]
enum Msg {
    Bytes(Vec<u8>),
    Close,
}

/// Where the bytes go.
#[derive(Debug)]
enum Pipe {
    /// The guardian's lifeline: bytes go as frames; closing agy's input is
    /// a frame too, and the lifeline itself stays open (its end kills agy's
    /// tree) until the handle is dropped.
    Guardian(ChildStdin),
    /// agy's own stdin: closing it is dropping it.
    Direct(Option<ChildStdin>),
}

/// The runner's handle on agy's stdin. Dropping it stops the writer at
/// once (pending bytes are lost) and, under a guardian, closes the
/// lifeline, which takes agy's tree down.
#[derive(Debug)]
pub(crate) struct AgyInput {
    tx: Option<mpsc::UnboundedSender<Msg>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl AgyInput {
    /// Input through a guardian's lifeline. Needs a tokio runtime context.
    pub(crate) fn through_guardian(lifeline: ChildStdin) -> AgyInput {
        AgyInput::start(Pipe::Guardian(lifeline))
    }

    /// Input straight into agy's stdin (`None`: agy reads `/dev/null`).
    /// Needs a tokio runtime context.
    pub(crate) fn direct(stdin: Option<ChildStdin>) -> AgyInput {
        match stdin {
            Some(stdin) => AgyInput::start(Pipe::Direct(Some(stdin))),
            None => AgyInput {
                tx: None,
                task: None,
            },
        }
    }

    fn start(pipe: Pipe) -> AgyInput {
        let (tx, rx) = mpsc::unbounded_channel();
        AgyInput {
            tx: Some(tx),
            task: Some(tokio::spawn(write_in_order(pipe, rx))),
        }
    }

    /// Queue `line` (newline-terminated) for agy's stdin.
    pub(crate) fn send_line(&self, line: &str) -> Result<(), InputClosed> {
        self.queue(Msg::Bytes(line.as_bytes().to_vec()))
    }

    /// Close agy's stdin once what was queued before is written: agy ends
    /// at the end of its input.
    pub(crate) fn close(&self) -> Result<(), InputClosed> {
        self.queue(Msg::Close)
    }

    fn queue(&self, msg: Msg) -> Result<(), InputClosed> {
        let tx = self.tx.as_ref().ok_or(InputClosed)?;
        tx.send(msg).map_err(|_| InputClosed)
    }
}

impl Drop for AgyInput {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The writer task: each message in order, until the handle goes or a
/// write fails (the reader is gone: what is left would never be read).
async fn write_in_order(mut pipe: Pipe, mut rx: mpsc::UnboundedReceiver<Msg>) {
    while let Some(msg) = rx.recv().await {
        let written = match (&mut pipe, msg) {
            (Pipe::Guardian(lifeline), Msg::Bytes(bytes)) => {
                lifeline.write_all(&Frame::encode_input(&bytes)).await
            }
            (Pipe::Guardian(lifeline), Msg::Close) => {
                lifeline.write_all(&Frame::encode_close()).await
            }
            (Pipe::Direct(Some(stdin)), Msg::Bytes(bytes)) => stdin.write_all(&bytes).await,
            (Pipe::Direct(stdin), Msg::Close) => {
                stdin.take();
                Ok(())
            }
            (Pipe::Direct(None), Msg::Bytes(_)) => Ok(()),
        };
        // A failed write on the lifeline means the guardian is gone, so
        // closing the lifeline early changes nothing.
        if written.is_err() {
            break;
        }
    }
}
