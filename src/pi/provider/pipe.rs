//! pi's stdout, written from the one thread of `stream`'s runtime without
//! ever making that thread wait for pi to read.
//!
//! `stream` runs its turn on a current-thread runtime: a commit's events go
//! from the follower thread to that thread and out to pi, with no other
//! thread to wake on the way. A blocking write to a pipe pi is not reading
//! would then hold every task of the turn, its abort and its watchdog
//! among them, and a stalled pi must never keep agy running. So a line
//! goes out only as far as pi's pipe takes it now, without waiting; the
//! rest waits here, and the relay awaits `Room::wait` before the next
//! event, so pi's pace is still the turn's, with the turn's other tasks
//! running meanwhile. What waits here is at most one event's lines, and at
//! most `MAX_PENDING` of them: a bigger event (a long text block's end,
//! which carries the whole block) is written through, waiting, past that,
//! so memory stays bounded whatever pi does.
//!
//! A write that does not wait, on a descriptor pi shares: a socket (pi's
//! node makes its children's stdio of socket pairs) takes `MSG_DONTWAIT`
//! per call; a pipe is opened anew through `/proc/self/fd` with
//! `O_NONBLOCK` on that open file alone (setting it on stdout's would
//! change it for every holder of that file). Failing that, a write goes a
//! page at a time, each after a `poll` says there is room (a pipe with any
//! room takes a page whole). Anything else (a terminal, a file) is written
//! straight through: there is nothing to wait for there.

use crate::process::reactor::{watch, Watched};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

/// The most a pipe with any room takes whole: one page.
const STEP: usize = 4096;

/// How a write to pi's pipe is kept from waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// A socket: `send` with `MSG_DONTWAIT`.
    Socket,
    /// A pipe opened anew with `O_NONBLOCK`.
    NonBlocking,
    /// A page at a time, after `poll` says there is room.
    Stepped,
}

/// The most of one event's lines kept waiting for room; past it, they are
/// written blocking.
pub(crate) const MAX_PENDING: usize = 1 << 20;

/// A sink for [`super::stream::PiStream`]: stdout, or a pipe written
/// only as far as it has room.
pub struct PipeOut {
    shared: Option<Arc<Mutex<Pending>>>,
    direct: io::Stdout,
}

/// Awaited before each event: returns when every line before it has gone
/// into the pipe (or the pipe failed, which the next write says).
pub struct Room {
    shared: Arc<Mutex<Pending>>,
    /// The descriptor registered with the runtime's reactor.
    watched: Watched<OwnedFd>,
}

/// Lines not yet in the pipe.
struct Pending {
    fd: OwnedFd,
    how: How,
    bytes: Vec<u8>,
    /// How much of `bytes` is in the pipe already.
    sent: usize,
    /// The pipe failed (pi is gone): every write from now on fails.
    failed: Option<io::ErrorKind>,
}

impl PipeOut {
    /// pi's stdout, with its [`Room`] when it is a pipe or a socket and a
    /// runtime is current.
    ///
    /// # Panics
    ///
    /// When the current runtime was built without I/O (tokio's own
    /// contract; every runtime of this crate's binary enables it).
    pub fn stdout() -> (PipeOut, Option<Room>) {
        let direct = io::stdout();
        let Some((pending, watched)) = watchable(direct.as_fd()) else {
            return (
                PipeOut {
                    shared: None,
                    direct,
                },
                None,
            );
        };
        let (out, room) = piped(pending, watched, direct);
        (out, Some(room))
    }
}

/// The writer and its room, sharing `pending`.
fn piped(pending: Pending, watched: Watched<OwnedFd>, direct: io::Stdout) -> (PipeOut, Room) {
    let shared = Arc::new(Mutex::new(pending));
    let room = Room {
        shared: shared.clone(),
        watched,
    };
    let out = PipeOut {
        shared: Some(shared),
        direct,
    };
    (out, room)
}

