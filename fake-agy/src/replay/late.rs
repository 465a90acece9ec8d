//! `FAKE_AGY_LATE_COMMIT_MS`: work that outlives agy. At its exit fake-agy
//! leaves a process in a process group of its own (so ending agy's group
//! does not end it) that holds the conversation database's write lock,
//! and after the delay commits one more step, a copy of the last one with
//! the next idx. A follower that stops reading when agy exits misses that
//! step; one that reads while a writer holds the lock does not.

use super::Fatal;
use crate::cli;
use rusqlite::Connection;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Start the late writer on `db` and return once it holds the write lock
/// (so agy's exit comes after it), or with why it could not.
pub(super) fn leave(db: &Path, delay: Duration) -> Result<(), Fatal> {
    let exe = std::env::current_exe()
        .map_err(|e| Fatal::internal(format!("cannot find my own executable: {e}")))?;
    let mut child = Command::new(exe)
        .arg(cli::LATE_WRITER)
        .arg(db)
        .arg(delay.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Fatal::internal(format!("cannot start the late writer: {e}")))?;
    let Some(out) = child.stdout.take() else {
        return Err(Fatal::internal("the late writer has no stdout"));
    };
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| Fatal::internal(format!("the late writer: {e}")))?;
    if line.trim() == "held" {
        Ok(())
    } else {
        Err(Fatal::internal(format!(
            "the late writer could not take the write lock: {line:?}"
        )))
    }
}

/// The late writer's own process: args are the database and the delay.
pub fn run_late_writer(args: &[String]) -> Result<i32, Fatal> {
    let [db, delay] = args else {
        return Err(Fatal::internal("internal late writer: bad arguments"));
    };
    let delay = delay
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|e| Fatal::internal(format!("internal late writer: delay: {e}")))?;
    let sql = |e: rusqlite::Error| Fatal::internal(format!("late writer: {e}"));
    let conn = Connection::open(db).map_err(sql)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
    // fake-agy exits once it has read this line; nothing more is written.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "held").and_then(|()| out.flush());
    std::thread::sleep(delay);
    conn.execute_batch(
        "CREATE TEMP TABLE late AS SELECT * FROM steps WHERE idx = (SELECT max(idx) FROM steps);
         UPDATE late SET idx = idx + 1;
         INSERT INTO steps SELECT * FROM late;
         COMMIT",
    )
    .map_err(sql)?;
    Ok(0)
}
