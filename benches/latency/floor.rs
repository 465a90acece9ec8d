//! The floor: the least a follower can do to see each of agy's commits, as
//! the reference the bridge's latency is measured against (issue: "the
//! floor in the benches"). inotify on the conversations directory; after a
//! write to a database's WAL, `PRAGMA data_version` in a busy spin until the
//! commit is visible; then one SELECT of the followed step. No decoding
//! beyond the answer's length, no events, no second thread, no process of
//! its own: nothing a real follower could skip.

use agy_format::steps::{self, Body, StepRow};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use rusqlite::{Connection, OpenFlags};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// How long one spin waits for a commit to become visible before it gives
/// up (a WAL write that was not a commit's last).
const SPIN_BOUND: Duration = Duration::from_millis(20);

/// What the floor saw: (arrival in unix ns, answer length) each time the
/// followed step's text grew.
pub struct Seen {
    pub arrivals: Vec<(u128, usize)>,
}

/// Follow the one database `agy` creates in `dir` until `agy` exits,
/// reading step `idx`'s answer length after each visible commit.
pub fn follow(dir: &Path, agy: &mut Child, idx: i64, now_ns: fn() -> u128) -> Seen {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).expect("inotify");
    inotify
        .add_watch(dir, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MODIFY)
        .expect("watch");
    let mut reader = Reader::default();
    let mut seen = Seen {
        arrivals: Vec::new(),
    };
    loop {
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(20u16)).unwrap_or(0);
        let mut wal_written = false;
        if ready > 0 {
            while let Ok(events) = inotify.read_events() {
                if events.is_empty() {
                    break;
                }
                for ev in events {
                    let Some(name) = ev.name.as_ref().and_then(|n| n.to_str()) else {
                        continue;
                    };
                    if let Some(stem) = name.strip_suffix(".db-wal") {
                        reader
                            .path
                            .get_or_insert_with(|| dir.join(format!("{stem}.db")));
                        wal_written = true;
                    }
                }
            }
        }
        if wal_written {
            if let Some(len) = reader.spin_then_read(idx) {
                if seen.arrivals.last().map(|(_, l)| *l) != Some(len) {
                    seen.arrivals.push((now_ns(), len));
                }
            }
        }
        if matches!(agy.try_wait(), Ok(Some(_))) {
            return seen;
        }
    }
}

#[derive(Default)]
struct Reader {
    path: Option<PathBuf>,
    conn: Option<Connection>,
    version: Option<i64>,
}

impl Reader {
    /// Spin on `data_version` until it moves (or [`SPIN_BOUND`]), then read
    /// step `idx`'s answer length.
    fn spin_then_read(&mut self, idx: i64) -> Option<usize> {
        if self.conn.is_none() {
            let path = self.path.as_ref()?;
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .ok()?;
            self.conn = Some(conn);
        }
        let conn = self.conn.as_ref()?;
        let start = Instant::now();
        loop {
            let v: i64 = conn
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .ok()?;
            if self.version != Some(v) {
                self.version = Some(v);
                break;
            }
            if start.elapsed() > SPIN_BOUND {
                return None;
            }
            std::hint::spin_loop();
        }
        let payload: Vec<u8> = conn
            .query_row(
                "SELECT step_payload FROM steps WHERE idx = ?1",
                [idx],
                |r| r.get(0),
            )
            .ok()?;
        let row = StepRow {
            idx,
            step_type: 15,
            status: 0,
            payload: Some(payload),
            metadata: None,
            error_details: None,
            permissions: None,
            task_details: None,
        };
        match steps::decode(&row).body {
            Some(Body::Planner(p)) => Some(p.text.len()),
            _ => None,
        }
    }
}