/// A descriptor of pi's pipe to write without waiting, and one for the
/// reactor, when `fd` is a pipe or socket and a runtime is current.
fn watchable(fd: BorrowedFd<'_>) -> Option<(Pending, Watched<OwnedFd>)> {
    let (write_fd, how) = match pipe_kind(fd)? {
        PipeKind::Socket => (fd.try_clone_to_owned().ok()?, How::Socket),
        PipeKind::Fifo => match reopen_nonblocking(fd) {
            Some(own) => (own, How::NonBlocking),
            None => (fd.try_clone_to_owned().ok()?, How::Stepped),
        },
    };
    tokio::runtime::Handle::try_current().ok()?;
    let copy = fd.try_clone_to_owned().ok()?;
    let watched = watch(copy, tokio::io::Interest::WRITABLE).ok()?;
    let pending = Pending {
        fd: write_fd,
        how,
        bytes: Vec::new(),
        sent: 0,
        failed: None,
    };
    Some((pending, watched))
}

pub(crate) use crate::process::caller::{pipe_kind, PipeKind};

/// The pipe `fd` opened again, write-only and non-blocking: a file of its
/// own, so the flag is not stdout's.
fn reopen_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    use nix::fcntl::{open, OFlag};
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    open(path.as_str(), flags, nix::sys::stat::Mode::empty()).ok()
}

impl Write for PipeOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(shared) = &self.shared else {
            return self.direct.write(buf);
        };
        let mut p = lock(shared);
        p.check()?;
        let mut taken = 0;
        if p.sent == p.bytes.len() {
            // Nothing waiting: straight from `buf`; only what the pipe does
            // not take now is copied to wait.
            while taken < buf.len() {
                let went = write_now(p.fd.as_fd(), p.how, &buf[taken..]);
                match p.took(went)? {
                    0 => break,
                    n => taken += n,
                }
            }
            p.bytes.extend_from_slice(&buf[taken..]);
        } else {
            p.bytes.extend_from_slice(buf);
            p.send_what_fits()?;
        }
        if p.bytes.len() - p.sent > MAX_PENDING {
            p.send_all()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &self.shared {
            None => self.direct.flush(),
            Some(shared) => lock(shared).send_what_fits(),
        }
    }
}

impl Drop for PipeOut {
    /// What is left goes now, waiting for pi if it must: the turn is over
    /// (its last line is the terminal event pi waits for), and `stream`
    /// exits next.
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let _ = lock(shared).send_all();
        }
    }
}

impl Room {
    /// Return once every line written so far is in the pipe, or the pipe
    /// failed (the next write says so).
    pub(crate) async fn wait(&self) {
        loop {
            {
                let mut p = lock(&self.shared);
                if p.send_what_fits().is_err() || p.sent == p.bytes.len() {
                    return;
                }
            }
            // The reactor's readiness may be stale (the pipe filled since it
            // was set); cleared, the next await ends only when pi frees
            // room. A wake-up in between keeps it set, and the look above
            // decides again.
            match self.watched.writable().await {
                Ok(mut ready) => ready.clear_ready(),
                Err(_) => return,
            }
        }
    }
}

