//! The subagent writer processes: each subagent conversation's database
//! is owned by a child fake-agy that applies one commit at a time when the
//! scheduler says so and acknowledges it, so commits land in exactly the
//! recorded order across databases, as agy's separate writers would.

use super::database::{create_db, idx_list, step_writes};
use super::{now_ns, Fatal, CONFIG_EXIT};
use crate::cli;
use agy_corpus::recording::{apply_commit, ApplyOptions, Recording};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A child fake-agy process that owns one subagent database.
pub(super) struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    db_id: String,
}

impl Writer {
    pub(super) fn spawn(
        recording: &Path,
        db_path: &Path,
        db_id: &str,
        id_map: &[(String, String)],
    ) -> Result<Writer, Fatal> {
        let exe = std::env::current_exe()
            .map_err(|e| Fatal::internal(format!("cannot find my own executable: {e}")))?;
        let map = serde_json::to_string(id_map).unwrap_or_else(|_| "[]".into());
        let mut child = Command::new(exe)
            .arg(cli::SUBAGENT_WRITER)
            .arg(recording)
            .arg(db_path)
            .arg(map)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Fatal::internal(format!("cannot start the subagent writer: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(BufReader::new)
            .ok_or_else(|| Fatal::internal("subagent writer has no stdout"))?;
        Ok(Writer {
            child,
            stdin,
            stdout,
            db_id: db_id.to_string(),
        })
    }

    /// Have the child apply commit `index`; returns its commit time and the
    /// step idx it wrote.
    pub(super) fn apply(&mut self, index: usize) -> Result<(u128, Vec<i64>), Fatal> {
        let lost =
            |what: String| Fatal::internal(format!("subagent writer for {}: {what}", self.db_id));
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| lost("already closed".into()))?;
        writeln!(stdin, "{index}")
            .and_then(|_| stdin.flush())
            .map_err(|e| lost(format!("cannot send commit {index}: {e}")))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| lost(format!("cannot read its answer: {e}")))?;
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("ok") => {
                let ns = parts
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(now_ns);
                let idx = parts
                    .next()
                    .filter(|s| *s != "-")
                    .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
                    .unwrap_or_default();
                Ok((ns, idx))
            }
            Some("err") => Err(lost(line.trim_start_matches("err").trim().to_string())),
            _ => Err(lost(format!("exited or answered {line:?}"))),
        }
    }

    /// Close its command pipe: it has no more commits and exits.
    pub(super) fn close(&mut self) {
        self.stdin.take();
    }

    pub(super) fn wait(&mut self) {
        self.close();
        let _ = self.child.wait();
    }
}

/// The internal entry point of a subagent writer process: args are the
/// recording path, the database path and the id map (JSON pairs). It reads
/// commit indices from the pipe its parent holds (never the user's stdin)
/// and answers `ok <unix-ns> <idx,...|->` after each commit.
pub fn run_subagent_writer(args: &[String]) -> Result<i32, Fatal> {
    let [rec_path, db_path, map] = args else {
        return Err(Fatal::new(
            CONFIG_EXIT,
            "internal subagent writer: bad arguments",
        ));
    };
    let rec = Recording::load(Path::new(rec_path)).map_err(|e| Fatal::internal(e.to_string()))?;
    let id_map: Vec<(String, String)> =
        serde_json::from_str(map).map_err(|e| Fatal::internal(format!("bad id map: {e}")))?;
    let opts = ApplyOptions {
        id_map,
        ..ApplyOptions::default()
    };
    let db_path = Path::new(db_path);
    let conn = create_db(db_path)?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Fatal::internal(e.to_string()))?;
        let reply = match line.trim().parse::<usize>() {
            Ok(i) if i < rec.commits.len() => {
                match apply_commit(&conn, i, &rec.commits[i], &opts) {
                    Ok(()) => {
                        let ns = now_ns();
                        let idx: Vec<i64> = step_writes(&rec.commits[i], 0)
                            .into_iter()
                            .map(|w| w.0)
                            .collect();
                        format!("ok {ns} {}", idx_list(&idx))
                    }
                    Err(e) => format!("err {e}"),
                }
            }
            _ => format!("err no commit {line:?}"),
        };
        let failed = reply.starts_with("err");
        writeln!(out, "{reply}")
            .and_then(|_| out.flush())
            .map_err(|e| Fatal::internal(e.to_string()))?;
        if failed {
            return Ok(1);
        }
    }
    drop(conn);
    Ok(0)
}