/// The pending lines, whatever a panicking holder left: they are bytes.
fn lock(shared: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Pending {
    fn check(&self) -> io::Result<()> {
        match self.failed {
            Some(kind) => Err(io::Error::new(kind, "pi's stdout failed earlier")),
            None => Ok(()),
        }
    }

    /// Send as much as the pipe takes now without waiting.
    fn send_what_fits(&mut self) -> io::Result<()> {
        self.check()?;
        while self.sent < self.bytes.len() {
            if !self.send_once()? {
                break;
            }
        }
        self.compact();
        Ok(())
    }

    /// Send everything, waiting for pi as long as it takes.
    fn send_all(&mut self) -> io::Result<()> {
        self.check()?;
        while self.sent < self.bytes.len() {
            if !self.send_once()? {
                wait_writable(self.fd.as_fd());
            }
        }
        self.compact();
        Ok(())
    }

    /// One write that does not wait: `false` when the pipe had no room.
    fn send_once(&mut self) -> io::Result<bool> {
        let went = write_now(self.fd.as_fd(), self.how, &self.bytes[self.sent..]);
        let n = self.took(went)?;
        self.sent += n;
        Ok(n > 0)
    }

    /// How much a [`write_now`] took; its failure is the pipe's from now on.
    fn took(&mut self, went: Result<usize, io::ErrorKind>) -> io::Result<usize> {
        match went {
            Ok(n) => Ok(n),
            Err(kind) => self.fail(kind).map(|_| 0),
        }
    }

    fn fail(&mut self, kind: io::ErrorKind) -> io::Result<()> {
        self.failed = Some(kind);
        self.check()
    }

    /// Drop what is in the pipe once it is at least half of what is held,
    /// so a long event that pi reads about as fast as it comes never piles
    /// up its sent part (each byte moves at most once, on average).
    fn compact(&mut self) {
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
        } else if self.sent >= self.bytes.len() - self.sent {
            self.bytes.drain(..self.sent);
            self.sent = 0;
        }
    }
}

/// One write of the start of `data` to `fd` that does not wait: how much
/// went (0: no room now), or why the pipe failed.
fn write_now(fd: BorrowedFd<'_>, how: How, data: &[u8]) -> Result<usize, io::ErrorKind> {
    use nix::errno::Errno;
    use std::os::fd::AsRawFd;
    loop {
        let written = match how {
            How::Socket => nix::sys::socket::send(fd.as_raw_fd(), data, send_flags()),
            How::NonBlocking => nix::unistd::write(fd, data),
            How::Stepped if writable_now(fd) => {
                nix::unistd::write(fd, &data[..data.len().min(STEP)])
            }
            How::Stepped => return Ok(0),
        };
        return match written {
            Ok(0) if !data.is_empty() => Err(io::ErrorKind::WriteZero),
            Ok(n) => Ok(n),
            Err(Errno::EAGAIN) => Ok(0),
            Err(Errno::EINTR) => continue,
            Err(e) => Err(io::Error::from(e).kind()),
        };
    }
}

/// A send that does not wait, and (where there is the flag) raises no
/// `SIGPIPE` when pi is gone: the error says it.
fn send_flags() -> nix::sys::socket::MsgFlags {
    use nix::sys::socket::MsgFlags;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    return MsgFlags::MSG_DONTWAIT;
}

/// Whether a write to `fd` would go through now (or fail at once: pi is
/// gone, which the write then says): `poll` with no wait.
fn writable_now(fd: BorrowedFd<'_>) -> bool {
    poll_out(fd, nix::poll::PollTimeout::ZERO)
}

/// Wait, blocking, until `fd` has room (or fails).
fn wait_writable(fd: BorrowedFd<'_>) {
    poll_out(fd, nix::poll::PollTimeout::NONE);
}

fn poll_out(fd: BorrowedFd<'_>, wait: nix::poll::PollTimeout) -> bool {
    use nix::poll::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
    match poll(&mut fds, wait) {
        Ok(_) => fds[0].revents().is_none_or(|r| !r.is_empty()),
        // Nothing to wait for that could be known: let the write say.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// pi's end and a `PipeOut` with its `Room` on ours: a pipe opened
    /// anew non-blocking, a socket pair, or a pipe written a page at a time.
    fn pipe_out(how: How) -> (Box<dyn Read + Send>, PipeOut, Room) {
        let (reader, ours): (Box<dyn Read + Send>, OwnedFd) = match how {
            How::Socket => {
                let (a, b) = std::os::unix::net::UnixStream::pair().expect("socket pair");
                (Box::new(a), OwnedFd::from(b))
            }
            How::NonBlocking | How::Stepped => {
                let (r, w) = nix::unistd::pipe().expect("pipe");
                (Box::new(std::fs::File::from(r)), w)
            }
        };
        let (mut pending, watched) = watchable(ours.as_fd()).expect("watchable");
        if how == How::Stepped {
            pending.fd = ours.try_clone().expect("dup");
        }
        pending.how = how;
        let (out, room) = piped(pending, watched, io::stdout());
        (reader, out, room)
    }

    const EVERY_WAY: [How; 3] = [How::NonBlocking, How::Socket, How::Stepped];

    #[test]
    fn a_pipe_is_opened_anew_non_blocking_and_a_socket_is_sent_to() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let how =
            |fd: BorrowedFd<'_>| runtime.block_on(async { watchable(fd).map(|(p, _)| p.how) });
        let (_a, b) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        assert_eq!(how(b.as_fd()), Some(How::Socket));
        let file = tempfile::tempfile().expect("file");
        assert_eq!(
            how(file.as_fd()),
            None,
            "a file is written straight through"
        );
        let (_r, w) = nix::unistd::pipe().expect("pipe");
        assert_eq!(how(w.as_fd()), Some(How::NonBlocking));
        let flags = nix::fcntl::fcntl(w.as_fd(), nix::fcntl::FcntlArg::F_GETFL).expect("flags");
        let flags = nix::fcntl::OFlag::from_bits_truncate(flags);
        assert!(
            !flags.contains(nix::fcntl::OFlag::O_NONBLOCK),
            "the shared file keeps blocking writes"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_pipe_keeps_the_rest_and_the_runtime_goes_on() {
        for how in EVERY_WAY {
            let (mut reader, mut out, room) = pipe_out(how);
            // More than a pipe or a socket pair holds (64 KiB, about 200
            // KiB), less than is ever kept: written at once, without
            // waiting for a reader that has read nothing.
            let line: Vec<u8> = (0..MAX_PENDING / 2 + 7).map(|i| (i % 253) as u8).collect();
            out.write_all(&line).expect("write");
            out.flush().expect("flush");
            {
                let p = lock(out.shared.as_ref().expect("piped"));
                assert!(
                    p.sent < p.bytes.len(),
                    "{how:?}: the pipe is full, the rest kept"
                );
            }
            // Another task runs while the room is awaited: it is the reader.
            let reading = tokio::task::spawn_blocking(move || {
                let mut got = Vec::new();
                reader.read_to_end(&mut got).map(|_| got)
            });
            tokio::time::timeout(std::time::Duration::from_secs(30), room.wait())
                .await
                .expect("room once the reader reads");
            drop((out, room));
            let got = reading.await.expect("join").expect("read");
            assert!(got == line, "{how:?}: every byte, in order");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn past_the_bound_it_writes_through() {
        for how in EVERY_WAY {
            let (mut reader, mut out, room) = pipe_out(how);
            let reading = std::thread::spawn(move || {
                let mut got = Vec::new();
                reader.read_to_end(&mut got).map(|_| got)
            });
            let big: Vec<u8> = (0..MAX_PENDING * 3).map(|i| (i % 251) as u8).collect();
            out.write_all(&big).expect("write");
            {
                let p = lock(out.shared.as_ref().expect("piped"));
                assert!(p.bytes.len() - p.sent <= MAX_PENDING, "{how:?}: bounded");
                assert!(
                    p.sent <= p.bytes.len() - p.sent,
                    "{how:?}: the sent part let go"
                );
            }
            drop((out, room));
            let got = reading.join().expect("join").expect("read");
            assert!(got == big, "{how:?}: every byte, in order");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reader_gone_fails_the_writes() {
        for how in EVERY_WAY {
            let (reader, mut out, room) = pipe_out(how);
            drop(reader);
            let first = out.write_all(b"line\n").and_then(|_| out.flush());
            room.wait().await;
            let second = out.write_all(b"line\n");
            assert!(
                first.is_err() || second.is_err(),
                "{how:?}: pi gone is an error"
            );
            assert!(second.is_err(), "{how:?}: and stays one");
        }
    }
}
